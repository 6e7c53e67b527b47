//! Read-ahead block reading: an I/O thread fills large aligned buffers with
//! `pread` (through the page cache) or `O_DIRECT` (around it) while the
//! workers count the buffers already delivered.

use crate::{Error, Result};
use std::alloc::{alloc_zeroed, dealloc, Layout};
use std::fs::File;
use std::path::PathBuf;
use std::sync::mpsc::{sync_channel, Receiver, SyncSender};
use std::sync::Mutex;

/// Alignment of read buffers: a page, as `O_DIRECT` requires.
pub const ALIGN: usize = 4096;

/// How column bytes get from the file into memory.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReadPath {
    /// Per query: `Inline` when the columns are already in the page cache,
    /// `Pread` when they are not (measured best of each; see docs/IO.md).
    Auto,
    /// Map the file; the kernel pages it in (with read-ahead advice).
    Mmap,
    /// `pread` large blocks into our own buffers, through the page cache.
    Pread,
    /// `pread` with `O_DIRECT`: no page cache, no kernel read-ahead, no copy.
    Direct,
    /// Each worker `pread`s its own morsel of every column into small
    /// buffers that stay in its cache ([`RowReader`]): no read-ahead
    /// thread, no hand-off, no page faults. The fastest warm path.
    Inline,
}

impl ReadPath {
    /// Lower-case name.
    pub fn name(self) -> &'static str {
        match self {
            ReadPath::Auto => "auto",
            ReadPath::Mmap => "mmap",
            ReadPath::Pread => "pread",
            ReadPath::Direct => "direct",
            ReadPath::Inline => "inline",
        }
    }

    /// Parses a name from [`name`](Self::name).
    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "auto" => Some(ReadPath::Auto),
            "mmap" => Some(ReadPath::Mmap),
            "pread" => Some(ReadPath::Pread),
            "direct" | "o_direct" => Some(ReadPath::Direct),
            "inline" => Some(ReadPath::Inline),
            _ => None,
        }
    }
}

/// A heap buffer aligned to [`ALIGN`] (so typed views and `O_DIRECT` work).
pub struct AlignedBuf {
    ptr: *mut u8,
    cap: usize,
    len: usize,
}

// SAFETY: the buffer owns its allocation exclusively.
unsafe impl Send for AlignedBuf {}
unsafe impl Sync for AlignedBuf {}

impl AlignedBuf {
    /// A zeroed buffer of `cap` bytes (rounded up to [`ALIGN`]).
    pub fn new(cap: usize) -> Self {
        let cap = cap.max(ALIGN).div_ceil(ALIGN) * ALIGN;
        let layout = Layout::from_size_align(cap, ALIGN).expect("valid layout");
        // SAFETY: non-zero size, valid alignment.
        let ptr = unsafe { alloc_zeroed(layout) };
        assert!(!ptr.is_null(), "out of memory allocating {cap} bytes");
        AlignedBuf { ptr, cap, len: 0 }
    }

    /// Capacity in bytes.
    pub fn capacity(&self) -> usize {
        self.cap
    }

    /// The filled bytes.
    pub fn bytes(&self) -> &[u8] {
        // SAFETY: ptr is valid for cap >= len bytes.
        unsafe { std::slice::from_raw_parts(self.ptr, self.len) }
    }

    fn spare(&mut self) -> &mut [u8] {
        // SAFETY: ptr is valid for cap bytes and exclusively borrowed.
        unsafe { std::slice::from_raw_parts_mut(self.ptr, self.cap) }
    }
}

impl Drop for AlignedBuf {
    fn drop(&mut self) {
        // SAFETY: allocated in `new` with this layout.
        unsafe { dealloc(self.ptr, Layout::from_size_align(self.cap, ALIGN).unwrap()) }
    }
}

/// One column to stream: starting at `offset`, every `width` bytes hold
/// `unit_rows` rows (1 for a plain array of `width`-byte values, a block
/// for a bit-packed column).
#[derive(Debug, Clone)]
pub struct ColumnSource {
    /// The file (named in errors).
    pub path: PathBuf,
    /// The file already open (by the mapping that checked its header):
    /// readers open it again through this descriptor rather than by
    /// `path`, so that a writer replacing the dataset meanwhile (and
    /// removing the file's name) cannot make the scan fail or read
    /// another file.
    pub file: Option<std::sync::Arc<File>>,
    /// Byte offset of row 0 (a multiple of [`ALIGN`]).
    pub offset: u64,
    /// Bytes per unit of `unit_rows` rows.
    pub width: usize,
    /// Rows per unit; reads start at multiples of it.
    pub unit_rows: usize,
}

