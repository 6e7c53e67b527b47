//! Which categories a scan's result keeps: the planned cells of a query
//! compacted to those some counted row has (shared by the cube, the
//! partial results, the Taylor sums and the distributions).

use crate::plan::DimPlan;
use crate::value::Category;
use microtab_store::Variable;

/// One dimension of a result cube.
#[derive(Debug, Clone)]
pub struct Dim {
    /// The grouping variable.
    pub var: Variable,
    /// Its categories that occur (after filters), in order.
    pub categories: Vec<Category>,
}

/// Which categories a scan's result keeps (those some counted row has) and
/// where each dense cell of the plan goes in the compacted cube.
pub(crate) struct Layout {
    /// Categories per dimension in the plan (at least 1).
    shape: Vec<usize>,
    /// Per dimension, whether each planned category is kept.
    pub(crate) keep: Vec<Vec<bool>>,
    /// Per dimension, each planned category's index among the kept ones.
    new_index: Vec<Vec<Option<usize>>>,
    /// Kept categories per dimension.
    new_shape: Vec<usize>,
    /// Cells of the compacted cube.
    pub(crate) total: usize,
}

impl Layout {
    /// The layout of `plans` given each planned cell's count.
    pub(crate) fn new(plans: &[DimPlan], cells: usize, count: impl Fn(usize) -> u64) -> Layout {
        let shape: Vec<usize> = plans.iter().map(|p| p.categories.len().max(1)).collect();
        let mut keep: Vec<Vec<bool>> = shape.iter().map(|&k| vec![false; k]).collect();
        for c in 0..cells {
            if count(c) == 0 {
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
                        j += b as usize;
                        b.then(|| j - 1)
                    })
                    .collect()
            })
            .collect();
        let new_shape: Vec<usize> = keep
            .iter()
            .map(|k| k.iter().filter(|&&b| b).count())
            .collect();
        let total = if plans.is_empty() {
            1
        } else {
            new_shape.iter().product()
        };
        Layout {
            shape,
            keep,
            new_index,
            new_shape,
            total,
        }
    }

    /// The compacted cell of planned cell `c` (which must have rows).
    pub(crate) fn dst(&self, c: usize) -> usize {
        let mut r = c;
        let mut dst = 0;
        let mut mult = 1;
        for d in (0..self.shape.len()).rev() {
            let i = self.new_index[d][r % self.shape[d]].expect("kept");
            dst += i * mult;
            mult *= self.new_shape[d];
            r /= self.shape[d];
        }
        dst
    }

    /// Kept categories per dimension.
    pub(crate) fn new_shape(&self) -> &[usize] {
        &self.new_shape
    }

    /// The kept categories of each dimension.
    pub(crate) fn dims(&self, plans: Vec<DimPlan>) -> Vec<Dim> {
        plans
            .into_iter()
            .zip(&self.keep)
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
            .collect()
    }
}

/// The index along each dimension of cell `c` of a row-major table of
/// `shape` (the last dimension fastest).
pub fn unravel(c: usize, shape: &[usize]) -> Vec<usize> {
    let mut idx = vec![0; shape.len()];
    let mut r = c;
    for d in (0..shape.len()).rev() {
        idx[d] = r % shape[d];
        r /= shape[d];
    }
    idx
}
