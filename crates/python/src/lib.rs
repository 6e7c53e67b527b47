//! The native part of the `microtab` Python package: thin functions over
//! the analysis layer (the same requests and typed results as the CLI),
//! called by the Python API in `python/microtab/__init__.py`. Results
//! cross as the analysis layer's JSON; columns as their bytes. The GIL is
//! released while a query scans or a column decodes.

use microtab_analysis::{Analysis, Pct, PctInterval, Request, ScanOptions};
use microtab_store::{ColumnData, Dataset, NativeType};
use pyo3::create_exception;
use pyo3::exceptions::{PyException, PyFileNotFoundError, PyOSError, PyPermissionError};
use pyo3::prelude::*;
use pyo3::types::PyBytes;
use serde_json::Value as Json;

create_exception!(
    _microtab,
    MicrotabError,
    PyException,
    "Base class of microtab's errors."
);
create_exception!(
    _microtab,
    QueryError,
    MicrotabError,
    "A request that does not fit the dataset: unknown variable, bad filter or recode, design mismatch."
);
create_exception!(
    _microtab,
    TooLargeError,
    QueryError,
    "A result larger than the request allows (cells, distinct values)."
);
create_exception!(
    _microtab,
    CorruptError,
    MicrotabError,
    "A dataset file does not match its checksum or is not a microtab file."
);
create_exception!(
    _microtab,
    LockedError,
    MicrotabError,
    "Another process is changing the dataset."
);

fn io_error(e: &microtab_io::Error) -> PyErr {
    let msg = e.to_string();
    match e.error.kind() {
        std::io::ErrorKind::NotFound => PyFileNotFoundError::new_err(msg),
        std::io::ErrorKind::PermissionDenied => PyPermissionError::new_err(msg),
        _ => PyOSError::new_err(msg),
    }
}

fn store_error(e: microtab_store::Error) -> PyErr {
    use microtab_store::Error as E;
    match &e {
        E::Io(io) => io_error(io),
        E::NotADataset { .. } => PyFileNotFoundError::new_err(e.to_string()),
        E::Corrupt { .. } => CorruptError::new_err(e.to_string()),
        E::UnknownVariable { .. } => QueryError::new_err(e.to_string()),
        E::Locked { .. } => LockedError::new_err(e.to_string()),
        _ => MicrotabError::new_err(e.to_string()),
    }
}

fn engine_error(e: microtab_engine::Error) -> PyErr {
    use microtab_engine::Error as E;
    match e {
        E::Store(s) => store_error(s),
        E::TooLarge(m) => TooLargeError::new_err(m),
        e => QueryError::new_err(e.to_string()),
    }
}

fn analysis_error(e: microtab_analysis::Error) -> PyErr {
    use microtab_analysis::Error as E;
    match e {
        E::Engine(e) => engine_error(e),
        E::Store(s) => store_error(s),
        E::InDataset { dataset, error } => {
            let inner = analysis_error(*error);
            Python::attach(|py| {
                let msg = format!("{dataset}: {}", inner.value(py));
                if inner.is_instance_of::<QueryError>(py) {
                    QueryError::new_err(msg)
                } else {
                    MicrotabError::new_err(msg)
                }
            })
        }
        e => QueryError::new_err(e.to_string()),
    }
}

fn open(path: &str) -> PyResult<Dataset> {
    Dataset::open(std::path::Path::new(path)).map_err(store_error)
}

/// The dataset's manifest (variables, types, labels, missing codes,
/// design) as JSON.
#[pyfunction]
fn _info(path: &str) -> PyResult<String> {
    let ds = open(path)?;
    serde_json::to_string(ds.manifest()).map_err(|e| MicrotabError::new_err(e.to_string()))
}

/// A text variable's dictionary (code `i` is entry `i`).
#[pyfunction]
fn _dictionary(path: &str, name: &str) -> PyResult<Vec<String>> {
    let ds = open(path)?;
    let var = ds.variable(name).map_err(store_error)?.clone();
    ds.dictionary(&var).map_err(store_error)
}

fn string(spec: &Json, key: &str) -> Option<String> {
    spec.get(key).and_then(Json::as_str).map(str::to_string)
}

