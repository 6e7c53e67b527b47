//! The scan: morsels of rows counted in parallel into private dense cubes.

use crate::filter::resolve;
use crate::plan::{
    dim_categories, dim_mapper, filter_mapper, specialize, DimPlan, Exclusion, Mapper, TRASH,
};
use crate::value::Category;
use crate::{Error, Query, Result};
use microtab_io::{ReadPath, SegmentStream};
use microtab_store::{Column, ColumnData, Dataset, Kind, Variable};
use std::sync::atomic::{AtomicUsize, Ordering};

/// Rows per morsel: small enough that a morsel's cell indexes and values
/// stay in L2, large enough to amortize the per-morsel work.
const MORSEL: usize = 32 * 1024;
// Every morsel is a whole number of checksummed stripes, checked as it is read.
const _: () = assert!(MORSEL.is_multiple_of(microtab_store::STRIPE_ROWS));
/// Morsels between read-ahead hints.
const STEP: usize = 16;
/// How far ahead of the scan (in morsels) the read-ahead window runs.
const AHEAD: usize = 64;
/// Largest cube (cells) a query builds unless [`Query::max_cells`] says
/// otherwise: with the per-worker accumulators this bounds a query's
/// memory (about 1 M cells × at most 300 bytes × (workers + 1)).
pub const DEFAULT_MAX_CELLS: usize = 1_000_000;

/// Weighted moments of the analysis variable in one cell.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Moments {
    /// Records.
    pub n: u64,
    /// Sum of weights (records when unweighted).
    pub w: f64,
    /// Weighted mean.
    pub mean: f64,
    /// Sum of weighted squared deviations from the mean.
    pub m2: f64,
}

impl Moments {
    /// Combines two partial results (Chan et al.).
    pub fn merge(&mut self, o: &Moments) {
        if o.w == 0.0 && o.n == 0 {
            return;
        }
        if self.w == 0.0 && self.n == 0 {
            *self = *o;
            return;
        }
        let w = self.w + o.w;
        let delta = o.mean - self.mean;
        if w != 0.0 {
            self.mean += delta * o.w / w;
            self.m2 += o.m2 + delta * delta * self.w * o.w / w;
        }
        self.w = w;
        self.n += o.n;
    }

    /// Frequency-weight standard deviation `sqrt(m2 / (w - 1))`.
    pub fn sd(&self) -> Option<f64> {
        (self.w > 1.0).then(|| (self.m2 / (self.w - 1.0)).max(0.0).sqrt())
    }
}

/// One dimension of a result cube.
#[derive(Debug, Clone)]
pub struct Dim {
    /// The grouping variable.
    pub var: Variable,
    /// Its categories that occur (after filters), in order.
    pub categories: Vec<Category>,
}

/// The result of a query: a dense cube, first dimension outermost.
#[derive(Debug, Clone)]
pub struct Cube {
    /// Grouping dimensions.
    pub dims: Vec<Dim>,
    /// Records per cell.
    pub counts: Vec<u64>,
    /// Sum of weights per cell (with `Query::weight`).
    pub weighted: Option<Vec<f64>>,
    /// Moments of the analysis variable per cell (with `Query::measure`).
    pub moments: Option<Vec<Moments>>,
}

impl Cube {
    /// Number of categories per dimension.
    pub fn shape(&self) -> Vec<usize> {
        self.dims.iter().map(|d| d.categories.len()).collect()
    }

    /// Cell index of a category tuple.
    pub fn cell(&self, idx: &[usize]) -> usize {
        let mut c = 0;
        for (d, &i) in self.dims.iter().zip(idx) {
            c = c * d.categories.len() + i;
        }
        c
    }
}

/// Generic access to column values.
trait Val: Copy + Send + Sync {
    fn i(self) -> i64;
    fn f(self) -> f64;
}
macro_rules! val_int {
    ($($t:ty),*) => {$(
        impl Val for $t {
            #[inline(always)]
            fn i(self) -> i64 { self as i64 }
            #[inline(always)]
            fn f(self) -> f64 { self as f64 }
        }
    )*};
}
val_int!(u8, i8, u16, i16, u32, i32, i64);
impl Val for f32 {
    #[inline(always)]
    fn i(self) -> i64 {
        self.to_bits() as i64
    }
    #[inline(always)]
    fn f(self) -> f64 {
        self as f64
    }
}
impl Val for f64 {
    #[inline(always)]
    fn i(self) -> i64 {
        self.to_bits() as i64
    }
    #[inline(always)]
    fn f(self) -> f64 {
        self
    }
}

macro_rules! dispatch {
    ($data:expr, $range:expr, |$v:ident| $body:expr) => {
        match $data {
            ColumnData::U8(x) => {
                let $v = &x[$range];
                $body
            }
            ColumnData::I8(x) => {
                let $v = &x[$range];
                $body
            }
            ColumnData::U16(x) => {
                let $v = &x[$range];
                $body
            }
            ColumnData::I16(x) => {
                let $v = &x[$range];
                $body
            }
            ColumnData::U32(x) => {
                let $v = &x[$range];
                $body
            }
            ColumnData::I32(x) => {
                let $v = &x[$range];
                $body
            }
            ColumnData::I64(x) => {
                let $v = &x[$range];
                $body
            }
            ColumnData::F32(x) => {
                let $v = &x[$range];
                $body
            }
            ColumnData::F64(x) => {
                let $v = &x[$range];
                $body
            }
        }
    };
}

/// Runs `$body` with `$x` bound to rows `$range` of an integer column of
/// at most 32 bits; `$other` for any other type.
macro_rules! int_slice {
    ($data:expr, $range:expr, |$x:ident| $body:expr, $other:expr) => {
        match $data {
            ColumnData::U8(v) => {
                let $x = &v[$range];
                $body
            }
            ColumnData::I8(v) => {
                let $x = &v[$range];
                $body
            }
            ColumnData::U16(v) => {
                let $x = &v[$range];
                $body
            }
            ColumnData::I16(v) => {
                let $x = &v[$range];
                $body
            }
            ColumnData::U32(v) => {
                let $x = &v[$range];
                $body
            }
            ColumnData::I32(v) => {
                let $x = &v[$range];
                $body
            }
            _ => $other,
        }
    };
}

#[inline(always)]
fn combine(idx: u32, e: u32) -> u32 {
    (idx + (e & !TRASH)) | (e & TRASH)
}

/// Applies a mapper to rows `r` of a column, with tight loops for the
/// common `u8`/`u16` code columns.
fn apply_col(data: ColumnData<'_>, r: std::ops::Range<usize>, m: &Mapper, idx: &mut [u32]) {
    match (data, m) {
        (ColumnData::U8(v), Mapper::Byte(t)) => {
            for (x, &c) in idx.iter_mut().zip(&v[r]) {
                *x = combine(*x, t[c as usize]);
            }
        }
        (ColumnData::U16(v), Mapper::Word(t)) => {
            for (x, &c) in idx.iter_mut().zip(&v[r]) {
                *x = combine(*x, t[c as usize]);
            }
        }
        (d, m) => dispatch!(d, r, |v| apply(v, m, idx)),
    }
}

fn apply<T: Val>(vals: &[T], m: &Mapper, idx: &mut [u32]) {
    match m {
        Mapper::Byte(_) | Mapper::Word(_) => {
            unreachable!("specialized mappers need their column type")
        }
        Mapper::Table {
            base,
            table,
            outside,
        } => {
            let base = *base;
            let outside = *outside;
            for (x, &v) in idx.iter_mut().zip(vals) {
                let off = v.i().wrapping_sub(base) as u64 as usize;
                let e = table.get(off).copied().unwrap_or(outside);
                *x = combine(*x, e);
            }
        }
        Mapper::Hash {
            map,
            float,
            null,
            other,
        } => {
            for (x, &v) in idx.iter_mut().zip(vals) {
                let e = if *float {
                    let f = v.f();
                    if f.is_nan() {
                        *null
                    } else {
                        map.get(&f.to_bits()).copied().unwrap_or(*other)
                    }
                } else {
                    map.get(&(v.i() as u64)).copied().unwrap_or(*null)
                };
                *x = combine(*x, e);
            }
        }
        Mapper::Eval {
            pred,
            missing,
            null_code,
            float,
        } => {
            for (x, &v) in idx.iter_mut().zip(vals) {
                let f = v.f();
                let bad = (*float && f.is_nan())
                    || (!*float && Some(v.i()) == *null_code)
                    || missing.contains(&f)
                    || !(if *float {
                        pred.test(f)
                    } else {
                        pred.test_int(v.i())
                    });
                if bad {
                    *x |= TRASH;
                }
            }
        }
    }
}

