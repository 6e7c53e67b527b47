//! The native part of the `microtab` Python package: thin functions over
//! the analysis layer (the same requests and typed results as the CLI),
//! called by the Python API in `python/microtab/__init__.py`. Results
//! cross as the analysis layer's JSON; columns as their bytes. The GIL is
//! released while a query scans or a column decodes.

use microtab_analysis::Request;
use microtab_store::Dataset;
use pyo3::prelude::*;
use pyo3::types::PyBytes;
use serde_json::Value as Json;

mod common;
mod edit;
mod errors;
mod frame;
mod settings;
mod weight;

use common::{open, selection_term, to_json};
use errors::*;
use settings::{scan_options, settings};

/// The datasets at `paths`, opened.
fn open_all(paths: &[String]) -> PyResult<Vec<Dataset>> {
    paths.iter().map(|p| open(p)).collect()
}

/// A JSON argument from the Python side (a request, options) read.
fn parse(spec: &str) -> PyResult<Json> {
    serde_json::from_str(spec).map_err(|e| QueryError::new_err(e.to_string()))
}

/// The dataset's manifest (variables, types, labels, missing codes,
/// design) as JSON.
#[pyfunction]
fn _info(path: &str) -> PyResult<String> {
    let ds = open(path)?;
    to_json(ds.manifest())
}

/// The parts' directories of the catalog of parts at `path`, in record
/// order (`None`: `path` is not a catalog).
#[pyfunction]
fn _catalog_parts(path: &str) -> PyResult<Option<Vec<String>>> {
    microtab_analysis::catalog_parts(std::path::Path::new(path))
        .map(|o| o.map(|v| v.iter().map(|p| p.display().to_string()).collect()))
        .map_err(analysis_error)
}

/// Cuts the dataset at `path` into `parts` under the catalog directory
/// `out`; the catalog as JSON.
#[pyfunction]
fn _split(
    py: Python<'_>,
    path: &str,
    out: &str,
    parts: usize,
    force: bool,
    without_design: bool,
) -> PyResult<String> {
    let ds = open(path)?;
    let r = py
        .detach(|| {
            microtab_analysis::split(&ds, std::path::Path::new(out), parts, force, without_design)
        })
        .map_err(analysis_error)?;
    to_json(&r.catalog)
}

fn string(spec: &Json, key: &str) -> Option<String> {
    spec.get(key).and_then(Json::as_str).map(str::to_string)
}

/// A spec's boolean `key` (`false` when absent).
fn flag(spec: &Json, key: &str) -> bool {
    spec.get(key).and_then(Json::as_bool).unwrap_or(false)
}

/// The request a JSON object describes: `analysis` and the analysis
/// layer's typed [`Params`](microtab_analysis::Params) (lists stay lists:
/// a name is one string whatever it holds).
fn request(spec: &str) -> PyResult<Request> {
    let mut o = parse(spec)?
        .as_object()
        .cloned()
        .ok_or_else(|| QueryError::new_err("a request is a JSON object"))?;
    let analysis = o
        .remove("analysis")
        .and_then(|a| a.as_str().map(str::to_string))
        .unwrap_or_default();
    let params: microtab_analysis::Params =
        serde_json::from_value(Json::Object(o)).map_err(|e| QueryError::new_err(e.to_string()))?;
    params.request(&analysis).map_err(QueryError::new_err)
}

/// Answers a request (a JSON object: `analysis` and its options) over the
/// dataset at `path`, only over the records of `mask` when given (see
/// `selection_term`); the answer as the analysis layer's JSON.
#[pyfunction]
#[pyo3(signature = (path, spec, mask=None))]
fn _query(py: Python<'_>, path: &str, spec: &str, mask: Option<Vec<u8>>) -> PyResult<String> {
    let mut req = request(spec)?;
    let path = path.to_string();
    let answer = py.detach(move || -> PyResult<String> {
        let ds = open(&path)?;
        if let Some(m) = &mask {
            req.selection = Some(selection_term(m, ds.rows())?);
        }
        let a = microtab_analysis::run(&ds, &req, &scan_options()?).map_err(analysis_error)?;
        to_json(&a)
    })?;
    Ok(answer)
}

