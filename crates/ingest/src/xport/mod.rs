//! SAS transport files (XPORT, versions 5 and 8: what NHANES and the FDA
//! publish, `.xpt`), read as a stream into the column sinks
//! ([`ColumnarImport`]).
//!
//! - **Numbers** are IBM floating point; a column whose values in a batch
//!   are all integers, or all exact decimals of at most 6 digits, is
//!   stored as (scaled) integers, as CSV numbers are; others as doubles.
//! - **Missing values**: `.` is system-missing; the special `.A`–`.Z` and
//!   `._` are user-missing codes labelled `.A`…, each kept apart (Stata's
//!   codes for `.a`–`.z` in a numeric column, the text `.A` in a date's).
//! - **Dates, datetimes and times** (by their display format: `DATE9.`,
//!   `YYMMDD10.`, `DATETIME20.`, `TIME8.`…) become ISO 8601 text, as the
//!   Parquet import's dates do.
//! - **Text** loses its trailing blanks; a blank value is missing (SAS's
//!   missing character value). It is decoded as UTF-8 unless an encoding
//!   is given (the format names none).
//! - Variable names and labels (version 8: up to 32 and 256 characters)
//!   are kept; the member's label becomes a note.
//!
//! Only the first member of a file is read (NHANES and most files hold
//! one); a note names the others. Records are packed across 80-byte cards
//! and the last card is padded with blanks: blank records in it are taken
//! as padding (the format cannot tell them from records that are blank).

mod header;
pub(crate) mod values;

pub(crate) use header::is_xport;

use crate::columnar::records::fill;
use crate::columnar::{
    distinct_names, number_chunk, refuse_text_options, Cell, Chunk, ColumnarImport, KeyChunk,
    TextChunk,
};
use crate::core::dates::{date_key, show_key, tag_key};
use crate::core::pipeline::ImportSummary;
use crate::error::{Error, Result};
use crate::options::ImportOptions;
use header::{Member, CARD};
use std::collections::BTreeSet;
use std::io::Read;
use std::path::Path;
use values::{Num, Shown};

/// Bytes read at a time (a multiple of a card).
const BLOCK: usize = CARD * (1 << 16);

/// Imports the first member of the transport file `input` into a dataset
/// at `target` (replacing an existing one only with `force`).
pub fn import_xport(
    input: &Path,
    target: &Path,
    force: bool,
    opts: &ImportOptions,
) -> Result<ImportSummary> {
    refuse_text_options(input, opts, "a SAS transport file")?;
    let open = || {
        std::fs::File::open(input).map_err(|e| Error::Input {
            path: input.to_path_buf(),
            reason: format!("cannot open: {e}"),
        })
    };
    let mut file = open()?;
    let mut head = [0u8; 20];
    let got = fill(&mut file, &mut head).unwrap_or(0);
    if !header::is_xport(&head[..got]) || got < head.len() {
        return Err(Error::Format {
            path: input.to_path_buf(),
            offset: 0,
            reason: "not a SAS transport file: it does not start with `HEADER RECORD*******`"
                .into(),
        });
    }
    let file = open()?;
    let len = file.metadata().map(|m| m.len()).unwrap_or(0);
    let m = header::read(
        input,
        std::io::BufReader::new(file),
        len,
        opts.encoding.unwrap_or_default(),
    )?;
    let shown: Vec<Option<Shown>> = m
        .vars
        .iter()
        .map(|v| v.numeric.then(|| values::shown(&v.format)))
        .collect();
    let given: Vec<String> = m.vars.iter().map(|v| v.name.clone()).collect();
    let (names, renamed) = distinct_names(&given);
    let text: Vec<bool> = shown
        .iter()
        .map(|s| !matches!(s, Some(Shown::Number)))
        .collect();
    let mut imp = ColumnarImport::create(input, target, force, &names, &text, opts.plain)?;
    let mut file = open()?;
    std::io::Seek::seek(&mut file, std::io::SeekFrom::Start(m.data_start)).map_err(|e| {
        Error::Input {
            path: input.to_path_buf(),
            reason: format!("cannot read: {e}"),
        }
    })?;
    let mut reader = Records {
        path: input,
        m: &m,
        shown: &shown,
        opts,
        specials: vec![BTreeSet::new(); m.vars.len()],
        outside: vec![0; m.vars.len()],
        file_len: len,
    };
    let more = reader.stream(file, &mut imp)?;
    let specials = reader.specials;
    let mut notes = renamed;
    for (v, &n) in m.vars.iter().zip(&reader.outside) {
        if n > 0 {
            notes.push(format!(
                "variable {} (format {}): {n} values outside the years 1 to 9999 are left missing",
                v.name, v.format
            ));
        }
    }
    imp.set_about(m.label.as_deref(), None);
    if more {
        notes.push(format!(
            "the file holds more members (data sets) after {}: only the first was imported",
            m.name
        ));
    }
    let vars = &m.vars;
    imp.finish(
        None,
        |var, dict| {
            let Some(i) = names.iter().position(|n| *n == var.name) else {
                return Ok(());
            };
            var.label = vars[i].label.clone();
            for &t in &specials[i] {
                let tag = format!(".{}", t as char);
                match var.kind {
                    microtab_store::Kind::String => {
                        if let Ok(k) = dict.binary_search(&tag) {
                            var.missing_codes.push(k as f64);
                        }
                    }
                    _ => {
                        let code = values::special_code(t);
                        var.missing_codes.push(code);
                        var.value_labels
                            .insert(microtab_store::codec::format_float(code), tag);
                    }
                }
            }
            Ok(())
        },
        None,
        notes,
    )
}

