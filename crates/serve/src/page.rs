//! The analysis page: server-rendered HTML (the dataset list, the query
//! form filled from the URL, the variables, the codebook) and one ES
//! module, `static/app.js`, that runs the query against the JSON API and
//! draws the tables, the chart and the downloads. No build step: the
//! module and the style sheet are compiled into the executable.
//!
//! The page's URL is the query (`/analysis/NAME?row=…&col=…&filter=…`):
//! sharing it reproduces the table; `app.js` maps it onto the API's
//! parameters (`api_url` here does the same for the link shown without
//! JavaScript).

use crate::app::{open, scan, ApiError, App};
use axum::extract::{Path, Query, State};
use axum::http::{header, StatusCode};
use axum::response::{Html, IntoResponse, Response};
use microtab_analysis::{
    codebook_html, design_summary, group_digits as group, html_escape as esc, CodebookHtml,
    CodebookPage,
};
use microtab_store::{Dataset, Kind};
use std::fmt::Write;
use std::sync::Arc;

const APP_JS: &str = include_str!("../static/app.js");
const APP_CSS: &str = include_str!("../static/app.css");

/// The page's own parameters (the query's and how to show it).
pub const PAGE_PARAMS: &[&str] = &[
    "kind",
    "row",
    "col",
    "control",
    "dep",
    "filter",
    "weight",
    "pct",
    "stats",
    "design",
    "level",
    "include_missing",
    "show",
    "shown",
    "chart",
    "formula",
    "family",
    "base",
    "dec",
    "median",
    "pctiles",
    "negw",
];

fn head(title: &str) -> String {
    head_skip(title, "#main", "Skip to content")
}

/// The page's head and its first tabbable element, a link past what
/// precedes the part that matters (`#query`: the hundreds of variables).
fn head_skip(title: &str, to: &str, skip: &str) -> String {
    format!(
        "<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\
<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\
<title>{}</title><link rel=\"stylesheet\" href=\"/static/app.css\">\
<script type=\"module\" src=\"/static/app.js\"></script></head>\n<body>\n\
<a class=\"skip\" href=\"{to}\">{skip}</a>\n",
        esc(title)
    )
}

/// `GET /static/app.js` and `/static/app.css`.
pub async fn asset(Path(file): Path<String>) -> Response {
    let (body, ty) = match file.as_str() {
        "app.js" => (APP_JS, "text/javascript; charset=utf-8"),
        "app.css" => (APP_CSS, "text/css; charset=utf-8"),
        _ => return (StatusCode::NOT_FOUND, "no such file").into_response(),
    };
    (
        [
            (header::CONTENT_TYPE, ty),
            (header::CACHE_CONTROL, "no-cache"),
        ],
        body,
    )
        .into_response()
}

/// `GET /`: the datasets served.
pub async fn index(State(app): State<Arc<App>>) -> Html<String> {
    let list = scan(&app.root);
    let mut h = head("microtab — datasets");
    h += "<header class=\"top\"><p class=\"brand\"><a href=\"/\">microtab</a></p></header>\n\
<main id=\"main\"><h1>Datasets</h1>\n";
    if list.is_empty() {
        h += "<p>No datasets are served from this directory.</p>";
    } else {
        h += "<table class=\"list\"><caption>Datasets served here: pick one to analyse it</caption>\
<thead><tr><th scope=\"col\">Dataset</th><th scope=\"col\">Records</th><th scope=\"col\">Variables</th>\
<th scope=\"col\">Survey design</th><th scope=\"col\">Codebook</th></tr></thead><tbody>\n";
        for (name, p) in &list {
            let Ok(ds) = Dataset::open(p) else { continue };
            let m = ds.manifest();
            let _ = writeln!(
                h,
                "<tr><th scope=\"row\"><a href=\"/analysis/{u}\">{n}</a>{t}</th><td class=\"num\">{}</td>\
<td class=\"num\">{}</td><td>{}</td><td><a href=\"/analysis/{u}/codebook\">codebook</a></td></tr>",
                group(m.rows),
                m.variables.len(),
                esc(&design_text(m.design.as_ref())),
                u = esc(&crate::app::encode(name)),
                n = esc(name),
                t = m
                    .title
                    .as_deref()
                    .map(|t| format!("<br><span class=\"dtitle\">{}</span>", esc(t)))
                    .unwrap_or_default(),
            );
        }
        h += "</tbody></table>\n";
    }
    h += "<p class=\"note\">The same answers as JSON: <a href=\"/api/v1/datasets\">/api/v1/datasets</a>.</p>\n</main></body></html>\n";
    *app.datasets.write().unwrap_or_else(|e| e.into_inner()) = list;
    Html(h)
}

