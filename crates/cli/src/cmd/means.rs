//! `microtab means`: weighted mean, SD, N and sum of weights by group.

use crate::cmd::freq::{csv_head, csv_se_cells, Datasets};
use crate::common::{
    answer_with, ci_text, csv_se, most_dropped, se_text, table_notes, table_text, write_json,
    Format, QueryArgs,
};
use crate::render::{category_text, csv_line, csv_num, fmt_sig, group_digits, plain_value, stdout};
use anyhow::Result;
use microtab_analysis::survey::Uncertainty;
use microtab_analysis::{Analysis, Means, Quantile, Stat};
use std::io::Write;

/// Arguments of `means`.
#[derive(clap::Args, Debug)]
pub struct Args {
    #[command(flatten)]
    data: Datasets,
    /// Analysis variable.
    var: String,
    /// Grouping variable(s); repeat or separate with commas. Each may be
    /// recoded, `AGE(r: 0-17 "Child"; 18-64; 65-*)`, or restricted,
    /// `AGE(18-65)`. None: the mean of all records (R `svymean(~x, d)`).
    #[arg(long, num_args = 1..)]
    by: Vec<String>,
    /// Also the weighted median of the analysis variable per group (with
    /// its Woodruff interval under a survey design).
    #[arg(long)]
    median: bool,
    /// Also this weighted percentile (0 < P < 100); repeat or separate with
    /// commas.
    #[arg(long, value_name = "P", value_delimiter = ',', num_args = 1..)]
    percentile: Vec<f64>,
    /// Compare each group with the group of this value (one --by
    /// variable): its mean minus the base's, with the design-based SE of
    /// the difference, t, p and interval (R svyttest, svycontrast).
    #[arg(long, value_name = "BASE")]
    diff: Option<String>,
    /// Test each group's mean, and the total's, against this value: the
    /// mean less it, with its design-based SE, t on R's svyttest degrees
    /// of freedom, p and interval.
    #[arg(long, value_name = "VALUE", allow_hyphen_values = true)]
    test_mean: Option<f64>,
    #[command(flatten)]
    q: QueryArgs,
}

/// A quantile's column name: `median`, or `p90` for the 90th percentile.
fn quantile_name(p: f64) -> String {
    if p == 0.5 {
        "median".into()
    } else {
        format!("p{}", fmt_sig(100.0 * p, 6))
    }
}

