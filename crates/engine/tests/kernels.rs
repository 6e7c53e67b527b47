//! Every kernel against one scalar reference: random records with nulls
//! and missing codes, columns of every stored type and packed width,
//! imported from CSV as a user would; queries of every shape the planner
//! knows (fused byte kernels with and without packed weights, the selection
//! column, u16 tables, hashed wide and float groupings, evaluated filters,
//! exact and float means), each recomputed here row by row.

mod common;

use microtab_engine::{parse_filter, run_traced, Cube, Query, ScanOptions, TaylorQuery, Value};
use microtab_io::ReadPath;
use microtab_store::{Dataset, PhysType};
use std::collections::BTreeMap;
use std::fmt::Write;

const ROWS: usize = 100_000;

/// A cell key as the engine shows categories.
#[derive(Debug, Clone, PartialEq)]
enum K {
    I(i64),
    N(f64),
    S(String),
    Null,
}

/// One record: `None` is an empty field (system-missing).
struct Rec {
    a: Option<i64>,  // 1..=5: 3 bits
    b: Option<i64>,  // 0..=250, 250 = missing code: u8, 8 bits
    c: i64,          // 0..1200: u16
    d: i64,          // -50..=50: i8
    e: i64,          // 0..4e9: u32, too wide for a table
    g: Option<f64>,  // floats with exponents: f64
    s: &'static str, // text
    w: Option<i64>,  // integer weight 0..100
    wd: i64,         // weight with two decimals (hundredths)
    wf: f64,         // float weight
    x: Option<i64>,  // i32 measure, 9999 = missing code
    r: Option<i64>,  // 0..30 M: too wide for a table, rank-mapped; 777 = missing code
    wn: i64,         // weight −100..=100: negative, zero and positive
    h: i64,          // stratum 1..=4
    p: i64,          // PSU 0..300 within its stratum, not contiguous
}

fn records() -> Vec<Rec> {
    let mut next = common::xorshift(0x2545_F491_4F6C_DD1Du64);
    (0..ROWS)
        .map(|_| {
            let r = [next(), next(), next(), next()];
            Rec {
                a: (!r[0].is_multiple_of(31)).then_some(1 + (r[0] >> 5) as i64 % 5),
                b: (r[0] % 37 != 1).then_some((r[0] >> 9) as i64 % 251),
                c: (r[0] >> 20) as i64 % 1200,
                d: (r[0] >> 32) as i64 % 101 - 50,
                e: (r[1] % 4_000_000_000) as i64,
                g: (!r[1].is_multiple_of(13)).then(|| ((r[1] >> 32) % 64) as f64 * 1.5e-1),
                s: ["north", "south", "east", "west", "n/a x"][(r[1] >> 40) as usize % 5],
                w: (!r[2].is_multiple_of(23)).then_some((r[2] >> 8) as i64 % 101),
                wd: 1 + (r[2] >> 20) as i64 % 5000,
                wf: ((r[2] >> 36) % 1000) as f64 * 0.37e1,
                r: (r[1] % 41 != 3).then(|| {
                    if r[1].is_multiple_of(53) {
                        777
                    } else {
                        (r[1] >> 20) as i64 % 30_000_000
                    }
                }),
                wn: (r[3] % 201) as i64 - 100,
                h: 1 + (r[3] >> 16) as i64 % 4,
                p: (r[3] >> 24) as i64 % 300,
                x: (!r[2].is_multiple_of(19)).then(|| {
                    if r[2].is_multiple_of(7) {
                        9999
                    } else {
                        (r[2] >> 44) as i64 % 20_000 - 3000
                    }
                }),
            }
        })
        .collect()
}

