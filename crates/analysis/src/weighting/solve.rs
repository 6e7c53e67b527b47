//! The adjustments themselves, over groups of records that share every
//! adjustment variable's value (a group's weight is the sum of its
//! records'; every record of a group gets the group's factor `g`):
//! post-stratification (a ratio per cell), raking by iterative
//! proportional fitting, and calibration by Newton's method with the
//! linear, raking and logit distances (R `survey`'s `grake`), bounded or
//! not.

/// A distance function of calibration (R `calibrate`'s `calfun`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Distance {
    /// `g = 1 + u` (GREG), clipped to the bounds.
    Linear,
    /// `g = exp(u)`, clipped to the bounds.
    Raking,
    /// The logit distance: `g` between the bounds, never at them.
    Logit,
}

impl Distance {
    /// The lowercase name.
    pub fn name(self) -> &'static str {
        match self {
            Distance::Linear => "linear",
            Distance::Raking => "raking",
            Distance::Logit => "logit",
        }
    }

    /// `(g(u), g'(u))` within `bounds` (R's `Fm1 + 1` and `dF`).
    fn g(self, u: f64, (lo, hi): (f64, f64)) -> (f64, f64) {
        match self {
            Distance::Linear => {
                let g = 1.0 + u;
                if g <= lo {
                    (lo, 0.0)
                } else if g >= hi {
                    (hi, 0.0)
                } else {
                    (g, 1.0)
                }
            }
            Distance::Raking => {
                let g = u.exp();
                if g <= lo {
                    (lo, 0.0)
                } else if g >= hi {
                    (hi, 0.0)
                } else {
                    (g, g)
                }
            }
            Distance::Logit => {
                // g = (L(U−1) + U(1−L)e^{Au}) / (U−1 + (1−L)e^{Au}),
                // A = (U−L)/((U−1)(1−L)); written with e^{−Au} for large u.
                let a = (hi - lo) / ((hi - 1.0) * (1.0 - lo));
                let t = a * u;
                if t > 0.0 {
                    let e = (-t).exp();
                    let den = (hi - 1.0) * e + (1.0 - lo);
                    let g = (lo * (hi - 1.0) * e + hi * (1.0 - lo)) / den;
                    let d = a * e * (1.0 - lo) * (hi - 1.0) * (hi - lo) / (den * den);
                    (g, d)
                } else {
                    let e = t.exp();
                    let den = (hi - 1.0) + (1.0 - lo) * e;
                    let g = (lo * (hi - 1.0) + hi * (1.0 - lo) * e) / den;
                    let d = a * e * (1.0 - lo) * (hi - 1.0) * (hi - lo) / (den * den);
                    (g, d)
                }
            }
        }
    }
}

/// How one weight's adjustment ended.
#[derive(Debug, Clone)]
pub(crate) struct Solved {
    /// Per group, the factor its records' weights are multiplied by.
    pub g: Vec<f64>,
    /// Iterations (Newton steps, or raking cycles; 1 for a ratio).
    pub iterations: usize,
    /// The largest `|achieved − target| / (1 + |target|)` over the
    /// targets.
    pub worst: f64,
    /// The weights were first multiplied by this (R `grake`'s rescaling
    /// when every target is more than 20 times its sample total).
    pub rescaled: Option<f64>,
}

/// Why an adjustment failed.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Failure {
    /// A target with a positive total has no weight in the sample (an
    /// index into the targets).
    Empty(usize),
    /// The iterations ran out with a target `worst` off (relative), after
    /// `iterations`.
    NotConverged {
        worst: f64,
        at: usize,
        iterations: usize,
    },
}

/// Post-stratification: each group's factor is its cell's total over the
/// cell's weight. `cell[g]` is group g's cell.
pub(crate) fn poststratify(w: &[f64], cell: &[u32], totals: &[f64]) -> Result<Solved, Failure> {
    let mut sum = vec![0.0; totals.len()];
    for (&wg, &c) in w.iter().zip(cell) {
        sum[c as usize] += wg;
    }
    let mut f = vec![0.0; totals.len()];
    for (c, (&t, &s)) in totals.iter().zip(&sum).enumerate() {
        if s == 0.0 {
            if t != 0.0 {
                return Err(Failure::Empty(c));
            }
            continue;
        }
        f[c] = t / s;
    }
    let g: Vec<f64> = cell.iter().map(|&c| f[c as usize]).collect();
    let (worst, _) = misfit_of(&achieved_cells(w, &g, cell, totals.len()), totals);
    Ok(Solved {
        g,
        iterations: 1,
        worst,
        rescaled: None,
    })
}

