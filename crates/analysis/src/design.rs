//! Building a survey design from a user's description (the CLI's
//! `microtab design` and the Python package's `Dataset.design(…)`):
//! checks every name against the dataset, expands replicate-weight
//! ranges, fixes the replicate scale from the design's kind, and finds a
//! Taylor design's PSU structure.

use crate::survey::default_scale;
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
        return Ok(Design {
            weight: wvar.name.clone(),
            replicates: None,
            taylor: Some(taylor),
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
    Ok(Design {
        weight: wvar.name.clone(),
        replicates: Some(Replicates {
            kind,
            weights,
            scale,
            rscales,
            mse: a.mse,
            rho: a.rho,
        }),
        taylor: None,
    })
}
