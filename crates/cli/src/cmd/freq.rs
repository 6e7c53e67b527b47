//! `microtab freq`: frequency table of one variable.

use crate::common::{
    answer, ci_text, csv_design, csv_design_head, csv_se, csv_se_head, most_dropped, se_text,
    table_notes, table_text, write_json, Format, QueryArgs, ShowArgs,
};
use crate::render::{category_text, csv_line, csv_num, fmt_sig, group_digits, plain_value, stdout};
use anyhow::Result;
use microtab_analysis::survey::{DesignInfo, Uncertainty};
use microtab_analysis::{Analysis, Frequencies};
use std::io::Write;
use std::path::PathBuf;

/// The datasets an analysis answers over (shared by `freq`, `tab` and
/// `means`).
#[derive(clap::Args, Debug)]
pub struct Datasets {
    /// Dataset directory, or a quoted pattern naming several datasets with
    /// the same variables ('years/*.mtab'), answered as one.
    pub dataset: PathBuf,
}

/// Arguments of `freq`.
#[derive(clap::Args, Debug)]
pub struct Args {
    #[command(flatten)]
    data: Datasets,
    /// Variable to count.
    var: String,
    #[command(flatten)]
    q: QueryArgs,
    #[command(flatten)]
    show: ShowArgs,
}

/// Counts and prints, row by row as they are formatted.
pub fn run(a: Args) -> Result<()> {
    let analysis = Analysis::Freq { var: a.var.clone() };
    let f: Frequencies = answer(&a.data.dataset, &a.q, analysis, a.show.include_missing)?;
    let mut out = stdout();
    match a.q.format {
        Format::Json => write_json(&mut out, &f)?,
        Format::Csv => {
            let head = csv_head(
                &["value", "label", "missing", "count", "weighted", "percent"].map(String::from),
                &["weighted", "percent"],
                f.context.design.is_some(),
            );
            out.write_all(csv_line(&head).as_bytes())?;
            for r in f.rows() {
                let mut line = vec![
                    plain_value(r.category),
                    r.category.label.clone().unwrap_or_default(),
                    r.category.missing.to_string(),
                    r.count.to_string(),
                    csv_num(r.weighted),
                    csv_num(r.percent),
                ];
                csv_se_cells(
                    &mut line,
                    &[&r.weighted_se, &r.percent_se],
                    &f.context.design,
                );
                out.write_all(csv_line(&line).as_bytes())?;
            }
        }
        Format::Table => {
            let weighted = f.total.weighted;
            let se = f.context.design.is_some();
            let level = f.context.design.as_ref().map_or(95.0, |d| 100.0 * d.level);
            let mut head = vec![f.variable.clone(), "count".to_string()];
            if weighted.is_some() {
                head.push("weighted".into());
                if se {
                    head.push("SE".into());
                }
            }
            head.push("percent".into());
            if se {
                head.push("SE".into());
                head.push(format!("{}% CI", fmt_sig(level, 4)));
            }
            let mut rows = Vec::new();
            for r in f.rows() {
                let mut line = vec![
                    category_text(r.category, a.show.codes),
                    group_digits(r.count),
                ];
                if let Some(w) = r.weighted {
                    line.push(fmt_sig(w, 7));
                    if se {
                        line.push(se_text(&r.weighted_se, |v| fmt_sig(v, 4)));
                    }
                }
                line.push(
                    r.percent
                        .map(|p| format!("{p:.1}"))
                        .unwrap_or_else(|| "-".into()),
                );
                if se {
                    line.push(se_text(&r.percent_se, |v| format!("{v:.2}")));
                    line.push(ci_text(&r.percent_se, 1));
                }
                rows.push(line);
            }
            let mut t = vec!["Total".to_string(), group_digits(f.total.count)];
            if let Some(w) = weighted {
                t.push(fmt_sig(w, 7));
                if se {
                    t.push(String::new());
                }
            }
            t.push(if f.base() != 0.0 {
                "100.0".into()
            } else {
                "-".into()
            });
            if se {
                t.extend([String::new(), String::new()]);
            }
            rows.push(t);
            let most = f
                .rows()
                .map(|r| most_dropped([&r.weighted_se, &r.percent_se]))
                .max()
                .unwrap_or(0);
            let c = &f.context;
            out.write_all(
                table_text(c, &f.variable, f.label.as_deref(), &head, &rows, 1).as_bytes(),
            )?;
            out.write_all(table_notes(c, true, most).as_bytes())?;
        }
    }
    out.flush()?;
    Ok(())
}

/// A result's CSV header: `names`, then, under a survey design
/// (`design`), the uncertainty columns of each of `estimates` and the
/// design's columns (shared by `freq`, `tab` and `means`).
pub fn csv_head(names: &[String], estimates: &[&str], design: bool) -> Vec<String> {
    let mut head = names.to_vec();
    if design {
        for e in estimates {
            head.extend(csv_se_head(e));
        }
        head.extend(csv_design_head());
    }
    head
}

/// Appends to a CSV line, under a survey design, the uncertainties `us`
/// (in [`csv_head`]'s order) and the design's columns.
pub fn csv_se_cells(
    line: &mut Vec<String>,
    us: &[&Option<Uncertainty>],
    design: &Option<DesignInfo>,
) {
    if let Some(d) = design {
        for u in us {
            line.extend(csv_se(u));
        }
        line.extend(csv_design(d));
    }
}
