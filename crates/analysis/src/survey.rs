//! Design-based standard errors from replicate weights or Taylor
//! linearization (docs/SURVEY.md).
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

/// What a model's, ratio's or correlation's inference rests on: how its
/// standard errors were computed, over which records, with which weight
/// and level (flattened into each result's JSON).
#[derive(Debug, Clone, Serialize)]
pub struct Provenance {
    /// How the standard errors were computed.
    pub method: String,
    /// The design, when one was used.
    pub design: Option<DesignInfo>,
    /// The weight, if any.
    pub weight: Option<String>,
    /// The filter, if any.
    pub filter: Option<String>,
    /// The confidence level of the intervals.
    pub level: f64,
    /// Remarks on the method (the sandwich without a design, replicates
    /// left out, records of missing weight …).
    pub notes: Vec<String>,
}

impl Provenance {
    /// The provenance of a result of `req` computed by `method` under
    /// `design` (if any), weighted by `weight`.
    pub(crate) fn new(
        method: String,
        design: Option<&Survey>,
        weight: Option<String>,
        req: &crate::Request,
        notes: Vec<String>,
    ) -> Provenance {
        Provenance {
            method,
            design: design.map(|v| v.info.clone()),
            weight,
            filter: req.shown_filter(),
            level: req.level,
            notes,
        }
    }
}

/// The design a result's standard errors come from, shown with it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct DesignInfo {
    /// `"replicate"` (replicate weights) or `"taylor"` (linearization).
    pub method: &'static str,
    /// The kind of replication: `sdr`, `brr`, `fay`, `jk1`, `jkn`,
    /// `bootstrap` or `other`; `linearization` for Taylor designs.
    #[serde(rename = "type")]
    pub kind: &'static str,
    /// The full-sample weight.
    pub weight: String,
    /// Number of replicate weights (replicate designs).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub replicates: Option<usize>,
    /// The overall scale `C` of the variance formula (replicate designs).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub scale: Option<f64>,
    /// Whether deviations are taken from the full-sample estimate (`true`)
    /// or from the mean of the replicate estimates (replicate designs).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mse: Option<bool>,
    /// The strata variable (Taylor designs with strata).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub strata: Option<String>,
    /// The PSU variable (Taylor designs with clusters).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cluster: Option<String>,
    /// The finite population correction variable.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fpc: Option<String>,
    /// How strata with a single PSU are treated (Taylor designs).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub lonely_psu: Option<&'static str>,
    /// PSUs with a record of non-zero weight (Taylor designs).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub psus: Option<u64>,
    /// Strata with a record of non-zero weight (Taylor designs).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub strata_count: Option<u64>,
    /// The rank of the replicate weights over the design's records
    /// (replicate designs; R's `qr(…)$rank`): fewer than the replicates
    /// when some are linear combinations of others.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rank: Option<usize>,
    /// The adjustment the weight was made by, and whether these standard
    /// errors subtract its residuals (Taylor designs whose weight was
    /// post-stratified, raked or calibrated by `weight`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub calibration: Option<String>,
    /// Degrees of freedom of the t intervals: the rank of the replicate
    /// weights − 1 (R's `degf()`), or PSUs − strata (of the whole sample,
    /// also for domains).
    pub df: f64,
    /// How percentages' intervals are formed.
    pub pct_interval: crate::PctInterval,
    /// Confidence level of the intervals.
    pub level: f64,
    /// Estimates from fewer records than this are flagged unreliable.
    pub min_n: u64,
    /// Estimates whose coefficient of variation exceeds this are flagged
    /// unreliable.
    pub max_cv: f64,
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
    /// Records the estimate rests on.
    pub n: u64,
    /// Design effect: the variance over that of a simple random sample
    /// of the same size without replacement (R `deff = TRUE`); `None`
    /// when undefined (weights summing to no more than the records, or
    /// records of weight 0 under a Taylor design).
    pub deff: Option<f64>,
    /// The square root of the variance over that of a simple random
    /// sample with replacement (Kish's deft; R `deff = "replace"` is its
    /// square).
    pub deft: Option<f64>,
    /// Fewer than [`DesignInfo::min_n`] records, or a CV above
    /// [`DesignInfo::max_cv`] (an estimate of 0 has no CV: only its `n`
    /// counts).
    pub unreliable: bool,
    /// Replicates in which the estimate is undefined (its domain has no
    /// weight in them: 0/0), left out of its variance as R does (with a
    /// warning there); 0 when every replicate gave it.
    #[serde(skip_serializing_if = "is_zero")]
    pub replicates_dropped: u32,
}

