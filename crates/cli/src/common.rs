//! Arguments and helpers shared by the analysis commands.

use anyhow::{Context, Result};
use clap::ValueEnum;
use microtab_analysis::{Analysis, Answer, Request, WeightCases};
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
    /// Ignore the dataset's survey design (`microtab design`): its weight
    /// is not applied unless given with --weight, and no standard errors
    /// are computed.
    #[arg(long)]
    pub no_design: bool,
    /// Confidence level of the intervals, in percent.
    #[arg(long, value_name = "PCT", default_value_t = 95.0,
          value_parser = parse_level)]
    pub level: f64,
    /// With a design, flag estimates resting on fewer records than this
    /// as unreliable.
    #[arg(long, value_name = "N", default_value_t = 30)]
    pub min_n: u64,
    /// With a design, flag estimates whose coefficient of variation is
    /// above this percentage as unreliable.
    #[arg(long, value_name = "PCT", default_value_t = 30.0, value_parser = parse_cv)]
    pub max_cv: f64,
    /// With a design, how percentages' intervals are formed: logit (R
    /// svyciprop "xlogit", Stata svy: tab) or korn-graubard (Clopper–Pearson
    /// on the effective sample size; R method "beta").
    #[arg(long, value_name = "HOW", default_value = "logit")]
    pub pct_ci: microtab_analysis::PctInterval,
}

/// A confidence level in percent, strictly between 0 and 100.
fn parse_level(s: &str) -> std::result::Result<f64, String> {
    match s.trim().trim_end_matches('%').parse::<f64>() {
        Ok(x) if x > 0.0 && x < 100.0 => Ok(x),
        _ => Err(format!(
            "expected a confidence level in percent between 0 and 100 (e.g. 95 or 90), found '{s}'"
        )),
    }
}

/// A coefficient of variation in percent, above 0.
fn parse_cv(s: &str) -> std::result::Result<f64, String> {
    match s.trim().trim_end_matches('%').parse::<f64>() {
        Ok(x) if x > 0.0 && x.is_finite() => Ok(x),
        _ => Err(format!(
            "expected a coefficient of variation in percent above 0 (e.g. 30), found '{s}'"
        )),
    }
}

impl QueryArgs {
    /// The analysis layer's request for `analysis` with these options.
    pub fn request(&self, analysis: Analysis, include_missing: bool) -> Request {
        Request {
            weight: self.weight.clone(),
            filter: self.filter.clone(),
            include_missing,
            max_cells: self.max_cells,
            allow_negative_weights: self.allow_negative_weights,
            verify: self.verify,
            use_design: !self.no_design,
            level: self.level / 100.0,
            min_n: self.min_n,
            max_cv: self.max_cv / 100.0,
            pct_interval: self.pct_ci,
            ..Request::new(analysis)
        }
    }
}

/// Opens a dataset with a message naming it. `MICROTAB_CHECKSUMS=off`
/// turns off the checksum checks of the data queries read (only to measure
/// what they cost: docs/RELIABILITY.md).
pub fn open(path: &Path) -> Result<Dataset> {
    if path.join(microtab_analysis::CATALOG).is_file() && !path.join("manifest.json").exists() {
        anyhow::bail!(
            "{} is a catalog of parts (microtab split): freq, tab, means, regress, ratio and corr answer over all of them; this command takes one dataset, such as one of its parts ({})",
            path.display(),
            path.join("part-001.mtab").display()
        );
    }
    let mut ds = Dataset::open(path).map_err(|e| match e {
        // It names the dataset already.
        e @ microtab_store::Error::CannotRead { .. } => anyhow::Error::from(e),
        e => anyhow::Error::from(e).context(format!("cannot open dataset {}", path.display())),
    })?;
    if std::env::var("MICROTAB_CHECKSUMS").is_ok_and(|v| v == "off") {
        ds.set_checked_reads(false);
    }
    if let Ok(mut names) = OPENED.lock() {
        names.extend(ds.manifest().variables.iter().map(|v| v.name.clone()));
    }
    Ok(ds)
}

/// The variables of the datasets this command opened, for the advice an
/// error may need (how to quote a name: `advice::quoting`).
static OPENED: std::sync::Mutex<Vec<String>> = std::sync::Mutex::new(Vec::new());

/// The variables of the datasets this command opened (each once).
pub fn opened_variables() -> Vec<String> {
    let mut names = OPENED.lock().map(|n| n.clone()).unwrap_or_default();
    names.sort();
    names.dedup();
    names
}

