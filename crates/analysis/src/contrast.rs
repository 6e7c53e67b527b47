//! Comparisons answered from the means or table query's own scan (one
//! dataset, not a part of one).
//!
//! Each group's estimate `θ_g` is a ratio of the cells' totals: a domain
//! mean `Y_g / W_g`, or a row category's share of a column `W_rg / W_g`.
//! Their covariance comes from the same sums the query's standard errors
//! come from:
//! - a Taylor design: the design covariance of every pair of cells'
//!   totals, summed in the scan ([`TaylorQuery::full`], with
//!   [`TaylorQuery::full_values`] for means), and `θ`'s gradient (the
//!   linearization `(Y_g − θ_g W_g) / W_g`); with a weight and no design,
//!   the same with each record its own PSU and no centring (HC0);
//! - replicate weights: each replicate's `θ`, from the cube's replicate
//!   sums;
//! - no weight and no design: the pooled variance of the groups (OLS).
//!
//! The differences `θ_g − θ_base` and their covariance follow by the
//! contrast, with the degrees of freedom of the saturated model `Y ~
//! factor(G)` (its domain's `degf` + 1 − groups): the numbers R's
//! `svyby(covmat = TRUE)` + `svycontrast` and `svyttest` give, and the
//! model [`crate::compare`] fits gives, without that model's scans. Where
//! these sums are not at hand (parts of a dataset, tables too large to
//! hold every pair of cells, missing categories counted, fewer than two
//! groups, a group whose records all weigh 0) the model is fitted.

use crate::compare::{Comparison, Difference, RowComparison};
use crate::model::fitted::{hc0_query, replicate_method};
use crate::model::summary::{p_two_sided, wald};
use crate::model::Inference;
use crate::survey::Survey;
use crate::{Analysis, Request, Result};
use microtab_engine::{Cube, Margin, Query, RepCells, ScanOptions, TaylorQuery};
use microtab_store::Dataset;

/// Sets `q`, the query of `req` (means or a table, over one whole
/// dataset), to sum what its comparison needs beside the query's own
/// sums: under a Taylor design, the covariances of every pair of cells'
/// totals; weighted without a design, the same with each record its own
/// PSU (HC0). A Taylor test of means sums the pairs too: its margin (the
/// Total) is then read off them when the scan ends instead of PSU by PSU,
/// which pays for the domains' counts.
pub(crate) fn prepare(q: &mut Query, req: &Request) {
    if (req.diff.is_none() && req.test_mean.is_none()) || !q.replicates.is_empty() {
        return;
    }
    let values = match &req.analysis {
        Analysis::Means { by, .. } if by.len() == 1 => true,
        Analysis::Tab { control: None, .. } if !req.include_missing && req.diff.is_some() => false,
        _ => return,
    };
    match &mut q.taylor {
        // The first margin keeps no dimension: one table of every cell.
        Some(t) => {
            t.full = Some(0);
            t.full_values = values;
        }
        None if q.weight.is_some() && req.diff.is_some() => {
            q.taylor = Some(TaylorQuery {
                margins: vec![Margin {
                    keep: vec![false; q.group_by.len()],
                    skip_missing: false,
                }],
                full: Some(0),
                full_values: values,
                ..hc0_query()
            })
        }
        None => {}
    }
}

/// A comparison answered from the scan.
pub(crate) enum Direct {
    /// Groups' means compared with the base group's.
    Means(Comparison),
    /// Each row category's shares compared with its share in the base
    /// column.
    Shares(Vec<RowComparison>),
}

/// Where the covariance of the groups' estimates comes from.
enum Spread<'a> {
    /// The covariances of the cells' totals (`width × width`), scaled by
    /// `scale`, `Y` summed less `shift`: a Taylor design's, or each
    /// record its own PSU (HC0).
    Totals {
        cov: &'a [f64],
        scale: f64,
        shift: f64,
    },
    /// Replicate designs: each replicate's estimates.
    Replicates(&'a RepCells, &'a Survey),
    /// No weight, no design: the groups' pooled variance.
    Pooled,
}