/// Answers a request over several datasets with the same variables as
/// if they were one (exact partial results merged); `masks`: each
/// dataset's share of a boolean mask over all their records (bitmaps as
/// `_query` takes one), `designs`: a JSON list of the design held for each
/// (built on it).
#[pyfunction]
#[pyo3(signature = (paths, spec, masks=None, designs=None))]
fn _query_many(
    py: Python<'_>,
    paths: Vec<String>,
    spec: &str,
    masks: Option<Vec<Vec<u8>>>,
    designs: Option<String>,
) -> PyResult<String> {
    let mut req = request(spec)?;
    let designs: Option<Vec<microtab_store::Design>> = designs
        .map(|d| serde_json::from_str(&d))
        .transpose()
        .map_err(|e| QueryError::new_err(format!("designs: {e}")))?;
    let count = |what: &str, n: usize| -> PyResult<()> {
        if n != paths.len() {
            return Err(pyo3::exceptions::PyValueError::new_err(format!(
                "{n} {what} for {} datasets (one each)",
                paths.len()
            )));
        }
        Ok(())
    };
    if let Some(m) = &masks {
        count("masks", m.len())?;
    }
    if let Some(d) = &designs {
        count("designs", d.len())?;
    }
    py.detach(move || -> PyResult<String> {
        let ds = open_all(&paths)?;
        let mut own = vec![microtab_analysis::PartOptions::default(); ds.len()];
        if let Some(designs) = designs {
            req.design = designs.first().cloned();
            for (o, d) in own.iter_mut().zip(designs) {
                o.design = Some(d);
            }
        }
        if let Some(masks) = masks {
            let mut n = 0;
            for ((o, m), d) in own.iter_mut().zip(&masks).zip(&ds) {
                let (bits, k) = common::selection_bits(m, d.rows())?;
                n += k;
                o.selection = Some(microtab_engine::Term::rows(bits, k));
            }
            // The answer shows the selection of all the datasets.
            req.selection = Some(microtab_engine::Term::rows(Vec::new(), n));
        }
        let a = microtab_analysis::run_many_each(&ds, &req, &own, &scan_options()?)
            .map_err(analysis_error)?;
        to_json(&a)
    })
}

/// A request's partial result over the dataset at `path` (only records
/// `start..end` when given): the analysis layer's exact `Partial`,
/// serialized (JSON; every f64 written so it reads back bit for bit), to
/// be merged with others and finished where the parts meet (Dask); in a
/// further `round` that `_finish` asked for (`None`: the first); on
/// `threads` threads when given (a Dask worker's share of its host's
/// cores), else on the process's pool.
#[pyfunction]
#[pyo3(signature = (path, spec, start=None, end=None, round=None, threads=None))]
fn _partial<'py>(
    py: Python<'py>,
    path: &str,
    spec: &str,
    start: Option<u64>,
    end: Option<u64>,
    round: Option<Vec<u8>>,
    threads: Option<usize>,
) -> PyResult<Bound<'py, PyBytes>> {
    let mut req = request(spec)?;
    let round: Option<microtab_analysis::Round> = round
        .map(|b| {
            serde_json::from_slice(&b).map_err(|e| {
                MicrotabError::new_err(format!("not a round of microtab partial results: {e}"))
            })
        })
        .transpose()?;
    let path = path.to_string();
    let bytes = py.detach(move || -> PyResult<Vec<u8>> {
        let ds = open(&path)?;
        if start.is_some() || end.is_some() {
            let rows = ds.manifest().rows;
            let (a, b) = (start.unwrap_or(0), end.unwrap_or(rows));
            if a > b || b > rows {
                return Err(QueryError::new_err(format!(
                    "records {a}..{b} are not within the dataset's {rows}"
                )));
            }
            req.rows = Some(a..b);
        }
        let opts = scan_options()?;
        let run = || microtab_analysis::partial_round(&ds, &req, round.as_ref(), &opts);
        let p = match threads {
            Some(n) => pool(n)?.install(run),
            None => run(),
        }
        .map_err(analysis_error)?;
        to_json(&p).map(String::into_bytes)
    })?;
    Ok(PyBytes::new(py, &bytes))
}

/// A pool of `n` threads (1 to 1024), made once per size and kept.
fn pool(n: usize) -> PyResult<std::sync::Arc<rayon::ThreadPool>> {
    use std::collections::HashMap;
    use std::sync::{Arc, Mutex};
    static POOLS: Mutex<Option<HashMap<usize, Arc<rayon::ThreadPool>>>> = Mutex::new(None);
    if !(1..=1024).contains(&n) {
        return Err(pyo3::exceptions::PyValueError::new_err(format!(
            "threads={n}: give 1 to 1024"
        )));
    }
    let mut pools = POOLS.lock().unwrap_or_else(|e| e.into_inner());
    let pools = pools.get_or_insert_with(HashMap::new);
    if let Some(p) = pools.get(&n) {
        return Ok(p.clone());
    }
    let p = Arc::new(
        rayon::ThreadPoolBuilder::new()
            .num_threads(n)
            .thread_name(|i| format!("microtab-{i}"))
            .build()
            .map_err(|e| MicrotabError::new_err(format!("cannot start {n} threads: {e}")))?,
    );
    pools.insert(n, p.clone());
    Ok(p)
}

