//! Turning a chunk of fixed-width records into typed column buffers
//! (parser threads).

use super::layout::{FieldError, Kind, Layout, RecordError};
use crate::core::column::{pow10, ColParser, FieldNote, Parsed, Plan};
use crate::core::number::{parse_number, trim, trim_blanks, Num};
use crate::ddi::{Charset, NumberStyle};
use crate::error::show;

/// Decodes a text field (already trimmed) in the file's charset.
fn decode(raw: &[u8], charset: Charset) -> Option<std::borrow::Cow<'_, str>> {
    match std::str::from_utf8(raw) {
        Ok(s) if charset == Charset::Utf8 || raw.is_ascii() => Some(s.into()),
        _ if charset == Charset::Latin1 => Some(raw.iter().map(|&b| b as char).collect()),
        _ => None,
    }
}

/// Parses the records of one chunk (which starts at a record boundary on
/// line `first_line`) into one column buffer per slot.
pub(crate) fn parse_fixed_chunk(
    buf: &[u8],
    first_line: u64,
    layout: &Layout,
) -> std::result::Result<Parsed, RecordError> {
    let record_len = layout.slots.iter().map(|s| s.end).max().unwrap_or(1).max(1);
    let cap = buf.len() / record_len + 16;
    let mut cols: Vec<ColParser> = layout
        .slots
        .iter()
        .map(|s| ColParser::new(if s.text { Plan::Str } else { Plan::Numeric }, cap))
        .collect();
    if layout.lines.len() > 1 {
        let rows = parse_joined(buf, first_line, layout, &mut cols)?;
        return Ok(parsed(cols, rows, None));
    }
    let mut rows = 0u64;
    let mut line_no = first_line;
    let mut parent: Option<(&[u8], u64)> = None;
    let mut skipped = None;
    let mut pos = 0;
    while pos < buf.len() {
        let end = memchr::memchr(b'\n', &buf[pos..]).map_or(buf.len(), |p| pos + p);
        let mut line = &buf[pos..end];
        pos = end + 1;
        let this = line_no;
        line_no += 1;
        if let [rest @ .., b'\r'] = line {
            line = rest;
        }
        if line.is_empty() {
            continue;
        }
        if let Some(h) = &layout.hier {
            if line.len() < h.id_end {
                // A line of blanks is no record (as an empty one).
                if trim_blanks(line).is_empty() {
                    continue;
                }
                return Err(RecordError {
                    line: this,
                    kind: FieldError::ShortId { len: line.len() },
                });
            }
            match h.kind(line) {
                Kind::Row => {}
                Kind::Parent => {
                    parent = Some((line, this));
                    continue;
                }
                Kind::Other => continue,
                Kind::Unlisted if trim_blanks(line).is_empty() => continue,
                Kind::Unlisted if h.skip_unlisted => {
                    FieldNote::add(&mut skipped, this, trim(&line[h.id_start..h.id_end]));
                    continue;
                }
                Kind::Unlisted => {
                    return Err(RecordError {
                        line: this,
                        kind: FieldError::RecordType {
                            found: show(trim(&line[h.id_start..h.id_end])),
                        },
                    });
                }
            }
        }
        push_record(layout, &mut cols, line, this, parent)?;
        rows += 1;
    }
    Ok(parsed(cols, rows, skipped))
}

fn parsed(mut cols: Vec<ColParser>, rows: u64, skipped: Option<FieldNote>) -> Parsed {
    Parsed {
        skipped,
        rows,
        leading_zeros: vec![None; cols.len()],
        na_text: cols.iter_mut().map(|c| c.na_text.take()).collect(),
        cols: cols.into_iter().map(ColParser::into_buf).collect(),
    }
}

