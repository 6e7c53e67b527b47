//! SPSS system files: `.sav` (uncompressed or bytecode-compressed) and
//! `.zsav` (zlib blocks of bytecode), either byte order, read as a stream
//! of records decoded on every core into the column sinks
//! ([`ColumnarImport`]).
//!
//! - **Numbers** become (scaled) integers where every value of a batch is
//!   an exact decimal of at most 6 digits, as CSV numbers do, else doubles;
//!   system-missing is missing.
//! - **User-missing values**: discrete values become missing codes; a
//!   range (`LO THRU x`, `x THRU HI`, `a THRU b`) becomes the missing codes
//!   of the values the data hold inside it (at most 10,000, as for a DDI
//!   codebook's ranges), with a note.
//! - **Value labels** of numbers and of texts (long strings too), variable
//!   labels, long names and very long strings (over 255 bytes) are kept;
//!   the file label becomes a note, as does the weight variable it names.
//! - **Dates**: `DATE`, `ADATE`, `EDATE`, `SDATE`, `JDATE` become ISO 8601
//!   dates, `DATETIME` and `YMDHMS` datetimes, `TIME` and `DTIME` times
//!   (`HH:MM:SS`), as pyreadstat reads them.
//! - **Text** loses its trailing blanks; an empty text is missing. The
//!   encoding is the one the file names (UTF-8, Windows-1252 or Latin-1),
//!   else Windows-1252, unless one is given.

mod data;
mod dict;
pub(crate) mod write;

pub(crate) use dict::is_sav;

use crate::columnar::records::{decode_records, per_batch, Batch, Layout};
use crate::columnar::{
    distinct_names, label_key, number_chunk, refuse_text_options, stored_code, Cell, Chunk,
    ColumnarImport, KeyChunk, TextChunk,
};
use crate::core::dates::{date_key, show_key};
use crate::core::pipeline::ImportSummary;
use crate::error::{Error, Result};
use crate::options::ImportOptions;
pub(crate) use dict::{format_text, shown_of, Missing, Sav, Var};
use dict::{Shown, SPSS_TO_1960_DAYS};
use std::collections::BTreeSet;
use std::io::{Read, Seek, SeekFrom};
use std::path::Path;

/// Codes a range of user-missing values may become.
const RANGE_CODES: usize = 10_000;

/// Imports the SPSS system file `input` into a dataset at `target`
/// (replacing an existing one only with `force`).
pub fn import_sav(
    input: &Path,
    target: &Path,
    force: bool,
    opts: &ImportOptions,
) -> Result<ImportSummary> {
    refuse_text_options(input, opts, "an SPSS system file")?;
    let s = dict::read(input, opts.encoding)?;
    let reader = open_data(input, &s)?;
    let mut notes = Vec::new();
    if s.named_encoding.is_none() && opts.encoding.is_none() {
        notes.push("the file names no text encoding: read as Windows-1252".to_string());
    }
    import_with(input, target, force, opts, &s, reader, |r| {
        r.map(|()| notes)
    })
}

/// The data of the system file `input` as a stream of uncompressed
/// records, from its first record on.
fn open_data(input: &Path, s: &Sav) -> Result<Box<dyn Read + Send>> {
    let open = || {
        std::fs::File::open(input).map_err(|e| Error::Input {
            path: input.to_path_buf(),
            reason: format!("cannot open: {e}"),
        })
    };
    let mut file = open()?;
    let len = file.metadata().map(|m| m.len()).unwrap_or(0);
    let seek = |f: &mut std::fs::File, to: u64| {
        f.seek(SeekFrom::Start(to)).map_err(|e| Error::Input {
            path: input.to_path_buf(),
            reason: format!("cannot read: {e}"),
        })
    };
    seek(&mut file, s.data_start)?;
    Ok(match s.compression {
        0 => Box::new(std::io::BufReader::with_capacity(1 << 20, file)),
        1 => Box::new(data::Bytecode::new(
            std::io::BufReader::with_capacity(1 << 20, file),
            s.bias,
            s.big,
            s.sysmis,
        )),
        _ => {
            let blocks = zsav_blocks(input, &mut file, s, len)?;
            Box::new(data::Bytecode::new(
                std::io::BufReader::with_capacity(1 << 20, data::Zlib::new(file, blocks)),
                s.bias,
                s.big,
                s.sysmis,
            ))
        }
    })
}

