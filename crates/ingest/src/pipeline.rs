//! The reader → parsers → writer pipeline.

use crate::error::RowError;
use crate::parse::{infer, parse_chunk, Parsed, Plan};
use crate::sink::Sink;
use crate::tokenizer::{count_lines, last_record_end, Tokenizer};
use crate::{Error, Result};
use microtab_store::DatasetWriter;
use std::collections::BTreeMap;
use std::fs::File;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::sync::mpsc::{sync_channel, Receiver};
use std::sync::{Arc, Mutex};

/// A forced type for a column (`--type NAME=int|float|string`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TypeHint {
    /// Integers or fixed-point decimals (stored exactly as scaled integers).
    Int,
    /// Floating point.
    Float,
    /// Text (dictionary-encoded).
    String,
}

/// Progress callback: `(bytes processed, total bytes)`.
pub type Progress = Arc<dyn Fn(u64, u64) + Send + Sync>;

/// How to read the input.
#[derive(Clone)]
pub struct CsvOptions {
    /// Field delimiter (default `,`).
    pub delimiter: u8,
    /// Forced types by column name (case-insensitive).
    pub types: Vec<(String, TypeHint)>,
    /// User-missing codes by column name, in displayed units.
    pub missing: Vec<(String, Vec<f64>)>,
    /// Bytes of input per parse task.
    pub chunk_size: usize,
    /// Parser threads (default: all cores).
    pub threads: usize,
    /// Records sampled for type inference.
    pub sample_rows: usize,
    /// Called as chunks are written.
    pub progress: Option<Progress>,
}

impl Default for CsvOptions {
    fn default() -> Self {
        CsvOptions {
            delimiter: b',',
            types: Vec::new(),
            missing: Vec::new(),
            chunk_size: 4 << 20,
            threads: std::thread::available_parallelism()
                .map(|n| n.get())
                .unwrap_or(2),
            sample_rows: 50_000,
            progress: None,
        }
    }
}

/// What an import produced.
#[derive(Debug, Clone)]
pub struct ImportSummary {
    /// The published dataset.
    pub path: PathBuf,
    /// Records imported.
    pub rows: u64,
    /// Variables imported.
    pub variables: usize,
    /// Input bytes read.
    pub bytes_in: u64,
    /// Column payload bytes written.
    pub bytes_out: u64,
}

struct Chunk {
    seq: u64,
    line: u64,
    data: Vec<u8>,
}

fn io_err(path: &Path, e: std::io::Error) -> Error {
    Error::Io(microtab_io::Error {
        path: path.to_path_buf(),
        error: e,
    })
}

/// Reads until `buf` holds `want` bytes or the file ends; returns false at EOF.
fn fill(file: &mut File, path: &Path, buf: &mut Vec<u8>, want: usize) -> Result<bool> {
    while buf.len() < want {
        let len = buf.len();
        buf.resize(want, 0);
        let n = file.read(&mut buf[len..]).map_err(|e| io_err(path, e));
        match n {
            Ok(0) => {
                buf.truncate(len);
                return Ok(false);
            }
            Ok(n) => buf.truncate(len + n),
            Err(e) => {
                buf.truncate(len);
                return Err(e);
            }
        }
    }
    Ok(true)
}

