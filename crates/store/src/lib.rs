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
//! assert_eq!(sex.as_u8().unwrap(), Some(&[1u8, 2, 2, 1][..]));
//! ```
#![deny(missing_docs)]

pub mod codec;
mod column;
mod dataset;
mod manifest;
mod names;
pub mod pack;
mod remedy;
mod types;

pub use column::{
    fold_floats, Column, ColumnData, ColumnHeader, ColumnWriter, ValueSet, Zone, HEADER_SIZE,
    STRIPE_ROWS, VALUE_SET_SPAN, ZONE_BYTES,
};
pub use dataset::{about_text, exchange, Dataset, DatasetWriter};
pub use manifest::{
    new_dataset_id, Calibration, Design, Kind, LonelyPsu, Manifest, Number, PartOf, RepType,
    Replicates, Taylor, Variable, FORMAT_VERSION,
};
pub use names::{close_names, did_you_mean, edits};
pub use pack::Packing;
pub use remedy::{ColumnKind, Remedied, Remedy};
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
    #[error("unknown variable '{name}' in {}{}; {}", .dataset.display(), did_you_mean(.close), listed(.known, *.count))]
    UnknownVariable {
        /// The requested name.
        name: String,
        /// The dataset directory.
        dataset: PathBuf,
        /// The dataset's first variables (at most [`LISTED`]).
        known: Vec<String>,
        /// How many variables the dataset has.
        count: usize,
        /// The variables the name probably meant ([`close_names`]).
        close: Vec<String>,
    },
    /// The dataset cannot be read for want of permission: the error names
    /// the dataset, not its manifest.
    #[error("cannot read dataset {}: {}", .dataset.display(), io_words(.error))]
    CannotRead {
        /// The dataset directory.
        dataset: PathBuf,
        /// The operating system's error.
        error: std::io::Error,
    },
    /// The dataset (or the directory it is written in) cannot be written:
    /// no permission, a read-only file system. The error names the
    /// dataset, not the file inside it the system refused.
    #[error("cannot write to dataset {}: {}", .dataset.display(), io_words(.error))]
    CannotWrite {
        /// The dataset directory.
        dataset: PathBuf,
        /// The operating system's error.
        error: std::io::Error,
    },
    /// Another writer created the target while this one wrote it (to a
    /// target that did not exist when it started): nothing was replaced.
    #[error("{path} was created by another process while this one wrote it; nothing was replaced (run the command again to replace it)")]
    CreatedMeanwhile {
        /// The target directory.
        path: PathBuf,
    },
    /// The import target exists and overwriting was not requested.
    #[error("{path} already exists")]
    Exists {
        /// The target directory.
        path: PathBuf,
    },
    /// Another process is changing the dataset (writers exclude each other).
    #[error("{path} is being changed by {holder}; try again when it has finished")]
    Locked {
        /// The dataset directory.
        path: PathBuf,
        /// Who holds the lock (`pid N (microtab import)`, as it wrote it).
        holder: String,
    },
    /// The dataset was replaced by another process after this one read
    /// its manifest.
    #[error("{path} was changed by another process while this command ran (generation {was} became {now}); run the command again")]
    Changed {
        /// The dataset directory.
        path: PathBuf,
        /// The generation this process read.
        was: u64,
        /// The generation on disk now.
        now: u64,
    },
}

impl Remedied for Error {
    /// [`Remedy::Force`] for a target that exists; nothing else here has
    /// an option that would help.
    fn remedy(&self) -> Option<Remedy> {
        match self {
            Error::Exists { .. } => Some(Remedy::Force),
            _ => None,
        }
    }
}

impl Error {
    /// A copy of this error (for results cached and handed out again).
    pub fn duplicate(&self) -> Error {
        match self {
            Error::Io(e) => Error::Io(microtab_io::Error {
                path: e.path.clone(),
                error: std::io::Error::new(e.error.kind(), e.error.to_string()),
            }),
            Error::NotADataset { path } => Error::NotADataset { path: path.clone() },
            Error::Corrupt { path, reason } => Error::Corrupt {
                path: path.clone(),
                reason: reason.clone(),
            },
            Error::UnknownVariable {
                name,
                dataset,
                known,
                count,
                close,
            } => Error::UnknownVariable {
                name: name.clone(),
                dataset: dataset.clone(),
                known: known.clone(),
                count: *count,
                close: close.clone(),
            },
            Error::CannotWrite { dataset, error } => Error::CannotWrite {
                dataset: dataset.clone(),
                error: std::io::Error::new(error.kind(), error.to_string()),
            },
            Error::CannotRead { dataset, error } => Error::CannotRead {
                dataset: dataset.clone(),
                error: std::io::Error::new(error.kind(), error.to_string()),
            },
            Error::Exists { path } => Error::Exists { path: path.clone() },
            Error::CreatedMeanwhile { path } => Error::CreatedMeanwhile { path: path.clone() },
            Error::Locked { path, holder } => Error::Locked {
                path: path.clone(),
                holder: holder.clone(),
            },
            Error::Changed { path, was, now } => Error::Changed {
                path: path.clone(),
                was: *was,
                now: *now,
            },
        }
    }
}

/// How many of a dataset's variables an unknown variable's error lists.
pub const LISTED: usize = 12;

/// `variables: A, B, C`, or the first [`LISTED`] of more, saying how many
/// there are.
fn listed(known: &[String], count: usize) -> String {
    let names = known.join(", ");
    if count > known.len() {
        format!(
            "the first {} of its {count} variables: {names}, …",
            known.len()
        )
    } else {
        format!("variables: {names}")
    }
}

/// An operating-system error in plain words: `permission denied` rather
/// than `Permission denied (os error 13)`.
pub fn io_words(e: &std::io::Error) -> String {
    use std::io::ErrorKind as K;
    match e.kind() {
        K::PermissionDenied => "permission denied".into(),
        K::ReadOnlyFilesystem => "read-only file system".into(),
        K::StorageFull => "no space left on the device".into(),
        K::QuotaExceeded => "disk quota exceeded".into(),
        _ => e.to_string(),
    }
}

/// XXH3-64 (seed 0) of `bytes`: every checksum of the format. The
/// implementation picks AVX2 at run time where the processor has it (45 GB/s
/// a core here against 26 GB/s for SSE2 alone), since queries hash every
/// stripe they read.
pub fn xxh3(bytes: &[u8]) -> u64 {
    twox_hash::XxHash3_64::oneshot(bytes)
}

/// Result alias for this crate.
pub type Result<T> = std::result::Result<T, Error>;
