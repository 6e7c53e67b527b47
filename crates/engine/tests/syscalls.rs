//! No per-value system calls: a scan issues a number of `read` calls that
//! grows with the number of blocks, not with the number of values.
//!
//! Counted from `/proc/self/io` (`syscr`), so this file holds one test: the
//! harness runs it alone in its own process.

use microtab_engine::{run_with, Query, ReadPath, ScanOptions};
use microtab_store::{Dataset, DatasetWriter, Kind, Number, PhysType, Variable};
use std::path::Path;

fn syscr() -> u64 {
    let text = std::fs::read_to_string("/proc/self/io").expect("/proc/self/io");
    text.lines()
        .find_map(|l| l.strip_prefix("syscr: "))
        .and_then(|v| v.trim().parse().ok())
        .expect("syscr line")
}

fn dataset(dir: &Path, rows: usize) -> Dataset {
    let target = dir.join(format!("d{rows}.mtab"));
    let mut w = DatasetWriter::create(&target, false).unwrap();
    let codes: Vec<u8> = (0..rows).map(|i| (i % 7) as u8).collect();
    let weights: Vec<u16> = (0..rows).map(|i| (i % 1000) as u16 + 1).collect();
    let mut c = w.column_writer("G", PhysType::U8).unwrap();
    c.append(&codes).unwrap();
    let mut v = Variable::new("G", Kind::Int, PhysType::U8);
    (v.min, v.max) = (Some(Number::Int(0)), Some(Number::Int(6)));
    w.add_variable(c.finish(v).unwrap());
    let mut c = w.column_writer("W", PhysType::U16).unwrap();
    c.append(&weights).unwrap();
    let mut v = Variable::new("W", Kind::Int, PhysType::U16);
    (v.min, v.max) = (Some(Number::Int(1)), Some(Number::Int(1000)));
    w.add_variable(c.finish(v).unwrap());
    w.commit(rows as u64).unwrap();
    Dataset::open(&target).unwrap()
}

#[test]
fn scan_reads_grow_with_blocks_not_values() {
    let dir = tempfile::tempdir().unwrap();
    let opts = ScanOptions {
        read_path: ReadPath::Pread,
        block_size: 64 * 1024,
        ..ScanOptions::default()
    };
    let q = Query {
        group_by: vec!["G".into()],
        weight: Some("W".into()),
        ..Query::default()
    };
    let mut calls = Vec::new();
    let mut blocks = Vec::new();
    for rows in [1_000_000usize, 4_000_000] {
        let ds = dataset(dir.path(), rows);
        // Stored bytes (the columns are bit-packed: 3 and 10 bits a value).
        let bytes: u64 = ds.manifest().variables.iter().map(|v| v.bytes).sum();
        assert_eq!(bytes, (rows.div_ceil(1024) * 128 * (3 + 10)) as u64);
        blocks.push(bytes.div_ceil(64 * 1024));
        let before = syscr();
        let cube = run_with(&ds, &q, &opts).unwrap();
        calls.push(syscr() - before);
        // The answer is right too: every row counted once.
        assert_eq!(cube.counts.iter().sum::<u64>(), rows as u64);
    }
    // One call per 64 KiB block (plus a few per file and segment), never one per value.
    assert!(
        calls[1] <= blocks[1] + 200,
        "{calls:?} for {blocks:?} blocks"
    );
    assert!(calls[1] < 4_000_000 / 1000, "{calls:?}");
    // Four times the rows: the extra reads are about the extra blocks.
    let extra = (calls[1] - calls[0]) as f64 / (blocks[1] - blocks[0]) as f64;
    assert!(
        (0.8..=2.0).contains(&extra),
        "reads did not scale with blocks: {calls:?} for {blocks:?} blocks"
    );

    // The warm path: one read per column per 32 Ki-row morsel.
    let inline = ScanOptions {
        read_path: ReadPath::Inline,
        ..ScanOptions::default()
    };
    let mut calls = Vec::new();
    for rows in [1_000_000usize, 4_000_000] {
        let ds = Dataset::open(&dir.path().join(format!("d{rows}.mtab"))).unwrap();
        let before = syscr();
        let cube = run_with(&ds, &q, &inline).unwrap();
        calls.push(syscr() - before);
        assert_eq!(cube.counts.iter().sum::<u64>(), rows as u64);
    }
    let morsels = 4_000_000u64.div_ceil(32 * 1024);
    assert!(calls[1] <= 2 * morsels + 50, "{calls:?}");
    let ratio = calls[1] as f64 / calls[0] as f64;
    assert!(
        (3.0..=5.0).contains(&ratio),
        "inline reads did not scale with morsels: {calls:?}"
    );
}
