//! Turning a chunk of CSV text into typed column buffers (parser threads).
//!
//! One file (~860 lines before its tests): the number grammar, the missing
//! tokens, type widening and the column buffers are the one definition of
//! what a CSV field becomes, shared by the CSV and fixed-width readers.

use crate::error::{show, RowError};
use crate::tokenizer::{Field, Tokenizer};
use std::collections::HashMap;

/// Marks system-missing in [`ColBuf::Int`] values.
pub(crate) const NULL_I64: i64 = i64::MIN;

/// Missing-value tokens read as system-missing by default in columns that
/// are otherwise numeric: how R (`NA`), pandas (`NaN`, `nan`, `<NA>`),
/// SAS and Stata (`.`, and Stata's extended `.a`…`.z`), spreadsheets
/// (`#N/A`) and databases (`NULL`) write missing numbers.
pub const DEFAULT_NA: &[&str] = &[
    "NA", "N/A", "n/a", "NaN", "nan", "-nan", "<NA>", "#N/A", "NULL", "null", ".", ".a", ".b",
    ".c", ".d", ".e", ".f", ".g", ".h", ".i", ".j", ".k", ".l", ".m", ".n", ".o", ".p", ".q", ".r",
    ".s", ".t", ".u", ".v", ".w", ".x", ".y", ".z",
];

/// The text encoding of an input file.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Encoding {
    /// UTF-8 (ASCII included); anything else is an error naming the field.
    #[default]
    Utf8,
    /// ISO-8859-1: every byte is the character of the same number.
    Latin1,
    /// Windows-1252: Latin-1 with printable characters (€, “ ”, …) in
    /// 0x80–0x9F.
    Windows1252,
}

/// Characters of Windows-1252 at 0x80–0x9F (undefined ones as in Latin-1).
const CP1252_HIGH: [char; 32] = [
    '€', '\u{81}', '‚', 'ƒ', '„', '…', '†', '‡', 'ˆ', '‰', 'Š', '‹', 'Œ', '\u{8d}', 'Ž', '\u{8f}',
    '\u{90}', '‘', '’', '“', '”', '•', '–', '—', '˜', '™', 'š', '›', 'œ', '\u{9d}', 'ž', 'Ÿ',
];

impl Encoding {
    /// Decodes `raw` to text; `None` when it is not valid in this encoding
    /// (only UTF-8 can be invalid).
    pub(crate) fn decode(self, raw: &[u8]) -> Option<std::borrow::Cow<'_, str>> {
        if raw.is_ascii() {
            // SAFETY: ASCII is valid UTF-8.
            return Some(unsafe { std::str::from_utf8_unchecked(raw) }.into());
        }
        match self {
            Encoding::Utf8 => std::str::from_utf8(raw).ok().map(Into::into),
            Encoding::Latin1 => Some(raw.iter().map(|&b| b as char).collect::<String>().into()),
            Encoding::Windows1252 => Some(
                raw.iter()
                    .map(|&b| match b {
                        0x80..=0x9F => CP1252_HIGH[(b - 0x80) as usize],
                        _ => b as char,
                    })
                    .collect::<String>()
                    .into(),
            ),
        }
    }
}

/// Missing-value tokens read as system-missing by default in text columns:
/// those of [`DEFAULT_NA`] that R (`NA`), pandas (all of these) and
/// spreadsheets (`#N/A`) write for a missing value of any type. Stata's and
/// SAS's `.`, `.a`…`.z` are missing only in numeric columns (both write a
/// missing text as an empty field, and `.` is a legitimate text value
/// elsewhere), as is `-nan`. pandas' `None` is left out: it is an answer
/// ("None of these") in many questionnaires.
pub const DEFAULT_TEXT_NA: &[&str] = &[
    "NA", "N/A", "n/a", "NaN", "nan", "<NA>", "#N/A", "NULL", "null",
];

/// Which field texts are system-missing, in numeric and in text columns.
/// Empty fields are always missing.
#[derive(Debug, Clone)]
pub(crate) struct NaSet {
    tokens: Vec<Vec<u8>>,
    text_tokens: Vec<Vec<u8>>,
}

fn token_bytes(t: &[String]) -> Vec<Vec<u8>> {
    t.iter()
        .filter(|t| !t.is_empty())
        .map(|t| t.as_bytes().to_vec())
        .collect()
}

