//! Regression models with design-based standard errors (R `svyglm`):
//! linear, logit, probit and Poisson, from an R-style formula.
//!
//! Every model variable is a grouping dimension of one engine query, so
//! the model is fitted on the cube of the predictors' combinations
//! (`fit`): `Σ w` and `Σ w·y` per cell are all the estimating equations
//! need. Replicate designs refit on each replicate's cell sums (from the
//! same scan), started at the full-sample fit. Taylor designs (and
//! weighted data without a design) take a second scan that sums each
//! record's score `w·x·(y − μ)·μ'/V` PSU by PSU (the engine's linear
//! [`Scores`]); the variance is the sandwich `A⁻¹ Σ A⁻¹` (R
//! `svy.varcoef`). Records missing any model variable are out of the
//! domain, as are those the filter leaves out; the design is never
//! rebuilt. This module holds the model's types, its coding and its fit;
//! `crate::regress` runs the scans.

pub(crate) mod coding;
pub(crate) mod degf;
pub(crate) mod error;
pub(crate) mod fit;
pub(crate) mod fitted;
pub(crate) mod parts;
pub(crate) mod records;
pub(crate) mod rows;
pub(crate) mod summary;

pub use crate::family::Family;

use crate::survey::Provenance;
use serde::Serialize;

pub use error::ModelError;

/// A fitted model with its standard errors.
#[derive(Debug, Clone, Serialize)]
pub struct Regression {
    /// The dataset (its path; the HTTP API gives its served name).
    pub dataset: String,
    /// The formula as given.
    pub formula: String,
    /// The family.
    pub family: Family,
    /// Per column of the model: its estimate and inference.
    pub coefficients: Vec<Coefficient>,
    /// Records used (a value of every model variable, in the filter).
    pub n: u64,
    /// Their weight (records when unweighted).
    pub weighted_n: f64,
    /// Degrees of freedom of the t tests and intervals: the design's
    /// `df + 1 − columns` (R `svyglm`'s `df.residual`), `n − columns`
    /// without a design (gaussian), `None` for the normal (glm families
    /// without a design).
    pub df: Option<f64>,
    /// The design's degrees of freedom (PSUs − strata, replicate rank −
    /// 1), without a design `None`.
    pub design_df: Option<f64>,
    /// R²: 1 − residual over total weighted sum of squares (gaussian).
    pub r_squared: Option<f64>,
    /// The deviance with the weights as given (R `svyglm` rescales the
    /// weights to mean 1 before computing its deviance); `None` for a
    /// Poisson model, whose `Σ w·y·log y` the scan does not sum.
    pub deviance: Option<f64>,
    /// The deviance of the intercept-only model, same weights.
    pub null_deviance: Option<f64>,
    /// 1 − deviance / null deviance (McFadden's; gaussian: R²).
    pub pseudo_r_squared: Option<f64>,
    /// The Wald test that every coefficient but the intercept is 0 (R
    /// `regTermTest` of all terms).
    pub wald: Option<Wald>,
    /// IRLS iterations of the full-sample fit.
    pub iterations: usize,
    /// What the model was fitted on: `cells` (the predictors'
    /// combinations, one scan) or `records` (predictors with too many
    /// combinations: a pass over the records per IRLS step).
    pub fitted_on: String,
    /// Records of the domain whose weight is negative, zero or missing
    /// (weighted models).
    pub weight_cases: Option<microtab_engine::WeightCases>,
    /// How the standard errors were computed, and over what.
    #[serde(flatten)]
    pub provenance: Provenance,
    /// The covariance matrix of the estimates, row by row.
    pub covariance: Vec<Vec<f64>>,
}

/// One coefficient.
#[derive(Debug, Clone, Serialize)]
pub struct Coefficient {
    /// Its name as R prints it (`factor(EDUC)2`, `AGE:factor(SEX)2`).
    pub term: String,
    /// Its estimate and inference.
    #[serde(flatten)]
    pub inference: Inference,
}

/// An estimate with its t test and interval.
#[derive(Debug, Clone, Serialize)]
pub struct Inference {
    /// The estimate.
    pub estimate: f64,
    /// Its standard error.
    pub se: f64,
    /// estimate / se.
    pub t: f64,
    /// Two-sided p-value (t with [`Regression::df`], or normal).
    pub p: f64,
    /// Lower end of the confidence interval.
    pub lo: f64,
    /// Upper end.
    pub hi: f64,
}

impl Inference {
    /// A difference that is exactly 0 with no sampling variance: no test
    /// or interval beyond the point.
    pub(crate) fn exact_zero() -> Inference {
        Inference {
            estimate: 0.0,
            se: 0.0,
            t: f64::NAN,
            p: f64::NAN,
            lo: 0.0,
            hi: 0.0,
        }
    }
}

/// A Wald F test of several coefficients.
#[derive(Debug, Clone, Serialize)]
pub struct Wald {
    /// The F statistic (the chi-square over its df).
    pub f: f64,
    /// Numerator df: the coefficients tested.
    pub ndf: f64,
    /// Denominator df (`None`: the chi-square test, no design).
    pub ddf: Option<f64>,
    /// Its p-value.
    pub p: f64,
}
