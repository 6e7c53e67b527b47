//! Import round trips on hand-made files, with chunks small enough that
//! type widening happens across chunk boundaries.

mod common;

use common::values;
use microtab_ingest::{import_csv, CsvOptions, Error};
use microtab_store::{Dataset, Kind, PhysType};
use std::fmt::Write;

fn small_chunks() -> CsvOptions {
    CsvOptions {
        chunk_size: 4096,
        sample_rows: 10,
        ..CsvOptions::default()
    }
}

#[test]
fn widening_across_chunks_keeps_every_value() {
    let dir = tempfile::tempdir().unwrap();
    let csv = dir.path().join("w.csv");
    let mut text = String::from("A,B,C,S\n");
    let n: usize = 20_000;
    for i in 0..n {
        // A: small, then > 255, then negative; B: ints then decimals;
        // C: ints with a late empty field; S: growing dictionary.
        let a: i64 = if i < 5000 {
            (i % 200) as i64
        } else if i < 15000 {
            i as i64
        } else {
            -(i as i64)
        };
        let b = if i < 10000 {
            format!("{}", i % 7)
        } else {
            format!("{}.25", i % 7)
        };
        let c = if i == n - 1 {
            String::new()
        } else {
            format!("{}", i % 255)
        };
        writeln!(text, "{a},{b},{c},s{}", (i * 7919) % 300).unwrap();
    }
    std::fs::write(&csv, &text).unwrap();
    let target = dir.path().join("w.mtab");
    let s = import_csv(&csv, &target, false, &small_chunks()).unwrap();
    assert_eq!(s.rows, n as u64);
    let ds = Dataset::open(&target).unwrap();

    let a = ds.variable("A").unwrap();
    assert_eq!((a.ty, a.kind), (PhysType::I16, Kind::Int));
    let av = values(&ds, "A");
    assert_eq!(av[4999], (4999 % 200) as f64);
    assert_eq!(av[14999], 14999.0);
    assert_eq!(av[19999], -19999.0);

    let b = ds.variable("B").unwrap();
    assert_eq!((b.decimals, b.ty), (2, PhysType::U16));
    let bv = values(&ds, "B");
    assert_eq!(bv[9999], (9999 % 7 * 100) as f64);
    assert_eq!(bv[10000], (10000 % 7 * 100 + 25) as f64);

    // 0..=254 plus a null needs a free null code: u8 holds it (255).
    let c = ds.variable("C").unwrap();
    assert_eq!((c.ty, c.nulls, c.null_code), (PhysType::U8, 1, Some(255)));
    assert_eq!(values(&ds, "C")[n - 1], 255.0);

    let sv = ds.variable("S").unwrap().clone();
    assert_eq!((sv.kind, sv.ty), (Kind::String, PhysType::U16));
    let dict = ds.dictionary(&sv).unwrap();
    assert_eq!(dict.len(), 300);
    let mut sorted = dict.clone();
    sorted.sort();
    assert_eq!(dict, sorted);
    let codes = values(&ds, "S");
    for i in [0usize, 1, 777, 19999] {
        assert_eq!(dict[codes[i] as usize], format!("s{}", (i * 7919) % 300));
    }
}

#[test]
fn late_text_in_numeric_column_names_line_and_column() {
    let dir = tempfile::tempdir().unwrap();
    let csv = dir.path().join("bad.csv");
    let mut text = String::from("ID,AGE\n");
    for i in 0..3000 {
        writeln!(text, "{i},{}", i % 90).unwrap();
    }
    text.push_str("3000,abc\n");
    std::fs::write(&csv, &text).unwrap();
    let target = dir.path().join("bad.mtab");
    let e = import_csv(&csv, &target, false, &small_chunks()).unwrap_err();
    match &e {
        Error::Value {
            line, column, name, ..
        } => {
            assert_eq!((*line, *column, name.as_str()), (3002, 2, "AGE"));
        }
        other => panic!("{other}"),
    }
    assert!(
        e.to_string().contains("bad.csv: line 3002, column 2 (AGE)"),
        "{e}"
    );
    assert!(!target.exists());
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1);
}
