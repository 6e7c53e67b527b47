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
//!
//! Layout: the measured quantities and result types are in `results`, the
//! low-level reads and writes each experiment times in `primitives`, the
//! experiments themselves here.

mod primitives;
mod results;

use primitives::*;
pub use primitives::{human_bytes, sum_u16, work};
pub use results::*;

use microtab_io::cache::{drop_caches, evict as fadvise_dontneed, resident_fraction};
use microtab_io::{
    BlockWriter, ColumnSource, Error, IoConfig, ReadPath, Result, SegmentStream, ALIGN,
};
use std::cell::Cell;
use std::fs::File;
use std::io::{self, BufRead, BufReader, BufWriter, Write};
use std::path::{Path, PathBuf};
use std::time::Instant;

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
        // Root (on Linux): may empty the whole page cache.
        let root = microtab_io::cache::can_drop_caches();
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

    /// The test file read as one column of `u16` values.
    fn u16_column(&self) -> ColumnSource {
        ColumnSource {
            path: self.data.clone(),
            file: None,
            offset: 0,
            width: 2,
            unit_rows: 1,
        }
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
                    same_as_first(&mut reference, sum, |want| {
                        format!(
                            "{} read different bytes (checksum {sum:#x}, expected {want:#x})",
                            interface.name()
                        )
                    })
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
        let src = self.u16_column();
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
        let src = self.u16_column();
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
                same_as_first(&mut reference, sum, |want| {
                    format!("{} scan summed to {sum}, expected {want}", path.name())
                })
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

/// Checks that every way of reading the data gives the first one's `sum`
/// (`message` says what differed, given the expected sum).
fn same_as_first(
    reference: &mut Option<u64>,
    sum: u64,
    message: impl FnOnce(u64) -> String,
) -> io::Result<()> {
    let want = *reference.get_or_insert(sum);
    if sum == want {
        Ok(())
    } else {
        Err(io::Error::other(message(want)))
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
