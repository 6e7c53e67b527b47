//! The HTML codebook, one for every front end: `microtab codebook --html
//! FILE` writes it as a self-contained file (in the manner of SDA's and
//! IPUMS's: a variable list, then per variable its label, type,
//! description, missing codes and a frequency table of its values with
//! labels, unweighted and weighted); `microtab serve` shows the same
//! entries as a page whose script fetches each entry's frequencies when
//! it is opened.
//!
//! Each entry is built from the variable's [`VariableInfo`]: the facts
//! are those of `info`, the API and Python.

use crate::describe::{design_summary, Shown, VariableInfo};
use crate::html::{group_digits, group_float, html_escape as esc};
use crate::Result;
use microtab_engine::{top_values, value_counts, value_key, Category, Value};
use microtab_store::{codec, Dataset, Kind, Variable};
use serde::Serialize;
use std::collections::HashSet;
use std::fmt::Write;

/// A variable's codebook entry (`microtab codebook`): its description
/// and its most frequent values.
#[derive(Debug, Clone, Serialize)]
pub struct CodebookEntry {
    /// The variable.
    #[serde(flatten)]
    pub variable: VariableInfo,
    /// Distinct values that are not missing.
    pub distinct: usize,
    /// The most frequent values, most frequent first (ties by value),
    /// missing codes and system-missing among them.
    pub top: Vec<TopValue>,
}

/// One of a variable's most frequent values.
#[derive(Debug, Clone, Serialize)]
pub struct TopValue {
    /// The value (`None`: system-missing).
    pub value: Option<Shown>,
    /// Its value label.
    pub label: Option<String>,
    /// A missing code or system-missing.
    pub missing: bool,
    /// Records with it.
    pub count: u64,
    /// The value as text (`12.50` with two implied decimals).
    #[serde(skip)]
    pub display: String,
}

impl TopValue {
    /// The value for a text table: `(missing)` when empty, else its text
    /// and its label, the text once when the label says the same.
    pub fn text(&self) -> String {
        match (&self.value, &self.label) {
            (None, _) => "(missing)".into(),
            (_, Some(l)) if *l != self.display => format!("{} {l}", self.display),
            _ => self.display.clone(),
        }
    }
}

impl CodebookEntry {
    /// The entry of variable `name` with its `top` most frequent values.
    pub fn of(ds: &Dataset, name: &str, top: usize) -> Result<CodebookEntry> {
        let var = ds.variable(name)?;
        let variable = VariableInfo::of(ds, var)?;
        let t = top_values(ds, &var.name, top)?;
        Ok(CodebookEntry {
            variable,
            distinct: t.distinct,
            top: t
                .values
                .iter()
                .map(|(c, n)| TopValue {
                    value: Shown::of_value(&c.value),
                    label: c.label.clone(),
                    missing: c.missing,
                    count: *n,
                    display: c.display.clone(),
                })
                .collect(),
        })
    }
}

/// Where the HTML codebook is shown.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CodebookPage {
    /// A self-contained file (its style inline, no scripts, no external
    /// files: it opens anywhere and prints): a variable list, then every
    /// entry open with its frequency table.
    File,
    /// The server's page: the `<main>` of a document whose head, style
    /// sheet and script are the server's; entries closed, with their value
    /// labels, and an empty `div.freq` the page's script fills.
    Served,
}

/// What to put in a codebook.
#[derive(Debug, Clone)]
pub struct CodebookHtml<'a> {
    /// The dataset as the front end names it.
    pub dataset: &'a str,
    /// The variables to describe (empty: all).
    pub names: &'a [String],
    /// Weight of the file's weighted frequencies.
    pub weight: Option<&'a str>,
    /// Values listed besides the labelled ones: all when there are at
    /// most this many, else this many most frequent and one line summing
    /// the others.
    pub top: usize,
    /// File or page.
    pub page: CodebookPage,
}

/// An HTML id for a variable's entry.
pub fn anchor(name: &str) -> String {
    let s: String = name
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
        .collect();
    format!("var-{s}")
}

/// One line of a variable's frequency table.
struct Row {
    display: String,
    label: Option<String>,
    missing: bool,
    null: bool,
    count: u64,
    weighted: Option<f64>,
}

impl Row {
    fn from_category(c: &Category, count: u64, weighted: Option<f64>) -> Row {
        Row {
            display: c.display.clone(),
            label: c.label.clone(),
            missing: c.missing,
            null: matches!(c.value, Value::Null),
            count,
            weighted,
        }
    }
}

