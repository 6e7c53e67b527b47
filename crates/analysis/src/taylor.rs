//! Taylor linearization designs: the PSU structure a design rests on
//! (found once, when the design is set) and the per-stratum coefficients
//! of the variance formula (docs/SURVEY.md).
//!
//! With stratum h holding n_h PSUs whose totals of an estimate's
//! linearized variable are z_hj, the variance is
//! `Σ_h (1 − f_h) · n_h/(n_h − 1) · Σ_j (z_hj − z̄_h)²` (R `svyrecvar`,
//! with-replacement ultimate clusters). Written as
//! `Σ_h c_h Σ_j z_hj² − d_h (Σ_j z_hj)²` with `c_h = (1 − f_h) n_h/(n_h −
//! 1)` and `d_h = c_h / n_h`, every term is a sum over PSUs, which the
//! engine accumulates in the scan that counts the table.

use crate::{Error, Result};
use microtab_store::{ColumnData, Dataset, Kind, LonelyPsu, Taylor, Variable, STRIPE_ROWS};

/// Calls `f` with each stripe's first row and values of column `name`.
fn stripes(
    ds: &Dataset,
    name: &str,
    mut f: impl FnMut(usize, ColumnData<'_>) -> Result<()>,
) -> Result<()> {
    let col = ds.column(name).map_err(microtab_engine::Error::from)?;
    let rows = col.rows();
    let mut buf = Vec::new();
    let mut start = 0;
    while start < rows {
        let n = STRIPE_ROWS.min(rows - start);
        let data = col
            .rows_view(start, n, &mut buf)
            .map_err(microtab_engine::Error::from)?;
        f(start, data)?;
        start += n;
    }
    Ok(())
}

/// A whole column's stored values as `i64` (strata and clusters: integer
/// or text codes, never empty).
pub(crate) fn keys(ds: &Dataset, v: &Variable, role: &str) -> Result<Vec<i64>> {
    if v.kind == Kind::Float {
        return Err(Error::NotCodes {
            role: role.to_string(),
            variable: v.name.clone(),
        });
    }
    let mut out = Vec::with_capacity(ds.rows() as usize);
    stripes(ds, &v.name, |_, d| {
        out.extend((0..d.len()).map(|i| d.get_i64(i)));
        Ok(())
    })?;
    if let Some(null) = v.null_code.filter(|_| v.nulls > 0) {
        let at = out.iter().position(|&k| k == null).unwrap_or(0);
        return Err(Error::Design(format!(
            "the {role} variable {} is empty at record {} ({} empty values): every record needs its {role}",
            v.name,
            at + 1,
            v.nulls
        )));
    }
    if !v.missing_codes.is_empty() {
        let scale = v.scale();
        if let Some(at) = out
            .iter()
            .position(|&k| v.missing_codes.contains(&(k as f64)))
        {
            return Err(Error::Design(format!(
                "the {role} variable {} has the missing code {} at record {}: every record needs a valid {role}",
                v.name,
                out[at] as f64 / scale,
                at + 1
            )));
        }
    }
    Ok(out)
}

/// A whole numeric column in displayed units, checked present.
pub(crate) fn values(ds: &Dataset, v: &Variable, role: &str) -> Result<Vec<f64>> {
    if v.kind == Kind::String {
        return Err(Error::Design(format!(
            "the {role} {} is a text variable",
            v.name
        )));
    }
    let scale = v.scale();
    let mut out = Vec::with_capacity(ds.rows() as usize);
    stripes(ds, &v.name, |_, d| {
        out.extend((0..d.len()).map(|i| d.get_f64(i)));
        Ok(())
    })?;
    let null = v.null_code.filter(|_| v.nulls > 0);
    for (i, x) in out.iter_mut().enumerate() {
        let missing =
            x.is_nan() || null.is_some_and(|c| *x == c as f64) || v.missing_codes.contains(x);
        if missing {
            return Err(Error::Design(format!(
                "the {role} {} is missing at record {}: every record needs one",
                v.name,
                i + 1
            )));
        }
        *x /= scale;
    }
    Ok(out)
}

/// The displayed value of a stratum key (its text for a text variable).
fn show(ds: &Dataset, v: Option<&Variable>, key: i64) -> String {
    match v {
        Some(v) if v.kind == Kind::String => ds
            .dictionary(v)
            .ok()
            .and_then(|d| d.get(key as usize).cloned())
            .unwrap_or_else(|| key.to_string()),
        Some(v) if v.decimals > 0 => format!("{}", key as f64 / v.scale()),
        _ => key.to_string(),
    }
}

/// Finds the PSU structure of a stratified cluster design over `ds`:
/// strata, PSUs per stratum (a PSU is a cluster within its stratum, R's
/// `nest = TRUE`), population sizes from the FPC variable, whether each
/// PSU's records are contiguous, and the PSUs and strata with records of
/// non-zero `weight` (the design's degrees of freedom). Refuses lonely
/// PSUs under [`LonelyPsu::Fail`], naming the strata.
pub fn taylor_structure(
    ds: &Dataset,
    weight: &str,
    strata: Option<&str>,
    cluster: Option<&str>,
    fpc: Option<&str>,
    lonely_psu: LonelyPsu,
) -> Result<Taylor> {
    let var = |n: &str| -> Result<Variable> {
        Ok(ds
            .variable(n)
            .map_err(microtab_engine::Error::from)?
            .clone())
    };
    let rows = ds.rows() as usize;
    if rows == 0 {
        return Err(Error::Design(
            "the dataset has no records: a design needs its PSUs".into(),
        ));
    }
    let wvar = var(weight)?;
    let w = values(ds, &wvar, "weight")?;
    let svar = strata.map(var).transpose()?;
    let cvar = cluster.map(var).transpose()?;
    let s = match &svar {
        Some(v) => keys(ds, v, "strata")?,
        None => vec![0; rows],
    };
    let c = cvar.as_ref().map(|v| keys(ds, v, "cluster")).transpose()?;
    // Stratum keys, ascending, and each record's stratum index.
    let mut strata_keys = s.clone();
    strata_keys.sort_unstable();
    strata_keys.dedup();
    if strata_keys.is_empty() {
        strata_keys.push(0);
    }
    let index = |k: i64| strata_keys.binary_search(&k).expect("a stratum key");
    let h = strata_keys.len();
    let count = psu_count(&s, c.as_deref(), &w, &index, h);
    let shown = |x: usize| show(ds, svar.as_ref(), strata_keys[x]);
    let population = match fpc {
        None => None,
        Some(f) => {
            let fv = var(f)?;
            let f = values(ds, &fv, "finite population correction")?;
            Some(populations(&fv.name, &f, &s, &index, &count.psus, &shown)?)
        }
    };
    if lonely_psu == LonelyPsu::Fail {
        let lonely: Vec<usize> = (0..h).filter(|&x| count.psus[x] == 1).collect();
        if !lonely.is_empty() {
            return Err(Error::LonelyPsu {
                strata_variable: svar.as_ref().map_or(String::new(), |v| v.name.clone()),
                strata: lonely.iter().take(5).map(|&x| shown(x)).collect(),
                count: lonely.len(),
            });
        }
    }
    let PsuCount {
        psus,
        weighted_strata,
        weighted_psus,
        contiguous,
    } = count;
    Ok(Taylor {
        strata: svar.map(|v| v.name),
        cluster: cvar.map(|v| v.name),
        fpc: fpc.map(|f| var(f).map(|v| v.name)).transpose()?,
        lonely_psu,
        strata_keys,
        psus,
        population,
        contiguous,
        weighted_psus,
        weighted_strata,
        rows: rows as u64,
        calibration: None,
    })
}

/// The PSUs of each stratum, and what the design's degrees of freedom
/// count.
struct PsuCount {
    /// PSUs per stratum.
    psus: Vec<u64>,
    /// Strata with records of non-zero weight.
    weighted_strata: u64,
    /// PSUs with records of non-zero weight.
    weighted_psus: u64,
    /// Whether each PSU's records are one run.
    contiguous: bool,
}

/// Counts the PSUs of each of `h` strata from each record's stratum key
/// `s`, cluster key `c` (none: every record is its own PSU) and weight
/// `w`; `index` gives a stratum key's position.
fn psu_count(
    s: &[i64],
    c: Option<&[i64]>,
    w: &[f64],
    index: &dyn Fn(i64) -> usize,
    h: usize,
) -> PsuCount {
    let mut psus = vec![0u64; h];
    let mut weighted_strata = vec![false; h];
    let mut weighted_psus = 0u64;
    let contiguous;
    match c {
        None => {
            // Every record is its own PSU.
            for (i, &k) in s.iter().enumerate() {
                let x = index(k);
                psus[x] += 1;
                if w[i] != 0.0 {
                    weighted_strata[x] = true;
                    weighted_psus += 1;
                }
            }
            contiguous = true;
        }
        Some(c) => {
            // Runs of records with one (stratum, cluster); a PSU is
            // contiguous when it is a single run.
            let mut runs: Vec<(i64, i64, bool)> = Vec::new();
            for i in 0..s.len() {
                let key = (s[i], c[i]);
                let nz = w[i] != 0.0;
                match runs.last_mut() {
                    Some(r) if (r.0, r.1) == key => r.2 |= nz,
                    _ => runs.push((key.0, key.1, nz)),
                }
            }
            let n_runs = runs.len();
            runs.sort_unstable();
            let mut distinct: Vec<(i64, i64, bool)> = Vec::with_capacity(n_runs);
            for r in runs {
                match distinct.last_mut() {
                    Some(d) if (d.0, d.1) == (r.0, r.1) => d.2 |= r.2,
                    _ => distinct.push(r),
                }
            }
            contiguous = distinct.len() == n_runs;
            for (sk, _, nz) in distinct {
                let x = index(sk);
                psus[x] += 1;
                if nz {
                    weighted_strata[x] = true;
                    weighted_psus += 1;
                }
            }
        }
    }
    PsuCount {
        psus,
        weighted_strata: weighted_strata.iter().filter(|&&b| b).count() as u64,
        weighted_psus,
        contiguous,
    }
}

/// Each stratum's population of PSUs from the finite population
/// correction `name` (values `f` per record: population sizes, or
/// sampling fractions when all are at most 1, R's rule), checked constant
/// within a stratum and no smaller than its sample. `shown` displays a
/// stratum.
fn populations(
    name: &str,
    f: &[f64],
    s: &[i64],
    index: &dyn Fn(i64) -> usize,
    psus: &[u64],
    shown: &dyn Fn(usize) -> String,
) -> Result<Vec<f64>> {
    let mut pop: Vec<Option<f64>> = vec![None; psus.len()];
    for i in 0..f.len() {
        let x = index(s[i]);
        match pop[x] {
            None => pop[x] = Some(f[i]),
            Some(p) if p != f[i] => {
                return Err(Error::Design(format!(
                    "the finite population correction {name} is not constant within stratum {}: {} at record {}, {} before",
                    shown(x),
                    f[i],
                    i + 1,
                    p
                )))
            }
            _ => {}
        }
    }
    let pop: Vec<f64> = pop
        .into_iter()
        .map(|p| p.unwrap_or(f64::INFINITY))
        .collect();
    let fractions = pop.iter().all(|&p| p <= 1.0);
    let mut sizes = Vec::with_capacity(psus.len());
    for (x, &p) in pop.iter().enumerate() {
        let n = psus[x] as f64;
        let size = if fractions {
            if p <= 0.0 {
                return Err(Error::Design(format!(
                    "the sampling fraction {name} is {p} in stratum {}: a fraction is above 0 and at most 1",
                    shown(x)
                )));
            }
            n / p
        } else {
            p
        };
        if size < n {
            return Err(Error::Design(format!(
                "the finite population correction {name} gives stratum {} a population of {} PSUs, fewer than the {} sampled",
                shown(x),
                size,
                n
            )));
        }
        sizes.push(size);
    }
    Ok(sizes)
}

/// The strata of the Taylor design of `ds` as the data gives them (text,
/// or numbers with their decimals and no trailing zeros), in the order of
/// its keys: parts of different datasets compare strata by them.
pub(crate) fn strata_values(ds: &Dataset) -> Result<Vec<String>> {
    let Some(t) = ds
        .manifest()
        .design
        .as_ref()
        .and_then(|d| d.taylor.as_ref())
    else {
        return Ok(Vec::new());
    };
    let Some(name) = &t.strata else {
        return Ok(vec![String::new(); t.strata_keys.len()]);
    };
    let var = ds.variable(name)?;
    let dict = match var.kind {
        Kind::String => Some(ds.dictionary(var)?),
        _ => None,
    };
    Ok(t.strata_keys
        .iter()
        .map(|&k| match &dict {
            Some(d) => d.get(k as usize).cloned().unwrap_or_else(|| k.to_string()),
            None => {
                let s = microtab_store::codec::display_int(var.decimals, k);
                match s.contains('.') {
                    true => s.trim_end_matches('0').trim_end_matches('.').to_string(),
                    false => s,
                }
            }
        })
        .collect())
}

/// The engine's Taylor query of design `t`: its strata, PSUs and
/// coefficients, no margins or scores yet.
pub(crate) fn query_of(t: &Taylor) -> microtab_engine::TaylorQuery {
    let (coef, average) = coefficients(t);
    microtab_engine::TaylorQuery {
        strata: t.strata.clone(),
        cluster: t.cluster.clone(),
        strata_keys: t.strata_keys.clone(),
        coef,
        average,
        contiguous: t.contiguous,
        ..Default::default()
    }
}

/// Each stratum's `(c_h, d_h)`: the variance of a total is `Σ_h c_h Σ_j
/// z_hj² − d_h (Σ_j z_hj)²` (R `onestrat`): `c_h = (1 − f_h) n_h/(n_h −
/// 1)`, `d_h = c_h/n_h`; nothing from a stratum whose FPC leaves no
/// sampling variance; a lonely PSU adds nothing (`remove`, `certainty`,
/// `average`) or `(1 − f_h) z²` (`adjust`). With `average`, which strata
/// have no variance (their domains' variances are scaled up by the
/// engine).
pub(crate) fn coefficients(t: &Taylor) -> (Vec<[f64; 2]>, Vec<bool>) {
    let h = t.psus.len();
    let mut missing = vec![false; h];
    let coef = (0..h)
        .map(|x| {
            let n = t.psus[x] as f64;
            let f = t.population.as_ref().map_or(1.0, |p| {
                if p[x].is_infinite() {
                    1.0
                } else {
                    (p[x] - n) / p[x]
                }
            });
            if f < 1e-7 {
                return [0.0, 0.0];
            }
            if t.psus[x] > 1 {
                let c = f * n / (n - 1.0);
                [c, c / n]
            } else {
                match t.lonely_psu {
                    LonelyPsu::Adjust => [f, 0.0],
                    LonelyPsu::Average => {
                        missing[x] = true;
                        [0.0, 0.0]
                    }
                    _ => [0.0, 0.0],
                }
            }
        })
        .collect();
    if t.lonely_psu != LonelyPsu::Average {
        missing.clear();
    }
    (coef, missing)
}
