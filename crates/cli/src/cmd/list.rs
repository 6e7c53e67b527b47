//! `microtab list`: the values of chosen variables for individual records
//! (SDA's LISTCASES), filtered, capped at `--limit` records.

use crate::common::{open, var_names, Format};
use crate::render::{category_text, csv_line, exact_value, stdout, text_table, value_json, Align};
use anyhow::Result;
use microtab_engine::{list_cases, list_vars, parse_filter, Category, ListQuery};
use microtab_store::Dataset;
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
    match a.format {
        Format::Csv => {
            let mut head = vec!["record".to_string()];
            head.extend(vars.iter().map(|v| v.name.clone()));
            out.write_all(csv_line(&head).as_bytes())?;
            each_record(&ds, &q, limit, |_, rec, cells| {
                let mut line = vec![rec.to_string()];
                line.extend(cells.iter().map(shown));
                out.write_all(csv_line(&line).as_bytes())
            })?;
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
            let (_, more) = each_record(&ds, &q, limit, |i, rec, cells| {
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
                let sep: &[u8] = if i == 0 { b"\n" } else { b",\n" };
                out.write_all(sep)?;
                serde_json::to_writer(&mut out, &o).map_err(std::io::Error::other)
            })?;
            writeln!(out, "\n],\"truncated\":{more}}}")?;
        }
        Format::Table => {
            let mut rows = Vec::new();
            let (n, more) = each_record(&ds, &q, limit, |_, rec, cells| {
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
                Ok(())
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

/// Calls `f(i, record, cells)` for each of the first `limit` records that
/// pass the query (`i` counts from 0), stopping at the first write error;
/// the records shown and whether more passed.
fn each_record(
    ds: &Dataset,
    q: &ListQuery,
    limit: u64,
    mut f: impl FnMut(u64, u64, &[Category]) -> std::io::Result<()>,
) -> Result<(u64, bool)> {
    let (mut n, mut more, mut err) = (0u64, false, None);
    list_cases(ds, q, |rec, cells| {
        if n == limit {
            more = true;
            return false;
        }
        n += 1;
        match f(n - 1, rec, cells) {
            Ok(()) => true,
            Err(e) => {
                err = Some(e);
                false
            }
        }
    })?;
    match err {
        Some(e) => Err(e.into()),
        None => Ok((n, more)),
    }
}
