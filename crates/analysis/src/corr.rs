//! Weighted Pearson correlations of several variables (SDA's CORRTAB),
//! with design-based standard errors.
//!
//! The records with a value of every variable are used (listwise, as R's
//! `svyvar(na.rm = TRUE)`). With means `m` and `W = Σ w`, the covariance
//! is `C_ab = Σ w (x_a − m_a)(x_b − m_b) / W` and the correlation
//! `r_ab = C_ab / √(C_aa C_bb)`; the covariance matrix shown is R's
//! `svyvar` (`C · n/(n − 1)`).
//!
//! Standard errors:
//! - replicate weights: each replicate's correlation from its own means
//!   and covariances (R `withReplicates` of `cov.wt(cor = TRUE)`);
//! - Taylor: the linearization of `r` (R `svycontrast` of `svyvar`): each
//!   record's `w/W · [(d_a d_b − C_ab)/√(C_aa C_bb) − r/2 ((d_a² − C_aa)/C_aa
//!   + (d_b² − C_bb)/C_bb)]`, `d = x − m`, totalled by PSU;
//! - no design, weighted: the same, each record its own PSU;
//! - no design, unweighted: Pearson's `SE = √((1 − r²)/(n − 2))` on
//!   `n − 2` df (the t test of `scipy.stats.pearsonr`), with Fisher's
//!   interval `tanh(atanh r ± z/√(n − 3))`.
//!
//! Over one dataset, one scan: the cross products about a centre (the
//! means of the first records, [`provisional_centre`]), with the
//! replicates' or the design covariance of their totals, from which each
//! pair's influence `l·a` (about the means, `d − δ`) has its variance.
//! Over parts, three rounds: the means, the centred cross products, and
//! under linearization the influences.

use crate::model::Inference;
use crate::ratio::{inference, numeric, survey_of};
use crate::sums::{Influence, Scan, Spec, Sums};
use crate::survey::Provenance;
use crate::{Request, Result};
use microtab_engine::ScanOptions;
use microtab_store::Dataset;
use serde::{Deserialize, Serialize};
use std::sync::Arc;

/// A correlation matrix.
#[derive(Debug, Clone, Serialize)]
pub struct Correlations {
    /// The dataset (its path; the HTTP API gives its served name).
    pub dataset: String,
    /// The variables, in the order given.
    pub variables: Vec<String>,
    /// Records with a value of every variable.
    pub n: u64,
    /// Their weight (records when unweighted).
    pub weighted_n: f64,
    /// Each variable's weighted mean.
    pub means: Vec<f64>,
    /// Each variable's weighted standard deviation (`√(C_aa · n/(n − 1))`).
    pub sds: Vec<f64>,
    /// The correlations, row by row (1 on the diagonal).
    pub matrix: Vec<Vec<f64>>,
    /// The covariances, row by row (R `svyvar`).
    pub covariance: Vec<Vec<f64>>,
    /// Each pair once (`a` before `b` in the order given): its
    /// correlation with SE, t (against 0), p and interval.
    pub pairs: Vec<Pair>,
    /// Degrees of freedom of the t tests.
    pub df: f64,
    /// How the standard errors were computed, and over what.
    #[serde(flatten)]
    pub provenance: Provenance,
}

/// One pair's correlation.
#[derive(Debug, Clone, Serialize)]
pub struct Pair {
    /// The first variable.
    pub a: String,
    /// The second.
    pub b: String,
    /// `r` with its inference (`None`: a variable is constant).
    #[serde(flatten)]
    pub inference: Option<Inference>,
}

/// Position of `(a, b)`, `a ≤ b`, in the upper triangle of `p` variables.
fn tri(p: usize, a: usize, b: usize) -> usize {
    a * p - a * (a + 1) / 2 + b
}

