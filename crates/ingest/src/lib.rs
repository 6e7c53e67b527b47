//! Import of text microdata into microtab datasets: delimited text (CSV)
//! and fixed-width records described by a DDI codebook (IPUMS extracts),
//! plain or gzip-compressed.
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
//! error naming the line and column (override with [`CsvOptions::types`]).
//! Fixed-width types come from the codebook: numeric fields with implied
//! decimals become exact scaled integers, alphabetic ones strings.
//!
//! ```no_run
//! use microtab_ingest::{import_csv, CsvOptions};
//! let summary = import_csv("people.csv".as_ref(), "people.mtab".as_ref(), false, &CsvOptions::default()).unwrap();
//! println!("{} rows", summary.rows);
//! ```
#![deny(missing_docs)]

mod columnar;
mod csv;
pub mod ddi;
mod error;
mod fixed;
mod parse;
mod pipeline;
mod sink;
mod source;
mod tokenizer;

pub use columnar::{Chunk, ColumnarImport};
pub use csv::{import_csv, CsvOptions, TypeHint};
pub use ddi::Codebook;
pub use error::Error;
pub use fixed::{import_fixed, FixedOptions};
pub use parse::{Encoding, DEFAULT_NA, DEFAULT_TEXT_NA};
pub use pipeline::{ImportSummary, Progress};

/// Result alias for this crate.
pub type Result<T> = std::result::Result<T, Error>;