impl NaSet {
    /// `numeric`: the tokens for numeric columns (`None`: [`DEFAULT_NA`]);
    /// `text`: those for text columns (`None`: the numeric list when one is
    /// given, else [`DEFAULT_TEXT_NA`]).
    pub fn new(numeric: Option<&[String]>, text: Option<&[String]>) -> Self {
        let defaults = |d: &[&str]| d.iter().map(|t| t.as_bytes().to_vec()).collect();
        NaSet {
            tokens: numeric.map_or_else(|| defaults(DEFAULT_NA), token_bytes),
            text_tokens: match (text, numeric) {
                (Some(t), _) | (None, Some(t)) => token_bytes(t),
                (None, None) => defaults(DEFAULT_TEXT_NA),
            },
        }
    }

    /// Whether `s` is missing in a numeric column.
    #[inline]
    pub fn contains(&self, s: &[u8]) -> bool {
        !self.tokens.is_empty() && self.tokens.iter().any(|t| t == s)
    }

    /// Whether `s` is missing in a text column.
    #[inline]
    pub fn contains_text(&self, s: &[u8]) -> bool {
        !self.text_tokens.is_empty() && self.text_tokens.iter().any(|t| t == s)
    }

    /// Whether a token looks like a number (`--na -99`): then numbers read
    /// by the one-pass parser are checked against the tokens too.
    pub fn has_numbers(&self) -> bool {
        self.tokens.iter().any(|t| parse_decimal(t).is_some())
    }
}

/// How chunks are parsed (shared by the parser threads).
pub(crate) struct ParseOpts {
    pub na: NaSet,
    pub encoding: Encoding,
    /// Records sampled to choose the types (for messages).
    pub sampled: u64,
}

/// Whether `s` is a number written with leading zeros (`01`, `-007`,
/// `00.5`): a zero-padded code rather than a quantity.
#[inline]
pub(crate) fn leading_zeros(s: &[u8]) -> bool {
    let d = match s.first() {
        Some(b'-' | b'+') => &s[1..],
        _ => s,
    };
    d.len() >= 2 && d[0] == b'0' && d[1].is_ascii_digit()
}

/// Whether `s` is an integer literal (`[+-]digits`).
pub(crate) fn int_literal(s: &[u8]) -> bool {
    let d = match s.first() {
        Some(b'-' | b'+') => &s[1..],
        _ => s,
    };
    !d.is_empty() && d.iter().all(u8::is_ascii_digit)
}

/// Something about a column worth telling the user, found while parsing:
/// the first line where it was seen, the field, and how often.
#[derive(Debug, Clone)]
pub(crate) struct Note {
    pub line: u64,
    pub example: String,
    pub count: u64,
}

impl Note {
    pub fn add(slot: &mut Option<Note>, line: u64, raw: &[u8]) {
        match slot {
            Some(n) => n.count += 1,
            None => {
                *slot = Some(Note {
                    line,
                    example: show(raw),
                    count: 1,
                })
            }
        }
    }

    /// Merges the note of a later chunk.
    pub fn merge(slot: &mut Option<Note>, later: Option<Note>) {
        match (slot.as_mut(), later) {
            (Some(a), Some(b)) => a.count += b.count,
            (None, b) => *slot = b,
            _ => {}
        }
    }
}
/// Most implied decimals kept as a scaled integer; more become a float.
pub(crate) const MAX_DECIMALS: u32 = 9;

/// What a column was planned to hold when parsing started.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Plan {
    /// Integers or fixed-point decimals; may turn into floats.
    Numeric,
    /// Integers or fixed-point decimals only (`--type VAR=int`).
    IntOnly,
    /// Floats.
    Float,
    /// Dictionary-encoded text.
    Str,
}

/// One column of one chunk.
#[derive(Debug)]
pub(crate) enum ColBuf {
    Int {
        vals: Vec<i64>,
        decimals: u32,
        nulls: u64,
        min: i64,
        max: i64,
    },
    Float {
        vals: Vec<f64>,
        nulls: u64,
        min: f64,
        max: f64,
    },
    Str {
        codes: Vec<u32>,
        dict: Vec<String>,
        nulls: u64,
    },
}