fn is_zero(n: &u32) -> bool {
    *n == 0
}

/// A variance, and how many replicate estimates were undefined and left
/// out of it (replicate designs).
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Var {
    /// The variance (`NaN`: undefined, e.g. no replicate defined it).
    pub(crate) v: f64,
    /// Replicates left out.
    pub(crate) dropped: u32,
}

impl From<f64> for Var {
    fn from(v: f64) -> Var {
        Var { v, dropped: 0 }
    }
}

impl Var {
    /// The standard error: `None` when the variance is undefined (a
    /// negative variance is rounding around 0 and gives 0).
    fn se(self) -> Option<f64> {
        (self.v.is_finite()).then(|| self.v.max(0.0).sqrt())
    }
}

impl Uncertainty {
    /// With the design effects of an estimate from `n` records of a
    /// domain whose weights sum to `pop`, and whose variable has the
    /// weighted variance `s2` (`n/(n − 1) Σ w (y − ȳ)² / Σ w`, R
    /// `svyvar`): a simple random sample of `n` would give the estimate
    /// the variance `k · s2 / n` with replacement (`k`: 1 for a mean or a
    /// proportion, `pop²` for a total, times 10⁴ for a percentage), and
    /// that times `1 − n/pop` without.
    pub(crate) fn srs(mut self, s2: f64, n: u64, pop: f64, k: f64) -> Self {
        let v = self.se * self.se;
        let wr = k * s2 / n as f64;
        if n > 1 && wr > 0.0 && wr.is_finite() {
            self.deft = Some((v / wr).sqrt());
            let f = 1.0 - n as f64 / pop;
            self.deff = (f > 0.0).then(|| v / (wr * f));
        }
        self
    }
}

/// The weighted variance of an indicator with weighted share `p` over `n`
/// records (R `svyvar`).
pub(crate) fn share_variance(p: f64, n: u64) -> f64 {
    let n = n as f64;
    n / (n - 1.0) * p * (1.0 - p)
}

/// The variance formula of a design (replicate weights or Taylor
/// linearization), and the t quantile of its intervals.
#[derive(Debug, Clone)]
pub(crate) struct Survey {
    /// Whether design effects can be given: records of weight 0 count in
    /// R's SRS size under a replicate design, not under a Taylor one
    /// (where this is false when the counted records have any).
    pub(crate) srs_ok: bool,
    /// Per cell of the result's cube, its records of weight 0 (Taylor
    /// designs with any): R leaves them out of the SRS size `n` of a
    /// design effect, so each domain's are subtracted.
    pub(crate) zeros: Option<Vec<u64>>,
    pub(crate) info: DesignInfo,
    /// A Taylor design whose weight was adjusted to population totals
    /// (its residuals enter the linearized variance).
    pub(crate) adjusted: Option<Box<microtab_store::Taylor>>,
    /// Each replicate's coefficient (empty for Taylor designs).
    rscales: Vec<f64>,
    t: f64,
}

impl Survey {
    /// A Taylor linearization design's.
    pub(crate) fn taylor(
        weight: &str,
        t: &microtab_store::Taylor,
        level: f64,
        (min_n, max_cv): (u64, f64),
    ) -> Self {
        let df = t.weighted_psus as f64 - t.weighted_strata as f64;
        Survey {
            srs_ok: true,
            zeros: None,
            adjusted: None,
            info: DesignInfo {
                method: "taylor",
                kind: "linearization",
                weight: weight.to_string(),
                replicates: None,
                scale: None,
                mse: None,
                strata: t.strata.clone(),
                cluster: t.cluster.clone(),
                fpc: t.fpc.clone(),
                lonely_psu: Some(t.lonely_psu.name()),
                psus: Some(t.weighted_psus),
                strata_count: Some(t.weighted_strata),
                rank: None,
                calibration: None,
                df,
                pct_interval: crate::PctInterval::Logit,
                level,
                min_n,
                max_cv,
            },
            rscales: Vec::new(),
            t: t_quantile(level, df),
        }
    }

