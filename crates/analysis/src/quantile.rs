//! Weighted quantiles by group, with Woodruff confidence intervals under
//! a survey design (R `svyquantile`, `qrule = "math"`, `interval.type =
//! "mean"`; docs/SURVEY.md).
//!
//! The point estimate is the smallest value whose cumulative weight share
//! reaches p. Its interval: the share m̂ of the weight at or below the
//! estimate, with its design SE (a ratio of two totals, like a
//! percentage, from a second scan that splits each group's records at its
//! own estimate), gives the interval m̂ ± t·SE for the share; its ends,
//! read back through the distribution, are the quantile's interval, and
//! SE = (U − L) / (2t).

use crate::survey::{ratio_variance, Survey, Uncertainty, Var};
use crate::{Error, Result};
use microtab_engine::{Cube, Distribution, Margin, Query, ScanOptions, Split};
use microtab_store::Dataset;
use serde::Serialize;
use std::collections::HashMap;

/// One quantile of a group.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Quantile {
    /// The probability (0.5: the median).
    pub p: f64,
    /// The weighted quantile (`None` without records of non-zero weight).
    pub value: Option<f64>,
    /// Its SE and Woodruff interval (with a design; `None` when an end of
    /// the share's interval leaves [0, 1]).
    pub se: Option<Uncertainty>,
}

/// R's `qrule_math`: the smallest value whose cumulative weight reaches
/// `p` of the total (records of weight 0 left out).
///
/// "Reaches" allows for rounding: a cumulative weight within
/// [`TIE`] of `p` of the total counts as reaching it, as it would in exact
/// arithmetic. Equal weights that are not binary fractions (0.1, or a
/// float weight such as 15.1000003814697) otherwise put a running sum one
/// ulp below half the total, and a constant weight changed the median
/// (R's `cumsum` accumulates in long double). The sums are compensated
/// (Neumaier), so their own error is a few ulps whatever the number of
/// values.
///
/// `None` when a weight is negative (`allow_negative_weights`): a share of
/// such a total is no probability, and the rule would answer the smallest
/// value.
pub(crate) fn qrule_math(d: &[(f64, f64)], p: f64) -> Option<f64> {
    if d.iter().any(|e| e.1 < 0.0) {
        return None;
    }
    let total = compensated(d.iter().map(|e| e.1));
    let target = p * total - TIE * total.abs();
    let mut cum = Neumaier::default();
    let mut last = None;
    for &(y, w) in d.iter().filter(|e| e.1 != 0.0) {
        cum.add(w);
        last = Some(y);
        if cum.sum() >= target {
            return Some(y);
        }
    }
    last
}

/// How far below `p` of the total a cumulative weight may fall and still
/// reach it (relative to the total): well above the rounding of sums of
/// millions of weights, far below any share two real values' weights
/// differ by.
pub(crate) const TIE: f64 = 1e-9;

/// Neumaier's compensated sum.
#[derive(Default)]
struct Neumaier {
    sum: f64,
    c: f64,
}

impl Neumaier {
    fn add(&mut self, x: f64) {
        let t = self.sum + x;
        if self.sum.abs() >= x.abs() {
            self.c += (self.sum - t) + x;
        } else {
            self.c += (x - t) + self.sum;
        }
        self.sum = t;
    }

    fn sum(&self) -> f64 {
        self.sum + self.c
    }
}

fn compensated(xs: impl Iterator<Item = f64>) -> f64 {
    let mut s = Neumaier::default();
    xs.for_each(|x| s.add(x));
    s.sum()
}

/// The distributions of several cells as one.
fn merged<'a>(ds: impl Iterator<Item = &'a Distribution>) -> Distribution {
    let mut all: Distribution = ds.flatten().copied().collect();
    all.sort_unstable_by(|a, b| a.0.total_cmp(&b.0));
    let mut out: Distribution = Vec::with_capacity(all.len());
    for (y, w) in all {
        match out.last_mut() {
            Some(l) if l.0 == y => l.1 += w,
            _ => out.push((y, w)),
        }
    }
    out
}

