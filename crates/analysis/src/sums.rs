//! Design sums of a vector per record, group by group, in one scan: for
//! estimators that are smooth functions of a few totals (a ratio of two
//! totals, a correlation) and whose sums the engine's kernels do not keep.
//!
//! Each complete record `i` of group `g` brings a vector `a_i` (length
//! `k`) and its weight `w_i`. Per group the scan sums
//! - `T_g = Σ w_i a_i` and the records;
//! - under replicate weights, each replicate's `Σ w_ri a_i`;
//! - under a Taylor design (and without one, each of the dataset's
//!   records its own PSU: R's `svydesign(ids = ~1)`),
//!   per stratum `h` the sums over its PSUs `j` of `u_hj` and `u_hj u_hj'`
//!   (or only its squares), `u_hj` the PSU's total of a vector per record:
//!   `w_i a_i`, or the estimator's linearized value (its influence) when
//!   the caller gives one. The design variance of `Σ u` is then
//!   `Σ_h c_h Σ_j u_hj u_hj' − d_h (Σ_j u_hj)(Σ_j u_hj)'`.
//!
//! Records outside a group (other groups, filtered out, incomplete)
//! bring zeros to its PSUs' totals, so each group is a domain of the whole
//! design, as R's `svyby` and `subset` make it.

mod part;

use microtab_engine::PartStratum;
pub(crate) use part::{unite_categories, SumsPart};

use crate::model::rows::TaylorKeys;
use crate::survey::Survey;
use crate::Request;
use microtab_engine::{state_of, Category, Fold, FoldRows, FoldState, Query, ScanOptions};
use microtab_store::{Dataset, Design};
use std::any::Any;
use std::collections::HashMap;
use std::ops::Range;
use std::sync::Arc;

/// A record's analysis values into its vector `a`: `false` when the
/// record is incomplete (a value missing) and out.
pub(crate) type Record = Arc<dyn Fn(&[f64], &mut [f64]) -> bool + Send + Sync>;

/// A record's linearized value `u` from its group (a cell index),
/// its vector `a` and weight.
pub(crate) type Influence = Arc<dyn Fn(usize, &[f64], f64, &mut [f64]) + Send + Sync>;

/// What one scan sums.
#[derive(Clone)]
pub(crate) struct Spec {
    /// The vector's length.
    pub k: usize,
    /// The analysis values, first in the fold's values.
    pub values: usize,
    pub record: Record,
    /// Sum each replicate's totals.
    pub replicates: bool,
    /// The Taylor sums: of `u` given by this (its length), else of `w·a`.
    pub taylor: Option<Option<(Influence, usize)>>,
    /// The Taylor sums' cross products (else only their squares).
    pub full: bool,
    /// Also sum every record into one group of all (only with the Taylor
    /// sums of `w·a`, whose PSU totals add across groups, not with an
    /// influence).
    pub all: bool,
    /// Leave out records of weight 0 (R's `degf` does not count their
    /// PSUs).
    pub skip_zero: bool,
}

/// Where a record's design values are among the fold's values.
#[derive(Clone)]
pub(crate) struct Places {
    pub weight: Option<usize>,
    pub strata: Option<usize>,
    pub cluster: Option<usize>,
    pub replicates: Range<usize>,
    pub keys: Option<Arc<TaylorKeys>>,
}

/// One group's sums.
#[derive(Clone, Default)]
pub(crate) struct Group {
    /// Its complete records.
    pub n: u64,
    /// `Σ w a`.
    pub t: Vec<f64>,
    /// Per replicate `r`, `Σ w_r a` at `r·k`.
    pub reps: Vec<f64>,
}

impl Group {
    /// Adds another group's sums (of the same shape; an empty one adds
    /// nothing).
    pub(crate) fn absorb(&mut self, o: &Group) {
        self.n += o.n;
        add(&mut self.t, &o.t);
        add(&mut self.reps, &o.reps);
    }
}

/// Per slot (0: all groups, `g + 1`: group `g`), per stratum, the sums
/// of its closed PSUs' totals, flat: `[psus, s1 (m), s2 (m² or m)]` a
/// stratum, so closing a PSU touches one stretch of memory (strata come
/// in any order).
#[derive(Clone, Default)]
pub(super) struct StrataSums {
    /// The length of a PSU's total.
    m: usize,
    /// Cross products (else only squares).
    full: bool,
    slots: Vec<Vec<f64>>,
    /// Each stratum's `c_h`, when known as the PSUs close (one dataset
    /// under a design): the products `c_h·u·u'` are then summed per slot
    /// in `prod`, not per stratum (a stratum keeps `[PSUs, S1]`, and
    /// closing a PSU touches less memory).
    c: Option<Arc<Vec<f64>>>,
    prod: Vec<Vec<f64>>,
}

