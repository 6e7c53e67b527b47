//! A worker's accumulator: the state of the query's kernel
//! ([`physical::Kernel`](crate::physical::Kernel)) and of each extra
//! per-cell sum, and the dispatch of each morsel to them.
//!
//! One module per kernel state: `tally` (counts and weight sums per cell
//! lane: the index and fused counts kernels), `moments` (the `f64`
//! moments kernel), `exact` (the exact kernels, fused means included),
//! `sup` (exact float sums); `index` builds a morsel's cell indexes and
//! loaded values, which the extra sums (`replicates`, and
//! [`TaylorAcc`], [`DistAcc`]) read after the kernel. A new per-cell sum
//! that follows the cell index (regression sums X'WX, say) is one more
//! field of [`Acc`], added in [`Acc::new`], [`Acc::morsel`] and
//! [`Acc::merge`], and finished in `finish` / `partial`.

mod exact;
mod fold;
mod fused;
mod gather;
mod index;
mod moments;
mod morsel;
mod replicates;
mod sup;
mod tally;

pub(crate) use exact::ExactSums;
pub(crate) use gather::{mark_filter, rejected};
pub(crate) use index::Rows;
pub(crate) use moments::FloatMoments;
pub(crate) use morsel::Morsel;
pub(crate) use replicates::{RepSums, Replicates};
pub(crate) use sup::ExactFloatSums;
pub(crate) use tally::Tally;

use crate::core::Result;
use crate::physical::{Kernel, Plan, Sieve, SumsKind};
use crate::quantile::DistAcc;
use crate::taylor::TaylorAcc;
use microtab_store::{ColumnData, Kind};

/// What a scan leaves to be finished (into a cube or a partial result):
/// the dimensions' plans, the workers' merged accumulator, the physical
/// plan, and the weight and analysis columns.
pub(crate) struct Scanned<'p, 'a> {
    pub(crate) plans: Vec<crate::plan::DimPlan>,
    pub(crate) acc: Acc,
    pub(crate) plan: &'p Plan<'a>,
    pub(crate) weight: Option<&'p microtab_store::Column>,
    pub(crate) measure: Option<&'p microtab_store::Column>,
}

/// The per-cell sums of a query's kernel.
pub(crate) enum CellSums {
    /// Counts and weight sums per cell lane ([`Kernel::Counts`],
    /// [`Kernel::Fused`]).
    Tally(Tally),
    /// Counts and weight sums, and the moments ([`Kernel::Moments`]).
    Moments(Tally, FloatMoments),
    /// Exact integer cells ([`Kernel::Exact`], [`Kernel::ExactMorsel`],
    /// [`Kernel::FusedMeans`]).
    Exact(ExactSums),
    /// Counts and exact float sums ([`Kernel::ExactFloats`]).
    ExactFloats(Tally, ExactFloatSums),
}

pub(crate) struct Acc {
    /// The kernel's sums.
    pub(crate) sums: CellSums,
    /// The morsel's cell index per row and the values loaded beside it.
    pub(crate) rows: Rows,
    /// The fused kernels' per-morsel buffers.
    pub(crate) fused: fused::Scratch,
    /// Replicate sums ([`Plan::replicates`]).
    pub(crate) reps: Option<Replicates>,
    /// Taylor linearization sums ([`Plan::taylor`]).
    pub(crate) taylor: Option<TaylorAcc>,
    /// Distributions of the measure ([`Plan::distribution`]).
    pub(crate) dist: Option<DistAcc>,
    /// The caller's fold ([`Plan::fold`]).
    fold_acc: Option<fold::FoldAcc>,
    /// The sieve's buffers ([`Acc::morsel_sieved`]).
    sieve: SieveScratch,
}

/// The buffers of [`Acc::morsel_sieved`] (reused from morsel to morsel).
#[derive(Default)]
struct SieveScratch {
    sel: Vec<u8>,
    gather: gather::Gather,
    /// Morsels left to count without the selection, after one where too
    /// many rows passed to gather (as the fused kernels' `Scratch`).
    dense: usize,
}

/// Most rows (in eighths of a morsel) that may pass for the index kernels
/// to count the gathered rows rather than the whole morsel: a rejected
/// row costs them as much as a counted one (its cell index, loaded
/// values and sums into the trash cell). Measured (14.1 M census, 2
/// cores, median of 5 × 5), `means INCTOT --by STATEFIP,IND --weight
/// PERWT` (the exact kernel): a third passing 54.9 ms whole against 33.9
/// gathered, half 57.1 against 40.7, two thirds 56.9 against 45.3, 87%
/// 49.2 against 54.6; `tab PUMA AGE --weight PERWT` (one lane a cell):
/// half 45.7 against 41.1.
const SIEVE_GATHER: usize = 6;

/// Morsels counted whole after one where too many rows passed to gather.
const SIEVE_DENSE_SKIP: usize = 7;

