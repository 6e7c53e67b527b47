//! Building a survey design from a user's description (the CLI's
//! `microtab design` and the Python package's `Dataset.design(…)`):
//! checks every name against the dataset, expands replicate-weight
//! ranges, fixes the replicate scale from the design's kind, and finds a
//! Taylor design's PSU structure.

use crate::{Error, Result};
use microtab_store::{Dataset, Design, Kind, LonelyPsu, RepType, Replicates, Variable};

/// A survey design as a user describes it: a weight and either replicate
/// weights (with their kind and scale) or strata/PSUs/FPC for Taylor
/// linearization (neither: every record its own PSU, one stratum).
#[derive(Debug, Clone)]
pub struct DesignSpec {
    /// The full-sample weight.
    pub weight: String,
    /// Replicate weights: an inclusive numbered range (`REPWTP1-REPWTP80`),
    /// a comma list, or both.
    pub repweights: Option<String>,
    /// Kind of replication (fixes the default scale).
    pub kind: RepType,
    /// Fay's coefficient ρ (kind `fay` only).
    pub rho: Option<f64>,
    /// The overall scale C, instead of the kind's.
    pub scale: Option<f64>,
    /// One coefficient per replicate (default 1 each; required for `jkn`).
    pub rscales: Option<Vec<f64>>,
    /// Deviations from the full-sample estimate (`true`, the Census
    /// Bureau's and IPUMS' formula) or from the replicates' mean.
    pub mse: bool,
    /// Strata variable (Taylor).
    pub strata: Option<String>,
    /// PSU variable (Taylor).
    pub cluster: Option<String>,
    /// Finite population correction variable (Taylor).
    pub fpc: Option<String>,
    /// Strata with a single PSU (Taylor).
    pub lonely_psu: LonelyPsu,
}

impl DesignSpec {
    /// A weight-only design (Taylor linearization, every record a PSU);
    /// set the other fields for replicate or clustered designs.
    pub fn new(weight: impl Into<String>) -> DesignSpec {
        DesignSpec {
            weight: weight.into(),
            repweights: None,
            kind: RepType::Sdr,
            rho: None,
            scale: None,
            rscales: None,
            mse: true,
            strata: None,
            cluster: None,
            fpc: None,
            lonely_psu: LonelyPsu::Fail,
        }
    }
}

fn bad(m: impl Into<String>) -> Error {
    Error::Design(m.into())
}

/// Refuses a variable that cannot be a replicate weight: text, or with
/// missing values (a replicate weight must be present for every record).
fn usable_replicate(v: &Variable) -> Result<()> {
    if v.kind == Kind::String {
        return Err(bad(format!(
            "replicate weight {} is a text variable",
            v.name
        )));
    }
    if v.nulls > 0 || !v.missing_codes.is_empty() {
        return Err(bad(format!(
            "replicate weight {} has missing values (a replicate weight must be present for every record)",
            v.name
        )));
    }
    Ok(())
}

/// Expands `REPWTP1-REPWTP80,EXTRA` into variable names as the dataset
/// spells them, each a numeric variable without missing values.
pub fn replicate_names(ds: &Dataset, spec: &str) -> Result<Vec<String>> {
    let mut names = Vec::new();
    for part in spec.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let expanded = match part.split_once('-') {
            Some((a, b)) => {
                let split = |s: &str| {
                    let d = s.len() - s.trim_end_matches(|c: char| c.is_ascii_digit()).len();
                    let (p, n) = s.split_at(s.len() - d);
                    (p.to_string(), n.parse::<u64>().ok())
                };
                let ((pa, na), (pb, nb)) = (split(a.trim()), split(b.trim()));
                let (Some(na), Some(nb)) = (na, nb) else {
                    return Err(bad(format!("'{part}': a range of replicate weights is two names ending in numbers, as in REPWTP1-REPWTP80")));
                };
                if !pa.eq_ignore_ascii_case(&pb) || na > nb {
                    return Err(bad(format!("'{part}': expected a range like REPWTP1-REPWTP80 (the same prefix, the first number no larger than the last)")));
                }
                (na..=nb).map(|i| format!("{pa}{i}")).collect()
            }
            None => vec![part.to_string()],
        };
        for n in expanded {
            let v = ds
                .variable(&n)
                .map_err(|e| bad(format!("replicate weight {n}: {e}")))?;
            usable_replicate(v)?;
            if names.contains(&v.name) {
                return Err(bad(format!("replicate weight {} is named twice", v.name)));
            }
            names.push(v.name.clone());
        }
    }
    if names.len() < 2 {
        return Err(bad(format!(
            "a replicate design needs at least two replicate weights, found {}",
            names.len()
        )));
    }
    Ok(names)
}