fn dataset(recs: &[Rec]) -> (tempfile::TempDir, Dataset) {
    let mut t = String::from("A,B,C,D,E,G,S,W,WD,WF,X,R,WN,H,P\n");
    let o = |v: Option<i64>| v.map(|v| v.to_string()).unwrap_or_default();
    for r in recs {
        writeln!(
            t,
            "{},{},{},{},{},{},{},{},{}.{:02},{:e},{},{},{},{},{}",
            o(r.a),
            o(r.b),
            r.c,
            r.d,
            r.e,
            r.g.map(|g| format!("{g:e}")).unwrap_or_default(),
            r.s,
            o(r.w),
            r.wd / 100,
            r.wd % 100,
            r.wf,
            o(r.x),
            o(r.r),
            r.wn,
            r.h,
            r.p
        )
        .unwrap();
    }
    let (dir, ds) = common::import(
        "k",
        &t,
        &[("B", &["250"]), ("X", &["9999"]), ("R", &["777"])],
    );
    // The types this test means to cover.
    let ty = |n: &str| ds.variable(n).unwrap().ty;
    assert_eq!(
        [
            ty("A"),
            ty("B"),
            ty("C"),
            ty("D"),
            ty("E"),
            ty("G"),
            ty("X")
        ],
        [
            PhysType::U8,
            PhysType::U8,
            PhysType::U16,
            PhysType::I8,
            PhysType::U32,
            PhysType::F64,
            PhysType::I16
        ]
    );
    assert!(ds.variable("A").unwrap().packing.is_some());
    (dir, ds)
}

/// A grouping or filter variable's value in a record (`None`: missing).
fn key(r: &Rec, var: &str) -> Option<K> {
    match var {
        "A" => r.a.map(K::I),
        "B" => r.b.filter(|&b| b != 250).map(K::I),
        "C" => Some(K::I(r.c)),
        "D" => Some(K::I(r.d)),
        "E" => Some(K::I(r.e)),
        "G" => r.g.map(K::N),
        "S" => Some(K::S(r.s.to_string())),
        "R" => r.r.filter(|&v| v != 777).map(K::I),
        _ => unreachable!(),
    }
}

/// The same with missing values shown (`--include-missing`): missing
/// codes as themselves, empty fields as `Null`.
fn key_all(r: &Rec, var: &str) -> K {
    let null = |v: Option<i64>| v.map_or(K::Null, K::I);
    match var {
        "A" => null(r.a),
        "B" => null(r.b),
        "R" => null(r.r),
        other => key(r, other).unwrap(),
    }
}

/// The weight in displayed units (`None`: the row is left out).
fn weight(r: &Rec, w: Option<&str>) -> Option<f64> {
    match w {
        None => Some(1.0),
        Some("W") => r.w.map(|w| w as f64),
        Some("WD") => Some(r.wd as f64 / 100.0),
        Some("WF") => Some(r.wf),
        Some("WN") => Some(r.wn as f64),
        Some("D") => Some(r.d as f64),
        _ => unreachable!(),
    }
}

fn measure(r: &Rec, m: &str) -> Option<f64> {
    match m {
        "X" => r.x.filter(|&x| x != 9999).map(|x| x as f64),
        "G" => r.g,
        "D" => Some(r.d as f64),
        _ => unreachable!(),
    }
}

