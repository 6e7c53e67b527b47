//! `microtab-arrow`: Parquet export and import for microtab datasets. The
//! main executable runs it for `microtab export` and for `microtab import`
//! of a `.parquet` file, so that arrow-rs and parquet stay out of its
//! start-up; it can also be run directly.

/// The command line's words for a remedy, shared with `microtab`.
#[path = "../../cli/src/hint.rs"]
#[allow(dead_code)]
mod hint;

use anyhow::{bail, Context, Result};
use clap::{Parser, Subcommand};
use microtab_arrow::{import_parquet, write_parquet, Compression, ExportOptions, ImportOptions};
use std::path::PathBuf;
use std::time::Instant;

/// A refused allocation ends the command with a message and exit status 1,
/// not an abort (the large buffers are allocated fallibly before that).
#[global_allocator]
static ALLOC: microtab_engine::ExitOnOutOfMemory = microtab_engine::ExitOnOutOfMemory;

#[derive(Parser)]
#[command(
    name = "microtab-arrow",
    version,
    about = "Parquet export and import for microtab datasets"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Write a dataset (some variables, some records) as a Parquet file,
    /// with labels, missing codes and the design in its metadata.
    Export(ExportArgs),
    /// Read a Parquet file into a new dataset.
    Import(ImportArgs),
}

/// Arguments of `export`.
#[derive(clap::Args)]
struct ExportArgs {
    /// Dataset directory.
    dataset: PathBuf,
    /// The Parquet file to write (replaced only with --force).
    output: PathBuf,
    /// Variables to export, separated by commas or spaces, or repeated
    /// (default: all); a name with spaces or commas as one argument.
    #[arg(long = "vars", num_args = 1..)]
    vars: Vec<String>,
    /// Only the records that pass this filter (e.g. 'AGE(25-64) SEX(2)').
    #[arg(long)]
    filter: Option<String>,
    /// Labelled variables as their value labels (dictionary-encoded text)
    /// instead of their codes (without it: the codes, the labels in the
    /// file's metadata). Not the --labels of a Stata or SPSS export, which
    /// keeps the codes and writes label sets (`microtab export DS OUT.dta
    /// --help`).
    #[arg(long)]
    labels: bool,
    /// Keep user-missing codes (9999999) as values instead of nulls; the
    /// codes are listed in the file's metadata.
    #[arg(long)]
    keep_missing_codes: bool,
    /// Implied decimals as exact DECIMAL(p,s) instead of DOUBLE.
    #[arg(long)]
    exact_decimals: bool,
    /// snappy (default), zstd, lz4, gzip or none.
    #[arg(long, default_value = "snappy")]
    compression: String,
    /// Records per row group.
    #[arg(long, default_value_t = 1 << 20)]
    row_group_rows: usize,
    /// Replace an existing file.
    #[arg(long)]
    force: bool,
}

/// Arguments of `import`.
#[derive(clap::Args)]
struct ImportArgs {
    /// The Parquet file.
    input: PathBuf,
    /// Dataset directory to create.
    output: PathBuf,
    /// A DDI codebook for labels, missing codes and implied decimals (an
    /// IPUMS extract converted to Parquet by ipumspy).
    #[arg(long, value_name = "FILE")]
    ddi: Option<PathBuf>,
    /// Store every variable as a plain array (no bit-packing).
    #[arg(long)]
    plain: bool,
    /// Replace an existing dataset (atomically).
    #[arg(long)]
    force: bool,
    /// The dataset the user named, when OUTPUT is a staging dataset
    /// beside it (`microtab import --vars`, `--filter`, `--parts`): the
    /// report and errors name it.
    #[arg(long, hide = true, value_name = "DATASET")]
    shown: Option<PathBuf>,
}

fn export(a: ExportArgs) -> Result<()> {
    let ds = microtab_store::Dataset::open(&a.dataset)?;
    let compression: Compression = a.compression.parse().map_err(anyhow::Error::msg)?;
    if a.row_group_rows == 0 {
        bail!("--row-group-rows must be at least 1");
    }
    let opts = ExportOptions {
        columns: (!a.vars.is_empty()).then(|| microtab_engine::var_names(&ds, &a.vars)),
        filter: a.filter.clone(),
        labels: a.labels,
        keep_missing_codes: a.keep_missing_codes,
        exact_decimals: a.exact_decimals,
        batch_rows: a.row_group_rows,
        selection: None,
    };
    let t = Instant::now();
    let s = write_parquet(&ds, &a.output, a.force, &opts, compression)?;
    if let Some(n) = &s.design_note {
        eprintln!("note: {n}");
    }
    eprintln!(
        "{}: {} records × {} variables, {:.1} MB in {:.2} s",
        s.path.display(),
        s.rows,
        s.variables,
        s.bytes as f64 / 1e6,
        t.elapsed().as_secs_f64()
    );
    Ok(())
}

fn import(a: ImportArgs) -> Result<()> {
    let codebook = match &a.ddi {
        Some(p) => Some(microtab_ingest::Codebook::read(p)?),
        None => None,
    };
    let opts = ImportOptions {
        codebook,
        plain: a.plain,
    };
    let t = Instant::now();
    let shown = |text: &str| match &a.shown {
        Some(d) => text.replace(&a.output.display().to_string(), &d.display().to_string()),
        None => text.to_string(),
    };
    let s = import_parquet(&a.input, &a.output, a.force, &opts)
        .with_context(|| format!("importing {}", a.input.display()))?;
    for n in &s.notes {
        eprintln!("note: {}", shown(&n.to_string()));
    }
    eprintln!(
        "{}: {} records × {} variables in {:.2} s",
        a.shown.as_ref().unwrap_or(&s.path).display(),
        s.rows,
        s.variables,
        t.elapsed().as_secs_f64()
    );
    Ok(())
}

fn main() {
    let cli = Cli::parse();
    // Errors name the dataset the user named, not its staging dataset.
    let renamed = match &cli.command {
        Command::Import(a) => a
            .shown
            .as_ref()
            .map(|shown| (a.output.display().to_string(), shown.display().to_string())),
        Command::Export(_) => None,
    };
    let r = match cli.command {
        Command::Export(a) => export(a),
        Command::Import(a) => import(a),
    };
    if let Err(e) = r {
        use microtab_store::Remedied;
        let remedy = e.chain().find_map(|c| {
            c.downcast_ref::<microtab_arrow::Error>()
                .and_then(|x| x.remedy())
                .or_else(|| c.downcast_ref::<microtab_store::Error>()?.remedy())
        });
        let mut text = hint::with_hint(&format!("{e:#}"), remedy.as_ref());
        if let Some((staging, shown)) = &renamed {
            text = text.replace(staging, shown);
        }
        eprintln!("error: {text}");
        std::process::exit(1);
    }
}