/// Imports the records `reader` yields (uncompressed, laid out as `s`
/// says) into a dataset at `target`: what a system file and a portable
/// file (whose reader rebuilds such records from its text) share. `done`
/// is given the outcome of reading the records and returns it, or
/// another error, and the notes to give first.
pub(crate) fn import_with(
    input: &Path,
    target: &Path,
    force: bool,
    opts: &ImportOptions,
    s: &Sav,
    reader: Box<dyn Read + Send>,
    done: impl FnOnce(Result<()>) -> Result<Vec<String>>,
) -> Result<ImportSummary> {
    let given: Vec<String> = s.vars.iter().map(|v| v.name.clone()).collect();
    let (names, renamed) = distinct_names(&given);
    let text: Vec<bool> = s
        .vars
        .iter()
        .map(|v| v.width.is_some() || v.shown != Shown::Number)
        .collect();
    let mut imp = ColumnarImport::create(input, target, force, &names, &text, opts.plain)?;
    let lay = Layout {
        start: s.data_start,
        row_len: s.row_len.max(8),
        records: if s.row_len == 0 { Some(0) } else { s.records },
        per_batch: per_batch(s.row_len, s.vars.len()),
    };
    let dec = Decoder { path: input, s };
    let mut seen = Seen::new(s.vars.len());
    let decoded = decode_records(
        &mut imp,
        input,
        reader,
        &lay,
        opts.threads.max(1),
        |b| dec.decode(b),
        |x: Seen| seen.merge(x),
        opts.progress.as_ref(),
    );
    let mut notes = renamed;
    notes.extend(done(decoded)?);
    imp.set_about(Some(&s.label), None);
    if let Some(w) = &s.weight {
        notes.push(format!(
            "the file names {w} as its weight variable (set it with a design to use it)"
        ));
    }
    for (i, v) in s.vars.iter().enumerate() {
        if seen.outside[i] > 0 {
            notes.push(format!(
                "variable {} (format {}): {} values outside the years 1 to 9999 are left missing",
                v.name, v.format, seen.outside[i]
            ));
        }
        if seen.cut[i] > 0 {
            notes.push(format!(
                "variable {}: {} values end inside a UTF-8 character (cut short by the program that wrote the file): the partial character is dropped",
                v.name, seen.cut[i]
            ));
        }
        if let Some((lo, hi)) = v.missing.range {
            let n = seen.in_range[i].len();
            if seen.too_many[i] {
                notes.push(format!(
                    "variable {}: the user-missing range {} THRU {} holds more than {RANGE_CODES} distinct values in the data, more than microtab keeps as missing codes: the range is not used (its values count as values; declare the codes that matter with a missing command)",
                    v.name,
                    show(lo),
                    show(hi)
                ));
                continue;
            }
            notes.push(format!(
                "variable {}: the user-missing range {} THRU {} became the {n} missing codes of the values the data hold in it",
                v.name,
                show(lo),
                show(hi)
            ));
        }
    }
    let vars = &s.vars;
    imp.finish_noting(
        None,
        |i, var, dict, notes| {
            let v = &vars[i];
            var.label = v.label.clone();
            if v.width.is_some() {
                for (val, lab) in &v.text_labels {
                    if !val.is_empty() {
                        var.value_labels.insert(val.clone(), lab.clone());
                    }
                }
                for t in &v.missing.texts {
                    if let Ok(p) = dict.binary_search(t) {
                        var.missing_codes.push(p as f64);
                    }
                }
            } else if !text[i] {
                // Labels and codes by the values as the column stores and
                // shows them (a column of exact decimals scales them).
                let mut left_out = Vec::new();
                for (val, lab) in &v.labels {
                    match label_key(var, *val) {
                        Some(k) => {
                            var.value_labels.insert(k, lab.clone());
                        }
                        None => left_out.push(show(*val)),
                    }
                }
                let mut codes: BTreeSet<u64> = BTreeSet::new();
                for x in v.missing.values.iter().copied().chain(seen.in_range[i].iter().map(|b| f64::from_bits(*b))) {
                    match stored_code(var, x) {
                        Some(c) => {
                            codes.insert(c.to_bits());
                        }
                        None => left_out.push(show(x)),
                    }
                }
                var.missing_codes.extend(codes.into_iter().map(f64::from_bits));
                if !left_out.is_empty() {
                    notes.push(
                        format!(
                            "variable {}: the labels or missing values {} are left out: no record holds them and the column stores exact decimals",
                            v.name,
                            left_out.join(", ")
                        )
                        .into(),
                    );
                }
            } else if !v.labels.is_empty() {
                notes.push(
                    format!(
                        "variable {}: its value labels are left out: the values are dates, stored as text",
                        v.name
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

fn show(x: f64) -> String {
    if x <= -f64::MAX {
        "LO".into()
    } else if x >= f64::MAX {
        "HI".into()
    } else {
        microtab_store::codec::format_float(x)
    }
}

/// The zlib blocks of a `.zsav` file (its header at `s.data_start`, its
/// trailer where the header says), each checked against the file.
fn zsav_blocks(path: &Path, f: &mut std::fs::File, s: &Sav, len: u64) -> Result<Vec<data::Block>> {
    let err = |offset: u64, reason: String| Error::Format {
        path: path.to_path_buf(),
        offset,
        reason,
    };
    let io = |e: std::io::Error| Error::Input {
        path: path.to_path_buf(),
        reason: format!("cannot read: {e}"),
    };
    let i64_of = |b: &[u8]| dict::i64_of(b, s.big);
    let i32_of = |b: &[u8]| dict::i32_of(b, s.big);
    let mut h = [0u8; 24];
    if len < s.data_start + 24 {
        return Err(err(
            s.data_start,
            "the file ends inside the zlib header: it is truncated".into(),
        ));
    }
    f.read_exact(&mut h).map_err(io)?;
    let (trailer, trailer_len) = (i64_of(&h[8..16]), i64_of(&h[16..24]));
    if trailer < (s.data_start + 24) as i64
        || trailer_len < 24
        || (trailer as u64).saturating_add(trailer_len as u64) > len
    {
        return Err(err(
            s.data_start + 8,
            format!("the zlib trailer is said to be {trailer_len} bytes at byte {trailer}, outside the file's {len} bytes: the file is truncated or damaged"),
        ));
    }
    f.seek(SeekFrom::Start(trailer as u64)).map_err(io)?;
    let mut t = vec![0u8; trailer_len as usize];
    f.read_exact(&mut t).map_err(io)?;
    let n = i32_of(&t[20..24]);
    if n < 0 || 24 + 24 * n as i64 > trailer_len {
        return Err(err(
            trailer as u64 + 20,
            format!("the zlib trailer lists {n} blocks, more than its {trailer_len} bytes hold: the file is damaged"),
        ));
    }
    let mut blocks = Vec::with_capacity(n as usize);
    for k in 0..n as usize {
        let e = &t[24 + 24 * k..48 + 24 * k];
        let (off, clen) = (i64_of(&e[8..16]), i32_of(&e[20..24]));
        if off < 0 || clen < 0 || (off as u64).saturating_add(clen as u64) > trailer as u64 {
            return Err(err(
                trailer as u64 + 24 + 24 * k as u64,
                format!("zlib block {} is said to be {clen} bytes at byte {off}, outside the data: the file is damaged", k + 1),
            ));
        }
        blocks.push(data::Block {
            offset: off as u64,
            len: clen as u64,
        });
    }
    f.seek(SeekFrom::Start(s.data_start)).map_err(io)?;
    Ok(blocks)
}

/// What a batch saw beside its values.
struct Seen {
    /// Per variable, the distinct values inside its missing range.
    in_range: Vec<BTreeSet<u64>>,
    too_many: Vec<bool>,
    /// Per date variable, the values outside the years 1 to 9999.
    outside: Vec<u64>,
    /// Per text variable, the values that end inside a UTF-8 character.
    cut: Vec<u64>,
}

impl Seen {
    fn new(n: usize) -> Seen {
        Seen {
            in_range: vec![BTreeSet::new(); n],
            too_many: vec![false; n],
            outside: vec![0; n],
            cut: vec![0; n],
        }
    }

    fn merge(&mut self, o: Seen) {
        for (i, set) in o.in_range.into_iter().enumerate() {
            self.in_range[i].extend(set);
            if self.in_range[i].len() > RANGE_CODES {
                self.too_many[i] = true;
                self.in_range[i].clear();
            }
        }
        for (a, b) in self.too_many.iter_mut().zip(o.too_many) {
            *a |= b;
        }
        for (a, b) in self.outside.iter_mut().zip(o.outside) {
            *a += b;
        }
        for (a, b) in self.cut.iter_mut().zip(o.cut) {
            *a += b;
        }
    }
}

struct Decoder<'a> {
    path: &'a Path,
    s: &'a Sav,
}

impl Decoder<'_> {
    fn number(&self, b: &[u8]) -> Cell {
        let a: [u8; 8] = b[..8].try_into().expect("8 bytes");
        let bits = if self.s.big {
            u64::from_be_bytes(a)
        } else {
            u64::from_le_bytes(a)
        };
        let x = f64::from_bits(bits);
        if bits == self.s.sysmis || !x.is_finite() {
            Cell::Missing
        } else {
            Cell::Value(x)
        }
    }

    /// A text field's value (trailing blanks cut; `None` when empty);
    /// `cut` counts values a writer cut inside a UTF-8 character.
    fn text(
        &self,
        buf: &[u8],
        (batch, r, off): (&Batch, usize, usize),
        v: &dict::Var,
        cut: &mut u64,
    ) -> Result<Option<String>> {
        let s = self.s;
        let end = buf
            .iter()
            .rposition(|&b| b != b' ' && b != 0)
            .map_or(0, |k| k + 1);
        let mut raw = &buf[..end];
        if s.enc == crate::options::Encoding::Utf8 {
            // A value cut inside a character (writers cut bytes): the
            // partial character is dropped, and counted.
            if let Err(e) = std::str::from_utf8(raw) {
                if e.error_len().is_none() {
                    raw = &raw[..e.valid_up_to()];
                    *cut += 1;
                }
            }
        }
        match s.enc.decode(raw) {
            Some(x) => Ok((!x.is_empty()).then(|| x.into_owned())),
            None => Err(Error::Format {
                path: self.path.to_path_buf(),
                // Compressed data: the data section.
                offset: if s.compression == 0 {
                    batch.at + (r * s.row_len + off) as u64
                } else {
                    s.data_start
                },
                reason: format!(
                    "record {}, variable {}: {:?} is not valid {} (give the file's encoding)",
                    batch.first + r as u64 + 1,
                    v.name,
                    crate::error::show(raw),
                    s.enc.name()
                ),
            }),
        }
    }

    fn decode(&self, batch: &Batch) -> Result<(Vec<Chunk>, Seen)> {
        let s = self.s;
        let row = s.row_len;
        let n = batch.bytes.len() / row;
        let rows = &batch.bytes;
        let mut seen = Seen::new(s.vars.len());
        let mut out = Vec::with_capacity(s.vars.len());
        for (i, v) in s.vars.iter().enumerate() {
            let (off, _) = v.pieces[0];
            out.push(match (v.width, v.shown) {
                (None, Shown::Number) => {
                    let cells: Vec<Cell> = (0..n)
                        .map(|r| self.number(&rows[r * row + off..]))
                        .collect();
                    if let Some((lo, hi)) = v.missing.range {
                        let set = &mut seen.in_range[i];
                        for c in &cells {
                            if let Cell::Value(x) = c {
                                if *x >= lo && *x <= hi && set.len() <= RANGE_CODES {
                                    set.insert(x.to_bits());
                                }
                            }
                        }
                        if set.len() > RANGE_CODES {
                            seen.too_many[i] = true;
                        }
                    }
                    number_chunk(cells.iter().copied(), n)
                }
                (None, how) => {
                    // Each distinct value shown once for the import;
                    // values outside the years 1 to 9999 counted.
                    let mut t = KeyChunk::new(show_key(how), n);
                    for r in 0..n {
                        t.push(match self.number(&rows[r * row + off..]) {
                            Cell::Value(x) => {
                                let secs = x - SPSS_TO_1960_DAYS * 86_400.0;
                                let k = match how {
                                    Shown::Date => date_key((secs / 86_400.0).floor(), Shown::Date),
                                    Shown::DateTime => date_key(secs, Shown::DateTime),
                                    _ => date_key(x, Shown::Time),
                                };
                                seen.outside[i] += u64::from(k.is_none());
                                k
                            }
                            _ => None,
                        });
                    }
                    t.chunk()
                }
                (Some(w), _) => {
                    let mut t = TextChunk::default();
                    let mut cut = 0u64;
                    if let [(o, l)] = v.pieces[..] {
                        // One piece: each distinct field decoded once.
                        let l = l.min(w);
                        t.push_fields(
                            (0..n).map(|r| &rows[r * row + o..r * row + o + l]),
                            |r, f| self.text(f, (batch, r, off), v, &mut cut),
                        )?;
                    } else {
                        let mut buf = Vec::with_capacity(w);
                        for r in 0..n {
                            buf.clear();
                            for &(o, l) in &v.pieces {
                                buf.extend_from_slice(&rows[r * row + o..r * row + o + l]);
                            }
                            buf.truncate(w);
                            t.push(self.text(&buf, (batch, r, off), v, &mut cut)?);
                        }
                    }
                    seen.cut[i] += cut;
                    t.chunk()
                }
            });
        }
        Ok((out, seen))
    }
}