    /// A replicate design's: its degrees of freedom are the rank of its
    /// replicate weights − 1 (R's `degf()`; the number of replicates − 1
    /// when the rank is not known).
    pub(crate) fn new(
        weight: &str,
        r: &Replicates,
        level: f64,
        (min_n, max_cv): (u64, f64),
    ) -> Self {
        let n = r.weights.len();
        let df = r.rank.unwrap_or(n) as f64 - 1.0;
        Survey {
            srs_ok: true,
            zeros: None,
            adjusted: None,
            info: DesignInfo {
                method: "replicate",
                kind: r.kind.name(),
                weight: weight.to_string(),
                replicates: Some(n),
                scale: Some(r.scale),
                mse: Some(r.mse),
                strata: None,
                cluster: None,
                fpc: None,
                lonely_psu: None,
                psus: None,
                strata_count: None,
                rank: r.rank,
                calibration: None,
                df,
                pct_interval: crate::PctInterval::Logit,
                level,
                min_n,
                max_cv,
            },
            rscales: r.rscales.clone(),
            t: t_quantile(level, df),
        }
    }

    /// No design: each of `n` records its own PSU in one stratum (R's
    /// `svydesign(ids = ~1)`), `n − 1` degrees of freedom.
    pub(crate) fn records(weight: Option<&str>, n: u64, level: f64, limits: (u64, f64)) -> Self {
        let df = n as f64 - 1.0;
        Survey {
            srs_ok: false,
            zeros: None,
            adjusted: None,
            info: DesignInfo {
                method: "records",
                kind: "each record independent",
                weight: weight.unwrap_or_default().to_string(),
                replicates: None,
                scale: None,
                mse: None,
                strata: None,
                cluster: None,
                fpc: None,
                lonely_psu: None,
                psus: Some(n),
                strata_count: Some(1),
                rank: None,
                calibration: None,
                df,
                pct_interval: crate::PctInterval::Logit,
                level,
                min_n: limits.0,
                max_cv: limits.1,
            },
            rscales: Vec::new(),
            t: t_quantile(level, df),
        }
    }

    /// The variance of an estimate `est` whose replicate estimates are
    /// `reps` (one per replicate weight). A replicate whose estimate is
    /// undefined (not finite: its domain has no weight in it) is left out
    /// with its coefficient and counted, as R's `svrVar` does (the scale
    /// is kept); `NaN` when every replicate is.
    pub(crate) fn variance(&self, est: f64, reps: &[f64]) -> Var {
        let scale = self.info.scale.unwrap_or(f64::NAN);
        let kept = || {
            reps.iter()
                .zip(&self.rscales)
                .filter(|(x, _)| x.is_finite())
        };
        let dropped = reps.len() - kept().count();
        if dropped == reps.len() {
            return Var {
                v: f64::NAN,
                dropped: dropped as u32,
            };
        }
        let centre = if self.info.mse == Some(true) {
            est
        } else {
            // R `svrVar`: the mean over the replicates with rscales > 0.
            let (s, k) = kept()
                .filter(|(_, &c)| c > 0.0)
                .fold((0.0, 0usize), |(s, k), (&x, _)| (s + x, k + 1));
            s / k as f64
        };
        Var {
            v: scale
                * kept()
                    .map(|(&x, &c)| c * (x - centre) * (x - centre))
                    .sum::<f64>(),
            dropped: dropped as u32,
        }
    }

    /// Whether an estimate on `n` records with coefficient of variation
    /// `cv` is flagged unreliable.
    fn unreliable(&self, n: u64, cv: Option<f64>) -> bool {
        n < self.info.min_n || cv.is_some_and(|cv| cv > self.info.max_cv)
    }

    /// The t quantile of the intervals.
    pub(crate) fn t(&self) -> f64 {
        self.t
    }

    /// An estimate `est` on `n` records with standard error `se` and the
    /// interval `[lo, hi]` found otherwise (quantiles), `dropped`
    /// replicates left out.
    pub(crate) fn interval(
        &self,
        est: f64,
        se: f64,
        (lo, hi): (f64, f64),
        n: u64,
        dropped: u32,
    ) -> Uncertainty {
        let cv = (est != 0.0).then(|| se / est.abs());
        Uncertainty {
            se,
            lo: Some(lo),
            hi: Some(hi),
            cv,
            n,
            unreliable: self.unreliable(n, cv),
            deff: None,
            deft: None,
            replicates_dropped: dropped,
        }
    }

