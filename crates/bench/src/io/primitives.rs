//! The reads and writes the experiments time: buffered and unbuffered
//! reads, `O_DIRECT`, mapped and per-worker column scans, and the work
//! done per byte.

use super::results::Interface;
use microtab_io::sys;
use microtab_io::{ColumnSource, Error, ReadPath, SegmentStream, ALIGN};
use std::fs::{File, OpenOptions};
use std::io::{self, BufReader, Read};
use std::path::Path;

/// `1 B`, `512 B`, `64 KiB`, `16 MiB`, `1.5 GiB`.
pub fn human_bytes(n: usize) -> String {
    let units = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut x = n as f64;
    let mut u = 0;
    while x >= 1024.0 && u + 1 < units.len() {
        x /= 1024.0;
        u += 1;
    }
    if x.fract() == 0.0 {
        format!("{x:.0} {}", units[u])
    } else {
        format!("{x:.1} {}", units[u])
    }
}

pub(super) fn open_direct(path: &Path) -> io::Result<File> {
    let mut o = OpenOptions::new();
    o.read(true);
    sys::direct_flags(&mut o);
    let f = o.open(path)?;
    sys::no_cache(&f);
    Ok(f)
}

/// Reads up to `limit` bytes of `path` with `read()` calls of `buf.len()`.
pub(super) fn read_with_buffer(path: &Path, buf: &mut [u8], limit: u64) -> io::Result<u64> {
    let mut f = File::open(path)?;
    let mut total = 0u64;
    while total < limit {
        let want = (buf.len() as u64).min(limit - total) as usize;
        let n = f.read(&mut buf[..want])?;
        if n == 0 {
            break;
        }
        total += n as u64;
    }
    Ok(total)
}

