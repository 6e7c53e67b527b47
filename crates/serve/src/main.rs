//! `microtab-serve`: the HTTP API over every dataset under a directory,
//! read-only. `microtab serve DIR` runs it.
//!
//! * `GET /api/v1/datasets` — the datasets served (name, records,
//!   variables, design);
//! * `GET /api/v1/datasets/{name}` — one dataset's description, the
//!   analysis layer's `DatasetInfo` (as `microtab info --format json`):
//!   variables, design, the I/O settings the server reads with;
//! * `GET /api/v1/datasets/{name}/{freq|tab|means|regress}?…` — the analysis
//!   layer's answer (the CLI's `--format json`), with the parameters of
//!   `microtab_analysis::Params` (`row`, `col`, `control`, `weight`,
//!   `filter`, `pct`, `stats`, `var`, `by` once per variable, …). The URL
//!   is the query: sharing it reproduces the answer. A refusal that an
//!   option would answer also gives its `kind`, `option` and a `hint`.
//!
//! Datasets are named only from the served list (never by path); requests
//! are bounded (URL and parameter sizes, cells, concurrent scans, time);
//! every error is a JSON object `{"error": …, "status": …}` and no panic
//! reaches a client; each request is logged with its status and time.

use anyhow::{Context, Result};
use axum::extract::{Path, Query, Request, State};
use axum::http::{HeaderValue, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::{Json, Router};
use clap::Parser;
use microtab_store::Dataset;
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::{Arc, RwLock};
use std::time::{Duration, Instant};
use tokio::sync::Semaphore;

mod app;
mod page;

use app::*;

/// A refused allocation ends the command with a message and exit status 1,
/// not an abort (the large buffers are allocated fallibly before that).
#[global_allocator]
static ALLOC: microtab_engine::ExitOnOutOfMemory = microtab_engine::ExitOnOutOfMemory;

/// Serve every microtab dataset under a directory over HTTP, read-only.
#[derive(Parser, Debug)]
#[command(name = "microtab-serve", version)]
struct Args {
    /// A directory of datasets (each a subdirectory with a manifest), or
    /// one dataset.
    dir: PathBuf,
    /// Address to listen on.
    #[arg(long, default_value = "127.0.0.1")]
    bind: String,
    /// Port (0: any free port; the address is printed on stdout).
    #[arg(long, default_value_t = 8080)]
    port: u16,
    /// Queries scanning at once (default: the cores); others wait.
    #[arg(long)]
    max_scans: Option<usize>,
    /// Seconds a query may wait for a scan slot and run before the client
    /// gets 503 or 504.
    #[arg(long, default_value_t = 30.0)]
    timeout: f64,
    /// Most cells a table may have.
    #[arg(long, default_value_t = 100_000)]
    max_cells: usize,
    /// Seconds a client has to send a request's headers (also how long an
    /// idle kept-alive connection stays open): slow clients are cut off.
    #[arg(long, default_value_t = 10.0)]
    header_timeout: f64,
    /// Most connections open at once; more wait to be accepted.
    #[arg(long, default_value_t = 4096)]
    max_connections: usize,
    /// Memory the answers being computed may take together (bytes, or
    /// with K, M or G: 2G). Each request reserves its estimated size (its
    /// table's cells × the bytes a cell takes while counted and answered)
    /// before it runs; one that does not fit in what is left is answered
    /// 503 with Retry-After. Default: half the machine's memory.
    #[arg(long, value_parser = parse_bytes)]
    max_memory: Option<u64>,
}

/// `2G`, `512M`, `64k`, `1.5G` or a number of bytes.
fn parse_bytes(s: &str) -> Result<u64, String> {
    let t = s.trim();
    let (num, mult) = match t.char_indices().find(|(_, c)| c.is_ascii_alphabetic()) {
        None => (t, 1u64),
        Some((i, _)) => {
            let unit = t[i..].to_ascii_lowercase();
            let m = match unit.trim_end_matches("ib").trim_end_matches('b') {
                "" => 1,
                "k" => 1 << 10,
                "m" => 1 << 20,
                "g" => 1 << 30,
                "t" => 1 << 40,
                _ => {
                    return Err(format!(
                        "{s:?}: expected bytes, or a number with K, M, G or T"
                    ))
                }
            };
            (t[..i].trim(), m)
        }
    };
    let v: f64 = num
        .parse()
        .map_err(|_| format!("{s:?}: expected bytes, or a number with K, M, G or T"))?;
    if !(v.is_finite() && v > 0.0) {
        return Err(format!("{s:?}: expected a positive size"));
    }
    Ok((v * mult as f64) as u64)
}

/// Half the machine's memory (`MemTotal` in /proc/meminfo), or 1 GiB when
/// it cannot be read.
fn default_memory() -> u64 {
    std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|m| {
            m.lines()
                .find_map(|l| l.strip_prefix("MemTotal:"))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        })
        .map_or(1 << 30, |kb| kb * 1024 / 2)
}

