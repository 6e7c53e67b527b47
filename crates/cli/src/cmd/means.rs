//! `microtab means`: weighted mean, SD, N and sum of weights by group.

use crate::cmd::freq::describe;
use crate::common::{open, run_timed, weight_cases_json, weight_note, Format, QueryArgs};
use crate::render::{
    category_text, csv_line, csv_num, fmt_sig, group_digits, json_close, json_item, json_open,
    stdout, text_table, value_json, Align,
};
use anyhow::Result;
use microtab_engine::Moments;
use serde_json::{json, Value as Json};
use std::io::Write;
use std::path::PathBuf;

/// Arguments of `means`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// Dataset directory.
    dataset: PathBuf,
    /// Analysis variable.
    var: String,
    /// Grouping variable(s); repeat or separate with commas.
    #[arg(long, value_delimiter = ',', num_args = 1.., required = true)]
    by: Vec<String>,
    #[command(flatten)]
    q: QueryArgs,
}

fn stat_json(m: &Moments) -> Json {
    json!({
        "mean": (m.w != 0.0).then_some(m.mean),
        "sd": m.sd(),
        "n": m.n,
        "sum_weights": m.w,
    })
}

/// Computes and prints, group by group.
pub fn run(a: Args) -> Result<()> {
    let ds = open(&a.dataset)?;
    let by: Vec<String> =
        a.by.iter()
            .flat_map(|b| b.split_whitespace().map(String::from))
            .collect();
    let mut q = a.q.query(by.clone(), false)?;
    q.measure = Some(a.var.clone());
    let ans = run_timed(&ds, &q, &a.q)?;
    let cube = &ans.cube;
    let var = ds.variable(&a.var)?.clone();
    let empty = Vec::new();
    let moments = cube.moments.as_ref().unwrap_or(&empty);
    let shape = cube.shape();
    let total = moments.iter().fold(Moments::default(), |mut t, m| {
        if m.n > 0 {
            t.merge(m);
        }
        t
    });
    // Non-empty cells with their category tuple, in order.
    let groups = moments
        .iter()
        .enumerate()
        .filter(|(_, m)| m.n > 0)
        .map(|(c, m)| {
            let mut idx = vec![0; shape.len()];
            let mut r = c;
            for d in (0..shape.len()).rev() {
                idx[d] = r % shape[d];
                r /= shape[d];
            }
            let cats: Vec<_> = idx
                .iter()
                .enumerate()
                .map(|(d, &i)| &cube.dims[d].categories[i])
                .collect();
            (cats, *m)
        });
    let by_names: Vec<String> = cube.dims.iter().map(|d| d.var.name.clone()).collect();
    let mut out = stdout();
    match a.q.format {
        Format::Json => {
            json_open(
                &mut out,
                &json!({
                    "dataset": a.dataset.display().to_string(),
                    "variable": var.name,
                    "by": by_names,
                    "weight": a.q.weight,
                    "filter": a.q.filter,
                    "total": stat_json(&total),
                    "weight_cases": weight_cases_json(&ans.weights),
                }),
                "groups",
            )?;
            let mut first = true;
            for (cats, m) in groups {
                let mut j = stat_json(&m);
                j["by"] = json!(cats
                    .iter()
                    .map(|c| json!({"value": value_json(c), "label": c.label}))
                    .collect::<Vec<_>>());
                json_item(&mut out, &mut first, &j)?;
            }
            json_close(&mut out)?;
        }
        Format::Csv => {
            let mut head = by_names.clone();
            head.extend(["mean", "sd", "n", "sum_weights"].map(String::from));
            out.write_all(csv_line(&head).as_bytes())?;
            let line = |first: Vec<String>, m: &Moments| {
                let mut f = first;
                f.extend([
                    csv_num((m.w != 0.0).then_some(m.mean)),
                    csv_num(m.sd()),
                    m.n.to_string(),
                    format!("{}", m.w),
                ]);
                csv_line(&f)
            };
            for (cats, m) in groups {
                out.write_all(
                    line(
                        cats.iter()
                            .map(|c| crate::cmd::info::plain(&value_json(c)))
                            .collect(),
                        &m,
                    )
                    .as_bytes(),
                )?;
            }
            let mut first = vec!["Total".to_string()];
            first.resize(by_names.len().max(1), String::new());
            out.write_all(line(first, &total).as_bytes())?;
        }
        Format::Table => {
            let mut head = by_names.clone();
            head.extend(["mean", "sd", "N", "sum of weights"].map(String::from));
            let row = |first: Vec<String>, m: &Moments| {
                let mut r = first;
                r.push(if m.w != 0.0 {
                    fmt_sig(m.mean, 6)
                } else {
                    "-".into()
                });
                r.push(m.sd().map(|s| fmt_sig(s, 6)).unwrap_or_else(|| "-".into()));
                r.push(group_digits(m.n));
                r.push(fmt_sig(m.w, 7));
                r
            };
            let mut rows: Vec<Vec<String>> = groups
                .map(|(cats, m)| row(cats.iter().map(|c| category_text(c, false)).collect(), &m))
                .collect();
            let mut first = vec!["Total".to_string()];
            first.resize(by_names.len().max(1), String::new());
            rows.push(row(first, &total));
            let mut align = vec![Align::Right; head.len().max(4)];
            for x in align.iter_mut().take(by_names.len()) {
                *x = Align::Left;
            }
            out.write_all(
                describe(&format!("Mean of {}", var.name), var.label.as_deref(), &a.q).as_bytes(),
            )?;
            out.write_all(text_table(&head, &rows, &align).as_bytes())?;
            out.write_all(weight_note(&ans.weights, a.q.weight.as_deref()).as_bytes())?;
        }
    }
    out.flush()?;
    Ok(())
}