impl Acc {
    /// A worker's empty accumulator for `p`: its per-cell buffers are
    /// sized by the plan's cells, so they are allocated fallibly (a table
    /// too large for the memory there is is refused, not an abort).
    pub(crate) fn new(p: &Plan) -> Result<Self> {
        let weighted = p.weight.is_some();
        let sums = match p.kernel.sums() {
            SumsKind::Tally => {
                // The fused kernels add into four lanes a cell.
                let lanes = match p.kernel {
                    Kernel::Counts => Tally::lanes_for(p.cells),
                    _ => crate::core::LANES,
                };
                if lanes == 1 {
                    CellSums::Tally(Tally::deferred(p.cells, weighted)?)
                } else {
                    CellSums::Tally(Tally::new(p.cells, weighted, lanes)?)
                }
            }
            SumsKind::Moments => CellSums::Moments(
                Tally::new(p.cells, weighted, crate::core::LANES)?,
                FloatMoments::new(p.cells)?,
            ),
            SumsKind::Exact => CellSums::Exact(ExactSums::new(p.cells)?),
            SumsKind::ExactFloats => CellSums::ExactFloats(
                Tally::new(p.cells, false, crate::core::LANES)?,
                ExactFloatSums::new(p.cells)?,
            ),
        };
        Ok(Acc {
            sums,
            rows: Rows {
                // The Taylor domains count the records lacking the
                // analysis value: the kernel keeps their cells.
                pre: p
                    .taylor
                    .as_deref()
                    .is_some_and(|t| t.domains)
                    .then(|| Vec::with_capacity(crate::core::MORSEL)),
                ..Rows::default()
            },
            fused: fused::Scratch::default(),
            reps: Replicates::new(p)?,
            taylor: p.taylor.as_deref().map(TaylorAcc::new).transpose()?,
            dist: p
                .distribution
                .then(|| DistAcc::new(p.cells + 1))
                .transpose()?,
            fold_acc: p.fold.as_ref().map(fold::FoldAcc::new),
            sieve: SieveScratch::default(),
        })
    }