fn achieved_cells(w: &[f64], g: &[f64], cell: &[u32], n: usize) -> Vec<f64> {
    let mut a = vec![0.0; n];
    for ((&wg, &gg), &c) in w.iter().zip(g).zip(cell) {
        a[c as usize] += wg * gg;
    }
    a
}

/// The worst relative misfit and where.
fn misfit_of(achieved: &[f64], totals: &[f64]) -> (f64, usize) {
    let mut worst = (0.0, 0);
    for (k, (&a, &t)) in achieved.iter().zip(totals).enumerate() {
        let m = (a - t).abs() / (1.0 + t.abs());
        if m > worst.0 || m.is_nan() {
            worst = (m, k);
        }
    }
    worst
}

/// Raking by iterative proportional fitting: margin by margin, each
/// group's factor is multiplied by its category's total over its
/// category's current weight, cycle after cycle, until every margin is
/// within `tol` (relative to `1 + |total|`). `margins[m].0[g]` is group
/// g's category in margin m, `.1` the margin's totals. Targets are
/// numbered margin after margin.
pub(crate) fn rake(
    w: &[f64],
    margins: &[(Vec<u32>, Vec<f64>)],
    tol: f64,
    max_cycles: usize,
) -> Result<Solved, Failure> {
    let mut g = vec![1.0; w.len()];
    let mut offset = 0;
    for (cell, totals) in margins {
        let a = achieved_cells(w, &g, cell, totals.len());
        for (c, (&s, &t)) in a.iter().zip(totals).enumerate() {
            if s == 0.0 && t != 0.0 {
                return Err(Failure::Empty(offset + c));
            }
        }
        offset += totals.len();
    }
    let mut cycles = 0;
    loop {
        cycles += 1;
        for (cell, totals) in margins {
            let a = achieved_cells(w, &g, cell, totals.len());
            let f: Vec<f64> = a
                .iter()
                .zip(totals)
                .map(|(&s, &t)| if s == 0.0 { 0.0 } else { t / s })
                .collect();
            for (gg, &c) in g.iter_mut().zip(cell) {
                *gg *= f[c as usize];
            }
        }
        let (worst, at) = rake_misfit(w, &g, margins);
        if worst < tol {
            return Ok(Solved {
                g,
                iterations: cycles,
                worst,
                rescaled: None,
            });
        }
        if cycles >= max_cycles || worst.is_nan() {
            return Err(Failure::NotConverged {
                worst,
                at,
                iterations: cycles,
            });
        }
    }
}

fn rake_misfit(w: &[f64], g: &[f64], margins: &[(Vec<u32>, Vec<f64>)]) -> (f64, usize) {
    let mut worst = (0.0, 0);
    let mut offset = 0;
    for (cell, totals) in margins {
        let (m, k) = misfit_of(&achieved_cells(w, g, cell, totals.len()), totals);
        if m > worst.0 || m.is_nan() {
            worst = (m, offset + k);
        }
        offset += totals.len();
    }
    worst
}

