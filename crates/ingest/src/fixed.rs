//! Fixed-width import driven by a DDI codebook (IPUMS extracts).
//!
//! Every record is one line; a variable is the bytes in its columns. Numeric
//! fields are digits with an optional sign and leading/trailing blanks and
//! *implied* decimals: `000123` with `dcml=2` is stored as the integer 123
//! with `decimals` 2 — exactly, never through a float. An explicit decimal
//! point in a field overrides the implied decimals (the usual convention of
//! fixed-format readers). Blank fields are system-missing. Alphabetic
//! variables are trimmed of blanks (as pandas/ipumspy read them) and
//! dictionary-encoded.
//!
//! ## Hierarchical files
//!
//! A hierarchical IPUMS file interleaves record types — a household record
//! (`RECTYPE` `H`) followed by its person records (`P`) — and each variable
//! lives on one record type, at columns that other types reuse for other
//! variables. The import **rectangularises** it: one row per record of the
//! chosen type (default `P`), carrying that record's variables plus those of
//! the household record it follows. This is IPUMS's own "rectangular"
//! layout and what every crosstab of person and household characteristics
//! needs, since microtab queries one table. Household-level analysis (one
//! row per household, e.g. weighted by `HWTSUPP`, including vacant units
//! without persons) imports the same file with the household type chosen
//! ([`FixedOptions::record_type`] = `H`) into a second dataset; `SERIAL`
//! links the two. A record type the codebook does not list is an error
//! naming the record.
//!
//! Chunks for the parser threads are cut just before a household record, so
//! every chunk holds whole households and persons never lose their
//! household to a chunk boundary.
//!
//! One file (~870 lines before its tests): the layout a codebook gives, the
//! record-type dispatch of hierarchical files, the field parser and the
//! codebook-to-manifest description are one reading of a fixed-width file.

use crate::ddi::{Charset, Codebook, DdiVariable};
use crate::error::show;
use crate::parse::{pow10, trim, ColParser, Parsed, Plan};
use crate::pipeline::{self, Feed, ImportSummary, Progress, Stages};
use crate::sink::Sink;
use crate::{source, Error, Result};
use microtab_store::codec::format_float as float_text;
use microtab_store::{ColumnData, DatasetWriter, Kind, Variable};
use std::path::Path;

/// Most implied decimals kept as a scaled integer (10^18 fits in an i64).
const MAX_FIXED_DECIMALS: u32 = 18;

/// How to import a fixed-width file.
#[derive(Clone)]
pub struct FixedOptions {
    /// Bytes of text per parse task.
    pub chunk_size: usize,
    /// Parser threads (default: all cores).
    pub threads: usize,
    /// Hierarchical files: the record type that becomes a row. Default:
    /// the person type (`P`, or the type labelled as person records) when
    /// the file holds records of it; else the one type below the top that
    /// has records, or the top type when only it has; several others with
    /// records and none of them persons is an
    /// [`Error::RecordTypeChoice`].
    pub record_type: Option<String>,
    /// Extra user-missing codes by variable name, as written in the data
    /// (added to those the codebook declares).
    pub missing: Vec<(String, Vec<String>)>,
    /// Called as chunks are written.
    pub progress: Option<Progress>,
    /// Block size for writing column files (from `microtab tune`).
    pub io: microtab_io::IoConfig,
    /// Store every column as a plain array (no bit-packing).
    pub plain: bool,
}

impl Default for FixedOptions {
    fn default() -> Self {
        FixedOptions {
            chunk_size: 4 << 20,
            threads: std::thread::available_parallelism()
                .map(|n| n.get())
                .unwrap_or(2),
            record_type: None,
            missing: Vec::new(),
            progress: None,
            io: microtab_io::IoConfig::default(),
            plain: false,
        }
    }
}

/// One output variable's place in a record.
#[derive(Debug, Clone)]
struct Slot {
    /// Index into the codebook's variables.
    var: usize,
    name: String,
    /// 0-based first byte.
    start: usize,
    /// 0-based end (exclusive).
    end: usize,
    decimals: u32,
    text: bool,
    /// Read from the parent (household) record rather than the row's own.
    parent: bool,
}