/// The filters tried, with their meaning.
type Pred = fn(&Rec) -> bool;
const FILTERS: &[(&str, Pred)] = &[
    ("", |_| true),
    ("A(2-4)", |r| matches!(r.a, Some(2..=4))),
    ("A(2-4) B(10-100)", |r| {
        matches!(r.a, Some(2..=4)) && matches!(r.b, Some(10..=100))
    }),
    ("A(1,3) B(0-120) D(-10-30)", |r| {
        matches!(r.a, Some(1 | 3)) && matches!(r.b, Some(0..=120)) && (-10..=30).contains(&r.d)
    }),
    ("C<600", |r| r.c < 600),
    ("C(100-199,700-*)", |r| {
        (100..=199).contains(&r.c) || r.c >= 700
    }),
    ("E(1000000-2500000000)", |r| {
        (1_000_000..=2_500_000_000).contains(&r.e)
    }),
    ("E>=3000000000", |r| r.e >= 3_000_000_000),
    ("G>3.5", |r| r.g.is_some_and(|g| g > 3.5)),
    ("S(north,east)", |r| r.s == "north" || r.s == "east"),
    ("B!=7", |r| r.b.is_some_and(|b| b != 7 && b != 250)),
    ("X(-100-5000)", |r| {
        r.x.is_some_and(|x| (-100..=5000).contains(&x))
    }),
    // Filters that pass every valid value: dropped by the planner where the
    // variable is the analysis variable (X) or a grouping (B), whose missing
    // values are excluded anyway; elsewhere they exclude the missing rows.
    ("X(-3000-*)", |r| r.x.is_some_and(|x| x != 9999)),
    ("B(0-249)", |r| r.b.is_some_and(|b| b != 250)),
    ("C(5-8,20-29,40-49,100-1000)", |r| {
        [(5, 8), (20, 29), (40, 49), (100, 1000)]
            .iter()
            .any(|&(a, b)| (a..=b).contains(&r.c))
    }),
    // One byte filter: few rows pass (gathered), three ranges; a fifth
    // passing, one range; five ranges (a code column of the kernel).
    ("B(3,77,200-201)", |r| {
        matches!(r.b, Some(3 | 77 | 200 | 201))
    }),
    ("A(5)", |r| r.a == Some(5)),
    ("B(0-2,5,9,11,13)", |r| {
        matches!(r.b, Some(0..=2 | 5 | 9 | 11 | 13))
    }),
    // Ranges compared in 32-bit lanes: bounds beyond the column type's
    // values (clipped), negative bounds, three ranges.
    ("E(-5-100000000,4000000000-9000000000)", |r| {
        r.e <= 100_000_000
    }),
    ("X(-50000--2990,4990-5010,19000-99999)", |r| {
        r.x.is_some_and(|x| {
            x != 9999
                && ((-50_000..=-2990).contains(&x) || (4990..=5010).contains(&x) || x >= 19_000)
        })
    }),
    // The inline scan's probes (the last PROBED): a first filter that
    // leaves few rows (u16 codes as three ranges, or as a bitmap; a u32
    // range), and the others evaluated at those rows only: packed codes
    // with system-missing, a missing code, signed bytes, floats, text.
    ("C(17,300,901) A(2-4)", |r| {
        matches!(r.c, 17 | 300 | 901) && matches!(r.a, Some(2..=4))
    }),
    ("C(1,5,9,13,17,21,25-40) B(10-100) D(-10-30)", |r| {
        matches!(r.c, 1 | 5 | 9 | 13 | 17 | 21 | 25..=40)
            && matches!(r.b, Some(10..=100))
            && (-10..=30).contains(&r.d)
    }),
    ("E(1000000-100000000) X(-100-5000)", |r| {
        (1_000_000..=100_000_000).contains(&r.e) && r.x.is_some_and(|x| (-100..=5000).contains(&x))
    }),
    ("C(17,300,901) G>3.5", |r| {
        matches!(r.c, 17 | 300 | 901) && r.g.is_some_and(|g| g > 3.5)
    }),
    ("B(3,77) C<600 S(north)", |r| {
        matches!(r.b, Some(3 | 77)) && r.c < 600 && r.s == "north"
    }),
];

/// The last filters of [`FILTERS`], those written for the probes.
const PROBED: usize = 5;

#[derive(Default, Debug)]
struct Cell {
    n: u64,
    w: f64,
    wx: f64,
    wxx: f64,
}

/// The cube of case `c` over `recs`, computed record by record.
fn reference(recs: &[Rec], c: &Case) -> BTreeMap<Vec<K>, Cell> {
    let (dims, filter, w, m, all) = (c.dims, FILTERS[c.f].1, c.w, c.m, c.all);
    let mut out: BTreeMap<Vec<K>, Cell> = BTreeMap::new();
    // BTreeMap needs Ord: order by a string form.
    let mut cells: Vec<(Vec<K>, Cell)> = Vec::new();
    let mut index: std::collections::HashMap<String, usize> = Default::default();
    for r in recs {
        if !filter(r) {
            continue;
        }
        let k = if all {
            dims.iter().map(|d| key_all(r, d)).collect::<Vec<K>>()
        } else {
            let Some(k) = dims.iter().map(|d| key(r, d)).collect::<Option<Vec<K>>>() else {
                continue;
            };
            k
        };
        let Some(wv) = weight(r, w) else { continue };
        let xv = match m {
            Some(m) => match measure(r, m) {
                Some(x) => x,
                None => continue,
            },
            None => 0.0,
        };
        let i = *index.entry(format!("{k:?}")).or_insert_with(|| {
            cells.push((k.clone(), Cell::default()));
            cells.len() - 1
        });
        let c = &mut cells[i].1;
        c.n += 1;
        c.w += wv;
        c.wx += wv * xv;
        c.wxx += wv * xv * xv;
    }
    for (k, c) in cells {
        out.insert(k, c);
    }
    out
}

