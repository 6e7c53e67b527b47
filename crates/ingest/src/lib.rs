//! Import of microdata into microtab datasets: delimited text (CSV) and
//! fixed-width records described by a DDI codebook (IPUMS extracts) or by
//! Stata, SPSS and SAS setup files ([`read_setup`], [`import_setup`]),
//! plain or gzip-compressed, SAS transport files ([`import_xport`]),
//! Stata files ([`import_dta`]), SPSS system files ([`import_sav`]),
//! SPSS portable files ([`import_por`]) and SAS data sets
//! ([`import_sas7bdat`]), read batch by batch into [`ColumnarImport`].
//!
//! The entry points are [`import_csv`] and [`import_fixed`] (with a
//! [`Codebook`] read by [`Codebook::read`]). Both stream the input through
//! the same three-stage pipeline, whose memory use does not depend on the
//! file size:
//!
//! 1. a **reader** thread reads blocks of `chunk_size` bytes and cuts them
//!    at record boundaries (for CSV quote-aware, so quoted fields may hold
//!    delimiters, doubled quotes and newlines; for hierarchical fixed-width
//!    files just before a household record, so that every chunk holds
//!    whole households). Gzip input (recognised by its magic bytes) is
//!    decompressed on a thread of its own feeding the reader;
//! 2. **parser** threads (one per core) turn chunks into typed column
//!    buffers and per-chunk statistics;
//! 3. the **writer** (the calling thread) appends the chunks in file order
//!    to one column file per variable, in the narrowest type that holds the
//!    values seen so far, re-encoding a column into a wider type when a
//!    later value needs it.
//!
//! At most `2 × threads + 4` chunks are in flight, so peak memory is about
//! `(2 × threads + 4) × chunk_size × 4` bytes (≈ 200 MB for 2 threads and the
//! default 4 MiB chunks), whatever the size of the input.
//!
//! CSV types are inferred from the first chunk (like DuckDB's sample): a
//! column whose sampled values are all integers or fixed-point decimals is
//! stored as (scaled) integers, one with other numbers as floats, anything
//! else as a dictionary-encoded string. Numeric columns widen freely later
//! (integer → decimal → float); a non-number later in a numeric column is an
//! error naming the line and column (override with [`ImportOptions::types`]).
//! Fixed-width types come from the codebook: numeric fields with implied
//! decimals become exact scaled integers, alphabetic ones strings.
//!
//! ## Layout
//!
//! One folder per format — `csv/`, `fixed/` (with `ddi/`, the codebook
//! that describes fixed-width files and labels any import), `columnar/`
//! (batches decoded by a caller: Parquet, Arrow), `xport/`, `dta/`,
//! `sav/`, `por/` (whose reader rebuilds a system file's records from the
//! portable file's text, for `sav/` to decode), `sas/` — over `core/`, which
//! knows no format: the chunk model, the pipeline, the column sinks, the
//! dataset. Formats do not import each other. [`ImportOptions`] is the one
//! options type of every format and front end, parsed from the same words
//! ([`options`]); notes and errors state facts and carry [`Hint`]s that
//! each front end spells ([`note`]). A new format is a folder beside the
//! others, a [`Format`] variant and its arm in [`import`].
//!
//! ```no_run
//! use microtab_ingest::{import, ImportOptions};
//! let summary = import("people.csv".as_ref(), "people.mtab".as_ref(), false, &ImportOptions::default()).unwrap();
//! println!("{} rows", summary.rows);
//! ```
#![deny(missing_docs)]

mod columnar;
mod core;
mod csv;
pub mod ddi;
mod dta;
mod error;
mod fixed;
pub mod note;
pub mod options;
mod por;
mod sas;
mod sav;
mod setup;
mod xport;

pub use crate::core::dates::iso_date;
pub use crate::core::na::{DEFAULT_NA, DEFAULT_TEXT_NA};
pub use crate::core::pipeline::{ImportSummary, Progress};
pub use columnar::{Chunk, ColumnarImport};
pub use csv::import_csv;
pub use ddi::Codebook;
pub use dta::import_dta;
pub use dta::write::{write_dta, WriteOptions, Written};
pub use error::{Error, Fix, Result};
pub use fixed::import_fixed;
pub use note::{Hint, Note};
pub use options::{Delimiter, Encoding, ImportOptions, InferRows, TypeHint, WordError};
pub use por::import_por;
pub use sas::import_sas7bdat;
pub use sav::import_sav;
pub use sav::write::write_sav;
pub use setup::{import_setup, read_setup, Setup};
use std::path::Path;
pub use xport::import_xport;