/// Record-type handling of a hierarchical file.
#[derive(Debug, Clone)]
struct Hier {
    id_name: String,
    id_start: usize,
    id_end: usize,
    /// Records of this type become rows.
    row_type: Vec<u8>,
    /// Records of this type supply `parent` slots (`None` when the rows are
    /// the top-level records themselves).
    parent_type: Option<Vec<u8>>,
    /// Every record type the codebook lists.
    known: Vec<Vec<u8>>,
}

/// Where every output variable is in a record, derived from a codebook.
#[derive(Debug, Clone)]
pub(crate) struct Layout {
    slots: Vec<Slot>,
    charset: Charset,
    hier: Option<Hier>,
}

impl Layout {
    fn new(cb: &Codebook, record_type: Option<&str>) -> Result<Layout> {
        let cb_err = |reason: String| Error::Codebook {
            path: cb.path.clone(),
            reason,
        };
        let slot = |i: usize, v: &DdiVariable, parent: bool| Slot {
            var: i,
            name: v.name.clone(),
            start: v.start - 1,
            end: v.end,
            decimals: v.decimals.min(MAX_FIXED_DECIMALS),
            text: v.text,
            parent,
        };
        if !cb.hierarchical {
            if let Some(t) = record_type {
                return Err(cb_err(format!(
                    "record type {t:?} asked for, but the codebook describes a rectangular file"
                )));
            }
            return Ok(Layout {
                slots: cb
                    .variables
                    .iter()
                    .enumerate()
                    .map(|(i, v)| slot(i, v, false))
                    .collect(),
                charset: cb.charset,
                hier: None,
            });
        }
        let known: Vec<String> = cb.record_groups.iter().map(|g| g.rectype.clone()).collect();
        let top = cb.top_record_type().unwrap_or("H").to_string();
        let row = match record_type {
            Some(t) => known
                .iter()
                .find(|k| k.eq_ignore_ascii_case(t))
                .cloned()
                .ok_or_else(|| {
                    cb_err(format!(
                        "record type {t:?} is not one the codebook lists ({})",
                        known.join(", ")
                    ))
                })?,
            None => known
                .iter()
                .find(|k| k.as_str() == "P")
                .or_else(|| known.iter().find(|k| **k != top))
                .unwrap_or(&top)
                .clone(),
        };
        let id = cb.record_id_variable().expect("checked when parsed");
        let on = |v: &DdiVariable, t: &str| {
            v.record_types.is_empty() || v.record_types.iter().any(|r| r == t)
        };
        let mut slots = Vec::new();
        for (i, v) in cb.variables.iter().enumerate() {
            if on(v, &row) {
                slots.push(slot(i, v, false));
            } else if row != top && on(v, &top) {
                slots.push(slot(i, v, true));
            }
        }
        Ok(Layout {
            slots,
            charset: cb.charset,
            hier: Some(Hier {
                id_name: id.name.clone(),
                id_start: id.start - 1,
                id_end: id.end,
                row_type: row.clone().into_bytes(),
                parent_type: (row != top).then(|| top.into_bytes()),
                known: known.into_iter().map(String::into_bytes).collect(),
            }),
        })
    }

    /// The record type that becomes a row (hierarchical files).
    fn row_type(&self) -> Option<String> {
        self.hier
            .as_ref()
            .map(|h| String::from_utf8_lossy(&h.row_type).into_owned())
    }