/// Imports the CSV file `input` into a dataset at `target`.
///
/// The target appears only when the import succeeds; an existing dataset is
/// replaced (atomically) only with `force`.
pub fn import_csv(
    input: &Path,
    target: &Path,
    force: bool,
    opts: &CsvOptions,
) -> Result<ImportSummary> {
    let mut file = File::open(input).map_err(|e| io_err(input, e))?;
    let total = file.metadata().map_err(|e| io_err(input, e))?.len();
    let input_err = |reason: String| Error::Input {
        path: input.to_path_buf(),
        reason,
    };
    let chunk_size = opts.chunk_size.max(4096);

    // Header: read until the first record is complete.
    let mut buf = Vec::with_capacity(chunk_size * 2);
    let mut eof = !fill(&mut file, input, &mut buf, chunk_size)?;
    if buf.starts_with(b"\xEF\xBB\xBF") {
        buf.drain(..3);
    }
    let header_end = loop {
        match last_record_end(&buf).and_then(|_| first_record_end(&buf)) {
            Some(e) => break e,
            None if eof => break buf.len(),
            None => {
                let want = buf.len() * 2;
                eof = !fill(&mut file, input, &mut buf, want)?;
            }
        }
    };
    if memchr::memchr(b'\n', &buf[..header_end]).is_none() && memchr::memchr(b'\r', &buf).is_some()
    {
        return Err(input_err(
            "lines end in CR only (old Mac style); expected LF or CRLF line endings".into(),
        ));
    }
    if buf.iter().all(|b| b.is_ascii_whitespace()) {
        return Err(input_err(
            "empty file: expected a header line naming the columns".into(),
        ));
    }
    let names =
        parse_header(&buf[..header_end], opts.delimiter).map_err(|e| e.into_error(input, &[]))?;
    let ncols = names.len();
    let find = |n: &str| names.iter().position(|h| h.eq_ignore_ascii_case(n));

    let mut plans = vec![Plan::Numeric; ncols];
    for n in opts
        .types
        .iter()
        .map(|(n, _)| n)
        .chain(opts.missing.iter().map(|(n, _)| n))
    {
        if find(n).is_none() {
            return Err(input_err(format!(
                "no column named '{n}' (columns: {})",
                names.join(", ")
            )));
        }
    }
    let header_lines = count_lines(&buf[..header_end]);
    let mut rest = buf.split_off(header_end);
    drop(buf);
    // First chunk: cut at a record boundary.
    if !eof {
        loop {
            if let Some(end) = last_record_end(&rest) {
                let carry = rest.split_off(end);
                buf = carry;
                break;
            }
            let want = rest.len() * 2 + chunk_size;
            eof = !fill(&mut file, input, &mut rest, want)?;
            if eof {
                buf = Vec::new();
                break;
            }
        }
    } else {
        buf = Vec::new();
    }
    let first = rest;
    let inferred = infer(&first, opts.delimiter, ncols, opts.sample_rows).map_err(|e| {
        // Line numbers in the sample are relative to the first data line.
        shift(e, header_lines).into_error(input, &names)
    })?;
    for (i, p) in inferred.into_iter().enumerate() {
        plans[i] = p;
    }
    for (n, t) in &opts.types {
        let i = find(n).unwrap();
        plans[i] = match t {
            TypeHint::Int => Plan::IntOnly,
            TypeHint::Float => Plan::Float,
            TypeHint::String => Plan::Str,
        };
    }

    let mut ds = DatasetWriter::create(target, force)?;
    ds.set_source(
        &input
            .file_name()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_default(),
    );
    let mut sinks: Vec<Sink> = names
        .iter()
        .zip(&plans)
        .map(|(n, p)| Sink::new(n, *p == Plan::Str))
        .collect();

    let threads = opts.threads.max(1);
    let (job_tx, job_rx) = sync_channel::<Result<Chunk>>(threads);
    let (res_tx, res_rx) =
        sync_channel::<(u64, u64, std::result::Result<Parsed, RowError>)>(threads + 2);
    let job_rx = Arc::new(Mutex::new(job_rx));
    let delim = opts.delimiter;
    let mut rows = 0u64;
    let mut done_bytes = header_end as u64;

    let outcome: Result<()> = std::thread::scope(|s| {
        // Reader.
        let reader_path = input.to_path_buf();
        s.spawn(move || {
            let mut line = header_lines + 1;
            let mut seq = 0;
            let mut send = |data: Vec<u8>, line: &mut u64| -> bool {
                let lines = count_lines(&data);
                let ok = job_tx
                    .send(Ok(Chunk {
                        seq,
                        line: *line,
                        data,
                    }))
                    .is_ok();
                seq += 1;
                *line += lines;
                ok
            };
            if !send(first, &mut line) {
                return;
            }
            let mut carry = buf;
            let mut eof = eof;
            while !eof {
                let mut data = Vec::with_capacity(chunk_size + carry.len());
                data.append(&mut carry);
                match fill(&mut file, &reader_path, &mut data, chunk_size) {
                    Ok(more) => eof = !more,
                    Err(e) => {
                        let _ = job_tx.send(Err(e));
                        return;
                    }
                }
                if !eof {
                    match last_record_end(&data) {
                        Some(end) => carry = data.split_off(end),
                        None => {
                            // One record longer than a chunk: read on.
                            carry = data;
                            continue;
                        }
                    }
                }
                if !data.is_empty() && !send(data, &mut line) {
                    return;
                }
            }
        });
        // Parsers.
        for _ in 0..threads {
            let job_rx = Arc::clone(&job_rx);
            let res_tx = res_tx.clone();
            let plans = &plans;
            s.spawn(move || loop {
                let job = job_rx.lock().unwrap().recv();
                let Ok(job) = job else { return };
                let msg = match job {
                    Ok(c) => (
                        c.seq,
                        c.data.len() as u64,
                        parse_chunk(&c.data, c.line, plans, delim),
                    ),
                    Err(e) => {
                        // Forward a read error as a sentinel the writer recognizes.
                        let _ = res_tx.send((
                            u64::MAX,
                            0,
                            Err(RowError::Syntax {
                                line: 0,
                                reason: e.to_string(),
                            }),
                        ));
                        return;
                    }
                };
                if res_tx.send(msg).is_err() {
                    return;
                }
            });
        }
        drop(res_tx);
        // Writer: apply chunks in file order.
        let r = write_in_order(
            &res_rx,
            &mut sinks,
            &mut ds,
            &mut rows,
            &mut done_bytes,
            total,
            opts,
            input,
            &names,
        );
        drop(res_rx);
        r
    });
    outcome?;

    let mut bytes_out = 0;
    for (i, sink) in sinks.into_iter().enumerate() {
        let mut var = sink.finish(&mut ds)?;
        if let Some((_, codes)) = opts
            .missing
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(&names[i]))
        {
            let scale = var.scale();
            var.missing_codes = codes.iter().map(|c| (c * scale).round()).collect();
        }
        bytes_out += var.bytes;
        ds.add_variable(var);
    }
    let path = ds.commit(rows)?;
    Ok(ImportSummary {
        path,
        rows,
        variables: ncols,
        bytes_in: total,
        bytes_out,
    })
}

