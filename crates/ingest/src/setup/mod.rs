//! Setup files: text data described by the syntax that Stata, SPSS and SAS
//! read it with, as IPUMS, ICPSR, NBER, DHS and MEPS publish them and as
//! `subset` writes them beside a CSV file.
//!
//! | language | file | what is read |
//! | --- | --- | --- |
//! | Stata | `.dct` | `infix dictionary` (`[type] name [#:]start[-end]`, `# lines`), `infile dictionary` (`_column()`, `_skip()`, `_line()`, `_lines()`, `[type] name [:labels] [%infmt] ["label"]`) |
//! | Stata | `.do` | `infix using FILE.dct`, an `infix … using` command, `import delimited`, `label variable`, `label define`, `label values`, `replace V = .x if V == CODE`, `mvdecode` |
//! | SPSS | `.sps` | `DATA LIST` (column and FORTRAN-like formats, `RECORDS=`), `GET DATA /TYPE=TXT` (fixed or delimited), `VARIABLE LABELS`, `VALUE LABELS`, `ADD VALUE LABELS`, `MISSING VALUES` (values and ranges) |
//! | SAS | `.sas` | `PROC FORMAT` `VALUE` statements, `INFILE` (`DSD`, `DLM=`, `FIRSTOBS=`), `INPUT` (column, formatted and list input; `@`, `+`, `#`, `/` pointers), `LABEL`, `FORMAT`, `LENGTH`, `IF V = CODE THEN V = .x` |
//!
//! Several setup files may describe one data file (a `.dct` for the
//! columns and a `.do` for the labels, say); each says what it says of
//! the variables, by name. What a setup amounts to is a [`Codebook`],
//! which the fixed-width (or CSV) import then uses exactly as it uses a
//! DDI codebook. Statements that change the data (`recode`, `COMPUTE`,
//! `IF … THEN` other than a missing code) are not run: each is noted.
//!
//! Records spread over several lines (`# lines`, `RECORDS=`, `_lines()`,
//! `#n` or `/` pointers; card images) become one record: each line cut or
//! padded to the width of its last field and the lines joined
//! ([`Codebook::record_lines`]).

mod desc;
mod lex;
mod sas;
mod spss;
mod stata;

use crate::core::pipeline::ImportSummary;
use crate::ddi::{niu_of, Charset, Codebook, DdiCategory, DdiVariable, NumberStyle, RecordGroup};
use crate::error::{Error, Result};
use crate::note::Note;
use crate::options::ImportOptions;
use desc::{read_text, Desc, Field, Labelled, CLEAR, MAX_COLUMN, RANGE};
use std::collections::HashMap;
use std::path::{Path, PathBuf};

/// Codes a labelled range of integers (`1-5 = 'Low'` in a SAS format) may
/// become.
const RANGE_LABELS: i64 = 1_000;

/// Lines a record may span.
const MAX_LINES: usize = 10_000;

/// What setup files say of a data file.
#[derive(Debug, Clone)]
pub struct Setup {
    /// Columns, types, labels and missing codes, as a DDI codebook would
    /// give them (its path is the first setup file).
    pub codebook: Codebook,
    /// Delimited text with a header line (the field delimiter), else
    /// fixed-width records.
    pub delimited: Option<u8>,
    /// The data file the setup names, if it names one.
    pub data_file: Option<String>,
    /// A delimited file's setup that names no columns (Stata's `import
    /// delimited`): the variables are the data's header, read at import.
    pending: Option<(Vec<PathBuf>, Vec<Desc>)>,
}

