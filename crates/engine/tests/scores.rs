//! The linear scores of a Taylor query (`TaylorQuery::scores`, what a
//! regression's and a contrast's variance rest on) against a plain loop:
//! each record adds `w·a_c + w·x·b_c` to its PSU's score, and the design
//! covariance is `Σ_h c_h Σ_j s_hj s_hj' − d_h S_h S_h'`. Checked on PSUs
//! stored together and apart, with a filter, missing values (a missing
//! code of the analysis variable, an empty group), weights with decimals
//! and an analysis variable far from 0 (shifted), whole and as partial
//! results over row ranges merged (the Dask path).

mod common;

use microtab_engine::{
    parse_filter, run, run_partial, Category, Query, ScanOptions, Scores, TaylorQuery,
};
use microtab_store::Dataset;
use std::collections::BTreeMap;
use std::fmt::Write;
use std::sync::Arc;

struct Rec {
    a: Option<i64>,
    x: i64,
    w: i64, // hundredths
    h: i64,
    p: i64,
}

fn records(contiguous: bool) -> Vec<Rec> {
    let mut next = common::xorshift(0x9E37_79B9_7F4A_7C15u64);
    let mut v: Vec<Rec> = (0..20_000)
        .map(|i| {
            let r = next();
            Rec {
                a: (!r.is_multiple_of(17)).then_some(1 + (r >> 8) as i64 % 4),
                // Far from 0 for its spread (the engine shifts it); 9999
                // is a missing code.
                x: if r.is_multiple_of(29) {
                    9999
                } else {
                    1_000_000 + (r >> 20) as i64 % 500
                },
                w: 1 + (r >> 32) as i64 % 9000,
                h: 1 + (i / 5000) as i64,
                p: (i / 7) as i64,
            }
        })
        .collect();
    if !contiguous {
        // Rows of a PSU apart (sorted by a key that mixes them).
        v.sort_by_key(|r| (r.w * 7919) % 10007);
    }
    v
}

fn dataset(recs: &[Rec]) -> (tempfile::TempDir, Dataset) {
    dataset_coded(recs, 9999)
}

/// The dataset with `code` for X's missing values (9999 in `recs`).
fn dataset_coded(recs: &[Rec], code: i64) -> (tempfile::TempDir, Dataset) {
    let mut t = String::from("A,X,W,H,P\n");
    for r in recs {
        let a = r.a.map(|a| a.to_string()).unwrap_or_default();
        writeln!(
            t,
            "{a},{},{}.{:02},{},{}",
            if r.x == 9999 { code } else { r.x },
            r.w / 100,
            r.w % 100,
            r.h,
            r.p
        )
        .unwrap();
    }
    common::import("s", &t, &[("X", &[&code.to_string()])])
}

/// The coefficients of a cell of category `a`.
fn coef(a: f64) -> (Vec<f64>, Vec<f64>) {
    (vec![1.0, a, -a * 1e6], vec![a, 0.5, 1.0])
}

fn query(strata_keys: Vec<i64>, coef_h: Vec<[f64; 2]>, contiguous: bool) -> Query {
    Query {
        filter: parse_filter("A(1-3)").unwrap(),
        group_by: vec!["A".into()],
        weight: Some("W".into()),
        measure: Some("X".into()),
        taylor: Some(TaylorQuery {
            strata: Some("H".into()),
            cluster: Some("P".into()),
            strata_keys,
            coef: coef_h,
            contiguous,
            scores: Some(Scores {
                len: 3,
                of: Arc::new(|cats: &[&Category]| {
                    let a: f64 = cats[0].display.parse().ok()?;
                    Some(coef(a))
                }),
            }),
            ..TaylorQuery::default()
        }),
        ..Query::default()
    }
}

/// The covariance by a plain loop.
fn reference(recs: &[Rec], coef_h: &BTreeMap<i64, [f64; 2]>) -> Vec<f64> {
    let mut psu: BTreeMap<(i64, i64), [f64; 3]> = BTreeMap::new();
    for r in recs {
        let Some(a) = r.a.filter(|a| (1..=3).contains(a)) else {
            continue;
        };
        if r.x == 9999 {
            continue;
        }
        let (ca, cb) = coef(a as f64);
        let w = r.w as f64 / 100.0;
        let s = psu.entry((r.h, r.p)).or_insert([0.0; 3]);
        for j in 0..3 {
            s[j] += w * ca[j] + w * r.x as f64 * cb[j];
        }
    }
    let mut v = vec![0.0; 9];
    let mut total: BTreeMap<i64, [f64; 3]> = BTreeMap::new();
    for ((h, _), s) in &psu {
        let c = coef_h[h][0];
        for i in 0..3 {
            for j in 0..3 {
                v[i * 3 + j] += c * s[i] * s[j];
            }
        }
        let t = total.entry(*h).or_insert([0.0; 3]);
        for j in 0..3 {
            t[j] += s[j];
        }
    }
    for (h, t) in &total {
        let d = coef_h[h][1];
        for i in 0..3 {
            for j in 0..3 {
                v[i * 3 + j] -= d * t[i] * t[j];
            }
        }
    }
    v
}

