//! `microtab label`: set value labels and the variable label of one
//! variable (for CSV imports, which have no codebook). A metadata-only,
//! atomic change of the manifest: column files are untouched.

use crate::common::open;
use anyhow::{anyhow, bail, Result};
use microtab_store::{codec, Dataset, Kind, Variable};
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

/// A value of `var` as typed by a user (`"01"`, `"1.5"`, `"Ohio"`), as
/// (stored value, displayed text). The stored value is `None` for a string
/// that does not occur in the data (it can still carry a label).
pub fn parse_value(ds: &Dataset, var: &Variable, text: &str) -> Result<(Option<f64>, String)> {
    let dict = if var.kind == Kind::String {
        ds.dictionary(var)?
    } else {
        Vec::new()
    };
    let code = codec::stored_code(var, &dict, text)?;
    let shown = match (var.kind, code) {
        (Kind::String, _) | (_, None) => text.to_string(),
        (_, Some(c)) => codec::display_code(var, c),
    };
    Ok((code, shown))
}

/// Applies the labels.
pub fn run(a: Args) -> Result<()> {
    if a.labels.is_empty() && a.var_label.is_none() && !a.clear {
        bail!("nothing to do: give VALUE=LABEL pairs, --var-label TEXT or --clear");
    }
    let mut ds = open(&a.dataset)?;
    let var = ds.variable(&a.var)?.clone();
    let mut set: Vec<(String, Option<String>)> = Vec::new();
    for pair in &a.labels {
        let (v, l) = pair
            .split_once('=')
            .ok_or_else(|| anyhow!("expected VALUE=LABEL, got '{pair}'"))?;
        let (_, key) = parse_value(&ds, &var, v)?;
        set.push((key, (!l.is_empty()).then(|| l.to_string())));
    }
    let name = var.name.clone();
    ds.update_variable(&name, |v| {
        if a.clear {
            v.value_labels.clear();
        }
        for (key, label) in set {
            match label {
                Some(l) => v.value_labels.insert(key, l),
                None => v.value_labels.remove(&key),
            };
        }
        if let Some(l) = &a.var_label {
            v.label = (!l.is_empty()).then(|| l.clone());
        }
    })?;
    let v = ds.variable(&name)?;
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
