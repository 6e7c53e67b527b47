//! `microtab import`: CSV, or fixed-width with a DDI codebook (IPUMS), →
//! dataset. Either may be gzip-compressed.

use crate::hint::flag;
use anyhow::{anyhow, bail, Result};
use microtab_ingest::{
    Codebook, Delimiter, Format, Hint, ImportOptions, ImportSummary, InferRows, Progress,
};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Instant;

/// Arguments of `import`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// Input file: CSV (header line first), or with --ddi fixed-width
    /// records, plain or gzip-compressed (.gz); a Parquet file; a SAS
    /// transport file (.xpt), a Stata file (.dta, releases 104-119), an
    /// SPSS system file (.sav, .zsav) or portable file (.por), or a SAS
    /// data set (.sas7bdat), each recognised by its first bytes.
    input: PathBuf,
    /// Dataset directory to create (e.g. census.mtab).
    output: PathBuf,
    /// Field delimiter: one character, or "tab" (default: detected from
    /// the first lines among , tab ; and |, preferring ,).
    #[arg(long, short = 'd')]
    delimiter: Option<String>,
    /// CSV: numbers are written with a decimal comma (1,5 is one and a
    /// half), as spreadsheets in much of Europe and Latin America write
    /// them (with ; between fields); a field with a point is then text.
    #[arg(long)]
    decimal_comma: bool,
    /// Replace an existing dataset at OUTPUT (atomically).
    #[arg(long)]
    force: bool,
    /// Force a column's type: VAR=int|float|string (repeatable).
    #[arg(long = "type", value_name = "VAR=TYPE")]
    types: Vec<String>,
    /// Declare user-missing codes: VAR=CODE[,CODE…] (repeatable), as
    /// written in the data: 9999999, -0.5, Unknown.
    #[arg(long, value_name = "VAR=CODES")]
    missing: Vec<String>,
    /// Field texts read as system-missing, comma-separated, in every
    /// column unless --na-text is given ("" for empty fields only).
    /// Default: NA, N/A, NaN, NULL, ., .a-.z and the like in numeric
    /// columns; in text columns the same without the dot codes (empty
    /// fields are always missing).
    #[arg(long, value_name = "LIST")]
    na: Option<String>,
    /// Field texts read as system-missing in text columns, comma-separated
    /// ("" keeps every non-empty text as a value, as earlier versions of
    /// microtab did; numeric columns still follow --na or its default).
    #[arg(long, value_name = "LIST")]
    na_text: Option<String>,
    /// Text encoding: utf-8, latin1 (ISO-8859-1), windows-1252 or another
    /// encoding label (windows-1251, iso-8859-2, shift_jis, gb18030, …)
    /// (default: the format's own; utf-8 for CSV, windows-1252 for Stata
    /// files before release 118, the one an SPSS or SAS file names,
    /// windows-1252 for what an SPSS portable file's table does not name).
    #[arg(long, value_name = "NAME")]
    encoding: Option<String>,
    /// A SAS format catalog (.sas7bcat) whose formats give a SAS data
    /// set's value labels.
    #[arg(long, value_name = "FILE")]
    catalog: Option<PathBuf>,
    /// Records sampled to choose each column's type: a number, or "all"
    /// for a first pass over the whole file.
    #[arg(long, value_name = "N|all", default_value = "50000")]
    infer_rows: String,
    /// DDI codebook (XML) describing INPUT as fixed-width records, as
    /// IPUMS ships with every extract (a .csv INPUT is read as CSV and
    /// gets the codebook's labels and missing codes).
    #[arg(long, value_name = "FILE", conflicts_with = "setup")]
    ddi: Option<PathBuf>,
    /// Setup file describing INPUT (repeatable): a Stata dictionary
    /// (.dct) or do-file (.do), SPSS syntax (.sps) or a SAS program
    /// (.sas), as IPUMS, ICPSR, NBER and DHS publish and `microtab subset`
    /// writes; gives columns, types, labels and missing values.
    #[arg(long, value_name = "FILE")]
    setup: Vec<PathBuf>,
    /// Hierarchical fixed-width files: the record type that becomes a row
    /// (default: the person records, P; H imports the household records),
    /// with --ddi or --setup.
    #[arg(long, value_name = "TYPE")]
    rectype: Option<String>,
    /// Keep the codes the codebook names "not in universe", missing,
    /// unknown or blank only in value labels or text (INCTOT's 99999999
    /// and 99999998) as ordinary values; by default they become missing
    /// codes, and a note names each.
    #[arg(long)]
    keep_niu: bool,
    /// Store every variable as a plain little-endian array (no
    /// bit-packing), so that numpy.memmap reads each column file directly;
    /// takes more disk and makes cold queries slower.
    #[arg(long)]
    plain: bool,
    /// Cut the imported records into N parts: OUTPUT becomes a catalog
    /// directory of N datasets (as `microtab split` writes) that queries
    /// name as one.
    #[arg(long, value_name = "N")]
    parts: Option<usize>,
    /// Variables to keep (default: all), separated by commas or spaces;
    /// the others are dropped once the file is read.
    #[arg(long, num_args = 1.., value_name = "VAR")]
    vars: Vec<String>,
    /// SDA-style filter: only the records that pass it are kept (it sees
    /// the labels and missing codes the import gives, as later queries do).
    #[arg(long)]
    filter: Option<String>,
    /// The dataset the user named, when the import writes a staging
    /// dataset first (`--parts`, `--vars`, `--filter`): reports name it.
    #[arg(skip)]
    shown: Option<PathBuf>,
    /// Set by `--parts`, `--vars` and `--filter`: work follows the import
    /// (a split, a selection), so a sibling executable importing is waited
    /// for, not put in this process's place.
    #[arg(skip)]
    followed: bool,
}