/// Each stratum's `(c_h, d_h)` over the whole file: `c_h = n/(n − 1)`,
/// `d_h = c_h/n`, `n` its PSUs.
fn strata_coef(recs: &[Rec]) -> BTreeMap<i64, [f64; 2]> {
    let mut psus: BTreeMap<i64, std::collections::BTreeSet<i64>> = BTreeMap::new();
    for r in recs {
        psus.entry(r.h).or_default().insert(r.p);
    }
    psus.iter()
        .map(|(&h, s)| {
            let n = s.len() as f64;
            (h, [n / (n - 1.0), 1.0 / (n - 1.0)])
        })
        .collect()
}

fn close(got: &[f64], want: &[f64]) {
    let scale = want.iter().fold(0.0f64, |m, v| m.max(v.abs()));
    for (g, w) in got.iter().zip(want) {
        assert!((g - w).abs() <= 1e-9 * scale, "{got:?} vs {want:?}");
    }
}

#[test]
fn scores_match_a_plain_loop_whole_and_merged() {
    for contiguous in [true, false] {
        let recs = records(contiguous);
        let (_dir, ds) = dataset(&recs);
        // Each stratum's PSUs over the whole file: c_h = n/(n − 1), d_h = c_h/n.
        let coef_h = strata_coef(&recs);
        let q = query(
            coef_h.keys().copied().collect(),
            coef_h.values().copied().collect(),
            contiguous,
        );
        let want = reference(&recs, &coef_h);
        let cube = run(&ds, &q).unwrap();
        let t = cube.taylor.as_ref().unwrap();
        close(t.scores.as_ref().unwrap(), &want);
        // The domain's PSUs and strata (records in A 1-3 with X).
        let domain: std::collections::BTreeSet<(i64, i64)> = recs
            .iter()
            .filter(|r| r.a.is_some_and(|a| a <= 3) && r.x != 9999)
            .map(|r| (r.h, r.p))
            .collect();
        assert_eq!(t.domain_psus, domain.len() as u64);
        assert_eq!(t.domain_strata, 4);
        // Partial results over three row ranges, merged (through JSON,
        // as Dask sends them).
        let n = ds.rows();
        let mut merged: Option<microtab_engine::Partial> = None;
        for r in [0..n / 3, n / 3..2 * n / 3, 2 * n / 3..n] {
            let p = run_partial(
                &ds,
                &Query {
                    rows: Some(r),
                    ..q.clone()
                },
                &ScanOptions::default(),
            )
            .unwrap();
            let p: microtab_engine::Partial =
                serde_json::from_str(&serde_json::to_string(&p).unwrap()).unwrap();
            merged = Some(match merged {
                Some(m) => m.merge(p).unwrap(),
                None => p,
            });
        }
        let cube = merged.unwrap().finish();
        let t = cube.taylor.as_ref().unwrap();
        close(t.scores.as_ref().unwrap(), &want);
        assert_eq!(t.domain_psus, domain.len() as u64);
    }
}