pub(crate) fn pow10(d: u32) -> i64 {
    10i64.pow(d)
}

/// Parses `[+-]digits[.digits]` into (scaled mantissa, decimals).
#[inline]
pub(crate) fn parse_decimal(s: &[u8]) -> Option<(i64, u32)> {
    let (neg, mut i) = match s.first()? {
        b'-' => (true, 1),
        b'+' => (false, 1),
        _ => (false, 0),
    };
    let mut m: i64 = 0;
    let mut digits = 0u32;
    let mut decimals = 0u32;
    let mut seen_dot = false;
    while i < s.len() {
        let b = s[i];
        if b.is_ascii_digit() {
            m = m.checked_mul(10)?.checked_add((b - b'0') as i64)?;
            digits += 1;
            if seen_dot {
                decimals += 1;
            }
        } else if b == b'.' && !seen_dot {
            seen_dot = true;
        } else {
            return None;
        }
        i += 1;
    }
    if digits == 0 || decimals > MAX_DECIMALS {
        return None;
    }
    Some((if neg { -m } else { m }, decimals))
}

/// Parses any finite number (exponents allowed).
pub(crate) fn parse_float(s: &[u8]) -> Option<f64> {
    let t = std::str::from_utf8(s).ok()?;
    if !t.bytes().any(|b| b.is_ascii_digit()) {
        return None;
    }
    t.parse::<f64>().ok().filter(|v| v.is_finite())
}

pub(crate) fn trim(s: &[u8]) -> &[u8] {
    let mut a = 0;
    let mut b = s.len();
    while a < b && s[a] == b' ' {
        a += 1;
    }
    while b > a && s[b - 1] == b' ' {
        b -= 1;
    }
    &s[a..b]
}

/// Why a sampled column became text.
#[derive(Debug, Clone)]
pub(crate) enum TextWhy {
    /// A value that is not a number.
    NotANumber,
    /// Numbers written with leading zeros (zero-padded codes such as `01`):
    /// kept as text so that `01` and `1` stay apart and print as written.
    LeadingZeros(Note),
    /// An integer beyond the 64-bit range: an identifier, kept exactly.
    BeyondI64(Note),
}

/// What a sample said about each column.
#[derive(Debug, Clone, Default)]
pub(crate) struct Sampled {
    /// Records sampled.
    pub rows: u64,
    /// Per column: why it is text (`None`: numeric).
    pub text: Vec<Option<TextWhy>>,
    /// Per column: missing tokens of numeric columns seen that text
    /// columns keep as values (`.`).
    pub na_in_text: Vec<Option<Note>>,
}

impl Sampled {
    pub fn new(ncols: usize) -> Self {
        Sampled {
            rows: 0,
            text: vec![None; ncols],
            na_in_text: vec![None; ncols],
        }
    }

    /// Adds what a later stretch of the file said.
    pub fn merge(&mut self, later: Sampled) {
        self.rows += later.rows;
        for (a, b) in self.text.iter_mut().zip(later.text) {
            if a.is_none() {
                *a = b;
            }
        }
        for (a, b) in self.na_in_text.iter_mut().zip(later.na_in_text) {
            Note::merge(a, b);
        }
    }

    pub fn plans(&self) -> Vec<Plan> {
        self.text
            .iter()
            .map(|t| {
                if t.is_some() {
                    Plan::Str
                } else {
                    Plan::Numeric
                }
            })
            .collect()
    }
}

