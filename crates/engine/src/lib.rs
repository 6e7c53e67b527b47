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
//!
//! # Layers
//!
//! Each module imports only modules on its own line or above it (checked
//! by the absence of import cycles; see docs/ARCHITECTURE.md):
//!
//! 1. `core` (constants of the scan, [`Error`], [`Moments`] and the exact
//!    cells, [`ScanOptions`], fallible allocation), `hash`, `value`, `exact`: leaves.
//! 2. `query` ([`Query`] and its parts), `plan` (each grouping variable's
//!    categories and the mappers from codes to cells), `layout` (the
//!    categories a result keeps), `cube` (the result types).
//! 3. `kernels`: the counting loops, each a function of slices.
//! 4. `taylor`, `quantile`: the per-cell sums beyond counts and moments
//!    (their plans, their accumulators, their finishing).
//! 5. `physical`: the plan of a query, the `Kernel` counting it
//!    chosen once, and the named slots of its columns.
//! 6. `acc`: a worker's accumulator, one state per kernel and per extra
//!    sum; `scan`: the morsel drivers; `partial`, `finish`: the
//!    accumulator into a [`Partial`] or a [`Cube`].
//! 7. `exec`: a [`Query`] planned, scanned and finished ([`run`]); the
//!    grammar modules (`filter`, `recode`, `expr`, `derive`, `list`,
//!    `subset`) and the analyses over a cube (`stats`, `top`, `weights`).
#![deny(missing_docs)]

mod acc;
mod core;
mod cube;
pub mod derive;
mod exact;
mod exec;
pub mod expr;
pub mod filter;
mod finish;
mod fold;
pub mod formula;
mod hash;
mod kernels;
mod layout;
mod lex;
pub mod list;
mod partial;
mod physical;
mod plan;
mod quantile;
mod query;
mod recode;
mod scan;
pub mod stats;
pub mod subset;
mod taylor;
mod top;
mod value;
mod weights;

pub use crate::core::{Error, ExitOnOutOfMemory, Moments, Result, ScanOptions, DEFAULT_MAX_CELLS};
pub use cube::{Cube, RepCells};
pub use derive::{check_name, compute, recode, DeriveOptions, Derived, RecodeOptions};
pub use exact::ExactSum;
pub use exec::{fold_rows, run, run_partial, run_traced, run_with};
pub use expr::Program;
pub use filter::{parse_filter, Cond, Item, Term};
pub use fold::{state_of, Fold, FoldRows, FoldState};
pub use formula::{parse_formula, Formula, Outcome, Part};
pub use layout::{unravel, Dim};
pub use list::{arg_list, list_cases, list_vars, split_list, var_names, ListQuery};
pub use microtab_io::ReadPath;
pub use partial::{Partial, PartialDim, RepCellSums, RepPartial, Summed, Sums};
pub use quantile::Distribution;
pub use query::{Margin, Query, Scores, Split, TaylorQuery};
pub use recode::{check_values, parse_dim, parse_dim_in, DimSpec, Group};
pub use taylor::{
    unite_strata, Domains, MarginCov, PartEntries, PartScores, PartStratum, TaylorCells,
    TaylorPartial, MAX_FULL,
};
pub use top::{top_values, value_counts, value_key, TopValues, ValueCounts, MAX_KEYS};
pub use value::{Category, Value};
pub use weights::{weight_cases, zero_weight_cells, WeightCases};
