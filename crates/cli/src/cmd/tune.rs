//! `microtab tune`: measure the read settings that decide query speed on
//! this machine (read path, segment size, read-ahead depth, block size),
//! cold and warm, and write the winners to the settings file that every
//! later import and query reads.

use crate::render::{text_table, Align};
use crate::settings::{config_path, SettingsFile};
use anyhow::{Context, Result};
use microtab_engine::{run_with, Query, ReadPath, ScanOptions};
use microtab_store::{Dataset, DatasetWriter, Kind, Number, PhysType, Variable};
use serde_json::json;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// Arguments of `tune`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// Directory for the test dataset (put it on the disk your data lives on).
    #[arg(long, default_value = ".")]
    dir: PathBuf,
    /// Records in the test dataset (3 columns: 4 bytes per record).
    #[arg(long, default_value_t = 16_000_000)]
    rows: usize,
    /// Cold runs per candidate (median is used).
    #[arg(long, default_value_t = 5)]
    runs: usize,
    /// Measure and print, but do not write the settings file.
    #[arg(long)]
    dry_run: bool,
}

/// How cold runs empty the page cache.
#[derive(Clone, Copy, PartialEq)]
enum Evict {
    DropCaches,
    Fadvise,
}

fn evict(method: Evict, ds: &Dataset) {
    use microtab_io::cache;
    if method == Evict::DropCaches && cache::drop_caches().is_ok() {
        return;
    }
    for v in &ds.manifest().variables {
        // Best effort: a file that stays cached makes the cold run warmer,
        // which the residency check of the run reports.
        let _ = cache::evict(&ds.dir().join(&v.file));
    }
}

fn eviction_method() -> Evict {
    if microtab_io::cache::can_drop_caches() {
        Evict::DropCaches
    } else {
        Evict::Fadvise
    }
}

/// Writes a 3-column test dataset (two u8 codes, a u16 weight).
fn make_dataset(dir: &Path, rows: usize) -> Result<PathBuf> {
    let target = dir.join(format!(".microtab-tune-{}.mtab", std::process::id()));
    let mut w = DatasetWriter::create(&target, false)?;
    let mut x = 0x9E37_79B9_7F4A_7C15u64;
    let mut next = move || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    let chunk = 1 << 20;
    for (name, ty, hi) in [
        ("A", PhysType::U8, 11i64),
        ("B", PhysType::U8, 8),
        ("W", PhysType::U16, 6000),
    ] {
        let mut c = w.column_writer(name, ty)?;
        let mut done = 0;
        while done < rows {
            let n = chunk.min(rows - done);
            if ty == PhysType::U8 {
                let v: Vec<u8> = (0..n).map(|_| (next() % (hi as u64 + 1)) as u8).collect();
                c.append(&v)?;
            } else {
                let v: Vec<u16> = (0..n)
                    .map(|_| 100 + (next() % (hi as u64 - 99)) as u16)
                    .collect();
                c.append(&v)?;
            }
            done += n;
        }
        let mut var = Variable::new(name, Kind::Int, ty);
        let lo = if ty == PhysType::U8 { 0 } else { 100 };
        (var.min, var.max) = (Some(Number::Int(lo)), Some(Number::Int(hi)));
        w.add_variable(c.finish(var)?);
    }
    Ok(w.commit(rows as u64)?)
}

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

fn measure(
    ds: &Dataset,
    q: &Query,
    o: &ScanOptions,
    runs: usize,
    cold: Option<Evict>,
) -> Result<Duration> {
    let mut t = Vec::new();
    if cold.is_none() {
        run_with(ds, q, o)?; // fill the cache
    }
    for _ in 0..runs.max(1) {
        if let Some(m) = cold {
            evict(m, ds);
        }
        let s = Instant::now();
        run_with(ds, q, o)?;
        t.push(s.elapsed());
    }
    Ok(median(t))
}

