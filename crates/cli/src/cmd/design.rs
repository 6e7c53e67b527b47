//! `microtab design`: store a dataset's survey design (its weight and
//! replicate weights) so every query uses it, show it, or clear it. A
//! metadata-only, atomic change of the manifest.

use crate::common::open;
use anyhow::Result;
/// The design as one line of text (the analysis layer's, as every front
/// end shows it).
pub use microtab_analysis::design_summary as describe;
use microtab_analysis::{build_design, DesignSpec};
use microtab_store::{Dataset, Design, LonelyPsu, RepType};
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
    #[command(flatten)]
    taylor: TaylorArgs,
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

/// The variables of a Taylor linearization design (each needs the
/// weight, and none goes with replicate weights).
#[derive(clap::Args, Debug)]
#[group(multiple = true, requires = "weight", conflicts_with = "repweights")]
struct TaylorArgs {
    /// Strata variable of a Taylor linearization design.
    #[arg(long, value_name = "VAR")]
    strata: Option<String>,
    /// PSU (cluster) variable of a Taylor linearization design; without
    /// it every record is its own PSU.
    #[arg(long, value_name = "VAR")]
    cluster: Option<String>,
    /// Finite population correction: per stratum, its population of PSUs,
    /// or the sampling fraction (values at most 1), as R's `fpc`.
    #[arg(long, value_name = "VAR")]
    fpc: Option<String>,
}

/// The design an IPUMS extract's replicate weights imply (in the
/// analysis layer, shared with the Python package's imports).
pub fn ipums_design(ds: &Dataset) -> Option<Design> {
    microtab_analysis::survey::ipums_design(ds)
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
    let spec = DesignSpec {
        repweights: a.repweights.clone(),
        kind: a.kind,
        rho: a.rho,
        scale: a.scale,
        rscales: a.rscales.clone(),
        mse: !a.no_mse,
        strata: a.taylor.strata.clone(),
        cluster: a.taylor.cluster.clone(),
        fpc: a.taylor.fpc.clone(),
        lonely_psu: a.lonely_psu,
        ..DesignSpec::new(weight.as_str())
    };
    let design = build_design(&ds, &spec)?;
    if design.taylor.as_ref().is_some_and(|t| !t.contiguous) {
        eprintln!(
            "note: the records of a PSU are not stored together; queries keep every PSU's totals in memory until the end (sorting the data by PSU makes them faster)"
        );
    }
    let text = describe(&design);
    ds.update_manifest(|m| m.design = Some(design))?;
    eprintln!("{}: survey design set: {text}", a.dataset.display());
    Ok(())
}
