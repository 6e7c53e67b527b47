//! The measurements behind `microtab iobench`: the classic I/O studies,
//! re-run on the machine at hand.
//!
//! A [`Bench`] owns a scratch directory holding one file of random bytes
//! and runs each experiment as a method that returns plain result structs
//! (the command line renders them as tables, JSON or a plot):
//!
//! | method | study |
//! | --- | --- |
//! | [`Bench::buffer_sizes`] | read throughput against buffer size, from one-byte `read`s up |
//! | [`Bench::write_calls`] | one `write` per integer vs a buffered stream vs one bulk write |
//! | [`Bench::text_vs_binary`] | formatted (text) vs unformatted (binary) write and read |
//! | [`Bench::interfaces`] | `read()`, a buffered stream, `mmap` and `O_DIRECT` at several request sizes |
//! | [`Bench::overlap_scan`] | a cold column scan with read-ahead overlapped vs without |
//! | [`Bench::column_scan`] | a column scan vs `dd` (cold) and vs a memory copy (warm) |
//!
//! Every read is measured warm (file in the page cache) and cold (evicted
//! first, see [`Eviction`]); every figure is a [`Stats`] (min, max, mean,
//! sigma) over repeated runs. Throughput is in MB/s with 1 MB = 10^6 bytes,
//! the unit `dd` prints.
//!
//! ```no_run
//! use microtab_bench::io::{Bench, BenchConfig, BUFFER_SIZES};
//! let bench = Bench::prepare(BenchConfig::quick("./.iobench-tmp".into())).unwrap();
//! for r in bench.buffer_sizes(&BUFFER_SIZES).unwrap() {
//!     let (warm, cold) = (r.times.warm.mb_s.mean, r.times.cold.mb_s.mean);
//!     println!("{:>8}  warm {warm:.0} MB/s  cold {cold:.0} MB/s", r.buffer);
//! }
//! ```

use microtab_io::cache::{drop_caches, evict as fadvise_dontneed, resident_fraction};
use microtab_io::{
    BlockWriter, ColumnSource, Error, IoConfig, ReadPath, Result, SegmentStream, ALIGN,
};
use std::cell::Cell;
use std::fs::{File, OpenOptions};
use std::io::{self, BufRead, BufReader, BufWriter, Read, Write};
use std::os::fd::AsRawFd;
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::time::Instant;

const KIB: usize = 1 << 10;
const MIB: usize = 1 << 20;

/// Buffer sizes of the throughput study: one-byte (unbuffered) reads, then
/// 512 B to 16 MiB.
pub const BUFFER_SIZES: [usize; 14] = [
    1,
    512,
    KIB,
    2 * KIB,
    4 * KIB,
    8 * KIB,
    16 * KIB,
    32 * KIB,
    64 * KIB,
    128 * KIB,
    256 * KIB,
    MIB,
    4 * MIB,
    16 * MIB,
];

/// Request sizes of the read-interface study.
pub const REQUEST_SIZES: [usize; 4] = [KIB, 8 * KIB, 64 * KIB, MIB];

/// Min, max, mean and sample standard deviation of repeated runs.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct Stats {
    /// Number of runs (0: nothing measured, every figure 0).
    pub runs: usize,
    /// Smallest value.
    pub min: f64,
    /// Largest value.
    pub max: f64,
    /// Arithmetic mean.
    pub mean: f64,
    /// Sample standard deviation (divisor `runs - 1`; 0 for a single run).
    pub sigma: f64,
}

impl Stats {
    /// Summarises `samples`.
    pub fn of(samples: &[f64]) -> Stats {
        let n = samples.len();
        if n == 0 {
            return Stats::default();
        }
        let min = samples.iter().copied().fold(f64::INFINITY, f64::min);
        let max = samples.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        let mean = samples.iter().sum::<f64>() / n as f64;
        let sigma = if n < 2 {
            0.0
        } else {
            let ss: f64 = samples.iter().map(|x| (x - mean) * (x - mean)).sum();
            (ss / (n - 1) as f64).sqrt()
        };
        Stats {
            runs: n,
            min,
            max,
            mean,
            sigma,
        }
    }
}

/// One timed operation repeated over several runs.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct Measurement {
    /// Bytes moved per run.
    pub bytes: u64,
    /// Wall-clock seconds per run.
    pub seconds: Stats,
    /// Throughput per run in MB/s (10^6 bytes per second).
    pub mb_s: Stats,
}

impl Measurement {
    /// Builds the statistics from the seconds each run took.
    pub fn from_seconds(bytes: u64, seconds: &[f64]) -> Self {
        let rates: Vec<f64> = seconds
            .iter()
            .map(|&s| bytes as f64 / 1e6 / s.max(1e-9))
            .collect();
        Measurement {
            bytes,
            seconds: Stats::of(seconds),
            mb_s: Stats::of(&rates),
        }
    }
}

/// The same operation measured with the file in the page cache and out of it.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct WarmCold {
    /// File in the page cache (after an untimed pass that loads it).
    pub warm: Measurement,
    /// File evicted before every run.
    pub cold: Measurement,
}

/// How a file is taken out of the page cache before a cold run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Eviction {
    /// `sync; echo 3 > /proc/sys/vm/drop_caches` (root only): the whole
    /// page cache, dentries and inodes are dropped.
    DropCaches,
    /// `fsync` then `posix_fadvise(POSIX_FADV_DONTNEED)` on the test file:
    /// that file's clean pages leave the cache; works for any user.
    Fadvise,
}

impl Eviction {
    /// Short machine-readable name.
    pub fn name(self) -> &'static str {
        match self {
            Eviction::DropCaches => "drop_caches",
            Eviction::Fadvise => "fadvise_dontneed",
        }
    }

    /// One line saying what was done before each cold run.
    pub fn describe(self) -> &'static str {
        match self {
            Eviction::DropCaches => {
                "page cache dropped before each cold run (sync; echo 3 > /proc/sys/vm/drop_caches)"
            }
            Eviction::Fadvise => {
                "test file evicted before each cold run (fsync + posix_fadvise(POSIX_FADV_DONTNEED))"
            }
        }
    }
}