/// Covariances (`Σ w d_a d_b / W − T_a T_b / W²`) from the totals
/// `[W, T_a…, T_ab…]` of values less `centre`. A variable whose variance
/// is below what doubles can tell from its mean (`(1e-14·m)²`: a
/// constant, whose weighted mean is not exactly itself) is constant: its
/// variance and covariances are 0.
fn covariances(t: &[f64], centre: &[f64], p: usize) -> Vec<f64> {
    let w = t[0];
    let mut c = vec![0.0; p * p];
    for a in 0..p {
        for b in a..p {
            let v = t[1 + p + tri(p, a, b)] / w - t[1 + a] * t[1 + b] / (w * w);
            (c[a * p + b], c[b * p + a]) = (v, v);
        }
    }
    for a in 0..p {
        let m = centre[a] + t[1 + a] / w;
        if c[a * p + a] <= (1e-14 * m).powi(2) {
            for b in 0..p {
                (c[a * p + b], c[b * p + a]) = (0.0, 0.0);
            }
        }
    }
    c
}

fn correlation(c: &[f64], p: usize, a: usize, b: usize) -> f64 {
    c[a * p + b] / (c[a * p + a] * c[b * p + b]).sqrt()
}

/// The variables as stored: two or more different numeric ones.
fn names_of(ds: &Dataset, vars: &[String]) -> Result<Vec<String>> {
    let mut names = Vec::new();
    for v in vars {
        let n = numeric(ds, v)?.to_string();
        if names.contains(&n) {
            names.clear();
            break;
        }
        names.push(n);
    }
    if names.len() < 2 {
        return Err(crate::Error::CorrVariables {
            given: vars.join(", "),
        });
    }
    Ok(names)
}

/// A perfect correlation (to within rounding): `r = ±1` with no
/// spread, `t` infinite (`null` in JSON), `p` 0 (as scipy's `pearsonr`).
fn perfect(sign: f64) -> Inference {
    Inference {
        estimate: sign,
        se: 0.0,
        t: sign * f64::INFINITY,
        p: 0.0,
        lo: sign,
        hi: sign,
    }
}

/// Fisher's interval `tanh(atanh r ± z/√(n − 3))` (scipy's
/// `confidence_interval`) in place of the Wald one.
fn fisher(mut i: Inference, n: u64, level: f64) -> Inference {
    let z = microtab_engine::stats::t_quantile(level, f64::INFINITY);
    let h = z / (n as f64 - 3.0).sqrt();
    let a = i.estimate.atanh();
    (i.lo, i.hi) = ((a - h).tanh(), (a + h).tanh());
    i
}

/// Per pair `(x, y)`, the influence `(dx·dy − cxy)/s − r/2·((dx² −
/// cxx)/cxx + (dy² − cyy)/cyy)` (`s = √(cxx·cyy)`, `c` the covariances,
/// `r` the correlations) as `dx·dy/s − dx²·r/(2cxx) − dy²·r/(2cyy) + r −
/// cxy/s`: its four constants.
fn influence_terms(
    (c, r, pairs): (&[f64], &[f64], &[(usize, usize)]),
    p: usize,
) -> Vec<(usize, usize, [f64; 4])> {
    pairs
        .iter()
        .zip(r)
        .map(|(&(x, y), &r)| {
            let (cxx, cyy, cxy) = (c[x * p + x], c[y * p + y], c[x * p + y]);
            let s = (cxx * cyy).sqrt();
            (
                x,
                y,
                [1.0 / s, r / (2.0 * cxx), r / (2.0 * cyy), r - cxy / s],
            )
        })
        .collect()
}

