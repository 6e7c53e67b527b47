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
    let old = ds.variable(&a.old)?.name.clone();
    let new = a.new.trim().to_string();
    microtab_engine::check_name(&new)?;
    if let Ok(v) = ds.variable(&new) {
        if v.name != old {
            bail!("{} already has a variable {}", a.dataset.display(), v.name);
        }
    }
    ds.update_manifest(|m| {
        for v in m.variables.iter_mut().filter(|v| v.name == old) {
            v.name = new.clone();
        }
        if let Some(d) = m.design.as_mut() {
            let fix = |s: &mut String| {
                if *s == old {
                    *s = new.clone();
                }
            };
            fix(&mut d.weight);
            if let Some(r) = d.replicates.as_mut() {
                r.weights.iter_mut().for_each(fix);
            }
            if let Some(t) = d.taylor.as_mut() {
                t.strata
                    .iter_mut()
                    .chain(&mut t.cluster)
                    .chain(&mut t.fpc)
                    .for_each(fix);
            }
        }
    })?;
    eprintln!("{}: {old} renamed {new}", a.dataset.display());
    Ok(())
}

/// Removes variables (refused for one the survey design uses).
pub fn drop(a: DropArgs) -> Result<()> {
    let mut ds = open(&a.dataset)?;
    let mut names = Vec::new();
    for n in &a.vars {
        let name = ds.variable(n)?.name.clone();
        if let Some(d) = &ds.manifest().design {
            if d.variables().contains(&&name) {
                bail!(
                    "{name} is part of the survey design: change or clear the design first (`microtab design … --clear`)"
                );
            }
        }
        if !names.contains(&name) {
            names.push(name);
        }
    }
    if names.len() == ds.manifest().variables.len() {
        bail!("that would drop every variable of {}", a.dataset.display());
    }
    ds.update_manifest(|m| m.variables.retain(|v| !names.contains(&v.name)))?;
    eprintln!("{}: dropped {}", a.dataset.display(), names.join(" "));
    Ok(())
}