/// Reads the setup files `paths` (each `.dct`, `.do`, `.sps` or `.sas`,
/// else recognised by its statements) into what they say of the data.
pub fn read_setup(paths: &[PathBuf]) -> Result<Setup> {
    let first = paths.first().ok_or_else(|| Error::Input {
        path: PathBuf::new(),
        reason: "no setup file given".into(),
    })?;
    let mut descs = Vec::new();
    for (k, p) in paths.iter().enumerate() {
        let text = read_text(p)?;
        let err = |reason: String| Error::Codebook {
            path: p.clone(),
            reason,
        };
        let d = match language(p, &text) {
            Some(Lang::Stata) => stata::read(p, &text, k)?,
            Some(Lang::Spss) => spss::read(&text, k).map_err(err)?,
            Some(Lang::Sas) => sas::read(&text, k).map_err(err)?,
            None => {
                return Err(err(
                    "not a setup file: no Stata dictionary, SPSS DATA LIST or GET DATA, or SAS INPUT statement is in it (setup files end in .dct, .do, .sps or .sas)".into(),
                ))
            }
        };
        descs.push(d);
    }
    if descs.iter().all(|d| d.fields.is_empty()) {
        if let Some(d) = descs.iter().find(|d| d.delimited.is_some()) {
            return Ok(Setup {
                codebook: Codebook {
                    path: first.clone(),
                    file_name: d.data_file.clone(),
                    charset: Charset::Utf8,
                    hierarchical: false,
                    record_groups: Vec::new(),
                    variables: Vec::new(),
                    warnings: Vec::new(),
                    lenient: true,
                    record_lines: Vec::new(),
                    skip_unlisted: false,
                    output_type: None,
                    title: None,
                    description: None,
                },
                delimited: d.delimited,
                data_file: d.data_file.clone(),
                pending: Some((paths.to_vec(), descs)),
            });
        }
    }
    finish(paths, descs)
}

fn finish(paths: &[PathBuf], descs: Vec<Desc>) -> Result<Setup> {
    let first = &paths[0];
    build(paths, descs)
        .map_err(|(k, reason)| Error::Codebook {
            path: paths[k.min(paths.len() - 1)].clone(),
            reason,
        })
        .map(|mut s| {
            s.codebook.path = first.clone();
            s
        })
}

/// Imports `input`, described by `setup`, into a dataset at `target`.
pub fn import_setup(
    input: &Path,
    setup: &Setup,
    target: &Path,
    force: bool,
    opts: &ImportOptions,
) -> Result<ImportSummary> {
    let by_header = setup.pending.is_some();
    let named;
    let setup = match &setup.pending {
        Some((paths, descs)) => {
            named = with_header(input, paths, descs.clone())?;
            &named
        }
        None => setup,
    };
    let mut opts = opts.clone();
    let mut cb = setup.codebook.clone();
    // Text in a single-byte encoding when one is given (the setup cannot
    // say); UTF-8 else.
    if matches!(
        opts.encoding,
        Some(crate::options::Encoding::Latin1 | crate::options::Encoding::Windows1252)
    ) {
        cb.charset = Charset::Latin1;
    }
    opts.codebook = Some(cb.clone());
    match setup.delimited {
        Some(d) => {
            // The setup reads the columns by position; the import, by the
            // header's names: they must agree.
            if !by_header {
                let names = header(input, d)?;
                let want: Vec<&str> = setup
                    .codebook
                    .variables
                    .iter()
                    .map(|v| v.name.as_str())
                    .collect();
                if let Some(k) = (0..names.len().max(want.len())).find(|&k| {
                    !names
                        .get(k)
                        .zip(want.get(k))
                        .is_some_and(|(a, b)| a.eq_ignore_ascii_case(b))
                }) {
                    return Err(Error::Input {
                        path: input.to_path_buf(),
                        reason: format!(
                            "column {} of the header is {}, where {} reads {}: the setup reads the columns in its own order, so the header must name them so",
                            k + 1,
                            names.get(k).map_or("absent".to_string(), |n| format!("{n:?}")),
                            setup.codebook.path.display(),
                            want.get(k).map_or("no more columns".to_string(), |n| n.to_string())
                        ),
                    });
                }
            }
            opts.delimiter.get_or_insert(d);
            crate::csv::import_csv(input, target, force, &opts)
        }
        None => {
            let mut s = crate::fixed::import_fixed(input, &cb, target, force, &opts)?;
            if cb.hierarchical {
                // The packages read such a file a record a row; the import
                // reads it as IPUMS's rectangular extracts are.
                let types: Vec<&str> = cb
                    .record_groups
                    .iter()
                    .map(|g| g.rectype.as_str())
                    .collect();
                let top = cb.top_record_type().unwrap_or("H");
                // (With neither, the import has said which type it took.)
                let row = opts
                    .record_type
                    .clone()
                    .or_else(|| cb.person_record_type().map(str::to_string));
                // Variables of a third type are in neither the row's
                // record nor the household's.
                let row_t = row.clone().unwrap_or_default();
                let left: Vec<String> = cb
                    .variables
                    .iter()
                    .filter(|v| {
                        !v.record_types.is_empty()
                            && !v.record_types.iter().any(|t| *t == row_t || t == top)
                    })
                    .map(|v| v.name.clone())
                    .collect();
                if !left.is_empty() && !row_t.is_empty() {
                    let kept = if row_t == top {
                        row_t.clone()
                    } else {
                        format!("{row_t} and {top}")
                    };
                    s.notes.push(Note::from(format!(
                        "the variables of records of types other than {kept} are not imported: {}",
                        desc::few(&left)
                    )));
                }
                if let Some(row) = row.filter(|r| r != top) {
                    s.notes.push(Note::hinted(
                        format!(
                            "{} holds records of types {}: each row is a record of type {row} with the variables of the record of type {top} before it",
                            input.display(),
                            types.join(", ")
                        ),
                        microtab_store::Remedy::RecordType,
                        "chooses the type whose records become the rows",
                    ));
                }
            }
            Ok(s)
        }
    }
}