/// Checks a described design against the dataset and builds it (reading
/// the strata and PSU variables of a Taylor design). Nothing is stored:
/// write it with `Dataset::update_manifest`.
pub fn build_design(ds: &Dataset, a: &DesignSpec) -> Result<Design> {
    let wvar = ds
        .variable(&a.weight)
        .map_err(microtab_engine::Error::from)?
        .clone();
    if wvar.kind == Kind::String {
        return Err(bad(format!("the weight {} is a text variable", wvar.name)));
    }
    let Some(spec) = &a.repweights else {
        if a.rho.is_some() || a.scale.is_some() || a.rscales.is_some() || !a.mse {
            return Err(bad("rho, scale, rscales and no-mse describe replicate weights: give them with the replicate weights"));
        }
        let taylor = crate::taylor_structure(
            ds,
            &wvar.name,
            a.strata.as_deref(),
            a.cluster.as_deref(),
            a.fpc.as_deref(),
            a.lonely_psu,
        )?;
        // The same weight keeps the adjustment it was made by (set again
        // for other strata, clusters or lonely-PSU option).
        let calibration = ds
            .manifest()
            .design
            .as_ref()
            .filter(|d| d.weight == wvar.name)
            .and_then(|d| d.taylor.as_ref())
            .filter(|t| t.rows == ds.rows())
            .and_then(|t| t.calibration.clone());
        return Ok(Design {
            weight: wvar.name.clone(),
            replicates: None,
            taylor: Some(microtab_store::Taylor {
                calibration,
                ..taylor
            }),
        });
    };
    if a.strata.is_some() || a.cluster.is_some() || a.fpc.is_some() {
        return Err(bad("strata, clusters and an FPC describe a Taylor linearization design; a replicate design takes its variance from the replicate weights: give one or the other"));
    }
    let weights = replicate_names(ds, spec)?;
    if weights.contains(&wvar.name) {
        return Err(bad(format!(
            "the weight {} is also listed as a replicate weight",
            wvar.name
        )));
    }
    let n = weights.len();
    let kind = a.kind;
    if kind == RepType::Fay && !a.rho.is_some_and(|r| (0.0..1.0).contains(&r)) {
        return Err(bad(
            "a Fay design needs rho, its coefficient, with 0 ≤ rho < 1 (e.g. 0.5)",
        ));
    }
    if kind != RepType::Fay && a.rho.is_some() {
        return Err(bad("rho is Fay's coefficient: give it with type fay"));
    }
    let scale = match (a.scale, default_scale(kind, n, a.rho), kind) {
        (Some(s), _, _) => s,
        (None, Some(s), _) => s,
        (None, None, RepType::Jkn) => 1.0,
        (None, None, _) => return Err(bad("type other needs a scale")),
    };
    if !(scale.is_finite() && scale > 0.0) {
        return Err(bad(format!(
            "the scale must be a positive number, found {scale}"
        )));
    }
    let rscales = match &a.rscales {
        Some(c) if c.len() != n => {
            return Err(bad(format!(
                "rscales has {} coefficients for {n} replicate weights",
                c.len()
            )))
        }
        Some(c) if c.iter().any(|x| !x.is_finite() || *x < 0.0) => {
            return Err(bad("rscales must be numbers ≥ 0"))
        }
        Some(c) => c.clone(),
        None if kind == RepType::Jkn => {
            return Err(bad(
                "a JKn design needs rscales: (n_h − 1)/n_h for each replicate's stratum",
            ))
        }
        None => vec![1.0; n],
    };
    let rank = replicate_rank(ds, &weights)?;
    Ok(Design {
        weight: wvar.name.clone(),
        replicates: Some(Replicates {
            kind,
            weights,
            scale,
            rscales,
            mse: a.mse,
            rho: a.rho,
            rank: Some(rank),
        }),
        taylor: None,
    })
}