/// An upper bound of the categories of a grouping argument (a variable,
/// or a recode or restriction of one): its recode's groups, else the
/// values between its minimum and maximum (a text variable's codes), at
/// most one per record, plus its missing codes and system-missing.
fn categories(ds: &Dataset, spec: &str) -> u64 {
    use microtab_store::Number;
    let Ok(d) = microtab_engine::parse_dim_in(ds, spec) else {
        return 1;
    };
    let Ok(v) = ds.variable(&d.name) else {
        return 1;
    };
    if let Some(g) = &d.recode {
        return g.len() as u64 + 1;
    }
    let rows = ds.rows().max(1);
    let span = match (&v.min, &v.max) {
        (Some(Number::Int(a)), Some(Number::Int(b))) => b.abs_diff(*a).saturating_add(1),
        _ => rows,
    };
    span.min(rows) + 1 + v.missing_codes.len() as u64
}

/// The estimated memory of answering `req` over `ds`: its table's cells
/// (an upper bound from the variables' ranges, at most the request's
/// cell limit) × what a cell takes in each worker's accumulator and in
/// the answer (the typed result, its JSON tree and its text).
fn estimate(ds: &Dataset, req: &microtab_analysis::Request) -> (u64, u64) {
    use microtab_analysis::Analysis as A;
    let dims: Vec<String> = match &req.analysis {
        A::Freq { var } => vec![var.clone()],
        A::Tab {
            row, col, control, ..
        } => [Some(row), Some(col), control.as_ref()]
            .into_iter()
            .flatten()
            .cloned()
            .collect(),
        A::Means { by, .. } | A::Ratio { by, .. } => by.clone(),
        A::Corr { .. } => Vec::new(),
        // A model's cube: every variable of its terms, and its outcome.
        A::Regress { formula, .. } => microtab_engine::parse_formula(formula)
            .map(|f| {
                let mut d: Vec<String> = f.terms.iter().flatten().map(|p| p.spec.clone()).collect();
                d.sort();
                d.dedup();
                d.push(f.outcome.name);
                d
            })
            .unwrap_or_default(),
    };
    let mut cells: u64 = 1;
    for d in &dims {
        cells = cells.saturating_mul(categories(ds, d));
    }
    let cells = cells.min(req.max_cells as u64).max(1);
    let design = ds.manifest().design.as_ref().filter(|_| req.use_design);
    let weighted = req.weight.is_some() || design.is_some();
    let measured = matches!(
        req.analysis,
        A::Means { .. } | A::Regress { .. } | A::Ratio { .. } | A::Corr { .. }
    );
    let reps = design
        .and_then(|d| d.replicates.as_ref())
        .map_or(0, |r| r.weights.len() as u64);
    // Per worker: counts in 4 lanes, weight sums in 4 lanes (f64 and
    // integer), exact moments, replicate sums (microtab_engine's
    // accumulator); the workers' accumulators and the merged one.
    let mut acc = 40;
    if weighted {
        acc += 72;
    }
    if measured {
        acc += 224;
    }
    acc += reps * 8 * (1 + measured as u64);
    if design.is_some_and(|d| d.taylor.is_some()) {
        acc += 64;
    }
    let workers = std::thread::available_parallelism().map_or(2, |n| n.get()) as u64;
    // The answer: each cell's numbers in the typed result, as JSON values
    // and as text (measured: 120–250 bytes a cell), twice over while the
    // text is written.
    let answer = 400 + reps * 8;
    (cells, cells.saturating_mul(acc * (workers + 1) + answer))
}

async fn datasets(State(app): State<Arc<App>>) -> Json<Value> {
    let list = scan(&app.root);
    let items: Vec<Value> = list
        .iter()
        .filter_map(|(name, p)| {
            let ds = Dataset::open(p).ok()?;
            let m = ds.manifest();
            Some(json!({
                "name": name,
                "rows": m.rows,
                "variables": m.variables.len(),
                "design": m.design.is_some(),
                "source": m.source,
                "title": m.title,
                "description": m.description,
            }))
        })
        .collect();
    *app.datasets.write().unwrap_or_else(|e| e.into_inner()) = list;
    Json(json!({ "datasets": items }))
}