/// Refuses a text value that the request `spec` names and none of the
/// datasets at `paths` has (each part's `_partial` cannot judge that: a
/// part may lack a value the others have). Called once where the parts'
/// results are merged.
#[pyfunction]
fn _check_values(py: Python<'_>, paths: Vec<String>, spec: &str) -> PyResult<()> {
    let req = request(spec)?;
    py.detach(move || -> PyResult<()> {
        let sets = open_all(&paths)?;
        let refs: Vec<&Dataset> = sets.iter().collect();
        microtab_analysis::check_values(&refs, &req).map_err(analysis_error)
    })
}

fn read_partial(b: &[u8]) -> PyResult<microtab_analysis::Partial> {
    serde_json::from_slice(b)
        .map_err(|e| MicrotabError::new_err(format!("not a microtab partial result: {e}")))
}

/// Merges partial results of one request (exact; in any order).
#[pyfunction]
fn _merge<'py>(py: Python<'py>, parts: Vec<Vec<u8>>) -> PyResult<Bound<'py, PyBytes>> {
    let bytes = py.detach(move || -> PyResult<Vec<u8>> {
        let mut acc: Option<microtab_analysis::Partial> = None;
        for b in &parts {
            let p = read_partial(b)?;
            acc = Some(match acc {
                Some(a) => a.merge(p).map_err(analysis_error)?,
                None => p,
            });
        }
        let p = acc.ok_or_else(|| QueryError::new_err("no partial results to merge"))?;
        to_json(&p).map(String::into_bytes)
    })?;
    Ok(PyBytes::new(py, &bytes))
}

/// The answer to a request (JSON object) from its merged partial result,
/// as the analysis layer's JSON (`str`), or the further round of partial
/// results it needs (`bytes`: pass it to `_partial` for every part, merge,
/// finish again).
#[pyfunction]
fn _finish(py: Python<'_>, part: Vec<u8>, spec: &str) -> PyResult<Py<PyAny>> {
    let req = request(spec)?;
    let step = py.detach(move || -> PyResult<Result<String, Vec<u8>>> {
        let p = read_partial(&part)?;
        match p.step(&req).map_err(analysis_error)? {
            microtab_analysis::Step::Answer(a) => to_json(&a).map(Ok),
            microtab_analysis::Step::Again(r) => to_json(&r).map(|s| Err(s.into_bytes())),
        }
    })?;
    Ok(match step {
        Ok(answer) => answer.into_pyobject(py)?.into_any().unbind(),
        Err(round) => PyBytes::new(py, &round).into_any().unbind(),
    })
}

/// The text values of a JSON object (`{"X": ["9", "8"]}`) as pairs.
fn pairs(spec: &Json, key: &str) -> Vec<(String, Vec<String>)> {
    let text = |x: &Json| x.as_str().map_or_else(|| x.to_string(), str::to_string);
    spec.get(key)
        .and_then(Json::as_object)
        .map(|o| {
            o.iter()
                .map(|(k, v)| {
                    let vals = match v {
                        Json::Array(a) => a.iter().map(text).collect(),
                        x => vec![text(x)],
                    };
                    (k.clone(), vals)
                })
                .collect()
        })
        .unwrap_or_default()
}

