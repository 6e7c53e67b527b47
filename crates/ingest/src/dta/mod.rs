//! Stata `.dta` files, releases 104 to 119 (Stata 4 to 18/19: the binary
//! layout before 117, the tagged one from 117, either byte order), read
//! as a stream of fixed-length records decoded on every core into the
//! column sinks ([`ColumnarImport`]).
//!
//! - **Numbers**: `byte`, `int` and `long` are integers; `float` and
//!   `double` become (scaled) integers where every value of a batch is an
//!   exact decimal of at most 6 digits, as CSV numbers do, else doubles
//!   (a `float` is widened exactly, as Stata computes with it).
//! - **Missing values**: `.` is system-missing. The extended missing
//!   values `.a`–`.z` (release 113 on) are user-missing codes labelled
//!   `.a`…: in `byte`, `int` and `long` columns Stata's own codes (102–127,
//!   32742–32767, 2147483622–2147483647), in `float` and `double` columns
//!   Stata's `double` codes (8.99e307 and up), the codes a SAS transport
//!   file's `.A`–`.Z` get.
//! - **Value labels** (release 108 on) are kept on every variable that
//!   names a set, including the labels of `.a`–`.z`; variable labels are
//!   kept, the dataset label becomes a note.
//! - **Dates**: `%td` (days) and `%tc` (milliseconds since 1960) become ISO
//!   8601 text, as the Parquet and SAS imports' dates do; `%tC` (with leap
//!   seconds) and the weekly, monthly, quarterly, half-yearly and yearly
//!   formats stay numbers.
//! - **Text**: `str1`–`str2045` up to the first NUL, and `strL`s (read
//!   from the file when a record names them, never held whole); empty
//!   text is missing (Stata's missing string). Decoded as UTF-8 from
//!   release 118, Windows-1252 before, unless an encoding is given.
//!
//! Counts in the header are checked against the file's size before
//! anything is allocated for them; a damaged or truncated file is an
//! [`Error::Format`] naming the byte offset (and the record and
//! variable).

mod header;
mod tables;
pub(crate) mod write;

pub(crate) use header::is_dta;

use crate::columnar::records::{decode_records, per_batch, Batch, Layout};
use crate::columnar::{
    distinct_names, label_key, number_chunk, refuse_text_options, stored_code, Cell, Chunk,
    ColumnarImport, KeyChunk, TextChunk,
};
use crate::core::dates::{date_key, ms_key, show_date, show_ms, tag_key, tagged_code, Shown};
use crate::core::pipeline::ImportSummary;
use crate::error::{Error, Result};
use crate::options::ImportOptions;
use header::{Dta, Ty, Var};
use std::collections::BTreeSet;
use std::path::Path;
use tables::StrL;

/// How a column is decoded.
#[derive(Debug, Clone, Copy, PartialEq)]
enum How {
    Number,
    /// `%td`: days since 1960-01-01, as ISO text.
    Date,
    /// `%tc`: milliseconds since 1960-01-01 00:00, as ISO text.
    DateTime,
    Text,
}

fn how(v: &Var) -> How {
    let f = v.format.trim_start_matches('%').trim_start_matches('-');
    match v.ty {
        Ty::Str(_) | Ty::StrL => How::Text,
        // `%d…` is the date format of releases before 10 (114).
        _ if f.starts_with("td") || (f.starts_with('d') && !f.starts_with("d.")) => How::Date,
        _ if f.starts_with("tc") => How::DateTime,
        _ => How::Number,
    }
}