/// Parses records of several lines each ([`Layout::lines`]): each line cut
/// or padded with blanks to its width, the lines joined; an empty line is
/// a line of the record. A file may end with blank lines after its last
/// record; a record it leaves unfinished is an error.
fn parse_joined(
    buf: &[u8],
    first_line: u64,
    layout: &Layout,
    cols: &mut [ColParser],
) -> std::result::Result<u64, RecordError> {
    let mut joined = Vec::with_capacity(layout.lines.iter().sum());
    let (mut rows, mut line_no, mut pos) = (0u64, first_line, 0);
    while pos < buf.len() {
        joined.clear();
        let this = line_no;
        let mut blank = true;
        for (k, &width) in layout.lines.iter().enumerate() {
            if pos >= buf.len() {
                if blank {
                    return Ok(rows);
                }
                return Err(RecordError {
                    line: this,
                    kind: FieldError::Partial { read: k },
                });
            }
            let end = memchr::memchr(b'\n', &buf[pos..]).map_or(buf.len(), |p| pos + p);
            let mut line = &buf[pos..end];
            pos = end + 1;
            line_no += 1;
            if let [rest @ .., b'\r'] = line {
                line = rest;
            }
            blank &= trim_blanks(line).is_empty();
            let take = line.len().min(width);
            joined.extend_from_slice(&line[..take]);
            joined.resize(joined.len() + width - take, b' ');
        }
        push_record(layout, cols, &joined, this, None)?;
        rows += 1;
    }
    Ok(rows)
}