/// `GET /api/v1/datasets/{name}`: the analysis layer's description of the
/// dataset (`microtab info --format json`), named as served; the settings
/// file is not named (the server's paths are not shown).
async fn dataset(
    State(app): State<Arc<App>>,
    Path(name): Path<String>,
) -> Result<Json<Value>, ApiError> {
    let ds = open(&app.path(&name)?, &name)?;
    let mut info = microtab_analysis::DatasetInfo::of(&ds, &name, &app.settings)
        .map_err(|e| described(e, &ds, &name))?;
    info.io_settings.file = None;
    let body = serde_json::to_value(&info)
        .map_err(|e| ApiError(StatusCode::INTERNAL_SERVER_ERROR, e.to_string(), None))?;
    Ok(Json(body))
}

fn analysis_status(e: &microtab_analysis::Error) -> StatusCode {
    use microtab_analysis::Error as E;
    match e {
        E::Store(s) | E::Engine(microtab_engine::Error::Store(s)) => match s {
            microtab_store::Error::UnknownVariable { .. } => StatusCode::BAD_REQUEST,
            _ => StatusCode::INTERNAL_SERVER_ERROR,
        },
        E::InDataset { error, .. } => analysis_status(error),
        _ => StatusCode::BAD_REQUEST,
    }
}

async fn analyse(
    State(app): State<Arc<App>>,
    Path((name, kind)): Path<(String, String)>,
    Query(params): Query<Vec<(String, String)>>,
) -> Result<Response, ApiError> {
    if !matches!(
        kind.as_str(),
        "freq" | "tab" | "means" | "regress" | "ratio" | "corr"
    ) {
        return Err(ApiError(
            StatusCode::NOT_FOUND,
            format!("no analysis {kind:?}: expected freq, tab, means, regress, ratio or corr"),
            None,
        ));
    }
    if params.len() > MAX_PARAMS {
        return Err(bad(format!(
            "{} parameters: at most {MAX_PARAMS}",
            params.len()
        )));
    }
    if let Some((k, v)) = params.iter().find(|(_, v)| v.len() > MAX_PARAM) {
        return Err(bad(format!(
            "parameter {k} is {} bytes long: at most {MAX_PARAM}",
            v.len()
        )));
    }
    let start = Instant::now();
    // Several percentages (`pct=col,row,total`) are the request's own.
    check_pcts(&kind, &params)?;
    let req = request_of(&app, &name, &kind, &params)?;
    let (body, reservation) = answer(&app, &name, req).await?;
    let reservation = vec![reservation];
    let body = serde_json::to_vec(&body)
        .map_err(|e| ApiError(StatusCode::INTERNAL_SERVER_ERROR, e.to_string(), None))?;
    // The text keeps its share of the budget until it has been sent.
    let body = axum::body::Bytes::from_owner(Reserved(body, reservation));
    let mut resp = (
        [(axum::http::header::CONTENT_TYPE, "application/json")],
        body,
    )
        .into_response();
    if let Ok(v) = HeaderValue::from_str(&format!("{:.3}", start.elapsed().as_secs_f64() * 1e3)) {
        resp.headers_mut().insert("x-microtab-ms", v);
    }
    Ok(resp)
}

/// The analysis layer's request of an API query's parameters.
fn request_of(
    app: &Arc<App>,
    name: &str,
    kind: &str,
    params: &[(String, String)],
) -> Result<microtab_analysis::Request, ApiError> {
    let mut p = microtab_analysis::Params::from_pairs(params).map_err(bad)?;
    if !p.by.is_empty() || !p.vars.is_empty() {
        // Each `by` (or `vars`) value is one argument when it names a
        // variable, else a list in the CLI's grammar (`by=A,B`).
        let ds = open(&app.path(name)?, name)?;
        p.by = microtab_engine::var_names(&ds, &p.by);
        p.vars = microtab_engine::var_names(&ds, &p.vars);
    }
    p.request(kind).map_err(bad)
}

/// Several percentages (`pct=col,row,total`, SDA's
/// `colpct=on&rowpct=on&totpct=on`; the analysis layer's `Pct::list`) are
/// for crosstabs only.
fn check_pcts(kind: &str, params: &[(String, String)]) -> Result<(), ApiError> {
    let Some((_, v)) = params.iter().find(|(k, _)| k == "pct") else {
        return Ok(());
    };
    if kind != "tab" && microtab_analysis::Pct::list(v).is_ok_and(|l| l.len() > 1) {
        return Err(bad(format!(
            "pct={v:?}: several percentages are for crosstabs (tab)"
        )));
    }
    Ok(())
}