/// The design in the analysis layer's words (as `microtab info` says it).
fn design_text(d: Option<&microtab_store::Design>) -> String {
    d.map_or("none".into(), design_summary)
}

type Params = Vec<(String, String)>;

fn first<'a>(p: &'a Params, k: &str) -> Option<&'a str> {
    p.iter()
        .find(|(x, _)| x == k)
        .map(|(_, v)| v.as_str())
        .filter(|v| !v.trim().is_empty())
}

/// The API URL of the page's query (as `app.js` builds it), or `None`
/// when it has no row variable yet.
pub fn api_url(name: &str, p: &Params, design_weight: Option<&str>) -> Option<String> {
    let mut q: Vec<(&str, String)> = Vec::new();
    let page_kind = first(p, "kind").unwrap_or("table");
    let row = if page_kind == "regress" {
        ""
    } else {
        first(p, "row")?
    };
    let kind = if page_kind == "regress" {
        q.push(("formula", first(p, "formula")?.to_string()));
        q.push((
            "family",
            first(p, "family").unwrap_or("gaussian").to_string(),
        ));
        "regress"
    } else if page_kind == "compare" {
        q.push(("var", first(p, "dep")?.to_string()));
        q.push(("by", row.to_string()));
        q.push(("diff", first(p, "base")?.to_string()));
        "means"
    } else if page_kind == "means" {
        q.push(("var", first(p, "dep")?.to_string()));
        let by: Vec<&str> = ["row", "col", "control"]
            .iter()
            .filter_map(|k| first(p, k))
            .collect();
        // One `by` per variable: a name with spaces or commas stays whole.
        q.extend(by.into_iter().map(|b| ("by", b.to_string())));
        if let Some(qs) = quantiles(p) {
            q.push(("quantiles", qs));
        }
        "means"
    } else if let Some(col) = first(p, "col") {
        q.push(("row", row.into()));
        q.push(("col", col.into()));
        if let Some(c) = first(p, "control") {
            q.push(("control", c.into()));
        }
        let pcts = pct_choice(p);
        if !pcts.is_empty() {
            q.push(("pct", pcts.join(",")));
        }
        if first(p, "stats").is_some() {
            q.push(("stats", "true".into()));
        }
        q.push(("z", "true".into()));
        "tab"
    } else {
        q.push(("var", row.into()));
        "freq"
    };
    for k in ["filter", "weight", "level"] {
        if let Some(v) = first(p, k) {
            q.push((k, v.into()));
        }
    }
    if first(p, "design") == Some("off") {
        // Without the design's standard errors, still its weight (SDA's
        // "SRS"), unless another is chosen.
        if let (None, Some(w)) = (first(p, "weight"), design_weight) {
            q.push(("weight", w.into()));
        }
        q.push(("design", "false".into()));
    }
    if first(p, "include_missing").is_some() && kind != "means" {
        q.push(("include_missing", "true".into()));
    }
    if first(p, "negw").is_some() {
        q.push(("allow_negative_weights", "true".into()));
    }
    let qs: Vec<String> = q
        .iter()
        .map(|(k, v)| format!("{k}={}", crate::app::encode(v)))
        .collect();
    Some(format!(
        "/api/v1/datasets/{}/{kind}?{}",
        crate::app::encode(name),
        qs.join("&")
    ))
}