/// Orders rows by value: numbers numerically, text by bytes, system-missing last.
fn order(kind: Kind, a: &Row, b: &Row) -> std::cmp::Ordering {
    a.null.cmp(&b.null).then_with(|| {
        if kind == Kind::String {
            a.display.cmp(&b.display)
        } else {
            let x = a.display.parse::<f64>().unwrap_or(f64::NAN);
            let y = b.display.parse::<f64>().unwrap_or(f64::NAN);
            x.total_cmp(&y)
        }
    })
}

/// The frequency rows of `var`: every labelled value (also those that do
/// not occur), missing codes and system-missing, and the other values that
/// occur — all of them when there are at most `top`, else the `top` most
/// frequent plus one summary line. Counted in bounded memory whatever the
/// number of distinct values ([`value_counts`]).
fn rows(
    ds: &Dataset,
    var: &Variable,
    weight: Option<&str>,
    top: usize,
) -> Result<(Vec<Row>, Option<Row>)> {
    let dict = if var.kind == Kind::String {
        ds.dictionary(var)?
    } else {
        Vec::new()
    };
    let labelled: Vec<i64> = var
        .value_labels
        .keys()
        .filter_map(|k| codec::stored_code(var, &dict, k).ok().flatten())
        .map(|c| value_key(var, c))
        .collect();
    let counts = value_counts(ds, &var.name, weight, top, &labelled)?;
    let mut kept = Vec::new();
    let mut seen = HashSet::new();
    for (c, n, w) in &counts.values {
        if *n == 0 && c.label.is_none() {
            continue;
        }
        seen.insert(c.display.clone());
        kept.push(Row::from_category(c, *n, *w));
    }
    for (value, label) in &var.value_labels {
        if !seen.contains(value) {
            kept.push(Row {
                display: value.clone(),
                label: Some(label.clone()),
                missing: false,
                null: false,
                count: 0,
                weighted: weight.map(|_| 0.0),
            });
        }
    }
    let (others, n, w) = counts.others;
    let summary = (others > 0).then(|| Row {
        display: format!("{} other values", group_digits(others as u64)),
        label: None,
        missing: false,
        null: false,
        count: n,
        weighted: w,
    });
    kept.sort_by(|a, b| order(var.kind, a, b));
    Ok((kept, summary))
}