/// The pairs' variances from the design covariance `cov` (`k × k`) of the
/// totals of `w·a`, `a` a record's values less the centre and their
/// products (the cross products' vector): a pair's influence is `w/W`
/// times a linear combination `l·a` of them (its [`influence_terms`] of
/// `d − δ`, `δ` the means less the centre), so its variance is
/// `l' cov l / W²` — the influences' scan folded into the cross products'.
fn pair_variances(
    cov: &[f64],
    (c, r, pairs): (&[f64], &[f64], &[(usize, usize)]),
    delta: &[f64],
    (w, p, k): (f64, usize, usize),
    adjusted: Option<&crate::weighting::RecordCorrection>,
) -> Vec<f64> {
    influence_terms((c, r, pairs), p)
        .into_iter()
        .map(|(x, y, [is, ax, ay, con])| {
            let at = |a: usize, b: usize| 1 + p + tri(p, a.min(b), a.max(b));
            let (ex, ey) = (delta[x], delta[y]);
            // (dx − ex)(dy − ey)/s − ax (dx − ex)² − ay (dy − ey)² + con.
            let l = [
                (0, con + ex * ey * is - ax * ex * ex - ay * ey * ey),
                (1 + x, 2.0 * ax * ex - ey * is),
                (1 + y, 2.0 * ay * ey - ex * is),
                (at(x, y), is),
                (at(x, x), -ax),
                (at(y, y), -ay),
            ];
            let mut v = 0.0;
            for &(i, li) in &l {
                for &(j, lj) in &l {
                    v += li * lj * cov[i * k + j];
                }
            }
            // A weight adjusted to population totals: the influences'
            // residuals (their covariance unscaled, the whole design's
            // scale for lonely PSUs averaged).
            if let Some(fix) = adjusted {
                v = (v + fix.pair(&l, &l)) * fix.scale.unwrap_or(1.0);
            }
            v / (w * w)
        })
        .collect()
}

/// The scan of each record's influence on each pair's correlation (the
/// module's text), totalled by PSU: its design variance is the pair's.
fn influence_spec(
    record: crate::sums::Record,
    (c, r, pairs): (&[f64], &[f64], &[(usize, usize)]),
    (w, p, k): (f64, usize, usize),
) -> Spec {
    let n_pairs = pairs.len();
    let terms = influence_terms((c, r, pairs), p);
    let influence: Influence = Arc::new(move |_g, a: &[f64], wi: f64, u: &mut [f64]| {
        let f = wi / w;
        for (u, &(x, y, [is, ax, ay, k])) in u.iter_mut().zip(&terms) {
            let (dx, dy) = (a[1 + x], a[1 + y]);
            *u = f * (dx * dy * is - ax * dx * dx - ay * dy * dy + k);
        }
    });
    Spec {
        k,
        values: p,
        record,
        replicates: false,
        taylor: Some(Some((influence, n_pairs))),
        full: false,
        all: false,
        skip_zero: false,
    }
}

/// Each pair's variance from its replicates' correlations (each from its
/// replicate's totals), and the most replicates left out.
fn replicate_vars(
    reps: &[f64],
    (r, pairs, centre): (&[f64], &[(usize, usize)], &[f64]),
    survey: &crate::survey::Survey,
    (p, k): (usize, usize),
) -> (Vec<f64>, u32) {
    let mut dropped = 0;
    let v = pairs
        .iter()
        .zip(r)
        .map(|(&(a, b), &est)| {
            if !est.is_finite() {
                // No estimate (a constant variable): no variance.
                return f64::NAN;
            }
            let each: Vec<f64> = reps
                .chunks(k)
                .map(|t| correlation(&covariances(t, centre, p), p, a, b))
                .collect();
            let v = survey.variance(est, &each);
            dropped = dropped.max(v.dropped);
            v.v
        })
        .collect();
    (v, dropped)
}

/// The correlation matrix and R's `svyvar` covariances (`C·n/(n − 1)`).
#[allow(clippy::type_complexity)]
fn matrices(c: &[f64], p: usize, n: f64) -> (Vec<Vec<f64>>, Vec<Vec<f64>>) {
    let matrix = (0..p)
        .map(|a| {
            (0..p)
                .map(|b| {
                    // A constant variable correlates with nothing, itself
                    // included.
                    if a == b && c[a * p + a] > 0.0 {
                        1.0
                    } else {
                        correlation(c, p, a, b)
                    }
                })
                .collect()
        })
        .collect();
    let covariance = (0..p)
        .map(|a| (0..p).map(|b| c[a * p + b] * n / (n - 1.0)).collect())
        .collect();
    (matrix, covariance)
}

