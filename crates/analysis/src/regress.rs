//! A regression request answered: the scans of [`crate::model`]'s
//! model (the cube it is fitted on; for Taylor designs, the scores'),
//! the fit, its variance and its summary.

use crate::model::coding::Coding;
use crate::model::fit::{self, dot, Cells};
use crate::model::{Coefficient, Family, Inference, ModelError, Regression, Wald};
use crate::survey::Survey;
use crate::Request;
use microtab_engine::{parse_formula, Cube, Query, ScanOptions, Scores, TaylorQuery};
use microtab_store::Dataset;
use std::sync::Arc;

/// Fits the model `formula` of `family` over `ds` with the options of
/// `req` (filter, weight, design, level, limits).
pub fn regress(
    ds: &Dataset,
    req: &Request,
    formula: &str,
    family: Family,
    opts: &ScanOptions,
) -> crate::Result<Regression> {
    let f = parse_formula(formula)?;
    let design = crate::checks::design_of(ds, req, false)?;
    let mut coding = Coding::new(ds, &f, family)?;
    let mut q = Query {
        filter: match &req.filter {
            Some(t) => microtab_engine::parse_filter(t)?,
            None => Vec::new(),
        },
        group_by: coding.dims.clone(),
        weight: design
            .as_ref()
            .map_or(req.weight.clone(), |(d, _)| Some(d.weight.clone())),
        measure: coding.measure.clone(),
        max_cells: Some(req.max_cells),
        replicates: design
            .as_ref()
            .and_then(|(d, _)| d.replicates.as_ref())
            .map_or(Vec::new(), |r| r.weights.clone()),
        ..Query::default()
    };
    microtab_engine::check_values(&[ds], &q.filter, &q.group_by)?;
    crate::checks::verify(ds, req, &q)?;
    let cube = microtab_engine::run_with(ds, &q, opts)?;
    let counted: u64 = cube.counts.iter().sum();
    let weights = microtab_engine::weight_cases(ds, &q, opts, counted)?;
    let wname = q.weight.as_deref().map(|n| ds.variable(n)).transpose()?;
    crate::checks::check_weights(req, &weights, wname.map(|v| v.name.as_str()))?;
    let cells = coding.cells(&cube)?;
    let names = coding.names.clone();
    if cells.w.iter().all(|&w| w == 0.0) {
        return Err(ModelError::Empty.into());
    }
    let with_weight = cells.w.iter().filter(|&&w| w != 0.0).count();
    if with_weight < cells.p {
        return Err(ModelError::TooFew {
            columns: cells.p,
            cells: with_weight,
        }
        .into());
    }
    let full = fit::fit(family, &cells, (&cells.w, &cells.y), None, &names)?;
    coding.check_separation(family, &cells, &full.beta)?;
    let survey = design.as_ref().map(|(_, v)| v);
    let mut notes = Vec::new();
    let mut domain_df = None;
    let (cov, method) = match (&design, &cube.replicates) {
        (Some((_, v)), Some(reps)) => (
            replicate_cov(family, &cells, &coding, &cube, reps, &full, v, &mut notes)?,
            format!("replicate weights ({})", v.info.kind),
        ),
        (Some((d, _)), None) => {
            let t = d
                .taylor
                .as_ref()
                .expect("a design with replicates or Taylor");
            let tq = crate::taylor::query_of(t);
            let (cov, psus, strata) = sandwich(ds, &mut q, tq, &coding, family, &full, opts)?;
            // R's degf() of the model's design: the PSUs with records in
            // the model's domain, less their strata.
            domain_df = Some(psus as f64 - strata as f64);
            (cov, "linearization".to_string())
        }
        (None, _) if q.weight.is_some() => {
            // Each record its own PSU, no centring: HC0.
            let tq = TaylorQuery {
                strata_keys: vec![0],
                coef: vec![[1.0, 0.0]],
                contiguous: true,
                ..TaylorQuery::default()
            };
            notes.push(
                "no survey design: sandwich (HC0) standard errors, each record independent".into(),
            );
            let (cov, ..) = sandwich(ds, &mut q, tq, &coding, family, &full, opts)?;
            (cov, "sandwich (HC0)".to_string())
        }
        (None, _) => (
            model_based(family, &cells, &full),
            "model-based".to_string(),
        ),
    };
    let survey = survey.map(|v| {
        let mut v = v.clone();
        if let Some(df) = domain_df {
            v.info.df = df;
        }
        v
    });
    Ok(summarize(
        (ds, formula, family, req),
        (&cells, &full, cov, &names),
        (survey.as_ref(), method, notes),
        (q.weight.clone(), weights),
        coding.intercept,
    ))
}

