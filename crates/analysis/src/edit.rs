//! Changes to a dataset's metadata that every front end makes the same
//! way: value and variable labels, the dataset's title and description, user-missing codes, renaming and
//! dropping variables. Each is one atomic replacement of the manifest
//! (writers exclude each other; readers keep the generation they opened);
//! column files are untouched.

use crate::{Error, Result};
use microtab_store::{codec, Dataset, Kind, Variable};

/// A value of `var` as typed by a user (`"01"`, `"1.5"`, `"Ohio"`), as
/// (stored value, displayed text). The stored value is `None` for a text
/// that does not occur in the data (it can still carry a label).
pub fn parse_value(ds: &Dataset, var: &Variable, text: &str) -> Result<(Option<f64>, String)> {
    let dict = if var.kind == Kind::String {
        ds.dictionary(var)?
    } else {
        Vec::new()
    };
    let code = codec::stored_code(var, &dict, text)?;
    let shown = match (var.kind, code) {
        (Kind::String, _) | (_, None) => text.to_string(),
        (_, Some(c)) => codec::display_code(var, c),
    };
    Ok((code, shown))
}

/// Sets value labels of `name`: each `(value, label)` as typed (a `None`
/// label removes the value's), after removing every one when `clear`;
/// `var_label` sets the variable label (`Some("")` removes it). The
/// variable as stored afterwards.
pub fn set_labels(
    ds: &mut Dataset,
    name: &str,
    labels: &[(String, Option<String>)],
    var_label: Option<&str>,
    clear: bool,
) -> Result<Variable> {
    let var = ds.variable(name)?.clone();
    if clear || !labels.is_empty() {
        check_adjustment(ds, &var.name)?;
    }
    let mut set: Vec<(String, Option<String>)> = Vec::new();
    for (value, label) in labels {
        let (_, key) = parse_value(ds, &var, value)?;
        set.push((key, label.clone()));
    }
    ds.update_variable(&var.name, |v| {
        if clear {
            v.value_labels.clear();
        }
        for (key, label) in set {
            match label {
                Some(l) => v.value_labels.insert(key, l),
                None => v.value_labels.remove(&key),
            };
        }
        if let Some(l) = var_label {
            v.label = (!l.is_empty()).then(|| l.to_string());
        }
    })?;
    Ok(ds.variable(&var.name)?.clone())
}

/// Sets the dataset's title and description: `Some(text)` replaces one
/// (a blank text removes it), `None` leaves it as it is. One atomic
/// replacement of the manifest, as for labels. The title and description
/// as stored afterwards.
pub fn set_about(
    ds: &mut Dataset,
    title: Option<&str>,
    description: Option<&str>,
) -> Result<(Option<String>, Option<String>)> {
    ds.update_manifest(|m| {
        if let Some(t) = title {
            m.title = microtab_store::about_text(Some(t));
        }
        if let Some(d) = description {
            m.description = microtab_store::about_text(Some(d));
        }
    })?;
    let m = ds.manifest();
    Ok((m.title.clone(), m.description.clone()))
}

/// Refuses a change to `name` when the adjustment of the design's weight
/// used it (a variable it adjusted by, or the weight it adjusted).
fn check_adjustment(ds: &Dataset, name: &str) -> Result<()> {
    let Some(d) = &ds.manifest().design else {
        return Ok(());
    };
    if let Some(c) = d.taylor.as_ref().and_then(|t| t.calibration.as_ref()) {
        let used = c.variables.iter().chain(std::iter::once(&c.source));
        if let Some(v) = used.into_iter().find(|v| v.eq_ignore_ascii_case(name)) {
            return Err(Error::InAdjustment {
                variable: v.clone(),
                weight: d.weight.clone(),
            });
        }
    }
    Ok(())
}

/// Replaces the user-missing codes of `name` with `codes` (values as
/// displayed; none clears them); each must occur in the data. The codes
/// as displayed, each once.
pub fn set_missing(ds: &mut Dataset, name: &str, codes: &[String]) -> Result<Vec<String>> {
    let var = ds.variable(name)?.clone();
    check_adjustment(ds, &var.name)?;
    let mut stored: Vec<f64> = Vec::new();
    let mut shown: Vec<String> = Vec::new();
    for c in codes {
        let (code, text) = parse_value(ds, &var, c)?;
        let Some(code) = code else {
            return Err(Error::NotInData {
                value: c.clone(),
                variable: var.name.clone(),
            });
        };
        if !stored.contains(&code) {
            stored.push(code);
            shown.push(text);
        }
    }
    ds.update_variable(&var.name, |v| v.missing_codes = stored)?;
    Ok(shown)
}

/// Renames the variable `old` to `new` (trimmed); its labels, missing
/// codes and the design's use of it follow. The old and new names.
pub fn rename(ds: &mut Dataset, old: &str, new: &str) -> Result<(String, String)> {
    let old = ds.variable(old)?.name.clone();
    check_adjustment(ds, &old)?;
    let new = new.trim().to_string();
    microtab_engine::check_name(&new)?;
    if let Ok(v) = ds.variable(&new) {
        if v.name != old {
            return Err(Error::NameTaken {
                dataset: ds.dir().display().to_string(),
                variable: v.name.clone(),
            });
        }
    }
    ds.update_manifest(|m| {
        for v in m.variables.iter_mut().filter(|v| v.name == old) {
            v.name = new.clone();
        }
        if let Some(d) = m.design.as_mut() {
            let fix = |s: &mut String| {
                if *s == old {
                    *s = new.clone();
                }
            };
            fix(&mut d.weight);
            if let Some(r) = d.replicates.as_mut() {
                r.weights.iter_mut().for_each(fix);
            }
            if let Some(t) = d.taylor.as_mut() {
                t.strata
                    .iter_mut()
                    .chain(&mut t.cluster)
                    .chain(&mut t.fpc)
                    .for_each(fix);
            }
        }
    })?;
    Ok((old, new))
}

/// Removes the variables `names` (refused for one the survey design uses,
/// or for all of them); their files stay on disk, unused, until the
/// dataset is imported again. The names removed, each once.
pub fn drop_variables(ds: &mut Dataset, names: &[String]) -> Result<Vec<String>> {
    let mut out = Vec::new();
    for n in names {
        let name = ds.variable(n)?.name.clone();
        if let Some(d) = &ds.manifest().design {
            if d.variables().contains(&&name) {
                return Err(Error::InDesign { variable: name });
            }
        }
        if !out.contains(&name) {
            out.push(name);
        }
    }
    if out.len() == ds.manifest().variables.len() {
        return Err(Error::DropAll {
            dataset: ds.dir().display().to_string(),
        });
    }
    ds.update_manifest(|m| m.variables.retain(|v| !out.contains(&v.name)))?;
    Ok(out)
}
