//! The analysis layer against a scalar oracle: a CSV written here, imported
//! as a user would, and every answer recomputed from the rows in plain
//! loops (no microtab code involved in the expected values).

// The oracle indexes its small matrices plainly.
#![allow(clippy::needless_range_loop)]

use microtab_analysis::{run, Analysis, Answer, Error, Pct, Request};
use microtab_ingest::{import_csv, CsvOptions};
use microtab_store::Dataset;
use std::collections::BTreeMap;
use std::fmt::Write;

/// One record: A (1..=4, sometimes empty), B (0..1500), W (weight with two
/// decimals, sometimes 0), X (income-like, 9999 = missing code), S (text).
#[derive(Clone, Copy)]
struct Row {
    a: Option<i64>,
    b: i64,
    w: i64, // hundredths
    x: i64,
    s: &'static str,
}

fn rows(n: usize) -> Vec<Row> {
    let mut state = 0x9E37_79B9_7F4A_7C15u64;
    let mut next = move || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    };
    (0..n)
        .map(|_| {
            let r = next();
            Row {
                a: (r % 17 != 0).then_some(1 + (r >> 8) as i64 % 4),
                b: (r >> 16) as i64 % 1500,
                w: if r % 29 == 0 {
                    0
                } else {
                    50 + (r >> 24) as i64 % 5000
                },
                x: if r % 11 == 0 {
                    9999
                } else {
                    (r >> 32) as i64 % 3000 - 200
                },
                s: ["north", "south", "east", "west"][(r >> 40) as usize % 4],
            }
        })
        .collect()
}

fn dataset(n: usize) -> (tempfile::TempDir, Dataset, Vec<Row>) {
    let dir = tempfile::tempdir().unwrap();
    let data = rows(n);
    let mut text = String::from("A,B,W,X,S\n");
    for r in &data {
        let a = r.a.map(|a| a.to_string()).unwrap_or_default();
        writeln!(
            text,
            "{a},{},{}.{:02},{},{}",
            r.b,
            r.w / 100,
            r.w % 100,
            r.x,
            r.s
        )
        .unwrap();
    }
    let csv = dir.path().join("t.csv");
    std::fs::write(&csv, text).unwrap();
    let target = dir.path().join("t.mtab");
    let opts = CsvOptions {
        missing: vec![("X".into(), vec!["9999".into()])],
        ..CsvOptions::default()
    };
    import_csv(&csv, &target, false, &opts).unwrap();
    let ds = Dataset::open(&target).unwrap();
    (dir, ds, data)
}

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() <= 1e-9 * a.abs().max(b.abs()).max(1.0)
}

fn answer(ds: &Dataset, req: &Request) -> Answer {
    run(ds, req, &Default::default()).unwrap()
}

/// A request for `a` weighted by W.
fn weighted(a: Analysis) -> Request {
    Request {
        weight: Some("W".into()),
        ..Request::new(a)
    }
}

