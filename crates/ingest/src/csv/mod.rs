//! CSV import: header, type inference from a sample, then the shared
//! pipeline with a quote-aware chunk cutter and the CSV chunk parser.

mod chunk;
mod error;
mod infer;
mod tokenizer;

use crate::core::column::Plan;
use crate::core::dataset::{add_missing_codes, create_dataset, publish, Read};
use crate::core::na::NaSet;
use crate::core::pipeline::{self, Feed, ImportSummary, Stages};
use crate::core::sink::Sink;
use crate::core::source::{self, count_lines, fill};
use crate::error::{Error, Fix, Result};
use crate::note::Note;
use crate::options::{Encoding, ImportOptions, TypeHint};
use chunk::{parse_chunk, ParseOpts};
use error::RowError;
use infer::{infer, Sampled, TextWhy};
use microtab_store::{ColumnKind, Remedy};
use std::path::Path;
use tokenizer::{last_record_end, Tokenizer};

/// Delimiters tried when detecting one, in order of preference.
const DELIMITERS: [u8; 4] = [b',', b'\t', b';', b'|'];

fn delimiter_name(d: u8) -> String {
    match d {
        b'\t' => "tab".into(),
        d => format!("'{}'", d as char),
    }
}

/// Fields per record of the first (at most 20) records of `buf` split by
/// `delim`, if they are all the same.
fn fields_per_record(buf: &[u8], delim: u8) -> Option<usize> {
    let mut t = Tokenizer::new(buf, delim, 1);
    let mut fields = Vec::new();
    let mut n = None;
    for _ in 0..20 {
        match t.read_record(&mut fields) {
            Ok(Some(_)) => {}
            Ok(None) => break,
            Err(_) => return None,
        }
        match n {
            None => n = Some(fields.len()),
            Some(k) if k != fields.len() => return None,
            _ => {}
        }
    }
    n
}

/// The delimiter that splits the first lines of `buf` consistently into
/// more than one field, if any (`,` preferred).
fn sniff_delimiter(buf: &[u8]) -> Option<u8> {
    // Whole lines only (the last one may be cut).
    let end = last_record_end(buf).unwrap_or(buf.len());
    let head = &buf[..end];
    DELIMITERS
        .into_iter()
        .find(|&d| fields_per_record(head, d).is_some_and(|n| n > 1))
}

