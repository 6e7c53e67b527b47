//! A model fitted record by record over parts of the data (ranges of one
//! dataset's records, several datasets, a Dask cluster's tasks): its
//! predictors have too many combinations for a cube, so each pass of
//! [`super::rows`] becomes a round of partial results that merge exactly
//! (`crate::Partial` carries them in its [`super::parts::ModelPart`]):
//! 1. each part counts its complete records, with the categories of the
//!    model's factors among them; merged, the factors' levels are set;
//! 2. one round per IRLS step of the full fit (each part sums `X'WX` and
//!    `X'Wz` at the step's coefficients); then under replicate weights one
//!    round per step of all the replicates' refits, and a round in which
//!    each part gives a basis of its records' replicate weights (R's
//!    domain `degf`); under a Taylor design (and weighted without one) a
//!    round in which each part sums its PSUs' scores under the full fit,
//!    a PSU cut by a part's edge kept open by key until the parts meet.
//!
//! The fit's arithmetic is the one-dataset path's ([`super::rows::Driver`]).

use super::coding::Coding;
use super::fit::{Cells, Fit};
use super::fitted::{replicate_method, HC0_NOTE};
use super::rows::{planned_cells, score_covariance, setup, Driver, IrlsSums, Pass, Passes, Strata};
use super::summary::{model_based, summarize};
use super::{Family, ModelError, Regression};
use crate::survey::Survey;
use crate::{Error, Request, Result};
use microtab_engine::{Category, PartStratum, ScanOptions, WeightCases};
use microtab_store::Dataset;
use serde::{Deserialize, Serialize};
use std::collections::HashMap;
use std::sync::Arc;

/// A round of a model fitted record by record over parts.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) enum RowsStage {
    /// Each part counts its complete records (the first round).
    Count,
    /// A step of the full fit or of the replicates' refits.
    Fit(Box<Carry>, Box<Driver>),
    /// Each part sums its PSUs' scores under the full fit.
    Scores(Box<Carry>),
    /// Each part's basis of its records' replicate weights.
    Rank(Box<Carry>),
}

/// What the rounds so far found, carried to the next.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct Carry {
    /// The coding with the factors' levels set.
    coding: Coding,
    /// Complete records, their `Σ w`, `Σ w·y`, `Σ w·s`.
    n: u64,
    sums: [f64; 3],
    /// The weight's name and its records' cases.
    weight: Option<String>,
    cases: Option<WeightCases>,
    /// The full fit, once made.
    full: Option<Fit>,
    /// The replicates' covariance, once made.
    cov: Option<Vec<f64>>,
    notes: Vec<String>,
}

/// A part's sums of one round.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) enum RowsSums {
    /// Complete records: per factor dimension the categories among them,
    /// their number and `Σ w`, `Σ w·y`, `Σ w·s`; the weight's name.
    Count {
        occurring: Vec<Vec<Category>>,
        n: u64,
        sums: [f64; 3],
        weight: Option<String>,
    },
    /// An IRLS step's sums.
    Irls(IrlsSums),
    /// The scores' sums by PSU.
    Scores(ScoresPart),
    /// A basis of the records' replicate weights.
    Rank(Vec<Vec<f64>>),
}

/// A part's scores: per stratum (united with other parts' by dataset and
/// key) the sums of its closed PSUs' totals, and the PSUs that may
/// continue in another part, by stratum and key.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct ScoresPart {
    strata: Vec<PartStratum>,
    sums: Vec<Strata>,
    open: Vec<((u32, u64), Vec<f64>)>,
    unknown: u64,
    /// The design averages lonely PSUs' strata.
    average: bool,
}

/// A part of a model fitted record by record: its round's sums and the
/// weight's record cases (first round).
pub(crate) type RowsPart = (RowsSums, Option<WeightCases>);

