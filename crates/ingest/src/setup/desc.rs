//! What one setup file says of the data, whatever its language: the
//! fields of a record, labels, label sets, missing values; and the helpers
//! the three languages share.

use super::lex::{Tok, Token};
use crate::ddi::NumberStyle;
use crate::error::Result;
use std::collections::HashMap;
use std::path::Path;

/// A field of a fixed-width record.
#[derive(Debug, Clone)]
pub(crate) struct Field {
    pub name: String,
    /// Line of the record it is on (1-based).
    pub record_line: usize,
    /// Columns, 1-based, inclusive.
    pub start: usize,
    pub end: usize,
    pub decimals: u32,
    /// Of `decimals`, those from a division (`V / 100`): every value is
    /// divided, written with a point or not.
    pub divide: u32,
    pub text: bool,
    /// Where the setup declares it (file, line).
    pub at: (usize, usize),
    /// The record type it is read from (a file of several: SPSS's
    /// `RECORD TYPE`, SAS's `IF RECTYPE = 'P' THEN DO`); `None`: every
    /// record.
    pub rectype: Option<String>,
}

/// The variable (or columns) holding a record's type, in a file of
/// records of several types.
#[derive(Debug, Clone, Default)]
pub(crate) struct RecordId {
    /// Its name, when the setup gives one.
    pub name: Option<String>,
    /// Its columns (1-based, inclusive), when the setup gives them.
    pub cols: Option<(usize, usize)>,
    /// Where the setup declares it (file, line).
    pub at: (usize, usize),
    /// Read as text (SPSS's `/RECORD=… (A)`), when the setup says.
    pub text: Option<bool>,
}

/// A user informat (SAS `INVALUE N3PF '-99' = . OTHER = (|3.|)`).
#[derive(Debug, Clone, Default)]
pub(crate) struct Informat {
    /// Width and decimals (from `OTHER = (|w.d|)`), 0 when not given.
    pub width: usize,
    pub decimals: u32,
    pub text: bool,
    /// Codes read as missing (`'-99' = .`, `'-88' = .A`): code, and the
    /// special missing it becomes (empty for `.`).
    pub missing: Vec<(String, String)>,
    /// Where the program defines it (line).
    pub line: usize,
}

/// One value (or range) and its label.
#[derive(Debug, Clone)]
pub(crate) struct Labelled {
    pub lo: String,
    /// The end of a range (`1-5`, `1 THRU 5`).
    pub hi: Option<String>,
    pub label: String,
}

/// What one setup file says, before it becomes a codebook.
#[derive(Debug, Default, Clone)]
pub(crate) struct Desc {
    /// Fields in record order (fixed-width), or the variables of a
    /// delimited file in column order (columns 0).
    pub fields: Vec<Field>,
    pub delimited: Option<u8>,
    pub header: bool,
    /// Lines per record.
    pub lines: usize,
    /// Records of several types: the variable giving the type, and the
    /// types in the order the setup reads them.
    pub record_id: Option<RecordId>,
    pub record_types: Vec<String>,
    /// Further codes of a type (`RECORD TYPE 'A', 'B'`): code, type.
    pub type_codes: Vec<(String, String)>,
    /// The types whose records the program outputs (SAS `OUTPUT`).
    pub output: Vec<String>,
    /// Records of types the setup reads no layout for are skipped.
    pub skip_unlisted: bool,
    pub data_file: Option<String>,
    pub var_labels: Vec<(String, String)>,
    /// Labels given to variables directly (SPSS).
    pub value_labels: Vec<(String, Labelled)>,
    /// Named label sets (Stata `label define`, SAS `VALUE`).
    pub sets: HashMap<String, Vec<Labelled>>,
    /// Which variable takes which set.
    pub uses: Vec<(String, String, usize)>,
    /// Missing codes (value or range) by variable.
    pub missing: Vec<(String, Labelled)>,
    /// Variables read as text by their declaration elsewhere (SAS `LENGTH
    /// x $ 5`), for delimited files.
    pub text: Vec<String>,
    /// Implied decimals given by a division (`replace V = V / 100`):
    /// variable, decimals, line.
    pub scales: Vec<(String, u32, usize)>,
    /// Numbers written with grouping or currency signs (`COMMA10.2`), by
    /// variable.
    pub styles: Vec<(String, NumberStyle)>,
    /// Informats the program defines (SAS `INVALUE`), by lower-case name.
    pub informats: HashMap<String, Informat>,
    /// Columns read as text, by position from 1 (Stata's `stringcols`).
    pub text_cols: Vec<usize>,
    pub notes: Vec<String>,
}

