//! What the experiments measure and return: statistics over repeated
//! runs, warm and cold pairs, the configuration, and one result type per
//! study.

use microtab_io::ReadPath;
use serde::Serialize;
use std::path::PathBuf;

pub(super) const KIB: usize = 1 << 10;
pub(super) const MIB: usize = 1 << 20;

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
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize)]
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
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize)]
pub struct Measurement {
    /// Bytes moved per run.
    pub bytes: u64,
    /// Wall-clock seconds per run.
    pub seconds: Stats,
    /// Throughput per run in MB/s (10^6 bytes per second).
    #[serde(rename = "mb_per_s")]
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
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize)]
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
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct BufferSizeResult {
    /// Bytes per `read` call (1: unbuffered one-byte reads).
    pub buffer: usize,
    /// Warm and cold measurements.
    #[serde(flatten)]
    pub times: WarmCold,
}

/// Writing integers one call at a time vs in bulk.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct WriteCallsResult {
    /// Integers (little-endian `u32`) written per run.
    pub ints: usize,
    /// One `write` system call per integer.
    #[serde(rename = "one_write_per_int")]
    pub per_call: Measurement,
    /// One call per integer into a `BufWriter` (default 8 KiB buffer).
    #[serde(rename = "bufwriter_per_int")]
    pub buffered: Measurement,
    /// All integers in one `write_all`.
    #[serde(rename = "one_bulk_write")]
    pub bulk: Measurement,
}

/// Text (formatted) vs binary (unformatted) files of the same integers.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
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

pub(super) fn rate_ratio(num: &Stats, den: &Stats, best: bool) -> f64 {
    if best {
        num.max / den.max.max(1e-12)
    } else {
        num.mean / den.mean.max(1e-12)
    }
}

pub(super) fn ratio(num: &Stats, den: &Stats, best: bool) -> f64 {
    let (a, b) = if best {
        (num.min, den.min)
    } else {
        (num.mean, den.mean)
    };
    a / b.max(1e-12)
}