/// Parses one record (`line`, from line `this`) into `cols`; `parent` is
/// the household record of a hierarchical file's person record.
fn push_record(
    layout: &Layout,
    cols: &mut [ColParser],
    line: &[u8],
    this: u64,
    parent: Option<(&[u8], u64)>,
) -> std::result::Result<(), RecordError> {
    for (i, (slot, col)) in layout.slots.iter().zip(cols.iter_mut()).enumerate() {
        let (rec, at) = if slot.parent {
            match parent {
                Some(p) => p,
                None => {
                    return Err(RecordError {
                        line: this,
                        kind: FieldError::Orphan,
                    })
                }
            }
        } else {
            // A record of several lines: the line the field is on.
            (line, this + slot.line as u64)
        };
        if rec.len() < slot.end && layout.lenient {
            // Past the record's end: blank, as the packages read it.
            let field = &rec[slot.start.min(rec.len())..];
            if trim_blanks(field).is_empty() {
                col.push_null();
                continue;
            }
        }
        if rec.len() < slot.end && !layout.lenient {
            return Err(RecordError {
                line: at,
                kind: FieldError::Short {
                    slot: i,
                    len: rec.len(),
                },
            });
        }
        let field = &rec[slot.start.min(rec.len())..slot.end.min(rec.len())];
        if slot.text {
            let t = trim_blanks(field);
            if t.is_empty() {
                col.push_null();
                continue;
            }
            match decode(t, layout.charset) {
                Some(s) => col.push_text(&s),
                None => {
                    return Err(RecordError {
                        line: at,
                        kind: FieldError::Value {
                            slot: i,
                            expected: "valid UTF-8 text (the codebook's charset)",
                            found: show(field),
                        },
                    })
                }
            }
            continue;
        }
        // A division (`V / 100` in a setup) applies to every value,
        // after the format's own implied decimals.
        let k = slot.divide;
        // Grouping and currency signs (`COMMA10.2`): dropped, the decimal
        // comma made a point.
        let mut plain: [u8; 64];
        let field = match slot.style {
            NumberStyle::Plain => field,
            style => {
                plain = [0u8; 64];
                let (group, point) = match style {
                    NumberStyle::DecimalComma => (b'.', b','),
                    _ => (b',', b'.'),
                };
                let mut n = 0;
                for &b in field.iter().take(plain.len()) {
                    match b {
                        b'$' | b'%' => {}
                        b if b == group => {}
                        b if b == point => {
                            plain[n] = b'.';
                            n += 1;
                        }
                        b => {
                            plain[n] = b;
                            n += 1;
                        }
                    }
                }
                &plain[..n]
            }
        };
        match parse_number(field, slot.decimals - k) {
            Num::Null => col.push_null(),
            Num::Scaled(m, d) => {
                if !col.push_scaled(m, d + k) {
                    col.push_float(if k == 0 {
                        m as f64 / pow10(d) as f64
                    } else {
                        m as f64 / 10f64.powi((d + k) as i32)
                    });
                }
            }
            Num::Big(v) if k == 0 => col.push_float(v),
            Num::Big(v) => col.push_float(v / 10f64.powi(k as i32)),
            Num::BigInt => {
                return Err(RecordError {
                    line: at,
                    kind: FieldError::Value {
                        slot: i,
                        expected: "an integer within ±9223372036854775807 (larger ones are not stored exactly; an identifier this long should be an alphabetic variable in the codebook)",
                        found: show(field),
                    },
                })
            }
            Num::Bad if layout.lenient && trim_blanks(field) == b"." => col.push_null(),
            Num::Bad
                if layout.lenient
                    && std::str::from_utf8(trim_blanks(field))
                        .ok()
                        .and_then(|t| t.parse::<f64>().ok())
                        .is_some_and(f64::is_finite) =>
            {
                // E notation (`1e3`): the number it writes.
                let t = std::str::from_utf8(trim_blanks(field)).unwrap_or("0");
                let v: f64 = t.parse().unwrap_or(f64::NAN);
                col.push_float(v / 10f64.powi(k as i32));
            }
            Num::Bad if layout.lenient => {
                // As Stata, SPSS and SAS read it: missing, and counted
                // (`na_text` holds a fixed import's non-numbers).
                FieldNote::add(&mut col.na_text, at, trim_blanks(field));
                col.push_null();
            }
            Num::Bad => {
                return Err(RecordError {
                    line: at,
                    kind: FieldError::Value {
                        slot: i,
                        expected: "a number (digits, optionally signed)",
                        found: show(field),
                    },
                })
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::column::{ColBuf, NULL_I64};
    use crate::ddi::Codebook;
    use std::path::Path;

    const RECT: &str = r#"<codeBook><fileDscr><fileTxt><fileType charset="ISO-8859-1"/></fileTxt></fileDscr><dataDscr>
      <var name="YEAR"><location StartPos="1" EndPos="4"/></var>
      <var name="WT" dcml="2"><location StartPos="5" EndPos="10"/></var>
      <var name="INC"><location StartPos="11" EndPos="15"/></var>
      <var name="SUF"><location StartPos="16" EndPos="17"/><varFormat type="character"/></var>
    </dataDscr></codeBook>"#;

    fn layout(xml: &str, rt: Option<&str>) -> Layout {
        let cb = Codebook::parse(Path::new("t.xml"), xml).unwrap();
        Layout::new(&cb, rt).unwrap()
    }

    fn ints(c: &ColBuf) -> (Vec<i64>, u32) {
        match c {
            ColBuf::Int { vals, decimals, .. } => (vals.clone(), *decimals),
            other => panic!("{other:?}"),
        }
    }

    fn strs(c: &ColBuf) -> Vec<Option<String>> {
        match c {
            ColBuf::Str { codes, dict, .. } => codes
                .iter()
                .map(|&k| (k != u32::MAX).then(|| dict[k as usize].clone()))
                .collect(),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn numbers() {
        assert_eq!(parse_number(b"000123", 2), Num::Scaled(123, 2));
        assert_eq!(parse_number(b"-0002005", 0), Num::Scaled(-2005, 0));
        assert_eq!(parse_number(b"  42 ", 0), Num::Scaled(42, 0));
        assert_eq!(parse_number(b"12.5", 3), Num::Scaled(125, 1));
        assert_eq!(parse_number(b"    ", 1), Num::Null);
        assert_eq!(parse_number(b"1 2", 0), Num::Bad);
        assert_eq!(parse_number(b"12a", 0), Num::Bad);
        assert_eq!(parse_number(b"-", 0), Num::Bad);
        assert_eq!(parse_number(b".", 0), Num::Bad);
        assert_eq!(
            parse_number(b"12345678901234567890", 2),
            Num::Big(123456789012345678.9)
        );
    }

    #[test]
    fn rectangular_chunk() {
        let l = layout(RECT, None);
        let data = b"1962001234-00050A\r\n196300000199999 A\n\n1964      00000  \n";
        let p = parse_fixed_chunk(data, 1, &l).unwrap();
        assert_eq!(p.rows, 3);
        assert_eq!(ints(&p.cols[0]), (vec![1962, 1963, 1964], 0));
        assert_eq!(ints(&p.cols[1]), (vec![1234, 1, NULL_I64], 2));
        assert_eq!(ints(&p.cols[2]), (vec![-5, 99999, 0], 0));
        assert_eq!(
            strs(&p.cols[3]),
            vec![Some("0A".into()), Some("A".into()), None]
        );
    }

    #[test]
    fn latin1_text_is_decoded() {
        let l = layout(RECT, None);
        let p = parse_fixed_chunk(b"196200123400000\xe9\xe8\n", 1, &l).unwrap();
        assert_eq!(strs(&p.cols[3]), vec![Some("éè".into())]);
    }

    #[test]
    fn chunk_errors_name_record_and_variable() {
        let l = layout(RECT, None);
        let e = parse_fixed_chunk(b"1962001234-00050A\n19620012x4-00050A\n", 10, &l).unwrap_err();
        assert!(
            matches!(e.kind, FieldError::Value { slot: 1, .. }) && e.line == 11,
            "{e:?}"
        );
        let msg = e.into_error(Path::new("d.dat"), &l).to_string();
        assert!(
            msg.starts_with("d.dat: line 11, variable WT (columns 5-10): expected a number"),
            "{msg}"
        );
        let e = parse_fixed_chunk(b"1962001234-00050A\n1962001234\n", 1, &l).unwrap_err();
        let msg = e.into_error(Path::new("d.dat"), &l).to_string();
        assert_eq!(
            msg,
            "d.dat: line 2 is 10 characters long, but the codebook puts variable INC in columns 11-15"
        );
    }

    const HIER: &str = r#"<codeBook><fileDscr><fileTxt><fileStrc type="hierarchical">
        <recGrp keyvar="SERIAL" recidvar="RECTYPE" rectype="P"/>
        <recGrp recidvar="RECTYPE" rectype="H"/></fileStrc></fileTxt></fileDscr><dataDscr>
      <var name="RECTYPE" rectype="H P"><location StartPos="1" EndPos="1"/><varFormat type="character"/></var>
      <var name="SERIAL" rectype="H P"><location StartPos="2" EndPos="4"/></var>
      <var name="STATE" rectype="H"><location StartPos="5" EndPos="6"/></var>
      <var name="AGE" rectype="P"><location StartPos="5" EndPos="6"/></var>
      <var name="SEX" rectype="P"><location StartPos="7" EndPos="7"/></var>
    </dataDscr></codeBook>"#;

    const HDATA: &[u8] = b"H00127\nP001341\nP001072\nH00255\nH00306\nP003771\n";

    #[test]
    fn hierarchical_persons_carry_their_household() {
        let l = layout(HIER, None);
        let names: Vec<&str> = l.slots.iter().map(|s| s.name.as_str()).collect();
        assert_eq!(names, ["RECTYPE", "SERIAL", "STATE", "AGE", "SEX"]);
        let p = parse_fixed_chunk(HDATA, 1, &l).unwrap();
        assert_eq!(p.rows, 3);
        assert_eq!(ints(&p.cols[1]).0, [1, 1, 3]);
        assert_eq!(ints(&p.cols[2]).0, [27, 27, 6]);
        assert_eq!(ints(&p.cols[3]).0, [34, 7, 77]);
        assert_eq!(ints(&p.cols[4]).0, [1, 2, 1]);
    }

    #[test]
    fn hierarchical_households() {
        let l = layout(HIER, Some("h"));
        let names: Vec<&str> = l.slots.iter().map(|s| s.name.as_str()).collect();
        assert_eq!(names, ["RECTYPE", "SERIAL", "STATE"]);
        let p = parse_fixed_chunk(HDATA, 1, &l).unwrap();
        assert_eq!(p.rows, 3);
        assert_eq!(ints(&p.cols[2]).0, [27, 55, 6]);
    }

    #[test]
    fn hierarchical_cut_keeps_households_whole() {
        let l = layout(HIER, None);
        // The last H line starts at 30 ("H00306"); the one before it at 23.
        assert_eq!(l.cut(HDATA), Some(30));
        assert_eq!(l.cut(&HDATA[..30]), Some(23));
        assert_eq!(l.cut(&HDATA[..20]), None);
        let households = layout(HIER, Some("H"));
        assert_eq!(households.cut(&HDATA[..20]), Some(15));
    }

    #[test]
    fn hierarchical_errors() {
        let l = layout(HIER, None);
        let e = parse_fixed_chunk(b"H00127\nX001341\n", 5, &l).unwrap_err();
        let msg = e.into_error(Path::new("h.dat"), &l).to_string();
        assert_eq!(
            msg,
            "h.dat: line 6: record type \"X\" (variable RECTYPE) is not one of the record types described (P, H)"
        );
        let e = parse_fixed_chunk(b"P001341\n", 1, &l).unwrap_err();
        assert!(matches!(e.kind, FieldError::Orphan) && e.line == 1);
        assert!(Layout::new(
            &Codebook::parse(Path::new("t.xml"), HIER).unwrap(),
            Some("Q")
        )
        .is_err());
    }
}