#[test]
fn frequencies_weighted_and_filtered() {
    let (_d, ds, data) = dataset(50_000);
    let mut req = weighted(Analysis::Freq { var: "A".into() });
    req.filter = Some("B(100-899)".into());
    let Answer::Freq(f) = answer(&ds, &req) else {
        panic!()
    };
    let mut want: BTreeMap<i64, (u64, i64)> = BTreeMap::new();
    for r in data.iter().filter(|r| (100..=899).contains(&r.b)) {
        if let Some(a) = r.a {
            let e = want.entry(a).or_default();
            e.0 += 1;
            e.1 += r.w;
        }
    }
    let total_w: i64 = want.values().map(|v| v.1).sum();
    let got: Vec<_> = f.rows().collect();
    assert_eq!(got.len(), want.len());
    for (r, (k, (n, w))) in got.iter().zip(&want) {
        assert_eq!(r.category.display, k.to_string());
        assert_eq!(r.count, *n);
        assert!(close(r.weighted.unwrap(), *w as f64 / 100.0));
        assert!(close(
            r.percent.unwrap(),
            100.0 * *w as f64 / total_w as f64
        ));
    }
    assert_eq!(f.total.count, want.values().map(|v| v.0).sum::<u64>());
    let zero = data
        .iter()
        .filter(|r| (100..=899).contains(&r.b) && r.a.is_some() && r.w == 0)
        .count() as u64;
    assert!(zero > 0);
    assert_eq!(f.context.weight_cases.unwrap().zero, zero);
    // The JSON: the documented members, the rows last.
    let j = serde_json::to_string(&f).unwrap();
    assert!(j.starts_with(r#"{"dataset":"#) && j.contains(r#","rows":[{"value":1,"#));
    let v: serde_json::Value = serde_json::from_str(&j).unwrap();
    assert_eq!(v["rows"].as_array().unwrap().len(), want.len());
    assert_eq!(v["weight_cases"]["zero"], zero);
}

#[test]
fn crosstab_with_control_percentages() {
    let (_d, ds, data) = dataset(40_000);
    let mut req = Request::new(Analysis::Tab {
        row: "S".into(),
        col: "B".into(),
        control: Some("a".into()), // names match case-insensitively
        pct: vec![Pct::Col],
        stats: false,
    });
    req.include_missing = true;
    req.filter = Some("X<1000 B(0-9)".into());
    let Answer::Tab(x) = answer(&ds, &req) else {
        panic!()
    };
    assert_eq!(x.control_var.as_deref(), Some("A"));
    // Oracle: control A (system-missing shown, last), rows S, columns B.
    let keep = |r: &&Row| r.x < 1000 && r.x != 9999 && r.b <= 9;
    let mut controls: Vec<Option<i64>> = data.iter().filter(keep).map(|r| r.a).collect();
    controls.sort_by_key(|c| (c.is_none(), *c));
    controls.dedup();
    let tables: Vec<_> = x.tables().collect();
    assert_eq!(tables.len(), controls.len());
    for (t, c) in tables.iter().zip(&controls) {
        let ctl = t.control.as_ref().unwrap();
        assert_eq!(ctl.missing, c.is_none());
        let mut cells: BTreeMap<(&str, i64), u64> = BTreeMap::new();
        for r in data.iter().filter(keep).filter(|r| r.a == *c) {
            *cells.entry((r.s, r.b)).or_default() += 1;
        }
        let mut got = BTreeMap::new();
        for (i, r) in t.rows.iter().enumerate() {
            for (j, b) in t.cols.iter().enumerate() {
                if t.counts[i][j] > 0 {
                    got.insert(
                        (r.display.as_str(), b.display.parse::<i64>().unwrap()),
                        t.counts[i][j],
                    );
                }
            }
        }
        assert_eq!(got, cells);
        let n: u64 = cells.values().sum();
        assert_eq!(t.total.count, n);
        // Column percentages against the column totals computed here.
        for (j, b) in t.cols.iter().enumerate() {
            let b: i64 = b.display.parse().unwrap();
            let col: u64 = cells.iter().filter(|(k, _)| k.1 == b).map(|(_, v)| v).sum();
            assert_eq!(t.col_totals.counts[j], col);
            for (i, r) in t.rows.iter().enumerate() {
                let v = cells.get(&(r.display.as_str(), b)).copied().unwrap_or(0);
                let p = t.pct.as_ref().unwrap()[i][j].unwrap();
                assert!(close(p, 100.0 * v as f64 / col as f64));
            }
        }
        assert!(t.stats.is_none());
    }
}

#[test]
fn chi_square_against_hand_formula() {
    let (_d, ds, data) = dataset(30_000);
    let req = weighted(Analysis::Tab {
        row: "A".into(),
        col: "S".into(),
        control: None,
        pct: vec![],
        stats: true,
    });
    let Answer::Tab(x) = answer(&ds, &req) else {
        panic!()
    };
    let t = x.tables().next().unwrap();
    let cols = ["east", "north", "south", "west"];
    let mut m = [[0f64; 4]; 4];
    for r in &data {
        if let Some(a) = r.a {
            let j = cols.iter().position(|s| *s == r.s).unwrap();
            m[a as usize - 1][j] += r.w as f64 / 100.0;
        }
    }
    let rs: Vec<f64> = m.iter().map(|r| r.iter().sum()).collect();
    let cs: Vec<f64> = (0..4).map(|j| m.iter().map(|r| r[j]).sum()).collect();
    let n: f64 = rs.iter().sum();
    let mut chi2 = 0.0;
    for i in 0..4 {
        for j in 0..4 {
            let e = rs[i] * cs[j] / n;
            chi2 += (m[i][j] - e).powi(2) / e;
        }
    }
    let s = t.stats.unwrap();
    assert!(close(s.chi2, chi2), "{} vs {chi2}", s.chi2);
    assert_eq!(s.df, 9);
    assert!(close(s.cramers_v, (chi2 / (n * 3.0)).sqrt()));
    for i in 0..4 {
        for j in 0..4 {
            assert!(close(t.weighted.as_ref().unwrap()[i][j], m[i][j]));
        }
    }
}

#[test]
fn means_by_two_variables_with_a_missing_code() {
    let (_d, ds, data) = dataset(60_000);
    let req = weighted(Analysis::Means {
        var: "X".into(),
        by: vec!["S".into(), "A".into()],
    });
    let Answer::Means(m) = answer(&ds, &req) else {
        panic!()
    };
    let mut want: BTreeMap<(&str, i64), (u64, f64, f64, f64)> = BTreeMap::new();
    for r in data.iter().filter(|r| r.x != 9999) {
        let Some(a) = r.a else { continue };
        let w = r.w as f64 / 100.0;
        let e = want.entry((r.s, a)).or_default();
        e.0 += 1;
        e.1 += w;
        e.2 += w * r.x as f64;
        e.3 += w * (r.x as f64) * (r.x as f64);
    }
    let groups: Vec<_> = m.groups().collect();
    assert_eq!(groups.len(), want.len());
    for (g, ((s, a), (n, sw, swx, swxx))) in groups.iter().zip(&want) {
        assert_eq!(g.by[0].display, *s);
        assert_eq!(g.by[1].display, a.to_string());
        assert_eq!(g.stat.n, *n);
        assert!(close(g.stat.sum_weights, *sw));
        let mean = swx / sw;
        assert!(close(g.stat.mean.unwrap(), mean));
        let var = (swxx - sw * mean * mean) / (sw - 1.0);
        assert!((g.stat.sd.unwrap() - var.sqrt()).abs() < 1e-6 * var.sqrt());
    }
    let n: u64 = want.values().map(|v| v.0).sum();
    assert_eq!(m.total.n, n);
    let v: serde_json::Value = serde_json::to_value(&m).unwrap();
    assert_eq!(v["groups"][0]["by"][0]["value"], "east");
    assert_eq!(v["by"], serde_json::json!(["S", "A"]));
}

#[test]
fn negative_weights_are_a_typed_error() {
    let dir = tempfile::tempdir().unwrap();
    let csv = dir.path().join("n.csv");
    std::fs::write(&csv, "G,W\n1,2\n1,-1\n2,3\n").unwrap();
    let target = dir.path().join("n.mtab");
    import_csv(&csv, &target, false, &CsvOptions::default()).unwrap();
    let ds = Dataset::open(&target).unwrap();
    let mut req = Request::new(Analysis::Freq { var: "G".into() });
    req.weight = Some("w".into());
    match run(&ds, &req, &Default::default()) {
        Err(Error::NegativeWeights { variable, count }) => {
            assert_eq!((variable.as_str(), count), ("W", 1));
        }
        other => panic!("{other:?}"),
    }
    req.allow_negative_weights = true;
    let Answer::Freq(f) = answer(&ds, &req) else {
        panic!()
    };
    let w: Vec<f64> = f.rows().map(|r| r.weighted.unwrap()).collect();
    assert_eq!(w, [1.0, 3.0]);
    assert_eq!(f.context.weight_cases.unwrap().negative, 1);
}

/// Partial answers over row ranges, sent through JSON and merged, finish
/// into the answer of the whole request (the same JSON, bit for bit: the
/// sums are integers), and the weight cases add up.
#[test]
fn partials_over_row_ranges_finish_into_the_whole_answer() {
    let (_d, ds, data) = dataset(50_000);
    let zero = data.iter().filter(|r| r.a.is_some() && r.w == 0).count() as u64;
    let reqs = [
        weighted(Analysis::Tab {
            row: "A".into(),
            col: "S".into(),
            control: None,
            pct: vec![Pct::Row],
            stats: true,
        }),
        weighted(Analysis::Means {
            var: "X".into(),
            by: vec!["A".into()],
        }),
        Request {
            filter: Some("B<700".into()),
            ..Request::new(Analysis::Freq { var: "S".into() })
        },
    ];
    for req in &reqs {
        let whole = serde_json::to_string(&run(&ds, req, &Default::default()).unwrap()).unwrap();
        let cuts = [0u64, 1, 4095, 4097, 17_000, 32_768, 49_999, 50_000];
        let mut merged: Option<microtab_analysis::Partial> = None;
        for w in cuts.windows(2).rev() {
            let part = microtab_analysis::partial(
                &ds,
                &Request {
                    rows: Some(w[0]..w[1]),
                    ..req.clone()
                },
                &Default::default(),
            )
            .unwrap();
            let part = serde_json::from_str(&serde_json::to_string(&part).unwrap()).unwrap();
            merged = Some(match merged {
                Some(m) => m.merge(part).unwrap(),
                None => part,
            });
        }
        let merged = merged.unwrap();
        if req.weight.is_some() && matches!(req.analysis, Analysis::Tab { .. }) {
            assert_eq!(merged.weight_cases.unwrap().zero, zero);
        }
        let got = serde_json::to_string(&merged.finish(req).unwrap()).unwrap();
        assert_eq!(got, whole);
    }
}
