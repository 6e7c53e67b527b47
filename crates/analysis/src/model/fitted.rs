//! What fitting a model on a cube shares between one dataset
//! ([`crate::regress`]) and parts of the data ([`super::parts`]): the
//! cells and full-sample fit, the replicates' refits, the scores'
//! sandwich, the summary.

use super::coding::Coding;
use super::fit::{self, Cells};
use super::summary::summarize;
use super::{Family, ModelError, Regression};
use crate::survey::Survey;
use crate::Request;
use microtab_engine::{Cube, Query, Scores, TaylorQuery};
use std::sync::Arc;

/// The note of a weighted model without a design.
pub(crate) const HC0_NOTE: &str =
    "no survey design: sandwich (HC0) standard errors, each record independent";

/// The method of a replicate design's standard errors.
pub(crate) fn replicate_method(v: &Survey) -> String {
    format!("replicate weights ({})", v.info.kind)
}

/// The Taylor query of a weighted model without a design: each record
/// its own PSU, no centring (HC0).
pub(crate) fn hc0_query() -> TaylorQuery {
    TaylorQuery {
        strata_keys: vec![0],
        coef: vec![[1.0, 0.0]],
        contiguous: true,
        ..TaylorQuery::default()
    }
}

/// Sets `q` to sum, per PSU, the scores of the fit `fitted` (the
/// sandwich's middle): its Taylor part `tq` with the scores, no
/// replicate weights.
pub(crate) fn scores_query(q: &mut Query, tq: TaylorQuery, fitted: &Fitted, family: Family) {
    debug_assert_eq!(family, fitted.coding.family());
    scores_with(q, tq, &fitted.coding, &fitted.full.beta);
}

/// [`scores_query`] of the coefficients `beta` coded by `coding`.
pub(crate) fn scores_with(q: &mut Query, mut tq: TaylorQuery, coding: &Coding, beta: &[f64]) {
    let (p, beta) = (beta.len(), beta.to_vec());
    let c = Arc::new(coding.clone());
    let family = coding.family();
    tq.scores = Some(Scores {
        len: p,
        of: Arc::new(move |cats| c.score(family, &beta, cats)),
    });
    q.taylor = Some(tq);
    q.replicates.clear();
}

/// A model's cells and its full-sample fit, from the cube of its
/// variables (one dataset's, or merged parts').
#[derive(Debug, Clone)]
pub(crate) struct Fitted {
    /// The coding, its levels set from the cube.
    pub coding: Coding,
    pub cells: Cells,
    pub full: fit::Fit,
}

impl Fitted {
    /// Fits `family` on `cube`: an error for a model without weight, with
    /// fewer cells than columns, or perfectly separated.
    pub(crate) fn new(mut coding: Coding, cube: &Cube, family: Family) -> crate::Result<Fitted> {
        let cells = coding.cells(cube)?;
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
        let full = fit::fit(family, &cells, (&cells.w, &cells.y), None, &coding.names)?;
        coding.check_separation(family, &cells, &full.beta)?;
        Ok(Fitted {
            coding,
            cells,
            full,
        })
    }

    /// The cells of `cube` under the fit `full` (made on a cube of the
    /// same sums: a model's first round over parts).
    pub(crate) fn with_fit(
        mut coding: Coding,
        cube: &Cube,
        full: fit::Fit,
    ) -> crate::Result<Fitted> {
        let cells = coding.cells(cube)?;
        if cells.p != full.beta.len() {
            return Err(crate::Error::Design(
                "the model's columns differ between its rounds: compute them again".into(),
            ));
        }
        Ok(Fitted {
            coding,
            cells,
            full,
        })
    }

    /// The replicate covariance of the coefficients, and the domain's df
    /// when the cells' replicate sums are of full rank (`None`: a pass
    /// over the records must find their rank).
    pub(crate) fn replicate_variance(
        &self,
        cube: &Cube,
        reps: &microtab_engine::RepCells,
        v: &Survey,
        notes: &mut Vec<String>,
    ) -> crate::Result<(Vec<f64>, Option<f64>)> {
        let width = reps.w.len();
        let sums = (0..cube.counts.len())
            .filter(|&c| self.coding.in_model(c))
            .map(|c| reps.w.iter().map(|w| w[c]).collect());
        let df = crate::model::degf::full_rank_degf(sums, width);
        let family = self.coding.family();
        let cov = replicate_cov(
            family,
            &self.cells,
            &self.coding,
            cube,
            reps,
            &self.full,
            v,
            notes,
        )?;
        Ok((cov, df))
    }

    /// The sandwich covariance `A⁻¹ Σ A⁻¹`, `Σ` the design covariance of
    /// the score totals of `cube` (a [`scores_query`]'s), and the design's
    /// df over the model's domain (PSUs − strata with records in it).
    pub(crate) fn sandwich(&self, cube: &Cube) -> crate::Result<(Vec<f64>, f64)> {
        let t = cube.taylor.as_ref().expect("Taylor sums asked for");
        if t.unknown_strata > 0 {
            return Err(crate::Error::UnknownStrata {
                records: t.unknown_strata,
            });
        }
        let s = t.scores.as_ref().expect("scores asked for");
        let p = self.full.beta.len();
        // Σ scaled for averaged lonely PSUs.
        let cov = fit::sandwich(&self.full.ainv, s, p, t.all_scale);
        Ok((cov, t.domain_psus as f64 - t.domain_strata as f64))
    }

    /// The model's result: `survey` with the domain's df, the covariance.
    pub(crate) fn summary(
        &self,
        (dataset, formula, family, req): (&str, &str, Family, &Request),
        (survey, domain_df, cov): (Option<&Survey>, Option<f64>, Vec<f64>),
        (method, notes): (String, Vec<String>),
        weights: (Option<String>, Option<microtab_engine::WeightCases>),
    ) -> Regression {
        let survey = survey.map(|v| {
            let mut v = v.clone();
            if let Some(df) = domain_df {
                v.info.df = df;
            }
            v
        });
        summarize(
            (dataset, formula, family, req),
            (&self.cells, &self.full, cov, &self.coding.names),
            (survey.as_ref(), method, notes),
            weights,
            self.coding.intercept,
        )
    }
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
