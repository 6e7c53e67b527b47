//! `microtab tab`: crosstab of ROW × COL, one table per control category.

use crate::cmd::freq::describe;
use crate::cmd::info::plain;
use crate::common::{emit, open, run_timed, Format, QueryArgs};
use crate::render::{
    category_json, category_text, csv_line, csv_num, group_digits, group_float, text_table,
    value_json, Align,
};
use anyhow::Result;
use clap::ValueEnum;
use microtab_engine::stats::{chi_square, ChiSquare};
use microtab_engine::{Category, Cube};
use serde_json::{json, Value as Json};
use std::path::PathBuf;

/// Percentage base.
#[derive(Clone, Copy, Debug, ValueEnum, PartialEq)]
pub enum Pct {
    /// Of the row total.
    Row,
    /// Of the column total.
    Col,
    /// Of the table total.
    Total,
}

/// Arguments of `tab`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// Dataset directory.
    dataset: PathBuf,
    /// Row variable.
    row: String,
    /// Column variable.
    col: String,
    /// Control variable: one table per category.
    #[arg(long)]
    control: Option<String>,
    #[command(flatten)]
    q: QueryArgs,
    /// Percentages to show.
    #[arg(long, value_enum)]
    pct: Option<Pct>,
    /// Chi-square test and Cramér's V.
    #[arg(long)]
    stats: bool,
    /// Show missing codes and system-missing as categories.
    #[arg(long)]
    include_missing: bool,
    /// Show raw codes instead of value labels.
    #[arg(long)]
    codes: bool,
}

/// One two-way table cut from the cube.
struct Table {
    control: Option<Category>,
    rows: Vec<Category>,
    cols: Vec<Category>,
    counts: Vec<Vec<u64>>,
    weighted: Option<Vec<Vec<f64>>>,
}

impl Table {
    fn measure(&self) -> Vec<Vec<f64>> {
        match &self.weighted {
            Some(w) => w.clone(),
            None => self
                .counts
                .iter()
                .map(|r| r.iter().map(|&c| c as f64).collect())
                .collect(),
        }
    }
}

fn cut(cube: &Cube, control: bool) -> Vec<Table> {
    let off = control as usize;
    let nctl = if control {
        cube.dims[0].categories.len()
    } else {
        1
    };
    let (rd, cd) = (&cube.dims[off], &cube.dims[off + 1]);
    let (nr, nc) = (rd.categories.len(), cd.categories.len());
    let mut out = Vec::new();
    for k in 0..nctl {
        let at = |i: usize, j: usize| k * nr * nc + i * nc + j;
        let keep_r: Vec<usize> = (0..nr)
            .filter(|&i| (0..nc).any(|j| cube.counts[at(i, j)] > 0))
            .collect();
        let keep_c: Vec<usize> = (0..nc)
            .filter(|&j| (0..nr).any(|i| cube.counts[at(i, j)] > 0))
            .collect();
        if control && keep_r.is_empty() {
            continue;
        }
        out.push(Table {
            control: control.then(|| cube.dims[0].categories[k].clone()),
            rows: keep_r.iter().map(|&i| rd.categories[i].clone()).collect(),
            cols: keep_c.iter().map(|&j| cd.categories[j].clone()).collect(),
            counts: keep_r
                .iter()
                .map(|&i| keep_c.iter().map(|&j| cube.counts[at(i, j)]).collect())
                .collect(),
            weighted: cube.weighted.as_ref().map(|w| {
                keep_r
                    .iter()
                    .map(|&i| keep_c.iter().map(|&j| w[at(i, j)]).collect())
                    .collect()
            }),
        });
    }
    out
}

fn percents(m: &[Vec<f64>], pct: Pct) -> Vec<Vec<Option<f64>>> {
    let rs: Vec<f64> = m.iter().map(|r| r.iter().sum()).collect();
    let nc = m.first().map_or(0, |r| r.len());
    let cs: Vec<f64> = (0..nc).map(|j| m.iter().map(|r| r[j]).sum()).collect();
    let tot: f64 = rs.iter().sum();
    m.iter()
        .enumerate()
        .map(|(i, r)| {
            r.iter()
                .enumerate()
                .map(|(j, &x)| {
                    let base = match pct {
                        Pct::Row => rs[i],
                        Pct::Col => cs[j],
                        Pct::Total => tot,
                    };
                    (base != 0.0).then(|| 100.0 * x / base)
                })
                .collect()
        })
        .collect()
}

fn col_sums<T: Copy + std::iter::Sum<T>>(m: &[Vec<T>], nc: usize) -> Vec<T> {
    (0..nc).map(|j| m.iter().map(|r| r[j]).sum()).collect()
}

fn stats_json(s: &Option<ChiSquare>) -> Json {
    match s {
        Some(s) => {
            json!({"chi2": s.chi2, "df": s.df, "p": s.p, "cramers_v": s.cramers_v, "n": s.n})
        }
        None => Json::Null,
    }
}