/// Sizes and repetitions of a benchmark run.
#[derive(Debug, Clone)]
pub struct BenchConfig {
    /// Directory for the test files (created, and then removed, if missing).
    pub dir: PathBuf,
    /// Size of the test file in bytes (rounded up to a whole MiB).
    pub size: u64,
    /// Runs per measurement.
    pub runs: usize,
    /// Bytes read one byte per call in the unbuffered case (a `read` per
    /// byte takes about a microsecond, so the whole file would take minutes).
    pub byte_read_cap: u64,
    /// Integers written in the write-call study.
    pub write_ints: usize,
    /// Integers written and read in the text-vs-binary study.
    pub text_ints: usize,
    /// Drop the whole page cache for cold runs when running as root
    /// (otherwise, or when that fails, evict only the test file).
    pub drop_caches: bool,
}

impl BenchConfig {
    /// The full run: a 256 MiB file, 10 runs per figure (a few minutes).
    pub fn full(dir: PathBuf) -> Self {
        BenchConfig {
            dir,
            size: 256 << 20,
            runs: 10,
            byte_read_cap: 1 << 20,
            write_ints: 1 << 20,
            text_ints: 4 << 20,
            drop_caches: true,
        }
    }

    /// The quick run: a 64 MiB file, 3 runs per figure (well under a minute).
    pub fn quick(dir: PathBuf) -> Self {
        BenchConfig {
            dir,
            size: 64 << 20,
            runs: 3,
            byte_read_cap: 256 << 10,
            write_ints: 256 << 10,
            text_ints: 1 << 20,
            drop_caches: true,
        }
    }
}

/// Read throughput at one buffer size.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct BufferSizeResult {
    /// Bytes per `read` call (1: unbuffered one-byte reads).
    pub buffer: usize,
    /// Warm and cold measurements.
    pub times: WarmCold,
}

/// Writing integers one call at a time vs in bulk.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct WriteCallsResult {
    /// Integers (little-endian `u32`) written per run.
    pub ints: usize,
    /// One `write` system call per integer.
    pub per_call: Measurement,
    /// One call per integer into a `BufWriter` (default 8 KiB buffer).
    pub buffered: Measurement,
    /// All integers in one `write_all`.
    pub bulk: Measurement,
}

/// Text (formatted) vs binary (unformatted) files of the same integers.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct TextBinaryResult {
    /// Integers per file.
    pub ints: usize,
    /// Size of the text file (decimal, one per line).
    pub text_bytes: u64,
    /// Size of the binary file (little-endian `u32`).
    pub binary_bytes: u64,
    /// Writing the text file (`writeln!` into a 1 MiB `BufWriter`).
    pub text_write: Measurement,
    /// Writing the binary file (`to_le_bytes` into a 1 MiB `BufWriter`).
    pub binary_write: Measurement,
    /// Reading and parsing the text file (`read_line` + `parse::<u32>`).
    pub text_read: WarmCold,
    /// Reading and decoding the binary file (1 MiB `read`s + `from_le_bytes`).
    pub binary_read: WarmCold,
}

/// A way of getting file bytes into a program.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Interface {
    /// `read()` into the program's own buffer of the request size.
    Read,
    /// A `BufReader` with its default capacity, read in requests of the size.
    Buffered,
    /// `mmap` of the whole file, consumed in pieces of the request size.
    Mmap,
    /// `read()` with `O_DIRECT` into an aligned buffer (no page cache).
    Direct,
}

impl Interface {
    /// Every interface, in table order.
    pub const ALL: [Interface; 4] = [
        Interface::Read,
        Interface::Buffered,
        Interface::Mmap,
        Interface::Direct,
    ];

    /// Short machine-readable name.
    pub fn name(self) -> &'static str {
        match self {
            Interface::Read => "read",
            Interface::Buffered => "bufreader",
            Interface::Mmap => "mmap",
            Interface::Direct => "o_direct",
        }
    }

    /// How the table calls it.
    pub fn label(self) -> &'static str {
        match self {
            Interface::Read => "read() into own buffer",
            Interface::Buffered => "BufReader (8 KiB default)",
            Interface::Mmap => "mmap",
            Interface::Direct => "O_DIRECT read()",
        }
    }
}

/// One interface at one request size.
#[derive(Debug, Clone, PartialEq)]
pub struct InterfaceResult {
    /// The interface.
    pub interface: Interface,
    /// Bytes asked for per call.
    pub request: usize,
    /// The measurements, or `None` when the combination cannot run.
    pub times: Option<WarmCold>,
    /// Why it could not run, when it could not.
    pub note: Option<String>,
}

/// A cold column scan with and without read-ahead overlapped.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct OverlapResult {
    /// `u16` values scanned per run.
    pub values: u64,
    /// Bytes per block (segment) handed to the computation.
    pub block_bytes: usize,
    /// Blocks the reader thread keeps in flight ahead of the computation.
    pub depth: usize,
    /// Hash rounds per value, chosen so that computing a block takes about
    /// as long as reading it cold without read-ahead (where overlap matters
    /// most).
    pub rounds: u32,
    /// Cold read of the file in blocks, kernel read-ahead off, no computation.
    pub read_only: Measurement,
    /// The computation alone over an in-memory buffer.
    pub compute_only: Measurement,
    /// Read a block, then compute on it, in one thread, with the kernel's
    /// read-ahead turned off (`POSIX_FADV_RANDOM`): no overlap at all.
    pub sequential: Measurement,
    /// The same loop with the kernel's default read-ahead, which fetches
    /// up to its window (`read_ahead_kb`) in the background: the overlap a
    /// program gets without asking.
    pub kernel_readahead: Measurement,
    /// [`SegmentStream`] reads ahead on its own thread while this one computes.
    pub overlapped: Measurement,
}

impl OverlapResult {
    /// Mean time of the sequential scan (no read-ahead) over mean time of
    /// the overlapped one.
    pub fn speedup(&self) -> f64 {
        ratio(&self.sequential.seconds, &self.overlapped.seconds, false)
    }

    /// The same from the best (min) runs, which interference from other
    /// processes cannot inflate.
    pub fn speedup_best(&self) -> f64 {
        ratio(&self.sequential.seconds, &self.overlapped.seconds, true)
    }

