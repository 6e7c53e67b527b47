//! Counts and weight sums per cell lane: the state of the counts kernels
//! ([`Kernel::Counts`](crate::physical::Kernel) and the fused one), and
//! the counts beside the moments and exact float sums.

use super::index::Rows;
use super::morsel::{what, Morsel};
use crate::core::alloc::zeroed;
use crate::core::{Result, BIG_TABLE_CELLS, LANES};
use crate::kernels::{accumulate_counts, accumulate_weighted, dispatch, Val, WeightSum};
use microtab_store::Kind;

/// Per cell and lane (`cell * lanes + lane`, the trash cell last).
pub(crate) struct Tally {
    /// Lanes per cell: [`LANES`], so that a run of rows in one cell adds
    /// into independent sums, or 1 for a table too large for the cache
    /// ([`Tally::lanes_for`]), where the lanes would only multiply the
    /// misses.
    lanes: usize,
    pub(crate) counts: Vec<u64>,
    /// Float weight sums (and weights that may be missing).
    pub(crate) wsum: Vec<f64>,
    /// Integer weight sums (weights never missing, summed from the column).
    pub(crate) wsum_int: Vec<i64>,
}

impl Tally {
    /// Lanes per cell for the counts kernel over `cells` cells: one when
    /// a worker's lanes would outgrow the L2 cache. PUMA by BPL (216 K
    /// cells once compacted, 14.1 M records) scanned in 57 ms with four
    /// lanes, 3.5 MB of one.
    pub(crate) fn lanes_for(cells: usize) -> usize {
        if cells > BIG_TABLE_CELLS {
            1
        } else {
            LANES
        }
    }

    /// Zeroed lanes (`lanes` a cell) for `cells` cells and the trash
    /// cell; weight sums when `weighted`.
    pub(crate) fn new(cells: usize, weighted: bool, lanes: usize) -> Result<Tally> {
        let per_lane = (cells + 1).saturating_mul(lanes);
        let weights = if weighted { per_lane } else { 0 };
        Ok(Tally {
            lanes,
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
        if self.lanes == 1 {
            return self.morsel_one_lane(m, rows);
        }
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

    /// [`morsel`](Self::morsel) into one lane a cell.
    fn morsel_one_lane(&mut self, m: &Morsel<'_, '_>, rows: &mut Rows) {
        let (p, data, r) = (m.p, m.data, m.r.clone());
        let trash = p.cells as u32;
        let idx = &rows.idx;
        match (&p.weight, p.slots.weight) {
            (Some((col, ex)), Some(k)) if ex.is_empty() => {
                let counts = &mut self.counts;
                if col.var().kind == Kind::Int {
                    let wsum = &mut self.wsum_int;
                    dispatch!(data[k], r, |v| accumulate_one_lane(
                        idx, v, trash, counts, wsum
                    ));
                } else {
                    let wsum = &mut self.wsum;
                    dispatch!(data[k], r, |v| accumulate_one_lane(
                        idx, v, trash, counts, wsum
                    ));
                }
            }
            (Some(_), _) => {
                rows.load_f64(m, true);
                accumulate_one_lane(
                    &rows.idx,
                    &rows.wbuf,
                    trash,
                    &mut self.counts,
                    &mut self.wsum,
                );
            }
            (None, _) => {
                for &i in idx {
                    self.counts[i.min(trash) as usize] += 1;
                }
            }
        }
    }

    /// The lanes of cell `c`.
    pub(crate) fn cell_lanes(&self, c: usize) -> std::ops::Range<usize> {
        c * self.lanes..(c + 1) * self.lanes
    }

    /// Records counted in cell `c`.
    pub(crate) fn count(&self, c: usize) -> u64 {
        self.counts[self.cell_lanes(c)].iter().sum()
    }

    /// Sum of weights in cell `c` (stored units).
    pub(crate) fn wsum(&self, c: usize) -> f64 {
        let l = self.cell_lanes(c);
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

/// Counts and weight sums of the rows of `idx` (cells `trash` and beyond
/// in the trash cell), one lane a cell.
fn accumulate_one_lane<T: Val, S: WeightSum>(
    idx: &[u32],
    w: &[T],
    trash: u32,
    counts: &mut [u64],
    wsum: &mut [S],
) {
    for (&i, &w) in idx.iter().zip(w) {
        let c = i.min(trash) as usize;
        counts[c] += 1;
        wsum[c] += S::of(w);
    }
}
