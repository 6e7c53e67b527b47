//! Completing a variable's manifest entry from its DDI codebook entry:
//! label, description, value labels, missing codes (declared, and those
//! named "not in universe" in labels or text), for whichever format the
//! data came in.

use super::codebook::{is_niu_label, DdiVariable};
use crate::core::column::pow10;
use crate::core::number::{parse_number, Num};
use crate::error::Result;
use crate::note::Note;
use microtab_store::codec::format_float as float_text;
use microtab_store::match_column;
use microtab_store::{DatasetWriter, Kind, Remedy, Variable};

/// A codebook code (`"01"`, `"99999998"`, `"0A"`) as the variable's stored
/// value and its displayed text, or `None` if it cannot be one of its values.
fn code_value(
    var: &Variable,
    dv: &DdiVariable,
    code: &str,
    dict: &[String],
) -> Option<(f64, String)> {
    match var.kind {
        Kind::String => {
            let s = code.trim();
            let i = dict.binary_search_by(|d| d.as_str().cmp(s)).ok();
            // A label for a value that never occurs still keys by its text;
            // only a missing code needs a stored code.
            Some((i.map_or(f64::NAN, |i| i as f64), s.to_string()))
        }
        Kind::Int => {
            let Num::Scaled(m, d) = parse_number(code.as_bytes(), dv.decimals) else {
                return None;
            };
            let stored = if var.decimals >= d {
                m.checked_mul(pow10(var.decimals - d))?
            } else {
                let k = pow10(d - var.decimals);
                if m % k != 0 {
                    return None;
                }
                m / k
            };
            Some((
                stored as f64,
                microtab_store::codec::display_int(var.decimals, stored),
            ))
        }
        Kind::Float => {
            let x = match parse_number(code.as_bytes(), dv.decimals) {
                Num::Scaled(m, d) => m as f64 / pow10(d) as f64,
                Num::Big(x) => x,
                _ => return None,
            };
            Some((x, float_text(x)))
        }
    }
}

/// Copies the codebook's description of a variable into its manifest entry.
/// A missing-value range too wide to list becomes the values of it that
/// the column holds; when those are more than [`MAX_LISTED_RANGE`], the
/// range is not used and `notes` says so.
pub(crate) fn describe(
    var: &mut Variable,
    dv: &DdiVariable,
    dict: &[String],
    ds: &DatasetWriter,
    rows: u64,
    notes: &mut Vec<Note>,
) -> Result<()> {
    var.label = dv.label.clone();
    var.description = dv.description.clone();
    let mut missing = Vec::new();
    for c in &dv.categories {
        let Some((stored, text)) = code_value(var, dv, &c.value, dict) else {
            continue;
        };
        if let Some(l) = &c.label {
            var.value_labels.entry(text).or_insert_with(|| l.clone());
        }
        if c.missing {
            missing.push(stored);
        }
    }
    for code in &dv.invalid {
        if let Some((stored, _)) = code_value(var, dv, code, dict) {
            missing.push(stored);
        }
    }
    for (lo, hi) in &dv.invalid_ranges {
        match wide_range_codes(var, dv, lo, hi, dict, ds, rows)? {
            Some(codes) => missing.extend(codes.into_iter().map(|c| c as f64)),
            None => notes.push(Note::hinted(
                format!(
                    "variable {}: missing-value range {lo}..{hi} of the codebook not used: the data hold more than {MAX_LISTED_RANGE} different values in it",
                    var.name
                ),
                Remedy::MissingCodes {
                    variable: var.name.clone(),
                    codes: Vec::new(),
                },
                "declares the codes that are missing",
            )),
        }
    }
    for m in missing {
        if !m.is_nan() && !var.missing_codes.contains(&m) {
            var.missing_codes.push(m);
        }
    }
    niu_missing(var, dv, dict, notes);
    Ok(())
}