/// The round `stage` of the model of `req` (formula and family) over
/// `ds` (its [`Request::rows`] when set).
pub(crate) fn partial(
    ds: &Dataset,
    req: &Request,
    (formula, family): (&microtab_engine::Formula, Family),
    stage: &RowsStage,
    opts: &ScanOptions,
) -> Result<RowsPart> {
    let design = crate::checks::design_of(ds, req, true)?;
    let coding = Coding::new(ds, formula, family, true)?;
    let (mut passes, mut lay) = setup(ds, req, (&coding, &design), (family, false), opts)?;
    passes.query.rows = req.rows.clone();
    let carry = match stage {
        RowsStage::Count => {
            let c = passes.count(&Arc::new(lay))?;
            let q = microtab_engine::Query {
                fold: None,
                ..passes.query.clone()
            };
            let cases = microtab_engine::weight_cases(ds, &q, opts, c.n)?;
            let sums = RowsSums::Count {
                occurring: c.occurring,
                n: c.n,
                sums: c.sums,
                weight: passes.query.weight.clone(),
            };
            return Ok((sums, cases));
        }
        RowsStage::Fit(c, _) | RowsStage::Scores(c) | RowsStage::Rank(c) => c,
    };
    if carry.coding.dims != coding.dims || carry.coding.measure != coding.measure {
        return Err(Error::Design(
            "a round of another model: compute the first round again".into(),
        ));
    }
    let coding = &carry.coding;
    lay.p = coding.names.len();
    lay.colvals = coding.column_values();
    lay.cells = planned_cells(coding, &passes.planned()?);
    let lay = Arc::new(lay);
    let sums = match stage {
        RowsStage::Fit(_, d) => {
            let fits = d.fits().ok_or_else(|| {
                Error::Design("a fit's round after its last: compute it again".into())
            })?;
            RowsSums::Irls(passes.run(&lay, Pass::Irls(fits))?.0.irls_sums())
        }
        RowsStage::Scores(c) => {
            let full = c.full.as_ref().expect("a scores round has the fit");
            let (st, _) = passes.run(&lay, Pass::Scores(full.beta.clone()))?;
            RowsSums::Scores(scores_part(ds, &passes, &design, st.into_scores())?)
        }
        RowsStage::Rank(_) => RowsSums::Rank(super::degf::replicate_basis(
            ds,
            &passes.query,
            &passes.values[..lay.model_values],
            &passes.values[lay.replicates.clone()],
            opts,
        )?),
        RowsStage::Count => unreachable!("answered above"),
    };
    Ok((sums, None))
}

/// A part's scores' sums with its design's strata (none: each record its
/// own PSU in one uncentred stratum, HC0).
fn scores_part(
    ds: &Dataset,
    passes: &Passes<'_>,
    design: &Option<(microtab_store::Design, Survey)>,
    (strata, open, unknown): super::rows::ScoreSums,
) -> Result<ScoresPart> {
    let (list, average) = match design.as_ref().and_then(|(d, _)| d.taylor.as_ref()) {
        Some(t) => {
            let keys = &passes.taylor.as_ref().expect("a Taylor design's keys").keys;
            let (coef, average) = crate::taylor::coefficients(t);
            let list = crate::sums::part_strata(ds, keys, (&coef, &average))?;
            (list, !average.is_empty())
        }
        None => (
            vec![PartStratum {
                key: 0,
                value: String::new(),
                c: 1.0,
                d: 0.0,
                lonely: false,
                source: ds.dir().display().to_string(),
            }],
            false,
        ),
    };
    let mut sums = vec![Strata::default(); list.len()];
    for (h, s) in strata {
        sums[h] = s;
    }
    let mut open: Vec<_> = open
        .into_iter()
        .map(|((h, k), u)| ((h as u32, k), u))
        .collect();
    open.sort_by_key(|e| e.0);
    Ok(ScoresPart {
        strata: list,
        sums,
        open,
        unknown,
        average,
    })
}

impl ScoresPart {
    /// Unites two parts' scores: strata by (dataset, key), a value in two
    /// datasets refused unless uncentred (the engine's rule); open PSUs
    /// added by stratum and key.
    fn merge(self, o: ScoresPart) -> Result<ScoresPart> {
        let stratified = self
            .strata
            .iter()
            .chain(&o.strata)
            .any(|s| !s.value.is_empty());
        let (strata, maps) = microtab_engine::unite_strata(&self.strata, &o.strata, stratified)?;
        let mut sums = vec![Strata::default(); strata.len()];
        let mut open: HashMap<(u32, u64), Vec<f64>> = HashMap::new();
        for (part, map) in [self.sums, o.sums].into_iter().zip(&maps) {
            for (h, s) in part.iter().enumerate() {
                sums[map[h]].absorb(s);
            }
        }
        for (part, map) in [self.open, o.open].into_iter().zip(&maps) {
            for ((h, k), u) in part {
                let e = open
                    .entry((map[h as usize] as u32, k))
                    .or_insert_with(|| vec![0.0; u.len()]);
                e.iter_mut().zip(&u).for_each(|(a, b)| *a += b);
            }
        }
        let mut open: Vec<_> = open.into_iter().collect();
        open.sort_by_key(|e| e.0);
        Ok(ScoresPart {
            strata,
            sums,
            open,
            unknown: self.unknown + o.unknown,
            average: self.average || o.average,
        })
    }