    /// SE, t interval and CV of a total or a mean on `n` records whose
    /// variance is `var` (`None` when it is undefined; no interval when
    /// the t quantile is not: fewer than 1 df).
    pub(crate) fn wald(&self, est: f64, var: impl Into<Var>, n: u64) -> Option<Uncertainty> {
        let var = var.into();
        let se = var.se()?;
        let cv = (est != 0.0).then(|| se / est.abs());
        let t = self.t.is_finite().then_some(self.t);
        Some(Uncertainty {
            se,
            lo: t.map(|t| est - t * se),
            hi: t.map(|t| est + t * se),
            cv,
            n,
            unreliable: self.unreliable(n, cv),
            deff: None,
            deft: None,
            replicates_dropped: var.dropped,
        })
    }

    /// SE, interval and CV of a percentage `pct` (0–100) on `n` records
    /// of a domain of `domain` records, whose variance is `var`. The logit
    /// interval `logit(p) ± t · SE(p) / (p(1 − p))` transformed back (R
    /// `svyciprop(method = "xlogit")`, Stata `svy: tab`; none at 0% or
    /// 100%), or Korn–Graubard's (R `method = "beta"`): with the
    /// effective size `n* = p(1 − p)/v(p) · (t_{domain−1}/t_df)²`,
    /// `[B⁻¹(α/2; n*p, n*(1 − p) + 1), B⁻¹(1 − α/2; n*p + 1, n*(1 − p))]`.
    pub(crate) fn percent(
        &self,
        pct: f64,
        var: impl Into<Var>,
        n: u64,
        domain: u64,
    ) -> Option<Uncertainty> {
        let Var { v: var, dropped } = var.into();
        let se = Var::from(var).se()?;
        let p = pct / 100.0;
        let (lo, hi) = if self.info.pct_interval == crate::PctInterval::KornGraubard {
            let v = var / 1e4;
            let ratio = t_quantile(self.info.level, domain as f64 - 1.0) / self.t;
            let neff = p * (1.0 - p) / v * ratio * ratio;
            let alpha = 1.0 - self.info.level;
            let qbeta = |q: f64, a: f64, b: f64| -> Option<f64> {
                if a == 0.0 {
                    Some(0.0)
                } else if b == 0.0 {
                    Some(1.0)
                } else if a > 0.0 && b > 0.0 && a.is_finite() && b.is_finite() {
                    Some(100.0 * microtab_engine::stats::beta_quantile(q, a, b))
                } else {
                    None
                }
            };
            if neff.is_finite() && neff > 0.0 {
                (
                    qbeta(alpha / 2.0, neff * p, neff * (1.0 - p) + 1.0),
                    qbeta(1.0 - alpha / 2.0, neff * p + 1.0, neff * (1.0 - p)),
                )
            } else {
                (None, None)
            }
        } else if p > 0.0 && p < 1.0 && self.t.is_finite() {
            let l = (p / (1.0 - p)).ln();
            let h = self.t * (se / 100.0) / (p * (1.0 - p));
            let expit = |x: f64| 100.0 / (1.0 + (-x).exp());
            (Some(expit(l - h)), Some(expit(l + h)))
        } else {
            (None, None)
        };
        let cv = (pct != 0.0).then(|| se / pct.abs());
        Some(Uncertainty {
            se,
            lo,
            hi,
            cv,
            n,
            unreliable: self.unreliable(n, cv),
            deff: None,
            deft: None,
            replicates_dropped: dropped,
        })
    }
}

/// The Rao–Scott test of independence of a two-way table under the design
/// (R `svychisq`): Pearson's X² on the table scaled to `n` records, its
/// design-based second-order correction F on (d₀, d₀·ν) degrees of freedom,
/// and the first-order p-value.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct RaoScott {
    /// Pearson's X² on the weighted table scaled to `n` records.
    pub chi2: f64,
    /// Records the table was scaled to (the table's unweighted count).
    pub n: f64,
    /// Second-order statistic F = X² / tr(Δ).
    pub f: f64,
    /// Numerator degrees of freedom d₀ = tr(Δ)² / tr(Δ²).
    pub ndf: f64,
    /// Denominator degrees of freedom d₀ · ν (ν: the design's df).
    pub ddf: f64,
    /// P(F(d₀, d₀ν) > F): the second-order p-value (R's default).
    pub p: f64,
    /// First-order p-value: P(χ²((r−1)(c−1)) > X² / δ̄), δ̄ = tr(Δ) /
    /// ((r−1)(c−1)).
    pub p_first_order: f64,
    /// Replicates whose table had no weight (its proportions 0/0), left
    /// out of the covariance as R does.
    #[serde(skip_serializing_if = "is_zero")]
    pub replicates_dropped: u32,
}

