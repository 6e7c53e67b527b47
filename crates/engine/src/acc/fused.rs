//! The fused kernels' morsels ([`Kernel::Fused`](crate::physical::Kernel),
//! [`Kernel::FusedMeans`](crate::physical::Kernel)): the filters as
//! [`gather`] makes them, the code columns through their tables, and the
//! kernel compiled for their number and the weight's type. A morsel whose
//! form the plan's kernel does not take ([`Fused::takes`]) is left to the
//! index kernel (the functions here return false).

use super::exact::ExactSums;
use super::gather::{as_arrays, code_columns, gather, with_lead, Codes, Gather, Gathered, LeadCol};
use super::morsel::Morsel;
use super::tally::Tally;
use crate::core::{LANES, PACK_SHIFT};
use crate::kernels::{fused_kernel, fused_kernel_packed, fused_means, int_slice, PackedCell};
use crate::physical::{Form, Fused, MeansFuse, Plan};
use microtab_store::{ColumnData, Kind};

/// Most rows (in eighths of a morsel) that may pass for the means kernel
/// to count gathered rows rather than read the selection column. Measured
/// with the compaction eight rows at a time (14.1 M census, `means INCTOT
/// --by EDUC --weight PERWT`, 2 cores, median of 5 × 5): a third passing
/// (AGE<=30) 17.8 ms at 2/8 against 13.2 gathered; half (SEX=2) 16.8
/// against 15.2 gathered; two thirds (AGE>30) 17.3 against 18.4 gathered.
const MEANS_GATHER: usize = 4;

/// As [`MEANS_GATHER`] for the counts kernel (`tab EDUC SEX|MARST
/// --weight PERWT`): a fifth passing 11.2 ms at 1/8 against 7.8
/// gathered; a third 10.9 against 9.3 gathered; half 11.8 against 11.4;
/// two thirds 11.3 against 13.9 gathered.
const COUNTS_GATHER: usize = 3;

/// The fused kernels' per-morsel buffers (reused from morsel to morsel).
#[derive(Default)]
pub(crate) struct Scratch {
    /// Rows of the morsel rejected by the filters (`Fused::selection`).
    sel: Vec<u8>,
    /// Gathered passing rows ([`gather`]).
    gather: Gather,
    /// Packed count and Σw per cell lane of the counts kernel.
    packed_w: Vec<u64>,
    /// Packed sums per cell lane of the means kernel, over the morsels
    /// since the last fold ([`MeansFuse::fold_every`], [`flush_means`]).
    packed: Vec<PackedCell>,
    /// Morsels added into `packed` since its last fold.
    pending: usize,
    /// Morsels left to count with the filter columns read by the kernel,
    /// without the selection first ([`Fused::gather_only`]): after a morsel
    /// where too many rows passed to gather, the next few are assumed
    /// alike, so a filter most rows pass costs its selection once in
    /// [`DENSE_SKIP`] + 1 morsels.
    dense: usize,
}

/// Morsels counted without the selection after one where too many rows
/// passed to gather them ([`Scratch::dense`]).
const DENSE_SKIP: usize = 7;

/// A morsel as a fused kernel reads it: the views by slot (the gathered
/// rows' copies, or the columns), the rows, and the code columns.
struct View<'v, 'd> {
    data: &'v [ColumnData<'d>],
    r: std::ops::Range<usize>,
    codes: Codes<'v>,
}

/// Runs `k` over the morsel as [`gather`] makes it (the passing rows
/// only, or all rows with the selection column or the filter columns),
/// when the plan's kernel takes that form; false when it does not.
fn with_gathered(
    s: &mut Scratch,
    m: &Morsel<'_, '_>,
    f: &Fused,
    max_pass_eighths: usize,
    k: impl FnOnce(&mut Scratch, View<'_, '_>) -> bool,
) -> bool {
    let (p, r) = (m.p, m.r.clone());
    if f.gather_only && s.dense > 0 {
        s.dense -= 1;
        return view(p, f, m.data, r, Form::Columns, &[], s, k);
    }
    let mut sel = std::mem::take(&mut s.sel);
    let mut g = std::mem::take(&mut s.gather);
    let done = match gather(p, f, m.data, r.clone(), &mut sel, &mut g, max_pass_eighths) {
        Gathered::No => false,
        Gathered::Empty => true,
        Gathered::Unfiltered => {
            if f.gather_only {
                s.dense = DENSE_SKIP;
            }
            view(p, f, m.data, r, Form::Columns, &sel, s, k)
        }
        Gathered::Selection => view(p, f, m.data, r, Form::Selection, &sel, s, k),
        Gathered::Rows(d, n) => view(p, f, &d, 0..n, Form::Gathered, &sel, s, k),
    };
    s.sel = sel;
    s.gather = g;
    done
}