    /// Where a chunk may end: after the last complete line, or — when rows
    /// need their parent record — just before the last parent record.
    fn cut(&self, buf: &[u8]) -> Option<usize> {
        let last_nl = memchr::memrchr(b'\n', buf)?;
        let Some(h) = &self.hier else {
            return Some(last_nl + 1);
        };
        let Some(parent) = &h.parent_type else {
            return Some(last_nl + 1);
        };
        // Line starts from the last complete line backwards.
        let mut start = last_nl + 1;
        loop {
            if start > 0 && start + h.id_end <= buf.len() {
                let line_end =
                    memchr::memchr(b'\n', &buf[start..]).map_or(buf.len(), |p| start + p);
                if start + h.id_end <= line_end
                    && trim(&buf[start + h.id_start..start + h.id_end]) == parent.as_slice()
                {
                    return Some(start);
                }
            }
            if start == 0 {
                return None;
            }
            start = memchr::memrchr(b'\n', &buf[..start - 1]).map_or(0, |p| p + 1);
        }
    }
}

/// What went wrong in a record, before the file name is attached.
#[derive(Debug)]
pub(crate) enum FieldError {
    Short {
        slot: usize,
        len: usize,
    },
    ShortId {
        len: usize,
    },
    Value {
        slot: usize,
        expected: &'static str,
        found: String,
    },
    RecordType {
        found: String,
    },
    Orphan,
}

/// A [`FieldError`] at a record (line).
#[derive(Debug)]
pub(crate) struct RecordError {
    pub line: u64,
    pub kind: FieldError,
}

impl RecordError {
    fn into_error(self, path: &Path, layout: &Layout) -> Error {
        let path = path.to_path_buf();
        let record = self.line;
        let slot = |i: usize| &layout.slots[i];
        match self.kind {
            FieldError::Short { slot: i, len } => Error::ShortRecord {
                path,
                record,
                len,
                name: slot(i).name.clone(),
                start: slot(i).start + 1,
                end: slot(i).end,
            },
            FieldError::ShortId { len } => {
                let h = layout.hier.as_ref().expect("hierarchical");
                Error::ShortRecord {
                    path,
                    record,
                    len,
                    name: h.id_name.clone(),
                    start: h.id_start + 1,
                    end: h.id_end,
                }
            }
            FieldError::Value {
                slot: i,
                expected,
                found,
            } => Error::Field {
                path,
                record,
                name: slot(i).name.clone(),
                start: slot(i).start + 1,
                end: slot(i).end,
                expected: expected.to_string(),
                found,
            },
            FieldError::RecordType { found } => {
                let h = layout.hier.as_ref().expect("hierarchical");
                Error::RecordType {
                    path,
                    record,
                    name: h.id_name.clone(),
                    found,
                    known: h
                        .known
                        .iter()
                        .map(|k| String::from_utf8_lossy(k).into_owned())
                        .collect::<Vec<_>>()
                        .join(", "),
                }
            }
            FieldError::Orphan => {
                let h = layout.hier.as_ref().expect("hierarchical");
                Error::Orphan {
                    path,
                    record,
                    child: String::from_utf8_lossy(&h.row_type).into_owned(),
                    parent: String::from_utf8_lossy(h.parent_type.as_deref().unwrap_or(b""))
                        .into_owned(),
                }
            }
        }
    }
}

/// A numeric field's value.
#[derive(Debug, PartialEq)]
enum Num {
    Null,
    /// `m / 10^d`.
    Scaled(i64, u32),
    /// Too many digits for an `i64`, with decimals: approximate.
    Big(f64),
    /// An integer (no decimals) beyond the `i64` range: not stored
    /// exactly, so refused rather than merged with its neighbours.
    BigInt,
    Bad,
}

fn trim_blanks(s: &[u8]) -> &[u8] {
    let mut a = 0;
    let mut b = s.len();
    while a < b && (s[a] == b' ' || s[a] == b'\t') {
        a += 1;
    }
    while b > a && (s[b - 1] == b' ' || s[b - 1] == b'\t') {
        b -= 1;
    }
    &s[a..b]
}