/// The import options a JSON object of keywords gives (`missing`,
/// `types`, `na`, `na_text`, `delimiter`, `encoding`, `infer_rows`,
/// `rectype`, `keep_niu`, `plain`, `ddi`, `catalog`, `decimal_comma`): every word parsed as the CLI
/// parses its flags.
fn import_options(spec: &Json) -> PyResult<microtab_ingest::ImportOptions> {
    let bad = |k: &str, v: &str, e: microtab_ingest::WordError| {
        QueryError::new_err(format!("{k}={v:?}: {e}"))
    };
    let mut o = microtab_ingest::ImportOptions::default();
    for (name, codes) in pairs(spec, "missing") {
        o.add_missing(&name, codes)
            .map_err(|e| QueryError::new_err(format!("missing[{name:?}]: {e}")))?;
    }
    for (name, t) in pairs(spec, "types") {
        let word = t.first().cloned().unwrap_or_default();
        o.add_type(&name, &word)
            .map_err(|e| QueryError::new_err(format!("types[{name:?}] = {word:?}: {e}")))?;
    }
    let list = |k: &str| {
        spec.get(k).and_then(Json::as_array).map(|a| {
            a.iter()
                .map(|x| x.as_str().map_or_else(|| x.to_string(), str::to_string))
                .collect()
        })
    };
    o.na = list("na");
    o.na_text = list("na_text");
    if let Some(d) = string(spec, "delimiter") {
        o.delimiter = Some(
            d.parse::<microtab_ingest::Delimiter>()
                .map_err(|e| bad("delimiter", &d, e))?
                .0,
        );
    }
    if let Some(e) = string(spec, "encoding") {
        o.encoding = Some(e.parse().map_err(|x| bad("encoding", &e, x))?);
    }
    if let Some(n) = string(spec, "infer_rows") {
        o.sample_rows = n
            .parse::<microtab_ingest::InferRows>()
            .map_err(|e| bad("infer_rows", &n, e))?
            .0;
    }
    o.record_type = string(spec, "rectype");
    o.keep_niu = flag(spec, "keep_niu");
    o.plain = flag(spec, "plain");
    o.decimal_comma = flag(spec, "decimal_comma");
    o.catalog = string(spec, "catalog").map(std::path::PathBuf::from);
    Ok(o)
}

/// Sets the design an IPUMS extract's replicate weights imply.
fn ipums_design(target: &str) -> PyResult<()> {
    let mut ds = open(target)?;
    if let Some(d) = microtab_analysis::survey::ipums_design(&ds) {
        ds.update_manifest(|m| m.design = Some(d))
            .map_err(store_error)?;
    }
    Ok(())
}

/// A Python callable `(bytes done, bytes total)` as an import's progress
/// callback, called at most every 100 ms (and at the end) with the GIL
/// taken; its errors are ignored (a progress bar never fails an import).
fn progress_of(cb: Option<Py<PyAny>>) -> Option<microtab_ingest::Progress> {
    let cb = cb?;
    let last = std::sync::Mutex::new(None::<std::time::Instant>);
    Some(std::sync::Arc::new(move |done: u64, total: u64| {
        let now = std::time::Instant::now();
        {
            let mut l = last.lock().unwrap_or_else(|e| e.into_inner());
            if done < total && l.is_some_and(|t| now.duration_since(t).as_millis() < 100) {
                return;
            }
            *l = Some(now);
        }
        Python::attach(|py| {
            let _ = cb.call1(py, (done, total));
        });
    }))
}

/// An import's options from its JSON spec (`import_options`), with the
/// progress callback and the I/O settings in force; the spec too.
fn import_spec(
    spec: &str,
    progress: Option<Py<PyAny>>,
) -> PyResult<(Json, microtab_ingest::ImportOptions)> {
    let spec = parse(spec)?;
    let mut o = import_options(&spec)?;
    o.progress = progress_of(progress);
    o.io = settings()?.io;
    Ok((spec, o))
}

/// Imports a file: CSV (`format` `csv`, an IPUMS codebook optional),
/// fixed-width (`fixed`, its codebook needed), text described by setup
/// files (`setup`, their paths `setup`), a SAS transport file (`xport`), a
/// Stata file (`dta`), an SPSS system file (`sav`), an SPSS portable file
/// (`por`), a SAS data set (`sas7bdat`, its format catalog `catalog`), or
/// any of them by its content (`auto`); the codebook's path `ddi` and the
/// other options in the JSON `spec` (see `import_options`). With a
/// codebook, sets the design its replicate weights imply. `vars` (names)
/// and `filter` (SDA-style) keep some variables and records: the import
/// goes to a staging dataset beside `target`, the selection to `target`
/// (`microtab_analysis::SelectedImport`, as the CLI's). The summary as
/// JSON.
#[pyfunction]
#[pyo3(signature = (format, input, target, force, spec, progress=None))]
fn _import_text(
    py: Python<'_>,
    format: &str,
    input: &str,
    target: &str,
    force: bool,
    spec: &str,
    progress: Option<Py<PyAny>>,
) -> PyResult<String> {
    const FORMATS: [&str; 9] = [
        "csv", "fixed", "setup", "xport", "dta", "sav", "por", "sas7bdat", "auto",
    ];
    if !FORMATS.contains(&format) {
        return Err(QueryError::new_err(format!(
            "format {format:?}: expected csv, fixed, setup, xport, dta, sav, por, sas7bdat or auto"
        )));
    }
    let (spec, o) = import_spec(spec, progress)?;
    let vars = names_of(&spec, "vars")?;
    let filter = string(&spec, "filter");
    let selected = !vars.is_empty() || filter.is_some();
    let format = format.to_string();
    let (input, target) = (input.to_string(), target.to_string());
    let s = py.detach(move || -> PyResult<microtab_ingest::ImportSummary> {
        if !selected {
            return import_as(&format, &input, &target, force, &spec, o);
        }
        let sel = microtab_analysis::SelectedImport::begin(
            target.as_ref(),
            force,
            &vars,
            filter.as_deref(),
        )
        .map_err(select_error)?;
        let staging = sel.staging().to_string_lossy().into_owned();
        let named = |e: PyErr| renamed(e, |m| m.replace(&staging, &target));
        let mut s = import_as(&format, &input, &staging, true, &spec, o).map_err(named)?;
        let r = sel.finish().map_err(select_error)?;
        s.path = target.clone().into();
        s.rows = r.rows;
        s.variables = r.vars.len();
        Ok(s)
    })?;
    Ok(summary(&s))
}