/// The scans of a correlation matrix, one after another (over parts of
/// the data, a round of partial results each).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) enum Stage {
    /// The records with every value, their weight and `Σ w·x`.
    Means,
    /// The cross products of the values less `centre` (the means), with
    /// the replicates'.
    Cross { centre: Vec<f64> },
    /// Each record's influence, from the centred totals `t` of the `n`
    /// records (linearization).
    Influence {
        centre: Vec<f64>,
        t: Vec<f64>,
        n: u64,
    },
}

/// Where a correlation's scans stand.
pub(crate) enum Next {
    /// Done.
    Done(Box<Correlations>),
    /// Another scan.
    Scan(Stage),
}

/// The totals' length of `p` centred variables: `[W, T_a…, T_ab…]`.
fn width(p: usize) -> usize {
    1 + p + p * (p + 1) / 2
}

/// A record's centred values and their cross products (`false`: a value
/// is missing).
fn centred(centre: Vec<f64>) -> crate::sums::Record {
    let products = products_of(centre.len());
    Arc::new(move |v: &[f64], a: &mut [f64]| fill_centred((&centre, &products), |j| v[j], a))
}

/// The pairs of `p` variables whose products the cross products' vector
/// holds, in `tri`'s order.
fn products_of(p: usize) -> Vec<(usize, usize)> {
    let products: Vec<(usize, usize)> = (0..p).flat_map(|x| (x..p).map(move |y| (x, y))).collect();
    debug_assert!(products
        .iter()
        .enumerate()
        .all(|(i, &(x, y))| tri(p, x, y) == i));
    products
}

/// Fills `a` with `[1, d…, products…]`, `d` the values `v(j)` less the
/// centre (`false`: a value is missing).
#[inline]
fn fill_centred(
    (centre, products): (&[f64], &[(usize, usize)]),
    v: impl Fn(usize) -> f64,
    a: &mut [f64],
) -> bool {
    let p = centre.len();
    a[0] = 1.0;
    let (d, prods) = a.split_at_mut(1 + p);
    for (j, (d, c)) in d[1..].iter_mut().zip(centre).enumerate() {
        let x = v(j);
        if x.is_nan() {
            return false;
        }
        *d = x - c;
    }
    for (o, &(x, y)) in prods.iter_mut().zip(products) {
        *o = d[1 + x] * d[1 + y];
    }
    true
}

/// The pairs of `p` variables, and their correlations from the totals `t`
/// of values less `centre`.
fn pairs_of(t: &[f64], centre: &[f64], p: usize) -> (Vec<(usize, usize)>, Vec<f64>) {
    let c = covariances(t, centre, p);
    let pairs: Vec<(usize, usize)> = (0..p)
        .flat_map(|a| (a + 1..p).map(move |b| (a, b)))
        .collect();
    let r = pairs
        .iter()
        .map(|&(a, b)| correlation(&c, p, a, b))
        .collect();
    (pairs, r)
}

/// The sums of a stage's scan of `p` variables.
fn spec_of(stage: &Stage, p: usize, replicated: bool) -> Spec {
    match stage {
        Stage::Means => Spec {
            k: 1 + p,
            values: p,
            record: Arc::new(move |v: &[f64], a: &mut [f64]| {
                if v.iter().any(|x| x.is_nan()) {
                    return false;
                }
                a[0] = 1.0;
                a[1..].copy_from_slice(v);
                true
            }),
            replicates: false,
            taylor: None,
            full: false,
            all: false,
            skip_zero: false,
        },
        Stage::Cross { centre } => Spec {
            k: width(p),
            values: p,
            record: centred(centre.clone()),
            replicates: replicated,
            taylor: None,
            full: false,
            all: false,
            skip_zero: false,
        },
        Stage::Influence { centre, t, .. } => {
            let (pairs, r) = pairs_of(t, centre, p);
            influence_spec(
                centred(centre.clone()),
                (&covariances(t, centre, p), &r, &pairs),
                (t[0], p, width(p)),
            )
        }
    }
}

