//! `microtab codebook --html FILE`: a self-contained HTML codebook in the
//! manner of SDA's and IPUMS's: a variable list, then per variable its
//! label, type, description, missing codes and a frequency table of its
//! values with labels, unweighted and (with `--weight`) weighted.
//!
//! One page, no scripts, no external files: it opens anywhere and prints.

use crate::cmd::info::{plain, var_json};
use crate::render::{group_digits, group_float};
use anyhow::{Context, Result};
use microtab_analysis::html_escape as esc;
use microtab_engine::{value_counts, value_key, Category, Value};
use microtab_store::{codec, Dataset, Kind, Variable};
use std::collections::HashSet;
use std::fmt::Write;
use std::path::Path;

/// An HTML id for a variable's section.
fn anchor(name: &str) -> String {
    let s: String = name
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
        .collect();
    format!("var-{s}")
}

/// One line of a variable's frequency table.
struct Row {
    display: String,
    label: Option<String>,
    missing: bool,
    null: bool,
    count: u64,
    weighted: Option<f64>,
}

impl Row {
    fn from_category(c: &Category, count: u64, weighted: Option<f64>) -> Row {
        Row {
            display: c.display.clone(),
            label: c.label.clone(),
            missing: c.missing,
            null: matches!(c.value, Value::Null),
            count,
            weighted,
        }
    }
}

/// Orders rows by value: numbers numerically, text by bytes, system-missing last.
fn order(kind: Kind, a: &Row, b: &Row) -> std::cmp::Ordering {
    a.null.cmp(&b.null).then_with(|| {
        if kind == Kind::String {
            a.display.cmp(&b.display)
        } else {
            let x = a.display.parse::<f64>().unwrap_or(f64::NAN);
            let y = b.display.parse::<f64>().unwrap_or(f64::NAN);
            x.total_cmp(&y)
        }
    })
}

fn type_text(v: &Variable) -> String {
    let kind = match v.kind {
        Kind::Int if v.decimals > 0 => format!("numeric, {} decimals", v.decimals),
        Kind::Int => "integer".to_string(),
        Kind::Float => "numeric (floating point)".to_string(),
        Kind::String => "text".to_string(),
    };
    format!("{kind}; stored as {}", v.ty.name())
}

/// The frequency rows of `var`: every labelled value (also those that do
/// not occur), missing codes and system-missing, and the other values that
/// occur — all of them when there are at most `top`, else the `top` most
/// frequent plus one summary line. Counted in bounded memory whatever the
/// number of distinct values ([`value_counts`]).
fn rows(
    ds: &Dataset,
    var: &Variable,
    weight: Option<&str>,
    top: usize,
) -> Result<(Vec<Row>, Option<Row>)> {
    let dict = if var.kind == Kind::String {
        ds.dictionary(var)?
    } else {
        Vec::new()
    };
    let labelled: Vec<i64> = var
        .value_labels
        .keys()
        .filter_map(|k| codec::stored_code(var, &dict, k).ok().flatten())
        .map(|c| value_key(var, c))
        .collect();
    let counts = value_counts(ds, &var.name, weight, top, &labelled)?;
    let mut kept = Vec::new();
    let mut seen = HashSet::new();
    for (c, n, w) in &counts.values {
        if *n == 0 && c.label.is_none() {
            continue;
        }
        seen.insert(c.display.clone());
        kept.push(Row::from_category(c, *n, *w));
    }
    for (value, label) in &var.value_labels {
        if !seen.contains(value) {
            kept.push(Row {
                display: value.clone(),
                label: Some(label.clone()),
                missing: false,
                null: false,
                count: 0,
                weighted: weight.map(|_| 0.0),
            });
        }
    }
    let (others, n, w) = counts.others;
    let summary = (others > 0).then(|| Row {
        display: format!("{} other values", group_digits(others as u64)),
        label: None,
        missing: false,
        null: false,
        count: n,
        weighted: w,
    });
    kept.sort_by(|a, b| order(var.kind, a, b));
    Ok((kept, summary))
}

