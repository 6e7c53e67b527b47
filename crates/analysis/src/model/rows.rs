//! Models fitted record by record: when the predictors' combinations are
//! too many for a cube (continuous predictors with many distinct values,
//! such as income or a test score), each IRLS step is one pass over the
//! records (the engine's fold, [`microtab_engine::fold_rows`]) summing
//! `X'WX` and `X'Wz`; the replicates' refits share their passes, and the
//! Taylor scores are summed PSU by PSU in one more pass. Factors stay
//! dimensions of the scan, so a record's columns are its cell's
//! indicators times its numeric values.

use super::coding::Coding;
use super::fit::{dot, invert, Fit};
use super::ModelError;
use crate::family::Family;
use microtab_engine::{state_of, Category, Fold, FoldRows, FoldState, Query, ScanOptions};
use microtab_store::Dataset;
use serde::{Deserialize, Serialize};
use std::any::Any;
use std::collections::HashMap;
use std::sync::Arc;

const MAX_ITER: usize = 100;

/// What a record brings, by position in the fold's values.
#[derive(Debug, Clone)]
pub(crate) struct Layout {
    /// Columns of the model.
    pub p: usize,
    /// Per planned cell: its columns with the numeric parts at 1, and its
    /// outcome when the outcome is a dimension (`None`: the cell is out of
    /// the model: a missing category or a level not used).
    pub cells: Vec<Option<(Vec<f64>, Option<f64>)>>,
    /// Per column, the values it is multiplied by.
    pub colvals: Vec<Vec<usize>>,
    /// The model's own values (numeric predictors and outcome): a record
    /// with any missing is out.
    pub model_values: usize,
    /// The outcome's value, when it is a measurement.
    pub y: Option<usize>,
    /// The weight's value.
    pub weight: Option<usize>,
    /// The replicate weights' values.
    pub replicates: std::ops::Range<usize>,
    /// The strata's and the PSUs' values (Taylor designs).
    pub strata: Option<usize>,
    pub cluster: Option<usize>,
    pub family: Family,
}

impl Layout {
    /// Record `i`'s columns into `x`, its outcome and weight; `None` when
    /// it is out of the model.
    #[inline]
    fn record(&self, cell: u32, vals: &[Vec<f64>], i: usize, x: &mut [f64]) -> Option<(f64, f64)> {
        if (0..self.model_values).any(|k| vals[k][i].is_nan()) {
            return None;
        }
        // Before the levels are known (the counting pass): every cell.
        const NONE: &(Vec<f64>, Option<f64>) = &(Vec::new(), None);
        let (t, ycell) = match self.cells.get(cell as usize) {
            Some(c) => c.as_ref()?,
            None if self.cells.is_empty() => NONE,
            None => return None,
        };
        let y = match (self.y, ycell) {
            (Some(k), _) => vals[k][i],
            (None, Some(y)) => *y,
            (None, None) if self.cells.is_empty() => 0.0,
            (None, None) => return None,
        };
        let w = self.weight.map_or(1.0, |k| vals[k][i]);
        if w.is_nan() {
            return None;
        }
        for (j, xj) in x.iter_mut().enumerate() {
            let mut v = t[j];
            for &k in &self.colvals[j] {
                v *= vals[k][i];
            }
            *xj = v;
        }
        Some((y, w))
    }

    /// `y²` (gaussian, binary) or `y log y` (Poisson), the term of the
    /// deviance's `S`.
    fn s(&self, y: f64) -> f64 {
        if self.family == Family::Poisson {
            if y > 0.0 {
                y * y.ln()
            } else {
                0.0
            }
        } else {
            y * y
        }
    }
}

/// The fits of an IRLS pass: each one's coefficients (`None`: R's start
/// from the outcome) and weight (`None`: the weight, else replicate `r`).
pub(crate) type Fits = Vec<(Option<Vec<f64>>, Option<usize>)>;

/// What one pass sums.
#[derive(Clone)]
pub(crate) enum Pass {
    /// Complete records per planned cell.
    Count,
    /// One IRLS step per fit: each fit's coefficients (`None`: R's start
    /// from the outcome) and weight (`None`: the weight, else replicate
    /// `r`).
    Irls(Fits),
    /// The scores `w·x·(y − μ)·μ'/V` at the coefficients, by PSU.
    Scores(Vec<f64>),
}

/// One IRLS pass's sums, per fit of [`Driver::fits`]: `X'WX` (upper
/// triangle), `X'Wz`, the deviance at its coefficients; and the records
/// the full fit puts at 0 or 1.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub(crate) struct IrlsSums {
    pub xtwx: Vec<Vec<f64>>,
    pub xtwz: Vec<Vec<f64>>,
    /// A diverged fit's is not finite: `null` in JSON.
    #[serde(with = "crate::json::unknown_nans")]
    pub dev: Vec<f64>,
    pub extreme: u64,
}

impl IrlsSums {
    /// Adds another part's sums of the same pass.
    pub(crate) fn merge(mut self, o: &IrlsSums) -> IrlsSums {
        add_irls(
            (&mut self.xtwx, &mut self.xtwz, &mut self.dev),
            (&o.xtwx, &o.xtwz, &o.dev),
        );
        self.extreme += o.extreme;
        self
    }
}

/// Adds one pass's `X'WX`, `X'Wz` and deviances per fit to another's.
fn add_irls(
    (xtwx, xtwz, dev): (&mut [Vec<f64>], &mut [Vec<f64>], &mut [f64]),
    (ox, oz, od): (&[Vec<f64>], &[Vec<f64>], &[f64]),
) {
    for (a, b) in xtwx.iter_mut().zip(ox).chain(xtwz.iter_mut().zip(oz)) {
        add(a, b);
    }
    add(dev, od);
}