impl Survey {
    /// The covariance of a vector estimate `est` from its replicate
    /// estimates `reps` (one vector per replicate; `None` where it is
    /// undefined, left out with its coefficient as in [`Self::variance`]).
    pub(crate) fn covariance(&self, est: &[f64], reps: &[Option<Vec<f64>>]) -> Vec<Vec<f64>> {
        let k = est.len();
        let kept = || {
            reps.iter()
                .zip(&self.rscales)
                .filter_map(|(r, c)| Some((r.as_ref()?, c)))
        };
        let centre: Vec<f64> = if self.info.mse == Some(true) {
            est.to_vec()
        } else {
            let used: Vec<&Vec<f64>> = kept().filter(|(_, &c)| c > 0.0).map(|(r, _)| r).collect();
            (0..k)
                .map(|i| used.iter().map(|r| r[i]).sum::<f64>() / used.len() as f64)
                .collect()
        };
        let mut v = vec![vec![0.0; k]; k];
        for (r, &c) in kept() {
            let d: Vec<f64> = r.iter().zip(&centre).map(|(a, b)| a - b).collect();
            for i in 0..k {
                for j in 0..k {
                    v[i][j] += self.info.scale.unwrap_or(f64::NAN) * c * d[i] * d[j];
                }
            }
        }
        v
    }

    /// The Rao–Scott test of the `r × c` weighted table `m` (rows and
    /// columns that occur), whose replicate tables are `rm`, scaled to `n`
    /// records. `None` with fewer than two rows or columns, or when the
    /// design's covariance is degenerate.
    pub(crate) fn rao_scott(
        &self,
        m: &[Vec<f64>],
        rm: &[Vec<Vec<f64>>],
        n: f64,
    ) -> Option<RaoScott> {
        let p = proportions(m)?;
        let reps: Vec<Option<Vec<f64>>> = rm
            .iter()
            .map(|t| proportions(t).filter(|p| p.iter().all(|x| x.is_finite())))
            .collect();
        let dropped = reps.iter().filter(|r| r.is_none()).count();
        if dropped == reps.len() {
            return None;
        }
        let v = self.covariance(&p, &reps);
        self.rao_scott_cov(m, &v, n).map(|r| RaoScott {
            replicates_dropped: dropped as u32,
            ..r
        })
    }