/// Calibration (R `grake`): finds `η` so that the weights `w·g(x'η)`
/// reproduce `totals` for the model rows `x` (`p` values per group,
/// row-major), by Newton's method from `η = 0`, halving a step that
/// overflows; the pseudo-inverse where the system is singular (records
/// at their bounds). Unbounded linear calibration converges in one step.
#[allow(clippy::too_many_arguments)]
pub(crate) fn calibrate(
    w: &[f64],
    x: &[f64],
    totals: &[f64],
    distance: Distance,
    bounds: (f64, f64),
    tol: f64,
    max_iter: usize,
    rescale: Option<f64>,
) -> Result<Solved, Failure> {
    let p = totals.len();
    let n = w.len();
    let mut w = w.to_vec();
    // A target with no weight at all cannot be met.
    for k in 0..p {
        let any = x
            .chunks(p)
            .zip(&w)
            .any(|(row, &wg)| wg != 0.0 && row[k] != 0.0);
        if !any && totals[k] != 0.0 {
            return Err(Failure::Empty(k));
        }
    }
    // R's automatic rescaling, decided by the caller.
    if let Some(s) = rescale {
        w.iter_mut().for_each(|x| *x *= s);
    }
    let rescaled = rescale;
    let mut eta = vec![0.0; p];
    let mut u = vec![0.0; n];
    let (mut g, mut d) = (vec![1.0; n], vec![0.0; n]);
    let eval = |u: &[f64], g: &mut [f64], d: &mut [f64]| {
        for ((&ui, gi), di) in u.iter().zip(g.iter_mut()).zip(d.iter_mut()) {
            (*gi, *di) = distance.g(ui, bounds);
        }
    };
    eval(&u, &mut g, &mut d);
    let achieved = |g: &[f64]| {
        let mut a = vec![0.0; p];
        for ((row, &wg), &gg) in x.chunks(p).zip(&w).zip(g) {
            for (s, &xv) in a.iter_mut().zip(row) {
                *s += wg * gg * xv;
            }
        }
        a
    };
    let mut iterations = 0;
    let (mut polished, mut best): (bool, Option<(Vec<f64>, f64)>) = (false, None);
    loop {
        let a = achieved(&g);
        let misfit: Vec<f64> = totals.iter().zip(&a).map(|(t, a)| t - a).collect();
        let (worst, at) = misfit_of(&a, totals);
        if worst < tol && iterations > 0 || worst == 0.0 {
            // Newton converges quadratically: one more step makes the
            // weights exact to rounding, kept when it does not worsen.
            if worst > 0.0 && !polished && iterations < max_iter {
                polished = true;
                best = Some((g.clone(), worst));
            } else {
                let (g, worst) = match best.take() {
                    Some((bg, bw)) if bw < worst => (bg, bw),
                    _ => (g, worst),
                };
                let g = match rescaled {
                    Some(s) => g.iter().map(|x| x * s).collect(),
                    None => g,
                };
                return Ok(Solved {
                    g,
                    iterations,
                    worst,
                    rescaled,
                });
            }
        }
        if iterations >= max_iter || !worst.is_finite() {
            return Err(Failure::NotConverged {
                worst,
                at,
                iterations,
            });
        }
        iterations += 1;
        // Σ w F'(u) x x'.
        let mut m = vec![0.0; p * p];
        for ((row, &wg), &dg) in x.chunks(p).zip(&w).zip(&d) {
            let c = wg * dg;
            if c == 0.0 {
                continue;
            }
            for i in 0..p {
                let ci = c * row[i];
                if ci == 0.0 {
                    continue;
                }
                for j in 0..=i {
                    m[i * p + j] += ci * row[j];
                }
            }
        }
        for i in 0..p {
            for j in 0..i {
                m[j * p + i] = m[i * p + j];
            }
        }
        let mut step = solve_sym(&m, &misfit, p);
        for (e, s) in eta.iter_mut().zip(&step) {
            *e += s;
        }
        let update_u = |eta: &[f64], u: &mut [f64]| {
            for (ui, row) in u.iter_mut().zip(x.chunks(p)) {
                *ui = row.iter().zip(eta).map(|(a, b)| a * b).sum();
            }
        };
        update_u(&eta, &mut u);
        eval(&u, &mut g, &mut d);
        // Halve a step that overflows (as `grake` does).
        while iterations < max_iter && g.iter().chain(&d).any(|v| !v.is_finite()) {
            iterations += 1;
            step.iter_mut().for_each(|s| *s /= 2.0);
            for (e, s) in eta.iter_mut().zip(&step) {
                *e -= s;
            }
            update_u(&eta, &mut u);
            eval(&u, &mut g, &mut d);
        }
    }
}

/// R `grake`'s rescaling (its SOMETHRESHOLD, 20): when every total of R's
/// model columns (`cols`: each over the groups, with its total) is more
/// than 20 times the weights' sample total, the weights are first
/// multiplied by the mean of those ratios (and bounds apply after it).
pub(crate) fn rescaling(w: &[f64], cols: &[(Vec<f64>, f64)]) -> Option<f64> {
    let scales: Vec<f64> = cols
        .iter()
        .map(|(c, t)| t / c.iter().zip(w).map(|(x, wg)| x * wg).sum::<f64>())
        .collect();
    let finite = !scales.is_empty() && scales.iter().all(|s| s.is_finite());
    (finite && scales.iter().cloned().fold(f64::INFINITY, f64::min) > 20.0)
        .then(|| scales.iter().sum::<f64>() / scales.len() as f64)
}

/// Solves the symmetric `m x = b` (`p × p`): by Cholesky when `m` is
/// positive definite, else by its pseudo-inverse (eigenvalues below
/// `256 ε` times the largest are taken as zero, as R's `MASS::ginv`).
pub(crate) fn solve_sym(m: &[f64], b: &[f64], p: usize) -> Vec<f64> {
    if let Some(l) = cholesky(m, p) {
        // L y = b, L' x = y.
        let mut y = b.to_vec();
        for i in 0..p {
            for k in 0..i {
                y[i] -= l[i * p + k] * y[k];
            }
            y[i] /= l[i * p + i];
        }
        for i in (0..p).rev() {
            for k in i + 1..p {
                y[i] -= l[k * p + i] * y[k];
            }
            y[i] /= l[i * p + i];
        }
        return y;
    }
    let (vals, vecs) = jacobi_eigen(m, p);
    let top = vals.iter().fold(0.0f64, |a, v| a.max(v.abs()));
    let cut = 256.0 * f64::EPSILON * top;
    let mut x = vec![0.0; p];
    for k in 0..p {
        if vals[k].abs() <= cut {
            continue;
        }
        let c: f64 = (0..p).map(|i| vecs[i * p + k] * b[i]).sum::<f64>() / vals[k];
        for i in 0..p {
            x[i] += c * vecs[i * p + k];
        }
    }
    x
}