/// Runs `k` over rows `r` of `data` in `form`, when the plan's kernel
/// takes that form.
#[allow(clippy::too_many_arguments)]
fn view(
    p: &Plan,
    f: &Fused,
    data: &[ColumnData<'_>],
    r: std::ops::Range<usize>,
    form: Form,
    sel: &[u8],
    s: &mut Scratch,
    k: impl FnOnce(&mut Scratch, View<'_, '_>) -> bool,
) -> bool {
    if !f.takes(form) {
        return false;
    }
    match code_columns(p, f, data, r.clone(), form, sel) {
        Some(codes) => k(s, View { data, r, codes }),
        None => false,
    }
}

/// One pass over up to four `u8` code columns (and the weight) with no
/// intermediate cell-index array: the common survey crosstab.
pub(crate) fn counts(s: &mut Scratch, t: &mut Tally, m: &Morsel<'_, '_>, f: &Fused) -> bool {
    with_gathered(s, m, f, COUNTS_GATHER, |s, v| {
        counts_with(s, t, m.p, f.pack, v)
    })
}

/// [`counts`] over a view of the morsel.
fn counts_with(s: &mut Scratch, t: &mut Tally, p: &Plan, pack: bool, v: View<'_, '_>) -> bool {
    let View { data, r, codes } = v;
    let (lead, cols, tabs) = codes;
    let trash = p.cells as u32;
    let w = p
        .weight
        .as_ref()
        .zip(p.slots.weight)
        .map(|((c, _), k)| (c.var().kind, data[k]));
    // Packed lanes measured 9–18% faster with up to three code columns
    // (Q1–Q3) and 6% slower with four.
    if pack && cols.len() < 3 {
        if let Some((_, d)) = w {
            return packed(s, t, (lead, cols, tabs), d, r, trash);
        }
    }
    as_arrays!(cols, tabs, [0, 1, 2, 3], |c, tb| {
        macro_rules! k {
            ($t_:ty, $int:literal, $w:expr) => {
                with_lead!(lead, |l| fused_kernel::<_, _, $t_, $int>(
                    l,
                    c,
                    tb,
                    $w,
                    trash,
                    &mut t.counts,
                    &mut t.wsum_int,
                    &mut t.wsum,
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
fn packed(
    s: &mut Scratch,
    t: &mut Tally,
    (lead, cols, tabs): Codes<'_>,
    w: ColumnData<'_>,
    r: std::ops::Range<usize>,
    trash: u32,
) -> bool {
    let n = t.counts.len();
    s.packed_w.clear();
    s.packed_w.resize(n, 0);
    as_arrays!(cols, tabs, [0, 1, 2], |c, tb| {
        macro_rules! k {
            ($v:expr) => {
                with_lead!(lead, |l| fused_kernel_packed(
                    l,
                    c,
                    tb,
                    &$v[r],
                    trash,
                    &mut s.packed_w
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
    for ((c, w), &p) in t
        .counts
        .iter_mut()
        .zip(t.wsum_int.iter_mut())
        .zip(&s.packed_w)
    {
        *c += p >> PACK_SHIFT;
        *w += (p & ((1u64 << PACK_SHIFT) - 1)) as i64;
    }
    true
}

/// Means over up to three `u8` code columns in one pass ([`fused_means`])
/// into the exact cells.
pub(crate) fn means(
    s: &mut Scratch,
    e: &mut ExactSums,
    m: &Morsel<'_, '_>,
    (f, mf): (&Fused, MeansFuse),
) -> bool {
    // The means kernel does more per row: gathering measured worth it
    // up to MEANS_GATHER eighths passing.
    with_gathered(s, m, f, MEANS_GATHER, |s, v| means_with(s, e, m.p, mf, v))
}

/// Folds the means kernel's packed sums still pending into the exact
/// cells (at the end of a worker's scan).
pub(crate) fn flush_means(s: &mut Scratch, e: &mut ExactSums) {
    if s.pending > 0 {
        e.fold_packed(&s.packed);
        s.packed.fill(PackedCell::default());
        s.pending = 0;
    }
}

/// [`means`] over a view of the morsel (`xc`: the analysis variable's
/// excluded codes).
fn means_with(
    s: &mut Scratch,
    e: &mut ExactSums,
    p: &Plan,
    mf: MeansFuse,
    v: View<'_, '_>,
) -> bool {
    let View { data, r, codes } = v;
    let (lead, cols, tabs) = codes;
    let trash = p.cells as u32;
    let xc = mf.xcodes;
    if s.packed.len() != (p.cells + 1) * LANES {
        flush_means(s, e);
        s.packed.clear();
        s.packed
            .resize((p.cells + 1) * LANES, PackedCell::default());
    }
    let wdata = p.slots.weight.map(|k| data[k]);
    let xdata = data[p.slots.measure.expect("a means kernel has a measure")];
    as_arrays!(cols, tabs, [0, 1, 2], |c, tb| {
        macro_rules! x {
            ($w:expr) => {
                int_slice!(
                    xdata,
                    r.clone(),
                    |x| with_lead!(lead, |l| fused_means(
                        l,
                        c,
                        tb,
                        $w,
                        x,
                        xc,
                        trash,
                        &mut s.packed
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
    s.pending += 1;
    if s.pending >= mf.fold_every {
        flush_means(s, e);
    }
    true
}