impl Eq for K {}
impl Ord for K {
    fn cmp(&self, o: &Self) -> std::cmp::Ordering {
        match (self, o) {
            (K::I(a), K::I(b)) => a.cmp(b),
            (K::N(a), K::N(b)) => a.total_cmp(b),
            (K::S(a), K::S(b)) => a.cmp(b),
            (K::Null, K::Null) => std::cmp::Ordering::Equal,
            (K::Null, _) => std::cmp::Ordering::Greater,
            (_, K::Null) => std::cmp::Ordering::Less,
            _ => format!("{self:?}").cmp(&format!("{o:?}")),
        }
    }
}
impl PartialOrd for K {
    fn partial_cmp(&self, o: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(o))
    }
}

/// Per cell: count, Σw, and (Σw, mean, m2) of means queries.
type GotCell = (u64, Option<f64>, Option<(f64, f64, f64)>);

fn cube_cells(cube: &Cube) -> BTreeMap<Vec<K>, GotCell> {
    let shape = cube.shape();
    let mut out = BTreeMap::new();
    for c in 0..cube.counts.len() {
        if cube.counts[c] == 0 {
            continue;
        }
        let mut idx = vec![0; shape.len()];
        let mut r = c;
        for d in (0..shape.len()).rev() {
            idx[d] = r % shape[d];
            r /= shape[d];
        }
        let k: Vec<K> = idx
            .iter()
            .enumerate()
            .map(|(d, &i)| match &cube.dims[d].categories[i].value {
                Value::Int(v) => K::I(*v),
                Value::Num(v) => K::N(*v),
                Value::Str(s) => K::S(s.clone()),
                Value::Null => K::Null,
            })
            .collect();
        let m = cube.moments.as_ref().map(|m| (m[c].w, m[c].mean, m[c].m2));
        out.insert(k, (cube.counts[c], cube.weighted.as_ref().map(|w| w[c]), m));
    }
    out
}

fn close(a: f64, b: f64, tol: f64) -> bool {
    (a - b).abs() <= tol * a.abs().max(b.abs()).max(1.0)
}

fn check(ds: &Dataset, recs: &[Rec], dims: &[&str], f: usize, w: Option<&str>, m: Option<&str>) {
    check_with(ds, recs, dims, f, w, m, false, None)
}

#[allow(clippy::too_many_arguments)]
fn check_with(
    ds: &Dataset,
    recs: &[Rec],
    dims: &[&str],
    f: usize,
    w: Option<&str>,
    m: Option<&str>,
    all: bool,
    rows: Option<std::ops::Range<usize>>,
) {
    let c = Case {
        dims,
        f,
        w,
        m,
        all,
        rows,
        partial: false,
    };
    run_case(ds, recs, &c);
}

/// A query to check: its groupings, filter (`FILTERS[f]`), weight,
/// measure, missing values shown, range of rows, and whether it runs as a
/// partial result (then finished).
#[derive(Clone, Default)]
struct Case<'a> {
    dims: &'a [&'a str],
    f: usize,
    w: Option<&'a str>,
    m: Option<&'a str>,
    all: bool,
    rows: Option<std::ops::Range<usize>>,
    partial: bool,
}

impl Case<'_> {
    fn query(&self) -> Query {
        let ftext = FILTERS[self.f].0;
        Query {
            filter: if ftext.is_empty() {
                vec![]
            } else {
                parse_filter(ftext).unwrap()
            },
            group_by: self.dims.iter().map(|s| s.to_string()).collect(),
            weight: self.w.map(String::from),
            measure: self.m.map(String::from),
            include_missing: self.all,
            rows: self.rows.clone().map(|r| r.start as u64..r.end as u64),
            ..Query::default()
        }
    }

    /// The records of the case's range.
    fn part<'r>(&self, recs: &'r [Rec]) -> &'r [Rec] {
        self.rows.clone().map_or(recs, |r| {
            &recs[r.start.min(recs.len())..r.end.min(recs.len())]
        })
    }
}

/// Runs `c` over every read path and checks each cube against the
/// reference; the kernel that counted it (the same on every path).
fn run_case(ds: &Dataset, recs: &[Rec], c: &Case) -> &'static str {
    let want = reference(c.part(recs), c);
    let q = c.query();
    let what = format!(
        "dims {:?} filter {:?} weight {:?} measure {:?} rows {:?} partial {}",
        c.dims, FILTERS[c.f].0, c.w, c.m, c.rows, c.partial
    );
    let mut kernels = Vec::new();
    for path in [ReadPath::Inline, ReadPath::Mmap, ReadPath::Pread] {
        let opts = ScanOptions {
            read_path: path,
            ..ScanOptions::default()
        };
        let (cube, kernel) =
            run_traced(ds, &q, &opts, c.partial).unwrap_or_else(|e| panic!("{what}: {e}"));
        compare(&want, &cube, &format!("{what} ({path:?})"), c.w.is_some());
        kernels.push(kernel);
    }
    assert!(
        kernels.iter().all(|k| *k == kernels[0]),
        "{what}: {kernels:?}"
    );
    kernels[0]
}

