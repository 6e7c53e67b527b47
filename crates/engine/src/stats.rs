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
/// Below `a + 1` statrs' `gamma_ur` (puruspe's `gammq` gave NaN there for
/// large `a`: the p of a 20 × 20 table's chi-square below its df); above,
/// where the tail can be far below 1e-16, the continued fraction directly
/// (Numerical Recipes §6.2, modified Lentz).
pub fn upper_gamma_q(a: f64, x: f64) -> f64 {
    if x <= 0.0 {
        return 1.0;
    }
    if x < a + 1.0 {
        return statrs::function::gamma::gamma_ur(a, x);
    }
    let ln_front = -x + a * x.ln() - statrs::function::gamma::ln_gamma(a);
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

/// Measures of association of a two-way table whose rows and columns are
/// in the order of their codes (ordinal measures need that order).
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize)]
pub struct Association {
    /// Likelihood-ratio chi-square G² = 2 Σ O ln(O/E), on the Pearson
    /// test's degrees of freedom.
    pub lr_chi2: f64,
    /// Upper-tail probability of G².
    pub lr_p: f64,
    /// Goodman–Kruskal gamma (P − Q)/(P + Q), P and Q the concordant and
    /// discordant pairs (`None` without either).
    pub gamma: Option<f64>,
    /// Kendall's tau-b.
    pub tau_b: Option<f64>,
    /// Stuart's (Kendall's) tau-c.
    pub tau_c: Option<f64>,
    /// Somers' d with the column variable dependent.
    pub somers_d_col: Option<f64>,
    /// Somers' d with the row variable dependent.
    pub somers_d_row: Option<f64>,
    /// Goodman–Kruskal lambda predicting the column from the row.
    pub lambda_col: Option<f64>,
    /// Lambda predicting the row from the column.
    pub lambda_row: Option<f64>,
    /// Symmetric lambda.
    pub lambda: Option<f64>,
    /// Pearson's r of the codes (numeric codes only).
    pub pearson_r: Option<f64>,
    /// Spearman's rho: Pearson's r of the categories' mid-ranks.
    pub spearman_rho: Option<f64>,
    /// Eta, the correlation ratio, with the column's codes the interval
    /// dependent and the rows its groups: sqrt(1 − SS_within / SS_total)
    /// (numeric codes only).
    pub eta_col: Option<f64>,
    /// Eta with the row's codes dependent and the columns the groups.
    pub eta_row: Option<f64>,
}

