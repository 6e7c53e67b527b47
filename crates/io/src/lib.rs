//! Block I/O for microtab.
//!
//! Every byte microtab reads or writes goes through this crate, so the
//! lessons of the classic I/O studies live in one place: whole blocks per
//! system call (never one call per value), one configurable block size,
//! `fsync` before a file is published, and read-ahead hints so the kernel
//! fetches the next blocks while the current ones are being counted.
//!
//! The entry types are [`BlockWriter`] (large-buffer sequential writer with
//! a progress callback) and [`MappedFile`] (a read-only mapping with
//! sequential/will-need advice).
//!
//! ```
//! use microtab_io::{BlockWriter, IoConfig, MappedFile};
//! let dir = tempfile::tempdir().unwrap();
//! let path = dir.path().join("x.bin");
//! let mut w = BlockWriter::create(&path, &IoConfig::default()).unwrap();
//! w.write_all(&[1u8, 2, 3]).unwrap();
//! let stats = w.finish().unwrap();
//! assert_eq!(stats.bytes, 3);
//! let m = MappedFile::open(&path).unwrap();
//! assert_eq!(m.bytes(), &[1, 2, 3]);
//! ```
#![deny(missing_docs)]

pub mod cache;
mod reader;
pub mod sys;
pub use reader::{
    auto_cold_path, device_readahead, rayon_like_workers, AlignedBuf, ColumnSource, ReadPath,
    ReadStats, RowReader, Segment, SegmentStream, ALIGN, INLINE_COLD_READAHEAD,
};

use std::fs::{File, OpenOptions};
use std::io;
use std::path::{Path, PathBuf};

/// Default transfer size for reads and writes: 1 MiB.
///
/// Large enough that system-call overhead is negligible (the studies show
/// throughput flattening above 64 KiB), small enough to stay cache friendly.
pub const DEFAULT_BLOCK_SIZE: usize = 1 << 20;

/// I/O settings shared by every reader and writer.
#[derive(Debug, Clone)]
pub struct IoConfig {
    /// Bytes moved per system call.
    pub block_size: usize,
}

impl Default for IoConfig {
    fn default() -> Self {
        IoConfig {
            block_size: DEFAULT_BLOCK_SIZE,
        }
    }
}

/// Errors from block I/O, each naming the file involved.
///
/// The message already includes the operating-system error, so it is not
/// also exposed as `source()` (that would print it twice in error chains).
#[derive(Debug, thiserror::Error)]
#[error("{path}: {error}")]
pub struct Error {
    /// The file being read or written.
    pub path: PathBuf,
    /// The underlying operating-system error.
    pub error: io::Error,
}

impl Error {
    /// The error `source` met on `path`.
    pub fn new(path: &Path, source: io::Error) -> Self {
        Error {
            path: path.to_path_buf(),
            error: source,
        }
    }
}

/// Result alias for this crate.
pub type Result<T> = std::result::Result<T, Error>;

/// Summary of a finished write.
#[derive(Debug, Clone, Copy, Default)]
pub struct WriteStats {
    /// Payload bytes written.
    pub bytes: u64,
    /// `write` system calls issued.
    pub write_calls: u64,
}

/// A sequential writer that issues one `write` per full block and `fsync`s
/// on [`finish`](BlockWriter::finish).
pub struct BlockWriter {
    /// The open file; `None` between writes in transient mode.
    file: Option<File>,
    /// Close the file after every write (see [`set_transient`](Self::set_transient)).
    transient: bool,
    path: PathBuf,
    buf: Vec<u8>,
    block_size: usize,
    stats: WriteStats,
    progress: Option<Box<dyn FnMut(u64) + Send>>,
    /// Bytes handed to the kernel, and how many of them writeback was started for.
    written: u64,
    flushed: u64,
}

/// Start writeback of a file's dirty pages every this many bytes.
const WRITEBACK_EVERY: u64 = 8 << 20;

impl BlockWriter {
    /// Creates (truncating) `path`.
    pub fn create(path: &Path, cfg: &IoConfig) -> Result<Self> {
        let file = OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .open(path)
            .map_err(|e| Error::new(path, e))?;
        let block_size = cfg.block_size.max(4096);
        Ok(BlockWriter {
            file: Some(file),
            transient: false,
            path: path.to_path_buf(),
            buf: Vec::with_capacity(block_size),
            block_size,
            stats: WriteStats::default(),
            progress: None,
            written: 0,
            flushed: 0,
        })
    }

    /// Hands the buffered bytes to the kernel (so that the file can be read
    /// back), without waiting for the disk.
    pub fn flush(&mut self) -> Result<()> {
        self.flush_buf()
    }