/// The options of the command line as the import's options: each word
/// parsed by the same `FromStr` as Python's keywords.
fn options(a: &Args) -> Result<ImportOptions> {
    let mut o = ImportOptions {
        io: crate::settings::Settings::load()?.io,
        plain: a.plain,
        catalog: a.catalog.clone(),
        keep_niu: a.keep_niu,
        record_type: a.rectype.clone(),
        decimal_comma: a.decimal_comma,
        ..ImportOptions::default()
    };
    o.chunk_size = chunk_size(o.chunk_size);
    if let Some(d) = &a.delimiter {
        o.delimiter = Some(
            d.parse::<Delimiter>()
                .map_err(|e| anyhow!("--delimiter: {e}"))?
                .0,
        );
    }
    for t in &a.types {
        let (n, ty) = t
            .split_once('=')
            .ok_or_else(|| anyhow!("--type expects VAR=int|float|string, got '{t}'"))?;
        o.add_type(n, ty).map_err(|e| anyhow!("--type {n}: {e}"))?;
    }
    for m in &a.missing {
        let (n, codes) = m
            .split_once('=')
            .ok_or_else(|| anyhow!("--missing expects VAR=CODE[,CODE…], got '{m}'"))?;
        let codes = match codes {
            "" => Vec::new(),
            c => c.split(',').map(String::from).collect(),
        };
        o.add_missing(n, codes)
            .map_err(|_| anyhow!("--missing {n}: no codes given (expected VAR=CODE[,CODE…])"))?;
    }
    let list = |l: &Option<String>| {
        l.as_ref()
            .map(|l| l.split(',').map(|t| t.to_string()).collect())
    };
    o.na = list(&a.na);
    o.na_text = list(&a.na_text);
    if let Some(e) = &a.encoding {
        o.encoding = Some(e.parse().map_err(|e| anyhow!("--encoding: {e}"))?);
    }
    o.sample_rows = a
        .infer_rows
        .parse::<InferRows>()
        .map_err(|e| anyhow!("--infer-rows: {e}"))?
        .0;
    Ok(o)
}

/// An import error with the options that would avoid it, as flags.
fn hinted(e: microtab_ingest::Error) -> anyhow::Error {
    let hints = e.hints();
    if hints.is_empty() {
        e.into()
    } else {
        anyhow!("{e}; {}", Hint::join(&hints, flag))
    }
}

/// Bytes of input per parse task: `$MICROTAB_CHUNK_BYTES` (at least 4096;
/// tests and the fuzzer use small chunks so that every chunk boundary and
/// re-encoding path is exercised on small files), else the default.
fn chunk_size(default: usize) -> usize {
    std::env::var("MICROTAB_CHUNK_BYTES")
        .ok()
        .and_then(|v| v.parse::<usize>().ok())
        .map_or(default, |n| n.max(4096))
}

/// A progress bar on stderr when it is a terminal.
fn progress_bar(input: &std::path::Path) -> (Option<indicatif::ProgressBar>, Option<Progress>) {
    let total = std::fs::metadata(input).map(|m| m.len()).unwrap_or(0);
    let Some(pb) = crate::progress::bar(
        total,
        "importing",
        "{decimal_bytes}/{decimal_total_bytes} ({decimal_bytes_per_sec}, {eta})",
    ) else {
        return (None, None);
    };
    let p = pb.clone();
    let f: Progress = Arc::new(move |done, _| p.set_position(done));
    (Some(pb), Some(f))
}

