//! Turning a chunk of CSV text into typed column buffers (parser threads).

use crate::error::{show, RowError};
use crate::tokenizer::{Field, Tokenizer};
use std::collections::HashMap;

/// Marks system-missing in [`ColBuf::Int`] values.
pub(crate) const NULL_I64: i64 = i64::MIN;
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

/// Decides each column's plan from a sample chunk: text if any sampled
/// value is not a number, numeric otherwise.
pub(crate) fn infer(
    buf: &[u8],
    delim: u8,
    ncols: usize,
    max_rows: usize,
) -> Result<Vec<Plan>, RowError> {
    let mut is_text = vec![false; ncols];
    let mut t = Tokenizer::new(buf, delim, 1);
    let mut fields = Vec::new();
    let mut n = 0;
    while n < max_rows {
        let Some(_) = t.read_record(&mut fields)? else {
            break;
        };
        for (c, f) in fields.iter().take(ncols).enumerate() {
            if is_text[c] {
                continue;
            }
            let s = trim(t.get(*f));
            if !s.is_empty() && parse_decimal(s).is_none() && parse_float(s).is_none() {
                is_text[c] = true;
            }
        }
        n += 1;
    }
    Ok(is_text
        .into_iter()
        .map(|t| if t { Plan::Str } else { Plan::Numeric })
        .collect())
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
    fn push(&mut self, raw: &[u8], line: u64, column: usize) -> Result<(), RowError> {
        match &self.buf {
            ColBuf::Int { .. } => {
                let s = trim(raw);
                if s.is_empty() {
                    self.push_null();
                    return Ok(());
                }
                if let Some((m, d)) = parse_decimal(s) {
                    if self.push_scaled(m, d) {
                        return Ok(());
                    }
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
                    if self.plan == Plan::IntOnly {
                        "an integer or a decimal number"
                    } else {
                        "a number (the column looked numeric in the first rows; use --type NAME=string to import it as text)"
                    },
                ))
            }
            ColBuf::Float { .. } => {
                let s = trim(raw);
                if s.is_empty() {
                    self.push_null();
                    return Ok(());
                }
                match parse_float(s) {
                    Some(v) => {
                        self.push_float(v);
                        Ok(())
                    }
                    None => Err(value_error(raw, line, column, "a number")),
                }
            }
            ColBuf::Str { .. } => {
                if raw.is_empty() {
                    self.push_null();
                    return Ok(());
                }
                let s = std::str::from_utf8(raw).map_err(|_| RowError::Value {
                    line,
                    column,
                    expected: "valid UTF-8 text".into(),
                    found: show(raw),
                })?;
                self.push_text(s);
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
    let expected = if std::str::from_utf8(raw).is_err() {
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
}

/// Parses every record of `buf` (which starts at a record boundary on
/// physical line `line`).
pub(crate) fn parse_chunk(
    buf: &[u8],
    line: u64,
    plans: &[Plan],
    delim: u8,
) -> Result<Parsed, RowError> {
    let ncols = plans.len();
    let cap = buf.len() / (ncols * 3).max(1) + 16;
    let mut cols: Vec<ColParser> = plans.iter().map(|&p| ColParser::new(p, cap)).collect();
    let mut t = Tokenizer::new(buf, delim, line);
    let mut fields: Vec<Field> = Vec::with_capacity(ncols);
    let mut rows = 0;
    while let Some(line) = t.read_record(&mut fields)? {
        if fields.len() != ncols {
            return Err(RowError::Ragged {
                line,
                found: fields.len(),
            });
        }
        for (c, (col, f)) in cols.iter_mut().zip(fields.iter()).enumerate() {
            col.push(t.get(*f), line, c)?;
        }
        rows += 1;
    }
    Ok(Parsed {
        rows,
        cols: cols.into_iter().map(ColParser::into_buf).collect(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

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
        let p = parse_chunk(b"1\n2.5\n\n3.25\n,\n", 1, &[Plan::Numeric], b',');
        // The lone "," line has two fields for a one-column file.
        assert!(matches!(p, Err(RowError::Ragged { line: 5, found: 2 })));
        let p = parse_chunk(b"1\n2.5\n\n3.25\n \n", 1, &[Plan::Numeric], b',').unwrap();
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

    #[test]
    fn exponent_turns_column_float() {
        let p = parse_chunk(b"1\n2e3\n", 1, &[Plan::Numeric], b',').unwrap();
        assert!(matches!(&p.cols[0], ColBuf::Float { vals, .. } if vals == &[1.0, 2000.0]));
    }
}