/// Parses a numeric field: blanks around, an optional sign, digits, at most
/// one decimal point; without a point the value has `implied` decimals.
#[inline]
fn parse_number(field: &[u8], implied: u32) -> Num {
    // Fast path: IPUMS writes numbers as zero-padded digits. Up to 18
    // digits cannot overflow an i64; the check for non-digits is folded
    // into the loop (a non-digit makes `ok` false and the value is unused).
    if !field.is_empty() && field.len() <= 18 {
        let mut m: i64 = 0;
        let mut ok = true;
        for &b in field {
            let d = b.wrapping_sub(b'0');
            ok &= d < 10;
            m = m.wrapping_mul(10).wrapping_add(d as i64);
        }
        if ok {
            return Num::Scaled(m, implied);
        }
    }
    let s = trim_blanks(field);
    let Some(&first) = s.first() else {
        return Num::Null;
    };
    let (neg, digits) = match first {
        b'-' => (true, &s[1..]),
        b'+' => (false, &s[1..]),
        _ => (false, s),
    };
    let mut m: i64 = 0;
    let mut n = 0usize;
    let mut overflow = false;
    let mut dot = None;
    for (i, &b) in digits.iter().enumerate() {
        let d = b.wrapping_sub(b'0');
        if d < 10 {
            n += 1;
            match m.checked_mul(10).and_then(|x| x.checked_add(d as i64)) {
                Some(x) => m = x,
                None => overflow = true,
            }
        } else if b == b'.' && dot.is_none() {
            dot = Some(i);
        } else {
            return Num::Bad;
        }
    }
    if n == 0 {
        return Num::Bad;
    }
    let d = match dot {
        None => implied,
        Some(i) => (digits.len() - 1 - i) as u32,
    };
    if overflow && d == 0 {
        return Num::BigInt;
    }
    if overflow || d > MAX_FIXED_DECIMALS {
        // Only digits, a sign and a point are left: valid float syntax;
        // the exponent applies implied decimals with one rounding.
        let text = std::str::from_utf8(s).unwrap_or("0");
        let v: f64 = if dot.is_none() {
            format!("{text}e-{d}").parse().unwrap_or(f64::NAN)
        } else {
            text.parse().unwrap_or(f64::NAN)
        };
        return Num::Big(v);
    }
    Num::Scaled(if neg { -m } else { m }, d)
}

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
    let mut rows = 0u64;
    let mut line_no = first_line;
    let mut parent: Option<(&[u8], u64)> = None;
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
                return Err(RecordError {
                    line: this,
                    kind: FieldError::ShortId { len: line.len() },
                });
            }
            let rt = trim(&line[h.id_start..h.id_end]);
            if rt != h.row_type.as_slice() {
                if h.parent_type.as_deref() == Some(rt) {
                    parent = Some((line, this));
                } else if !h.known.iter().any(|k| k.as_slice() == rt) {
                    return Err(RecordError {
                        line: this,
                        kind: FieldError::RecordType { found: show(rt) },
                    });
                }
                continue;
            }
        }
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
                (line, this)
            };
            if rec.len() < slot.end {
                return Err(RecordError {
                    line: at,
                    kind: FieldError::Short {
                        slot: i,
                        len: rec.len(),
                    },
                });
            }
            let field = &rec[slot.start..slot.end];
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
            match parse_number(field, slot.decimals) {
                Num::Null => col.push_null(),
                Num::Scaled(m, d) => {
                    if !col.push_scaled(m, d) {
                        col.push_float(m as f64 / pow10(d) as f64);
                    }
                }
                Num::Big(v) => col.push_float(v),
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
        rows += 1;
    }
    Ok(Parsed {
        rows,
        leading_zeros: vec![None; cols.len()],
        na_text: vec![None; cols.len()],
        cols: cols.into_iter().map(ColParser::into_buf).collect(),
    })
}

