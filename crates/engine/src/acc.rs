//! A worker's accumulator: per-cell, per-lane counts and sums, and the
//! dispatch of each morsel to the kernel the physical plan chose.

use crate::core::{ExactCell, Moments, MorselCell, LANES, MORSEL, PACK_SHIFT, XLANES};
use crate::exact::SupCell;
use crate::kernels::*;
use crate::physical::{MeansFuse, Plan};
use crate::plan::Mapper;
use crate::Result;
use microtab_store::{ColumnData, Kind};

pub(crate) struct Acc {
    /// Per cell and lane (`cell * LANES + lane`).
    pub(crate) counts: Vec<u64>,
    pub(crate) wsum: Vec<f64>,
    pub(crate) wsum_int: Vec<i64>,
    pub(crate) moments: Vec<Moments>,
    pub(crate) idx: Vec<u32>,
    pub(crate) wbuf: Vec<f64>,
    pub(crate) xbuf: Vec<f64>,
    // Per-morsel moment sums: n, Σw, Σw(x−k), Σw(x−k)², and the shift k.
    pub(crate) local: Vec<[f64; 5]>,
    // Exact path: integer weights and values.
    pub(crate) wint: Vec<i64>,
    pub(crate) xint: Vec<i64>,
    pub(crate) exact: Vec<ExactCell>,
    pub(crate) mloc: Vec<MorselCell>,
    pub(crate) packed: Vec<PackedCell>,
    pub(crate) packed_w: Vec<u64>,
    /// Rows of the morsel rejected by the filters (`Plan::filter_ranges`).
    pub(crate) sel: Vec<u8>,
    /// Exact sums per cell ([`Plan::exact_floats`]).
    pub(crate) sup: Vec<SupCell>,
    /// Gathered passing rows ([`gather`]).
    pub(crate) gather: Gather,
    /// Replicate sums ([`Plan::replicates`]).
    pub(crate) reps: RepSums,
    /// The morsel's counted rows grouped by cell ([`RowOrder`]), and the
    /// analysis values in that order.
    pub(crate) rorder: RowOrder,
    pub(crate) rxi: Vec<i64>,
    pub(crate) rxf: Vec<f64>,
    /// Taylor linearization sums ([`Plan::taylor`]).
    pub(crate) taylor: Option<crate::taylor::TaylorAcc>,
    /// Distributions of the measure ([`Plan::distribution`]).
    pub(crate) dist: Option<crate::quantile::DistAcc>,
}

/// Per replicate weight `r` and cell `c` (at `r · (cells + 1) + c`): `Σ
/// w_r` and, with an analysis variable, `Σ w_r·x` — in integers when the
/// replicate weights and the analysis variable are integers (exact, the
/// same whatever the order of the morsels), else in `f64`.
#[derive(Debug, Clone)]
pub(crate) enum RepSums {
    /// No replicate weights.
    None,
    /// Exact integer sums, in stored units.
    Int { w: Vec<i64>, wx: Vec<i128> },
    /// Float sums, in stored units.
    Float { w: Vec<f64>, wx: Vec<f64> },
}

impl RepSums {
    fn new(p: &Plan) -> crate::Result<Self> {
        use crate::core::alloc::zeroed;
        let n = (p.cells + 1).saturating_mul(p.replicates.len());
        let nx = if p.measure.is_some() { n } else { 0 };
        let (cells, reps) = (p.cells, p.replicates.len());
        let what =
            move || format!("the sums of {reps} replicate weights over a table of {cells} cells");
        Ok(match (p.replicates.is_empty(), p.replicates_exact) {
            (true, _) => RepSums::None,
            (false, true) => RepSums::Int {
                w: zeroed(n, what)?,
                wx: zeroed(nx, what)?,
            },
            (false, false) => RepSums::Float {
                w: zeroed(n, what)?,
                wx: zeroed(nx, what)?,
            },
        })
    }

