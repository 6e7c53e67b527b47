//! Generalized linear models fitted on cells: every record of a cell has
//! the same predictors, so the likelihood equations are sums over cells
//! of `W_c = Σ w` and `Y_c = Σ w·y` (IRLS without rereading records).

use super::ModelError;
use crate::family::Family;

/// The cells a model is fitted on: per cell its predictors' columns and
/// its sums.
#[derive(Debug, Clone)]
pub(crate) struct Cells {
    /// Columns per cell.
    pub p: usize,
    /// `x[c * p + j]`.
    pub x: Vec<f64>,
    /// Records per cell.
    pub n: Vec<u64>,
    /// `Σ w`.
    pub w: Vec<f64>,
    /// `Σ w·y`.
    pub y: Vec<f64>,
    /// `Σ w·y²` (gaussian, binary) or `Σ w·y·log y` (poisson; 0 when the
    /// outcome is the analysis variable: not summed by the scan, so the
    /// deviance is known only up to a constant, enough for the fit).
    pub s: Vec<f64>,
    /// Whether `s` is known (the deviance can be given).
    pub s_known: bool,
}

/// A fitted model.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub(crate) struct Fit {
    pub beta: Vec<f64>,
    /// `(X'WX)⁻¹` with the final working weights (R's `cov.unscaled`).
    pub ainv: Vec<f64>,
    pub iterations: usize,
    /// NaN when not summed (a replicate's refit): written as `null`.
    #[serde(with = "crate::json::unknown_nan")]
    pub deviance: f64,
}

const MAX_ITER: usize = 100;

/// Fits `family` on `cells` with weights and sums `(w, y)` (the cells'
/// own, or a replicate's), from `start` (the full sample's fit, as R
/// `svyglm` starts its replicate refits) or R's starting means.
pub(crate) fn fit(
    family: Family,
    cells: &Cells,
    (w, y): (&[f64], &[f64]),
    start: Option<&[f64]>,
    names: &[String],
) -> Result<Fit, ModelError> {
    let p = cells.p;
    let nc = w.len();
    // η per cell.
    let mut eta: Vec<f64> = match start {
        Some(b) => (0..nc)
            .map(|c| dot(&cells.x[c * p..(c + 1) * p], b))
            .collect(),
        None => (0..nc)
            .map(|c| {
                let ybar = if w[c] != 0.0 { y[c] / w[c] } else { 0.0 };
                family.eta(family.start(ybar))
            })
            .collect(),
    };
    let mut beta = vec![0.0; p];
    let mut dev_old = f64::INFINITY;
    for it in 1..=MAX_ITER {
        // Weighted least squares of the working response z on X with
        // working weights W·μ'²/V.
        let mut xtwx = vec![0.0; p * p];
        let mut xtwz = vec![0.0; p];
        for c in 0..nc {
            if w[c] == 0.0 {
                continue;
            }
            let (mu, d) = (family.mu(eta[c]), family.dmu(eta[c]));
            let ww = w[c] * d * d / family.var(mu);
            let z = eta[c] + (y[c] / w[c] - mu) / d;
            let xc = &cells.x[c * p..(c + 1) * p];
            for i in 0..p {
                if xc[i] == 0.0 {
                    continue;
                }
                let wi = ww * xc[i];
                xtwz[i] += wi * z;
                for j in i..p {
                    xtwx[i * p + j] += wi * xc[j];
                }
            }
        }
        for i in 0..p {
            for j in 0..i {
                xtwx[i * p + j] = xtwx[j * p + i];
            }
        }
        let ainv = invert(&xtwx, p, names)?;
        beta = (0..p)
            .map(|i| dot(&ainv[i * p..(i + 1) * p], &xtwz))
            .collect();
        for (c, e) in eta.iter_mut().enumerate() {
            *e = dot(&cells.x[c * p..(c + 1) * p], &beta);
        }
        let dev: f64 = (0..nc)
            .filter(|&c| w[c] != 0.0)
            .map(|c| family.deviance(w[c], y[c], cells.s[c], family.mu(eta[c])))
            .sum();
        if !dev.is_finite() || beta.iter().any(|b| !b.is_finite()) {
            return Err(ModelError::NoConvergence { iterations: it });
        }
        // A tighter test than R's (1e-8): estimates agree to about 1e-8.
        if family == Family::Gaussian || (dev - dev_old).abs() / (dev.abs() + 0.1) < 1e-12 {
            return Ok(Fit {
                beta,
                ainv: final_ainv(family, cells, w, &eta, names)?,
                iterations: it,
                deviance: dev,
            });
        }
        dev_old = dev;
    }
    Err(ModelError::NoConvergence {
        iterations: MAX_ITER,
    })
}