/// Opens the datasets an analysis command names: one directory, a
/// catalog of parts (`microtab split`), or a pattern (`'years/*.mtab'`,
/// quoted so the shell leaves it alone) naming several datasets with the
/// same variables, answered as one.
pub fn open_all(path: &Path) -> Result<Vec<Dataset>> {
    let text = path.to_string_lossy();
    // A catalog of parts (`microtab split`): all its parts.
    if let Some(parts) = microtab_analysis::catalog_parts(path)? {
        return parts.iter().map(|p| open(p)).collect();
    }
    if path.exists() || !text.contains(['*', '?', '[']) {
        return Ok(vec![open(path)?]);
    }
    let mut paths: Vec<_> = glob::glob(&text)
        .with_context(|| format!("{text} is not a valid dataset pattern"))?
        .collect::<std::result::Result<_, _>>()
        .with_context(|| format!("cannot list the datasets matching {text}"))?;
    paths.retain(|p| p.is_dir());
    paths.sort();
    if paths.is_empty() {
        anyhow::bail!("no dataset matches {text}");
    }
    // The same dataset twice (through a link, or a copy of its directory)
    // would count its rows twice.
    let mut seen = std::collections::HashMap::new();
    for p in &paths {
        let real =
            std::fs::canonicalize(p).with_context(|| format!("cannot resolve {}", p.display()))?;
        if let Some(first) = seen.insert(real.clone(), p.clone()) {
            anyhow::bail!(
                "{text} names the same dataset twice ({} and {} are both {}); its rows would be counted twice",
                first.display(),
                p.display(),
                real.display()
            );
        }
    }
    let ds: Vec<Dataset> = paths.iter().map(|p| open(p)).collect::<Result<_>>()?;
    distinct(&ds, &text)?;
    Ok(ds)
}

/// Refuses datasets of which two are one dataset by its id (a copied or
/// hard-linked directory; docs/FORMAT.md): its rows would be counted twice.
fn distinct(ds: &[Dataset], text: &str) -> Result<()> {
    let mut ids = std::collections::HashMap::new();
    for d in ds {
        if let Some(id) = &d.manifest().id {
            if let Some(first) = ids.insert(id.clone(), d.dir()) {
                anyhow::bail!(
                    "{text} names the same dataset twice ({} and {} are one dataset, id {id}: a copy of one directory); its rows would be counted twice",
                    first.display(),
                    d.dir().display()
                );
            }
        }
    }
    Ok(())
}

/// Answers `req` `repeat` times (the whole analysis: planning, scan,
/// weight checks, typed result) over one dataset, or over several as one
/// (exact partial results merged); prints timings on stderr when
/// repeating.
pub fn run_timed(ds: &[Dataset], req: &Request, args: &QueryArgs) -> Result<Answer> {
    let repeat = args.repeat;
    let settings = crate::settings::Settings::load()?;
    let mut times: Vec<Duration> = Vec::new();
    let mut answer = None;
    let mut req = req.clone();
    let busy = crate::progress::busy("answering");
    for _ in 0..repeat.max(1) {
        let t = Instant::now();
        answer = Some(match ds {
            [one] => microtab_analysis::run(one, &req, &settings.scan)?,
            many => microtab_analysis::run_many(many, &req, &settings.scan)?,
        });
        times.push(t.elapsed());
        // Checking the whole files once is enough.
        req.verify = false;
    }
    drop(busy);
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
    Ok(answer.expect("ran at least once"))
}

/// How categories are shown (`freq`, `tab`).
#[derive(clap::Args, Debug, Clone, Copy)]
pub struct ShowArgs {
    /// Show missing codes and system-missing as categories of their own.
    #[arg(long)]
    pub include_missing: bool,
    /// Show raw codes instead of value labels.
    #[arg(long)]
    pub codes: bool,
}

/// Opens the dataset(s) `dataset` names and answers `analysis` with the
/// options of `q` (see [`open_all`], [`run_timed`]), as the kind of result
/// `analysis` asks for (`T`).
pub fn answer<T: TryFrom<Answer>>(
    dataset: &Path,
    q: &QueryArgs,
    analysis: Analysis,
    include_missing: bool,
) -> Result<T> {
    answer_with(dataset, q, analysis, include_missing, |_| {})
}

/// [`answer`] with the request changed by `adjust` first.
pub fn answer_with<T: TryFrom<Answer>>(
    dataset: &Path,
    q: &QueryArgs,
    analysis: Analysis,
    include_missing: bool,
    adjust: impl FnOnce(&mut microtab_analysis::Request),
) -> Result<T> {
    answer_in(&open_all(dataset)?, q, analysis, include_missing, adjust)
}

