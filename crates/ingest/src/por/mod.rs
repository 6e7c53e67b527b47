//! SPSS portable files (`.por`): text in 80-column lines, in a character
//! set of its own that a table in the header translates. The dictionary
//! (`dict`) becomes the description of an SPSS system file, and the data
//! (`data`) its uncompressed records, rebuilt on the reading thread from
//! base-30 numbers (`number`) and length-prefixed strings; the system
//! file's import decodes them on every core, so that both formats give
//! the same dataset:
//!
//! - **Numbers** become (scaled) integers where every value of a batch is
//!   an exact decimal of at most 6 digits, else doubles, each the double
//!   nearest the base-30 digits; system-missing (`*.`) is missing.
//! - **User-missing values**: up to three discrete values become missing
//!   codes; a range (`LO THRU x`, `x THRU HI`, `a THRU b`) the codes of
//!   the values the data hold inside it, with a note.
//! - **Value labels** (a record labels several variables) of numbers and
//!   texts, and variable labels are kept; the file label and the weight
//!   variable become notes.
//! - **Dates**: the formats that make a system file's numbers dates,
//!   datetimes and times make them ISO 8601 text here too.
//! - **Text** loses its trailing blanks; an empty text is missing; a text
//!   longer than its variable's width is cut, with a note. Characters
//!   pass through the file's table; bytes beyond ASCII the table does not
//!   name (PSPP writes UTF-8 so) are read as Windows-1252 unless an
//!   encoding is given, and a note counts them.

mod chars;
mod data;
mod dict;
mod number;

use crate::columnar::refuse_text_options;
use crate::core::pipeline::ImportSummary;
use crate::error::Result;
use crate::options::ImportOptions;
use std::io::Read;
use std::path::Path;
use std::sync::{Arc, Mutex};

/// Bytes read to recognise a portable file: its 464 header characters,
/// with line ends (CR LF after each 80) and room for short lines.
const SNIFF: usize = 1024;

/// Whether the file at `path` is an SPSS portable file: the signature
/// `SPSSPORT`, in the characters of its translation table, after the
/// splash and the table (464 characters, lines of 80 columns read as one
/// stream).
pub(crate) fn is_por(path: &Path) -> bool {
    let mut head = vec![0u8; SNIFF];
    let got = std::fs::File::open(path)
        .and_then(|mut f| crate::columnar::records::fill(&mut f, &mut head))
        .unwrap_or(0);
    chars::signed(&head[..got])
}

/// Imports the SPSS portable file `input` into a dataset at `target`
/// (replacing an existing one only with `force`).
pub fn import_por(
    input: &Path,
    target: &Path,
    force: bool,
    opts: &ImportOptions,
) -> Result<ImportSummary> {
    refuse_text_options(input, opts, "an SPSS portable file")?;
    let p = dict::read(input, opts.encoding)?;
    let outcome = Arc::new(Mutex::new(data::Outcome::default()));
    let reader: Box<dyn Read + Send> = Box::new(data::Records::new(
        p.fields,
        &p.sav,
        Arc::clone(&outcome),
        opts.progress.clone(),
    ));
    let s = &p.sav;
    let mut notes = p.notes;
    crate::sav::import_with(input, target, force, opts, s, reader, |read| {
        let mut o = outcome.lock().unwrap_or_else(|e| e.into_inner());
        if let (Err(_), Some(e)) = (&read, o.error.take()) {
            return Err(e);
        }
        read?;
        if o.foreign > 0 && opts.encoding.is_none() {
            notes.push(format!(
                "{} texts hold bytes beyond ASCII that the file's character table does not name: read as Windows-1252 (give the file's encoding if they are in another, such as UTF-8, which PSPP writes)",
                o.foreign
            ));
        }
        for (v, &n) in s.vars.iter().zip(&o.cut) {
            if n > 0 {
                notes.push(format!(
                    "variable {}: {n} values longer than its width ({} bytes) are cut to it",
                    v.name,
                    v.width.unwrap_or(0)
                ));
            }
        }
        Ok(notes)
    })
}