    /// Mean time of the scan with only the kernel's read-ahead over mean
    /// time of the overlapped one.
    pub fn speedup_vs_kernel(&self) -> f64 {
        ratio(
            &self.kernel_readahead.seconds,
            &self.overlapped.seconds,
            false,
        )
    }

    /// The same from the best (min) runs.
    pub fn speedup_vs_kernel_best(&self) -> f64 {
        ratio(
            &self.kernel_readahead.seconds,
            &self.overlapped.seconds,
            true,
        )
    }
}

/// How experiment (g) gets the column's bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ScanPath {
    /// [`SegmentStream`] with [`ReadPath::Pread`]: an I/O thread `pread`s
    /// segments through the page cache, `depth` ahead.
    Pread,
    /// [`SegmentStream`] with [`ReadPath::Direct`]: the same with `O_DIRECT`.
    Direct,
    /// [`MappedFile`](microtab_io::MappedFile) (sequential advice), every page
    /// touched by the sum, `posix_fadvise(WILLNEED)` `depth` segments ahead.
    Mmap,
    /// [`RowReader`](microtab_io::RowReader), as the engine reads warm columns:
    /// every core `pread`s [`INLINE_BLOCK`] bytes at a time (one morsel of
    /// a `u16` column) into its own buffer and sums it while it is in its
    /// cache.
    Inline,
}

/// Bytes per read of [`ScanPath::Inline`]: one 32 Ki-row morsel of `u16`.
pub const INLINE_BLOCK: usize = 64 * 1024;

impl ScanPath {
    /// Every path, in table (and run) order. The mapped scan runs last:
    /// right after it, the first cold run of the next path often took
    /// twice as long (measured with the inline path: 50 ms instead of 21).
    pub const ALL: [ScanPath; 4] = [
        ScanPath::Pread,
        ScanPath::Inline,
        ScanPath::Direct,
        ScanPath::Mmap,
    ];

    /// Short machine-readable name.
    pub fn name(self) -> &'static str {
        match self {
            ScanPath::Pread => "pread",
            ScanPath::Direct => "direct",
            ScanPath::Mmap => "mmap",
            ScanPath::Inline => "inline",
        }
    }

    /// How the table calls it.
    pub fn label(self) -> &'static str {
        match self {
            ScanPath::Pread => "SegmentStream, pread",
            ScanPath::Direct => "SegmentStream, O_DIRECT",
            ScanPath::Mmap => "MappedFile (mmap), every page",
            ScanPath::Inline => "RowReader, 64 KiB per core",
        }
    }
}

/// One read path of the column scan.
#[derive(Debug, Clone, PartialEq)]
pub struct ScanPathResult {
    /// The read path.
    pub path: ScanPath,
    /// Warm and cold scans summing every `u16`, or `None` if it cannot run.
    pub times: Option<WarmCold>,
    /// Why it could not run, when it could not.
    pub note: Option<String>,
}

/// `dd if=FILE of=/dev/null bs=1M` on the test file.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct DdResult {
    /// The subprocess timed from outside: fork, exec, start-up and the copy.
    pub wall: WarmCold,
    /// The copy as dd itself reports it on stderr (its own clock, which
    /// starts after its start-up); MB/s from dd's bytes and seconds.
    pub reported: WarmCold,
}

/// A column scan through microtab's read paths against `dd` (cold) and a
/// memory copy (warm): the two targets of issue 3.
#[derive(Debug, Clone, PartialEq)]
pub struct ColumnScanResult {
    /// `u16` values summed per scan (the whole test file).
    pub values: u64,
    /// Bytes per segment handed to the computation.
    pub segment_bytes: usize,
    /// Segments read ahead of the computation.
    pub depth: usize,
    /// One row per read path.
    pub scans: Vec<ScanPathResult>,
    /// `dd`, or `None` when it could not be run (see `dd_note`).
    pub dd: Option<DdResult>,
    /// Why `dd` could not be run, when it could not.
    pub dd_note: Option<String>,
    /// `copy_from_slice` of a buffer the size of the file into another
    /// (both resident, one untimed copy first).
    pub memcpy: Measurement,
    /// The path `auto` takes for this file when it is cold
    /// ([`auto_cold_path`](microtab_io::auto_cold_path)): inline or pread.
    pub auto_cold: ReadPath,
}

impl ColumnScanResult {
    /// The scan on `path`, if it ran.
    pub fn scan(&self, path: ScanPath) -> Option<&WarmCold> {
        self.scans
            .iter()
            .find(|s| s.path == path)
            .and_then(|s| s.times.as_ref())
    }

    /// Cold MB/s of `scan` over cold MB/s of dd, by dd's own clock
    /// (`reported`) or the subprocess's wall time; from means, or from the
    /// best runs of each with `best`.
    pub fn cold_vs_dd(&self, scan: &WarmCold, reported: bool, best: bool) -> Option<f64> {
        let dd = self.dd?;
        let d = if reported {
            dd.reported.cold
        } else {
            dd.wall.cold
        };
        Some(rate_ratio(&scan.cold.mb_s, &d.mb_s, best))
    }

    /// Warm MB/s of `scan` (mean, or best run with `best`) over the best
    /// memory-copy MB/s.
    pub fn warm_vs_memcpy(&self, scan: &WarmCold, best: bool) -> f64 {
        let s = if best {
            scan.warm.mb_s.max
        } else {
            scan.warm.mb_s.mean
        };
        s / self.memcpy.mb_s.max.max(1e-12)
    }
}

fn rate_ratio(num: &Stats, den: &Stats, best: bool) -> f64 {
    if best {
        num.max / den.max.max(1e-12)
    } else {
        num.mean / den.mean.max(1e-12)
    }
}

fn ratio(num: &Stats, den: &Stats, best: bool) -> f64 {
    let (a, b) = if best {
        (num.min, den.min)
    } else {
        (num.mean, den.mean)
    };
    a / b.max(1e-12)
}

/// A scratch directory with a test file, and the experiments run on it.
///
/// Dropping it removes the files it made (and the directory, if it made it).
pub struct Bench {
    cfg: BenchConfig,
    data: PathBuf,
    size: u64,
    made_dir: bool,
    eviction: Cell<Eviction>,
    resident_after_eviction: f64,
    progress: Option<Progress>,
}