/// IRLS fits under way: the full fit from R's start, or the replicates'
/// refits from the full fit. Each step is one pass of sums over the
/// records ([`Driver::fits`] says which, [`Driver::absorb`] takes them),
/// so the passes can be made over one dataset or over parts in rounds.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct Driver {
    /// The full fit's coefficients (replicate refits).
    start: Option<Vec<f64>>,
    /// The full fit's deviance (replicate refits).
    full_dev: f64,
    betas: Vec<Option<Vec<f64>>>,
    out: Vec<Option<Result<Fit, ModelError>>>,
    /// Each fit's deviance at its last coefficients (`None`: none yet).
    dev_old: Vec<Option<f64>>,
    /// Each refit's last step's Newton decrement (∞: none yet).
    #[serde(default, with = "crate::json::unknown_nans")]
    dec_old: Vec<f64>,
    /// The next pass's iteration.
    it: usize,
    /// Records the full fit puts at 0 or 1.
    pub extreme: u64,
}

impl Driver {
    /// The full fit (`start`: `None`), or the refits of `replicates`
    /// replicates from the full fit's coefficients and deviance.
    pub(crate) fn new(start: Option<(&[f64], f64)>, replicates: usize) -> Driver {
        let k = if start.is_some() { replicates } else { 1 };
        Driver {
            start: start.map(|s| s.0.to_vec()),
            full_dev: start.map_or(0.0, |s| s.1),
            betas: vec![start.map(|s| s.0.to_vec()); k],
            out: vec![None; k],
            dev_old: vec![None; k],
            dec_old: vec![f64::INFINITY; k],
            it: 1,
            extreme: 0,
        }
    }

    /// Whether these are the replicates' refits.
    pub(crate) fn refits(&self) -> bool {
        self.start.is_some()
    }

    fn active(&self) -> Vec<usize> {
        (0..self.out.len())
            .filter(|&f| self.out[f].is_none())
            .collect()
    }

    /// The fits whose sums the next pass makes: each one's coefficients
    /// (`None`: R's start from the outcome) and weight (`None`: the
    /// weight, else replicate `r`); `None` when every fit is done.
    pub(crate) fn fits(&self) -> Option<Fits> {
        let active = self.active();
        if active.is_empty() || self.it > MAX_ITER + 1 {
            return None;
        }
        Some(
            active
                .iter()
                .map(|&f| (self.betas[f].clone(), self.start.as_ref().map(|_| f)))
                .collect(),
        )
    }

    /// One step of every fit from its pass's sums `st` (a model of `p`
    /// columns named `names`).
    pub(crate) fn absorb(&mut self, st: &IrlsSums, (p, family): (usize, Family), names: &[String]) {
        // The replicates' refits converge when the step's Newton decrement
        // `Δβ' A Δβ / 2` (the deviance it gains) is below 1e-16 of the full
        // deviance, or below 1e-12 and no longer falling (rounding), so no
        // deviance is summed record by record. (1e-12 alone left a probit's
        // Fisher steps, which converge linearly, 1e-6 short in its SEs.)
        let (start, full_dev, it) = (self.start.as_deref(), self.full_dev, self.it);
        let replicate = start.is_some();
        if !replicate {
            self.extreme = st.extreme;
        }
        for (a, f) in self.active().into_iter().enumerate() {
            let mut m = st.xtwx[a].clone();
            for r in 0..p {
                for c in 0..r {
                    m[r * p + c] = m[c * p + r];
                }
            }
            let dev = st.dev[a];
            let had = self.betas[f].is_some();
            // Converged: the deviance at this pass's coefficients stopped
            // moving (a linear model: at its second pass). One more step
            // from this pass's sums, with its information matrix (as R's
            // glm.fit keeps the last weights' QR).
            if had && !replicate {
                let gaussian = family == Family::Gaussian;
                let settled = self.dev_old[f]
                    .is_some_and(|old| (dev - old).abs() / (dev.abs() + 0.1) < 1e-12);
                if (gaussian && start.is_none()) || settled {
                    self.out[f] = Some(invert(&m, p, names).map(|ainv| {
                        Fit {
                            beta: (0..p)
                                .map(|r| dot(&ainv[r * p..(r + 1) * p], &st.xtwz[a]))
                                .collect(),
                            ainv,
                            iterations: it - 1,
                            deviance: dev,
                        }
                    }));
                    continue;
                }
            }
            if !dev.is_finite() || it > MAX_ITER {
                self.out[f] = Some(Err(ModelError::NoConvergence { iterations: it }));
                continue;
            }
            let from = self.betas[f].clone();
            match invert(&m, p, names) {
                Ok(ainv) => {
                    let beta: Vec<f64> = (0..p)
                        .map(|r| dot(&ainv[r * p..(r + 1) * p], &st.xtwz[a]))
                        .collect();
                    if beta.iter().any(|b| !b.is_finite()) {
                        self.out[f] = Some(Err(ModelError::NoConvergence { iterations: it }));
                        continue;
                    }
                    if family == Family::Gaussian && replicate {
                        // Weighted least squares: exact in one step.
                        self.out[f] = Some(Ok(Fit {
                            beta,
                            ainv,
                            iterations: 1,
                            deviance: f64::NAN,
                        }));
                        continue;
                    }
                    if let (true, Some(b0)) = (replicate, &from) {
                        let d: Vec<f64> = beta.iter().zip(b0).map(|(x, y)| x - y).collect();
                        let dec: f64 = (0..p).map(|r| d[r] * dot(&m[r * p..(r + 1) * p], &d)).sum();
                        let scale = full_dev.abs() + 0.1;
                        let stalled = dec >= self.dec_old.get(f).copied().unwrap_or(f64::INFINITY);
                        if dec / 2.0 <= 1e-16 * scale || (dec / 2.0 <= 1e-12 * scale && stalled) {
                            self.out[f] = Some(Ok(Fit {
                                beta,
                                ainv,
                                iterations: it,
                                deviance: f64::NAN,
                            }));
                            continue;
                        }
                        if let Some(d) = self.dec_old.get_mut(f) {
                            *d = dec;
                        }
                    }
                    self.betas[f] = Some(beta);
                    self.dev_old[f] = had.then_some(dev);
                }
                Err(e) => self.out[f] = Some(Err(e)),
            }
        }
        self.it += 1;
    }