/// The numerical rank of the replicate weights of every record of `ds`
/// (the records × replicates matrix), as R's `degf()` of a replicate
/// design finds it: `qr(weights(design, "analysis"), tol = 1e-5)$rank`.
///
/// R's QR (LINPACK `dqrdc2`) takes the columns in order and sets one
/// aside when the norm of its part orthogonal to the columns kept falls
/// below 10⁻⁵ of its own norm. The same test on the Gram matrix `WᵀW`
/// (R × R, accumulated in one pass over the records, `R(R + 1)/2`
/// products per record): a Cholesky factorization in column order whose
/// pivot `d_j` (the squared orthogonal norm) is set aside below `10⁻¹⁰
/// G_jj`. Computed once, when the design is set, and stored with it.
pub fn replicate_rank(ds: &Dataset, names: &[String]) -> Result<usize> {
    let cols: Vec<microtab_store::Column> = names
        .iter()
        .map(|n| ds.column(n))
        .collect::<std::result::Result<_, _>>()
        .map_err(microtab_engine::Error::from)?;
    let r = cols.len();
    let rows = ds.rows() as usize;
    // A stripe of every column (the unit the store checks) decoded to
    // f64, then its products summed in sub-chunks that stay in cache.
    const CHUNK: usize = 512;
    let stripe = microtab_store::STRIPE_ROWS;
    let mut gram = vec![0.0f64; r * r];
    let mut x = vec![0.0f64; r * stripe];
    let mut buf = Vec::new();
    let mut start = 0;
    while start < rows {
        let n = stripe.min(rows - start);
        for (c, col) in cols.iter().enumerate() {
            let d = col
                .rows_view(start, n, &mut buf)
                .map_err(microtab_engine::Error::from)?;
            for (i, o) in x[c * stripe..c * stripe + n].iter_mut().enumerate() {
                *o = d.get_f64(i);
            }
        }
        let mut at = 0;
        while at < n {
            let k = CHUNK.min(n - at);
            let col = |c: usize| &x[c * stripe + at..c * stripe + at + k];
            for a in 0..r {
                let xa = col(a);
                // Four products per read of column a.
                let mut b = 0;
                while b + 4 <= a + 1 {
                    let d = dot4(xa, [col(b), col(b + 1), col(b + 2), col(b + 3)]);
                    for (i, v) in d.iter().enumerate() {
                        gram[a * r + b + i] += v;
                    }
                    b += 4;
                }
                for b in b..=a {
                    gram[a * r + b] += dot(xa, col(b));
                }
            }
            at += k;
        }
        start += n;
    }
    Ok(gram_rank(&gram, r, 1e-5))
}

/// `Σ a_i b_k,i` for four columns `b`, in four lanes each (vectorized).
fn dot4(a: &[f64], b: [&[f64]; 4]) -> [f64; 4] {
    let mut acc = [[0.0f64; 4]; 4];
    let n = a.len() / 4 * 4;
    for i in (0..n).step_by(4) {
        let x = &a[i..i + 4];
        for (k, bk) in b.iter().enumerate() {
            let y = &bk[i..i + 4];
            for l in 0..4 {
                acc[k][l] += x[l] * y[l];
            }
        }
    }
    let mut out = [0.0; 4];
    for (k, bk) in b.iter().enumerate() {
        out[k] = acc[k].iter().sum::<f64>()
            + a[n..].iter().zip(&bk[n..]).map(|(x, y)| x * y).sum::<f64>();
    }
    out
}