type Progress = Box<dyn Fn(&str)>;

/// File names the bench creates inside its directory.
const DATA_FILE: &str = "iobench-data.bin";
const WRITE_FILE: &str = "iobench-writes.bin";
const TEXT_FILE: &str = "iobench-ints.txt";
const BINARY_FILE: &str = "iobench-ints.bin";

impl Bench {
    /// Creates the directory (if needed) and a test file of random bytes,
    /// then evicts it once to settle how cold runs are made.
    pub fn prepare(cfg: BenchConfig) -> Result<Self> {
        let made_dir = !cfg.dir.exists();
        std::fs::create_dir_all(&cfg.dir).map_err(|e| Error::new(&cfg.dir, e))?;
        let size = cfg.size.max(1).div_ceil(MIB as u64) * MIB as u64;
        // SAFETY: geteuid has no preconditions.
        let root = unsafe { libc::geteuid() } == 0;
        let eviction = if cfg.drop_caches && root {
            Eviction::DropCaches
        } else {
            Eviction::Fadvise
        };
        let mut bench = Bench {
            data: cfg.dir.join(DATA_FILE),
            cfg,
            size,
            made_dir,
            eviction: Cell::new(eviction),
            resident_after_eviction: 1.0,
            progress: None,
        };
        let mut w = BlockWriter::create(&bench.data, &IoConfig::default())?;
        let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
        let mut block = vec![0u8; MIB];
        for _ in 0..size / MIB as u64 {
            for c in block.chunks_exact_mut(8) {
                c.copy_from_slice(&rng.next().to_le_bytes());
            }
            w.write_all(&block)?;
        }
        w.finish()?;
        bench.evict(&bench.data.clone())?;
        bench.resident_after_eviction =
            resident_fraction(&bench.data).map_err(|e| Error::new(&bench.data, e))?;
        Ok(bench)
    }

    /// Calls `f` with a short line before each step (for a progress display).
    pub fn on_progress(&mut self, f: impl Fn(&str) + 'static) {
        self.progress = Some(Box::new(f));
    }

    /// The settings in use.
    pub fn config(&self) -> &BenchConfig {
        &self.cfg
    }

    /// Size of the test file in bytes.
    pub fn file_size(&self) -> u64 {
        self.size
    }

    /// How cold runs evict the file (it falls back from
    /// [`Eviction::DropCaches`] to [`Eviction::Fadvise`] if a drop fails).
    pub fn eviction(&self) -> Eviction {
        self.eviction.get()
    }

    /// Fraction of the test file found in the page cache right after the
    /// first eviction (0 means the cold runs really start cold).
    pub fn resident_after_eviction(&self) -> f64 {
        self.resident_after_eviction
    }

    fn say(&self, msg: &str) {
        if let Some(p) = &self.progress {
            p(msg);
        }
    }

    fn evict(&self, path: &Path) -> Result<()> {
        if self.eviction.get() == Eviction::DropCaches {
            if drop_caches().is_ok() {
                return Ok(());
            }
            self.eviction.set(Eviction::Fadvise);
        }
        fadvise_dontneed(path).map_err(|e| Error::new(path, e))
    }

    /// Times `op` warm (after one untimed pass) and cold (after evicting
    /// `path`), `runs` times each.
    fn warm_cold(
        &self,
        path: &Path,
        bytes: u64,
        mut op: impl FnMut() -> io::Result<()>,
    ) -> Result<WarmCold> {
        let fail = |e| Error::new(path, e);
        op().map_err(fail)?;
        let mut warm = Vec::with_capacity(self.cfg.runs);
        for _ in 0..self.cfg.runs {
            let t = Instant::now();
            op().map_err(fail)?;
            warm.push(t.elapsed().as_secs_f64());
        }
        let mut cold = Vec::with_capacity(self.cfg.runs);
        for _ in 0..self.cfg.runs {
            self.evict(path)?;
            let t = Instant::now();
            op().map_err(fail)?;
            cold.push(t.elapsed().as_secs_f64());
        }
        Ok(WarmCold {
            warm: Measurement::from_seconds(bytes, &warm),
            cold: Measurement::from_seconds(bytes, &cold),
        })
    }

    /// (a) Read throughput against buffer size: the file read from the
    /// start with plain `read()` calls of `buffer` bytes (no processing of
    /// the data). One-byte reads stop after
    /// [`byte_read_cap`](BenchConfig::byte_read_cap) bytes.
    pub fn buffer_sizes(&self, sizes: &[usize]) -> Result<Vec<BufferSizeResult>> {
        let mut out = Vec::with_capacity(sizes.len());
        for &buffer in sizes {
            let buffer = buffer.max(1);
            let limit = if buffer == 1 {
                self.cfg.byte_read_cap.clamp(1, self.size)
            } else {
                self.size
            };
            self.say(&format!("a. read() with a {} buffer", human_bytes(buffer)));
            let mut buf = vec![1u8; buffer];
            let times = self.warm_cold(&self.data, limit, || {
                let got = read_with_buffer(&self.data, &mut buf, limit)?;
                expect_len(got, limit)
            })?;
            out.push(BufferSizeResult { buffer, times });
        }
        Ok(out)
    }

    /// (b) Writing [`write_ints`](BenchConfig::write_ints) integers: one
    /// `write` system call per integer, one `BufWriter` call per integer,
    /// and one bulk write. Each run writes a new file; the `fsync` after it
    /// is not timed (this measures the calls, not the disk).
    pub fn write_calls(&self) -> Result<WriteCallsResult> {
        let ints = random_ints(self.cfg.write_ints);
        let bulk_bytes: Vec<u8> = ints.iter().flat_map(|v| v.to_le_bytes()).collect();
        let path = self.cfg.dir.join(WRITE_FILE);
        let bytes = bulk_bytes.len() as u64;
        self.say("b. one write() per integer");
        let per_call = self.time_writes(&path, |f| {
            for v in &ints {
                f.write_all(&v.to_le_bytes())?;
            }
            Ok(())
        })?;
        self.say("b. BufWriter, one call per integer");
        let buffered = self.time_writes(&path, |f| {
            let mut w = BufWriter::new(f);
            for v in &ints {
                w.write_all(&v.to_le_bytes())?;
            }
            w.flush()
        })?;
        self.say("b. one bulk write");
        let bulk = self.time_writes(&path, |f| f.write_all(&bulk_bytes))?;
        let _ = std::fs::remove_file(&path);
        Ok(WriteCallsResult {
            ints: ints.len(),
            per_call: Measurement::from_seconds(bytes, &per_call),
            buffered: Measurement::from_seconds(bytes, &buffered),
            bulk: Measurement::from_seconds(bytes, &bulk),
        })
    }

