//! Arguments and helpers shared by the analysis commands.

use anyhow::{bail, Context, Result};
use clap::ValueEnum;
use microtab_engine::{parse_filter, weight_cases, Cube, Query, WeightCases};
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
    /// Most cells a result may have (the table is refused, with the memory
    /// it would need, when larger).
    #[arg(long, value_name = "N", default_value_t = microtab_engine::DEFAULT_MAX_CELLS)]
    pub max_cells: usize,
    /// Accept negative weights (replicate weights can be negative);
    /// otherwise a weight that is negative in any row used is an error.
    #[arg(long)]
    pub allow_negative_weights: bool,
    /// Before answering, read the whole files of every variable the query
    /// uses and check them against their checksums (queries always check
    /// the data they read; this also checks the rest of those files).
    #[arg(long)]
    pub verify: bool,
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
            max_cells: Some(self.max_cells),
        })
    }
}

/// Opens a dataset with a message naming it. `MICROTAB_CHECKSUMS=off`
/// turns off the checksum checks of the data queries read (only to measure
/// what they cost: docs/RELIABILITY.md).
pub fn open(path: &Path) -> Result<Dataset> {
    let mut ds =
        Dataset::open(path).with_context(|| format!("cannot open dataset {}", path.display()))?;
    if std::env::var("MICROTAB_CHECKSUMS").is_ok_and(|v| v == "off") {
        ds.set_checked_reads(false);
    }
    Ok(ds)
}

/// With `--verify`: checks the whole files of the variables `q` uses.
pub fn verify_query(ds: &Dataset, q: &Query, verify: bool) -> Result<()> {
    if !verify {
        return Ok(());
    }
    let names = q
        .group_by
        .iter()
        .chain(q.filter.iter().map(|t| &t.var))
        .chain(q.weight.iter())
        .chain(q.measure.iter());
    for n in names {
        let var = ds.variable(n)?;
        ds.column(n)?.verify()?;
        if var.dictionary.is_some() {
            ds.dictionary(var)?;
        }
    }
    Ok(())
}

/// A query's result and what its weight did with the rows it selected.
pub struct Answer {
    /// The cube.
    pub cube: Cube,
    /// Rows with a negative, zero or missing weight (weighted queries).
    pub weights: Option<WeightCases>,
}

/// Runs `q` `repeat` times; prints timings on stderr when repeating.
/// A weighted query also counts the rows whose weight is negative, zero
/// or missing (a scan each, only when the weight's range or missing
/// values allow them); negative weights are an error unless allowed.
pub fn run_timed(ds: &Dataset, q: &Query, args: &QueryArgs) -> Result<Answer> {
    let repeat = args.repeat;
    verify_query(ds, q, args.verify)?;
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
    let cube = cube.expect("ran at least once");
    let counted = cube.counts.iter().sum();
    let weights = weight_cases(ds, q, &settings.scan, counted)?;
    if let (Some(w), Some(name)) = (&weights, &q.weight) {
        if w.negative > 0 && !args.allow_negative_weights {
            bail!(
                "the weight {name} is negative in {} of the rows this query uses; weighted results with negative weights are not estimates of a population (replicate weights can be: give --allow-negative-weights to use them)",
                w.negative
            );
        }
    }
    Ok(Answer { cube, weights })
}

/// The JSON of what the weight did (`null` when unweighted).
pub fn weight_cases_json(w: &Option<WeightCases>) -> serde_json::Value {
    match w {
        Some(w) => {
            serde_json::json!({"negative": w.negative, "zero": w.zero, "missing": w.missing})
        }
        None => serde_json::Value::Null,
    }
}

/// A line under a text table saying which rows the weight left out or
/// counted without weight (empty when every row had a positive weight).
pub fn weight_note(w: &Option<WeightCases>, name: Option<&str>) -> String {
    let (Some(w), Some(name)) = (w, name) else {
        return String::new();
    };
    let mut parts = Vec::new();
    if w.missing > 0 {
        parts.push(format!(
            "{} rows with missing {name} are left out",
            crate::render::group_digits(w.missing)
        ));
    }
    if w.zero > 0 {
        parts.push(format!(
            "{} rows with {name} = 0 are in N but add nothing",
            crate::render::group_digits(w.zero)
        ));
    }
    if w.negative > 0 {
        parts.push(format!(
            "{} rows have a negative {name}",
            crate::render::group_digits(w.negative)
        ));
    }
    if parts.is_empty() {
        String::new()
    } else {
        format!("({})\n", parts.join("; "))
    }
}

/// Writes `text` to stdout in one call.
pub fn emit(text: &str) -> Result<()> {
    let mut out = std::io::stdout().lock();
    out.write_all(text.as_bytes())?;
    out.flush()?;
    Ok(())
}