#[allow(clippy::too_many_arguments)]
fn write_in_order(
    rx: &Receiver<(u64, u64, std::result::Result<Parsed, RowError>)>,
    sinks: &mut [Sink],
    ds: &mut DatasetWriter,
    rows: &mut u64,
    done: &mut u64,
    total: u64,
    opts: &CsvOptions,
    input: &Path,
    names: &[String],
) -> Result<()> {
    let mut pending = BTreeMap::new();
    let mut next = 0u64;
    for (seq, bytes, res) in rx.iter() {
        if seq == u64::MAX {
            if let Err(RowError::Syntax { reason, .. }) = res {
                return Err(Error::Input {
                    path: input.to_path_buf(),
                    reason,
                });
            }
        }
        pending.insert(seq, (bytes, res));
        while let Some((bytes, res)) = pending.remove(&next) {
            let parsed = res.map_err(|e| e.into_error(input, names))?;
            for (sink, col) in sinks.iter_mut().zip(parsed.cols) {
                sink.append(ds, col)?;
            }
            *rows += parsed.rows;
            *done += bytes;
            if let Some(p) = &opts.progress {
                p(*done, total);
            }
            next += 1;
        }
    }
    Ok(())
}

fn shift(e: RowError, by: u64) -> RowError {
    match e {
        RowError::Value {
            line,
            column,
            expected,
            found,
        } => RowError::Value {
            line: line + by,
            column,
            expected,
            found,
        },
        RowError::Ragged { line, found } => RowError::Ragged {
            line: line + by,
            found,
        },
        RowError::Syntax { line, reason } => RowError::Syntax {
            line: line + by,
            reason,
        },
    }
}

/// End of the first record (header), quote-aware.
fn first_record_end(buf: &[u8]) -> Option<usize> {
    let mut in_quote = false;
    for p in memchr::memchr2_iter(b'"', b'\n', buf) {
        if buf[p] == b'"' {
            in_quote = !in_quote;
        } else if !in_quote {
            return Some(p + 1);
        }
    }
    None
}

fn parse_header(buf: &[u8], delim: u8) -> std::result::Result<Vec<String>, RowError> {
    let mut t = Tokenizer::new(buf, delim, 1);
    let mut fields = Vec::new();
    t.read_record(&mut fields)?;
    let mut names: Vec<String> = Vec::new();
    for (i, f) in fields.iter().enumerate() {
        let raw = t.get(*f);
        let s = std::str::from_utf8(raw).map_err(|_| RowError::Syntax {
            line: 1,
            reason: format!("header field {} is not valid UTF-8", i + 1),
        })?;
        let s = s.trim();
        let name = if s.is_empty() {
            format!("V{}", i + 1)
        } else {
            s.to_string()
        };
        if let Some(j) = names.iter().position(|n| n.eq_ignore_ascii_case(&name)) {
            return Err(RowError::Syntax {
                line: 1,
                reason: format!(
                    "header names column {} '{}' twice (columns {} and {}); names must be unique ignoring case",
                    j + 1,
                    name,
                    j + 1,
                    i + 1
                ),
            });
        }
        names.push(name);
    }
    Ok(names)
}