/// Imports the Stata file `input` into a dataset at `target` (replacing
/// an existing one only with `force`).
pub fn import_dta(
    input: &Path,
    target: &Path,
    force: bool,
    opts: &ImportOptions,
) -> Result<ImportSummary> {
    refuse_text_options(input, opts, "a Stata file")?;
    let d = header::read(input, opts.encoding)?;
    let mut c = header::Cursor::open(input)?;
    // The tables after the records first, so that a damaged one fails
    // before any record is written.
    let strls = tables::strls(&mut c, &d)?;
    let sets = tables::value_labels(&mut c, &d)?;
    let hows: Vec<How> = d.vars.iter().map(how).collect();
    let given: Vec<String> = d.vars.iter().map(|v| v.name.clone()).collect();
    let (names, renamed) = distinct_names(&given);
    let text: Vec<bool> = hows.iter().map(|h| *h != How::Number).collect();
    let mut imp = ColumnarImport::create(input, target, force, &names, &text, opts.plain)?;
    let file = std::fs::File::open(input).map_err(|e| Error::Input {
        path: input.to_path_buf(),
        reason: format!("cannot open: {e}"),
    })?;
    let mut data = std::fs::File::open(input).map_err(|e| Error::Input {
        path: input.to_path_buf(),
        reason: format!("cannot open: {e}"),
    })?;
    std::io::Seek::seek(&mut data, std::io::SeekFrom::Start(d.data_start)).map_err(|e| {
        Error::Input {
            path: input.to_path_buf(),
            reason: format!("cannot read: {e}"),
        }
    })?;
    let dec = Decoder {
        guess: opts.encoding.is_none() && d.release < 118,
        path: input,
        d: &d,
        hows: &hows,
        strls: &strls,
        file: &file,
    };
    let lay = Layout {
        start: d.data_start,
        row_len: d.row_len.max(1),
        records: Some(if d.row_len == 0 { 0 } else { d.records }),
        per_batch: per_batch(d.row_len, d.vars.len()),
    };
    let mut seen = Seen::new(d.vars.len());
    decode_records(
        &mut imp,
        input,
        std::io::BufReader::with_capacity(1 << 20, data),
        &lay,
        opts.threads.max(1),
        |b| dec.decode(b),
        |s: Seen| seen.merge(s),
        opts.progress.as_ref(),
    )?;
    if d.row_len == 0 && d.records > 0 {
        return Err(Error::Format {
            path: input.to_path_buf(),
            offset: 0,
            reason: format!(
                "the header announces {} records but no variable: the file is damaged",
                d.records
            ),
        });
    }
    let mut notes = renamed;
    if seen.utf8.0 > 0 && seen.utf8.1 == 0 {
        notes.push(format!(
            "the text of this release {} file was read as Windows-1252 (what Stata wrote before release 118), but its {} texts beyond ASCII are all valid UTF-8: if another program wrote it as UTF-8, give the encoding utf-8",
            d.release, seen.utf8.0
        ));
    }
    imp.set_about(Some(&d.label), None);
    for (v, &n) in d.vars.iter().zip(&seen.outside) {
        if n > 0 {
            notes.push(format!(
                "variable {} (format {}): {n} values outside the years 1 to 9999 are left missing",
                v.name, v.format
            ));
        }
    }
    let mut missing_sets = BTreeSet::new();
    match &sets {
        None => {
            if d.vars.iter().any(|v| !v.labels.is_empty()) {
                notes.push(format!(
                    "the value labels of a release {} file are not read (microtab reads them from release 108, Stata 6)",
                    d.release
                ));
            }
        }
        Some(sets) => {
            for v in &d.vars {
                if !v.labels.is_empty() && !sets.contains_key(&v.labels) {
                    missing_sets.insert((v.labels.clone(), v.name.clone()));
                }
            }
        }
    }
    for (set, var) in &missing_sets {
        notes.push(format!(
            "variable {var} names the value labels {set}, which the file does not hold"
        ));
    }
    let vars = &d.vars;
    imp.finish_noting(
        None,
        |i, var, dict, notes| {
            let v = &vars[i];
            var.label = (!v.label.is_empty()).then(|| v.label.clone());
            let mut tags = seen.tags[i].clone();
            let set = sets.as_ref().and_then(|s| s.get(&v.labels));
            let letter = |k: u64| format!(".{}", (b'a' + k as u8 - 1) as char);
            // Labels, by the values as the column shows them (a float
            // column stored with implied decimals shows 10 as 10.0).
            let mut left_out = Vec::new();
            for (val, lab) in set.into_iter().flatten() {
                let tag = tag_of_label(*val);
                if let Some(k) = tag {
                    tags.insert(k);
                }
                let key = match (hows[i], tag) {
                    (How::Number, Some(k)) => label_key(var, code(v.ty, k)),
                    (How::Number, None) => label_key(var, *val as f64),
                    (_, Some(k)) => Some(letter(k)),
                    (_, None) => None,
                };
                match key {
                    Some(key) => {
                        var.value_labels.insert(key, lab.clone());
                    }
                    None => left_out.push(match tag {
                        Some(k) => letter(k),
                        None => val.to_string(),
                    }),
                }
            }
            for &k in &tags {
                let tag = letter(k);
                let stored = match hows[i] {
                    How::Number => stored_code(var, code(v.ty, k)),
                    _ => dict.binary_search(&tag).ok().map(|p| p as f64),
                };
                match stored {
                    Some(c) => {
                        var.missing_codes.push(c);
                        if hows[i] == How::Number {
                            var.value_labels
                                .entry(microtab_store::codec::display_code(var, c))
                                .or_insert(tag);
                        }
                    }
                    // A labelled .a no record holds, in a column of exact
                    // decimals (which cannot hold Stata's code): only its
                    // label is lost.
                    None if hows[i] == How::Number => left_out.push(tag),
                    None => {}
                }
            }
            left_out.dedup();
            if !left_out.is_empty() {
                let why = if hows[i] == How::Number {
                    "no record holds them and the column stores exact decimals"
                } else {
                    "the values are dates, stored as text"
                };
                notes.push(
                    format!(
                        "variable {}: the labels of {} (set {}) are left out: {why}",
                        v.name,
                        left_out.join(", "),
                        v.labels
                    )
                    .into(),
                );
            }
            Ok(())
        },
        None,
        notes,
    )
}

