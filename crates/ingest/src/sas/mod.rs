//! SAS data sets (`.sas7bdat`: uncompressed, RLE (`CHAR`) and RDC
//! (`BINARY`) compressed, 32- and 64-bit, either byte order), read as a
//! stream of records decoded on every core into the column sinks
//! ([`ColumnarImport`]), with value labels from a format catalog
//! (`.sas7bcat`) when one is given.
//!
//! The `sas7bdat` crate reads the file's pages: its metadata, deleted
//! rows and decompression. The records it hands over are decoded here,
//! as the transport files' are:
//!
//! - **Numbers** are doubles truncated to 3–8 bytes; a column whose values
//!   in a batch are all integers, or all exact decimals of at most 6
//!   digits, is stored as (scaled) integers, as CSV numbers are.
//! - **Missing values**: `.` is system-missing; the special `.A`–`.Z` and
//!   `._` are user-missing codes labelled `.A`…, each kept apart (the
//!   codes a transport file's get, Stata's codes for `.a`–`.z`).
//! - **Dates, datetimes and times** (by their format: `DATE9.`,
//!   `YYMMDD10.`, `DATETIME20.`, `TIME8.`…) become ISO 8601 text.
//! - **Text** loses its trailing blanks; a blank value is missing. The
//!   encoding is the one the file names unless one is given.
//! - **Value labels**: a variable whose format a catalog defines gets its
//!   labels (numbers, texts, and `.A`–`.Z`).

use crate::columnar::records::{decode_records, per_batch, Batch, Layout};
use crate::columnar::{
    distinct_names, label_key, number_chunk, refuse_text_options, Cell, Chunk, ColumnarImport,
    KeyChunk, TextChunk,
};
use crate::core::dates::{date_key, show_key, tag_key, Shown};
use crate::core::pipeline::ImportSummary;
use crate::error::{Error, Result};
use crate::options::{Encoding, ImportOptions};
use crate::xport::values::{shown, special_code};
use std::collections::BTreeSet;
use std::io::Read;
use std::ops::ControlFlow;
use std::path::Path;
use std::sync::mpsc::{sync_channel, Receiver};
use std::sync::{Arc, Mutex};

/// The first 32 bytes of every SAS data set.
const MAGIC: [u8; 32] = [
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0xC2, 0xEA, 0x81, 0x60,
    0xB3, 0x14, 0x11, 0xCF, 0xBD, 0x92, 0x08, 0x00, 0x09, 0xC7, 0x31, 0x8C, 0x18, 0x1F, 0x10, 0x11,
];

/// Whether `head` (a file's first bytes) starts a SAS data set.
pub(crate) fn is_sas7bdat(head: &[u8]) -> bool {
    head.len() >= 32 && head[..32] == MAGIC
}

/// Bytes of records handed from the page reader to the decoders at a time.
const HANDOFF: usize = 1 << 20;

/// One variable as the file describes it.
struct Var {
    name: String,
    label: Option<String>,
    /// Its format's name (upper case, no width), `$` first for a text's.
    format: String,
    /// Its format with width and decimals, for notes.
    format_spec: String,
    offset: usize,
    width: usize,
    /// `None` for text; how a number is shown otherwise.
    shown: Option<Shown>,
}

