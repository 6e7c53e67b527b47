//! A regression request answered: the scans of [`crate::model`]'s
//! model (the cube it is fitted on; for Taylor designs, the scores'),
//! the fit, its variance and its summary.

use crate::model::coding::Coding;
use crate::model::fitted::{hc0_query, replicate_method, scores_query, Fitted, HC0_NOTE};
use crate::model::summary::{model_based, model_query};
use crate::model::{Family, Regression};
use crate::Request;
use microtab_engine::{parse_formula, ScanOptions};
use microtab_store::Dataset;

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
    check_outcome(ds, req, &f, family, opts)?;
    match by_cells(ds, req, (formula, &f), family, opts) {
        Err(crate::Error::Engine(microtab_engine::Error::TooManyCells { .. })) => {
            crate::model::rows::regress(ds, req, (formula, &f), family, opts)
                .map_err(|e| too_many_outcomes(e, &f, family))
        }
        r => r,
    }
}

/// A binary outcome taking more values than a table may hold is not
/// binary: the error says so rather than asking for a larger table.
fn too_many_outcomes(
    e: crate::Error,
    f: &microtab_engine::Formula,
    family: Family,
) -> crate::Error {
    let y = &f.outcome.name;
    match &e {
        crate::Error::Engine(microtab_engine::Error::TooManyCells {
            variable, shape, ..
        }) if family.binary() && f.outcome.condition.is_none() => {
            // The outcome's planned categories (its range when numeric).
            let n = shape.iter().find(|(v, _)| v == y).map_or(0, |s| s.1);
            if variable.as_deref() == Some(y.as_str()) || n > 3 {
                crate::model::ModelError::NotBinary {
                    variable: y.clone(),
                    family: family.name().to_string(),
                    values: "more than two values".into(),
                }
                .into()
            } else {
                e
            }
        }
        _ => e,
    }
}

/// A Poisson outcome is not negative: the records of the model's domain
/// (the filter's, with every model variable) with a negative outcome are
/// counted, only when the variable's stored range reaches below 0. (Fitted
/// on cells, the outcome is summed, not a category the coding checks.)
fn check_outcome(
    ds: &Dataset,
    req: &Request,
    f: &microtab_engine::Formula,
    family: Family,
    opts: &ScanOptions,
) -> crate::Result<()> {
    if family != Family::Poisson || f.outcome.condition.is_some() {
        return Ok(());
    }
    let v = ds.variable(&f.outcome.name)?;
    if v.kind == microtab_store::Kind::String || v.min.is_none_or(|m| m.as_f64() >= 0.0) {
        return Ok(());
    }
    let mut filter = req.filter_terms()?;
    filter.extend(microtab_engine::parse_filter(&format!("{}<0", v.name))?);
    for part in f.terms.iter().flatten() {
        let name = part.spec.split('(').next().unwrap_or_default().trim();
        filter.push(crate::ratio::present(name));
    }
    let q = microtab_engine::Query {
        filter,
        group_by: vec![v.name.clone()],
        max_cells: Some(1 << 20),
        rows: req.rows.clone(),
        ..microtab_engine::Query::default()
    };
    let cube = microtab_engine::run_with(ds, &q, opts)?;
    let first = cube.dims.first().and_then(|d| {
        d.categories
            .iter()
            .zip(&cube.counts)
            .find(|(c, &n)| n > 0 && !c.missing)
    });
    match first {
        Some((c, _)) => Err(crate::model::ModelError::Negative {
            variable: v.name.clone(),
            value: c.display.clone(),
        }
        .into()),
        None => Ok(()),
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
    let coding = Coding::new(ds, f, family, false)?;
    let mut q = model_query(ds, req, &coding, &design, true)?;
    let cube = microtab_engine::run_with(ds, &q, opts)?;
    let counted: u64 = cube.counts.iter().sum();
    let weights = microtab_engine::weight_cases(ds, &q, opts, counted)?;
    let wname = q.weight.as_deref().map(|n| ds.variable(n)).transpose()?;
    crate::checks::check_weights(req, &weights, wname.map(|v| v.name.as_str()))?;
    let fitted = Fitted::new(coding, &cube, family)?;
    // A weight adjusted to population totals: the scores' residuals.
    let adjusted = match &design {
        Some((d, _)) if cube.replicates.is_none() => {
            d.taylor.as_ref().and_then(|t| t.calibration.clone())
        }
        _ => None,
    };
    let survey = design.as_ref().map(|(_, v)| v);
    let mut notes = Vec::new();
    let (cov, method, domain_df) = match (&design, &cube.replicates) {
        (Some((_, v)), Some(reps)) => {
            let (cov, df) = fitted.replicate_variance(&cube, reps, v, &mut notes)?;
            // R's degf() of the model's domain: the rank of its records'
            // replicate weights, less one (a pass over the records when
            // the cells' sums are not of full rank).
            let df = match df {
                Some(df) => df,
                None => {
                    let complete: Vec<String> = q.measure.iter().cloned().collect();
                    crate::model::degf::replicate_degf(ds, &q, &complete, &q.replicates, opts)?
                }
            };
            (cov, replicate_method(v), Some(df))
        }
        (Some((d, _)), None) => {
            let t = d
                .taylor
                .as_ref()
                .expect("a design with replicates or Taylor");
            scores_query(&mut q, crate::taylor::query_of(t), &fitted, family);
            let mut cube = microtab_engine::run_with(ds, &q, opts)?;
            if let Some(c) = &adjusted {
                crate::weighting::correct(ds, &q, t, c, &mut cube, (opts, true))?;
            }
            let (cov, df) = fitted.sandwich(&cube)?;
            (cov, "linearization".to_string(), Some(df))
        }
        (None, _) if q.weight.is_some() => {
            notes.push(HC0_NOTE.into());
            scores_query(&mut q, hc0_query(), &fitted, family);
            let cube = microtab_engine::run_with(ds, &q, opts)?;
            let (cov, _) = fitted.sandwich(&cube)?;
            (cov, "sandwich (HC0)".to_string(), None)
        }
        (None, _) => (
            model_based(family, &fitted.cells, &fitted.full),
            "model-based".to_string(),
            None,
        ),
    };
    Ok(fitted.summary(
        (&ds.dir().display().to_string(), formula, family, req),
        (survey, domain_df, cov),
        (method, notes),
        (q.weight.clone(), weights),
    ))
}