/// Imports the fixed-width file `data` (plain or gzip) described by the
/// codebook `cb` into a dataset at `target`.
///
/// Variables get the codebook's label, description (`txt`), value labels
/// and missing codes (`catgry missing="Y"`, `invalrng`). The target appears
/// only when the import succeeds; an existing dataset is replaced
/// (atomically) only with `force`.
///
/// ```no_run
/// use microtab_ingest::{import_fixed, Codebook, FixedOptions};
/// let cb = Codebook::read("cps_00006.xml".as_ref()).unwrap();
/// let s = import_fixed("cps_00006.dat.gz".as_ref(), &cb, "cps.mtab".as_ref(), false,
///                      &FixedOptions::default()).unwrap();
/// println!("{} records", s.rows);
/// ```
pub fn import_fixed(
    data: &Path,
    cb: &Codebook,
    target: &Path,
    force: bool,
    opts: &FixedOptions,
) -> Result<ImportSummary> {
    let mut notes = Vec::new();
    let chosen = match (&opts.record_type, cb.hierarchical) {
        (None, true) => Some(default_record_type(data, cb, &mut notes)?),
        _ => opts.record_type.clone(),
    };
    let layout = Layout::new(cb, chosen.as_deref())?;
    for (n, _) in &opts.missing {
        if !layout.slots.iter().any(|s| s.name.eq_ignore_ascii_case(n)) {
            return Err(Error::Input {
                path: data.to_path_buf(),
                reason: format!(
                    "no variable named '{n}' in {} (variables: {})",
                    cb.path.display(),
                    layout
                        .slots
                        .iter()
                        .map(|s| s.name.as_str())
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
            });
        }
    }
    let src = source::open(data)?;
    let total = src.total;
    let ncols = layout.slots.len();
    let mut ds =
        DatasetWriter::create_with(target, force, crate::csv::io_for_columns(&opts.io, ncols))?;
    ds.set_transient_files(ncols > crate::csv::TRANSIENT_COLUMNS);
    let mut source_name = data
        .file_name()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default();
    if let Some(t) = layout.row_type() {
        source_name = format!("{source_name} (record type {t})");
    }
    ds.set_source(&source_name);
    ds.set_packing(!opts.plain);
    let mut sinks: Vec<Sink> = layout
        .slots
        .iter()
        .map(|s| Sink::new(&s.name, s.text))
        .collect();
    let feed = Feed {
        input: src,
        pending: Vec::new(),
        line: 1,
        eof: false,
    };
    let stages = Stages {
        chunk_size: opts.chunk_size,
        threads: opts.threads,
        progress: opts.progress.clone(),
    };
    let out = pipeline::run(
        feed,
        &stages,
        |buf| layout.cut(buf),
        |chunk, line| {
            parse_fixed_chunk(chunk, line, &layout).map_err(|e| e.into_error(data, &layout))
        },
        &mut sinks,
        &mut ds,
    )?;
    let rows = out.rows;
    if rows == 0 {
        notes.push(match layout.row_type() {
            Some(t) => format!(
                "{} holds no records of type {t}: the dataset has 0 rows",
                data.display()
            ),
            None => format!(
                "{} holds no records: the dataset has 0 rows",
                data.display()
            ),
        });
    }
    let mut bytes_out = 0;
    let no_na = crate::parse::NaSet::new(Some(&[]), Some(&[]));
    for (slot, sink) in layout.slots.iter().zip(sinks) {
        let (mut var, dict) = sink.finish(&mut ds)?;
        describe(
            &mut var,
            &cb.variables[slot.var],
            &dict,
            &ds,
            rows,
            &mut notes,
        )?;
        if let Some((_, codes)) = opts
            .missing
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(&slot.name))
        {
            crate::csv::add_missing_codes(&mut var, &dict, codes, &no_na, data, &mut notes)?;
        }
        bytes_out += var.bytes;
        ds.add_variable(var);
    }
    let path = ds.commit(rows)?;
    Ok(ImportSummary {
        path,
        rows,
        variables: layout.slots.len(),
        bytes_in: total,
        bytes_text: out.text,
        bytes_out,
        sampled: None,
        notes,
    })
}

