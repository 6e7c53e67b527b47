//! `microtab replicate`: replicate weights built from the dataset's
//! Taylor design (weight, strata, PSUs, FPC), written as new columns in a
//! new generation, with the replicate design that uses them set (atomic:
//! a killed run leaves the dataset as it was).

use anyhow::Result;
use microtab_analysis::weighting::replicate::{
    replicate, Method, ReplicateOptions, DEFAULT_REPLICATES, DEFAULT_SEED,
};
use std::path::PathBuf;
use std::time::Instant;

/// Arguments of `replicate`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// Dataset directory (its design: `microtab design DS --weight W
    /// [--strata S] [--cluster PSU] [--fpc F]`).
    dataset: PathBuf,
    /// jk1 (delete-one jackknife, unstratified), jkn (stratified
    /// jackknife), brr (two PSUs per stratum), fay (BRR with --fay-rho),
    /// bootstrap (Rao–Wu, n_h − 1 PSUs drawn), sdr (successive
    /// difference).
    #[arg(long = "type", value_name = "TYPE")]
    kind: Method,
    /// Number of replicates (bootstrap: default 80; sdr: default the
    /// smallest Hadamard order above the PSUs, at most 80; the others'
    /// number is fixed by the design).
    #[arg(long, value_name = "R")]
    replicates: Option<usize>,
    /// The bootstrap's seed.
    #[arg(long, default_value_t = DEFAULT_SEED)]
    seed: u64,
    /// Names of the replicate weights: PREFIX1 … PREFIXR (default: the
    /// weight's name and _REP, e.g. PERWT_REP1).
    #[arg(long, value_name = "NAME")]
    prefix: Option<String>,
    /// Fay's coefficient ρ (type fay; default 0.5): PSUs weighted 2 − ρ
    /// and ρ.
    #[arg(long, value_name = "RHO")]
    fay_rho: Option<f64>,
    /// Overwrite existing variables of the replicate weights' names.
    #[arg(long)]
    replace: bool,
}

/// Runs `replicate`.
pub fn run(a: Args) -> Result<()> {
    let t = Instant::now();
    let opts = ReplicateOptions {
        method: a.kind,
        replicates: a.replicates,
        seed: a.seed,
        prefix: a.prefix.clone(),
        rho: a.fay_rho,
        replace: a.replace,
    };
    let busy = crate::progress::busy(format!("making {} replicate weights", a.kind.name()));
    let r = replicate(&a.dataset, &opts)?;
    drop(busy);
    let n = r.names.len();
    let (lo, hi) = r
        .rscales
        .iter()
        .fold((f64::INFINITY, f64::NEG_INFINITY), |(l, h), &x| {
            (l.min(x), h.max(x))
        });
    let rscales = if lo == hi {
        format!("{lo} each")
    } else {
        format!("{lo:.6} to {hi:.6}")
    };
    let mut how = format!("{} replicates", r.method.name());
    if let Some(rho) = r.rho {
        how += &format!(" (rho {rho})");
    }
    if let Some(seed) = r.seed {
        how += &format!(" (seed {seed}; xoshiro256**)");
    }
    let rank = match r.rank {
        Some(k) => format!("rank {k}, {} df", k.saturating_sub(1)),
        None => format!("rank not computed, {} df", n.saturating_sub(1)),
    };
    eprintln!(
        "{}: {n} {how} from {} PSUs in {} strata: {} … {} (weight {} × factor; {} records), scale {}, rscales {rscales}, mse, {rank}; design set (generation {}) in {:.3} s",
        a.dataset.display(),
        r.psus,
        r.strata,
        r.names[0],
        r.names[n - 1],
        r.weight,
        r.rows,
        r.scale,
        r.generation,
        t.elapsed().as_secs_f64()
    );
    for note in &r.notes {
        eprintln!("note: {note}");
    }
    if r.method == Method::Bootstrap && a.replicates.is_none() {
        eprintln!("note: {DEFAULT_REPLICATES} replicates (the default)");
    }
    Ok(())
}
