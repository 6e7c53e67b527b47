//! `microtab tab`: crosstab of ROW × COL, one table per control category.

use crate::cmd::freq::{csv_head, csv_se_cells, Datasets};
use crate::common::{
    answer_in, design_note, dropped_note, most_dropped, open_all, se_text, split_list, weight_note,
    write_json, Format, QueryArgs, ShowArgs,
};
use crate::render::{
    caption, category_text, csv_line, csv_num, fmt_sig, group_digits, plain_value, stdout,
    text_table, Align,
};
use anyhow::Result;
use microtab_analysis::survey::Uncertainty;
use microtab_analysis::{Analysis, Crosstab};
use microtab_store::Dataset;
use std::io::Write;

/// Arguments of `tab`.
#[derive(clap::Args, Debug)]
pub struct Args {
    #[command(flatten)]
    data: Datasets,
    /// Row variable (recoded or restricted as in `AGE(r: 0-17; 18-*)`);
    /// several, separated by commas, give one table each.
    row: String,
    /// Column variable; several, separated by commas, give one table
    /// each (every row variable by every column variable).
    col: String,
    /// Control variable: one table per category.
    #[arg(long)]
    control: Option<String>,
    #[command(flatten)]
    q: QueryArgs,
    /// Percentages to show; several separated by commas (`col,row,total`)
    /// are each shown in every cell, in that order.
    #[arg(long, value_delimiter = ',', value_parser = clap::builder::TypedValueParser::try_map(clap::builder::PossibleValuesParser::new(["row", "col", "total"]),
        |s: String| s.parse::<microtab_analysis::Pct>()))]
    pct: Vec<microtab_analysis::Pct>,
    /// Chi-square test and Cramér's V.
    #[arg(long)]
    stats: bool,
    /// Each cell's z-statistic: its column percentage (row percentage
    /// with --pct row) less that of the whole table, over the design-based
    /// standard error of the difference (SDA's coloured cells).
    #[arg(long)]
    z: bool,
    /// Compare the columns with the column of this value: each row
    /// category's share in each column minus its share in the base
    /// column, with the SE of the difference, t, p and interval (R svyby +
    /// svycontrast; a plain row variable, no --control).
    #[arg(long, value_name = "BASE")]
    diff: Option<String>,
    #[command(flatten)]
    show: ShowArgs,
}

/// Tabulates and prints every row variable by every column variable, in
/// that order (JSON: one line per pair; CSV: one block per pair), the
/// datasets opened once for all the pairs.
pub fn run(a: Args) -> Result<()> {
    // Commas separate variables; a name may hold spaces, and an argument
    // that is a variable's whole name (`Flipper Length, mm`) is that
    // variable (the one list grammar: `arg_list`).
    let ds = open_all(&a.data.dataset)?;
    let list = |s: &str| match ds.first() {
        Some(ds) => microtab_engine::arg_list(ds, s, false),
        None => split_list(s, false),
    };
    let (rows, cols) = (list(&a.row), list(&a.col));
    if rows.is_empty() || cols.is_empty() {
        anyhow::bail!("expected a row and a column variable");
    }
    let mut first = true;
    for r in &rows {
        for c in &cols {
            tabulate(&a, &ds, r, c, first)?;
            first = false;
        }
    }
    Ok(())
}

