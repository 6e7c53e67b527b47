//! `microtab design`: store a dataset's survey design (its weight and
//! replicate weights) so every query uses it, show it, or clear it. A
//! metadata-only, atomic change of the manifest.

use crate::common::open;
use anyhow::{bail, Result};
use microtab_analysis::survey::default_scale;
use microtab_store::{Dataset, Design, Kind, LonelyPsu, RepType, Replicates, Variable};
use std::path::PathBuf;

/// Arguments of `design`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// Dataset directory.
    dataset: PathBuf,
    /// The full-sample weight.
    #[arg(long, short = 'w', required_unless_present = "clear")]
    weight: Option<String>,
    /// Replicate weights: an inclusive numbered range (`REPWTP1-REPWTP80`),
    /// a comma list, or both (`R1-R4,RX`).
    #[arg(long, value_name = "VARS", requires = "weight")]
    repweights: Option<String>,
    /// Kind of replication: sdr (scale 4/R; ACS, CPS), brr (1/R), fay
    /// (1/(R(1−ρ)²), with --rho), jk1 ((R−1)/R), jkn (scale 1, with
    /// --rscales), bootstrap (1/(R−1)), other (with --scale).
    #[arg(long = "type", value_name = "TYPE", default_value = "sdr")]
    kind: RepType,
    /// Fay's coefficient ρ (type fay).
    #[arg(long)]
    rho: Option<f64>,
    /// The overall scale C of the variance C · Σ c_r (θ_r − θ)², instead
    /// of the type's.
    #[arg(long)]
    scale: Option<f64>,
    /// One coefficient c_r per replicate, comma-separated (default 1 each;
    /// jkn: (n_h − 1)/n_h of each replicate's stratum).
    #[arg(long, value_delimiter = ',', num_args = 1..)]
    rscales: Option<Vec<f64>>,
    /// Deviations from the mean of the replicate estimates instead of from
    /// the full-sample estimate (R survey's default; the Census Bureau and
    /// IPUMS formula, the default here, uses the full-sample estimate).
    #[arg(long)]
    no_mse: bool,
    /// Strata variable of a Taylor linearization design.
    #[arg(
        long,
        value_name = "VAR",
        requires = "weight",
        conflicts_with = "repweights"
    )]
    strata: Option<String>,
    /// PSU (cluster) variable of a Taylor linearization design; without
    /// it every record is its own PSU.
    #[arg(
        long,
        value_name = "VAR",
        requires = "weight",
        conflicts_with = "repweights"
    )]
    cluster: Option<String>,
    /// Finite population correction: per stratum, its population of PSUs,
    /// or the sampling fraction (values at most 1), as R's `fpc`.
    #[arg(
        long,
        value_name = "VAR",
        requires = "weight",
        conflicts_with = "repweights"
    )]
    fpc: Option<String>,
    /// Strata with a single PSU: fail (refuse the design), remove or
    /// certainty (no variance from the stratum), adjust (the PSU centred at
    /// zero), average (the other strata's variance, scaled up).
    #[arg(
        long,
        value_name = "HOW",
        default_value = "fail",
        conflicts_with = "repweights"
    )]
    lonely_psu: LonelyPsu,
    /// Remove the design.
    #[arg(long, conflicts_with_all = ["weight", "repweights", "strata", "cluster", "fpc"])]
    clear: bool,
}

/// Refuses a variable that cannot be a replicate weight: text, or with
/// missing values (a replicate weight must be present for every record).
fn usable_replicate(v: &Variable) -> Result<()> {
    if v.kind == Kind::String {
        bail!("replicate weight {} is a text variable", v.name);
    }
    if v.nulls > 0 || !v.missing_codes.is_empty() {
        bail!(
            "replicate weight {} has missing values (a replicate weight must be present for every record)",
            v.name
        );
    }
    Ok(())
}

/// Expands `REPWTP1-REPWTP80,EXTRA` into variable names as the dataset
/// spells them, each a numeric variable without missing values.
fn replicate_names(ds: &Dataset, spec: &str) -> Result<Vec<String>> {
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
                    bail!("'{part}': a range of replicate weights is two names ending in numbers, as in REPWTP1-REPWTP80");
                };
                if !pa.eq_ignore_ascii_case(&pb) || na > nb {
                    bail!("'{part}': expected a range like REPWTP1-REPWTP80 (the same prefix, the first number no larger than the last)");
                }
                (na..=nb).map(|i| format!("{pa}{i}")).collect()
            }
            None => vec![part.to_string()],
        };
        for n in expanded {
            let v = ds
                .variable(&n)
                .map_err(|e| anyhow::anyhow!("replicate weight {n}: {e}"))?;
            usable_replicate(v)?;
            if names.contains(&v.name) {
                bail!("replicate weight {} is named twice", v.name);
            }
            names.push(v.name.clone());
        }
    }
    if names.len() < 2 {
        bail!(
            "a replicate design needs at least two replicate weights, found {}",
            names.len()
        );
    }
    Ok(names)
}

/// The design an IPUMS extract's replicate weights imply (in the
/// analysis layer, shared with the Python package's imports).
pub fn ipums_design(ds: &Dataset) -> Option<Design> {
    microtab_analysis::survey::ipums_design(ds)
}

