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
    /// The layout of `plans` given each planned cell's count (`counts`,
    /// one a planned cell, row-major: the last dimension fastest).
    pub(crate) fn new(plans: &[DimPlan], counts: &[u64]) -> Layout {
        Layout::of_shape(
            plans.iter().map(|p| p.categories.len().max(1)).collect(),
            counts,
        )
    }

    /// The layout of a table of categories per dimension `shape` given
    /// each planned cell's count.
    fn of_shape(shape: Vec<usize>, counts: &[u64]) -> Layout {
        let mut keep: Vec<Vec<bool>> = shape.iter().map(|&k| vec![false; k]).collect();
        let outer = shape.len().saturating_sub(1);
        // One pass over the counts, a row of the last dimension at a time
        // (a wide cross has millions of cells: no division a cell).
        each_row(&shape, counts.len(), |row, idx| {
            let mut any = false;
            if let Some(last) = keep.last_mut() {
                for (k, &n) in last.iter_mut().zip(&counts[row]) {
                    *k |= n != 0;
                    any |= n != 0;
                }
            } else {
                any = counts[row].iter().any(|&n| n != 0);
            }
            if any {
                for (d, &i) in idx.iter().enumerate().take(outer) {
                    keep[d][i] = true;
                }
            }
        });
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
        let total = if shape.is_empty() {
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

    /// Whether every planned category is kept (planned cell `c` is then
    /// compacted cell `c`).
    pub(crate) fn is_identity(&self) -> bool {
        self.shape == self.new_shape
    }

    /// Compacts `v`, one value a planned cell (row-major), to the kept
    /// cells in place: their values in compacted order, the others dropped.
    /// A compacted cell never lies after its planned cell, so one pass in
    /// order moves each value once (whole rows where the last dimension
    /// keeps every category).
    pub(crate) fn compact_in_place<T: Copy>(&self, v: &mut Vec<T>) {
        let outer = self.shape.len().saturating_sub(1);
        // The runs of kept categories of the last dimension, as ranges of
        // a row (the whole row without dimensions).
        let runs: Vec<std::ops::Range<usize>> = match self.keep.last() {
            None => std::iter::once(0..v.len()).collect(),
            Some(k) => {
                let mut runs = Vec::new();
                let mut j = 0;
                while j < k.len() {
                    if k[j] {
                        let s = j;
                        while j < k.len() && k[j] {
                            j += 1;
                        }
                        runs.push(s..j);
                    } else {
                        j += 1;
                    }
                }
                runs
            }
        };
        let mut out = 0;
        each_row(&self.shape, v.len(), |row, idx| {
            if (0..outer).any(|d| !self.keep[d][idx[d]]) {
                return;
            }
            for run in &runs {
                v.copy_within(row.start + run.start..row.start + run.end, out);
                out += run.len();
            }
        });
        v.truncate(out);
        debug_assert!(v.is_empty() || out == self.total);
    }

    /// Calls `f(c, dst)` for each planned cell `c` that has rows (a
    /// non-zero count in `counts`, the counts this layout was made
    /// from), in order, with its compacted cell `dst`: [`dst`](Self::dst)
    /// for every such cell, computed a row at a time.
    pub(crate) fn each_kept(&self, counts: &[u64], mut f: impl FnMut(usize, usize)) {
        let outer = self.shape.len().saturating_sub(1);
        let inner_new = if self.shape.is_empty() {
            1
        } else {
            self.new_shape[outer]
        };
        // The last dimension's new indices (none without dimensions: 0).
        let last = self.new_index.get(outer);
        each_row(&self.shape, counts.len(), |row, idx| {
            // A row whose outer categories are not all kept has no rows.
            let mut base = 0;
            for (d, &i) in idx.iter().enumerate().take(outer) {
                match self.new_index[d][i] {
                    Some(j) => base = base * self.new_shape[d] + j,
                    None => return,
                }
            }
            let base = base * inner_new;
            let start = row.start;
            for (j, &n) in counts[row].iter().enumerate() {
                if n != 0 {
                    let k = last.map_or(Some(0), |x| x[j]);
                    f(start + j, base + k.expect("a counted category is kept"));
                }
            }
        });
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

/// Calls `f(cells, index)` for each row of the last dimension of a
/// row-major table of `shape` (`cells` planned cells in all), with the
/// row's range of cells and the index of each dimension (the last's 0).
/// No dimensions: one row of `cells` cells.
fn each_row(shape: &[usize], cells: usize, mut f: impl FnMut(std::ops::Range<usize>, &[usize])) {
    if cells == 0 {
        return;
    }
    let Some((&inner, outer)) = shape.split_last() else {
        return f(0..cells, &[]);
    };
    debug_assert_eq!(shape.iter().product::<usize>(), cells);
    let mut idx = vec![0; shape.len()];
    for start in (0..cells).step_by(inner) {
        f(start..start + inner, &idx);
        for d in (0..outer.len()).rev() {
            idx[d] += 1;
            if idx[d] < outer[d] {
                break;
            }
            idx[d] = 0;
        }
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

#[cfg(test)]
mod tests {
    use super::*;

    /// Every kept cell with its compacted cell, by `each_kept`.
    fn kept(l: &Layout, counts: &[u64]) -> Vec<(usize, usize)> {
        let mut v = Vec::new();
        l.each_kept(counts, |c, dst| v.push((c, dst)));
        v
    }

    #[test]
    fn a_cross_drops_the_categories_no_row_has() {
        // 3 × 4, row 1 and column 2 empty:
        //   5 0 0 1
        //   0 0 0 0
        //   0 7 0 2
        let counts = [5, 0, 0, 1, 0, 0, 0, 0, 0, 7, 0, 2];
        let l = Layout::of_shape(vec![3, 4], &counts);
        assert_eq!(l.new_shape(), &[2, 3]);
        assert_eq!(l.total, 6);
        assert!(!l.is_identity());
        // Compacted: 5 0 1 / 0 7 2.
        assert_eq!(kept(&l, &counts), vec![(0, 0), (3, 2), (9, 4), (11, 5)]);
        for (c, dst) in kept(&l, &counts) {
            assert_eq!(l.dst(c), dst);
        }
        let mut v = counts.to_vec();
        l.compact_in_place(&mut v);
        assert_eq!(v, vec![5, 0, 1, 0, 7, 2]);
    }

    #[test]
    fn three_dimensions_and_a_full_last_one() {
        // 2 × 2 × 3: the first layer empty, the second's row 0 empty; the
        // last dimension keeps all three.
        let counts = [0, 0, 0, 0, 0, 0, 0, 0, 0, 4, 0, 6];
        let l = Layout::of_shape(vec![2, 2, 3], &counts);
        assert_eq!(l.new_shape(), &[1, 1, 2]);
        let l3 = Layout::of_shape(vec![2, 2, 3], &[0, 0, 0, 0, 0, 0, 0, 1, 0, 4, 0, 6]);
        assert_eq!(l3.new_shape(), &[1, 2, 3]);
        let mut v = vec![0, 0, 0, 0, 0, 0, 0, 1, 0, 4, 0, 6];
        l3.compact_in_place(&mut v);
        assert_eq!(v, vec![0, 1, 0, 4, 0, 6]);
        assert_eq!(
            kept(&l3, &[0, 0, 0, 0, 0, 0, 0, 1, 0, 4, 0, 6]),
            vec![(7, 1), (9, 3), (11, 5)]
        );
        let mut v = counts.to_vec();
        l.compact_in_place(&mut v);
        assert_eq!(v, vec![4, 6]);
    }

    #[test]
    fn no_rows_and_no_dimensions() {
        let l = Layout::of_shape(vec![2, 3], &[0; 6]);
        assert_eq!(l.total, 0);
        let mut v = vec![0u64; 6];
        l.compact_in_place(&mut v);
        assert!(v.is_empty());
        let all = Layout::of_shape(vec![2, 3], &[1; 6]);
        assert!(all.is_identity());
        // A table of no dimensions is one cell.
        let one = Layout::of_shape(vec![], &[3]);
        assert_eq!((one.total, one.is_identity()), (1, true));
        assert_eq!(kept(&one, &[3]), vec![(0, 0)]);
    }
}
