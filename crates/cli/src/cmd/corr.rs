//! `microtab corr`: weighted correlations of several variables (SDA
//! CORRTAB) with design-based standard errors.

use crate::cmd::regress::{
    heading, inference_fields, inference_head, inference_or_dashes, notes, num,
};
use crate::common::{answer_with, write_json, Format, QueryArgs};
use crate::render::{csv_line, csv_num, stdout, text_table, Align};
use anyhow::Result;
use microtab_analysis::corr::Correlations;
use microtab_analysis::Analysis;
use std::io::Write;

/// Arguments of `corr`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// Dataset directory.
    dataset: std::path::PathBuf,
    /// Two or more numeric variables; records with a value of every one
    /// are used (listwise).
    #[arg(num_args = 2.., required = true)]
    vars: Vec<String>,
    #[command(flatten)]
    q: QueryArgs,
}

/// Computes and prints.
pub fn run(a: Args) -> Result<()> {
    let analysis = Analysis::Corr {
        vars: a.vars.clone(),
    };
    let c: Box<Correlations> = answer_with(&a.dataset, &a.q, analysis, false, |_| {})?;
    let mut out = stdout();
    match a.q.format {
        Format::Json => write_json(&mut out, &c)?,
        Format::Csv => {
            write!(
                out,
                "{}",
                csv_line(&["a", "b", "r", "se", "t", "p", "lo", "hi", "n"].map(String::from))
            )?;
            for p in &c.pairs {
                let mut cells = vec![p.a.clone(), p.b.clone()];
                cells.extend(inference_fields(p.inference.as_ref()).map(csv_num));
                cells.push(csv_num(Some(c.n as f64)));
                write!(out, "{}", csv_line(&cells))?;
            }
        }
        Format::Table => write!(out, "{}", table(&c))?,
    }
    Ok(())
}

fn table(c: &Correlations) -> String {
    let pv = &c.provenance;
    let mut s = heading(format!("Correlations of {}", c.variables.join(", ")), pv);
    let p = c.variables.len();
    let mut header = vec![String::new()];
    header.extend(c.variables.iter().cloned());
    let rows: Vec<Vec<String>> = (0..p)
        .map(|a| {
            let mut v = vec![c.variables[a].clone()];
            v.extend((0..p).map(|b| {
                let r = c.matrix[a][b];
                if r.is_finite() {
                    format!("{r:.4}")
                } else {
                    "–".into()
                }
            }));
            v
        })
        .collect();
    let mut align = vec![Align::Right; p + 1];
    align[0] = Align::Left;
    s.push_str(&text_table(&header, &rows, &align));
    s.push('\n');
    let mut align = vec![Align::Right; 7];
    align[0] = Align::Left;
    let rows: Vec<Vec<String>> = c
        .pairs
        .iter()
        .map(|pair| {
            let name = format!("{} × {}", pair.a, pair.b);
            inference_or_dashes(name, pair.inference.as_ref())
        })
        .collect();
    s.push_str(&text_table(
        &inference_head("pair", "t", pv.level * 100.0),
        &rows,
        &align,
    ));
    s.push_str(&format!(
        "records: {}   weighted N: {}   df of the t tests: {}   standard errors: {}\n",
        c.n,
        num(c.weighted_n),
        num(c.df),
        pv.method
    ));
    let mut mh = vec!["variable".to_string(), "mean".into(), "sd".into()];
    mh.truncate(3);
    let rows: Vec<Vec<String>> = (0..p)
        .map(|a| vec![c.variables[a].clone(), num(c.means[a]), num(c.sds[a])])
        .collect();
    s.push('\n');
    s.push_str(&text_table(
        &mh,
        &rows,
        &[Align::Left, Align::Right, Align::Right],
    ));
    s.push_str(&notes(pv));
    s
}