    /// Runs `write` on a fresh file `runs` times; the seconds `write` took.
    fn time_writes(
        &self,
        path: &Path,
        mut write: impl FnMut(&mut File) -> io::Result<()>,
    ) -> Result<Vec<f64>> {
        let mut secs = Vec::with_capacity(self.cfg.runs);
        for _ in 0..self.cfg.runs {
            let mut run = || -> io::Result<f64> {
                let _ = std::fs::remove_file(path);
                let mut f = File::create(path)?;
                let t = Instant::now();
                write(&mut f)?;
                let s = t.elapsed().as_secs_f64();
                f.sync_all()?;
                Ok(s)
            };
            secs.push(run().map_err(|e| Error::new(path, e))?);
        }
        Ok(secs)
    }

    /// (c) The same [`text_ints`](BenchConfig::text_ints) random integers
    /// written and read back as text (decimal, one per line, through the
    /// standard formatting and parsing routines) and as binary
    /// (little-endian `u32`), both through 1 MiB buffers.
    pub fn text_vs_binary(&self) -> Result<TextBinaryResult> {
        let ints = random_ints(self.cfg.text_ints);
        let want: u64 = ints.iter().map(|&v| v as u64).sum();
        let text = self.cfg.dir.join(TEXT_FILE);
        let binary = self.cfg.dir.join(BINARY_FILE);
        let n = ints.len() as u64;
        self.say("c. writing text");
        let text_secs = self.time_writes(&text, |f| {
            let mut w = BufWriter::with_capacity(MIB, f);
            for v in &ints {
                writeln!(w, "{v}")?;
            }
            w.flush()
        })?;
        self.say("c. writing binary");
        let binary_secs = self.time_writes(&binary, |f| {
            let mut w = BufWriter::with_capacity(MIB, f);
            for v in &ints {
                w.write_all(&v.to_le_bytes())?;
            }
            w.flush()
        })?;
        let text_bytes = std::fs::metadata(&text)
            .map_err(|e| Error::new(&text, e))?
            .len();
        let text_write = Measurement::from_seconds(text_bytes, &text_secs);
        let binary_write = Measurement::from_seconds(4 * n, &binary_secs);
        self.say("c. reading text");
        let text_read = self.warm_cold(&text, text_bytes, || {
            let mut r = BufReader::with_capacity(MIB, File::open(&text)?);
            let mut line = String::new();
            let mut sum = 0u64;
            loop {
                line.clear();
                if r.read_line(&mut line)? == 0 {
                    break;
                }
                let v: u32 = line.trim_end().parse().map_err(io::Error::other)?;
                sum += v as u64;
            }
            expect_sum(sum, want)
        })?;
        self.say("c. reading binary");
        let mut buf = vec![0u8; MIB];
        let binary_read = self.warm_cold(&binary, 4 * n, || {
            let mut f = File::open(&binary)?;
            let mut sum = 0u64;
            loop {
                let got = fill(&mut f, &mut buf)?;
                for c in buf[..got].chunks_exact(4) {
                    sum += u32::from_le_bytes([c[0], c[1], c[2], c[3]]) as u64;
                }
                if got < buf.len() {
                    break;
                }
            }
            expect_sum(sum, want)
        })?;
        let _ = std::fs::remove_file(&text);
        let _ = std::fs::remove_file(&binary);
        Ok(TextBinaryResult {
            ints: ints.len(),
            text_bytes,
            binary_bytes: 4 * n,
            text_write,
            binary_write,
            text_read,
            binary_read,
        })
    }

    /// (d) Each [`Interface`] reading the whole test file in requests of
    /// each of `requests` bytes. Every interface consumes what it gets the
    /// same way (a running sum of 64-bit words, checked against the others).
    pub fn interfaces(&self, requests: &[usize]) -> Result<Vec<InterfaceResult>> {
        let mut reference = None;
        let mut out = Vec::new();
        for &request in requests {
            let request = request.max(8);
            for interface in Interface::ALL {
                self.say(&format!(
                    "d. {} with {} requests",
                    interface.label(),
                    human_bytes(request)
                ));
                let mut result = InterfaceResult {
                    interface,
                    request,
                    times: None,
                    note: None,
                };
                if interface == Interface::Direct && request % ALIGN != 0 {
                    result.note = Some(format!(
                        "n/a (O_DIRECT needs {} alignment)",
                        human_bytes(ALIGN)
                    ));
                    out.push(result);
                    continue;
                }
                if interface == Interface::Direct {
                    if let Err(e) = open_direct(&self.data) {
                        result.note = Some(format!("n/a (O_DIRECT refused: {e})"));
                        out.push(result);
                        continue;
                    }
                }
                let mut sum = 0;
                let times = self.warm_cold(&self.data, self.size, || {
                    sum = consume(&self.data, interface, request)?;
                    let want = *reference.get_or_insert(sum);
                    if sum != want {
                        return Err(io::Error::other(format!(
                            "{} read different bytes (checksum {sum:#x}, expected {want:#x})",
                            interface.name()
                        )));
                    }
                    Ok(())
                })?;
                result.times = Some(times);
                out.push(result);
            }
        }
        Ok(out)
    }