    /// Each fit's result (not converged: an error).
    pub(crate) fn results(self) -> Vec<Result<Fit, ModelError>> {
        self.out
            .into_iter()
            .map(|o| {
                o.unwrap_or(Err(ModelError::NoConvergence {
                    iterations: MAX_ITER,
                }))
            })
            .collect()
    }
}

/// Per stratum, `Σ_j u_hj` and `Σ_j u_hj u_hj'` over its PSUs' totals.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub(crate) struct Strata {
    pub s1: Vec<f64>,
    pub s2: Vec<f64>,
    pub psus: u64,
}

impl Strata {
    /// A PSU's total `u` into the sums.
    pub(crate) fn close(&mut self, u: &[f64]) {
        let p = u.len();
        if self.s1.is_empty() {
            (self.s1, self.s2) = (vec![0.0; p], vec![0.0; p * p]);
        }
        self.psus += 1;
        for r in 0..p {
            self.s1[r] += u[r];
            for c in 0..p {
                self.s2[r * p + c] += u[r] * u[c];
            }
        }
    }

    /// Adds another's sums (of the same strata).
    pub(crate) fn absorb(&mut self, o: &Strata) {
        if self.s1.is_empty() {
            *self = o.clone();
        } else if !o.s1.is_empty() {
            add(&mut self.s1, &o.s1);
            add(&mut self.s2, &o.s2);
            self.psus += o.psus;
        }
    }
}

/// The design covariance of score totals of `p` columns from their
/// strata's sums, each with its `(c_h, d_h)` and whether its lonely PSU
/// is averaged (`average`: whether the design averages any): the
/// covariance, its scale for the averaged strata, and the PSUs and strata
/// with records.
pub(crate) fn score_covariance<'a>(
    strata: impl Iterator<Item = (&'a Strata, [f64; 2], bool)>,
    p: usize,
    average: bool,
) -> (Vec<f64>, f64, u64, u64) {
    let mut v = vec![0.0; p * p];
    let (mut psus, mut with_var, mut count) = (0u64, 0usize, 0u64);
    for (s, [c, d], averaged) in strata {
        if s.psus == 0 {
            continue;
        }
        count += 1;
        psus += s.psus;
        with_var += usize::from(!averaged);
        for r in 0..p {
            for k in 0..p {
                v[r * p + k] += c * s.s2[r * p + k] - d * s.s1[r] * s.s1[k];
            }
        }
    }
    let scale = if average {
        count as f64 / with_var as f64
    } else {
        1.0
    };
    (v, scale, psus, count)
}

/// A worker's sums of one pass.
pub(crate) struct State {
    lay: Arc<Layout>,
    pass: Arc<Pass>,
    taylor: Option<Arc<TaylorKeys>>,
    x: Vec<f64>,
    /// Count: per cell.
    used: Vec<u64>,
    /// Records, `Σ w`, `Σ w·y`, `Σ w·s` of the complete records.
    n: u64,
    sums: [f64; 3],
    /// Per fit: `X'WX` (upper triangle), `X'Wz`, deviance at its
    /// coefficients.
    xtwx: Vec<Vec<f64>>,
    xtwz: Vec<Vec<f64>>,
    dev: Vec<f64>,
    /// Records fitted at 0 or 1 within 1e-8 of their outcome.
    extreme: u64,
    /// Count: an outcome the family refuses (negative; binary: not 0 or
    /// 1), the first met.
    odd: Option<f64>,
    /// Scores: per stratum, and PSUs that may continue in another
    /// stretch (by stratum index and PSU key).
    strata: HashMap<usize, Strata>,
    open: HashMap<(usize, u64), Vec<f64>>,
    unknown: u64,
}

/// The design's strata and how a PSU's key is read.
pub(crate) struct TaylorKeys {
    /// The strata's stored values, ascending.
    pub keys: Vec<i64>,
    /// The strata variable's `10^decimals`.
    pub scale: f64,
    /// Each PSU's records are one run.
    pub contiguous: bool,
    /// When the keys span a short range: per key − the first, its index
    /// (`u32::MAX`: none), so a record's stratum is one load.
    dense: Option<(i64, Vec<u32>)>,
}

impl TaylorKeys {
    /// A Taylor design's strata (`t`), or without one (`None`) a single
    /// stratum.
    pub(crate) fn of(ds: &Dataset, t: Option<&microtab_store::Taylor>) -> crate::Result<Self> {
        let Some(t) = t else {
            return Ok(TaylorKeys {
                keys: vec![0],
                scale: 1.0,
                contiguous: true,
                dense: None,
            });
        };
        let keys = t.strata_keys.clone();
        let dense = match (keys.first(), keys.last()) {
            (Some(&lo), Some(&hi)) if hi.checked_sub(lo).is_some_and(|d| d < 1 << 22) => {
                let mut v = vec![u32::MAX; (hi - lo + 1) as usize];
                for (h, &k) in keys.iter().enumerate() {
                    v[(k - lo) as usize] = h as u32;
                }
                Some((lo, v))
            }
            _ => None,
        };
        Ok(TaylorKeys {
            keys,
            scale: match &t.strata {
                Some(s) => ds.variable(s)?.scale(),
                None => 1.0,
            },
            contiguous: t.contiguous,
            dense,
        })
    }