/// The names in the header line of the delimited file `input`.
fn header(input: &Path, delim: u8) -> Result<Vec<String>> {
    use std::io::Read;
    let mut src = crate::core::source::open(input)?;
    let mut head = Vec::new();
    let mut buf = [0u8; 65536];
    while !head.contains(&b'\n') && head.len() < 16 << 20 {
        let n = src
            .reader
            .read(&mut buf)
            .map_err(|e| src.read_error(e, 0))?;
        if n == 0 {
            break;
        }
        head.extend_from_slice(&buf[..n]);
    }
    let end = head.iter().position(|&b| b == b'\n').unwrap_or(head.len());
    let line = String::from_utf8_lossy(&head[..end]);
    let line = line.trim_start_matches('\u{feff}').trim_end_matches('\r');
    let mut names = Vec::new();
    let (mut cur, mut quoted, mut chars) = (String::new(), false, line.chars().peekable());
    while let Some(ch) = chars.next() {
        match ch {
            '"' if quoted && chars.peek() == Some(&'"') => {
                chars.next();
                cur.push('"');
            }
            '"' => quoted = !quoted,
            c if c as u32 == delim as u32 && !quoted => names.push(std::mem::take(&mut cur)),
            c => cur.push(c),
        }
    }
    names.push(cur);
    Ok(names.into_iter().map(|n| n.trim().to_string()).collect())
}

