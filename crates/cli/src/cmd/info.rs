//! `microtab info`: size and variables of a dataset.

use crate::common::{emit, open, Format};
use crate::render::{csv_line, group_digits, shorten, text_table, Align};
use anyhow::Result;
use microtab_store::{Dataset, Kind, Number, Variable};
use serde_json::{json, Value as Json};
use std::path::PathBuf;

/// Arguments of `info`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// Dataset directory.
    dataset: PathBuf,
    /// Output format.
    #[arg(long, value_enum, default_value_t = Format::Table)]
    format: Format,
}

/// A stored value in displayed units (strings: the dictionary entry).
pub fn display_value(var: &Variable, stored: Number, dict: &[String]) -> Json {
    match (var.kind, stored) {
        (Kind::String, n) => json!(dict.get(n.as_i64() as usize)),
        // Integers print as integers (a manifest may hold them as `2000.0`).
        (Kind::Int, n) if var.decimals == 0 => json!(n.as_i64()),
        (_, n) if var.decimals > 0 => json!(n.as_f64() / var.scale()),
        (_, n) => json!(n.as_f64()),
    }
}

/// The JSON description of one variable (shared with `codebook`).
pub fn var_json(ds: &Dataset, v: &Variable) -> Result<Json> {
    let dict = if v.kind == Kind::String {
        ds.dictionary(v)?
    } else {
        Vec::new()
    };
    Ok(json!({
        "name": v.name,
        "label": v.label,
        "type": v.ty.name(),
        "kind": v.kind,
        "decimals": v.decimals,
        "bytes": v.bytes,
        "packing": v.packing,
        "bits": v.packing.map(|p| p.bits as usize).unwrap_or(8 * v.ty.width()),
        "min": v.min.map(|m| display_value(v, m, &dict)),
        "max": v.max.map(|m| display_value(v, m, &dict)),
        "nulls": v.nulls,
        "missing_codes": v.missing_codes.iter().map(|&m| display_value(v, if v.kind == Kind::Float { Number::Float(m) } else { Number::Int(m as i64) }, &dict)).collect::<Vec<_>>(),
        "file": v.file,
        "description": v.description,
        "value_labels": v.value_labels,
    }))
}

fn dir_bytes(ds: &Dataset) -> u64 {
    let mut n = std::fs::metadata(ds.dir().join("manifest.json"))
        .map(|m| m.len())
        .unwrap_or(0);
    for v in &ds.manifest().variables {
        n += std::fs::metadata(ds.dir().join(&v.file))
            .map(|m| m.len())
            .unwrap_or(0);
        if let Some(d) = &v.dictionary {
            n += std::fs::metadata(ds.dir().join(d))
                .map(|m| m.len())
                .unwrap_or(0);
        }
    }
    n
}

/// Plain text of a JSON scalar.
pub fn plain(j: &Json) -> String {
    match j {
        Json::Null => String::new(),
        Json::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// Prints the summary.
pub fn run(a: Args) -> Result<()> {
    let ds = open(&a.dataset)?;
    let settings = crate::settings::Settings::load()?;
    let m = ds.manifest();
    let vars: Vec<Json> = m
        .variables
        .iter()
        .map(|v| var_json(&ds, v))
        .collect::<Result<_>>()?;
    let bytes = dir_bytes(&ds);
    let text = match a.format {
        Format::Json => {
            let j = json!({
                "dataset": a.dataset.display().to_string(),
                "rows": m.rows,
                "bytes": bytes,
                "generation": m.generation,
                "source": m.source,
                "design": m.design,
                "io_settings": settings.describe_for(&a.dataset).into_iter().collect::<std::collections::BTreeMap<_, _>>(),
                "variables": vars,
            });
            serde_json::to_string_pretty(&j)? + "\n"
        }
        Format::Csv => {
            let mut s = csv_line(
                &[
                    "name",
                    "type",
                    "bits",
                    "kind",
                    "decimals",
                    "bytes",
                    "min",
                    "max",
                    "nulls",
                    "missing_codes",
                ]
                .map(String::from),
            );
            for v in &vars {
                s += &csv_line(&[
                    plain(&v["name"]),
                    plain(&v["type"]),
                    plain(&v["bits"]),
                    plain(&v["kind"]),
                    plain(&v["decimals"]),
                    plain(&v["bytes"]),
                    plain(&v["min"]),
                    plain(&v["max"]),
                    plain(&v["nulls"]),
                    v["missing_codes"]
                        .as_array()
                        .map(|a| a.iter().map(plain).collect::<Vec<_>>().join(" "))
                        .unwrap_or_default(),
                ]);
            }
            s
        }
        Format::Table => {
            let mut s = format!(
                "{}: {} records, {} variables, {:.1} MB on disk (generation {}{})\n\n",
                a.dataset.display(),
                group_digits(m.rows),
                m.variables.len(),
                bytes as f64 / 1e6,
                m.generation,
                m.source
                    .as_ref()
                    .map(|s| format!(", from {s}"))
                    .unwrap_or_default()
            );
            if let Some(d) = &m.design {
                s += &format!(
                    "survey design: {} (microtab design to change it; --no-design to ignore it)\n\n",
                    crate::cmd::design::describe(d)
                );
            }
            let rows: Vec<Vec<String>> = vars
                .iter()
                .map(|v| {
                    vec![
                        shorten(&plain(&v["name"]), 40),
                        plain(&v["type"]),
                        plain(&v["bits"]),
                        plain(&v["kind"]),
                        if v["decimals"] == 0 {
                            String::new()
                        } else {
                            plain(&v["decimals"])
                        },
                        group_digits(v["bytes"].as_u64().unwrap_or(0)),
                        // Long texts cut to keep one line a variable.
                        shorten(&plain(&v["min"]), 24),
                        shorten(&plain(&v["max"]), 24),
                        group_digits(v["nulls"].as_u64().unwrap_or(0)),
                        shorten(
                            &v["missing_codes"]
                                .as_array()
                                .map(|a| a.iter().map(plain).collect::<Vec<_>>().join(" "))
                                .unwrap_or_default(),
                            40,
                        ),
                    ]
                })
                .collect();
            use Align::*;
            s += &text_table(
                &[
                    "variable",
                    "type",
                    "bits",
                    "kind",
                    "dec",
                    "bytes",
                    "min",
                    "max",
                    "nulls",
                    "missing codes",
                ]
                .map(String::from),
                &rows,
                &[
                    Left, Left, Right, Left, Right, Right, Right, Right, Right, Left,
                ],
            );
            s += "\nI/O settings in force:\n";
            for (k, v) in settings.describe_for(&a.dataset) {
                s += &format!("  {k:<11} {v}\n");
            }
            s
        }
    };
    emit(&text)
}
