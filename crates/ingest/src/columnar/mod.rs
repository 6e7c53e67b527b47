//! Import from columnar sources (Parquet and Arrow files, in the
//! `microtab-arrow` crate): the caller decodes each batch of records into
//! typed column chunks and [`ColumnarImport`] writes them with the same
//! column sinks as the text importers — the narrowest type that holds the
//! values, re-encoding when a later batch needs a wider one, bit-packing,
//! checksums — and publishes the dataset atomically on
//! [`finish`](ColumnarImport::finish). Dropping it unfinished leaves the
//! target as it was.

pub(crate) mod records;

use crate::core::column::{ColBuf, NULL_I64};
use crate::core::dataset::{create_dataset, publish, Read};
use crate::core::pipeline::ImportSummary;
use crate::core::sink::Sink;
use crate::error::{Error, Result};
use crate::note::Note;
use microtab_store::{DatasetWriter, Design, Variable};
use std::path::{Path, PathBuf};

/// One batch of one column's values.
#[derive(Debug, Clone)]
pub enum Chunk {
    /// Integers, `decimals` implied (the value is `vals[i] / 10^decimals`);
    /// `None` is missing. `i64::MIN` cannot be stored (microtab keeps it
    /// as the system-missing marker of wide columns): an error.
    Int {
        /// Scaled values.
        vals: Vec<Option<i64>>,
        /// Implied decimals.
        decimals: u32,
    },
    /// Floating-point numbers; NaN is missing.
    Float(Vec<f64>),
    /// Text: each record's position in `dict`, `None` when missing.
    Text {
        /// Positions into `dict`.
        codes: Vec<Option<u32>>,
        /// This batch's distinct values (any order, no duplicates needed).
        dict: Vec<String>,
    },
    /// Text given by keys (a date's number, say): each record's position
    /// in `keys`, `None` when missing. Each distinct key of a column is
    /// shown as text once for the whole import, by `show`; every batch of
    /// a column must have the same `show`, and `show` must give distinct
    /// keys distinct texts.
    Keyed {
        /// Positions into `keys`.
        codes: Vec<Option<u32>>,
        /// This batch's distinct keys.
        keys: Vec<u64>,
        /// A key's text.
        show: fn(u64) -> String,
    },
}

/// The columns of an import, which check and convert a batch (on any
/// thread).
pub(crate) struct Shape<'a> {
    names: &'a [String],
    text: &'a [bool],
    input: &'a Path,
}