    /// The stratum of a record whose strata value (displayed) is `v`
    /// (`None`: missing, or a stratum the design does not know).
    #[inline]
    pub(crate) fn index(&self, v: f64) -> Option<usize> {
        if v.is_nan() {
            return None;
        }
        let key = (v * self.scale).round() as i64;
        match &self.dense {
            Some((lo, table)) => {
                let h = *table.get(usize::try_from(key.checked_sub(*lo)?).ok()?)?;
                (h != u32::MAX).then_some(h as usize)
            }
            None => self.keys.binary_search(&key).ok(),
        }
    }
}

impl State {
    fn new(lay: &Arc<Layout>, pass: &Arc<Pass>, taylor: &Option<Arc<TaylorKeys>>) -> State {
        let p = lay.p;
        let k = match &**pass {
            Pass::Irls(f) => f.len(),
            _ => 0,
        };
        State {
            lay: lay.clone(),
            pass: pass.clone(),
            taylor: taylor.clone(),
            x: vec![0.0; p],
            used: Vec::new(),
            n: 0,
            sums: [0.0; 3],
            xtwx: vec![vec![0.0; p * p]; k],
            xtwz: vec![vec![0.0; p]; k],
            dev: vec![0.0; k],
            extreme: 0,
            odd: None,
            strata: HashMap::new(),
            open: HashMap::new(),
            unknown: 0,
        }
    }

    /// One IRLS step's sums of each fit over a batch of records (fit by
    /// fit, so a replicate's weights are read in order).
    fn irls(
        &mut self,
        fits: &[(Option<Vec<f64>>, Option<usize>)],
        batch: &Batch,
        vals: &[Vec<f64>],
    ) {
        let lay = self.lay.clone();
        let (p, fam) = (lay.p, lay.family);
        if fam == Family::Gaussian && fits.iter().all(|(_, r)| r.is_some()) {
            return self.linear_refits(fits, batch, vals);
        }
        for (k, (beta, wsrc)) in fits.iter().enumerate() {
            let wcol = wsrc.map(|r| &vals[lay.replicates.start + r][..]);
            let (a, b) = (&mut self.xtwx[k], &mut self.xtwz[k]);
            let (mut dev, mut extreme) = (0.0, 0u64);
            for (j, &i) in batch.idx.iter().enumerate() {
                let w = match wcol {
                    None => batch.w[j],
                    Some(c) => c[i],
                };
                if w == 0.0 {
                    continue;
                }
                let (x, y) = (&batch.x[j * p..(j + 1) * p], batch.y[j]);
                let (ww, z, mu) = if fam == Family::Gaussian {
                    // Identity link: the working response is y, whatever
                    // β (a replicate's refit needs no η).
                    let mu = match beta {
                        Some(b) if wsrc.is_none() => dot(x, b),
                        _ => y,
                    };
                    (w, y, mu)
                } else {
                    let eta = match beta {
                        Some(b) => dot(x, b),
                        None => fam.eta(fam.start(y)),
                    };
                    let (mu, d) = (fam.mu(eta), fam.dmu(eta));
                    (w * d * d / fam.var(mu), eta + (y - mu) / d, mu)
                };
                for r in 0..p {
                    let xr = x[r];
                    if xr == 0.0 {
                        continue;
                    }
                    let wr = ww * xr;
                    b[r] += wr * z;
                    let row = &mut a[r * p..(r + 1) * p];
                    for (c, xc) in row.iter_mut().zip(x).skip(r) {
                        *c += wr * xc;
                    }
                }
                if beta.is_some() && wsrc.is_none() {
                    dev += fam.deviance(w, w * y, w * lay.s(y), mu);
                    let at_zero = y == 0.0 && mu < 1e-8;
                    let at_one = fam.binary() && y == 1.0 && mu > 1.0 - 1e-8;
                    extreme += u64::from(fam != Family::Gaussian && (at_zero || at_one));
                }
            }
            self.dev[k] += dev;
            if k == 0 {
                self.extreme += extreme;
            }
        }
    }

    /// The replicates' refits of a linear model: each record's `x x'`
    /// (upper triangle) and `x y` once, then per replicate their sum
    /// weighted by its weights.
    fn linear_refits(
        &mut self,
        fits: &[(Option<Vec<f64>>, Option<usize>)],
        batch: &Batch,
        vals: &[Vec<f64>],
    ) {
        let p = self.lay.p;
        let m = p * (p + 1) / 2 + p;
        let n = batch.idx.len();
        let mut o = vec![0.0; n * m];
        for j in 0..n {
            let (x, y) = (&batch.x[j * p..(j + 1) * p], batch.y[j]);
            let row = &mut o[j * m..(j + 1) * m];
            let mut at = 0;
            for r in 0..p {
                for c in r..p {
                    row[at] = x[r] * x[c];
                    at += 1;
                }
            }
            for r in 0..p {
                row[at + r] = x[r] * y;
            }
        }
        let mut acc = vec![0.0; m];
        for (k, (_, wsrc)) in fits.iter().enumerate() {
            let col = &vals[self.lay.replicates.start + wsrc.expect("a replicate")];
            acc.iter_mut().for_each(|a| *a = 0.0);
            for (j, &i) in batch.idx.iter().enumerate() {
                let w = col[i];
                for (a, v) in acc.iter_mut().zip(&o[j * m..(j + 1) * m]) {
                    *a += w * v;
                }
            }
            let mut at = 0;
            for r in 0..p {
                for c in r..p {
                    self.xtwx[k][r * p + c] += acc[at];
                    at += 1;
                }
            }
            for r in 0..p {
                self.xtwz[k][r] += acc[at + r];
            }
        }
    }

