//! Design-based standard errors from replicate weights (docs/SURVEY.md).
//!
//! Every estimate is a function of weighted sums per cell; the engine
//! accumulates those sums once for the full-sample weight and once for each
//! replicate weight, in the same scan. The estimate is recomputed from each
//! replicate's sums, and its variance is
//! `scale · Σ_r rscales[r] · (θ_r − θ̃)²`, with θ̃ the full-sample estimate
//! (`mse`, the Census Bureau / IPUMS formula) or the mean of the replicate
//! estimates (R `survey`'s default; `--no-mse`).

use microtab_engine::stats::t_quantile;
use microtab_store::{RepType, Replicates};
use serde::Serialize;

/// The design a result's standard errors come from, shown with it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct DesignInfo {
    /// Always `"replicate"` (replicate weights).
    pub method: &'static str,
    /// The kind of replication: `sdr`, `brr`, `fay`, `jk1`, `jkn`,
    /// `bootstrap` or `other`.
    #[serde(rename = "type")]
    pub kind: &'static str,
    /// The full-sample weight.
    pub weight: String,
    /// Number of replicate weights.
    pub replicates: usize,
    /// The overall scale `C` of the variance formula.
    pub scale: f64,
    /// Whether deviations are taken from the full-sample estimate (`true`)
    /// or from the mean of the replicate estimates.
    pub mse: bool,
    /// Degrees of freedom of the t intervals: replicates − 1.
    pub df: f64,
    /// Confidence level of the intervals.
    pub level: f64,
}

/// A standard error and confidence interval of one estimate.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Uncertainty {
    /// Standard error.
    pub se: f64,
    /// Lower end of the confidence interval.
    pub lo: Option<f64>,
    /// Upper end of the confidence interval.
    pub hi: Option<f64>,
    /// Coefficient of variation, SE / |estimate| (`None` at 0).
    pub cv: Option<f64>,
}

/// The variance formula of a replicate design, and the t quantile of its
/// intervals.
#[derive(Debug, Clone)]
pub(crate) struct RepVariance {
    pub(crate) info: DesignInfo,
    rscales: Vec<f64>,
    t: f64,
}

impl RepVariance {
    pub(crate) fn new(weight: &str, r: &Replicates, level: f64) -> Self {
        let n = r.weights.len();
        let df = n as f64 - 1.0;
        RepVariance {
            info: DesignInfo {
                method: "replicate",
                kind: r.kind.name(),
                weight: weight.to_string(),
                replicates: n,
                scale: r.scale,
                mse: r.mse,
                df,
                level,
            },
            rscales: r.rscales.clone(),
            t: t_quantile(level, df),
        }
    }

    /// The variance of an estimate `est` whose replicate estimates are
    /// `reps` (one per replicate weight). `NaN` if any replicate estimate
    /// is undefined.
    pub(crate) fn variance(&self, est: f64, reps: &[f64]) -> f64 {
        let centre = if self.info.mse {
            est
        } else {
            // R `svrVar`: the mean over the replicates with rscales > 0.
            let (s, k) = reps
                .iter()
                .zip(&self.rscales)
                .filter(|(_, &c)| c > 0.0)
                .fold((0.0, 0usize), |(s, k), (&x, _)| (s + x, k + 1));
            s / k as f64
        };
        self.info.scale
            * reps
                .iter()
                .zip(&self.rscales)
                .map(|(&x, &c)| c * (x - centre) * (x - centre))
                .sum::<f64>()
    }

    /// SE, t interval and CV of a total or a mean.
    pub(crate) fn wald(&self, est: f64, reps: &[f64]) -> Option<Uncertainty> {
        let se = self.variance(est, reps).sqrt();
        se.is_finite().then(|| Uncertainty {
            se,
            lo: Some(est - self.t * se),
            hi: Some(est + self.t * se),
            cv: (est != 0.0).then(|| se / est.abs()),
        })
    }

    /// SE, logit interval and CV of a percentage `pct` (0–100) whose
    /// replicate percentages are `reps`: `logit(p) ± t · SE(p) / (p(1 −
    /// p))` transformed back (R `svyciprop(method = "xlogit")`, Stata `svy:
    /// tab`); no interval at 0% or 100%.
    pub(crate) fn percent(&self, pct: f64, reps: &[f64]) -> Option<Uncertainty> {
        let se = self.variance(pct, reps).sqrt();
        if !se.is_finite() {
            return None;
        }
        let p = pct / 100.0;
        let (lo, hi) = if p > 0.0 && p < 1.0 {
            let l = (p / (1.0 - p)).ln();
            let h = self.t * (se / 100.0) / (p * (1.0 - p));
            let expit = |x: f64| 100.0 / (1.0 + (-x).exp());
            (Some(expit(l - h)), Some(expit(l + h)))
        } else {
            (None, None)
        };
        Some(Uncertainty {
            se,
            lo,
            hi,
            cv: (pct != 0.0).then(|| se / pct.abs()),
        })
    }
}

/// The default scale of a replicate design of `kind` with `n` replicates
/// (Fay's with coefficient `rho`); `None` for `jkn` and `other`, whose
/// scale and coefficients the user gives.
pub fn default_scale(kind: RepType, n: usize, rho: Option<f64>) -> Option<f64> {
    let r = n as f64;
    match kind {
        RepType::Sdr => Some(4.0 / r),
        RepType::Brr => Some(1.0 / r),
        RepType::Fay => rho.map(|rho| 1.0 / (r * (1.0 - rho) * (1.0 - rho))),
        RepType::Jk1 => Some((r - 1.0) / r),
        RepType::Bootstrap => Some(1.0 / (r - 1.0)),
        RepType::Jkn | RepType::Other => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn design(mse: bool, rscales: Vec<f64>) -> RepVariance {
        RepVariance::new(
            "W",
            &Replicates {
                kind: RepType::Other,
                weights: (0..rscales.len()).map(|i| format!("R{i}")).collect(),
                scale: 0.5,
                rscales,
                mse,
                rho: None,
            },
            0.95,
        )
    }

    /// Worked by hand: estimate 10, replicates 9, 12, 10, 11.
    /// MSE: 0.5 · (1 + 4 + 0 + 1) = 3. Mean of replicates 10.5: 0.5 ·
    /// (2.25 + 2.25 + 0.25 + 0.25) = 2.5. With rscales (1, 1, 0, 2) and
    /// the mean over the replicates whose coefficient is positive (32/3):
    /// 0.5 · ((5/3)² + (4/3)² + 2 · (1/3)²) = 0.5 · 43/9.
    #[test]
    fn replicate_variance_by_hand() {
        let reps = [9.0, 12.0, 10.0, 11.0];
        assert_eq!(design(true, vec![1.0; 4]).variance(10.0, &reps), 3.0);
        assert_eq!(design(false, vec![1.0; 4]).variance(10.0, &reps), 2.5);
        let v = design(false, vec![1.0, 1.0, 0.0, 2.0]).variance(10.0, &reps);
        assert!((v - 0.5 * 43.0 / 9.0).abs() < 1e-12, "{v}");
    }

    #[test]
    fn default_scales() {
        assert_eq!(default_scale(RepType::Sdr, 80, None), Some(0.05));
        assert_eq!(default_scale(RepType::Brr, 4, None), Some(0.25));
        assert_eq!(default_scale(RepType::Fay, 4, Some(0.5)), Some(1.0));
        assert_eq!(default_scale(RepType::Jk1, 5, None), Some(0.8));
        assert_eq!(default_scale(RepType::Jkn, 5, None), None);
    }
}