/// [`answer_with`] over datasets already open ([`open_all`]), for a
/// command that asks several questions of them.
pub fn answer_in<T: TryFrom<Answer>>(
    ds: &[Dataset],
    q: &QueryArgs,
    analysis: Analysis,
    include_missing: bool,
    adjust: impl FnOnce(&mut microtab_analysis::Request),
) -> Result<T> {
    let mut req = q.request(analysis, include_missing);
    if let Some(first) = ds.first() {
        // One grammar for lists of names: an argument that names a
        // variable is whole, any other a list (`--by "SEX,RACE(1,3)"`).
        match &mut req.analysis {
            Analysis::Means { by, .. } | Analysis::Ratio { by, .. } => *by = var_names(first, by),
            Analysis::Corr { vars } => *vars = var_names(first, vars),
            _ => {}
        }
    }
    adjust(&mut req);
    let a = run_timed(ds, &req, q)?;
    Ok(T::try_from(a).unwrap_or_else(|_| unreachable!("an analysis answers with its own kind")))
}

/// Writes a result as one line of JSON (`-0.0` as `0.0`).
pub fn write_json(out: &mut impl Write, value: &impl serde::Serialize) -> Result<()> {
    out.write_all(microtab_analysis::answer_text(value)?.as_bytes())?;
    out.write_all(b"\n")?;
    Ok(())
}

/// A one-table answer's table as text (`freq`, `means`): its caption
/// (`title`, `label`, and the context's weight and filter), then the table
/// with its first `left` columns aligned left.
pub fn table_text(
    c: &microtab_analysis::Context,
    title: &str,
    label: Option<&str>,
    head: &[String],
    rows: &[Vec<String>],
    left: usize,
) -> String {
    let mut align = vec![crate::render::Align::Right; head.len()];
    for x in align.iter_mut().take(left) {
        *x = crate::render::Align::Left;
    }
    crate::render::caption(title, label, c.weight.as_deref(), c.filter.as_deref())
        + &crate::render::text_table(head, rows, &align)
}

