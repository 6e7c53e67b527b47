//! The caller's fold (`Query::fold`, `fold_rows`) against a plain loop
//! over the records written: each record the query counts (the filter
//! passed, a category of every grouping variable, the weight present) is
//! handed over once, with its cell and its values in displayed units
//! (decimals applied; a missing code, an empty value as `NaN`), over
//! enough records for many morsels and both workers.

mod common;

use microtab_engine::{
    fold_rows, parse_filter, run_partial, state_of, Fold, FoldRows, FoldState, Query, ScanOptions,
};
use microtab_store::Dataset;
use std::any::Any;
use std::fmt::Write;
use std::sync::Arc;

struct Rec {
    a: Option<i64>,
    b: i64,
    x: Option<i64>, // hundredths; None: empty
    w: i64,
}

fn records() -> Vec<Rec> {
    let mut next = common::xorshift(0x2545_F491_4F6C_DD1Du64);
    (0..300_000)
        .map(|_| {
            let r = next();
            Rec {
                a: (!r.is_multiple_of(13)).then_some(1 + (r >> 8) as i64 % 5),
                b: (r >> 16) as i64 % 3,
                // -999.99 is a missing code.
                x: match r % 31 {
                    0 => None,
                    1 => Some(-99999),
                    _ => Some((r >> 24) as i64 % 2_000_000 - 1_000_000),
                },
                w: 1 + (r >> 40) as i64 % 500,
            }
        })
        .collect()
}

fn dataset(recs: &[Rec]) -> (tempfile::TempDir, Dataset) {
    let mut t = String::from("A,B,X,W\n");
    for r in recs {
        let a = r.a.map(|a| a.to_string()).unwrap_or_default();
        let x = r.x.map_or(String::new(), |x| {
            let s = if x < 0 { "-" } else { "" };
            format!("{s}{}.{:02}", x.abs() / 100, x.abs() % 100)
        });
        writeln!(t, "{a},{},{x},{}", r.b, r.w).unwrap();
    }
    common::import("f", &t, &[("X", &["-999.99"])])
}

/// Per cell: records, records with X, Σ X, Σ W·X (X in displayed units).
#[derive(Default)]
struct Sums {
    cells: Vec<[f64; 4]>,
}

impl FoldState for Sums {
    fn add(&mut self, rows: &FoldRows<'_>) {
        for (i, &c) in rows.cells.iter().enumerate() {
            let c = c as usize;
            if c >= self.cells.len() {
                self.cells.resize(c + 1, [0.0; 4]);
            }
            let (x, w) = (rows.values[0][i], rows.values[1][i]);
            let s = &mut self.cells[c];
            s[0] += 1.0;
            if !x.is_nan() {
                s[1] += 1.0;
                s[2] += x;
                s[3] += w * x;
            }
        }
    }

    fn merge(&mut self, other: Box<dyn FoldState>) {
        let o: Sums = state_of(other);
        if o.cells.len() > self.cells.len() {
            self.cells.resize(o.cells.len(), [0.0; 4]);
        }
        for (a, b) in self.cells.iter_mut().zip(&o.cells) {
            for k in 0..4 {
                a[k] += b[k];
            }
        }
    }

    fn into_any(self: Box<Self>) -> Box<dyn Any> {
        self
    }
}

fn query() -> Query {
    Query {
        filter: parse_filter("B(0-1)").unwrap(),
        group_by: vec!["A".into(), "B".into()],
        weight: Some("W".into()),
        fold: Some(Fold {
            values: vec!["X".into(), "W".into()],
            make: Arc::new(|| Box::new(Sums::default()) as Box<dyn FoldState>),
        }),
        ..Query::default()
    }
}

/// Pools of one and of two workers.
fn pools() -> impl Iterator<Item = (usize, rayon::ThreadPool)> {
    [1, 2].into_iter().map(|threads| {
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(threads)
            .build()
            .unwrap();
        (threads, pool)
    })
}