/// The tag (1 = `.a` … 26 = `.z`) of a value-label key, which Stata
/// writes as a `long` code.
fn tag_of_label(val: i32) -> Option<u64> {
    const DOT: i32 = 2_147_483_621;
    (val > DOT).then(|| (val - DOT) as u64)
}

/// The stored code of tag `k` in a column of type `ty`.
fn code(ty: Ty, k: u64) -> f64 {
    match ty {
        Ty::I8 => (101 + k) as f64,
        Ty::I16 => (32_741 + k) as f64,
        Ty::I32 => (2_147_483_621 + k) as f64,
        _ => tagged_code(k),
    }
}

/// What a batch saw beside its values.
struct Seen {
    /// Per variable, the tags (1–26) of its extended missing values.
    tags: Vec<BTreeSet<u64>>,
    /// Per date variable, the values outside the years 1 to 9999.
    outside: Vec<u64>,
    /// Distinct texts beyond ASCII that are and are not valid UTF-8 (when
    /// the encoding is a guess).
    utf8: (u64, u64),
}

impl Seen {
    fn new(n: usize) -> Seen {
        Seen {
            tags: vec![BTreeSet::new(); n],
            outside: vec![0; n],
            utf8: (0, 0),
        }
    }

    fn merge(&mut self, o: Seen) {
        for (a, b) in self.tags.iter_mut().zip(o.tags) {
            a.extend(b);
        }
        for (a, b) in self.outside.iter_mut().zip(o.outside) {
            *a += b;
        }
        self.utf8.0 += o.utf8.0;
        self.utf8.1 += o.utf8.1;
    }
}

/// A value as stored: a number, system-missing, or an extended missing
/// value (its tag, 1–26).
#[derive(Debug, Clone, Copy, PartialEq)]
enum Val {
    Int(i64),
    Float(f64),
    Missing,
    Tagged(u64),
}

