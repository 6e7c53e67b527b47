//! Import from columnar sources (Parquet and Arrow files, in the
//! `microtab-arrow` crate): the caller decodes each batch of records into
//! typed column chunks and [`ColumnarImport`] writes them with the same
//! column sinks as the text importers — the narrowest type that holds the
//! values, re-encoding when a later batch needs a wider one, bit-packing,
//! checksums — and publishes the dataset atomically on
//! [`finish`](ColumnarImport::finish). Dropping it unfinished leaves the
//! target as it was.

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
        let bad = |reason: String| Error::Input {
            path: self.input.clone(),
            reason,
        };
        if chunks.len() != self.sinks.len() {
            return Err(bad(format!(
                "a batch has {} columns, expected {}",
                chunks.len(),
                self.sinks.len()
            )));
        }
        let mut n = None;
        let mut bufs = Vec::with_capacity(chunks.len());
        for (i, c) in chunks.into_iter().enumerate() {
            let len = match &c {
                Chunk::Int { vals, .. } => vals.len(),
                Chunk::Float(v) => v.len(),
                Chunk::Text { codes, .. } => codes.len(),
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
                                    self.rows + r as u64 + 1,
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
                _ => {
                    return Err(bad(format!(
                        "column {name}: a batch of the wrong kind (text and numbers mixed)"
                    )))
                }
            });
        }
        for (sink, b) in self.sinks.iter_mut().zip(bufs) {
            sink.append(&mut self.ds, b)?;
        }
        let n = n.unwrap_or(0) as u64;
        self.rows += n;
        Ok(())
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
        mut self,
        codebook: Option<&crate::ddi::Codebook>,
        mut describe: impl FnMut(&mut Variable, &[String]) -> Result<()>,
        design: Option<Design>,
        notes: impl IntoIterator<Item = impl Into<Note>>,
    ) -> Result<ImportSummary> {
        let mut notes: Vec<Note> = notes.into_iter().map(Into::into).collect();
        for sink in std::mem::take(&mut self.sinks) {
            let (mut var, dict) = sink.finish(&mut self.ds)?;
            if let Some(dv) = codebook.and_then(|cb| cb.variable(&var.name)) {
                crate::ddi::describe(&mut var, dv, &dict, &self.ds, self.rows, &mut notes)?;
            }
            describe(&mut var, &dict)?;
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
