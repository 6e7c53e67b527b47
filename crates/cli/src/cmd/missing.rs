//! `microtab missing`: set or clear a variable's user-missing codes (e.g.
//! IPUMS's `99999999` "N.I.U." that a codebook only mentions in prose). A
//! metadata-only, atomic change of the manifest: column files are untouched.

use crate::common::open;
use anyhow::Result;
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
    let name = ds.variable(&a.var)?.name.clone();
    let shown = microtab_analysis::edit::set_missing(&mut ds, &name, &a.codes)?;
    if shown.is_empty() {
        eprintln!("{name}: no missing codes");
    } else {
        eprintln!("{name}: missing codes {}", shown.join(" "));
    }
    Ok(())
}