/// An answer's text and its share of the memory budget.
struct Reserved(Vec<u8>, #[allow(dead_code)] Vec<Reservation>);

impl AsRef<[u8]> for Reserved {
    fn as_ref(&self) -> &[u8] {
        &self.0
    }
}

/// One variable for a codebook page: its metadata and its frequencies
/// (weighted by the design's weight when the dataset has one; missing
/// values shown), or `null` frequencies with the reason when it has too
/// many distinct values to list.
async fn variable(
    State(app): State<Arc<App>>,
    Path((name, var)): Path<(String, String)>,
) -> Result<Json<Value>, ApiError> {
    let ds = open(&app.path(&name)?, &name)?;
    let v = ds
        .variable(&var)
        .map_err(|e| {
            ApiError(
                StatusCode::NOT_FOUND,
                e.to_string()
                    .replace(&ds.dir().display().to_string(), &name),
                None,
            )
        })?
        .clone();
    let meta =
        microtab_analysis::VariableInfo::of(&ds, &v).map_err(|e| described(e, &ds, &name))?;
    let mut req = microtab_analysis::Request::new(microtab_analysis::Analysis::Freq {
        var: v.name.clone(),
    });
    req.include_missing = true;
    req.max_cells = 1000;
    let (freq, note) = match answer(&app, &name, req).await {
        Ok((f, _)) => (f, None),
        Err(ApiError(StatusCode::BAD_REQUEST, m, _)) => (Value::Null, Some(m)),
        Err(e) => return Err(e),
    };
    Ok(Json(
        json!({ "variable": meta, "frequencies": freq, "note": note }),
    ))
}

/// Answers `req` over the served dataset `name` on the blocking pool,
/// within the scan slots and the time limit: the analysis layer's JSON,
/// naming the dataset as served.
async fn answer(
    app: &Arc<App>,
    name: &str,
    mut req: microtab_analysis::Request,
) -> Result<(Value, Reservation), ApiError> {
    req.max_cells = req.max_cells.min(app.max_cells);
    let path = app.path(name)?;
    let name = name.to_string();
    let start = Instant::now();
    let permit = tokio::time::timeout(app.timeout, app.scans.clone().acquire_owned())
        .await
        .map_err(|_| {
            ApiError(
                StatusCode::SERVICE_UNAVAILABLE,
                "the server is busy: no scan slot within the time limit; try again".into(),
                None,
            )
        })?
        .map_err(|_| {
            ApiError(
                StatusCode::SERVICE_UNAVAILABLE,
                "shutting down".into(),
                None,
            )
        })?;
    let left = app.timeout.saturating_sub(start.elapsed());
    let scan = app.scan.clone();
    let budget = app.budget.clone();
    let served = name.clone();
    let max_cells = app.max_cells;
    let task = tokio::task::spawn_blocking(move || {
        // The permit is held until the scan ends, even after a timeout
        // answered the client: scans in flight stay bounded.
        let _permit = permit;
        // Messages name the dataset as served, never its path here.
        let hide = |m: String| m.replace(&path.display().to_string(), &served);
        let ds = Dataset::open(&path)
            .map_err(|e| ApiError(StatusCode::INTERNAL_SERVER_ERROR, hide(e.to_string()), None))?;
        // Memory first: a request that does not fit waits for none of it.
        let (cells, bytes) = estimate(&ds, &req);
        let reservation = budget
            .reserve(bytes, cells)
            .map_err(|(s, m)| ApiError(s, m, None))?;
        let a = microtab_analysis::run(&ds, &req, &scan).map_err(|e| {
            ApiError(
                analysis_status(&e),
                hide(e.to_string()),
                Why::of(&e, max_cells),
            )
        })?;
        // The served name, not the server's path, names the dataset.
        let mut v = microtab_analysis::answer_json(&a)
            .map_err(|e| ApiError(StatusCode::INTERNAL_SERVER_ERROR, e.to_string(), None))?;
        if let Some(o) = v.as_object_mut() {
            o.insert("dataset".into(), Value::String(served));
        }
        Ok((v, reservation))
    });
    let out = tokio::time::timeout(left, task).await;
    let body = match out {
        Err(_) => {
            return Err(ApiError(
                StatusCode::GATEWAY_TIMEOUT,
                format!(
                    "the query ran longer than {:.0} s",
                    app.timeout.as_secs_f64()
                ),
                None,
            ))
        }
        Ok(Err(_)) => {
            return Err(ApiError(
                StatusCode::INTERNAL_SERVER_ERROR,
                "internal error while answering the query (logged)".into(),
                None,
            ))
        }
        Ok(Ok(Err(e))) => return Err(e),
        Ok(Ok(Ok(b))) => b,
    };
    Ok(body)
}

/// SDA parameters that only shape SDA's page (charts, decimals, which
/// cell statistics to print, output form): accepted and dropped, since an
/// answer here carries all of them.
const SDA_DISPLAY: &[&str] = &[
    "formid",
    "sdaprog",
    "sec508",
    "weightedn",
    "unweightedn",
    "wncases",
    "color",
    "se",
    "main",
    "transform",
    "percentileopt",
    "csvformat",
    "csvfilename",
    "ch_type",
    "ch_color",
    "ch_width",
    "ch_height",
    "ch_orientation",
    "ch_effects",
    "ch_bars",
    "ch_labels",
    "decpcts",
    "decse",
    "decdeft",
    "decwn",
    "decstats",
    "decmeans",
    "dectotals",
    "decdiffs",
    "decmedian",
    "decsd",
    "decminmax",
    "deczstats",
    "deccis",
    "decsdiffs",
    "ciopt",
    "cilower",
    "ciupper",
    "pctsopt",
    "summaryopt",
    "zstats",
    "deft",
    "mean",
    "sdev",
    "median",
    "totals",
    "cnt",
    "xrow",
    "xcol",
    "xcntl",
    "quiet",
    "run",
];

/// Translates an SDA query URL (`/sdaweb/analysis/exec?formid=tbf&
/// sdaprog=tables&dataset=…&row=…&column=…&filters=…&weightlist=…&
/// rowpct=on&design=complex&cflevel=95`, `sdaprog=means&dep=…`, or
/// `sdaprog=regress&dep=…&indep=…` and SDA's logit and probit) into
/// this API's URL for the same question, and redirects there (303).
async fn sda(
    state: State<Arc<App>>,
    headers: axum::http::HeaderMap,
    query: Query<Vec<(String, String)>>,
) -> Response {
    let html = wants_html(&headers);
    match sda_url(state, headers, query).await {
        Ok(r) => r,
        // A browser gets the refusal as a page, never raw JSON.
        Err(e) if html => page::html_error(e),
        Err(e) => e.into_response(),
    }
}

/// Whether a browser asks (it accepts HTML).
fn wants_html(headers: &axum::http::HeaderMap) -> bool {
    headers
        .get(axum::http::header::ACCEPT)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|a| a.contains("text/html"))
}

