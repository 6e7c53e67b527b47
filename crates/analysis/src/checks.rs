//! The checks around a request's scans, shared by every analysis: the
//! design it uses, the whole-file checks it asks for, its weights' sign.

use crate::survey::Survey;
use crate::{Error, Request, Result};
use microtab_engine::{Query, WeightCases};
use microtab_store::{Dataset, Design};

/// The survey design `req` uses over `ds`: the dataset's, unless the
/// request says not to. Its weight is the request's unless the request
/// names another, which replicate weights made for the design's weight
/// would not fit: an error then.
pub(crate) fn design_of(
    ds: &Dataset,
    req: &Request,
    partial: bool,
) -> Result<Option<(Design, Survey)>> {
    // A design the front end holds replaces the stored one.
    let stored = req.design.as_ref().or(ds.manifest().design.as_ref());
    let Some(d) = stored.filter(|_| req.use_design) else {
        return Ok(None);
    };
    let weight = ds.variable(&d.weight)?.name.clone();
    if let Some(w) = &req.weight {
        if ds.variable(w)?.name != weight {
            return Err(Error::DesignWeight {
                design: weight,
                weight: w.clone(),
            });
        }
    }
    let limits = (req.min_n, req.max_cv);
    // A design set before its rank was stored keeps replicates − 1 df (a
    // pass over every replicate weight per query would cost seconds at
    // census size); `microtab design` stores the rank.
    let d = d.clone();
    let mut v = if let Some(r) = &d.replicates {
        Survey::new(&weight, r, req.level, limits)
    } else if let Some(t) = &d.taylor {
        if t.rows != ds.rows() {
            return Err(Error::DesignRecords {
                set_on: t.rows,
                rows: ds.rows(),
            });
        }
        if req.rows.is_some() && !partial {
            return Err(Error::TaylorRange);
        }
        let mut v = Survey::taylor(&weight, t, req.level, limits);
        if let Some(c) = &t.calibration {
            if partial {
                return Err(Error::Design(format!(
                    "the design's weight {weight} was adjusted to population totals ({} of {}): its linearized variance needs every record at once, so it has no partial results; answer it in one process, or make replicate weights and adjust those",
                    c.method, c.source
                )));
            }
            v.info.calibration = Some(calibration_kept(&weight, c));
            v.adjusted = Some(Box::new(t.clone()));
        }
        v
    } else {
        return Ok(None);
    };
    v.info.pct_interval = req.pct_interval;
    Ok(Some((Design { weight, ..d }, v)))
}

/// `W2 is W raked to A; B`.
fn adjusted_from(weight: &str, c: &microtab_store::Calibration) -> String {
    let what = match c.method.as_str() {
        "poststrata" => "post-stratified by",
        "rake" => "raked to",
        _ => "calibrated to",
    };
    format!("{weight} is {} {what} {}:", c.source, c.terms)
}

/// The note of standard errors that subtract the adjustment's residuals.
pub(crate) fn calibration_kept(weight: &str, c: &microtab_store::Calibration) -> String {
    format!(
        "{} the standard errors subtract the adjustment's residuals",
        adjusted_from(weight, c)
    )
}

/// Checks the whole files (and dictionaries) of the variables named, so
/// that damage anywhere in them is reported before an answer is given.
fn verify_variables<'a>(ds: &Dataset, names: impl IntoIterator<Item = &'a String>) -> Result<()> {
    for n in names {
        let var = ds.variable(n)?;
        ds.column(n)?.verify()?;
        if var.dictionary.is_some() {
            ds.dictionary(var)?;
        }
    }
    Ok(())
}

/// Checks the whole files of the request's variables when it asks to.
pub(crate) fn verify(ds: &Dataset, req: &Request, q: &Query) -> Result<()> {
    if req.verify {
        let dims: Vec<String> = q
            .group_by
            .iter()
            .map(|s| microtab_engine::parse_dim_in(ds, s).map(|d| d.name))
            .collect::<std::result::Result<_, _>>()?;
        let names = dims
            .iter()
            .chain(q.filter.iter().flat_map(|t| t.leaves()).map(|t| &t.var))
            .chain(q.weight.iter())
            .chain(q.measure.iter())
            .chain(q.replicates.iter());
        verify_variables(ds, names)?;
    }
    Ok(())
}

/// Negative weights are an error unless the request allows them.
pub(crate) fn check_weights(
    req: &Request,
    weights: &Option<WeightCases>,
    name: Option<&str>,
) -> Result<()> {
    if let (Some(w), Some(name)) = (weights, name) {
        if w.negative > 0 && !req.allow_negative_weights {
            return Err(Error::NegativeWeights {
                variable: name.to_string(),
                count: w.negative,
            });
        }
    }
    Ok(())
}

/// The weight's cases among the query's records, refused when negative
/// unless the request allows it.
pub(crate) fn weights_ok(
    ds: &Dataset,
    req: &Request,
    q: &Query,
    opts: &microtab_engine::ScanOptions,
) -> Result<Option<WeightCases>> {
    let q = Query {
        fold: None,
        measure: None,
        replicates: Vec::new(),
        taylor: None,
        ..q.clone()
    };
    // The records the weighted query counts (those of missing weight are
    // not), when the weight can be missing.
    let counted = match &q.weight {
        Some(w) => {
            let v = ds.variable(w)?;
            if v.nulls > 0 || !v.missing_codes.is_empty() {
                microtab_engine::run_with(ds, &q, opts)?.counts.iter().sum()
            } else {
                0
            }
        }
        None => 0,
    };
    let weights = microtab_engine::weight_cases(ds, &q, opts, counted)?;
    let name = q.weight.as_deref().map(|n| ds.variable(n)).transpose()?;
    check_weights(req, &weights, name.map(|v| v.name.as_str()))?;
    Ok(weights)
}

/// The note on the records left out for a missing weight, if any.
pub(crate) fn missing_weight_note(
    cases: &Option<WeightCases>,
    weight: Option<&str>,
) -> Option<String> {
    let n = cases.as_ref().map_or(0, |c| c.missing);
    (n > 0).then(|| {
        format!(
            "{n} records with a missing weight {} are left out",
            weight.unwrap_or_default()
        )
    })
}
