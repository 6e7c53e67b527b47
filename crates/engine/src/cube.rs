//! The result of a query: a dense cube of counts, weight sums and moments,
//! and the reshaping of a scan's accumulator into it.

use crate::acc::Acc;
use crate::exact::exact_moments;
use crate::partial::{rep_partial, sum_decimals};
use crate::physical::Plan;
use crate::plan::DimPlan;
use crate::value::Category;
use microtab_store::{Column, Variable};

/// Weighted moments of the analysis variable in one cell.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Moments {
    /// Records.
    pub n: u64,
    /// Sum of weights (records when unweighted).
    pub w: f64,
    /// Weighted mean.
    pub mean: f64,
    /// Sum of weighted squared deviations from the mean.
    pub m2: f64,
}

// SAFETY: an integer and floats; all-zero bytes are `Moments::default()`.
unsafe impl crate::alloc::Zeroable for Moments {}

impl Moments {
    /// Combines two partial results (Chan et al.).
    pub fn merge(&mut self, o: &Moments) {
        if o.w == 0.0 && o.n == 0 {
            return;
        }
        if self.w == 0.0 && self.n == 0 {
            *self = *o;
            return;
        }
        let w = self.w + o.w;
        let delta = o.mean - self.mean;
        if w != 0.0 {
            // The share o.w / w first: products of weights and values at
            // extreme magnitudes (1e±300) would overflow or underflow.
            let share = o.w / w;
            self.mean += delta * share;
            self.m2 += o.m2 + delta * delta * (self.w * share);
        }
        self.w = w;
        self.n += o.n;
    }

    /// From stored units to displayed ones (dividing by the weight's and
    /// the analysis variable's `10^decimals`).
    pub(crate) fn scaled(&self, wscale: f64, xscale: f64) -> Moments {
        Moments {
            n: self.n,
            w: self.w / wscale,
            mean: self.mean / xscale,
            m2: self.m2 / (xscale * xscale) / wscale,
        }
    }

    /// Frequency-weight standard deviation `sqrt(m2 / (w - 1))`; `None`
    /// when `w ≤ 1`, or when `m2` is beyond the `f64` range (weights and
    /// values of extreme magnitude).
    pub fn sd(&self) -> Option<f64> {
        (self.w > 1.0 && self.m2.is_finite()).then(|| (self.m2 / (self.w - 1.0)).max(0.0).sqrt())
    }
}

/// One dimension of a result cube.
#[derive(Debug, Clone)]
pub struct Dim {
    /// The grouping variable.
    pub var: Variable,
    /// Its categories that occur (after filters), in order.
    pub categories: Vec<Category>,
}

/// The result of a query: a dense cube, first dimension outermost.
#[derive(Debug, Clone)]
pub struct Cube {
    /// Grouping dimensions.
    pub dims: Vec<Dim>,
    /// Records per cell.
    pub counts: Vec<u64>,
    /// Sum of weights per cell (with `Query::weight`).
    pub weighted: Option<Vec<f64>>,
    /// Moments of the analysis variable per cell (with `Query::measure`).
    pub moments: Option<Vec<Moments>>,
    /// Replicate sums per cell (with `Query::replicates`).
    pub replicates: Option<RepCells>,
    /// Design covariances of the cells' totals (with `Query::taylor`).
    pub taylor: Option<crate::taylor::TaylorCells>,
    /// Each cell's weighted distribution of the analysis variable (with
    /// `Query::distribution`).
    pub distribution: Option<Vec<crate::quantile::Distribution>>,
}

/// The sums of each replicate weight per cell, in displayed units.
#[derive(Debug, Clone, PartialEq)]
pub struct RepCells {
    /// `w[r][cell]`: Σ w_r over the cell's rows.
    pub w: Vec<Vec<f64>>,
    /// `wx[r][cell]`: Σ w_r·x over the cell's rows (with a measure).
    pub wx: Option<Vec<Vec<f64>>>,
}

impl Cube {
    /// Number of categories per dimension.
    pub fn shape(&self) -> Vec<usize> {
        self.dims.iter().map(|d| d.categories.len()).collect()
    }

    /// Cell index of a category tuple.
    pub fn cell(&self, idx: &[usize]) -> usize {
        let mut c = 0;
        for (d, &i) in self.dims.iter().zip(idx) {
            c = c * d.categories.len() + i;
        }
        c
    }
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

/// Drops categories that no counted row has and scales sums to displayed units.
pub(crate) fn compact(
    plans: Vec<DimPlan>,
    mut acc: Acc,
    plan: &Plan,
    weight: Option<&Column>,
    measure: Option<&Column>,
) -> crate::Result<Cube> {
    use crate::alloc::zeroed;
    let n = plan.cells;
    let layout = Layout::new(&plans, n, |c| acc.count(plan, c));
    let total = layout.total;
    let wscale = weight.map(|c| c.var().scale()).unwrap_or(1.0);
    let xscale = measure.map(|c| c.var().scale()).unwrap_or(1.0);
    let (wdec, xdec) = (sum_decimals(weight), sum_decimals(measure));
    let what = || format!("the result table of {total} cells");
    let mut counts: Vec<u64> = zeroed(total, what)?;
    let mut weighted: Option<Vec<f64>> = weight.map(|_| zeroed(total, what)).transpose()?;
    let mut moments: Option<Vec<Moments>> = measure.map(|_| zeroed(total, what)).transpose()?;
    for c in 0..n {
        let count = acc.count(plan, c);
        if count == 0 {
            continue;
        }
        let dst = layout.dst(c);
        counts[dst] = count;
        if plan.exact_floats {
            // Exact sums (extreme float magnitudes): rounded once.
            let s = &acc.sup[c];
            let (w, mean, m2) = exact_moments(&s.w, &s.wx, &s.wxx, wdec, xdec);
            if let Some(ws) = weighted.as_mut() {
                ws[dst] = w;
            }
            if let Some(m) = moments.as_mut() {
                m[dst] = Moments {
                    n: count,
                    w,
                    mean,
                    m2,
                };
            }
            continue;
        }
        if let Some(w) = weighted.as_mut() {
            // Exact means keep Σw in their exact cells only.
            w[dst] = if plan.exact {
                acc.exact_cell(c).w as f64
            } else {
                acc.wsum(c)
            } / wscale;
        }
        if let Some(m) = moments.as_mut() {
            let a = if plan.exact {
                acc.exact_cell(c).moments()
            } else {
                acc.moments[c]
            };
            m[dst] = a.scaled(wscale, xscale);
        }
    }
    let replicates = rep_partial(&acc, plan, &layout, measure).map(|r| r.cells(measure.is_some()));
    let taylor = match (acc.taylor.take(), &plan.taylor) {
        (Some(t), Some(tp)) => {
            Some(t.finish(tp, &layout, |c| acc.count(plan, c) > 0, (wscale, xscale)))
        }
        _ => None,
    };
    let distribution = match (acc.dist.take(), measure) {
        (Some(d), Some(x)) => Some(d.finish(&layout, |c| acc.count(plan, c) > 0, wscale, x.var())),
        _ => None,
    };
    Ok(Cube {
        dims: layout.dims(plans),
        counts,
        weighted,
        moments,
        replicates,
        taylor,
        distribution,
    })
}
