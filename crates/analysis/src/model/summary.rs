//! What a model's two fitting paths share: the query of its scans, and
//! the summary of a fit (coefficients with their inference, model fit,
//! the Wald test).

use super::coding::Coding;
use super::fit::{self, dot, Cells};
use super::{Coefficient, Family, Inference, Regression, Wald};
use crate::survey::{Provenance, Survey};
use crate::Request;
use microtab_engine::Query;
use microtab_store::Dataset;

/// The most cells a model's cube may have: its replicate sums (two per
/// replicate and cell, per worker) kept to a few tens of MB.
fn cube_limit(req: &Request, replicates: usize) -> usize {
    req.max_cells.min(4_000_000 / (1 + 2 * replicates))
}

/// The query of a model's scans: its dimensions (and measure), the
/// filter, the weight, the replicate weights. With `check`, a text value
/// the filter or a recode names must be in `ds` (over parts of the data,
/// whoever merges them checks it once over all: a part may lack a value
/// others have).
pub(crate) fn model_query(
    ds: &Dataset,
    req: &Request,
    coding: &Coding,
    design: &Option<(microtab_store::Design, Survey)>,
    check: bool,
) -> crate::Result<Query> {
    let replicates = design
        .as_ref()
        .and_then(|(d, _)| d.replicates.as_ref())
        .map_or(Vec::new(), |r| r.weights.clone());
    let q = Query {
        filter: req.filter_terms()?,
        group_by: coding.dims.clone(),
        weight: design
            .as_ref()
            .map_or(req.weight.clone(), |(d, _)| Some(d.weight.clone())),
        measure: coding.measure.clone(),
        max_cells: Some(cube_limit(req, replicates.len())),
        replicates,
        ..Query::default()
    };
    if check {
        microtab_engine::check_values(&[ds], &q.filter, &q.group_by)?;
    }
    crate::checks::verify(ds, req, &q)?;
    Ok(q)
}

/// Model-based covariance for unweighted records: `φ (X'WX)⁻¹`, `φ` the
/// residual variance (gaussian) or 1.
pub(crate) fn model_based(family: Family, cells: &Cells, full: &fit::Fit) -> Vec<f64> {
    let p = cells.p;
    let phi = if family == Family::Gaussian {
        let n: f64 = cells.w.iter().sum();
        full.deviance / (n - p as f64)
    } else {
        1.0
    };
    full.ainv.iter().map(|a| a * phi).collect()
}

/// Two-sided p of `t` with `df` (`None`: normal).
pub(crate) fn p_two_sided(t: f64, df: Option<f64>) -> f64 {
    if !t.is_finite() {
        return f64::NAN;
    }
    match df {
        Some(df) if df > 0.0 => microtab_engine::stats::beta_reg(df / 2.0, 0.5, df / (df + t * t)),
        Some(_) => f64::NAN,
        None => microtab_engine::stats::upper_gamma_q(0.5, t * t / 2.0),
    }
}

/// The regression's summary: coefficients with inference, model fit,
/// the Wald test of all non-intercept columns.
pub(crate) fn summarize(
    (dataset, formula, family, req): (&str, &str, Family, &Request),
    (cells, full, cov, names): (&Cells, &fit::Fit, Vec<f64>, &[String]),
    (survey, method, mut notes): (Option<&Survey>, String, Vec<String>),
    (weight, weight_cases): (Option<String>, Option<microtab_engine::WeightCases>),
    intercept: bool,
) -> Regression {
    let p = cells.p;
    // Records of weight 0 are out of the model's n and df (R's `lm`
    // and `svyglm`, Stata's estimation sample); `weight_cases` counts
    // them over the model's domain.
    let zero = weight_cases.as_ref().map_or(0, |w| w.zero);
    let n: u64 = cells.n.iter().sum::<u64>().saturating_sub(zero);
    let weighted_n: f64 = cells.w.iter().sum();
    let design_df = survey.map(|v| v.info.df);
    let df = match design_df {
        Some(d) => Some(d + 1.0 - p as f64),
        None if family == Family::Gaussian => Some(n as f64 - p as f64),
        None => None,
    };
    let q = match df {
        Some(d) => microtab_engine::stats::t_quantile(req.level, d),
        None => microtab_engine::stats::t_quantile(req.level, f64::INFINITY),
    };
    if let (Some(d), Some(dd)) = (df, design_df) {
        if d <= 0.0 {
            notes.push(format!(
                "the design has {dd} degrees of freedom, too few for {p} coefficients: no t tests or intervals (as in R)"
            ));
        }
    }
    let coefficients = (0..p)
        .map(|j| {
            let (b, se) = (full.beta[j], cov[j * p + j].max(0.0).sqrt());
            let t = b / se;
            Coefficient {
                term: names[j].clone(),
                inference: Inference {
                    estimate: b,
                    se,
                    t,
                    p: p_two_sided(t, df),
                    lo: b - q * se,
                    hi: b + q * se,
                },
            }
        })
        .collect();
    let ybar: f64 = cells.y.iter().sum::<f64>() / weighted_n;
    let null_deviance: f64 = (0..cells.w.len())
        .filter(|&c| cells.w[c] != 0.0)
        .map(|c| family.deviance(cells.w[c], cells.y[c], cells.s[c], ybar))
        .sum();
    let known = cells.s_known;
    let pseudo = (known && null_deviance > 0.0).then(|| 1.0 - full.deviance / null_deviance);
    let tested: Vec<usize> = (usize::from(intercept)..p).collect();
    let wald = wald(&full.beta, &cov, p, &tested, df);
    Regression {
        dataset: dataset.to_string(),
        formula: formula.to_string(),
        family,
        coefficients,
        n,
        weighted_n,
        df,
        design_df,
        r_squared: (family == Family::Gaussian && intercept)
            .then_some(pseudo)
            .flatten(),
        deviance: known.then_some(full.deviance),
        null_deviance: known.then_some(null_deviance),
        pseudo_r_squared: pseudo,
        wald,
        iterations: full.iterations,
        fitted_on: "cells".into(),
        weight_cases,
        provenance: Provenance::new(method, survey, weight, req, notes),
        covariance: (0..p).map(|i| cov[i * p..(i + 1) * p].to_vec()).collect(),
    }
}

/// The Wald test of the coefficients `tested` (R `regTermTest`, method
/// "Wald": `β' V⁻¹ β / k` against F(k, df), or chi-square without df).
pub(crate) fn wald(
    beta: &[f64],
    cov: &[f64],
    p: usize,
    tested: &[usize],
    df: Option<f64>,
) -> Option<Wald> {
    let k = tested.len();
    if k == 0 {
        return None;
    }
    let sub: Vec<f64> = tested
        .iter()
        .flat_map(|&i| tested.iter().map(move |&j| cov[i * p + j]))
        .collect();
    let inv = fit::invert(&sub, k, &[]).ok()?;
    let b: Vec<f64> = tested.iter().map(|&i| beta[i]).collect();
    let chi2: f64 = (0..k)
        .map(|i| b[i] * dot(&inv[i * k..(i + 1) * k], &b))
        .sum();
    let f = chi2 / k as f64;
    let kf = k as f64;
    let p = match df {
        Some(d) if d > 0.0 => microtab_engine::stats::beta_reg(d / 2.0, kf / 2.0, d / (d + kf * f)),
        Some(_) => f64::NAN,
        None => microtab_engine::stats::upper_gamma_q(kf / 2.0, chi2 / 2.0),
    };
    Some(Wald {
        f,
        ndf: kf,
        ddf: df,
        p,
    })
}