/// Loads a weight or analysis value per row into `out` (stored units),
/// excluding rows where it is missing.
fn load_values<T: Val>(vals: &[T], ex: &Exclusion, idx: &mut [u32], out: &mut Vec<f64>) {
    out.clear();
    out.extend(vals.iter().map(|v| v.f()));
    let has_missing = !ex.missing.is_empty();
    for (x, &v) in idx.iter_mut().zip(out.iter()) {
        let bad = v.is_nan()
            || ex.null_code.is_some_and(|n| v == n as f64)
            || (has_missing && ex.missing.contains(&v));
        if bad {
            *x |= TRASH;
        }
    }
}

/// Loads integer values (weights or analysis values) per row, excluding
/// rows where the value is system- or user-missing (branch-free for up to
/// two excluded codes, the usual case).
fn load_ints<T: Val>(vals: &[T], ex: &Exclusion, idx: &mut [u32], out: &mut Vec<i64>) {
    let n = idx.len();
    out.clear();
    out.resize(n, 0);
    let vals = &vals[..n];
    let mut codes: Vec<i64> = ex.missing.iter().map(|&m| m as i64).collect();
    codes.extend(ex.null_code);
    // One pass: convert and mark excluded rows.
    macro_rules! pass {
        (|$v:ident| $bad:expr) => {
            for ((o, x), &raw) in out.iter_mut().zip(idx.iter_mut()).zip(vals) {
                let $v = raw.i();
                *o = $v;
                *x |= (($bad) as u32) << 31;
            }
        };
    }
    match codes[..] {
        [] => pass!(|v| {
            let _ = v;
            false
        }),
        [a] => pass!(|v| v == a),
        [a, b] => pass!(|v| (v == a) | (v == b)),
        _ => pass!(|v| codes.contains(&v)),
    }
}

/// The fused kernel: `N` byte columns through their tables, then count (and
/// weigh) into lane-split cells. `INT` selects exact integer weight sums.
#[allow(clippy::too_many_arguments)]
#[inline(never)]
fn fused_kernel<const N: usize, T: Val, const INT: bool>(
    cols: [&[u8]; N],
    tabs: [&[u32; 256]; N],
    w: Option<&[T]>,
    trash: u32,
    counts: &mut [u64],
    wsum_int: &mut [i64],
    wsum: &mut [f64],
) {
    let n = cols[0].len();
    let cols = cols.map(|c| &c[..n]);
    let cell = |i: usize| {
        let mut c = 0u32;
        for k in 0..N {
            c = combine(c, tabs[k][cols[k][i] as usize]);
        }
        c.min(trash) as usize * LANES + (i & (LANES - 1))
    };
    match w {
        None => {
            for i in 0..n {
                counts[cell(i)] += 1;
            }
        }
        Some(w) => {
            for (i, &wi) in w[..n].iter().enumerate() {
                let c = cell(i);
                counts[c] += 1;
                if INT {
                    wsum_int[c] += wi.i();
                } else {
                    wsum[c] += wi.f();
                }
            }
        }
    }
}

/// Bit where a packed morsel cell keeps its record count: the low 40 bits
/// hold Σw.
const PACK_SHIFT: u32 = 40;

/// The fused kernel for integer weights ≥ 0 whose morsel sum stays below
/// 2^40: the record count and Σw of a cell lane share one word in
/// `packed`, so a row costs one read-modify-write instead of two; the
/// caller folds `packed` into the counts after each morsel.
///
/// The cell loop is written out in each fused kernel on purpose: a shared
/// `#[inline(always)]` helper taking the arrays by reference measured Q1
/// 22% slower (5.2 → 6.3 ms), from code generation alone.
#[inline(never)]
fn fused_kernel_packed<const N: usize, T: Val>(
    cols: [&[u8]; N],
    tabs: [&[u32; 256]; N],
    w: &[T],
    trash: u32,
    packed: &mut [u64],
) {
    let n = cols[0].len();
    let cols = cols.map(|c| &c[..n]);
    assert!(packed.len() >= (trash as usize + 1) * LANES);
    for (i, &wi) in w[..n].iter().enumerate() {
        let mut c = 0u32;
        for k in 0..N {
            c = combine(c, tabs[k][cols[k][i] as usize]);
        }
        let k = c.min(trash) as usize * LANES + (i & (LANES - 1));
        debug_assert!(k < packed.len());
        // SAFETY: c ≤ trash and `packed` holds (trash + 1) · LANES cells.
        let p = unsafe { packed.get_unchecked_mut(k) };
        *p = p.wrapping_add((1u64 << PACK_SHIFT) | wi.i() as u64);
    }
}

/// How a means query over byte code columns runs as one fused pass
/// (chosen by [`means_fuse`]).
#[derive(Debug, Clone, Copy)]
struct MeansFuse {
    /// Excluded analysis-variable codes that occur in the column (padded
    /// with a value no ≤32-bit column can hold).
    xcodes: [i64; 2],
}

/// A morsel cell of the fused means kernel: 32 bytes, so a cell's lanes
/// are one 128-byte stride. The record count and Σw share one word (the
/// weights are ≥ 0 and a morsel's Σw < 2^40).
#[derive(Debug, Clone, Copy, Default)]
#[repr(C, align(32))]
struct PackedCell {
    nw: u64,
    wx: i64,
    wxx: i128,
}

/// The fused means kernel: `N` byte columns through their tables, the
/// weight and the analysis value loaded, excluded and summed per cell lane
/// in one branch-free pass (no index or value arrays). Every row's |w·x²|
/// fits in an i64 ([`means_fuse`] checks), so only the morsel's sum of
/// squares needs 128 bits.
#[inline(never)]
fn fused_means<const N: usize, W: Val, X: Val>(
    cols: [&[u8]; N],
    tabs: [&[u32; 256]; N],
    w: Option<&[W]>,
    x: &[X],
    xcodes: [i64; 2],
    trash: u32,
    cells: &mut [PackedCell],
) {
    let n = x.len();
    let cols = cols.map(|c| &c[..n]);
    assert!(cells.len() >= (trash as usize + 1) * LANES);
    let [xa, xb] = xcodes;
    let mut row = |i: usize, wv: i64, xv: i64| {
        let mut c = 0u32;
        for k in 0..N {
            c = combine(c, tabs[k][cols[k][i] as usize]);
        }
        // Branch-free: excluded values (INCTOT's N/A code) and filtered
        // rows (the TRASH bit) are common, and a branch on them mispredicts
        // (the `min` stays a cmov: see .cargo/config.toml).
        let bad = ((xv == xa) as u32) | ((xv == xb) as u32);
        let mask = 0u32.wrapping_sub(bad);
        let c = (c.min(trash) & !mask) | (trash & mask);
        let k = c as usize * LANES + (i & (LANES - 1));
        debug_assert!(k < cells.len());
        // SAFETY: c ≤ trash and `cells` holds (trash + 1) · LANES cells.
        let m = unsafe { cells.get_unchecked_mut(k) };
        let wx = wv.wrapping_mul(xv);
        m.nw = m.nw.wrapping_add((1u64 << PACK_SHIFT) | wv as u64);
        m.wx = m.wx.wrapping_add(wx);
        m.wxx = m.wxx.wrapping_add(wx.wrapping_mul(xv) as i128);
    };
    match w {
        Some(w) => {
            for (i, (&wv, &xv)) in w[..n].iter().zip(x).enumerate() {
                row(i, wv.i(), xv.i());
            }
        }
        None => {
            for (i, &xv) in x.iter().enumerate() {
                row(i, 1, xv.i());
            }
        }
    }
}