/// Samples up to `max_rows` records of `buf` (starting on physical line
/// `line`): a column is text if any sampled value is not a number (empty
/// fields and missing tokens aside), is an integer beyond 64 bits, or is
/// written with leading zeros; numeric otherwise.
pub(crate) fn infer(
    buf: &[u8],
    delim: u8,
    ncols: usize,
    max_rows: u64,
    line: u64,
    na: &NaSet,
) -> Result<Sampled, RowError> {
    let mut out = Sampled::new(ncols);
    let mut na_seen: Vec<Option<Note>> = vec![None; ncols];
    let mut t = Tokenizer::new(buf, delim, line);
    let mut fields = Vec::new();
    while out.rows < max_rows {
        let Some(l) = t.read_record(&mut fields)? else {
            break;
        };
        for (c, f) in fields.iter().take(ncols).enumerate() {
            let s = trim(t.get(*f));
            if s.is_empty() {
                continue;
            }
            if na.contains(s) {
                if !na.contains_text(s) {
                    Note::add(&mut na_seen[c], l, s);
                }
                continue;
            }
            if out.text[c].is_some() {
                continue;
            }
            let number = parse_decimal(s).is_some() || parse_float(s).is_some();
            out.text[c] = if !number {
                Some(TextWhy::NotANumber)
            } else if int_literal(s) && parse_decimal(s).is_none() {
                Some(TextWhy::BeyondI64(Note {
                    line: l,
                    example: show(s),
                    count: 1,
                }))
            } else if leading_zeros(s) {
                Some(TextWhy::LeadingZeros(Note {
                    line: l,
                    example: show(s),
                    count: 1,
                }))
            } else {
                None
            };
        }
        out.rows += 1;
    }
    for (c, n) in na_seen.into_iter().enumerate() {
        if out.text[c].is_some() {
            out.na_in_text[c] = n;
        }
    }
    Ok(out)
}

/// Builder for one column of a chunk (shared by the CSV and fixed-width
/// parsers).
pub(crate) struct ColParser {
    plan: Plan,
    buf: ColBuf,
    map: HashMap<String, u32>,
    /// Code of the last string appended: runs of one value (common in
    /// sorted or hierarchical files) skip the hash lookup.
    last: u32,
    /// Numbers written with leading zeros after the type was chosen.
    pub(crate) leading_zeros: Option<Note>,
    /// Missing tokens read as missing in a text column.
    pub(crate) na_text: Option<Note>,
}

impl ColParser {
    pub(crate) fn new(plan: Plan, cap: usize) -> Self {
        let buf = match plan {
            Plan::Numeric | Plan::IntOnly => ColBuf::Int {
                vals: Vec::with_capacity(cap),
                decimals: 0,
                nulls: 0,
                min: i64::MAX,
                max: i64::MIN,
            },
            Plan::Float => ColBuf::Float {
                vals: Vec::with_capacity(cap),
                nulls: 0,
                min: f64::INFINITY,
                max: f64::NEG_INFINITY,
            },
            Plan::Str => ColBuf::Str {
                codes: Vec::with_capacity(cap),
                dict: Vec::new(),
                nulls: 0,
            },
        };
        ColParser {
            plan,
            buf,
            map: HashMap::new(),
            last: u32::MAX,
            leading_zeros: None,
            na_text: None,
        }
    }

    /// The finished column.
    pub(crate) fn into_buf(self) -> ColBuf {
        self.buf
    }

    /// Appends system-missing.
    #[inline]
    pub(crate) fn push_null(&mut self) {
        match &mut self.buf {
            ColBuf::Int { vals, nulls, .. } => {
                vals.push(NULL_I64);
                *nulls += 1;
            }
            ColBuf::Float { vals, nulls, .. } => {
                vals.push(f64::NAN);
                *nulls += 1;
            }
            ColBuf::Str { codes, nulls, .. } => {
                codes.push(u32::MAX);
                *nulls += 1;
            }
        }
    }

    /// Appends the number `m / 10^d` to an integer column exactly, bringing
    /// the column and the value to the same number of decimals. Returns
    /// false (nothing appended) when that does not fit in an `i64`, or when
    /// the column is not an integer column.
    #[inline]
    pub(crate) fn push_scaled(&mut self, mut m: i64, d: u32) -> bool {
        let ColBuf::Int {
            vals,
            decimals,
            min,
            max,
            ..
        } = &mut self.buf
        else {
            return false;
        };
        let ok = if d > *decimals {
            rescale(vals, min, max, pow10(d - *decimals)).map(|_| *decimals = d)
        } else if d < *decimals {
            m.checked_mul(pow10(*decimals - d)).map(|x| m = x)
        } else {
            Some(())
        };
        if ok.is_some() && m != NULL_I64 {
            vals.push(m);
            *min = (*min).min(m);
            *max = (*max).max(m);
            true
        } else {
            false
        }
    }

    /// Appends a float, turning an integer column into a float one first.
    pub(crate) fn push_float(&mut self, v: f64) {
        self.promote_to_float();
        if let ColBuf::Float { vals, min, max, .. } = &mut self.buf {
            vals.push(v);
            *min = min.min(v);
            *max = max.max(v);
        }
    }