/// Imports the CSV file `input` into a dataset at `target`.
///
/// The target appears only when the import succeeds; an existing dataset is
/// replaced (atomically) only with `force`.
pub fn import_csv(
    input: &Path,
    target: &Path,
    force: bool,
    opts: &ImportOptions,
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
    let mut notes = Vec::new();

    // Header: read until the first record is complete.
    let mut buf = Vec::with_capacity(chunk_size * 2);
    let mut eof = !read_more(&mut src, &mut buf, chunk_size)?;
    let mut skipped = 0;
    if buf.starts_with(b"\xEF\xBB\xBF") {
        buf.drain(..3);
        skipped = 3;
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
    let delim = match opts.delimiter {
        Some(d) => d,
        None => match sniff_delimiter(&buf) {
            Some(d) if d != b',' => {
                notes.push(Note::hinted(
                    format!(
                        "columns are separated by {} (detected from the first lines)",
                        delimiter_name(d)
                    ),
                    Remedy::Delimiter { delimiter: None },
                    "chooses another",
                ));
                d
            }
            _ => b',',
        },
    };
    if opts.decimal_comma && delim == b',' {
        return Err(input_err(
            "numbers with a decimal comma need a field delimiter other than the comma; the fields are separated by commas".into(),
        ));
    }
    let names = parse_header(&buf[..header_end], delim, opts.encoding.unwrap_or_default())
        .map_err(|e| e.into_error(input, &[]))?;
    if names.len() == 1 {
        if let Some(d) = sniff_delimiter(&buf).filter(|&d| d != delim) {
            notes.push(Note::hinted(
                format!(
                    "the header has one column with delimiter {}, but {} would split the first lines into {} columns",
                    delimiter_name(delim),
                    delimiter_name(d),
                    fields_per_record(&buf[..last_record_end(&buf).unwrap_or(buf.len())], d)
                        .unwrap_or(0),
                ),
                Remedy::Delimiter {
                    delimiter: Some(d as char),
                },
                "splits them",
            ));
        }
    }
    let ncols = names.len();
    let find = |n: &str| names.iter().position(|h| h.eq_ignore_ascii_case(n));

    let mut plans;
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
    let na = NaSet::new(opts.na.as_deref(), opts.na_text.as_deref());
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
    let max_rows = opts.sample_rows.max(1);
    let mut sampled = infer(
        &rest[..sample_end],
        delim,
        ncols,
        max_rows,
        header_lines + 1,
        &na,
        opts.decimal_comma,
    )
    .map_err(|e| e.into_error(input, &names))?;
    if sampled.rows < max_rows && !(eof && sample_end == rest.len()) {
        // More records wanted than the first block holds: read on in a
        // pass of its own.
        let more = sample_rest(
            input,
            skipped + header_end + sample_end,
            header_lines + 1 + count_lines(&rest[..sample_end]),
            max_rows - sampled.rows,
            delim,
            ncols,
            chunk_size,
            &na,
            opts.decimal_comma,
        )
        .map_err(|e| match e {
            SampleError::Row(e) => e.into_error(input, &names),
            SampleError::Other(e) => *e,
        })?;
        sampled.merge(more);
    }
    plans = sampled.plans();
    let mut forced = vec![false; ncols];
    let codebook = opts.codebook.as_ref().map(|cb| opts.codebook_used(cb));
    if let Some(cb) = &codebook {
        for v in &cb.variables {
            if let Some(i) = find(&v.name) {
                plans[i] = if v.text { Plan::Str } else { Plan::Numeric };
                forced[i] = true;
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
        forced[i] = true;
    }
    for (i, why) in sampled.text.iter().enumerate() {
        if forced[i] {
            continue;
        }
        let (text, kind, effect) = match why {
            Some(TextWhy::LeadingZeros(n)) => (
                format!(
                    "column {} is read as text: its numbers are written with leading zeros (\"{}\" on line {}), like codes",
                    names[i], n.example, n.line
                ),
                ColumnKind::Int,
                "reads them as numbers",
            ),
            Some(TextWhy::DecimalComma(n)) => {
                notes.push(Note::hinted(
                    format!(
                        "column {} is read as text: its numbers are written with a decimal comma (\"{}\" on line {})",
                        names[i], n.example, n.line
                    ),
                    Remedy::DecimalComma,
                    "reads them as numbers",
                ));
                continue;
            }
            Some(TextWhy::BeyondI64(n)) => (
                format!(
                    "column {} is read as text: \"{}\" on line {} is an integer beyond 64 bits, which microtab does not store exactly as a number",
                    names[i], n.example, n.line
                ),
                ColumnKind::Float,
                "reads it as approximate numbers",
            ),
            _ => continue,
        };
        notes.push(Note::hinted(text, column_type(&names[i], kind), effect));
    }
    for (i, n) in sampled.na_in_text.iter().enumerate() {
        if let (Some(n), Plan::Str, None) = (n, plans[i], &opts.na_text) {
            notes.push(Note::hinted(
                format!(
                    "column {} is text and keeps \"{}\" (first on line {}) as a value, though it is missing in numeric columns",
                    names[i], n.example, n.line
                ),
                Remedy::NaText,
                "lists the texts read as missing in text columns",
            ));
        }
    }

    let mut ds = create_dataset(input, target, force, &opts.io, ncols, opts.plain)?;
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
    let popts = ParseOpts {
        na: na.clone(),
        encoding: opts.encoding.unwrap_or_default(),
        sampled: sampled.rows,
        comma: opts.decimal_comma,
    };
    let out = pipeline::run(
        feed,
        &stages,
        last_record_end,
        |chunk, line| {
            parse_chunk(chunk, line, &plans, delim, &popts).map_err(|e| e.into_error(input, &names))
        },
        &mut sinks,
        &mut ds,
    )?;
    let rows = out.rows;
    for (i, n) in out.leading_zeros.iter().enumerate() {
        if let (Some(n), false) = (n, plans[i] == Plan::Str) {
            notes.push(Note::hinted(
                format!(
                    "column {}: {} number{} written with leading zeros (first \"{}\" on line {}) read as number{}",
                    names[i],
                    n.count,
                    if n.count == 1 { "" } else { "s" },
                    n.example,
                    n.line,
                    if n.count == 1 { "" } else { "s" },
                ),
                column_type(&names[i], ColumnKind::String),
                "keeps them as text",
            ));
        }
    }
    for (i, n) in out.na_text.iter().enumerate() {
        if let Some(n) = n {
            notes.push(Note::hinted(
                format!(
                "column {} is text: {} field{} such as \"{}\" (first on line {}) read as missing{}",
                names[i],
                n.count,
                if n.count == 1 { "" } else { "s" },
                n.example,
                n.line,
                if opts.na.is_none() && opts.na_text.is_none() {
                    ", as R and pandas read them"
                } else {
                    ""
                }
            ),
                Remedy::KeepTextTokens,
                "keeps them as values",
            ));
        }
    }
    if rows == 0 {
        notes.push(Note::from(format!(
            "{} has a header but no records: the dataset has 0 rows",
            input.display()
        )));
    }

    for (i, sink) in sinks.into_iter().enumerate() {
        let (mut var, dict) = sink.finish(&mut ds)?;
        if let Some(dv) = codebook.as_ref().and_then(|cb| cb.variable(&names[i])) {
            crate::ddi::describe(&mut var, dv, &dict, &ds, rows, &mut notes)?;
        }
        if let Some(codes) = opts.missing_of(&names[i]) {
            add_missing_codes(&mut var, &dict, codes, &na, input, &mut notes)?;
        }
        ds.add_variable(var);
    }
    let read = Read {
        bytes_in: total,
        bytes_text: header_end as u64 + out.text,
        sampled: Some(sampled.rows),
    };
    publish(ds, rows, read, notes)
}

/// The option importing column `name` as `kind`.
fn column_type(name: &str, kind: ColumnKind) -> Remedy {
    Remedy::ColumnType {
        variable: Some(name.to_string()),
        kind,
    }
}

/// Why sampling failed.
enum SampleError {
    Row(RowError),
    Other(Box<Error>),
}

/// Samples up to `max_rows` more records of `input` in a pass of its own,
/// from text offset `skip` (on physical line `line`).
#[allow(clippy::too_many_arguments)]
fn sample_rest(
    input: &Path,
    skip: usize,
    line: u64,
    max_rows: u64,
    delim: u8,
    ncols: usize,
    chunk_size: usize,
    na: &NaSet,
    comma: bool,
) -> std::result::Result<Sampled, SampleError> {
    let mut src = source::open(input).map_err(|e| SampleError::Other(Box::new(e)))?;
    let mut out = Sampled::new(ncols);
    let mut buf: Vec<u8> = Vec::with_capacity(chunk_size * 2);
    let mut skip = skip;
    let mut line = line;
    let mut eof = false;
    let read = |src: &mut source::Input, buf: &mut Vec<u8>, want: usize| {
        fill(&mut *src.reader, buf, want).map_err(|e| {
            let lines = count_lines(buf);
            SampleError::Other(Box::new(src.read_error(e, lines)))
        })
    };
    // Past what was sampled already.
    while skip > 0 && !eof {
        buf.clear();
        eof = !read(&mut src, &mut buf, skip.min(chunk_size))?;
        skip -= buf.len().min(skip);
    }
    buf.clear();
    while out.rows < max_rows {
        if !eof {
            let want = buf.len() + chunk_size;
            eof = !read(&mut src, &mut buf, want)?;
        }
        let end = if eof {
            buf.len()
        } else {
            match last_record_end(&buf) {
                Some(e) => e,
                None => continue,
            }
        };
        if end == 0 {
            break;
        }
        let part = infer(
            &buf[..end],
            delim,
            ncols,
            max_rows - out.rows,
            line,
            na,
            comma,
        )
        .map_err(SampleError::Row)?;
        out.merge(part);
        line += count_lines(&buf[..end]);
        buf.drain(..end);
        if eof && buf.is_empty() {
            break;
        }
    }
    Ok(out)
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

fn parse_header(
    buf: &[u8],
    delim: u8,
    encoding: Encoding,
) -> std::result::Result<Vec<String>, RowError> {
    let mut t = Tokenizer::new(buf, delim, 1);
    let mut fields = Vec::new();
    t.read_record(&mut fields)?;
    let mut names: Vec<String> = Vec::new();
    for (i, f) in fields.iter().enumerate() {
        let raw = t.get(*f);
        let s = encoding.decode(raw).ok_or_else(|| RowError::Syntax {
            line: 1,
            reason: format!("header field {} is not valid {}", i + 1, encoding.name()),
            fix: Fix::Encoding,
        })?;
        let s = s.trim();
        let name = if s.is_empty() {
            format!("V{}", i + 1)
        } else {
            s.to_string()
        };
        if let Some(j) = names.iter().position(|n| n.eq_ignore_ascii_case(&name)) {
            return Err(RowError::Syntax {
                fix: Fix::None,
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