impl Shape<'_> {
    /// One batch as column buffers: one chunk per column, in the order of
    /// the names, all of the same length; `rows` records precede it (for
    /// errors).
    pub(crate) fn bufs(&self, chunks: Vec<Chunk>, rows: u64) -> Result<Vec<ColBuf>> {
        let bad = |reason: String| Error::Input {
            path: self.input.to_path_buf(),
            reason,
        };
        if chunks.len() != self.names.len() {
            return Err(bad(format!(
                "a batch has {} columns, expected {}",
                chunks.len(),
                self.names.len()
            )));
        }
        let mut n = None;
        let mut bufs = Vec::with_capacity(chunks.len());
        for (i, c) in chunks.into_iter().enumerate() {
            let len = match &c {
                Chunk::Int { vals, .. } => vals.len(),
                Chunk::Float(v) => v.len(),
                Chunk::Text { codes, .. } | Chunk::Keyed { codes, .. } => codes.len(),
            };
            if *n.get_or_insert(len) != len {
                return Err(bad(format!(
                    "column {}: {len} values in a batch of {} records",
                    self.names[i],
                    n.unwrap_or(0)
                )));
            }
            let name = &self.names[i];
            bufs.push(match c {
                Chunk::Int { vals, decimals } if !self.text[i] => {
                    if decimals > 18 {
                        return Err(bad(format!("column {name}: {decimals} decimals; microtab keeps at most 18 (import it as floating point)")));
                    }
                    let (mut min, mut max, mut nulls) = (i64::MAX, i64::MIN, 0u64);
                    let mut out = Vec::with_capacity(vals.len());
                    for (r, v) in vals.into_iter().enumerate() {
                        match v {
                            Some(NULL_I64) => {
                                return Err(bad(format!(
                                    "record {}, column {name}: the value {} is the one 64-bit integer microtab cannot store (it marks missing values); expected a value above it",
                                    rows + r as u64 + 1,
                                    i64::MIN
                                )))
                            }
                            Some(x) => {
                                min = min.min(x);
                                max = max.max(x);
                                out.push(x);
                            }
                            None => {
                                nulls += 1;
                                out.push(NULL_I64);
                            }
                        }
                    }
                    ColBuf::Int {
                        vals: out,
                        decimals,
                        nulls,
                        min,
                        max,
                    }
                }
                Chunk::Float(vals) if !self.text[i] => {
                    let (mut min, mut max, mut nulls) = (f64::INFINITY, f64::NEG_INFINITY, 0u64);
                    for &x in &vals {
                        if x.is_nan() {
                            nulls += 1;
                        } else if x.is_infinite() {
                            return Err(bad(format!(
                                "column {name}: an infinite value ({x}); expected finite numbers or missing"
                            )));
                        } else {
                            min = min.min(x);
                            max = max.max(x);
                        }
                    }
                    ColBuf::Float {
                        vals,
                        nulls,
                        min,
                        max,
                    }
                }
                Chunk::Text { codes, dict } if self.text[i] => {
                    let mut nulls = 0;
                    let codes = codes
                        .into_iter()
                        .map(|c| match c {
                            Some(c) if (c as usize) < dict.len() => Ok(c),
                            Some(c) => Err(bad(format!(
                                "column {name}: code {c} outside its batch's {} values",
                                dict.len()
                            ))),
                            None => {
                                nulls += 1;
                                Ok(u32::MAX)
                            }
                        })
                        .collect::<Result<Vec<u32>>>()?;
                    ColBuf::Str { codes, dict, nulls }
                }
                Chunk::Keyed { codes, keys, show } if self.text[i] => {
                    let mut nulls = 0;
                    let codes = codes
                        .into_iter()
                        .map(|c| match c {
                            Some(c) if (c as usize) < keys.len() => Ok(c),
                            Some(c) => Err(bad(format!(
                                "column {name}: code {c} outside its batch's {} keys",
                                keys.len()
                            ))),
                            None => {
                                nulls += 1;
                                Ok(u32::MAX)
                            }
                        })
                        .collect::<Result<Vec<u32>>>()?;
                    ColBuf::Keyed {
                        codes,
                        keys,
                        show,
                        nulls,
                    }
                }
                _ => {
                    return Err(bad(format!(
                        "column {name}: a batch of the wrong kind (text and numbers mixed)"
                    )))
                }
            });
        }
        Ok(bufs)
    }
}

/// A dataset being written from typed column batches.
pub struct ColumnarImport {
    ds: DatasetWriter,
    sinks: Vec<Sink>,
    names: Vec<String>,
    text: Vec<bool>,
    rows: u64,
    input: PathBuf,
    bytes_in: u64,
}

impl ColumnarImport {
    /// Starts a dataset at `target` (replaced on finish only when `force`
    /// is set) with the columns `names`, `text[i]` saying which are text.
    /// `input` names the source in errors and in the manifest; `plain`
    /// turns bit-packing off.
    pub fn create(
        input: &Path,
        target: &Path,
        force: bool,
        names: &[String],
        text: &[bool],
        plain: bool,
    ) -> Result<ColumnarImport> {
        let mut seen = std::collections::HashSet::new();
        for n in names {
            if !seen.insert(n.to_ascii_lowercase()) {
                return Err(Error::Input {
                    path: input.to_path_buf(),
                    reason: format!("column {n} appears twice (names are compared without case)"),
                });
            }
        }
        let ds = create_dataset(
            input,
            target,
            force,
            &microtab_io::IoConfig::default(),
            names.len(),
            plain,
        )?;
        Ok(ColumnarImport {
            ds,
            sinks: names
                .iter()
                .zip(text)
                .map(|(n, &t)| Sink::new(n, t))
                .collect(),
            names: names.to_vec(),
            text: text.to_vec(),
            rows: 0,
            input: input.to_path_buf(),
            bytes_in: std::fs::metadata(input).map(|m| m.len()).unwrap_or(0),
        })
    }

    /// Appends one batch: one chunk per column, in the order of the names,
    /// all of the same length (errors count records from the first batch).
    pub fn append(&mut self, chunks: Vec<Chunk>) -> Result<()> {
        let bufs = self.shape().bufs(chunks, self.rows)?;
        self.append_bufs(bufs)
    }