    fn merge(&mut self, o: &RepSums) {
        match (self, o) {
            (RepSums::Int { w, wx }, RepSums::Int { w: ow, wx: owx }) => {
                w.iter_mut().zip(ow).for_each(|(a, b)| *a += b);
                wx.iter_mut().zip(owx).for_each(|(a, b)| *a += b);
            }
            (RepSums::Float { w, wx }, RepSums::Float { w: ow, wx: owx }) => {
                w.iter_mut().zip(ow).for_each(|(a, b)| *a += b);
                wx.iter_mut().zip(owx).for_each(|(a, b)| *a += b);
            }
            _ => {}
        }
    }
}

/// How a fused kernel sees a morsel's filters.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Filtered {
    /// The filter columns are code columns of the kernel.
    Columns,
    /// The selection column (filled by [`fill_selection`]) is one more
    /// code column of the kernel.
    Selection,
    /// The rows were gathered: every row passes.
    Gathered,
}

/// A fused kernel's leading column and its table.
#[derive(Clone, Copy)]
pub(crate) enum LeadCol<'a> {
    Byte(&'a [u8], &'a [u32; 256]),
    Word(&'a [u16], &'a [u32; 65536]),
}

/// The code columns of the fused kernels over rows `r`, with their
/// tables: the dimensions, then the filters as `f` says; at most one `u16`
/// column, which leads (cells are sums of table entries, so the order does
/// not matter), else the first. `None` when a column is not a code column
/// or two are `u16`.
#[allow(clippy::type_complexity)]
pub(crate) fn code_columns<'a>(
    p: &'a Plan,
    data: &[ColumnData<'a>],
    r: std::ops::Range<usize>,
    f: Filtered,
    sel: &'a [u8],
) -> Option<(LeadCol<'a>, Vec<&'a [u8]>, Vec<&'a [u32; 256]>)> {
    let fcols = if f == Filtered::Columns {
        p.filters.len()
    } else {
        0
    };
    let mut word = None;
    let mut cols: Vec<&[u8]> = Vec::with_capacity(p.dims.len() + fcols + 1);
    let mut tabs: Vec<&[u32; 256]> = Vec::with_capacity(cols.capacity());
    let n = p.dims.len() + fcols;
    for (d, t) in data[..n].iter().zip(&p.fused_tabs) {
        match (t, d) {
            (FusedTab::Byte(t), ColumnData::U8(v)) => {
                cols.push(&v[r.clone()]);
                tabs.push(t);
            }
            (FusedTab::Word(t), ColumnData::U16(v)) if word.is_none() => {
                word = Some(LeadCol::Word(&v[r.clone()], t));
            }
            _ => return None,
        }
    }
    if f == Filtered::Selection {
        cols.push(sel);
        tabs.push(&SELECTION_TABLE);
    }
    let lead = match word {
        Some(w) => w,
        None if !cols.is_empty() => LeadCol::Byte(cols.remove(0), tabs.remove(0)),
        None => return None,
    };
    Some((lead, cols, tabs))
}

/// Runs `$body` with the code columns and their tables as arrays
/// `$c: [&[u8]; N]`, `$t: [&[u32; 256]; N]`, for each `N` listed (the
/// kernels are compiled per number of columns); false for other numbers.
macro_rules! as_arrays {
    ($cols:ident, $tabs:ident, [$($n:literal),*], |$c:ident, $t:ident| $body:block) => {
        match $cols.len() {
            $($n => {
                let $c: [&[u8]; $n] = $cols.try_into().unwrap();
                let $t: [&[u32; 256]; $n] = $tabs.try_into().unwrap();
                $body
            })*
            _ => return false,
        }
    };
}

/// Calls a fused kernel with the leading column of either type.
macro_rules! with_lead {
    ($lead:expr, |$l:ident| $body:expr) => {
        match $lead {
            LeadCol::Byte(c, t) => {
                let $l = (c, t);
                $body
            }
            LeadCol::Word(c, t) => {
                let $l = (c, t);
                $body
            }
        }
    };
}

/// Most rows (in eighths of a morsel) that may pass for the means kernel
/// to count gathered rows rather than read the selection column. Measured
/// (instructions, 1 M-row census, `means INCTOT --by EDUC --weight PERWT`):
/// AGE(25-64) MARST(1), about a third passing, 43.5 → 36.6 M; 44% passing
/// (INCWAGE>20000) 51.9 → 53.8 M, so the line is at 3/8.
const MEANS_GATHER: usize = 3;

