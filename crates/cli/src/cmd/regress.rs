//! `microtab regress`: a regression model with design-based standard
//! errors (R `svyglm`), from an R-style formula.

use crate::common::{answer_with, write_json, Format, QueryArgs};
use crate::render::{csv_line, csv_num, fmt_sig, stdout, text_table, Align};
use anyhow::Result;
use microtab_analysis::compare::Comparison;
use microtab_analysis::model::{Family, Inference, Regression, Wald};
use microtab_analysis::survey::Provenance;
use microtab_analysis::Analysis;
use std::io::Write;

/// Arguments of `regress`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// Dataset directory.
    dataset: std::path::PathBuf,
    /// The model, as R writes it: `'INCTOT ~ AGE + factor(SEX) +
    /// factor(EDUC)'`; `factor(V, base = K)`, interactions `A:B` and
    /// `A*B`, `- 1` for no intercept, temporary recodes inside factor()
    /// (`factor(AGE(r: 0-17; 18-64; 65-*))`), a condition as a binary
    /// outcome (`EMPSTAT(1) ~ …`).
    formula: String,
    /// The family: gaussian (linear), logit, probit or poisson.
    #[arg(long, default_value = "gaussian")]
    family: Family,
    #[command(flatten)]
    q: QueryArgs,
}

/// Fits and prints.
pub fn run(a: Args) -> Result<()> {
    let analysis = Analysis::Regress {
        formula: a.formula.clone(),
        family: a.family,
    };
    let r: Box<Regression> = answer_with(&a.dataset, &a.q, analysis, false, |_| {})?;
    let mut out = stdout();
    match a.q.format {
        Format::Json => write_json(&mut out, &r)?,
        Format::Csv => {
            writeln!(out, "term,estimate,se,t,p,lo,hi")?;
            for c in &r.coefficients {
                let mut cells = vec![c.term.clone()];
                cells.extend(inference_fields(Some(&c.inference)).map(csv_num));
                write!(out, "{}", csv_line(&cells))?;
            }
        }
        Format::Table => write!(out, "{}", table(&r))?,
    }
    Ok(())
}

/// A number for the table: 6 significant digits.
pub(crate) fn num(x: f64) -> String {
    if x.is_finite() {
        fmt_sig(x, 6)
    } else if x.is_infinite() {
        if x > 0.0 { "∞" } else { "−∞" }.into()
    } else {
        "NaN".into()
    }
}

/// A p-value as R prints small ones.
pub(crate) fn pval(p: f64) -> String {
    if p.is_nan() {
        "NaN".into()
    } else if p < 2e-16 {
        "<2e-16".into()
    } else {
        fmt_sig(p, 3)
    }
}

/// The header of a table of estimates with their t tests and intervals.
pub(crate) fn inference_head(first: &str, stat: &str, level: f64) -> Vec<String> {
    let level = fmt_sig(level, 4);
    [
        first,
        "estimate",
        "se",
        stat,
        "p",
        &format!("{level}% CI low"),
        "high",
    ]
    .iter()
    .map(|h| h.to_string())
    .collect()
}

/// A row of such a table; a dash where there is no test (a difference
/// that is exactly 0 with no variance: no t or p).
pub(crate) fn inference_row(name: &str, i: &Inference) -> Vec<String> {
    let or_dash = |x: f64, f: fn(f64) -> String| match x.is_nan() {
        true => "–".to_string(),
        false => f(x),
    };
    vec![
        name.to_string(),
        num(i.estimate),
        num(i.se),
        or_dash(i.t, num),
        or_dash(i.p, pval),
        num(i.lo),
        num(i.hi),
    ]
}

/// A row of such a table, dashes where there is no inference.
pub(crate) fn inference_or_dashes(name: String, i: Option<&Inference>) -> Vec<String> {
    match i {
        Some(i) => inference_row(&name, i),
        None => {
            let mut v = vec![name];
            v.extend(std::iter::repeat_n("–".to_string(), 6));
            v
        }
    }
}

/// An inference's fields in the order of [`inference_head`] (for CSV).
pub(crate) fn inference_fields(i: Option<&Inference>) -> [Option<f64>; 6] {
    i.map_or([None; 6], |i| {
        [i.estimate, i.se, i.t, i.p, i.lo, i.hi].map(Some)
    })
}

/// A result's title, then its filter and weight, then a blank line.
pub(crate) fn heading(title: String, p: &Provenance) -> String {
    let mut s = title + "\n";
    if let Some(f) = &p.filter {
        s.push_str(&format!("filter: {f}\n"));
    }
    if let Some(w) = &p.weight {
        s.push_str(&format!("weight: {w}\n"));
    }
    s.push('\n');
    s
}