/// The covariance of the coefficients from the replicates' refits (R
/// `svyglm.svyrep.design`: `svrVar` of the replicate coefficients).
#[allow(clippy::too_many_arguments)]
fn replicate_cov(
    family: Family,
    cells: &Cells,
    coding: &Coding,
    cube: &Cube,
    reps: &microtab_engine::RepCells,
    full: &fit::Fit,
    v: &Survey,
    notes: &mut Vec<String>,
) -> crate::Result<Vec<f64>> {
    let p = cells.p;
    let mut betas: Vec<Option<Vec<f64>>> = Vec::with_capacity(reps.w.len());
    for r in 0..reps.w.len() {
        let (w, y) = coding.replicate_sums(cube, reps, r, cells.w.len());
        // A replicate whose refit fails (a domain without weight in it)
        // is left out with its coefficient, as R leaves out NA estimates.
        betas.push(
            fit::fit(family, cells, (&w, &y), Some(&full.beta), &coding.names)
                .ok()
                .map(|f| f.beta),
        );
    }
    let dropped = betas.iter().filter(|b| b.is_none()).count();
    if dropped > 0 {
        notes.push(format!(
            "{dropped} replicates could not be refitted and were left out"
        ));
    }
    let cov = v.covariance(&full.beta, &betas);
    Ok((0..p * p).map(|i| cov[i / p][i % p]).collect())
}

/// The sandwich covariance `A⁻¹ Σ A⁻¹`, `Σ` the design covariance of the
/// score totals from a second scan.
fn sandwich(
    ds: &Dataset,
    q: &mut Query,
    mut tq: TaylorQuery,
    coding: &Coding,
    family: Family,
    full: &fit::Fit,
    opts: &ScanOptions,
) -> crate::Result<(Vec<f64>, u64, u64)> {
    let p = full.beta.len();
    let beta = full.beta.clone();
    let c = Arc::new(coding.clone());
    tq.scores = Some(Scores {
        len: p,
        of: Arc::new(move |cats| c.score(family, &beta, cats)),
    });
    q.taylor = Some(tq);
    q.replicates.clear();
    let cube = microtab_engine::run_with(ds, q, opts)?;
    let t = cube.taylor.expect("Taylor sums asked for");
    if t.unknown_strata > 0 {
        return Err(crate::Error::UnknownStrata {
            records: t.unknown_strata,
        });
    }
    let s = t.scores.expect("scores asked for");
    let a = &full.ainv;
    // A⁻¹ Σ A⁻¹, Σ scaled for averaged lonely PSUs.
    let mut sa = vec![0.0; p * p];
    for i in 0..p {
        for j in 0..p {
            sa[i * p + j] = (0..p).map(|k| s[i * p + k] * a[k * p + j]).sum::<f64>();
        }
    }
    let cov = (0..p * p)
        .map(|x| {
            let (i, j) = (x / p, x % p);
            t.all_scale * (0..p).map(|k| a[i * p + k] * sa[k * p + j]).sum::<f64>()
        })
        .collect();
    Ok((cov, t.domain_psus, t.domain_strata))
}

/// Model-based covariance for unweighted records: `φ (X'WX)⁻¹`, `φ` the
/// residual variance (gaussian) or 1.
fn model_based(family: Family, cells: &Cells, full: &fit::Fit) -> Vec<f64> {
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
fn p_two_sided(t: f64, df: Option<f64>) -> f64 {
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
fn summarize(
    (ds, formula, family, req): (&Dataset, &str, Family, &Request),
    (cells, full, cov, names): (&Cells, &fit::Fit, Vec<f64>, &[String]),
    (survey, method, mut notes): (Option<&Survey>, String, Vec<String>),
    (weight, weight_cases): (Option<String>, Option<microtab_engine::WeightCases>),
    intercept: bool,
) -> Regression {
    let p = cells.p;
    let n: u64 = cells
        .n
        .iter()
        .zip(&cells.w)
        .filter(|(_, &w)| w != 0.0 || weight.is_none())
        .map(|(n, _)| n)
        .sum();
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
        dataset: ds.dir().display().to_string(),
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
        method,
        design: survey.map(|v| v.info.clone()),
        weight,
        filter: req.filter.clone(),
        weight_cases,
        level: req.level,
        notes,
        covariance: (0..p).map(|i| cov[i * p..(i + 1) * p].to_vec()).collect(),
    }
}

/// The Wald test of the coefficients `tested` (R `regTermTest`, method
/// "Wald": `β' V⁻¹ β / k` against F(k, df), or chi-square without df).
fn wald(beta: &[f64], cov: &[f64], p: usize, tested: &[usize], df: Option<f64>) -> Option<Wald> {
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