/// A morsel's rows that pass the filters, and copies of the kernel's
/// columns at those rows (reused from morsel to morsel).
#[derive(Default)]
pub(crate) struct Gather {
    rows: Vec<u32>,
    bufs: Vec<Vec<u64>>,
}

/// What [`gather`] made of a morsel.
pub(crate) enum Gathered<'b> {
    /// The plan has no selection: the kernel reads the filter columns.
    Unfiltered,
    /// A filter column does not fit the selection (the generic path
    /// counts the morsel).
    No,
    /// Most rows pass: the selection column goes to the kernel.
    Selection,
    /// No row passes.
    Empty,
    /// The passing rows' columns (in role order; filters left as they
    /// are, unread) and their number.
    Rows(Vec<ColumnData<'b>>, usize),
}

/// Copies rows `rows` of rows `r` of `d` into `buf`.
fn gather_col<'b>(
    d: ColumnData<'_>,
    r: std::ops::Range<usize>,
    rows: &[u32],
    buf: &'b mut Vec<u64>,
) -> ColumnData<'b> {
    fn typed<'b, T: Copy>(v: &[T], rows: &[u32], buf: &'b mut Vec<u64>) -> &'b [T] {
        let n = rows.len();
        buf.clear();
        buf.reserve((n * std::mem::size_of::<T>()).div_ceil(8));
        let ptr = buf.as_mut_ptr().cast::<T>();
        for (k, &i) in rows.iter().enumerate() {
            // SAFETY: the capacity holds n values of T (alignment ≤ 8, as
            // for every ColumnData type); k < n.
            unsafe { ptr.add(k).write(v[i as usize]) };
        }
        // SAFETY: the n values were written above; `buf` stays borrowed
        // (and unchanged) for the returned slice's lifetime.
        unsafe { std::slice::from_raw_parts(ptr, n) }
    }
    match d {
        ColumnData::U8(v) => ColumnData::U8(typed(&v[r], rows, buf)),
        ColumnData::I8(v) => ColumnData::I8(typed(&v[r], rows, buf)),
        ColumnData::U16(v) => ColumnData::U16(typed(&v[r], rows, buf)),
        ColumnData::I16(v) => ColumnData::I16(typed(&v[r], rows, buf)),
        ColumnData::U32(v) => ColumnData::U32(typed(&v[r], rows, buf)),
        ColumnData::I32(v) => ColumnData::I32(typed(&v[r], rows, buf)),
        ColumnData::I64(v) => ColumnData::I64(typed(&v[r], rows, buf)),
        ColumnData::F32(v) => ColumnData::F32(typed(&v[r], rows, buf)),
        ColumnData::F64(v) => ColumnData::F64(typed(&v[r], rows, buf)),
    }
}