/// The comparison `req` asks for from its scan: `cube` (a HC0 query's
/// Taylor sums are taken out of it), `q` its query, `survey` its design;
/// `None` where the scan's sums do not give it (the caller fits the
/// model).
pub(crate) fn from_scan(
    ds: &Dataset,
    req: &Request,
    q: &Query,
    cube: &mut Cube,
    survey: Option<&Survey>,
    opts: &ScanOptions,
) -> Result<Option<Direct>> {
    // Without a design, the Taylor sums are the comparison's alone.
    let hc0 = match survey {
        None => cube.taylor.take(),
        Some(_) => None,
    };
    let Some(base) = &req.diff else {
        return Ok(None);
    };
    let taylor = hc0.as_ref().or(cube.taylor.as_ref());
    let (spread, method) = match (survey, &cube.replicates, taylor) {
        (Some(v), Some(reps), _) => (Spread::Replicates(reps, v), replicate_method(v)),
        (_, _, Some(t)) => match t.full.as_ref().and_then(|f| f.first()) {
            Some(f) if !f.is_empty() => {
                let method = match survey {
                    Some(_) => "linearization",
                    None => "sandwich (HC0)",
                };
                let spread = Spread::Totals {
                    cov: f,
                    scale: t.all_scale,
                    shift: t.shift,
                };
                (spread, method.to_string())
            }
            _ => return Ok(None),
        },
        (None, None, None) if q.weight.is_none() => (Spread::Pooled, "model-based".into()),
        _ => return Ok(None),
    };
    let weighted = q.weight.is_some();
    let degf = |p: usize, n: u64, cells: &[usize]| -> Result<Option<f64>> {
        let p = p as f64;
        Ok(Some(match (&spread, taylor, survey) {
            (Spread::Replicates(reps, _), ..) => {
                let rows = cells.iter().map(|&c| reps.w.iter().map(|w| w[c]).collect());
                let df = match crate::model::degf::full_rank_degf(rows, reps.w.len()) {
                    Some(df) => df,
                    None => {
                        let complete: Vec<String> = q.measure.iter().cloned().collect();
                        crate::model::degf::replicate_degf(ds, q, &complete, &q.replicates, opts)?
                    }
                };
                df + 1.0 - p
            }
            // HC0 too: each record of non-zero weight its own PSU in one
            // stratum (R's `ids = ~1`), so records of weight 0 are out.
            (Spread::Totals { .. }, Some(t), _) => {
                t.domain_psus as f64 - t.domain_strata as f64 + 1.0 - p
            }
            _ => n as f64 - p,
        }))
    };
    match &req.analysis {
        Analysis::Means { .. } => {
            let Some(g) = means_groups(cube, weighted) else {
                return Ok(None);
            };
            let Some(b) = g.names.iter().position(|n| n == base) else {
                return Ok(None);
            };
            let Some(cov) = means_cov(cube, &g, &spread) else {
                return Ok(None);
            };
            let n = g.n.iter().sum();
            let df = degf(g.names.len(), n, &g.cells)?;
            Ok(Some(Direct::Means(contrast(
                &g,
                &cov,
                b,
                (df, req.level),
                method,
            ))))
        }
        // Missing categories counted in the cells: the model's domain is
        // not the table's.
        Analysis::Tab { .. } if req.include_missing => Ok(None),
        Analysis::Tab { row, .. } => {
            crate::compare::check_share_row(ds, row)?;
            let Some(t) = ShareTable::new(cube, weighted) else {
                return Ok(None);
            };
            let Some(b) = t
                .cols
                .iter()
                .position(|&j| cube.dims[1].categories[j].display == *base)
            else {
                return Ok(None);
            };
            let cells: Vec<usize> = t
                .rows
                .iter()
                .flat_map(|&i| t.cols.iter().map(move |&j| i * t.nc + j))
                .filter(|&c| cube.counts[c] > 0)
                .collect();
            let n = t.cols.iter().map(|&j| t.n[j]).sum();
            let df = degf(t.cols.len(), n, &cells)?;
            let mut out = Vec::new();
            for &i in t.rows.iter().filter(|&&i| t.row_counted(cube, i)) {
                let r = &cube.dims[0].categories[i];
                if r.missing {
                    continue;
                }
                let (g, cov) = t.shares(cube, i, &spread);
                let c = contrast(&g, &cov, b, (df, req.level), method.clone());
                out.push(crate::compare::row_comparison(r, c));
            }
            Ok(Some(Direct::Shares(out)))
        }
        _ => Ok(None),
    }
}

