//! Counts and weight sums per cell lane: the state of the counts kernels
//! ([`Kernel::Counts`](crate::physical::Kernel) and the fused one), and
//! the counts beside the moments and exact float sums.

use super::index::Rows;
use super::morsel::{what, Morsel};
use crate::core::alloc::zeroed;
use crate::core::{Result, LANES};
use crate::kernels::{accumulate_counts, accumulate_weighted, dispatch};
use microtab_store::Kind;

/// Per cell and lane (`cell * LANES + lane`, the trash cell last).
pub(crate) struct Tally {
    pub(crate) counts: Vec<u64>,
    /// Float weight sums (and weights that may be missing).
    pub(crate) wsum: Vec<f64>,
    /// Integer weight sums (weights never missing, summed from the column).
    pub(crate) wsum_int: Vec<i64>,
}

impl Tally {
    /// Zeroed lanes for `cells` cells and the trash cell; weight sums
    /// when `weighted`.
    pub(crate) fn new(cells: usize, weighted: bool) -> Result<Tally> {
        let per_lane = (cells + 1).saturating_mul(LANES);
        let weights = if weighted { per_lane } else { 0 };
        Ok(Tally {
            counts: zeroed(per_lane, what("counts", cells))?,
            wsum: zeroed(weights, what("weight sums", cells))?,
            wsum_int: zeroed(weights, what("weight sums", cells))?,
        })
    }

    /// The counts kernel: rows `r` counted (and weighed) in the cells
    /// `rows` holds ([`Rows::index`]).
    pub(crate) fn morsel(&mut self, m: &Morsel<'_, '_>, rows: &mut Rows) {
        let (p, data, r) = (m.p, m.data, m.r.clone());
        let trash = p.cells as u32;
        match (&p.weight, p.slots.weight) {
            (Some((col, ex)), Some(k)) if ex.is_empty() => {
                // Weights that cannot be missing: add straight from the column.
                let (counts, wsum, wsum_int) =
                    (&mut self.counts, &mut self.wsum, &mut self.wsum_int);
                let idx = &rows.idx;
                if col.var().kind == Kind::Int {
                    dispatch!(data[k], r, |v| accumulate_weighted(
                        idx, v, trash, counts, wsum_int
                    ));
                } else {
                    dispatch!(data[k], r, |v| accumulate_weighted(
                        idx, v, trash, counts, wsum
                    ));
                }
            }
            (Some(_), _) => {
                rows.load_f64(m, true);
                accumulate_weighted(
                    &rows.idx,
                    &rows.wbuf,
                    trash,
                    &mut self.counts,
                    &mut self.wsum,
                );
            }
            (None, _) => accumulate_counts(&rows.idx, trash, &mut self.counts),
        }
    }

    /// Records counted in cell `c`.
    pub(crate) fn count(&self, c: usize) -> u64 {
        self.counts[c * LANES..(c + 1) * LANES].iter().sum()
    }

    /// Sum of weights in cell `c` (stored units).
    pub(crate) fn wsum(&self, c: usize) -> f64 {
        let l = c * LANES..(c + 1) * LANES;
        self.wsum[l.clone()].iter().sum::<f64>() + self.wsum_int[l].iter().sum::<i64>() as f64
    }

    pub(crate) fn merge(&mut self, o: &Tally) {
        for (a, b) in self.counts.iter_mut().zip(&o.counts) {
            *a += b;
        }
        for (a, b) in self.wsum.iter_mut().zip(&o.wsum) {
            *a += b;
        }
        for (a, b) in self.wsum_int.iter_mut().zip(&o.wsum_int) {
            *a += b;
        }
    }
}