fn request(spec: &Json) -> PyResult<Request> {
    let bad = |m: String| QueryError::new_err(m);
    let need = |k: &str| string(spec, k).ok_or_else(|| bad(format!("missing '{k}'")));
    let analysis = match spec.get("analysis").and_then(Json::as_str) {
        Some("freq") => Analysis::Freq { var: need("var")? },
        Some("tab") => Analysis::Tab {
            row: need("row")?,
            col: need("col")?,
            control: string(spec, "control"),
            pct: match string(spec, "pct").as_deref() {
                None => None,
                Some("row") => Some(Pct::Row),
                Some("col") | Some("column") => Some(Pct::Col),
                Some("total") => Some(Pct::Total),
                Some(p) => return Err(bad(format!("pct={p:?}: expected 'row', 'col' or 'total'"))),
            },
            stats: spec.get("stats").and_then(Json::as_bool).unwrap_or(false),
        },
        Some("means") => Analysis::Means {
            var: need("var")?,
            by: spec
                .get("by")
                .and_then(Json::as_array)
                .map(|a| {
                    a.iter()
                        .filter_map(|v| v.as_str().map(str::to_string))
                        .collect()
                })
                .unwrap_or_default(),
        },
        other => return Err(bad(format!("unknown analysis {other:?}"))),
    };
    let mut r = Request::new(analysis);
    r.weight = string(spec, "weight");
    r.filter = string(spec, "filter");
    r.include_missing = spec
        .get("include_missing")
        .and_then(Json::as_bool)
        .unwrap_or(false);
    r.use_design = spec.get("design").and_then(Json::as_bool).unwrap_or(true);
    if let Some(l) = spec.get("level").and_then(Json::as_f64) {
        if !(l > 0.0 && l < 1.0) {
            return Err(bad(format!(
                "level={l}: expected a probability in (0, 1), e.g. 0.95"
            )));
        }
        r.level = l;
    }
    if let Some(q) = spec.get("quantiles").and_then(Json::as_array) {
        r.quantiles = q.iter().filter_map(Json::as_f64).collect();
        if let Some(p) = r.quantiles.iter().find(|p| !(**p > 0.0 && **p < 1.0)) {
            return Err(bad(format!(
                "percentile {}: expected one in (0, 100)",
                p * 100.0
            )));
        }
    }
    if let Some(m) = spec.get("max_cells").and_then(Json::as_u64) {
        r.max_cells = m as usize;
    }
    if spec.get("pct_ci").and_then(Json::as_str) == Some("korn-graubard") {
        r.pct_interval = PctInterval::KornGraubard;
    }
    Ok(r)
}

/// Answers a request (a JSON object: `analysis` and its options) over the
/// dataset at `path`; the answer as the analysis layer's JSON.
#[pyfunction]
fn _query(py: Python<'_>, path: &str, spec: &str) -> PyResult<String> {
    let spec: Json = serde_json::from_str(spec).map_err(|e| QueryError::new_err(e.to_string()))?;
    let req = request(&spec)?;
    let path = path.to_string();
    let answer = py.detach(move || -> PyResult<String> {
        let ds = open(&path)?;
        let a =
            microtab_analysis::run(&ds, &req, &ScanOptions::from_env()).map_err(analysis_error)?;
        serde_json::to_string(&a).map_err(|e| MicrotabError::new_err(e.to_string()))
    })?;
    Ok(answer)
}

/// A column's stored values decoded (bit-packed columns unpacked), every
/// stripe checked: (bytes, numpy dtype name).
#[pyfunction]
fn _column<'py>(
    py: Python<'py>,
    path: &str,
    name: &str,
) -> PyResult<(Bound<'py, PyBytes>, String)> {
    let path = path.to_string();
    let name = name.to_string();
    let (bytes, ty) = py.detach(move || -> PyResult<(Vec<u8>, String)> {
        let ds = open(&path)?;
        let col = ds.column(&name).map_err(store_error)?;
        let ty = col.var().ty;
        let rows = col.rows();
        let mut out = Vec::with_capacity(rows * ty.width());
        let mut buf = Vec::new();
        let step = microtab_store::STRIPE_ROWS * 16;
        let mut start = 0;
        while start < rows {
            let n = step.min(rows - start);
            let view = col.rows_view(start, n, &mut buf).map_err(store_error)?;
            let b: &[u8] = match view {
                ColumnData::U8(v) => NativeType::as_bytes(v),
                ColumnData::I8(v) => NativeType::as_bytes(v),
                ColumnData::U16(v) => NativeType::as_bytes(v),
                ColumnData::I16(v) => NativeType::as_bytes(v),
                ColumnData::U32(v) => NativeType::as_bytes(v),
                ColumnData::I32(v) => NativeType::as_bytes(v),
                ColumnData::I64(v) => NativeType::as_bytes(v),
                ColumnData::F32(v) => NativeType::as_bytes(v),
                ColumnData::F64(v) => NativeType::as_bytes(v),
            };
            out.extend_from_slice(b);
            start += n;
        }
        Ok((out, ty.name().to_string()))
    })?;
    Ok((PyBytes::new(py, &bytes), ty))
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
    m.add_function(wrap_pyfunction!(_info, m)?)?;
    m.add_function(wrap_pyfunction!(_dictionary, m)?)?;
    m.add_function(wrap_pyfunction!(_query, m)?)?;
    m.add_function(wrap_pyfunction!(_column, m)?)?;
    Ok(())
}