    /// In transient mode the file is closed after every block written and
    /// opened again for the next one, so that a writer per column of a
    /// very wide file (thousands of variables) holds no file descriptor
    /// between its writes: an import never runs into the open-files
    /// limit, whatever the number of columns.
    pub fn set_transient(&mut self, transient: bool) {
        self.transient = transient;
        if transient {
            // Buffered bytes go out when the file is opened again.
            self.file = None;
        }
    }

    /// The open file, opened again if transient mode closed it.
    fn file(&mut self) -> Result<&mut File> {
        if self.file.is_none() {
            let f = OpenOptions::new()
                .write(true)
                .open(&self.path)
                .map_err(|e| Error::new(&self.path, e))?;
            self.file = Some(f);
        }
        Ok(self.file.as_mut().expect("opened"))
    }

    /// Calls `f` with the running byte count after every block written.
    pub fn on_progress(&mut self, f: impl FnMut(u64) + Send + 'static) {
        self.progress = Some(Box::new(f));
    }

    /// The path being written.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Bytes accepted so far (buffered or written).
    pub fn position(&self) -> u64 {
        self.stats.bytes
    }

    /// Appends `data`; full blocks go to the file in single calls.
    pub fn write_all(&mut self, mut data: &[u8]) -> Result<()> {
        self.stats.bytes += data.len() as u64;
        if !self.buf.is_empty() {
            let take = (self.block_size - self.buf.len()).min(data.len());
            self.buf.extend_from_slice(&data[..take]);
            data = &data[take..];
            if self.buf.len() == self.block_size {
                self.flush_buf()?;
            }
        }
        // Large payloads bypass the buffer: whole blocks straight from the caller.
        while data.len() >= self.block_size {
            let n = data.len() - data.len() % self.block_size;
            self.raw_write(&data[..n])?;
            data = &data[n..];
        }
        self.buf.extend_from_slice(data);
        Ok(())
    }

    fn raw_write(&mut self, data: &[u8]) -> Result<()> {
        let at = self.written;
        let path = self.path.clone();
        sys::write_all_at(self.file()?, data, at).map_err(|e| Error::new(&path, e))?;
        self.stats.write_calls += 1;
        self.written += data.len() as u64;
        if self.written - self.flushed >= WRITEBACK_EVERY {
            // Start writing the finished stretch to disk now (asynchronously)
            // instead of letting gigabytes of dirty pages pile up for the
            // final fsync (measured: a 150 M-row import spent 10 s in the
            // kernel without this, 2.5 s when the dirty set stayed small).
            self.start_writeback();
        }
        if self.transient {
            self.file = None;
        }
        if let Some(p) = self.progress.as_mut() {
            p(self.stats.bytes);
        }
        Ok(())
    }

    /// Starts writing the bytes written since the last call to disk,
    /// asynchronously.
    fn start_writeback(&mut self) {
        if let Some(f) = &self.file {
            sys::start_writeback(f, self.flushed, self.written - self.flushed);
        }
        self.flushed = self.written;
    }

    fn flush_buf(&mut self) -> Result<()> {
        if self.buf.is_empty() {
            return Ok(());
        }
        let buf = std::mem::take(&mut self.buf);
        let r = self.raw_write(&buf);
        self.buf = buf;
        self.buf.clear();
        r
    }

    /// Overwrites `data` at absolute `offset` after flushing (used for headers).
    pub fn write_at(&mut self, offset: u64, data: &[u8]) -> Result<()> {
        self.flush_buf()?;
        let path = self.path.clone();
        sys::write_all_at(self.file()?, data, offset).map_err(|e| Error::new(&path, e))?;
        self.stats.write_calls += 1;
        if self.transient {
            self.file = None;
        }
        Ok(())
    }

    /// Flushes and closes the file without waiting for the disk (for a
    /// temporary file that is read back and deleted).
    pub fn close(mut self) -> Result<WriteStats> {
        self.flush_buf()?;
        Ok(self.stats)
    }

    /// Flushes and closes the file, having started writing it to disk but
    /// without waiting: for many files published together, which the
    /// caller makes durable with one [`sync_filesystem`] before publishing
    /// them (one journal commit instead of an `fsync` per file: a
    /// 5,000-column import spent 14–23 s in per-file `fsync`s).
    pub fn finish_deferred(mut self) -> Result<WriteStats> {
        self.flush_buf()?;
        if self.file.is_none() && self.written > self.flushed {
            self.file()?;
        }
        self.start_writeback();
        Ok(self.stats)
    }

    /// Flushes, `fsync`s and closes the file.
    pub fn finish(mut self) -> Result<WriteStats> {
        self.flush_buf()?;
        let path = self.path.clone();
        self.file()?.sync_all().map_err(|e| Error::new(&path, e))?;
        Ok(self.stats)
    }
}

