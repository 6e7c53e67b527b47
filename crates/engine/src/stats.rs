//! Statistics computed from a two-way table.

/// Pearson's chi-square test of independence and Cramér's V.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ChiSquare {
    /// The statistic Σ (O − E)² / E.
    pub chi2: f64,
    /// Degrees of freedom (r − 1)(c − 1).
    pub df: u64,
    /// Upper-tail probability of χ²(df).
    pub p: f64,
    /// Cramér's V = sqrt(χ² / (n · (min(r, c) − 1))).
    pub cramers_v: f64,
    /// Table total.
    pub n: f64,
}

/// Computes the test on an `r × c` table (rows of equal length). Rows and
/// columns that sum to zero are ignored. `None` when fewer than two rows or
/// columns remain.
pub fn chi_square(table: &[Vec<f64>]) -> Option<ChiSquare> {
    let r = table.len();
    let c = table.first().map_or(0, |x| x.len());
    let rs: Vec<f64> = table.iter().map(|row| row.iter().sum()).collect();
    let cs: Vec<f64> = (0..c)
        .map(|j| table.iter().map(|row| row[j]).sum())
        .collect();
    let n: f64 = rs.iter().sum();
    let rk = rs.iter().filter(|&&x| x != 0.0).count();
    let ck = cs.iter().filter(|&&x| x != 0.0).count();
    if rk < 2 || ck < 2 || n <= 0.0 {
        return None;
    }
    let mut chi2 = 0.0;
    for i in 0..r {
        for j in 0..c {
            let e = rs[i] * cs[j] / n;
            if e > 0.0 {
                let d = table[i][j] - e;
                chi2 += d * d / e;
            }
        }
    }
    let df = ((rk - 1) * (ck - 1)) as u64;
    let p = upper_gamma_q(df as f64 / 2.0, chi2 / 2.0);
    let k = rk.min(ck) as f64 - 1.0;
    Some(ChiSquare {
        chi2,
        df,
        p,
        cramers_v: (chi2 / (n * k)).sqrt(),
        n,
    })
}

/// The two-sided Student t quantile: `t` with `P(|T| > t) = 1 − level`
/// for `df` degrees of freedom (`df = ∞`: the normal quantile). A
/// confidence interval of level `level` is estimate ± t · SE.
pub fn t_quantile(level: f64, df: f64) -> f64 {
    let alpha = 1.0 - level;
    if !(alpha > 0.0 && alpha < 1.0) || df.is_nan() || df <= 0.0 {
        return f64::NAN;
    }
    if df.is_infinite() {
        return std::f64::consts::SQRT_2 * puruspe::inverfc(alpha);
    }
    // P(|T| > t) = I_{df/(df + t²)}(df/2, 1/2).
    let x = beta_quantile(alpha, df / 2.0, 0.5);
    (df * (1.0 - x) / x).sqrt()
}

/// The regularized incomplete beta function I_x(a, b) (statrs; puruspe's
/// `betai` picks its continued fraction on the wrong side for some
/// shapes, and its `invbetai` panics for large ones).
pub fn beta_reg(a: f64, b: f64, x: f64) -> f64 {
    statrs::function::beta::beta_reg(a, b, x.clamp(0.0, 1.0))
}

/// The `q` quantile of the Beta(a, b) distribution (`a`, `b` > 0), by
/// bisection on [`beta_reg`]: slow beside Newton's method, but it cannot
/// leave [0, 1], and it is used a few times per table.
pub fn beta_quantile(q: f64, a: f64, b: f64) -> f64 {
    let (mut lo, mut hi) = (0.0f64, 1.0f64);
    for _ in 0..1100 {
        let mid = 0.5 * (lo + hi);
        if mid <= lo || mid >= hi {
            break;
        }
        if beta_reg(a, b, mid) < q {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    0.5 * (lo + hi)
}

/// Regularized upper incomplete gamma Q(a, x), accurate in the far tail.
///
/// `puruspe::gammq` computes the tail as 1 − P and returns 0 below ~1e-16;
/// chi-square p-values of large tables live far below that, so the tail uses
/// the continued fraction directly (Numerical Recipes §6.2, modified Lentz).
pub fn upper_gamma_q(a: f64, x: f64) -> f64 {
    if x <= 0.0 {
        return 1.0;
    }
    if x < a + 1.0 {
        return puruspe::gammq(a, x);
    }
    let ln_front = -x + a * x.ln() - puruspe::ln_gamma(a);
    let tiny = 1e-300;
    let mut b = x + 1.0 - a;
    let mut c = 1.0 / tiny;
    let mut d = 1.0 / b;
    let mut h = d;
    for i in 1..10_000 {
        let an = -(i as f64) * (i as f64 - a);
        b += 2.0;
        d = an * d + b;
        if d.abs() < tiny {
            d = tiny;
        }
        c = b + an / c;
        if c.abs() < tiny {
            c = tiny;
        }
        d = 1.0 / d;
        let del = d * c;
        h *= del;
        if (del - 1.0).abs() < 1e-16 {
            break;
        }
    }
    (ln_front.exp()) * h
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Against scipy.stats.t.ppf(1 − α/2, df) and norm.ppf(0.975).
    #[test]
    fn t_quantiles_match_scipy() {
        for (level, df, want) in [
            (0.95, 1.0, 12.706204736174694),
            (0.95, 7.0, 2.364624251592784),
            (0.95, 79.0, 1.9904502102301285),
            (0.95, 159.0, 1.9749962127674756),
            (0.90, 79.0, 1.6643714091365505),
            (0.99, 30.0, 2.7499956535672254),
            (0.95, f64::INFINITY, 1.959963984540054),
        ] {
            let got = t_quantile(level, df);
            assert!(
                (got - want).abs() < 1e-9 * want,
                "{level} {df}: {got} vs {want}"
            );
        }
        assert!(t_quantile(1.0, 5.0).is_nan());
        assert!(t_quantile(0.95, 0.0).is_nan());
    }

    #[test]
    fn hand_computed_2x2() {
        // O = [[10, 20], [30, 40]]; E = [[12, 18], [28, 42]]
        // chi2 = 4/12 + 4/18 + 4/28 + 4/42 = 0.793650...
        let t = chi_square(&[vec![10.0, 20.0], vec![30.0, 40.0]]).unwrap();
        assert!((t.chi2 - 0.7936507936507936).abs() < 1e-12);
        assert_eq!(t.df, 1);
        // scipy.stats.chi2.sf(0.7936507936507936, 1) = 0.37299848361348686
        assert!((t.p - 0.372_998_483_613_486_86).abs() < 1e-9, "{}", t.p);
        assert!((t.cramers_v - (0.7936507936507936f64 / 100.0).sqrt()).abs() < 1e-12);
    }

    #[test]
    fn far_tail_matches_scipy() {
        // scipy.stats.chi2.sf(x, df)
        for (x, df, want) in [
            (165.9732f64, 9.0f64, 4.253444838433999e-31),
            (519.1179, 11.0, 2.6776338930691913e-104),
            (30.0, 9.0, 0.00043872177097947936),
            (1000.0, 4.0, 3.5694127797773694e-215),
        ] {
            let got = upper_gamma_q(df / 2.0, x / 2.0);
            assert!(
                ((got - want) / want).abs() < 1e-9,
                "{x} {df}: {got} vs {want}"
            );
        }
    }
}