/// One stratum's sums, as [`StrataSums`] holds them.
pub(super) struct Stratum<'a> {
    pub psus: u64,
    pub s1: &'a [f64],
    pub s2: &'a [f64],
}

impl StrataSums {
    fn new(m: usize, full: bool, c: Option<Arc<Vec<f64>>>) -> Self {
        StrataSums {
            m,
            full,
            slots: Vec::new(),
            c,
            prod: Vec::new(),
        }
    }

    /// The length of a PSU's products.
    fn products(&self) -> usize {
        if self.full {
            self.m * self.m
        } else {
            self.m
        }
    }

    fn width(&self) -> usize {
        1 + self.m + if self.c.is_some() { 0 } else { self.products() }
    }

    /// Slot `sl`'s `Σ_h c_h Σ_j u_hj u_hj'` when the strata's `c_h` were
    /// known as the PSUs closed.
    pub(super) fn prod(&self, sl: usize) -> Option<Vec<f64>> {
        self.c.as_ref()?;
        let n = self.products();
        Some(self.prod.get(sl).cloned().unwrap_or_else(|| vec![0.0; n]))
    }

    /// Slot `sl`'s stratum `h`, made when new.
    #[inline]
    fn at(&mut self, sl: usize, h: usize) -> &mut [f64] {
        let wd = self.width();
        if self.slots.len() <= sl {
            self.slots.resize(sl + 1, Vec::new());
        }
        let v = &mut self.slots[sl];
        if v.len() < (h + 1) * wd {
            v.resize((h + 1) * wd, 0.0);
        }
        &mut v[h * wd..(h + 1) * wd]
    }

    /// Adds a PSU's total `u` to slot `sl`'s stratum `h`.
    #[inline]
    fn close(&mut self, sl: usize, h: usize, u: &[f64]) {
        let (m, full) = (self.m, self.full);
        let n = self.products();
        let c = self.c.as_ref().map(|c| c[h]);
        let e = self.at(sl, h);
        e[0] += 1.0;
        let (s1, s2) = e[1..].split_at_mut(m);
        add(s1, u);
        if let Some(c) = c {
            if self.prod.len() <= sl {
                self.prod.resize(sl + 1, Vec::new());
            }
            let p = &mut self.prod[sl];
            if p.is_empty() {
                p.resize(n, 0.0);
            }
            if full {
                for (r, &ur) in u.iter().enumerate() {
                    let cu = c * ur;
                    for (s, &uc) in p[r * m..(r + 1) * m].iter_mut().zip(u) {
                        *s += cu * uc;
                    }
                }
            } else {
                for (s, &x) in p.iter_mut().zip(u) {
                    *s += c * x * x;
                }
            }
            return;
        }
        if full {
            for (r, &ur) in u.iter().enumerate() {
                for (s, &uc) in s2[r * m..(r + 1) * m].iter_mut().zip(u) {
                    *s += ur * uc;
                }
            }
        } else {
            for (s, &x) in s2.iter_mut().zip(u) {
                *s += x * x;
            }
        }
    }

    /// Slot `sl`'s strata, in order (those without PSUs too).
    pub(super) fn slot(&self, sl: usize) -> impl Iterator<Item = Stratum<'_>> {
        let (m, wd) = (self.m, self.width());
        self.slots
            .get(sl)
            .map_or(&[][..], |v| &v[..])
            .chunks_exact(wd)
            .map(move |e| Stratum {
                psus: e[0] as u64,
                s1: &e[1..1 + m],
                s2: &e[1 + m..],
            })
    }

    /// The slots.
    pub(super) fn slots(&self) -> usize {
        self.slots.len()
    }

    /// Sets slot `sl`'s stratum `h` (a part's sums).
    pub(super) fn set(&mut self, sl: usize, h: usize, (psus, s1, s2): (u64, &[f64], &[f64])) {
        debug_assert!(self.c.is_none(), "a part's products are kept by stratum");
        let m = self.m;
        let e = self.at(sl, h);
        e[0] = psus as f64;
        e[1..1 + m].copy_from_slice(s1);
        e[1 + m..].copy_from_slice(s2);
    }

    /// Adds another worker's sums.
    fn absorb(&mut self, o: &StrataSums) {
        if o.prod.len() > self.prod.len() {
            self.prod.resize(o.prod.len(), Vec::new());
        }
        for (a, b) in self.prod.iter_mut().zip(&o.prod) {
            if a.is_empty() {
                a.clone_from(b);
            } else {
                add(a, b);
            }
        }
        if o.slots.len() > self.slots.len() {
            self.slots.resize(o.slots.len(), Vec::new());
        }
        for (a, b) in self.slots.iter_mut().zip(&o.slots) {
            if b.len() > a.len() {
                a.resize(b.len(), 0.0);
            }
            add(a, b);
        }
    }
}

