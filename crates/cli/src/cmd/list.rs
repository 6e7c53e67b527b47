//! `microtab list`: the values of chosen variables for individual records
//! (SDA's LISTCASES), filtered, capped at `--limit` records.

use crate::common::{open, var_names, Format};
use crate::render::{category_text, csv_line, exact_value, stdout, text_table, value_json, Align};
use anyhow::Result;
use microtab_engine::{list_cases, list_vars, parse_filter, ListQuery};
use std::io::Write;
use std::path::PathBuf;

/// Arguments of `list`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// Dataset directory.
    dataset: PathBuf,
    /// Variables to show (separated by spaces or commas).
    #[arg(required = true)]
    vars: Vec<String>,
    /// SDA-style filter, e.g. "AGE(25-64) SEX(2)".
    #[arg(long)]
    filter: Option<String>,
    /// Most records to show.
    #[arg(long, default_value_t = 20)]
    limit: u64,
    /// Show every record that passes the filter (no limit).
    #[arg(long, conflicts_with = "limit")]
    all: bool,
    /// Show value labels instead of codes (codes where a value has none).
    #[arg(long)]
    labels: bool,
    /// Output format.
    #[arg(long, value_enum, default_value_t = Format::Table)]
    format: Format,
}

/// Lists the records.
pub fn run(a: Args) -> Result<()> {
    let ds = open(&a.dataset)?;
    let vars = var_names(&ds, &a.vars);
    let q = ListQuery {
        vars,
        filter: match &a.filter {
            Some(f) => parse_filter(f)?,
            None => Vec::new(),
        },
        rows: None,
    };
    let vars = list_vars(&ds, &q)?;
    let limit = if a.all { u64::MAX } else { a.limit };
    let shown = |c: &microtab_engine::Category| -> String {
        if a.labels {
            c.label.clone().unwrap_or_else(|| exact_value(c))
        } else {
            exact_value(c)
        }
    };
    let mut out = stdout();
    let mut n = 0u64;
    let mut more = false;
    match a.format {
        Format::Csv => {
            let mut head = vec!["record".to_string()];
            head.extend(vars.iter().map(|v| v.name.clone()));
            out.write_all(csv_line(&head).as_bytes())?;
            let mut err = None;
            list_cases(&ds, &q, |rec, cells| {
                if n == limit {
                    more = true;
                    return false;
                }
                n += 1;
                let mut line = vec![rec.to_string()];
                line.extend(cells.iter().map(shown));
                if let Err(e) = out.write_all(csv_line(&line).as_bytes()) {
                    err = Some(e);
                    return false;
                }
                true
            })?;
            if let Some(e) = err {
                return Err(e.into());
            }
        }
        Format::Json => {
            // Streamed: one record at a time, whatever their number.
            let head = serde_json::json!({
                "dataset": a.dataset.display().to_string(),
                "filter": a.filter,
                "variables": vars.iter().map(|v| &v.name).collect::<Vec<_>>(),
            });
            let head = serde_json::to_string(&head)?;
            out.write_all(&head.as_bytes()[..head.len() - 1])?;
            out.write_all(b",\"records\":[")?;
            let mut err = None;
            list_cases(&ds, &q, |rec, cells| {
                if n == limit {
                    more = true;
                    return false;
                }
                let mut o = serde_json::Map::new();
                o.insert("record".into(), rec.into());
                for (v, c) in vars.iter().zip(cells) {
                    let val = if a.labels && c.label.is_some() {
                        serde_json::Value::String(c.label.clone().unwrap_or_default())
                    } else {
                        value_json(c)
                    };
                    o.insert(v.name.clone(), val);
                }
                let sep: &[u8] = if n == 0 { b"\n" } else { b",\n" };
                n += 1;
                let r = out.write_all(sep).and_then(|_| {
                    serde_json::to_writer(&mut out, &o).map_err(std::io::Error::other)
                });
                if let Err(e) = r {
                    err = Some(e);
                    return false;
                }
                true
            })?;
            if let Some(e) = err {
                return Err(e.into());
            }
            writeln!(out, "\n],\"truncated\":{more}}}")?;
        }
        Format::Table => {
            let mut rows = Vec::new();
            list_cases(&ds, &q, |rec, cells| {
                if n == limit {
                    more = true;
                    return false;
                }
                n += 1;
                let mut line = vec![rec.to_string()];
                line.extend(cells.iter().map(|c| {
                    if a.labels {
                        category_text(c, false)
                    } else if matches!(c.value, microtab_engine::Value::Null) {
                        ".".into()
                    } else {
                        c.display.clone()
                    }
                }));
                rows.push(line);
                true
            })?;
            let mut head = vec!["record".to_string()];
            head.extend(vars.iter().map(|v| v.name.clone()));
            let align: Vec<Align> = std::iter::once(Align::Right)
                .chain(vars.iter().map(|v| {
                    if v.kind == microtab_store::Kind::String || a.labels {
                        Align::Left
                    } else {
                        Align::Right
                    }
                }))
                .collect();
            out.write_all(text_table(&head, &rows, &align).as_bytes())?;
            if more {
                writeln!(
                    out,
                    "(first {n} matching records; --limit N or --all for more)"
                )?;
            } else if n == 0 {
                writeln!(out, "(no records match)")?;
            }
        }
    }
    out.flush()?;
    Ok(())
}