/// The names a spec gives under `key`: a list of strings or one string
/// (a list of names separated by commas or spaces, as `--vars` takes).
fn names_of(spec: &Json, key: &str) -> PyResult<Vec<String>> {
    match spec.get(key) {
        None | Some(Json::Null) => Ok(Vec::new()),
        Some(Json::String(s)) => Ok(vec![s.clone()]),
        Some(Json::Array(a)) => a
            .iter()
            .map(|x| {
                x.as_str().map(str::to_string).ok_or_else(|| {
                    QueryError::new_err(format!("{key}: {x} is not a variable name"))
                })
            })
            .collect(),
        Some(x) => Err(QueryError::new_err(format!(
            "{key}={x}: expected a list of variable names or one string of them"
        ))),
    }
}

/// Imports `input` as `format` (see [`_import_text`]) into `target`;
/// with a codebook, sets the design its replicate weights imply.
fn import_as(
    format: &str,
    input: &str,
    target: &str,
    force: bool,
    spec: &Json,
    mut o: microtab_ingest::ImportOptions,
) -> PyResult<microtab_ingest::ImportSummary> {
    let (i, t): (&std::path::Path, &std::path::Path) = (input.as_ref(), target.as_ref());
    let s = match format {
        "setup" => {
            let files: Vec<std::path::PathBuf> = spec
                .get("setup")
                .and_then(|v| v.as_array())
                .map(|a| {
                    a.iter()
                        .filter_map(|x| x.as_str())
                        .map(Into::into)
                        .collect()
                })
                .unwrap_or_default();
            let setup = microtab_ingest::read_setup(&files).map_err(ingest_error)?;
            let mut s =
                microtab_ingest::import_setup(i, &setup, t, force, &o).map_err(ingest_error)?;
            s.notes
                .splice(0..0, setup.codebook.warnings.iter().cloned());
            return Ok(s);
        }
        "xport" => microtab_ingest::import_xport(i, t, force, &o),
        "dta" => microtab_ingest::import_dta(i, t, force, &o),
        "sav" => microtab_ingest::import_sav(i, t, force, &o),
        "por" => microtab_ingest::import_por(i, t, force, &o),
        "sas7bdat" => microtab_ingest::import_sas7bdat(i, t, force, &o),
        "auto" => microtab_ingest::import(i, t, force, &o),
        _ => {
            // CSV (a codebook optional) or fixed-width (its codebook needed).
            let ddi = string(spec, "ddi");
            let codebook = ddi
                .as_deref()
                .map(|d| {
                    microtab_ingest::Codebook::read(std::path::Path::new(d)).map_err(ingest_error)
                })
                .transpose()?;
            let s = match (format == "fixed", codebook) {
                (true, Some(cb)) => microtab_ingest::import_fixed(i, &cb, t, force, &o),
                (true, None) => {
                    return Err(QueryError::new_err(
                        "a fixed-width file is read with its DDI codebook (ddi)",
                    ))
                }
                (false, codebook) => {
                    o.codebook = codebook;
                    microtab_ingest::import_csv(i, t, force, &o)
                }
            }
            .map_err(ingest_error)?;
            if ddi.is_some() {
                ipums_design(target)?;
            }
            return Ok(s);
        }
    };
    s.map_err(ingest_error)
}

