//! Arrow and Parquet for microtab datasets.
//!
//! * [`batches`] turns a dataset (some variables, the records a filter
//!   keeps) into Arrow record batches — values as users see them: implied
//!   decimals applied (or exact `Decimal128`), system-missing values and
//!   user-missing codes as nulls (or the codes kept), text as
//!   dictionary arrays, value labels as dictionary arrays of labels on
//!   request — decoded on every core, with the variables' metadata
//!   (labels, value labels, missing codes, implied decimals) and the
//!   survey design as JSON under the schema's [`METADATA_KEY`]. The Python
//!   package hands the same batches to pyarrow, Polars and DuckDB through
//!   the Arrow C stream interface.
//! * [`write_parquet`] writes them as a Parquet file, encoding columns in
//!   parallel, atomically (a temporary file renamed into place).
//! * [`import_parquet`] reads a Parquet file (from microtab, DuckDB,
//!   pyarrow, Polars, ipumspy …) into a dataset, restoring microtab's
//!   metadata when the file carries it, or taking labels and missing codes
//!   from a DDI codebook (an IPUMS extract converted by ipumspy).
//!
//! The mapping is in docs/CLI.md ("export"); nothing in it guesses: a
//! value that cannot be carried exactly is an error naming the column.
#![deny(missing_docs)]

mod export;
mod import;
mod meta;

pub use export::{batches, write_parquet, Batches, Compression, ExportOptions, ExportSummary};
pub use import::{import_parquet, ImportOptions};
pub use meta::{Meta, VarMeta, METADATA_KEY};

use std::path::PathBuf;

/// Why an export or import failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// Dataset access failed.
    #[error(transparent)]
    Store(#[from] microtab_store::Error),
    /// The filter or a variable name was refused.
    #[error(transparent)]
    Engine(#[from] microtab_engine::Error),
    /// Writing the dataset failed.
    #[error(transparent)]
    Ingest(Box<microtab_ingest::Error>),
    /// An Arrow array could not be built or read.
    #[error("{0}")]
    Arrow(#[from] arrow_schema::ArrowError),
    /// Reading or writing the Parquet file failed.
    #[error("{path}: {error}")]
    Parquet {
        /// The file.
        path: PathBuf,
        /// What the Parquet library said.
        error: parquet::errors::ParquetError,
    },
    /// A file could not be read or written.
    #[error("{path}: {error}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The operating system's error.
        error: std::io::Error,
    },
    /// An export's request does not fit the dataset (a variable named
    /// twice, none named).
    #[error("{path}: {reason}")]
    Request {
        /// The dataset.
        path: PathBuf,
        /// What is wrong.
        reason: String,
    },
    /// The input holds something microtab cannot store exactly, or the
    /// output cannot be written where it was asked for.
    #[error("{path}: {reason}")]
    Input {
        /// The file or dataset.
        path: PathBuf,
        /// What is wrong and what was expected.
        reason: String,
    },
    /// The output exists and replacing it was not asked for.
    #[error("{path}: exists")]
    Exists {
        /// The file.
        path: PathBuf,
    },
    /// A value of a column the file's microtab metadata or its codebook
    /// gives decimals is not such a number (a double carries about 15
    /// significant digits).
    #[error("{path}: record {record}, column {column}: {value} is not a number with {decimals} decimals, as the file's microtab metadata or the codebook says (a double carries about 15 significant digits)")]
    NotDecimal {
        /// The file.
        path: PathBuf,
        /// The record (1-based).
        record: u64,
        /// The column.
        column: String,
        /// The value read.
        value: f64,
        /// The decimals the metadata gives.
        decimals: u32,
    },
}

impl microtab_store::Remedied for Error {
    /// [`Remedy::Force`](microtab_store::Remedy::Force) for an output that
    /// exists, [`Remedy::ExactDecimals`](microtab_store::Remedy::ExactDecimals)
    /// for decimals a double cannot carry, and what the store's, the
    /// engine's and ingest's errors say.
    fn remedy(&self) -> Option<microtab_store::Remedy> {
        use microtab_store::Remedy;
        match self {
            Error::Store(e) => e.remedy(),
            Error::Engine(e) => e.remedy(),
            Error::Ingest(e) => e.remedy(),
            Error::Exists { .. } => Some(Remedy::Force),
            Error::NotDecimal { .. } => Some(Remedy::ExactDecimals),
            _ => None,
        }
    }
}

// Boxed: ingest's error is large, and every result of this crate would
// carry its size.
impl From<microtab_ingest::Error> for Error {
    fn from(e: microtab_ingest::Error) -> Self {
        Error::Ingest(Box::new(e))
    }
}

/// Result alias for this crate.
pub type Result<T> = std::result::Result<T, Error>;