/// Checks a cube's cells against the reference's.
fn compare(want: &BTreeMap<Vec<K>, Cell>, cube: &Cube, what: &str, weighted: bool) {
    let got = cube_cells(cube);
    assert_eq!(
        got.keys().collect::<Vec<_>>(),
        want.keys().collect::<Vec<_>>(),
        "{what}: cells"
    );
    for (k, c) in want {
        let (n, gw, gm) = got[k];
        assert_eq!(n, c.n, "{what}: count of {k:?}");
        if weighted {
            assert!(
                close(gw.unwrap(), c.w, 1e-12),
                "{what}: Σw of {k:?}: {gw:?} vs {}",
                c.w
            );
        }
        if let Some((sw, mean, m2)) = gm {
            assert!(close(sw, c.w, 1e-12), "{what}: Σw of {k:?}");
            if c.w != 0.0 {
                let want_mean = c.wx / c.w;
                assert!(
                    close(mean, want_mean, 1e-9),
                    "{what}: mean of {k:?}: {mean} vs {want_mean}"
                );
                let want_m2 = c.wxx - c.wx * c.wx / c.w;
                assert!(
                    (m2 - want_m2).abs() <= 1e-6 * c.wxx.abs().max(1.0),
                    "{what}: m2 of {k:?}: {m2} vs {want_m2}"
                );
            }
        }
    }
}

#[test]
fn every_kernel_matches_the_scalar_reference() {
    let recs = records();
    let (_d, ds) = dataset(&recs);
    let dims: &[&[&str]] = &[
        &["A"],
        &["B"],
        &["A", "B"],
        &["A", "D", "B"],
        &["A", "B", "D", "S"],
        &["C"],
        &["C", "A"],
        &["S"],
        &["E"],
        &["G", "A"],
        &["R"],
        &["R", "A"],
    ];
    let weights = [None, Some("W"), Some("WD"), Some("WF")];
    let mut tried = 0;
    for (i, d) in dims.iter().enumerate() {
        for (j, w) in weights.iter().enumerate() {
            // Every filter with every grouping, weights in rotation.
            for f in 0..FILTERS.len() {
                if (i + f) % weights.len() != j {
                    continue;
                }
                check(&ds, &recs, d, f, *w, None);
                tried += 1;
            }
        }
    }
    for d in [&["A"][..], &["B", "A"], &["S", "A", "D"], &["C"]] {
        for m in ["X", "G", "D"] {
            // 11: a filter on the analysis variable itself (read once for
            // both roles); 12: four ranges on a u16 column (its table).
            for (f, w) in [
                (0, Some("W")),
                (1, Some("WD")),
                (4, None),
                (2, Some("WF")),
                (11, Some("WD")),
                (12, None),
            ] {
                check(&ds, &recs, d, f, w, Some(m));
                tried += 1;
            }
        }
    }
    // Missing values shown: table-, rank- and hash-mapped groupings.
    for d in [&["A", "B"][..], &["R"], &["R", "S"], &["E", "A"]] {
        for (f, w) in [(0, None), (1, Some("WD")), (4, Some("W"))] {
            check_with(&ds, &recs, d, f, w, None, true, None);
            tried += 1;
        }
    }
    // Wide crosses (1,200 × 251 codes planned): compacted to the codes
    // that occur, and counted in one lane a cell; every weight form
    // (none, maybe missing, implied decimals, float), missing shown.
    for d in [&["C", "B"][..], &["D", "C"]] {
        for (f, w) in [(0, None), (1, Some("W")), (4, Some("WD")), (2, Some("WF"))] {
            check(&ds, &recs, d, f, w, None);
            check_with(&ds, &recs, d, f, w, None, true, None);
            tried += 2;
        }
    }
    // The probes' filters with every kernel's plan (fused and index
    // counts, a wide cross, exact and float means), over every row and
    // over rows that start inside a morsel.
    for f in FILTERS.len() - PROBED..FILTERS.len() {
        for (d, w, m) in [
            (&["A", "B"][..], None, None),
            (&["A"], Some("WD"), None),
            (&["C"], Some("W"), None),
            (&["C", "B"], Some("WF"), None),
            (&["R"], Some("WD"), None),
            (&["A"], Some("WD"), Some("X")),
            (&["S", "A"], None, Some("G")),
            (&["B"], Some("WN"), Some("D")),
        ] {
            check(&ds, &recs, d, f, w, m);
            check_with(&ds, &recs, d, f, w, m, false, Some(40_000..ROWS));
            tried += 2;
        }
    }
    // Parts of the rows: within one stripe, across stripe boundaries,
    // whole stripes, the tail, empty, beyond the end.
    for (k, r) in [
        5..17,
        100..40_000,
        32_768..65_536,
        65_535..65_537,
        70_001..ROWS,
        4_000..4_000,
        90_000..200_000,
    ]
    .into_iter()
    .enumerate()
    {
        let d: &[&str] = [&["A", "B"][..], &["R"], &["C", "A"], &["S", "D"]][k % 4];
        let (f, w) = [(0, Some("WD")), (2, None), (4, Some("W")), (6, Some("WF"))][k % 4];
        check_with(&ds, &recs, d, f, w, None, false, Some(r.clone()));
        check_with(&ds, &recs, &["A"], 1, Some("WD"), Some("X"), false, Some(r));
        tried += 2;
    }
    assert!(tried > 80, "{tried}");
}

