//! `microtab import`: CSV → dataset.

use anyhow::{anyhow, bail, Result};
use microtab_ingest::{import_csv, CsvOptions, TypeHint};
use std::io::IsTerminal;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Instant;

/// Arguments of `import`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// Input CSV file (header line first).
    input: PathBuf,
    /// Dataset directory to create (e.g. census.mtab).
    output: PathBuf,
    /// Field delimiter: one character, or "tab".
    #[arg(long, short = 'd', default_value = ",")]
    delimiter: String,
    /// Replace an existing dataset at OUTPUT (atomically).
    #[arg(long)]
    force: bool,
    /// Force a column's type: VAR=int|float|string (repeatable).
    #[arg(long = "type", value_name = "VAR=TYPE")]
    types: Vec<String>,
    /// Declare user-missing codes: VAR=CODE[,CODE…] (repeatable).
    #[arg(long, value_name = "VAR=CODES")]
    missing: Vec<String>,
}

fn delimiter(s: &str) -> Result<u8> {
    match s {
        "tab" | "\\t" | "\t" => Ok(b'\t'),
        s if s.len() == 1 && s.is_ascii() && s != "\"" && s != "\n" => Ok(s.as_bytes()[0]),
        _ => bail!("--delimiter must be one ASCII character or 'tab', got '{s}'"),
    }
}

/// Runs the import, with a progress bar when stderr is a terminal.
pub fn run(a: Args) -> Result<()> {
    let mut opts = CsvOptions {
        delimiter: delimiter(&a.delimiter)?,
        ..CsvOptions::default()
    };
    for t in &a.types {
        let (n, ty) = t
            .split_once('=')
            .ok_or_else(|| anyhow!("--type expects VAR=int|float|string, got '{t}'"))?;
        let hint = match ty.to_ascii_lowercase().as_str() {
            "int" | "integer" => TypeHint::Int,
            "float" | "double" => TypeHint::Float,
            "string" | "str" | "text" => TypeHint::String,
            _ => bail!("--type {n}: expected int, float or string, got '{ty}'"),
        };
        opts.types.push((n.to_string(), hint));
    }
    for m in &a.missing {
        let (n, codes) = m
            .split_once('=')
            .ok_or_else(|| anyhow!("--missing expects VAR=CODE[,CODE…], got '{m}'"))?;
        let codes = codes
            .split(',')
            .map(|c| {
                c.trim()
                    .parse::<f64>()
                    .map_err(|_| anyhow!("--missing {n}: '{c}' is not a number"))
            })
            .collect::<Result<Vec<_>>>()?;
        opts.missing.push((n.to_string(), codes));
    }
    let bar = if std::io::stderr().is_terminal() {
        let total = std::fs::metadata(&a.input).map(|m| m.len()).unwrap_or(0);
        let pb = indicatif::ProgressBar::new(total);
        pb.set_style(
            indicatif::ProgressStyle::with_template(
                "{spinner} importing [{bar:40}] {bytes}/{total_bytes} ({bytes_per_sec}, {eta})",
            )
            .unwrap()
            .progress_chars("=> "),
        );
        let p = pb.clone();
        opts.progress = Some(Arc::new(move |done, _| p.set_position(done)));
        Some(pb)
    } else {
        None
    };
    let t = Instant::now();
    let r = import_csv(&a.input, &a.output, a.force, &opts);
    if let Some(pb) = bar {
        pb.finish_and_clear();
    }
    let s = r?;
    let secs = t.elapsed().as_secs_f64();
    eprintln!(
        "imported {} records x {} variables from {} ({:.1} MB) in {:.2} s ({:.0} MB/s) into {} ({:.1} MB)",
        s.rows,
        s.variables,
        a.input.display(),
        s.bytes_in as f64 / 1e6,
        secs,
        s.bytes_in as f64 / 1e6 / secs.max(1e-9),
        s.path.display(),
        s.bytes_out as f64 / 1e6
    );
    Ok(())
}
