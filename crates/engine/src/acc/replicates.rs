//! Replicate weights' sums per cell, following each row's cell index
//! ([`Rows::index`]; the planner turns the fused kernels off for
//! replicate designs).

use super::index::Rows;
use crate::core::alloc::zeroed;
use crate::core::Result;
use crate::kernels::{dispatch, replicate_floats, replicate_ints, RowOrder};
use crate::physical::{Plan, SumsKind};
use microtab_store::ColumnData;

/// Per replicate weight `r` and cell `c` (at `r · (cells + 1) + c`): `Σ
/// w_r` and, with an analysis variable, `Σ w_r·x` — in integers when the
/// replicate weights and the analysis variable are integers (exact, the
/// same whatever the order of the morsels), else in `f64`.
#[derive(Debug, Clone)]
pub(crate) enum RepSums {
    /// Exact integer sums, in stored units.
    Int { w: Vec<i64>, wx: Vec<i128> },
    /// Float sums, in stored units.
    Float { w: Vec<f64>, wx: Vec<f64> },
}

/// The replicate sums and a morsel's buffers.
pub(crate) struct Replicates {
    pub(crate) sums: RepSums,
    /// The morsel's counted rows grouped by cell ([`RowOrder`]), and the
    /// analysis values in that order.
    order: RowOrder,
    xi: Vec<i64>,
    xf: Vec<f64>,
}

impl Replicates {
    /// Zeroed sums for the plan's replicate weights (`None` without).
    pub(crate) fn new(p: &Plan) -> Result<Option<Self>> {
        if p.replicates.is_empty() {
            return Ok(None);
        }
        let n = (p.cells + 1).saturating_mul(p.replicates.len());
        let nx = if p.measure.is_some() { n } else { 0 };
        let (cells, reps) = (p.cells, p.replicates.len());
        let what =
            move || format!("the sums of {reps} replicate weights over a table of {cells} cells");
        let sums = match p.replicates_exact {
            true => RepSums::Int {
                w: zeroed(n, what)?,
                wx: zeroed(nx, what)?,
            },
            false => RepSums::Float {
                w: zeroed(n, what)?,
                wx: zeroed(nx, what)?,
            },
        };
        Ok(Some(Replicates {
            sums,
            order: RowOrder::default(),
            xi: Vec::new(),
            xf: Vec::new(),
        }))
    }

    /// Adds each replicate weight of rows `r` into its sums, by the cells
    /// and analysis values the kernel left in `rows`.
    pub(crate) fn morsel(
        &mut self,
        p: &Plan,
        rows: &Rows,
        data: &[ColumnData<'_>],
        r: std::ops::Range<usize>,
    ) {
        let n = p.cells + 1;
        let measured = p.measure.is_some();
        self.order.build(&rows.idx, p.cells as u32);
        // The analysis values in the order of the rows by cell.
        if measured {
            let order = self.order.order();
            self.xi.clear();
            self.xf.clear();
            match (&self.sums, p.kernel.sums() == SumsKind::Exact) {
                (RepSums::Int { .. }, _) => {
                    self.xi.extend(order.iter().map(|&j| rows.xint[j as usize]))
                }
                (_, true) => self
                    .xf
                    .extend(order.iter().map(|&j| rows.xint[j as usize] as f64)),
                (_, false) => self.xf.extend(order.iter().map(|&j| rows.xbuf[j as usize])),
            }
        }
        let o = &self.order;
        let reps: Vec<ColumnData<'_>> = p.slots.replicates.iter().map(|&k| data[k]).collect();
        match &mut self.sums {
            RepSums::Int { w, wx } => {
                let xs = measured.then_some(&self.xi[..]);
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
                let xs = measured.then_some(&self.xf[..]);
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

    pub(crate) fn merge(&mut self, o: &Replicates) {
        match (&mut self.sums, &o.sums) {
            (RepSums::Int { w, wx }, RepSums::Int { w: ow, wx: owx }) => {
                w.iter_mut().zip(ow).for_each(|(a, b)| *a += b);
                wx.iter_mut().zip(owx).for_each(|(a, b)| *a += b);
            }
            (RepSums::Float { w, wx }, RepSums::Float { w: ow, wx: owx }) => {
                w.iter_mut().zip(ow).for_each(|(a, b)| *a += b);
                wx.iter_mut().zip(owx).for_each(|(a, b)| *a += b);
            }
            _ => unreachable!("accumulators of one plan"),
        }
    }
}