/// The full table of the cells' `(W, Y)` totals (`TaylorQuery::full_values`:
/// differences of domain means) against a plain loop over the PSUs' totals
/// per category, `Y` the sum of `w·(x − shift)`.
#[test]
fn full_tables_of_values_match_a_plain_loop() {
    for contiguous in [true, false] {
        let recs = records(contiguous);
        // A missing code within twice the values' spread: the stored
        // range's middle is far from 0 for its width, and X is summed
        // less it.
        let (_dir, ds) = dataset_coded(&recs, 1_999_999);
        let coef_h = strata_coef(&recs);
        let mut q = query(
            coef_h.keys().copied().collect(),
            coef_h.values().copied().collect(),
            contiguous,
        );
        let t = q.taylor.as_mut().unwrap();
        t.scores = None;
        t.margins = vec![microtab_engine::Margin {
            keep: vec![false],
            skip_missing: false,
        }];
        t.full = Some(0);
        t.full_values = true;
        let cube = run(&ds, &q).unwrap();
        let tc = cube.taylor.as_ref().unwrap();
        assert!(tc.shift > 1e6, "X is summed less its range's middle");
        let cats: Vec<i64> = cube.dims[0]
            .categories
            .iter()
            .map(|c| c.display.parse().unwrap())
            .collect();
        let k = 2 * cats.len();
        // Per PSU, each category's (W, Y) at 2·i and 2·i + 1.
        let mut psu: BTreeMap<(i64, i64), Vec<f64>> = BTreeMap::new();
        for r in &recs {
            let Some(a) = r.a.filter(|a| (1..=3).contains(a)) else {
                continue;
            };
            if r.x == 9999 {
                continue;
            }
            let i = cats.iter().position(|&c| c == a).unwrap();
            let w = r.w as f64 / 100.0;
            let s = psu.entry((r.h, r.p)).or_insert(vec![0.0; k]);
            s[2 * i] += w;
            s[2 * i + 1] += w * (r.x as f64 - tc.shift);
        }
        let mut want = vec![0.0; k * k];
        let mut total: BTreeMap<i64, Vec<f64>> = BTreeMap::new();
        for ((h, _), s) in &psu {
            for i in 0..k {
                for j in 0..k {
                    want[i * k + j] += coef_h[h][0] * s[i] * s[j];
                }
            }
            let t = total.entry(*h).or_insert(vec![0.0; k]);
            t.iter_mut().zip(s).for_each(|(t, s)| *t += s);
        }
        for (h, t) in &total {
            for i in 0..k {
                for j in 0..k {
                    want[i * k + j] -= coef_h[h][1] * t[i] * t[j];
                }
            }
        }
        let full = tc.full.as_ref().unwrap();
        assert_eq!(full.len(), 1);
        close(&full[0], &want);
        // Each cell's own variances are the table's diagonal blocks.
        for (i, c) in tc.cell.iter().enumerate() {
            let b = &full[0];
            close(
                c,
                &[
                    b[2 * i * k + 2 * i],
                    b[2 * i * k + 2 * i + 1],
                    b[(2 * i + 1) * k + 2 * i + 1],
                ],
            );
        }
        // The margin (all groups) read off the table equals its sums
        // PSU by PSU (no full table asked for).
        let mut plain = q.clone();
        plain.taylor.as_mut().unwrap().full = None;
        plain.taylor.as_mut().unwrap().full_values = false;
        let cube0 = run(&ds, &plain).unwrap();
        let t0 = cube0.taylor.as_ref().unwrap();
        close(&t0.margins[0].var[0], &tc.margins[0].var[0]);
        close(&t0.margins[0].cross, &tc.margins[0].cross);
        close(&t0.cell.concat(), &tc.cell.concat());
        // No partial result: the engine says so.
        let err = run_partial(&ds, &q, &ScanOptions::default()).unwrap_err();
        assert!(err.to_string().contains("no partial result"), "{err}");
    }
}

/// A table's margins (its total, rows, columns; with a control variable,
/// each control category's) read off the full tables of its cells'
/// weighted counts equal the margins summed PSU by PSU, whole and over
/// merged partial results (which sum them PSU by PSU).
#[test]
fn margins_read_off_the_full_tables_equal_their_sums() {
    let recs = records(true);
    let (_dir, ds) = dataset(&recs);
    let strata = strata_coef(&recs);
    let coef_h: Vec<[f64; 2]> = strata.values().copied().collect();
    let margin = |keep: Vec<bool>| microtab_engine::Margin {
        keep,
        skip_missing: false,
    };
    for control in [false, true] {
        let with = |r: bool, c: bool| {
            let mut k = if control { vec![true] } else { Vec::new() };
            k.extend([r, c]);
            k
        };
        let mut group_by = if control {
            vec!["H".to_string()]
        } else {
            Vec::new()
        };
        group_by.extend([
            "A".to_string(),
            "P(r: 0-999; 1000-1999; 2000-*)".to_string(),
        ]);
        let q = Query {
            filter: Vec::new(),
            group_by,
            weight: Some("W".into()),
            taylor: Some(TaylorQuery {
                strata: Some("H".into()),
                cluster: Some("P".into()),
                strata_keys: strata.keys().copied().collect(),
                coef: coef_h.clone(),
                contiguous: true,
                margins: vec![
                    margin(with(false, false)),
                    margin(with(true, false)),
                    margin(with(false, true)),
                ],
                full: Some(0),
                ..TaylorQuery::default()
            }),
            ..Query::default()
        };
        let mut plain = q.clone();
        plain.taylor.as_mut().unwrap().full = None;
        let (a, b) = (run(&ds, &q).unwrap(), run(&ds, &plain).unwrap());
        let merged = |q: &Query| {
            let n = ds.rows();
            let mut m: Option<microtab_engine::Partial> = None;
            for r in [0..n / 2, n / 2..n] {
                let q = Query {
                    rows: Some(r),
                    ..q.clone()
                };
                let p = run_partial(&ds, &q, &ScanOptions::default()).unwrap();
                m = Some(match m {
                    Some(m) => m.merge(p).unwrap(),
                    None => p,
                });
            }
            m.unwrap().finish()
        };
        let c = merged(&q);
        let (ta, tb, tc) = (a.taylor.unwrap(), b.taylor.unwrap(), c.taylor.unwrap());
        assert!(ta.full.is_some() && tb.full.is_none());
        for (x, y) in [(&ta, &tb), (&tc, &tb)] {
            for (mx, my) in x.margins.iter().zip(&y.margins) {
                close(&mx.var.concat(), &my.var.concat());
                close(&mx.cross, &my.cross);
                assert_eq!(mx.group, my.group);
            }
            close(&x.cell.concat(), &y.cell.concat());
        }
        // The full tables whole and merged agree too.
        close(
            &ta.full.as_ref().unwrap().concat(),
            &tc.full.as_ref().unwrap().concat(),
        );
    }
}