/// An error when two of the groups that `req` compares or tests (the
/// means' groups; a table's columns) in `cube` are shown as the same
/// values (a recode giving two ranges one label): comparisons and tests
/// name groups by their values.
pub(crate) fn check_groups(req: &Request, cube: &Cube) -> Result<()> {
    if req.diff.is_none() && req.test_mean.is_none() {
        return Ok(());
    }
    let names: Vec<String> = match &req.analysis {
        Analysis::Means { .. } => (0..cube.counts.len())
            .filter(|&c| cube.counts[c] > 0)
            .map(|c| {
                let cats = cube.categories_of(c);
                cats.iter()
                    .map(|c| c.display.as_str())
                    .collect::<Vec<_>>()
                    .join(" × ")
            })
            .collect(),
        Analysis::Tab { .. } => cube.dims.last().map_or(Vec::new(), |d| {
            d.categories
                .iter()
                .filter(|c| !c.missing)
                .map(|c| c.display.clone())
                .collect()
        }),
        _ => Vec::new(),
    };
    let mut seen = std::collections::HashSet::new();
    match names.into_iter().find(|n| !seen.insert(n.clone())) {
        Some(value) => Err(crate::Error::SameValue { value }),
        None => Ok(()),
    }
}

/// The groups compared: their displayed values, cells, estimates,
/// weights and records.
struct Groups {
    names: Vec<String>,
    cells: Vec<usize>,
    est: Vec<f64>,
    w: Vec<f64>,
    n: Vec<u64>,
}

/// The means cube's groups with records (`None`: fewer than two, or one
/// whose records weigh 0 in all).
fn means_groups(cube: &Cube, weighted: bool) -> Option<Groups> {
    let moments = cube.moments.as_ref()?;
    let [dim] = cube.dims.as_slice() else {
        return None;
    };
    let mut g = Groups {
        names: Vec::new(),
        cells: Vec::new(),
        est: Vec::new(),
        w: Vec::new(),
        n: Vec::new(),
    };
    for (c, cat) in dim.categories.iter().enumerate() {
        let m = moments.get(c)?;
        if cat.missing || m.n == 0 {
            continue;
        }
        if weighted && m.w == 0.0 {
            return None;
        }
        g.names.push(cat.display.clone());
        g.cells.push(c);
        g.est.push(m.mean);
        g.w.push(m.w);
        g.n.push(m.n);
    }
    (g.names.len() >= 2).then_some(g)
}

/// The covariance of the groups' means (`k × k`).
fn means_cov(cube: &Cube, g: &Groups, spread: &Spread<'_>) -> Option<Vec<f64>> {
    let k = g.names.len();
    match spread {
        Spread::Totals {
            cov: s,
            scale,
            shift,
        } => {
            // A mean's gradient: 1/W at its Y, −(θ − shift)/W at its W
            // (Y summed less the shift).
            let width = 2 * cube.dims[0].categories.len();
            if s.len() != width * width {
                return None;
            }
            let grads: Vec<Vec<(usize, f64)>> = (0..k)
                .map(|i| {
                    let (c, w) = (g.cells[i], g.w[i]);
                    vec![(2 * c, -(g.est[i] - shift) / w), (2 * c + 1, 1.0 / w)]
                })
                .collect();
            Some(quadratic(&grads, s, width, *scale))
        }
        Spread::Replicates(reps, v) => {
            let wx = reps.wx.as_ref()?;
            let rep: Vec<Option<Vec<f64>>> = reps
                .w
                .iter()
                .zip(wx)
                .map(|(w, wx)| {
                    let e: Vec<f64> = g.cells.iter().map(|&c| wx[c] / w[c]).collect();
                    e.iter().all(|x| x.is_finite()).then_some(e)
                })
                .collect();
            Some(v.covariance(&g.est, &rep).concat())
        }
        Spread::Pooled => {
            let moments = cube.moments.as_ref()?;
            let n: u64 = g.n.iter().sum();
            let rss: f64 = g.cells.iter().map(|&c| moments[c].m2).sum();
            let s2 = rss / (n as f64 - k as f64);
            Some(diagonal(g.n.iter().map(|&n| s2 / n as f64)))
        }
    }
}