    /// What checks a batch: the columns and the input (shared with
    /// decoding threads).
    pub(crate) fn shape(&self) -> Shape<'_> {
        Shape {
            names: &self.names,
            text: &self.text,
            input: &self.input,
        }
    }

    /// Appends one batch checked by [`Shape::bufs`].
    pub(crate) fn append_bufs(&mut self, bufs: Vec<ColBuf>) -> Result<()> {
        let n = bufs.first().map_or(0, ColBuf::len) as u64;
        for (sink, b) in self.sinks.iter_mut().zip(bufs) {
            sink.append(&mut self.ds, b)?;
        }
        self.rows += n;
        Ok(())
    }

    /// Records the dataset's title and description (a file's dataset
    /// label; blank: none).
    pub fn set_about(&mut self, title: Option<&str>, description: Option<&str>) {
        self.ds.set_title(title);
        self.ds.set_description(description);
    }

    /// Records appended so far.
    pub fn rows(&self) -> u64 {
        self.rows
    }

    /// Finishes every column, describes each variable from `codebook`
    /// (a DDI: labels, value labels, missing codes) when it names it, then
    /// lets `describe` complete its metadata (label, value labels, missing
    /// codes — in stored units — given the variable and a text variable's
    /// sorted dictionary), stores `design`, and publishes the dataset.
    pub fn finish(
        self,
        codebook: Option<&crate::ddi::Codebook>,
        mut describe: impl FnMut(&mut Variable, &[String]) -> Result<()>,
        design: Option<Design>,
        notes: impl IntoIterator<Item = impl Into<Note>>,
    ) -> Result<ImportSummary> {
        self.finish_noting(codebook, |_, v, d, _| describe(v, d), design, notes)
    }

    /// [`finish`](Self::finish), with `describe` also given the column's
    /// position (in the order of the names `create` took) and the notes,
    /// to add what it leaves out.
    pub(crate) fn finish_noting(
        mut self,
        codebook: Option<&crate::ddi::Codebook>,
        mut describe: impl FnMut(usize, &mut Variable, &[String], &mut Vec<Note>) -> Result<()>,
        design: Option<Design>,
        notes: impl IntoIterator<Item = impl Into<Note>>,
    ) -> Result<ImportSummary> {
        let mut notes: Vec<Note> = notes.into_iter().map(Into::into).collect();
        if let Some(cb) = codebook.filter(|cb| cb.title.is_some() || cb.description.is_some()) {
            self.set_about(cb.title.as_deref(), cb.description.as_deref());
        }
        for (i, sink) in std::mem::take(&mut self.sinks).into_iter().enumerate() {
            let (mut var, dict) = sink.finish(&mut self.ds)?;
            if let Some(dv) = codebook.and_then(|cb| cb.variable(&var.name)) {
                crate::ddi::describe(&mut var, dv, &dict, &self.ds, self.rows, &mut notes)?;
            }
            describe(i, &mut var, &dict, &mut notes)?;
            self.ds.add_variable(var);
        }
        if let Some(d) = design {
            // The checks the CLI's design command makes: a numeric weight, and
            // replicate weights present for every record.
            let var = |n: &str| self.ds.variables().find(|v| v.name.eq_ignore_ascii_case(n));
            let weight_ok = var(&d.weight).is_some_and(|v| v.kind != microtab_store::Kind::String);
            let reps_ok = d.replicates.as_ref().is_none_or(|r| {
                r.weights.iter().all(|w| {
                    var(w).is_some_and(|v| {
                        v.kind != microtab_store::Kind::String
                            && v.nulls == 0
                            && v.missing_codes.is_empty()
                    })
                })
            });
            if weight_ok && reps_ok {
                self.ds.set_design(d);
            } else {
                notes.push(Note::from("the survey design in the file does not fit its columns (a text weight, or replicate weights with missing values): not set"));
            }
        }
        let read = Read {
            bytes_in: self.bytes_in,
            bytes_text: self.bytes_in,
            sampled: None,
        };
        publish(self.ds, self.rows, read, notes)
    }
}

/// A batch of a text column, its values numbered as they come.
#[derive(Default)]
pub(crate) struct TextChunk {
    codes: Vec<Option<u32>>,
    dict: Vec<String>,
    seen: ahash::AHashMap<String, u32>,
}