    /// Appends a non-empty string to a text column.
    #[inline]
    pub(crate) fn push_text(&mut self, s: &str) {
        let ColBuf::Str { codes, dict, .. } = &mut self.buf else {
            unreachable!("text value for a numeric column")
        };
        if let Some(d) = dict.get(self.last as usize) {
            if d == s {
                codes.push(self.last);
                return;
            }
        }
        let code = match self.map.get(s) {
            Some(&c) => c,
            None => {
                let c = dict.len() as u32;
                dict.push(s.to_string());
                self.map.insert(s.to_string(), c);
                c
            }
        };
        self.last = code;
        codes.push(code);
    }

    /// Appends one CSV field.
    #[inline]
    fn push(
        &mut self,
        raw: &[u8],
        line: u64,
        column: usize,
        o: &ParseOpts,
    ) -> Result<(), RowError> {
        match &self.buf {
            ColBuf::Int { .. } | ColBuf::Float { .. } => {
                let s = trim(raw);
                if s.is_empty() || o.na.contains(s) {
                    self.push_null();
                    return Ok(());
                }
                if leading_zeros(s) {
                    Note::add(&mut self.leading_zeros, line, s);
                }
                if matches!(self.buf, ColBuf::Int { .. }) {
                    if let Some((m, d)) = parse_decimal(s) {
                        if self.push_scaled(m, d) {
                            return Ok(());
                        }
                    }
                }
                if self.plan != Plan::Float && int_literal(s) && parse_decimal(s).is_none() {
                    // An integer beyond 64 bits would become an approximate
                    // float, merging distinct identifiers: refuse it.
                    return Err(value_error(
                        raw,
                        line,
                        column,
                        &format!(
                            "an integer between {} and {} (larger ones are not stored exactly; import the column as text with --type NAME=string, or as approximate numbers with --type NAME=float)",
                            i64::MIN + 1,
                            i64::MAX
                        ),
                    ));
                }
                if self.plan != Plan::IntOnly {
                    if let Some(v) = parse_float(s) {
                        self.push_float(v);
                        return Ok(());
                    }
                }
                Err(value_error(
                    raw,
                    line,
                    column,
                    &match self.plan {
                        Plan::IntOnly => "an integer or a decimal number".to_string(),
                        Plan::Float => "a number".to_string(),
                        _ => format!(
                            "a number (the column looked numeric in the {} records sampled to choose types; use --infer-rows all, or --type NAME=string to import it as text)",
                            o.sampled
                        ),
                    },
                ))
            }
            ColBuf::Str { .. } => {
                if raw.is_empty() {
                    self.push_null();
                    return Ok(());
                }
                if o.na.contains_text(raw) {
                    Note::add(&mut self.na_text, line, raw);
                    self.push_null();
                    return Ok(());
                }
                let s = o.encoding.decode(raw).ok_or_else(|| RowError::Value {
                    line,
                    column,
                    expected: "valid UTF-8 text (for a Latin-1 or Windows-1252 file give --encoding latin1 or --encoding windows-1252)".into(),
                    found: show(raw),
                })?;
                self.push_text(&s);
                Ok(())
            }
        }
    }

    fn promote_to_float(&mut self) {
        if let ColBuf::Int {
            vals,
            decimals,
            nulls,
            ..
        } = &self.buf
        {
            let scale = pow10(*decimals) as f64;
            let mut min = f64::INFINITY;
            let mut max = f64::NEG_INFINITY;
            let fv: Vec<f64> = vals
                .iter()
                .map(|&v| {
                    if v == NULL_I64 {
                        f64::NAN
                    } else {
                        let x = v as f64 / scale;
                        min = min.min(x);
                        max = max.max(x);
                        x
                    }
                })
                .collect();
            self.buf = ColBuf::Float {
                vals: fv,
                nulls: *nulls,
                min,
                max,
            };
        }
    }
}

fn value_error(raw: &[u8], line: u64, column: usize, expected: &str) -> RowError {
    let expected = if std::str::from_utf8(raw).is_err() && !expected.contains("UTF-8") {
        format!("{expected}; the field is not valid UTF-8")
    } else {
        expected.to_string()
    };
    RowError::Value {
        line,
        column,
        expected,
        found: show(raw),
    }
}