/// Tabulates `row` by `col` and prints, table by table as they are cut
/// from the cube (`first`: the first pair of the request).
fn tabulate(a: &Args, ds: &[Dataset], row: &str, col: &str, first: bool) -> Result<()> {
    let analysis = Analysis::Tab {
        row: row.to_string(),
        col: col.to_string(),
        control: a.control.clone(),
        pct: a.pct.iter().fold(Vec::new(), |mut v, &p| {
            if !v.contains(&p) {
                v.push(p);
            }
            v
        }),
        stats: a.stats,
    };
    let x: Crosstab = answer_in(ds, &a.q, analysis, a.show.include_missing, |r| {
        r.z = a.z;
        r.diff = a.diff.clone();
    })?;
    let mut out = stdout();
    match a.q.format {
        Format::Json => write_json(&mut out, &x)?,
        Format::Csv => {
            if !first {
                out.write_all(b"\n")?;
            }
            let se = x.context.design.is_some();
            // Several percentages: a column (and SE columns) of each,
            // `pct_col`, `pct_row`, `pct_total`, in the order asked.
            let pct_names: Vec<String> = if x.pcts.len() > 1 {
                x.pcts
                    .iter()
                    .map(|p| format!("pct_{}", pct_word(*p)))
                    .collect()
            } else {
                vec!["pct".into()]
            };
            let mut names: Vec<String> = [
                "control",
                "control_label",
                "row",
                "row_label",
                "col",
                "col_label",
                "count",
                "weighted",
            ]
            .map(String::from)
            .to_vec();
            names.extend(pct_names.iter().cloned());
            let estimates: Vec<&str> = std::iter::once("weighted")
                .chain(pct_names.iter().map(String::as_str))
                .collect();
            let mut head = csv_head(&names, &estimates, se);
            if a.z {
                head.push("z".into());
            }
            // The table's test, repeated on each of its cells' lines.
            if x.stats {
                head.extend(csv_stats_head(se));
            }
            if x.comparisons.is_some() {
                head.extend(
                    ["diff", "diff_se", "diff_t", "diff_p", "diff_lo", "diff_hi"].map(String::from),
                );
            }
            out.write_all(csv_line(&head).as_bytes())?;
            for t in x.tables() {
                let (cv, cl) = match &t.control {
                    Some(c) => (plain_value(c), c.label.clone().unwrap_or_default()),
                    None => (String::new(), String::new()),
                };
                for (i, r) in t.rows.iter().enumerate() {
                    for (j, c) in t.cols.iter().enumerate() {
                        let mut line = vec![
                            cv.clone(),
                            cl.clone(),
                            plain_value(r),
                            r.label.clone().unwrap_or_default(),
                            plain_value(c),
                            c.label.clone().unwrap_or_default(),
                            t.counts[i][j].to_string(),
                            csv_num(t.weighted.as_ref().map(|w| w[i][j])),
                        ];
                        let cell = |s: &Option<Vec<Vec<Option<Uncertainty>>>>| {
                            s.as_ref().and_then(|s| s[i][j])
                        };
                        let mut ses = vec![cell(&t.weighted_se)];
                        if t.percentages.is_empty() {
                            line.push(csv_num(t.pct.as_ref().and_then(|p| p[i][j])));
                            ses.push(cell(&t.pct_se));
                        } else {
                            for p in &t.percentages {
                                line.push(csv_num(p.pct[i][j]));
                                ses.push(cell(&p.pct_se));
                            }
                        }
                        let ses: Vec<&Option<Uncertainty>> = ses.iter().collect();
                        csv_se_cells(&mut line, &ses, &x.context.design);
                        if a.z {
                            line.push(csv_num(t.z.as_ref().and_then(|z| z[i][j])));
                        }
                        if x.stats {
                            line.extend(csv_stats(&t, se));
                        }
                        if let Some(cs) = &x.comparisons {
                            // The row's share in this column less the
                            // base column's (empty for the base).
                            let d = cs.iter().find(|rc| rc.row == r.display).and_then(|rc| {
                                rc.comparison
                                    .differences
                                    .iter()
                                    .find(|d| d.group == c.display)
                            });
                            let v = d.map_or([None; 6], |d| {
                                let i = &d.inference;
                                [i.estimate, i.se, i.t, i.p, i.lo, i.hi].map(Some)
                            });
                            line.extend(v.map(csv_num));
                        }
                        out.write_all(csv_line(&line).as_bytes())?;
                    }
                }
            }
        }
        Format::Table => {
            for t in x.tables() {
                let mut text = String::new();
                let mut title = format!("{} by {}", x.row_var, x.col_var);
                if let (Some(n), Some(c)) = (&x.control_var, &t.control) {
                    title += &format!(", {n} = {}", category_text(c, a.show.codes));
                }
                text += &caption(
                    &title,
                    None,
                    x.context.weight.as_deref(),
                    x.context.filter.as_deref(),
                );
                let weighted = t.weighted.is_some();
                let mut head = vec![format!("{} \\ {}", x.row_var, x.col_var)];
                head.extend(t.cols.iter().map(|c| category_text(c, a.show.codes)));
                head.push("Total".into());
                let fmt = |v: f64| {
                    if weighted {
                        fmt_sig(v, 6)
                    } else {
                        group_digits(v as u64)
                    }
                };
                let m = t.measure();
                let mut rows = Vec::new();
                for (i, r) in t.rows.iter().enumerate() {
                    let mut line = vec![category_text(r, a.show.codes)];
                    line.extend(m[i].iter().map(|&v| fmt(v)));
                    line.push(fmt(m[i].iter().sum()));
                    rows.push(line);
                    // Standard errors in parentheses under their estimates.
                    let se_line = |s: &Vec<Vec<Option<Uncertainty>>>, f: &dyn Fn(f64) -> String| {
                        let mut l = vec![String::new()];
                        l.extend(s[i].iter().map(|u| match u {
                            Some(_) => format!("({})", se_text(u, f)),
                            None => String::new(),
                        }));
                        l
                    };
                    if let Some(s) = &t.weighted_se {
                        rows.push(se_line(s, &|v| fmt_sig(v, 4)));
                    }
                    // A line of values under the estimates, blank where undefined.
                    let under = |cells: &[Option<f64>], f: &dyn Fn(f64) -> String| {
                        std::iter::once(String::new())
                            .chain(cells.iter().map(|v| v.map(f).unwrap_or_default()))
                            .collect::<Vec<_>>()
                    };
                    if t.percentages.is_empty() {
                        if let Some(p) = &t.pct {
                            rows.push(under(&p[i], &|v| format!("{v:.1}%")));
                            if let Some(s) = &t.pct_se {
                                rows.push(se_line(s, &|v| format!("{v:.2}")));
                            }
                        }
                    }
                    // Several: each base's line (and its SEs), in order.
                    for p in &t.percentages {
                        rows.push(under(&p.pct[i], &|v| format!("{v:.1}%")));
                        if let Some(s) = &p.pct_se {
                            rows.push(se_line(s, &|v| format!("{v:.2}")));
                        }
                    }
                    if let Some(z) = &t.z {
                        rows.push(under(&z[i], &|v| format!("z={v:.2}")));
                    }
                }
                let cs: Vec<f64> = match &t.col_totals.weighted {
                    Some(w) => w.clone(),
                    None => t.col_totals.counts.iter().map(|&c| c as f64).collect(),
                };
                let mut tl = vec!["Total".to_string()];
                tl.extend(cs.iter().map(|&v| fmt(v)));
                tl.push(fmt(cs.iter().sum()));
                rows.push(tl);
                let mut align = vec![Align::Right; head.len()];
                align[0] = Align::Left;
                text += &text_table(&head, &rows, &align);
                if weighted {
                    text += &format!(
                        "(cells: weighted counts{}; unweighted N = {})\n",
                        if t.weighted_se.is_some() {
                            ", standard errors in parentheses"
                        } else {
                            ""
                        },
                        group_digits(t.total.count)
                    );
                }
                if x.pcts.len() > 1 {
                    let names: Vec<&str> = x.pcts.iter().map(|p| pct_word(*p)).collect();
                    text += &format!(
                        "(percentages under each cell: {}, in that order)\n",
                        names.join(", ")
                    );
                }
                if t.z.is_some() {
                    text += &format!(
                        "(z: each cell's {} percentage less the whole table's, over its {}; |z| > 1.96: p < 0.05 for that one cell)\n",
                        if x.z_along() == microtab_analysis::Pct::Row { "row" } else { "column" },
                        match x.z_method() {
                            "design" => "design-based standard error",
                            "srs-weighted" => "standard error as if the weights were a simple random sample (no design set)",
                            _ => "standard error under simple random sampling",
                        }
                    );
                }
                let most = t
                    .weighted_se
                    .iter()
                    .chain(&t.pct_se)
                    .chain(t.percentages.iter().filter_map(|p| p.pct_se.as_ref()))
                    .flatten()
                    .map(most_dropped)
                    .max()
                    .unwrap_or(0);
                text += &dropped_note(most, &x.context.design);
                if x.stats && x.context.design.is_some() {
                    text += &match t.rao_scott {
                        Some(r) => format!(
                            "Rao–Scott F = {}, df = {}, {}, p = {:.4e} (design-based, second order; first-order p = {:.4e}; Pearson X² = {} on the table scaled to N = {}){}\n",
                            fmt_sig(r.f, 6),
                            fmt_sig(r.ndf, 4),
                            fmt_sig(r.ddf, 4),
                            r.p,
                            r.p_first_order,
                            fmt_sig(r.chi2, 6),
                            group_digits(r.n as u64),
                            if r.replicates_dropped > 0 {
                                format!("; {} replicates without weight in the table left out, as R does", r.replicates_dropped)
                            } else {
                                String::new()
                            }
                        ),
                        None => "Rao–Scott test: not defined (fewer than two rows or columns, a degenerate design covariance, or, under a Taylor design, tables of more than 2,048 planned cells)\n".into(),
                    };
                } else if x.stats {
                    text += &match t.stats {
                        Some(s) => format!(
                            "Chi-square = {}, df = {}, p = {:.4e}, Cramer's V = {}\n",
                            fmt_sig(s.chi2, 6),
                            s.df,
                            s.p,
                            fmt_sig(s.cramers_v, 4)
                        ),
                        None => "Chi-square: not defined (fewer than two rows or columns)\n".into(),
                    };
                    if let Some(a) = t.association {
                        let f = |x: Option<f64>| x.map_or("-".to_string(), |v| format!("{v:.4}"));
                        text += &format!(
                            "Likelihood-ratio chi-square = {}, p = {:.4e}\nGamma = {}, Kendall's tau-b = {}, tau-c = {}, Somers' d (col|row) = {}, (row|col) = {}\nLambda (col|row) = {}, (row|col) = {}, symmetric = {}; Pearson's r = {}, Spearman's rho = {}, eta (col|row) = {}, (row|col) = {}\n",
                            fmt_sig(a.lr_chi2, 6),
                            a.lr_p,
                            f(a.gamma),
                            f(a.tau_b),
                            f(a.tau_c),
                            f(a.somers_d_col),
                            f(a.somers_d_row),
                            f(a.lambda_col),
                            f(a.lambda_row),
                            f(a.lambda),
                            f(a.pearson_r),
                            f(a.spearman_rho),
                            f(a.eta_col),
                            f(a.eta_row)
                        );
                    }
                }
                text.push('\n');
                out.write_all(text.as_bytes())?;
            }
            for rc in x.comparisons.iter().flatten() {
                let level = x.context.design.as_ref().map_or(95.0, |d| 100.0 * d.level);
                let row = match &rc.label {
                    Some(l) if !a.show.codes => format!("{} ({l})", rc.row),
                    _ => rc.row.clone(),
                };
                let title = format!(
                    "Share of {} = {row}: difference from {} = {}",
                    x.row_var, x.col_var, rc.comparison.base
                );
                let table = crate::cmd::regress::comparison_table(&rc.comparison, &title, level);
                out.write_all(format!("{table}\n").as_bytes())?;
            }
            out.write_all(
                weight_note(&x.context.weight_cases, x.context.weight.as_deref()).as_bytes(),
            )?;
            out.write_all(design_note(&x.context.design, x.pct.is_some()).as_bytes())?;
        }
    }
    out.flush()?;
    Ok(())
}