impl TextChunk {
    pub(crate) fn push(&mut self, s: Option<String>) {
        let code = s.map(|s| self.intern(s));
        self.codes.push(code);
    }

    /// The code of `s` in this batch's values.
    pub(crate) fn intern(&mut self, s: String) -> u32 {
        match self.seen.get(&s) {
            Some(&c) => c,
            None => {
                let c = self.dict.len() as u32;
                self.seen.insert(s.clone(), c);
                self.dict.push(s);
                c
            }
        }
    }

    /// Records: one `push` of the text that `make` gives for each of
    /// `fields` (fixed-width raw bytes), made once per distinct field.
    pub(crate) fn push_fields<'f>(
        &mut self,
        fields: impl Iterator<Item = &'f [u8]>,
        mut make: impl FnMut(usize, &'f [u8]) -> crate::error::Result<Option<String>>,
    ) -> crate::error::Result<()> {
        let mut memo: ahash::AHashMap<&'f [u8], Option<u32>> = ahash::AHashMap::new();
        for (r, f) in fields.enumerate() {
            let c = match memo.get(f) {
                Some(&c) => c,
                None => {
                    let c = make(r, f)?.map(|s| self.intern(s));
                    memo.insert(f, c);
                    c
                }
            };
            self.codes.push(c);
        }
        Ok(())
    }

    pub(crate) fn chunk(self) -> Chunk {
        Chunk::Text {
            codes: self.codes,
            dict: self.dict,
        }
    }
}

/// A batch of a text column given by keys ([`Chunk::Keyed`]), its keys
/// numbered as they come.
pub(crate) struct KeyChunk {
    codes: Vec<Option<u32>>,
    keys: Vec<u64>,
    seen: ahash::AHashMap<u64, u32>,
    show: fn(u64) -> String,
}

impl KeyChunk {
    /// An empty batch whose keys `show` shows.
    pub(crate) fn new(show: fn(u64) -> String, cap: usize) -> KeyChunk {
        KeyChunk {
            codes: Vec::with_capacity(cap),
            keys: Vec::new(),
            seen: ahash::AHashMap::new(),
            show,
        }
    }

    /// The next record: the text of `key`, or missing.
    pub(crate) fn push(&mut self, key: Option<u64>) {
        let code = key.map(|k| {
            *self.seen.entry(k).or_insert_with(|| {
                self.keys.push(k);
                (self.keys.len() - 1) as u32
            })
        });
        self.codes.push(code);
    }

    pub(crate) fn chunk(self) -> Chunk {
        Chunk::Keyed {
            codes: self.codes,
            keys: self.keys,
            show: self.show,
        }
    }
}

/// A batch of numbers (`None` missing) as scaled integers when every
/// value is an exact decimal of at most 6 digits (its double the one
/// nearest the decimal, as a CSV number's is); `None` when one is not.
pub(crate) fn decimals(vals: impl Iterator<Item = Option<f64>> + Clone, n: usize) -> Option<Chunk> {
    const LIMIT: f64 = 9_007_199_254_740_992.0; // 2^53
    for d in 0..=6u32 {
        let scale = 10f64.powi(d as i32);
        let mut out = Vec::with_capacity(n);
        let exact = vals.clone().all(|v| match v {
            Some(x) => {
                let m = (x * scale).round();
                let ok = m.abs() < LIMIT && m / scale == x;
                out.push(Some(m as i64));
                ok
            }
            None => {
                out.push(None);
                true
            }
        });
        if exact {
            return Some(Chunk::Int {
                vals: out,
                decimals: d,
            });
        }
    }
    None
}

/// `names` made distinct without regard to case (microtab's rule; Stata
/// and SAS files may hold `x` and `X`): a later name that repeats an
/// earlier one gets the first free suffix `_2`, `_3`…; a note for each.
pub(crate) fn distinct_names(names: &[String]) -> (Vec<String>, Vec<String>) {
    let mut taken: std::collections::HashSet<String> =
        names.iter().map(|n| n.to_lowercase()).collect();
    let mut seen = std::collections::HashSet::new();
    let mut notes = Vec::new();
    let out = names
        .iter()
        .map(|n| {
            if seen.insert(n.to_lowercase()) {
                return n.clone();
            }
            let mut k = 2;
            let new = loop {
                let c = format!("{n}_{k}");
                if taken.insert(c.to_lowercase()) {
                    break c;
                }
                k += 1;
            };
            notes.push(format!(
                "variable {n} repeats an earlier name (names are compared without case): imported as {new}"
            ));
            new
        })
        .collect();
    (out, notes)
}