/// Multiplies every non-null value by `k`; `None` on overflow.
pub(crate) fn rescale(vals: &mut [i64], min: &mut i64, max: &mut i64, k: i64) -> Option<()> {
    if !vals.is_empty() {
        let lo = if *min == i64::MAX { 0 } else { *min };
        let hi = if *max == i64::MIN { 0 } else { *max };
        lo.checked_mul(k)?;
        hi.checked_mul(k)?;
        if lo.checked_mul(k)? == NULL_I64 {
            return None;
        }
    }
    for v in vals.iter_mut() {
        if *v != NULL_I64 {
            *v *= k;
        }
    }
    if *min != i64::MAX {
        *min *= k;
    }
    if *max != i64::MIN {
        *max *= k;
    }
    Some(())
}

/// The parsed contents of one chunk.
#[derive(Debug)]
pub(crate) struct Parsed {
    pub rows: u64,
    pub cols: Vec<ColBuf>,
    /// Per column: numbers written with leading zeros (numeric columns).
    pub leading_zeros: Vec<Option<Note>>,
    /// Per column: missing tokens read as missing (text columns).
    pub na_text: Vec<Option<Note>>,
}

/// `FastField::decimals` of an empty (system-missing) numeric field.
const NULL_DECIMALS: u32 = u32::MAX;

/// One field of a record read by [`fast_record`]: its bytes, and for a
/// numeric column the parsed `value / 10^decimals`.
#[derive(Debug, Clone, Copy, Default)]
struct FastField {
    start: u32,
    end: u32,
    value: i64,
    decimals: u32,
    /// Written with leading zeros (`01`).
    lz: bool,
}

/// Splits and parses one record starting at `pos` in a single pass, if it
/// is the common kind: one line, no quotes, no blanks around numbers, and
/// numeric columns holding `[-]digits[.digits]` (at most 18 digits) or
/// nothing. Returns where the next record starts, or `None` (nothing
/// consumed) for anything else, which the tokenizer then reads.
#[inline]
fn fast_record(
    buf: &[u8],
    pos: usize,
    delim: u8,
    numeric: &[bool],
    out: &mut [FastField],
) -> Option<usize> {
    let n = numeric.len();
    let mut i = pos;
    if buf.get(i).is_none_or(|&b| b == b'\n' || b == b'\r') {
        return None;
    }
    for (c, (&num, f)) in numeric.iter().zip(out.iter_mut()).enumerate() {
        let s = i;
        if num {
            let neg = buf.get(i) == Some(&b'-');
            i += neg as usize;
            f.lz = buf.get(i) == Some(&b'0') && buf.get(i + 1).is_some_and(u8::is_ascii_digit);
            let mut m: i64 = 0;
            let mut digits = 0u32;
            let mut decimals = 0u32;
            let mut dot = false;
            while let Some(&b) = buf.get(i) {
                let d = b.wrapping_sub(b'0');
                if d < 10 {
                    m = m.wrapping_mul(10).wrapping_add(d as i64);
                    digits += 1;
                    decimals += dot as u32;
                } else if b == b'.' && !dot {
                    dot = true;
                } else {
                    break;
                }
                i += 1;
            }
            if digits > 18 || decimals > MAX_DECIMALS {
                return None;
            }
            if digits == 0 {
                if i != s {
                    return None;
                }
                f.decimals = NULL_DECIMALS;
            } else {
                f.value = if neg { -m } else { m };
                f.decimals = decimals;
            }
        } else {
            while let Some(&b) = buf.get(i) {
                if b == delim || b == b'\n' || b == b'\r' {
                    break;
                }
                if b == b'"' {
                    return None;
                }
                i += 1;
            }
        }
        f.start = s as u32;
        f.end = i as u32;
        let last = c + 1 == n;
        match buf.get(i) {
            Some(&b) if b == delim && !last => i += 1,
            Some(b'\n') if last => return Some(i + 1),
            Some(b'\r') if last && buf.get(i + 1) == Some(&b'\n') => return Some(i + 2),
            None if last => return Some(i),
            _ => return None,
        }
    }
    None
}