/// The record type of a hierarchical file that becomes a row when none is
/// asked for (see [`FixedOptions::record_type`]). The file is read from the
/// start until a person record turns up — the second line, usually — and
/// to its end only when none does, to count the records of each type.
fn default_record_type(data: &Path, cb: &Codebook, notes: &mut Vec<String>) -> Result<String> {
    use std::io::BufRead;
    let id = cb.record_id_variable().expect("checked when parsed");
    let (a, b) = (id.start - 1, id.end);
    let person = cb.person_record_type();
    let top = cb.top_record_type().unwrap_or("H");
    let types: Vec<&str> = cb
        .record_groups
        .iter()
        .map(|g| g.rectype.as_str())
        .collect();
    let mut counts = vec![0u64; types.len()];
    let mut src = source::open(data)?;
    let mut r = std::io::BufReader::with_capacity(1 << 20, &mut src.reader);
    let mut line = Vec::new();
    let mut lines = 0u64;
    loop {
        line.clear();
        match r.read_until(b'\n', &mut line) {
            Ok(0) => break,
            Ok(_) => lines += 1,
            Err(e) => {
                drop(r);
                return Err(src.read_error(e, lines));
            }
        }
        // Short records and unknown types are the import's to report.
        let Some(rt) = line.get(a..b).map(trim) else {
            continue;
        };
        if let Some(i) = types.iter().position(|t| t.as_bytes() == rt) {
            counts[i] += 1;
            if Some(types[i]) == person {
                if types[i] != "P" {
                    notes.push(format!(
                        "the person records (type {}{}) become the rows, with the variables of the record of type {top} before each; --rectype chooses another type",
                        types[i],
                        cb.record_type_label(types[i]).map_or(String::new(), |l| format!(", {l}"))
                    ));
                }
                return Ok(types[i].to_string());
            }
        }
    }
    let label = |t: &str| {
        cb.record_type_label(t)
            .map_or(String::new(), |l| format!(" ({l})"))
    };
    let with: Vec<usize> = (0..types.len()).filter(|&i| counts[i] > 0).collect();
    let below: Vec<usize> = with.iter().copied().filter(|&i| types[i] != top).collect();
    let pick = match (with.as_slice(), below.as_slice()) {
        // An empty file: the type a file of this codebook would use.
        ([], _) => person
            .or_else(|| types.iter().copied().find(|t| *t != top))
            .unwrap_or(top),
        ([i], _) | (_, [i]) => types[*i],
        _ => {
            return Err(Error::RecordTypeChoice {
                path: data.to_path_buf(),
                counts: types
                    .iter()
                    .zip(&counts)
                    .map(|(t, n)| {
                        (
                            t.to_string(),
                            cb.record_type_label(t).map(str::to_string),
                            *n,
                        )
                    })
                    .collect(),
            })
        }
    };
    if !with.is_empty() {
        let held: Vec<String> = with
            .iter()
            .map(|&i| format!("{} of type {}{}", counts[i], types[i], label(types[i])))
            .collect();
        notes.push(format!(
            "{} holds no person records ({}): the records of type {pick}{} become the rows; --rectype chooses another type",
            data.display(),
            held.join(", "),
            label(pick)
        ));
    }
    Ok(pick.to_string())
}

/// A codebook code (`"01"`, `"99999998"`, `"0A"`) as the variable's stored
/// value and its displayed text, or `None` if it cannot be one of its values.
fn code_value(
    var: &Variable,
    dv: &DdiVariable,
    code: &str,
    dict: &[String],
) -> Option<(f64, String)> {
    match var.kind {
        Kind::String => {
            let s = code.trim();
            let i = dict.binary_search_by(|d| d.as_str().cmp(s)).ok();
            // A label for a value that never occurs still keys by its text;
            // only a missing code needs a stored code.
            Some((i.map_or(f64::NAN, |i| i as f64), s.to_string()))
        }
        Kind::Int => {
            let Num::Scaled(m, d) = parse_number(code.as_bytes(), dv.decimals) else {
                return None;
            };
            let stored = if var.decimals >= d {
                m.checked_mul(pow10(var.decimals - d))?
            } else {
                let k = pow10(d - var.decimals);
                if m % k != 0 {
                    return None;
                }
                m / k
            };
            Some((
                stored as f64,
                microtab_store::codec::display_int(var.decimals, stored),
            ))
        }
        Kind::Float => {
            let x = match parse_number(code.as_bytes(), dv.decimals) {
                Num::Scaled(m, d) => m as f64 / pow10(d) as f64,
                Num::Big(x) => x,
                _ => return None,
            };
            Some((x, float_text(x)))
        }
    }
}

