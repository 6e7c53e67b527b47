//! Arguments and helpers shared by the analysis commands.

use anyhow::{Context, Result};
use clap::ValueEnum;
use microtab_engine::{parse_filter, Cube, Query};
use microtab_store::Dataset;
use std::io::Write;
use std::path::Path;
use std::time::{Duration, Instant};

/// Output format.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum, Default)]
pub enum Format {
    /// Aligned table for people.
    #[default]
    Table,
    /// Comma-separated values.
    Csv,
    /// JSON.
    Json,
}

/// Options every tabulating command takes.
#[derive(clap::Args, Debug, Clone)]
pub struct QueryArgs {
    /// Weight variable.
    #[arg(long, short = 'w')]
    pub weight: Option<String>,
    /// SDA-style filter, e.g. "AGE(25-64) SEX(2) INCTOT<9999999".
    #[arg(long, short = 'f')]
    pub filter: Option<String>,
    /// Output format.
    #[arg(long, value_enum, default_value_t = Format::Table)]
    pub format: Format,
    /// Run the query N times and print median/min/max time on stderr.
    #[arg(long, default_value_t = 1, value_name = "N")]
    pub repeat: usize,
}

impl QueryArgs {
    /// Builds the engine query.
    pub fn query(&self, group_by: Vec<String>, include_missing: bool) -> Result<Query> {
        let filter = match &self.filter {
            Some(f) => parse_filter(f)?,
            None => Vec::new(),
        };
        Ok(Query {
            filter,
            group_by,
            weight: self.weight.clone(),
            measure: None,
            include_missing,
        })
    }
}

/// Opens a dataset with a message naming it.
pub fn open(path: &Path) -> Result<Dataset> {
    Dataset::open(path).with_context(|| format!("cannot open dataset {}", path.display()))
}

/// Runs `q` `repeat` times; prints timings on stderr when repeating.
pub fn run_timed(ds: &Dataset, q: &Query, repeat: usize) -> Result<Cube> {
    let settings = crate::settings::Settings::load()?;
    let mut times: Vec<Duration> = Vec::new();
    let mut cube = None;
    for _ in 0..repeat.max(1) {
        let t = Instant::now();
        cube = Some(microtab_engine::run_with(ds, q, &settings.scan)?);
        times.push(t.elapsed());
    }
    if repeat > 1 {
        times.sort();
        let ms = |d: Duration| d.as_secs_f64() * 1e3;
        eprintln!(
            "timing: runs={} median={:.3}ms min={:.3}ms max={:.3}ms",
            times.len(),
            ms(times[times.len() / 2]),
            ms(times[0]),
            ms(times[times.len() - 1])
        );
    }
    Ok(cube.expect("ran at least once"))
}

/// Writes `text` to stdout in one call.
pub fn emit(text: &str) -> Result<()> {
    let mut out = std::io::stdout().lock();
    out.write_all(text.as_bytes())?;
    out.flush()?;
    Ok(())
}