    /// Record `i`'s score `u` (its columns `x`) into its PSU (`run`: the
    /// stretch's PSU being summed).
    fn score(
        &mut self,
        (x, beta): (&[f64], &[f64]),
        (y, w): (f64, f64),
        vals: &[Vec<f64>],
        i: usize,
        run: &mut Run,
    ) {
        let lay = &*self.lay;
        let fam = lay.family;
        let eta = dot(x, beta);
        let mu = fam.mu(eta);
        let g = w * (y - mu) * fam.dmu(eta) / fam.var(mu);
        let Some(t) = self.taylor.as_deref() else {
            return;
        };
        let h = match lay.strata {
            None => 0,
            // A missing stratum is in none of the design's strata.
            Some(k) => match t.index(vals[k][i]) {
                Some(h) => h,
                None => {
                    self.unknown += 1;
                    return;
                }
            },
        };
        // A record of weight 0 adds nothing, and its PSU is not counted
        // in R's degf() unless another record is.
        if w == 0.0 {
            return;
        }
        let psu = match lay.cluster {
            // Every record its own PSU: closed at once.
            None => {
                let u: Vec<f64> = x.iter().map(|x| x * g).collect();
                self.close(h, &u);
                return;
            }
            Some(k) => vals[k][i].to_bits(),
        };
        if run.key != Some((h, psu)) {
            self.end_run(run, t.contiguous);
            run.key = Some((h, psu));
            run.u.clear();
            run.u.resize(x.len(), 0.0);
        }
        for (s, x) in run.u.iter_mut().zip(x) {
            *s += x * g;
        }
    }

    /// The run ends: closed when it is neither the stretch's first nor
    /// (called from `add`'s end) its last, and PSUs are contiguous; kept
    /// open otherwise.
    fn end_run(&mut self, run: &mut Run, contiguous: bool) {
        let Some(key) = run.key.take() else { return };
        if contiguous && !run.first {
            self.close(key.0, &run.u);
        } else {
            let e = self
                .open
                .entry(key)
                .or_insert_with(|| vec![0.0; run.u.len()]);
            for (a, b) in e.iter_mut().zip(&run.u) {
                *a += b;
            }
        }
        run.first = false;
    }

    /// A PSU's total `u` into its stratum's sums.
    fn close(&mut self, h: usize, u: &[f64]) {
        self.strata.entry(h).or_default().close(u);
    }

    /// The IRLS sums of the pass.
    pub(crate) fn irls_sums(&self) -> IrlsSums {
        IrlsSums {
            xtwx: self.xtwx.clone(),
            xtwz: self.xtwz.clone(),
            dev: self.dev.clone(),
            extreme: self.extreme,
        }
    }

    /// The scores pass's sums: per stratum (its index in the design's
    /// strata) of its closed PSUs, the PSUs left open by stratum and key,
    /// and the records in no stratum the design knows.
    pub(crate) fn into_scores(self) -> ScoreSums {
        (self.strata, self.open, self.unknown)
    }
}

/// What [`State::into_scores`] gives.
pub(crate) type ScoreSums = (HashMap<usize, Strata>, HashMap<(usize, u64), Vec<f64>>, u64);

/// A stretch's complete records: their columns (`p` each), outcomes,
/// weights and positions in the stretch.
#[derive(Default)]
struct Batch {
    x: Vec<f64>,
    y: Vec<f64>,
    w: Vec<f64>,
    idx: Vec<usize>,
}

/// The PSU being summed in a stretch of records.
struct Run {
    key: Option<(usize, u64)>,
    u: Vec<f64>,
    first: bool,
}

impl FoldState for State {
    fn add(&mut self, rows: &FoldRows<'_>) {
        let lay = self.lay.clone();
        let pass = self.pass.clone();
        let mut run = Run {
            key: None,
            u: Vec::new(),
            first: true,
        };
        let mut x = std::mem::take(&mut self.x);
        let mut batch = Batch::default();
        for (i, &cell) in rows.cells.iter().enumerate() {
            let Some((y, w)) = lay.record(cell, rows.values, i, &mut x) else {
                continue;
            };
            match &*pass {
                Pass::Count => {
                    let c = cell as usize;
                    if c >= self.used.len() {
                        self.used.resize(c + 1, 0);
                    }
                    self.used[c] += 1;
                    self.n += 1;
                    self.sums[0] += w;
                    self.sums[1] += w * y;
                    self.sums[2] += w * lay.s(y);
                    // An outcome a binary or Poisson model refuses.
                    if self.odd.is_none()
                        && ((lay.family == Family::Poisson && y < 0.0)
                            || (lay.family.binary() && y != 0.0 && y != 1.0))
                    {
                        self.odd = Some(y);
                    }
                }
                Pass::Irls(_) => {
                    batch.x.extend_from_slice(&x);
                    batch.y.push(y);
                    batch.w.push(w);
                    batch.idx.push(i);
                }
                Pass::Scores(beta) => self.score((&x, beta), (y, w), rows.values, i, &mut run),
            }
        }
        self.x = x;
        if let Pass::Irls(fits) = &*pass {
            self.irls(fits, &batch, rows.values);
        }
        // The stretch's last PSU may continue in the next one.
        run.first = true;
        self.end_run(&mut run, false);
    }