/// The setup of a delimited file whose variables are its header's names.
fn with_header(input: &Path, paths: &[PathBuf], mut descs: Vec<Desc>) -> Result<Setup> {
    let k = descs
        .iter()
        .position(|d| d.delimited.is_some())
        .expect("a delimited setup");
    let delim = descs[k].delimited.unwrap_or(b',');
    let names = header(input, delim)?;
    let d = &mut descs[k];
    for (i, n) in names.iter().enumerate() {
        d.fields.push(Field {
            name: n.trim().to_string(),
            rectype: None,
            record_line: 1,
            start: 1,
            end: 1,
            decimals: 0,
            divide: 0,
            text: d.text_cols.contains(&(i + 1)),
            at: (k, 1),
        });
    }
    // Columns the setup says nothing of keep the types their values show.
    let mut s = finish(paths, descs)?;
    s.codebook.variables.retain(|v| {
        v.text
            || v.label.is_some()
            || !v.categories.is_empty()
            || !v.invalid.is_empty()
            || !v.invalid_ranges.is_empty()
    });
    Ok(s)
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum Lang {
    Stata,
    Spss,
    Sas,
}

fn language(p: &Path, text: &str) -> Option<Lang> {
    let ext = p
        .extension()
        .map(|e| e.to_string_lossy().to_ascii_lowercase())
        .unwrap_or_default();
    match ext.as_str() {
        "dct" | "do" | "dict" => return Some(Lang::Stata),
        "sps" | "spss" => return Some(Lang::Spss),
        "sas" => return Some(Lang::Sas),
        _ => {}
    }
    let t = text.to_ascii_lowercase();
    let stata = [
        "infix ",
        "infile ",
        "label define ",
        "label values ",
        "#delimit",
    ];
    if (t.contains("dictionary") && t.contains('{')) || stata.iter().any(|w| t.contains(w)) {
        Some(Lang::Stata)
    } else if t.contains("data list") || t.contains("get data") {
        Some(Lang::Spss)
    } else if t.contains("input") && t.contains(';') {
        Some(Lang::Sas)
    } else {
        None
    }
}

/// The label sets' and statements' values of one variable as categories
/// (ranges of integers listed), missing codes and missing ranges.
struct Said {
    label: Option<String>,
    cats: Vec<DdiCategory>,
    invalid: Vec<String>,
    ranges: Vec<(String, String)>,
}

fn key(s: &str) -> String {
    s.to_lowercase()
}

/// A value a setup gives (in the variable's own units: SPSS, SAS and Stata
/// label and declare values as they are after implied decimals) as a
/// codebook code, which the import reads as the data's digits: with an
/// explicit point when the field has implied decimals; `LO`/`HI` (SPSS's
/// open range ends) as the widest such code; text as it is.
fn code(v: &str, dec: u32, text: bool) -> String {
    if text {
        // SPSS pads text values with blanks; the data lose theirs.
        return v.trim_end().to_string();
    }
    let d = dec as usize;
    let point = if d > 0 {
        format!(".{}", "0".repeat(d))
    } else {
        String::new()
    };
    let nines = "9".repeat(17usize.saturating_sub(d).max(1));
    match v {
        "LO" => return format!("-{nines}{point}"),
        "HI" => return format!("{nines}{point}"),
        _ => {}
    }
    if d > 0 {
        return if v.contains(['.', 'e', 'E']) {
            v.to_string()
        } else {
            format!("{v}{point}")
        };
    }
    match v.parse::<f64>() {
        Ok(x) if x.fract() == 0.0 && x.abs() < 1e15 => format!("{}", x as i64),
        _ => v.to_string(),
    }
}

/// The values a labelled range stands for (integers, at most
/// [`RANGE_LABELS`]), or `None`.
fn range_values(lo: &str, hi: &str) -> Option<Vec<String>> {
    let (a, b) = (lo.parse::<i64>().ok()?, hi.parse::<i64>().ok()?);
    (b >= a && b - a < RANGE_LABELS).then(|| (a..=b).map(|x| x.to_string()).collect())
}

fn build(paths: &[PathBuf], descs: Vec<Desc>) -> std::result::Result<Setup, (usize, String)> {
    // The file that gives the layout: the first with fields.
    let Some(lay) = descs.iter().position(|d| !d.fields.is_empty()) else {
        return Err((
            0,
            "the setup gives no variables' columns: it needs a Stata dictionary (.dct) or infix command, an SPSS DATA LIST or GET DATA, or a SAS INPUT statement".into(),
        ));
    };
    let mut said: HashMap<String, Said> = HashMap::new();
    let mut warnings: Vec<Note> = Vec::new();
    for (k, d) in descs.iter().enumerate() {
        let file = paths[k].display();
        for n in &d.notes {
            warnings.push(Note::from(format!("{file}: {n}")));
        }
    }
    let (mut fields, types_of, id) = record_types(&descs[lay])?;
    for (k, d) in descs.iter().enumerate() {
        for (var, dec, line) in &d.scales {
            match fields.iter_mut().find(|f| f.name.eq_ignore_ascii_case(var)) {
                Some(f) if !f.text => {
                    f.decimals += dec;
                    f.divide += dec;
                }
                Some(_) => {
                    return Err((k, format!("line {line}: {var} is text: it cannot be divided")))
                }
                None => {
                    return Err((
                        k,
                        format!("line {line}: {var} is divided by a power of ten (implied decimals), but no setup file gives its columns"),
                    ))
                }
            }
        }
    }
    let layout = &descs[lay];
    let fields = &fields;
    let mut seen: HashMap<String, usize> = HashMap::new();
    for f in fields {
        let at = |reason: String| (f.at.0, format!("line {}: {}: {reason}", f.at.1, f.name));
        if f.start == 0 || f.end < f.start {
            return Err(at(format!(
                "columns {}-{} are not a range of columns (numbered from 1)",
                f.start, f.end
            )));
        }
        if f.end > MAX_COLUMN {
            return Err(at(format!(
                "column {} is beyond the {MAX_COLUMN} columns a record may have",
                f.end
            )));
        }
        if !f.text && layout.delimited.is_none() && f.end + 1 - f.start > 40 {
            return Err(at(format!(
                "a numeric field {} columns wide is not supported (at most 40)",
                f.end + 1 - f.start
            )));
        }
        if f.decimals > crate::core::number::MAX_FIXED_DECIMALS {
            return Err(at(format!(
                "{} decimals are more than {} (implied decimals and divisions together)",
                f.decimals,
                crate::core::number::MAX_FIXED_DECIMALS
            )));
        }
        if let Some(&l) = seen.get(&key(&f.name)) {
            return Err((
                f.at.0,
                format!(
                    "line {}: variable {} is declared twice (first on line {l})",
                    f.at.1, f.name
                ),
            ));
        }
        seen.insert(key(&f.name), f.at.1);
        said.insert(
            key(&f.name),
            Said {
                label: None,
                cats: Vec::new(),
                invalid: Vec::new(),
                ranges: Vec::new(),
            },
        );
    }
    let mut text_vars: Vec<String> = Vec::new();
    for d in &descs {
        text_vars.extend(d.text.iter().map(|t| key(t)));
    }
    // Each variable's kind and implied decimals, for its codes.
    let kind: HashMap<String, (bool, u32)> = fields
        .iter()
        .map(|f| {
            let text = f.text || text_vars.contains(&key(&f.name));
            (key(&f.name), (text, f.decimals))
        })
        .collect();
    let mut unknown: Vec<(usize, String)> = Vec::new();
    // A name as the variables it stands for: itself, a range whose columns
    // another file gives (`A TO D`), or Stata's `_all`.
    let targets = |n: &str| -> Vec<String> {
        if let Some((a, b)) = n.split_once(RANGE) {
            let p = fields.iter().position(|f| f.name.eq_ignore_ascii_case(a));
            let q = fields.iter().position(|f| f.name.eq_ignore_ascii_case(b));
            match (p, q) {
                (Some(p), Some(q)) if p <= q => {
                    fields[p..=q].iter().map(|f| f.name.clone()).collect()
                }
                _ => vec![format!("{a} to {b}")],
            }
        } else if n == "_all" || n == "*" {
            fields.iter().map(|f| f.name.clone()).collect()
        } else {
            vec![n.to_string()]
        }
    };
    for (k, d) in descs.iter().enumerate() {
        for (n, l) in &d.var_labels {
            for n in targets(n) {
                if let Some(s) = get(&mut said, &mut unknown, k, &n) {
                    s.label = Some(l.clone());
                }
            }
        }
        let put = |s: &mut Said, l: &Labelled, warnings: &mut Vec<Note>, var: &str| {
            let (text, dec) = kind.get(&key(var)).copied().unwrap_or((false, 0));
            let mut add = |v: String| {
                if l.label.is_empty() {
                    return;
                }
                let v = code(&v, dec, text);
                if let Some(c) = s.cats.iter_mut().find(|c| c.value == v) {
                    c.label = Some(l.label.clone());
                } else {
                    s.cats.push(DdiCategory {
                        value: v,
                        label: Some(l.label.clone()),
                        missing: false,
                    });
                }
            };
            match &l.hi {
                None => add(l.lo.clone()),
                Some(hi) => match range_values(&l.lo, hi) {
                    Some(vs) => vs.into_iter().for_each(add),
                    None => warnings.push(Note::from(format!(
                        "{}: variable {var}: the label {:?} of the range {} to {hi} is not kept (labels of ranges are kept for up to {RANGE_LABELS} integers)",
                        paths[k].display(),
                        l.label,
                        l.lo
                    ))),
                },
            }
        };
        for (n, l) in &d.value_labels {
            for n in targets(n) {
                if let Some(s) = get(&mut said, &mut unknown, k, &n) {
                    if l.lo == CLEAR {
                        s.cats.clear();
                    } else {
                        put(s, l, &mut warnings, &n);
                    }
                }
            }
        }
        for (n, set, line) in &d.uses {
            // A set defined in this file, else in another (Stata's names
            // are case-sensitive; SAS's are stored in lower case).
            let found = d
                .sets
                .get(set)
                .or_else(|| descs.iter().find_map(|o| o.sets.get(set)));
            match found {
                Some(ls) => {
                    for n in targets(n) {
                        if let Some(s) = get(&mut said, &mut unknown, k, &n) {
                            for l in ls {
                                put(s, l, &mut warnings, &n);
                            }
                        }
                    }
                }
                None => warnings.push(Note::from(format!(
                    "{}: line {line}: variable {n} takes the value labels {set}, which no setup file defines",
                    paths[k].display()
                ))),
            }
        }
        for (n, m) in &d.missing {
            for n in targets(n) {
                if let Some(s) = get(&mut said, &mut unknown, k, &n) {
                    let (text, dec) = kind.get(&key(&n)).copied().unwrap_or((false, 0));
                    match &m.hi {
                        _ if m.lo == CLEAR => {
                            s.invalid.clear();
                            s.ranges.clear();
                        }
                        None => s.invalid.push(code(&m.lo, dec, text)),
                        Some(hi) => s.ranges.push((code(&m.lo, dec, text), code(hi, dec, text))),
                    }
                }
            }
        }
    }
    for (k, n) in &unknown {
        warnings.push(Note::from(format!(
            "{}: variable {n} is described but not among the {} variables whose columns {} gives: its description is not used",
            paths[*k].display(),
            fields.len(),
            paths[lay].display()
        )));
    }
    // A record of several lines: each line as wide as its last field, the
    // lines joined (the fixed-width import reads them so).
    let lines = fields
        .iter()
        .map(|f| f.record_line)
        .max()
        .unwrap_or(1)
        .max(layout.lines);
    if lines > 1 && layout.delimited.is_some() {
        return Err((
            lay,
            format!("the setup reads records of {lines} lines from delimited text: microtab reads a delimited record from one line"),
        ));
    }
    if lines > MAX_LINES {
        return Err((
            lay,
            format!("records of {lines} lines: at most {MAX_LINES} are supported"),
        ));
    }
    if lines > 1 && id.is_some() {
        return Err((
            lay,
            format!("the setup reads records of several types, each of {lines} lines: records of several types are read from one line each"),
        ));
    }
    let mut widths = vec![0usize; if lines > 1 { lines } else { 0 }];
    for f in fields.iter().filter(|_| lines > 1) {
        let w = &mut widths[f.record_line.max(1) - 1];
        *w = (*w).max(f.end);
    }
    let offset = |f: &Field| {
        widths[..(f.record_line.max(1) - 1).min(widths.len())]
            .iter()
            .sum::<usize>()
    };
    let variables: Vec<DdiVariable> = fields
        .iter()
        .map(|f| {
            let s = said
                .remove(&key(&f.name))
                .expect("every field has an entry");
            let text = f.text || text_vars.contains(&key(&f.name));
            let niu = niu_of(&s.cats, &s.invalid, text, [None, None], f.end + 1 - f.start);
            DdiVariable {
                name: f.name.clone(),
                label: s.label,
                description: None,
                style: layout
                    .styles
                    .iter()
                    .rev()
                    .find(|(n, _)| n.eq_ignore_ascii_case(&f.name))
                    .map_or(NumberStyle::Plain, |s| s.1),
                start: f.start + offset(f),
                end: f.end + offset(f),
                divide: if text { 0 } else { f.divide },
                decimals: if text { 0 } else { f.decimals },
                text,
                record_types: types_of.get(&key(&f.name)).cloned().unwrap_or_default(),
                categories: s.cats,
                invalid: s.invalid,
                invalid_ranges: s.ranges,
                coding: None,
                niu,
            }
        })
        .collect();
    if layout.delimited.is_some() && !layout.header {
        return Err((
            lay,
            "the setup reads delimited text without a header line of names: microtab reads delimited files by their header (write the names on the first line, or describe fixed columns)".into(),
        ));
    }
    // Record types: labelled as the type variable's value labels say.
    let record_groups = match &id {
        None => Vec::new(),
        Some(id) => {
            let var = variables.iter().find(|v| v.name.eq_ignore_ascii_case(id));
            layout
                .record_types
                .iter()
                .map(|t| RecordGroup {
                    rectype: t.clone(),
                    label: var.and_then(|v| {
                        v.categories
                            .iter()
                            .find(|c| c.value == *t)
                            .and_then(|c| c.label.clone())
                    }),
                    recidvar: var.map(|v| v.name.clone()),
                    keyvar: None,
                    codes: layout
                        .type_codes
                        .iter()
                        .filter(|(_, k)| k == t)
                        .map(|(c, _)| c.clone())
                        .collect(),
                })
                .collect()
        }
    };
    Ok(Setup {
        codebook: Codebook {
            path: paths[0].clone(),
            file_name: layout.data_file.clone(),
            charset: Charset::Utf8,
            hierarchical: id.is_some(),
            record_groups,
            variables,
            warnings,
            lenient: true,
            record_lines: widths,
            skip_unlisted: layout.skip_unlisted,
            // The one type the program outputs.
            output_type: match layout.output.as_slice() {
                [t] => Some(t.clone()),
                _ => None,
            },
            title: None,
            description: None,
        },
        delimited: layout.delimited,
        data_file: layout.data_file.clone(),
        pending: None,
    })
}

/// The fields of a layout, one per variable, with the record types each
/// is read from (by lower-case name; absent: every type) and the
/// variable giving a record's type — for a file of records of several
/// types, whose setup reads a variable on several types (the type, the
/// household's serial number) in each type's layout.
#[allow(clippy::type_complexity)]
fn record_types(
    layout: &Desc,
) -> std::result::Result<(Vec<Field>, HashMap<String, Vec<String>>, Option<String>), (usize, String)>
{
    let mut types: HashMap<String, Vec<String>> = HashMap::new();
    let Some(rid) = &layout.record_id else {
        if let Some(f) = layout.fields.iter().find(|f| f.rectype.is_some()) {
            return Err((
                f.at.0,
                format!("line {}: {} is read from records of one type, but the setup names no variable holding the type", f.at.1, f.name),
            ));
        }
        return Ok((layout.fields.clone(), types, None));
    };
    let at = |reason: String| (rid.at.0, format!("line {}: {reason}", rid.at.1));
    if layout.record_types.is_empty() {
        return Err(at(
            "the setup reads records of several types but gives no layout of any type".into(),
        ));
    }
    let mut fields: Vec<Field> = Vec::new();
    for f in &layout.fields {
        match fields
            .iter()
            .position(|g| g.name.eq_ignore_ascii_case(&f.name))
        {
            None => {
                if let Some(t) = &f.rectype {
                    types.insert(key(&f.name), vec![t.clone()]);
                }
                fields.push(f.clone());
            }
            Some(k) => {
                let g = &fields[k];
                if (g.start, g.end, g.text) != (f.start, f.end, f.text) {
                    return Err((
                        f.at.0,
                        format!(
                            "line {}: {} is read from columns {}-{}{} here and from columns {}-{}{} on line {}: a variable has one place in every record type",
                            f.at.1,
                            f.name,
                            f.start,
                            f.end,
                            if f.text { " as text" } else { "" },
                            g.start,
                            g.end,
                            if g.text { " as text" } else { "" },
                            g.at.1
                        ),
                    ));
                }
                match (&f.rectype, types.get_mut(&key(&f.name))) {
                    (Some(t), Some(ts)) if !ts.contains(t) => ts.push(t.clone()),
                    (None, Some(_)) => {
                        types.remove(&key(&f.name));
                    }
                    _ => {}
                }
            }
        }
    }
    // The type variable: named, else the one at the columns given.
    let named = rid.name.as_ref().and_then(|n| {
        fields
            .iter()
            .find(|f| f.name.eq_ignore_ascii_case(n))
            .map(|f| f.name.clone())
    });
    let id = match (named, &rid.name, rid.cols) {
        (Some(n), _, _) => n,
        (None, name, Some((a, b))) => {
            match fields
                .iter()
                .find(|f| (f.start, f.end) == (a, b) && name.is_none())
            {
                Some(f) => f.name.clone(),
                None => {
                    let n = name.clone().unwrap_or_else(|| "RECTYPE".to_string());
                    fields.insert(
                        0,
                        Field {
                            name: n.clone(),
                            rectype: None,
                            record_line: 1,
                            start: a,
                            end: b,
                            decimals: 0,
                            divide: 0,
                            // A number unless the setup says text or a
                            // type is not a number.
                            text: rid.text.unwrap_or(true)
                                || layout
                                    .record_types
                                    .iter()
                                    .chain(layout.type_codes.iter().map(|(c, _)| c))
                                    .any(|t| t.parse::<u64>().is_err()),
                            at: rid.at,
                        },
                    );
                    n
                }
            }
        }
        (None, Some(n), None) => {
            return Err(at(format!(
                "the record type is read from {n}, but no layout gives its columns"
            )))
        }
        (None, None, None) => return Err(at("no variable holds the record type".into())),
    };
    // The type is on every record.
    types.remove(&key(&id));
    Ok((fields, types, Some(id)))
}

/// The description of variable `name`, noting a name no field has.
fn get<'a>(
    said: &'a mut HashMap<String, Said>,
    unknown: &mut Vec<(usize, String)>,
    k: usize,
    name: &str,
) -> Option<&'a mut Said> {
    let s = said.get_mut(&key(name));
    if s.is_none() && !unknown.iter().any(|(_, n)| n.eq_ignore_ascii_case(name)) {
        unknown.push((k, name.to_string()));
    }
    s
}