/// A row box naming several variables (`SEX, RACE(1,2)`: SDA's one table
/// per row variable) as its variables, as `app.js`'s `rowList` splits it:
/// commas inside parentheses or quotes (a recode, a quoted name) do not
/// split, nor does a variable's whole name (`names`).
pub fn row_list(text: &str, names: &[&str]) -> Vec<String> {
    let t = text.trim();
    if t.is_empty() {
        return Vec::new();
    }
    if names.contains(&t) {
        return vec![t.to_string()];
    }
    let mut out = Vec::new();
    let (mut depth, mut quote, mut cur) = (0usize, None::<char>, String::new());
    for ch in t.chars() {
        if let Some(q) = quote {
            if ch == q {
                quote = None;
            }
        } else if ch == '"' || ch == '`' {
            quote = Some(ch);
        } else if ch == '(' {
            depth += 1;
        } else if ch == ')' {
            depth = depth.saturating_sub(1);
        } else if ch == ',' && depth == 0 {
            out.push(cur.trim().to_string());
            cur.clear();
            continue;
        }
        cur.push(ch);
    }
    out.push(cur.trim().to_string());
    out.retain(|x| !x.is_empty());
    out
}

/// The page's query for each of its row variables (one table each), with
/// that variable: the query itself when it has one row variable or none
/// (regression: the formula is the query).
pub fn per_row(p: &Params, names: &[&str]) -> Vec<(Option<String>, Params)> {
    let rows = match first(p, "row") {
        Some(r) if first(p, "kind") != Some("regress") => row_list(r, names),
        _ => Vec::new(),
    };
    if rows.len() < 2 {
        return vec![(None, p.clone())];
    }
    rows.into_iter()
        .map(|r| {
            let q: Params = p
                .iter()
                .map(|(k, v)| {
                    if k == "row" {
                        (k.clone(), r.clone())
                    } else {
                        (k.clone(), v.clone())
                    }
                })
                .collect();
            (Some(r), q)
        })
        .collect()
}

/// The percentages asked for (`pct=col&pct=row`, SDA's several in one
/// table), in the order column, row, total; column alone when none is
/// named, none for `pct=none`.
pub fn pct_choice(p: &Params) -> Vec<&'static str> {
    let asked: Vec<&str> = p
        .iter()
        .filter(|(k, _)| k == "pct")
        .flat_map(|(_, v)| v.split(','))
        .map(str::trim)
        .collect();
    if asked.is_empty() {
        return vec!["col"];
    }
    ["col", "row", "total"]
        .into_iter()
        .filter(|x| asked.contains(x))
        .collect()
}

/// The API's `quantiles` of the means form: the median when ticked and
/// the percentiles typed (`90`, `25, 75`), as probabilities.
fn quantiles(p: &Params) -> Option<String> {
    let mut out: Vec<String> = Vec::new();
    if first(p, "median").is_some() {
        out.push("0.5".into());
    }
    for x in first(p, "pctiles")
        .unwrap_or("")
        .split([',', ' '])
        .filter(|x| !x.is_empty())
    {
        let q = match x.parse::<f64>() {
            Ok(v) if v > 0.0 && v < 100.0 => format!("{}", v / 100.0),
            // The API words the error.
            _ => x.to_string(),
        };
        if !out.contains(&q) {
            out.push(q);
        }
    }
    (!out.is_empty()).then(|| out.join(","))
}

/// Whether a variable is offered as a weight: not a text variable, not
/// one of the design's replicate weights, strata, clusters or FPC, and not
/// named like an identifier or a replicate weight (SERIAL, PERNUM, …ID,
/// REPWT…).
fn weight_like(v: &microtab_store::Variable, design: Option<&microtab_store::Design>) -> bool {
    if v.kind == Kind::String {
        return false;
    }
    if let Some(d) = design {
        if v.name == d.weight || d.variables().contains(&&v.name) {
            return false;
        }
    }
    let u = v.name.to_ascii_uppercase();
    let id = u.contains("SERIAL")
        || u == "ID"
        || u.ends_with("_ID")
        || u.starts_with("ID_")
        || (u.ends_with("ID") && u.len() <= 6)
        || u.contains("PERNUM")
        || u.contains("REPWT")
        || u.contains("REPWGT");
    !id
}