/// Sub-histograms per cell: consecutive rows that hit the same cell update
/// different lanes, so an add does not wait for the previous row's store
/// to the same address (measured: the store-to-load chain was 40% of Q3).
const LANES: usize = 4;
/// Lanes for exact moment cells (16 measured no better than 4).
const XLANES: usize = 4;

#[inline]
fn accumulate_counts(idx: &[u32], trash: u32, counts: &mut [u64]) {
    let mut chunks = idx.chunks_exact(LANES);
    for ch in &mut chunks {
        for (l, &i) in ch.iter().enumerate() {
            counts[i.min(trash) as usize * LANES + l] += 1;
        }
    }
    for &i in chunks.remainder() {
        counts[i.min(trash) as usize * LANES] += 1;
    }
}

/// A weight sum: `i64` for integer weights (exact, including implied
/// decimals), `f64` for float weights.
trait WeightSum: Copy + std::ops::AddAssign {
    fn of<T: Val>(v: T) -> Self;
}
impl WeightSum for i64 {
    #[inline(always)]
    fn of<T: Val>(v: T) -> Self {
        v.i()
    }
}
impl WeightSum for f64 {
    #[inline(always)]
    fn of<T: Val>(v: T) -> Self {
        v.f()
    }
}

#[inline]
fn accumulate_weighted<T: Val, S: WeightSum>(
    idx: &[u32],
    w: &[T],
    trash: u32,
    counts: &mut [u64],
    wsum: &mut [S],
) {
    let mut ci = idx.chunks_exact(LANES);
    let mut cw = w.chunks_exact(LANES);
    for (ch, wh) in (&mut ci).zip(&mut cw) {
        for l in 0..LANES {
            let c = ch[l].min(trash) as usize * LANES + l;
            counts[c] += 1;
            wsum[c] += S::of(wh[l]);
        }
    }
    for (&i, &w) in ci.remainder().iter().zip(cw.remainder()) {
        let c = i.min(trash) as usize * LANES;
        counts[c] += 1;
        wsum[c] += S::of(w);
    }
}

struct Acc {
    /// Per cell and lane (`cell * LANES + lane`).
    counts: Vec<u64>,
    wsum: Vec<f64>,
    wsum_int: Vec<i64>,
    moments: Vec<Moments>,
    idx: Vec<u32>,
    wbuf: Vec<f64>,
    xbuf: Vec<f64>,
    // Per-morsel moment sums: n, Σw, Σw(x−k), Σw(x−k)².
    local: Vec<[f64; 4]>,
    // Exact path: integer weights and values.
    wint: Vec<i64>,
    xint: Vec<i64>,
    exact: Vec<ExactCell>,
    mloc: Vec<MorselCell>,
    packed: Vec<PackedCell>,
    packed_w: Vec<u64>,
    /// Rows of the morsel rejected by the filters (`Plan::filter_ranges`).
    sel: Vec<u8>,
}

/// One morsel's sums for a cell lane (see `Plan::morsel_sums`).
#[derive(Debug, Clone, Copy, Default)]
struct MorselCell {
    n: u64,
    w: i64,
    wx: i64,
    wxx: i128,
}

/// Exact sums for integer (and implied-decimal) analysis variables and
/// weights: the result does not depend on how rows were split among
/// workers, so it is identical from run to run.
#[derive(Debug, Clone, Copy, Default)]
struct ExactCell {
    n: u64,
    w: i64,
    wx: i128,
    wxx: i128,
}

impl ExactCell {
    fn add(&mut self, o: &ExactCell) {
        self.n += o.n;
        self.w = self.w.wrapping_add(o.w);
        self.wx = self.wx.wrapping_add(o.wx);
        self.wxx = self.wxx.wrapping_add(o.wxx);
    }

    /// Moments in stored units.
    fn moments(&self) -> Moments {
        if self.w == 0 {
            return Moments {
                n: self.n,
                ..Moments::default()
            };
        }
        let w = self.w as f64;
        // m2 = Σw(x−m)² = (W·Σwx² − (Σwx)²) / W, exact up to the division.
        let m2 = match (self.w as i128)
            .checked_mul(self.wxx)
            .and_then(|a| self.wx.checked_mul(self.wx).and_then(|b| a.checked_sub(b)))
        {
            Some(num) => num as f64 / w,
            None => self.wxx as f64 - (self.wx as f64) * (self.wx as f64) / w,
        };
        Moments {
            n: self.n,
            w,
            mean: self.wx as f64 / w,
            m2,
        }
    }
}