/// The design a JSON description gives (`weight`, `repweights`, `type`,
/// `rho`, `scale`, `rscales`, `mse`, `strata`, `cluster`, `fpc`,
/// `lonely_psu`); `None` for `null`.
fn design_spec(spec: &Json) -> PyResult<Option<microtab_analysis::DesignSpec>> {
    let bad = |m: String| QueryError::new_err(m);
    if spec.is_null() {
        return Ok(None);
    }
    let weight = string(spec, "weight").ok_or_else(|| bad("a design needs a weight".into()))?;
    let mut d = microtab_analysis::DesignSpec::new(weight);
    d.repweights = match spec.get("repweights") {
        None | Some(Json::Null) => None,
        Some(Json::String(s)) => Some(s.clone()),
        Some(Json::Array(a)) => Some(
            a.iter()
                .map(|x| x.as_str().map(str::to_string).ok_or_else(|| bad(format!("repweights: {x} is not a variable name"))))
                .collect::<PyResult<Vec<_>>>()?
                .join(","),
        ),
        Some(x) => return Err(bad(format!("repweights={x}: expected a name, a range such as 'REPWTP1-REPWTP80', or a list of names"))),
    };
    if let Some(t) = string(spec, "type") {
        d.kind = t.parse().map_err(bad)?;
    }
    if let Some(l) = string(spec, "lonely_psu") {
        d.lonely_psu = l.parse().map_err(bad)?;
    }
    let num = |k: &str| -> PyResult<Option<f64>> {
        match spec.get(k) {
            None | Some(Json::Null) => Ok(None),
            Some(x) => x
                .as_f64()
                .map(Some)
                .ok_or_else(|| bad(format!("{k}={x}: expected a number"))),
        }
    };
    d.rho = num("rho")?;
    d.scale = num("scale")?;
    if let Some(r) = spec.get("rscales").filter(|x| !x.is_null()) {
        let a = r
            .as_array()
            .ok_or_else(|| bad(format!("rscales={r}: expected a list of numbers")))?;
        d.rscales = Some(
            a.iter()
                .map(|x| {
                    x.as_f64()
                        .ok_or_else(|| bad(format!("rscales: {x} is not a number")))
                })
                .collect::<PyResult<Vec<_>>>()?,
        );
    }
    d.mse = spec.get("mse").and_then(Json::as_bool).unwrap_or(true);
    d.strata = string(spec, "strata");
    d.cluster = string(spec, "cluster");
    d.fpc = string(spec, "fpc");
    Ok(Some(d))
}

/// Sets the dataset's survey design (a JSON description, see
/// `design_spec`), or clears it (`null`); the stored design as JSON.
#[pyfunction]
fn _set_design(py: Python<'_>, path: &str, spec: &str) -> PyResult<String> {
    let d = design_spec(&parse(spec)?)?;
    let path = path.to_string();
    py.detach(move || -> PyResult<String> {
        let mut ds = open(&path)?;
        let design = d
            .map(|d| microtab_analysis::build_design(&ds, &d))
            .transpose()
            .map_err(analysis_error)?;
        let out = to_json(&design)?;
        ds.update_manifest(|m| m.design = design)
            .map_err(store_error)?;
        Ok(out)
    })
}

/// The design a JSON description gives (see `design_spec`), built and
/// checked against the dataset as `_set_design` does but not stored (a
/// request's `with_design`); as JSON.
#[pyfunction]
fn _build_design(py: Python<'_>, path: &str, spec: &str) -> PyResult<String> {
    let d = design_spec(&parse(spec)?)?;
    let path = path.to_string();
    py.detach(move || -> PyResult<String> {
        let ds = open(&path)?;
        let design = d
            .map(|d| microtab_analysis::build_design(&ds, &d))
            .transpose()
            .map_err(analysis_error)?;
        to_json(&design)
    })
}

/// An import's summary as JSON, its notes worded with the keywords of
/// the import functions.
fn summary(s: &microtab_ingest::ImportSummary) -> String {
    serde_json::json!({
        "path": s.path.display().to_string(),
        "rows": s.rows,
        "variables": s.variables,
        "bytes_in": s.bytes_in,
        "bytes_out": s.bytes_out,
        "notes": s.notes.iter().map(|n| n.word(keyword)).collect::<Vec<_>>(),
    })
    .to_string()
}

fn export_options(spec: &Json) -> PyResult<microtab_arrow::ExportOptions> {
    let mut o = microtab_arrow::ExportOptions {
        columns: spec.get("columns").and_then(Json::as_array).map(|a| {
            a.iter()
                .filter_map(|v| v.as_str().map(str::to_string))
                .collect()
        }),
        filter: string(spec, "filter"),
        labels: flag(spec, "labels"),
        keep_missing_codes: flag(spec, "keep_missing_codes"),
        exact_decimals: flag(spec, "exact_decimals"),
        ..Default::default()
    };
    if let Some(n) = spec.get("batch_rows").and_then(Json::as_u64) {
        o.batch_rows = n.max(1) as usize;
    }
    Ok(o)
}

