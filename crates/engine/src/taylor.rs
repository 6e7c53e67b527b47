//! Taylor linearization sums: the design covariance of a cube's weighted
//! totals, accumulated PSU by PSU in the scan that counts the cube.
//!
//! Every estimate of a table (a weighted count, a percentage, a mean) is a
//! function of the cells' totals `W_c = Σ w` and `Y_c = Σ w·x` and of
//! their sums over margins. Under a stratified cluster design the
//! covariance of two such totals `A`, `B` is `Σ_h c_h Σ_j a_hj b_hj − d_h
//! A_h B_h`, with `a_hj` PSU j's share of `A`, `A_h` the stratum's, and
//! `(c_h, d_h)` the stratum's coefficients ([`TaylorQuery::coef`]). A
//! scan closes each PSU when its run of rows ends (PSUs stored
//! contiguously; the runs cut by a morsel's edges, and every run when PSUs
//! are not contiguous, are kept by key and closed at the end), adds `c_h`
//! times the products of its totals, and keeps each stratum's totals for
//! the `d_h` terms, subtracted once at the end.

use crate::layout::Layout;
use crate::plan::DimPlan;
pub use crate::query::{Margin, TaylorQuery};
use microtab_store::{Column, ColumnData};
use serde::{Deserialize, Serialize};
use std::collections::HashMap;
use std::sync::Arc;

/// The design covariances of a cube's totals, in displayed units.
#[derive(Debug, Clone, PartialEq)]
pub struct TaylorCells {
    /// Per cell: `[Var(W), Cov(W, Y), Var(Y)]`, `Y` the sum of `w · (x −
    /// shift)`.
    pub cell: Vec<[f64; 3]>,
    /// Per requested margin.
    pub margins: Vec<MarginCov>,
    /// Per table (group of the [`TaylorQuery::full`] margin), the
    /// covariances of its cells' weighted counts: `full[t][a · k + b]`,
    /// `a` and `b` the cells' positions in the table (their index over the
    /// dimensions that margin does not keep, first outermost), `k` the
    /// table's cells. With [`TaylorQuery::full_values`], of the cells'
    /// `(W, Y)`: `full[t][(2a + i) · 2k + 2b + j]`, `i`, `j` 0 for `W` and
    /// 1 for `Y`. `None` without one, or when the tables would hold more
    /// than [`MAX_FULL`] entries.
    pub full: Option<Vec<Vec<f64>>>,
    /// Records whose stratum the design does not know (a design that no
    /// longer fits its dataset).
    pub unknown_strata: u64,
    /// Per cell, the factor its own domain's variances take (1 unless
    /// [`TaylorQuery::average`]).
    pub cell_scale: Vec<f64>,
    /// The factor of the domain of all records counted.
    pub all_scale: f64,
    /// `Y` is the sum of `w · (x − shift)` (displayed units): a mean's
    /// numerator is `(mean − shift) · W`.
    pub shift: f64,
    /// With [`TaylorQuery::scores`]: the covariance of the scores'
    /// totals, `len × len` row by row (not yet scaled by
    /// [`Self::all_scale`]).
    pub scores: Option<Vec<f64>>,
    /// PSUs with records of non-zero weight counted (the domain's PSUs:
    /// R's `degf()` of a subset design counts these).
    pub domain_psus: u64,
    /// Strata with records counted.
    pub domain_strata: u64,
    /// With [`TaylorQuery::domains`]: per cell and over all, the domain's
    /// PSUs and strata.
    pub domains: Option<Domains>,
}

/// The PSUs with a record of non-zero weight and their strata, per cell
/// (as the cube's cells) and over all cells: each domain's `degf()` is
/// their difference. Records whose analysis value is missing count.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Domains {
    /// Per cell, `[PSUs, strata]`.
    pub cell: Vec<[u64; 2]>,
    /// Over all cells.
    pub all: [u64; 2],
}

/// The covariances of a margin's totals.
#[derive(Debug, Clone, PartialEq)]
pub struct MarginCov {
    /// Each cell's group: its index over the dimensions the margin keeps,
    /// first outermost (`None`: left out, or no records).
    pub group: Vec<Option<usize>>,
    /// Per group: `[Var(W), Cov(W, Y), Var(Y)]`.
    pub var: Vec<[f64; 3]>,
    /// Per cell: `Cov(W_cell, W_group)`.
    pub cross: Vec<f64>,
    /// Per group, the factor of its domain's variances (see
    /// [`TaylorQuery::average`]).
    pub scale: Vec<f64>,
}

/// A compacted cell's index over the dimensions a predicate keeps, and
/// their cells.
type Flat<'a> = dyn Fn(usize, &dyn Fn(usize) -> bool) -> (usize, usize) + 'a;

/// Most entries of the full covariance tables.
pub const MAX_FULL: usize = 1 << 22;

/// Largest `strata × cells` kept densely per worker (beyond: a hash map).
const MAX_DENSE_STRATA: usize = 1 << 21;

const NONE: u32 = u32::MAX;

/// The planned form of a [`TaylorQuery`]: the lookups the scan needs.
pub(crate) struct TaylorPlan<'a> {
    pub(crate) strata: Option<&'a Column>,
    keys: Vec<i64>,
    /// A direct table from `key − min` to the stratum (small key ranges).
    table: Option<(i64, Vec<u32>)>,
    coef: Vec<[f64; 2]>,
    contiguous: bool,
    cells: usize,
    /// Per margin: each planned cell's group (`NONE`: left out), and the
    /// number of groups.
    groups: Vec<(Vec<u32>, usize)>,
    /// Per margin, the dimensions it keeps.
    keeps: Vec<Vec<bool>>,
    /// Per margin, whether it leaves out missing categories.
    skips: Vec<bool>,
    /// The analysis variable's values are summed less this (stored
    /// units): its mid-range when the values sit far from 0 for their
    /// spread (dates as YYYYMM, a large constant plus noise), so the
    /// linearized variance of a mean does not cancel away its digits.
    pub(crate) shift: f64,
    full_margin: usize,
    average: Vec<bool>,
    /// The full tables: each cell's table and position, the cells per
    /// table, the tables.
    full: Option<(Vec<u32>, Vec<u32>, usize, usize)>,
    /// The full tables' totals per cell: 1 (`W`), or 2 (`W`, `Y`:
    /// [`TaylorQuery::full_values`]).
    full_width: usize,
    /// The margins' sums are read off the full tables when the scan ends,
    /// not summed PSU by PSU: each margin's groups lie within one table,
    /// the tables hold every total the margins need (`Y` too, or no
    /// analysis variable), and the result is not partial.
    derive_margins: bool,
    dense: bool,
    /// Linear scores: their length, and per planned cell `a` and `b`
    /// (`len` each, row by row) in stored units, the shift folded in.
    scores: Option<(usize, Vec<f64>, Vec<f64>)>,
    /// The same in displayed units, as the query gave them (what a
    /// partial result carries).
    raw_scores: Option<(Vec<f64>, Vec<f64>)>,
    /// Only the scores' covariance is asked for (no margins, no full
    /// tables): each stratum keeps its score total instead of its totals
    /// per cell, and the cells' variances are not computed (NaN).
    scores_only: bool,
    /// Count the cells' domains ([`TaylorQuery::domains`]).
    pub(crate) domains: bool,
    /// With [`TaylorQuery::times`], its variable's `10^decimals`.
    times: Option<f64>,
}

/// Each planned cell's index over the dimensions `keep` selects (and its
/// count of groups): `NONE` for a cell left out (a missing category in a
/// dimension summed over, with `skip_missing`).
fn group_map(
    plans: &[DimPlan],
    cells: usize,
    keep: &[bool],
    skip_missing: bool,
) -> (Vec<u32>, usize) {
    let shape: Vec<usize> = plans.iter().map(|p| p.categories.len().max(1)).collect();
    let groups: usize = shape
        .iter()
        .zip(keep)
        .filter(|(_, &k)| k)
        .map(|(&s, _)| s)
        .product();
    let map = (0..cells)
        .map(|c| {
            let idx = crate::layout::unravel(c, &shape);
            let mut g = 0usize;
            for d in 0..shape.len() {
                if keep[d] {
                    g = g * shape[d] + idx[d];
                } else if skip_missing && plans[d].categories.get(idx[d]).is_some_and(|c| c.missing)
                {
                    return NONE;
                }
            }
            g as u32
        })
        .collect();
    (map, groups)
}

impl<'a> TaylorPlan<'a> {
    pub(crate) fn new(
        q: &TaylorQuery,
        plans: &[DimPlan],
        cells: usize,
        strata: Option<&'a Column>,
        (measure, times): (
            Option<&microtab_store::Variable>,
            Option<&microtab_store::Variable>,
        ),
        wscale: f64,
        partial: bool,
    ) -> Arc<Self> {
        let mut p = Self::build(q, plans, cells, strata, measure, wscale);
        p.derive_margins = !partial
            && p.full.is_some()
            && (p.full_width == 2 || measure.is_none())
            && p.keeps.iter().all(|keep| {
                let full = &p.keeps[p.full_margin];
                keep.iter().zip(full).all(|(&k, &f)| k || !f)
            });
        if let Some(v) = times {
            // `Y` and the totals of `v` are compared unshifted.
            p.shift = 0.0;
            p.times = Some(v.scale());
        }
        Arc::new(p)
    }