/// An SDA checkbox's value that means on.
fn is_on(v: &str) -> bool {
    matches!(
        v.trim().to_ascii_lowercase().as_str(),
        "on" | "yes" | "true" | "1"
    )
}

async fn sda_url(
    State(app): State<Arc<App>>,
    headers: axum::http::HeaderMap,
    Query(params): Query<Vec<(String, String)>>,
) -> Result<Response, ApiError> {
    if params.len() > 4 * MAX_PARAMS {
        return Err(bad(format!("{} parameters: too many", params.len())));
    }
    let mut p: BTreeMap<String, String> = BTreeMap::new();
    for (k, v) in params {
        if v.len() > MAX_PARAM {
            return Err(bad(format!(
                "parameter {k} is {} bytes long: at most {MAX_PARAM}",
                v.len()
            )));
        }
        let k = k.to_ascii_lowercase();
        if p.insert(k.clone(), v).is_some() {
            return Err(bad(format!("parameter {k} is given twice")));
        }
    }
    let take =
        |p: &mut BTreeMap<String, String>, k: &str| p.remove(k).filter(|v| !v.trim().is_empty());
    let on = |p: &mut BTreeMap<String, String>, k: &str| {
        take(p, k).is_some_and(|v| {
            matches!(
                v.trim().to_ascii_lowercase().as_str(),
                "on" | "yes" | "true" | "1"
            )
        })
    };
    let prog = take(&mut p, "sdaprog")
        .unwrap_or_default()
        .to_ascii_lowercase();
    let form = p
        .get("formid")
        .cloned()
        .unwrap_or_default()
        .to_ascii_lowercase();
    let dataset = take(&mut p, "dataset")
        .ok_or_else(|| bad("an SDA URL names its dataset= (one of GET /api/v1/datasets)"))?;
    app.path(&dataset)?;
    let mut out: Vec<(&str, String)> = Vec::new();
    let row = take(&mut p, "row");
    let col = take(&mut p, "column").or_else(|| take(&mut p, "col"));
    let control = take(&mut p, "control");
    // The boxes as SDA's form had them (the page has the same ones).
    let boxes: Vec<(&str, String)> = [("row", &row), ("col", &col), ("control", &control)]
        .into_iter()
        .filter_map(|(k, v)| v.clone().map(|v| (k, v)))
        .collect();
    let kind = if prog == "means" || form == "mnf" {
        // SDA's main statistic: means are what microtab gives; its totals
        // and differences from a base category are other numbers, so a URL
        // asking for them is refused rather than answered with means.
        if let Some(m) = take(&mut p, "main").filter(|m| !m.eq_ignore_ascii_case("means")) {
            return Err(bad(format!(
                "main={m:?}: an SDA means URL is translated for its means (main=means); differences from a base group are asked for with diff=BASE (GET /api/v1/datasets/{dataset}/means?var=…&by=…&diff=BASE, or the page's Compare means)"
            )));
        }
        let dep = take(&mut p, "dep")
            .ok_or_else(|| bad("an SDA means URL names its dependent variable (dep=)"))?;
        out.push(("var", dep));
        let by: Vec<String> = [row, col, control].into_iter().flatten().collect();
        if by.is_empty() {
            return Err(bad(
                "an SDA means URL names a row variable (row=) to group by",
            ));
        }
        out.push(("by", by.join(",")));
        // SDA's median and its one percentile (percentileopt=90), as
        // quantiles.
        let mut qs: Vec<String> = Vec::new();
        if p.get("median").is_some_and(|v| is_on(v)) {
            qs.push("0.5".into());
        }
        if let Some(x) = p
            .get("percentileopt")
            .map(|v| v.trim())
            .filter(|v| !v.is_empty())
        {
            match x.parse::<f64>() {
                Ok(v) if v > 0.0 && v < 100.0 => qs.push(format!("{}", v / 100.0)),
                _ => {
                    return Err(bad(format!(
                        "percentileopt={x:?}: expected a percentile between 0 and 100 (90)"
                    )))
                }
            }
        }
        if !qs.is_empty() {
            out.push(("quantiles", qs.join(",")));
        }
        "means"
    } else if prog.is_empty() || prog == "tables" || form == "tbf" {
        let row = row.ok_or_else(|| bad("an SDA tables URL names its row variable (row=)"))?;
        match col {
            Some(c) => {
                out.push(("row", row));
                out.push(("col", c));
                if let Some(c) = control {
                    out.push(("control", c));
                }
                let pcts: Vec<&str> = [("colpct", "col"), ("rowpct", "row"), ("totpct", "total")]
                    .into_iter()
                    .filter(|(k, _)| on(&mut p, k))
                    .map(|(_, v)| v)
                    .collect();
                if !pcts.is_empty() {
                    // Several: each cell shows them all, as SDA's do.
                    out.push(("pct", pcts.join(",")));
                }
                if on(&mut p, "chisq") || on(&mut p, "stats") {
                    out.push(("stats", "true".into()));
                }
                "tab"
            }
            None => {
                out.push(("var", row));
                "freq"
            }
        }
    } else if matches!(prog.as_str(), "regress" | "logit" | "probit") {
        // SDA's REGRESS and LOGIT/PROBIT: a dependent variable and a list
        // of independent ones, as a formula.
        let dep = take(&mut p, "dep")
            .ok_or_else(|| bad("an SDA regression URL names its dependent variable (dep=)"))?;
        let indep = take(&mut p, "indep")
            .or_else(|| take(&mut p, "indeps"))
            .ok_or_else(|| bad("an SDA regression URL names its independent variables (indep=)"))?;
        let terms = microtab_analysis::split_list(&indep, true);
        if let Some((t, (prefix, var))) = terms.iter().find_map(|t| {
            t.split_once(':')
                .filter(|(a, _)| a.len() <= 2 && !a.contains('('))
                .map(|x| (t, x))
        }) {
            let instead = if prefix.eq_ignore_ascii_case("d") {
                format!("factor({var})")
            } else {
                "the term in R's formula syntax".to_string()
            };
            return Err(bad(format!(
                "the SDA term {t:?} (a dummy or product prefix) is not translated: write {instead} in a formula (regress?formula=…, or the page's Regression)"
            )));
        }
        out.push(("formula", format!("{dep} ~ {}", terms.join(" + "))));
        let family = match prog.as_str() {
            "regress" => "gaussian",
            f => f,
        };
        out.push(("family", family.to_string()));
        "regress"
    } else {
        return Err(bad(format!(
            "sdaprog={prog:?}: microtab answers SDA's tables, means, regress, logit and probit"
        )));
    };
    if let Some(f) = take(&mut p, "filters") {
        out.push(("filter", f));
    }
    let srs = match take(&mut p, "design")
        .map(|d| d.to_ascii_lowercase())
        .as_deref()
    {
        None | Some("complex") => false,
        Some("srs") => true,
        Some(d) => return Err(bad(format!("design={d:?}: expected complex or srs"))),
    };
    let weight = take(&mut p, "weightlist").or_else(|| take(&mut p, "weight"));
    if let Some(w) = weight {
        // SDA's weight lists name one weight per choice; the first is used.
        out.push((
            "weight",
            w.split(',').next().unwrap_or("").trim().to_string(),
        ));
    } else if srs {
        // SDA's "SRS" keeps the weight, only the standard errors change:
        // the design's weight, named.
        let path = app.path(&dataset)?;
        if let Some(d) = open(&path, &dataset)?.manifest().design.as_ref() {
            out.push(("weight", d.weight.clone()));
        }
    }
    if srs {
        out.push(("design", "false".into()));
    }
    if let Some(l) = take(&mut p, "cflevel") {
        let v: f64 = l
            .trim()
            .parse()
            .map_err(|_| bad(format!("cflevel={l:?}: expected a percentage such as 95")))?;
        out.push(("level", format!("{}", v / 100.0)));
    }
    // Whatever is left must be one of SDA's display options.
    for k in p.keys() {
        if !SDA_DISPLAY.contains(&k.as_str()) && !k.starts_with("ch_") && !k.starts_with("dec") {
            return Err(bad(format!(
                "SDA parameter {k:?} is not understood here (the query would not be the same)"
            )));
        }
    }
    // A browser goes to the analysis page, anything else to the API.
    let url = if wants_html(&headers) {
        let mut q: Vec<(&str, String)> = Vec::new();
        if kind == "means" || kind == "regress" {
            q.push(("kind", kind.into()));
        }
        for (k, v) in &out {
            match (kind, *k) {
                ("means", "var") => q.push(("dep", v.clone())),
                ("means", "by") => q.extend(boxes.iter().cloned()),
                ("means", "quantiles") => {
                    // The page's boxes, as SDA's URL had them.
                    if p.get("median").is_some_and(|v| is_on(v)) {
                        q.push(("median", "on".into()));
                    }
                    if let Some(x) = p.get("percentileopt") {
                        q.push(("pctiles", x.trim().to_string()));
                    }
                }
                ("freq", "var") => q.push(("row", v.clone())),
                (_, "stats") => q.push(("stats", "on".into())),
                (_, "design") => q.push(("design", "off".into())),
                (_, "pct") => q.extend(v.split(',').map(|x| ("pct", x.to_string()))),
                _ => q.push((k, v.clone())),
            }
        }
        if kind == "tab" && !out.iter().any(|(k, _)| *k == "pct") {
            q.push(("pct", "none".into()));
        }
        // SDA's display choices, where the page has them.
        let is_on = |k: &str| {
            p.get(k).is_some_and(|v| {
                matches!(
                    v.trim().to_ascii_lowercase().as_str(),
                    "on" | "yes" | "true" | "1"
                )
            })
        };
        let display = [
            ("se", "se"),
            ("weightedn", "w"),
            ("unweightedn", "n"),
            ("color", "colour"),
            ("zstats", "z"),
        ];
        if display.iter().any(|(k, _)| p.contains_key(*k)) {
            // SDA's own choices, on or off; `shown` says they were made.
            q.extend(
                display
                    .iter()
                    .filter(|(k, _)| is_on(k))
                    .map(|(_, v)| ("show", v.to_string())),
            );
            q.push(("shown", "1".into()));
        }
        // SDA's decimals of percentages (or of means), the page's one choice.
        let dec = if kind == "means" {
            ["decmeans", "decpcts"]
        } else {
            ["decpcts", "decmeans"]
        };
        if let Some(d) = dec
            .iter()
            .find_map(|k| p.get(*k))
            .map(|d| d.trim())
            .filter(|d| matches!(*d, "0" | "1" | "2" | "3" | "4"))
        {
            q.push(("dec", d.to_string()));
        }
        match p.get("ch_type").map(|v| v.to_ascii_lowercase()).as_deref() {
            Some("bar") => q.push(("chart", "bar".into())),
            Some("noshow" | "none") => q.push(("chart", "none".into())),
            _ => {}
        }
        let query: Vec<String> = q
            .iter()
            .map(|(k, v)| format!("{k}={}", encode(v)))
            .collect();
        format!("/analysis/{}?{}", encode(&dataset), query.join("&"))
    } else {
        let query: String = out
            .iter()
            .map(|(k, v)| format!("{k}={}", encode(v)))
            .collect::<Vec<_>>()
            .join("&");
        format!("/api/v1/datasets/{}/{kind}?{query}", encode(&dataset))
    };
    let mut resp = (StatusCode::SEE_OTHER, Json(json!({ "location": url }))).into_response();
    if let Ok(v) = HeaderValue::from_str(&url) {
        resp.headers_mut().insert(axum::http::header::LOCATION, v);
    }
    Ok(resp)
}