/// Parses every record of `buf` (which starts at a record boundary on
/// physical line `line`).
pub(crate) fn parse_chunk(
    buf: &[u8],
    line: u64,
    plans: &[Plan],
    delim: u8,
    o: &ParseOpts,
) -> Result<Parsed, RowError> {
    let ncols = plans.len();
    let cap = buf.len() / (ncols * 3).max(1) + 16;
    let mut cols: Vec<ColParser> = plans.iter().map(|&p| ColParser::new(p, cap)).collect();
    let mut t = Tokenizer::new(buf, delim, line);
    let mut fields: Vec<Field> = Vec::with_capacity(ncols);
    let mut rows = 0;
    let numeric: Vec<bool> = plans
        .iter()
        .map(|p| matches!(p, Plan::Numeric | Plan::IntOnly))
        .collect();
    let mut fast = vec![FastField::default(); ncols];
    let na_numbers = o.na.has_numbers();
    // A delimiter that can be part of a number leaves everything to the
    // tokenizer.
    let fast_ok = !(delim.is_ascii_digit() || b"-.\"\r\n".contains(&delim));
    loop {
        // The common record (plain numbers and unquoted text, one line) is
        // split and parsed in one pass; anything else goes through the
        // tokenizer and the general field parser.
        if let Some(end) = fast_record(buf, t.pos(), delim, &numeric, &mut fast).filter(|_| fast_ok)
        {
            let line = t.line;
            for (c, (col, f)) in cols.iter_mut().zip(&fast).enumerate() {
                let raw = &buf[f.start as usize..f.end as usize];
                let done = match (f.decimals, &mut col.buf) {
                    (d, ColBuf::Int { .. })
                        if na_numbers && d != NULL_DECIMALS && o.na.contains(raw) =>
                    {
                        col.push_null();
                        true
                    }
                    (NULL_DECIMALS, ColBuf::Int { vals, nulls, .. }) => {
                        vals.push(NULL_I64);
                        *nulls += 1;
                        true
                    }
                    (
                        d,
                        ColBuf::Int {
                            vals,
                            decimals,
                            min,
                            max,
                            ..
                        },
                    ) if d == *decimals && f.value != NULL_I64 => {
                        vals.push(f.value);
                        *min = (*min).min(f.value);
                        *max = (*max).max(f.value);
                        true
                    }
                    _ => false,
                };
                if !done {
                    col.push(raw, line, c, o)?;
                } else if f.lz {
                    Note::add(&mut col.leading_zeros, line, raw);
                }
            }
            t.skip_to(end);
            rows += 1;
            continue;
        }
        let Some(line) = t.read_record(&mut fields)? else {
            break;
        };
        if fields.len() != ncols {
            return Err(RowError::Ragged {
                line,
                found: fields.len(),
            });
        }
        for (c, (col, f)) in cols.iter_mut().zip(fields.iter()).enumerate() {
            col.push(t.get(*f), line, c, o)?;
        }
        rows += 1;
    }
    let leading_zeros = cols.iter_mut().map(|c| c.leading_zeros.take()).collect();
    let na_text = cols.iter_mut().map(|c| c.na_text.take()).collect();
    Ok(Parsed {
        rows,
        cols: cols.into_iter().map(ColParser::into_buf).collect(),
        leading_zeros,
        na_text,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn opts() -> ParseOpts {
        ParseOpts {
            na: NaSet::new(None, None),
            encoding: Encoding::Utf8,
            sampled: 0,
        }
    }

    #[test]
    fn decimals() {
        assert_eq!(parse_decimal(b"123.45"), Some((12345, 2)));
        assert_eq!(parse_decimal(b"-7"), Some((-7, 0)));
        assert_eq!(parse_decimal(b"+0.5"), Some((5, 1)));
        assert_eq!(parse_decimal(b"1e5"), None);
        assert_eq!(parse_decimal(b"."), None);
        assert_eq!(parse_decimal(b"1.2.3"), None);
        assert_eq!(parse_float(b"1e5"), Some(100000.0));
        assert_eq!(parse_float(b"inf"), None);
    }

    #[test]
    fn mixed_decimals_rescale_within_chunk() {
        let p = parse_chunk(b"1\n2.5\n\n3.25\n,\n", 1, &[Plan::Numeric], b',', &opts());
        // The lone "," line has two fields for a one-column file.
        assert!(matches!(p, Err(RowError::Ragged { line: 5, found: 2 })));
        let p = parse_chunk(b"1\n2.5\n\n3.25\n \n", 1, &[Plan::Numeric], b',', &opts()).unwrap();
        match &p.cols[0] {
            ColBuf::Int {
                vals,
                decimals,
                nulls,
                min,
                max,
            } => {
                assert_eq!(vals, &[100, 250, 325, NULL_I64]);
                assert_eq!((*decimals, *nulls, *min, *max), (2, 1, 100, 325));
            }
            other => panic!("{other:?}"),
        }
    }

    fn ints(c: &ColBuf) -> (Vec<i64>, u32, u64) {
        match c {
            ColBuf::Int {
                vals,
                decimals,
                nulls,
                ..
            } => (vals.clone(), *decimals, *nulls),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn one_pass_records_and_fallbacks_agree_with_hand_values() {
        // Plain records, then each kind the one-pass reader hands over to
        // the tokenizer: blanks, quotes, CRLF, a blank line, signs, a
        // decimal that rescales the column, an exponent, 19 digits, and a
        // last record with no newline.
        let text = b"1,2.5,ab\n-3,,cd\n 4,5 ,\"e,f\"\r\n\n+6,7.25,g\r\n8,1e1,h\n1234567890123456789,0,i\n9,10,j";
        let plans = [Plan::Numeric, Plan::Numeric, Plan::Str];
        let p = parse_chunk(text, 1, &plans, b',', &opts()).unwrap();
        assert_eq!(p.rows, 7);
        // 19 digits: read by the general parser, still an exact integer.
        assert_eq!(
            ints(&p.cols[0]),
            (vec![1, -3, 4, 6, 8, 1234567890123456789, 9], 0, 0)
        );
        match &p.cols[1] {
            ColBuf::Float { vals, nulls, .. } => {
                assert_eq!(vals[0], 2.5);
                assert!(vals[1].is_nan());
                assert_eq!(&vals[2..], &[5.0, 7.25, 10.0, 0.0, 10.0]);
                assert_eq!(*nulls, 1);
            }
            other => panic!("{other:?}"),
        }
        match &p.cols[2] {
            ColBuf::Str { codes, dict, .. } => {
                let v: Vec<&str> = codes.iter().map(|&c| dict[c as usize].as_str()).collect();
                assert_eq!(v, ["ab", "cd", "e,f", "g", "h", "i", "j"]);
            }
            other => panic!("{other:?}"),
        }
        // Integer columns stay exact; a later decimal rescales earlier rows.
        let p = parse_chunk(b"5,-12\n,3.5\n-0,7\n", 1, &plans[..2], b',', &opts()).unwrap();
        assert_eq!(ints(&p.cols[0]), (vec![5, NULL_I64, 0], 0, 1));
        assert_eq!(ints(&p.cols[1]), (vec![-120, 35, 70], 1, 0));
        // Lines are still counted for errors after one-pass records.
        assert!(matches!(
            parse_chunk(b"1,2\n3,4\n5\n", 1, &plans[..2], b',', &opts()),
            Err(RowError::Ragged { line: 3, found: 1 })
        ));
        assert!(matches!(
            parse_chunk(b"1,2\n3,4,5\n", 1, &plans[..2], b',', &opts()),
            Err(RowError::Ragged { line: 2, found: 3 })
        ));
        assert!(matches!(
            parse_chunk(b"1,2\n3,x\n", 1, &plans[..2], b',', &opts()),
            Err(RowError::Value {
                line: 2,
                column: 1,
                ..
            })
        ));
        // A delimiter that can occur in numbers: the tokenizer does it all.
        let p = parse_chunk(
            b"1.5.2\n",
            1,
            &[Plan::Numeric, Plan::Numeric, Plan::Numeric],
            b'.',
            &opts(),
        )
        .unwrap();
        assert_eq!(ints(&p.cols[1]), (vec![5], 0, 0));
    }

    #[test]
    fn exponent_turns_column_float() {
        let p = parse_chunk(b"1\n2e3\n", 1, &[Plan::Numeric], b',', &opts()).unwrap();
        assert!(matches!(&p.cols[0], ColBuf::Float { vals, .. } if vals == &[1.0, 2000.0]));
    }
}