    fn build(
        q: &TaylorQuery,
        plans: &[DimPlan],
        cells: usize,
        strata: Option<&'a Column>,
        measure: Option<&microtab_store::Variable>,
        wscale: f64,
    ) -> Self {
        let shift = measure
            .and_then(|v| {
                let (lo, hi) = (v.min?.as_f64(), v.max?.as_f64());
                let (mid, range) = ((lo + hi) / 2.0, hi - lo);
                (mid.abs() > range && mid.is_finite()).then_some(mid)
            })
            .unwrap_or(0.0);
        let keys = q.strata_keys.clone();
        let table = match (keys.first(), keys.last()) {
            (Some(&lo), Some(&hi)) if (hi as i128 - lo as i128) < (1 << 22) => {
                let mut t = vec![NONE; (hi - lo + 1) as usize];
                for (i, &k) in keys.iter().enumerate() {
                    t[(k - lo) as usize] = i as u32;
                }
                Some((lo, t))
            }
            _ => None,
        };
        let groups = q
            .margins
            .iter()
            .map(|m| group_map(plans, cells, &m.keep, m.skip_missing))
            .collect();
        let full = q.full.and_then(|f| {
            let keep = &q.margins[f].keep;
            let (table, tables) = group_map(plans, cells, keep, false);
            let inverse: Vec<bool> = keep.iter().map(|k| !k).collect();
            let (pos, size) = group_map(plans, cells, &inverse, false);
            let width = size.saturating_mul(1 + usize::from(q.full_values));
            (tables.saturating_mul(width).saturating_mul(width) <= MAX_FULL)
                .then_some((table, pos, size, tables))
        });
        TaylorPlan {
            strata,
            // MICROTAB_TAYLOR_SPARSE=1 takes the hash map path whatever
            // the size (tests check it against R on small data).
            dense: keys.len().saturating_mul(cells + 1) <= MAX_DENSE_STRATA
                && std::env::var_os("MICROTAB_TAYLOR_SPARSE").is_none(),
            keys,
            table,
            coef: q.coef.clone(),
            contiguous: q.contiguous,
            cells,
            groups,
            keeps: q.margins.iter().map(|m| m.keep.clone()).collect(),
            skips: q.margins.iter().map(|m| m.skip_missing).collect(),
            shift,
            full_margin: q.full.unwrap_or(0),
            average: q.average.clone(),
            full,
            full_width: 1 + usize::from(q.full_values),
            derive_margins: false,
            scores: None,
            raw_scores: None,
            scores_only: false,
            domains: q.domains,
            times: None,
        }
        .with_scores(q.scores.as_ref().map(|sc| score_table(sc, plans, cells)), {
            let xs = measure.map_or(1.0, |v| v.scale());
            (wscale, xs)
        })
    }

    /// The plan with linear scores `(len, a, b)` per planned cell in
    /// displayed units, for weights and values in stored units scaled by
    /// `(ws, xs)`: a record adds `w_s·a' + y_s·b'` with `w_s = w·ws` and
    /// `y_s = w_s·(x − shift)·xs`, so `a' = (a + shift·b)/ws` and `b' =
    /// b/(ws·xs)` give `w·a + w·x·b`.
    fn with_scores(
        mut self,
        table: Option<(usize, Vec<f64>, Vec<f64>)>,
        (ws, xs): (f64, f64),
    ) -> Self {
        if let Some((k, a, b)) = table {
            let shift = self.shift / xs;
            let fa = a
                .iter()
                .zip(&b)
                .map(|(a, b)| (a + shift * b) / ws)
                .collect();
            let fb = b.iter().map(|b| b / (ws * xs)).collect();
            self.scores = Some((k, fa, fb));
            self.raw_scores = Some((a, b));
            self.scores_only = self.groups.is_empty() && self.full.is_none();
        }
        self
    }

    /// The stratum of key `k`.
    #[inline]
    fn stratum(&self, k: i64) -> Option<usize> {
        match &self.table {
            Some((lo, t)) => {
                let i = k.checked_sub(*lo)?;
                t.get(usize::try_from(i).ok()?)
                    .copied()
                    .filter(|&s| s != NONE)
                    .map(|s| s as usize)
            }
            None => self.keys.binary_search(&k).ok(),
        }
    }
}

/// Each planned cell's score coefficients `(len, a, b)`, from its
/// categories.
fn score_table(
    sc: &crate::query::Scores,
    plans: &[DimPlan],
    cells: usize,
) -> (usize, Vec<f64>, Vec<f64>) {
    let k = sc.len;
    let shape: Vec<usize> = plans.iter().map(|p| p.categories.len().max(1)).collect();
    let (mut a, mut b) = (vec![0.0; cells * k], vec![0.0; cells * k]);
    for c in 0..cells {
        let idx = crate::layout::unravel(c, &shape);
        let cats: Option<Vec<&crate::Category>> = plans
            .iter()
            .zip(&idx)
            .map(|(p, &i)| p.categories.get(i))
            .collect();
        if let Some((ca, cb)) = cats.and_then(|cats| (sc.of)(&cats)) {
            a[c * k..(c + 1) * k].copy_from_slice(&ca[..k]);
            b[c * k..(c + 1) * k].copy_from_slice(&cb[..k]);
        }
    }
    (k, a, b)
}

/// Each stratum's totals per cell: `[Σ w, Σ w·x, records]`; or, when only
/// linear scores are asked for, per stratum (its index) the total of its
/// PSUs' scores and its records.
#[derive(Debug, Clone)]
enum StrataSums {
    Dense(Vec<[f64; 3]>),
    Sparse(HashMap<u64, [f64; 3]>),
    Scores(HashMap<u32, (Vec<f64>, f64)>),
}

/// One PSU's (or a PSU fragment's) totals: `(cell, Σ w, Σ w·x, records)`.
type Entries = Vec<(u32, f64, f64, f64)>;

/// A worker's Taylor sums (planned cells, stored units).
#[derive(Debug, Clone)]
pub(crate) struct TaylorAcc {
    cell: Vec<[f64; 3]>,
    groups: Vec<Vec<[f64; 3]>>,
    cross: Vec<Vec<f64>>,
    full: Vec<f64>,
    strata: StrataSums,
    /// PSUs cut by a morsel's edge (or all, when PSUs are not contiguous),
    /// by (stratum key, cluster key).
    frags: HashMap<(i64, i64), Entries>,
    unknown: u64,
    z: Entries,
    gz: Vec<(u32, f64, f64)>,
    /// Σ k·s·s' of the linear scores (upper triangle, row by row), and a
    /// PSU's score.
    scores: Vec<f64>,
    sv: Vec<f64>,
    /// Whole PSUs closed (with records counted).
    psus: u64,
    w: Vec<f64>,
    y: Vec<f64>,
    s: Vec<i64>,
    c: Vec<i64>,
    /// The values of [`TaylorQuery::times`]' variable.
    t: Vec<f64>,
    /// The domains' counts ([`TaylorPlan::domains`]).
    dom: Option<DomainCounts>,
}

/// A PSU entry's cell with this bit set marks a record of non-zero weight
/// whose analysis value is missing: it counts for its cell's domain and
/// adds nothing else. Entries sort by cell, so a PSU's marks come last.
const MARK: u32 = 1 << 31;

/// The domains' counts of a worker.
#[derive(Debug, Clone)]
struct DomainCounts {
    /// Per planned cell, its PSUs; and over all.
    psus: Vec<u64>,
    all_psus: u64,
    /// The (stratum, cell) pairs seen (`h · (cells + 1) + c`): a bit each
    /// when dense, else a set; and the strata seen over all.
    seen: Seen,
    all_seen: Vec<u64>,
    /// Per planned cell, the last PSU that counted it (PSUs numbered as
    /// they close).
    stamp: Vec<u64>,
    psu: u64,
    /// The cells of the PSU being closed whose records of non-zero weight
    /// lack the analysis value (PSUs closed within a morsel; those kept
    /// by key carry them as marked entries).
    pending: Vec<u32>,
}

#[derive(Debug, Clone)]
enum Seen {
    Bits(Vec<u64>),
    Set(std::collections::HashSet<u64>),
}

impl Seen {
    fn insert(&mut self, i: u64) {
        match self {
            Seen::Bits(b) => b[(i / 64) as usize] |= 1 << (i % 64),
            Seen::Set(s) => {
                s.insert(i);
            }
        }
    }

    fn for_each(&self, mut f: impl FnMut(u64)) {
        match self {
            Seen::Bits(b) => {
                for (w, &bits) in b.iter().enumerate() {
                    let mut x = bits;
                    while x != 0 {
                        let t = x.trailing_zeros() as u64;
                        f(w as u64 * 64 + t);
                        x &= x - 1;
                    }
                }
            }
            Seen::Set(s) => s.iter().for_each(|&i| f(i)),
        }
    }

    fn merge(&mut self, o: Seen) {
        match (self, o) {
            (Seen::Bits(a), Seen::Bits(b)) => a.iter_mut().zip(b).for_each(|(x, y)| *x |= y),
            (Seen::Set(a), Seen::Set(b)) => a.extend(b),
            _ => unreachable!("one plan, one kind of set"),
        }
    }
}

impl DomainCounts {
    fn new(p: &TaylorPlan<'_>) -> Self {
        let n = p.cells + 1;
        let pairs = p.keys.len().max(1) * n;
        DomainCounts {
            psus: vec![0; n],
            all_psus: 0,
            seen: if p.dense {
                Seen::Bits(vec![0; pairs.div_ceil(64)])
            } else {
                Seen::Set(Default::default())
            },
            all_seen: vec![0; p.keys.len().max(1).div_ceil(64)],
            stamp: vec![u64::MAX; n],
            psu: 0,
            pending: Vec::new(),
        }
    }