/// The options a file that carries its own types, labels and missing
/// values (SAS, Stata) refuses: an error naming those given, `what` the
/// kind of file ("a Stata file").
pub(crate) fn refuse_text_options(
    input: &Path,
    opts: &crate::options::ImportOptions,
    what: &str,
) -> Result<()> {
    let given: Vec<&str> = [
        (opts.delimiter.is_some(), "a delimiter"),
        (!opts.types.is_empty(), "column types"),
        (!opts.missing.is_empty(), "missing codes"),
        (
            opts.na.is_some() || opts.na_text.is_some(),
            "texts read as missing",
        ),
        (opts.codebook.is_some(), "a codebook"),
        (opts.record_type.is_some(), "a record type"),
    ]
    .iter()
    .filter(|(set, _)| *set)
    .map(|(_, what)| *what)
    .collect();
    if given.is_empty() {
        return Ok(());
    }
    Err(Error::Input {
        path: input.to_path_buf(),
        reason: format!(
            "{what}'s types, labels and missing values are its own, so {} cannot be given for it (user-missing codes can be set after the import)",
            given.join(", ")
        ),
    })
}

/// A numeric value as a binary file stores it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum Cell {
    /// A number.
    Value(f64),
    /// System-missing.
    Missing,
    /// A user-missing value, as its code.
    Code(f64),
}

/// A batch of a numeric column: scaled integers when every value is an
/// exact decimal of at most 6 digits and no cell is a user-missing code,
/// else doubles (codes as they are).
pub(crate) fn number_chunk(cells: impl Iterator<Item = Cell> + Clone, n: usize) -> Chunk {
    if !cells.clone().any(|c| matches!(c, Cell::Code(_))) {
        let plain = cells.clone().map(|c| match c {
            Cell::Value(x) => Some(x),
            _ => None,
        });
        if let Some(c) = decimals(plain, n) {
            return c;
        }
    }
    Chunk::Float(
        cells
            .map(|c| match c {
                Cell::Value(x) | Cell::Code(x) => x,
                Cell::Missing => f64::NAN,
            })
            .collect(),
    )
}

/// `x` in the stored units of the numeric column `var` (scaled by its
/// implied decimals), when the column can hold it exactly: the code a
/// missing value or a value label of `x` takes.
pub(crate) fn stored_code(var: &Variable, x: f64) -> Option<f64> {
    const LIMIT: f64 = 9_007_199_254_740_992.0; // 2^53
    match var.kind {
        microtab_store::Kind::Int => {
            let scale = 10f64.powi(var.decimals as i32);
            let m = (x * scale).round();
            (m.abs() < LIMIT && m / scale == x).then_some(m)
        }
        microtab_store::Kind::Float => x.is_finite().then_some(x),
        microtab_store::Kind::String => None,
    }
}

/// The value-label key of `x` in the numeric column `var` (as its values
/// are shown), when the column can hold it.
pub(crate) fn label_key(var: &Variable, x: f64) -> Option<String> {
    stored_code(var, x).map(|c| microtab_store::codec::display_code(var, c))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_made_distinct_without_case() {
        let names: Vec<String> = ["x", "X", "X_2", "y", "x"]
            .iter()
            .map(|s| s.to_string())
            .collect();
        let (out, notes) = distinct_names(&names);
        assert_eq!(out, ["x", "X_3", "X_2", "y", "x_4"]);
        assert_eq!(notes.len(), 2);
    }

    #[test]
    fn exact_decimals_become_scaled_integers() {
        let v = [Some(1.5), None, Some(-0.25)];
        match decimals(v.iter().copied(), 3) {
            Some(Chunk::Int { vals, decimals }) => {
                assert_eq!(decimals, 2);
                assert_eq!(vals, [Some(150), None, Some(-25)]);
            }
            c => panic!("{c:?}"),
        }
        assert!(decimals([Some(0.1 + 0.2)].iter().copied(), 1).is_none());
        assert!(decimals([Some(1e300)].iter().copied(), 1).is_none());
    }
}
