//! The moments kernel ([`Kernel::Moments`](crate::physical::Kernel)): the
//! analysis variable's weighted moments per cell in `f64`.

use super::index::Rows;
use super::morsel::{what, Morsel};
use super::tally::Tally;
use crate::core::alloc::zeroed;
use crate::core::{Moments, Result, LANES};

pub(crate) struct FloatMoments {
    /// Per cell (the trash cell last).
    pub(crate) moments: Vec<Moments>,
    /// Per-morsel moment sums: n, Σw, Σw(x−k), Σw(x−k)², and the shift k.
    local: Vec<[f64; 5]>,
}

impl FloatMoments {
    pub(crate) fn new(cells: usize) -> Result<FloatMoments> {
        Ok(FloatMoments {
            moments: zeroed(cells + 1, what("moments", cells))?,
            local: zeroed(cells + 1, what("moment sums", cells))?,
        })
    }

    /// Rows `r` summed into their cells ([`Rows::index`]), the record
    /// counts and weight sums into lane 0 of `t`.
    ///
    /// Each cell's values are shifted by a value near its mean (the
    /// running mean, or the cell's first value in the morsel) so the sums
    /// of squares do not cancel, then folded into the running moments.
    /// (One shift for all cells lost small values beside large ones: 5
    /// beside 2^60 became 0.)
    pub(crate) fn morsel(&mut self, m: &Morsel<'_, '_>, t: &mut Tally, rows: &mut Rows) {
        let p = m.p;
        rows.load_f64(m, true);
        let trash = p.cells as u32;
        let weighted = p.weight.is_some();
        for (j, &i) in rows.idx.iter().enumerate() {
            let c = i.min(trash) as usize;
            let w = if weighted { rows.wbuf[j] } else { 1.0 };
            let x = rows.xbuf[j];
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
            t.counts[c * LANES] += l[0] as u64;
            if weighted {
                t.wsum[c * LANES] += l[1];
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

    pub(crate) fn merge(&mut self, o: &FloatMoments) {
        for (a, b) in self.moments.iter_mut().zip(&o.moments) {
            a.merge(b);
        }
    }
}