const ALL: u32 = u32::MAX;

/// A PSU's totals, per group.
type PsuTotals = Vec<(u32, Vec<f64>)>;

/// A worker's sums.
struct State {
    spec: Arc<Spec>,
    at: Arc<Places>,
    groups: Vec<Group>,
    all: Group,
    strata: StrataSums,
    /// A PSU's total over its groups (the group of all's).
    sum: Vec<f64>,
    open: HashMap<(usize, u64), PsuTotals>,
    unknown: u64,
}

/// The PSU being summed in a stretch of records: its groups and per
/// group its `u` (`m` numbers a group, flat).
struct Run {
    key: Option<(usize, u64)>,
    groups: Vec<u32>,
    u: Vec<f64>,
    first: bool,
}

impl Run {
    #[inline]
    fn add(&mut self, g: u32, u: &[f64]) {
        let m = u.len();
        match self.groups.iter().position(|&h| h == g) {
            Some(i) => add(&mut self.u[i * m..(i + 1) * m], u),
            None => {
                self.groups.push(g);
                self.u.extend_from_slice(u);
            }
        }
    }
}

/// The length of a PSU's total under `spec`.
fn m_of(spec: &Spec) -> usize {
    match &spec.taylor {
        Some(Some((_, m))) => *m,
        _ => spec.k,
    }
}

/// Adds each replicate's `Σ w_r a` over the records `idx` of a stretch
/// (their vectors `a`, `k` a record), all of one group, into `reps`
/// (`k` a replicate): block by block of records, each block's vectors
/// transposed, so each sum is a dot product over the block.
fn replicate_block(
    reps: &mut [f64],
    (a, k): (&[f64], usize),
    idx: &[usize],
    rows: &FoldRows<'_>,
    at: &Places,
) {
    const BLOCK: usize = 512;
    let (mut tr, mut wb) = (Vec::with_capacity(BLOCK * k), Vec::with_capacity(BLOCK));
    for start in (0..idx.len()).step_by(BLOCK) {
        let end = (start + BLOCK).min(idx.len());
        let len = end - start;
        tr.clear();
        for j in 0..k {
            tr.extend((start..end).map(|r| a[r * k + j]));
        }
        for (rep, col) in at.replicates.clone().enumerate() {
            let wr = &rows.values[col];
            // The block's weights: a stretch of the column when its
            // records are (every record complete), else gathered.
            let (first, last) = (idx[start], idx[end - 1]);
            let w: &[f64] =
                if last - first + 1 == len && !wr[first..=last].iter().any(|w| w.is_nan()) {
                    &wr[first..=last]
                } else {
                    wb.clear();
                    // A missing replicate weight adds nothing.
                    wb.extend(idx[start..end].iter().map(|&i| match wr[i] {
                        w if w.is_nan() => 0.0,
                        w => w,
                    }));
                    &wb
                };
            for (j, s) in reps[rep * k..(rep + 1) * k].iter_mut().enumerate() {
                *s += dot(w, &tr[j * len..(j + 1) * len]);
            }
        }
    }
}

/// `Σ x_i y_i`, in eight lanes (so it vectorizes), with fused
/// multiply-adds where the processor has them.
fn dot(x: &[f64], y: &[f64]) -> f64 {
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("avx2") && std::arch::is_x86_feature_detected!("fma") {
        // SAFETY: the processor has the features the function is
        // compiled for (checked just above).
        return unsafe { dot_fma(x, y) };
    }
    dot_lanes(x, y)
}