    /// [`morsel`](Self::morsel) through the sieve `sv` of `p`: the rows
    /// passing the filters gathered and counted by the plan without them,
    /// when few pass; every row by `p` otherwise.
    pub(crate) fn morsel_sieved(
        &mut self,
        p: &Plan,
        sv: &Sieve,
        data: &[ColumnData<'_>],
        r: std::ops::Range<usize>,
        base: usize,
    ) {
        self.sieve_with(p, sv, None, data, r, base);
    }

    /// [`morsel_sieved`](Self::morsel_sieved) with the filters already
    /// evaluated into `sel` (one byte a row of `r`, 0: the row passes).
    /// Whether `sel` served (the passing rows were gathered, or none
    /// passed) rather than `p` evaluating the filters again.
    pub(crate) fn morsel_selected(
        &mut self,
        p: &Plan,
        sv: &Sieve,
        sel: &[u8],
        data: &[ColumnData<'_>],
        r: std::ops::Range<usize>,
        base: usize,
    ) -> bool {
        self.sieve_with(p, sv, Some(sel), data, r, base)
    }

    fn sieve_with(
        &mut self,
        p: &Plan,
        sv: &Sieve,
        pre: Option<&[u8]>,
        data: &[ColumnData<'_>],
        r: std::ops::Range<usize>,
        base: usize,
    ) -> bool {
        if self.sieve.dense > 0 {
            self.sieve.dense -= 1;
            self.morsel(p, data, r, base);
            return false;
        }
        let mut sel = std::mem::take(&mut self.sieve.sel);
        let mut g = std::mem::take(&mut self.sieve.gather);
        let reads = &sv.reads;
        let got = match pre {
            Some(ps) => {
                gather::gather_selected(data, r.clone(), ps, &mut g, SIEVE_GATHER, |k| reads[k])
            }
            None => gather::gather_rows(
                p,
                &sv.kinds,
                data,
                r.clone(),
                &mut sel,
                &mut g,
                SIEVE_GATHER,
                |k| reads[k],
            ),
        };
        let served = match got {
            gather::Gathered::Rows(d, n) => {
                self.morsel(&sv.plan, &d, 0..n, base);
                true
            }
            gather::Gathered::Empty => true,
            gather::Gathered::Selection => {
                self.sieve.dense = SIEVE_DENSE_SKIP;
                self.morsel(p, data, r, base);
                false
            }
            _ => {
                self.morsel(p, data, r, base);
                false
            }
        };
        self.sieve.sel = sel;
        self.sieve.gather = g;
        served
    }

    /// Counts rows `r` of `data` (the views of the distinct columns, each
    /// role's at its slot, [`Plan::slots`]), `base` the dataset's row of
    /// `data`'s first.
    pub(crate) fn morsel(
        &mut self,
        p: &Plan,
        data: &[ColumnData<'_>],
        r: std::ops::Range<usize>,
        base: usize,
    ) {
        self.kernel(p, data, r.clone());
        let trash = p.cells as u32;
        let s = &p.slots;
        if let Some(reps) = self.reps.as_mut() {
            reps.morsel(p, &self.rows, data, r.clone());
        }
        if let (Some(tp), Some(t)) = (p.taylor.as_deref(), self.taylor.as_mut()) {
            let w = data[s.weight.expect("a Taylor design has a weight")];
            let x = s.measure.map(|k| data[k]);
            let (st, cl) = (s.strata.map(|k| data[k]), s.cluster.map(|k| data[k]));
            let pre = self.rows.pre.as_deref();
            let tm = s.times.map(|k| data[k]);
            t.morsel(
                tp,
                (&self.rows.idx, pre),
                trash,
                w,
                (x, tm),
                st,
                cl,
                r.clone(),
            );
        }
        if let (Some(d), Some((xc, _))) = (self.dist.as_mut(), p.measure.as_ref()) {
            let w = s.weight.map(|k| data[k]);
            let x = data[s.measure.expect("a distribution has a measure")];
            let float = xc.var().kind == Kind::Float;
            d.morsel(&self.rows.idx, trash, w, x, r.clone(), float);
        }
        if let (Some(fp), Some(f)) = (p.fold.as_ref(), self.fold_acc.as_mut()) {
            f.morsel(fp, &s.values, (&self.rows.idx, trash), data, r, base);
        }
    }

    /// Counts a morsel by the plan's kernel (the extra sums aside).
    fn kernel(&mut self, p: &Plan, data: &[ColumnData<'_>], r: std::ops::Range<usize>) {
        let m = Morsel { p, data, r };
        let rows = &mut self.rows;
        if let (false, CellSums::Tally(t)) = (matches!(p.kernel, Kernel::Counts), &mut self.sums) {
            // Only the counts kernel lists a deferred tally's rows.
            t.densify();
        }
        match (&p.kernel, &mut self.sums) {
            (Kernel::Fused(f), CellSums::Tally(t)) => {
                if !fused::counts(&mut self.fused, t, &m, f) {
                    t.morsel(&m, rows.index(&m));
                }
            }
            (Kernel::Counts, CellSums::Tally(t)) => t.morsel(&m, rows.index(&m)),
            (Kernel::Moments, CellSums::Moments(t, s)) => s.morsel(&m, t, rows.index(&m)),
            (Kernel::FusedMeans(f, mf), CellSums::Exact(e)) => {
                if !fused::means(&mut self.fused, e, &m, (f, *mf)) {
                    e.morsel(&m, true, rows.index(&m));
                }
            }
            (Kernel::Exact, CellSums::Exact(e)) => e.morsel(&m, false, rows.index(&m)),
            (Kernel::ExactMorsel, CellSums::Exact(e)) => e.morsel(&m, true, rows.index(&m)),
            (Kernel::ExactFloats, CellSums::ExactFloats(t, s)) => s.morsel(&m, t, rows.index(&m)),
            _ => unreachable!("an accumulator is made for its plan's kernel"),
        }
    }

    /// Each of the first `cells` cells' count, taken out of the
    /// accumulator where the kernel kept one lane a cell (a wide table's
    /// counts are not copied).
    pub(crate) fn take_counts(&mut self, cells: usize) -> Vec<u64> {
        match &mut self.sums {
            CellSums::Tally(t) | CellSums::Moments(t, _) | CellSums::ExactFloats(t, _) => {
                t.take_counts(cells)
            }
            CellSums::Exact(e) => (0..cells).map(|c| e.cell(c).n).collect(),
        }
    }

    /// Folds what a kernel still holds back into the sums (the fused
    /// means kernel's pending packed sums): once a worker's scan ends,
    /// before its sums are read or merged.
    pub(crate) fn flush(mut self) -> Acc {
        if let CellSums::Exact(e) = &mut self.sums {
            fused::flush_means(&mut self.fused, e);
        }
        self
    }

    pub(crate) fn merge(mut self, o: Acc) -> Acc {
        match (&mut self.sums, o.sums) {
            (CellSums::Tally(a), CellSums::Tally(b)) => a.merge(b),
            (CellSums::Moments(a, m), CellSums::Moments(b, n)) => {
                a.merge(b);
                m.merge(&n);
            }
            (CellSums::Exact(a), CellSums::Exact(b)) => a.merge(&b),
            (CellSums::ExactFloats(a, s), CellSums::ExactFloats(b, t)) => {
                a.merge(b);
                s.merge(&t);
            }
            _ => unreachable!("accumulators of one plan"),
        }
        if let (Some(a), Some(b)) = (self.reps.as_mut(), o.reps) {
            a.merge(&b);
        }
        if let (Some(a), Some(b)) = (self.taylor.as_mut(), o.taylor) {
            a.merge(b);
        }
        if let (Some(a), Some(b)) = (self.dist.as_mut(), o.dist) {
            a.merge(b);
        }
        if let (Some(a), Some(b)) = (self.fold_acc.as_mut(), o.fold_acc) {
            a.state.merge(b.state);
        }
        self
    }

    /// Whether the fold's state ends the scan ([`FoldState::stop`](crate::fold::FoldState::stop)).
    pub(crate) fn stopped(&self) -> bool {
        self.fold_acc.as_ref().is_some_and(|f| f.state.stop())
    }

    /// The fold's state, once the workers' accumulators are merged.
    pub(crate) fn take_fold(&mut self) -> Option<Box<dyn crate::fold::FoldState>> {
        self.fold_acc.take().map(|f| f.state)
    }
}
