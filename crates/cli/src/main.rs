//! The `microtab` command line: a thin layer that parses arguments, calls
//! the library crates and renders their results.

mod advice;
mod cmd;
mod common;
mod hint;
#[cfg(target_os = "linux")]
mod libm_shim;
mod progress;
mod render;
mod settings;

use clap::{CommandFactory, Parser, Subcommand};

/// A refused allocation ends the command with a message and exit status 1,
/// not an abort (the large buffers are allocated fallibly before that).
#[global_allocator]
static ALLOC: microtab_engine::ExitOnOutOfMemory = microtab_engine::ExitOnOutOfMemory;

/// Fast weighted tabulation of survey and census microdata.
#[derive(Parser)]
#[command(name = "microtab", version, about, propagate_version = true)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Generate synthetic data (`gen census`).
    Gen(cmd::gen::Args),
    /// Import a CSV file, a fixed-width file with its DDI codebook, a Parquet file, a SAS transport (.xpt), Stata (.dta), SPSS (.sav, .zsav, .por) file or SAS data set (.sas7bdat), into a dataset.
    Import(cmd::import::Args),
    /// Write a dataset (some variables and records) as a Parquet file with its labels, missing codes and design, or as a Stata (.dta) or SPSS (.sav) file with its labels and missing values.
    Export(cmd::external::ExportArgs),
    /// Serve every dataset under a directory over HTTP (JSON API), read-only.
    Serve(cmd::external::ServeArgs),
    /// Show a dataset's size and variables.
    Info(cmd::info::Args),
    /// Describe variables: type, range, missing values, top values.
    Codebook(cmd::codebook::Args),
    /// Frequency table of one variable.
    Freq(cmd::freq::Args),
    /// Crosstab of two variables, optionally per control category.
    Tab(cmd::tab::Args),
    /// Means and standard deviations by group.
    Means(cmd::means::Args),
    /// A regression model (linear, logit, probit, Poisson) with
    /// design-based standard errors, from an R-style formula.
    Regress(cmd::regress::Args),
    /// The ratio of two totals (income per person), per group, with its
    /// design-based standard error.
    Ratio(cmd::ratio::Args),
    /// Weighted correlations of two or more variables with design-based
    /// standard errors.
    Corr(cmd::corr::Args),
    /// Set or clear a variable's user-missing codes.
    Missing(cmd::missing::Args),
    /// Set value labels and the variable label of a variable, or the dataset's title and description.
    Label(cmd::label::Args),
    /// Set, show or clear the survey design (weight, replicate weights) every query uses.
    Design(cmd::design::Args),
    /// List the values of individual records (filtered, capped).
    List(cmd::list::Args),
    /// Write chosen records and variables as a new dataset, or a CSV with Stata/SPSS/SAS/R setup files.
    Subset(cmd::subset::Args),
    /// Cut a dataset into parts by records, under a catalog directory queries name as one.
    Split(cmd::split::Args),
    /// Build replicate weights (jk1, jkn, brr, fay, bootstrap, sdr) from the dataset's strata and PSUs, and set the replicate design that uses them.
    Replicate(cmd::replicate::Args),
    /// Add a variable computed from an expression (`compute DS NEW = AGE >= 18`).
    Compute(cmd::derive::ComputeArgs),
    /// Add a variable recoded from one to six others by rules (`recode DS AGE3 --from AGE '0-17; 18-64; 65-*'`).
    Recode(cmd::derive::RecodeArgs),
    /// Make a weight: post-stratify, rake or calibrate a weight (and its replicate weights) to population totals, or trim it.
    Weight(cmd::weight::Args),
    /// Rename a variable.
    Rename(cmd::vars::RenameArgs),
    /// Remove variables.
    Drop(cmd::vars::DropArgs),
    /// Check every file of a dataset against its checksums.
    Verify(cmd::verify::Args),
    /// Measure this machine's best read settings and save them.
    Tune(cmd::tune::Args),
    /// Re-run the classic I/O studies on this machine (buffer sizes, cold/warm, overlap).
    Iobench(cmd::iobench::Args),
}