/// The quantiles of a means result: per cell (cube order) and over all
/// cells, each for every requested probability.
#[derive(Debug, Clone, Default)]
pub(crate) struct Quantiles {
    pub(crate) cells: Vec<Vec<Quantile>>,
    pub(crate) total: Vec<Quantile>,
}

/// The quantiles of `var` for `req` from the cube of its first scan
/// (`q`, with distributions), and under `survey` their Woodruff
/// intervals, each probability's from one more scan per grouping (the
/// groups, then all records).
pub(crate) fn quantiles(
    ds: &Dataset,
    opts: &ScanOptions,
    q: &Query,
    cube: &Cube,
    survey: Option<&Survey>,
    ps: &[f64],
) -> Result<Quantiles> {
    let Some(dists) = cube.distribution.as_ref() else {
        return Ok(Quantiles::default());
    };
    let all = merged(dists.iter());
    let mut out = Quantiles {
        cells: dists
            .iter()
            .map(|d| {
                ps.iter()
                    .map(|&p| Quantile {
                        p,
                        value: qrule_math(d, p),
                        se: None,
                    })
                    .collect()
            })
            .collect(),
        total: ps
            .iter()
            .map(|&p| Quantile {
                p,
                value: qrule_math(&all, p),
                se: None,
            })
            .collect(),
    };
    let Some(v) = survey else {
        return Ok(out);
    };
    let var = q.measure.clone().expect("quantiles of a measure");
    let counts: Vec<u64> = cube
        .moments
        .as_ref()
        .map_or(Vec::new(), |m| m.iter().map(|m| m.n).collect());
    let total_n: u64 = counts.iter().sum();
    for k in 0..ps.len() {
        // By group: each cell's records split at its own quantile.
        let thresholds: Vec<(Vec<String>, f64)> = (0..dists.len())
            .filter_map(|c| {
                let t = out.cells[c][k].value?;
                Some((categories(cube, c), t))
            })
            .collect();
        if !cube.dims.is_empty() {
            let shares = shares(ds, opts, q, &var, thresholds, v)?;
            for (c, dist) in dists.iter().enumerate() {
                let n = counts.get(c).copied().unwrap_or(0);
                let share = shares.get(&categories(cube, c)).copied().flatten();
                let est = &mut out.cells[c][k];
                est.se = share.and_then(|s| woodruff(v, dist, est.value?, s, n));
            }
        }
        // All records.
        if let Some(t) = out.total[k].value {
            let share = shares(ds, opts, q, &var, vec![(Vec::new(), t)], v)?
                .remove(&Vec::new())
                .flatten();
            out.total[k].se = share.and_then(|s| woodruff(v, &all, t, s, total_n));
        }
        if cube.dims.is_empty() {
            out.cells[0][k].se = out.total[k].se;
        }
    }
    Ok(out)
}

/// The displayed categories of cube cell `c`, outermost first.
fn categories(cube: &Cube, c: usize) -> Vec<String> {
    cube.index_of(c)
        .iter()
        .enumerate()
        .map(|(d, &i)| cube.dims[d].categories[i].display.clone())
        .collect()
}

/// Per group (by its categories' displayed values), the share of its
/// weight at or below its threshold and that share's variance.
type Shares = HashMap<Vec<String>, Option<(f64, Var)>>;