/// Every kernel of the physical plan, each on queries chosen to reach it
/// (with the filters' forms it takes, zero and negative weights, missing
/// values, ranges of rows and partial results), against the reference;
/// the kernel each query ran on is the one its columns call for.
#[test]
fn every_kernel_variant_is_reached_and_matches_the_reference() {
    let recs = records();
    let (_d, ds) = dataset(&recs);
    let c = |dims, f, w, m| Case {
        dims,
        f,
        w,
        m,
        ..Case::default()
    };
    let cases: Vec<(Case, &str)> = vec![
        // No measure: byte codes (and one u16) and a weight that is never
        // missing run fused, filters as columns, a selection, gathered.
        (c(&["A", "B"], 0, None, None), "Fused"),
        (c(&["A", "B"], 1, Some("WD"), None), "Fused"),
        (c(&["A", "B"], 2, Some("WD"), None), "Fused"),
        (c(&["C", "A"], 7, None, None), "Fused"),
        (c(&["A", "B"], 6, Some("WD"), None), "Fused"),
        // A float weight may be missing (NaN): the index kernel.
        (c(&["A", "B"], 0, Some("WF"), None), "Counts"),
        (c(&["A"], 9, Some("D"), None), "Counts"),
        // A weight that may be missing, a grouping that is not a code.
        (c(&["A", "B"], 1, Some("W"), None), "Counts"),
        (c(&["E"], 0, Some("WD"), None), "Counts"),
        // A wide cross (one lane a cell, not fused).
        (c(&["C", "B"], 0, Some("WD"), None), "Counts"),
        (c(&["C", "B"], 1, None, None), "Counts"),
        (c(&["C", "B"], 1, Some("WF"), None), "Counts"),
        (c(&["A"], 2, Some("WN"), None), "Counts"),
        // Float measures.
        (c(&["A"], 0, Some("WF"), Some("G")), "Moments"),
        (c(&["S", "B"], 4, None, Some("G")), "Moments"),
        // Integer measures: many cells, few cells, byte codes fused.
        (c(&["C", "A"], 0, Some("WD"), Some("X")), "Exact"),
        (c(&["C", "B"], 1, Some("WN"), Some("D")), "Exact"),
        (c(&["D"], 0, Some("WD"), Some("X")), "ExactMorsel"),
        (c(&["A"], 2, Some("WN"), Some("X")), "ExactMorsel"),
        (c(&["A", "B"], 0, Some("W"), Some("X")), "ExactMorsel"),
        (c(&["A"], 0, None, Some("X")), "FusedMeans"),
        (c(&["A", "B"], 1, Some("WD"), Some("X")), "FusedMeans"),
        (c(&["A"], 3, Some("WD"), Some("D")), "FusedMeans"),
        (c(&["B"], 7, None, Some("X")), "FusedMeans"),
        // One byte filter's selection, only to gather the rows passing
        // (FILTERS 15–17; 10 passes most rows).
        (c(&["A"], 15, None, None), "Fused"),
        (c(&["A", "B"], 16, Some("WD"), None), "Fused"),
        (c(&["A"], 17, Some("W"), None), "Counts"),
        (c(&["A"], 17, Some("WD"), None), "Fused"),
        (c(&["A"], 10, Some("WD"), None), "Fused"),
        (c(&["A"], 15, Some("WD"), Some("X")), "FusedMeans"),
        (c(&["B"], 16, None, Some("X")), "FusedMeans"),
    ];
    let mut seen = std::collections::BTreeSet::new();
    for (case, want) in &cases {
        let got = run_case(&ds, &recs, case);
        assert_eq!(
            got, *want,
            "{:?} {:?} {:?} {}",
            case.dims, case.w, case.m, case.f
        );
        seen.insert(got);
        // The same over a range of rows, and as a partial result.
        let ranged = Case {
            rows: Some(30_000..70_001),
            ..case.clone()
        };
        run_case(&ds, &recs, &ranged);
        let partial = Case {
            partial: true,
            ..case.clone()
        };
        seen.insert(run_case(&ds, &recs, &partial));
    }
    // Partial results with float sums are summed exactly.
    for (d, w, m) in [
        (&["A"][..], Some("WD"), Some("G")),
        (&["B", "A"], Some("WF"), None),
    ] {
        let case = Case {
            partial: true,
            ..c(d, 1, w, m)
        };
        assert_eq!(run_case(&ds, &recs, &case), "ExactFloats");
        seen.insert("ExactFloats");
    }
    let all = [
        "Counts",
        "Fused",
        "Moments",
        "Exact",
        "ExactMorsel",
        "FusedMeans",
        "ExactFloats",
    ];
    assert_eq!(seen, all.into_iter().collect());
}