/// What a correlation's result rests on beside its sums.
pub(crate) struct Setting<'a> {
    pub names: &'a [String],
    pub req: &'a Request,
    /// The design's variance formula, if any.
    pub survey: Option<&'a crate::survey::Survey>,
    pub weight: Option<&'a str>,
    /// Without a design, the records of non-zero weight.
    pub records: u64,
    pub cases: &'a Option<microtab_engine::WeightCases>,
    pub dataset: String,
}

/// The next stage, or the result, from a stage's sums.
pub(crate) fn advance(stage: &Stage, sums: &crate::sums::Sums, s: &Setting) -> Result<Next> {
    let p = s.names.len();
    let g = &sums.groups[0];
    let unweighted_plain = s.survey.is_none() && s.weight.is_none();
    let replicated = s.survey.is_some_and(|v| v.info.method == "replicate");
    let (survey, method) = survey_of(s.req, s.survey, s.weight, s.records);
    let (centre, t, n, vars_r) = match stage {
        Stage::Means => {
            if g.n == 0 || g.t[0] == 0.0 {
                return Err(crate::Error::NoRecords);
            }
            let centre = (0..p).map(|a| g.t[1 + a] / g.t[0]).collect();
            return Ok(Next::Scan(Stage::Cross { centre }));
        }
        Stage::Cross { centre } => {
            if g.n == 0 || g.t[0] == 0.0 {
                return Err(crate::Error::NoRecords);
            }
            let (_, r) = pairs_of(&g.t, centre, p);
            let nf = g.n as f64;
            if unweighted_plain {
                let v = r.iter().map(|r| (1.0 - r * r) / (nf - 2.0)).collect();
                (centre, &g.t, g.n, Some(v))
            } else if replicated {
                (centre, &g.t, g.n, None)
            } else {
                return Ok(Next::Scan(Stage::Influence {
                    centre: centre.clone(),
                    t: g.t.clone(),
                    n: g.n,
                }));
            }
        }
        Stage::Influence { centre, t, n } => (centre, t, *n, Some(sums.cov[0].clone())),
    };
    let (pairs_idx, r) = pairs_of(t, centre, p);
    let mut notes: Vec<String> = crate::checks::missing_weight_note(s.cases, s.weight)
        .into_iter()
        .collect();
    let (vars_r, df, method) = match vars_r {
        Some(v) if unweighted_plain => (
            v,
            n as f64 - 2.0,
            "Pearson (unweighted, no survey design)".to_string(),
        ),
        Some(v) => (v, survey.info.df, method),
        None => {
            let (v, dropped) =
                replicate_vars(&g.reps, (&r, &pairs_idx, centre), &survey, (p, width(p)));
            if dropped > 0 {
                notes.push(format!(
                    "up to {dropped} replicates had a constant variable and were left out"
                ));
            }
            (v, survey.info.df, method)
        }
    };
    let level = s.req.level;
    let pairs = pairs_idx
        .iter()
        .enumerate()
        .map(|(q, &(a, b))| Pair {
            a: s.names[a].clone(),
            b: s.names[b].clone(),
            inference: r[q].is_finite().then(|| {
                if 1.0 - r[q].abs() <= 1e-12 {
                    return perfect(r[q].signum());
                }
                let i = inference(r[q], vars_r[q].max(0.0).sqrt(), df, level);
                if unweighted_plain {
                    fisher(i, n, level)
                } else {
                    // A correlation lies in [−1, 1]; so does its interval.
                    Inference {
                        lo: i.lo.max(-1.0),
                        hi: i.hi.min(1.0),
                        ..i
                    }
                }
            }),
        })
        .collect();
    let nf = n as f64;
    let (w, c) = (t[0], covariances(t, centre, p));
    let (matrix, covariance) = matrices(&c, p, nf);
    let weight = s.weight.map(str::to_string);
    Ok(Next::Done(Box::new(Correlations {
        dataset: s.dataset.clone(),
        variables: s.names.to_vec(),
        n,
        weighted_n: w,
        means: centre
            .iter()
            .enumerate()
            .map(|(a, m)| m + t[1 + a] / w)
            .collect(),
        sds: (0..p)
            .map(|a| (c[a * p + a] * nf / (nf - 1.0)).sqrt())
            .collect(),
        matrix,
        covariance,
        pairs,
        df,
        provenance: Provenance::new(method, s.survey, weight, s.req, notes),
    })))
}