/// [`dot`] compiled for AVX2 and FMA.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn dot_fma(x: &[f64], y: &[f64]) -> f64 {
    lanes(x, y, |a, b, s| a.mul_add(b, s))
}

/// [`dot`] on any processor.
fn dot_lanes(x: &[f64], y: &[f64]) -> f64 {
    lanes(x, y, |a, b, s| s + a * b)
}

/// `Σ x_i y_i` in eight lanes, `step(a, b, s)` adding `a·b` to a lane's
/// `s` (inlined into each caller, so it is compiled for its features).
#[inline(always)]
fn lanes(x: &[f64], y: &[f64], step: impl Fn(f64, f64, f64) -> f64) -> f64 {
    let mut s = [0.0f64; 8];
    let (xc, yc) = (x.chunks_exact(8), y.chunks_exact(8));
    let tail: f64 = xc
        .remainder()
        .iter()
        .zip(yc.remainder())
        .map(|(a, b)| a * b)
        .sum();
    for (a, b) in xc.zip(yc) {
        for l in 0..8 {
            s[l] = step(a[l], b[l], s[l]);
        }
    }
    s.iter().sum::<f64>() + tail
}

/// The slot of group `g` in [`State::strata`].
fn slot(g: u32) -> usize {
    if g == ALL {
        0
    } else {
        g as usize + 1
    }
}

fn add(a: &mut [f64], b: &[f64]) {
    for (x, y) in a.iter_mut().zip(b) {
        *x += y;
    }
}

fn add_to(run: &mut Vec<(u32, Vec<f64>)>, g: u32, u: &[f64]) {
    match run.iter_mut().find(|(h, _)| *h == g) {
        Some((_, v)) => add(v, u),
        None => run.push((g, u.to_vec())),
    }
}

impl State {
    fn new(spec: &Arc<Spec>, at: &Arc<Places>, c: Option<Arc<Vec<f64>>>) -> State {
        State {
            spec: spec.clone(),
            at: at.clone(),
            groups: Vec::new(),
            all: Group::default(),
            strata: StrataSums::new(m_of(spec), spec.full, c),
            sum: Vec::new(),
            open: HashMap::new(),
            unknown: 0,
        }
    }

    fn group(&mut self, g: u32) -> &mut Group {
        let k = self.spec.k;
        let r = if self.spec.replicates {
            self.at.replicates.len()
        } else {
            0
        };
        let new = || Group {
            n: 0,
            t: vec![0.0; k],
            reps: vec![0.0; r * k],
        };
        if g == ALL {
            if self.all.t.is_empty() {
                self.all = new();
            }
            return &mut self.all;
        }
        let g = g as usize;
        while self.groups.len() <= g {
            self.groups.push(Group::default());
        }
        if self.groups[g].t.is_empty() {
            self.groups[g] = new();
        }
        &mut self.groups[g]
    }

    /// A PSU's totals into its stratum's sums, group by group (and, with
    /// [`Spec::all`], their sum into the group of all): its groups and
    /// per group its total (`m` numbers a group, flat).
    fn close(&mut self, h: usize, groups: &[u32], u: &[f64]) {
        let m = self.strata.m;
        if self.spec.all {
            if groups.len() > 1 {
                let mut sum = std::mem::take(&mut self.sum);
                sum.clear();
                sum.extend_from_slice(&u[..m]);
                for v in u[m..].chunks_exact(m) {
                    add(&mut sum, v);
                }
                self.strata.close(0, h, &sum);
                self.sum = sum;
            } else {
                self.strata.close(0, h, &u[..m]);
            }
        }
        for (g, v) in groups.iter().zip(u.chunks_exact(m)) {
            self.strata.close(slot(*g), h, v);
        }
    }

    fn end_run(&mut self, run: &mut Run, contiguous: bool) {
        let Some(key) = run.key.take() else { return };
        if contiguous && !run.first {
            self.close(key.0, &run.groups, &run.u);
        } else {
            let m = self.strata.m;
            let e = self.open.entry(key).or_default();
            for (g, v) in run.groups.iter().zip(run.u.chunks_exact(m)) {
                add_to(e, *g, v);
            }
        }
        run.groups.clear();
        run.u.clear();
        run.first = false;
    }