    fn merge(&mut self, other: Box<dyn FoldState>) {
        let o: State = state_of(other);
        if o.used.len() > self.used.len() {
            self.used.resize(o.used.len(), 0);
        }
        for (a, b) in self.used.iter_mut().zip(&o.used) {
            *a += b;
        }
        self.n += o.n;
        for k in 0..3 {
            self.sums[k] += o.sums[k];
        }
        add_irls(
            (&mut self.xtwx, &mut self.xtwz, &mut self.dev),
            (&o.xtwx, &o.xtwz, &o.dev),
        );
        self.extreme += o.extreme;
        self.odd = self.odd.or(o.odd);
        self.unknown += o.unknown;
        for (h, s) in o.strata {
            self.strata.entry(h).or_default().absorb(&s);
        }
        for (k, u) in o.open {
            match self.open.get_mut(&k) {
                Some(v) => add(v, &u),
                None => {
                    self.open.insert(k, u);
                }
            }
        }
    }

    fn into_any(self: Box<Self>) -> Box<dyn Any> {
        self
    }
}

fn add(a: &mut [f64], b: &[f64]) {
    for (x, y) in a.iter_mut().zip(b) {
        *x += y;
    }
}

/// What the counting pass found.
pub(crate) struct Counted {
    /// Per dimension, its planned categories (a record's cell indexes them).
    pub planned: Vec<Vec<Category>>,
    /// Per dimension, the categories of the complete records.
    pub occurring: Vec<Vec<Category>>,
    /// Complete records.
    pub n: u64,
    /// Their `Σ w`, `Σ w·y` and `Σ w·s`.
    pub sums: [f64; 3],
    /// An outcome the family refuses, if any.
    pub odd: Option<f64>,
}

/// A model's passes over the records of a query.
pub(crate) struct Passes<'a> {
    pub ds: &'a Dataset,
    /// The query: the coding's dimensions, the filter, the weight; its
    /// fold's values are the [`Layout`]'s.
    pub query: Query,
    pub values: Vec<String>,
    pub opts: &'a ScanOptions,
    pub taylor: Option<Arc<TaylorKeys>>,
}

impl Passes<'_> {
    pub(crate) fn run(
        &self,
        lay: &Arc<Layout>,
        pass: Pass,
    ) -> crate::Result<(State, Vec<Vec<Category>>)> {
        let pass = Arc::new(pass);
        let (l, p, t) = (lay.clone(), pass.clone(), self.taylor.clone());
        let mut q = self.query.clone();
        // The replicate weights, last, are read only by their refits.
        let refits = matches!(&*pass, Pass::Irls(f) if f.iter().any(|(_, r)| r.is_some()));
        let n = if refits {
            self.values.len()
        } else {
            lay.replicates.start
        };
        q.fold = Some(Fold {
            values: self.values[..n].to_vec(),
            make: Arc::new(move || Box::new(State::new(&l, &p, &t)) as Box<dyn FoldState>),
        });
        let folded = microtab_engine::fold_rows(self.ds, &q, self.opts)?;
        let state = match folded.state {
            Some(s) => state_of(s),
            None => State::new(lay, &pass, &self.taylor),
        };
        Ok((state, folded.categories))
    }

    /// Counts the complete records of each planned cell: the categories
    /// each dimension has among them (the levels), and the records, `Σ w`,
    /// `Σ w·y` and `Σ w·s` of all of them.
    pub(crate) fn count(&self, lay: &Arc<Layout>) -> crate::Result<Counted> {
        let (st, planned) = self.run(lay, Pass::Count)?;
        let shape: Vec<usize> = planned.iter().map(|c| c.len().max(1)).collect();
        let mut keep: Vec<Vec<bool>> = shape.iter().map(|&k| vec![false; k]).collect();
        for (c, &n) in st.used.iter().enumerate() {
            if n == 0 {
                continue;
            }
            for (d, i) in microtab_engine::unravel(c, &shape).into_iter().enumerate() {
                keep[d][i] = true;
            }
        }
        let occurring = planned
            .iter()
            .zip(&keep)
            .map(|(cats, k)| {
                cats.iter()
                    .zip(k)
                    .filter(|(_, &k)| k)
                    .map(|(c, _)| c.clone())
                    .collect()
            })
            .collect();
        Ok(Counted {
            planned,
            occurring,
            n: st.n,
            sums: st.sums,
            odd: st.odd,
        })
    }

    /// IRLS from R's start (`replicates`: `None`) or each replicate's
    /// refit from `start`; per fit its result (`None`: not converged or
    /// singular), and records fitted at 0 or 1 by the first.
    pub(crate) fn fit(
        &self,
        lay: &Arc<Layout>,
        names: &[String],
        start: Option<(&[f64], f64)>,
        replicates: usize,
    ) -> crate::Result<(Vec<Result<Fit, ModelError>>, u64)> {
        let mut d = Driver::new(start, replicates);
        while let Some(fits) = d.fits() {
            let (st, _) = self.run(lay, Pass::Irls(fits))?;
            d.absorb(&st.irls_sums(), (lay.p, lay.family), names);
        }
        let extreme = d.extreme;
        Ok((d.results(), extreme))
    }

    /// Each planned category of the query's grouping variables (a
    /// record's cell indexes them), without reading a record.
    pub(crate) fn planned(&self) -> crate::Result<Vec<Vec<Category>>> {
        let q = Query {
            fold: None,
            rows: Some(0..0),
            ..self.query.clone()
        };
        Ok(microtab_engine::fold_rows(self.ds, &q, self.opts)?.categories)
    }

    /// The design covariance of the score totals at `beta` (`coef`: per
    /// stratum `(c_h, d_h)`), its scale for averaged lonely PSUs, and the
    /// PSUs and strata with records in the model.
    pub(crate) fn scores(
        &self,
        lay: &Arc<Layout>,
        beta: &[f64],
        coef: &[[f64; 2]],
        average: &[bool],
    ) -> crate::Result<(Vec<f64>, f64, u64, u64)> {
        let p = lay.p;
        let (mut st, _) = self.run(lay, Pass::Scores(beta.to_vec()))?;
        if st.unknown > 0 {
            return Err(crate::Error::UnknownStrata {
                records: st.unknown,
            });
        }
        for ((h, _), u) in std::mem::take(&mut st.open) {
            st.close(h, &u);
        }
        let strata = st
            .strata
            .iter()
            .map(|(&h, s)| (s, coef[h], average.get(h).copied().unwrap_or(false)));
        Ok(score_covariance(strata, p, !average.is_empty()))
    }
}