/// Replicate weights' sums per cell (`Σ w_r`, `Σ w_r·x` over the rows the
/// weight counts, in displayed units), integer and float, with and
/// without a measure, against sums over the records.
#[test]
fn replicate_sums_match_the_reference() {
    let recs = records();
    let (_d, ds) = dataset(&recs);
    let reps_int = ["WN", "D", "WN", "D", "WD"];
    let reps_float = ["WF", "WN", "WD"];
    for (reps, m, f) in [
        (&reps_int[..], Some("X"), 1),
        (&reps_int[..], None, 2),
        (&reps_float[..], Some("X"), 0),
        (&reps_float[..], None, 4),
    ] {
        let case = Case {
            dims: &["A", "B"],
            f,
            w: Some("WD"),
            m,
            ..Case::default()
        };
        let q = Query {
            replicates: reps.iter().map(|s| s.to_string()).collect(),
            ..case.query()
        };
        let (cube, kernel) = run_traced(&ds, &q, &ScanOptions::default(), false).unwrap();
        assert!(!kernel.starts_with("Fused"), "{kernel}");
        let got = cube.replicates.as_ref().expect("replicate sums");
        let cells = cube_cells(&cube);
        let index: BTreeMap<&Vec<K>, usize> = cells.keys().zip(cell_numbers(&cube)).collect();
        let pred = FILTERS[f].1;
        for (k, rep) in reps.iter().enumerate() {
            let mut want: BTreeMap<Vec<K>, (f64, f64)> = BTreeMap::new();
            for r in recs.iter().filter(|r| pred(r)) {
                let Some(key) = ["A", "B"]
                    .iter()
                    .map(|d| key(r, d))
                    .collect::<Option<Vec<K>>>()
                else {
                    continue;
                };
                let x = match m {
                    Some(m) => match measure(r, m) {
                        Some(x) => x,
                        None => continue,
                    },
                    None => 0.0,
                };
                let wr = weight(r, Some(rep)).unwrap();
                let e = want.entry(key).or_default();
                e.0 += wr;
                e.1 += wr * x;
            }
            for (key, (w, wx)) in &want {
                let c = index[key];
                assert!(
                    close(got.w[k][c], *w, 1e-12),
                    "{rep} {key:?}: {} vs {w}",
                    got.w[k][c]
                );
                if m.is_some() {
                    let gx = got.wx.as_ref().unwrap()[k][c];
                    assert!(close(gx, *wx, 1e-12), "{rep} {key:?}: {gx} vs {wx}");
                }
            }
        }
    }
}

