//! No per-value system calls on import: `read` and `write` calls grow with
//! the number of blocks, not with the number of values. Counted from
//! `/proc/self/io`, so this file holds one test (its own process).

use microtab_ingest::{import_csv, CsvOptions};
use std::fmt::Write as _;

fn counters() -> (u64, u64) {
    let text = std::fs::read_to_string("/proc/self/io").expect("/proc/self/io");
    let get = |k: &str| -> u64 {
        text.lines()
            .find_map(|l| l.strip_prefix(k))
            .and_then(|v| v.trim().parse().ok())
            .expect("counter")
    };
    (get("syscr: "), get("syscw: "))
}

#[test]
fn import_calls_grow_with_blocks_not_values() {
    let dir = tempfile::tempdir().unwrap();
    let mut calls = Vec::new();
    for rows in [100_000usize, 400_000] {
        let csv = dir.path().join(format!("in{rows}.csv"));
        let mut text = String::from("A,B,C\n");
        for i in 0..rows {
            writeln!(text, "{},{},{}", i % 9, i % 1000, i).unwrap();
        }
        std::fs::write(&csv, &text).unwrap();
        let before = counters();
        let s = import_csv(
            &csv,
            &dir.path().join(format!("out{rows}.mtab")),
            false,
            &CsvOptions::default(),
        )
        .unwrap();
        assert_eq!(s.rows, rows as u64);
        let after = counters();
        calls.push((after.0 - before.0, after.1 - before.1));
    }
    let values = 400_000u64 * 3;
    let (r, w) = calls[1];
    // Blocks are MiB-sized: a handful of calls per column, never one per value.
    assert!(r + w < values / 1000, "{calls:?}");
    // Reads scale with the input's blocks (4x the data, at most ~4x the calls).
    assert!(calls[1].0 <= 5 * calls[0].0 + 20, "{calls:?}");
}