    /// Closes the PSUs kept open by key.
    fn close_open(&mut self) {
        let mut open: Vec<_> = std::mem::take(&mut self.open).into_iter().collect();
        // In key order, so the sums do not depend on the hash map's.
        open.sort_unstable_by_key(|e| e.0);
        let (mut groups, mut u) = (Vec::new(), Vec::new());
        for ((h, _), totals) in open {
            groups.clear();
            u.clear();
            for (g, v) in totals {
                groups.push(g);
                u.extend_from_slice(&v);
            }
            self.close(h, &groups, &u);
        }
    }

    /// Record `i`'s stratum (`None`: in none the design knows).
    fn stratum(&mut self, vals: &[Vec<f64>], i: usize, t: &TaylorKeys) -> Option<usize> {
        let Some(k) = self.at.strata else {
            return Some(0);
        };
        let h = t.index(vals[k][i]);
        if h.is_none() {
            self.unknown += 1;
        }
        h
    }
}

impl FoldState for State {
    fn add(&mut self, rows: &FoldRows<'_>) {
        let spec = self.spec.clone();
        let at = self.at.clone();
        let (k, nv) = (spec.k, spec.values);
        let mut vals = vec![0.0; nv];
        // The stretch's complete records: cell, position, weight, vector.
        let n = rows.cells.len();
        let mut cells: Vec<usize> = Vec::with_capacity(n);
        let mut idx = Vec::with_capacity(n);
        let mut ws = Vec::with_capacity(n);
        let mut a = vec![0.0; n * k];
        let mut r = 0;
        for (i, &cell) in rows.cells.iter().enumerate() {
            for (j, v) in vals.iter_mut().enumerate() {
                *v = rows.values[j][i];
            }
            let w = at.weight.map_or(1.0, |j| rows.values[j][i]);
            if w.is_nan()
                || (spec.skip_zero && w == 0.0)
                || !(spec.record)(&vals, &mut a[r * k..(r + 1) * k])
            {
                continue;
            }
            cells.push(cell as usize);
            idx.push(i);
            ws.push(w);
            r += 1;
        }
        a.truncate(r * k);
        // Every group of the stretch made once: the loops below index them.
        if let Some(&max) = cells.iter().max() {
            self.group(max as u32);
            for &c in &cells {
                if self.groups[c].t.is_empty() {
                    self.group(c as u32);
                }
            }
        }
        for (r, (&c, &w)) in cells.iter().zip(&ws).enumerate() {
            let grp = &mut self.groups[c];
            grp.n += 1;
            for (t, x) in grp.t.iter_mut().zip(&a[r * k..(r + 1) * k]) {
                *t += w * x;
            }
        }
        if spec.replicates && cells.iter().all(|&c| Some(&c) == cells.first()) {
            if let Some(&c) = cells.first() {
                replicate_block(&mut self.groups[c].reps, (&a, k), &idx, rows, &at);
            }
        } else if spec.replicates {
            // Replicate by replicate, so each weight column is read in order.
            for (rep, col) in at.replicates.clone().enumerate() {
                let wr = &rows.values[col];
                for (r, (&c, &i)) in cells.iter().zip(&idx).enumerate() {
                    let w = wr[i];
                    if w.is_nan() {
                        continue;
                    }
                    let s = &mut self.groups[c].reps[rep * k..(rep + 1) * k];
                    for (t, x) in s.iter_mut().zip(&a[r * k..(r + 1) * k]) {
                        *t += w * x;
                    }
                }
            }
        }
        let (Some(how), Some(keys)) = (&spec.taylor, at.keys.clone()) else {
            return;
        };
        let mut run = Run {
            key: None,
            groups: Vec::new(),
            u: Vec::new(),
            first: true,
        };
        let m = how.as_ref().map_or(k, |h| h.1);
        let mut u = vec![0.0; m];
        for (r, (&c, &i)) in cells.iter().zip(&idx).enumerate() {
            let Some(h) = self.stratum(rows.values, i, &keys) else {
                continue;
            };
            let ar = &a[r * k..(r + 1) * k];
            let w = ws[r];
            match how {
                Some((f, _)) => f(c, ar, w, &mut u),
                None => {
                    for (x, y) in u.iter_mut().zip(ar) {
                        *x = w * y;
                    }
                }
            }
            match at.cluster {
                // Every record its own PSU: closed at once.
                None => self.close(h, &[c as u32], &u),
                Some(j) => {
                    let psu = rows.values[j][i].to_bits();
                    if run.key != Some((h, psu)) {
                        self.end_run(&mut run, keys.contiguous);
                        run.key = Some((h, psu));
                    }
                    run.add(c as u32, &u);
                }
            }
        }
        // The stretch's last PSU may continue in the next one.
        run.first = true;
        self.end_run(&mut run, false);
    }