/// Imports the SAS data set `input` into a dataset at `target` (replacing
/// an existing one only with `force`), with value labels from the format
/// catalog `opts.catalog` when given.
pub fn import_sas7bdat(
    input: &Path,
    target: &Path,
    force: bool,
    opts: &ImportOptions,
) -> Result<ImportSummary> {
    refuse_text_options(input, opts, "a SAS data set")?;
    let mut head = [0u8; 32];
    let got = std::fs::File::open(input)
        .and_then(|mut f| crate::columnar::records::fill(&mut f, &mut head))
        .map_err(|e| Error::Input {
            path: input.to_path_buf(),
            reason: format!("cannot open: {e}"),
        })?;
    if !is_sas7bdat(&head[..got]) {
        return Err(Error::Format {
            path: input.to_path_buf(),
            offset: 0,
            reason: "not a SAS data set: it does not start with the .sas7bdat magic number".into(),
        });
    }
    let mut ds = guarded(|| {
        ::sas7bdat::Dataset::open_with(
            input,
            ::sas7bdat::OpenOptions::builder()
                .io_backend(::sas7bdat::IoBackendPreference::Buffered)
                .build(),
        )
    })
    .map_err(|e| {
        damaged(
            input,
            format!("its header and metadata cannot be read: {e}"),
        )
    })?;
    let mut notes = Vec::new();
    if let Some(cat) = &opts.catalog {
        guarded(|| ds.attach_catalog(cat)).map_err(|e| Error::Input {
            path: cat.clone(),
            reason: format!("cannot read it as a SAS format catalog (.sas7bcat): {e}"),
        })?;
    } else if let Some(beside) = catalog_beside(input) {
        notes.push(format!(
            "a format catalog {} lies beside the file: give it as the catalog to get its value labels",
            beside.display()
        ));
    }
    let meta = ds.metadata().clone();
    if let Some(cat) = &opts.catalog {
        let used = ds.columns().iter().any(|c| {
            let f = ::sas7bdat::catalog::normalize_format_name(c.format.as_deref().unwrap_or(""));
            !f.is_empty() && meta.label_sets.contains_key(&f)
        });
        if !used {
            notes.push(format!(
                "the catalog {} defines none of the formats the variables use: no value labels came from it",
                cat.display()
            ));
        }
    }
    let row_len = meta.row_len as usize;
    let vars: Vec<Var> = ds
        .columns()
        .iter()
        .map(|c| {
            let format =
                ::sas7bdat::catalog::normalize_format_name(c.format.as_deref().unwrap_or(""));
            let numeric = c.logical_type.is_numeric();
            Var {
                name: c.name.clone(),
                label: c.label.clone().filter(|l| !l.is_empty()),
                shown: numeric.then(|| shown(format.trim_start_matches('$'))),
                format_spec: c.format_spec().unwrap_or_default(),
                format,
                offset: c.offset as usize,
                width: c.physical_width as usize,
            }
        })
        .collect();
    for v in &vars {
        let fits = v.offset.checked_add(v.width).is_some_and(|e| e <= row_len);
        let numeric_ok = v.shown.is_none() || (2..=8).contains(&v.width);
        if !fits || !numeric_ok {
            return Err(damaged(
                input,
                format!(
                    "variable {} is said to be {} bytes at byte {} of records of {row_len} bytes{}: the file is damaged",
                    v.name,
                    v.width,
                    v.offset,
                    if numeric_ok { "" } else { " (a number takes 2 to 8)" }
                ),
            ));
        }
    }
    let enc = match (opts.encoding, &meta.encoding) {
        (Some(e), _) => e,
        (None, Some(name)) => Encoding::named(name).ok_or_else(|| Error::Input {
            path: input.to_path_buf(),
            reason: format!(
                "the file's text is in the encoding {name}, which microtab does not know (give the encoding to read it as such)"
            ),
        })?,
        (None, None) => {
            notes.push(
                "the file names an encoding microtab does not know: its text was read as Windows-1252".into(),
            );
            Encoding::Windows1252
        }
    };
    let given: Vec<String> = vars.iter().map(|v| v.name.clone()).collect();
    let (names, renamed) = distinct_names(&given);
    notes.extend(renamed);
    let text: Vec<bool> = vars
        .iter()
        .map(|v| !matches!(v.shown, Some(Shown::Number)))
        .collect();
    let records = meta.row_count.saturating_sub(meta.deleted_row_count);
    let mut imp = ColumnarImport::create(input, target, force, &names, &text, opts.plain)?;
    let failed: Arc<Mutex<Option<Error>>> = Arc::default();
    let (tx, rx) = sync_channel::<std::result::Result<Vec<u8>, Error>>(4);
    let pages = {
        let ds = ds.clone();
        let path = input.to_path_buf();
        std::thread::spawn(move || read_pages(&ds, &path, row_len, records, tx))
    };
    let reader = Handoff {
        rx,
        buf: Vec::new(),
        at: 0,
        failed: Arc::clone(&failed),
    };
    let lay = Layout {
        start: 0,
        row_len: row_len.max(1),
        records: Some(if row_len == 0 || vars.is_empty() {
            0
        } else {
            records
        }),
        per_batch: per_batch(row_len, vars.len()),
    };
    let dec = Decoder {
        path: input,
        vars: &vars,
        row_len: lay.row_len,
        big: meta.endianness == ::sas7bdat::Endianness::Big,
        enc,
    };
    let mut seen = Seen::new(vars.len());
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
    let read = pages.join();
    let stashed = failed.lock().unwrap_or_else(|e| e.into_inner()).take();
    match (decoded, read, stashed) {
        (_, Err(_), _) => {
            return Err(damaged(
                input,
                "the SAS reader failed on its pages: the file is damaged".into(),
            ))
        }
        (Err(_), _, Some(e)) => return Err(e),
        (Err(e), _, None) => return Err(e),
        (Ok(()), _, _) => {}
    }
    for (i, v) in vars.iter().enumerate() {
        if seen.outside[i] > 0 {
            notes.push(format!(
                "variable {} (format {}): {} values outside the years 1 to 9999 are left missing",
                v.name, v.format_spec, seen.outside[i]
            ));
        }
    }
    imp.set_about(meta.file_label.as_deref(), None);
    if meta.deleted_row_count > 0 {
        notes.push(format!(
            "{} records the file marks as deleted were left out",
            meta.deleted_row_count
        ));
    }
    let sets = &meta.label_sets;
    let specials = &seen.specials;
    imp.finish_noting(
        None,
        |i, var, dict, notes| {
            let v = &vars[i];
            var.label = v.label.clone();
            let tags: BTreeSet<u8> = specials[i].clone();
            let labels = sets.get(&v.format).filter(|_| !v.format.is_empty());
            let mut left_out = Vec::new();
            // Labels of special missing values whose letter the catalog
            // reader does not give (it reads only SAS's 2–27 tags).
            let mut untold = Vec::new();
            let mut tag_labels: Vec<(u8, String)> = Vec::new();
            if let Some(set) = labels {
                for l in &set.labels {
                    match (&l.key, v.shown) {
                        (::sas7bdat::ValueKey::String(k), None) => {
                            let k = k.trim_end();
                            if !k.is_empty() {
                                var.value_labels.insert(k.to_string(), l.label.clone());
                            }
                        }
                        (::sas7bdat::ValueKey::Tagged(t), Some(_)) => {
                            if t.is_ascii_uppercase() || *t == '_' {
                                tag_labels.push((*t as u8, l.label.clone()));
                            } else {
                                untold.push(format!("{:?}", l.label));
                            }
                        }
                        (::sas7bdat::ValueKey::Numeric(x), Some(Shown::Number)) => {
                            match label_key(var, *x) {
                                Some(k) => {
                                    var.value_labels.insert(k, l.label.clone());
                                }
                                None => left_out.push(microtab_store::codec::format_float(*x)),
                            }
                        }
                        (::sas7bdat::ValueKey::Integer(x), Some(Shown::Number)) => {
                            match label_key(var, f64::from(*x)) {
                                Some(k) => {
                                    var.value_labels.insert(k, l.label.clone());
                                }
                                None => left_out.push(x.to_string()),
                            }
                        }
                        _ => left_out.push(format!("{:?}", l.label)),
                    }
                }
            }
            // Special missing values: a code (a number's) or the text `.A`
            // (a date's), labelled by the catalog or by their name.
            let all_tags: BTreeSet<u8> = tags
                .iter()
                .copied()
                .chain(tag_labels.iter().map(|(t, _)| *t))
                .collect();
            for t in all_tags {
                let name = format!(".{}", t as char);
                let label = tag_labels
                    .iter()
                    .find(|(x, _)| *x == t)
                    .map_or_else(|| name.clone(), |(_, l)| l.clone());
                match var.kind {
                    microtab_store::Kind::String => {
                        if let Ok(k) = dict.binary_search(&name) {
                            var.missing_codes.push(k as f64);
                        }
                    }
                    _ => {
                        let code = special_code(t);
                        var.missing_codes.push(code);
                        var.value_labels
                            .insert(microtab_store::codec::format_float(code), label);
                    }
                }
            }
            if !untold.is_empty() {
                notes.push(
                    format!(
                        "variable {} (format {}): the catalog labels special missing values as {}, but which letters they label cannot be read: those labels are left out",
                        v.name,
                        v.format,
                        untold.join(", ")
                    )
                    .into(),
                );
            }
            if !left_out.is_empty() {
                notes.push(
                    format!(
                        "variable {} (format {}): the catalog's labels of {} are left out: {}",
                        v.name,
                        v.format,
                        left_out.join(", "),
                        if v.shown.is_some_and(|s| s != Shown::Number) {
                            "the values are dates, stored as text"
                        } else {
                            "the column cannot hold them"
                        }
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

/// A format catalog named as the data set, beside it (`x.sas7bcat` or
/// `formats.sas7bcat`).
fn catalog_beside(input: &Path) -> Option<std::path::PathBuf> {
    let dir = input.parent()?;
    let stem = input.file_stem()?.to_string_lossy().to_string();
    let wanted = [format!("{stem}.sas7bcat"), "formats.sas7bcat".to_string()];
    std::fs::read_dir(if dir.as_os_str().is_empty() {
        Path::new(".")
    } else {
        dir
    })
    .ok()?
    .filter_map(|e| e.ok())
    .map(|e| e.path())
    .find(|p| {
        p.is_file()
            && p.file_name().is_some_and(|n| {
                wanted
                    .iter()
                    .any(|w| n.to_string_lossy().eq_ignore_ascii_case(w))
            })
    })
}

fn damaged(path: &Path, reason: String) -> Error {
    Error::Input {
        path: path.to_path_buf(),
        reason,
    }
}

/// Runs the `sas7bdat` crate's `f`: its error, or a panic on a damaged
/// file, as text.
fn guarded<T>(f: impl FnOnce() -> ::sas7bdat::Result<T>) -> std::result::Result<T, String> {
    match std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)) {
        Ok(Ok(x)) => Ok(x),
        Ok(Err(e)) => Err(e.to_string()),
        Err(_) => Err("the file is damaged (its structure is inconsistent)".into()),
    }
}

/// The page reader: the data set's records (decompressed, deleted ones
/// left out), `HANDOFF` bytes at a time, to `tx`; an error if they are not
/// the `records` the header announces.
fn read_pages(
    ds: &::sas7bdat::Dataset,
    path: &Path,
    row_len: usize,
    records: u64,
    tx: std::sync::mpsc::SyncSender<std::result::Result<Vec<u8>, Error>>,
) {
    if row_len == 0 {
        return;
    }
    let mut buf = Vec::with_capacity(HANDOFF + row_len);
    let mut n = 0u64;
    let mut gone = false;
    let scanned = guarded(|| {
        ds.scan().visit_raw_rows(|row| {
            if row.bytes.len() != row_len {
                return Err(::sas7bdat::Error::Corruption(
                    ::sas7bdat::CorruptionError::Other(format!(
                        "a record of {} bytes where records are {row_len}",
                        row.bytes.len()
                    )),
                ));
            }
            if n == records {
                // More records than the header announces: the rest are
                // not read, as other readers do.
                return Ok(ControlFlow::Break(()));
            }
            buf.extend_from_slice(row.bytes);
            n += 1;
            if buf.len() >= HANDOFF {
                let full = std::mem::replace(&mut buf, Vec::with_capacity(HANDOFF + row_len));
                if tx.send(Ok(full)).is_err() {
                    gone = true;
                    return Ok(ControlFlow::Break(()));
                }
            }
            Ok(ControlFlow::Continue(()))
        })
    });
    if gone {
        return;
    }
    let err = match scanned {
        Err(e) => Some(damaged(
            path,
            if n == 0 {
                format!("its data pages cannot be read: {e}: the file is truncated or damaged")
            } else {
                format!(
                    "the data cannot be read after record {n}: {e}: the file is truncated or damaged"
                )
            },
        )),
        Ok(_) if n < records => Some(damaged(
            path,
            format!(
                "the data end after record {n} of the {records} its header announces: the file is truncated or damaged"
            ),
        )),
        Ok(_) => None,
    };
    if !buf.is_empty() && tx.send(Ok(buf)).is_err() {
        return;
    }
    if let Some(e) = err {
        let _ = tx.send(Err(e));
    }
}

/// The page reader's records as a byte stream; its error is kept in
/// `failed` (the stream only says that reading failed).
struct Handoff {
    rx: Receiver<std::result::Result<Vec<u8>, Error>>,
    buf: Vec<u8>,
    at: usize,
    failed: Arc<Mutex<Option<Error>>>,
}

impl Read for Handoff {
    fn read(&mut self, out: &mut [u8]) -> std::io::Result<usize> {
        while self.at == self.buf.len() {
            match self.rx.recv() {
                Ok(Ok(b)) => {
                    self.buf = b;
                    self.at = 0;
                }
                Ok(Err(e)) => {
                    let msg = e.to_string();
                    *self.failed.lock().unwrap_or_else(|e| e.into_inner()) = Some(e);
                    return Err(std::io::Error::other(msg));
                }
                Err(_) => return Ok(0),
            }
        }
        let k = out.len().min(self.buf.len() - self.at);
        out[..k].copy_from_slice(&self.buf[self.at..self.at + k]);
        self.at += k;
        Ok(k)
    }
}

/// What a batch saw beside its values.
struct Seen {
    /// Per variable, the special missing values seen.
    specials: Vec<BTreeSet<u8>>,
    /// Per date variable, the values outside the years 1 to 9999.
    outside: Vec<u64>,
}

impl Seen {
    fn new(n: usize) -> Seen {
        Seen {
            specials: vec![BTreeSet::new(); n],
            outside: vec![0; n],
        }
    }

    fn merge(&mut self, o: Seen) {
        for (a, b) in self.specials.iter_mut().zip(o.specials) {
            a.extend(b);
        }
        for (a, b) in self.outside.iter_mut().zip(o.outside) {
            *a += b;
        }
    }
}

/// A numeric field: a number, system-missing, or a special missing value
/// (`b'A'`–`b'Z'`, `b'_'`).
#[derive(Debug, Clone, Copy, PartialEq)]
enum Num {
    Value(f64),
    Missing,
    Special(u8),
}

/// Decodes a numeric field: a double whose `b.len()` most significant
/// bytes the file keeps (in its byte order). A NaN is missing, its tag
/// the complement of its fifth byte: `.A`–`.Z` and `._` as their letters
/// (or SAS's other scheme, 2–27 and 0), anything else system-missing.
fn number(b: &[u8], big: bool) -> Num {
    let mut full = [0u8; 8];
    let w = b.len().min(8);
    let bits = if big {
        full[..w].copy_from_slice(&b[..w]);
        u64::from_be_bytes(full)
    } else {
        full[8 - w..].copy_from_slice(&b[..w]);
        u64::from_le_bytes(full)
    };
    let x = f64::from_bits(bits);
    if x.is_nan() {
        let tag = !((bits >> 40) as u8);
        return match tag {
            0 => Num::Special(b'_'),
            2..=27 => Num::Special(b'A' + tag - 2),
            b'A'..=b'Z' | b'_' => Num::Special(tag),
            _ => Num::Missing,
        };
    }
    if x.is_infinite() {
        return Num::Missing;
    }
    Num::Value(x)
}

struct Decoder<'a> {
    path: &'a Path,
    vars: &'a [Var],
    row_len: usize,
    big: bool,
    enc: Encoding,
}

impl Decoder<'_> {
    fn decode(&self, batch: &Batch) -> Result<(Vec<Chunk>, Seen)> {
        let mut seen = Seen::new(self.vars.len());
        let mut out = Vec::with_capacity(self.vars.len());
        let rl = self.row_len;
        let n = batch.bytes.len() / rl;
        let rows = &batch.bytes;
        for (i, v) in self.vars.iter().enumerate() {
            let field = |r: usize| &rows[r * rl + v.offset..r * rl + v.offset + v.width];
            out.push(match v.shown {
                Some(Shown::Number) => {
                    let cells: Vec<Cell> = (0..n)
                        .map(|r| match number(field(r), self.big) {
                            Num::Value(x) => Cell::Value(x),
                            Num::Missing => Cell::Missing,
                            Num::Special(t) => {
                                seen.specials[i].insert(t);
                                Cell::Code(special_code(t))
                            }
                        })
                        .collect();
                    number_chunk(cells.into_iter(), n)
                }
                Some(how) => {
                    let mut t = KeyChunk::new(show_key(how), n);
                    for r in 0..n {
                        t.push(match number(field(r), self.big) {
                            Num::Value(x) => {
                                let k = date_key(x, how);
                                // Outside the years 1 to 9999: missing,
                                // counted in a note.
                                seen.outside[i] += u64::from(k.is_none());
                                k
                            }
                            Num::Missing => None,
                            Num::Special(tag) => {
                                seen.specials[i].insert(tag);
                                Some(tag_key(tag))
                            }
                        });
                    }
                    t.chunk()
                }
                None => {
                    let mut t = TextChunk::default();
                    t.push_fields((0..n).map(field), |r, f| {
                        let end = f
                            .iter()
                            .rposition(|&b| b != b' ' && b != 0)
                            .map_or(0, |k| k + 1);
                        let s = crate::core::binary::decode(
                            &f[..end],
                            self.enc,
                            || {
                                format!(
                                    "record {}, variable {}",
                                    batch.first + r as u64 + 1,
                                    v.name
                                )
                            },
                            self.path,
                            0,
                        )
                        .map_err(|e| match e {
                            Error::Format { path, reason, .. } => Error::Input { path, reason },
                            e => e,
                        })?;
                        Ok((!s.is_empty()).then_some(s))
                    })?;
                    t.chunk()
                }
            });
        }
        Ok((out, seen))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_of_every_width_and_missing_tags() {
        let le = |x: f64, w: usize| number(&x.to_le_bytes()[8 - w..], false);
        let be = |x: f64, w: usize| number(&x.to_be_bytes()[..w], true);
        assert_eq!(le(1.5, 8), Num::Value(1.5));
        assert_eq!(be(1.5, 8), Num::Value(1.5));
        // 3 bytes keep 1.5 and 100 exactly.
        assert_eq!(le(100.0, 3), Num::Value(100.0));
        assert_eq!(be(-2.25, 3), Num::Value(-2.25));
        // A tagged NaN: the fifth byte is the complement of the tag.
        let nan = |tag: u8| f64::from_bits(0xFFFF_0000_0000_0000 | (u64::from(!tag) << 40));
        assert_eq!(le(nan(b'A'), 8), Num::Special(b'A'));
        assert_eq!(be(nan(b'Z'), 8), Num::Special(b'Z'));
        assert_eq!(le(nan(b'_'), 8), Num::Special(b'_'));
        assert_eq!(le(nan(b'.'), 8), Num::Missing);
        assert_eq!(le(nan(2), 8), Num::Special(b'A'));
        assert_eq!(le(nan(0), 8), Num::Special(b'_'));
        assert!(is_sas7bdat(&MAGIC));
        assert!(!is_sas7bdat(&MAGIC[..31]));
    }
}