/// The Cholesky factor `L` (row-major, lower) of `m`, or `None` when a
/// pivot is not clearly positive.
fn cholesky(m: &[f64], p: usize) -> Option<Vec<f64>> {
    let mut l = vec![0.0; p * p];
    for i in 0..p {
        for j in 0..=i {
            let mut s = m[i * p + j];
            for k in 0..j {
                s -= l[i * p + k] * l[j * p + k];
            }
            if i == j {
                if s.is_nan() || s <= 1e-12 * m[i * p + i].abs() || s <= 0.0 {
                    return None;
                }
                l[i * p + i] = s.sqrt();
            } else {
                l[i * p + j] = s / l[j * p + j];
            }
        }
    }
    Some(l)
}

/// Eigenvalues and eigenvectors (columns, row-major) of the symmetric `m`
/// by cyclic Jacobi rotations.
fn jacobi_eigen(m: &[f64], p: usize) -> (Vec<f64>, Vec<f64>) {
    let mut a = m.to_vec();
    let mut v = vec![0.0; p * p];
    for i in 0..p {
        v[i * p + i] = 1.0;
    }
    for _sweep in 0..100 {
        let off: f64 = (0..p)
            .flat_map(|i| (0..p).filter(move |&j| j != i).map(move |j| (i, j)))
            .map(|(i, j)| a[i * p + j] * a[i * p + j])
            .sum();
        let diag: f64 = (0..p).map(|i| a[i * p + i] * a[i * p + i]).sum();
        if off <= 1e-30 * diag.max(f64::MIN_POSITIVE) {
            break;
        }
        for q in 1..p {
            for r in 0..q {
                let apq = a[r * p + q];
                if apq == 0.0 {
                    continue;
                }
                let (app, aqq) = (a[r * p + r], a[q * p + q]);
                let theta = (aqq - app) / (2.0 * apq);
                let t = theta.signum() / (theta.abs() + (theta * theta + 1.0).sqrt());
                let t = if theta == 0.0 { 1.0 } else { t };
                let c = 1.0 / (t * t + 1.0).sqrt();
                let s = t * c;
                for k in 0..p {
                    let (akr, akq) = (a[k * p + r], a[k * p + q]);
                    a[k * p + r] = c * akr - s * akq;
                    a[k * p + q] = s * akr + c * akq;
                }
                for k in 0..p {
                    let (ark, aqk) = (a[r * p + k], a[q * p + k]);
                    a[r * p + k] = c * ark - s * aqk;
                    a[q * p + k] = s * ark + c * aqk;
                }
                for k in 0..p {
                    let (vkr, vkq) = (v[k * p + r], v[k * p + q]);
                    v[k * p + r] = c * vkr - s * vkq;
                    v[k * p + q] = s * vkr + c * vkq;
                }
            }
        }
    }
    ((0..p).map(|i| a[i * p + i]).collect(), v)
}

/// Trimming (R `trimWeights(strict = TRUE)`): weights below `lo` are
/// raised to it and weights above `hi` lowered to it; what that takes or
/// gives is shared equally among the other weights, pass after pass until
/// every weight is within the bounds. Zero weights (records a replicate
/// leaves out) are neither trimmed nor given a share. Returns the passes'
/// shares: a weight's trimmed value is [`trimmed`] of its value.
pub(crate) fn trim_shares(
    weights: &[f64],
    (lo, hi): (f64, f64),
    max_passes: usize,
) -> Result<Vec<f64>, usize> {
    let mut shares: Vec<f64> = Vec::new();
    let mut v: Vec<f64> = weights.iter().copied().filter(|&x| x != 0.0).collect();
    for pass in 0..max_passes {
        let mut cut = 0.0;
        let mut inside = 0usize;
        let mut any = false;
        for &x in &v {
            if x < lo || x > hi {
                any = true;
                cut += x - x.clamp(lo, hi);
            } else {
                inside += 1;
            }
        }
        if !any {
            return Ok(shares);
        }
        if inside == 0 {
            return Err(pass);
        }
        let s = cut / inside as f64;
        for x in v.iter_mut() {
            *x = if *x < lo || *x > hi {
                x.clamp(lo, hi)
            } else {
                *x + s
            };
        }
        shares.push(s);
    }
    Err(max_passes)
}