    /// Counts one whole PSU of stratum `h` (entries combined by cell,
    /// marks last).
    fn count(&mut self, n: usize, h: usize, z: &[(u32, f64, f64, f64)]) {
        self.psu += 1;
        let mut any = false;
        if self.pending.is_empty() && z.last().is_none_or(|e| e.0 & MARK == 0) {
            // No marks: the combined entries are one per cell.
            for e in z.iter().filter(|e| e.1 != 0.0) {
                self.psus[e.0 as usize] += 1;
                self.seen.insert((h * n) as u64 + u64::from(e.0));
                any = true;
            }
            if any {
                self.all_psus += 1;
                self.all_seen[h / 64] |= 1 << (h % 64);
            }
            return;
        }
        let live = z
            .iter()
            .filter(|e| e.0 & MARK != 0 || e.1 != 0.0)
            .map(|e| e.0 & !MARK)
            .chain(self.pending.drain(..));
        for c in live {
            if self.stamp[c as usize] != self.psu {
                self.stamp[c as usize] = self.psu;
                self.psus[c as usize] += 1;
                self.seen.insert((h * n) as u64 + u64::from(c));
                any = true;
            }
        }
        if any {
            self.all_psus += 1;
            self.all_seen[h / 64] |= 1 << (h % 64);
        }
    }

    fn merge(&mut self, o: DomainCounts) {
        self.psus.iter_mut().zip(&o.psus).for_each(|(a, b)| *a += b);
        self.all_psus += o.all_psus;
        self.seen.merge(o.seen);
        self.all_seen
            .iter_mut()
            .zip(&o.all_seen)
            .for_each(|(a, b)| *a |= b);
    }

    /// Per compacted cell and over all, `[PSUs, strata]`.
    fn finish(
        &self,
        p: &TaylorPlan<'_>,
        layout: &Layout,
        counted: &impl Fn(usize) -> bool,
    ) -> Domains {
        let n = p.cells + 1;
        let mut strata = vec![0u64; n];
        self.seen.for_each(|i| strata[(i % n as u64) as usize] += 1);
        let mut cell = vec![[0, 0]; layout.total];
        for c in (0..p.cells).filter(|&c| counted(c)) {
            cell[layout.dst(c)] = [self.psus[c], strata[c]];
        }
        let all_strata = self
            .all_seen
            .iter()
            .map(|b| u64::from(b.count_ones()))
            .sum();
        Domains {
            cell,
            all: [self.all_psus, all_strata],
        }
    }
}

fn to_f64(d: ColumnData<'_>, r: std::ops::Range<usize>, out: &mut Vec<f64>) {
    use crate::kernels::Val;
    out.clear();
    crate::kernels::dispatch!(d, r, |v| out.extend(v.iter().map(|x| x.f())));
}

fn to_i64(d: ColumnData<'_>, r: std::ops::Range<usize>, out: &mut Vec<i64>) {
    use crate::kernels::Val;
    out.clear();
    crate::kernels::dispatch!(d, r, |v| out.extend(v.iter().map(|x| x.i())));
}

/// Adds `b` to `a`, element by element.
fn add(a: &mut [f64], b: &[f64]) {
    a.iter_mut().zip(b).for_each(|(x, y)| *x += y);
}

/// Adds `b` to `a`, triple by triple.
fn add3(a: &mut [[f64; 3]], b: &[[f64; 3]]) {
    for (x, y) in a.iter_mut().zip(b) {
        for i in 0..3 {
            x[i] += y[i];
        }
    }
}

/// `[w², w·y, y²]` (or `[Σ w, Σ w·y, records]`) sums.
type Triple = [f64; 3];

/// Adds one set of sums of products (per cell, per margin's group, per
/// cell and group) to another: two workers' or two parts'.
fn add_products(
    (cell, ocell): (&mut [[f64; 3]], &[[f64; 3]]),
    (groups, ogroups): (&mut [Vec<Triple>], &[Vec<Triple>]),
    (cross, ocross): (&mut [Vec<f64>], &[Vec<f64>]),
) {
    add3(cell, ocell);
    for (a, b) in groups.iter_mut().zip(ogroups) {
        add3(a, b);
    }
    for (a, b) in cross.iter_mut().zip(ocross) {
        add(a, b);
    }
}

/// Sorts a PSU's entries by cell and adds those of one cell together.
fn combine(z: &mut Entries) {
    if z.len() > 1 {
        z.sort_unstable_by_key(|e| e.0);
        let mut k = 0;
        for i in 1..z.len() {
            if z[i].0 == z[k].0 {
                z[k].1 += z[i].1;
                z[k].2 += z[i].2;
                z[k].3 += z[i].3;
            } else {
                k += 1;
                z[k] = z[i];
            }
        }
        z.truncate(k + 1);
    }
}

impl TaylorAcc {
    /// A worker's Taylor sums, sized by the plan's cells; allocated
    /// fallibly ([`crate::core::Error::OutOfMemory`]), as the cube is.
    pub(crate) fn new(p: &TaylorPlan<'_>) -> crate::core::Result<Self> {
        use crate::core::alloc::filled;
        let n = p.cells + 1;
        let what = |s: &str| {
            let s = s.to_string();
            move || format!("the Taylor {s} of a table of {} cells", p.cells)
        };
        Ok(TaylorAcc {
            cell: filled(n, [0.0; 3], what("sums"))?,
            groups: p
                .groups
                .iter()
                .map(|(_, g)| filled(*g, [0.0; 3], what("margin sums")))
                .collect::<crate::core::Result<_>>()?,
            cross: p
                .groups
                .iter()
                .map(|_| filled(n, 0.0, what("cross sums")))
                .collect::<crate::core::Result<_>>()?,
            full: match &p.full {
                Some((_, _, size, tables)) => filled(
                    (size * p.full_width)
                        .saturating_mul(size * p.full_width)
                        .saturating_mul(*tables),
                    0.0,
                    what("covariance sums"),
                )?,
                None => Vec::new(),
            },
            strata: if p.scores_only {
                StrataSums::Scores(HashMap::new())
            } else if p.dense {
                StrataSums::Dense(filled(
                    p.keys.len().saturating_mul(n),
                    [0.0; 3],
                    what("sums by stratum"),
                )?)
            } else {
                StrataSums::Sparse(HashMap::new())
            },
            frags: HashMap::new(),
            unknown: 0,
            z: Vec::new(),
            gz: Vec::new(),
            scores: match &p.scores {
                Some((k, ..)) => filled(k * k, 0.0, what("score sums"))?,
                None => Vec::new(),
            },
            sv: Vec::new(),
            psus: 0,
            w: Vec::new(),
            y: Vec::new(),
            s: Vec::new(),
            c: Vec::new(),
            t: Vec::new(),
            dom: p.domains.then(|| DomainCounts::new(p)),
        })
    }

