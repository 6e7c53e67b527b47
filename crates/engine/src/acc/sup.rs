//! The exact float kernel ([`Kernel::ExactFloats`](crate::physical::Kernel)):
//! weights and moments row by row into exact sums.

use super::index::Rows;
use super::morsel::{what, Morsel};
use super::tally::Tally;
use crate::core::alloc::filled;
use crate::core::{Result, LANES};
use crate::exact::SupCell;

pub(crate) struct ExactFloatSums {
    /// Per cell (the trash cell last).
    pub(crate) sup: Vec<SupCell>,
}

impl ExactFloatSums {
    pub(crate) fn new(cells: usize) -> Result<ExactFloatSums> {
        Ok(ExactFloatSums {
            sup: filled(cells + 1, SupCell::default(), what("exact sums", cells))?,
        })
    }

    /// Rows `r` summed into their cells ([`Rows::index`]), the record
    /// counts into lane 0 of `t`.
    pub(crate) fn morsel(&mut self, m: &Morsel<'_, '_>, t: &mut Tally, rows: &mut Rows) {
        let p = m.p;
        rows.load_f64(m, true);
        let trash = p.cells as u32;
        let (w, x) = (p.weight.is_some(), p.measure.is_some());
        for (j, &i) in rows.idx.iter().enumerate() {
            if i >= trash {
                continue;
            }
            t.counts[i as usize * LANES] += 1;
            self.sup[i as usize].add(if w { rows.wbuf[j] } else { 1.0 }, x.then(|| rows.xbuf[j]));
        }
    }

    pub(crate) fn merge(&mut self, o: &ExactFloatSums) {
        for (a, b) in self.sup.iter_mut().zip(&o.sup) {
            a.merge(b);
        }
    }
}