/// The member's records, decoded batch by batch.
struct Records<'a> {
    path: &'a Path,
    m: &'a Member,
    shown: &'a [Option<Shown>],
    opts: &'a ImportOptions,
    /// Per variable, the special missing values seen.
    specials: Vec<BTreeSet<u8>>,
    /// Per date variable, the values outside the years 1 to 9999.
    outside: Vec<u64>,
    file_len: u64,
}

impl Records<'_> {
    /// Reads the records from `r` (at the member's data) into `imp`;
    /// whether another member follows.
    fn stream(&mut self, mut r: impl Read, imp: &mut ColumnarImport) -> Result<bool> {
        let row = self.m.row_len;
        let batch = ((8 << 20) / row).clamp(1, 1 << 16);
        let mut buf: Vec<u8> = Vec::with_capacity(BLOCK + batch * row);
        // The file offsets of buf[0] and of the next card to look at (the
        // data start on a card).
        let (mut at, mut card) = (self.m.data_start, self.m.data_start);
        let mut record = 0u64;
        let (mut done, mut more) = (false, false);
        while !done {
            let start = buf.len();
            buf.resize(start + BLOCK, 0);
            let got = fill(&mut r, &mut buf[start..]).map_err(|e| Error::Input {
                path: self.path.to_path_buf(),
                reason: format!("cannot read: {e}"),
            })?;
            buf.truncate(start + got);
            done = got < BLOCK;
            // A member's two header cards end this member's data.
            while (card - at) as usize + 2 * CARD <= buf.len() {
                let k = (card - at) as usize;
                if header::starts_member(&buf[k..]) {
                    buf.truncate(k);
                    (done, more) = (true, true);
                    break;
                }
                card += CARD as u64;
            }
            // Records decided: all but those that may be the last card's
            // padding or a member's headers not yet seen whole, until the
            // end.
            let keep = if done { buf.len() } else { 2 * CARD };
            let whole = buf.len().saturating_sub(keep) / row;
            let mut used = 0;
            while used < whole {
                let n = batch.min(whole - used);
                let rows = &buf[used * row..(used + n) * row];
                imp.append(self.decode(rows, record, at + (used * row) as u64)?)?;
                record += n as u64;
                used += n;
            }
            buf.drain(..used * row);
            at += (used * row) as u64;
            if let Some(p) = &self.opts.progress {
                p(at - self.m.data_start, self.file_len - self.m.data_start);
            }
        }
        self.last(&buf, (record, at), imp)?;
        Ok(more)
    }

    /// The member's last bytes: records, then blank padding (blank
    /// records that lie within the last card, and less than a record).
    fn last(
        &mut self,
        buf: &[u8],
        (record, at): (u64, u64),
        imp: &mut ColumnarImport,
    ) -> Result<()> {
        let row = self.m.row_len;
        let end = buf.len();
        let mut n = end / row;
        while n > 0
            && end - (n - 1) * row < CARD
            && buf[(n - 1) * row..n * row].iter().all(|&b| b == b' ')
        {
            n -= 1;
        }
        let tail = &buf[n * row..];
        if tail.len() < row {
            if let Some(i) = tail.iter().position(|&b| b != b' ') {
                return Err(Error::Format {
                    path: self.path.to_path_buf(),
                    offset: at + (n * row + i) as u64,
                    reason: format!(
                        "the data end inside record {} ({} of its {row} bytes): the file is truncated or damaged",
                        record + n as u64 + 1,
                        tail.len()
                    ),
                });
            }
        }
        for chunk in buf[..n * row].chunks(row * 65_536) {
            let first = record + ((chunk.as_ptr() as usize - buf.as_ptr() as usize) / row) as u64;
            let off = at + (chunk.as_ptr() as usize - buf.as_ptr() as usize) as u64;
            imp.append(self.decode(chunk, first, off)?)?;
        }
        Ok(())
    }

    /// One chunk per variable of the records `rows` (the first is record
    /// `first` + 1, at file offset `at`).
    fn decode(&mut self, rows: &[u8], first: u64, at: u64) -> Result<Vec<Chunk>> {
        let row = self.m.row_len;
        let n = rows.len() / row;
        let mut out = Vec::with_capacity(self.m.vars.len());
        for (i, v) in self.m.vars.iter().enumerate() {
            let field = |r: usize| &rows[r * row + v.pos..r * row + v.pos + v.len];
            let where_ = |r: usize| (first + r as u64 + 1, at + (r * row + v.pos) as u64);
            out.push(match self.shown[i] {
                Some(Shown::Number) => {
                    let vals: Vec<Num> = (0..n).map(|r| values::ibm(field(r))).collect();
                    for x in &vals {
                        if let Num::Special(t) = x {
                            self.specials[i].insert(*t);
                        }
                    }
                    numbers(&vals)
                }
                Some(how) => {
                    let mut t = KeyChunk::new(show_key(how), n);
                    for r in 0..n {
                        t.push(match values::ibm(field(r)) {
                            Num::Value(x) => {
                                let k = date_key(x, how);
                                // Outside the years 1 to 9999: missing,
                                // counted in a note.
                                self.outside[i] += u64::from(k.is_none());
                                k
                            }
                            Num::Missing => None,
                            Num::Special(tag) => {
                                self.specials[i].insert(tag);
                                Some(tag_key(tag))
                            }
                        });
                    }
                    t.chunk()
                }
                None => {
                    let mut t = TextChunk::default();
                    t.push_fields((0..n).map(field), |r, f| {
                        let (rec, off) = where_(r);
                        let s = header::text(
                            f,
                            self.opts.encoding.unwrap_or_default(),
                            || format!("record {rec}, variable {}", v.name),
                            self.path,
                            off,
                        )?;
                        Ok((!s.is_empty()).then_some(s))
                    })?;
                    t.chunk()
                }
            });
        }
        Ok(out)
    }
}

/// A batch of a numeric column: scaled integers when every value is an
/// exact decimal of at most 6 digits (their double the one nearest the
/// decimal, as a CSV number's is), else doubles; special missing values
/// as their codes (doubles).
fn numbers(vals: &[Num]) -> Chunk {
    let cells = vals.iter().map(|v| match *v {
        Num::Value(x) => Cell::Value(x),
        Num::Missing => Cell::Missing,
        Num::Special(t) => Cell::Code(values::special_code(t)),
    });
    number_chunk(cells, vals.len())
}