    /// The Rao–Scott test of the `r × c` weighted table `m` whose cell
    /// proportions (rows varying fastest) have the design covariance `v`.
    pub(crate) fn rao_scott_cov(&self, m: &[Vec<f64>], v: &[Vec<f64>], n: f64) -> Option<RaoScott> {
        let (nr, nc) = (m.len(), m.first().map_or(0, |r| r.len()));
        if nr < 2 || nc < 2 || n <= 0.0 {
            return None;
        }
        let p = proportions(m)?;
        // Pearson on the table scaled to n.
        let row: Vec<f64> = (0..nr)
            .map(|i| (0..nc).map(|j| p[i + nr * j]).sum())
            .collect();
        let col: Vec<f64> = (0..nc)
            .map(|j| (0..nr).map(|i| p[i + nr * j]).sum())
            .collect();
        let mut chi2 = 0.0;
        for j in 0..nc {
            for i in 0..nr {
                let e = row[i] * col[j];
                if e > 0.0 {
                    chi2 += n * (p[i + nr * j] - e).powi(2) / e;
                }
            }
        }
        // C: the interaction columns (treatment contrasts) less their
        // least-squares projection on the main effects.
        let k = nr * nc;
        let x1: Vec<Vec<f64>> = (0..k)
            .map(|cell| {
                let (i, j) = (cell % nr, cell / nr);
                let mut x = vec![1.0];
                x.extend((1..nr).map(|a| (i == a) as u8 as f64));
                x.extend((1..nc).map(|b| (j == b) as u8 as f64));
                x
            })
            .collect();
        let inter: Vec<Vec<f64>> = (0..k)
            .map(|cell| {
                let (i, j) = (cell % nr, cell / nr);
                (1..nc)
                    .flat_map(|b| (1..nr).map(move |a| (a, b)))
                    .map(|(a, b)| (i == a && j == b) as u8 as f64)
                    .collect()
            })
            .collect();
        let cmat = residuals(&x1, &inter)?;
        let q = cmat[0].len();
        let idiag: Vec<f64> = p
            .iter()
            .map(|&x| if x == 0.0 { 0.0 } else { 1.0 / x })
            .collect();
        // denom = Cᵀ D⁻¹ C / n, numr = Cᵀ D⁻¹ V D⁻¹ C.
        let dc: Vec<Vec<f64>> = (0..k)
            .map(|a| cmat[a].iter().map(|x| x * idiag[a]).collect())
            .collect();
        let mut denom = crossprod(&cmat, &dc);
        denom.iter_mut().flatten().for_each(|x| *x /= n);
        let vdc: Vec<Vec<f64>> = (0..k)
            .map(|t| {
                (0..q)
                    .map(|b| (0..k).map(|u| v[t][u] * dc[u][b]).sum())
                    .collect()
            })
            .collect();
        let numr = crossprod(&dc, &vdc);
        let delta = solve(&denom, &numr)?;
        let tr: f64 = (0..q).map(|a| delta[a][a]).sum();
        let tr2: f64 = (0..q)
            .map(|a| (0..q).map(|b| delta[a][b] * delta[b][a]).sum::<f64>())
            .sum();
        if !(tr > 0.0 && tr2 > 0.0) {
            return None;
        }
        let d0 = tr * tr / tr2;
        let nu = self.info.df;
        let f = chi2 / tr;
        let df1 = ((nr - 1) * (nc - 1)) as f64;
        Some(RaoScott {
            chi2,
            n,
            f,
            ndf: d0,
            ddf: d0 * nu,
            p: f_upper(f, d0, d0 * nu),
            p_first_order: microtab_engine::stats::upper_gamma_q(
                df1 / 2.0,
                chi2 / (tr / df1) / 2.0,
            ),
            replicates_dropped: 0,
        })
    }
}

/// The cell proportions of table `t`, rows varying fastest (R's
/// interaction order); `None` when its total is 0.
pub(crate) fn proportions(t: &[Vec<f64>]) -> Option<Vec<f64>> {
    let (nr, nc) = (t.len(), t.first().map_or(0, |r| r.len()));
    let tot: f64 = t.iter().flatten().sum();
    (tot != 0.0).then(|| {
        (0..nc)
            .flat_map(|j| (0..nr).map(move |i| (i, j)))
            .map(|(i, j)| t[i][j] / tot)
            .collect()
    })
}

/// The variance of a ratio `a / b` from the variances and covariance of
/// its totals (linearization): `(V_a − 2r C_ab + r² V_b) / b²`.
pub(crate) fn ratio_variance(a: f64, b: f64, [va, cab, vb]: [f64; 3]) -> f64 {
    let r = a / b;
    let v = va - 2.0 * r * cab + r * r * vb;
    // What is left after cancelling terms this large is rounding: 0.
    let size = va.abs() + 2.0 * (r * cab).abs() + r * r * vb.abs();
    if v.abs() <= 1e-11 * size {
        0.0
    } else {
        v / (b * b)
    }
}

/// P(F(d1, d2) > f).
fn f_upper(f: f64, d1: f64, d2: f64) -> f64 {
    if f <= 0.0 {
        return 1.0;
    }
    microtab_engine::stats::beta_reg(d2 / 2.0, d1 / 2.0, d2 / (d2 + d1 * f))
}

/// The residuals of the columns of `y` after their least-squares
/// projection on the columns of `x` (rows: observations).
fn residuals(x: &[Vec<f64>], y: &[Vec<f64>]) -> Option<Vec<Vec<f64>>> {
    let (n, p, q) = (x.len(), x[0].len(), y[0].len());
    let beta = solve(&crossprod(x, x), &crossprod(x, y))?;
    Some(
        (0..n)
            .map(|t| {
                (0..q)
                    .map(|b| y[t][b] - (0..p).map(|a| x[t][a] * beta[a][b]).sum::<f64>())
                    .collect()
            })
            .collect(),
    )
}