    /// (f) A cold scan that hashes every `u16` of the test file and sums
    /// the hashes: reading a block and then computing on it (without and
    /// with the kernel's read-ahead), and with a [`SegmentStream`] reading
    /// `depth` blocks ahead on its own thread. The hash rounds per value
    /// are calibrated first (see [`OverlapResult::rounds`]).
    pub fn overlap_scan(&self, block_bytes: usize, depth: usize) -> Result<OverlapResult> {
        let block_bytes = block_bytes.max(ALIGN) / ALIGN * ALIGN;
        let values = self.size / 2;
        let fail = |e| Error::new(&self.data, e);
        let mut buf = vec![0u8; block_bytes];
        let runs = self.cfg.runs;
        let mut cold_scans = |rounds: Option<u32>, readahead: bool| -> Result<(Vec<f64>, u64)> {
            let mut secs = Vec::with_capacity(runs);
            let mut sum = 0;
            for _ in 0..runs {
                self.evict(&self.data)?;
                let t = Instant::now();
                sum = sequential_scan(&self.data, &mut buf, rounds, readahead).map_err(fail)?;
                secs.push(t.elapsed().as_secs_f64());
            }
            Ok((secs, sum))
        };

        self.say("f. cold read without computation");
        let read_only = Measurement::from_seconds(self.size, &cold_scans(None, false)?.0);

        // Calibrate on an in-memory sample: scale the rounds until computing
        // the sample takes as long as reading that much cold.
        self.say("f. calibrating the computation");
        let sample_len = (self.size as usize).min(16 * MIB);
        let mut sample = vec![0u8; sample_len];
        let got = fill(&mut File::open(&self.data).map_err(fail)?, &mut sample).map_err(fail)?;
        sample.truncate(got);
        let time_work = |rounds: u32| {
            let t = Instant::now();
            std::hint::black_box(work(&sample, rounds));
            t.elapsed().as_secs_f64()
        };
        let target = read_only.seconds.mean * sample.len() as f64 / self.size as f64;
        let mut rounds = 1u32;
        for _ in 0..3 {
            let t = min_of(3, || time_work(rounds)).max(1e-9);
            rounds = (rounds as f64 * target / t).round().clamp(1.0, 10_000.0) as u32;
        }
        let compute_secs: Vec<f64> = (0..runs).map(|_| time_work(rounds)).collect();
        let compute_only = Measurement::from_seconds(sample.len() as u64, &compute_secs);

        self.say("f. cold scan, read a block then compute, no read-ahead");
        let (secs, want) = cold_scans(Some(rounds), false)?;
        let sequential = Measurement::from_seconds(self.size, &secs);
        self.say("f. cold scan, read a block then compute, kernel read-ahead");
        let (secs, sum) = cold_scans(Some(rounds), true)?;
        let kernel_readahead = Measurement::from_seconds(self.size, &secs);
        if sum != want {
            return Err(fail(io::Error::other(
                "scans with and without read-ahead summed differently",
            )));
        }

        self.say("f. cold scan, read-ahead overlapped");
        let src = ColumnSource {
            path: self.data.clone(),
            file: None,
            offset: 0,
            width: 2,
            unit_rows: 1,
        };
        let mut secs = Vec::new();
        for _ in 0..runs {
            self.evict(&self.data)?;
            let t = Instant::now();
            let stream = SegmentStream::start(
                std::slice::from_ref(&src),
                values as usize,
                block_bytes / 2,
                ReadPath::Pread,
                block_bytes,
                depth,
            )?;
            let mut sum = 0u64;
            while let Some(seg) = stream.next() {
                let seg = seg?;
                sum = sum.wrapping_add(work(seg.bufs[0].bytes(), rounds));
                stream.recycle(seg);
            }
            stream.finish();
            secs.push(t.elapsed().as_secs_f64());
            if sum != want {
                return Err(fail(io::Error::other(
                    "overlapped scan summed differently from the sequential one",
                )));
            }
        }
        let overlapped = Measurement::from_seconds(self.size, &secs);
        Ok(OverlapResult {
            values,
            block_bytes,
            depth,
            rounds,
            read_only,
            compute_only,
            sequential,
            kernel_readahead,
            overlapped,
        })
    }

    /// (g) The targets of issue 3: one column file (the test file as `u16`
    /// values) scanned while summing every value, through microtab's own
    /// read paths ([`ScanPath`]), against `dd if=FILE of=/dev/null bs=1M`
    /// cold and against a memory copy of the same size warm. Every scan must
    /// produce the same sum.
    pub fn column_scan(&self, segment_bytes: usize, depth: usize) -> Result<ColumnScanResult> {
        let segment_bytes = segment_bytes.max(ALIGN) / ALIGN * ALIGN;
        let values = self.size / 2;
        let src = ColumnSource {
            path: self.data.clone(),
            file: None,
            offset: 0,
            width: 2,
            unit_rows: 1,
        };
        let mut reference = None;
        let mut scans = Vec::new();
        for path in ScanPath::ALL {
            self.say(&format!("g. column scan, {}", path.label()));
            let mut result = ScanPathResult {
                path,
                times: None,
                note: None,
            };
            if path == ScanPath::Direct {
                if let Err(e) = open_direct(&self.data) {
                    result.note = Some(format!("n/a (O_DIRECT refused: {e})"));
                    scans.push(result);
                    continue;
                }
            }
            let times = self.warm_cold(&self.data, self.size, || {
                let sum = match path {
                    ScanPath::Pread | ScanPath::Direct => {
                        let rp = if path == ScanPath::Pread {
                            ReadPath::Pread
                        } else {
                            ReadPath::Direct
                        };
                        stream_sum(&src, values as usize, segment_bytes, rp, depth)?
                    }
                    ScanPath::Mmap => mmap_sum(&self.data, segment_bytes, depth)?,
                    ScanPath::Inline => inline_sum(&src, values as usize, INLINE_BLOCK)?,
                };
                let want = *reference.get_or_insert(sum);
                if sum != want {
                    return Err(io::Error::other(format!(
                        "{} scan summed to {sum}, expected {want}",
                        path.name()
                    )));
                }
                Ok(())
            })?;
            result.times = Some(times);
            scans.push(result);
        }

        self.say("g. dd if=FILE of=/dev/null bs=1M");
        let mut reported = Vec::new();
        let dd = self.warm_cold(&self.data, self.size, || {
            let (bytes, secs) = run_dd(&self.data)?;
            expect_len(bytes, self.size)?;
            reported.push(secs);
            Ok(())
        });
        let (dd, dd_note) = match dd {
            Ok(wall) => {
                // One untimed warm-up, then the warm runs, then the cold ones.
                let runs = self.cfg.runs;
                let warm = Measurement::from_seconds(self.size, &reported[1..1 + runs]);
                let cold = Measurement::from_seconds(self.size, &reported[1 + runs..]);
                let reported = WarmCold { warm, cold };
                (Some(DdResult { wall, reported }), None)
            }
            Err(e) => (None, Some(format!("dd could not be run: {e}"))),
        };

        self.say("g. memory copy (copy_from_slice)");
        let src_buf = vec![1u8; self.size as usize];
        let mut dst = vec![0u8; self.size as usize];
        dst.copy_from_slice(&src_buf); // faults the destination in, untimed
        let secs: Vec<f64> = (0..self.cfg.runs)
            .map(|_| {
                let t = Instant::now();
                dst.copy_from_slice(std::hint::black_box(&src_buf));
                std::hint::black_box(&mut dst);
                t.elapsed().as_secs_f64()
            })
            .collect();
        let memcpy = Measurement::from_seconds(self.size, &secs);

        Ok(ColumnScanResult {
            values,
            segment_bytes,
            depth,
            scans,
            dd,
            dd_note,
            memcpy,
            auto_cold: microtab_io::auto_cold_path(&self.data),
        })
    }
}

