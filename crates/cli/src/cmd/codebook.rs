//! `microtab codebook`: per-variable description with top values, in the
//! terminal (table, CSV, JSON) or as an HTML page (`--html`, written by
//! [`codebook_html`](crate::cmd::codebook_html)).

use crate::cmd::info::{plain, var_json};
use crate::common::{emit, open, Format};
use crate::render::{category_text, csv_line, group_digits, text_table, value_json, Align};
use anyhow::Result;
use microtab_engine::top_values;
use serde_json::{json, Value as Json};
use std::path::PathBuf;

/// Arguments of `codebook`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// Dataset directory.
    dataset: PathBuf,
    /// Variables to describe (default: all).
    vars: Vec<String>,
    /// Number of most frequent values to list.
    #[arg(long, default_value_t = 10)]
    top: usize,
    /// Output format.
    #[arg(long, value_enum, default_value_t = Format::Table)]
    format: Format,
    /// Write a self-contained HTML codebook to FILE instead (value labels
    /// with frequencies, descriptions, missing codes).
    #[arg(long, value_name = "FILE")]
    html: Option<PathBuf>,
    /// Weight variable for the HTML codebook's weighted frequencies.
    #[arg(long, short = 'w', value_name = "VAR", requires = "html")]
    weight: Option<String>,
}

/// Prints the codebook.
pub fn run(a: Args) -> Result<()> {
    let ds = open(&a.dataset)?;
    let names: Vec<String> = if a.vars.is_empty() {
        ds.manifest()
            .variables
            .iter()
            .map(|v| v.name.clone())
            .collect()
    } else {
        a.vars.clone()
    };
    if let Some(file) = &a.html {
        crate::cmd::codebook_html::write(
            &ds,
            &a.dataset.display().to_string(),
            &names,
            a.weight.as_deref(),
            a.top,
            file,
        )?;
        eprintln!("wrote {} ({} variables)", file.display(), names.len());
        return Ok(());
    }
    let mut out = Vec::new();
    for n in &names {
        let var = ds.variable(n)?.clone();
        let mut j = var_json(&ds, &var)?;
        let top = top_values(&ds, &var.name, a.top)?;
        let rows: Vec<Json> = top
            .values
            .iter()
            .map(|(c, n)| {
                json!({"value": value_json(c), "label": c.label,
                       "missing": c.missing, "count": n})
            })
            .collect();
        j["distinct"] = json!(top.distinct);
        j["top"] = json!(rows);
        out.push((
            j,
            top.values
                .iter()
                .map(|(c, n)| (category_text(c, false), c.missing, *n))
                .collect::<Vec<_>>(),
        ));
    }
    let text = match a.format {
        Format::Json => {
            let j = json!({
                "dataset": a.dataset.display().to_string(),
                "rows": ds.rows(),
                "variables": out.iter().map(|(j, _)| j.clone()).collect::<Vec<_>>(),
            });
            serde_json::to_string_pretty(&j)? + "\n"
        }
        Format::Csv => {
            let mut s = csv_line(&["variable", "value", "missing", "count"].map(String::from));
            for (j, top) in &out {
                for t in &j["top"].as_array().cloned().unwrap_or_default() {
                    s += &csv_line(&[
                        plain(&j["name"]),
                        plain(&t["value"]),
                        plain(&t["missing"]),
                        plain(&t["count"]),
                    ]);
                }
                let _ = top;
            }
            s
        }
        Format::Table => {
            let mut s = String::new();
            for (j, top) in &out {
                s += &format!(
                    "{}{}\n  type {} ({}), range {} .. {}, {} distinct, {} system-missing{}\n",
                    plain(&j["name"]),
                    j["label"]
                        .as_str()
                        .map(|l| format!(" — {l}"))
                        .unwrap_or_default(),
                    plain(&j["type"]),
                    plain(&j["kind"]),
                    plain(&j["min"]),
                    plain(&j["max"]),
                    plain(&j["distinct"]),
                    group_digits(j["nulls"].as_u64().unwrap_or(0)),
                    match j["missing_codes"].as_array() {
                        Some(a) if !a.is_empty() => format!(
                            ", missing codes {}",
                            a.iter().map(plain).collect::<Vec<_>>().join(" ")
                        ),
                        _ => String::new(),
                    }
                );
                let rows: Vec<Vec<String>> = top
                    .iter()
                    .map(|(t, m, c)| {
                        vec![
                            format!("  {t}{}", if *m { " (missing)" } else { "" }),
                            group_digits(*c),
                        ]
                    })
                    .collect();
                s += &text_table(
                    &["  top values".to_string(), "count".to_string()],
                    &rows,
                    &[Align::Left, Align::Right],
                );
                s.push('\n');
            }
            s
        }
    };
    emit(&text)
}