    /// Adds the rows `r` of a morsel: `idx` their cells (`trash` and
    /// beyond: not counted), `w` the weight column, `x` the analysis
    /// variable's and [`TaylorQuery::times`]' (`v`, whose `w·v` take the
    /// weight's place), `s`/`c` the strata and cluster columns; with
    /// [`TaylorPlan::domains`], `pre` their cells before the analysis
    /// variable's missing values were left out.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn morsel(
        &mut self,
        p: &TaylorPlan<'_>,
        (idx, pre): (&[u32], Option<&[u32]>),
        trash: u32,
        w: ColumnData<'_>,
        (x, v): (Option<ColumnData<'_>>, Option<ColumnData<'_>>),
        s: Option<ColumnData<'_>>,
        c: Option<ColumnData<'_>>,
        r: std::ops::Range<usize>,
    ) {
        let n = r.len();
        if !pre.unwrap_or(idx)[..n].iter().any(|&i| i < trash) {
            return;
        }
        to_f64(w, r.clone(), &mut self.w);
        match x {
            Some(x) => {
                to_f64(x, r.clone(), &mut self.y);
                for (y, w) in self.y.iter_mut().zip(&self.w) {
                    *y = (*y - p.shift) * w;
                }
            }
            None => {
                self.y.clear();
                self.y.resize(n, 0.0);
            }
        }
        if let (Some(v), Some(vs)) = (v, p.times) {
            // After `y`, which is of the weight alone; `v` in displayed
            // units, so `w·v` is in the weight's.
            to_f64(v, r.clone(), &mut self.t);
            for (w, t) in self.w.iter_mut().zip(&self.t) {
                *w *= t / vs;
            }
        }
        match s {
            Some(s) => to_i64(s, r.clone(), &mut self.s),
            None => {
                self.s.clear();
                self.s.resize(n, 0);
            }
        }
        let clustered = c.is_some();
        if let Some(c) = c {
            to_i64(c, r.clone(), &mut self.c);
        }
        let mut start = 0;
        let mut z = std::mem::take(&mut self.z);
        while start < n {
            let mut end = start + 1;
            if clustered {
                let key = (self.s[start], self.c[start]);
                while end < n && (self.s[end], self.c[end]) == key {
                    end += 1;
                }
            }
            z.clear();
            let kept = clustered && (!p.contiguous || start == 0 || end == n);
            for (j, &i) in idx.iter().enumerate().take(end).skip(start) {
                if i < trash {
                    z.push((i, self.w[j], self.y[j], 1.0));
                } else if let (Some(pre), Some(d)) = (pre, self.dom.as_mut()) {
                    // The analysis value missing: its cell's domain.
                    if pre[j] < trash && self.w[j] != 0.0 {
                        match kept {
                            true => z.push((pre[j] | MARK, 0.0, 0.0, 0.0)),
                            false => d.pending.push(pre[j]),
                        }
                    }
                }
            }
            let pending = self.dom.as_ref().is_some_and(|d| !d.pending.is_empty());
            if !z.is_empty() || pending {
                if kept {
                    self.frags
                        .entry((self.s[start], self.c[start]))
                        .or_default()
                        .extend_from_slice(&z);
                } else {
                    combine(&mut z);
                    match p.stratum(self.s[start]) {
                        Some(h) => self.close(p, h, &z),
                        None => {
                            self.unknown += (end - start) as u64;
                            if let Some(d) = self.dom.as_mut() {
                                d.pending.clear();
                            }
                        }
                    }
                }
            }
            start = end;
        }
        self.z = z;
    }

    /// Adds one whole PSU of stratum `h` (entries combined by cell).
    fn close(&mut self, p: &TaylorPlan<'_>, h: usize, z: &[(u32, f64, f64, f64)]) {
        let n = p.cells + 1;
        let z = match &mut self.dom {
            Some(d) => {
                d.count(n, h, z);
                // Marks last: the rest is the PSU's counted records.
                let z = &z[..z.partition_point(|e| e.0 & MARK == 0)];
                if z.is_empty() {
                    return;
                }
                z
            }
            None => z,
        };
        // R's degf() counts the PSUs (and strata) with a record of
        // non-zero weight.
        let live = z.iter().any(|e| e.1 != 0.0);
        self.psus += u64::from(live);
        if let (Some((len, a, b)), StrataSums::Scores(m)) = (&p.scores, &mut self.strata) {
            score_vector(&mut self.sv, *len, (a, b), z);
            let e = m.entry(h as u32).or_insert_with(|| (vec![0.0; *len], 0.0));
            add(&mut e.0, &self.sv);
            e.1 += f64::from(u8::from(live));
            self.score_outer(*len, p.coef[h][0]);
            return;
        }
        match &mut self.strata {
            StrataSums::Dense(v) => {
                for &(c, w, y, k) in z {
                    let e = &mut v[h * n + c as usize];
                    e[0] += w;
                    e[1] += y;
                    e[2] += k;
                }
            }
            StrataSums::Sparse(m) => {
                for &(c, w, y, k) in z {
                    let e = m.entry((h * n + c as usize) as u64).or_insert([0.0; 3]);
                    e[0] += w;
                    e[1] += y;
                    e[2] += k;
                }
            }
            StrataSums::Scores(_) => unreachable!("closed above"),
        }
        self.products(p, p.coef[h][0], z);
    }

    /// Adds `k` times the products of the totals `z` (combined by cell):
    /// of each cell's, of its margins' groups', of each cell's with its
    /// groups', and of every pair of cells of one table. A PSU's with
    /// `k = c_h`; a stratum's with `k = −d_h` (the centring).
    fn products(&mut self, p: &TaylorPlan<'_>, k: f64, z: &[(u32, f64, f64, f64)]) {
        if k == 0.0 {
            return;
        }
        if let Some((len, a, b)) = &p.scores {
            self.score_products(*len, (a, b), k, z);
        }
        for &(c, w, y, _) in z {
            let e = &mut self.cell[c as usize];
            e[0] += k * w * w;
            e[1] += k * w * y;
            e[2] += k * y * y;
        }
        let margins = match p.derive_margins {
            true => &[][..],
            false => &p.groups[..],
        };
        for (m, (map, _)) in margins.iter().enumerate() {
            self.gz.clear();
            for &(c, w, y, _) in z {
                let g = map[c as usize];
                if g == NONE {
                    continue;
                }
                match self.gz.iter_mut().find(|e| e.0 == g) {
                    Some(e) => {
                        e.1 += w;
                        e.2 += y;
                    }
                    None => self.gz.push((g, w, y)),
                }
            }
            for &(g, w, y) in &self.gz {
                let e = &mut self.groups[m][g as usize];
                e[0] += k * w * w;
                e[1] += k * w * y;
                e[2] += k * y * y;
            }
            for &(c, w, _, _) in z {
                let g = map[c as usize];
                if g != NONE {
                    let gw = self.gz.iter().find(|e| e.0 == g).map_or(0.0, |e| e.1);
                    self.cross[m][c as usize] += k * w * gw;
                }
            }
        }
        if let Some((table, pos, size, _)) = &p.full {
            // Each pair of distinct cells once (the entries are one per
            // cell); a cell with itself is `self.cell`'s, and the pairs'
            // two orders are summed when the tables are read.
            let (m, s) = (p.full_width, size * p.full_width);
            for (x, &(a, wa, ya, _)) in z.iter().enumerate() {
                let ta = table[a as usize];
                if ta == NONE {
                    continue;
                }
                let base = ta as usize * s * s + pos[a as usize] as usize * m * s;
                for &(b, wb, yb, _) in &z[x + 1..] {
                    if table[b as usize] != ta {
                        continue;
                    }
                    let at = base + pos[b as usize] as usize * m;
                    self.full[at] += k * wa * wb;
                    if m == 2 {
                        self.full[at + 1] += k * wa * yb;
                        self.full[at + s] += k * ya * wb;
                        self.full[at + s + 1] += k * ya * yb;
                    }
                }
            }
        }
    }

    /// Adds `k·s·s'` for the score `s` of the totals `z`.
    fn score_products(
        &mut self,
        len: usize,
        (a, b): (&[f64], &[f64]),
        k: f64,
        z: &[(u32, f64, f64, f64)],
    ) {
        score_vector(&mut self.sv, len, (a, b), z);
        self.score_outer(len, k);
    }

    /// Adds `k·s·s'` for the score `s` in `self.sv`.
    fn score_outer(&mut self, len: usize, k: f64) {
        if k == 0.0 {
            return;
        }
        for i in 0..len {
            let ki = k * self.sv[i];
            if ki == 0.0 {
                continue;
            }
            for j in i..len {
                self.scores[i * len + j] += ki * self.sv[j];
            }
        }
    }

    /// Unites two workers' sums.
    pub(crate) fn merge(&mut self, o: TaylorAcc) {
        if let (StrataSums::Scores(a), StrataSums::Scores(b)) = (&mut self.strata, &o.strata) {
            add_stratum_scores(a, b.iter().map(|(&h, e)| (h, (&e.0, e.1))));
        }
        add_products(
            (&mut self.cell, &o.cell),
            (&mut self.groups, &o.groups),
            (&mut self.cross, &o.cross),
        );
        add(&mut self.full, &o.full);
        add(&mut self.scores, &o.scores);
        self.psus += o.psus;
        if let (Some(a), Some(b)) = (self.dom.as_mut(), o.dom) {
            a.merge(b);
        }
        match (&mut self.strata, o.strata) {
            (StrataSums::Dense(a), StrataSums::Dense(b)) => add3(a, &b),
            (StrataSums::Sparse(a), StrataSums::Sparse(b)) => {
                for (k, v) in b {
                    let e = a.entry(k).or_insert([0.0; 3]);
                    e[0] += v[0];
                    e[1] += v[1];
                    e[2] += v[2];
                }
            }
            (StrataSums::Scores(_), StrataSums::Scores(_)) => {}
            _ => unreachable!("one plan, one kind of strata sums"),
        }
        for (k, v) in o.frags {
            self.frags.entry(k).or_default().extend(v);
        }
        self.unknown += o.unknown;
    }

    /// Closes the PSUs kept by key, subtracts each stratum's `d_h` terms,
    /// and moves the covariances into the compacted cube's cells, scaled
    /// to displayed units (`ws`, `xs`: the weight's and the analysis
    /// variable's `10^decimals`).
    pub(crate) fn finish(
        mut self,
        p: &TaylorPlan<'_>,
        layout: &Layout,
        counted: impl Fn(usize) -> bool,
        scales: (f64, f64),
    ) -> TaylorCells {
        self.close_kept(p);
        let strata = self.strata_counted(p);
        let avg = self.subtract_strata(p);
        if p.derive_margins {
            self.derive_margins(p);
        }
        let psus = self.psus;
        let domains = self.dom.as_ref().map(|d| d.finish(p, layout, &counted));
        TaylorCells {
            domain_psus: psus,
            domain_strata: strata,
            domains,
            ..self.into_cells(p, layout, counted, scales, &avg)
        }
    }

    /// Each margin's sums from the full tables ([`TaylorPlan::derive_margins`]):
    /// a group's variances are the sums of its cells' pairs', a cell's
    /// covariance with its group the sum of its own with each cell's.
    fn derive_margins(&mut self, p: &TaylorPlan<'_>) {
        if p.full.is_none() {
            return;
        }
        let m = p.full_width;
        let mut derived = Vec::new();
        for (map, groups) in &p.groups {
            let mut members: Vec<Vec<usize>> = vec![Vec::new(); *groups];
            for c in 0..p.cells {
                if map[c] != NONE {
                    members[map[c] as usize].push(c);
                }
            }
            let (mut var, mut cross) = (vec![[0.0; 3]; *groups], vec![0.0; self.cross[0].len()]);
            for (g, cs) in members.iter().enumerate() {
                for &a in cs {
                    for &b in cs {
                        let ww = self.pair(p, (a, b), (0, 0));
                        cross[a] += ww;
                        var[g][0] += ww;
                        if m == 2 {
                            var[g][1] += self.pair(p, (a, b), (0, 1));
                            var[g][2] += self.pair(p, (a, b), (1, 1));
                        }
                    }
                }
            }
            derived.push((var, cross));
        }
        for (mi, (var, cross)) in derived.into_iter().enumerate() {
            self.groups[mi] = var;
            self.cross[mi] = cross;
        }
    }

    /// The covariance of total `i` of planned cell `a` and total `j` of
    /// `b` (0: `W`, 1: `Y`; the cells in one full table), stored units:
    /// a cell with itself is its own sums; two cells, their pair summed
    /// in either order ([`TaylorAcc::products`] keeps each pair once).
    fn pair(&self, p: &TaylorPlan<'_>, (a, b): (usize, usize), (i, j): (usize, usize)) -> f64 {
        if a == b {
            return self.cell[a][i + j];
        }
        let (table, pos, size, _) = p.full.as_ref().expect("full tables");
        let (m, s) = (p.full_width, size * p.full_width);
        let t = table[a] as usize * s * s;
        let at = |x: usize, y: usize| t + pos[x] as usize * m * s + pos[y] as usize * m;
        self.full[at(a, b) + i * s + j] + self.full[at(b, a) + j * s + i]
    }

    /// Per table of the [`TaylorQuery::full`] margin, the covariances of
    /// its cells' totals in displayed units (`counted_cells`: compacted
    /// and planned index of each cell with records; `flat`: a compacted
    /// cell's index over the dimensions a predicate keeps, and their
    /// cells).
    fn full_tables(
        &self,
        p: &TaylorPlan<'_>,
        counted_cells: &[(usize, usize)],
        flat: &Flat<'_>,
        unit: [f64; 3],
    ) -> Vec<Vec<f64>> {
        let (table, ..) = p.full.as_ref().expect("full tables");
        let keep = &p.keeps[p.full_margin];
        let (tables, m) = (flat(0, &|d| keep[d]).1, p.full_width);
        let k = flat(0, &|d| !keep[d]).1 * m;
        let mut out = vec![vec![0.0; k * k]; tables];
        for &(da, a) in counted_cells {
            let (ta, pa) = (flat(da, &|d| keep[d]).0, flat(da, &|d| !keep[d]).0);
            for &(db, b) in counted_cells.iter().filter(|e| table[e.1] == table[a]) {
                let pb = flat(db, &|d| !keep[d]).0;
                for i in 0..m {
                    for j in 0..m {
                        out[ta][(pa * m + i) * k + pb * m + j] =
                            self.pair(p, (a, b), (i, j)) / unit[i + j];
                    }
                }
            }
        }
        out
    }

    /// The strata with records of non-zero weight counted (R's `degf()`).
    fn strata_counted(&self, p: &TaylorPlan<'_>) -> u64 {
        let n = p.cells + 1;
        let mut seen: Vec<usize> = match &self.strata {
            StrataSums::Dense(v) => v
                .iter()
                .enumerate()
                .filter(|(_, e)| e[0] != 0.0)
                .map(|(i, _)| i / n)
                .collect(),
            StrataSums::Sparse(m) => m
                .iter()
                .filter(|(_, e)| e[0] != 0.0)
                .map(|(&i, _)| i as usize / n)
                .collect(),
            StrataSums::Scores(m) => m
                .iter()
                .filter(|(_, e)| e.1 != 0.0)
                .map(|(&h, _)| h as usize)
                .collect(),
        };
        seen.sort_unstable();
        seen.dedup();
        seen.len() as u64
    }

    /// Closes the PSUs kept by key (those cut by a morsel's edges, or
    /// every one when PSUs are not contiguous).
    fn close_kept(&mut self, p: &TaylorPlan<'_>) {
        let frags = std::mem::take(&mut self.frags);
        // In key order, so the sums do not depend on the hash map's.
        let mut frags: Vec<((i64, i64), Entries)> = frags.into_iter().collect();
        frags.sort_unstable_by_key(|(k, _)| *k);
        for ((s, _), mut z) in frags {
            combine(&mut z);
            match p.stratum(s) {
                Some(h) => self.close(p, h, &z),
                None => self.unknown += 1,
            }
        }
    }

    /// Subtracts each stratum's `d_h` terms (its totals enter as a PSU's
    /// would, times −d_h); the lonely-PSU scales of its strata.
    fn subtract_strata(&mut self, p: &TaylorPlan<'_>) -> Average {
        let n = p.cells + 1;
        if let (Some((len, ..)), StrataSums::Scores(m)) = (&p.scores, &self.strata) {
            // Each stratum's score total enters as a PSU's would, times
            // −d_h (in stratum order, so the sums do not depend on the
            // map's).
            let mut by: Vec<(u32, Vec<f64>)> = m
                .iter()
                .filter(|(_, e)| e.1 != 0.0)
                .map(|(&h, e)| (h, e.0.clone()))
                .collect();
            by.sort_unstable_by_key(|e| e.0);
            let listed: Vec<(usize, u32, f64, f64)> =
                by.iter().map(|e| (e.0 as usize, 0, 0.0, 0.0)).collect();
            for (h, sv) in by {
                self.sv = sv;
                self.score_outer(*len, -p.coef[h as usize][1]);
            }
            return Average::new(p, &listed);
        }
        // Each stratum's non-zero totals, stratum by stratum.
        let mut by_stratum: Vec<(usize, u32, f64, f64)> = match &self.strata {
            StrataSums::Dense(v) => v
                .iter()
                .enumerate()
                .filter(|(_, e)| e[2] != 0.0)
                .map(|(i, e)| (i / n, (i % n) as u32, e[0], e[1]))
                .collect(),
            StrataSums::Sparse(m) => m
                .iter()
                .map(|(&i, e)| ((i as usize) / n, (i as usize % n) as u32, e[0], e[1]))
                .collect(),
            StrataSums::Scores(_) => unreachable!("answered above"),
        };
        by_stratum.sort_unstable_by_key(|e| (e.0, e.1));
        let avg = Average::new(p, &by_stratum);
        let mut i = 0;
        let mut part: Entries = Vec::new();
        while i < by_stratum.len() {
            let h = by_stratum[i].0;
            part.clear();
            while i < by_stratum.len() && by_stratum[i].0 == h {
                let (_, c, w, y) = by_stratum[i];
                part.push((c, w, y, 1.0));
                i += 1;
            }
            // The stratum's totals enter as a PSU's would, times −d_h.
            self.products(p, -p.coef[h][1], &part);
        }
        avg
    }

    /// The covariances moved into the compacted cube's cells, scaled to
    /// displayed units (`ws`, `xs`: the weight's and the analysis
    /// variable's `10^decimals`).
    fn into_cells(
        self,
        p: &TaylorPlan<'_>,
        layout: &Layout,
        counted: impl Fn(usize) -> bool,
        (ws, xs): (f64, f64),
        avg: &Average,
    ) -> TaylorCells {
        // To displayed units and the compacted cube.
        let unit = [ws * ws, ws * ws * xs, ws * ws * xs * xs];
        let scale3 = |v: [f64; 3]| [v[0] / unit[0], v[1] / unit[1], v[2] / unit[2]];
        let total = layout.total;
        let shape = layout.new_shape();
        let scores = p.scores.as_ref().map(|(k, ..)| {
            let k = *k;
            let mut m = vec![0.0; k * k];
            for i in 0..k {
                for j in i..k {
                    m[i * k + j] = self.scores[i * k + j];
                    m[j * k + i] = self.scores[i * k + j];
                }
            }
            m
        });
        if shape.contains(&0) {
            // No record counted: an empty cube.
            return TaylorCells {
                cell: Vec::new(),
                margins: p
                    .groups
                    .iter()
                    .map(|_| MarginCov {
                        group: Vec::new(),
                        var: Vec::new(),
                        cross: Vec::new(),
                        scale: Vec::new(),
                    })
                    .collect(),
                full: p.full.as_ref().map(|_| Vec::new()),
                unknown_strata: self.unknown,
                cell_scale: Vec::new(),
                all_scale: 1.0,
                shift: p.shift / xs,
                scores,
                domain_psus: 0,
                domain_strata: 0,
                domains: None,
            };
        }
        let mut cell = vec![[0.0; 3]; total];
        let mut margins: Vec<MarginCov> = p
            .groups
            .iter()
            .map(|_| MarginCov {
                group: vec![None; total],
                var: Vec::new(),
                cross: vec![0.0; total],
                scale: Vec::new(),
            })
            .collect();
        // A compacted cell's index over the dimensions `keep` selects.
        let flat = |dst: usize, keep: &dyn Fn(usize) -> bool| -> (usize, usize) {
            let (mut r, mut g, mut mult, mut size) = (dst, 0, 1, 1);
            for d in (0..shape.len()).rev() {
                let i = r % shape[d];
                r /= shape[d];
                if keep(d) {
                    g += i * mult;
                    mult *= shape[d];
                }
            }
            for (d, &s) in shape.iter().enumerate() {
                if keep(d) {
                    size *= s;
                }
            }
            (g, size)
        };
        let counted_cells: Vec<(usize, usize)> = (0..p.cells)
            .filter(|&c| counted(c))
            .map(|c| (layout.dst(c), c))
            .collect();
        let mut cell_scale = vec![1.0; total];
        for &(dst, c) in &counted_cells {
            // Not computed when only the scores are asked for.
            cell[dst] = match p.scores_only {
                true => [f64::NAN; 3],
                false => scale3(self.cell[c]),
            };
            cell_scale[dst] = avg.cell(c);
        }
        for (m, (map, _)) in p.groups.iter().enumerate() {
            let keep = &p.keeps[m];
            let mc = &mut margins[m];
            mc.var = vec![[0.0; 3]; flat(0, &|d| keep[d]).1];
            mc.scale = vec![1.0; mc.var.len()];
            if !p.skips[m] {
                // Cells without records belong to their group too (a
                // percentage of 0 with an SE of 0).
                for (dst, g) in mc.group.iter_mut().enumerate() {
                    *g = Some(flat(dst, &|d| keep[d]).0);
                }
            }
            for &(dst, c) in &counted_cells {
                let g = map[c];
                if g == NONE {
                    continue;
                }
                let x = flat(dst, &|d| keep[d]).0;
                mc.var[x] = scale3(self.groups[m][g as usize]);
                mc.scale[x] = avg.group(m, g as usize);
                mc.group[dst] = Some(x);
                mc.cross[dst] = self.cross[m][c] / unit[0];
            }
        }
        let full = p
            .full
            .as_ref()
            .map(|_| self.full_tables(p, &counted_cells, &flat, unit));
        TaylorCells {
            cell,
            margins,
            full,
            unknown_strata: self.unknown,
            cell_scale,
            all_scale: avg.all,
            shift: p.shift / xs,
            scores,
            domain_psus: 0,
            domain_strata: 0,
            domains: None,
        }
    }
}

