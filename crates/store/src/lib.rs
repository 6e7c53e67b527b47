//! The microtab dataset: a directory holding `manifest.json` and one binary
//! file per variable (the SDA design), so a crosstab of two variables reads
//! two narrow files and nothing else.
//!
//! * [`Dataset`] opens a published dataset and hands out typed, memory-mapped
//!   [`Column`]s.
//! * [`DatasetWriter`] builds a new dataset (or a new generation of an
//!   existing one) and publishes it atomically: either the whole new
//!   dataset becomes visible, or the old one stays exactly as it was.
//!
//! The byte layout is documented in `docs/FORMAT.md`.
//!
//! ```
//! use microtab_store::{DatasetWriter, PhysType, Variable, Kind, Dataset};
//! let dir = tempfile::tempdir().unwrap();
//! let target = dir.path().join("demo.mtab");
//! let mut w = DatasetWriter::create(&target, false).unwrap();
//! let mut col = w.column_writer("SEX", PhysType::U8).unwrap();
//! col.append(&[1u8, 2, 2, 1]).unwrap();
//! let var = col.finish(Variable::new("SEX", Kind::Int, PhysType::U8)).unwrap();
//! w.add_variable(var);
//! w.commit(4).unwrap();
//! let ds = Dataset::open(&target).unwrap();
//! let sex = ds.column("SEX").unwrap();
//! assert_eq!(sex.as_u8(), Some(&[1u8, 2, 2, 1][..]));
//! ```
#![deny(missing_docs)]

mod column;
mod dataset;
mod manifest;
pub mod pack;
mod types;

pub use column::{Column, ColumnData, ColumnHeader, ColumnWriter, HEADER_SIZE};
pub use dataset::{Dataset, DatasetWriter};
pub use manifest::{Kind, Manifest, Number, Variable, FORMAT_VERSION};
pub use pack::Packing;
pub use types::{NativeType, PhysType};

use std::path::PathBuf;

/// Errors reading or writing a dataset.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// An operating-system error on a named file.
    #[error(transparent)]
    Io(#[from] microtab_io::Error),
    /// The directory is not a microtab dataset.
    #[error("{path}: not a microtab dataset (no manifest.json)")]
    NotADataset {
        /// The directory given.
        path: PathBuf,
    },
    /// The manifest or a column file is malformed or inconsistent.
    #[error("{path}: corrupt dataset: {reason}")]
    Corrupt {
        /// The offending file.
        path: PathBuf,
        /// What is wrong with it.
        reason: String,
    },
    /// A query named a variable the dataset does not have.
    #[error("unknown variable '{name}' in {dataset} (variables: {known})")]
    UnknownVariable {
        /// The requested name.
        name: String,
        /// The dataset directory.
        dataset: PathBuf,
        /// A short list of the variables that do exist.
        known: String,
    },
    /// The import target exists and overwriting was not requested.
    #[error("{path} already exists; use --force to replace it")]
    Exists {
        /// The target directory.
        path: PathBuf,
    },
}

/// Result alias for this crate.
pub type Result<T> = std::result::Result<T, Error>;