/// The dataset's records as an Arrow C stream (a PyCapsule named
/// `arrow_array_stream`): batches decoded on every core as the consumer
/// asks for them (`spec`: `columns`, `filter`, `labels`,
/// `keep_missing_codes`, `exact_decimals`, `batch_rows`), only of the
/// records of `mask` when given (see `selection_term`).
#[pyfunction]
#[pyo3(signature = (path, spec, mask=None))]
fn _arrow_stream<'py>(
    py: Python<'py>,
    path: &str,
    spec: &str,
    mask: Option<Vec<u8>>,
) -> PyResult<Bound<'py, pyo3::types::PyCapsule>> {
    let spec = parse(spec)?;
    let mut opts = export_options(&spec)?;
    let path = path.to_string();
    let stored = match string(&spec, "dtypes").as_deref() {
        None | Some("wide") => false,
        Some("stored") => true,
        Some(d) => {
            return Err(pyo3::exceptions::PyValueError::new_err(format!(
                "dtypes={d:?}: expected 'wide' or 'stored'"
            )))
        }
    };
    let batches = py.detach(move || -> PyResult<microtab_arrow::Batches> {
        let ds = open(&path)?;
        opts.selection = mask.map(|m| selection_term(&m, ds.rows())).transpose()?;
        microtab_arrow::batches(&ds, &opts).map_err(arrow_error)
    })?;
    // The stored types go over as built (no copy); the wide ones are
    // converted batch by batch as the consumer reads.
    let reader: Box<dyn arrow_array::RecordBatchReader + Send> = if stored {
        Box::new(batches)
    } else {
        Box::new(frame::Widened::new(batches))
    };
    let stream = arrow_array::ffi_stream::FFI_ArrowArrayStream::new(reader);
    // The capsule owns the stream (its pointer is the struct, as the
    // interface requires); a consumer moves it out and leaves `release`
    // null, so dropping the capsule releases only an unconsumed stream.
    pyo3::types::PyCapsule::new_with_value(py, stream, c"arrow_array_stream")
}

/// Writes the dataset's records as a Parquet file (options as for
/// `_arrow_stream`, plus `compression`, `force`; only the records of
/// `mask` when given); a summary as JSON.
#[pyfunction]
#[pyo3(signature = (path, out, spec, mask=None))]
fn _to_parquet(
    py: Python<'_>,
    path: &str,
    out: &str,
    spec: &str,
    mask: Option<Vec<u8>>,
) -> PyResult<String> {
    let spec = parse(spec)?;
    let mut opts = export_options(&spec)?;
    let compression: microtab_arrow::Compression = string(&spec, "compression")
        .as_deref()
        .unwrap_or("snappy")
        .parse()
        .map_err(QueryError::new_err)?;
    let force = flag(&spec, "force");
    let (path, out) = (path.to_string(), out.to_string());
    py.detach(move || -> PyResult<String> {
        let ds = open(&path)?;
        opts.selection = mask.map(|m| selection_term(&m, ds.rows())).transpose()?;
        let s = microtab_arrow::write_parquet(&ds, out.as_ref(), force, &opts, compression)
            .map_err(arrow_error)?;
        Ok(serde_json::json!({
            "path": s.path.display().to_string(),
            "rows": s.rows,
            "variables": s.variables,
            "bytes": s.bytes,
            "design_note": s.design_note,
        })
        .to_string())
    })
}