/// A read-only memory mapping of a whole file.
///
/// Mapping avoids a copy into user buffers; the advice tells the kernel the
/// scan is sequential so it reads ahead in large blocks while the engine
/// counts the blocks already present.
pub struct MappedFile {
    map: Option<memmap2::Mmap>,
    file: File,
    path: PathBuf,
}

impl MappedFile {
    /// Maps `path` read-only (an empty file maps to an empty slice).
    pub fn open(path: &Path) -> Result<Self> {
        let file = File::open(path).map_err(|e| Error::new(path, e))?;
        let len = file.metadata().map_err(|e| Error::new(path, e))?.len();
        let map = if len == 0 {
            None
        } else {
            // SAFETY: column files are immutable once published (new data is
            // written to new files), so the mapping is never truncated under us.
            Some(unsafe { memmap2::Mmap::map(&file) }.map_err(|e| Error::new(path, e))?)
        };
        #[cfg(unix)]
        if let Some(m) = &map {
            let _ = m.advise(memmap2::Advice::Sequential);
        }
        Ok(MappedFile {
            map,
            file,
            path: path.to_path_buf(),
        })
    }

    /// A second descriptor of the mapped file (`dup`), valid however the
    /// file is renamed or removed meanwhile.
    pub fn file(&self) -> Result<File> {
        self.file.try_clone().map_err(|e| Error::new(&self.path, e))
    }

    /// The file's bytes.
    pub fn bytes(&self) -> &[u8] {
        self.map.as_deref().unwrap_or(&[])
    }

    /// Reads `buf.len()` bytes at `offset` with one `pread`, without touching
    /// the mapping. Used for headers: a fault on a cold mapping would make
    /// the kernel read (and wait for) a whole read-ahead window first.
    pub fn read_at(&self, offset: u64, buf: &mut [u8]) -> Result<usize> {
        sys::read_at(&self.file, buf, offset).map_err(|e| Error::new(&self.path, e))
    }

    /// Fraction (0..=1) of sampled pages of `start..start+len` that are in
    /// the page cache (`mincore` on 16 evenly spread 64 KiB stretches).
    pub fn resident_fraction(&self, start: usize, len: usize) -> f64 {
        let Some(m) = &self.map else { return 1.0 };
        let end = (start + len).min(m.len());
        if start >= end {
            return 1.0;
        }
        let page = 4096;
        let span = 16 * page;
        let (mut hit, mut total) = (0usize, 0usize);
        let mut vec = vec![0u8; span / page];
        for k in 0..16 {
            let at = start + (end - start) * k / 16;
            let at = at / page * page;
            let n = span.min(m.len() - at);
            if n == 0 {
                continue;
            }
            let pages = n.div_ceil(page);
            // SAFETY: the range lies inside our mapping; `vec` has room for
            // one byte per page.
            let r = unsafe { sys::resident_pages(m.as_ptr().add(at), n, &mut vec) };
            if r.is_err() {
                // Unknown (no mincore): counted as cold, so a scan reads
                // ahead rather than faulting page by page.
                return 0.0;
            }
            hit += vec[..pages].iter().filter(|&&b| b & 1 == 1).count();
            total += pages;
        }
        if total == 0 {
            1.0
        } else {
            hit as f64 / total as f64
        }
    }

    /// File size in bytes.
    pub fn len(&self) -> usize {
        self.bytes().len()
    }

    /// True for an empty file.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The mapped path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Unmaps the pages of `start..start+len` from this process (they stay in
    /// the page cache), so a scan's resident memory stays bounded by the
    /// stretch it is working on rather than growing with the file.
    pub fn release(&self, start: usize, len: usize) {
        if let Some(m) = &self.map {
            let page = 4096;
            // Only whole pages inside the range.
            let s = start.div_ceil(page) * page;
            let e = ((start + len).min(m.len())) / page * page;
            if s < e {
                // SAFETY: whole pages inside our read-only file mapping;
                // dropping them there only drops page-table entries, and
                // the next access re-reads the (unchanged) file page.
                unsafe { sys::release_pages(m.as_ptr().add(s), e - s) }
            }
        }
    }

    /// Hints that `range` will be read sequentially soon: the kernel starts
    /// reading it asynchronously, overlapping I/O with computation.
    pub fn advise_sequential(&self, start: usize, len: usize) {
        let size = self.bytes().len();
        let end = (start + len).min(size);
        if start >= end {
            return;
        }
        // posix_fadvise works on the page cache without taking the mapping's
        // lock, so it does not stall page faults of other scanning threads
        // (madvise(WILLNEED) did: measured 40 ms vs 28 ms warm).
        sys::advise(
            &self.file,
            start as u64,
            (end - start) as u64,
            sys::Advice::WillNeed,
        );
    }
}