impl ColumnSource {
    /// Opens the file for reading: through [`file`](Self::file) when set
    /// (`/proc/self/fd/N` reaches the same file even after its name is
    /// gone, and gives a new open file description, so `O_DIRECT` can be
    /// asked for), else by path.
    fn open_with(&self, o: &std::fs::OpenOptions) -> std::io::Result<File> {
        match &self.file {
            Some(f) => crate::sys::reopen(f, &self.path, o),
            None => o.open(&self.path),
        }
    }

    /// File offset and length of the bytes holding rows `start .. start +
    /// n` (`start` a multiple of `unit_rows`; whole units).
    pub fn span(&self, start: usize, n: usize) -> (u64, usize) {
        let u = self.unit_rows.max(1);
        debug_assert!(start.is_multiple_of(u));
        (
            self.offset + (start / u * self.width) as u64,
            n.div_ceil(u) * self.width,
        )
    }
}

/// Reads rows of one column file with one `pread` per call, into the
/// caller's buffer: the warm-scan path, where each worker copies its morsel
/// out of the page cache into a buffer that stays in its own cache.
#[derive(Debug)]
pub struct RowReader {
    file: File,
    src: ColumnSource,
}

impl RowReader {
    /// Opens the column file of `src`.
    pub fn open(src: &ColumnSource) -> Result<Self> {
        let file = src
            .open_with(std::fs::OpenOptions::new().read(true))
            .map_err(|e| Error::new(&src.path, e))?;
        Ok(RowReader {
            file,
            src: src.clone(),
        })
    }

    /// The column read.
    pub fn source(&self) -> &ColumnSource {
        &self.src
    }

    /// Fills `buf` with the stored bytes from row `start` on (`start` a
    /// multiple of the source's `unit_rows`; see [`ColumnSource::span`]).
    pub fn read_rows(&self, start: usize, buf: &mut [u8]) -> Result<()> {
        let off = self.src.span(start, 0).0;
        crate::sys::read_exact_at(&self.file, buf, off).map_err(|e| {
            let e = if e.kind() == std::io::ErrorKind::UnexpectedEof {
                std::io::Error::new(e.kind(), "column file is shorter than its header says")
            } else {
                e
            };
            Error::new(&self.src.path, e)
        })
    }
}

/// The kernel's read-ahead window (bytes) for the block device holding
/// `path` (`/sys/dev/block/MAJ:MIN/queue/read_ahead_kb`, or the parent
/// disk's for a partition); `None` when it cannot be found (tmpfs, overlay
/// and network file systems, no sysfs).
pub fn device_readahead(path: &std::path::Path) -> Option<u64> {
    crate::sys::device_readahead(path)
}

/// Kernel read-ahead from which `auto` reads cold columns inline too.
pub const INLINE_COLD_READAHEAD: u64 = 1 << 20;

/// The path `auto` takes for cold data in the file system holding `path`:
/// [`ReadPath::Inline`] when the device's kernel read-ahead is at least
/// [`INLINE_COLD_READAHEAD`] (the kernel then keeps the device busy ahead
/// of the workers' own reads), else [`ReadPath::Pread`] (a read-ahead
/// thread per column).
pub fn auto_cold_path(path: &std::path::Path) -> ReadPath {
    match device_readahead(path) {
        Some(ra) if ra >= INLINE_COLD_READAHEAD => ReadPath::Inline,
        _ => ReadPath::Pread,
    }
}

/// Rows `start .. start + rows` of every source, one buffer per source.
pub struct Segment {
    /// Position of the segment in the scan.
    pub index: usize,
    /// First row.
    pub start: usize,
    /// Number of rows.
    pub rows: usize,
    /// One buffer per source, holding the stored bytes of those rows
    /// ([`ColumnSource::span`]).
    pub bufs: Vec<AlignedBuf>,
}

/// Counters of a finished stream.
#[derive(Debug, Clone, Copy, Default)]
pub struct ReadStats {
    /// `pread` calls issued.
    pub read_calls: u64,
    /// Bytes read.
    pub bytes: u64,
}