/// The share of each group's weight at or below its threshold, with its
/// variance under the design: `(m̂, v(m̂))` by the group's categories
/// (`thresholds` with empty keys: all records as one group).
fn shares(
    ds: &Dataset,
    opts: &ScanOptions,
    q: &Query,
    var: &str,
    thresholds: Vec<(Vec<String>, f64)>,
    v: &Survey,
) -> Result<Shares> {
    // All records as one group: still grouped, so that the records the
    // means leave out (a missing grouping value) are left out here too.
    let overall = thresholds.first().is_some_and(|t| t.0.is_empty());
    let dims = q.group_by.len();
    let mut sq = Query {
        measure: None,
        distribution: false,
        split: Some(Split {
            var: var.to_string(),
            thresholds,
        }),
        ..q.clone()
    };
    if let Some(t) = sq.taylor.as_mut() {
        let margin = |keep: Vec<bool>| Margin {
            keep,
            skip_missing: false,
        };
        t.margins = if overall {
            // The split's two halves over all groups, and all records.
            let mut halves = vec![false; dims];
            halves.push(true);
            vec![margin(halves), margin(vec![false; dims + 1])]
        } else {
            // The group (the split summed over) is the share's base.
            let mut keep = vec![true; dims];
            keep.push(false);
            vec![margin(keep)]
        };
        t.full = None;
    }
    let mut cube = microtab_engine::run_with(ds, &sq, opts)?;
    if let Some(t) = v.adjusted.as_deref() {
        // The shares' variances take the adjustment's residuals.
        let c = t.calibration.as_ref().expect("an adjusted design");
        crate::weighting::correct(ds, &sq, t, c, &mut cube, (opts, false))?;
    }
    if let Some(t) = cube.taylor.as_ref().filter(|t| t.unknown_strata > 0) {
        return Err(Error::UnknownStrata {
            records: t.unknown_strata,
        });
    }
    let w = cube.weighted.as_ref();
    // The split is the last dimension; its categories that occur.
    let split = &cube.dims[cube.dims.len() - 1].categories;
    let below = split.iter().position(|c| c.display == "≤");
    let above = split.iter().position(|c| c.display == ">");
    let ns = split.len();
    let groups = cube.counts.len().checked_div(ns).unwrap_or(0);
    let halves = Halves {
        cube: &cube,
        w,
        below,
        above,
        v,
    };
    let mut out = HashMap::new();
    if overall {
        out.insert(Vec::new(), halves.overall_share(groups));
        return Ok(out);
    }
    for g in 0..groups {
        let key = categories(&cube, g * ns)[..dims].to_vec();
        out.insert(key, halves.share(g * ns));
    }
    Ok(out)
}

/// A split query's cube (its last dimension the split, whose categories
/// `≤` and `>` are `below` and `above` when they occur) with its weights and
/// the design's variance.
struct Halves<'a> {
    cube: &'a Cube,
    w: Option<&'a Vec<f64>>,
    below: Option<usize>,
    above: Option<usize>,
    v: &'a Survey,
}

impl Halves<'_> {
    /// The share below over all groups (cells `g · ns + k`, `k` the split's
    /// category), and its variance: from the two halves' totals over all
    /// groups and the total, `Cov(A≤, A≤ + A>) = (V(total) + V(A≤) − V(A>))/2`.
    fn overall_share(&self, groups: usize) -> Option<(f64, Var)> {
        let (below, above) = (self.below, self.above);
        let ns = self.cube.dims.last()?.categories.len();
        let sum = |x: &[f64], k: Option<usize>| -> f64 {
            k.map_or(0.0, |k| (0..groups).map(|g| x[g * ns + k]).sum())
        };
        self.split_share(
            |x| (sum(x, below), sum(x, above)),
            |t, wb, base| {
                let (halves, all) = (&t.margins[0], &t.margins[1]);
                let vb = below.map_or(0.0, |k| halves.var[k][0]);
                let va = above.map_or(0.0, |k| halves.var[k][0]);
                let vt = all.var.first()?[0];
                let cov = (vt + vb - va) / 2.0;
                Some(all.scale.first()? * ratio_variance(wb, base, [vb, cov, vt]))
            },
        )
    }

    /// The share below of the group whose cells start at `g0`, and its
    /// variance.
    fn share(&self, g0: usize) -> Option<(f64, Var)> {
        let (below, above) = (self.below, self.above);
        let at = |k: Option<usize>| k.map(|k| g0 + k);
        let cell = |x: &[f64], k: Option<usize>| at(k).map_or(0.0, |c| x[c]);
        self.split_share(
            |x| (cell(x, below), cell(x, above)),
            |t, wb, base| {
                let mc = &t.margins[0];
                Some(match at(below) {
                    Some(c) => {
                        let x = mc.group[c]?;
                        mc.scale[x]
                            * ratio_variance(wb, base, [t.cell[c][0], mc.cross[c], mc.var[x][0]])
                    }
                    // No record below: a share of 0 without variance.
                    None => 0.0,
                })
            },
        )
    }

    /// The share `m̂ = below / (below + above)` of the weights and its
    /// variance: `halves` sums a weight vector's two halves (the full sample's,
    /// then each replicate's), `taylor` gives the Taylor variance from the
    /// cube's covariances, `below` and the base.
    fn split_share(
        &self,
        halves: impl Fn(&[f64]) -> (f64, f64),
        taylor: impl FnOnce(&microtab_engine::TaylorCells, f64, f64) -> Option<f64>,
    ) -> Option<(f64, Var)> {
        let (cube, v) = (self.cube, self.v);
        let (wb, wa) = halves(self.w?);
        let base = wb + wa;
        if base == 0.0 {
            return None;
        }
        let m = wb / base;
        let var = if let Some(reps) = &cube.replicates {
            let rm: Vec<f64> = reps
                .w
                .iter()
                .map(|rw| {
                    let (b, a) = halves(rw);
                    b / (a + b)
                })
                .collect();
            v.variance(m, &rm)
        } else {
            taylor(cube.taylor.as_ref()?, wb, base)?.into()
        };
        Some((m, var))
    }
}