/// Makes everything written under `path` durable: on Linux one `syncfs`
/// for a dataset's many column files ([`sys::sync_tree`]).
pub fn sync_filesystem(path: &Path) -> Result<()> {
    sys::sync_tree(path).map_err(|e| Error::new(path, e))
}

/// An exclusive lock on a file (`flock`), held until dropped. The kernel
/// releases it when the holder exits, however it exits (`kill -9`
/// included), so a lock is never left behind.
pub struct FileLock {
    /// Closing it releases the lock.
    _file: File,
}

impl FileLock {
    /// Takes the lock on `path` (created if missing) without waiting,
    /// and writes `who` into the file for others to read. `Ok(Err(holder))`
    /// when another process holds it: `holder` is what that process wrote.
    pub fn try_acquire(path: &Path, who: &str) -> Result<std::result::Result<FileLock, String>> {
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(path)
            .map_err(|e| Error::new(path, e))?;
        if !sys::try_lock(&file).map_err(|e| Error::new(path, e))? {
            let holder = std::fs::read_to_string(path).unwrap_or_default();
            return Ok(Err(holder.trim().to_string()));
        }
        // The text stays after the lock is released (whoever reads it
        // only does so while the lock is held by someone): overwritten in
        // place, never emptied, so a reader never sees it blank.
        sys::write_all_at(&file, who.as_bytes(), 0)
            .and_then(|_| file.set_len(who.len() as u64))
            .map_err(|e| Error::new(path, e))?;
        Ok(Ok(FileLock { _file: file }))
    }
}

/// `fsync`s a directory so that renames inside it are durable.
pub fn sync_dir(dir: &Path) -> Result<()> {
    sys::sync_dir(dir).map_err(|e| Error::new(dir, e))
}

/// Writes `data` to `path` atomically: temp file, `fsync`, rename, `fsync` dir.
pub fn write_file_atomic(path: &Path, data: &[u8]) -> Result<()> {
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    let name = path.file_name().map(|s| s.to_string_lossy().into_owned());
    let tmp = dir.join(format!(
        ".{}.tmp-{}",
        name.unwrap_or_default(),
        std::process::id()
    ));
    // Errors name the file being written, not the temporary one (an
    // internal name the user never asked for); a failed write removes it.
    let written = (|| -> Result<()> {
        let mut w = BlockWriter::create(&tmp, &IoConfig::default())?;
        w.write_all(data)?;
        w.finish()?;
        Ok(())
    })();
    if let Err(e) = written {
        let _ = std::fs::remove_file(&tmp);
        return Err(Error::new(path, e.error));
    }
    std::fs::rename(&tmp, path).map_err(|e| Error::new(path, e))?;
    sync_dir(dir)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn writer_issues_one_call_per_block() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("a");
        let cfg = IoConfig { block_size: 4096 };
        let mut w = BlockWriter::create(&path, &cfg).unwrap();
        for i in 0..100_000u32 {
            w.write_all(&i.to_le_bytes()).unwrap();
        }
        let st = w.finish().unwrap();
        assert_eq!(st.bytes, 400_000);
        // 400_000 / 4096 = 97.6 -> 98 calls, not 100_000.
        assert_eq!(st.write_calls, 98);
        let back = std::fs::read(&path).unwrap();
        assert_eq!(back.len(), 400_000);
        assert_eq!(&back[4 * 77_777..4 * 77_778], &77_777u32.to_le_bytes());
    }

    #[test]
    fn atomic_write_errors_name_the_file_not_its_temporary() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("missing-dir").join("manifest.json");
        let e = write_file_atomic(&path, b"{}").unwrap_err();
        assert_eq!(e.path, path);
        assert!(!e.to_string().contains(".tmp-"), "{e}");
    }

    #[test]
    fn atomic_write_accepts_a_bare_file_name() {
        let dir = tempfile::tempdir().unwrap();
        let old = std::env::current_dir().unwrap();
        std::env::set_current_dir(dir.path()).unwrap();
        let r = write_file_atomic(Path::new("bare.json"), b"x");
        std::env::set_current_dir(old).unwrap();
        r.unwrap();
        assert_eq!(std::fs::read(dir.path().join("bare.json")).unwrap(), b"x");
    }

    #[test]
    fn atomic_write_replaces() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("m.json");
        write_file_atomic(&path, b"one").unwrap();
        write_file_atomic(&path, b"two").unwrap();
        assert_eq!(std::fs::read(&path).unwrap(), b"two");
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1);
    }
}