/// Streams segments of several columns, one I/O thread per column reading
/// `depth` segments ahead (plus the kernel's own read-ahead on each file;
/// extra `WILLNEED` hints per segment measured slower: a one-column cold
/// scan took 25 ms with them, 20 ms without) (so a scan of four columns keeps four requests in
/// flight). Workers call [`next`](Self::next) concurrently and hand buffers
/// back with [`recycle`](Self::recycle), so memory stays at
/// `(depth + workers + 1) × segment` bytes whatever the file size.
pub struct SegmentStream {
    rxs: Mutex<Vec<Receiver<Result<AlignedBuf>>>>,
    frees: Vec<SyncSender<AlignedBuf>>,
    next_index: Mutex<usize>,
    seg_rows: usize,
    rows: usize,
    handles: Mutex<Vec<std::thread::JoinHandle<ReadStats>>>,
}

struct Opened {
    file: File,
    path: PathBuf,
    src: ColumnSource,
}

fn open(src: &ColumnSource, direct: bool) -> Result<Opened> {
    let mut o = std::fs::OpenOptions::new();
    o.read(true);
    if direct {
        crate::sys::direct_flags(&mut o);
    }
    let file = match src.open_with(&o) {
        // File systems without O_DIRECT (tmpfs) refuse it: read through the
        // page cache instead (whole pages, so the reads stay valid).
        Err(e) if direct && crate::sys::direct_refused(&e) => src
            .open_with(std::fs::OpenOptions::new().read(true))
            .map_err(|e| Error::new(&src.path, e))?,
        r => r.map_err(|e| Error::new(&src.path, e))?,
    };
    if direct {
        crate::sys::no_cache(&file);
    } else {
        crate::sys::advise(&file, 0, 0, crate::sys::Advice::Sequential);
    }
    Ok(Opened {
        file,
        path: src.path.clone(),
        src: src.clone(),
    })
}

/// Reads `len` bytes at `off` into `buf` (whole blocks; retries short reads).
fn read_exact_at(
    f: &Opened,
    buf: &mut AlignedBuf,
    off: u64,
    len: usize,
    direct: bool,
    block: usize,
    stats: &mut ReadStats,
) -> Result<()> {
    // O_DIRECT needs aligned lengths: read whole pages, keep `len`.
    let want = if direct {
        len.div_ceil(ALIGN) * ALIGN
    } else {
        len
    };
    let spare = buf.spare();
    let mut done = 0;
    while done < want {
        let n = (want - done).min(block);
        let got = crate::sys::read_at(&f.file, &mut spare[done..done + n], off + done as u64)
            .map_err(|e| Error::new(&f.path, e))?;
        stats.read_calls += 1;
        if got == 0 {
            break;
        }
        done += got;
    }
    if done < len {
        return Err(Error::new(
            &f.path,
            std::io::Error::new(
                std::io::ErrorKind::UnexpectedEof,
                "column file is shorter than its header says",
            ),
        ));
    }
    stats.bytes += len as u64;
    buf.len = len;
    Ok(())
}

impl SegmentStream {
    /// Starts streaming `rows` rows of `sources` in segments of `seg_rows`.
    pub fn start(
        sources: &[ColumnSource],
        rows: usize,
        seg_rows: usize,
        path: ReadPath,
        block_size: usize,
        depth: usize,
    ) -> Result<Self> {
        let direct = path == ReadPath::Direct;
        // Whole pages per segment keep every O_DIRECT offset aligned: for
        // plain columns a multiple of 4096 rows does; packed blocks are
        // 128 × bits bytes per 1024 rows, so 32 Ki rows are 4096 × bits.
        let unit = if sources.iter().any(|s| s.unit_rows > 1) {
            32 * 1024
        } else {
            ALIGN
        };
        let seg_rows = seg_rows.max(1).div_ceil(unit) * unit;
        let files: Vec<Opened> = sources
            .iter()
            .map(|s| open(s, direct))
            .collect::<Result<_>>()?;
        let depth = depth.max(1);
        // Enough spare buffers for the read-ahead plus every worker.
        let pool = depth + rayon_like_workers() + 1;
        let block = block_size.max(ALIGN) / ALIGN * ALIGN;
        let nseg = rows.div_ceil(seg_rows);
        let mut rxs = Vec::new();
        let mut frees = Vec::new();
        let mut handles = Vec::new();
        for f in files {
            let (tx, rx) = sync_channel::<Result<AlignedBuf>>(depth);
            let (free_tx, free_rx) = sync_channel::<AlignedBuf>(pool);
            rxs.push(rx);
            frees.push(free_tx);
            let h = std::thread::Builder::new()
                .name("microtab-io".into())
                .spawn(move || {
                    let mut stats = ReadStats::default();
                    let mut made = 0;
                    for index in 0..nseg {
                        let start = index * seg_rows;
                        let n = seg_rows.min(rows - start);
                        let mut buf = if made < pool {
                            made += 1;
                            AlignedBuf::new(f.src.span(0, seg_rows).1 + ALIGN)
                        } else {
                            match free_rx.recv() {
                                Ok(b) => b,
                                Err(_) => return stats,
                            }
                        };
                        let (off, len) = f.src.span(start, n);
                        let res = read_exact_at(&f, &mut buf, off, len, direct, block, &mut stats);
                        let failed = res.is_err();
                        if tx.send(res.map(|_| buf)).is_err() || failed {
                            return stats;
                        }
                    }
                    stats
                })
                .expect("spawn I/O thread");
            handles.push(h);
        }
        Ok(SegmentStream {
            rxs: Mutex::new(rxs),
            frees,
            next_index: Mutex::new(0),
            seg_rows,
            rows,
            handles: Mutex::new(handles),
        })
    }

