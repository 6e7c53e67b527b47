//! A model over parts of the data (ranges of one dataset's records,
//! several datasets, a Dask cluster's tasks), in rounds of partial
//! results that merge exactly (`crate::Partial` carries a [`ModelPart`]):
//! 1. each part's cube of the model's variables, with its replicate
//!    sums: merged, the model is fitted on it, and under a replicate
//!    design the refits give the covariance — done, unless the cells'
//!    replicate sums are not of full rank;
//! 2. (then) a rank round: each part's basis of its records' replicate
//!    weights, united for R's domain `degf`;
//! 2. (Taylor designs, and weighted models without one) a scores round:
//!    the parts sum each PSU's scores under the first round's fit, the
//!    merged sums give the sandwich.
//!
//! The fit is always on the merged cube, never on rows.

use super::coding::Coding;
use super::fit::Fit;
use super::fitted::{hc0_query, replicate_method, scores_with, Fitted, HC0_NOTE};
use super::summary::model_query;
use super::{Family, Regression};
use crate::checks::{check_weights, design_of};
use crate::survey::Survey;
use crate::{Analysis, Error, Request, Result};
use microtab_engine::{parse_formula, ScanOptions, WeightCases};
use microtab_store::Dataset;
use serde::{Deserialize, Serialize};

/// A model's round of partial results (see [`crate::Round`]).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) enum Stage {
    /// The model's cube (the first round).
    Cube,
    /// The cube again, and each part's basis of its replicate weights.
    Rank,
    /// The cube with each PSU's scores under a fit.
    Scores(Box<Scored>),
    /// A model on too many combinations for a cube, fitted record by
    /// record in rounds of its own ([`super::records`]).
    Records(Box<super::records::RowsStage>),
}

/// A fit whose scores a round sums, and the coding of its columns.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct Scored {
    coding: Coding,
    fit: Fit,
}

/// What a model's partial result carries beside its cube.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ModelPart {
    coding: Coding,
    stage: Stage,
    /// A rank round's basis of the parts' replicate weights.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    basis: Vec<Vec<f64>>,
    /// A round's sums of a model fitted record by record.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    rows: Option<super::records::RowsSums>,
}

/// The model's formula and family of `req`.
fn model_of(req: &Request) -> (&str, Family) {
    match &req.analysis {
        Analysis::Regress { formula, family } => (formula, *family),
        _ => unreachable!("a model's request"),
    }
}

/// A model part's engine partial cube, the weight's record counts, the
/// design and what the model carries.
pub(crate) type Part = (
    microtab_engine::Partial,
    Option<WeightCases>,
    Option<microtab_store::Design>,
    ModelPart,
);

/// The partial result of a model request over `ds` (its
/// [`Request::rows`] when set) in `round` (`None`: the first).
pub(crate) fn partial(
    ds: &Dataset,
    req: &Request,
    round: Option<&Stage>,
    opts: &ScanOptions,
) -> Result<Part> {
    let (formula, family) = model_of(req);
    let f = parse_formula(formula)?;
    if let Some(Stage::Records(rs)) = round {
        return by_records(ds, req, (&f, family), rs, opts);
    }
    let design = design_of(ds, req, true)?;
    let coding = Coding::new(ds, &f, family, false)?;
    let mut q = model_query(ds, req, &coding, &design, false)?;
    q.rows = req.rows.clone();
    let stage = round.cloned().unwrap_or(Stage::Cube);
    let mut basis = Vec::new();
    let coding = match &stage {
        Stage::Cube => coding,
        Stage::Rank => {
            let complete: Vec<String> = q.measure.iter().cloned().collect();
            basis = super::degf::replicate_basis(ds, &q, &complete, &q.replicates, opts)?;
            coding
        }
        Stage::Scores(sc) => {
            let (fitted, fit) = (&sc.coding, &sc.fit);
            if fitted.dims != coding.dims || fitted.measure != coding.measure {
                return Err(Error::Design(
                    "a scores round of another model: compute the first round again".into(),
                ));
            }
            let tq = match design.as_ref().and_then(|(d, _)| d.taylor.as_ref()) {
                Some(t) => crate::taylor::query_of(t),
                None => hc0_query(),
            };
            scores_with(&mut q, tq, fitted, &fit.beta);
            fitted.clone()
        }
        Stage::Records(_) => unreachable!("answered above"),
    };
    let cube = match microtab_engine::run_partial(ds, &q, opts) {
        // Too many combinations for a cube (known before any record is
        // read): fitted record by record, this round counting the records.
        Err(microtab_engine::Error::TooManyCells { .. }) if stage == Stage::Cube => {
            let count = super::records::RowsStage::Count;
            return by_records(ds, req, (&f, family), &count, opts);
        }
        r => r?,
    };
    let counted = cube.counts.iter().sum();
    let weights = microtab_engine::weight_cases(ds, &q, opts, counted)?;
    let model = ModelPart {
        coding,
        stage,
        basis,
        rows: None,
    };
    Ok((cube, weights, design.map(|(d, _)| d), model))
}