/// A table's rows and columns compared (non-missing, with records), its
/// cells' weights (counts when unweighted), and each column's.
struct ShareTable {
    nc: usize,
    rows: Vec<usize>,
    cols: Vec<usize>,
    /// Per cell (`row · nc + col`).
    w: Vec<f64>,
    /// Per column (every one of the cube's): its weight and records over
    /// the rows compared.
    col_w: Vec<f64>,
    n: Vec<u64>,
}

impl ShareTable {
    /// `None`: fewer than two columns with records, or a column whose
    /// records weigh 0 in all.
    fn new(cube: &Cube, weighted: bool) -> Option<ShareTable> {
        let [rd, cd] = cube.dims.as_slice() else {
            return None;
        };
        let nc = cd.categories.len();
        let w: Vec<f64> = match (&cube.weighted, weighted) {
            (Some(w), true) => w.clone(),
            (_, false) => cube.counts.iter().map(|&n| n as f64).collect(),
            (None, true) => return None,
        };
        let rows: Vec<usize> = (0..rd.categories.len())
            .filter(|&i| !rd.categories[i].missing)
            .collect();
        let (mut col_w, mut n) = (vec![0.0; nc], vec![0u64; nc]);
        for &i in &rows {
            for j in 0..nc {
                col_w[j] += w[i * nc + j];
                n[j] += cube.counts[i * nc + j];
            }
        }
        let mut cols = Vec::new();
        for (j, cat) in cd.categories.iter().enumerate() {
            if cat.missing || n[j] == 0 {
                continue;
            }
            if col_w[j] == 0.0 {
                return None;
            }
            cols.push(j);
        }
        (cols.len() >= 2).then_some(ShareTable {
            nc,
            rows,
            cols,
            w,
            col_w,
            n,
        })
    }

    /// Whether row `i` has records (the table shows it).
    fn row_counted(&self, cube: &Cube, i: usize) -> bool {
        (0..self.nc).any(|j| cube.counts[i * self.nc + j] > 0)
    }

    /// Row `i`'s share of each column compared, and their covariance.
    fn shares(&self, cube: &Cube, i: usize, spread: &Spread<'_>) -> (Groups, Vec<f64>) {
        let nc = self.nc;
        let est: Vec<f64> = self
            .cols
            .iter()
            .map(|&j| self.w[i * nc + j] / self.col_w[j])
            .collect();
        let g = Groups {
            names: self
                .cols
                .iter()
                .map(|&j| cube.dims[1].categories[j].display.clone())
                .collect(),
            cells: self.cols.iter().map(|&j| i * nc + j).collect(),
            est,
            w: self.cols.iter().map(|&j| self.col_w[j]).collect(),
            n: self.cols.iter().map(|&j| self.n[j]).collect(),
        };
        let cov = match spread {
            Spread::Totals { cov: s, scale, .. } => {
                // A share's gradient: (δ(i, i') − θ)/W_col at each row
                // i' of its column.
                let width = cube.counts.len();
                let grads: Vec<Vec<(usize, f64)>> = (0..g.cells.len())
                    .map(|x| {
                        let (j, theta, wc) = (self.cols[x], g.est[x], g.w[x]);
                        self.rows
                            .iter()
                            .map(|&r| {
                                let d = if r == i { 1.0 } else { 0.0 };
                                (r * nc + j, (d - theta) / wc)
                            })
                            .collect()
                    })
                    .collect();
                quadratic(&grads, s, width, *scale)
            }
            Spread::Replicates(reps, v) => {
                let rep: Vec<Option<Vec<f64>>> = reps
                    .w
                    .iter()
                    .map(|w| {
                        let e: Vec<f64> = self
                            .cols
                            .iter()
                            .map(|&j| {
                                let col: f64 = self.rows.iter().map(|&r| w[r * nc + j]).sum();
                                w[i * nc + j] / col
                            })
                            .collect();
                        e.iter().all(|x| x.is_finite()).then_some(e)
                    })
                    .collect();
                v.covariance(&g.est, &rep).concat()
            }
            Spread::Pooled => {
                // The residuals of a 0/1 outcome about its column's share.
                let n: u64 = g.n.iter().sum();
                let rss: f64 = g
                    .est
                    .iter()
                    .zip(&g.n)
                    .map(|(p, &n)| n as f64 * p * (1.0 - p))
                    .sum();
                let s2 = rss / (n as f64 - g.n.len() as f64);
                diagonal(g.n.iter().map(|&n| s2 / n as f64))
            }
        };
        (g, cov)
    }
}

