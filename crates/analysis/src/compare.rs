//! Comparisons of groups: each group's mean (or a category's share)
//! minus a base group's, with its design-based SE, t, p and interval.
//!
//! A difference of domain means is the coefficient of the group in the
//! saturated model `Y ~ factor(G, base = BASE)`, and its linearized (or
//! replicate) variance is that coefficient's: so comparisons are answered
//! by [`crate::regress`], which gives R's `svyttest` for two groups
//! (`svyglm(Y ~ G)` with `degf + 1 − k` degrees of freedom) and
//! `svyby(covmat = TRUE)` + `svycontrast` estimates and SEs for more.
//! A share is the mean of a condition (`COL(c)`: 1 in category `c`, 0 in
//! another), so proportions are compared the same way.

use crate::family::Family;
use crate::model::{Inference, Regression};
use crate::{Request, Result};
use microtab_engine::ScanOptions;
use microtab_store::Dataset;
use serde::Serialize;

/// One group compared with the base.
#[derive(Debug, Clone, Serialize)]
pub struct Difference {
    /// The group's displayed value.
    pub group: String,
    /// Its estimate minus the base's (`estimate`), with its SE, t test
    /// and interval.
    #[serde(flatten)]
    pub inference: Inference,
}

/// Groups compared with a base.
#[derive(Debug, Clone, Serialize)]
pub struct Comparison {
    /// The base group's displayed value.
    pub base: String,
    /// The base's estimate (its mean or share).
    pub base_estimate: f64,
    /// Every other group, in the grouping variable's order.
    pub differences: Vec<Difference>,
    /// Degrees of freedom of the t tests (`None`: normal).
    pub df: Option<f64>,
    /// The Wald test that every group equals the base (one-way design-based
    /// ANOVA; R `regTermTest`).
    pub wald: Option<crate::model::Wald>,
    /// How the standard errors were computed.
    pub method: String,
}

/// One row category's shares compared across the columns.
#[derive(Debug, Clone, Serialize)]
pub struct RowComparison {
    /// The row category's displayed value.
    pub row: String,
    /// Its value label.
    pub label: Option<String>,
    /// Its share in each column minus its share in the base column.
    #[serde(flatten)]
    pub comparison: Comparison,
}

/// For each row category of `rows` (a plain variable's), its share among
/// the records of each category of `col` minus its share in the column
/// `base`: the mean of the condition `row(r)` compared across the columns
/// ([`compare_means`]), R's `svyby(~I(row == r), ~col, svymean, covmat =
/// TRUE)` + `svycontrast`.
pub fn compare_shares(
    ds: &Dataset,
    req: &Request,
    (row, col, base): (&str, &str, &str),
    rows: &[microtab_engine::Category],
    opts: &ScanOptions,
) -> Result<Vec<RowComparison>> {
    rows.iter()
        .filter(|r| !r.missing)
        .map(|r| {
            let (formula, factor) = share_model(ds, (row, col, base), &r.display)?;
            let m = crate::regress::regress(ds, req, &formula, Family::Gaussian, opts)?;
            Ok(row_comparison(r, comparison(m, base, &factor)))
        })
        .collect()
}

/// The model of the shares of the row category `value` of `row` (a
/// plain variable's) compared across the columns of `col` with `base`,
/// and its factor's name.
pub(crate) fn share_model(
    ds: &Dataset,
    (row, col, base): (&str, &str, &str),
    value: &str,
) -> Result<(String, String)> {
    let var = check_share_row(ds, row)?;
    let cond = format!("{}({})", name_in(ds, &var.name), quote_value(value));
    Ok(model_of(ds, &cond, col, base))
}

/// The variable of a table's rows whose shares are compared: a variable
/// as stored (its name as the dataset spells it); a recode or a
/// restriction has no condition of a category.
pub(crate) fn check_share_row<'a>(
    ds: &'a Dataset,
    row: &str,
) -> Result<&'a microtab_store::Variable> {
    ds.variable(row).map_err(|_| crate::Error::CompareRecode {
        var: row.to_string(),
    })
}

/// A row category's comparison.
pub(crate) fn row_comparison(r: &microtab_engine::Category, c: Comparison) -> RowComparison {
    RowComparison {
        row: r.display.clone(),
        label: r.label.clone(),
        comparison: c,
    }
}