/// The design as one line of text.
pub fn describe(d: &Design) -> String {
    if let Some(t) = &d.taylor {
        let mut parts = vec![format!("weight {}", d.weight)];
        if let Some(s) = &t.strata {
            parts.push(format!("strata {s} ({})", t.psus.len()));
        }
        parts.push(match &t.cluster {
            Some(c) => format!("PSUs {c} ({})", t.psus.iter().sum::<u64>()),
            None => format!("each of the {} records a PSU", t.rows),
        });
        if let Some(f) = &t.fpc {
            parts.push(format!("finite population correction {f}"));
        }
        let lonely = t.psus.iter().filter(|&&n| n == 1).count();
        if lonely > 0 {
            parts.push(format!(
                "{lonely} strata with a single PSU: {}",
                t.lonely_psu.name()
            ));
        }
        return format!(
            "{}; Taylor linearization, t intervals with {} df",
            parts.join(", "),
            t.weighted_psus as i64 - t.weighted_strata as i64
        );
    }
    match &d.replicates {
        None => format!("weight {}", d.weight),
        Some(r) => format!(
            "weight {}, {} replicate weights {}…{} ({}{}, scale {}, {}), variance = scale × Σ c_r (replicate − {})², t intervals with {} df",
            d.weight,
            r.weights.len(),
            r.weights[0],
            r.weights[r.weights.len() - 1],
            r.kind.name(),
            r.rho.map(|x| format!(" ρ = {x}")).unwrap_or_default(),
            crate::render::fmt_sig(r.scale, 6),
            if r.rscales.iter().all(|&c| c == 1.0) {
                "c_r = 1".to_string()
            } else {
                "c_r per replicate".to_string()
            },
            if r.mse { "full-sample estimate" } else { "mean of the replicates" },
            r.weights.len() - 1
        ),
    }
}

/// Sets, shows or clears the design.
pub fn run(a: Args) -> Result<()> {
    let mut ds = open(&a.dataset)?;
    if a.clear {
        ds.update_manifest(|m| m.design = None)?;
        eprintln!("{}: no survey design", a.dataset.display());
        return Ok(());
    }
    let Some(weight) = &a.weight else {
        unreachable!("clap requires --weight without --clear");
    };
    let wvar = ds.variable(weight)?.clone();
    if wvar.kind == Kind::String {
        bail!("the weight {} is a text variable", wvar.name);
    }
    let kind = a.kind;
    let replicates = match &a.repweights {
        None => {
            if a.rho.is_some() || a.scale.is_some() || a.rscales.is_some() || a.no_mse {
                bail!("--rho, --scale, --rscales and --no-mse describe replicate weights: give them with --repweights");
            }
            // A Taylor linearization design (weight only: every record a
            // PSU, one stratum).
            let taylor = microtab_analysis::taylor_structure(
                &ds,
                &wvar.name,
                a.strata.as_deref(),
                a.cluster.as_deref(),
                a.fpc.as_deref(),
                a.lonely_psu,
            )?;
            if !taylor.contiguous {
                eprintln!(
                    "note: the records of a PSU are not stored together; queries keep every PSU's totals in memory until the end (sorting the data by PSU makes them faster)"
                );
            }
            let design = Design {
                weight: wvar.name.clone(),
                replicates: None,
                taylor: Some(taylor),
            };
            let text = describe(&design);
            ds.update_manifest(|m| m.design = Some(design))?;
            eprintln!("{}: survey design set: {text}", a.dataset.display());
            return Ok(());
        }
        Some(spec) => {
            let weights = replicate_names(&ds, spec)?;
            if weights.contains(&wvar.name) {
                bail!(
                    "the weight {} is also listed as a replicate weight",
                    wvar.name
                );
            }
            let n = weights.len();
            if kind == RepType::Fay && !a.rho.is_some_and(|r| (0.0..1.0).contains(&r)) {
                bail!(
                    "a Fay design needs --rho R, its coefficient, with 0 ≤ R < 1 (e.g. --rho 0.5)"
                );
            }
            if kind != RepType::Fay && a.rho.is_some() {
                bail!("--rho is Fay's coefficient: give it with --type fay");
            }
            let scale = match (a.scale, default_scale(kind, n, a.rho), kind) {
                (Some(s), _, _) => s,
                (None, Some(s), _) => s,
                (None, None, RepType::Jkn) => 1.0,
                (None, None, _) => bail!("type other needs --scale"),
            };
            if !(scale.is_finite() && scale > 0.0) {
                bail!("--scale must be a positive number, found {scale}");
            }
            let rscales = match &a.rscales {
                Some(c) if c.len() != n => bail!(
                    "--rscales has {} coefficients for {n} replicate weights",
                    c.len()
                ),
                Some(c) if c.iter().any(|x| !x.is_finite() || *x < 0.0) => {
                    bail!("--rscales must be numbers ≥ 0")
                }
                Some(c) => c.clone(),
                None if kind == RepType::Jkn => {
                    bail!(
                        "a JKn design needs --rscales: (n_h − 1)/n_h for each replicate's stratum"
                    )
                }
                None => vec![1.0; n],
            };
            Replicates {
                kind,
                weights,
                scale,
                rscales,
                mse: !a.no_mse,
                rho: a.rho,
            }
        }
    };
    let design = Design {
        weight: wvar.name.clone(),
        replicates: Some(replicates),
        taylor: None,
    };
    let text = describe(&design);
    ds.update_manifest(|m| m.design = Some(design))?;
    eprintln!("{}: survey design set: {text}", a.dataset.display());
    Ok(())
}