/// A setup file's text: UTF-8, else Windows-1252 (older setups).
pub(crate) fn read_text(p: &Path) -> Result<String> {
    let b = std::fs::read(p).map_err(|e| crate::core::source::io_err(p, e))?;
    let t = match String::from_utf8(b) {
        Ok(t) => t,
        Err(e) => encoding_rs::WINDOWS_1252
            .decode_without_bom_handling(e.as_bytes())
            .0
            .into_owned(),
    };
    Ok(t.strip_prefix('\u{feff}')
        .unwrap_or(&t)
        .replace("\r\n", "\n")
        .replace('\r', "\n"))
}

/// `V = V / 10^k` (IPUMS's Stata setups give implied decimals so):
/// variable `var` gets `k` more decimals (applied to the columns whichever
/// setup file gives them); `false` when the divisor is not a power of ten.
pub(crate) fn scale(d: &mut Desc, var: &str, divisor: &str, line: usize) -> bool {
    let k = divisor.len().saturating_sub(1);
    let power = divisor.starts_with('1') && divisor[1..].bytes().all(|b| b == b'0') && k > 0;
    if power && k <= 9 {
        d.scales.push((var.to_string(), k as u32, line));
        // Missing codes declared before the division are in the undivided
        // units.
        for (n, m) in d.missing.iter_mut() {
            if n.eq_ignore_ascii_case(var) {
                m.lo = shift(&m.lo, k as u32);
                m.hi = m.hi.as_deref().map(|h| shift(h, k as u32));
            }
        }
    }
    power && k <= 9
}

/// `V = V / 100` (SAS) or `COMPUTE V = V / 100` (SPSS): implied decimals.
pub(crate) fn divides(t: &[Token], d: &mut Desc) -> bool {
    let line = t.first().map_or(0, |x| x.line);
    let t = if t.first().is_some_and(|x| x.is("compute")) {
        &t[1..]
    } else {
        t
    };
    match (
        t.first().and_then(|t| t.word()),
        t.get(2).and_then(|t| t.word()),
        t.get(4),
    ) {
        (Some(a), Some(b), Some(n))
            if t.len() == 5 && a.eq_ignore_ascii_case(b) && t[1].sym('=') && t[3].sym('/') =>
        {
            match &n.tok {
                Tok::Num(n) => scale(d, a, n, line),
                _ => false,
            }
        }
        _ => false,
    }
}

/// A statement's words after `from` as variable names, SPSS's and SAS's
/// `A TO D` / `A--D` and Stata's `a-d` ranges resolved against `fields`.
pub(crate) fn expand(names: &[String], fields: &[Field]) -> Vec<String> {
    let mut out = Vec::new();
    let mut i = 0;
    while i < names.len() {
        if i + 2 < names.len()
            && (names[i + 1].eq_ignore_ascii_case("to")
                || names[i + 1] == "-"
                || names[i + 1] == "--")
        {
            let p = fields
                .iter()
                .position(|f| f.name.eq_ignore_ascii_case(&names[i]));
            let q = fields
                .iter()
                .position(|f| f.name.eq_ignore_ascii_case(&names[i + 2]));
            match (p, q) {
                (Some(p), Some(q)) if p <= q => {
                    out.extend(fields[p..=q].iter().map(|f| f.name.clone()));
                }
                // The columns are in another setup file: the range is
                // resolved once they are known.
                _ => out.push(format!("{}{RANGE}{}", names[i], names[i + 2])),
            }
            i += 3;
            continue;
        }
        out.push(names[i].clone());
        i += 1;
    }
    out
}

/// Records of type `value` are told by variable `var` (SAS's `IF V =
/// 'H' THEN`, Stata's `drop if v != "H"`), said at `at` (file, line):
/// `var` becomes the record-type variable, which must be the one every
/// such test names, and `value` a record type.
pub(crate) fn record_type(
    d: &mut Desc,
    var: &str,
    value: &str,
    at: (usize, usize),
) -> std::result::Result<(), String> {
    let id = d.record_id.get_or_insert_with(|| RecordId {
        name: Some(var.to_string()),
        cols: None,
        at,
        text: None,
    });
    if !id
        .name
        .as_deref()
        .is_some_and(|n| n.eq_ignore_ascii_case(var))
    {
        return Err(format!(
            "line {}: the record type is tested on {var} here and on {} before: one variable holds it",
            at.1,
            id.name.as_deref().unwrap_or("?")
        ));
    }
    if !d.record_types.iter().any(|t| t == value) {
        d.record_types.push(value.to_string());
    }
    // Records the program reads with no type's layout are never output.
    d.skip_unlisted = true;
    Ok(())
}