/// A result's notes, a line each.
pub(crate) fn notes(p: &Provenance) -> String {
    let adjusted = p.design.as_ref().and_then(|d| d.calibration.as_ref());
    p.notes
        .iter()
        .chain(adjusted)
        .map(|n| format!("note: {n}\n"))
        .collect()
}

/// A Wald test as a line of text.
fn wald_line(what: &str, w: &Wald) -> String {
    format!(
        "Wald test {what}: F = {} on {} and {} df, p = {}\n",
        num(w.f),
        num(w.ndf),
        w.ddf.map_or("∞".into(), num),
        pval(w.p)
    )
}

/// Groups compared with a base (`means --diff`), as text.
pub fn comparison_table(c: &Comparison, title: &str, level: f64) -> String {
    let stat = if c.df.is_some() { "t" } else { "z" };
    let rows: Vec<Vec<String>> = c
        .differences
        .iter()
        .map(|d| inference_row(&d.group, &d.inference))
        .collect();
    let mut align = vec![Align::Right; 7];
    align[0] = Align::Left;
    let mut s = format!("{title} (its estimate {})\n", num(c.base_estimate));
    s.push_str(&text_table(
        &inference_head("group", stat, level),
        &rows,
        &align,
    ));
    match c.df {
        Some(df) if df <= 0.0 => s.push_str(&format!(
            "no t tests or intervals: the design's {} degrees of freedom are not more than the {} differences   ",
            num(df + c.differences.len() as f64),
            c.differences.len()
        )),
        Some(df) => s.push_str(&format!("df of the t tests: {}   ", num(df))),
        None => {}
    }
    s.push_str(&format!("standard errors: {}\n", c.method));
    if let Some(w) = &c.wald {
        s.push_str(&wald_line("that every group equals the base", w));
    }
    s
}

/// Means tested against a value (`means --test-mean`), as text.
pub fn test_table(t: &microtab_analysis::ttest::MeanTests, by: &[String], level: f64) -> String {
    let mut head = inference_head(&by.join(" × "), "t", level);
    head[1] = format!("mean − {}", num(t.value));
    head.insert(4, "df".into());
    let rows: Vec<Vec<String>> = t
        .groups
        .iter()
        .chain([&t.total])
        .map(|g| {
            let name = if g.by.is_empty() {
                "Total".to_string()
            } else {
                g.by.iter()
                    .map(|c| crate::render::category_text(c, false))
                    .collect::<Vec<_>>()
                    .join(" × ")
            };
            let mut r = inference_or_dashes(name, g.inference.as_ref());
            r.insert(4, num(g.df));
            r
        })
        .collect();
    let mut align = vec![Align::Right; 8];
    align[0] = Align::Left;
    let mut s = format!("\nTest of mean = {}\n", num(t.value));
    s.push_str(&text_table(&head, &rows, &align));
    s.push_str(&format!("standard errors: {}\n", t.method));
    s
}

/// The text table: coefficients, then the model's summary.
fn table(r: &Regression) -> String {
    let p = &r.provenance;
    let mut s = heading(format!("{} model: {}", r.family.name(), r.formula), p);
    let stat = if r.df.is_some() { "t" } else { "z" };
    let header = inference_head("term", stat, p.level * 100.0);
    let rows: Vec<Vec<String>> = r
        .coefficients
        .iter()
        .map(|c| inference_row(&c.term, &c.inference))
        .collect();
    let mut align = vec![Align::Right; 7];
    align[0] = Align::Left;
    s.push_str(&text_table(&header, &rows, &align));
    s.push('\n');
    s.push_str(&format!(
        "records: {}   weighted N: {}   standard errors: {}\n",
        r.n,
        num(r.weighted_n),
        p.method
    ));
    if let Some(df) = r.df {
        s.push_str(&format!("df of the t tests: {}", num(df)));
        if let Some(d) = r.design_df {
            s.push_str(&format!(
                " (design df {} + 1 − {} columns)",
                num(d),
                r.coefficients.len()
            ));
        }
        s.push('\n');
    }
    match r.r_squared {
        Some(r2) => s.push_str(&format!("R²: {}\n", num(r2))),
        None => {
            if let (Some(p), Some(d), Some(nd)) = (r.pseudo_r_squared, r.deviance, r.null_deviance)
            {
                s.push_str(&format!(
                    "deviance: {}   null deviance: {}   pseudo-R²: {}\n",
                    num(d),
                    num(nd),
                    num(p)
                ));
            }
        }
    }
    if let Some(w) = &r.wald {
        s.push_str(&wald_line("of all terms", w));
    }
    s.push_str(&notes(p));
    s
}