/// The first stage's sums (each variable's total over the records with
/// every value, and their weight) from the engine's means kernel: a
/// query a variable, as the `means` query of it (without the design's
/// sums, which this stage does not need).
fn means_sums(
    ds: &Dataset,
    query: &microtab_engine::Query,
    names: &[String],
    opts: &ScanOptions,
) -> Result<Sums> {
    let p = names.len();
    let mut g = crate::sums::Group {
        n: 0,
        t: vec![0.0; 1 + p],
        reps: Vec::new(),
    };
    for (a, name) in names.iter().enumerate() {
        let mut filter = query.filter.clone();
        filter.extend(
            names
                .iter()
                .filter(|o| *o != name)
                .map(|o| crate::ratio::present(o)),
        );
        let q = microtab_engine::Query {
            filter,
            measure: Some(name.clone()),
            group_by: Vec::new(),
            fold: None,
            ..query.clone()
        };
        let cube = microtab_engine::run_with(ds, &q, opts)?;
        let m = cube
            .moments
            .as_ref()
            .and_then(|m| m.first().copied())
            .unwrap_or_default();
        // Every query counts the same records.
        (g.n, g.t[0]) = (m.n, m.w);
        g.t[1 + a] = m.mean * m.w;
    }
    Ok(Sums {
        groups: vec![g],
        all: crate::sums::Group::default(),
        cov: Vec::new(),
        psus: Vec::new(),
        categories: Vec::new(),
        names: Vec::new(),
    })
}

/// The correlations of `vars` over `ds`.
pub fn corr(
    ds: &Dataset,
    req: &Request,
    vars: &[String],
    opts: &ScanOptions,
) -> Result<Correlations> {
    let names = names_of(ds, vars)?;
    let design = crate::checks::design_of(ds, req, false)?;
    let mut scan = Scan::new(ds, req, (&[], &names), (&design, true), opts)?;
    let cases = crate::checks::weights_ok(ds, req, &scan.query, opts)?;
    // A weight adjusted to population totals: every stratum carries the
    // residuals, so lonely PSUs averaged take the whole design's scale
    // (the scan's covariance is left unscaled).
    let adjusted = design.as_ref().and_then(|(_, v)| v.adjusted.clone());
    if let (Some(_), Some((_, average))) = (&adjusted, scan.coef.as_mut()) {
        average.clear();
    }
    // The cross products are taken about a centre near the means (those
    // of the first records): the means' own scan is needed only when
    // those records give none.
    let mut stage = match provisional_centre(ds, &scan, &names, opts)? {
        Some(centre) => Stage::Cross { centre },
        None => Stage::Means,
    };
    let p = names.len();
    // Linearized (a design, or weighted without one): the influences'
    // design sums in the cross products' scan.
    let linearized = !scan.replicated() && (design.is_some() || scan.query.weight.is_some());
    loop {
        let sums = match &stage {
            Stage::Means => means_sums(ds, &scan.query, &names, opts)?,
            Stage::Cross { centre } if linearized => {
                let spec = Spec {
                    taylor: Some(None),
                    full: true,
                    ..spec_of(&stage, p, false)
                };
                let sums = scan.run(spec)?;
                let t = sums.groups[0].t.clone();
                let (pairs, r) = pairs_of(&t, centre, p);
                let c = covariances(&t, centre, p);
                let delta: Vec<f64> = (0..p).map(|a| t[1 + a] / t[0]).collect();
                let fix = match &adjusted {
                    Some(t) => Some(adjusted_cross(&scan, t, centre, opts)?),
                    None => None,
                };
                let vars = pair_variances(
                    &sums.cov[0],
                    (&c, &r, &pairs),
                    &delta,
                    (t[0], p, width(p)),
                    fix.as_ref(),
                );
                stage = Stage::Influence {
                    centre: centre.clone(),
                    t,
                    n: sums.groups[0].n,
                };
                Sums {
                    cov: vec![vars],
                    ..sums
                }
            }
            _ => scan.run(spec_of(&stage, p, scan.replicated()))?,
        };
        let setting = Setting {
            names: &names,
            req,
            survey: design.as_ref().map(|(_, v)| v),
            weight: scan.query.weight.as_deref(),
            records: scan.plain_df_records(),
            cases: &cases,
            dataset: ds.dir().display().to_string(),
        };
        match advance(&stage, &sums, &setting)? {
            Next::Done(c) => return Ok(*c),
            Next::Scan(next) => stage = next,
        }
    }
}