/// The notes under a one-table answer (`freq`, `means`): on the weight,
/// the design (`percentages`: the table shows percentages) and the
/// replicates left out (`most`: [`most_dropped`] over its estimates).
pub fn table_notes(c: &microtab_analysis::Context, percentages: bool, most: u32) -> String {
    weight_note(&c.weight_cases, c.weight.as_deref())
        + &design_note(&c.design, percentages)
        + &dropped_note(most, &c.design)
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

/// The line under a table that says where its standard errors come from
/// (empty without a design).
pub fn design_note(d: &Option<microtab_analysis::survey::DesignInfo>, percentages: bool) -> String {
    let Some(d) = d else {
        return String::new();
    };
    let intervals = format!(
        "{}% intervals, t with {} df{}{}",
        crate::render::fmt_sig(100.0 * d.level, 4),
        d.df,
        match (d.rank, d.replicates) {
            (Some(k), Some(r)) if k < r => {
                format!(" (the replicate weights' rank {k} − 1: some replicates are combinations of others)")
            }
            _ => String::new(),
        },
        match (percentages, d.pct_interval) {
            (false, _) => "",
            (true, microtab_analysis::PctInterval::Logit) => ", logit intervals for percentages",
            (true, microtab_analysis::PctInterval::KornGraubard) => {
                ", Korn–Graubard intervals for percentages"
            }
        }
    );
    let source = match (d.replicates, d.scale, d.mse) {
        (Some(r), Some(scale), Some(mse)) => format!(
            "{r} {} replicate weights of {}: variance = {} × Σ (replicate − {})²",
            d.kind.to_uppercase(),
            d.weight,
            crate::render::fmt_sig(scale, 6),
            if mse {
                "full-sample estimate"
            } else {
                "mean of the replicates"
            },
        ),
        _ => {
            let mut parts = vec![format!("weight {}", d.weight)];
            if let Some(s) = &d.strata {
                parts.push(format!("strata {s}"));
            }
            parts.push(match &d.cluster {
                Some(c) => format!("PSUs {c}"),
                None => "each record a PSU".into(),
            });
            if let Some(f) = &d.fpc {
                parts.push(format!("FPC {f}"));
            }
            format!(
                "Taylor linearization ({}; {} PSUs in {} strata, lonely PSUs: {})",
                parts.join(", "),
                d.psus.unwrap_or(0),
                d.strata_count.unwrap_or(0),
                d.lonely_psu.unwrap_or("fail")
            )
        }
    };
    let adjusted = d
        .calibration
        .as_ref()
        .map_or(String::new(), |c| format!("({c})\n"));
    format!("(standard errors from {source}; {intervals})\n")
        + &adjusted
        + &format!(
            "(* unreliable: fewer than {} records, or a coefficient of variation above {}%)\n",
            d.min_n,
            crate::render::fmt_sig(100.0 * d.max_cv, 4)
        )
}

/// The CSV column names of an estimate's uncertainty ([`csv_se`]).
pub fn csv_se_head(estimate: &str) -> Vec<String> {
    [
        "se",
        "lo",
        "hi",
        "cv",
        "deff",
        "deft",
        "unreliable",
        "replicates_dropped",
    ]
    .map(|s| format!("{estimate}_{s}"))
    .to_vec()
}

/// The CSV fields of an estimate's standard error, interval, CV, design
/// effects, unreliable flag and the replicates left out of its variance
/// (empty fields without them).
pub fn csv_se(u: &Option<microtab_analysis::survey::Uncertainty>) -> [String; 8] {
    use crate::render::csv_num;
    [
        csv_num(u.map(|u| u.se)),
        csv_num(u.and_then(|u| u.lo)),
        csv_num(u.and_then(|u| u.hi)),
        csv_num(u.and_then(|u| u.cv)),
        csv_num(u.and_then(|u| u.deff)),
        csv_num(u.and_then(|u| u.deft)),
        u.map_or(String::new(), |u| u.unreliable.to_string()),
        u.map_or(String::new(), |u| u.replicates_dropped.to_string()),
    ]
}

/// The CSV columns saying where a result's standard errors come from
/// ([`csv_design`]): the method (`replicate:sdr`, `taylor`…), the
/// intervals' degrees of freedom, and the centring of replicate
/// deviations (`full-sample` or `replicate-mean`).
pub fn csv_design_head() -> Vec<String> {
    ["se_method", "df", "centring"].map(String::from).to_vec()
}

/// The fields of [`csv_design_head`].
pub fn csv_design(d: &microtab_analysis::survey::DesignInfo) -> [String; 3] {
    [
        match d.method {
            "replicate" => format!("replicate:{}", d.kind),
            m => m.to_string(),
        },
        crate::render::csv_num(Some(d.df)),
        match d.mse {
            Some(true) => "full-sample".into(),
            Some(false) => "replicate-mean".into(),
            None => String::new(),
        },
    ]
}

/// A standard error as text, marked `*` when the estimate is unreliable
/// and `†` when replicates were left out of its variance
/// ([`dropped_note`]).
pub fn se_text(
    u: &Option<microtab_analysis::survey::Uncertainty>,
    f: impl Fn(f64) -> String,
) -> String {
    match u {
        Some(u) => format!(
            "{}{}{}",
            f(u.se),
            if u.unreliable { "*" } else { "" },
            if u.replicates_dropped > 0 { "†" } else { "" }
        ),
        None => "-".into(),
    }
}

/// The most replicates left out of any of `us`' variances.
pub fn most_dropped<'a>(
    us: impl IntoIterator<Item = &'a Option<microtab_analysis::survey::Uncertainty>>,
) -> u32 {
    us.into_iter()
        .flatten()
        .map(|u| u.replicates_dropped)
        .max()
        .unwrap_or(0)
}

/// The line under a text table some of whose standard errors (marked
/// `†`) left out replicates (`most`: the most for one estimate; empty
/// when none did).
pub fn dropped_note(most: u32, d: &Option<microtab_analysis::survey::DesignInfo>) -> String {
    if most == 0 {
        return String::new();
    }
    format!(
        "(† the estimate's domain has no weight in some replicates (up to {most} of {}): its value there is 0/0, and its variance comes from the other replicates, as R's survey package computes it (with a warning); the SE is less reliable)\n",
        d.as_ref().and_then(|d| d.replicates).unwrap_or(0)
    )
}

/// An interval as text, `[lo, hi]` with `digits` decimals (`-` without one).
pub fn ci_text(u: &Option<microtab_analysis::survey::Uncertainty>, digits: usize) -> String {
    match u.and_then(|u| u.lo.zip(u.hi)) {
        Some((lo, hi)) => format!("[{lo:.digits$}, {hi:.digits$}]"),
        None => "-".into(),
    }
}

/// Writes `text` to stdout in one call.
pub fn emit(text: &str) -> Result<()> {
    let mut out = std::io::stdout().lock();
    out.write_all(text.as_bytes())?;
    out.flush()?;
    Ok(())
}

/// Splits `s` at commas (and, with `spaces`, whitespace) outside
/// parentheses and quotes.
pub fn split_list(s: &str, spaces: bool) -> Vec<String> {
    microtab_analysis::split_list(s, spaces)
}

/// Variable names from command-line arguments (names with spaces or
/// commas whole: [`microtab_engine::var_names`]).
pub fn var_names(ds: &Dataset, args: &[String]) -> Vec<String> {
    microtab_engine::var_names(ds, args)
}