struct Plan<'a> {
    cells: usize,
    dims: Vec<(&'a Column, Mapper)>,
    filters: Vec<(&'a Column, Mapper)>,
    weight: Option<(&'a Column, Exclusion)>,
    measure: Option<(&'a Column, Exclusion)>,
    /// Sum moments exactly in integers (int-kind measure and weight whose
    /// ranges cannot overflow i128).
    exact: bool,
    /// Try the fused byte-column kernel (no measure, weight never missing).
    fused: bool,
    /// Exact path with few cells and |w·x| small enough that a morsel's
    /// Σw·x fits in an i64: sum each morsel in 64-bit cells first.
    morsel_sums: bool,
    /// Try the fused means kernel (exact morsel sums over byte codes).
    means_fuse: Option<MeansFuse>,
    /// The fused kernel packs count and Σw in one word per cell lane
    /// (integer weights ≥ 0, a morsel's Σw < 2^40, a small table).
    pack_weights: bool,
    /// Two or more filters, each passing one contiguous range of byte
    /// codes `(lo, hi − lo)`: evaluated first into a selection column.
    filter_ranges: Option<Vec<(u8, u8)>>,
}

impl Acc {
    fn new(p: &Plan) -> Self {
        let n = p.cells + 1;
        Acc {
            counts: vec![0; n * LANES],
            wsum: if p.weight.is_some() {
                vec![0.0; n * LANES]
            } else {
                Vec::new()
            },
            wsum_int: if p.weight.is_some() {
                vec![0; n * LANES]
            } else {
                Vec::new()
            },
            moments: if p.measure.is_some() {
                vec![Moments::default(); n]
            } else {
                Vec::new()
            },
            idx: Vec::with_capacity(MORSEL),
            wbuf: Vec::with_capacity(MORSEL),
            xbuf: Vec::with_capacity(MORSEL),
            local: if p.measure.is_some() && !p.exact {
                vec![[0.0; 4]; n]
            } else {
                Vec::new()
            },
            wint: Vec::new(),
            xint: Vec::new(),
            exact: if p.exact {
                vec![ExactCell::default(); n * XLANES]
            } else {
                Vec::new()
            },
            mloc: Vec::new(),
            packed: Vec::new(),
            packed_w: Vec::new(),
            sel: Vec::new(),
        }
    }

    /// Counts rows `r` of `data` (one view per query column, in plan order:
    /// dimensions, filters, weight, measure).
    fn morsel(&mut self, p: &Plan, data: &[ColumnData<'_>], r: std::ops::Range<usize>) {
        if p.fused && self.fused(p, data, r.clone()) {
            return;
        }
        if let Some(f) = p.means_fuse {
            if self.fused_means(p, f, data, r.clone()) {
                return;
            }
        }
        self.idx.clear();
        self.idx.resize(r.len(), 0);
        let nd = p.dims.len() + p.filters.len();
        for ((_, m), d) in p.dims.iter().chain(p.filters.iter()).zip(data) {
            apply_col(*d, r.clone(), m, &mut self.idx);
        }
        let wdata = p.weight.as_ref().map(|_| data[nd]);
        let xdata = p
            .measure
            .as_ref()
            .map(|_| data[nd + p.weight.is_some() as usize]);
        if p.exact {
            let trash = p.cells as u32;
            if let (Some((_, ex)), Some(d)) = (&p.weight, wdata) {
                dispatch!(d, r.clone(), |v| load_ints(
                    v,
                    ex,
                    &mut self.idx,
                    &mut self.wint
                ));
            }
            if let (Some((_, ex)), Some(d)) = (&p.measure, xdata) {
                dispatch!(d, r.clone(), |v| load_ints(
                    v,
                    ex,
                    &mut self.idx,
                    &mut self.xint
                ));
            }
            let weighted = p.weight.is_some();
            if p.morsel_sums {
                // Few cells: sum the morsel in 64-bit cells (only the square
                // needs 128 bits), then fold into the exact cells once per
                // morsel. Exact, so identical from run to run.
                let n = (p.cells + 1) * LANES;
                self.mloc.clear();
                self.mloc.resize(n, MorselCell::default());
                // Locals, so the loop does not reload `self`'s vectors.
                let (mloc, idx, xs) = (&mut self.mloc[..], &self.idx[..], &self.xint[..]);
                let mut add = |j: usize, i: u32, w: i64, x: i64| {
                    let m = &mut mloc[i.min(trash) as usize * LANES + (j & (LANES - 1))];
                    let wx = w.wrapping_mul(x);
                    m.n += 1;
                    m.w = m.w.wrapping_add(w);
                    m.wx = m.wx.wrapping_add(wx);
                    m.wxx = m.wxx.wrapping_add((wx as i128).wrapping_mul(x as i128));
                };
                if weighted {
                    let ws = &self.wint[..idx.len()];
                    for (j, ((&i, &w), &x)) in idx.iter().zip(ws).zip(&xs[..idx.len()]).enumerate()
                    {
                        add(j, i, w, x);
                    }
                } else {
                    for (j, (&i, &x)) in idx.iter().zip(&xs[..idx.len()]).enumerate() {
                        add(j, i, 1, x);
                    }
                }
                self.fold_morsel();
                return;
            }
            for (j, &i) in self.idx.iter().enumerate() {
                let e = &mut self.exact[i.min(trash) as usize * XLANES + (j & (XLANES - 1))];
                let w = if weighted { self.wint[j] } else { 1 };
                let x = self.xint[j];
                // |w·x| < 2^62 is guaranteed by `exact_ok`; only the square needs i128.
                let wx = w.wrapping_mul(x);
                e.n += 1;
                e.w = e.w.wrapping_add(w);
                e.wx = e.wx.wrapping_add(wx as i128);
                e.wxx = e.wxx.wrapping_add((wx as i128).wrapping_mul(x as i128));
            }
            return;
        }
        if let (Some((_, ex)), Some(d)) = (
            p.weight
                .as_ref()
                .filter(|(_, ex)| !ex.is_empty() || p.measure.is_some()),
            wdata,
        ) {
            dispatch!(d, r.clone(), |v| load_values(
                v,
                ex,
                &mut self.idx,
                &mut self.wbuf
            ));
        }
        if let (Some((_, ex)), Some(d)) = (&p.measure, xdata) {
            dispatch!(d, r.clone(), |v| load_values(
                v,
                ex,
                &mut self.idx,
                &mut self.xbuf
            ));
        }
        let trash = p.cells as u32;
        match (&p.weight, &p.measure) {
            (None, None) => accumulate_counts(&self.idx, trash, &mut self.counts),
            (Some((col, ex)), None) if ex.is_empty() => {
                // Weights that cannot be missing: add straight from the column.
                let (counts, wsum, wsum_int) =
                    (&mut self.counts, &mut self.wsum, &mut self.wsum_int);
                let idx = &self.idx;
                let d = wdata.expect("weight data");
                if col.var().kind == Kind::Int {
                    dispatch!(d, r.clone(), |v| accumulate_weighted(
                        idx, v, trash, counts, wsum_int
                    ));
                } else {
                    dispatch!(d, r.clone(), |v| accumulate_weighted(
                        idx, v, trash, counts, wsum
                    ));
                }
            }
            (Some(_), None) => accumulate_weighted(
                &self.idx,
                &self.wbuf,
                trash,
                &mut self.counts,
                &mut self.wsum,
            ),
            (_, Some(_)) => {
                // Shift by the morsel's first usable value so the sums of
                // squares do not cancel, then fold into the running moments.
                let k = self
                    .idx
                    .iter()
                    .zip(&self.xbuf)
                    .find(|(&i, _)| i < trash)
                    .map(|(_, &x)| x)
                    .unwrap_or(0.0);
                let weighted = p.weight.is_some();
                for (j, &i) in self.idx.iter().enumerate() {
                    let c = i.min(trash) as usize;
                    let w = if weighted { self.wbuf[j] } else { 1.0 };
                    let d = self.xbuf[j] - k;
                    let l = &mut self.local[c];
                    l[0] += 1.0;
                    l[1] += w;
                    l[2] += w * d;
                    l[3] += w * d * d;
                }
                for c in 0..p.cells {
                    let l = self.local[c];
                    if l[0] == 0.0 {
                        continue;
                    }
                    self.counts[c * LANES] += l[0] as u64;
                    if weighted {
                        self.wsum[c * LANES] += l[1];
                    }
                    let part = if l[1] != 0.0 {
                        Moments {
                            n: l[0] as u64,
                            w: l[1],
                            mean: k + l[2] / l[1],
                            m2: l[3] - l[2] * l[2] / l[1],
                        }
                    } else {
                        Moments {
                            n: l[0] as u64,
                            w: 0.0,
                            mean: 0.0,
                            m2: 0.0,
                        }
                    };
                    self.moments[c].merge(&part);
                    self.local[c] = [0.0; 4];
                }
                self.local[p.cells] = [0.0; 4];
            }
        }
    }

    /// Folds the morsel cells into the exact cells.
    fn fold_morsel(&mut self) {
        for (k, m) in self.mloc.iter().enumerate() {
            if m.n == 0 {
                continue;
            }
            let e = &mut self.exact[(k / LANES) * XLANES];
            e.n += m.n;
            e.w = e.w.wrapping_add(m.w);
            e.wx = e.wx.wrapping_add(m.wx as i128);
            e.wxx = e.wxx.wrapping_add(m.wxx);
        }
    }

    /// Folds the packed cells of [`fused_means`] into the exact cells.
    fn fold_packed(&mut self) {
        for (k, m) in self.packed.iter().enumerate() {
            let n = m.nw >> PACK_SHIFT;
            if n == 0 {
                continue;
            }
            let e = &mut self.exact[(k / LANES) * XLANES];
            e.n += n;
            e.w = e.w.wrapping_add((m.nw & ((1u64 << PACK_SHIFT) - 1)) as i64);
            e.wx = e.wx.wrapping_add(m.wx as i128);
            e.wxx = e.wxx.wrapping_add(m.wxx);
        }
    }

    /// Means over up to three `u8` code columns in one pass
    /// ([`fused_means`]); false when the columns do not fit that kernel.
    fn fused_means(
        &mut self,
        p: &Plan,
        f: MeansFuse,
        data: &[ColumnData<'_>],
        r: std::ops::Range<usize>,
    ) -> bool {
        let nd = p.dims.len() + p.filters.len();
        let mut cols: Vec<&[u8]> = Vec::with_capacity(nd);
        let mut tabs: Vec<&[u32; 256]> = Vec::with_capacity(nd);
        for ((_, m), d) in p.dims.iter().chain(p.filters.iter()).zip(data) {
            match (m, d) {
                (Mapper::Byte(t), ColumnData::U8(v)) => {
                    cols.push(&v[r.clone()]);
                    tabs.push(t);
                }
                _ => return false,
            }
        }
        let trash = p.cells as u32;
        self.packed.clear();
        self.packed
            .resize((p.cells + 1) * LANES, PackedCell::default());
        let wdata = p.weight.as_ref().map(|_| data[nd]);
        let xdata = data[nd + p.weight.is_some() as usize];
        let xc = f.xcodes;
        macro_rules! go {
            ($n:literal) => {{
                let c: [&[u8]; $n] = cols.try_into().unwrap();
                let t: [&[u32; 256]; $n] = tabs.try_into().unwrap();
                macro_rules! x {
                    ($w:expr) => {
                        int_slice!(
                            xdata,
                            r.clone(),
                            |x| fused_means(c, t, $w, x, xc, trash, &mut self.packed),
                            return false
                        )
                    };
                }
                match wdata {
                    None => x!(None::<&[u8]>),
                    Some(ColumnData::U8(w)) => x!(Some(&w[r.clone()])),
                    Some(ColumnData::U16(w)) => x!(Some(&w[r.clone()])),
                    Some(ColumnData::U32(w)) => x!(Some(&w[r.clone()])),
                    Some(ColumnData::I32(w)) => x!(Some(&w[r.clone()])),
                    Some(_) => return false,
                }
            }};
        }
        match cols.len() {
            1 => go!(1),
            2 => go!(2),
            3 => go!(3),
            _ => return false,
        }
        self.fold_packed();
        true
    }

    /// One pass over up to four `u8` code columns (and the weight) with no
    /// intermediate cell-index array: the common survey crosstab.
    fn fused(&mut self, p: &Plan, data: &[ColumnData<'_>], r: std::ops::Range<usize>) -> bool {
        let mut sel = std::mem::take(&mut self.sel);
        let done = self.fused_with(p, data, r, &mut sel);
        self.sel = sel;
        done
    }

    /// [`fused`](Self::fused) with the selection buffer lent out of `self`.
    fn fused_with(
        &mut self,
        p: &Plan,
        data: &[ColumnData<'_>],
        r: std::ops::Range<usize>,
        sel: &mut Vec<u8>,
    ) -> bool {
        let nd = p.dims.len() + p.filters.len();
        if let Some(ranges) = &p.filter_ranges {
            // Several range filters on byte codes: one vectorised pass
            // marks the morsel's rejected rows in a byte column, which the
            // kernel then reads as one more code column.
            let n = r.len();
            sel.clear();
            sel.resize(n, 0);
            for (&(lo, span), d) in ranges.iter().zip(&data[p.dims.len()..nd]) {
                let ColumnData::U8(v) = d else { return false };
                for (s, &x) in sel.iter_mut().zip(&v[r.clone()]) {
                    *s |= (x.wrapping_sub(lo) > span) as u8;
                }
            }
        }
        let mut cols: Vec<&[u8]> = Vec::with_capacity(nd);
        let mut tabs: Vec<&[u32; 256]> = Vec::with_capacity(nd);
        let fcols = if p.filter_ranges.is_some() {
            0
        } else {
            p.filters.len()
        };
        for ((_, m), d) in p.dims.iter().chain(p.filters[..fcols].iter()).zip(data) {
            match (m, d) {
                (Mapper::Byte(t), ColumnData::U8(v)) => {
                    cols.push(&v[r.clone()]);
                    tabs.push(t);
                }
                _ => return false,
            }
        }
        if p.filter_ranges.is_some() {
            cols.push(sel);
            tabs.push(&SELECTION_TABLE);
        }
        let trash = p.cells as u32;
        let w = p.weight.as_ref().map(|(c, _)| (c.var().kind, data[nd]));
        // Packed lanes measured 9–18% faster with up to three code columns
        // (Q1–Q3) and 6% slower with four.
        if p.pack_weights && cols.len() <= 3 {
            if let Some((_, d)) = w {
                return self.fused_packed(cols, tabs, d, r, trash);
            }
        }
        macro_rules! go {
            ($n:literal) => {{
                let c: [&[u8]; $n] = cols.try_into().unwrap();
                let t: [&[u32; 256]; $n] = tabs.try_into().unwrap();
                macro_rules! k {
                    ($t_:ty, $int:literal, $w:expr) => {
                        fused_kernel::<$n, $t_, $int>(
                            c,
                            t,
                            $w,
                            trash,
                            &mut self.counts,
                            &mut self.wsum_int,
                            &mut self.wsum,
                        )
                    };
                }
                match w {
                    None => k!(u8, false, None),
                    Some((kind, d)) => {
                        let int = kind == Kind::Int;
                        match d {
                            ColumnData::U8(v) if int => k!(u8, true, Some(&v[r])),
                            ColumnData::U16(v) if int => k!(u16, true, Some(&v[r])),
                            ColumnData::U32(v) if int => k!(u32, true, Some(&v[r])),
                            ColumnData::I32(v) if int => k!(i32, true, Some(&v[r])),
                            ColumnData::F64(v) => k!(f64, false, Some(&v[r])),
                            ColumnData::F32(v) => k!(f32, false, Some(&v[r])),
                            _ => return false,
                        }
                    }
                }
            }};
        }
        match cols.len() {
            1 => go!(1),
            2 => go!(2),
            3 => go!(3),
            4 => go!(4),
            _ => return false,
        }
        true
    }

    /// [`fused_kernel_packed`] over one morsel, then its packed cells
    /// folded into the counts and integer weight sums.
    fn fused_packed(
        &mut self,
        cols: Vec<&[u8]>,
        tabs: Vec<&[u32; 256]>,
        w: ColumnData<'_>,
        r: std::ops::Range<usize>,
        trash: u32,
    ) -> bool {
        let n = self.counts.len();
        self.packed_w.clear();
        self.packed_w.resize(n, 0);
        macro_rules! go {
            ($n:literal) => {{
                let c: [&[u8]; $n] = cols.try_into().unwrap();
                let t: [&[u32; 256]; $n] = tabs.try_into().unwrap();
                match w {
                    ColumnData::U8(v) => {
                        fused_kernel_packed(c, t, &v[r], trash, &mut self.packed_w)
                    }
                    ColumnData::U16(v) => {
                        fused_kernel_packed(c, t, &v[r], trash, &mut self.packed_w)
                    }
                    ColumnData::U32(v) => {
                        fused_kernel_packed(c, t, &v[r], trash, &mut self.packed_w)
                    }
                    ColumnData::I32(v) => {
                        fused_kernel_packed(c, t, &v[r], trash, &mut self.packed_w)
                    }
                    _ => return false,
                }
            }};
        }
        match cols.len() {
            1 => go!(1),
            2 => go!(2),
            3 => go!(3),
            _ => return false,
        }
        for ((c, s), &p) in self
            .counts
            .iter_mut()
            .zip(self.wsum_int.iter_mut())
            .zip(&self.packed_w)
        {
            *c += p >> PACK_SHIFT;
            *s += (p & ((1u64 << PACK_SHIFT) - 1)) as i64;
        }
        true
    }

    fn merge(mut self, o: Acc) -> Acc {
        for (a, b) in self.counts.iter_mut().zip(&o.counts) {
            *a += b;
        }
        for (a, b) in self.wsum.iter_mut().zip(&o.wsum) {
            *a += b;
        }
        for (a, b) in self.wsum_int.iter_mut().zip(&o.wsum_int) {
            *a += b;
        }
        for (a, b) in self.moments.iter_mut().zip(&o.moments) {
            a.merge(b);
        }
        for (a, b) in self.exact.iter_mut().zip(&o.exact) {
            a.add(b);
        }
        self
    }
}

fn dict_of(ds: &Dataset, var: &Variable) -> Result<Vec<String>> {
    Ok(if var.kind == Kind::String {
        ds.dictionary(var)?
    } else {
        Vec::new()
    })
}

fn numeric(var: &Variable, role: &str) -> Result<()> {
    if var.kind == Kind::String {
        return Err(Error::Invalid(format!(
            "{} is a string variable and cannot be used as {role}",
            var.name
        )));
    }
    Ok(())
}

/// Whether Σw·x² over `rows` rows stays far inside i128 for these columns.
fn exact_ok(measure: Option<&Column>, weight: Option<&Column>, rows: usize) -> bool {
    let bound = |c: &Column| -> Option<f64> {
        let v = c.var();
        if v.kind != Kind::Int {
            return None;
        }
        let m = |n: Option<microtab_store::Number>| n.map_or(0.0, |n| n.as_f64().abs());
        Some(m(v.min).max(m(v.max)).max(1.0))
    };
    let Some(x) = measure.and_then(bound) else {
        return false;
    };
    let w = match weight {
        Some(c) => match bound(c) {
            Some(w) => w,
            None => return false,
        },
        None => 1.0,
    };
    x * w < 2f64.powi(62)
        && w * (rows.max(1) as f64) < 2f64.powi(62)
        && x * x * w * (rows.max(1) as f64) < 2f64.powi(120)
}

/// Workers take morsels in file order from a shared counter, so all of them
/// consume the front of the kernel's read-ahead window together.
fn scan_mapped(plan: &Plan, cols: &[&Column], rows: usize, opts: &ScanOptions) -> Result<Acc> {
    let nm = rows.div_ceil(MORSEL);
    let next = AtomicUsize::new(0);
    let failed: std::sync::Mutex<Option<microtab_store::Error>> = std::sync::Mutex::new(None);
    let accs = rayon::broadcast(|_| {
        let mut acc = Acc::new(plan);
        let mut unpacked: Vec<Vec<u64>> = cols.iter().map(|_| Vec::new()).collect();
        'scan: loop {
            let first = next.fetch_add(STEP, Ordering::Relaxed);
            if first >= nm {
                break;
            }
            if first + opts.readahead < nm {
                for c in cols {
                    c.prefetch((first + opts.readahead) * MORSEL, STEP * MORSEL);
                }
            }
            for m in first..(first + STEP).min(nm) {
                let s = m * MORSEL;
                let e = (s + MORSEL).min(rows);
                // Views of the mapping, or unpacked from it (checked).
                let views = cols
                    .iter()
                    .zip(unpacked.iter_mut())
                    .map(|(c, b)| c.rows_view(s, e - s, b))
                    .collect::<std::result::Result<Vec<ColumnData<'_>>, _>>();
                match views {
                    Ok(views) => acc.morsel(plan, &views, 0..e - s),
                    Err(err) => {
                        fail(&failed, err);
                        break 'scan;
                    }
                }
            }
            // Keep resident memory bounded by the stretch being counted.
            for c in cols {
                c.release(first * MORSEL, STEP * MORSEL);
            }
        }
        acc
    });
    finish_scan(accs, failed)
}

/// Records the first error of a scan (the others stop at their next morsel).
fn fail(slot: &std::sync::Mutex<Option<microtab_store::Error>>, e: microtab_store::Error) {
    let mut s = slot.lock().unwrap_or_else(|p| p.into_inner());
    if s.is_none() {
        *s = Some(e);
    }
}

/// The merged accumulator of a scan's workers, or its first error.
fn finish_scan(
    accs: Vec<Acc>,
    failed: std::sync::Mutex<Option<microtab_store::Error>>,
) -> Result<Acc> {
    if let Some(e) = failed.into_inner().unwrap_or_else(|p| p.into_inner()) {
        return Err(e.into());
    }
    Ok(accs
        .into_iter()
        .reduce(Acc::merge)
        .expect("one worker at least"))
}

/// Every worker reads its morsels of every column with one `pread` each
/// into its own small buffers (which stay in its L2 cache) and counts them
/// there: for columns already in the page cache this is a copy at memory
/// speed with no page faults, no read-ahead thread and no hand-off.
fn scan_inline(plan: &Plan, cols: &[&Column], rows: usize) -> Result<Acc> {
    let readers: Vec<microtab_io::RowReader> = cols
        .iter()
        .map(|c| microtab_io::RowReader::open(&c.source()))
        .collect::<std::result::Result<_, _>>()
        .map_err(microtab_store::Error::from)?;
    // One morsel per read: reading 2 or 4 at once measured the same on
    // Q1–Q5, 8 at once 2–5% slower (the buffers leave L2).
    let chunk = MORSEL;
    let nm = rows.div_ceil(chunk);
    let next = AtomicUsize::new(0);
    let failed: std::sync::Mutex<Option<microtab_store::Error>> = std::sync::Mutex::new(None);
    let accs = rayon::broadcast(|_| {
        let mut acc = Acc::new(plan);
        // u64 storage keeps every view aligned for its value type.
        let mut bufs: Vec<Vec<u64>> = readers
            .iter()
            .map(|r| vec![0u64; r.source().span(0, chunk).1.div_ceil(8)])
            .collect();
        let mut unpacked: Vec<Vec<u64>> = cols.iter().map(|_| Vec::new()).collect();
        'scan: loop {
            let k = next.fetch_add(1, Ordering::Relaxed);
            if k >= nm {
                break;
            }
            let s = k * chunk;
            let n = chunk.min(rows - s);
            for (r, b) in readers.iter().zip(bufs.iter_mut()) {
                let bytes: &mut [u8] = bytemuck_u64(b);
                if let Err(e) = r.read_rows(s, &mut bytes[..r.source().span(s, n).1]) {
                    fail(&failed, e.into());
                    break 'scan;
                }
            }
            let data = cols
                .iter()
                .zip(&bufs)
                .zip(unpacked.iter_mut())
                .map(|((c, b), u)| {
                    // SAFETY: the bytes of a u64 buffer.
                    let bytes =
                        unsafe { std::slice::from_raw_parts(b.as_ptr() as *const u8, b.len() * 8) };
                    c.decode(s, bytes, n, u)
                })
                .collect::<std::result::Result<Vec<ColumnData<'_>>, _>>();
            match data {
                Ok(data) => acc.morsel(plan, &data, 0..n),
                Err(e) => {
                    fail(&failed, e);
                    break 'scan;
                }
            }
        }
        acc
    });
    finish_scan(accs, failed)
}

/// The bytes of a `u64` buffer.
fn bytemuck_u64(b: &mut [u64]) -> &mut [u8] {
    // SAFETY: u8 has no alignment or validity requirements.
    unsafe { std::slice::from_raw_parts_mut(b.as_mut_ptr() as *mut u8, b.len() * 8) }
}

/// An I/O thread reads segments of every column (large `pread`s, or
/// `O_DIRECT`) `readahead` segments ahead; workers count whole segments.
fn scan_streamed(
    plan: &Plan,
    cols: &[&Column],
    rows: usize,
    read_path: ReadPath,
    opts: &ScanOptions,
) -> Result<Acc> {
    let sources: Vec<_> = cols.iter().map(|c| c.source()).collect();
    // Segments hold `segment_bytes` of the widest column as stored.
    // A whole number of morsels (= checksummed stripes).
    let seg_rows = (opts.segment_bytes
        / sources
            .iter()
            .map(|s| s.width.div_ceil(s.unit_rows).max(1))
            .max()
            .unwrap_or(1))
    .max(MORSEL)
    .next_multiple_of(MORSEL);
    let stream = SegmentStream::start(
        &sources,
        rows,
        seg_rows,
        read_path,
        opts.block_size,
        opts.readahead_segments,
    )
    .map_err(microtab_store::Error::from)?;
    let failed: std::sync::Mutex<Option<microtab_store::Error>> = std::sync::Mutex::new(None);
    let accs = rayon::broadcast(|_| {
        let mut acc = Acc::new(plan);
        let mut unpacked: Vec<Vec<u64>> = cols.iter().map(|_| Vec::new()).collect();
        'scan: while let Some(seg) = stream.next() {
            let seg = match seg {
                Ok(s) => s,
                Err(e) => {
                    fail(&failed, e.into());
                    break;
                }
            };
            let mut s = 0;
            while s < seg.rows {
                let e = (s + MORSEL).min(seg.rows);
                let data = cols
                    .iter()
                    .zip(&seg.bufs)
                    .zip(unpacked.iter_mut())
                    .map(|((c, b), u)| {
                        let (off, len) = c.stored_span(s, e - s);
                        c.decode(seg.start + s, &b.bytes()[off..off + len], e - s, u)
                    })
                    .collect::<std::result::Result<Vec<ColumnData<'_>>, _>>();
                match data {
                    Ok(data) => acc.morsel(plan, &data, 0..e - s),
                    Err(err) => {
                        fail(&failed, err);
                        stream.recycle(seg);
                        break 'scan;
                    }
                }
                s = e;
            }
            stream.recycle(seg);
        }
        acc
    });
    stream.finish();
    finish_scan(accs, failed)
}

/// How a scan reads its columns (chosen by measurement: `microtab tune`).
#[derive(Debug, Clone)]
pub struct ScanOptions {
    /// auto, mmap, pread or O_DIRECT.
    pub read_path: ReadPath,
    /// Bytes per `pread` call.
    pub block_size: usize,
    /// Bytes of the widest column per streamed segment.
    pub segment_bytes: usize,
    /// Segments read ahead of the workers (pread / direct).
    pub readahead_segments: usize,
    /// Morsels the mmap read-ahead window runs ahead of the scan.
    pub readahead: usize,
}

impl Default for ScanOptions {
    fn default() -> Self {
        ScanOptions {
            read_path: ReadPath::Auto,
            block_size: microtab_io::DEFAULT_BLOCK_SIZE,
            segment_bytes: 1 << 20,
            readahead_segments: 2,
            readahead: AHEAD,
        }
    }
}

impl ScanOptions {
    /// Defaults overridden by `MICROTAB_READ_PATH` (auto|mmap|pread|direct|inline) and
    /// `MICROTAB_BLOCK_SIZE`, `MICROTAB_SEGMENT_BYTES`, `MICROTAB_READAHEAD`
    /// (segments) when set.
    pub fn from_env() -> Self {
        Self::from_env_over(ScanOptions::default())
    }

    /// `base` overridden by the environment variables of [`from_env`](Self::from_env).
    pub fn from_env_over(base: ScanOptions) -> Self {
        let mut o = base;
        let num = |k: &str| std::env::var(k).ok().and_then(|v| v.parse::<usize>().ok());
        if let Some(p) = std::env::var("MICROTAB_READ_PATH")
            .ok()
            .and_then(|v| ReadPath::parse(&v))
        {
            o.read_path = p;
        }
        if let Some(n) = num("MICROTAB_BLOCK_SIZE") {
            o.block_size = n;
        }
        if let Some(n) = num("MICROTAB_SEGMENT_BYTES") {
            o.segment_bytes = n;
        }
        if let Some(n) = num("MICROTAB_READAHEAD") {
            o.readahead_segments = n;
        }
        o
    }
}

/// The cold path of `auto`: inline with a large kernel read-ahead (8 MiB
/// here: the workers' own in-order morsel reads keep the device busy and
/// beat a read-ahead thread per column, cold Q1–Q5 10–27% faster), streamed
/// segments with the common 128 KiB (there Q3 38 vs 42 ms, Q4 43 vs 65 ms).
/// Measured in docs/IO.md; `microtab tune` races both.
fn cold_path(cols: &[&Column]) -> ReadPath {
    if cols
        .iter()
        .all(|c| microtab_io::auto_cold_path(&c.path()) == ReadPath::Inline)
    {
        ReadPath::Inline
    } else {
        ReadPath::Pread
    }
}

/// The table of the selection column: 0 passes, anything else is trash.
static SELECTION_TABLE: [u32; 256] = {
    let mut t = [TRASH; 256];
    t[0] = 0;
    t
};

/// The codes a byte filter table passes, if they form one range: `(lo,
/// hi − lo)` (a row passes when `code − lo ≤ hi − lo` in wrapping `u8`).
fn byte_range(t: &[u32; 256]) -> Option<(u8, u8)> {
    let lo = t.iter().position(|&e| e == 0)?;
    let hi = t.iter().rposition(|&e| e == 0)?;
    t[lo..=hi]
        .iter()
        .all(|&e| e == 0)
        .then_some((lo as u8, (hi - lo) as u8))
}

/// Largest table whose lanes are packed per morsel (the fold costs
/// `cells × LANES` per 32 Ki rows).
const MAX_PACKED_CELLS: usize = 255;

/// Integer weights ≥ 0 whose sum over a morsel stays below 2^40.
fn packable_weight(v: &Variable) -> bool {
    let m = |n: Option<microtab_store::Number>| n.map_or(0.0, |n| n.as_f64());
    v.kind == Kind::Int
        && v.ty.width() <= 4
        && m(v.min) >= 0.0
        && m(v.max) * (MORSEL as f64) < 2f64.powi(PACK_SHIFT as i32)
}

/// Whether a means query can run through [`fused_means`]: integer columns
/// of at most 32 bits, a weight ≥ 0 that is never excluded with a
/// morsel's Σw < 2^40, at most two excluded analysis codes present in the
/// data, and |w|·x² < 2^62 for every row.
fn means_fuse(measure: Option<&Column>, weight: Option<&Column>) -> Option<MeansFuse> {
    let narrow = |c: &Column| c.var().ty.width() <= 4 && c.var().kind == Kind::Int;
    let bound = |c: &Column| -> (f64, f64) {
        let m = |n: Option<microtab_store::Number>| n.map_or(0.0, |n| n.as_f64());
        (m(c.var().min), m(c.var().max))
    };
    // Codes that can occur: a missing code within [min, max], the null
    // code only when the column has nulls.
    let codes = |c: &Column| -> Vec<i64> {
        let (lo, hi) = bound(c);
        let v = c.var();
        let mut out: Vec<i64> = v
            .missing_codes
            .iter()
            .filter(|&&m| m.fract() == 0.0 && m >= lo && m <= hi)
            .map(|&m| m as i64)
            .collect();
        if v.nulls > 0 {
            out.extend(v.null_code);
        }
        out
    };
    let x = measure?;
    if !narrow(x) || !weight.is_none_or(narrow) {
        return None;
    }
    let (xlo, xhi) = bound(x);
    let (wlo, whi) = weight.map_or((1.0, 1.0), bound);
    let xm = xlo.abs().max(xhi.abs());
    if weight.is_some_and(|w| !codes(w).is_empty())
        || wlo < 0.0
        || whi * (MORSEL as f64) >= 2f64.powi(PACK_SHIFT as i32)
        || whi * xm * xm >= 2f64.powi(62)
    {
        return None;
    }
    let xcodes = match codes(x)[..] {
        [] => [i64::MIN; 2],
        [a] => [a, i64::MIN],
        [a, b] => [a, b],
        _ => return None,
    };
    Some(MeansFuse { xcodes })
}

/// Whether a morsel's Σw and Σw·x fit in i64 for these columns.
fn morsel_sums_ok(measure: Option<&Column>, weight: Option<&Column>) -> bool {
    let bound = |c: &Column| -> f64 {
        let m = |n: Option<microtab_store::Number>| n.map_or(0.0, |n| n.as_f64().abs());
        m(c.var().min).max(m(c.var().max)).max(1.0)
    };
    let x = measure.map_or(f64::INFINITY, bound);
    let w = weight.map_or(1.0, bound);
    x * w * (MORSEL as f64) < 2f64.powi(62)
}

/// Bytes a cube cell takes in each worker's accumulator (and once more
/// in the result), for the memory estimate of a refused query.
fn cell_bytes(weighted: bool, measure: bool, exact: bool) -> usize {
    let mut b = LANES * 8 + 8;
    if weighted {
        b += LANES * 16 + 8;
    }
    if measure {
        b += if exact {
            XLANES * std::mem::size_of::<ExactCell>()
        } else {
            64
        } + std::mem::size_of::<Moments>();
    }
    b
}

/// Runs `q` over `ds` with the settings from the environment
/// ([`ScanOptions::from_env`]).
pub fn run(ds: &Dataset, q: &Query) -> Result<Cube> {
    run_with(ds, q, &ScanOptions::from_env())
}

/// Runs `q` over `ds` reading columns as `opts` says.
pub fn run_with(ds: &Dataset, q: &Query, opts: &ScanOptions) -> Result<Cube> {
    let rows = ds.rows() as usize;
    // Open every column first so a bad name fails before any work.
    let dim_cols: Vec<Column> = q
        .group_by
        .iter()
        .map(|n| ds.column(n))
        .collect::<std::result::Result<_, _>>()?;
    let filter_cols: Vec<Column> = q
        .filter
        .iter()
        .map(|t| ds.column(&t.var))
        .collect::<std::result::Result<_, _>>()?;
    let weight_col = q.weight.as_deref().map(|n| ds.column(n)).transpose()?;
    let measure_col = q.measure.as_deref().map(|n| ds.column(n)).transpose()?;
    if let Some(c) = &weight_col {
        numeric(c.var(), "a weight")?;
    }
    if let Some(c) = &measure_col {
        numeric(c.var(), "an analysis variable")?;
    }
    let all_cols: Vec<&Column> = dim_cols
        .iter()
        .chain(&filter_cols)
        .chain(weight_col.iter())
        .chain(measure_col.iter())
        .collect();
    let read_path = match opts.read_path {
        ReadPath::Auto => {
            // Cached columns are fastest copied morsel by morsel into each
            // worker's cache (no page faults; 3–7% faster than mapped on
            // Q1–Q5); cold ones stream fastest through large preads with
            // read-ahead (measured: docs/IO.md).
            if all_cols.iter().all(|c| c.resident_fraction() >= 0.9) {
                ReadPath::Inline
            } else {
                cold_path(&all_cols)
            }
        }
        p => p,
    };
    if read_path == ReadPath::Mmap {
        // Start the kernel reading the first stretch of every column now, so
        // the reads overlap planning; the scan keeps the window moving.
        for c in &all_cols {
            c.prefetch(0, (opts.readahead + STEP) * MORSEL);
        }
    }

    let mut plans: Vec<DimPlan> = Vec::new();
    for c in &dim_cols {
        let dict = dict_of(ds, c.var())?;
        plans.push(dim_categories(
            c,
            dict,
            q.include_missing,
            q.max_cells.unwrap_or(DEFAULT_MAX_CELLS),
        )?);
    }
    let mut cells = 1usize;
    for p in &plans {
        cells = cells.saturating_mul(p.categories.len().max(1));
    }
    let max_cells = q.max_cells.unwrap_or(DEFAULT_MAX_CELLS);
    if cells > max_cells {
        let shape = plans
            .iter()
            .map(|p| format!("{} {}", p.var.name, p.categories.len()))
            .collect::<Vec<_>>()
            .join(" × ");
        let per_cell = cell_bytes(
            weight_col.is_some(),
            measure_col.is_some(),
            exact_ok(measure_col.as_ref(), weight_col.as_ref(), rows),
        ) * (rayon::current_num_threads() + 1);
        return Err(Error::TooLarge(format!(
            "the table would have {cells} cells ({shape} categories), more than the limit of {max_cells}; it would need about {} MB of memory. Group by fewer or narrower variables, filter, or raise the limit with --max-cells {cells}",
            (cells as u128 * per_cell as u128).div_ceil(1 << 20)
        )));
    }
    let mut strides = vec![1u32; plans.len()];
    for i in (0..plans.len().saturating_sub(1)).rev() {
        strides[i] = strides[i + 1] * plans[i + 1].categories.len().max(1) as u32;
    }
    let mut filters = Vec::new();
    for (t, c) in q.filter.iter().zip(&filter_cols) {
        let dict = dict_of(ds, c.var())?;
        let pred = resolve(t, c.var(), &dict)?;
        filters.push((c, specialize(filter_mapper(c.var(), pred), c.var().ty)));
    }
    let plan = Plan {
        cells,
        dims: dim_cols
            .iter()
            .zip(&plans)
            .zip(&strides)
            .map(|((c, p), &s)| (c, specialize(dim_mapper(p, s), c.var().ty)))
            .collect(),
        filters,
        weight: weight_col.as_ref().map(|c| (c, Exclusion::of(c.var()))),
        measure: measure_col.as_ref().map(|c| (c, Exclusion::of(c.var()))),
        exact: exact_ok(measure_col.as_ref(), weight_col.as_ref(), rows),
        morsel_sums: cells <= 256 && morsel_sums_ok(measure_col.as_ref(), weight_col.as_ref()),
        means_fuse: None,
        filter_ranges: None,
        pack_weights: cells <= MAX_PACKED_CELLS
            && weight_col
                .as_ref()
                .is_some_and(|c| packable_weight(c.var())),
        fused: measure_col.is_none()
            && weight_col
                .as_ref()
                .is_none_or(|c| Exclusion::of(c.var()).is_empty()),
    };
    let mut plan = plan;
    if plan.fused && plan.filters.len() >= 2 {
        plan.filter_ranges = plan
            .filters
            .iter()
            .map(|(c, m)| match m {
                Mapper::Byte(t) if c.var().ty == microtab_store::PhysType::U8 => byte_range(t),
                _ => None,
            })
            .collect();
    }
    if plan.exact && plan.morsel_sums {
        plan.means_fuse = means_fuse(measure_col.as_ref(), weight_col.as_ref());
    }
    // If any dimension has no categories the cube is empty.
    let empty = plans.iter().any(|p| p.categories.is_empty());
    let acc = if empty || rows == 0 {
        Acc::new(&plan)
    } else if read_path == ReadPath::Inline {
        scan_inline(&plan, &all_cols, rows)?
    } else if read_path == ReadPath::Mmap {
        scan_mapped(&plan, &all_cols, rows, opts)?
    } else {
        scan_streamed(&plan, &all_cols, rows, read_path, opts)?
    };
    Ok(compact(
        plans,
        acc,
        &plan,
        weight_col.as_ref(),
        measure_col.as_ref(),
    ))
}

/// Drops categories that no counted row has and scales sums to displayed units.
fn compact(
    plans: Vec<DimPlan>,
    acc: Acc,
    plan: &Plan,
    weight: Option<&Column>,
    measure: Option<&Column>,
) -> Cube {
    let shape: Vec<usize> = plans.iter().map(|p| p.categories.len().max(1)).collect();
    let n = plan.cells;
    // Marginal counts per dimension.
    let mut keep: Vec<Vec<bool>> = shape.iter().map(|&k| vec![false; k]).collect();
    let exact_of = |c: usize| {
        let mut e = ExactCell::default();
        for x in &acc.exact[c * XLANES..(c + 1) * XLANES] {
            e.add(x);
        }
        e
    };
    let counts_of = |c: usize| {
        if plan.exact {
            exact_of(c).n
        } else {
            acc.counts[c * LANES..(c + 1) * LANES].iter().sum()
        }
    };
    let wsum_of = |c: usize| -> f64 {
        let l = c * LANES..(c + 1) * LANES;
        acc.wsum[l.clone()].iter().sum::<f64>() + acc.wsum_int[l].iter().sum::<i64>() as f64
    };
    for c in 0..n {
        if counts_of(c) == 0 {
            continue;
        }
        let mut r = c;
        for d in (0..shape.len()).rev() {
            keep[d][r % shape[d]] = true;
            r /= shape[d];
        }
    }
    let new_index: Vec<Vec<Option<usize>>> = keep
        .iter()
        .map(|k| {
            let mut j = 0;
            k.iter()
                .map(|&b| {
                    if b {
                        j += 1;
                        Some(j - 1)
                    } else {
                        None
                    }
                })
                .collect()
        })
        .collect();
    let new_shape: Vec<usize> = keep
        .iter()
        .map(|k| k.iter().filter(|&&b| b).count())
        .collect();
    let total: usize = if plans.is_empty() {
        1
    } else {
        new_shape.iter().product()
    };
    let wscale = weight.map(|c| c.var().scale()).unwrap_or(1.0);
    let xscale = measure.map(|c| c.var().scale()).unwrap_or(1.0);
    let mut counts = vec![0u64; total];
    let mut weighted = weight.map(|_| vec![0.0; total]);
    let mut moments = measure.map(|_| vec![Moments::default(); total]);
    for c in 0..n {
        if counts_of(c) == 0 {
            continue;
        }
        let mut r = c;
        let mut dst = 0;
        let mut mult = 1;
        for d in (0..shape.len()).rev() {
            let i = new_index[d][r % shape[d]].expect("kept");
            dst += i * mult;
            mult *= new_shape[d];
            r /= shape[d];
        }
        counts[dst] = counts_of(c);
        if let Some(w) = weighted.as_mut() {
            w[dst] = wsum_of(c) / wscale;
        }
        if let Some(m) = moments.as_mut() {
            let a = if plan.exact {
                exact_of(c).moments()
            } else {
                acc.moments[c]
            };
            m[dst] = Moments {
                n: a.n,
                w: a.w / wscale,
                mean: a.mean / xscale,
                m2: a.m2 / (xscale * xscale) / wscale,
            };
        }
    }
    let dims = plans
        .into_iter()
        .zip(&keep)
        .map(|(p, k)| Dim {
            var: p.var,
            categories: p
                .categories
                .into_iter()
                .zip(k)
                .filter(|(_, &b)| b)
                .map(|(c, _)| c)
                .collect(),
        })
        .collect();
    Cube {
        dims,
        counts,
        weighted,
        moments,
    }
}