/// Evaluates the filters of rows `r` ([`Plan::selection`]) and, unless
/// most rows pass, gathers the passing rows of the other columns, so the
/// fused kernels count only them (a selective filter then costs little
/// more than its own column).
pub(crate) fn gather<'b>(
    p: &Plan,
    data: &[ColumnData<'_>],
    r: std::ops::Range<usize>,
    sel: &mut Vec<u8>,
    g: &'b mut Gather,
    max_pass_eighths: usize,
) -> Gathered<'b> {
    if p.selection.is_none() {
        return Gathered::Unfiltered;
    }
    if !fill_selection(p, data, r.clone(), sel) {
        return Gathered::No;
    }
    let n = sel.len();
    // Each byte of `sel` is 0 or 1: add them eight at a time in u64 words
    // (at most 255 words, so no byte lane overflows), then across lanes.
    let (words, tail) = sel.as_chunks::<8>();
    let mut rejected = tail.iter().map(|&b| b as usize).sum::<usize>();
    for chunk in words.chunks(255) {
        let acc: u64 = chunk.iter().map(|w| u64::from_ne_bytes(*w)).sum();
        let pairs = (acc & 0x00ff_00ff_00ff_00ff) + ((acc >> 8) & 0x00ff_00ff_00ff_00ff);
        rejected += (pairs.wrapping_mul(0x0001_0001_0001_0001) >> 48) as usize;
    }
    let pass = n - rejected;
    if pass == 0 {
        return Gathered::Empty;
    }
    // Gathering pays while few enough rows pass for the kernel's work
    // saved to exceed the copying (see the callers' measurements).
    if pass * 8 > n * max_pass_eighths {
        return Gathered::Selection;
    }
    // Branch-free compaction of the passing row numbers.
    g.rows.clear();
    g.rows.reserve(n + 1);
    let spare = &mut g.rows.spare_capacity_mut()[..n + 1];
    let mut j = 0;
    for (i, &s) in sel.iter().enumerate() {
        spare[j].write(i as u32);
        j += (s == 0) as usize;
    }
    debug_assert_eq!(j, pass);
    // SAFETY: rows 0..j of the spare capacity were written above.
    unsafe { g.rows.set_len(j) };
    let nd = p.dims.len();
    let nf = p.filters.len();
    g.bufs.resize_with(data.len(), Vec::new);
    let rows = &g.rows[..];
    let out = data
        .iter()
        .zip(g.bufs.iter_mut())
        .enumerate()
        .map(|(k, (d, buf))| {
            if (nd..nd + nf).contains(&k) {
                // Not read: the rows are already filtered.
                ColumnData::U8(&[])
            } else {
                gather_col(*d, r.clone(), rows, buf)
            }
        })
        .collect();
    Gathered::Rows(out, pass)
}