/// `(X'WX)⁻¹` at the working weights of `eta`.
fn final_ainv(
    family: Family,
    cells: &Cells,
    w: &[f64],
    eta: &[f64],
    names: &[String],
) -> Result<Vec<f64>, ModelError> {
    let p = cells.p;
    let mut m = vec![0.0; p * p];
    for c in 0..w.len() {
        if w[c] == 0.0 {
            continue;
        }
        let (mu, d) = (family.mu(eta[c]), family.dmu(eta[c]));
        let ww = w[c] * d * d / family.var(mu);
        let xc = &cells.x[c * p..(c + 1) * p];
        for i in 0..p {
            for j in 0..p {
                m[i * p + j] += ww * xc[i] * xc[j];
            }
        }
    }
    invert(&m, p, names)
}

/// The sandwich `scale · A⁻¹ S A⁻¹` (`p × p`, row-major): a fit's
/// `(X'WX)⁻¹` around the design covariance `S` of its score totals.
pub(crate) fn sandwich(ainv: &[f64], s: &[f64], p: usize, scale: f64) -> Vec<f64> {
    let mut sa = vec![0.0; p * p];
    for i in 0..p {
        for j in 0..p {
            sa[i * p + j] = (0..p).map(|k| s[i * p + k] * ainv[k * p + j]).sum::<f64>();
        }
    }
    (0..p * p)
        .map(|x| {
            let (i, j) = (x / p, x % p);
            scale * (0..p).map(|k| ainv[i * p + k] * sa[k * p + j]).sum::<f64>()
        })
        .collect()
}

pub(crate) fn dot(a: &[f64], b: &[f64]) -> f64 {
    a.iter().zip(b).map(|(x, y)| x * y).sum()
}

/// The inverse of the symmetric positive definite `m` (`p × p`), by
/// Gauss–Jordan elimination with the largest remaining diagonal as pivot;
/// a column whose pivot is negligible next to its diagonal is collinear
/// with the columns before it (R's QR drops the same columns, in order).
pub(crate) fn invert(m: &[f64], p: usize, names: &[String]) -> Result<Vec<f64>, ModelError> {
    let mut a = m.to_vec();
    let mut inv = vec![0.0; p * p];
    for i in 0..p {
        inv[i * p + i] = 1.0;
    }
    let diag: Vec<f64> = (0..p).map(|i| m[i * p + i]).collect();
    // Column by column, in order (so the column named collinear is the
    // later one, as R reports the later one aliased).
    for k in 0..p {
        let piv = a[k * p + k];
        let small = piv.is_nan() || piv <= 1e-10 * diag[k].abs().max(f64::MIN_POSITIVE);
        if small || diag[k] == 0.0 {
            return Err(ModelError::Collinear {
                term: names.get(k).cloned().unwrap_or_default(),
            });
        }
        for j in 0..p {
            a[k * p + j] /= piv;
            inv[k * p + j] /= piv;
        }
        for i in 0..p {
            if i == k {
                continue;
            }
            let f = a[i * p + k];
            if f == 0.0 {
                continue;
            }
            for j in 0..p {
                a[i * p + j] -= f * a[k * p + j];
                inv[i * p + j] -= f * inv[k * p + j];
            }
        }
    }
    Ok(inv)
}