/// The factors of lonely PSUs `average`d, per domain: its strata over its
/// strata with a variance, among those with records in the domain (R
/// `onestage` on the domain's records); 1 without the option.
struct Average {
    cell: Vec<f64>,
    groups: Vec<Vec<f64>>,
    all: f64,
    on: bool,
}

impl Average {
    /// From each stratum's counted cells (`by_stratum`: sorted by stratum).
    fn new(p: &TaylorPlan<'_>, by_stratum: &[(usize, u32, f64, f64)]) -> Average {
        if p.average.is_empty() {
            return Average {
                cell: Vec::new(),
                groups: Vec::new(),
                all: 1.0,
                on: false,
            };
        }
        let n = p.cells + 1;
        // [strata, strata with a variance] per cell, group and overall;
        // the last stratum counted for each, so each counts once.
        let mut cell = vec![[0usize; 2]; n];
        let mut groups: Vec<Vec<[usize; 2]>> =
            p.groups.iter().map(|(_, g)| vec![[0; 2]; *g]).collect();
        let mut seen: Vec<Vec<usize>> =
            p.groups.iter().map(|(_, g)| vec![usize::MAX; *g]).collect();
        let mut all = [0usize; 2];
        let mut last = usize::MAX;
        for &(h, c, _, _) in by_stratum {
            let ok = !p.average[h] as usize;
            if h != last {
                last = h;
                all[0] += 1;
                all[1] += ok;
            }
            cell[c as usize][0] += 1;
            cell[c as usize][1] += ok;
            for (m, (map, _)) in p.groups.iter().enumerate() {
                let g = map[c as usize];
                if g != NONE && seen[m][g as usize] != h {
                    seen[m][g as usize] = h;
                    groups[m][g as usize][0] += 1;
                    groups[m][g as usize][1] += ok;
                }
            }
        }
        let f = |[a, b]: [usize; 2]| a as f64 / b as f64;
        Average {
            cell: cell.into_iter().map(f).collect(),
            groups: groups
                .into_iter()
                .map(|g| g.into_iter().map(f).collect())
                .collect(),
            all: f(all),
            on: true,
        }
    }