const STYLE: &str = r#"
body { font: 15px/1.45 system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; color: #1d2329; margin: 0; background: #f6f7f9; }
header, main, nav { max-width: 60rem; margin: 0 auto; padding: 0 1.25rem; }
header { padding-top: 1.5rem; }
h1 { font-size: 1.6rem; margin: 0 0 .25rem; }
h2 { font-size: 1.2rem; margin: 0 0 .5rem; }
.meta { color: #56606b; margin: 0 0 1rem; }
section, nav > div { background: #fff; border: 1px solid #dde1e6; border-radius: 6px; padding: 1rem 1.25rem; margin: 0 0 1rem; }
section h2 .name { font-family: ui-monospace, SFMono-Regular, Menlo, monospace; }
section h2 .label { font-weight: normal; color: #3b4650; }
dl { display: grid; grid-template-columns: max-content 1fr; gap: .15rem 1rem; margin: 0 0 .75rem; }
dt { color: #56606b; }
dd { margin: 0; }
.desc { color: #2c353d; max-width: 48rem; }
.desc p { margin: 0 0 .6rem; }
table { border-collapse: collapse; width: 100%; margin: .5rem 0 0; font-variant-numeric: tabular-nums; }
th, td { padding: .25rem .6rem; border-bottom: 1px solid #eceef1; text-align: left; vertical-align: top; }
th { font-weight: 600; background: #f0f2f5; }
td.n { text-align: right; white-space: nowrap; }
th.n { text-align: right; }
td.code { font-family: ui-monospace, SFMono-Regular, Menlo, monospace; white-space: nowrap; }
tr.missing td { color: #8a5a00; background: #fffaf0; }
tr.other td { color: #56606b; font-style: italic; }
tr.total td { font-weight: 600; border-top: 2px solid #c9ced4; }
.tag { font-size: .75rem; border: 1px solid currentColor; border-radius: 3px; padding: 0 .3rem; margin-left: .4rem; }
a { color: #0b5cad; text-decoration: none; }
a:hover { text-decoration: underline; }
footer { max-width: 60rem; margin: 0 auto 2rem; padding: 0 1.25rem; color: #56606b; font-size: .85rem; }
@media print { body { background: #fff; } section { break-inside: avoid; border: none; } }
"#;

fn pct(part: f64, whole: f64) -> String {
    if whole > 0.0 {
        format!("{:.1}", 100.0 * part / whole)
    } else {
        "—".into()
    }
}

/// Writes the HTML codebook of `names` (all variables when empty) to `out`.
pub fn write(
    ds: &Dataset,
    dataset_name: &str,
    names: &[String],
    weight: Option<&str>,
    top: usize,
    out: &Path,
) -> Result<()> {
    let vars: Vec<Variable> = names
        .iter()
        .map(|n| ds.variable(n).cloned())
        .collect::<std::result::Result<_, _>>()?;
    let weight_var = match weight {
        Some(w) => Some(ds.variable(w)?.clone()),
        None => None,
    };
    let wname = weight_var.as_ref().map(|v| v.name.clone());
    let m = ds.manifest();
    let mut h = String::new();
    let title = format!("Codebook: {dataset_name}");
    let _ = write!(
        h,
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n\
         <title>{}</title>\n<style>{STYLE}</style>\n</head>\n<body>\n<header>\n<h1>{}</h1>\n\
         <p class=\"meta\">{} records · {} variables{}{}</p>\n</header>\n",
        esc(&title),
        esc(&title),
        group_digits(m.rows),
        vars.len(),
        m.source
            .as_deref()
            .map(|s| format!(" · source {}", esc(s)))
            .unwrap_or_default(),
        wname
            .as_deref()
            .map(|w| format!(" · weighted by <a href=\"#{}\">{}</a>", anchor(w), esc(w)))
            .unwrap_or_default(),
    );
    // Variable list.
    h.push_str("<nav>\n<div>\n<h2>Variables</h2>\n<table>\n<thead><tr><th>Name</th><th>Label</th><th>Type</th><th>Missing codes</th></tr></thead>\n<tbody>\n");
    let mut details = Vec::new();
    for v in &vars {
        let j = var_json(ds, v)?;
        let missing: Vec<String> = j["missing_codes"]
            .as_array()
            .map(|a| a.iter().map(plain).collect())
            .unwrap_or_default();
        let _ = writeln!(
            h,
            "<tr><td class=\"code\"><a href=\"#{}\">{}</a></td><td>{}</td><td>{}</td><td class=\"code\">{}</td></tr>",
            anchor(&v.name),
            esc(&v.name),
            esc(v.label.as_deref().unwrap_or("")),
            esc(&type_text(v)),
            esc(&missing.join(" ")),
        );
        details.push((j, missing));
    }
    h.push_str("</tbody>\n</table>\n</div>\n</nav>\n<main>\n");
    // One section per variable.
    for (v, (j, missing)) in vars.iter().zip(&details) {
        let (rows, summary) =
            rows(ds, v, wname.as_deref(), top).with_context(|| format!("tabulating {}", v.name))?;
        let _ = write!(
            h,
            "<section id=\"{}\">\n<h2><span class=\"name\">{}</span>{}</h2>\n<dl>\n<dt>Type</dt><dd>{}</dd>\n",
            anchor(&v.name),
            esc(&v.name),
            v.label
                .as_deref()
                .map(|l| format!(" <span class=\"label\">— {}</span>", esc(l)))
                .unwrap_or_default(),
            esc(&type_text(v)),
        );
        if !j["min"].is_null() {
            let _ = writeln!(
                h,
                "<dt>Range</dt><dd>{} … {}</dd>",
                esc(&plain(&j["min"])),
                esc(&plain(&j["max"]))
            );
        }
        let _ = write!(
            h,
            "<dt>System-missing</dt><dd>{}</dd>\n<dt>Missing codes</dt><dd>{}</dd>\n</dl>\n",
            group_digits(v.nulls),
            if missing.is_empty() {
                "none".to_string()
            } else {
                esc(&missing.join(", "))
            }
        );
        if let Some(d) = &v.description {
            h.push_str("<div class=\"desc\">\n");
            for para in d.split("\n\n").map(str::trim).filter(|p| !p.is_empty()) {
                let _ = writeln!(h, "<p>{}</p>", esc(para).replace('\n', "<br>"));
            }
            h.push_str("</div>\n");
        }
        // Frequencies.
        let valid_n: u64 = rows
            .iter()
            .filter(|r| !r.missing)
            .map(|r| r.count)
            .sum::<u64>()
            + summary.as_ref().map_or(0, |s| s.count);
        let valid_w: f64 = rows
            .iter()
            .filter(|r| !r.missing)
            .filter_map(|r| r.weighted)
            .sum::<f64>()
            + summary.as_ref().and_then(|s| s.weighted).unwrap_or(0.0);
        let all_n: u64 =
            rows.iter().map(|r| r.count).sum::<u64>() + summary.as_ref().map_or(0, |s| s.count);
        let all_w: f64 = rows.iter().filter_map(|r| r.weighted).sum::<f64>()
            + summary.as_ref().and_then(|s| s.weighted).unwrap_or(0.0);
        let weighted = wname.is_some();
        h.push_str("<table>\n<thead><tr><th>Value</th><th>Label</th><th class=\"n\">Frequency</th><th class=\"n\">%</th>");
        if let Some(w) = &wname {
            let _ = write!(
                h,
                "<th class=\"n\">Weighted ({})</th><th class=\"n\">%</th>",
                esc(w)
            );
        }
        h.push_str("</tr></thead>\n<tbody>\n");
        let line = |h: &mut String, r: &Row, class: &str| {
            let value = if r.null {
                "(blank)".to_string()
            } else {
                esc(&r.display)
            };
            let tag = if r.null {
                "<span class=\"tag\">system-missing</span>"
            } else if r.missing {
                "<span class=\"tag\">missing</span>"
            } else {
                ""
            };
            let _ = write!(
                h,
                "<tr{}><td class=\"code\">{value}</td><td>{}{tag}</td><td class=\"n\">{}</td><td class=\"n\">{}</td>",
                if class.is_empty() {
                    String::new()
                } else {
                    format!(" class=\"{class}\"")
                },
                esc(r.label.as_deref().unwrap_or("")),
                group_digits(r.count),
                if r.missing { "—".into() } else { pct(r.count as f64, valid_n as f64) },
            );
            if weighted {
                let wv = r.weighted.unwrap_or(0.0);
                let _ = write!(
                    h,
                    "<td class=\"n\">{}</td><td class=\"n\">{}</td>",
                    group_float(wv, 2),
                    if r.missing {
                        "—".into()
                    } else {
                        pct(wv, valid_w)
                    },
                );
            }
            h.push_str("</tr>\n");
        };
        for r in &rows {
            line(&mut h, r, if r.missing { "missing" } else { "" });
        }
        if let Some(s) = &summary {
            line(&mut h, s, "other");
        }
        let mut totals = vec![("Total", all_n, all_w)];
        if valid_n != all_n {
            totals.insert(0, ("Valid (not missing)", valid_n, valid_w));
        }
        for (k, (what, n, wsum)) in totals.into_iter().enumerate() {
            let _ = write!(
                h,
                "<tr{}><td></td><td>{what}</td><td class=\"n\">{}</td><td class=\"n\"></td>",
                if k == 0 { " class=\"total\"" } else { "" },
                group_digits(n)
            );
            if weighted {
                let _ = write!(
                    h,
                    "<td class=\"n\">{}</td><td class=\"n\"></td>",
                    group_float(wsum, 2)
                );
            }
            h.push_str("</tr>\n");
        }
        h.push_str("</tbody>\n</table>\n</section>\n");
    }
    let _ = write!(
        h,
        "</main>\n<footer>Percentages are of valid (non-missing) records{}. Made by microtab {}.</footer>\n</body>\n</html>\n",
        if wname.is_some() {
            "; records whose weight is missing are not counted"
        } else {
            ""
        },
        env!("CARGO_PKG_VERSION")
    );
    // A bare file name has an empty parent directory: make it explicit.
    let out = match out.parent() {
        Some(p) if p.as_os_str().is_empty() => Path::new(".").join(out),
        _ => out.to_path_buf(),
    };
    microtab_io::write_file_atomic(&out, h.as_bytes())?;
    Ok(())
}
