//! `microtab freq`: frequency table of one variable.

use crate::common::{emit, open, run_timed, Format, QueryArgs};
use crate::render::{
    category_json, category_text, csv_line, csv_num, group_digits, group_float, text_table,
    value_json, Align,
};
use anyhow::Result;
use serde_json::json;
use std::path::PathBuf;

/// Arguments of `freq`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// Dataset directory.
    dataset: PathBuf,
    /// Variable to count.
    var: String,
    #[command(flatten)]
    q: QueryArgs,
    /// List missing codes and system-missing as their own rows.
    #[arg(long)]
    include_missing: bool,
    /// Show raw codes instead of value labels.
    #[arg(long)]
    codes: bool,
}

/// Counts and prints.
pub fn run(a: Args) -> Result<()> {
    let ds = open(&a.dataset)?;
    let q = a.q.query(vec![a.var.clone()], a.include_missing)?;
    let cube = run_timed(&ds, &q, &a.q)?;
    let var = ds.variable(&a.var)?;
    let cats = cube
        .dims
        .first()
        .map(|d| d.categories.clone())
        .unwrap_or_default();
    let weighted = cube.weighted.as_ref();
    let measure = |i: usize| weighted.map_or(cube.counts[i] as f64, |w| w[i]);
    let base: f64 = (0..cats.len())
        .filter(|&i| !cats[i].missing)
        .map(measure)
        .sum();
    let pct = |i: usize| (!cats[i].missing && base != 0.0).then(|| 100.0 * measure(i) / base);
    let total_count: u64 = cube.counts.iter().sum();
    let total_w: Option<f64> = weighted.map(|w| w.iter().sum());
    let text = match a.q.format {
        Format::Json => {
            let rows: Vec<_> = (0..cats.len())
                .map(|i| {
                    let mut c = category_json(&cats[i]);
                    c["count"] = json!(cube.counts[i]);
                    c["weighted"] = json!(weighted.map(|w| w[i]));
                    c["percent"] = json!(pct(i));
                    c
                })
                .collect();
            let j = json!({
                "dataset": a.dataset.display().to_string(),
                "variable": var.name,
                "label": var.label,
                "weight": a.q.weight,
                "filter": a.q.filter,
                "rows": rows,
                "total": {"count": total_count, "weighted": total_w},
            });
            serde_json::to_string(&j)? + "\n"
        }
        Format::Csv => {
            let mut s = csv_line(
                &["value", "label", "missing", "count", "weighted", "percent"].map(String::from),
            );
            for i in 0..cats.len() {
                let v = value_json(&cats[i]);
                s += &csv_line(&[
                    crate::cmd::info::plain(&v),
                    cats[i].label.clone().unwrap_or_default(),
                    cats[i].missing.to_string(),
                    cube.counts[i].to_string(),
                    csv_num(weighted.map(|w| w[i])),
                    csv_num(pct(i)),
                ]);
            }
            s
        }
        Format::Table => {
            let mut head = vec![var.name.clone(), "count".to_string()];
            if weighted.is_some() {
                head.push("weighted".into());
            }
            head.push("percent".into());
            let mut rows = Vec::new();
            for i in 0..cats.len() {
                let mut r = vec![
                    category_text(&cats[i], a.codes),
                    group_digits(cube.counts[i]),
                ];
                if let Some(w) = weighted {
                    r.push(group_float(w[i], 2));
                }
                r.push(
                    pct(i)
                        .map(|p| format!("{p:.1}"))
                        .unwrap_or_else(|| "-".into()),
                );
                rows.push(r);
            }
            let mut r = vec!["Total".to_string(), group_digits(total_count)];
            if let Some(w) = total_w {
                r.push(group_float(w, 2));
            }
            r.push(if base != 0.0 {
                "100.0".into()
            } else {
                "-".into()
            });
            rows.push(r);
            let mut align = vec![Align::Right; head.len()];
            align[0] = Align::Left;
            let mut s = describe(&var.name, var.label.as_deref(), &a.q);
            s += &text_table(&head, &rows, &align);
            s
        }
    };
    emit(&text)
}

/// The caption line above a table.
pub fn describe(title: &str, label: Option<&str>, q: &QueryArgs) -> String {
    let mut s = title.to_string();
    if let Some(l) = label {
        s += &format!(" — {l}");
    }
    if let Some(w) = &q.weight {
        s += &format!("  (weighted by {w})");
    }
    if let Some(f) = &q.filter {
        s += &format!("  [filter: {f}]");
    }
    s + "\n"
}
