//! The result of a query: a dense cube of counts, weight sums and moments,
//! and the reshaping of a scan's accumulator into it.

use crate::acc::{Acc, ExactCell};
use crate::kernels::{LANES, XLANES};
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
            self.mean += delta * o.w / w;
            self.m2 += o.m2 + delta * delta * self.w * o.w / w;
        }
        self.w = w;
        self.n += o.n;
    }

    /// Frequency-weight standard deviation `sqrt(m2 / (w - 1))`.
    pub fn sd(&self) -> Option<f64> {
        (self.w > 1.0).then(|| (self.m2 / (self.w - 1.0)).max(0.0).sqrt())
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

/// Drops categories that no counted row has and scales sums to displayed units.
pub(crate) fn compact(
    plans: Vec<DimPlan>,
    acc: Acc,
    plan: &Plan,
    weight: Option<&Column>,
    measure: Option<&Column>,
) -> Cube {
    let shape: Vec<usize> = plans.iter().map(|p| p.categories.len().max(1)).collect();
    let n = plan.cells;
    // Marginal counts per dimension.
    let mut keep: Vec<Vec<bool>> = shape.iter().map(|&k| vec![false; k]).collect();
    let exact_of = |c: usize| {
        let mut e = ExactCell::default();
        for x in &acc.exact[c * XLANES..(c + 1) * XLANES] {
            e.add(x);
        }
        e
    };
    let counts_of = |c: usize| {
        if plan.exact {
            exact_of(c).n
        } else {
            acc.counts[c * LANES..(c + 1) * LANES].iter().sum()
        }
    };
    let wsum_of = |c: usize| -> f64 {
        let l = c * LANES..(c + 1) * LANES;
        acc.wsum[l.clone()].iter().sum::<f64>() + acc.wsum_int[l].iter().sum::<i64>() as f64
    };
    for c in 0..n {
        if counts_of(c) == 0 {
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
                    if b {
                        j += 1;
                        Some(j - 1)
                    } else {
                        None
                    }
                })
                .collect()
        })
        .collect();
    let new_shape: Vec<usize> = keep
        .iter()
        .map(|k| k.iter().filter(|&&b| b).count())
        .collect();
    let total: usize = if plans.is_empty() {
        1
    } else {
        new_shape.iter().product()
    };
    let wscale = weight.map(|c| c.var().scale()).unwrap_or(1.0);
    let xscale = measure.map(|c| c.var().scale()).unwrap_or(1.0);
    let mut counts = vec![0u64; total];
    let mut weighted = weight.map(|_| vec![0.0; total]);
    let mut moments = measure.map(|_| vec![Moments::default(); total]);
    for c in 0..n {
        if counts_of(c) == 0 {
            continue;
        }
        let mut r = c;
        let mut dst = 0;
        let mut mult = 1;
        for d in (0..shape.len()).rev() {
            let i = new_index[d][r % shape[d]].expect("kept");
            dst += i * mult;
            mult *= new_shape[d];
            r /= shape[d];
        }
        counts[dst] = counts_of(c);
        if let Some(w) = weighted.as_mut() {
            // Exact means keep Σw in their exact cells only.
            w[dst] = if plan.exact {
                exact_of(c).w as f64
            } else {
                wsum_of(c)
            } / wscale;
        }
        if let Some(m) = moments.as_mut() {
            let a = if plan.exact {
                exact_of(c).moments()
            } else {
                acc.moments[c]
            };
            m[dst] = Moments {
                n: a.n,
                w: a.w / wscale,
                mean: a.mean / xscale,
                m2: a.m2 / (xscale * xscale) / wscale,
            };
        }
    }
    let dims = plans
        .into_iter()
        .zip(&keep)
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
        .collect();
    Cube {
        dims,
        counts,
        weighted,
        moments,
    }
}