    fn cell(&self, c: usize) -> f64 {
        if self.on {
            self.cell[c]
        } else {
            1.0
        }
    }

    fn group(&self, m: usize, g: usize) -> f64 {
        if self.on {
            self.groups[m][g]
        } else {
            1.0
        }
    }
}

/// A stratum of a [`TaylorPartial`]: its key, its variance coefficients
/// (`c_h`, `d_h`: they rest on the stratum's PSU count in the whole
/// dataset), and the dataset whose design gave them.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PartStratum {
    /// The stratum's stored value.
    pub key: i64,
    /// Its value as the data gives it (text, or the number with its
    /// implied decimals): strata of different datasets are compared by it.
    #[serde(default)]
    pub value: String,
    /// `c_h`.
    pub c: f64,
    /// `d_h`.
    pub d: f64,
    /// A lonely PSU's stratum whose variance is `average`d.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub lonely: bool,
    /// The dataset the design belongs to.
    pub source: String,
}

/// Two parts' strata united: each from one dataset, the same (dataset,
/// key) is one stratum (ranges of a dataset); the same value in two
/// datasets is refused (its variance rests on its PSU count in one of
/// them), unless its PSUs are not centred (`d = 0`: each record its own
/// PSU without a design, HC0), when its sum of squares is the sum of the
/// datasets'. Also where each part's strata are in the united list.
///
/// # Errors
/// [`crate::Error::Invalid`] for a stratum value in two datasets.
pub fn unite_strata(
    a: &[PartStratum],
    b: &[PartStratum],
    stratified: bool,
) -> crate::core::Result<(Vec<PartStratum>, [Vec<usize>; 2])> {
    let mut strata: Vec<PartStratum> = a.iter().chain(b).cloned().collect();
    strata.sort_by(|a, b| (&a.source, a.key).cmp(&(&b.source, b.key)));
    strata.dedup_by(|q, p| (&p.source, p.key) == (&q.source, q.key));
    let mut by_value: HashMap<&str, &PartStratum> = HashMap::new();
    for st in &strata {
        if let Some(other) = by_value.insert(&st.value, st) {
            let uncentred = st.d == 0.0 && other.d == 0.0 && st.c == other.c;
            if other.source != st.source && !uncentred {
                return Err(crate::core::Error::Invalid(if stratified {
                    format!(
                        "the Taylor design's stratum {} is in two datasets ({} and {}): its variance rests on its PSU count in one dataset, so parts of different datasets can only be merged when each stratum lies within one of them (import the data as one dataset and split it by records, or use replicate weights)",
                        st.value, other.source, st.source
                    )
                } else {
                    format!(
                        "the Taylor design has no strata, so its one stratum spans two datasets ({} and {}): its variance rests on the PSU count of the whole, which neither knows (set strata that lie within each dataset, answer the records as one dataset, or use replicate weights)",
                        other.source, st.source
                    )
                }));
            }
        }
    }
    let index = |list: &[PartStratum]| -> Vec<usize> {
        list.iter()
            .map(|st| {
                strata
                    .binary_search_by(|q| (&q.source, q.key).cmp(&(&st.source, st.key)))
                    .expect("united")
            })
            .collect()
    };
    let maps = [index(a), index(b)];
    Ok((strata, maps))
}

/// One PSU's (or fragment's) totals per cell: `(cell, Σ w, Σ w·y,
/// records)`, displayed units.
pub type PartEntries = Vec<(u32, f64, f64, f64)>;

/// The Taylor linearization sums of a part of the rows, in the partial
/// result's cells (categories with rows, in value order) and displayed
/// units, ready to merge with other parts' (see [`crate::Partial`]).
///
/// Whole PSUs are folded into the sums of products (`cell`, `groups`,
/// `cross`, `full`) and their strata's totals; a PSU that may continue in
/// another part (a range's first and last, or every PSU of a design whose
/// PSUs are not stored contiguously) is kept `open` by key, added to the
/// same PSU's fragments from other parts, and closed when the merged parts
/// are finished. Each PSU's total is thus whole before it is squared, so
/// the variance of merged parts is the whole data's when every PSU of a
/// dataset is either within one part or kept open, and each stratum is in
/// one dataset (the merge refuses a stratum of two datasets: its PSU
/// count, in `c_h` and `d_h`, is each dataset's own).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TaylorPartial {
    /// The design's strata: those of each dataset, by (dataset, key).
    pub strata: Vec<PartStratum>,
    /// The design has a strata variable (without one, its single
    /// stratum is the whole of each dataset).
    #[serde(default = "yes")]
    pub stratified: bool,
    /// Lonely PSUs are `average`d ([`TaylorQuery::average`]).
    pub average: bool,
    /// The query's margins: dimensions kept, missing categories left out.
    pub margins: Vec<(Vec<bool>, bool)>,
    /// The margin of the full tables ([`TaylorQuery::full`]).
    pub full: Option<usize>,
    /// `y` is `w · (x − shift)`.
    pub shift: f64,
    /// Per cell: Σ_h c_h Σ_j of `[w², w·y, y²]` over closed PSUs.
    pub cell: Vec<[f64; 3]>,
    /// Per margin and group: the same of the groups' totals.
    pub groups: Vec<Vec<[f64; 3]>>,
    /// Per margin and cell: Σ c_h w_cell · w_group.
    pub cross: Vec<Vec<f64>>,
    /// The full tables' products, `[table][a][b]` flattened (`None`: not
    /// asked for, or too large).
    pub full_cov: Option<Vec<f64>>,
    /// Closed PSUs' totals per stratum (its index in `strata`) and cell:
    /// `[Σ w, Σ w·y, records]`.
    pub totals: Vec<(u32, u32, [f64; 3])>,
    /// When only linear scores were asked for, instead of `totals`: per
    /// stratum (its index in `strata`) its closed PSUs' score total and
    /// records, displayed units.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub strata_scores: Vec<(u32, Vec<f64>, f64)>,
    /// Open PSUs by (stratum index in `strata`, cluster key).
    pub open: Vec<((u32, i64), PartEntries)>,
    /// Records (or open PSUs) in strata the design does not know.
    pub unknown: u64,
    /// Linear scores ([`TaylorQuery::scores`]).
    #[serde(default)]
    pub scores: Option<PartScores>,
    /// Whole PSUs folded into the sums (with records counted).
    #[serde(default)]
    pub psus: u64,
}

/// The linear scores of a [`TaylorPartial`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PartScores {
    /// The length of the score vector.
    pub len: usize,
    /// Per cell, `a` and `b` (`len` each, row by row; displayed units).
    pub a: Vec<f64>,
    /// See `a`.
    pub b: Vec<f64>,
    /// Σ_h c_h Σ_j s_hj s_hj' over closed PSUs (upper triangle, `len ×
    /// len` row by row).
    pub sums: Vec<f64>,
}

fn yes() -> bool {
    true
}

/// The linear score `s = Σ w·a_c + y·b_c` of the totals `z` (per cell
/// `a_c`, `b_c`: `len` each) into `sv`.
fn score_vector(
    sv: &mut Vec<f64>,
    len: usize,
    (a, b): (&[f64], &[f64]),
    z: &[(u32, f64, f64, f64)],
) {
    sv.clear();
    sv.resize(len, 0.0);
    for &(c, w, y, _) in z {
        let at = c as usize * len;
        for (j, s) in sv.iter_mut().enumerate() {
            *s += w * a[at + j] + y * b[at + j];
        }
    }
}