struct Decoder<'a> {
    /// The encoding is the release's default, not given.
    guess: bool,
    path: &'a Path,
    d: &'a Dta,
    hows: &'a [How],
    strls: &'a [StrL],
    file: &'a std::fs::File,
}

impl Decoder<'_> {
    /// The numeric field of type `ty` at `b`.
    fn number(&self, ty: Ty, b: &[u8]) -> Val {
        let d = self.d;
        let tagged = d.tagged();
        // Integers: above the largest value are `.` then `.a`–`.z` (113
        // on), or all `.` before.
        let int = |v: i64, max: i64, old_max: i64| {
            if tagged {
                if v <= max {
                    Val::Int(v)
                } else if v == max + 1 {
                    Val::Missing
                } else {
                    let k = (v - max - 1) as u64;
                    if k <= 26 {
                        Val::Tagged(k)
                    } else {
                        Val::Missing
                    }
                }
            } else if v <= old_max {
                Val::Int(v)
            } else {
                Val::Missing
            }
        };
        match ty {
            Ty::I8 => int(b[0] as i8 as i64, 100, 126),
            Ty::I16 => int(d.u16(b) as i16 as i64, 32_740, 32_766),
            Ty::I32 => int(d.u32(b) as i32 as i64, 2_147_483_620, 2_147_483_646),
            Ty::F32 => {
                let bits = d.u32(b);
                let x = f32::from_bits(bits);
                if bits < 0x8000_0000 && bits > 0x7EFF_FFFF {
                    if tagged && bits > 0x7F00_0000 {
                        let k = ((bits - 0x7F00_0000) >> 11) as u64;
                        if (1..=26).contains(&k) {
                            return Val::Tagged(k);
                        }
                    }
                    Val::Missing
                } else if !x.is_finite() {
                    Val::Missing
                } else {
                    Val::Float(x as f64)
                }
            }
            Ty::F64 => {
                let bits = d.u64(b);
                let x = f64::from_bits(bits);
                if bits < 0x8000_0000_0000_0000 && bits > 0x7FDF_FFFF_FFFF_FFFF {
                    if tagged && bits > 0x7FE0_0000_0000_0000 {
                        let k = (bits - 0x7FE0_0000_0000_0000) >> 40;
                        if (1..=26).contains(&k) {
                            return Val::Tagged(k);
                        }
                    }
                    Val::Missing
                } else if d.release <= 105 && bits == 0x54C0_0000_0000_0000 {
                    // Releases 104 and 105 wrote `.` as 2^333.
                    Val::Missing
                } else if !x.is_finite() {
                    Val::Missing
                } else {
                    Val::Float(x)
                }
            }
            Ty::Str(_) | Ty::StrL => unreachable!("text is not a number"),
        }
    }

    /// The text of the field of `v` at `b` (record `rec`, file offset
    /// `at`); `None` when empty.
    fn text(
        &self,
        v: &Var,
        b: &[u8],
        (rec, at): (u64, u64),
        utf8: &mut (u64, u64),
    ) -> Result<Option<String>> {
        let what = || format!("record {rec}, variable {}", v.name);
        let s = match v.ty {
            Ty::StrL => {
                let (sv, so) = tables::strl_ref(b, self.d.release, self.d.big);
                if sv == 0 && so == 0 {
                    return Ok(None);
                }
                let Ok(k) = self.strls.binary_search_by_key(&(sv, so), |s| (s.v, s.o)) else {
                    return Err(Error::Format {
                        path: self.path.to_path_buf(),
                        offset: at,
                        reason: format!(
                            "{}: the strL ({sv}, {so}) it names is not in the file's strL table: the file is damaged",
                            what()
                        ),
                    });
                };
                let s = self.strls[k];
                let mut raw = vec![0u8; s.len as usize];
                microtab_io::sys::read_exact_at(self.file, &mut raw, s.at).map_err(|e| {
                    Error::Input {
                        path: self.path.to_path_buf(),
                        reason: format!("cannot read: {e}"),
                    }
                })?;
                if s.nul && raw.last() == Some(&0) {
                    raw.pop();
                }
                if !s.nul && self.d.enc.decode(&raw).is_none() {
                    return Err(Error::Format {
                        path: self.path.to_path_buf(),
                        offset: s.at,
                        reason: format!(
                            "{}: the strL ({sv}, {so}) holds binary data (type 129), not text in the file's encoding",
                            what()
                        ),
                    });
                }
                self.utf8_like(&raw, utf8);
                header::decode(&raw, self.d.enc, what, self.path, s.at)?
            }
            _ => {
                let end = b.iter().position(|&x| x == 0).unwrap_or(b.len());
                self.utf8_like(&b[..end], utf8);
                header::decode(&b[..end], self.d.enc, what, self.path, at)?
            }
        };
        Ok((!s.is_empty()).then_some(s))
    }

    /// Counts, for a file read in its release's default Windows-1252, the
    /// texts beyond ASCII that are (`.0`) and are not (`.1`) valid UTF-8.
    fn utf8_like(&self, raw: &[u8], utf8: &mut (u64, u64)) {
        if self.guess && raw.iter().any(|&b| b >= 0x80) {
            if std::str::from_utf8(raw).is_ok() {
                utf8.0 += 1;
            } else {
                utf8.1 += 1;
            }
        }
    }

    /// One chunk per variable of the records of `batch`.
    fn decode(&self, batch: &Batch) -> Result<(Vec<Chunk>, Seen)> {
        let d = self.d;
        let row = d.row_len;
        let n = batch.bytes.len() / row;
        let rows = &batch.bytes;
        let mut seen = Seen::new(d.vars.len());
        let mut out = Vec::with_capacity(d.vars.len());
        for (i, v) in d.vars.iter().enumerate() {
            let w = v.ty.width();
            let field = |r: usize| &rows[r * row + v.pos..r * row + v.pos + w];
            out.push(match self.hows[i] {
                How::Text => {
                    let mut t = TextChunk::default();
                    let mut utf8 = (0, 0);
                    t.push_fields((0..n).map(field), |r, f| {
                        let rec = batch.first + r as u64 + 1;
                        let at = batch.at + (r * row + v.pos) as u64;
                        self.text(v, f, (rec, at), &mut utf8)
                    })?;
                    seen.utf8.0 += utf8.0;
                    seen.utf8.1 += utf8.1;
                    t.chunk()
                }
                How::Number => {
                    let vals: Vec<Val> = (0..n).map(|r| self.number(v.ty, field(r))).collect();
                    for x in &vals {
                        if let Val::Tagged(k) = x {
                            seen.tags[i].insert(*k);
                        }
                    }
                    numbers(v.ty, &vals)
                }
                h => {
                    // Each distinct value shown once for the import;
                    // values outside the years 1 to 9999 counted.
                    let mut t = KeyChunk::new(if h == How::Date { show_date } else { show_ms }, n);
                    for r in 0..n {
                        let key = |x: f64| match h {
                            How::Date => date_key(x, Shown::Date),
                            _ => ms_key(x),
                        };
                        t.push(match self.number(v.ty, field(r)) {
                            Val::Missing => None,
                            Val::Tagged(k) => {
                                seen.tags[i].insert(k);
                                Some(tag_key(b'a' + k as u8 - 1))
                            }
                            Val::Int(x) => {
                                let k = key(x as f64);
                                seen.outside[i] += u64::from(k.is_none());
                                k
                            }
                            Val::Float(x) => {
                                let k = key(x);
                                seen.outside[i] += u64::from(k.is_none());
                                k
                            }
                        });
                    }
                    t.chunk()
                }
            });
        }
        Ok((out, seen))
    }
}