/// `aᵀ b` of two matrices with one row per observation: entry `(i, j)`
/// is `Σₜ a[t][i] · b[t][j]`, summed in row order.
fn crossprod(a: &[Vec<f64>], b: &[Vec<f64>]) -> Vec<Vec<f64>> {
    let (p, q) = (a.first().map_or(0, Vec::len), b.first().map_or(0, Vec::len));
    (0..p)
        .map(|i| {
            (0..q)
                .map(|j| a.iter().zip(b).map(|(ra, rb)| ra[i] * rb[j]).sum())
                .collect()
        })
        .collect()
}

/// `a⁻¹ b` by Gaussian elimination with partial pivoting (`None` when `a`
/// is singular).
fn solve(a: &[Vec<f64>], b: &[Vec<f64>]) -> Option<Vec<Vec<f64>>> {
    let n = a.len();
    let m = b.first().map_or(0, |r| r.len());
    let mut a: Vec<Vec<f64>> = a.to_vec();
    let mut b: Vec<Vec<f64>> = b.to_vec();
    let scale = a
        .iter()
        .flatten()
        .fold(0.0f64, |s, x| s.max(x.abs()))
        .max(f64::MIN_POSITIVE);
    for c in 0..n {
        let piv = (c..n).max_by(|&i, &j| a[i][c].abs().total_cmp(&a[j][c].abs()))?;
        if a[piv][c].abs() <= 1e-12 * scale {
            return None;
        }
        a.swap(c, piv);
        b.swap(c, piv);
        let (pa, pb) = (a[c].clone(), b[c].clone());
        for (r, (ar, br)) in a.iter_mut().zip(b.iter_mut()).enumerate() {
            let f = ar[c] / pa[c];
            if r != c && f != 0.0 {
                ar[c..]
                    .iter_mut()
                    .zip(&pa[c..])
                    .for_each(|(x, y)| *x -= f * y);
                br.iter_mut().zip(&pb).for_each(|(x, y)| *x -= f * y);
            }
        }
    }
    Some(
        (0..n)
            .map(|r| (0..m).map(|k| b[r][k] / a[r][r]).collect())
            .collect(),
    )
}