/// One line per request on stderr: method, path and query, status, time.
async fn log(req: Request, next: Next) -> Response {
    let (method, uri) = (req.method().clone(), req.uri().clone());
    let t = Instant::now();
    let resp = next.run(req).await;
    eprintln!(
        "{method} {uri} {} {:.2} ms",
        resp.status().as_u16(),
        t.elapsed().as_secs_f64() * 1e3
    );
    resp
}

/// Errors that axum's extractors answer as plain text (a path that is not
/// UTF-8, a malformed query string) become JSON errors like every other
/// error of the API.
async fn json_errors(req: Request, next: Next) -> Response {
    let api = req.uri().path().starts_with("/api/");
    let resp = next.run(req).await;
    let status = resp.status();
    let json = resp
        .headers()
        .get(axum::http::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("application/json"));
    if !api || json || !(status.is_client_error() || status.is_server_error()) {
        return resp;
    }
    let body = axum::body::to_bytes(resp.into_body(), 64 << 10)
        .await
        .unwrap_or_default();
    ApiError(
        status,
        String::from_utf8_lossy(&body).trim().to_string(),
        None,
    )
    .into_response()
}

async fn not_found() -> ApiError {
    ApiError(
        StatusCode::NOT_FOUND,
        "no such page: the API is under /api/v1/datasets".into(),
        None,
    )
}