fn main() {
    let cli = Cli::try_parse().unwrap_or_else(|e| advice::clap_error(e, &Cli::command()).exit());
    let result = match cli.command {
        Command::Gen(a) => cmd::gen::run(a),
        Command::Import(a) => cmd::import::run(a),
        Command::Export(a) => cmd::external::export(a),
        Command::Serve(a) => cmd::external::serve(a),
        Command::Info(a) => cmd::info::run(a),
        Command::Codebook(a) => cmd::codebook::run(a),
        Command::Freq(a) => cmd::freq::run(a),
        Command::Tab(a) => cmd::tab::run(a),
        Command::Means(a) => cmd::means::run(a),
        Command::Regress(a) => cmd::regress::run(a),
        Command::Ratio(a) => cmd::ratio::run(a),
        Command::Corr(a) => cmd::corr::run(a),
        Command::Missing(a) => cmd::missing::run(a),
        Command::Label(a) => cmd::label::run(a),
        Command::Design(a) => cmd::design::run(a),
        Command::List(a) => cmd::list::run(a),
        Command::Subset(a) => cmd::subset::run(a),
        Command::Split(a) => cmd::split::run(a),
        Command::Replicate(a) => cmd::replicate::run(a),
        Command::Compute(a) => cmd::derive::compute(a),
        Command::Recode(a) => cmd::derive::recode(a),
        Command::Weight(a) => cmd::weight::run(a),
        Command::Rename(a) => cmd::vars::rename(a),
        Command::Drop(a) => cmd::vars::drop(a),
        Command::Verify(a) => cmd::verify::run(a),
        Command::Tune(a) => cmd::tune::run(a),
        Command::Iobench(a) => cmd::iobench::run(a),
    };
    if let Err(e) = result {
        // A closed pipe (`microtab freq … | head`) is not an error.
        if e.chain().any(|c| {
            c.downcast_ref::<std::io::Error>()
                .is_some_and(|io| io.kind() == std::io::ErrorKind::BrokenPipe)
        }) {
            std::process::exit(0);
        }
        let mut message = hint::with_hint(&format!("{e:#}"), remedy(&e).as_ref());
        let args: Vec<String> = std::env::args().skip(2).collect();
        for more in [
            advice::all_variables(&e),
            advice::about_names(&e)
                .then(|| advice::quoting(&args, &common::opened_variables()))
                .flatten(),
        ]
        .into_iter()
        .flatten()
        {
            message = format!("{message}; {more}");
        }
        eprintln!("error: {}", one_line(&message));
        std::process::exit(1);
    }
}

/// What would help with `e`: the remedy of the first error in its chain
/// that has one (the libraries' error types; each words no flag itself).
fn remedy(e: &anyhow::Error) -> Option<microtab_store::Remedy> {
    use microtab_store::Remedied;
    e.chain().find_map(|c| {
        if let Some(x) = c.downcast_ref::<microtab_analysis::Error>() {
            x.remedy()
        } else if let Some(x) =
            c.downcast_ref::<microtab_analysis::weighting::replicate::ReplicateError>()
        {
            x.remedy()
        } else if let Some(x) = c.downcast_ref::<microtab_analysis::CatalogError>() {
            x.remedy()
        } else if let Some(x) = c.downcast_ref::<microtab_engine::Error>() {
            x.remedy()
        } else if let Some(x) = c.downcast_ref::<microtab_store::Error>() {
            x.remedy()
        } else if let Some(microtab_ingest::Error::Store(x)) = c.downcast_ref() {
            // (ingest's own remedies join here when its errors carry them)
            x.remedy()
        } else {
            None
        }
    })
}

/// An error message on one line: newlines become spaces, other control
/// characters (from damaged input quoted in the message) are escaped, so
/// that every error is exactly one line whatever the input held.
fn one_line(msg: &str) -> String {
    let mut out = String::with_capacity(msg.len());
    for c in msg.chars() {
        match c {
            '\n' => out.push(' '),
            '\t' => out.push(c),
            c if c.is_control() || matches!(c, '\u{2028}' | '\u{2029}') => {
                out.extend(c.escape_default())
            }
            c => out.push(c),
        }
    }
    out
}