/// A batch of a numeric column: integers as they are; `float` and
/// `double` values as scaled integers when every one is an exact decimal
/// of at most 6 digits, else doubles; extended missing values as their
/// codes.
fn numbers(ty: Ty, vals: &[Val]) -> Chunk {
    if matches!(ty, Ty::I8 | Ty::I16 | Ty::I32) {
        return Chunk::Int {
            vals: vals
                .iter()
                .map(|v| match *v {
                    Val::Int(x) => Some(x),
                    Val::Tagged(k) => Some(code(ty, k) as i64),
                    _ => None,
                })
                .collect(),
            decimals: 0,
        };
    }
    let cells = vals.iter().map(|v| match *v {
        Val::Float(x) => Cell::Value(x),
        Val::Int(x) => Cell::Value(x as f64),
        Val::Missing => Cell::Missing,
        Val::Tagged(k) => Cell::Code(code(ty, k)),
    });
    number_chunk(cells, vals.len())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dta(release: u8, big: bool) -> Dta {
        Dta {
            release,
            big,
            records: 0,
            label: String::new(),
            vars: Vec::new(),
            row_len: 0,
            data_start: 0,
            strls: None,
            value_labels: 0,
            enc: crate::options::Encoding::Utf8,
        }
    }

    fn number(d: &Dta, ty: Ty, b: &[u8]) -> Val {
        let file = std::fs::File::open("/dev/null").unwrap();
        let dec = Decoder {
            guess: false,
            path: Path::new("x.dta"),
            d,
            hows: &[],
            strls: &[],
            file: &file,
        };
        dec.number(ty, b)
    }

    /// Stata's missing values by release (the dta documentation's tables):
    /// `.` just above the largest value, `.a`–`.z` after it from 113.
    #[test]
    fn missing_values_by_release() {
        let new = dta(118, false);
        assert_eq!(number(&new, Ty::I8, &[100]), Val::Int(100));
        assert_eq!(number(&new, Ty::I8, &[101]), Val::Missing);
        assert_eq!(number(&new, Ty::I8, &[102]), Val::Tagged(1));
        assert_eq!(number(&new, Ty::I8, &[127]), Val::Tagged(26));
        assert_eq!(number(&new, Ty::I8, &[0x81]), Val::Int(-127));
        assert_eq!(
            number(&new, Ty::I16, &32_741i16.to_le_bytes()),
            Val::Missing
        );
        assert_eq!(
            number(&new, Ty::I16, &32_767i16.to_le_bytes()),
            Val::Tagged(26)
        );
        assert_eq!(
            number(&new, Ty::I32, &2_147_483_622i32.to_le_bytes()),
            Val::Tagged(1)
        );
        assert_eq!(number(&new, Ty::I32, &(-5i32).to_le_bytes()), Val::Int(-5));
        assert_eq!(
            number(&new, Ty::F32, &0x7F00_0000u32.to_le_bytes()),
            Val::Missing
        );
        assert_eq!(
            number(&new, Ty::F32, &0x7F00_0800u32.to_le_bytes()),
            Val::Tagged(1)
        );
        assert_eq!(
            number(&new, Ty::F32, &1.5f32.to_le_bytes()),
            Val::Float(1.5)
        );
        let dot = 0x7FE0_0000_0000_0000u64;
        assert_eq!(number(&new, Ty::F64, &dot.to_le_bytes()), Val::Missing);
        assert_eq!(
            number(&new, Ty::F64, &(dot + (26 << 40)).to_le_bytes()),
            Val::Tagged(26)
        );
        assert_eq!(number(&new, Ty::F64, &f64::MAX.to_le_bytes()), Val::Missing);
        assert_eq!(
            number(&new, Ty::F64, &(-f64::MAX).to_le_bytes()),
            Val::Float(-f64::MAX)
        );
        assert_eq!(
            number(&new, Ty::F64, &(-0.25f64).to_le_bytes()),
            Val::Float(-0.25)
        );
        // Before 113: everything above the largest value is `.`; 101 is a
        // byte value.
        let old = dta(110, true);
        assert_eq!(number(&old, Ty::I8, &[101]), Val::Int(101));
        assert_eq!(number(&old, Ty::I8, &[127]), Val::Missing);
        assert_eq!(
            number(&old, Ty::I16, &32_767i16.to_be_bytes()),
            Val::Missing
        );
        assert_eq!(
            number(&old, Ty::I16, &32_741i16.to_be_bytes()),
            Val::Int(32_741)
        );
        assert_eq!(
            number(&old, Ty::F64, &(dot + (1 << 40)).to_be_bytes()),
            Val::Missing
        );
        // Releases 104 and 105 wrote `.` in doubles as 2^333.
        let v104 = dta(104, false);
        let magic = 2f64.powi(333);
        assert_eq!(number(&v104, Ty::F64, &magic.to_le_bytes()), Val::Missing);
        assert_eq!(
            number(&dta(106, false), Ty::F64, &magic.to_le_bytes()),
            Val::Float(magic)
        );
    }

    #[test]
    fn codes_and_labels_of_tagged_values() {
        assert_eq!(tag_of_label(2_147_483_622), Some(1));
        assert_eq!(tag_of_label(2_147_483_647), Some(26));
        assert_eq!(tag_of_label(2_147_483_621), None);
        assert_eq!(tag_of_label(-3), None);
        assert_eq!(code(Ty::I8, 1), 102.0);
        assert_eq!(code(Ty::I16, 26), 32_767.0);
        assert_eq!(code(Ty::F32, 1).to_bits(), 0x7FE0_0100_0000_0000);
    }

    #[test]
    fn strl_references_by_release() {
        // (v, o) = (2, 3): 117 u32 + u32; 118 u16 + u48; 119 u24 + u40.
        let le117 = [2, 0, 0, 0, 3, 0, 0, 0];
        assert_eq!(tables::strl_ref(&le117, 117, false), (2, 3));
        let le118 = [2, 0, 3, 0, 0, 0, 0, 0];
        assert_eq!(tables::strl_ref(&le118, 118, false), (2, 3));
        let be118 = [0, 2, 0, 0, 0, 0, 0, 3];
        assert_eq!(tables::strl_ref(&be118, 118, true), (2, 3));
        let le119 = [2, 0, 0, 3, 0, 0, 0, 0];
        assert_eq!(tables::strl_ref(&le119, 119, false), (2, 3));
        let be119 = [0, 0, 2, 0, 0, 0, 0, 3];
        assert_eq!(tables::strl_ref(&be119, 119, true), (2, 3));
    }

    #[test]
    fn recognised_by_first_bytes() {
        assert!(is_dta(b"<stata_dta><header>"));
        assert!(is_dta(&[114, 2, 1, 0, 3, 0]));
        assert!(is_dta(&[104, 1, 1, 0]));
        assert!(!is_dta(&[117, 2, 1, 0])); // 117 on are tagged
        assert!(!is_dta(&[114, 3, 1, 0]));
        assert!(!is_dta(b"id,x\n1,2\n"));
    }

    #[test]
    fn dates_and_formats() {
        let var = |ty, f: &str| Var {
            name: "v".into(),
            ty,
            format: f.into(),
            labels: String::new(),
            label: String::new(),
            pos: 0,
        };
        assert_eq!(how(&var(Ty::I32, "%td")), How::Date);
        assert_eq!(how(&var(Ty::I32, "%tdCCYY-NN-DD")), How::Date);
        assert_eq!(how(&var(Ty::I32, "%d")), How::Date);
        assert_eq!(how(&var(Ty::F64, "%tc")), How::DateTime);
        assert_eq!(how(&var(Ty::F64, "%tcHH:MM:SS")), How::DateTime);
        assert_eq!(how(&var(Ty::F64, "%tC")), How::Number);
        assert_eq!(how(&var(Ty::I16, "%tm")), How::Number);
        assert_eq!(how(&var(Ty::F64, "%10.0g")), How::Number);
        assert_eq!(how(&var(Ty::Str(5), "%td")), How::Text);
    }
}
