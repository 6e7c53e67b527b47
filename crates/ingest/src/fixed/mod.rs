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
//! ([`ImportOptions::record_type`] = `H`) into a second dataset; `SERIAL`
//! links the two. A record type the codebook does not list is an error
//! naming the record.
//!
//! Chunks for the parser threads are cut just before a household record, so
//! every chunk holds whole households and persons never lose their
//! household to a chunk boundary.
//!
//! [`layout`] places the variables, [`chunk`] parses the records; the
//! codebook's description of each variable is [`crate::ddi`]'s.

mod chunk;
mod layout;

use crate::core::dataset::{add_missing_codes, create_dataset, publish, Read};
use crate::core::na::NaSet;
use crate::core::pipeline::{self, Feed, ImportSummary, Stages};
use crate::core::sink::Sink;
use crate::core::source;
use crate::ddi::Codebook;
use crate::error::{Error, Result};
use crate::note::Note;
use crate::options::ImportOptions;
use chunk::parse_fixed_chunk;
use layout::Layout;
use microtab_store::Remedy;
use std::path::Path;

/// Imports the fixed-width file `data` (plain or gzip) described by the
/// codebook `cb` into a dataset at `target`.
///
/// Variables get the codebook's label, description (`txt`), value labels
/// and missing codes (`catgry missing="Y"`, `invalrng`). The target appears
/// only when the import succeeds; an existing dataset is replaced
/// (atomically) only with `force`.
///
/// ```no_run
/// use microtab_ingest::{import_fixed, Codebook, ImportOptions};
/// let cb = Codebook::read("cps_00006.xml".as_ref()).unwrap();
/// let s = import_fixed("cps_00006.dat.gz".as_ref(), &cb, "cps.mtab".as_ref(), false,
///                      &ImportOptions::default()).unwrap();
/// println!("{} records", s.rows);
/// ```
pub fn import_fixed(
    data: &Path,
    cb: &Codebook,
    target: &Path,
    force: bool,
    opts: &ImportOptions,
) -> Result<ImportSummary> {
    let cb = &*opts.codebook_used(cb);
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
                    "no variable named '{n}' in {}{} (variables: {})",
                    cb.path.display(),
                    microtab_store::did_you_mean(&microtab_store::close_names(
                        n,
                        layout.slots.iter().map(|s| s.name.as_str())
                    )),
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
    let mut ds = create_dataset(data, target, force, &opts.io, ncols, opts.plain)?;
    ds.set_title(cb.title.as_deref());
    ds.set_description(cb.description.as_deref());
    if let Some(t) = layout.row_type() {
        let name = data.file_name().unwrap_or_default().to_string_lossy();
        ds.set_source(&format!("{name} (record type {t})"));
    }
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
    if let (Some(s), Some(h)) = (&out.skipped, &layout.hier) {
        notes.push(Note::from(format!(
            "{} record{} of types the setup gives no layout for {} skipped (the first on line {}, of type {}; the setup's types: {})",
            s.count,
            if s.count == 1 { "" } else { "s" },
            if s.count == 1 { "was" } else { "were" },
            s.line,
            s.example,
            h.names.join(", ")
        )));
    }
    for (slot, n) in layout.slots.iter().zip(&out.na_text) {
        if let Some(n) = n {
            notes.push(Note::from(format!(
                "{}: {} value{} that {} not a number (the first on line {}: {:?}) read as missing (check the setup's format for the variable)",
                slot.name,
                n.count,
                if n.count == 1 { "" } else { "s" },
                if n.count == 1 { "is" } else { "are" },
                n.line,
                n.example,
            )));
        }
    }
    if rows == 0 {
        notes.push(Note::from(match layout.row_type() {
            Some(t) => format!(
                "{} holds no records of type {t}: the dataset has 0 rows",
                data.display()
            ),
            None => format!(
                "{} holds no records: the dataset has 0 rows",
                data.display()
            ),
        }));
    }
    let no_na = NaSet::new(Some(&[]), Some(&[]));
    for (slot, sink) in layout.slots.iter().zip(sinks) {
        let (mut var, dict) = sink.finish(&mut ds)?;
        crate::ddi::describe(
            &mut var,
            &cb.variables[slot.var],
            &dict,
            &ds,
            rows,
            &mut notes,
        )?;
        if let Some(codes) = opts.missing_of(&slot.name) {
            add_missing_codes(&mut var, &dict, codes, &no_na, data, &mut notes)?;
        }
        ds.add_variable(var);
    }
    let read = Read {
        bytes_in: total,
        bytes_text: out.text,
        sampled: None,
    };
    publish(ds, rows, read, notes)
}

/// The record type of a hierarchical file that becomes a row when none is
/// asked for (see [`ImportOptions::record_type`]). The file is read from the
/// start until a person record turns up — the second line, usually — and
/// to its end only when none does, to count the records of each type.
fn default_record_type(data: &Path, cb: &Codebook, notes: &mut Vec<Note>) -> Result<String> {
    use std::io::BufRead;
    let id = cb.record_id_variable().expect("checked when parsed");
    let (a, b) = (id.start - 1, id.end);
    let (codes, numeric) = layout::Hier::codes(cb);
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
        let Some(rt) = line.get(a..b).map(|f| layout::Hier::canon(f, numeric)) else {
            continue;
        };
        if let Some(&(_, i)) = codes.iter().find(|(c, _)| c.as_slice() == rt) {
            counts[i] += 1;
            if Some(types[i]) == person {
                if types[i] != "P" {
                    notes.push(Note::hinted(
                        format!(
                            "the person records (type {}{}) become the rows, with the variables of the record of type {top} before each",
                            types[i],
                            cb.record_type_label(types[i]).map_or(String::new(), |l| format!(", {l}"))
                        ),
                        Remedy::RecordType,
                        "chooses another type",
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
        notes.push(Note::hinted(
            format!(
                "{} holds no person records ({}): the records of type {pick}{} become the rows",
                data.display(),
                held.join(", "),
                label(pick)
            ),
            Remedy::RecordType,
            "chooses another type",
        ));
    }
    Ok(pick.to_string())
}