/// The replicate design an IPUMS extract's variables imply, if any: person
/// replicate weights `REPWTP1…REPWTPn` (numbered from 1 without gaps; the
/// flag `REPWTP` alone does not count) with the person weight PERWT (USA,
/// ACS), ASECWT (CPS ASEC) or WTFINL (CPS monthly), else household ones
/// `REPWT1…` with HHWT, ASECWTH or HWTFINL — successive-difference
/// replication (scale 4/R) centred on the full-sample estimate, as IPUMS
/// documents for the ACS and the CPS. `None` when the replicate weights
/// have missing values.
pub fn ipums_design(ds: &microtab_store::Dataset) -> Option<microtab_store::Design> {
    let has = |n: &str| ds.variable(n).ok().map(|v| v.name.clone());
    let numbered = |prefix: &str| -> Vec<String> {
        (1..).map_while(|i| has(&format!("{prefix}{i}"))).collect()
    };
    for (prefix, weights) in [
        ("REPWTP", ["PERWT", "ASECWT", "WTFINL"]),
        ("REPWT", ["HHWT", "ASECWTH", "HWTFINL"]),
    ] {
        let reps = numbered(prefix);
        let Some(weight) = weights.iter().find_map(|w| has(w)) else {
            continue;
        };
        if reps.len() < 2 {
            continue;
        }
        let usable = reps.iter().all(|n| {
            ds.variable(n).is_ok_and(|v| {
                v.kind != microtab_store::Kind::String && v.nulls == 0 && v.missing_codes.is_empty()
            })
        });
        if !usable {
            return None;
        }
        let r = reps.len();
        // Unreadable columns leave the rank to be found when needed.
        let rank = crate::design::replicate_rank(ds, &reps).ok();
        return Some(microtab_store::Design {
            taylor: None,
            weight,
            replicates: Some(Replicates {
                kind: RepType::Sdr,
                weights: reps,
                scale: 4.0 / r as f64,
                rscales: vec![1.0; r],
                mse: true,
                rho: None,
                rank,
            }),
        });
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn design(mse: bool, rscales: Vec<f64>) -> Survey {
        Survey::new(
            "W",
            &Replicates {
                kind: RepType::Other,
                weights: (0..rscales.len()).map(|i| format!("R{i}")).collect(),
                scale: 0.5,
                rscales,
                mse,
                rho: None,
                rank: None,
            },
            0.95,
            (30, 0.3),
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
        assert_eq!(design(true, vec![1.0; 4]).variance(10.0, &reps).v, 3.0);
        assert_eq!(design(false, vec![1.0; 4]).variance(10.0, &reps).v, 2.5);
        let v = design(false, vec![1.0, 1.0, 0.0, 2.0])
            .variance(10.0, &reps)
            .v;
        assert!((v - 0.5 * 43.0 / 9.0).abs() < 1e-12, "{v}");
        // An undefined replicate (0/0) is left out with its coefficient,
        // the scale kept (R's svrVar): MSE 0.5 · (1 + 4 + 1); the mean of
        // the others, 32/3, with rscales (1, 1, ·, 2) as above.
        let with_nan = [9.0, 12.0, f64::NAN, 11.0];
        let v = design(true, vec![1.0; 4]).variance(10.0, &with_nan);
        assert_eq!((v.v, v.dropped), (3.0, 1));
        let v = design(false, vec![1.0, 1.0, 0.0, 2.0]).variance(10.0, &with_nan);
        assert!(
            (v.v - 0.5 * 43.0 / 9.0).abs() < 1e-12 && v.dropped == 1,
            "{v:?}"
        );
        let none = design(true, vec![1.0; 2]).variance(1.0, &[f64::NAN, f64::NAN]);
        assert!(none.v.is_nan() && none.dropped == 2);
        assert!(design(true, vec![1.0; 2]).wald(1.0, none, 10).is_none());
    }

    /// [[2, 1], [1, 3]]⁻¹ · [[1], [2]] = [[0.2], [0.6]] (by hand); a
    /// singular matrix has no solution; the residual of a column on a
    /// constant is the column less its mean.
    #[test]
    fn small_linear_algebra_by_hand() {
        let x = solve(&[vec![2.0, 1.0], vec![1.0, 3.0]], &[vec![1.0], vec![2.0]]).unwrap();
        assert!(
            (x[0][0] - 0.2).abs() < 1e-15 && (x[1][0] - 0.6).abs() < 1e-15,
            "{x:?}"
        );
        assert!(solve(&[vec![1.0, 2.0], vec![2.0, 4.0]], &[vec![1.0], vec![1.0]]).is_none());
        let r = residuals(
            &[vec![1.0], vec![1.0], vec![1.0]],
            &[vec![1.0], vec![2.0], vec![6.0]],
        )
        .unwrap();
        assert_eq!(r, vec![vec![-2.0], vec![-1.0], vec![3.0]]);
    }

    /// Beta quantiles against R's `qbeta`, including the large shapes of
    /// big samples (where puruspe's `invbetai` panics).
    #[test]
    fn beta_quantiles_match_r() {
        use microtab_engine::stats::beta_quantile as qbeta;
        for (q, a, b, want) in [
            (0.5, 2.0, 3.0, 3.85727568132390e-01),
            (0.975, 5000.0, 5000.0, 5.09799123778038e-01),
            (0.025, 3.5, 20000.25, 4.22426690619585e-05),
            (0.3, 1.0, 1.0, 0.3),
        ] {
            let got = qbeta(q, a, b);
            assert!(
                (got - want).abs() <= 1e-10 * want,
                "qbeta({q}, {a}, {b}) = {got}, R {want}"
            );
        }
    }

    #[test]
    fn default_scales() {
        assert_eq!(
            crate::design::default_scale(RepType::Sdr, 80, None),
            Some(0.05)
        );
        assert_eq!(
            crate::design::default_scale(RepType::Brr, 4, None),
            Some(0.25)
        );
        assert_eq!(
            crate::design::default_scale(RepType::Fay, 4, Some(0.5)),
            Some(1.0)
        );
        assert_eq!(
            crate::design::default_scale(RepType::Jk1, 5, None),
            Some(0.8)
        );
        assert_eq!(crate::design::default_scale(RepType::Jkn, 5, None), None);
    }
}