impl Drop for Bench {
    fn drop(&mut self) {
        for name in [DATA_FILE, WRITE_FILE, TEXT_FILE, BINARY_FILE] {
            let _ = std::fs::remove_file(self.cfg.dir.join(name));
        }
        if self.made_dir {
            // Only succeeds if empty: never removes anything we did not make.
            let _ = std::fs::remove_dir(&self.cfg.dir);
        }
    }
}

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

fn open_direct(path: &Path) -> io::Result<File> {
    OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_DIRECT)
        .open(path)
}

/// Reads up to `limit` bytes of `path` with `read()` calls of `buf.len()`.
fn read_with_buffer(path: &Path, buf: &mut [u8], limit: u64) -> io::Result<u64> {
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
fn fill(r: &mut impl Read, buf: &mut [u8]) -> io::Result<usize> {
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
struct Aligned {
    v: Vec<u8>,
    off: usize,
    len: usize,
}

impl Aligned {
    fn new(len: usize) -> Self {
        let v = vec![1u8; len + ALIGN];
        let off = v.as_ptr().align_offset(ALIGN);
        Aligned { v, off, len }
    }

    fn slice(&mut self) -> &mut [u8] {
        &mut self.v[self.off..self.off + self.len]
    }
}

/// Reads the whole file through `interface` in `request`-byte pieces and
/// returns the running sum of its 64-bit words.
fn consume(path: &Path, interface: Interface, request: usize) -> io::Result<u64> {
    let mut sum = 0u64;
    match interface {
        Interface::Read => {
            let mut f = File::open(path)?;
            let mut buf = vec![1u8; request];
            loop {
                let n = fill(&mut f, &mut buf)?;
                sum = fold(sum, &buf[..n]);
                if n < request {
                    break;
                }
            }
        }
        Interface::Buffered => {
            let mut r = BufReader::new(File::open(path)?);
            let mut buf = vec![1u8; request];
            loop {
                let n = fill(&mut r, &mut buf)?;
                sum = fold(sum, &buf[..n]);
                if n < request {
                    break;
                }
            }
        }
        Interface::Mmap => {
            let f = File::open(path)?;
            // SAFETY: the bench's own file, not modified while mapped.
            let map = unsafe { memmap2::Mmap::map(&f)? };
            for piece in map.chunks(request) {
                sum = fold(sum, piece);
            }
        }
        Interface::Direct => {
            let mut f = open_direct(path)?;
            let mut buf = Aligned::new(request);
            loop {
                let n = fill(&mut f, buf.slice())?;
                sum = fold(sum, &buf.slice()[..n]);
                if n < request {
                    break;
                }
            }
        }
    }
    Ok(sum)
}

/// Wrapping sum of the little-endian 64-bit words of `bytes` (plus any
/// trailing bytes): touches every byte at memory speed.
fn fold(acc: u64, bytes: &[u8]) -> u64 {
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
fn stream_sum(
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
fn inline_sum(src: &ColumnSource, values: usize, block: usize) -> io::Result<u64> {
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
fn mmap_sum(path: &Path, segment_bytes: usize, depth: usize) -> io::Result<u64> {
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
fn run_dd(path: &Path) -> io::Result<(u64, f64)> {
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
fn parse_dd(stderr: &str) -> Option<(u64, f64)> {
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
fn sequential_scan(
    path: &Path,
    buf: &mut [u8],
    rounds: Option<u32>,
    readahead: bool,
) -> io::Result<u64> {
    let f = File::open(path)?;
    if !readahead {
        // SAFETY: plain syscall on an open descriptor.
        unsafe { libc::posix_fadvise(f.as_raw_fd(), 0, 0, libc::POSIX_FADV_RANDOM) };
    }
    let mut off = 0u64;
    let mut sum = 0u64;
    loop {
        let mut done = 0;
        while done < buf.len() {
            let n = f.read_at(&mut buf[done..], off + done as u64)?;
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

fn expect_len(got: u64, want: u64) -> io::Result<()> {
    if got == want {
        Ok(())
    } else {
        Err(io::Error::new(
            io::ErrorKind::UnexpectedEof,
            format!("read {got} bytes, expected {want}"),
        ))
    }
}

fn expect_sum(got: u64, want: u64) -> io::Result<()> {
    if got == want {
        Ok(())
    } else {
        Err(io::Error::new(
            io::ErrorKind::InvalidData,
            format!("values read back sum to {got}, expected {want}"),
        ))
    }
}

fn min_of(n: usize, mut f: impl FnMut() -> f64) -> f64 {
    (0..n).map(|_| f()).fold(f64::INFINITY, f64::min)
}

fn random_ints(n: usize) -> Vec<u32> {
    let mut rng = Rng(0x2545_F491_4F6C_DD1D);
    (0..n).map(|_| (rng.next() >> 32) as u32).collect()
}

/// xorshift64*: fast, deterministic test data.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stats_by_hand() {
        // 2, 4, 4, 4, 5, 5, 7, 9: mean 5, squared deviations sum to 32,
        // sample variance 32 / 7.
        let s = Stats::of(&[2.0, 4.0, 4.0, 4.0, 5.0, 5.0, 7.0, 9.0]);
        assert_eq!(s.runs, 8);
        assert_eq!(s.min, 2.0);
        assert_eq!(s.max, 9.0);
        assert_eq!(s.mean, 5.0);
        assert!((s.sigma - (32.0f64 / 7.0).sqrt()).abs() < 1e-12);

        let one = Stats::of(&[3.5]);
        assert_eq!(
            (one.runs, one.min, one.max, one.mean, one.sigma),
            (1, 3.5, 3.5, 3.5, 0.0)
        );
        assert_eq!(Stats::of(&[]), Stats::default());
    }

    #[test]
    fn throughput_from_seconds() {
        // 2 MB in 1 s and in 4 s: 2 and 0.5 MB/s.
        let m = Measurement::from_seconds(2_000_000, &[1.0, 4.0]);
        assert_eq!(m.seconds.mean, 2.5);
        assert_eq!(m.mb_s.min, 0.5);
        assert_eq!(m.mb_s.max, 2.0);
        assert_eq!(m.mb_s.mean, 1.25);
        assert!((m.mb_s.sigma - (2.0 * 0.75f64 * 0.75).sqrt()).abs() < 1e-12);
    }

    #[test]
    fn byte_sizes_read_well() {
        assert_eq!(human_bytes(1), "1 B");
        assert_eq!(human_bytes(512), "512 B");
        assert_eq!(human_bytes(64 << 10), "64 KiB");
        assert_eq!(human_bytes(16 << 20), "16 MiB");
        assert_eq!(human_bytes(3 << 29), "1.5 GiB");
    }

    #[test]
    fn dd_reports_parse() {
        let gnu = "256+0 records in\n256+0 records out\n\
                   268435456 bytes (268 MB, 256 MiB) copied, 0.0876 s, 3.1 GB/s\n";
        assert_eq!(parse_dd(gnu), Some((268_435_456, 0.0876)));
        let busybox = "1+0 records in\n1+0 records out\n\
                       1048576 bytes (1.0MB) copied, 0.001234 seconds, 810.4MB/s\n";
        assert_eq!(parse_dd(busybox), Some((1_048_576, 0.001234)));
        assert_eq!(parse_dd("dd: nothing\n"), None);
    }

    #[test]
    fn u16_sum_by_hand() {
        let v: Vec<u8> = [1u16, 2, 65535, 300]
            .iter()
            .flat_map(|x| x.to_le_bytes())
            .collect();
        assert_eq!(sum_u16(&v), 1 + 2 + 65535 + 300);
        let big = vec![0xFFu8; 3 << 17];
        assert_eq!(sum_u16(&big), 65535 * (3 << 16));
    }

    #[test]
    fn every_experiment_runs_on_tiny_sizes() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("bench");
        let cfg = BenchConfig {
            dir: dir.clone(),
            size: 1, // rounds up to 1 MiB
            runs: 2,
            byte_read_cap: 4096,
            write_ints: 1000,
            text_ints: 1000,
            // Never drop the whole machine's cache from a test.
            drop_caches: false,
        };
        let bench = Bench::prepare(cfg).unwrap();
        assert_eq!(bench.file_size(), MIB as u64);
        assert_eq!(bench.eviction(), Eviction::Fadvise);
        assert!((0.0..=1.0).contains(&bench.resident_after_eviction()));

        let a = bench.buffer_sizes(&[1, 4096, 16 * MIB]).unwrap();
        assert_eq!(a.len(), 3);
        assert_eq!(a[0].times.cold.bytes, 4096);
        assert_eq!(a[2].times.warm.bytes, MIB as u64);
        assert_eq!(a[1].times.warm.mb_s.runs, 2);
        assert_eq!(a[1].times.cold.seconds.runs, 2);

        let b = bench.write_calls().unwrap();
        assert_eq!(b.ints, 1000);
        assert_eq!(b.bulk.bytes, 4000);
        assert_eq!(b.per_call.seconds.runs, 2);

        let c = bench.text_vs_binary().unwrap();
        assert_eq!(c.binary_bytes, 4000);
        assert!(c.text_bytes > c.binary_bytes);
        assert_eq!(c.text_write.bytes, c.text_bytes);
        assert_eq!(c.text_read.cold.bytes, c.text_bytes);

        // The interfaces check each other's bytes (an error if they differ).
        let d = bench.interfaces(&[KIB, 64 * KIB]).unwrap();
        assert_eq!(d.len(), 8);
        let direct_1k = &d[3];
        assert_eq!(direct_1k.interface, Interface::Direct);
        assert!(direct_1k.times.is_none());
        assert!(direct_1k.note.as_deref().unwrap().contains("alignment"));
        assert!(d[..3].iter().all(|r| r.times.is_some()));

        // Compares the sequential and overlapped sums internally.
        let f = bench.overlap_scan(64 * KIB, 2).unwrap();
        assert_eq!(f.values, MIB as u64 / 2);
        assert!(f.rounds >= 1);
        assert!(f.speedup() > 0.0 && f.speedup_best() > 0.0);
        assert_eq!(f.overlapped.seconds.runs, 2);

        // Compares every path's sum internally; dd may be missing.
        let g = bench.column_scan(64 * KIB, 2).unwrap();
        assert_eq!(g.values, MIB as u64 / 2);
        assert_eq!(g.scans.len(), 4);
        let pread = g.scan(ScanPath::Pread).unwrap();
        assert_eq!(pread.cold.mb_s.runs, 2);
        assert!(g.scan(ScanPath::Mmap).is_some());
        assert!(g.scan(ScanPath::Inline).is_some());
        assert_eq!(g.memcpy.bytes, MIB as u64);
        assert!(g.warm_vs_memcpy(pread, true) > 0.0);
        match g.dd {
            Some(dd) => {
                assert_eq!(dd.reported.cold.seconds.runs, 2);
                assert_eq!(dd.wall.warm.bytes, MIB as u64);
                assert!(g.cold_vs_dd(pread, true, false).unwrap() > 0.0);
            }
            None => assert!(g.dd_note.is_some()),
        }

        drop(bench);
        assert!(!dir.exists(), "the bench removes what it made");
    }
}
