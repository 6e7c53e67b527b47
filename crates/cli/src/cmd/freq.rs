//! `microtab freq`: frequency table of one variable.

use crate::common::{open, run_timed, weight_cases_json, weight_note, Format, QueryArgs};
use crate::render::{
    category_json, category_text, csv_line, csv_num, fmt_sig, group_digits, json_close, json_item,
    json_open, stdout, text_table, value_json, Align,
};
use anyhow::Result;
use serde_json::json;
use std::io::Write;
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

/// Counts and prints, row by row as they are formatted.
pub fn run(a: Args) -> Result<()> {
    let ds = open(&a.dataset)?;
    let q = a.q.query(vec![a.var.clone()], a.include_missing)?;
    let ans = run_timed(&ds, &q, &a.q)?;
    let cube = &ans.cube;
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
    let mut out = stdout();
    match a.q.format {
        Format::Json => {
            let head = json!({
                "dataset": a.dataset.display().to_string(),
                "variable": var.name,
                "label": var.label,
                "weight": a.q.weight,
                "filter": a.q.filter,
                "total": {"count": total_count, "weighted": total_w},
                "weight_cases": weight_cases_json(&ans.weights),
            });
            json_open(&mut out, &head, "rows")?;
            let mut first = true;
            for i in 0..cats.len() {
                let mut c = category_json(&cats[i]);
                c["count"] = json!(cube.counts[i]);
                c["weighted"] = json!(weighted.map(|w| w[i]));
                c["percent"] = json!(pct(i));
                json_item(&mut out, &mut first, &c)?;
            }
            json_close(&mut out)?;
        }
        Format::Csv => {
            out.write_all(
                csv_line(
                    &["value", "label", "missing", "count", "weighted", "percent"]
                        .map(String::from),
                )
                .as_bytes(),
            )?;
            for i in 0..cats.len() {
                let v = value_json(&cats[i]);
                out.write_all(
                    csv_line(&[
                        crate::cmd::info::plain(&v),
                        cats[i].label.clone().unwrap_or_default(),
                        cats[i].missing.to_string(),
                        cube.counts[i].to_string(),
                        csv_num(weighted.map(|w| w[i])),
                        csv_num(pct(i)),
                    ])
                    .as_bytes(),
                )?;
            }
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
                    r.push(fmt_sig(w[i], 7));
                }
                r.push(
                    pct(i)
                        .map(|p| format!("{p:.1}"))
                        .unwrap_or_else(|| "-".into()),
                );
                rows.push(r);
            }
            let mut t = vec!["Total".to_string(), group_digits(total_count)];
            if let Some(w) = total_w {
                t.push(fmt_sig(w, 7));
            }
            t.push(if base != 0.0 {
                "100.0".into()
            } else {
                "-".into()
            });
            rows.push(t);
            let mut align = vec![Align::Right; head.len()];
            align[0] = Align::Left;
            out.write_all(describe(&var.name, var.label.as_deref(), &a.q).as_bytes())?;
            out.write_all(text_table(&head, &rows, &align).as_bytes())?;
            out.write_all(weight_note(&ans.weights, a.q.weight.as_deref()).as_bytes())?;
        }
    }
    out.flush()?;
    Ok(())
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