/// Makes the codes the codebook names not-in-universe or missing in its
/// labels or text ([`DdiVariable::niu`]) missing codes, with a note naming
/// each and the evidence; and suggests (a note only) a run of 9s as wide as
/// the field — or 9s ending in 8 — that the data hold as their largest
/// value, which IPUMS uses for "not in universe" and "missing" when the
/// codebook does not say so.
fn niu_missing(var: &mut Variable, dv: &DdiVariable, dict: &[String], notes: &mut Vec<Note>) {
    let mut set = Vec::new();
    for n in &dv.niu {
        let Some((stored, text)) = code_value(var, dv, &n.value, dict) else {
            continue;
        };
        if stored.is_nan() || var.missing_codes.contains(&stored) {
            continue;
        }
        var.missing_codes.push(stored);
        set.push(if n.from_label {
            format!("{text} (value label \"{}\")", n.evidence)
        } else {
            format!("{text} (text: \"{}\")", n.evidence)
        });
    }
    if !set.is_empty() {
        notes.push(Note::hinted(
            format!(
                "variable {}: {} named not-in-universe or missing by the codebook {} missing",
                var.name,
                set.join(", "),
                if set.len() == 1 { "is" } else { "are" },
            ),
            Remedy::KeepNiu,
            format!(
                "keeps {} as values",
                if set.len() == 1 { "it" } else { "them" }
            ),
        ));
    }
    let width = dv.width();
    if var.kind != Kind::Int || var.decimals != 0 || dv.decimals != 0 || width < 3 {
        return;
    }
    let Some(max) = var.max.map(|m| m.as_f64()) else {
        return;
    };
    let nines = "9".repeat(width);
    let eight = format!("{}8", "9".repeat(width - 1));
    for code in [nines, eight] {
        let Ok(x) = code.parse::<i64>() else { continue };
        // Explained by the codebook (and kept as a value on purpose, or a
        // value it gives another meaning): no suggestion.
        let explained = [dv.coding.as_deref(), dv.description.as_deref()]
            .into_iter()
            .flatten()
            .any(|t| t.contains(&code));
        let labelled = explained
            || dv.categories.iter().any(|c| {
                c.value.trim_start_matches('0') == code
                    && !is_niu_label(c.label.as_deref().unwrap_or(""))
            });
        if x as f64 == max && !var.missing_codes.contains(&(x as f64)) && !labelled {
            notes.push(Note::hinted(
                format!(
                    "variable {}: its largest value is {code}, a run of 9s as wide as the field, which IPUMS uses for \"not in universe\" or \"missing\"",
                    var.name
                ),
                Remedy::MissingCodes {
                    variable: var.name.clone(),
                    codes: vec![code.clone()],
                },
                "makes it missing, if the codebook's documentation says so",
            ));
        }
    }
}

/// Most codes a wide missing-value range may add to a variable.
const MAX_LISTED_RANGE: usize = 10_000;

/// The stored codes of the missing-value range `lo..hi` that occur in the
/// integer column (read back once; only variables with such a range pay
/// for it). `None` when they are more than [`MAX_LISTED_RANGE`], or the
/// variable is not an integer one.
fn wide_range_codes(
    var: &Variable,
    dv: &DdiVariable,
    lo: &str,
    hi: &str,
    dict: &[String],
    ds: &DatasetWriter,
    rows: u64,
) -> Result<Option<Vec<i64>>> {
    if var.kind != Kind::Int {
        return Ok(None);
    }
    // Stored units; a bound beyond what a code can hold (i64's own limits,
    // say) is taken as it is when the variable has no decimals.
    let bound = |s: &str| {
        code_value(var, dv, s, dict).map(|c| c.0).or_else(|| {
            (var.decimals == 0 && dv.decimals == 0)
                .then(|| s.trim().parse::<i64>().ok().map(|x| x as f64))
                .flatten()
        })
    };
    let (Some(a), Some(b)) = (bound(lo), bound(hi)) else {
        return Ok(None);
    };
    // Within the column's range, or nothing to read.
    let num = |n: Option<microtab_store::Number>| n.map(|n| n.as_f64());
    let (Some(min), Some(max)) = (num(var.min), num(var.max)) else {
        return Ok(Some(Vec::new()));
    };
    let (a, b) = (a.ceil().max(min), b.floor().min(max));
    if rows == 0 || a > b {
        return Ok(Some(Vec::new()));
    }
    let col = ds.finished_column(var, rows)?;
    let data = col.data()?;
    let mut found = std::collections::BTreeSet::new();
    macro_rules! scan {
        ($v:expr) => {
            for &x in $v.iter() {
                let x = x as i64;
                if Some(x) == var.null_code {
                    continue;
                }
                if (x as f64) >= a
                    && (x as f64) <= b
                    && found.insert(x)
                    && found.len() > MAX_LISTED_RANGE
                {
                    return Ok(None);
                }
            }
        };
    }
    match_column!(data, |v| ints => scan!(v), floats => return Ok(None));
    Ok(Some(found.into_iter().collect()))
}
