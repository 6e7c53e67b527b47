//! `microtab label`: set value labels and the variable label of one
//! variable (for CSV imports, which have no codebook). A metadata-only,
//! atomic change of the manifest: column files are untouched.

use crate::common::open;
use anyhow::{anyhow, bail, Result};
use microtab_store::{Dataset, Kind, Variable};
use std::path::PathBuf;

/// Arguments of `label`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// Dataset directory.
    dataset: PathBuf,
    /// Variable to label.
    var: String,
    /// Value labels VALUE=LABEL (`1=Male 2=Female`); `VALUE=` removes one.
    #[arg(value_name = "VALUE=LABEL")]
    labels: Vec<String>,
    /// Set the variable label ("" removes it).
    #[arg(long, value_name = "TEXT")]
    var_label: Option<String>,
    /// Remove all value labels first.
    #[arg(long)]
    clear: bool,
}

/// The shortest text of a float, as the engine displays float values.
fn float_text(x: f64) -> String {
    if x.fract() == 0.0 && x.abs() < 1e15 {
        format!("{}", x as i64)
    } else {
        format!("{x}")
    }
}

/// Exact `[+-]digits[.digits]` → (mantissa, decimals).
fn parse_exact(s: &str) -> Option<(i128, u32)> {
    let (neg, body) = match s.strip_prefix('-') {
        Some(b) => (true, b),
        None => (false, s.strip_prefix('+').unwrap_or(s)),
    };
    let (int, frac) = body.split_once('.').unwrap_or((body, ""));
    if int.is_empty() && frac.is_empty()
        || !int.bytes().chain(frac.bytes()).all(|b| b.is_ascii_digit())
        || int.len() + frac.len() > 30
    {
        return None;
    }
    let m: i128 = format!("{int}{frac}").parse().ok()?;
    Some((if neg { -m } else { m }, frac.len() as u32))
}

/// A value of `var` as typed by a user (`"01"`, `"1.5"`, `"Ohio"`), as
/// (stored value, displayed text). The stored value is `None` for a string
/// that does not occur in the data (it can still carry a label).
pub fn parse_value(ds: &Dataset, var: &Variable, text: &str) -> Result<(Option<f64>, String)> {
    let t = text.trim();
    let bad = || {
        let what = match var.kind {
            Kind::Int if var.decimals > 0 => {
                format!("a number with at most {} decimals", var.decimals)
            }
            Kind::Int => "an integer".to_string(),
            Kind::Float | Kind::String => "a number".to_string(),
        };
        anyhow!("'{text}' is not a value of {}: expected {what}", var.name)
    };
    match var.kind {
        Kind::String => {
            let dict = ds.dictionary(var)?;
            let code = dict.binary_search_by(|d| d.as_str().cmp(text)).ok();
            Ok((code.map(|c| c as f64), text.to_string()))
        }
        Kind::Int => {
            let (m, d) = parse_exact(t).ok_or_else(bad)?;
            let dec = var.decimals;
            let stored = if d <= dec {
                m.checked_mul(10i128.pow(dec - d)).ok_or_else(bad)?
            } else {
                let k = 10i128.pow(d - dec);
                if m % k != 0 {
                    return Err(bad());
                }
                m / k
            };
            let stored = i64::try_from(stored).map_err(|_| bad())?;
            let shown = if dec == 0 {
                stored.to_string()
            } else {
                format!("{:.*}", dec as usize, stored as f64 / var.scale())
            };
            Ok((Some(stored as f64), shown))
        }
        Kind::Float => {
            let x: f64 = t.parse().map_err(|_| bad())?;
            if !x.is_finite() {
                return Err(bad());
            }
            Ok((Some(x), float_text(x)))
        }
    }
}

/// Applies the labels.
pub fn run(a: Args) -> Result<()> {
    if a.labels.is_empty() && a.var_label.is_none() && !a.clear {
        bail!("nothing to do: give VALUE=LABEL pairs, --var-label TEXT or --clear");
    }
    let mut ds = open(&a.dataset)?;
    let var = ds.variable(&a.var)?.clone();
    let mut set: Vec<(String, Option<String>)> = Vec::new();
    for pair in &a.labels {
        let (v, l) = pair
            .split_once('=')
            .ok_or_else(|| anyhow!("expected VALUE=LABEL, got '{pair}'"))?;
        let (_, key) = parse_value(&ds, &var, v)?;
        set.push((key, (!l.is_empty()).then(|| l.to_string())));
    }
    let name = var.name.clone();
    ds.update_variable(&name, |v| {
        if a.clear {
            v.value_labels.clear();
        }
        for (key, label) in set {
            match label {
                Some(l) => v.value_labels.insert(key, l),
                None => v.value_labels.remove(&key),
            };
        }
        if let Some(l) = &a.var_label {
            v.label = (!l.is_empty()).then(|| l.clone());
        }
    })?;
    let v = ds.variable(&name)?;
    eprintln!(
        "{}: {} value label{}{}",
        v.name,
        v.value_labels.len(),
        if v.value_labels.len() == 1 { "" } else { "s" },
        v.label
            .as_deref()
            .map(|l| format!(", variable label \"{l}\""))
            .unwrap_or_default()
    );
    Ok(())
}