/// The Woodruff interval of quantile `q` of distribution `d` from the
/// share below it `(m̂, v(m̂))`: `m̂ ± t·SE`, each end read back through
/// the distribution (none when an end leaves [0, 1], as R).
fn woodruff(
    v: &Survey,
    d: &Distribution,
    q: f64,
    (m, var): (f64, Var),
    n: u64,
) -> Option<Uncertainty> {
    let t = v.t();
    // An undefined variance (every replicate without the group) gives no
    // interval, never one of width 0.
    if !(var.v.is_finite() && t.is_finite()) {
        return None;
    }
    let se_m = var.v.max(0.0).sqrt();
    let (lo, hi) = (m - t * se_m, m + t * se_m);
    if !(lo >= 0.0 && hi <= 1.0) {
        return None;
    }
    let (l, u) = (qrule_math(d, lo)?, qrule_math(d, hi)?);
    let se = (u - l) / (2.0 * t);
    Some(v.interval(q, se, (l, u), n, var.dropped))
}

#[cfg(test)]
mod tests {
    use super::qrule_math;

    /// The rule by hand on n equal weights: the ⌈p·n⌉-th smallest value.
    fn by_hand(n: usize, p: f64) -> f64 {
        ((p * n as f64).ceil() as usize).max(1) as f64
    }

    #[test]
    fn a_constant_weight_does_not_move_a_quantile() {
        // Values 1..n, each of the same weight: the weight's scale (0.1,
        // a float weight from R's apistrat, 33.847) must not matter.
        for &(n, w) in &[
            (50, 15.100_000_381_469_7),
            (610, 0.1),
            (610, 0.3),
            (1000, 1.1),
            (999, 33.847),
        ] {
            let d: Vec<(f64, f64)> = (1..=n).map(|y| (y as f64, w)).collect();
            for &p in &[0.1, 0.25, 0.5, 0.75, 0.9] {
                assert_eq!(qrule_math(&d, p), Some(by_hand(n, p)), "n {n} w {w} p {p}");
            }
        }
    }

    #[test]
    fn an_uneven_split_still_takes_the_next_value() {
        // Weights 1, 2, 3, 4 (total 10): shares .1 .3 .6 1. The median is
        // the third value (0.3 < 0.5 <= 0.6); p = 0.3 is reached by the
        // second exactly; zero weights are skipped.
        let d = [(1.0, 1.0), (2.0, 2.0), (2.5, 0.0), (3.0, 3.0), (4.0, 4.0)];
        assert_eq!(qrule_math(&d, 0.5), Some(3.0));
        assert_eq!(qrule_math(&d, 0.3), Some(2.0));
        assert_eq!(qrule_math(&d, 0.300_001), Some(3.0));
        assert_eq!(qrule_math(&d, 1.0), Some(4.0));
        assert_eq!(qrule_math(&[], 0.5), None);
        // A negative weight leaves the quantile undefined.
        assert_eq!(
            qrule_math(&[(1.0, 2.0), (5.0, -1.0), (9.0, 3.0)], 0.5),
            None
        );
    }
}