/// Runs the import, with a progress bar when stderr is a terminal.
pub fn run(mut a: Args) -> Result<()> {
    if let Some(n) = a.parts.take() {
        return run_parts(a, n);
    }
    if !a.vars.is_empty() || a.filter.is_some() {
        return run_selected(a);
    }
    if a.output
        .extension()
        .is_some_and(|e| e.eq_ignore_ascii_case("parquet") || e.eq_ignore_ascii_case("csv"))
    {
        bail!(
            "{}: the output of import is a dataset directory (e.g. census.mtab); `microtab export DS OUT.parquet` writes Parquet, `microtab subset DS OUT.csv` CSV",
            a.output.display()
        );
    }
    if a.decimal_comma && (crate::cmd::external::is_parquet(&a.input) || !a.setup.is_empty()) {
        bail!("--decimal-comma is for CSV input");
    }
    if crate::cmd::external::is_parquet(&a.input) {
        return run_parquet(a);
    }
    if a.ddi.is_some() {
        return run_fixed(a);
    }
    if !a.setup.is_empty() {
        return run_setup(a);
    }
    if a.keep_niu {
        bail!("--keep-niu applies to codebooks: give --ddi or --setup");
    }
    import_with(&a, options(&a)?)
}

/// Imports `a.input` with `opts` under a progress bar, and reports.
fn import_with(a: &Args, opts: ImportOptions) -> Result<()> {
    import_by(a, opts, |o| {
        microtab_ingest::import(&a.input, &a.output, a.force, o).map_err(hinted)
    })
}

/// `import --setup`: text data described by Stata, SPSS or SAS setup files.
fn run_setup(a: Args) -> Result<()> {
    if !a.types.is_empty() || a.delimiter.is_some() {
        bail!("--type and --delimiter do not apply with --setup: the setup gives every variable's columns and type");
    }
    let setup = microtab_ingest::read_setup(&a.setup)?;
    for w in &setup.codebook.warnings {
        eprintln!("note: {}", w.word(flag));
    }
    if let Some(named) = &setup.data_file {
        let base = |s: &str| {
            let s = s
                .rsplit(['/', '\\'])
                .next()
                .unwrap_or(s)
                .to_ascii_lowercase();
            s.strip_suffix(".gz").map(str::to_string).unwrap_or(s)
        };
        let given = a.input.to_string_lossy();
        if base(named) != base(&given) {
            eprintln!(
                "note: the setup names the data file {named}; reading {}",
                a.input.display()
            );
        }
    }
    let opts = options(&a)?;
    import_by(&a, opts, |o| {
        microtab_ingest::import_setup(&a.input, &setup, &a.output, a.force, o).map_err(hinted)
    })
}

/// Runs `import` with `opts` under a progress bar, and reports.
fn import_by(
    a: &Args,
    mut opts: ImportOptions,
    import: impl FnOnce(&ImportOptions) -> Result<ImportSummary>,
) -> Result<()> {
    let (bar, progress) = progress_bar(&a.input);
    opts.progress = progress;
    let t = Instant::now();
    let r = import(&opts);
    if let Some(pb) = bar {
        pb.finish_and_clear();
    }
    report(a, &r?, t);
    Ok(())
}

/// Imports into a dataset beside OUTPUT, splits it into `n` parts at
/// OUTPUT, and removes it: a failed or killed import or split leaves an
/// existing OUTPUT untouched.
fn run_parts(mut a: Args, n: usize) -> Result<()> {
    let out = a.output.clone();
    if n == 0 {
        bail!("--parts must be at least 1");
    }
    // Leftovers of killed imports with parts and splits into OUT (each
    // as large as the data), before this one writes another.
    microtab_analysis::remove_stale_staging(&out);
    if out.exists() && !a.force {
        bail!("{} exists (give --force to replace it)", out.display());
    }
    if out.exists()
        && !out.join("manifest.json").is_file()
        && !out.join(microtab_analysis::CATALOG).is_file()
    {
        bail!(
            "{} exists and is not a dataset or catalog of parts: choose another name",
            out.display()
        );
    }
    let staged = microtab_analysis::Staging::beside(&out)?;
    let whole = staged.path().to_path_buf();
    let force = a.force;
    a.shown.get_or_insert(out.clone());
    a.output = whole.clone();
    a.force = true;
    a.followed = true;
    run(a)?;
    let ds = crate::common::open(&whole)?;
    crate::cmd::split::split_into(&ds, &out, n, (force, false))
}

/// `--vars`/`--filter`: the import goes to a staging dataset beside
/// OUTPUT, whose chosen variables and records are then written to OUTPUT
/// (`microtab_analysis::SelectedImport`, which Python's imports share); a
/// failed or killed import or selection leaves an existing OUTPUT
/// untouched.
fn run_selected(mut a: Args) -> Result<()> {
    let out = a.output.clone();
    // The filter's words and OUTPUT are checked before the file is read.
    let vars = std::mem::take(&mut a.vars);
    let filter = a.filter.take();
    let sel = microtab_analysis::SelectedImport::begin(&out, a.force, &vars, filter.as_deref())
        .map_err(selection_error)?;
    a.shown.get_or_insert(out.clone());
    a.output = sel.staging().to_path_buf();
    a.force = true;
    a.followed = true;
    run(a)?;
    let filtered = sel.filtered();
    let r = sel.finish().map_err(selection_error)?;
    eprintln!(
        "kept {} records x {} variables{} in {}",
        r.rows,
        r.vars.len(),
        if filtered {
            " that pass the filter"
        } else {
            ""
        },
        out.display()
    );
    Ok(())
}