/// `Σ a_i b_i`, in eight lanes (vectorized).
fn dot(a: &[f64], b: &[f64]) -> f64 {
    let mut acc = [0.0f64; 8];
    let (ca, cb) = (a.chunks_exact(8), b.chunks_exact(8));
    let tail: f64 = ca
        .remainder()
        .iter()
        .zip(cb.remainder())
        .map(|(x, y)| x * y)
        .sum();
    for (x, y) in ca.zip(cb) {
        for k in 0..8 {
            acc[k] += x[k] * y[k];
        }
    }
    acc.iter().sum::<f64>() + tail
}

/// The rank of a matrix `W` of `r` columns from its Gram matrix `g =
/// WᵀW` (lower triangle, row-major `r × r`), with R's QR rule: columns
/// in order, one set aside when its norm orthogonal to those kept is
/// below `tol` times its norm.
pub(crate) fn gram_rank(g: &[f64], r: usize, tol: f64) -> usize {
    let at = |a: usize, b: usize| if a >= b { g[a * r + b] } else { g[b * r + a] };
    // Kept columns and their rows of the Cholesky factor L (WᵀW = LLᵀ
    // over the kept columns).
    let mut kept: Vec<usize> = Vec::new();
    let mut l: Vec<Vec<f64>> = Vec::new();
    for j in 0..r {
        let gjj = at(j, j);
        if gjj <= 0.0 || !gjj.is_finite() {
            continue;
        }
        let mut lj = Vec::with_capacity(kept.len() + 1);
        for (k, &a) in kept.iter().enumerate() {
            let s: f64 = (0..k).map(|m| lj[m] * l[k][m]).sum();
            lj.push((at(j, a) - s) / l[k][k]);
        }
        let d = gjj - lj.iter().map(|x| x * x).sum::<f64>();
        if d > tol * tol * gjj {
            lj.push(d.sqrt());
            kept.push(j);
            l.push(lj);
        }
    }
    kept.len()
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
    use super::gram_rank;

    /// The Gram matrix of `cols` (lower triangle, row-major).
    fn gram(cols: &[Vec<f64>]) -> Vec<f64> {
        let r = cols.len();
        let mut g = vec![0.0; r * r];
        for a in 0..r {
            for b in 0..=a {
                g[a * r + b] = cols[a].iter().zip(&cols[b]).map(|(x, y)| x * y).sum();
            }
        }
        g
    }

    /// Ranks by hand: independent columns; a repeated column; a sum of
    /// two others; a zero column; a column off a combination by a part in
    /// 10⁶ of its norm (below R's 10⁻⁵: dependent) and by a part in 10³
    /// (independent), as R's `qr(…, tol = 1e-5)$rank` finds them.
    #[test]
    fn ranks_by_hand() {
        let a = vec![1.0, 2.0, 0.0, 1.0];
        let b = vec![0.0, 1.0, 3.0, 1.0];
        let c = vec![2.0, 0.0, 1.0, 5.0];
        let sum: Vec<f64> = a.iter().zip(&b).map(|(x, y)| x + y).collect();
        let off = |e: f64| -> Vec<f64> {
            sum.iter()
                .zip([1.0, -1.0, 1.0, -1.0])
                .map(|(x, s)| x + s * e)
                .collect()
        };
        let rank = |cols: Vec<Vec<f64>>| gram_rank(&gram(&cols), cols.len(), 1e-5);
        assert_eq!(rank(vec![a.clone(), b.clone(), c.clone()]), 3);
        assert_eq!(rank(vec![a.clone(), b.clone(), a.clone()]), 2);
        assert_eq!(rank(vec![a.clone(), b.clone(), sum.clone(), c.clone()]), 3);
        assert_eq!(rank(vec![a.clone(), vec![0.0; 4], b.clone()]), 2);
        assert_eq!(rank(vec![a.clone(), b.clone(), off(4e-6)]), 2);
        assert_eq!(rank(vec![a.clone(), b.clone(), off(4e-3)]), 3);
    }
}
