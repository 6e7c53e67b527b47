//! `microtab codebook`: per-variable description with top values, in the
//! terminal (table, CSV, JSON) or as an HTML file (`--html`): the analysis
//! layer's [`CodebookEntry`] and [`codebook_html`], as the HTTP server's
//! codebook page shows them too.

use crate::common::{emit, open, Format};
use crate::render::{csv_line, group_digits, text_table, Align};
use anyhow::Result;
use microtab_analysis::{codebook_html, CodebookEntry, CodebookHtml, CodebookPage};
use std::path::PathBuf;

/// Arguments of `codebook`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// Dataset directory.
    dataset: PathBuf,
    /// Variables to describe (default: all).
    vars: Vec<String>,
    /// Number of most frequent values to list.
    #[arg(long, default_value_t = 10)]
    top: usize,
    /// Output format.
    #[arg(long, value_enum, default_value_t = Format::Table)]
    format: Format,
    /// Write a self-contained HTML codebook to FILE instead (value labels
    /// with frequencies, descriptions, missing codes).
    #[arg(long, value_name = "FILE")]
    html: Option<PathBuf>,
    /// Weight variable for the HTML codebook's weighted frequencies.
    #[arg(long, short = 'w', value_name = "VAR", requires = "html")]
    weight: Option<String>,
}

/// The JSON codebook: the dataset and its variables' entries.
#[derive(serde::Serialize)]
struct Codebook<'a> {
    dataset: String,
    rows: u64,
    variables: &'a [CodebookEntry],
}

/// Prints the codebook.
pub fn run(a: Args) -> Result<()> {
    let ds = open(&a.dataset)?;
    let names: Vec<String> = if a.vars.is_empty() {
        ds.manifest()
            .variables
            .iter()
            .map(|v| v.name.clone())
            .collect()
    } else {
        a.vars.clone()
    };
    if let Some(file) = &a.html {
        let html = codebook_html(
            &ds,
            &CodebookHtml {
                dataset: &a.dataset.display().to_string(),
                names: &names,
                weight: a.weight.as_deref(),
                top: a.top,
                page: CodebookPage::File,
            },
        )?;
        // A bare file name has an empty parent directory: make it explicit.
        let out = match file.parent() {
            Some(p) if p.as_os_str().is_empty() => std::path::Path::new(".").join(file),
            _ => file.to_path_buf(),
        };
        microtab_io::write_file_atomic(&out, html.as_bytes())?;
        eprintln!("wrote {} ({} variables)", file.display(), names.len());
        return Ok(());
    }
    let busy = crate::progress::busy("describing the variables");
    let entries: Vec<CodebookEntry> = names
        .iter()
        .map(|n| CodebookEntry::of(&ds, n, a.top))
        .collect::<microtab_analysis::Result<_>>()?;
    drop(busy);
    let text = match a.format {
        Format::Json => {
            let j = Codebook {
                dataset: a.dataset.display().to_string(),
                rows: ds.rows(),
                variables: &entries,
            };
            serde_json::to_string_pretty(&j)? + "\n"
        }
        Format::Csv => {
            let mut s = csv_line(&["variable", "value", "missing", "count"].map(String::from));
            for e in &entries {
                for t in &e.top {
                    s += &csv_line(&[
                        e.variable.name.clone(),
                        t.value.as_ref().map(|v| v.text()).unwrap_or_default(),
                        t.missing.to_string(),
                        t.count.to_string(),
                    ]);
                }
            }
            s
        }
        Format::Table => {
            let mut s = String::new();
            for e in &entries {
                let v = &e.variable;
                s += &format!(
                    "{}{}\n  type {} ({}), range {} .. {}, {} distinct, {} system-missing{}\n",
                    v.name,
                    v.label
                        .as_deref()
                        .map(|l| format!(" — {l}"))
                        .unwrap_or_default(),
                    v.ty,
                    crate::render::plain(&serde_json::to_value(v.kind)?),
                    v.min.as_ref().map(|m| m.text()).unwrap_or_default(),
                    v.max.as_ref().map(|m| m.text()).unwrap_or_default(),
                    e.distinct,
                    group_digits(v.nulls),
                    if v.missing_codes.is_empty() {
                        String::new()
                    } else {
                        format!(", missing codes {}", v.missing_text(" "))
                    }
                );
                let rows: Vec<Vec<String>> = e
                    .top
                    .iter()
                    .map(|t| {
                        vec![
                            format!(
                                "  {}{}",
                                t.text(),
                                if t.missing { " (missing)" } else { "" }
                            ),
                            group_digits(t.count),
                        ]
                    })
                    .collect();
                s += &text_table(
                    &["  top values".to_string(), "count".to_string()],
                    &rows,
                    &[Align::Left, Align::Right],
                );
                s.push('\n');
            }
            s
        }
    };
    emit(&text)
}