/// A percentage base's word, as `--pct` takes it.
fn pct_word(p: microtab_analysis::Pct) -> &'static str {
    match p {
        microtab_analysis::Pct::Row => "row",
        microtab_analysis::Pct::Col => "col",
        microtab_analysis::Pct::Total => "total",
    }
}

/// The CSV columns of a table's test: under a design the Rao–Scott test
/// (`test` = `rao-scott`), else Pearson's chi-square (`pearson`) and the
/// measures of association.
fn csv_stats_head(design: bool) -> Vec<String> {
    let names: &[&str] = if design {
        &[
            "test",
            "chi2",
            "chi2_n",
            "f",
            "ndf",
            "ddf",
            "p",
            "p_first_order",
            "test_replicates_dropped",
        ]
    } else {
        &[
            "test",
            "chi2",
            "df",
            "p",
            "cramers_v",
            "chi2_n",
            "lr_chi2",
            "lr_p",
            "gamma",
            "tau_b",
            "tau_c",
            "somers_d_col",
            "somers_d_row",
            "lambda_col",
            "lambda_row",
            "lambda",
            "pearson_r",
            "spearman_rho",
            "eta_col",
            "eta_row",
        ]
    };
    names.iter().map(|s| s.to_string()).collect()
}

/// The fields of [`csv_stats_head`] for table `t` (empty where a
/// statistic is not defined).
fn csv_stats(t: &microtab_analysis::Table, design: bool) -> Vec<String> {
    if design {
        let r = t.rao_scott;
        let mut f = vec![if r.is_some() { "rao-scott" } else { "" }.to_string()];
        f.extend(
            [
                r.map(|r| r.chi2),
                r.map(|r| r.n),
                r.map(|r| r.f),
                r.map(|r| r.ndf),
                r.map(|r| r.ddf),
                r.map(|r| r.p),
                r.map(|r| r.p_first_order),
                r.map(|r| r.replicates_dropped as f64),
            ]
            .map(csv_num),
        );
        return f;
    }
    let (s, a) = (t.stats, t.association);
    let mut f = vec![if s.is_some() { "pearson" } else { "" }.to_string()];
    f.extend(
        [
            s.map(|s| s.chi2),
            s.map(|s| s.df as f64),
            s.map(|s| s.p),
            s.map(|s| s.cramers_v),
            s.map(|s| s.n),
            a.map(|a| a.lr_chi2),
            a.map(|a| a.lr_p),
            a.and_then(|a| a.gamma),
            a.and_then(|a| a.tau_b),
            a.and_then(|a| a.tau_c),
            a.and_then(|a| a.somers_d_col),
            a.and_then(|a| a.somers_d_row),
            a.and_then(|a| a.lambda_col),
            a.and_then(|a| a.lambda_row),
            a.and_then(|a| a.lambda),
            a.and_then(|a| a.pearson_r),
            a.and_then(|a| a.spearman_rho),
            a.and_then(|a| a.eta_col),
            a.and_then(|a| a.eta_row),
        ]
        .map(csv_num),
    );
    f
}
