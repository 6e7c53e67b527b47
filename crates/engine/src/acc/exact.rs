//! The exact kernels ([`Kernel::Exact`](crate::physical::Kernel),
//! `ExactMorsel`, and the fused means kernel's cells): integer weights and
//! analysis values summed exactly, so the result does not depend on how
//! rows were split among workers.

use super::index::Rows;
use super::morsel::{what, Morsel};
use crate::core::alloc::zeroed;
use crate::core::{ExactCell, MorselCell, Result, LANES, PACK_SHIFT, XLANES};
use crate::kernels::PackedCell;

/// Largest table whose exact sums keep [`XLANES`] lanes a cell (3 MiB a
/// worker); beyond it one lane a cell takes a quarter of the memory. Means
/// of AGE by CITIZEN and PUMA (14.4 K cells) took 35.0 ms in four lanes
/// and 34.8 ms in one; of INCTOT by STATEFIP and IND (compacted) 52 ms.
const ONE_LANE_CELLS: usize = 16 * 1024;

pub(crate) struct ExactSums {
    /// Per cell and lane (`cell * lanes + lane`, the trash cell last).
    cells: Vec<ExactCell>,
    /// Lanes a cell: [`XLANES`], or one for a table whose lanes would
    /// outgrow the L2 cache (more than [`ONE_LANE_CELLS`] cells).
    lanes: usize,
    /// One morsel's sums per cell lane (`ExactMorsel`).
    mloc: Vec<MorselCell>,
}

impl ExactSums {
    pub(crate) fn new(cells: usize) -> Result<ExactSums> {
        let lanes = if cells > ONE_LANE_CELLS { 1 } else { XLANES };
        Ok(ExactSums {
            lanes,
            cells: zeroed((cells + 1).saturating_mul(lanes), what("exact sums", cells))?,
            mloc: Vec::new(),
        })
    }

    /// Rows `r` summed into their cells ([`Rows::index`]); `per_morsel`:
    /// in 64-bit morsel cells first (few cells: only the square needs 128
    /// bits; folded once per morsel), else row by row into the exact cells.
    pub(crate) fn morsel(&mut self, m: &Morsel<'_, '_>, per_morsel: bool, rows: &mut Rows) {
        let p = m.p;
        rows.load_int(m);
        let trash = p.cells as u32;
        let weighted = p.weight.is_some();
        if per_morsel {
            self.morsel_cells(p.cells, weighted, rows);
            return;
        }
        let lanes = self.lanes;
        for (j, &i) in rows.idx.iter().enumerate() {
            let e = &mut self.cells[i.min(trash) as usize * lanes + (j & (lanes - 1))];
            let w = if weighted { rows.wint[j] } else { 1 };
            let x = rows.xint[j];
            // |w·x| < 2^62 is guaranteed by `exact_ok`; only the square needs i128.
            let wx = w.wrapping_mul(x);
            e.n += 1;
            e.w = e.w.wrapping_add(w);
            e.wx = e.wx.wrapping_add(wx as i128);
            e.wxx = e.wxx.wrapping_add((wx as i128).wrapping_mul(x as i128));
        }
    }

    /// The morsel summed in 64-bit cells, then folded into the exact
    /// cells. Exact, so identical from run to run.
    fn morsel_cells(&mut self, cells: usize, weighted: bool, rows: &Rows) {
        let trash = cells as u32;
        self.mloc.clear();
        self.mloc.resize((cells + 1) * LANES, MorselCell::default());
        // Locals, so the loop does not reload `self`'s vectors.
        let (mloc, idx, xs) = (&mut self.mloc[..], &rows.idx[..], &rows.xint[..]);
        let mut add = |j: usize, i: u32, w: i64, x: i64| {
            let m = &mut mloc[i.min(trash) as usize * LANES + (j & (LANES - 1))];
            let wx = w.wrapping_mul(x);
            m.n += 1;
            m.w = m.w.wrapping_add(w);
            m.wx = m.wx.wrapping_add(wx);
            m.wxx = m.wxx.wrapping_add((wx as i128).wrapping_mul(x as i128));
        };
        if weighted {
            let ws = &rows.wint[..idx.len()];
            for (j, ((&i, &w), &x)) in idx.iter().zip(ws).zip(&xs[..idx.len()]).enumerate() {
                add(j, i, w, x);
            }
        } else {
            for (j, (&i, &x)) in idx.iter().zip(&xs[..idx.len()]).enumerate() {
                add(j, i, 1, x);
            }
        }
        self.fold_morsel();
    }

    /// Folds the morsel cells into the exact cells.
    fn fold_morsel(&mut self) {
        for (k, m) in self.mloc.iter().enumerate() {
            if m.n == 0 {
                continue;
            }
            let e = &mut self.cells[(k / LANES) * self.lanes];
            e.n += m.n;
            e.w = e.w.wrapping_add(m.w);
            e.wx = e.wx.wrapping_add(m.wx as i128);
            e.wxx = e.wxx.wrapping_add(m.wxx);
        }
    }

    /// Folds the packed cells of the fused means kernel into the exact
    /// cells.
    pub(crate) fn fold_packed(&mut self, packed: &[PackedCell]) {
        for (k, m) in packed.iter().enumerate() {
            let n = m.nw >> PACK_SHIFT;
            if n == 0 {
                continue;
            }
            let e = &mut self.cells[(k / LANES) * self.lanes];
            e.n += n;
            e.w = e.w.wrapping_add((m.nw & ((1u64 << PACK_SHIFT) - 1)) as i64);
            e.wx = e.wx.wrapping_add(m.wx as i128);
            e.wxx = e.wxx.wrapping_add(m.wxx);
        }
    }

    /// The exact sums of cell `c`.
    pub(crate) fn cell(&self, c: usize) -> ExactCell {
        let mut e = ExactCell::default();
        for x in &self.cells[c * self.lanes..(c + 1) * self.lanes] {
            e.add(x);
        }
        e
    }

    pub(crate) fn merge(&mut self, o: &ExactSums) {
        for (a, b) in self.cells.iter_mut().zip(&o.cells) {
            a.add(b);
        }
    }
}