/// Marks in `sel` (one byte per row of `r`; 0 passes) the rows the
/// filters reject, as [`Plan::selection`] says; false when a filter's
/// column does not fit (the generic path counts the morsel then).
pub(crate) fn fill_selection(
    p: &Plan,
    data: &[ColumnData<'_>],
    r: std::ops::Range<usize>,
    sel: &mut Vec<u8>,
) -> bool {
    let Some(kinds) = &p.selection else {
        return false;
    };
    sel.clear();
    sel.resize(r.len(), 0);
    let nd = p.dims.len();
    let fdata = &data[nd..nd + p.filters.len()];
    for ((k, (_, m)), d) in kinds.iter().zip(&p.filters).zip(fdata) {
        match (k, m, d) {
            (Some((lo, span)), _, ColumnData::U8(v)) => {
                for (s, &x) in sel.iter_mut().zip(&v[r.clone()]) {
                    *s |= (x.wrapping_sub(*lo) > *span) as u8;
                }
            }
            (None, Mapper::Byte(t), ColumnData::U8(v)) => {
                for (s, &x) in sel.iter_mut().zip(&v[r.clone()]) {
                    *s |= (t[x as usize] != 0) as u8;
                }
            }
            (None, Mapper::Word(t), ColumnData::U16(v)) => {
                for (s, &x) in sel.iter_mut().zip(&v[r.clone()]) {
                    *s |= (t[x as usize] != 0) as u8;
                }
            }
            (None, Mapper::Ranges(rg), d) => {
                dispatch!(*d, r.clone(), |v| mark_ranges(
                    v,
                    rg,
                    |s: &mut u8, bad| *s |= bad as u8,
                    sel
                ))
            }
            _ => return false,
        }
    }
    true
}

impl Acc {
    /// A worker's empty accumulator for `p`: its per-cell buffers are
    /// sized by the plan's cells, so they are allocated fallibly (a table
    /// too large for the memory there is is refused, not an abort).
    pub(crate) fn new(p: &Plan) -> Result<Self> {
        use crate::core::alloc::{filled, zeroed};
        let n = p.cells + 1;
        let cells = p.cells;
        let what = |buf: &'static str| move || format!("the {buf} of a table of {cells} cells");
        let per_lane = n.saturating_mul(LANES);
        let weighted = p.weight.is_some();
        let measured = p.measure.is_some();
        Ok(Acc {
            counts: zeroed(per_lane, what("counts"))?,
            wsum: if weighted {
                zeroed(per_lane, what("weight sums"))?
            } else {
                Vec::new()
            },
            wsum_int: if weighted {
                zeroed(per_lane, what("weight sums"))?
            } else {
                Vec::new()
            },
            moments: if measured {
                zeroed(n, what("moments"))?
            } else {
                Vec::new()
            },
            idx: Vec::with_capacity(MORSEL),
            wbuf: Vec::with_capacity(MORSEL),
            xbuf: Vec::with_capacity(MORSEL),
            local: if measured && !p.exact {
                zeroed(n, what("moment sums"))?
            } else {
                Vec::new()
            },
            wint: Vec::new(),
            xint: Vec::new(),
            exact: if p.exact {
                zeroed(n.saturating_mul(XLANES), what("exact sums"))?
            } else {
                Vec::new()
            },
            mloc: Vec::new(),
            packed: Vec::new(),
            packed_w: Vec::new(),
            sel: Vec::new(),
            gather: Gather::default(),
            reps: RepSums::new(p)?,
            rorder: RowOrder::default(),
            rxi: Vec::new(),
            rxf: Vec::new(),
            taylor: p
                .taylor
                .as_deref()
                .map(crate::taylor::TaylorAcc::new)
                .transpose()?,
            dist: p
                .distribution
                .then(|| crate::quantile::DistAcc::new(p.cells + 1))
                .transpose()?,
            sup: if p.exact_floats {
                filled(n, SupCell::default(), what("exact sums"))?
            } else {
                Vec::new()
            },
        })
    }

    /// Counts rows `r` of `data` (one view per query column, in plan order:
    /// dimensions, filters, weight, measure).
    pub(crate) fn morsel(&mut self, p: &Plan, data: &[ColumnData<'_>], r: std::ops::Range<usize>) {
        self.morsel_main(p, data, r.clone());
        if !p.replicates.is_empty() {
            self.replicate_sums(p, data, r.clone());
        }
        if let (Some(tp), Some(t)) = (p.taylor.as_deref(), self.taylor.as_mut()) {
            let nd = p.dims.len() + p.filters.len();
            let w = data[nd];
            let x = p.measure.as_ref().map(|_| data[nd + 1]);
            let at = nd + 1 + p.measure.is_some() as usize + p.replicates.len();
            let s = tp.strata.map(|_| data[at]);
            let c = tp.cluster.map(|_| data[at + tp.strata.is_some() as usize]);
            t.morsel(tp, &self.idx, p.cells as u32, w, x, s, c, r.clone());
        }
        if let (Some(d), Some((xc, _))) = (self.dist.as_mut(), p.measure.as_ref()) {
            let nd = p.dims.len() + p.filters.len();
            let w = p.weight.as_ref().map(|_| data[nd]);
            let x = data[nd + p.weight.is_some() as usize];
            let float = xc.var().kind == Kind::Float;
            d.morsel(&self.idx, p.cells as u32, w, x, r, float);
        }
    }

    /// Adds each replicate weight of the morsel into its sums, by the cell
    /// index [`morsel_main`](Self::morsel_main) left in `idx` (the planner
    /// turns the fused kernels off for replicate designs).
    fn replicate_sums(&mut self, p: &Plan, data: &[ColumnData<'_>], r: std::ops::Range<usize>) {
        let first = p.dims.len()
            + p.filters.len()
            + p.weight.is_some() as usize
            + p.measure.is_some() as usize;
        let n = p.cells + 1;
        let measured = p.measure.is_some();
        self.rorder.build(&self.idx, p.cells as u32);
        // The analysis values in the order of the rows by cell.
        if measured {
            let order = self.rorder.order();
            self.rxi.clear();
            self.rxf.clear();
            match (&self.reps, p.exact) {
                (RepSums::Int { .. }, _) => self
                    .rxi
                    .extend(order.iter().map(|&j| self.xint[j as usize])),
                (_, true) => self
                    .rxf
                    .extend(order.iter().map(|&j| self.xint[j as usize] as f64)),
                (_, false) => self
                    .rxf
                    .extend(order.iter().map(|&j| self.xbuf[j as usize])),
            }
        }
        let o = &self.rorder;
        let reps = &data[first..first + p.replicates.len()];
        match &mut self.reps {
            RepSums::None => {}
            RepSums::Int { w, wx } => {
                let xs = measured.then_some(&self.rxi[..]);
                // Four replicate weights of one type at a time, then one.
                let mut k = 0;
                while k < reps.len() {
                    macro_rules! sum {
                        ($($v:ident),*) => {
                            match (reps.get(k..k + 4), reps[k]) {
                                $((Some(&[ColumnData::$v(a), ColumnData::$v(b), ColumnData::$v(c), ColumnData::$v(d)]), _) => {
                                    let ws = [&a[r.clone()], &b[r.clone()], &c[r.clone()], &d[r.clone()]];
                                    replicate_ints(o, ws, xs, [k * n, (k + 1) * n, (k + 2) * n, (k + 3) * n], w, wx);
                                    4
                                })*
                                $((_, ColumnData::$v(a)) => {
                                    replicate_ints(o, [&a[r.clone()]], xs, [k * n], w, wx);
                                    1
                                })*
                                (_, ColumnData::F32(_) | ColumnData::F64(_)) => {
                                    unreachable!("float replicate weights are summed in f64")
                                }
                            }
                        };
                    }
                    k += sum!(U8, I8, U16, I16, U32, I32, I64);
                }
            }
            RepSums::Float { w, wx } => {
                let xs = measured.then_some(&self.rxf[..]);
                for (k, d) in reps.iter().enumerate() {
                    let cells = k * n..(k + 1) * n;
                    let xcells = if measured { cells.clone() } else { 0..0 };
                    dispatch!(*d, r.clone(), |v| replicate_floats(
                        o,
                        v,
                        xs,
                        &mut w[cells.clone()],
                        &mut wx[xcells.clone()],
                    ));
                }
            }
        }
    }

    /// Counts a morsel (without its replicate sums).
    fn morsel_main(&mut self, p: &Plan, data: &[ColumnData<'_>], r: std::ops::Range<usize>) {
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
        if let Some(sp) = &p.split {
            let at = nd
                + p.weight.is_some() as usize
                + p.measure.is_some() as usize
                + p.replicates.len()
                + p.taylor.as_ref().map_or(0, |t| {
                    t.strata.is_some() as usize + t.cluster.is_some() as usize
                });
            sp.apply(data[at], r.clone(), &mut self.idx, p.cells as u32);
        }
        let wdata = p.weight.as_ref().map(|_| data[nd]);
        let xdata = p
            .measure
            .as_ref()
            .map(|_| data[nd + p.weight.is_some() as usize]);
        // Loads a role's values into a buffer, marking excluded rows.
        macro_rules! load {
            ($role:expr, $data:expr, $load:ident, $out:ident) => {
                if let (Some((_, ex)), Some(d)) = ($role, $data) {
                    dispatch!(d, r.clone(), |v| $load(
                        v,
                        ex,
                        &mut self.idx,
                        &mut self.$out
                    ));
                }
            };
        }
        if p.exact {
            let trash = p.cells as u32;
            load!(&p.weight, wdata, load_ints, wint);
            load!(&p.measure, xdata, load_ints, xint);
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
        if p.exact_floats {
            load!(&p.weight, wdata, load_values, wbuf);
            load!(&p.measure, xdata, load_values, xbuf);
            let trash = p.cells as u32;
            let (w, x) = (p.weight.is_some(), p.measure.is_some());
            for (j, &i) in self.idx.iter().enumerate() {
                if i >= trash {
                    continue;
                }
                self.counts[i as usize * LANES] += 1;
                self.sup[i as usize]
                    .add(if w { self.wbuf[j] } else { 1.0 }, x.then(|| self.xbuf[j]));
            }
            return;
        }
        // A weight that cannot be missing (and no measure) is summed straight
        // from its column below, without a buffer.
        let wload = p
            .weight
            .as_ref()
            .filter(|(_, ex)| !ex.is_empty() || p.measure.is_some());
        load!(wload, wdata, load_values, wbuf);
        load!(&p.measure, xdata, load_values, xbuf);
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
                // Shift each cell's values by a value near its mean (the
                // running mean, or the cell's first value in the morsel) so
                // the sums of squares do not cancel, then fold into the
                // running moments. (One shift for all cells lost small
                // values beside large ones: 5 beside 2^60 became 0.)
                let weighted = p.weight.is_some();
                for (j, &i) in self.idx.iter().enumerate() {
                    let c = i.min(trash) as usize;
                    let w = if weighted { self.wbuf[j] } else { 1.0 };
                    let x = self.xbuf[j];
                    let l = &mut self.local[c];
                    if l[0] == 0.0 {
                        let m = &self.moments[c];
                        l[4] = if m.n > 0 && m.w != 0.0 { m.mean } else { x };
                    }
                    let d = x - l[4];
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
                            mean: l[4] + l[2] / l[1],
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
                    self.local[c] = [0.0; 5];
                }
                self.local[p.cells] = [0.0; 5];
            }
        }
    }

    /// Folds the morsel cells into the exact cells.
    pub(crate) fn fold_morsel(&mut self) {
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
    pub(crate) fn fold_packed(&mut self) {
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
    pub(crate) fn fused_means(
        &mut self,
        p: &Plan,
        f: MeansFuse,
        data: &[ColumnData<'_>],
        r: std::ops::Range<usize>,
    ) -> bool {
        // The means kernel does more per row: gathering measured worth it
        // up to MEANS_GATHER eighths passing.
        self.with_gathered(p, data, r, MEANS_GATHER, |acc, d, r, filtered, sel| {
            acc.fused_means_with(p, f, d, r, filtered, sel)
        })
    }

    /// Runs `k` over the morsel as [`gather`] makes it (the passing rows
    /// only, or all rows with the selection column or the filter columns),
    /// with the selection and gather buffers lent out of `self`.
    fn with_gathered(
        &mut self,
        p: &Plan,
        data: &[ColumnData<'_>],
        r: std::ops::Range<usize>,
        max_pass_eighths: usize,
        k: impl FnOnce(&mut Self, &[ColumnData<'_>], std::ops::Range<usize>, Filtered, &[u8]) -> bool,
    ) -> bool {
        let mut sel = std::mem::take(&mut self.sel);
        let mut g = std::mem::take(&mut self.gather);
        let done = match gather(p, data, r.clone(), &mut sel, &mut g, max_pass_eighths) {
            Gathered::No => false,
            Gathered::Empty => true,
            Gathered::Unfiltered => k(self, data, r, Filtered::Columns, &sel),
            Gathered::Selection => k(self, data, r, Filtered::Selection, &sel),
            Gathered::Rows(d, n) => k(self, &d, 0..n, Filtered::Gathered, &sel),
        };
        self.sel = sel;
        self.gather = g;
        done
    }

    /// [`fused_means`](Self::fused_means) over rows `r` of `data`, the
    /// filters as `filtered` says.
    pub(crate) fn fused_means_with(
        &mut self,
        p: &Plan,
        f: MeansFuse,
        data: &[ColumnData<'_>],
        r: std::ops::Range<usize>,
        filtered: Filtered,
        sel: &[u8],
    ) -> bool {
        let nd = p.dims.len() + p.filters.len();
        let Some((lead, cols, tabs)) = code_columns(p, data, r.clone(), filtered, sel) else {
            return false;
        };
        let trash = p.cells as u32;
        self.packed.clear();
        self.packed
            .resize((p.cells + 1) * LANES, PackedCell::default());
        let wdata = p.weight.as_ref().map(|_| data[nd]);
        let xdata = data[nd + p.weight.is_some() as usize];
        let xc = f.xcodes;
        as_arrays!(cols, tabs, [0, 1, 2], |c, t| {
            macro_rules! x {
                ($w:expr) => {
                    int_slice!(
                        xdata,
                        r.clone(),
                        |x| with_lead!(lead, |l| fused_means(
                            l,
                            c,
                            t,
                            $w,
                            x,
                            xc,
                            trash,
                            &mut self.packed
                        )),
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
        });
        self.fold_packed();
        true
    }

    /// One pass over up to four `u8` code columns (and the weight) with no
    /// intermediate cell-index array: the common survey crosstab.
    pub(crate) fn fused(
        &mut self,
        p: &Plan,
        data: &[ColumnData<'_>],
        r: std::ops::Range<usize>,
    ) -> bool {
        // Measured (instructions, 1 M-row census, bench/shapes.py's
        // filters): gathering pays up to about a quarter passing (IND list
        // −36%, OCC range −16%); at half it cost 7% more than one more code
        // column in the kernel.
        self.with_gathered(p, data, r, 2, |acc, d, r, filtered, sel| {
            acc.fused_with(p, d, r, filtered, sel)
        })
    }

    /// [`fused`](Self::fused) over rows `r` of `data`, the filters as
    /// `filtered` says.
    pub(crate) fn fused_with(
        &mut self,
        p: &Plan,
        data: &[ColumnData<'_>],
        r: std::ops::Range<usize>,
        filtered: Filtered,
        sel: &[u8],
    ) -> bool {
        let nd = p.dims.len() + p.filters.len();
        let Some((lead, cols, tabs)) = code_columns(p, data, r.clone(), filtered, sel) else {
            return false;
        };
        let trash = p.cells as u32;
        let w = p.weight.as_ref().map(|(c, _)| (c.var().kind, data[nd]));
        // Packed lanes measured 9–18% faster with up to three code columns
        // (Q1–Q3) and 6% slower with four.
        if p.pack_weights && cols.len() < 3 {
            if let Some((_, d)) = w {
                return self.fused_packed(lead, cols, tabs, d, r, trash);
            }
        }
        as_arrays!(cols, tabs, [0, 1, 2, 3], |c, t| {
            macro_rules! k {
                ($t_:ty, $int:literal, $w:expr) => {
                    with_lead!(lead, |l| fused_kernel::<_, _, $t_, $int>(
                        l,
                        c,
                        t,
                        $w,
                        trash,
                        &mut self.counts,
                        &mut self.wsum_int,
                        &mut self.wsum,
                    ))
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
        });
        true
    }

    /// [`fused_kernel_packed`] over one morsel, then its packed cells
    /// folded into the counts and integer weight sums.
    pub(crate) fn fused_packed(
        &mut self,
        lead: LeadCol<'_>,
        cols: Vec<&[u8]>,
        tabs: Vec<&[u32; 256]>,
        w: ColumnData<'_>,
        r: std::ops::Range<usize>,
        trash: u32,
    ) -> bool {
        let n = self.counts.len();
        self.packed_w.clear();
        self.packed_w.resize(n, 0);
        as_arrays!(cols, tabs, [0, 1, 2], |c, t| {
            macro_rules! k {
                ($v:expr) => {
                    with_lead!(lead, |l| fused_kernel_packed(
                        l,
                        c,
                        t,
                        &$v[r],
                        trash,
                        &mut self.packed_w
                    ))
                };
            }
            match w {
                ColumnData::U8(v) => k!(v),
                ColumnData::U16(v) => k!(v),
                ColumnData::U32(v) => k!(v),
                ColumnData::I32(v) => k!(v),
                _ => return false,
            }
        });
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

    /// Records counted in cell `c`.
    pub(crate) fn count(&self, p: &Plan, c: usize) -> u64 {
        if p.exact {
            self.exact_cell(c).n
        } else {
            self.counts[c * LANES..(c + 1) * LANES].iter().sum()
        }
    }

    /// The exact sums of cell `c` (exact plans).
    pub(crate) fn exact_cell(&self, c: usize) -> ExactCell {
        let mut e = ExactCell::default();
        for x in &self.exact[c * XLANES..(c + 1) * XLANES] {
            e.add(x);
        }
        e
    }

    /// Sum of weights in cell `c` (stored units; non-exact plans).
    pub(crate) fn wsum(&self, c: usize) -> f64 {
        let l = c * LANES..(c + 1) * LANES;
        self.wsum[l.clone()].iter().sum::<f64>() + self.wsum_int[l].iter().sum::<i64>() as f64
    }

    pub(crate) fn merge(mut self, o: Acc) -> Acc {
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
        for (a, b) in self.sup.iter_mut().zip(&o.sup) {
            a.merge(b);
        }
        self.reps.merge(&o.reps);
        if let (Some(a), Some(b)) = (self.taylor.as_mut(), o.taylor) {
            a.merge(b);
        }
        if let (Some(a), Some(b)) = (self.dist.as_mut(), o.dist) {
            a.merge(b);
        }
        self
    }
}