fn check_params(p: &Params) -> Result<(), ApiError> {
    if p.len() > 4 * crate::MAX_PARAMS {
        return Err(crate::bad(format!("{} parameters: too many", p.len())));
    }
    for (k, v) in p {
        if !PAGE_PARAMS.contains(&k.as_str()) {
            return Err(crate::bad(format!(
                "unknown parameter {k:?}; the page takes {}",
                PAGE_PARAMS.join(", ")
            )));
        }
        if v.len() > crate::MAX_PARAM {
            return Err(crate::bad(format!(
                "parameter {k} is {} bytes long: at most {}",
                v.len(),
                crate::MAX_PARAM
            )));
        }
    }
    Ok(())
}

/// An error as a page (a browser asked for a page, not JSON).
pub(crate) fn html_error(e: ApiError) -> Response {
    let ApiError(status, message, _) = e;
    let mut h = head("microtab — error");
    let _ = write!(
        h,
        "<header class=\"top\"><p class=\"brand\"><a href=\"/\">microtab</a></p></header>\n\
<main id=\"main\"><h1>{} {}</h1><p role=\"alert\">{}</p>\
<p><a href=\"/\">The datasets served here</a></p></main></body></html>\n",
        status.as_u16(),
        esc(status.canonical_reason().unwrap_or("")),
        esc(&message)
    );
    (status, Html(h)).into_response()
}

/// `GET /analysis/{name}`: the query form, filled from the URL, and the
/// variables; `app.js` runs the query and shows the answer. Errors are
/// pages too.
pub async fn analysis(
    state: State<Arc<App>>,
    name: Path<String>,
    query: Query<Params>,
) -> Response {
    analysis_page(state, name, query)
        .await
        .unwrap_or_else(html_error)
}