    fn merge(&mut self, other: Box<dyn FoldState>) {
        let o: State = state_of(other);
        for (g, b) in o.groups.into_iter().enumerate() {
            if self.groups.len() <= g {
                self.groups.resize(g + 1, Group::default());
            }
            if self.groups[g].t.is_empty() {
                self.groups[g] = b;
            } else {
                self.groups[g].absorb(&b);
            }
        }
        self.unknown += o.unknown;
        self.strata.absorb(&o.strata);
        for (key, u) in o.open {
            let e = self.open.entry(key).or_default();
            for (g, v) in u {
                add_to(e, g, &v);
            }
        }
    }

    fn into_any(self: Box<Self>) -> Box<dyn Any> {
        self
    }
}

/// A scan's sums, finished.
pub(crate) struct Sums {
    /// Per planned cell of the grouping variables (row-major), its sums.
    pub groups: Vec<Group>,
    /// Every group's together (when asked for).
    pub all: Group,
    /// Per group (and `all`, last), the design covariance of its `Σ u`
    /// (`m × m`, or its diagonal), when the scan had Taylor sums.
    pub cov: Vec<Vec<f64>>,
    /// Per group (and `all`, last), its PSUs and strata (R's `degf` of
    /// the domain is their difference), when the scan had Taylor sums.
    pub psus: Vec<(u64, u64)>,
    /// The grouping variables' planned categories.
    pub categories: Vec<Vec<Category>>,
    /// The grouping variables' names (a recode's variable's).
    pub names: Vec<String>,
}

/// A scan's query and where its design values are.
pub(crate) struct Scan<'a> {
    pub ds: &'a Dataset,
    pub query: Query,
    pub values: Vec<String>,
    pub at: Arc<Places>,
    pub opts: &'a ScanOptions,
    /// Per stratum `(c_h, d_h)` and the strata whose lonely PSU is
    /// averaged (Taylor designs, or each record its own PSU without one).
    pub coef: Option<(Vec<[f64; 2]>, Vec<bool>)>,
    /// Without a design: the dataset's records with a weight (each its own
    /// PSU; a filter or a group is a domain of them), and those of them
    /// whose weight is 0 (not in R's `degf`).
    pub records: (u64, u64),
}