/// `var`'s mean in each group of `by` minus its mean in the group `base`
/// (a displayed value of `by`), under `req`'s options (filter, weight,
/// design, level). `var` may be a condition (`EMPSTAT(1)`): the shares are
/// compared.
pub fn compare_means(
    ds: &Dataset,
    req: &Request,
    var: &str,
    by: &str,
    base: &str,
    opts: &ScanOptions,
) -> Result<Comparison> {
    let (formula, factor) = model_of(ds, var, by, base);
    let r = crate::regress::regress(ds, req, &formula, Family::Gaussian, opts)?;
    Ok(comparison(r, base, &factor))
}

/// The model whose coefficients are `var`'s differences between the
/// groups of `by` and the group `base`, and its factor's name.
pub(crate) fn model_of(ds: &Dataset, var: &str, by: &str, base: &str) -> (String, String) {
    let factor = format!("factor({}, base = {})", name_in(ds, by), quote_value(base));
    (format!("{} ~ {factor}", name_in(ds, var)), factor)
}

/// The request of that model under `req`'s options.
pub(crate) fn model_request(req: &Request, formula: &str) -> Request {
    Request {
        analysis: crate::Analysis::Regress {
            formula: formula.to_string(),
            family: Family::Gaussian,
        },
        diff: None,
        test_mean: None,
        quantiles: Vec::new(),
        ..req.clone()
    }
}

/// A variable's whole name as the formula grammar reads it (between
/// backticks); anything else (a recode, a condition) as it is.
fn name_in(ds: &Dataset, s: &str) -> String {
    match ds.variable(s) {
        Ok(v) if v.name == s => format!("`{}`", s.replace('`', "``")),
        _ => s.to_string(),
    }
}

/// A displayed value as the formula grammar reads a base: quoted when it
/// holds anything but letters, digits, `.`, `-` and `_`.
fn quote_value(v: &str) -> String {
    if !v.is_empty()
        && v.chars()
            .all(|c| c.is_alphanumeric() || matches!(c, '.' | '-' | '_'))
    {
        v.to_string()
    } else {
        format!("\"{}\"", v.replace('"', "\"\""))
    }
}

/// The regression's coefficients as differences from the base (the
/// columns of `factor` are named `factor` + the group's value).
///
/// A group whose values are one constant like the base's (a category's
/// share of 0 in both columns) differs from it by exactly 0 with no
/// sampling variance, as R's `svycontrast` gives it; the fit leaves
/// rounding noise there (an estimate and an SE near 1e-16, whose t would
/// be noise). Such a difference is given as 0 with an SE of 0 and no test,
/// and is left out of the Wald test.
pub(crate) fn comparison(r: Regression, base: &str, factor: &str) -> Comparison {
    let p = r.coefficients.len();
    let beta: Vec<f64> = r
        .coefficients
        .iter()
        .map(|c| c.inference.estimate)
        .collect();
    // The groups' own estimates set the scale of the rounding noise.
    let scale = beta[1..]
        .iter()
        .map(|d| (beta[0] + d).abs())
        .fold(beta[0].abs(), f64::max);
    let noise = 1e-12 * scale;
    let mut tested = Vec::new();
    let mut coefs = r.coefficients.into_iter();
    let intercept = coefs.next().expect("a model with an intercept");
    let differences = coefs
        .enumerate()
        .map(|(i, c)| {
            let mut inference = c.inference;
            if inference.se <= noise && inference.estimate.abs() <= noise {
                inference = Inference::exact_zero();
            } else {
                tested.push(i + 1);
            }
            Difference {
                group: c.term.strip_prefix(factor).unwrap_or(&c.term).to_string(),
                inference,
            }
        })
        .collect();
    let wald = if tested.len() + 1 == p {
        r.wald
    } else {
        let cov: Vec<f64> = r.covariance.iter().flatten().copied().collect();
        crate::model::summary::wald(&beta, &cov, p, &tested, r.df)
    };
    // A base whose values are one constant 0 (a share of 0) is fitted
    // as rounding noise.
    let b0 = intercept.inference.estimate;
    Comparison {
        base: base.to_string(),
        base_estimate: if b0.abs() <= noise { 0.0 } else { b0 },
        differences,
        df: r.df,
        wald,
        method: r.provenance.method,
    }
}