const STYLE: &str = r#"
body { font: 15px/1.45 system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; color: #1d2329; margin: 0; background: #f6f7f9; }
header, main, nav { max-width: 60rem; margin: 0 auto; padding: 0 1.25rem; }
header { padding-top: 1.5rem; }
h1 { font-size: 1.6rem; margin: 0 0 .25rem; }
h2 { font-size: 1.2rem; margin: 0 0 .5rem; }
.meta { color: #56606b; margin: 0 0 1rem; }
.entry, nav > div { background: #fff; border: 1px solid #dde1e6; border-radius: 6px; padding: 1rem 1.25rem; margin: 0 0 1rem; }
.entry summary { list-style: none; }
.entry summary h2 { display: inline; }
.entry h2 .name { font-family: ui-monospace, SFMono-Regular, Menlo, monospace; }
.entry h2 .label { font-weight: normal; color: #3b4650; }
dl { display: grid; grid-template-columns: max-content 1fr; gap: .15rem 1rem; margin: .5rem 0 .75rem; }
dt { color: #56606b; }
dd { margin: 0; }
.desc { color: #2c353d; max-width: 48rem; }
.desc p { margin: 0 0 .6rem; }
table { border-collapse: collapse; width: 100%; margin: .5rem 0 0; font-variant-numeric: tabular-nums; }
th, td { padding: .25rem .6rem; border-bottom: 1px solid #eceef1; text-align: left; vertical-align: top; }
th { font-weight: 600; background: #f0f2f5; }
td.n { text-align: right; white-space: nowrap; }
th.n { text-align: right; }
td.code { font-family: ui-monospace, SFMono-Regular, Menlo, monospace; white-space: nowrap; }
tr.missing td { color: #8a5a00; background: #fffaf0; }
tr.other td { color: #56606b; font-style: italic; }
tr.total td { font-weight: 600; border-top: 2px solid #c9ced4; }
.tag { font-size: .75rem; border: 1px solid currentColor; border-radius: 3px; padding: 0 .3rem; margin-left: .4rem; }
a { color: #0b5cad; text-decoration: none; }
a:hover { text-decoration: underline; }
footer { max-width: 60rem; margin: 0 auto 2rem; padding: 0 1.25rem; color: #56606b; font-size: .85rem; }
@media print { body { background: #fff; } .entry { break-inside: avoid; border: none; } }
"#;

fn pct(part: f64, whole: f64) -> String {
    if whole > 0.0 {
        format!("{:.1}", 100.0 * part / whole)
    } else {
        "—".into()
    }
}

/// The codebook: a whole document for [`CodebookPage::File`], the page's
/// `<main>` for [`CodebookPage::Served`].
pub fn codebook_html(ds: &Dataset, o: &CodebookHtml) -> Result<String> {
    let m = ds.manifest();
    let vars: Vec<&Variable> = if o.names.is_empty() {
        m.variables.iter().collect()
    } else {
        o.names
            .iter()
            .map(|n| ds.variable(n))
            .collect::<std::result::Result<_, _>>()?
    };
    let weight = match o.weight {
        Some(w) => Some(ds.variable(w)?.name.clone()),
        None => None,
    };
    let infos: Vec<VariableInfo> = vars
        .iter()
        .map(|v| VariableInfo::of(ds, v))
        .collect::<std::result::Result<_, _>>()?;
    let file = o.page == CodebookPage::File;
    let title = format!("Codebook: {}", o.dataset);
    let mut h = String::new();
    if file {
        let _ = write!(
            h,
            "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n\
             <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n\
             <title>{}</title>\n<style>{STYLE}</style>\n</head>\n<body>\n<header>\n",
            esc(&title)
        );
    } else {
        h.push_str("<main id=\"main\" class=\"codebook\">\n");
    }
    let _ = write!(
        h,
        "<h1>{}</h1>\n<p class=\"meta\">{} records · {} variables · survey design: {}{}{}</p>\n",
        esc(&title),
        group_digits(m.rows),
        vars.len(),
        esc(&m.design.as_ref().map_or("none".into(), design_summary)),
        m.source
            .as_deref()
            .map(|s| format!(" · source {}", esc(s)))
            .unwrap_or_default(),
        weight
            .as_deref()
            .map(|w| format!(" · weighted by <a href=\"#{}\">{}</a>", anchor(w), esc(w)))
            .unwrap_or_default(),
    );
    if file {
        h.push_str("</header>\n");
        variable_list(&mut h, &infos);
        h.push_str("<main>\n");
    } else {
        h.push_str("<label for=\"cbsearch\">Search names and labels</label><input id=\"cbsearch\" type=\"search\" autocomplete=\"off\">\n");
    }
    for (v, info) in vars.iter().zip(&infos) {
        entry_head(&mut h, info, file);
        if file {
            let (rows, summary) = rows(ds, v, weight.as_deref(), o.top)?;
            frequency_table(&mut h, &rows, summary.as_ref(), weight.as_deref());
        } else {
            value_labels(&mut h, info);
            h.push_str("<div class=\"freq\"></div>\n");
        }
        h.push_str("</details>\n");
    }
    h.push_str("</main>\n");
    if file {
        let _ = write!(
            h,
            "<footer>Percentages are of valid (non-missing) records{}. Made by microtab {}.</footer>\n</body>\n</html>\n",
            if weight.is_some() {
                "; records whose weight is missing are not counted"
            } else {
                ""
            },
            env!("CARGO_PKG_VERSION")
        );
    }
    Ok(h)
}

/// The file's list of variables, each linked to its entry.
fn variable_list(h: &mut String, infos: &[VariableInfo]) {
    h.push_str("<nav>\n<div>\n<h2>Variables</h2>\n<table>\n<thead><tr><th>Name</th><th>Label</th><th>Type</th><th>Missing codes</th></tr></thead>\n<tbody>\n");
    for v in infos {
        let _ = writeln!(
            h,
            "<tr><td class=\"code\"><a href=\"#{}\">{}</a></td><td>{}</td><td>{}</td><td class=\"code\">{}</td></tr>",
            anchor(&v.name),
            esc(&v.name),
            esc(v.label.as_deref().unwrap_or("")),
            esc(&v.type_text()),
            esc(&v.missing_text(" ")),
        );
    }
    h.push_str("</tbody>\n</table>\n</div>\n</nav>\n");
}

/// An entry's heading and facts: name, label, type, range, empty values,
/// missing codes, description.
fn entry_head(h: &mut String, v: &VariableInfo, open: bool) {
    let _ = write!(
        h,
        "<details class=\"entry\" id=\"{}\" data-name=\"{}\"{}>\n<summary><h2><span class=\"name vn\">{}</span>{}</h2></summary>\n<dl>\n<dt>Type</dt><dd>{}</dd>\n",
        anchor(&v.name),
        esc(&v.name),
        if open { " open" } else { "" },
        esc(&v.name),
        v.label
            .as_deref()
            .map(|l| format!(" <span class=\"label vl\">— {}</span>", esc(l)))
            .unwrap_or_default(),
        esc(&v.type_text()),
    );
    if let (Some(lo), Some(hi)) = (&v.min, &v.max) {
        let _ = writeln!(
            h,
            "<dt>Range</dt><dd>{} … {}</dd>",
            esc(&lo.text()),
            esc(&hi.text())
        );
    }
    let _ = write!(
        h,
        "<dt>System-missing</dt><dd>{}</dd>\n<dt>Missing codes</dt><dd>{}</dd>\n</dl>\n",
        group_digits(v.nulls),
        if v.missing_codes.is_empty() {
            "none".to_string()
        } else {
            esc(&v.missing_text(", "))
        }
    );
    if let Some(d) = &v.description {
        h.push_str("<div class=\"desc\">\n");
        for para in d.split("\n\n").map(str::trim).filter(|p| !p.is_empty()) {
            let _ = writeln!(h, "<p>{}</p>", esc(para).replace('\n', "<br>"));
        }
        h.push_str("</div>\n");
    }
}

/// The page's table of value labels (its frequencies come from the API).
fn value_labels(h: &mut String, v: &VariableInfo) {
    if v.value_labels.is_empty() {
        return;
    }
    let _ = write!(
        h,
        "<table class=\"labels\"><caption>Value labels of {}</caption><thead><tr><th scope=\"col\">Value</th><th scope=\"col\">Label</th></tr></thead><tbody>",
        esc(&v.name)
    );
    for (k, l) in &v.value_labels {
        let _ = write!(h, "<tr><td>{}</td><td>{}</td></tr>", esc(k), esc(l));
    }
    h.push_str("</tbody></table>\n");
}

/// The file's frequency table: values with labels, counts and
/// percentages of the valid records, weighted too with a weight.
fn frequency_table(h: &mut String, rows: &[Row], summary: Option<&Row>, weight: Option<&str>) {
    let all = || rows.iter().chain(summary);
    let valid = || all().filter(|r| !r.missing);
    let valid_n: u64 = valid().map(|r| r.count).sum();
    let valid_w: f64 = valid().filter_map(|r| r.weighted).sum();
    let all_n: u64 = all().map(|r| r.count).sum();
    let all_w: f64 = all().filter_map(|r| r.weighted).sum();
    h.push_str("<table>\n<thead><tr><th>Value</th><th>Label</th><th class=\"n\">Frequency</th><th class=\"n\">%</th>");
    if let Some(w) = weight {
        let _ = write!(
            h,
            "<th class=\"n\">Weighted ({})</th><th class=\"n\">%</th>",
            esc(w)
        );
    }
    h.push_str("</tr></thead>\n<tbody>\n");
    let line = |h: &mut String, r: &Row, class: &str| {
        let value = if r.null {
            "(blank)".to_string()
        } else {
            esc(&r.display)
        };
        let tag = if r.null {
            "<span class=\"tag\">system-missing</span>"
        } else if r.missing {
            "<span class=\"tag\">missing</span>"
        } else {
            ""
        };
        let _ = write!(
            h,
            "<tr{}><td class=\"code\">{value}</td><td>{}{tag}</td><td class=\"n\">{}</td><td class=\"n\">{}</td>",
            if class.is_empty() {
                String::new()
            } else {
                format!(" class=\"{class}\"")
            },
            esc(r.label.as_deref().unwrap_or("")),
            group_digits(r.count),
            if r.missing { "—".into() } else { pct(r.count as f64, valid_n as f64) },
        );
        if weight.is_some() {
            let wv = r.weighted.unwrap_or(0.0);
            let _ = write!(
                h,
                "<td class=\"n\">{}</td><td class=\"n\">{}</td>",
                group_float(wv, 2),
                if r.missing {
                    "—".into()
                } else {
                    pct(wv, valid_w)
                },
            );
        }
        h.push_str("</tr>\n");
    };
    for r in rows {
        line(h, r, if r.missing { "missing" } else { "" });
    }
    if let Some(s) = summary {
        line(h, s, "other");
    }
    let mut totals = vec![("Total", all_n, all_w)];
    if valid_n != all_n {
        totals.insert(0, ("Valid (not missing)", valid_n, valid_w));
    }
    for (k, (what, n, wsum)) in totals.into_iter().enumerate() {
        let _ = write!(
            h,
            "<tr{}><td></td><td>{what}</td><td class=\"n\">{}</td><td class=\"n\"></td>",
            if k == 0 { " class=\"total\"" } else { "" },
            group_digits(n)
        );
        if weight.is_some() {
            let _ = write!(
                h,
                "<td class=\"n\">{}</td><td class=\"n\"></td>",
                group_float(wsum, 2)
            );
        }
        h.push_str("</tr>\n");
    }
    h.push_str("</tbody>\n</table>\n");
}