fn main() -> Result<()> {
    let a = Args::parse();
    if !a.dir.is_dir() {
        anyhow::bail!("{} is not a directory of datasets", a.dir.display());
    }
    let root = a
        .dir
        .canonicalize()
        .with_context(|| format!("cannot resolve {}", a.dir.display()))?;
    let cores = std::thread::available_parallelism().map_or(2, |n| n.get());
    // The settings `microtab tune` wrote, as every front end reads them.
    let settings = microtab_analysis::Settings::load()?;
    let app = Arc::new(App {
        datasets: RwLock::new(scan(&root)),
        root,
        scans: Arc::new(Semaphore::new(a.max_scans.unwrap_or(cores).max(1))),
        timeout: Duration::from_secs_f64(a.timeout.max(0.001)),
        max_cells: a.max_cells,
        scan: settings.scan.clone(),
        settings,
        budget: Arc::new(Budget {
            total: a.max_memory.unwrap_or_else(default_memory),
            used: std::sync::Mutex::new(0),
        }),
    });
    let router = Router::new()
        .route("/api/v1/datasets", get(datasets))
        .route("/api/v1/datasets/{name}", get(dataset))
        .route("/api/v1/datasets/{name}/{kind}", get(analyse))
        .route("/api/v1/datasets/{name}/variables/{var}", get(variable))
        .route("/sdaweb/analysis/exec", get(sda))
        .route("/sda", get(sda))
        .route("/", get(page::index))
        .route("/analysis/{name}", get(page::analysis))
        .route("/analysis/{name}/codebook", get(page::codebook))
        .route("/static/{file}", get(page::asset))
        .route("/favicon.ico", get(|| async { StatusCode::NO_CONTENT }))
        .fallback(not_found)
        .layer(axum::middleware::from_fn(json_errors))
        .layer(axum::middleware::from_fn(log))
        .with_state(app.clone());
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(cores.max(2))
        .enable_all()
        .build()?;
    rt.block_on(async move {
        let listener = tokio::net::TcpListener::bind((a.bind.as_str(), a.port))
            .await
            .with_context(|| format!("cannot listen on {}:{}", a.bind, a.port))?;
        let addr = listener.local_addr()?;
        let n = app.datasets.read().map(|d| d.len()).unwrap_or(0);
        println!(
            "listening on http://{addr} ({n} datasets under {})",
            app.root.display()
        );
        use std::io::Write;
        std::io::stdout().flush()?;
        accept_loop(
            listener,
            router,
            Duration::from_secs_f64(a.header_timeout.max(0.001)),
            a.max_connections.max(1),
        )
        .await
    })
}

