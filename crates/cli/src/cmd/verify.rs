//! `microtab verify`: reads every file of a dataset whole and checks it
//! against its checksums (the manifest's own, each column file's header,
//! size, stripe table, stripes and payload, each dictionary). Exit code 0
//! when the dataset is intact, 1 with one line per damaged file otherwise.

use crate::common::{emit, Format};
use anyhow::{bail, Context, Result};
use microtab_store::Dataset;
use serde_json::json;
use std::path::PathBuf;
use std::time::Instant;

/// Arguments of `verify`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// Dataset directory.
    dataset: PathBuf,
    /// Output format.
    #[arg(long, value_enum, default_value_t = Format::Table)]
    format: Format,
}

/// Checks and reports.
pub fn run(a: Args) -> Result<()> {
    let t = Instant::now();
    // A damaged manifest is itself the finding.
    let ds = Dataset::open(&a.dataset)
        .with_context(|| format!("{}: damaged or not a dataset", a.dataset.display()))?;
    let m = ds.manifest();
    let busy = crate::progress::busy(format!("checking {}", a.dataset.display()));
    let problems = ds.verify_all();
    drop(busy);
    let bytes: u64 = m
        .variables
        .iter()
        .map(|v| {
            std::fs::metadata(ds.dir().join(&v.file))
                .map(|f| f.len())
                .unwrap_or(0)
        })
        .sum();
    let secs = t.elapsed().as_secs_f64();
    let msgs: Vec<String> = problems.iter().map(|e| e.to_string()).collect();
    match a.format {
        Format::Json => emit(
            &(serde_json::to_string(&json!({
                "dataset": a.dataset.display().to_string(),
                "ok": msgs.is_empty(),
                "variables": m.variables.len(),
                "rows": m.rows,
                "bytes": bytes,
                "seconds": secs,
                "problems": msgs,
            }))? + "\n"),
        )?,
        _ => {
            if msgs.is_empty() {
                eprintln!(
                    "{}: ok — {} variables, {} rows, {:.1} MB checked in {:.2} s",
                    a.dataset.display(),
                    m.variables.len(),
                    m.rows,
                    bytes as f64 / 1e6,
                    secs
                );
            }
        }
    }
    if !msgs.is_empty() {
        if a.format != Format::Json {
            for p in &msgs[1..] {
                eprintln!("error: {p}");
            }
        }
        bail!(
            "{}{}",
            msgs[0],
            if msgs.len() > 1 {
                format!(" ({} damaged files in all)", msgs.len())
            } else {
                String::new()
            }
        );
    }
    Ok(())
}