    /// The design covariance of the score totals of `p` columns, its
    /// scale for averaged strata, and the PSUs and strata with records.
    fn finish(mut self, p: usize) -> Result<(Vec<f64>, f64, u64, u64)> {
        if self.unknown > 0 {
            return Err(Error::UnknownStrata {
                records: self.unknown,
            });
        }
        for ((h, _), u) in std::mem::take(&mut self.open) {
            self.sums[h as usize].close(&u);
        }
        let strata = self
            .sums
            .iter()
            .zip(&self.strata)
            .map(|(s, st)| (s, [st.c, st.d], st.lonely));
        Ok(score_covariance(strata, p, self.average))
    }
}

impl RowsSums {
    /// Unites two parts' sums of the same round.
    pub(crate) fn merge(self, o: RowsSums) -> Result<RowsSums> {
        Ok(match (self, o) {
            (
                RowsSums::Count {
                    occurring: a,
                    n,
                    sums,
                    weight,
                },
                RowsSums::Count {
                    occurring: b,
                    n: m,
                    sums: t,
                    ..
                },
            ) => RowsSums::Count {
                occurring: a
                    .iter()
                    .zip(&b)
                    .map(|(a, b)| crate::sums::unite_categories(a, b))
                    .collect(),
                n: n + m,
                sums: [sums[0] + t[0], sums[1] + t[1], sums[2] + t[2]],
                weight,
            },
            (RowsSums::Irls(a), RowsSums::Irls(b)) => RowsSums::Irls(a.merge(&b)),
            (RowsSums::Scores(a), RowsSums::Scores(b)) => RowsSums::Scores(a.merge(b)?),
            (RowsSums::Rank(a), RowsSums::Rank(b)) => {
                RowsSums::Rank(super::degf::unite_bases(a, b))
            }
            _ => {
                return Err(Error::Design(
                    "the parts are of different rounds: compute them again".into(),
                ))
            }
        })
    }
}

/// What a step gives: the model, or its next round.
type Next = std::result::Result<Regression, RowsStage>;