/// Serves connections until Ctrl-C: at most `max` at once (the next
/// waits in the listen queue), each closed when a request's headers take
/// longer than `header_timeout` to arrive (a slow or idle client holds no
/// connection for long).
async fn accept_loop(
    listener: tokio::net::TcpListener,
    router: Router,
    header_timeout: Duration,
    max: usize,
) -> Result<()> {
    let slots = Arc::new(Semaphore::new(max));
    let stop = tokio::signal::ctrl_c();
    tokio::pin!(stop);
    loop {
        let permit = tokio::select! {
            _ = &mut stop => return Ok(()),
            p = slots.clone().acquire_owned() => p?,
        };
        let stream = tokio::select! {
            _ = &mut stop => return Ok(()),
            s = listener.accept() => match s {
                Ok((s, _)) => s,
                Err(e) => {
                    // Out of file descriptors and the like: wait, go on.
                    eprintln!("accept failed: {e}");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
        };
        let _ = stream.set_nodelay(true);
        let service = hyper_util::service::TowerToHyperService::new(router.clone());
        tokio::spawn(async move {
            let _permit = permit;
            let conn = hyper::server::conn::http1::Builder::new()
                .timer(hyper_util::rt::TokioTimer::new())
                .header_read_timeout(header_timeout)
                .serve_connection(hyper_util::rt::TokioIo::new(stream), service);
            // A client that went away or timed out: nothing to answer.
            let _ = conn.await;
        });
    }
}
