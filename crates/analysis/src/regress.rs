//! A regression request answered: the scans of [`crate::model`]'s
//! model (the cube it is fitted on; for Taylor designs, the scores'),
//! the fit, its variance and its summary.

use crate::model::coding::Coding;
use crate::model::fit::{self, Cells};
use crate::model::summary::{model_based, model_query, summarize};
use crate::model::{Family, ModelError, Regression};
use crate::survey::Survey;
use crate::Request;
use microtab_engine::{parse_formula, Cube, Query, ScanOptions, Scores, TaylorQuery};
use microtab_store::Dataset;
use std::sync::Arc;

/// Fits the model `formula` of `family` over `ds` with the options of
/// `req` (filter, weight, design, level, limits): on the cube of the
/// model's variables when their combinations are few enough, else record
/// by record ([`crate::model::rows`]).
pub fn regress(
    ds: &Dataset,
    req: &Request,
    formula: &str,
    family: Family,
    opts: &ScanOptions,
) -> crate::Result<Regression> {
    let f = parse_formula(formula)?;
    match by_cells(ds, req, (formula, &f), family, opts) {
        Err(crate::Error::Engine(microtab_engine::Error::TooManyCells { .. })) => {
            crate::model::rows::regress(ds, req, (formula, &f), family, opts)
        }
        r => r,
    }
}

/// The model fitted on the cube of its variables.
fn by_cells(
    ds: &Dataset,
    req: &Request,
    (formula, f): (&str, &microtab_engine::Formula),
    family: Family,
    opts: &ScanOptions,
) -> crate::Result<Regression> {
    let design = crate::checks::design_of(ds, req, false)?;
    let mut coding = Coding::new(ds, f, family, false)?;
    let mut q = model_query(ds, req, &coding, &design)?;
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
        (Some((_, v)), Some(reps)) => {
            // R's degf() of the model's domain: the rank of its records'
            // replicate weights, less one.
            let width = reps.w.len();
            let sums = (0..cube.counts.len())
                .filter(|&c| coding.in_model(c))
                .map(|c| reps.w.iter().map(|w| w[c]).collect());
            domain_df = Some(match crate::model::degf::full_rank_degf(sums, width) {
                Some(df) => df,
                None => {
                    let complete: Vec<String> = q.measure.iter().cloned().collect();
                    crate::model::degf::replicate_degf(ds, &q, &complete, &q.replicates, opts)?
                }
            });
            (
                replicate_cov(family, &cells, &coding, &cube, reps, &full, v, &mut notes)?,
                format!("replicate weights ({})", v.info.kind),
            )
        }
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
    // Σ scaled for averaged lonely PSUs.
    let cov = fit::sandwich(&full.ainv, &s, p, t.all_scale);
    Ok((cov, t.domain_psus, t.domain_strata))
}