async fn analysis_page(
    State(app): State<Arc<App>>,
    Path(name): Path<String>,
    Query(p): Query<Params>,
) -> Result<Response, ApiError> {
    check_params(&p)?;
    let ds = open(&app.path(&name)?, &name)?;
    let m = ds.manifest();
    let val = |k: &str| esc(first(&p, k).unwrap_or(""));
    let kind = first(&p, "kind").unwrap_or("table");
    // Display choices made (`show=…`, or the form's `shown` when none is
    // ticked), or the defaults.
    let shown: Vec<&str> = p
        .iter()
        .filter(|(k, _)| k == "show")
        .map(|(_, v)| v.as_str())
        .collect();
    let fresh = shown.is_empty() && first(&p, "shown").is_none();
    let show = |x: &str| {
        if fresh {
            matches!(x, "se" | "w" | "colour")
        } else {
            shown.contains(&x)
        }
    };
    let checked = |b: bool| if b { " checked" } else { "" };
    let sel = |k: &str, v: &str, default: bool| {
        let on = match first(&p, k) {
            Some(x) => x == v,
            None => default,
        };
        if on {
            " selected"
        } else {
            ""
        }
    };
    // The dataset's title heads the page (its name beside it); its
    // description under the heading.
    let title = m.title.as_deref();
    let mut h = head_skip(
        &match title {
            Some(t) => format!("{t} ({name}) — microtab"),
            None => format!("{name} — microtab"),
        },
        "#query",
        "Skip to the form",
    );
    let heading = match title {
        Some(t) => format!("{} <span class=\"dsname\">({})</span>", esc(t), esc(&name)),
        None => esc(&name),
    };
    let about = m
        .description
        .as_deref()
        .map(|d| format!("<p class=\"about\" id=\"ds-description\">{}</p>", esc(d)))
        .unwrap_or_default();
    let _ = write!(
        h,
        "<header class=\"top\"><p class=\"brand\"><a href=\"/\">microtab</a></p>\
<nav aria-label=\"Dataset\"><a href=\"/analysis/{u}/codebook\">Codebook</a> · \
<a href=\"/api/v1/datasets/{u}\">JSON</a></nav></header>\n\
<main id=\"main\" class=\"layout\">\n<div class=\"intro\"><h1 id=\"ds-title\">{heading}</h1>{about}\
<p>{} records · {} variables · survey design: {}</p></div>\n",
        group(m.rows),
        m.variables.len(),
        esc(&design_text(m.design.as_ref())),
        u = esc(&crate::app::encode(&name)),
    );
    // The variables.
    h += "<aside class=\"vars\" aria-labelledby=\"vars-h\"><h2 id=\"vars-h\">Variables</h2>\
<label for=\"vsearch\">Search names and labels</label>\
<input id=\"vsearch\" type=\"search\" autocomplete=\"off\" aria-controls=\"vlist\">\
<p class=\"hint\">Choose a variable to see its codebook entry and put it in the form.</p>\
<ul id=\"vlist\">\n";
    for v in &m.variables {
        let _ = writeln!(
            h,
            "<li><button type=\"button\" class=\"var\" data-name=\"{n}\" data-kind=\"{k}\">\
<span class=\"vn\">{n}</span> <span class=\"vl\">{l}</span></button></li>",
            n = esc(&v.name),
            k = match v.kind {
                Kind::Int => "int",
                Kind::Float => "float",
                Kind::String => "text",
            },
            l = esc(v.label.as_deref().unwrap_or("")),
        );
    }
    h += "</ul>\n<section id=\"vinfo\" aria-live=\"polite\" aria-labelledby=\"vinfo-h\" hidden>\
<h3 id=\"vinfo-h\">Variable</h3><div id=\"vinfo-body\"></div></section></aside>\n";
    // The form.
    let _ = write!(
        h,
        "<section id=\"query\" tabindex=\"-1\" class=\"query\" aria-labelledby=\"q-h\"><h2 id=\"q-h\">Query</h2>\n\
<form id=\"form\" method=\"get\" action=\"/analysis/{u}\">\n\
<fieldset class=\"kind\"><legend>Analysis</legend>\
<label><input type=\"radio\" name=\"kind\" value=\"table\"{}> Frequencies or crosstab</label>\
<label><input type=\"radio\" name=\"kind\" value=\"means\"{}> Means</label>\
<label><input type=\"radio\" name=\"kind\" value=\"compare\"{}> Compare means</label>\
<label><input type=\"radio\" name=\"kind\" value=\"regress\"{}> Regression</label></fieldset>\n\
<div class=\"fields\">\n\
<div class=\"regress-only wide\"><label for=\"f-formula\">Model, as R writes it</label>\
<input id=\"f-formula\" name=\"formula\" value=\"{}\" autocomplete=\"off\" spellcheck=\"false\" placeholder=\"INCTOT ~ AGE + factor(SEX) + factor(EDUC)\" aria-describedby=\"formula-help\">\
<p id=\"formula-help\" class=\"hint\">Outcome <code>~</code> predictors: numbers as they are, <code>factor(EDUC)</code> for categories (the first is the base; <code>factor(EDUC, base = 6)</code>), <code>A:B</code> or <code>A*B</code> for interactions, <code>- 1</code> for no intercept, a condition such as <code>EMPSTAT(1)</code> as a 0/1 outcome.</p></div>\n\
<div class=\"regress-only\"><label for=\"f-family\">Family</label><select id=\"f-family\" name=\"family\">\
<option value=\"gaussian\"{}>linear (gaussian)</option><option value=\"logit\"{}>logit</option>\
<option value=\"probit\"{}>probit</option><option value=\"poisson\"{}>Poisson</option></select></div>\n\
<div class=\"means-only\"><label for=\"f-dep\">Dependent variable (means)</label>\
<input id=\"f-dep\" name=\"dep\" value=\"{}\" autocomplete=\"off\" spellcheck=\"false\"></div>\n\
<div class=\"not-regress\"><label for=\"f-row\"><span class=\"row-word\">Row</span><span class=\"group-word\">Groups</span></label><input id=\"f-row\" name=\"row\" value=\"{}\" autocomplete=\"off\" spellcheck=\"false\" aria-describedby=\"recode-help\"></div>\n\
<div class=\"compare-only\"><label for=\"f-base\">Base group <span class=\"opt\">(its value: every other group is compared with it)</span></label><input id=\"f-base\" name=\"base\" value=\"{}\" autocomplete=\"off\" spellcheck=\"false\"></div>\n\
<div class=\"table-means\"><label for=\"f-col\">Column <span class=\"opt\">(optional)</span></label><input id=\"f-col\" name=\"col\" value=\"{}\" autocomplete=\"off\" spellcheck=\"false\" aria-describedby=\"recode-help\"></div>\n\
<div class=\"table-means\"><label for=\"f-control\">Control <span class=\"opt\">(optional: one table per category)</span></label><input id=\"f-control\" name=\"control\" value=\"{}\" autocomplete=\"off\" spellcheck=\"false\"></div>\n\
<p id=\"recode-help\" class=\"hint wide not-regress\">A variable may be recoded for this table: <code>AGE(r: 0-17 \"Child\"; 18-64; 65-*)</code>, or limited to some values: <code>EDUC(6-11)</code>.</p>\n\
<div class=\"wide\"><label for=\"f-filter\">Selection filter <span class=\"opt\">(optional)</span></label><input id=\"f-filter\" name=\"filter\" value=\"{}\" autocomplete=\"off\" spellcheck=\"false\" placeholder=\"AGE(25-64) SEX(2)\" aria-describedby=\"filter-help\">\
<p id=\"filter-help\" class=\"hint\">SDA's syntax: <code>AGE(25-64), RACE(1,2)</code>; comparisons too: <code>INCTOT &lt; 9999999</code>; and <code>and</code>, <code>or</code>, <code>not</code>, parentheses, <code>AGE between 25 and 64</code>, <code>RACE in (1, 2)</code>.</p></div>\n",
        checked(!matches!(kind, "means" | "compare" | "regress")),
        checked(kind == "means"),
        checked(kind == "compare"),
        checked(kind == "regress"),
        val("formula"),
        sel("family", "gaussian", true),
        sel("family", "logit", false),
        sel("family", "probit", false),
        sel("family", "poisson", false),
        val("dep"),
        val("row"),
        val("base"),
        val("col"),
        val("control"),
        val("filter"),
        u = esc(&crate::app::encode(&name)),
    );
    // Weight: numeric variables.
    h += "<div><label for=\"f-weight\">Weight</label><select id=\"f-weight\" name=\"weight\">";
    let _ = write!(
        h,
        "<option value=\"\"{}>{}</option>",
        sel("weight", "", true),
        if let Some(d) = &m.design {
            format!("the design's ({})", esc(&d.weight))
        } else {
            "none (unweighted)".into()
        }
    );
    // Variables named as weights (PERWT, HHWT, WGTP, …) in a group of
    // their own, before the other numeric variables.
    let (named, other): (Vec<&microtab_store::Variable>, Vec<_>) = m
        .variables
        .iter()
        .filter(|v| weight_like(v, m.design.as_ref()))
        .partition(|v| {
            let u = v.name.to_ascii_uppercase();
            u.contains("WT") || u.contains("WGT") || u.contains("WEIGHT")
        });
    for (label, vars) in [("Weights", named), ("Other numeric variables", other)] {
        if vars.is_empty() {
            continue;
        }
        let _ = write!(h, "<optgroup label=\"{label}\">");
        for v in vars {
            let _ = write!(
                h,
                "<option value=\"{n}\"{}>{n}</option>",
                sel("weight", &v.name, false),
                n = esc(&v.name)
            );
        }
        h += "</optgroup>";
    }
    let _ = writeln!(
        h,
        "</select><label class=\"check\"><input type=\"checkbox\" id=\"f-negw\" name=\"negw\" value=\"on\"{}> Allow negative weights</label></div>",
        checked(first(&p, "negw").is_some()),
    );
    let pcts = pct_choice(&p);
    let _ = writeln!(
        h,
        "<fieldset class=\"table-only pcts\"><legend>Percentages</legend>\
<label><input type=\"checkbox\" name=\"pct\" value=\"col\"{}> of each column</label>\
<label><input type=\"checkbox\" name=\"pct\" value=\"row\"{}> of each row</label>\
<label><input type=\"checkbox\" name=\"pct\" value=\"total\"{}> of the table</label></fieldset>",
        checked(pcts.contains(&"col")),
        checked(pcts.contains(&"row")),
        checked(pcts.contains(&"total")),
    );
    let _ = writeln!(
        h,
        "<div class=\"means-only\"><label for=\"f-pctiles\">Percentiles <span class=\"opt\">(optional: 25, 75)</span></label>\
<input id=\"f-pctiles\" name=\"pctiles\" value=\"{}\" autocomplete=\"off\" inputmode=\"decimal\">\
<label class=\"check\"><input type=\"checkbox\" id=\"f-median\" name=\"median\" value=\"on\"{}> Median</label></div>",
        val("pctiles"),
        checked(first(&p, "median").is_some()),
    );
    let _ = writeln!(
        h,
        "<div class=\"not-regress\"><label for=\"f-dec\">Decimals <span class=\"opt\">(percentages, means)</span></label><select id=\"f-dec\" name=\"dec\">\
<option value=\"\"{}>automatic</option><option value=\"0\"{}>0</option><option value=\"1\"{}>1</option>\
<option value=\"2\"{}>2</option><option value=\"3\"{}>3</option><option value=\"4\"{}>4</option></select></div>",
        sel("dec", "", true),
        sel("dec", "0", false),
        sel("dec", "1", false),
        sel("dec", "2", false),
        sel("dec", "3", false),
        sel("dec", "4", false),
    );
    let _ = writeln!(
        h,
        "<div><label for=\"f-level\">Confidence level</label><select id=\"f-level\" name=\"level\">\
<option value=\"0.9\"{}>90%</option><option value=\"0.95\"{}>95%</option><option value=\"0.99\"{}>99%</option>{}</select></div>",
        sel("level", "0.9", false),
        sel("level", "0.95", true),
        sel("level", "0.99", false),
        // Another level (an SDA URL's cflevel=80) as its own choice.
        match first(&p, "level") {
            Some(l) if !["0.9", "0.95", "0.99"].contains(&l) => format!(
                "<option value=\"{v}\" selected>{v}</option>",
                v = esc(l)
            ),
            _ => String::new(),
        }
    );
    if m.design.is_some() {
        let _ = writeln!(
            h,
            "<div><label for=\"f-design\">Standard errors</label><select id=\"f-design\" name=\"design\">\
<option value=\"on\"{}>from the survey design</option><option value=\"off\"{}>none: as a simple random sample (still weighted)</option></select></div>",
            sel("design", "on", true),
            sel("design", "off", false),
        );
    }
    h += "</div>\n";
    let _ = write!(
        h,
        "<fieldset class=\"checks table-only\"><legend>Options</legend>\
<label><input type=\"checkbox\" name=\"stats\" value=\"on\"{}> Test of independence and association measures</label>\
<label><input type=\"checkbox\" name=\"include_missing\" value=\"on\"{}> Show missing values as categories</label></fieldset>\n\
<fieldset class=\"checks not-regress\"><legend>Show</legend>\
<label><input type=\"checkbox\" name=\"show\" value=\"se\"{}> Standard errors</label>\
<label><input type=\"checkbox\" name=\"show\" value=\"ci\"{}> Confidence intervals</label>\
<label><input type=\"checkbox\" name=\"show\" value=\"w\"{}> Weighted N</label>\
<label><input type=\"checkbox\" name=\"show\" value=\"n\"{}> Unweighted N</label>\
<label><input type=\"checkbox\" name=\"show\" value=\"colour\"{}> Colour cells by z</label>\
<label><input type=\"checkbox\" name=\"show\" value=\"z\"{}> z values</label></fieldset>\n",
        checked(first(&p, "stats").is_some()),
        checked(first(&p, "include_missing").is_some()),
        checked(show("se")),
        checked(show("ci")),
        checked(show("w")),
        checked(show("n")),
        checked(show("colour")),
        checked(show("z")),
    );
    let _ = write!(
        h,
        "<input type=\"hidden\" name=\"shown\" value=\"1\">\
<div class=\"actions\"><span class=\"not-regress\"><label for=\"f-chart\">Chart</label> <select id=\"f-chart\" name=\"chart\">\
<option value=\"stacked\"{}>stacked bars</option><option value=\"bar\"{}>bars</option><option value=\"none\"{}>none</option></select></span>\
<button type=\"submit\" id=\"run\">Run</button> <button type=\"reset\" id=\"clear\">Clear</button></div>\n</form>\n",
        sel("chart", "stacked", true),
        sel("chart", "bar", false),
        sel("chart", "none", false),
    );
    h += &noscript(&name, &p, m);
    h += "</section>\n<section class=\"out\" aria-labelledby=\"out-h\">\
<h2 id=\"out-h\" class=\"sr\">Result</h2><div id=\"status\" role=\"status\" aria-live=\"polite\"></div>\
<div id=\"error\" role=\"alert\" tabindex=\"-1\"></div><div id=\"result\" tabindex=\"-1\" aria-labelledby=\"out-h\"></div></section>\n</main>\n";
    let meta = serde_json::json!({
        "name": name,
        "rows": m.rows,
        "design": m.design.is_some(),
        "design_weight": m.design.as_ref().map(|d| d.weight.clone()),
    });
    let _ = write!(
        h,
        "<script type=\"application/json\" id=\"mt-meta\">{}</script>\n</body></html>\n",
        meta.to_string().replace('<', "\\u003c")
    );
    Ok(Html(h).into_response())
}

