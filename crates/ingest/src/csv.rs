//! CSV import: header, type inference from a sample, then the shared
//! pipeline with a quote-aware chunk cutter and the CSV chunk parser.

use crate::error::RowError;
use crate::parse::{infer, parse_chunk, Plan};
use crate::pipeline::{self, Feed, ImportSummary, Progress, Stages};
use crate::sink::Sink;
use crate::source::{self, fill};
use crate::tokenizer::{count_lines, last_record_end, Tokenizer};
use crate::{Codebook, Error, Result};
use microtab_store::DatasetWriter;
use std::path::Path;

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
    /// A DDI codebook describing the columns (an IPUMS extract delivered
    /// as CSV): its alphabetic variables are imported as text, and columns
    /// it describes get its labels, description, value labels and missing
    /// codes. Columns are matched by name, case-insensitively.
    pub codebook: Option<Codebook>,
    /// Block size for writing column files (from `microtab tune`).
    pub io: microtab_io::IoConfig,
    /// Store every column as a plain array (no bit-packing), readable
    /// with `numpy.memmap` directly.
    pub plain: bool,
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
            codebook: None,
            io: microtab_io::IoConfig::default(),
            plain: false,
        }
    }
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
    let mut src = source::open(input)?;
    let input_err = |reason: String| Error::Input {
        path: input.to_path_buf(),
        reason,
    };
    let chunk_size = opts.chunk_size.max(4096);
    let read_more = |src: &mut source::Input, buf: &mut Vec<u8>, want: usize| {
        fill(&mut *src.reader, buf, want).map_err(|e| {
            let lines = count_lines(buf);
            src.read_error(e, lines)
        })
    };

    // Header: read until the first record is complete.
    let mut buf = Vec::with_capacity(chunk_size * 2);
    let mut eof = !read_more(&mut src, &mut buf, chunk_size)?;
    if buf.starts_with(b"\xEF\xBB\xBF") {
        buf.drain(..3);
    }
    let header_end = loop {
        match last_record_end(&buf).and_then(|_| first_record_end(&buf)) {
            Some(e) => break e,
            None if eof => break buf.len(),
            None => {
                let want = buf.len() * 2;
                eof = !read_more(&mut src, &mut buf, want)?;
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
    // The type-inference sample: complete records after the header.
    let mut rest = buf.split_off(header_end);
    drop(buf);
    let sample_end = loop {
        if eof {
            break rest.len();
        }
        if let Some(end) = last_record_end(&rest) {
            break end;
        }
        let want = rest.len() * 2 + chunk_size;
        eof = !read_more(&mut src, &mut rest, want)?;
    };
    let inferred =
        infer(&rest[..sample_end], opts.delimiter, ncols, opts.sample_rows).map_err(|e| {
            // Line numbers in the sample are relative to the first data line.
            shift(e, header_lines).into_error(input, &names)
        })?;
    for (i, p) in inferred.into_iter().enumerate() {
        plans[i] = p;
    }
    if let Some(cb) = &opts.codebook {
        for v in cb.variables.iter().filter(|v| v.text) {
            if let Some(i) = find(&v.name) {
                plans[i] = Plan::Str;
            }
        }
    }
    for (n, t) in &opts.types {
        let i = find(n).unwrap();
        plans[i] = match t {
            TypeHint::Int => Plan::IntOnly,
            TypeHint::Float => Plan::Float,
            TypeHint::String => Plan::Str,
        };
    }

    let mut ds = DatasetWriter::create_with(target, force, opts.io.clone())?;
    ds.set_packing(!opts.plain);
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

    let total = src.total;
    let feed = Feed {
        input: src,
        pending: rest,
        line: header_lines + 1,
        eof,
    };
    let stages = Stages {
        chunk_size,
        threads: opts.threads,
        progress: opts.progress.clone(),
    };
    let delim = opts.delimiter;
    let (rows, text) = pipeline::run(
        feed,
        &stages,
        last_record_end,
        |chunk, line| {
            parse_chunk(chunk, line, &plans, delim).map_err(|e| e.into_error(input, &names))
        },
        &mut sinks,
        &mut ds,
    )?;

    let mut bytes_out = 0;
    for (i, sink) in sinks.into_iter().enumerate() {
        let (mut var, dict) = sink.finish(&mut ds)?;
        if let Some((_, codes)) = opts
            .missing
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(&names[i]))
        {
            let scale = var.scale();
            var.missing_codes = codes.iter().map(|c| (c * scale).round()).collect();
        }
        if let Some(dv) = opts.codebook.as_ref().and_then(|cb| cb.variable(&names[i])) {
            crate::fixed::describe(&mut var, dv, &dict);
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
        bytes_text: header_end as u64 + text,
        bytes_out,
    })
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
