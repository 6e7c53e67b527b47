//! `microtab rename` and `microtab drop`: rename or remove variables. A
//! metadata-only, atomic change of the manifest (writers excluded; readers
//! keep the snapshot they opened): column files are not rewritten, and a
//! dropped variable's files stay on disk, unused, until the dataset is
//! imported again.

use crate::common::open;
use anyhow::{bail, Result};
use std::path::PathBuf;

/// Arguments of `rename`.
#[derive(clap::Args, Debug)]
pub struct RenameArgs {
    /// Dataset directory.
    dataset: PathBuf,
    /// The variable.
    old: String,
    /// Its new name.
    new: String,
}

/// Arguments of `drop`.
#[derive(clap::Args, Debug)]
pub struct DropArgs {
    /// Dataset directory.
    dataset: PathBuf,
    /// The variables to remove.
    #[arg(required = true)]
    vars: Vec<String>,
}

/// Renames a variable (its labels, missing codes and the design's use of
/// it follow).
pub fn rename(a: RenameArgs) -> Result<()> {
    let mut ds = open(&a.dataset)?;
    let (old, new) = microtab_analysis::edit::rename(&mut ds, &a.old, &a.new)?;
    eprintln!("{}: {old} renamed {new}", a.dataset.display());
    Ok(())
}

/// Removes variables (refused for one the survey design uses).
pub fn drop(a: DropArgs) -> Result<()> {
    let mut ds = open(&a.dataset)?;
    let names = match microtab_analysis::edit::drop_variables(&mut ds, &a.vars) {
        Err(microtab_analysis::Error::InDesign { variable }) => bail!(
            "{variable} is part of the survey design: change or clear the design first (`microtab design … --clear`)"
        ),
        r => r?,
    };
    eprintln!("{}: dropped {}", a.dataset.display(), names.join(" "));
    Ok(())
}