/// Runs the measurements and writes the settings file.
pub fn run(a: Args) -> Result<()> {
    let started = Instant::now();
    let evict_method = eviction_method();
    eprintln!(
        "tune: {} records in {} (cold runs: {})",
        a.rows,
        a.dir.display(),
        match evict_method {
            Evict::DropCaches => "page cache dropped via /proc/sys/vm/drop_caches",
            Evict::Fadvise => "files evicted with posix_fadvise(DONTNEED) (not root)",
        }
    );
    let path = make_dataset(&a.dir, a.rows).context("cannot write the test dataset")?;
    let result = tune(&path, &a, evict_method);
    let _ = std::fs::remove_dir_all(&path);
    let (best, rows, warm_mmap, warm_pread, warm_inline) = result?;
    let mb = (a.rows * 4) as f64 / 1e6;
    let mut table = Vec::new();
    for (label, cold) in &rows {
        table.push(vec![
            label.clone(),
            format!("{:.1}", cold.as_secs_f64() * 1e3),
            format!("{:.0}", mb / cold.as_secs_f64()),
        ]);
    }
    print!(
        "{}",
        text_table(
            &["cold candidate".to_string(), "ms".into(), "MB/s".into()],
            &table,
            &[Align::Left, Align::Right, Align::Right]
        )
    );
    println!(
        "warm: mmap {:.1} ms, pread stream {:.1} ms, inline pread {:.1} ms",
        warm_mmap.as_secs_f64() * 1e3,
        warm_pread.as_secs_f64() * 1e3,
        warm_inline.as_secs_f64() * 1e3
    );
    // `auto` reads warm columns inline and cold ones inline or streamed
    // (by the device's read-ahead, see `exec::cold_path`): chosen when
    // inline wins warm and the cold winner is the one `auto` would take
    // here; otherwise the cold winner itself.
    let auto_cold = microtab_io::auto_cold_path(&a.dir);
    let read_path = match best.read_path {
        p if p == auto_cold && warm_inline <= warm_pread.min(warm_mmap) => ReadPath::Auto,
        p => p,
    };
    let file = SettingsFile {
        read_path: read_path.name().into(),
        block_size: best.block_size,
        segment_bytes: best.segment_bytes,
        readahead_segments: best.readahead_segments,
        tuned: Some(json!({
            "rows": a.rows,
            "dir": a.dir.display().to_string(),
            "eviction": if evict_method == Evict::DropCaches { "drop_caches" } else { "fadvise" },
            "cold_ms": rows.iter().map(|(l, d)| json!({"candidate": l, "ms": d.as_secs_f64() * 1e3})).collect::<Vec<_>>(),
            "warm_ms": {"mmap": warm_mmap.as_secs_f64() * 1e3, "pread": warm_pread.as_secs_f64() * 1e3, "inline": warm_inline.as_secs_f64() * 1e3},
            "unix_time": std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or(0),
        })),
    };
    println!(
        "chosen: read path {}, block {} B, segment {} B, read-ahead {} segments ({:.1} s)",
        file.read_path,
        file.block_size,
        file.segment_bytes,
        file.readahead_segments,
        started.elapsed().as_secs_f64()
    );
    if a.dry_run {
        return Ok(());
    }
    let cfg = config_path();
    if let Some(dir) = cfg.parent() {
        std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    }
    let mut text = serde_json::to_vec_pretty(&file)?;
    text.push(b'\n');
    microtab_io::write_file_atomic(&cfg, &text)?;
    println!("wrote {}", cfg.display());
    Ok(())
}

fn consider(
    best: &mut Option<(ScanOptions, Duration)>,
    rows: &mut Vec<(String, Duration)>,
    label: String,
    o: ScanOptions,
    d: Duration,
) {
    rows.push((label, d));
    if best.as_ref().is_none_or(|(_, b)| d < *b) {
        *best = Some((o, d));
    }
}

type TuneResult = (
    ScanOptions,
    Vec<(String, Duration)>,
    Duration,
    Duration,
    Duration,
);

fn tune(path: &Path, a: &Args, ev: Evict) -> Result<TuneResult> {
    let ds = Dataset::open(path)?;
    let q = Query {
        group_by: vec!["A".into(), "B".into()],
        weight: Some("W".into()),
        ..Query::default()
    };
    let mut rows = Vec::new();
    let mut best: Option<(ScanOptions, Duration)> = None;
    let base = ScanOptions::default();
    // Segment size x read-ahead depth for large preads.
    for seg in [256 << 10, 1 << 20, 4 << 20] {
        for depth in [1, 2, 4] {
            let o = ScanOptions {
                read_path: ReadPath::Pread,
                segment_bytes: seg,
                block_size: seg,
                readahead_segments: depth,
                ..base.clone()
            };
            let d = measure(&ds, &q, &o, a.runs, Some(ev))?;
            consider(
                &mut best,
                &mut rows,
                format!("pread segment {} KiB, read-ahead {depth}", seg >> 10),
                o,
                d,
            );
        }
    }
    // Block size within the best segment.
    let seg_best = best
        .as_ref()
        .map(|(o, _)| o.clone())
        .unwrap_or(base.clone());
    for block in [64 << 10, 256 << 10] {
        if block >= seg_best.segment_bytes {
            continue;
        }
        let o = ScanOptions {
            block_size: block,
            ..seg_best.clone()
        };
        let d = measure(&ds, &q, &o, a.runs, Some(ev))?;
        let label = format!(
            "pread segment {} KiB in {} KiB blocks",
            o.segment_bytes >> 10,
            block >> 10
        );
        consider(&mut best, &mut rows, label, o, d);
    }
    // The workers' own morsel reads, relying on the kernel's read-ahead.
    {
        let o = ScanOptions {
            read_path: ReadPath::Inline,
            ..seg_best.clone()
        };
        let d = measure(&ds, &q, &o, a.runs, Some(ev))?;
        consider(&mut best, &mut rows, "inline morsel preads".into(), o, d);
    }
    for (label, p) in [("O_DIRECT", ReadPath::Direct), ("mmap", ReadPath::Mmap)] {
        let o = ScanOptions {
            read_path: p,
            ..seg_best.clone()
        };
        match measure(&ds, &q, &o, a.runs, Some(ev)) {
            Ok(d) => {
                let l = format!("{label}, segment {} KiB", o.segment_bytes >> 10);
                consider(&mut best, &mut rows, l, o, d)
            }
            Err(e) => eprintln!("tune: {label} not usable here: {e}"),
        }
    }
    let (best, _) = best.expect("measured at least one candidate");
    let warm = |p| ScanOptions {
        read_path: p,
        ..best.clone()
    };
    let warm_mmap = measure(&ds, &q, &warm(ReadPath::Mmap), 5, None)?;
    let warm_pread = measure(&ds, &q, &warm(ReadPath::Pread), 5, None)?;
    let warm_inline = measure(&ds, &q, &warm(ReadPath::Inline), 5, None)?;
    Ok((best, rows, warm_mmap, warm_pread, warm_inline))
}
