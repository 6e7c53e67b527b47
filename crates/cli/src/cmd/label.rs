//! `microtab label`: set value labels and the variable label of one
//! variable (for CSV imports, which have no codebook), and the dataset's
//! title and description. A metadata-only, atomic change of the manifest:
//! column files are untouched.

use crate::common::open;
use anyhow::{anyhow, bail, Result};
use std::path::PathBuf;

/// Arguments of `label`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// Dataset directory.
    dataset: PathBuf,
    /// Variable to label (none: only --title/--description).
    var: Option<String>,
    /// Value labels VALUE=LABEL (`1=Male 2=Female`); `VALUE=` removes one.
    #[arg(value_name = "VALUE=LABEL")]
    labels: Vec<String>,
    /// Set the variable label ("" removes it).
    #[arg(long, value_name = "TEXT")]
    var_label: Option<String>,
    /// Remove all value labels first.
    #[arg(long)]
    clear: bool,
    /// Set the dataset's title ("" removes it; `info` and the analysis page show it).
    #[arg(long, value_name = "TEXT")]
    title: Option<String>,
    /// Set the dataset's description ("" removes it).
    #[arg(long, value_name = "TEXT")]
    description: Option<String>,
}

/// Applies the labels.
pub fn run(a: Args) -> Result<()> {
    let about = a.title.is_some() || a.description.is_some();
    let Some(var) = a.var.as_deref() else {
        if !about {
            bail!("nothing to do: give a variable and VALUE=LABEL pairs, --var-label TEXT or --clear, or give --title TEXT or --description TEXT");
        }
        return set_about(&a);
    };
    if a.labels.is_empty() && a.var_label.is_none() && !a.clear {
        if about {
            // `label DS --title T VAR`: nothing for the variable.
            bail!("nothing to do for variable {var}: give VALUE=LABEL pairs, --var-label TEXT or --clear (or leave the variable out to set only --title/--description)");
        }
        bail!("nothing to do: give VALUE=LABEL pairs, --var-label TEXT or --clear");
    }
    let mut ds = open(&a.dataset)?;
    ds.variable(var)?;
    let mut set: Vec<(String, Option<String>)> = Vec::new();
    for pair in &a.labels {
        let (v, l) = pair
            .split_once('=')
            .ok_or_else(|| anyhow!("expected VALUE=LABEL, got '{pair}'"))?;
        set.push((v.to_string(), (!l.is_empty()).then(|| l.to_string())));
    }
    let v =
        microtab_analysis::edit::set_labels(&mut ds, var, &set, a.var_label.as_deref(), a.clear)?;
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
    if about {
        set_about(&a)?;
    }
    Ok(())
}

/// Sets the dataset's title and description and says what they are now.
fn set_about(a: &Args) -> Result<()> {
    let mut ds = open(&a.dataset)?;
    let (title, description) =
        microtab_analysis::edit::set_about(&mut ds, a.title.as_deref(), a.description.as_deref())?;
    let said = |what: &str, t: Option<String>| match t {
        Some(t) => format!("{what} \"{t}\""),
        None => format!("no {what}"),
    };
    eprintln!(
        "{}: {}, {}",
        a.dataset.display(),
        said("title", title),
        said("description", description)
    );
    Ok(())
}