#[test]
fn a_fold_sees_each_counted_record_once_with_its_values() {
    let recs = records();
    let (_dir, ds) = dataset(&recs);
    for (threads, pool) in pools() {
        let folded = pool
            .install(|| fold_rows(&ds, &query(), &ScanOptions::default()))
            .unwrap();
        let sums: Sums = state_of(folded.state.unwrap());
        // The planned categories: A 1..5, B 0..2 (the filter keeps 0, 1).
        let cats: Vec<Vec<String>> = folded
            .categories
            .iter()
            .map(|c| c.iter().map(|c| c.display.clone()).collect())
            .collect();
        let width = cats[1].len();
        let mut want = vec![[0.0f64; 4]; cats[0].len() * width];
        for r in &recs {
            let Some(a) = r.a else { continue };
            if r.b > 1 {
                continue;
            }
            let i = cats[0].iter().position(|c| *c == a.to_string()).unwrap();
            let j = cats[1].iter().position(|c| *c == r.b.to_string()).unwrap();
            let s = &mut want[i * width + j];
            s[0] += 1.0;
            if let Some(x) = r.x.filter(|&x| x != -99999) {
                let x = x as f64 / 100.0;
                s[1] += 1.0;
                s[2] += x;
                s[3] += r.w as f64 * x;
            }
        }
        let mut got = sums.cells.clone();
        got.resize(want.len(), [0.0; 4]);
        for (c, (g, w)) in got.iter().zip(&want).enumerate() {
            assert_eq!(g[0], w[0], "cell {c} records ({threads} threads)");
            assert_eq!(g[1], w[1], "cell {c} records with X");
            for k in 2..4 {
                assert!(
                    (g[k] - w[k]).abs() <= 1e-9 * w[k].abs().max(1.0),
                    "cell {c} sum {k}: {} vs {}",
                    g[k],
                    w[k]
                );
            }
        }
        // The cube of the same query counts the same records.
        let counted: u64 = folded.cube.counts.iter().sum();
        assert_eq!(counted as f64, want.iter().map(|s| s[0]).sum::<f64>());
    }
}

#[test]
fn a_fold_has_no_partial_result() {
    let recs = records();
    let (_dir, ds) = dataset(&recs[..1000]);
    let e = run_partial(&ds, &query(), &ScanOptions::default()).unwrap_err();
    assert!(e.to_string().contains("no partial result"), "{e}");
}

/// Counts records and ends the scan once it has `enough`.
struct Enough {
    seen: u64,
    enough: u64,
}

impl FoldState for Enough {
    fn add(&mut self, rows: &FoldRows<'_>) {
        self.seen += rows.cells.len() as u64;
    }
    fn merge(&mut self, other: Box<dyn FoldState>) {
        self.seen += state_of::<Enough>(other).seen;
    }
    fn into_any(self: Box<Self>) -> Box<dyn Any> {
        self
    }
    fn done(&self) -> bool {
        self.seen >= self.enough
    }
    fn stop(&self) -> bool {
        self.done()
    }
}

#[test]
fn a_fold_that_stops_ends_each_workers_scan() {
    let recs = records();
    let (_dir, ds) = dataset(&recs);
    for (threads, pool) in pools() {
        let q = Query {
            fold: Some(Fold {
                values: vec!["X".into()],
                make: Arc::new(|| {
                    Box::new(Enough {
                        seen: 0,
                        enough: 1000,
                    }) as Box<dyn FoldState>
                }),
            }),
            ..Query::default()
        };
        let folded = pool
            .install(|| fold_rows(&ds, &q, &ScanOptions::default()))
            .unwrap();
        let seen = folded.state.map(state_of::<Enough>).unwrap().seen;
        // Each worker stops after the morsel that gave it 1,000 records:
        // far fewer than the 300,000 records.
        assert!(
            (1000..=threads as u64 * 70_000).contains(&seen),
            "{seen} records seen ({threads} threads)"
        );
        // Its table is left incomplete (the caller wanted none).
        let counted: u64 = folded.cube.counts.iter().sum();
        assert!(counted < recs.len() as u64, "{counted}");
    }
}