/// The options of a CSV import (the one options type of every format).
pub type CsvOptions = ImportOptions;
/// The options of a fixed-width import (the one options type of every
/// format).
pub type FixedOptions = ImportOptions;

/// The text formats this crate reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Format {
    /// Delimited text with a header line.
    Csv,
    /// Fixed-width records described by a DDI codebook.
    Fixed,
    /// A SAS transport file (XPORT, versions 5 and 8), recognised by its
    /// first bytes whatever its name, or named `.xpt` or `.xport`.
    Xport,
    /// A Stata file (releases 104–119), recognised by its first bytes
    /// whatever its name, or named `.dta`.
    Dta,
    /// An SPSS system file (`.sav`, `.zsav`), recognised by its first
    /// bytes whatever its name, or named `.sav` or `.zsav`.
    Sav,
    /// A SAS data set (`.sas7bdat`), recognised by its first bytes
    /// whatever its name, or named `.sas7bdat`.
    Sas7bdat,
    /// An SPSS portable file (`.por`), recognised by the signature
    /// `SPSSPORT` after its splash and translation table whatever its
    /// name, or named `.por`.
    Por,
}

impl Format {
    /// The format of `input` given the options: a SAS data set, a SAS
    /// transport file, a Stata file, an SPSS system or portable file by
    /// its first bytes, else by its name (`.sas7bdat`, `.xpt`, `.xport`,
    /// `.dta`, `.sav`, `.zsav`, `.por`); else fixed-width when a codebook
    /// describes it, unless it is named `.csv` (or `.csv.gz`: an IPUMS
    /// extract delivered as CSV, which the codebook labels).
    pub fn of(input: &Path, opts: &ImportOptions) -> Format {
        // Only a regular file is sniffed: reading a pipe would lose its
        // first bytes.
        let mut head = [0u8; 32];
        let regular = std::fs::metadata(input).is_ok_and(|m| m.is_file());
        let got = if regular {
            std::fs::File::open(input)
                .and_then(|mut f| columnar::records::fill(&mut f, &mut head))
                .unwrap_or(0)
        } else {
            0
        };
        let read = got >= 20;
        if sas::is_sas7bdat(&head[..got]) {
            return Format::Sas7bdat;
        }
        if read && xport::is_xport(&head) {
            return Format::Xport;
        }
        if read && dta::is_dta(&head) {
            return Format::Dta;
        }
        if read && sav::is_sav(&head) {
            return Format::Sav;
        }
        // A portable file's signature is 464 characters in: read further
        // only when the first bytes are none of the others'.
        if read && por::is_por(input) {
            return Format::Por;
        }
        let name = input.to_string_lossy().to_ascii_lowercase();
        let named = [
            (".sas7bdat", Format::Sas7bdat),
            (".xpt", Format::Xport),
            (".xport", Format::Xport),
            (".dta", Format::Dta),
            (".sav", Format::Sav),
            (".zsav", Format::Sav),
            (".por", Format::Por),
        ];
        if let Some((_, f)) = named.iter().find(|(ext, _)| name.ends_with(ext)) {
            return *f;
        }
        let name = name.strip_suffix(".gz").unwrap_or(&name);
        if opts.codebook.is_some() && !name.ends_with(".csv") {
            Format::Fixed
        } else {
            Format::Csv
        }
    }
}

/// Imports `input` (its [`Format`] from [`Format::of`]) into a dataset at
/// `target`; an existing dataset is replaced (atomically) only with
/// `force`.
pub fn import(
    input: &Path,
    target: &Path,
    force: bool,
    opts: &ImportOptions,
) -> Result<ImportSummary> {
    let format = Format::of(input, opts);
    if let (Some(cat), false) = (&opts.catalog, format == Format::Sas7bdat) {
        return Err(Error::Input {
            path: cat.clone(),
            reason: "a format catalog (.sas7bcat) gives the value labels of a SAS data set (.sas7bdat) only".into(),
        });
    }
    if opts.decimal_comma && !matches!(format, Format::Csv) {
        return Err(Error::Input {
            path: input.to_path_buf(),
            reason: "a decimal comma applies to delimited text (CSV) only: this file's numbers are not text".into(),
        });
    }
    match (format, &opts.codebook) {
        (Format::Sas7bdat, _) => import_sas7bdat(input, target, force, opts),
        (Format::Xport, _) => import_xport(input, target, force, opts),
        (Format::Dta, _) => import_dta(input, target, force, opts),
        (Format::Sav, _) => import_sav(input, target, force, opts),
        (Format::Por, _) => import_por(input, target, force, opts),
        (Format::Fixed, Some(cb)) => import_fixed(input, cb, target, force, opts),
        _ => import_csv(input, target, force, opts),
    }
}