/// Codes `codes` (two or more) mark records of one type, named by the
/// first: the first becomes a record type and the others its codes.
pub(crate) fn type_codes(d: &mut Desc, codes: &[String]) {
    let Some((first, rest)) = codes.split_first() else {
        return;
    };
    if !d.record_types.contains(first) {
        d.record_types.push(first.clone());
    }
    for c in rest {
        if c != first && !d.type_codes.iter().any(|(k, _)| k == c) {
            d.type_codes.push((c.clone(), first.clone()));
        }
    }
}

/// How a numeric format or informat writes its numbers: `COMMA`,
/// `DOLLAR`, `PCT`/`PERCENT` group with commas (and write `$`, `%`);
/// `COMMAX`, `DOLLARX`, `DOT`, `NUMX` group with points and write a
/// decimal comma.
pub(crate) fn style_of(format: &str) -> NumberStyle {
    let f = format.trim_start_matches('$').to_ascii_uppercase();
    let letters: String = f.chars().take_while(|c| c.is_ascii_alphabetic()).collect();
    match letters.as_str() {
        "COMMA" | "DOLLAR" | "PCT" | "PERCENT" => NumberStyle::Grouped,
        "COMMAX" | "DOLLARX" | "DOT" | "NUMX" => NumberStyle::DecimalComma,
        _ => NumberStyle::Plain,
    }
}

/// The widest record a setup may describe, in columns.
pub(crate) const MAX_COLUMN: usize = 1 << 20;

/// Names for a message: the first five, then how many more.
pub(crate) fn few(names: &[String]) -> String {
    if names.len() <= 5 {
        names.join(" ")
    } else {
        format!("{} … ({} variables)", names[..5].join(" "), names.len())
    }
}

/// Fields `names` sharing the columns `a`-`b` equally (SPSS's `A B C 1-6`,
/// Stata's `str a b 1-6`) on line `rec` of a record, each `(text,
/// decimals)`, declared at `at` (file, line).
pub(crate) fn shared_columns(
    d: &mut Desc,
    names: &[String],
    (a, b): (usize, usize),
    rec: usize,
    (text, decimals): (bool, u32),
    at: (usize, usize),
) -> std::result::Result<(), String> {
    let line = at.1;
    if a == 0 || b < a {
        return Err(format!(
            "line {line}: columns {a}-{b} of {} are not a range of columns (numbered from 1)",
            few(names)
        ));
    }
    if b > MAX_COLUMN {
        return Err(format!(
            "line {line}: column {b} is beyond the {MAX_COLUMN} columns a record may have"
        ));
    }
    let width = b + 1 - a;
    if names.is_empty() || width % names.len() != 0 {
        return Err(format!(
            "line {line}: columns {a}-{b} ({width} columns) cannot be shared equally by the {} variables {}",
            names.len(),
            few(names)
        ));
    }
    let each = width / names.len();
    for (k, n) in names.iter().enumerate() {
        d.fields.push(Field {
            name: n.clone(),
            rectype: None,
            record_line: rec,
            start: a + k * each,
            end: a + (k + 1) * each - 1,
            decimals,
            divide: 0,
            text,
            at,
        });
    }
    Ok(())
}

/// Joins the ends of a variable range (`A TO D`) whose columns another
/// setup file gives.
pub(crate) const RANGE: char = '\u{1}';

/// Marks a statement's reset of what earlier statements said of a
/// variable (SPSS's `VALUE LABELS`, `MISSING VALUES` replace).
pub(crate) const CLEAR: &str = "\u{1}clear";

/// `v` divided by 10^k, exactly, as text (`9999999`, 2 → `99999.99`);
/// text that is not a decimal number is kept.
pub(crate) fn shift(v: &str, k: u32) -> String {
    let (neg, body) = match v.strip_prefix('-') {
        Some(b) => (true, b),
        None => (false, v),
    };
    let (int, frac) = body.split_once('.').unwrap_or((body, ""));
    if int.is_empty() && frac.is_empty()
        || !int.bytes().chain(frac.bytes()).all(|b| b.is_ascii_digit())
    {
        return v.to_string();
    }
    let k = k as usize;
    let int = format!("{}{int}", "0".repeat(k.saturating_sub(int.len())));
    let cut = int.len() - k;
    format!(
        "{}{}.{}{frac}",
        if neg { "-" } else { "" },
        if cut == 0 { "0" } else { &int[..cut] },
        &int[cut..]
    )
}