    /// The next segment in file order, `None` at the end.
    pub fn next(&self) -> Option<Result<Segment>> {
        let rxs = self.rxs.lock().unwrap();
        let mut index = self.next_index.lock().unwrap();
        let start = *index * self.seg_rows;
        if start >= self.rows {
            return None;
        }
        let mut bufs = Vec::with_capacity(rxs.len());
        for rx in rxs.iter() {
            match rx.recv() {
                Ok(Ok(b)) => bufs.push(b),
                Ok(Err(e)) => return Some(Err(e)),
                Err(_) => return None,
            }
        }
        let seg = Segment {
            index: *index,
            start,
            rows: self.seg_rows.min(self.rows - start),
            bufs,
        };
        *index += 1;
        Some(Ok(seg))
    }

    /// Returns a segment's buffers for reuse.
    pub fn recycle(&self, seg: Segment) {
        for (f, b) in self.frees.iter().zip(seg.bufs) {
            let _ = f.try_send(b);
        }
    }

    /// Waits for the I/O threads and returns their counters.
    pub fn finish(self) -> ReadStats {
        drop(self.rxs);
        drop(self.frees);
        let mut total = ReadStats::default();
        for h in self.handles.into_inner().unwrap() {
            if let Ok(s) = h.join() {
                total.read_calls += s.read_calls;
                total.bytes += s.bytes;
            }
        }
        total
    }
}

/// Worker threads for the hand-made parallel reads (the cores available).
pub fn rayon_like_workers() -> usize {
    std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(2)
}

#[cfg(test)]
mod tests {
    use super::*;

    use std::path::Path;

    fn file_with(dir: &Path, name: &str, payload: &[u8]) -> ColumnSource {
        let path = dir.join(name);
        let mut bytes = vec![0u8; ALIGN];
        bytes.extend_from_slice(payload);
        std::fs::write(&path, bytes).unwrap();
        ColumnSource {
            path,
            file: None,
            offset: ALIGN as u64,
            width: 1,
            unit_rows: 1,
        }
    }

    #[test]
    fn every_path_delivers_every_byte_in_order() {
        let dir = tempfile::tempdir().unwrap();
        let payload: Vec<u8> = (0..100_000u32).map(|i| (i * 7 % 251) as u8).collect();
        let src = file_with(dir.path(), "a", &payload);
        for path in [ReadPath::Pread, ReadPath::Direct] {
            let s = match SegmentStream::start(
                std::slice::from_ref(&src),
                payload.len(),
                20_000,
                path,
                8192,
                2,
            ) {
                Ok(s) => s,
                // Some file systems (tmpfs) refuse O_DIRECT.
                Err(_) if path == ReadPath::Direct => continue,
                Err(e) => panic!("{e}"),
            };
            let mut got = Vec::new();
            while let Some(seg) = s.next() {
                let seg = seg.unwrap();
                assert_eq!(seg.start, got.len());
                got.extend_from_slice(seg.bufs[0].bytes());
                s.recycle(seg);
            }
            let st = s.finish();
            assert_eq!(got, payload, "{path:?}");
            // 20_000 rounds up to 20_480 = 5 pages: 5 segments of 3 blocks.
            assert!(st.read_calls <= 5 * 3 + 1, "{st:?}");
        }
    }
}
