//! Changes to a dataset from Python: labels, the title and description,
//! missing codes, renaming and
//! dropping variables (the analysis layer's `edit`, as the CLI's
//! `label`, `missing`, `rename` and `drop`), computed and recoded
//! variables (the engine's, as `compute` and `recode`), and subsets.

use pyo3::prelude::*;

use crate::common::{open, selection_term, to_json};
use crate::errors::{analysis_error, engine_error};

/// A variable's manifest entry as JSON.
fn variable_json(v: &microtab_store::Variable) -> PyResult<String> {
    to_json(v)
}

/// Sets value labels (`(value, label)`, `None` removes one) of `var`,
/// after clearing them with `clear`, and its label (`""` removes it);
/// the variable as stored.
#[pyfunction]
#[pyo3(signature = (path, var, labels, var_label=None, clear=false))]
fn _set_labels(
    py: Python<'_>,
    path: &str,
    var: &str,
    labels: Vec<(String, Option<String>)>,
    var_label: Option<String>,
    clear: bool,
) -> PyResult<String> {
    let v = py.detach(|| {
        let mut ds = open(path)?;
        microtab_analysis::edit::set_labels(&mut ds, var, &labels, var_label.as_deref(), clear)
            .map_err(analysis_error)
    })?;
    variable_json(&v)
}

/// Sets the dataset's title and description (`None` leaves one as it
/// is, `""` removes it); the two as stored.
#[pyfunction]
#[pyo3(signature = (path, title=None, description=None))]
fn _set_about(
    py: Python<'_>,
    path: &str,
    title: Option<String>,
    description: Option<String>,
) -> PyResult<(Option<String>, Option<String>)> {
    py.detach(|| {
        let mut ds = open(path)?;
        microtab_analysis::edit::set_about(&mut ds, title.as_deref(), description.as_deref())
            .map_err(analysis_error)
    })
}

/// Replaces the missing codes of `var` (values as displayed); the codes
/// as displayed.
#[pyfunction]
fn _set_missing(
    py: Python<'_>,
    path: &str,
    var: &str,
    codes: Vec<String>,
) -> PyResult<Vec<String>> {
    py.detach(|| {
        let mut ds = open(path)?;
        microtab_analysis::edit::set_missing(&mut ds, var, &codes).map_err(analysis_error)
    })
}

/// Renames a variable; (old, new) names.
#[pyfunction]
fn _rename(py: Python<'_>, path: &str, old: &str, new: &str) -> PyResult<(String, String)> {
    py.detach(|| {
        let mut ds = open(path)?;
        microtab_analysis::edit::rename(&mut ds, old, new).map_err(analysis_error)
    })
}

/// Drops variables; the names dropped.
#[pyfunction]
fn _drop(py: Python<'_>, path: &str, names: Vec<String>) -> PyResult<Vec<String>> {
    py.detach(|| {
        let mut ds = open(path)?;
        microtab_analysis::edit::drop_variables(&mut ds, &names).map_err(analysis_error)
    })
}

fn derive_options(
    label: Option<String>,
    value_labels: Vec<(String, String)>,
    replace: bool,
) -> microtab_engine::DeriveOptions {
    microtab_engine::DeriveOptions {
        replace,
        label,
        value_labels,
    }
}

/// Computes `name = expr` as a new variable (the engine's `compute`); the
/// variable as stored and the dataset's generation, as JSON.
#[pyfunction]
#[pyo3(signature = (path, name, expr, label=None, value_labels=Vec::new(), replace=false))]
fn _compute(
    py: Python<'_>,
    path: &str,
    name: &str,
    expr: &str,
    label: Option<String>,
    value_labels: Vec<(String, String)>,
    replace: bool,
) -> PyResult<String> {
    let opts = derive_options(label, value_labels, replace);
    let d = py
        .detach(|| microtab_engine::compute(path.as_ref(), name, expr, &opts))
        .map_err(engine_error)?;
    variable_json(&d.var)
}

/// Recodes `from` by `rules` into the new variable `name` (the engine's
/// `recode`: `other`, `missing` as its options); its name and the notes
/// of the rules (overlapping ones), as JSON.
#[pyfunction]
#[pyo3(signature = (path, name, from, rules, other=None, missing=None, label=None,
                    value_labels=Vec::new(), replace=false))]
#[allow(clippy::too_many_arguments)]
fn _recode(
    py: Python<'_>,
    path: &str,
    name: &str,
    from: Vec<String>,
    rules: &str,
    other: Option<String>,
    missing: Option<String>,
    label: Option<String>,
    value_labels: Vec<(String, String)>,
    replace: bool,
) -> PyResult<String> {
    let opts = derive_options(label, value_labels, replace);
    let r = microtab_engine::RecodeOptions { other, missing };
    let d = py
        .detach(|| microtab_engine::recode(path.as_ref(), name, &from, rules, &r, &opts))
        .map_err(engine_error)?;
    to_json(&serde_json::json!({ "name": d.var.name, "notes": d.notes }))
}

/// Writes the variables `vars` (all when empty) of the records that pass
/// `filter` and the selection `mask` (a bitmap's bytes) as the dataset
/// `out` (the engine's `subset`); what was written, as JSON.
#[pyfunction]
#[pyo3(signature = (path, out, vars, filter=None, mask=None, force=false))]
fn _subset(
    py: Python<'_>,
    path: &str,
    out: &str,
    vars: Vec<String>,
    filter: Option<String>,
    mask: Option<Vec<u8>>,
    force: bool,
) -> PyResult<String> {
    let r = py.detach(|| -> PyResult<microtab_engine::subset::SubsetReport> {
        let ds = open(path)?;
        let mut terms = match filter.as_deref().map(str::trim) {
            Some(f) if !f.is_empty() => microtab_engine::parse_filter(f).map_err(engine_error)?,
            _ => Vec::new(),
        };
        terms.extend(mask.map(|m| selection_term(&m, ds.rows())).transpose()?);
        microtab_engine::subset::subset(&ds, out.as_ref(), &vars, &terms, force)
            .map_err(engine_error)
    })?;
    Ok(serde_json::json!({
        "path": out,
        "rows": r.rows,
        "variables": r.vars,
        "design": r.design,
        "design_note": r.design_note,
    })
    .to_string())
}

/// Registers the functions.
pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(_set_labels, m)?)?;
    m.add_function(wrap_pyfunction!(_set_missing, m)?)?;
    m.add_function(wrap_pyfunction!(_set_about, m)?)?;
    m.add_function(wrap_pyfunction!(_rename, m)?)?;
    m.add_function(wrap_pyfunction!(_drop, m)?)?;
    m.add_function(wrap_pyfunction!(_compute, m)?)?;
    m.add_function(wrap_pyfunction!(_recode, m)?)?;
    m.add_function(wrap_pyfunction!(_subset, m)?)?;
    Ok(())
}
