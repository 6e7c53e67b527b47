//! `microtab split`: a dataset cut into parts by records, under a catalog
//! directory that queries name as one (docs/DISTRIBUTED.md).

use crate::common::open;
use anyhow::Result;
use std::path::{Path, PathBuf};

/// Arguments of `split`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// Dataset directory.
    dataset: PathBuf,
    /// Catalog directory to create: the parts (part-001.mtab …) and
    /// catalog.json; `microtab tab OUT …` answers over all of them.
    out: PathBuf,
    /// Number of parts (of about equal records; with a Taylor design cut
    /// where the stratum changes).
    #[arg(long)]
    parts: usize,
    /// Replace an existing catalog (or dataset) at OUT.
    #[arg(long)]
    force: bool,
    /// Write the parts without a Taylor design that cannot go to them
    /// (strata not runs of records): their queries are then unweighted
    /// unless they name --weight.
    #[arg(long)]
    no_design: bool,
}

/// Splits the dataset.
pub fn run(a: Args) -> Result<()> {
    let ds = open(&a.dataset)?;
    split_into(&ds, &a.out, a.parts, (a.force, a.no_design))
}

/// Splits `ds` into `parts` under `out`, and says what was written.
pub fn split_into(
    ds: &microtab_store::Dataset,
    out: &Path,
    parts: usize,
    (force, no_design): (bool, bool),
) -> Result<()> {
    let t = std::time::Instant::now();
    let busy = crate::progress::busy(format!("splitting into {}", out.display()));
    let r = microtab_analysis::split(ds, out, parts, force, no_design)?;
    drop(busy);
    let c = &r.catalog;
    let sizes: Vec<u64> = c.parts.iter().map(|p| p.rows).collect();
    eprintln!(
        "wrote {} part(s) of {}–{} records ({} in all) to {} in {:.2} s{}",
        c.parts.len(),
        sizes.iter().min().unwrap_or(&0),
        sizes.iter().max().unwrap_or(&0),
        c.rows,
        out.display(),
        t.elapsed().as_secs_f64(),
        c.design
            .as_ref()
            .map_or(String::new(), |d| format!("; {d}"))
    );
    Ok(())
}
