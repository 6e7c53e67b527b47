//! `microtab missing`: set or clear a variable's user-missing codes (e.g.
//! IPUMS's `99999999` "N.I.U." that a codebook only mentions in prose). A
//! metadata-only, atomic change of the manifest: column files are untouched.

use crate::cmd::label::parse_value;
use crate::common::open;
use anyhow::{bail, Result};
use std::path::PathBuf;

/// Arguments of `missing`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// Dataset directory.
    dataset: PathBuf,
    /// Variable.
    var: String,
    /// The codes, in displayed units (`9999999`, `99.5`, or a string
    /// value); they replace the variable's current missing codes.
    #[arg(
        value_name = "CODE",
        required_unless_present = "clear",
        allow_negative_numbers = true
    )]
    codes: Vec<String>,
    /// Remove all missing codes (with CODEs: replace them, the default).
    #[arg(long)]
    clear: bool,
}

/// Sets the codes.
pub fn run(a: Args) -> Result<()> {
    let mut ds = open(&a.dataset)?;
    let var = ds.variable(&a.var)?.clone();
    let mut codes: Vec<f64> = Vec::new();
    let mut shown: Vec<String> = Vec::new();
    for c in &a.codes {
        let (stored, text) = parse_value(&ds, &var, c)?;
        let Some(stored) = stored else {
            bail!(
                "'{c}' does not occur in {}, so it cannot be a missing code",
                var.name
            );
        };
        if !codes.contains(&stored) {
            codes.push(stored);
            shown.push(text);
        }
    }
    let name = var.name.clone();
    ds.update_variable(&name, |v| {
        v.missing_codes = codes;
    })?;
    if shown.is_empty() {
        eprintln!("{name}: no missing codes");
    } else {
        eprintln!("{name}: missing codes {}", shown.join(" "));
    }
    Ok(())
}