/// The note on records fitted at probability 0 or 1.
pub(crate) fn separation_note(extreme: u64) -> String {
    format!(
        "{extreme} records are fitted at probability 0 or 1: separation (a predictor that decides the outcome) makes the estimates and standard errors of its terms unreliable"
    )
}

/// A model fitted record by record (see the module's text).
pub(crate) fn regress(
    ds: &Dataset,
    req: &crate::Request,
    (formula, f): (&str, &microtab_engine::Formula),
    family: Family,
    opts: &ScanOptions,
) -> crate::Result<crate::model::Regression> {
    use super::summary::{model_based, summarize};
    let design = crate::checks::design_of(ds, req, false)?;
    let mut coding = Coding::new(ds, f, family, true)?;
    let (passes, mut lay) = setup(ds, req, (&coding, &design), (family, true), opts)?;
    let replicates = lay.replicates.clone();
    let Counted {
        planned,
        occurring,
        n,
        sums,
        odd,
    } = passes.count(&Arc::new(lay.clone()))?;
    if let Some(y) = odd {
        return Err(coding.refused_outcome(y).into());
    }
    // No records: no levels to code either.
    if n == 0 || sums[0] == 0.0 {
        return Err(ModelError::Empty.into());
    }
    coding.set_levels(&occurring)?;
    let names = coding.names.clone();
    lay.p = names.len();
    lay.colvals = coding.column_values();
    lay.cells = planned_cells(&coding, &planned);
    let lay = Arc::new(lay);
    if (n as usize) < lay.p {
        return Err(ModelError::TooFew {
            columns: lay.p,
            cells: n as usize,
        }
        .into());
    }
    let (mut fits, extreme) = passes.fit(&lay, &names, None, 0)?;
    let full = fits.remove(0)?;
    let mut notes = Vec::new();
    if extreme > 0 {
        notes.push(separation_note(extreme));
    }
    let p = lay.p;
    let sandwich = |coef: &[[f64; 2]], average: &[bool]| -> crate::Result<(Vec<f64>, u64, u64)> {
        let (v, scale, psus, strata) = passes.scores(&lay, &full.beta, coef, average)?;
        Ok((super::fit::sandwich(&full.ainv, &v, p, scale), psus, strata))
    };
    let cells = super::fit::Cells {
        p,
        x: vec![0.0; p],
        n: vec![n],
        w: vec![sums[0]],
        y: vec![sums[1]],
        s: vec![sums[2]],
        s_known: true,
    };
    let mut domain_df = None;
    let (cov, method) = match &design {
        Some((_, v)) if !replicates.is_empty() => {
            let (cov, df) = replicate_variance(&passes, &lay, (&full, &names), v, &mut notes)?;
            domain_df = Some(df);
            (cov, super::fitted::replicate_method(v))
        }
        Some((d, _)) => {
            let t = d
                .taylor
                .as_ref()
                .expect("a design with replicates or Taylor");
            let (coef, average) = crate::taylor::coefficients(t);
            let (mut v, mut scale, psus, strata) =
                passes.scores(&lay, &full.beta, &coef, &average)?;
            if let Some(c) = &t.calibration {
                // A weight adjusted to population totals: the scores'
                // residuals.
                let fix = adjusted_scores(&passes, &lay, &full.beta, (t, c))?;
                v.iter_mut().zip(fix.matrix()).for_each(|(a, b)| *a += b);
                scale = fix.scale.unwrap_or(scale);
            }
            domain_df = Some(psus as f64 - strata as f64);
            (
                super::fit::sandwich(&full.ainv, &v, p, scale),
                "linearization".to_string(),
            )
        }
        None if lay.weight.is_some() => {
            notes.push(super::fitted::HC0_NOTE.into());
            (
                sandwich(&[[1.0, 0.0]], &[])?.0,
                "sandwich (HC0)".to_string(),
            )
        }
        None => (
            model_based(family, &cells, &full),
            "model-based".to_string(),
        ),
    };
    let weights = {
        let q = Query {
            fold: None,
            ..passes.query.clone()
        };
        microtab_engine::weight_cases(ds, &q, opts, n)?
    };
    let wname = passes
        .query
        .weight
        .as_deref()
        .map(|n| ds.variable(n))
        .transpose()?;
    crate::checks::check_weights(req, &weights, wname.map(|v| v.name.as_str()))?;
    let survey = design.as_ref().map(|(_, v)| {
        let mut v = v.clone();
        if let Some(df) = domain_df {
            v.info.df = df;
        }
        v
    });
    let mut r = summarize(
        (&ds.dir().display().to_string(), formula, family, req),
        (&cells, &full, cov, &names),
        (survey.as_ref(), method, notes),
        (passes.query.weight.clone(), weights),
        coding.intercept,
    );
    r.fitted_on = "records".into();
    Ok(r)
}

