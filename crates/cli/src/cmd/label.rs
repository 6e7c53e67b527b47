//! `microtab label`: set value labels and the variable label of one
//! variable (for CSV imports, which have no codebook). A metadata-only,
//! atomic change of the manifest: column files are untouched.

use crate::common::open;
use anyhow::{anyhow, bail, Result};
use std::path::PathBuf;

/// Arguments of `label`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// Dataset directory.
    dataset: PathBuf,
    /// Variable to label.
    var: String,
    /// Value labels VALUE=LABEL (`1=Male 2=Female`); `VALUE=` removes one.
    #[arg(value_name = "VALUE=LABEL")]
    labels: Vec<String>,
    /// Set the variable label ("" removes it).
    #[arg(long, value_name = "TEXT")]
    var_label: Option<String>,
    /// Remove all value labels first.
    #[arg(long)]
    clear: bool,
}

/// Applies the labels.
pub fn run(a: Args) -> Result<()> {
    if a.labels.is_empty() && a.var_label.is_none() && !a.clear {
        bail!("nothing to do: give VALUE=LABEL pairs, --var-label TEXT or --clear");
    }
    let mut ds = open(&a.dataset)?;
    ds.variable(&a.var)?;
    let mut set: Vec<(String, Option<String>)> = Vec::new();
    for pair in &a.labels {
        let (v, l) = pair
            .split_once('=')
            .ok_or_else(|| anyhow!("expected VALUE=LABEL, got '{pair}'"))?;
        set.push((v.to_string(), (!l.is_empty()).then(|| l.to_string())));
    }
    let v = microtab_analysis::edit::set_labels(
        &mut ds,
        &a.var,
        &set,
        a.var_label.as_deref(),
        a.clear,
    )?;
    eprintln!(
        "{}: {} value label{}{}",
        v.name,
        v.value_labels.len(),
        if v.value_labels.len() == 1 { "" } else { "s" },
        v.label
            .as_deref()
            .map(|l| format!(", variable label \"{l}\""))
            .unwrap_or_default()
    );
    Ok(())
}
