//! `microtab tab`: crosstab of ROW × COL, one table per control category.

use crate::cmd::freq::describe;
use crate::cmd::info::plain;
use crate::common::{open, run_timed, weight_cases_json, weight_note, Format, QueryArgs};
use crate::render::{
    category_json, category_text, csv_line, csv_num, fmt_sig, group_digits, json_close, json_item,
    json_open, stdout, text_table, value_json, Align,
};
use anyhow::Result;
use clap::ValueEnum;
use microtab_engine::stats::{chi_square, ChiSquare};
use microtab_engine::{Category, Cube};
use serde_json::{json, Value as Json};
use std::io::Write;
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

/// The number of tables `cut_one` can cut (one per control category).
fn tables_in(cube: &Cube, control: bool) -> usize {
    if control {
        cube.dims[0].categories.len()
    } else {
        1
    }
}

/// Table `k` of the cube (the `k`-th control category's), without the
/// rows and columns that are empty in it; `None` for a control category
/// with no rows.
fn cut_one(cube: &Cube, control: bool, k: usize) -> Option<Table> {
    let off = control as usize;
    let (rd, cd) = (&cube.dims[off], &cube.dims[off + 1]);
    let (nr, nc) = (rd.categories.len(), cd.categories.len());
    let at = |i: usize, j: usize| k * nr * nc + i * nc + j;
    let keep_r: Vec<usize> = (0..nr)
        .filter(|&i| (0..nc).any(|j| cube.counts[at(i, j)] > 0))
        .collect();
    let keep_c: Vec<usize> = (0..nc)
        .filter(|&j| (0..nr).any(|i| cube.counts[at(i, j)] > 0))
        .collect();
    if control && keep_r.is_empty() {
        return None;
    }
    Some(Table {
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
    })
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

/// Tabulates and prints, table by table as they are cut from the cube.
pub fn run(a: Args) -> Result<()> {
    let ds = open(&a.dataset)?;
    let mut by = Vec::new();
    if let Some(c) = &a.control {
        by.push(c.clone());
    }
    by.push(a.row.clone());
    by.push(a.col.clone());
    let q = a.q.query(by, a.include_missing)?;
    let ans = run_timed(&ds, &q, &a.q)?;
    let cube = &ans.cube;
    let control = a.control.is_some();
    let n_tables = if cube.counts.is_empty() {
        0
    } else {
        tables_in(cube, control)
    };
    let empty = || Table {
        control: None,
        rows: vec![],
        cols: vec![],
        counts: vec![],
        weighted: None,
    };
    let rvar = ds.variable(&a.row)?.clone();
    let cvar = ds.variable(&a.col)?.clone();
    let ctl_name = match &a.control {
        Some(c) => Some(ds.variable(c)?.name.clone()),
        None => None,
    };
    let mut out = stdout();
    match a.q.format {
        Format::Json => json_open(
            &mut out,
            &json!({
                "dataset": a.dataset.display().to_string(),
                "row_var": rvar.name,
                "col_var": cvar.name,
                "control_var": ctl_name,
                "weight": a.q.weight,
                "filter": a.q.filter,
                "pct": a.pct.map(|p| format!("{p:?}").to_lowercase()),
                "weight_cases": weight_cases_json(&ans.weights),
            }),
            "tables",
        )?,
        Format::Csv => out.write_all(
            csv_line(
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
            )
            .as_bytes(),
        )?,
        Format::Table => {}
    }
    let mut first = true;
    // An uncontrolled table with no rows is still shown (empty).
    let tables = (0..n_tables)
        .filter_map(|k| cut_one(cube, control, k))
        .chain((n_tables == 0 && !control).then(empty));
    for t in tables {
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
            Format::Json => json_item(
                &mut out,
                &mut first,
                &json!({
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
                }),
            )?,
            Format::Csv => {
                let (cv, cl) = match &t.control {
                    Some(c) => (plain(&value_json(c)), c.label.clone().unwrap_or_default()),
                    None => (String::new(), String::new()),
                };
                for (i, r) in t.rows.iter().enumerate() {
                    for (j, c) in t.cols.iter().enumerate() {
                        out.write_all(
                            csv_line(&[
                                cv.clone(),
                                cl.clone(),
                                plain(&value_json(r)),
                                r.label.clone().unwrap_or_default(),
                                plain(&value_json(c)),
                                c.label.clone().unwrap_or_default(),
                                t.counts[i][j].to_string(),
                                csv_num(t.weighted.as_ref().map(|w| w[i][j])),
                                csv_num(pct.as_ref().and_then(|p| p[i][j])),
                            ])
                            .as_bytes(),
                        )?;
                    }
                }
            }
            Format::Table => {
                let mut text = String::new();
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
                        fmt_sig(x, 6)
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
                            "Chi-square = {}, df = {}, p = {:.4e}, Cramer's V = {}\n",
                            fmt_sig(s.chi2, 6),
                            s.df,
                            s.p,
                            fmt_sig(s.cramers_v, 4)
                        ),
                        None => "Chi-square: not defined (fewer than two rows or columns)\n".into(),
                    };
                }
                text.push('\n');
                out.write_all(text.as_bytes())?;
            }
        }
    }
    match a.q.format {
        Format::Json => json_close(&mut out)?,
        Format::Table => {
            out.write_all(weight_note(&ans.weights, a.q.weight.as_deref()).as_bytes())?
        }
        Format::Csv => {}
    }
    out.flush()?;
    Ok(())
}