/// Adds strata's score totals and records (by stratum index) to `m`.
fn add_stratum_scores<'a>(
    m: &mut HashMap<u32, (Vec<f64>, f64)>,
    from: impl Iterator<Item = (u32, (&'a Vec<f64>, f64))>,
) {
    for (h, (s, n)) in from {
        let e = m.entry(h).or_insert_with(|| (vec![0.0; s.len()], 0.0));
        add(&mut e.0, s);
        e.1 += n;
    }
}

/// Index over the dimensions `keep` selects of each flat index of `shape`.
fn sub_index(shape: &[usize], keep: &[bool]) -> Vec<usize> {
    let n: usize = shape.iter().product();
    (0..n)
        .map(|c| {
            let (mut r, mut g, mut mult) = (c, 0, 1);
            for d in (0..shape.len()).rev() {
                let i = r % shape[d];
                r /= shape[d];
                if keep[d] {
                    g += i * mult;
                    mult *= shape[d];
                }
            }
            g
        })
        .collect()
}

/// Size of the index over the dimensions `keep` selects.
fn sub_size(shape: &[usize], keep: &[bool]) -> usize {
    shape
        .iter()
        .zip(keep)
        .filter(|(_, &k)| k)
        .map(|(&s, _)| s)
        .product()
}

/// Where each index over the kept dimensions of the old shape (per
/// dimension, `maps[d]`: old category → new) goes in the new shape.
fn sub_map(maps: &[Vec<usize>], new_shape: &[usize], keep: &[bool]) -> Vec<usize> {
    let old: Vec<usize> = maps.iter().map(Vec::len).collect();
    let n = sub_size(&old, keep);
    let dims: Vec<usize> = (0..maps.len()).filter(|&d| keep[d]).collect();
    let mut out = Vec::with_capacity(n);
    let mut idx = vec![0usize; dims.len()];
    for _ in 0..n {
        let mut dst = 0;
        for (j, &d) in dims.iter().enumerate() {
            dst = dst * new_shape[d] + maps[d][idx[j]];
        }
        out.push(dst);
        for j in (0..idx.len()).rev() {
            idx[j] += 1;
            if idx[j] < maps[dims[j]].len() {
                break;
            }
            idx[j] = 0;
        }
    }
    out
}

impl TaylorAcc {
    /// The part's sums as a [`TaylorPartial`] in the compacted cells of
    /// `layout`: PSUs kept by key are closed unless `open` says they may
    /// continue in another part.
    pub(crate) fn into_partial(
        mut self,
        p: &TaylorPlan<'_>,
        layout: &Layout,
        counted: impl Fn(usize) -> bool,
        (ws, xs): (f64, f64),
        open: impl Fn(&(i64, i64)) -> bool,
        (source, values): (&str, &[String]),
    ) -> TaylorPartial {
        let frags = std::mem::take(&mut self.frags);
        let mut frags: Vec<((i64, i64), Entries)> = frags.into_iter().collect();
        frags.sort_unstable_by_key(|(k, _)| *k);
        let mut kept = Vec::new();
        for (key, mut z) in frags {
            combine(&mut z);
            match p.stratum(key.0) {
                Some(h) if open(&key) => kept.push(((h as u32, key.1), z)),
                Some(h) => self.close(p, h, &z),
                None => self.unknown += 1,
            }
        }
        let unit = [ws * ws, ws * ws * xs, ws * ws * xs * xs];
        let scale3 = |v: [f64; 3]| [v[0] / unit[0], v[1] / unit[1], v[2] / unit[2]];
        let shape: Vec<usize> = layout.new_shape().to_vec();
        let total = layout.total;
        let dst: Vec<Option<usize>> = (0..p.cells)
            .map(|c| counted(c).then(|| layout.dst(c)))
            .collect();
        let mut cell = vec![[0.0; 3]; total];
        let mut groups: Vec<Vec<[f64; 3]>> = Vec::new();
        let mut cross: Vec<Vec<f64>> = Vec::new();
        for (m, (map, _)) in p.groups.iter().enumerate() {
            let keep = &p.keeps[m];
            let gx = sub_index(&shape, keep);
            let mut g = vec![[0.0; 3]; sub_size(&shape, keep)];
            let mut x = vec![0.0; total];
            for (c, d) in dst.iter().enumerate() {
                let Some(d) = *d else { continue };
                if map[c] != NONE {
                    g[gx[d]] = scale3(self.groups[m][map[c] as usize]);
                    x[d] = self.cross[m][c] / unit[0];
                }
            }
            groups.push(g);
            cross.push(x);
        }
        for (c, d) in dst.iter().enumerate() {
            if let Some(d) = *d {
                cell[d] = scale3(self.cell[c]);
            }
        }
        let full_cov = p.full.as_ref().map(|(table, pos, size, _)| {
            let keep = &p.keeps[p.full_margin];
            let inverse: Vec<bool> = keep.iter().map(|k| !k).collect();
            let (tx, px) = (sub_index(&shape, keep), sub_index(&shape, &inverse));
            let k = sub_size(&shape, &inverse);
            let mut out = vec![0.0; sub_size(&shape, keep) * k * k];
            for (a, da) in dst.iter().enumerate() {
                let Some(da) = *da else { continue };
                for (b, db) in dst.iter().enumerate() {
                    let Some(db) = *db else { continue };
                    if table[a] != table[b] {
                        continue;
                    }
                    out[tx[da] * k * k + px[da] * k + px[db]] =
                        self.full[table[a] as usize * size * size
                            + pos[a] as usize * size
                            + pos[b] as usize]
                            / unit[0];
                }
            }
            out
        });
        let n = p.cells + 1;
        let tot = |h: usize, c: usize, e: &[f64; 3]| -> Option<(u32, u32, [f64; 3])> {
            let d = dst.get(c).copied().flatten()?;
            Some((h as u32, d as u32, [e[0] / ws, e[1] / (ws * xs), e[2]]))
        };
        let mut totals: Vec<(u32, u32, [f64; 3])> = match &self.strata {
            StrataSums::Dense(v) => v
                .iter()
                .enumerate()
                .filter(|(_, e)| e[2] != 0.0)
                .filter_map(|(i, e)| tot(i / n, i % n, e))
                .collect(),
            StrataSums::Sparse(m) => m
                .iter()
                .filter_map(|(&i, e)| tot(i as usize / n, i as usize % n, e))
                .collect(),
            StrataSums::Scores(_) => Vec::new(),
        };
        totals.sort_unstable_by_key(|e| (e.0, e.1));
        let mut strata_scores: Vec<(u32, Vec<f64>, f64)> = match &self.strata {
            StrataSums::Scores(m) => m.iter().map(|(&h, e)| (h, e.0.clone(), e.1)).collect(),
            _ => Vec::new(),
        };
        strata_scores.sort_unstable_by_key(|e| e.0);
        let open = kept
            .into_iter()
            .map(|(key, z)| {
                let z = z
                    .into_iter()
                    .filter_map(|(c, w, y, k)| {
                        dst[c as usize].map(|d| (d as u32, w / ws, y / (ws * xs), k))
                    })
                    .collect();
                (key, z)
            })
            .collect();
        TaylorPartial {
            strata: p
                .keys
                .iter()
                .enumerate()
                .map(|(h, &key)| PartStratum {
                    key,
                    value: values.get(h).cloned().unwrap_or_else(|| key.to_string()),
                    c: p.coef[h][0],
                    d: p.coef[h][1],
                    lonely: p.average.get(h).copied().unwrap_or(false),
                    source: source.to_string(),
                })
                .collect(),
            stratified: p.strata.is_some(),
            average: !p.average.is_empty(),
            margins: p
                .keeps
                .iter()
                .cloned()
                .zip(p.skips.iter().copied())
                .collect(),
            full: p.full.as_ref().map(|_| p.full_margin),
            shift: p.shift / xs,
            cell,
            groups,
            cross,
            full_cov,
            totals,
            strata_scores,
            open,
            unknown: self.unknown,
            psus: self.psus,
            scores: part_scores(p, &dst, total, self.scores),
        }
    }
}

/// The linear scores of a part: each counted cell's coefficients moved
/// to its compacted cell (`dst`), and the sums of products.
fn part_scores(
    p: &TaylorPlan<'_>,
    dst: &[Option<usize>],
    total: usize,
    sums: Vec<f64>,
) -> Option<PartScores> {
    let ((k, ..), (ra, rb)) = (p.scores.as_ref()?, p.raw_scores.as_ref()?);
    let k = *k;
    let (mut a, mut b) = (vec![0.0; total * k], vec![0.0; total * k]);
    for (c, d) in dst.iter().enumerate() {
        if let Some(d) = *d {
            a[d * k..(d + 1) * k].copy_from_slice(&ra[c * k..(c + 1) * k]);
            b[d * k..(d + 1) * k].copy_from_slice(&rb[c * k..(c + 1) * k]);
        }
    }
    Some(PartScores { len: k, a, b, sums })
}

impl TaylorPartial {
    /// The same sums with `y` centred at `shift` instead: `y' = y + δ·w`
    /// with `δ = self.shift − shift`, so products of `y` gain `δ` times
    /// those of `w` (exact algebra; one rounding per sum).
    fn recentre(&mut self, shift: f64) {
        let d = self.shift - shift;
        if d == 0.0 {
            return;
        }
        let re = |e: &mut [f64; 3]| {
            let (a, b, c) = (e[0], e[1], e[2]);
            e[1] = b + d * a;
            e[2] = c + 2.0 * d * b + d * d * a;
        };
        self.cell.iter_mut().for_each(re);
        self.groups.iter_mut().flatten().for_each(re);
        for t in &mut self.totals {
            t.2[1] += d * t.2[0];
        }
        for (_, z) in &mut self.open {
            for e in z.iter_mut() {
                e.2 += d * e.1;
            }
        }
        self.shift = shift;
    }

    /// The sums moved into a merged result's cells: `maps[d]` takes
    /// this part's categories of dimension `d` to the merged ones, of
    /// which there are `shape[d]`.
    fn remap(&self, maps: &[Vec<usize>], shape: &[usize]) -> TaylorPartial {
        let all = vec![true; shape.len()];
        let cm = sub_map(maps, shape, &all);
        let total = sub_size(shape, &all);
        let mut cell = vec![[0.0; 3]; total];
        for (i, e) in self.cell.iter().enumerate() {
            cell[cm[i]] = *e;
        }
        let mut groups = Vec::new();
        let mut cross = Vec::new();
        for (m, (keep, _)) in self.margins.iter().enumerate() {
            let gm = sub_map(maps, shape, keep);
            let mut g = vec![[0.0; 3]; sub_size(shape, keep)];
            for (i, e) in self.groups[m].iter().enumerate() {
                g[gm[i]] = *e;
            }
            let mut x = vec![0.0; total];
            for (i, e) in self.cross[m].iter().enumerate() {
                x[cm[i]] = *e;
            }
            groups.push(g);
            cross.push(x);
        }
        let full_cov = match (&self.full_cov, self.full) {
            (Some(f), Some(fm)) => {
                let keep = &self.margins[fm].0;
                let inverse: Vec<bool> = keep.iter().map(|k| !k).collect();
                let (tm, pm) = (sub_map(maps, shape, keep), sub_map(maps, shape, &inverse));
                let (tables, k) = (sub_size(shape, keep), sub_size(shape, &inverse));
                let ko = pm.len();
                (tables.saturating_mul(k).saturating_mul(k) <= MAX_FULL).then(|| {
                    let mut out = vec![0.0; tables * k * k];
                    for (t, &nt) in tm.iter().enumerate() {
                        for (a, &na) in pm.iter().enumerate() {
                            for (b, &nb) in pm.iter().enumerate() {
                                out[nt * k * k + na * k + nb] = f[t * ko * ko + a * ko + b];
                            }
                        }
                    }
                    out
                })
            }
            _ => None,
        };
        let totals = self
            .totals
            .iter()
            .map(|&(h, c, e)| (h, cm[c as usize] as u32, e))
            .collect();
        let open = self
            .open
            .iter()
            .map(|(key, z)| {
                (
                    *key,
                    z.iter()
                        .map(|&(c, w, y, k)| (cm[c as usize] as u32, w, y, k))
                        .collect(),
                )
            })
            .collect();
        TaylorPartial {
            strata: self.strata.clone(),
            stratified: self.stratified,
            average: self.average,
            margins: self.margins.clone(),
            full: self.full,
            shift: self.shift,
            cell,
            groups,
            cross,
            full_cov,
            totals,
            strata_scores: self.strata_scores.clone(),
            open,
            unknown: self.unknown,
            psus: self.psus,
            scores: self.scores.as_ref().map(|sc| {
                let k = sc.len;
                let (mut a, mut b) = (vec![0.0; total * k], vec![0.0; total * k]);
                for (i, &to) in cm.iter().enumerate().take(sc.a.len() / k.max(1)) {
                    a[to * k..(to + 1) * k].copy_from_slice(&sc.a[i * k..(i + 1) * k]);
                    b[to * k..(to + 1) * k].copy_from_slice(&sc.b[i * k..(i + 1) * k]);
                }
                PartScores {
                    len: k,
                    a,
                    b,
                    sums: sc.sums.clone(),
                }
            }),
        }
    }

    /// Unites two parts' sums, each part's categories going where `maps`
    /// say into `shape`.
    pub(crate) fn merge(
        a: &TaylorPartial,
        b: &TaylorPartial,
        maps: [&[Vec<usize>]; 2],
        shape: &[usize],
    ) -> crate::core::Result<TaylorPartial> {
        let err =
            |m: String| crate::core::Error::Invalid(format!("cannot merge partial results: {m}"));
        if a.margins != b.margins || a.full != b.full || a.average != b.average {
            return Err(err(
                "their Taylor sums are of different queries or designs".into()
            ));
        }
        let mut x = a.remap(maps[0], shape);
        let mut y = b.remap(maps[1], shape);
        // One centre for both, whatever the order of merging.
        let shift = x.shift.min(y.shift);
        x.recentre(shift);
        y.recentre(shift);
        let (strata, [ix, iy]) = unite_strata(&x.strata, &y.strata, x.stratified)?;
        let (ix, iy): (Vec<u32>, Vec<u32>) = (
            ix.into_iter().map(|i| i as u32).collect(),
            iy.into_iter().map(|i| i as u32).collect(),
        );
        for (t, ix) in [(&mut x, &ix), (&mut y, &iy)] {
            for e in &mut t.totals {
                e.0 = ix[e.0 as usize];
            }
            for e in &mut t.strata_scores {
                e.0 = ix[e.0 as usize];
            }
            for e in &mut t.open {
                e.0 .0 = ix[e.0 .0 as usize];
            }
        }
        add_products(
            (&mut x.cell, &y.cell),
            (&mut x.groups, &y.groups),
            (&mut x.cross, &y.cross),
        );
        x.scores = match (x.scores.take(), y.scores) {
            (Some(mut s), Some(t)) if s.len == t.len => {
                add(&mut s.sums, &t.sums);
                // Each part's cells have their coefficients (the same
                // where both have the cell); the others' are zero.
                for (u, v) in s.a.iter_mut().zip(&t.a).chain(s.b.iter_mut().zip(&t.b)) {
                    if *u == 0.0 {
                        *u = *v;
                    }
                }
                Some(s)
            }
            (None, None) => None,
            _ => {
                return Err(err(
                    "their Taylor sums are of different queries or designs".into()
                ))
            }
        };
        x.full_cov = match (x.full_cov.take(), y.full_cov) {
            (Some(mut f), Some(g)) => {
                add(&mut f, &g);
                Some(f)
            }
            _ => None,
        };
        // Totals and open PSUs by key: sorted, equal keys added.
        let mut totals = std::mem::take(&mut x.totals);
        totals.extend(y.totals);
        totals.sort_unstable_by_key(|e| (e.0, e.1));
        totals.dedup_by(|q, p| {
            let same = (p.0, p.1) == (q.0, q.1);
            if same {
                for k in 0..3 {
                    p.2[k] += q.2[k];
                }
            }
            same
        });
        let mut scores = std::mem::take(&mut x.strata_scores);
        scores.extend(y.strata_scores);
        scores.sort_by_key(|e| e.0);
        scores.dedup_by(|q, p| {
            let same = p.0 == q.0;
            if same {
                add(&mut p.1, &q.1);
                p.2 += q.2;
            }
            same
        });
        x.strata_scores = scores;
        let mut open = std::mem::take(&mut x.open);
        open.extend(y.open);
        open.sort_by_key(|e| e.0);
        open.dedup_by(|q, p| {
            let same = p.0 == q.0;
            if same {
                p.1.append(&mut q.1);
                combine(&mut p.1);
            }
            same
        });
        Ok(TaylorPartial {
            strata,
            totals,
            open,
            unknown: x.unknown + y.unknown,
            psus: x.psus + y.psus,
            ..x
        })
    }

    /// The covariances of the merged parts' totals: open PSUs closed, the
    /// strata's centring subtracted (`plans`, `counts`: the merged
    /// partial's dimensions, as plans, and counts).
    pub(crate) fn finish(&self, plans: &[DimPlan], counts: &[u64]) -> TaylorCells {
        let cells = counts.len();
        let q = TaylorQuery {
            strata: None,
            cluster: None,
            strata_keys: (0..self.strata.len() as i64).collect(),
            coef: self.strata.iter().map(|s| [s.c, s.d]).collect(),
            contiguous: true,
            margins: self
                .margins
                .iter()
                .map(|(keep, skip)| Margin {
                    keep: keep.clone(),
                    skip_missing: *skip,
                })
                .collect(),
            full: self.full,
            full_values: false,
            average: if self.average {
                self.strata.iter().map(|s| s.lonely).collect()
            } else {
                Vec::new()
            },
            scores: None,
            domains: false,
            times: None,
        };
        let mut p = TaylorPlan::build(&q, plans, cells, None, None, 1.0);
        p.shift = self.shift;
        let mut p = p.with_scores(
            self.scores
                .as_ref()
                .map(|s| (s.len, s.a.clone(), s.b.clone())),
            (1.0, 1.0),
        );
        if self.full_cov.is_none() {
            p.full = None;
        }
        // Sized as the finished table that the merged parts already hold.
        let mut acc = TaylorAcc::new(&p).expect("the Taylor sums of a merged table");
        let layout = Layout::new(plans, counts);
        if cells == 0 || plans.iter().any(|d| d.categories.is_empty()) {
            // No record counted in any part.
            return acc.finish(&p, &layout, |_| false, (1.0, 1.0));
        }
        let n = cells + 1;
        acc.cell[..cells].copy_from_slice(&self.cell);
        for (m, g) in self.groups.iter().enumerate() {
            acc.groups[m].copy_from_slice(g);
            acc.cross[m][..cells].copy_from_slice(&self.cross[m]);
        }
        if let (Some(f), Some(_)) = (&self.full_cov, &p.full) {
            acc.full.copy_from_slice(f);
        }
        if let Some(s) = &self.scores {
            acc.scores.copy_from_slice(&s.sums);
        }
        acc.psus = self.psus;
        for &(key, c, e) in &self.totals {
            let Some(h) = p.stratum(key as i64) else {
                acc.unknown += e[2] as u64;
                continue;
            };
            let i = h * n + c as usize;
            let slot = match &mut acc.strata {
                StrataSums::Dense(v) => &mut v[i],
                StrataSums::Sparse(m) => m.entry(i as u64).or_insert([0.0; 3]),
                StrataSums::Scores(_) => unreachable!("a part of only scores has no totals"),
            };
            for k in 0..3 {
                slot[k] += e[k];
            }
        }
        if let StrataSums::Scores(m) = &mut acc.strata {
            add_stratum_scores(m, self.strata_scores.iter().map(|(h, s, n)| (*h, (s, *n))));
        }
        for ((h, c), z) in &self.open {
            acc.frags.insert((*h as i64, *c), z.clone());
        }
        acc.unknown += self.unknown;
        acc.finish(&p, &layout, |c| counts[c] > 0, (1.0, 1.0))
    }
}