/// The adjustment's part of the covariance of the score totals at `beta`
/// under design `t`, whose weight `c` made: each record's score per unit
/// of weight, `x (y − μ) μ'/V(μ)`.
fn adjusted_scores(
    passes: &Passes<'_>,
    lay: &Arc<Layout>,
    beta: &[f64],
    (t, c): (&microtab_store::Taylor, &microtab_store::Calibration),
) -> crate::Result<crate::weighting::RecordCorrection> {
    let (l, b) = (lay.clone(), beta.to_vec());
    let per_unit: crate::weighting::PerUnit = Arc::new(move |rows, i, e| {
        let Some((y, _)) = l.record(rows.cells[i], rows.values, i, e) else {
            return false;
        };
        let fam = l.family;
        let eta = dot(e, &b);
        let mu = fam.mu(eta);
        let g = (y - mu) * fam.dmu(eta) / fam.var(mu);
        e.iter_mut().for_each(|x| *x *= g);
        true
    });
    let values = passes.values[..lay.replicates.start].to_vec();
    crate::weighting::record_correction(
        passes.ds,
        (t, c),
        &passes.query,
        (values, lay.p, per_unit),
        passes.opts,
    )
}

/// Each planned cell's columns (numeric parts at 1) and outcome.
pub(crate) fn planned_cells(
    coding: &Coding,
    planned: &[Vec<Category>],
) -> Vec<Option<(Vec<f64>, Option<f64>)>> {
    let shape: Vec<usize> = planned.iter().map(|c| c.len().max(1)).collect();
    let total: usize = shape.iter().product();
    let none = Category {
        value: microtab_engine::Value::Null,
        display: String::new(),
        label: None,
        missing: true,
    };
    (0..total)
        .map(|c| {
            let cats: Vec<&Category> = microtab_engine::unravel(c, &shape)
                .iter()
                .enumerate()
                .map(|(d, &i)| planned[d].get(i).unwrap_or(&none))
                .collect();
            let x = coding.row(&cats)?;
            let y = match coding.has_outcome_dim() {
                true => Some(coding.y(&cats)?),
                false => None,
            };
            Some((x, y))
        })
        .collect()
}

/// The passes' query and values, and the layout of a record's values
/// (its cells filled in once the levels are known); with `check`, a text
/// value the filter or a recode names must be in `ds` (parts of the data
/// are checked once over all by whoever merges them).
pub(crate) fn setup<'a>(
    ds: &'a Dataset,
    req: &crate::Request,
    (coding, design): (
        &Coding,
        &Option<(microtab_store::Design, crate::survey::Survey)>,
    ),
    (family, check): (Family, bool),
    opts: &'a ScanOptions,
) -> crate::Result<(Passes<'a>, Layout)> {
    use super::summary::model_query;
    let mut query = model_query(ds, req, coding, design, check)?;
    query.max_cells = Some(req.max_cells);
    let replicates = std::mem::take(&mut query.replicates);
    let taylor = design.as_ref().and_then(|(d, _)| d.taylor.clone());
    // The fold's values: the model's, the weight, the strata and the
    // PSUs, the replicate weights (last: read only by their refits).

    let mut values = coding.values.clone();
    let model_values = values.len();
    let weight = query.weight.clone().map(|w| {
        values.push(w);
        values.len() - 1
    });
    let mut push = |name: &Option<String>| {
        name.clone().map(|n| {
            values.push(n);
            values.len() - 1
        })
    };
    let (strata, cluster) = match &taylor {
        Some(t) => (push(&t.strata), push(&t.cluster)),
        None => (None, None),
    };
    let reps = values.len()..values.len() + replicates.len();
    values.extend(replicates.iter().cloned());
    let keys = match (&taylor, &query.weight) {
        (Some(t), _) => Some(TaylorKeys::of(ds, Some(t))?),
        (None, Some(_)) if design.is_none() => Some(TaylorKeys::of(ds, None)?),
        _ => None,
    };
    let passes = Passes {
        ds,
        query,
        values,
        opts,
        taylor: keys.map(Arc::new),
    };
    let lay = Layout {
        p: 0,
        cells: Vec::new(),
        colvals: Vec::new(),
        model_values,
        y: coding.y_value,
        weight,
        replicates: reps,
        strata,
        cluster,
        family,
    };
    Ok((passes, lay))
}

/// The replicates' refits record by record: the coefficients' covariance
/// (R `svrVar`), and the domain's degrees of freedom.
fn replicate_variance(
    passes: &Passes<'_>,
    lay: &Arc<Layout>,
    (full, names): (&Fit, &[String]),
    v: &crate::survey::Survey,
    notes: &mut Vec<String>,
) -> crate::Result<(Vec<f64>, f64)> {
    let p = lay.p;
    let (refits, _) = passes.fit(
        lay,
        names,
        Some((&full.beta, full.deviance)),
        lay.replicates.len(),
    )?;
    let betas: Vec<Option<Vec<f64>>> = refits.into_iter().map(|r| r.ok().map(|f| f.beta)).collect();
    let dropped = betas.iter().filter(|b| b.is_none()).count();
    if dropped > 0 {
        notes.push(format!(
            "{dropped} replicates could not be refitted and were left out"
        ));
    }
    let cov = v.covariance(&full.beta, &betas);
    let df = super::degf::replicate_degf(
        passes.ds,
        &passes.query,
        &passes.values[..lay.model_values],
        &passes.values[lay.replicates.clone()],
        passes.opts,
    )?;
    Ok(((0..p * p).map(|i| cov[i / p][i % p]).collect(), df))
}