/// Copies the codebook's description of a variable into its manifest entry.
/// A missing-value range too wide to list becomes the values of it that
/// the column holds; when those are more than [`MAX_LISTED_RANGE`], the
/// range is not used and `notes` says so.
pub(crate) fn describe(
    var: &mut Variable,
    dv: &DdiVariable,
    dict: &[String],
    ds: &DatasetWriter,
    rows: u64,
    notes: &mut Vec<String>,
) -> Result<()> {
    var.label = dv.label.clone();
    var.description = dv.description.clone();
    let mut missing = Vec::new();
    for c in &dv.categories {
        let Some((stored, text)) = code_value(var, dv, &c.value, dict) else {
            continue;
        };
        if let Some(l) = &c.label {
            var.value_labels.entry(text).or_insert_with(|| l.clone());
        }
        if c.missing {
            missing.push(stored);
        }
    }
    for code in &dv.invalid {
        if let Some((stored, _)) = code_value(var, dv, code, dict) {
            missing.push(stored);
        }
    }
    for (lo, hi) in &dv.invalid_ranges {
        match wide_range_codes(var, dv, lo, hi, dict, ds, rows)? {
            Some(codes) => missing.extend(codes.into_iter().map(|c| c as f64)),
            None => notes.push(format!(
                "variable {}: missing-value range {lo}..{hi} of the codebook not used: the data hold more than {MAX_LISTED_RANGE} different values in it; declare missing codes with `microtab missing`",
                var.name
            )),
        }
    }
    for m in missing {
        if !m.is_nan() && !var.missing_codes.contains(&m) {
            var.missing_codes.push(m);
        }
    }
    niu_missing(var, dv, dict, notes);
    Ok(())
}

/// Makes the codes the codebook names not-in-universe or missing in its
/// labels or text ([`DdiVariable::niu`]) missing codes, with a note naming
/// each and the evidence; and suggests (a note only) a run of 9s as wide as
/// the field — or 9s ending in 8 — that the data hold as their largest
/// value, which IPUMS uses for "not in universe" and "missing" when the
/// codebook does not say so.
fn niu_missing(var: &mut Variable, dv: &DdiVariable, dict: &[String], notes: &mut Vec<String>) {
    let mut set = Vec::new();
    for n in &dv.niu {
        let Some((stored, text)) = code_value(var, dv, &n.value, dict) else {
            continue;
        };
        if stored.is_nan() || var.missing_codes.contains(&stored) {
            continue;
        }
        var.missing_codes.push(stored);
        set.push(if n.from_label {
            format!("{text} (value label \"{}\")", n.evidence)
        } else {
            format!("{text} (text: \"{}\")", n.evidence)
        });
    }
    if !set.is_empty() {
        notes.push(format!(
            "variable {}: {} named not-in-universe or missing by the codebook {} missing; --keep-niu keeps {} as values",
            var.name,
            set.join(", "),
            if set.len() == 1 { "is" } else { "are" },
            if set.len() == 1 { "it" } else { "them" },
        ));
    }
    let width = dv.width();
    if var.kind != Kind::Int || var.decimals != 0 || dv.decimals != 0 || width < 3 {
        return;
    }
    let Some(max) = var.max.map(|m| m.as_f64()) else {
        return;
    };
    let nines = "9".repeat(width);
    let eight = format!("{}8", "9".repeat(width - 1));
    for code in [nines, eight] {
        let Ok(x) = code.parse::<i64>() else { continue };
        // Explained by the codebook (and kept as a value on purpose, or a
        // value it gives another meaning): no suggestion.
        let explained = [dv.coding.as_deref(), dv.description.as_deref()]
            .into_iter()
            .flatten()
            .any(|t| t.contains(&code));
        let labelled = explained
            || dv.categories.iter().any(|c| {
                c.value.trim_start_matches('0') == code
                    && !crate::ddi::is_niu_label(c.label.as_deref().unwrap_or(""))
            });
        if x as f64 == max && !var.missing_codes.contains(&(x as f64)) && !labelled {
            notes.push(format!(
                "variable {}: its largest value is {code}, a run of 9s as wide as the field, which IPUMS uses for \"not in universe\" or \"missing\"; if the codebook's documentation says so, `microtab missing DATASET {} {code}` makes it missing",
                var.name, var.name
            ));
        }
    }
}

