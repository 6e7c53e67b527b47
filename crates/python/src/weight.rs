//! Making weights from Python: `Dataset.weight(…)`, the analysis layer's
//! [`microtab_analysis::weighting::weight`] (post-stratification, raking,
//! calibration, trimming; replicate weights adjusted the same way).

use crate::errors::{engine_error, store_error, InputError, QueryError};
use microtab_analysis::weighting::{self, Distance, Method, TotalRow, WeightError, WeightSpec};
use pyo3::prelude::*;

/// A weighting error as Python sees it, the keyword that would help worded
/// as Python spells it.
fn weight_error(e: WeightError) -> PyErr {
    match e {
        WeightError::Store(s) => store_error(s),
        WeightError::Engine(e) => engine_error(e),
        e @ (WeightError::Totals { .. } | WeightError::TotalsRow { .. }) => {
            InputError::new_err(e.to_string())
        }
        e @ WeightError::Outside { .. } => QueryError::new_err(format!(
            "{e} (allow_missing_cells=True keeps their weights as they are)"
        )),
        e @ WeightError::NotConverged { .. } => QueryError::new_err(format!(
            "{e} (wider bounds=, another distance=, or a larger max_iterations= may help)"
        )),
        e @ WeightError::Exists { .. } => pyo3::exceptions::PyFileExistsError::new_err(format!(
            "{e} (replace=True overwrites it)"
        )),
        e => QueryError::new_err(e.to_string()),
    }
}

/// Adjusts a weight as `microtab weight` does; the report as JSON.
/// `how` is `poststrata`, `rake`, `calibrate` or `trim`; `totals` the rows
/// (variable, value, total) or `totals_path` a totals CSV file.
#[pyfunction]
#[pyo3(signature = (path, new, how, spec, totals, totals_path=None, distance="linear",
                    bounds=None, source=None, trim=None, allow_missing_cells=false,
                    tolerance=1e-10, max_iterations=None, replace=false))]
#[allow(clippy::too_many_arguments)]
fn _weight(
    py: Python<'_>,
    path: &str,
    new: &str,
    how: &str,
    spec: &str,
    totals: Vec<(String, String, f64)>,
    totals_path: Option<String>,
    distance: &str,
    bounds: Option<(f64, f64)>,
    source: Option<String>,
    trim: Option<(f64, f64)>,
    allow_missing_cells: bool,
    tolerance: f64,
    max_iterations: Option<usize>,
    replace: bool,
) -> PyResult<String> {
    let distance = match distance.to_ascii_lowercase().as_str() {
        "linear" | "greg" => Distance::Linear,
        "raking" => Distance::Raking,
        "logit" => Distance::Logit,
        d => {
            return Err(QueryError::new_err(format!(
                "unknown distance '{d}': expected linear, raking or logit"
            )))
        }
    };
    let method = match how {
        "poststrata" => Method::PostStratify(spec.to_string()),
        "rake" => Method::Rake(spec.to_string()),
        "calibrate" => Method::Calibrate {
            model: spec.to_string(),
            distance,
            bounds,
        },
        _ => Method::None,
    };
    let rows = match totals_path {
        Some(p) => weighting::read_totals(p.as_ref()).map_err(weight_error)?,
        None => totals
            .into_iter()
            .enumerate()
            .map(|(i, (variable, value, total))| TotalRow {
                variable,
                value,
                total,
                line: i as u64 + 2,
            })
            .collect(),
    };
    let mut s = WeightSpec::new(new, method, rows);
    s.from = source;
    s.trim = trim;
    s.allow_missing_cells = allow_missing_cells;
    s.tolerance = tolerance;
    s.max_iterations = max_iterations;
    s.replace = replace;
    let r = py
        .detach(|| weighting::weight(path.as_ref(), &s))
        .map_err(weight_error)?;
    microtab_analysis::answer_text(&r).map_err(|e| QueryError::new_err(e.to_string()))
}

/// Builds replicate weights from the stored Taylor design as `microtab
/// replicate` does; what was made, as JSON.
#[pyfunction]
#[pyo3(signature = (path, kind, replicates=None, seed=None, prefix=None, rho=None, replace=false))]
#[allow(clippy::too_many_arguments)]
fn _replicate(
    py: Python<'_>,
    path: &str,
    kind: &str,
    replicates: Option<usize>,
    seed: Option<u64>,
    prefix: Option<String>,
    rho: Option<f64>,
    replace: bool,
) -> PyResult<String> {
    use microtab_analysis::weighting::replicate::{self, ReplicateOptions};
    let method: replicate::Method = kind.parse().map_err(QueryError::new_err)?;
    let mut o = ReplicateOptions::new(method);
    o.replicates = replicates;
    if let Some(s) = seed {
        o.seed = s;
    }
    o.prefix = prefix;
    o.rho = rho;
    o.replace = replace;
    let r = py
        .detach(|| replicate::replicate(path.as_ref(), &o))
        .map_err(crate::errors::replicate_error)?;
    let v = serde_json::json!({
        "type": r.method.name(),
        "weight": r.weight,
        "replicates": r.names,
        "scale": r.scale,
        "rscales": r.rscales,
        "rho": r.rho,
        "seed": r.seed,
        "rank": r.rank,
        "psus": r.psus,
        "strata": r.strata,
        "records": r.rows,
        "generation": r.generation,
        "notes": r.notes.iter().map(|n| n.to_string()).collect::<Vec<_>>(),
    });
    microtab_analysis::answer_text(&v).map_err(|e| QueryError::new_err(e.to_string()))
}

/// Registers the functions.
pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(_weight, m)?)?;
    m.add_function(wrap_pyfunction!(_replicate, m)?)?;
    Ok(())
}