/// A weight's value after the trimming passes `shares` (see
/// [`trim_shares`]).
pub(crate) fn trimmed(mut x: f64, (lo, hi): (f64, f64), shares: &[f64]) -> f64 {
    if x == 0.0 {
        return 0.0;
    }
    for &s in shares {
        x = if x < lo || x > hi {
            x.clamp(lo, hi)
        } else {
            x + s
        };
    }
    x
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Post-stratification by hand: cells of weights 10+20 and 30 to
    /// totals 60 and 90 give factors 2 and 3.
    #[test]
    fn ratio_per_cell() {
        let s = poststratify(&[10.0, 20.0, 30.0], &[0, 0, 1], &[60.0, 90.0]).unwrap();
        assert_eq!(s.g, [2.0, 2.0, 3.0]);
        assert_eq!(
            poststratify(&[10.0, 0.0], &[0, 1], &[5.0, 7.0]).unwrap_err(),
            Failure::Empty(1)
        );
    }

    /// A 2×2 table raked to its margins (by hand: the solution of
    /// IPF on [[1,1],[1,1]] to rows (30,70) and columns (40,60) is the
    /// independence table rows×columns/100).
    #[test]
    fn ipf_reaches_the_independence_table() {
        let w = [1.0, 1.0, 1.0, 1.0];
        let margins = vec![
            (vec![0, 0, 1, 1], vec![30.0, 70.0]),
            (vec![0, 1, 0, 1], vec![40.0, 60.0]),
        ];
        let s = rake(&w, &margins, 1e-13, 100).unwrap();
        let want = [12.0, 18.0, 28.0, 42.0];
        for (g, w) in s.g.iter().zip(want) {
            assert!((g - w).abs() < 1e-10, "{g} vs {w}");
        }
    }

    /// Linear calibration on cell indicators is post-stratification, in
    /// one Newton step.
    #[test]
    fn linear_on_cells_is_poststratification() {
        let w = [10.0, 20.0, 30.0];
        let x = [1.0, 0.0, 1.0, 0.0, 0.0, 1.0];
        let s = calibrate(
            &w,
            &x,
            &[60.0, 90.0],
            Distance::Linear,
            (f64::NEG_INFINITY, f64::INFINITY),
            1e-12,
            50,
            None,
        )
        .unwrap();
        assert_eq!(s.iterations, 1);
        for (g, w) in s.g.iter().zip([2.0, 2.0, 3.0]) {
            assert!((g - w).abs() < 1e-14);
        }
    }

    /// The pseudo-inverse solves a singular consistent system (x ⟂ the
    /// null space).
    #[test]
    fn pseudo_inverse_of_a_singular_matrix() {
        // [[1,1],[1,1]] x = [2,2] → x = [1,1] (minimum norm).
        let x = solve_sym(&[1.0, 1.0, 1.0, 1.0], &[2.0, 2.0], 2);
        assert!(
            (x[0] - 1.0).abs() < 1e-12 && (x[1] - 1.0).abs() < 1e-12,
            "{x:?}"
        );
    }

    /// Trimming by hand: [1, 10, 10, 19] to [5, 15]: 1→5 (+4 needed),
    /// 19→15 (4 freed), the two 10s get 0 each.
    #[test]
    fn trimming_shares() {
        let w = [1.0, 10.0, 10.0, 19.0];
        let shares = trim_shares(&w, (5.0, 15.0), 10).unwrap();
        let t: Vec<f64> = w
            .iter()
            .map(|&x| trimmed(x, (5.0, 15.0), &shares))
            .collect();
        assert_eq!(t, [5.0, 10.0, 10.0, 15.0]);
        // [1, 10, 30] to [3, 20]: pass 1 raises 1→3 and lowers 30→20
        // (freeing 10−2 = 8) and gives 10 the 8: 18.
        let w = [1.0, 10.0, 30.0];
        let shares = trim_shares(&w, (3.0, 20.0), 10).unwrap();
        let t: Vec<f64> = w
            .iter()
            .map(|&x| trimmed(x, (3.0, 20.0), &shares))
            .collect();
        assert_eq!(t, [3.0, 18.0, 20.0]);
        // [1, 2, 30] to [3, 20]: every weight is outside, nothing can
        // take the cut.
        assert!(trim_shares(&[1.0, 2.0, 30.0], (3.0, 20.0), 10).is_err());
    }
}