/// A selection's error in the command line's words.
fn selection_error(e: microtab_analysis::SelectError) -> anyhow::Error {
    match e {
        microtab_analysis::SelectError::Exists { path } => {
            anyhow!("{} exists (give --force to replace it)", path.display())
        }
        e => e.into(),
    }
}

/// A Parquet file: imported by `microtab-arrow` (in its place, unless a
/// split or a selection follows).
fn run_parquet(a: Args) -> Result<()> {
    let followed = a.followed;
    if !a.types.is_empty()
        || a.delimiter.is_some()
        || !a.missing.is_empty()
        || a.na.is_some()
        || a.na_text.is_some()
        || a.rectype.is_some()
        || a.keep_niu
        || a.encoding.is_some()
        || a.catalog.is_some()
        || a.infer_rows != "50000"
    {
        bail!("{}: a Parquet file's columns carry their types and nulls; of the import options only --ddi, --plain, --force and --parts apply (declare missing codes afterwards with `microtab missing`)", a.input.display());
    }
    let mut args: Vec<std::ffi::OsString> = vec![a.input.into(), a.output.into()];
    if let Some(d) = a.ddi {
        args.push("--ddi".into());
        args.push(d.into());
    }
    if a.plain {
        args.push("--plain".into());
    }
    if a.force {
        args.push("--force".into());
    }
    if let Some(shown) = a.shown {
        args.push("--shown".into());
        args.push(shown.into());
    }
    if followed {
        return crate::cmd::external::run("microtab-arrow", "import", args);
    }
    crate::cmd::external::exec("microtab-arrow", "import", args)
}

/// `import --ddi`: fixed-width records described by a DDI codebook.
fn run_fixed(a: Args) -> Result<()> {
    if !a.types.is_empty() || a.delimiter.is_some() {
        bail!("--type and --delimiter are for CSV input; with --ddi the codebook gives every variable's columns and type");
    }
    let ddi = a.ddi.as_ref().expect("checked by caller");
    let cb = Codebook::read(ddi)?;
    for w in &cb.warnings {
        eprintln!("warning: {}: {}", ddi.display(), w.word(flag));
    }
    let mut opts = options(&a)?;
    opts.codebook = Some(cb);
    if Format::of(&a.input, &opts) == Format::Csv && a.rectype.is_some() {
        // An IPUMS extract delivered as CSV: the codebook supplies types of
        // alphabetic variables, labels and missing codes.
        bail!("--rectype applies to hierarchical fixed-width files, not to CSV");
    }
    import_with(&a, opts)?;
    set_ipums_design(&a.output)
}

/// Sets the survey design an IPUMS extract's replicate weights imply
/// (`microtab design` changes or clears it), saying so.
fn set_ipums_design(path: &std::path::Path) -> Result<()> {
    let mut ds = crate::common::open(path)?;
    if let Some(d) = crate::cmd::design::ipums_design(&ds) {
        let text = crate::cmd::design::describe(&d);
        ds.update_manifest(|m| m.design = Some(d))?;
        eprintln!(
            "survey design set from the IPUMS replicate weights: {text} (microtab design changes or clears it; --no-design ignores it)"
        );
    }
    Ok(())
}

fn report(a: &Args, s: &ImportSummary, t: Instant) {
    for n in &s.notes {
        eprintln!("note: {}", n.word(flag));
    }
    let secs = t.elapsed().as_secs_f64().max(1e-9);
    let text = if s.bytes_text != s.bytes_in {
        format!(", {:.1} MB of text", s.bytes_text as f64 / 1e6)
    } else {
        String::new()
    };
    let sampled = match s.sampled {
        Some(n) if n < s.rows => {
            format!("; column types chosen from the first {n} records (--infer-rows)")
        }
        _ => String::new(),
    };
    eprintln!(
        "imported {} records x {} variables from {} ({:.1} MB{text}) in {:.2} s ({:.0} MB/s of text) into {} ({:.1} MB){sampled}",
        s.rows,
        s.variables,
        a.input.display(),
        s.bytes_in as f64 / 1e6,
        secs,
        s.bytes_text as f64 / 1e6 / secs,
        a.shown.as_ref().unwrap_or(&s.path).display(),
        s.bytes_out as f64 / 1e6
    );
}