/// Tabulates and prints.
pub fn run(a: Args) -> Result<()> {
    let ds = open(&a.dataset)?;
    let mut by = Vec::new();
    if let Some(c) = &a.control {
        by.push(c.clone());
    }
    by.push(a.row.clone());
    by.push(a.col.clone());
    let q = a.q.query(by, a.include_missing)?;
    let cube = run_timed(&ds, &q, &a.q)?;
    let tables = if cube.counts.is_empty() {
        Vec::new()
    } else {
        cut(&cube, a.control.is_some())
    };
    let tables = if tables.is_empty() && a.control.is_none() {
        vec![Table {
            control: None,
            rows: vec![],
            cols: vec![],
            counts: vec![],
            weighted: None,
        }]
    } else {
        tables
    };
    let rvar = ds.variable(&a.row)?.clone();
    let cvar = ds.variable(&a.col)?.clone();
    let ctl_name = match &a.control {
        Some(c) => Some(ds.variable(c)?.name.clone()),
        None => None,
    };
    let mut json_tables = Vec::new();
    let mut csv = csv_line(
        &[
            "control",
            "control_label",
            "row",
            "row_label",
            "col",
            "col_label",
            "count",
            "weighted",
            "pct",
        ]
        .map(String::from),
    );
    let mut text = String::new();
    for t in &tables {
        let m = t.measure();
        let pct = a.pct.map(|p| percents(&m, p));
        let stats = if a.stats { chi_square(&m) } else { None };
        let nc = t.cols.len();
        let row_counts: Vec<u64> = t.counts.iter().map(|r| r.iter().sum()).collect();
        let col_counts = col_sums(&t.counts, nc);
        let row_w: Option<Vec<f64>> = t
            .weighted
            .as_ref()
            .map(|w| w.iter().map(|r| r.iter().sum()).collect());
        let col_w = t.weighted.as_ref().map(|w| col_sums(w, nc));
        let total_count: u64 = row_counts.iter().sum();
        let total_w: Option<f64> = row_w.as_ref().map(|r| r.iter().sum());
        match a.q.format {
            Format::Json => json_tables.push(json!({
                "control": t.control.as_ref().map(category_json),
                "rows": t.rows.iter().map(category_json).collect::<Vec<_>>(),
                "cols": t.cols.iter().map(category_json).collect::<Vec<_>>(),
                "counts": t.counts,
                "weighted": t.weighted,
                "pct": pct,
                "row_totals": {"counts": row_counts, "weighted": row_w},
                "col_totals": {"counts": col_counts, "weighted": col_w},
                "total": {"count": total_count, "weighted": total_w},
                "stats": if a.stats { stats_json(&stats) } else { Json::Null },
            })),
            Format::Csv => {
                let (cv, cl) = match &t.control {
                    Some(c) => (plain(&value_json(c)), c.label.clone().unwrap_or_default()),
                    None => (String::new(), String::new()),
                };
                for (i, r) in t.rows.iter().enumerate() {
                    for (j, c) in t.cols.iter().enumerate() {
                        csv += &csv_line(&[
                            cv.clone(),
                            cl.clone(),
                            plain(&value_json(r)),
                            r.label.clone().unwrap_or_default(),
                            plain(&value_json(c)),
                            c.label.clone().unwrap_or_default(),
                            t.counts[i][j].to_string(),
                            csv_num(t.weighted.as_ref().map(|w| w[i][j])),
                            csv_num(pct.as_ref().and_then(|p| p[i][j])),
                        ]);
                    }
                }
            }
            Format::Table => {
                let mut title = format!("{} by {}", rvar.name, cvar.name);
                if let (Some(n), Some(c)) = (&ctl_name, &t.control) {
                    title += &format!(", {n} = {}", category_text(c, a.codes));
                }
                text += &describe(&title, None, &a.q);
                let weighted = t.weighted.is_some();
                let mut head = vec![format!("{} \\ {}", rvar.name, cvar.name)];
                head.extend(t.cols.iter().map(|c| category_text(c, a.codes)));
                head.push("Total".into());
                let fmt = |x: f64| {
                    if weighted {
                        group_float(x, 0)
                    } else {
                        group_digits(x as u64)
                    }
                };
                let mut rows = Vec::new();
                for (i, r) in t.rows.iter().enumerate() {
                    let mut line = vec![category_text(r, a.codes)];
                    line.extend(m[i].iter().map(|&x| fmt(x)));
                    line.push(fmt(m[i].iter().sum()));
                    rows.push(line);
                    if let Some(p) = &pct {
                        let mut pl = vec![String::new()];
                        pl.extend(
                            p[i].iter()
                                .map(|x| x.map(|v| format!("{v:.1}%")).unwrap_or_default()),
                        );
                        rows.push(pl);
                    }
                }
                let cs = col_sums(&m, nc);
                let mut tl = vec!["Total".to_string()];
                tl.extend(cs.iter().map(|&x| fmt(x)));
                tl.push(fmt(cs.iter().sum()));
                rows.push(tl);
                let mut align = vec![Align::Right; head.len()];
                align[0] = Align::Left;
                text += &text_table(&head, &rows, &align);
                if weighted {
                    text += &format!(
                        "(cells: weighted counts; unweighted N = {})\n",
                        group_digits(total_count)
                    );
                }
                if a.stats {
                    text += &match stats {
                        Some(s) => format!(
                            "Chi-square = {:.4}, df = {}, p = {:.4e}, Cramer's V = {:.4}\n",
                            s.chi2, s.df, s.p, s.cramers_v
                        ),
                        None => "Chi-square: not defined (fewer than two rows or columns)\n".into(),
                    };
                }
                text.push('\n');
            }
        }
    }
    let out = match a.q.format {
        Format::Json => {
            let j = json!({
                "dataset": a.dataset.display().to_string(),
                "row_var": rvar.name,
                "col_var": cvar.name,
                "control_var": ctl_name,
                "weight": a.q.weight,
                "filter": a.q.filter,
                "pct": a.pct.map(|p| format!("{p:?}").to_lowercase()),
                "tables": json_tables,
            });
            serde_json::to_string(&j)? + "\n"
        }
        Format::Csv => csv,
        Format::Table => text,
    };
    emit(&out)
}