impl Scan<'_> {
    /// The scan for the analysis values `values` grouped by `by`, with the
    /// request's filter and weight and its design's; with `check`, a text
    /// value the filter or a recode names must be in `ds` (parts of the
    /// data are checked once over all by whoever merges them).
    pub(crate) fn new<'a>(
        ds: &'a Dataset,
        req: &Request,
        (by, values): (&[String], &[String]),
        (design, check): (&Option<(Design, Survey)>, bool),
        opts: &'a ScanOptions,
    ) -> crate::Result<Scan<'a>> {
        let query = Query {
            filter: req.filter_terms()?,
            group_by: by.to_vec(),
            weight: design
                .as_ref()
                .map_or(req.weight.clone(), |(d, _)| Some(d.weight.clone())),
            max_cells: Some(req.max_cells),
            rows: req.rows.clone(),
            ..Query::default()
        };
        if check {
            microtab_engine::check_values(&[ds], &query.filter, &query.group_by)?;
        }
        crate::checks::verify(ds, req, &query)?;
        let mut names = values.to_vec();
        let mut push = |n: &Option<String>| {
            n.clone().map(|n| {
                names.push(n);
                names.len() - 1
            })
        };
        let weight = push(&query.weight);
        let taylor = design.as_ref().and_then(|(d, _)| d.taylor.clone());
        let (strata, cluster) = match &taylor {
            Some(t) => (push(&t.strata), push(&t.cluster)),
            None => (None, None),
        };
        let reps = design
            .as_ref()
            .and_then(|(d, _)| d.replicates.as_ref())
            .map_or(Vec::new(), |r| r.weights.clone());
        let replicates = names.len()..names.len() + reps.len();
        names.extend(reps);
        let (keys, coef) = match &taylor {
            Some(t) => (
                Some(TaylorKeys::of(ds, Some(t))?),
                Some(crate::taylor::coefficients(t)),
            ),
            // Without a design: each record its own PSU, in one stratum
            // (its coefficients once the records are counted).
            None if design.is_none() => (Some(TaylorKeys::of(ds, None)?), None),
            None => (None, None),
        };
        let records = if design.is_some() {
            (0, 0)
        } else {
            // R's svydesign(ids = ~1, weights = ~W) of the records with a
            // weight (it refuses missing ones).
            let q = Query {
                weight: query.weight.clone(),
                max_cells: Some(1),
                rows: req.rows.clone(),
                ..Query::default()
            };
            let n: u64 = microtab_engine::run_with(ds, &q, opts)?.counts.iter().sum();
            let zero = microtab_engine::weight_cases(ds, &q, opts, n)?.map_or(0, |w| w.zero);
            (n, zero)
        };
        Ok(Scan {
            records,
            ds,
            query,
            values: names,
            at: Arc::new(Places {
                weight,
                strata,
                cluster,
                replicates,
                keys: keys.map(Arc::new),
            }),
            opts,
            coef,
        })
    }

    /// Without a design, the degrees of freedom: the records of non-zero
    /// weight less one (R's `degf`).
    pub(crate) fn plain_df_records(&self) -> u64 {
        self.records.0 - self.records.1
    }

    /// Whether the scan's design is replicate weights.
    pub(crate) fn replicated(&self) -> bool {
        !self.at.replicates.is_empty()
    }

    /// The fold of `spec` over the query's records: the merged state, the
    /// grouping variables' planned categories and names.
    fn fold(
        &self,
        spec: &Arc<Spec>,
        whole: bool,
    ) -> crate::Result<(State, Vec<Vec<Category>>, Vec<String>)> {
        let (s, a) = (spec.clone(), self.at.clone());
        // Over the whole data the strata's `c_h` are final: products are
        // summed with them as PSUs close (a part's strata are united and
        // their PSUs may continue in another part).
        let c: Option<Arc<Vec<f64>>> = match (&self.coef, whole) {
            (Some((coef, _)), true) => Some(Arc::new(coef.iter().map(|c| c[0]).collect())),
            _ => None,
        };
        let c2 = c.clone();
        let mut q = self.query.clone();
        // The values the sums read: the design's only when summed.
        let n = if spec.replicates {
            self.values.len()
        } else if spec.taylor.is_some() {
            self.at.replicates.start
        } else {
            self.at.weight.map_or(spec.values, |w| w + 1)
        };
        q.fold = Some(Fold {
            values: self.values[..n].to_vec(),
            make: Arc::new(move || Box::new(State::new(&s, &a, c.clone())) as Box<dyn FoldState>),
        });
        let folded = microtab_engine::fold_rows(self.ds, &q, self.opts)?;
        let st = match folded.state {
            Some(s) => state_of(s),
            None => State::new(spec, &self.at, c2),
        };
        let names = folded
            .cube
            .dims
            .iter()
            .map(|d| d.var.name.clone())
            .collect();
        Ok((st, folded.categories, names))
    }

    /// Sums `spec` over the query's records.
    pub(crate) fn run(&self, spec: Spec) -> crate::Result<Sums> {
        let spec = Arc::new(spec);
        let (st, categories, names) = self.fold(&spec, true)?;
        finish(st, (categories, names), &self.coef, self.records.0)
    }

    /// Sums `spec` over the query's records (its [`Query::rows`] when
    /// set) as a part that merges with other parts' ([`SumsPart`]).
    pub(crate) fn part(&self, spec: Spec) -> crate::Result<SumsPart> {
        let spec = Arc::new(spec);
        let (st, categories, names) = self.fold(&spec, false)?;
        let strata = match (&self.at.keys, &self.coef) {
            (Some(keys), Some((coef, average))) => {
                part_strata(self.ds, &keys.keys, (coef, average))?
            }
            _ => Vec::new(),
        };
        Ok(SumsPart::of(st, (categories, names), strata, self.records))
    }
}

/// A Taylor design's strata of `ds` (their stored `keys`) as parts give
/// them to be united with other parts' (by dataset and key; by value
/// across datasets), with their coefficients `(c_h, d_h)` and whether
/// their lonely PSU is averaged.
pub(crate) fn part_strata(
    ds: &Dataset,
    keys: &[i64],
    (coef, average): (&[[f64; 2]], &[bool]),
) -> crate::Result<Vec<PartStratum>> {
    let values = crate::taylor::strata_values(ds)?;
    Ok(keys
        .iter()
        .enumerate()
        .map(|(h, &key)| PartStratum {
            source: ds.dir().display().to_string(),
            key,
            value: values.get(h).cloned().unwrap_or_else(|| key.to_string()),
            c: coef[h][0],
            d: coef[h][1],
            lonely: average.get(h).copied().unwrap_or(false),
        })
        .collect())
}