/// Most codes a wide missing-value range may add to a variable.
const MAX_LISTED_RANGE: usize = 10_000;

/// The stored codes of the missing-value range `lo..hi` that occur in the
/// integer column (read back once; only variables with such a range pay
/// for it). `None` when they are more than [`MAX_LISTED_RANGE`], or the
/// variable is not an integer one.
fn wide_range_codes(
    var: &Variable,
    dv: &DdiVariable,
    lo: &str,
    hi: &str,
    dict: &[String],
    ds: &DatasetWriter,
    rows: u64,
) -> Result<Option<Vec<i64>>> {
    if var.kind != Kind::Int {
        return Ok(None);
    }
    // Stored units; a bound beyond what a code can hold (i64's own limits,
    // say) is taken as it is when the variable has no decimals.
    let bound = |s: &str| {
        code_value(var, dv, s, dict).map(|c| c.0).or_else(|| {
            (var.decimals == 0 && dv.decimals == 0)
                .then(|| s.trim().parse::<i64>().ok().map(|x| x as f64))
                .flatten()
        })
    };
    let (Some(a), Some(b)) = (bound(lo), bound(hi)) else {
        return Ok(None);
    };
    // Within the column's range, or nothing to read.
    let num = |n: Option<microtab_store::Number>| n.map(|n| n.as_f64());
    let (Some(min), Some(max)) = (num(var.min), num(var.max)) else {
        return Ok(Some(Vec::new()));
    };
    let (a, b) = (a.ceil().max(min), b.floor().min(max));
    if rows == 0 || a > b {
        return Ok(Some(Vec::new()));
    }
    let col = ds.finished_column(var, rows)?;
    let data = col.data()?;
    let mut found = std::collections::BTreeSet::new();
    macro_rules! scan {
        ($v:expr) => {
            for &x in $v.iter() {
                let x = x as i64;
                if Some(x) == var.null_code {
                    continue;
                }
                if (x as f64) >= a
                    && (x as f64) <= b
                    && found.insert(x)
                    && found.len() > MAX_LISTED_RANGE
                {
                    return Ok(None);
                }
            }
        };
    }
    match data {
        ColumnData::U8(v) => scan!(v),
        ColumnData::I8(v) => scan!(v),
        ColumnData::U16(v) => scan!(v),
        ColumnData::I16(v) => scan!(v),
        ColumnData::U32(v) => scan!(v),
        ColumnData::I32(v) => scan!(v),
        ColumnData::I64(v) => scan!(v),
        ColumnData::F32(_) | ColumnData::F64(_) => return Ok(None),
    }
    Ok(Some(found.into_iter().collect()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::parse::{ColBuf, NULL_I64};

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
            msg.starts_with("d.dat: record 11, variable WT (columns 5-10): expected a number"),
            "{msg}"
        );
        let e = parse_fixed_chunk(b"1962001234-00050A\n1962001234\n", 1, &l).unwrap_err();
        let msg = e.into_error(Path::new("d.dat"), &l).to_string();
        assert_eq!(
            msg,
            "d.dat: record 2 is 10 characters long, but the codebook puts variable INC in columns 11-15"
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
            "h.dat: record 6: record type \"X\" (variable RECTYPE) is not described by the codebook (record types: P, H)"
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
