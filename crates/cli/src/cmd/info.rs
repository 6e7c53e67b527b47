//! `microtab info`: size, design, variables and I/O settings of a dataset
//! — the analysis layer's [`DatasetInfo`], as every front end shows it.

use crate::common::{emit, open, Format};
use crate::render::{csv_line, group_digits, plain, shorten, text_table, Align};
use anyhow::Result;
use microtab_analysis::{DatasetInfo, Settings, VariableInfo};
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

/// The columns `info` shows of a variable (CSV and table), with the
/// missing codes' and long texts' room in the table.
fn columns(v: &VariableInfo, table: bool) -> Vec<String> {
    let text = |s: Option<String>, max: usize| {
        let s = s.unwrap_or_default();
        if table {
            // Long texts cut to keep one line a variable.
            shorten(&s, max)
        } else {
            s
        }
    };
    let count = |n: u64| {
        if table {
            group_digits(n)
        } else {
            n.to_string()
        }
    };
    vec![
        text(Some(v.name.clone()), 40),
        v.ty.clone(),
        v.bits.to_string(),
        plain(&serde_json::to_value(v.kind).unwrap_or_default()),
        if table && v.decimals == 0 {
            String::new()
        } else {
            v.decimals.to_string()
        },
        count(v.bytes),
        text(v.min.as_ref().map(|m| m.text()), 24),
        text(v.max.as_ref().map(|m| m.text()), 24),
        count(v.nulls),
        text(Some(v.missing_text(" ")), 40),
    ]
}

/// Prints the summary.
pub fn run(a: Args) -> Result<()> {
    let ds = open(&a.dataset)?;
    let settings = Settings::load()?;
    let info = DatasetInfo::of(&ds, &a.dataset.display().to_string(), &settings)?;
    let text = match a.format {
        Format::Json => serde_json::to_string_pretty(&info)? + "\n",
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
            for v in &info.variables {
                s += &csv_line(&columns(v, false));
            }
            s
        }
        Format::Table => {
            let mut s = format!(
                "{}: {} records, {} variables, {:.1} MB on disk (generation {}{})\n\n",
                info.dataset,
                group_digits(info.rows),
                info.variables.len(),
                info.bytes as f64 / 1e6,
                info.generation,
                info.source
                    .as_ref()
                    .map(|s| format!(", from {s}"))
                    .unwrap_or_default()
            );
            // A file's label is the file author's text: no control
            // characters (escape sequences) reach the terminal.
            let shown = |t: &str| -> String {
                t.chars()
                    .map(|c| if c.is_control() && c != '\n' { ' ' } else { c })
                    .collect()
            };
            if let Some(t) = &info.title {
                s += &format!("title: {}\n", shown(t).replace('\n', " "));
            }
            if let Some(d) = &info.description {
                s += &format!("description: {}\n", shown(d).replace('\n', "\n  "));
            }
            if info.title.is_some() || info.description.is_some() {
                s += "\n";
            }
            if let Some(d) = &info.design_summary {
                s += &format!(
                    "survey design: {d} (microtab design to change it; --no-design to ignore it)\n\n"
                );
            }
            let rows: Vec<Vec<String>> = info.variables.iter().map(|v| columns(v, true)).collect();
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
            for (k, v) in info.io_settings.lines() {
                s += &format!("  {k:<11} {v}\n");
            }
            s
        }
    };
    emit(&text)
}