/// The association measures of the `r × c` table `t` (counts, or weighted
/// counts, which the formulas treat as counts, as SAS does), rows and
/// columns in code order; `xs`, `ys` the codes when numeric. `None` with
/// fewer than two non-empty rows or columns.
pub fn association(t: &[Vec<f64>], xs: Option<&[f64]>, ys: Option<&[f64]>) -> Option<Association> {
    let chi = chi_square(t)?;
    let (r, c) = (t.len(), t[0].len());
    let rs: Vec<f64> = t.iter().map(|row| row.iter().sum()).collect();
    let cs: Vec<f64> = (0..c).map(|j| t.iter().map(|row| row[j]).sum()).collect();
    let n: f64 = rs.iter().sum();
    let mut g2 = 0.0;
    for i in 0..r {
        for j in 0..c {
            let o = t[i][j];
            if o > 0.0 {
                g2 += 2.0 * o * (o / (rs[i] * cs[j] / n)).ln();
            }
        }
    }
    // Concordant and discordant pairs from corner sums: below[i][j] =
    // Σ_{k > i, l > j}, and Σ_{k > i, l < j}.
    let mut se = vec![vec![0.0; c + 2]; r + 2];
    let mut sw = vec![vec![0.0; c + 2]; r + 2];
    for i in (0..r).rev() {
        for j in (0..c).rev() {
            se[i][j] = t[i][j] + se[i + 1][j] + se[i][j + 1] - se[i + 1][j + 1];
        }
        for j in 0..c {
            // sw[i][j + 1]: Σ_{k ≥ i, l ≤ j}.
            sw[i][j + 1] = t[i][j] + sw[i + 1][j + 1] + sw[i][j] - sw[i + 1][j];
        }
    }
    let (mut p, mut q) = (0.0, 0.0);
    for i in 0..r {
        for j in 0..c {
            p += t[i][j] * se[i + 1][j + 1];
            q += t[i][j] * sw[i + 1][j];
        }
    }
    let ratio = |a: f64, b: f64| (b != 0.0 && b.is_finite()).then(|| a / b);
    let sr2: f64 = rs.iter().map(|x| x * x).sum();
    let sc2: f64 = cs.iter().map(|x| x * x).sum();
    let (wr, wc) = (n * n - sr2, n * n - sc2);
    // Rows and columns with a total (an all-zero row is no category of
    // the data: Cramér's V and the df leave it out too).
    let rk = rs.iter().filter(|&&x| x != 0.0).count();
    let ck = cs.iter().filter(|&&x| x != 0.0).count();
    let m = rk.min(ck) as f64;
    let max_c = cs.iter().cloned().fold(0.0, f64::max);
    let max_r = rs.iter().cloned().fold(0.0, f64::max);
    let row_max: f64 = t
        .iter()
        .map(|row| row.iter().cloned().fold(0.0, f64::max))
        .sum();
    let col_max: f64 = (0..c)
        .map(|j| t.iter().map(|row| row[j]).fold(0.0, f64::max))
        .sum();
    // Pearson's r of scores given per row and column.
    let corr = |x: &[f64], y: &[f64]| -> Option<f64> {
        let mx = (0..r).map(|i| rs[i] * x[i]).sum::<f64>() / n;
        let my = (0..c).map(|j| cs[j] * y[j]).sum::<f64>() / n;
        let sxx: f64 = (0..r).map(|i| rs[i] * (x[i] - mx).powi(2)).sum();
        let syy: f64 = (0..c).map(|j| cs[j] * (y[j] - my).powi(2)).sum();
        let sxy: f64 = (0..r)
            .flat_map(|i| (0..c).map(move |j| (i, j)))
            .map(|(i, j)| t[i][j] * (x[i] - mx) * (y[j] - my))
            .sum();
        ratio(sxy, (sxx * syy).sqrt())
    };
    let midranks = |tot: &[f64]| -> Vec<f64> {
        let mut cum = 0.0;
        tot.iter()
            .map(|&k| {
                let m = cum + (k + 1.0) / 2.0;
                cum += k;
                m
            })
            .collect()
    };
    Some(Association {
        lr_chi2: g2,
        lr_p: upper_gamma_q(chi.df as f64 / 2.0, g2 / 2.0),
        gamma: ratio(p - q, p + q),
        tau_b: ratio(2.0 * (p - q), (wr * wc).sqrt()),
        tau_c: ratio(2.0 * m * (p - q), n * n * (m - 1.0)),
        somers_d_col: ratio(2.0 * (p - q), wr),
        somers_d_row: ratio(2.0 * (p - q), wc),
        lambda_col: ratio(row_max - max_c, n - max_c),
        lambda_row: ratio(col_max - max_r, n - max_r),
        lambda: ratio(row_max + col_max - max_c - max_r, 2.0 * n - max_c - max_r),
        pearson_r: xs.zip(ys).and_then(|(x, y)| corr(x, y)),
        spearman_rho: corr(&midranks(&rs), &midranks(&cs)),
        eta_col: ys.and_then(|y| eta(t, y, false)),
        eta_row: xs.and_then(|x| eta(t, x, true)),
    })
}

/// The correlation ratio of table `t` with `v` the codes of the dependent
/// dimension (the rows' when `rows`, else the columns') and the other
/// dimension's categories the groups.
fn eta(t: &[Vec<f64>], v: &[f64], rows: bool) -> Option<f64> {
    let (r, c) = (t.len(), t[0].len());
    // n(g, k): group g, dependent category k.
    let at = |g: usize, k: usize| if rows { t[k][g] } else { t[g][k] };
    let (groups, cats) = if rows { (c, r) } else { (r, c) };
    let n: f64 = (0..groups)
        .map(|g| (0..cats).map(|k| at(g, k)).sum::<f64>())
        .sum();
    let mean = (0..groups)
        .map(|g| (0..cats).map(|k| at(g, k) * v[k]).sum::<f64>())
        .sum::<f64>()
        / n;
    let total: f64 = (0..groups)
        .map(|g| {
            (0..cats)
                .map(|k| at(g, k) * (v[k] - mean).powi(2))
                .sum::<f64>()
        })
        .sum();
    let within: f64 = (0..groups)
        .map(|g| {
            let ng: f64 = (0..cats).map(|k| at(g, k)).sum();
            if ng == 0.0 {
                return 0.0;
            }
            let mg = (0..cats).map(|k| at(g, k) * v[k]).sum::<f64>() / ng;
            (0..cats)
                .map(|k| at(g, k) * (v[k] - mg).powi(2))
                .sum::<f64>()
        })
        .sum();
    (total > 0.0).then(|| (1.0 - within / total).max(0.0).sqrt())
}
