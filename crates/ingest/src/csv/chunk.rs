//! Turning a chunk of CSV text into typed column buffers (parser
//! threads): a one-pass reader for the common record, the tokenizer and
//! the general field parser for the rest.

use super::error::RowError;
use super::tokenizer::{Field, Tokenizer};
use crate::core::column::{ColBuf, ColParser, FieldNote, Parsed, Plan, NULL_I64};
use crate::core::na::NaSet;
use crate::core::number::{
    comma_to_point, int_literal, leading_zeros, parse_decimal, parse_float, trim, MAX_DECIMALS,
};
use crate::error::show;
use crate::error::Fix;
use crate::options::Encoding;

/// How chunks are parsed (shared by the parser threads).
pub(crate) struct ParseOpts {
    pub na: NaSet,
    pub encoding: Encoding,
    /// Records sampled to choose the types (for messages).
    pub sampled: u64,
    /// Numbers are written with a decimal comma (`1,5`).
    pub comma: bool,
}

/// Appends one CSV field to `col`.
#[inline]
fn push_field(
    col: &mut ColParser,
    raw: &[u8],
    line: u64,
    column: usize,
    o: &ParseOpts,
) -> Result<(), RowError> {
    match &col.buf {
        ColBuf::Int { .. } | ColBuf::Float { .. } => {
            let s = trim(raw);
            if s.is_empty() || o.na.contains(s) {
                col.push_null();
                return Ok(());
            }
            if leading_zeros(s) {
                FieldNote::add(&mut col.leading_zeros, line, s);
            }
            let point = if o.comma {
                comma_to_point(s)
            } else {
                Some(s.into())
            };
            // A point where the comma is the decimal mark: no number.
            let s: &[u8] = point.as_deref().unwrap_or(b"?");
            if matches!(col.buf, ColBuf::Int { .. }) {
                if let Some((m, d)) = parse_decimal(s) {
                    if col.push_scaled(m, d) {
                        return Ok(());
                    }
                }
            }
            if col.plan != Plan::Float && int_literal(s) && parse_decimal(s).is_none() {
                // An integer beyond 64 bits would become an approximate
                // float, merging distinct identifiers: refuse it.
                return Err(value_error(
                    raw,
                    line,
                    column,
                    format!(
                        "an integer between {} and {} (larger ones are not stored exactly)",
                        i64::MIN + 1,
                        i64::MAX
                    ),
                    Fix::TextOrFloat,
                ));
            }
            if col.plan != Plan::IntOnly {
                if let Some(v) = parse_float(s) {
                    col.push_float(v);
                    return Ok(());
                }
            }
            let (expected, fix) = match col.plan {
                Plan::IntOnly => ("an integer or a decimal number".to_string(), Fix::None),
                Plan::Float => ("a number".to_string(), Fix::None),
                _ => (
                    format!(
                        "a number (the column looked numeric in the {} records sampled to choose types)",
                        o.sampled
                    ),
                    Fix::SampleAllOrText,
                ),
            };
            Err(value_error(raw, line, column, expected, fix))
        }
        ColBuf::Str { .. } | ColBuf::Keyed { .. } => {
            if raw.is_empty() {
                col.push_null();
                return Ok(());
            }
            if o.na.contains_text(raw) {
                FieldNote::add(&mut col.na_text, line, raw);
                col.push_null();
                return Ok(());
            }
            let s = o.encoding.decode(raw).ok_or_else(|| RowError::Value {
                line,
                column,
                expected: format!("valid {} text", o.encoding.name()),
                found: show(raw),
                fix: Fix::Encoding,
            })?;
            col.push_text(&s);
            Ok(())
        }
    }
}

fn value_error(raw: &[u8], line: u64, column: usize, expected: String, fix: Fix) -> RowError {
    let expected = if std::str::from_utf8(raw).is_err() {
        format!("{expected}; the field is not valid UTF-8")
    } else {
        expected
    };
    RowError::Value {
        line,
        column,
        expected,
        found: show(raw),
        fix,
    }
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
    point: u8,
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
                } else if b == point && !dot {
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
    let point = if o.comma { b',' } else { b'.' };
    let fast_ok = !(delim.is_ascii_digit() || b"-.\"\r\n".contains(&delim) || delim == point);
    loop {
        // The common record (plain numbers and unquoted text, one line) is
        // split and parsed in one pass; anything else goes through the
        // tokenizer and the general field parser.
        if let Some(end) =
            fast_record(buf, t.pos(), delim, point, &numeric, &mut fast).filter(|_| fast_ok)
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
                    push_field(col, raw, line, c, o)?;
                } else if f.lz {
                    FieldNote::add(&mut col.leading_zeros, line, raw);
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
            push_field(col, t.get(*f), line, c, o)?;
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
        skipped: None,
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
            comma: false,
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