/// What the page says without JavaScript: the JSON answer of its query, or
/// with several row variables one answer per variable (a table each, as
/// the page draws them), each linked.
fn noscript(name: &str, p: &Params, m: &microtab_store::Manifest) -> String {
    let names: Vec<&str> = m.variables.iter().map(|v| v.name.as_str()).collect();
    let weight = m.design.as_ref().map(|d| d.weight.as_str());
    let links: Vec<(Option<String>, String)> = per_row(p, &names)
        .into_iter()
        .filter_map(|(row, q)| Some((row, api_url(name, &q, weight)?)))
        .collect();
    let mut h = String::from("<noscript><p>Tables are drawn by JavaScript. ");
    match links.as_slice() {
        [] => {}
        [(_, u)] => {
            let _ = write!(
                h,
                "The answer to this query as JSON: <a href=\"{}\">{}</a>.",
                esc(u),
                esc(u)
            );
        }
        several => {
            let _ = write!(
                h,
                "The answers to this query as JSON, one table per row variable ({}):</p><ul class=\"answers\">",
                several.len()
            );
            for (row, u) in several {
                let _ = write!(
                    h,
                    "<li>{}: <a href=\"{}\">{}</a></li>",
                    esc(row.as_deref().unwrap_or("")),
                    esc(u),
                    esc(u)
                );
            }
            h += "</ul><p>";
        }
    }
    h += "</p></noscript>";
    h
}