/// The adjustment's part of the design covariance of the cross products'
/// totals about `centre` (each record's values less it and their
/// products) under the adjusted design `t`.
fn adjusted_cross(
    scan: &Scan<'_>,
    t: &microtab_store::Taylor,
    centre: &[f64],
    opts: &ScanOptions,
) -> Result<crate::weighting::RecordCorrection> {
    let c = t.calibration.as_ref().expect("an adjusted design");
    let p = centre.len();
    let (centre, products) = (centre.to_vec(), products_of(p));
    let per_unit: crate::weighting::PerUnit =
        Arc::new(move |rows, i, e| fill_centred((&centre, &products), |j| rows.values[j][i], e));
    let values = scan.values[..p].to_vec();
    crate::weighting::record_correction(
        scan.ds,
        (t, c),
        &scan.query,
        (values, width(p), per_unit),
        opts,
    )
}

/// Records whose means centre the cross products over one dataset.
const CENTRE_RECORDS: u64 = 1 << 16;

/// A centre for the cross products: the means of the complete records
/// among the query's first [`CENTRE_RECORDS`] (`None`: they have none, or
/// no weight). The correlations do not depend on it; a centre `δ` from
/// the means costs the covariances about `(δ/sd)²` ulps, so any centre
/// within a few standard deviations keeps them exact to rounding.
fn provisional_centre(
    ds: &Dataset,
    scan: &Scan<'_>,
    names: &[String],
    opts: &ScanOptions,
) -> Result<Option<Vec<f64>>> {
    let r = scan.query.rows.clone().unwrap_or(0..ds.rows());
    let first = microtab_engine::Query {
        rows: Some(r.start..r.end.min(r.start.saturating_add(CENTRE_RECORDS))),
        ..scan.query.clone()
    };
    let g = &means_sums(ds, &first, names, opts)?.groups[0];
    let centre: Vec<f64> = (0..names.len()).map(|a| g.t[1 + a] / g.t[0]).collect();
    Ok((g.n > 0 && centre.iter().all(|c| c.is_finite())).then_some(centre))
}

/// A stage's sums over part of the data (a range of records, one of
/// several datasets), to merge with the other parts'.
pub(crate) fn part(
    ds: &Dataset,
    req: &Request,
    vars: &[String],
    stage: &Stage,
    opts: &ScanOptions,
) -> Result<(Vec<String>, crate::sums::SumsPart)> {
    let names = names_of(ds, vars)?;
    let design = crate::checks::design_of(ds, req, true)?;
    let scan = Scan::new(ds, req, (&[], &names), (&design, false), opts)?;
    let sums = scan.part(spec_of(stage, names.len(), scan.replicated()))?;
    Ok((names, sums))
}
