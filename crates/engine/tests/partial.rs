//! Partial results: a dataset split at random row boundaries into 1–64
//! ranges, each part's result serialized and read back, merged in random
//! order and grouping, equals the whole dataset's partial bit for bit; the
//! finished result equals the whole query's (bit for bit where the sums
//! are integers) and a scalar recomputation here; two separately imported
//! datasets (different string dictionaries) merge into the answer of the
//! dataset holding both.

use microtab_engine::{parse_filter, run_partial, run_with, Cube, Partial, Query, ScanOptions};
use microtab_ingest::{import_csv, CsvOptions};
use microtab_io::ReadPath;
use microtab_store::Dataset;
use std::collections::BTreeMap;

const ROWS: usize = 70_000;

struct Rec {
    a: Option<i64>,
    s: &'static str,
    c: i64,
    g: Option<f64>,
    w: Option<i64>,
    wd: i64,
    wf: f64,
    x: Option<i64>,
    xf: Option<f64>,
    h: Option<f64>,
    e: i64,
}

fn records(seed: u64, names: &[&'static str]) -> Vec<Rec> {
    let mut rng = fastrand::Rng::with_seed(seed);
    (0..ROWS)
        .map(|_| Rec {
            a: (rng.u32(0..29) != 0).then(|| rng.i64(1..=6)),
            s: names[rng.usize(0..names.len())],
            c: rng.i64(0..1500),
            g: (rng.u32(0..11) != 0).then(|| rng.i64(-40..40) as f64 * 0.37),
            w: (rng.u32(0..50) != 0).then(|| rng.i64(0..200)),
            wd: rng.i64(1..100_000),
            wf: rng.f64() * 1e3 + 1e-3,
            x: (rng.u32(0..13) != 0).then(|| rng.i64(-5_000..2_000_000)),
            xf: (rng.u32(0..17) != 0).then(|| (rng.f64() - 0.3) * 1e6),
            h: (rng.u32(0..7) != 0).then(|| rng.i64(-3..9) as f64 * 0.1),
            e: rng.i64(0..4_000_000_000) / 1000 * 1000,
        })
        .collect()
}

fn csv(recs: &[Rec]) -> String {
    let o = |v: Option<i64>| v.map(|v| v.to_string()).unwrap_or_default();
    let mut t = String::from("A,S,C,G,W,WD,WF,X,XF,H,E\n");
    for r in recs {
        t += &format!(
            "{},{},{},{},{},{}.{:02},{:e},{},{},{},{}\n",
            o(r.a),
            r.s,
            r.c,
            r.g.map(|g| format!("{g:.2}")).unwrap_or_default(),
            o(r.w),
            r.wd / 100,
            r.wd % 100,
            r.wf,
            o(r.x),
            r.xf.map(|x| format!("{x:e}")).unwrap_or_default(),
            r.h.map(|x| format!("{x:e}")).unwrap_or_default(),
            r.e,
        );
    }
    t
}

fn import(dir: &std::path::Path, name: &str, text: &str) -> Dataset {
    let src = dir.join(format!("{name}.csv"));
    std::fs::write(&src, text).unwrap();
    let target = dir.join(format!("{name}.mtab"));
    let opts = CsvOptions {
        missing: vec![("X".into(), vec!["-5000".into()])],
        ..CsvOptions::default()
    };
    import_csv(&src, &target, false, &opts).unwrap();
    Dataset::open(&target).unwrap()
}

fn query(group: &[&str], weight: Option<&str>, measure: Option<&str>, filter: &str) -> Query {
    Query {
        group_by: group.iter().map(|s| s.to_string()).collect(),
        weight: weight.map(str::to_string),
        measure: measure.map(str::to_string),
        filter: if filter.is_empty() {
            Vec::new()
        } else {
            parse_filter(filter).unwrap()
        },
        ..Query::default()
    }
}

/// The shapes tried: integer, decimal and float weights; integer and
/// float analysis variables; byte, wide, text and float groupings;
/// filters; no grouping.
fn shapes() -> Vec<Query> {
    vec![
        query(&["A"], None, None, ""),
        query(&["S", "A"], Some("W"), None, ""),
        query(&["C"], Some("WD"), None, "A(2-5)"),
        query(&["A", "S"], Some("WF"), None, ""),
        query(&["G"], Some("WF"), None, "C<700"),
        query(&["A"], None, Some("X"), ""),
        query(&["S"], Some("WD"), Some("X"), "A(1-4)"),
        query(&["A"], Some("W"), Some("XF"), ""),
        query(&["A", "S"], Some("WF"), Some("XF"), "C>100"),
        query(&[], Some("WF"), Some("X"), ""),
        query(&["G"], None, Some("XF"), ""),
        query(&["H", "A"], Some("WD"), Some("XF"), "H(-0.2-0.5)"),
        query(&["E"], Some("W"), None, "A(1-3)"),
        query(&["H"], None, Some("X"), "E<2000000000"),
    ]
}

/// Merges parts in a random tree: repeatedly two random parts.
fn merge_random(mut parts: Vec<Partial>, rng: &mut fastrand::Rng) -> Partial {
    while parts.len() > 1 {
        let i = rng.usize(0..parts.len());
        let a = parts.swap_remove(i);
        let j = rng.usize(0..parts.len());
        let b = parts.swap_remove(j);
        parts.push(a.merge(b).unwrap());
    }
    parts.pop().unwrap()
}

fn assert_same_cube(a: &Cube, b: &Cube, exact: bool, what: &str) {
    assert_eq!(a.dims.len(), b.dims.len(), "{what}");
    for (x, y) in a.dims.iter().zip(&b.dims) {
        assert_eq!(x.categories, y.categories, "{what}");
    }
    assert_eq!(a.counts, b.counts, "{what}");
    let close = |x: f64, y: f64| {
        if exact {
            x.to_bits() == y.to_bits()
        } else {
            (x - y).abs() <= 1e-9 * x.abs().max(y.abs()).max(1.0)
        }
    };
    match (&a.weighted, &b.weighted) {
        (Some(x), Some(y)) => {
            for (p, q) in x.iter().zip(y) {
                assert!(close(*p, *q), "{what}: weighted {p} vs {q}");
            }
        }
        (None, None) => {}
        _ => panic!("{what}: weighted present in one only"),
    }
    match (&a.moments, &b.moments) {
        (Some(x), Some(y)) => {
            for (p, q) in x.iter().zip(y) {
                assert_eq!(p.n, q.n, "{what}");
                assert!(close(p.w, q.w), "{what}: w {} vs {}", p.w, q.w);
                assert!(
                    close(p.mean, q.mean),
                    "{what}: mean {} vs {}",
                    p.mean,
                    q.mean
                );
                assert!(
                    (p.m2 - q.m2).abs()
                        <= if exact {
                            0.0
                        } else {
                            1e-7 * p.m2.abs().max(1.0)
                        },
                    "{what}: m2 {} vs {}",
                    p.m2,
                    q.m2
                );
            }
        }
        (None, None) => {}
        _ => panic!("{what}: moments present in one only"),
    }
}

fn integer_sums(p: &Partial) -> bool {
    !matches!(p.sums, microtab_engine::Sums::Exact { .. })
}

#[test]
fn random_splits_merge_to_the_whole() {
    let dir = tempfile::tempdir().unwrap();
    let recs = records(11, &["north", "south", "east", "west", ""]);
    let ds = import(dir.path(), "all", &csv(&recs));
    let mut rng = fastrand::Rng::with_seed(5);
    let rows = ds.rows();
    for (qi, q) in shapes().iter().enumerate() {
        let path = [ReadPath::Inline, ReadPath::Mmap, ReadPath::Pread][qi % 3];
        let opts = ScanOptions {
            read_path: path,
            ..ScanOptions::default()
        };
        let whole = run_partial(&ds, q, &opts).unwrap();
        // The finished whole equals the ordinary query.
        let cube = run_with(&ds, q, &opts).unwrap();
        assert_same_cube(
            &whole.finish(),
            &cube,
            integer_sums(&whole),
            &format!("query {qi} finish"),
        );
        for trial in 0..6 {
            let k = rng.usize(1..=64);
            let mut cuts: Vec<u64> = (0..k - 1)
                .map(|_| {
                    if rng.bool() {
                        rng.u64(0..=rows)
                    } else {
                        // Stripe and morsel boundaries, and next to them.
                        (rng.u64(0..=rows / 4096) * 4096 + rng.u64(0..3)).min(rows)
                    }
                })
                .collect();
            cuts.push(0);
            cuts.push(rows);
            cuts.sort_unstable();
            let parts: Vec<Partial> = cuts
                .windows(2)
                .map(|w| {
                    let p = run_partial(
                        &ds,
                        &Query {
                            rows: Some(w[0]..w[1]),
                            ..q.clone()
                        },
                        &opts,
                    )
                    .unwrap();
                    assert_eq!(p.rows, w[1] - w[0]);
                    // Through JSON, as a worker would send it.
                    let text = serde_json::to_string(&p).unwrap();
                    serde_json::from_str(&text).unwrap()
                })
                .collect();
            let merged = merge_random(parts, &mut rng);
            assert_eq!(merged, whole, "query {qi} trial {trial}: {k} parts");
            let (a, b) = (merged.finish(), whole.finish());
            assert_same_cube(&a, &b, true, &format!("query {qi} trial {trial} finish"));
        }
    }
}

/// Σ, weighted mean and m2 per category of A, recomputed here.
fn reference(recs: &[&Rec]) -> BTreeMap<i64, (u64, f64, f64, f64)> {
    let mut cells: BTreeMap<i64, Vec<(f64, f64)>> = BTreeMap::new();
    for r in recs {
        let (Some(a), Some(x)) = (r.a, r.xf) else {
            continue;
        };
        cells.entry(a).or_default().push((r.wf, x));
    }
    cells
        .into_iter()
        .map(|(k, v)| {
            let w: f64 = v.iter().map(|p| p.0).sum();
            let mean = v.iter().map(|p| p.0 * p.1).sum::<f64>() / w;
            let m2 = v
                .iter()
                .map(|p| p.0 * (p.1 - mean) * (p.1 - mean))
                .sum::<f64>();
            (k, (v.len() as u64, w, mean, m2))
        })
        .collect()
}

#[test]
fn datasets_with_different_dictionaries_merge() {
    let dir = tempfile::tempdir().unwrap();
    let r1 = records(21, &["north", "south", "east"]);
    let r2 = records(22, &["west", "south", "zz top", ""]);
    let d1 = import(dir.path(), "one", &csv(&r1));
    let d2 = import(dir.path(), "two", &csv(&r2));
    let both = import(
        dir.path(),
        "both",
        &(csv(&r1) + csv(&r2).split_once('\n').unwrap().1),
    );
    assert_eq!(both.rows(), d1.rows() + d2.rows());
    let opts = ScanOptions::default();
    for (qi, q) in shapes().iter().enumerate() {
        let p1 = run_partial(&d1, q, &opts).unwrap();
        let p2 = run_partial(&d2, q, &opts).unwrap();
        let whole = run_partial(&both, q, &opts).unwrap();
        let ab = p1.clone().merge(p2.clone()).unwrap();
        let ba = p2.merge(p1).unwrap();
        assert_eq!(ab, ba, "query {qi}: commutative");
        let exact = integer_sums(&whole) && integer_sums(&ab);
        assert_same_cube(&ab.finish(), &whole.finish(), exact, &format!("query {qi}"));
    }
    // Float means by A against the scalar reference.
    let q = query(&["A"], Some("WF"), Some("XF"), "");
    let merged = run_partial(&d1, &q, &opts)
        .unwrap()
        .merge(run_partial(&d2, &q, &opts).unwrap())
        .unwrap()
        .finish();
    let all: Vec<&Rec> = r1.iter().chain(&r2).collect();
    let want = reference(&all);
    let m = merged.moments.as_ref().unwrap();
    assert_eq!(merged.counts.len(), want.len());
    for (i, (k, (n, w, mean, m2))) in want.iter().enumerate() {
        assert_eq!(merged.dims[0].categories[i].display, k.to_string());
        assert_eq!(m[i].n, *n);
        assert!((m[i].w - w).abs() <= 1e-9 * w);
        assert!((m[i].mean - mean).abs() <= 1e-9 * mean.abs());
        assert!((m[i].m2 - m2).abs() <= 1e-9 * m2);
    }
}

#[test]
fn mismatched_parts_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let recs = records(3, &["a", "b"]);
    let ds = import(dir.path(), "d", &csv(&recs));
    let opts = ScanOptions::default();
    let p = |q: Query| run_partial(&ds, &q, &opts).unwrap();
    let e = p(query(&["A"], None, None, ""))
        .merge(p(query(&["S"], None, None, "")))
        .unwrap_err();
    assert!(
        e.to_string().contains("one groups by A, the other by S"),
        "{e}"
    );
    let e = p(query(&["A"], Some("W"), None, ""))
        .merge(p(query(&["A"], Some("WD"), None, "")))
        .unwrap_err();
    assert!(e.to_string().contains("weight differs"), "{e}");
    let e = p(query(&["A"], None, None, ""))
        .merge(p(query(&["A", "S"], None, None, "")))
        .unwrap_err();
    assert!(
        e.to_string().contains("by 1 variables, the other by 2"),
        "{e}"
    );
}