/// A round of the model fitted record by record over `ds` (see
/// [`super::records`]): its sums, beside an engine partial of no records
/// (the parts' datasets and design are merged as for every request).
fn by_records(
    ds: &Dataset,
    req: &Request,
    (f, family): (&microtab_engine::Formula, Family),
    stage: &super::records::RowsStage,
    opts: &ScanOptions,
) -> Result<Part> {
    let design = design_of(ds, req, true)?;
    let (sums, weights) = super::records::partial(ds, req, (f, family), stage, opts)?;
    let none = microtab_engine::Query {
        rows: Some(0..0),
        max_cells: Some(1),
        ..Default::default()
    };
    let cube = microtab_engine::run_partial(ds, &none, opts)?;
    let model = ModelPart {
        coding: Coding::new(ds, f, family, true)?,
        stage: Stage::Records(Box::new(stage.clone())),
        basis: Vec::new(),
        rows: Some(sums),
    };
    Ok((cube, weights, design.map(|(d, _)| d), model))
}

impl ModelPart {
    /// Unites two parts' (of the same round of the same model).
    pub(crate) fn merge(mut self, o: ModelPart) -> Result<ModelPart> {
        // A part fitted on its cube and one record by record (datasets, or
        // parts written as datasets, whose stored ranges make the cube small
        // enough in some): the model is fitted record by record, from a
        // count of every part again ([`ModelPart::mixed`]).
        if self.records() != o.records() {
            let r = if self.records() { self } else { o };
            return Ok(ModelPart { rows: None, ..r });
        }
        // Compared as written: a stage holds NaN (a refit's deviance, not
        // summed), which is never equal to itself.
        let json = |s: &Stage| serde_json::to_string(s).ok();
        if json(&self.stage) != json(&o.stage) || self.coding != o.coding {
            return Err(Error::Design(
                "the parts are of different models or rounds: compute them again".into(),
            ));
        }
        if !o.basis.is_empty() {
            self.basis = super::degf::unite_bases(self.basis, o.basis);
        }
        // Both parts' sums, or none: a part of both kinds on one side.
        self.rows = match (self.rows, o.rows) {
            (Some(a), Some(b)) => Some(a.merge(b)?),
            _ => None,
        };
        Ok(self)
    }

    /// Whether the model is fitted record by record.
    pub(crate) fn records(&self) -> bool {
        matches!(self.stage, Stage::Records(_))
    }
}

/// What the merged parts of a model give: its result, or a further round.
pub(crate) fn step(
    (datasets, part, weight_cases): (&[String], &microtab_engine::Partial, Option<WeightCases>),
    m: &ModelPart,
    req: &Request,
    (survey, replicates): (Option<Survey>, usize),
) -> Result<std::result::Result<Regression, Stage>> {
    match (&m.stage, &m.rows) {
        (Stage::Records(rs), Some(sums)) => {
            return Ok(super::records::step(
                (datasets, req, survey),
                (&m.coding, rs, sums),
                (weight_cases, replicates),
            )?
            .map_err(|next| Stage::Records(Box::new(next))))
        }
        // Parts of both kinds merged: every part counts its records.
        (Stage::Records(_), None) => {
            return Ok(Err(Stage::Records(Box::new(
                super::records::RowsStage::Count,
            ))))
        }
        _ => {}
    }
    let (formula, family) = model_of(req);
    let weight = part.weight.as_ref().map(|w| w.name.clone());
    check_weights(req, &weight_cases, weight.as_deref())?;
    let cube = part.finish();
    let mut notes = Vec::new();
    let (fitted, cov, method, df) = match (&m.stage, &cube.replicates, &survey) {
        (Stage::Scores(sc), _, _) => {
            let fitted = Fitted::with_fit(m.coding.clone(), &cube, sc.fit.clone())?;
            let (cov, df) = fitted.sandwich(&cube)?;
            match survey {
                Some(_) => (fitted, cov, "linearization".to_string(), Some(df)),
                None => {
                    notes.push(HC0_NOTE.into());
                    (fitted, cov, "sandwich (HC0)".to_string(), None)
                }
            }
        }
        (stage, Some(reps), Some(v)) => {
            let fitted = Fitted::new(m.coding.clone(), &cube, family)?;
            let (cov, df) = fitted.replicate_variance(&cube, reps, v, &mut notes)?;
            let df = match (df, stage) {
                (Some(df), _) => df,
                (None, Stage::Rank) => m.basis.len().saturating_sub(1) as f64,
                (None, _) => return Ok(Err(Stage::Rank)),
            };
            (fitted, cov, replicate_method(v), Some(df))
        }
        _ if survey.is_some() || weight.is_some() => {
            // Taylor, or weighted without a design: the sandwich's
            // scores, summed by the parts under this fit.
            let fitted = Fitted::new(m.coding.clone(), &cube, family)?;
            return Ok(Err(Stage::Scores(Box::new(Scored {
                coding: fitted.coding,
                fit: fitted.full,
            }))));
        }
        _ => {
            let fitted = Fitted::new(m.coding.clone(), &cube, family)?;
            let cov = super::summary::model_based(family, &fitted.cells, &fitted.full);
            (fitted, cov, "model-based".to_string(), None)
        }
    };
    Ok(Ok(fitted.summary(
        (&datasets.join(", "), formula, family, req),
        (survey.as_ref(), df, cov),
        (method, notes),
        (weight, weight_cases),
    )))
}