/// The finished sums of a fold's merged state `st`: every PSU closed, the
/// groups' covariances with the strata's coefficients `coef` (`None`:
/// each of `records` records its own PSU, no design).
fn finish(
    mut st: State,
    (categories, names): (Vec<Vec<Category>>, Vec<String>),
    coef: &Option<(Vec<[f64; 2]>, Vec<bool>)>,
    records: u64,
) -> crate::Result<Sums> {
    let spec = st.spec.clone();
    if st.unknown > 0 {
        return Err(crate::Error::UnknownStrata {
            records: st.unknown,
        });
    }
    let cells: usize = categories.iter().map(|c| c.len().max(1)).product();
    let (k, r) = (
        spec.k,
        if spec.replicates {
            st.at.replicates.len()
        } else {
            0
        },
    );
    debug_assert!(!spec.all || !matches!(spec.taylor, Some(Some(_))));
    for g in 0..cells.max(st.groups.len()) {
        st.group(g as u32);
    }
    st.groups.truncate(cells);
    // All groups: every complete record is in one of them.
    st.group(ALL);
    for g in &st.groups {
        st.all.absorb(g);
    }
    debug_assert!(st
        .groups
        .iter()
        .all(|g| g.t.len() == k && g.reps.len() == r * k));
    let mut psus = Vec::new();
    let cov = match &spec.taylor {
        Some(how) => {
            st.close_open();
            let m = how.as_ref().map_or(k, |h| h.1);
            let n = records as f64;
            let (coef, average) = match coef {
                Some((c, a)) => (c.clone(), a.clone()),
                // R's svydesign(ids = ~1) of the dataset's records
                // (a filter or a group is a domain of it).
                None => (vec![[n / (n - 1.0), 1.0 / (n - 1.0)]], Vec::new()),
            };
            (0..=cells)
                .map(|g| {
                    let g = if g == cells { ALL } else { g as u32 };
                    let by = || st.strata.slot(slot(g));
                    let s = by().filter(|s| s.psus > 0);
                    psus.push(s.fold((0, 0), |(p, h), s| (p + s.psus, h + 1)));
                    let prod = st.strata.prod(slot(g));
                    covariance(by(), (m, spec.full), (&coef, &average), prod)
                })
                .collect()
        }
        None => Vec::new(),
    };
    Ok(Sums {
        groups: st.groups,
        all: st.all,
        cov,
        psus,
        categories,
        names,
    })
}

/// A group's `Σ_h c_h S2_h − d_h S1_h S1_h'` (its strata's sums), scaled up for strata
/// whose lonely PSU is averaged (as [`crate::model`]'s sandwich).
fn covariance<'a>(
    strata: impl Iterator<Item = Stratum<'a>>,
    (m, full): (usize, bool),
    (coef, average): (&[[f64; 2]], &[bool]),
    prod: Option<Vec<f64>>,
) -> Vec<f64> {
    // `Σ_h c_h S2_h` summed as the PSUs closed, or from each stratum's.
    let with_s2 = prod.is_none();
    let mut v = prod.unwrap_or_else(|| vec![0.0; if full { m * m } else { m }]);
    let (mut count, mut with_var) = (0usize, 0usize);
    for (h, s) in strata.enumerate().filter(|(_, s)| s.psus > 0) {
        count += 1;
        with_var += usize::from(!average.get(h).copied().unwrap_or(false));
        let [c, d] = coef[h];
        // `c_h S2_h` from the stratum's own S2, unless summed already.
        let s2 = |i: usize| if with_s2 { c * s.s2[i] } else { 0.0 };
        if full {
            for r in 0..m {
                for k in 0..m {
                    v[r * m + k] += s2(r * m + k) - d * s.s1[r] * s.s1[k];
                }
            }
        } else {
            for (r, s1) in s.s1.iter().enumerate() {
                v[r] += s2(r) - d * s1 * s1;
            }
        }
    }
    if !average.is_empty() && with_var > 0 {
        let scale = count as f64 / with_var as f64;
        v.iter_mut().for_each(|x| *x *= scale);
    }
    v
}
