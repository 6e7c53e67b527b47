//! `microtab means`: weighted mean, SD, N and sum of weights by group.

use crate::cmd::freq::describe;
use crate::common::{emit, open, run_timed, Format, QueryArgs};
use crate::render::{
    category_text, csv_line, csv_num, group_digits, group_float, text_table, value_json, Align,
};
use anyhow::Result;
use microtab_engine::Moments;
use serde_json::{json, Value as Json};
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

/// Computes and prints.
pub fn run(a: Args) -> Result<()> {
    let ds = open(&a.dataset)?;
    let by: Vec<String> =
        a.by.iter()
            .flat_map(|b| b.split_whitespace().map(String::from))
            .collect();
    let mut q = a.q.query(by.clone(), false)?;
    q.measure = Some(a.var.clone());
    let cube = run_timed(&ds, &q, &a.q)?;
    let var = ds.variable(&a.var)?.clone();
    let moments = cube.moments.clone().unwrap_or_default();
    let shape = cube.shape();
    // Enumerate non-empty cells with their category tuple.
    let mut groups = Vec::new();
    let mut total = Moments::default();
    for (c, m) in moments.iter().enumerate() {
        if m.n == 0 {
            continue;
        }
        total.merge(m);
        let mut idx = vec![0; shape.len()];
        let mut r = c;
        for d in (0..shape.len()).rev() {
            idx[d] = r % shape[d];
            r /= shape[d];
        }
        let cats: Vec<_> = idx
            .iter()
            .enumerate()
            .map(|(d, &i)| cube.dims[d].categories[i].clone())
            .collect();
        groups.push((cats, *m));
    }
    let by_names: Vec<String> = cube.dims.iter().map(|d| d.var.name.clone()).collect();
    let text = match a.q.format {
        Format::Json => {
            let g: Vec<Json> = groups
                .iter()
                .map(|(cats, m)| {
                    let mut j = stat_json(m);
                    j["by"] = json!(cats
                        .iter()
                        .map(|c| json!({"value": value_json(c), "label": c.label}))
                        .collect::<Vec<_>>());
                    j
                })
                .collect();
            let j = json!({
                "dataset": a.dataset.display().to_string(),
                "variable": var.name,
                "by": by_names,
                "weight": a.q.weight,
                "filter": a.q.filter,
                "groups": g,
                "total": stat_json(&total),
            });
            serde_json::to_string(&j)? + "\n"
        }
        Format::Csv => {
            let mut head = by_names.clone();
            head.extend(["mean", "sd", "n", "sum_weights"].map(String::from));
            let mut s = csv_line(&head);
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
            for (cats, m) in &groups {
                s += &line(
                    cats.iter()
                        .map(|c| crate::cmd::info::plain(&value_json(c)))
                        .collect(),
                    m,
                );
            }
            let mut first = vec!["Total".to_string()];
            first.resize(by_names.len().max(1), String::new());
            s += &line(first, &total);
            s
        }
        Format::Table => {
            let mut head = by_names.clone();
            head.extend(["mean", "sd", "N", "sum of weights"].map(String::from));
            let row = |first: Vec<String>, m: &Moments| {
                let mut r = first;
                r.push(if m.w != 0.0 {
                    group_float(m.mean, 2)
                } else {
                    "-".into()
                });
                r.push(
                    m.sd()
                        .map(|s| group_float(s, 2))
                        .unwrap_or_else(|| "-".into()),
                );
                r.push(group_digits(m.n));
                r.push(group_float(m.w, 2));
                r
            };
            let mut rows: Vec<Vec<String>> = groups
                .iter()
                .map(|(cats, m)| row(cats.iter().map(|c| category_text(c, false)).collect(), m))
                .collect();
            let mut first = vec!["Total".to_string()];
            first.resize(by_names.len().max(1), String::new());
            rows.push(row(first, &total));
            let mut align = vec![Align::Right; head.len().max(4)];
            for x in align.iter_mut().take(by_names.len()) {
                *x = Align::Left;
            }
            let mut s = describe(&format!("Mean of {}", var.name), var.label.as_deref(), &a.q);
            s += &text_table(&head, &rows, &align);
            s
        }
    };
    emit(&text)
}