/// `scale · G S G'` for the sparse gradients `grads` (one per estimate)
/// and the `width × width` covariance `s`.
fn quadratic(grads: &[Vec<(usize, f64)>], s: &[f64], width: usize, scale: f64) -> Vec<f64> {
    let k = grads.len();
    let mut out = vec![0.0; k * k];
    for a in 0..k {
        for b in a..k {
            let v: f64 = grads[a]
                .iter()
                .flat_map(|&(i, x)| grads[b].iter().map(move |&(j, y)| x * y * s[i * width + j]))
                .sum();
            out[a * k + b] = scale * v;
            out[b * k + a] = scale * v;
        }
    }
    out
}

/// A diagonal matrix.
fn diagonal(d: impl ExactSizeIterator<Item = f64>) -> Vec<f64> {
    let k = d.len();
    let mut out = vec![0.0; k * k];
    for (i, x) in d.enumerate() {
        out[i * k + i] = x;
    }
    out
}

/// The groups' estimates `g` (covariance `cov`) as differences from group
/// `b`, with t tests on `df` degrees of freedom and intervals at `level`.
///
/// A group whose values are one constant like the base's (a category's
/// share of 0 in both columns) differs from it by exactly 0 with no
/// sampling variance, as R's `svycontrast` gives it; sums leave rounding
/// noise there (an estimate and an SE near 1e-16, whose t would be
/// noise). Such a difference is given as 0 with an SE of 0 and no test,
/// and is left out of the Wald test.
fn contrast(
    g: &Groups,
    cov: &[f64],
    b: usize,
    (df, level): (Option<f64>, f64),
    method: String,
) -> Comparison {
    let k = g.est.len();
    let others: Vec<usize> = (0..k).filter(|&i| i != b).collect();
    let m = others.len();
    let d: Vec<f64> = others.iter().map(|&i| g.est[i] - g.est[b]).collect();
    // Cov(θ_i − θ_b, θ_j − θ_b).
    let c = |i: usize, j: usize| cov[i * k + j];
    let dcov: Vec<f64> = others
        .iter()
        .flat_map(|&i| {
            others
                .iter()
                .map(move |&j| c(i, j) - c(i, b) - c(b, j) + c(b, b))
        })
        .collect();
    let scale = g.est.iter().fold(0.0f64, |s, x| s.max(x.abs()));
    let noise = 1e-12 * scale;
    let q = microtab_engine::stats::t_quantile(level, df.unwrap_or(f64::INFINITY));
    let mut tested = Vec::new();
    let differences = (0..m)
        .map(|x| {
            let (est, se) = (d[x], dcov[x * m + x].max(0.0).sqrt());
            let inference = if se <= noise && est.abs() <= noise {
                Inference::exact_zero()
            } else {
                tested.push(x);
                let t = est / se;
                Inference {
                    estimate: est,
                    se,
                    t,
                    p: p_two_sided(t, df),
                    lo: est - q * se,
                    hi: est + q * se,
                }
            };
            Difference {
                group: g.names[others[x]].clone(),
                inference,
            }
        })
        .collect();
    Comparison {
        base: g.names[b].clone(),
        base_estimate: g.est[b],
        differences,
        df,
        wald: wald(&d, &dcov, m, &tested, df),
        method,
    }
}
