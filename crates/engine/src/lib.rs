//! Query execution for microtab: filters, group-by cubes, weights, means
//! and statistics over a [`microtab_store::Dataset`].
//!
//! A query ([`Query`]) names a filter, grouping variables, an optional
//! weight and an optional analysis variable. [`run`] maps every grouping
//! variable to a dense category index (a lookup table for the small code
//! domains survey variables have, a hash-built dictionary of distinct
//! values otherwise), splits the rows into morsels counted in parallel into
//! per-worker dense cubes, and merges them into a [`Cube`]. Only the columns
//! the query names are read. Statistics ([`stats`]) are computed from the
//! cube, never from the rows.
//!
//! ```
//! # use microtab_store::*;
//! # let dir = tempfile::tempdir().unwrap();
//! # let t = dir.path().join("d.mtab");
//! # let mut w = DatasetWriter::create(&t, false).unwrap();
//! # let mut c = w.column_writer("SEX", PhysType::U8).unwrap();
//! # c.append(&[1u8, 2, 2]).unwrap();
//! # let mut v = Variable::new("SEX", Kind::Int, PhysType::U8);
//! # (v.min, v.max) = (Some(Number::Int(1)), Some(Number::Int(2)));
//! # let v = c.finish(v).unwrap();
//! # w.add_variable(v); w.commit(3).unwrap();
//! use microtab_engine::{run, Query};
//! let ds = Dataset::open(&t).unwrap();
//! let cube = run(&ds, &Query { group_by: vec!["SEX".into()], ..Query::default() }).unwrap();
//! assert_eq!(cube.counts, vec![1, 2]);
//! assert_eq!(cube.dims[0].categories[1].display, "2");
//! ```
#![deny(missing_docs)]

mod acc;
mod alloc;
mod cube;
pub mod derive;
mod exact;
mod exec;
pub mod expr;
pub mod filter;
mod hash;
mod kernels;
pub mod list;
mod partial;
mod physical;
mod plan;
mod quantile;
mod recode;
mod scan;
pub mod stats;
pub mod subset;
mod taylor;
mod top;
mod value;
mod weights;

pub use alloc::ExitOnOutOfMemory;
pub use cube::{Cube, Dim, Moments, RepCells};
pub use derive::{check_name, compute, recode, DeriveOptions, Derived, RecodeOptions};
pub use exact::ExactSum;
pub use exec::{run, run_partial, run_with, DEFAULT_MAX_CELLS};
pub use expr::Program;
pub use filter::{parse_filter, Term};
pub use list::{list_cases, list_vars, split_list, var_names, ListQuery};
pub use microtab_io::ReadPath;
pub use partial::{Partial, PartialDim, RepCellSums, RepPartial, Summed, Sums};
pub use quantile::{Distribution, Split};
pub use recode::{check_values, parse_dim, parse_dim_in, DimSpec, Group};
pub use scan::ScanOptions;
pub use taylor::{
    Margin, MarginCov, PartEntries, PartStratum, TaylorCells, TaylorPartial, TaylorQuery, MAX_FULL,
};
pub use top::{top_values, value_counts, value_key, TopValues, ValueCounts, MAX_KEYS};
pub use value::{Category, Value};
pub use weights::{weight_cases, zero_weight_cells, WeightCases};

/// What to compute.
#[derive(Debug, Clone, Default)]
pub struct Query {
    /// Filter terms, all of which must hold.
    pub filter: Vec<Term>,
    /// Grouping variables, outermost first (row, column, control …).
    pub group_by: Vec<String>,
    /// Weight variable.
    pub weight: Option<String>,
    /// Analysis variable for means.
    pub measure: Option<String>,
    /// Replicate weight variables: each cell also sums each of them (and,
    /// with a measure, each times the measure) over the rows the weight
    /// counts, into [`Cube::replicates`].
    pub replicates: Vec<String>,
    /// A stratified cluster design: the design covariances of the cells'
    /// totals are accumulated PSU by PSU into [`Cube::taylor`] (needs
    /// `weight`; not with `replicates` or `rows`).
    pub taylor: Option<TaylorQuery>,
    /// Also give each cell's weighted distribution of the analysis
    /// variable ([`Cube::distribution`]; needs `measure`).
    pub distribution: bool,
    /// Split each cell's records at a threshold of its own: one more,
    /// last, dimension with the categories `≤` and `>`.
    pub split: Option<Split>,
    /// Show missing codes and system-missing as categories instead of
    /// excluding them (grouping variables only).
    pub include_missing: bool,
    /// Most cells the result may have (`None`: [`DEFAULT_MAX_CELLS`]); a
    /// larger table is refused with [`Error::TooLarge`] before any memory
    /// is taken for it.
    pub max_cells: Option<usize>,
    /// Count only the records in this range of row numbers (`None`: all);
    /// the part of a dataset a partial result covers. Categories are still
    /// those of the whole dataset (a grouping's domain does not depend on
    /// the range); the stripes the range touches are read and checked
    /// whole.
    pub rows: Option<std::ops::Range<u64>>,
}

/// Query errors. "Expected" errors are the caller's (bad names, bad
/// filters); `Store` wraps dataset problems.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// Dataset access failed (includes unknown variables).
    #[error(transparent)]
    Store(#[from] microtab_store::Error),
    /// The filter text could not be parsed.
    #[error("bad filter '{text}': {reason}")]
    Filter {
        /// The offending term or text.
        text: String,
        /// What was expected.
        reason: String,
    },
    /// The query is not meaningful for these variables.
    #[error("{0}")]
    Invalid(String),
    /// The result would be larger than the query allows.
    #[error("{0}")]
    TooLarge(String),
    /// A buffer the query needs could not be allocated (a memory limit,
    /// or not enough memory): the query is refused, the process goes on.
    #[error("this needs {bytes} bytes ({:.1} MB) for {what}, which could not be allocated (a memory limit, or not enough memory)", *bytes as f64 / 1e6)]
    OutOfMemory {
        /// Size of the buffer.
        bytes: u64,
        /// What it was for.
        what: String,
    },
    /// A filter, recode or expression names a value of a text variable
    /// that none of its records has (values are matched exactly: case and
    /// spaces count).
    #[error("{variable} has no value '{value}'{}", did_you_mean(.close))]
    NoSuchValue {
        /// The variable.
        variable: String,
        /// The value as given.
        value: String,
        /// Its values that differ from it only in case, spaces or
        /// punctuation, or by a letter or two.
        close: Vec<String>,
    },
}

/// ` (did you mean 'a', 'b' or 'c'?)`, or nothing.
fn did_you_mean(close: &[String]) -> String {
    match close {
        [] => String::new(),
        [one] => format!(" (did you mean '{one}'?)"),
        [init @ .., last] => format!(
            " (did you mean {} or '{last}'?)",
            init.iter()
                .map(|c| format!("'{c}'"))
                .collect::<Vec<_>>()
                .join(", ")
        ),
    }
}

// A minimal stand-in until the engine's own `Remedied` (issue 28, the
// engine helpers' branch) replaces this block: a table too large is the
// one engine error whose remedy the front ends test here.
impl microtab_store::Remedied for Error {
    fn remedy(&self) -> Option<microtab_store::Remedy> {
        match self {
            Error::Store(e) => microtab_store::Remedied::remedy(e),
            Error::TooLarge(_) => Some(microtab_store::Remedy::MaxCells { cells: None }),
            _ => None,
        }
    }
}

/// Result alias for this crate.
pub type Result<T> = std::result::Result<T, Error>;