/// Writes the dataset's records as a Stata file, release 118, or with
/// `format` `sav` an SPSS system file (`spec`: `columns`, `filter`,
/// `force`, `format`, `labels`: false for no value-label sets; only the
/// records of `mask` when given); a summary as JSON (`notes` among it).
#[pyfunction]
#[pyo3(signature = (path, out, spec, mask=None))]
fn _to_stata(
    py: Python<'_>,
    path: &str,
    out: &str,
    spec: &str,
    mask: Option<Vec<u8>>,
) -> PyResult<String> {
    let spec = parse(spec)?;
    let columns: Option<Vec<String>> = spec.get("columns").and_then(Json::as_array).map(|a| {
        a.iter()
            .filter_map(|x| x.as_str().map(str::to_string))
            .collect()
    });
    let filter = string(&spec, "filter").filter(|f| !f.trim().is_empty());
    let opts = microtab_ingest::WriteOptions {
        force: flag(&spec, "force"),
        value_labels: spec.get("labels").and_then(Json::as_bool).unwrap_or(true),
    };
    let sav = string(&spec, "format").as_deref() == Some("sav");
    let (path, out) = (path.to_string(), out.to_string());
    py.detach(move || -> PyResult<String> {
        let ds = open(&path)?;
        let vars: Vec<microtab_store::Variable> = match &columns {
            None => ds.manifest().variables.clone(),
            Some(names) => names
                .iter()
                .map(|n| ds.variable(n).cloned().map_err(store_error))
                .collect::<PyResult<_>>()?,
        };
        let mut terms = match &filter {
            Some(f) => microtab_engine::parse_filter(f).map_err(engine_error)?,
            None => Vec::new(),
        };
        terms.extend(mask.map(|m| selection_term(&m, ds.rows())).transpose()?);
        let sel = if terms.is_empty() {
            None
        } else {
            Some(microtab_engine::subset::selection(&ds, &terms).map_err(engine_error)?)
        };
        let sel = sel.as_ref().map(|(b, n)| (b.as_slice(), *n));
        let w = if sav {
            microtab_ingest::write_sav(&ds, &vars, sel, out.as_ref(), opts)
        } else {
            microtab_ingest::write_dta(&ds, &vars, sel, out.as_ref(), opts)
        }
        .map_err(ingest_error)?;
        Ok(serde_json::json!({
            "path": out,
            "rows": w.rows,
            "variables": w.vars,
            "notes": w.notes,
        })
        .to_string())
    })
}

/// Imports a Parquet file (`ddi`: a codebook's path; `keep_niu`; `plain`).
#[pyfunction]
fn _import_parquet(
    py: Python<'_>,
    input: &str,
    target: &str,
    force: bool,
    spec: &str,
) -> PyResult<String> {
    let spec = parse(spec)?;
    let ddi = string(&spec, "ddi");
    let plain = flag(&spec, "plain");
    let keep_niu = flag(&spec, "keep_niu");
    let (input, target) = (input.to_string(), target.to_string());
    let s = py.detach(move || -> PyResult<microtab_ingest::ImportSummary> {
        let mut codebook = match ddi {
            Some(d) => Some(
                microtab_ingest::Codebook::read(std::path::Path::new(&d)).map_err(ingest_error)?,
            ),
            None => None,
        };
        if keep_niu {
            codebook
                .iter_mut()
                .for_each(microtab_ingest::Codebook::keep_niu_codes);
        }
        let o = microtab_arrow::ImportOptions { codebook, plain };
        microtab_arrow::import_parquet(input.as_ref(), target.as_ref(), force, &o)
            .map_err(arrow_error)
    })?;
    Ok(summary(&s))
}

/// The native module `microtab._microtab`.
#[pymodule]
fn _microtab(m: &Bound<'_, PyModule>) -> PyResult<()> {
    let py = m.py();
    m.add("MicrotabError", py.get_type::<MicrotabError>())?;
    m.add("QueryError", py.get_type::<QueryError>())?;
    m.add("TooLargeError", py.get_type::<TooLargeError>())?;
    m.add("CorruptError", py.get_type::<CorruptError>())?;
    m.add("LockedError", py.get_type::<LockedError>())?;
    m.add("ChangedError", py.get_type::<ChangedError>())?;
    m.add("InputError", py.get_type::<InputError>())?;
    m.add("_MAX_ROUNDS", microtab_analysis::MAX_ROUNDS)?;
    m.add_function(wrap_pyfunction!(_info, m)?)?;
    m.add_function(wrap_pyfunction!(_catalog_parts, m)?)?;
    m.add_function(wrap_pyfunction!(_split, m)?)?;
    m.add_function(wrap_pyfunction!(_query, m)?)?;
    m.add_function(wrap_pyfunction!(_query_many, m)?)?;
    m.add_function(wrap_pyfunction!(_partial, m)?)?;
    m.add_function(wrap_pyfunction!(_check_values, m)?)?;
    m.add_function(wrap_pyfunction!(_merge, m)?)?;
    m.add_function(wrap_pyfunction!(_finish, m)?)?;
    frame::register(m)?;
    m.add_function(wrap_pyfunction!(_import_text, m)?)?;
    m.add_function(wrap_pyfunction!(_set_design, m)?)?;
    m.add_function(wrap_pyfunction!(_build_design, m)?)?;
    edit::register(m)?;
    weight::register(m)?;
    m.add_function(wrap_pyfunction!(_arrow_stream, m)?)?;
    m.add_function(wrap_pyfunction!(_to_parquet, m)?)?;
    m.add_function(wrap_pyfunction!(_to_stata, m)?)?;
    m.add_function(wrap_pyfunction!(_import_parquet, m)?)?;
    Ok(())
}