/// `GET /analysis/{name}/codebook`: every variable's label, type,
/// missing codes and value labels; frequencies on request (`app.js`
/// fetches them when an entry is opened).
pub async fn codebook(state: State<Arc<App>>, name: Path<String>) -> Response {
    codebook_page(state, name).await.unwrap_or_else(html_error)
}

async fn codebook_page(
    State(app): State<Arc<App>>,
    Path(name): Path<String>,
) -> Result<Response, ApiError> {
    let ds = open(&app.path(&name)?, &name)?;
    let main = codebook_html(
        &ds,
        &CodebookHtml {
            dataset: &name,
            names: &[],
            weight: None,
            top: 0,
            page: CodebookPage::Served,
        },
    )
    .map_err(|e| {
        ApiError(
            StatusCode::INTERNAL_SERVER_ERROR,
            e.to_string()
                .replace(&ds.dir().display().to_string(), &name),
            None,
        )
    })?;
    let mut h = head(&format!("{name} codebook — microtab"));
    let _ = write!(
        h,
        "<header class=\"top\"><p class=\"brand\"><a href=\"/\">microtab</a></p>\
<nav aria-label=\"Dataset\"><a href=\"/analysis/{u}\">Analysis</a></nav></header>\n{main}\
<script type=\"application/json\" id=\"mt-meta\">{}</script>\n</body></html>\n",
        serde_json::json!({ "name": name, "codebook": true })
            .to_string()
            .replace('<', "\\u003c"),
        u = esc(&crate::app::encode(&name)),
    );
    Ok(Html(h).into_response())
}