/// The cube's cell numbers in the order of [`cube_cells`]'s keys.
fn cell_numbers(cube: &Cube) -> Vec<usize> {
    let mut keyed: Vec<(Vec<K>, usize)> = Vec::new();
    let shape = cube.shape();
    for c in 0..cube.counts.len() {
        if cube.counts[c] == 0 {
            continue;
        }
        let mut r = c;
        let mut k = vec![K::Null; shape.len()];
        for d in (0..shape.len()).rev() {
            k[d] = match &cube.dims[d].categories[r % shape[d]].value {
                Value::Int(v) => K::I(*v),
                Value::Num(v) => K::N(*v),
                Value::Str(s) => K::S(s.clone()),
                Value::Null => K::Null,
            };
            r /= shape[d];
        }
        keyed.push((k, c));
    }
    keyed.sort();
    keyed.into_iter().map(|(_, c)| c).collect()
}

/// Taylor linearization sums: per cell `[Var(W), Cov(W, Y), Var(Y)]` with
/// `Var(A) = Σ_h c_h Σ_j A_hj² − d_h A_h²` over strata `h` and PSUs `j`
/// (PSUs not stored contiguously), `Y = Σ w·(x − shift)`; as a whole query
/// and as a partial result, with and without a measure.
#[test]
fn taylor_sums_match_the_reference() {
    let recs = records();
    let (_d, ds) = dataset(&recs);
    let coef = vec![[1.5, 0.25], [2.0, 0.5], [1.25, 0.125], [3.0, 1.0]];
    for (m, f, partial) in [
        (Some("X"), 0, false),
        (Some("X"), 1, true),
        (None, 2, false),
        (Some("D"), 4, true),
    ] {
        let case = Case {
            dims: &["A"],
            f,
            w: Some("WD"),
            m,
            partial,
            ..Case::default()
        };
        let q = Query {
            taylor: Some(TaylorQuery {
                strata: Some("H".into()),
                cluster: Some("P".into()),
                strata_keys: vec![1, 2, 3, 4],
                coef: coef.clone(),
                contiguous: false,
                ..TaylorQuery::default()
            }),
            ..case.query()
        };
        let (cube, _) = run_traced(&ds, &q, &ScanOptions::default(), partial).unwrap();
        let t = cube.taylor.as_ref().expect("Taylor sums");
        let cells = cube_cells(&cube);
        let index: BTreeMap<&Vec<K>, usize> = cells.keys().zip(cell_numbers(&cube)).collect();
        // Per cell, stratum and PSU: (Σw, Σw(x − shift)).
        let mut z: BTreeMap<(Vec<K>, i64, i64), (f64, f64)> = BTreeMap::new();
        for r in recs.iter().filter(|r| FILTERS[f].1(r)) {
            let Some(a) = key(r, "A") else { continue };
            let x = match m {
                Some(m) => match measure(r, m) {
                    Some(x) => x - t.shift,
                    None => continue,
                },
                None => 0.0,
            };
            let w = weight(r, Some("WD")).unwrap();
            let e = z.entry((vec![a], r.h, r.p)).or_default();
            e.0 += w;
            e.1 += w * x;
        }
        let mut want: BTreeMap<Vec<K>, [f64; 3]> = BTreeMap::new();
        let mut strata: BTreeMap<(Vec<K>, i64), (f64, f64)> = BTreeMap::new();
        for ((k, h, _), (w, y)) in &z {
            let [c, _] = coef[*h as usize - 1];
            let v = want.entry(k.clone()).or_default();
            v[0] += c * w * w;
            v[1] += c * w * y;
            v[2] += c * y * y;
            let s = strata.entry((k.clone(), *h)).or_default();
            s.0 += w;
            s.1 += y;
        }
        for ((k, h), (w, y)) in &strata {
            let [_, d] = coef[*h as usize - 1];
            let v = want.get_mut(k).unwrap();
            v[0] -= d * w * w;
            v[1] -= d * w * y;
            v[2] -= d * y * y;
        }
        for (k, v) in &want {
            let got = t.cell[index[k]];
            for i in 0..3 {
                let scale = want.values().map(|v| v[i].abs()).fold(1.0, f64::max);
                assert!(
                    (got[i] - v[i]).abs() <= 1e-9 * scale,
                    "{m:?} {k:?} [{i}]: {} vs {}",
                    got[i],
                    v[i]
                );
            }
        }
    }
}
