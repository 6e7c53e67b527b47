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
    let mut t = String::from("A,X,W,H,P\n");
    for r in recs {
        let a = r.a.map(|a| a.to_string()).unwrap_or_default();
        writeln!(
            t,
            "{a},{},{}.{:02},{},{}",
            r.x,
            r.w / 100,
            r.w % 100,
            r.h,
            r.p
        )
        .unwrap();
    }
    common::import("s", &t, &[("X", &["9999"])])
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
        let mut psus: BTreeMap<i64, std::collections::BTreeSet<i64>> = BTreeMap::new();
        for r in &recs {
            psus.entry(r.h).or_default().insert(r.p);
        }
        let coef_h: BTreeMap<i64, [f64; 2]> = psus
            .iter()
            .map(|(&h, s)| {
                let n = s.len() as f64;
                (h, [n / (n - 1.0), 1.0 / (n - 1.0)])
            })
            .collect();
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