/// Computes and prints, group by group.
pub fn run(a: Args) -> Result<()> {
    // Names with spaces or commas stay whole: `answer_with` reads the
    // arguments with the dataset's names (`var_names`).
    let analysis = Analysis::Means {
        var: a.var.clone(),
        by: a.by.clone(),
    };
    let mut ps: Vec<f64> = Vec::new();
    if a.median {
        ps.push(0.5);
    }
    for &p in &a.percentile {
        if !(p > 0.0 && p < 100.0) {
            anyhow::bail!("--percentile {p}: a percentile is above 0 and below 100");
        }
        if !ps.contains(&(p / 100.0)) {
            ps.push(p / 100.0);
        }
    }
    if a.test_mean.is_some_and(|v| !v.is_finite()) {
        anyhow::bail!("--test-mean: expected a finite number");
    }
    let m: Means = answer_with(&a.data.dataset, &a.q, analysis, false, |r| {
        r.quantiles = ps.clone();
        r.diff = a.diff.clone();
        r.test_mean = a.test_mean;
    })?;
    let mut out = stdout();
    match a.q.format {
        Format::Json => write_json(&mut out, &m)?,
        Format::Csv => {
            let se = m.context.design.is_some();
            let mut names = m.by.clone();
            names.extend(["mean", "sd", "n", "sum_weights"].map(String::from));
            let mut head = csv_head(&names, &["mean"], se);
            for &p in &ps {
                let name = quantile_name(p);
                head.push(name.clone());
                if se {
                    head.extend(
                        ["se", "lo", "hi", "unreliable", "replicates_dropped"]
                            .map(|s| format!("{name}_{s}")),
                    );
                }
            }
            if m.comparison.is_some() {
                head.extend(
                    ["diff", "diff_se", "diff_t", "diff_p", "diff_lo", "diff_hi"].map(String::from),
                );
            }
            if m.test.is_some() {
                head.extend(
                    [
                        "test_diff",
                        "test_se",
                        "test_t",
                        "test_df",
                        "test_p",
                        "test_lo",
                        "test_hi",
                    ]
                    .map(String::from),
                );
            }
            out.write_all(csv_line(&head).as_bytes())?;
            // A group's difference from the base (none for the base and
            // the total: empty fields).
            let diff = |first: &[String], f: &mut Vec<String>| {
                let Some(c) = &m.comparison else { return };
                let d = c
                    .differences
                    .iter()
                    .find(|d| first.first() == Some(&d.group));
                let v = d.map_or([None; 6], |d| {
                    let i = &d.inference;
                    [i.estimate, i.se, i.t, i.p, i.lo, i.hi].map(Some)
                });
                f.extend(v.map(csv_num));
            };
            // A group's (or the total's) test against the value.
            let test = |first: &[String], total: bool, f: &mut Vec<String>| {
                let Some(t) = &m.test else { return };
                let found = if total {
                    Some(&t.total)
                } else {
                    t.groups
                        .iter()
                        .find(|g| g.by.iter().map(plain_value).collect::<Vec<_>>() == first)
                };
                let v = found.map_or([None; 7], |g| match &g.inference {
                    Some(i) => [i.estimate, i.se, i.t, g.df, i.p, i.lo, i.hi].map(Some),
                    None => [None; 7],
                });
                f.extend(v.map(csv_num));
            };
            let line = |first: Vec<String>,
                        total: bool,
                        s: &Stat,
                        u: &Option<Uncertainty>,
                        qs: &[Quantile]| {
                let key = first.clone();
                let mut f = first;
                f.extend([
                    csv_num(s.mean),
                    csv_num(s.sd),
                    s.n.to_string(),
                    format!("{}", s.sum_weights),
                ]);
                csv_se_cells(&mut f, &[u], &m.context.design);
                for q in qs {
                    f.push(csv_num(q.value));
                    if se {
                        let [s, lo, hi, _, _, _, unreliable, dropped] = csv_se(&q.se);
                        f.extend([s, lo, hi, unreliable, dropped]);
                    }
                }
                diff(&key, &mut f);
                test(&key, total, &mut f);
                csv_line(&f)
            };
            // Without groups the one line is the total's (no label column).
            for g in m.groups().filter(|_| !m.by.is_empty()) {
                let first = g.by.iter().map(|c| plain_value(c)).collect();
                out.write_all(line(first, false, &g.stat, &g.mean_se, g.quantiles).as_bytes())?;
            }
            let mut first = vec!["Total".to_string()];
            first.resize(m.by.len(), String::new());
            out.write_all(line(first, true, &m.total, &m.total_se, &m.total_quantiles).as_bytes())?;
        }
        Format::Table => {
            let se = m.context.design.as_ref().map(|d| 100.0 * d.level);
            let mut head = m.by.clone();
            head.push("mean".into());
            if let Some(level) = se {
                head.extend(["SE".to_string(), format!("{}% CI", fmt_sig(level, 4))]);
            }
            for &p in &ps {
                head.push(quantile_name(p));
                if let Some(level) = se {
                    head.extend(["SE".to_string(), format!("{}% CI", fmt_sig(level, 4))]);
                }
            }
            head.extend(["sd", "N", "sum of weights"].map(String::from));
            let row = |first: Vec<String>, s: &Stat, u: &Option<Uncertainty>, qs: &[Quantile]| {
                let mut r = first;
                r.push(s.mean.map(|v| fmt_sig(v, 6)).unwrap_or_else(|| "-".into()));
                if se.is_some() {
                    r.push(se_text(u, |v| fmt_sig(v, 4)));
                    let digits = u.map_or(0, |u| ci_digits(u.se));
                    r.push(ci_text(u, digits));
                }
                for q in qs {
                    r.push(q.value.map(|v| fmt_sig(v, 6)).unwrap_or_else(|| "-".into()));
                    if se.is_some() {
                        r.push(se_text(&q.se, |v| fmt_sig(v, 4)));
                        let digits = q.se.map_or(0, |u| ci_digits(u.se));
                        r.push(ci_text(&q.se, digits));
                    }
                }
                r.push(s.sd.map(|v| fmt_sig(v, 6)).unwrap_or_else(|| "-".into()));
                r.push(group_digits(s.n));
                r.push(fmt_sig(s.sum_weights, 7));
                r
            };
            let mut rows: Vec<Vec<String>> = m
                .groups()
                .filter(|_| !m.by.is_empty())
                .map(|g| {
                    row(
                        g.by.iter().map(|c| category_text(c, false)).collect(),
                        &g.stat,
                        &g.mean_se,
                        g.quantiles,
                    )
                })
                .collect();
            // Without groups the one row is the total's (no label column).
            let mut first = vec!["Total".to_string()];
            first.resize(m.by.len(), String::new());
            rows.push(row(first, &m.total, &m.total_se, &m.total_quantiles));
            let most = m
                .groups()
                .map(|g| {
                    most_dropped(
                        std::iter::once(&g.mean_se).chain(g.quantiles.iter().map(|q| &q.se)),
                    )
                })
                .chain([most_dropped(
                    std::iter::once(&m.total_se).chain(m.total_quantiles.iter().map(|q| &q.se)),
                )])
                .max()
                .unwrap_or(0);
            let (c, title) = (&m.context, format!("Mean of {}", m.variable));
            let left = m.by.len();
            out.write_all(
                table_text(c, &title, m.label.as_deref(), &head, &rows, left).as_bytes(),
            )?;
            out.write_all(table_notes(c, false, most).as_bytes())?;
            if se.is_some() && !ps.is_empty() {
                out.write_all(
                    b"(quantiles: weighted, the smallest value reaching the share; Woodruff intervals, SE = interval width / 2t)\n",
                )?;
            }
            if let Some(cmp) = &m.comparison {
                let level = m.context.design.as_ref().map_or(95.0, |d| 100.0 * d.level);
                let title = format!("\nDifference from {} = {}", m.by.join(","), cmp.base);
                out.write_all(
                    crate::cmd::regress::comparison_table(cmp, &title, level).as_bytes(),
                )?;
            }
            if let Some(t) = &m.test {
                let level = m.context.design.as_ref().map_or(95.0, |d| 100.0 * d.level);
                out.write_all(crate::cmd::regress::test_table(t, &m.by, level).as_bytes())?;
            }
        }
    }
    out.flush()?;
    Ok(())
}

/// Decimals of an interval: three significant digits of its SE (an SE of
/// 0, a total the adjustment fixes, shows six).
fn ci_digits(se: f64) -> usize {
    if se.is_finite() && se > 0.0 {
        (3 - se.log10().floor() as i64).clamp(0, 6) as usize
    } else {
        6
    }
}