/// The model from the merged parts' sums of round `stage`, or the next
/// round; `coding` is the model's coding before its levels are known,
/// `replicates` the design's replicate weights.
pub(crate) fn step(
    (datasets, req, survey): (&[String], &Request, Option<Survey>),
    (coding, stage, sums): (&Coding, &RowsStage, &RowsSums),
    (cases, replicates): (Option<WeightCases>, usize),
) -> Result<Next> {
    let (formula, family) = match &req.analysis {
        crate::Analysis::Regress { formula, family } => (formula.as_str(), *family),
        _ => unreachable!("a model's request"),
    };
    let wrong = || Error::Design("the parts are of another round: compute them again".into());
    match (stage, sums) {
        (
            RowsStage::Count,
            RowsSums::Count {
                occurring,
                n,
                sums,
                weight,
            },
        ) => {
            crate::checks::check_weights(req, &cases, weight.as_deref())?;
            // No records: no levels to code either.
            if *n == 0 || sums[0] == 0.0 {
                return Err(ModelError::Empty.into());
            }
            let mut coding = coding.clone();
            coding.set_levels(occurring)?;
            let p = coding.names.len();
            if (*n as usize) < p {
                return Err(ModelError::TooFew {
                    columns: p,
                    cells: *n as usize,
                }
                .into());
            }
            let carry = Carry {
                coding,
                n: *n,
                sums: *sums,
                weight: weight.clone(),
                cases,
                full: None,
                cov: None,
                notes: Vec::new(),
            };
            Ok(Err(RowsStage::Fit(
                Box::new(carry),
                Box::new(Driver::new(None, 0)),
            )))
        }
        (RowsStage::Fit(carry, driver), RowsSums::Irls(s)) => {
            let mut carry = carry.clone();
            let mut d = driver.clone();
            let p = carry.coding.names.len();
            d.absorb(s, (p, family), &carry.coding.names);
            if d.fits().is_some() {
                return Ok(Err(RowsStage::Fit(carry, d)));
            }
            if d.refits() {
                let betas: Vec<Option<Vec<f64>>> = d
                    .results()
                    .into_iter()
                    .map(|r| r.ok().map(|f| f.beta))
                    .collect();
                let dropped = betas.iter().filter(|b| b.is_none()).count();
                if dropped > 0 {
                    carry.notes.push(format!(
                        "{dropped} replicates could not be refitted and were left out"
                    ));
                }
                let v = survey.as_ref().expect("refits under replicate weights");
                let full = carry.full.as_ref().expect("refits of a fit");
                let cov = v.covariance(&full.beta, &betas);
                carry.cov = Some((0..p * p).map(|i| cov[i / p][i % p]).collect());
                return Ok(Err(RowsStage::Rank(carry)));
            }
            let extreme = d.extreme;
            let full = d.results().remove(0)?;
            if extreme > 0 {
                carry.notes.push(super::rows::separation_note(extreme));
            }
            let (beta, dev) = (full.beta.clone(), full.deviance);
            carry.full = Some(full);
            Ok(Err(match &survey {
                Some(_) if replicates > 0 => {
                    RowsStage::Fit(carry, Box::new(Driver::new(Some((&beta, dev)), replicates)))
                }
                Some(_) => RowsStage::Scores(carry),
                None if carry.weight.is_some() => RowsStage::Scores(carry),
                None => {
                    let cells = cells_of(&carry);
                    let full = carry.full.as_ref().expect("fitted");
                    let cov = model_based(family, &cells, full);
                    let c = *carry;
                    return Ok(Ok(answer(
                        (datasets, formula, family, req),
                        c,
                        (cov, "model-based".into(), None),
                        None,
                    )));
                }
            }))
        }
        (RowsStage::Scores(carry), RowsSums::Scores(sp)) => {
            let mut c = (**carry).clone();
            let p = c.coding.names.len();
            let (v, scale, psus, strata) = sp.clone().finish(p)?;
            let full = c.full.as_ref().expect("fitted");
            let cov = super::fit::sandwich(&full.ainv, &v, p, scale);
            let (method, df) = match &survey {
                Some(_) => (
                    "linearization".to_string(),
                    Some(psus as f64 - strata as f64),
                ),
                None => {
                    c.notes.push(HC0_NOTE.into());
                    ("sandwich (HC0)".to_string(), None)
                }
            };
            Ok(Ok(answer(
                (datasets, formula, family, req),
                c,
                (cov, method, df),
                survey,
            )))
        }
        (RowsStage::Rank(carry), RowsSums::Rank(basis)) => {
            let mut c = (**carry).clone();
            let cov = c.cov.take().expect("the replicates' covariance");
            let v = survey.ok_or_else(wrong)?;
            let df = basis.len().saturating_sub(1) as f64;
            let method = replicate_method(&v);
            Ok(Ok(answer(
                (datasets, formula, family, req),
                c,
                (cov, method, Some(df)),
                Some(v),
            )))
        }
        _ => Err(wrong()),
    }
}

/// The model's one cell of sums (its records' `Σ w`, `Σ w·y`, `Σ w·s`).
fn cells_of(c: &Carry) -> Cells {
    let p = c.coding.names.len();
    Cells {
        p,
        x: vec![0.0; p],
        n: vec![c.n],
        w: vec![c.sums[0]],
        y: vec![c.sums[1]],
        s: vec![c.sums[2]],
        s_known: true,
    }
}

/// The model's summary from what the rounds found, its covariance,
/// method and domain df (`None`: normal), under `survey`.
fn answer(
    (datasets, formula, family, req): (&[String], &str, Family, &Request),
    c: Carry,
    (cov, method, df): (Vec<f64>, String, Option<f64>),
    survey: Option<Survey>,
) -> Regression {
    let cells = cells_of(&c);
    let survey = survey.map(|mut v| {
        if let Some(df) = df {
            v.info.df = df;
        }
        v
    });
    let full = c.full.as_ref().expect("fitted");
    let mut r = summarize(
        (&datasets.join(", "), formula, family, req),
        (&cells, full, cov, &c.coding.names),
        (survey.as_ref(), method, c.notes),
        (c.weight, c.cases),
        c.coding.intercept,
    );
    r.fitted_on = "records".into();
    r
}
