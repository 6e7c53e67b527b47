//! `microtab ratio`: the ratio of two totals per group (R `svyratio`).

use crate::cmd::regress::{heading, notes, num};
use crate::common::{answer_with, write_json, Format, QueryArgs};
use crate::render::{
    category_text, csv_line, csv_num, fmt_sig, plain_value, stdout, text_table, Align,
};
use anyhow::Result;
use microtab_analysis::ratio::{Ratio, RatioRow};
use microtab_analysis::Analysis;
use std::io::Write;

/// Arguments of `ratio`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// Dataset directory.
    dataset: std::path::PathBuf,
    /// The numerator's variable (its weighted total is divided).
    numerator: String,
    /// The denominator's variable.
    denominator: String,
    /// Grouping variable(s): one ratio per group; repeat or separate with
    /// commas; recodes as for means.
    #[arg(long, num_args = 1..)]
    by: Vec<String>,
    #[command(flatten)]
    q: QueryArgs,
}

/// Computes and prints.
pub fn run(a: Args) -> Result<()> {
    // Names with spaces or commas stay whole: `answer_with` reads the
    // arguments with the dataset's names (`var_names`).
    let analysis = Analysis::Ratio {
        numerator: a.numerator.clone(),
        denominator: a.denominator.clone(),
        by: a.by.clone(),
    };
    let r: Box<Ratio> = answer_with(&a.dataset, &a.q, analysis, false, |_| {})?;
    let mut out = stdout();
    match a.q.format {
        Format::Json => write_json(&mut out, &r)?,
        Format::Csv => {
            let mut head: Vec<String> = r.by.clone();
            head.extend(
                [
                    "n",
                    "numerator_total",
                    "denominator_total",
                    "ratio",
                    "se",
                    "lo",
                    "hi",
                    "cv",
                    "unreliable",
                    "replicates_dropped",
                ]
                .map(String::from),
            );
            write!(out, "{}", csv_line(&head))?;
            for row in r.groups.iter().chain([&r.total]) {
                let mut cells: Vec<String> = if row.by.is_empty() {
                    let mut v = vec![String::new(); r.by.len()];
                    if let Some(f) = v.first_mut() {
                        *f = "Total".into();
                    }
                    v
                } else {
                    row.by.iter().map(plain_value).collect()
                };
                cells.extend(numbers(row).map(csv_num));
                cells.extend([
                    csv_num(row.cv),
                    row.unreliable.to_string(),
                    row.replicates_dropped.to_string(),
                ]);
                write!(out, "{}", csv_line(&cells))?;
            }
        }
        Format::Table => write!(out, "{}", table(&r))?,
    }
    Ok(())
}

/// A row's numbers: n, the totals, the ratio, its SE and interval.
fn numbers(row: &RatioRow) -> [Option<f64>; 7] {
    let i = row.inference.as_ref();
    [
        Some(row.n as f64),
        Some(row.numerator_total),
        Some(row.denominator_total),
        i.map(|i| i.estimate),
        i.map(|i| i.se),
        i.map(|i| i.lo),
        i.map(|i| i.hi),
    ]
    .map(|x| x.filter(|v| v.is_finite()))
}

fn table(r: &Ratio) -> String {
    let p = &r.provenance;
    let title = format!(
        "Ratio of the totals of {} to {}",
        r.numerator, r.denominator
    );
    let mut s = heading(title, p);
    let level = fmt_sig(p.level * 100.0, 4);
    let mut header: Vec<String> = if r.by.is_empty() {
        vec![String::new()]
    } else {
        vec![r.by.join(" × ")]
    };
    header.extend([
        "n".to_string(),
        format!("{} total", r.numerator),
        format!("{} total", r.denominator),
        "ratio".into(),
        "se".into(),
        format!("{level}% CI low"),
        "high".into(),
    ]);
    let rows: Vec<Vec<String>> = r
        .groups
        .iter()
        .chain([&r.total])
        .map(|row| {
            let name = if row.by.is_empty() {
                "Total".to_string()
            } else {
                row.by
                    .iter()
                    .map(|c| category_text(c, false))
                    .collect::<Vec<_>>()
                    .join(" × ")
            };
            let mut v = vec![name];
            v.extend(numbers(row).map(|x| x.map_or("–".into(), num)));
            if row.unreliable {
                v[4].push('*');
            }
            v
        })
        .collect();
    let mut align = vec![Align::Right; 8];
    align[0] = Align::Left;
    s.push_str(&text_table(&header, &rows, &align));
    s.push_str(&format!(
        "df of the intervals: {}   standard errors: {}\n",
        num(r.df),
        p.method
    ));
    if r.groups.iter().chain([&r.total]).any(|g| g.unreliable) {
        s.push_str("* unreliable: fewer records than --min-n, or a coefficient of variation above --max-cv\n");
    }
    s.push_str(&notes(p));
    s
}
