//! The families of regression models (their links, variance functions
//! and deviances): a leaf, so that requests can name one.

/// The model family and its link.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Family {
    /// Normal errors, identity link (R `gaussian()`, `svyglm` default).
    Gaussian,
    /// Binary outcome, logit link (R `quasibinomial()`).
    Logit,
    /// Binary outcome, probit link (R `quasibinomial(link = "probit")`).
    Probit,
    /// Counts, log link (R `quasipoisson()`).
    Poisson,
}

impl std::str::FromStr for Family {
    type Err = String;

    /// `gaussian` (or `linear`), `logit` (`logistic`, `binomial`),
    /// `probit`, `poisson`; any case.
    fn from_str(s: &str) -> Result<Self, String> {
        match s.trim().to_ascii_lowercase().as_str() {
            "gaussian" | "linear" | "normal" => Ok(Family::Gaussian),
            "logit" | "logistic" | "binomial" | "quasibinomial" => Ok(Family::Logit),
            "probit" => Ok(Family::Probit),
            "poisson" | "quasipoisson" => Ok(Family::Poisson),
            _ => Err(format!(
                "family '{s}': expected gaussian, logit, probit or poisson"
            )),
        }
    }
}

impl<'de> serde::Deserialize<'de> for Family {
    /// The words of [`FromStr`](std::str::FromStr), so every front end
    /// reads a family the same way.
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        s.parse().map_err(serde::de::Error::custom)
    }
}

impl Family {
    /// Its name as the results give it.
    pub fn name(self) -> &'static str {
        match self {
            Family::Gaussian => "gaussian",
            Family::Logit => "logit",
            Family::Probit => "probit",
            Family::Poisson => "poisson",
        }
    }

    /// Whether the outcome must be 0 or 1.
    pub fn binary(self) -> bool {
        matches!(self, Family::Logit | Family::Probit)
    }

    /// The mean of linear predictor `eta`.
    pub(crate) fn mu(self, eta: f64) -> f64 {
        match self {
            Family::Gaussian => eta,
            Family::Logit => 1.0 / (1.0 + (-eta).exp()),
            Family::Probit => normal_cdf(eta),
            Family::Poisson => eta.exp(),
        }
    }

    /// `dμ/dη`.
    pub(crate) fn dmu(self, eta: f64) -> f64 {
        match self {
            Family::Gaussian => 1.0,
            Family::Logit => {
                let m = self.mu(eta);
                (m * (1.0 - m)).max(f64::EPSILON)
            }
            Family::Probit => normal_pdf(eta).max(f64::EPSILON),
            Family::Poisson => eta.exp().max(f64::EPSILON),
        }
    }

    /// The variance function `V(μ)`.
    pub(crate) fn var(self, mu: f64) -> f64 {
        match self {
            Family::Gaussian => 1.0,
            Family::Logit | Family::Probit => (mu * (1.0 - mu)).max(f64::EPSILON),
            Family::Poisson => mu.max(f64::EPSILON),
        }
    }

    /// A cell's deviance: `2 Σ w (ℓ(y) − ℓ(μ))` from `W`, `Y = Σ w y`,
    /// `S = Σ w y²` (gaussian) or `Σ w y log y` (poisson) and `μ`.
    pub(crate) fn deviance(self, w: f64, y: f64, s: f64, mu: f64) -> f64 {
        match self {
            Family::Gaussian => s - 2.0 * mu * y + mu * mu * w,
            Family::Logit | Family::Probit => {
                // y is 0/1: Y of the cell's weight has y = 1. The records'
                // deviance (R's), −2 × their log-likelihood, not the
                // cells' (which is 0 for a saturated model).
                let ylog = |a: f64, m: f64| if a > 0.0 { a * m.ln() } else { 0.0 };
                -2.0 * (ylog(y, mu) + ylog(w - y, 1.0 - mu))
            }
            Family::Poisson => 2.0 * (s - y * mu.ln() - (y - w * mu)),
        }
    }

    /// The starting mean of a cell with mean outcome `ybar` (R's
    /// `mustart`).
    pub(crate) fn start(self, ybar: f64) -> f64 {
        match self {
            Family::Gaussian => ybar,
            Family::Logit | Family::Probit => (ybar + 0.5) / 2.0,
            Family::Poisson => ybar + 0.1,
        }
    }

    pub(crate) fn eta(self, mu: f64) -> f64 {
        match self {
            Family::Gaussian => mu,
            Family::Logit => (mu / (1.0 - mu)).ln(),
            Family::Probit => normal_quantile(mu),
            Family::Poisson => mu.ln(),
        }
    }
}

/// The standard normal density.
pub(crate) fn normal_pdf(x: f64) -> f64 {
    (-0.5 * x * x).exp() / (2.0 * std::f64::consts::PI).sqrt()
}

/// The standard normal distribution function (via the complementary
/// error function, accurate to about 1e-15 relative in the tails).
pub(crate) fn normal_cdf(x: f64) -> f64 {
    0.5 * erfc(-x / std::f64::consts::SQRT_2)
}

fn normal_quantile(p: f64) -> f64 {
    // Newton on the cdf from a logistic start: only starting values use it.
    let mut x = (p / (1.0 - p)).ln() / 1.7;
    for _ in 0..50 {
        let d = (normal_cdf(x) - p) / normal_pdf(x).max(1e-300);
        x -= d;
        if d.abs() < 1e-14 {
            break;
        }
    }
    x
}

/// The complementary error function (W. J. Cody's rational
/// approximations, relative error below 1e-15).
pub(crate) fn erfc(x: f64) -> f64 {
    if x < 0.0 {
        return 2.0 - erfc(-x);
    }
    // erfc(x) = Q(1/2, x²): the regularized upper incomplete gamma.
    microtab_engine::stats::upper_gamma_q(0.5, x * x)
}