/// Fills `buf` with as many `read` calls as it takes; short only at EOF.
pub(super) fn fill(r: &mut impl Read, buf: &mut [u8]) -> io::Result<usize> {
    let mut done = 0;
    while done < buf.len() {
        match r.read(&mut buf[done..]) {
            Ok(0) => break,
            Ok(n) => done += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(done)
}

/// A page-aligned buffer for `O_DIRECT` (a slice of an over-allocated `Vec`).
pub(super) struct Aligned {
    v: Vec<u8>,
    off: usize,
    len: usize,
}

impl Aligned {
    pub(super) fn new(len: usize) -> Self {
        let v = vec![1u8; len + ALIGN];
        let off = v.as_ptr().align_offset(ALIGN);
        Aligned { v, off, len }
    }

    pub(super) fn slice(&mut self) -> &mut [u8] {
        &mut self.v[self.off..self.off + self.len]
    }
}

/// Reads the whole file through `interface` in `request`-byte pieces and
/// returns the running sum of its 64-bit words.
pub(super) fn consume(path: &Path, interface: Interface, request: usize) -> io::Result<u64> {
    match interface {
        Interface::Read => fold_reads(&mut File::open(path)?, &mut vec![1u8; request]),
        Interface::Buffered => fold_reads(
            &mut BufReader::new(File::open(path)?),
            &mut vec![1u8; request],
        ),
        Interface::Mmap => {
            let f = File::open(path)?;
            // SAFETY: the bench's own file, not modified while mapped.
            let map = unsafe { memmap2::Mmap::map(&f)? };
            Ok(map.chunks(request).fold(0, fold))
        }
        Interface::Direct => fold_reads(&mut open_direct(path)?, Aligned::new(request).slice()),
    }
}

/// Reads `r` to its end in `buf`-sized requests, folding every byte read.
fn fold_reads(r: &mut impl Read, buf: &mut [u8]) -> io::Result<u64> {
    let mut sum = 0u64;
    loop {
        let n = fill(r, buf)?;
        sum = fold(sum, &buf[..n]);
        if n < buf.len() {
            return Ok(sum);
        }
    }
}

/// Wrapping sum of the little-endian 64-bit words of `bytes` (plus any
/// trailing bytes): touches every byte at memory speed.
pub(super) fn fold(acc: u64, bytes: &[u8]) -> u64 {
    let mut s = acc;
    let mut words = bytes.chunks_exact(8);
    for w in &mut words {
        s = s.wrapping_add(u64::from_le_bytes(w.try_into().unwrap()));
    }
    for &b in words.remainder() {
        s = s.wrapping_add(b as u64);
    }
    s
}

/// The per-value computation of the scan: `rounds` rounds of a
/// multiply-xorshift hash of each little-endian `u16`, summed.
pub fn work(bytes: &[u8], rounds: u32) -> u64 {
    let rounds = std::hint::black_box(rounds);
    let mut acc = 0u64;
    for c in bytes.chunks_exact(2) {
        let mut x = u16::from_le_bytes([c[0], c[1]]) as u64 + 1;
        for _ in 0..rounds {
            x = (x ^ (x >> 29)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        }
        acc = acc.wrapping_add(x);
    }
    acc
}

/// Sum of the little-endian `u16` values of `bytes` (a trailing odd byte is
/// ignored): the trivial computation of the column scan. Sums 32 Ki values
/// at a time in `u32` (no overflow: 2^15 × 65535 < 2^32) so it vectorises.
pub fn sum_u16(bytes: &[u8]) -> u64 {
    let mut total = 0u64;
    for piece in bytes.chunks(1 << 16) {
        let s: u32 = piece
            .chunks_exact(2)
            .map(|c| u16::from_le_bytes([c[0], c[1]]) as u32)
            .sum();
        total += s as u64;
    }
    total
}

/// Sums a `u16` column with a [`SegmentStream`].
pub(super) fn stream_sum(
    src: &ColumnSource,
    values: usize,
    segment_bytes: usize,
    path: ReadPath,
    depth: usize,
) -> io::Result<u64> {
    let io_err = |e: Error| io::Error::other(e.to_string());
    let stream = SegmentStream::start(
        std::slice::from_ref(src),
        values,
        segment_bytes / src.width,
        path,
        segment_bytes,
        depth,
    )
    .map_err(io_err)?;
    let mut sum = 0u64;
    while let Some(seg) = stream.next() {
        let seg = seg.map_err(io_err)?;
        sum = sum.wrapping_add(sum_u16(seg.bufs[0].bytes()));
        stream.recycle(seg);
    }
    stream.finish();
    Ok(sum)
}

/// Sums a `u16` column as the engine's warm path reads it: every core
/// takes `block`-byte pieces in file order from a shared counter, `pread`s
/// each into its own buffer with a [`RowReader`](microtab_io::RowReader) and sums
/// it while it is in that core's cache.
pub(super) fn inline_sum(src: &ColumnSource, values: usize, block: usize) -> io::Result<u64> {
    use std::sync::atomic::{AtomicUsize, Ordering};
    let r = microtab_io::RowReader::open(src).map_err(|e| io::Error::other(e.to_string()))?;
    let rows = (block / src.width).max(1);
    let pieces = values.div_ceil(rows);
    let next = AtomicUsize::new(0);
    let workers = microtab_io::rayon_like_workers();
    std::thread::scope(|scope| {
        let handles: Vec<_> = (0..workers)
            .map(|_| {
                scope.spawn(|| -> io::Result<u64> {
                    let mut buf = vec![0u8; rows * src.width];
                    let mut sum = 0u64;
                    loop {
                        let k = next.fetch_add(1, Ordering::Relaxed);
                        if k >= pieces {
                            return Ok(sum);
                        }
                        let start = k * rows;
                        let n = rows.min(values - start);
                        let b = &mut buf[..n * src.width];
                        r.read_rows(start, b)
                            .map_err(|e| io::Error::other(e.to_string()))?;
                        sum = sum.wrapping_add(sum_u16(b));
                    }
                })
            })
            .collect();
        handles.into_iter().try_fold(0u64, |acc, h| {
            Ok(acc.wrapping_add(h.join().expect("scan thread")?))
        })
    })
}

/// Sums a `u16` column through a [`MappedFile`](microtab_io::MappedFile) in
/// `segment_bytes` pieces, advising the kernel `depth` pieces ahead.
pub(super) fn mmap_sum(path: &Path, segment_bytes: usize, depth: usize) -> io::Result<u64> {
    let map = microtab_io::MappedFile::open(path).map_err(|e| io::Error::other(e.to_string()))?;
    let bytes = map.bytes();
    map.advise_sequential(0, segment_bytes * depth);
    let mut sum = 0u64;
    for (i, piece) in bytes.chunks(segment_bytes).enumerate() {
        map.advise_sequential((i + depth) * segment_bytes, segment_bytes);
        sum = sum.wrapping_add(sum_u16(piece));
    }
    Ok(sum)
}

/// Runs `dd if=path of=/dev/null bs=1M` (C locale) and returns the bytes
/// and seconds it reports on stderr, e.g.
/// `268435456 bytes (268 MB, 256 MiB) copied, 0.0876 s, 3.1 GB/s`.
pub(super) fn run_dd(path: &Path) -> io::Result<(u64, f64)> {
    let mut input = std::ffi::OsString::from("if=");
    input.push(path);
    let out = std::process::Command::new("dd")
        .arg(input)
        .args(["of=/dev/null", "bs=1M"])
        .env("LC_ALL", "C")
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .output()?;
    let stderr = String::from_utf8_lossy(&out.stderr);
    if !out.status.success() {
        return Err(io::Error::other(format!(
            "dd failed ({}): {}",
            out.status,
            stderr.trim()
        )));
    }
    parse_dd(&stderr)
        .ok_or_else(|| io::Error::other(format!("cannot parse dd's report: {:?}", stderr.trim())))
}

/// Bytes and seconds from dd's summary line (GNU: `N bytes (...) copied,
/// S s, R`; BusyBox: `N bytes (...) copied, S seconds, R`).
pub(super) fn parse_dd(stderr: &str) -> Option<(u64, f64)> {
    let line = stderr.lines().rev().find(|l| l.contains(" copied"))?;
    let bytes: u64 = line.split_whitespace().next()?.parse().ok()?;
    let after = line.split(" copied").nth(1)?;
    let secs = after.split(',').map(str::trim).find_map(|f| {
        let (num, unit) = f.split_once(' ')?;
        matches!(unit, "s" | "seconds")
            .then(|| num.parse::<f64>().ok())
            .flatten()
    })?;
    Some((bytes, secs))
}

/// Reads `path` block by block with `pread`; computes on each block (when
/// `rounds` is given) before reading the next. Without `readahead` the
/// kernel reads exactly the blocks asked for, when asked.
pub(super) fn sequential_scan(
    path: &Path,
    buf: &mut [u8],
    rounds: Option<u32>,
    readahead: bool,
) -> io::Result<u64> {
    let f = File::open(path)?;
    if !readahead {
        sys::advise(&f, 0, 0, sys::Advice::Random);
    }
    let mut off = 0u64;
    let mut sum = 0u64;
    loop {
        let mut done = 0;
        while done < buf.len() {
            let n = sys::read_at(&f, &mut buf[done..], off + done as u64)?;
            if n == 0 {
                break;
            }
            done += n;
        }
        match rounds {
            Some(r) => sum = sum.wrapping_add(work(&buf[..done], r)),
            None => sum = fold(sum, &buf[..done]),
        }
        off += done as u64;
        if done < buf.len() {
            return Ok(sum);
        }
    }
}

pub(super) fn expect_len(got: u64, want: u64) -> io::Result<()> {
    expect(got == want, io::ErrorKind::UnexpectedEof, || {
        format!("read {got} bytes, expected {want}")
    })
}

pub(super) fn expect_sum(got: u64, want: u64) -> io::Result<()> {
    expect(got == want, io::ErrorKind::InvalidData, || {
        format!("values read back sum to {got}, expected {want}")
    })
}

/// `Ok` when `ok`, else an error of `kind` saying `msg()`.
fn expect(ok: bool, kind: io::ErrorKind, msg: impl FnOnce() -> String) -> io::Result<()> {
    if ok {
        Ok(())
    } else {
        Err(io::Error::new(kind, msg()))
    }
}

pub(super) fn min_of(n: usize, mut f: impl FnMut() -> f64) -> f64 {
    (0..n).map(|_| f()).fold(f64::INFINITY, f64::min)
}

pub(super) fn random_ints(n: usize) -> Vec<u32> {
    let mut rng = Rng(0x2545_F491_4F6C_DD1D);
    (0..n).map(|_| (rng.next() >> 32) as u32).collect()
}

/// xorshift64*: fast, deterministic test data.
pub(super) struct Rng(pub(super) u64);

impl Rng {
    pub(super) fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
}
