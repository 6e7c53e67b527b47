//! microtab's analysis layer: one place where a question about a dataset
//! becomes a typed answer, for every front end (the CLI, and the Python
//! package, HTTP API and Dask workers that build on it).
//!
//! A [`Request`] names an [`Analysis`] (frequencies, a crosstab, means by
//! group) and the options every analysis shares (weight, filter, missing
//! values, limits). [`run`] plans and executes it with the engine
//! ([`microtab_engine`]) and returns an [`Answer`]: [`Frequencies`],
//! [`Crosstab`] or [`Means`], with labels, margins, percentages and
//! statistics. Every result is `serde::Serialize` (the JSON schema is in
//! docs/CLI.md); its long part (frequency rows, tables, groups) is produced
//! lazily by an iterator and serialized element by element, so a result of
//! any size streams to its writer instead of being built in memory.
//!
//! The same request can be answered in parts: [`partial`] computes it over
//! one dataset, or the rows [`Request::rows`] names, as an exact,
//! serializable [`Partial`]; [`Partial::merge`] unites parts (associative
//! and commutative, bit for bit) and [`Partial::finish`] gives the answer.
//! [`run_many`] answers several datasets with the same variables as one.
//!
//! ```
//! # use microtab_store::*;
//! # let dir = tempfile::tempdir().unwrap();
//! # let t = dir.path().join("d.mtab");
//! # let mut w = DatasetWriter::create(&t, false).unwrap();
//! # let mut c = w.column_writer("SEX", PhysType::U8).unwrap();
//! # c.append(&[1u8, 2, 2, 2]).unwrap();
//! # let mut v = Variable::new("SEX", Kind::Int, PhysType::U8);
//! # (v.min, v.max) = (Some(Number::Int(1)), Some(Number::Int(2)));
//! # let v = c.finish(v).unwrap();
//! # w.add_variable(v); w.commit(4).unwrap();
//! use microtab_analysis::{run, Analysis, Answer, Request};
//! let ds = Dataset::open(&t).unwrap();
//! let req = Request::new(Analysis::Freq { var: "SEX".into() });
//! let Answer::Freq(f) = run(&ds, &req, &Default::default()).unwrap() else { unreachable!() };
//! let pct: Vec<_> = f.rows().map(|r| r.percent.unwrap()).collect();
//! assert_eq!(pct, [25.0, 75.0]);
//! ```
#![deny(missing_docs)]

mod checks;
mod codebook;
pub mod compare;
mod contrast;
pub mod corr;
mod describe;
mod design;
pub mod edit;
mod family;
mod html;
mod json;
pub use json::{answer_json, answer_text};
pub mod model;
mod params;
mod quantile;
pub mod ratio;
mod regress;
mod request;
mod result;
mod run;
pub mod settings;
mod split;
mod staging;
mod sums;
pub mod survey;
mod taylor;
pub mod ttest;
pub mod weighting;

pub use codebook::{anchor, codebook_html, CodebookEntry, CodebookHtml, CodebookPage, TopValue};
pub use describe::{design_summary, DatasetInfo, Shown, VariableInfo};
pub use design::{build_design, replicate_names, DesignSpec};
pub use html::{fmt_sig, group_digits, group_float, html_escape};
pub use microtab_engine::{Category, ScanOptions, Value, WeightCases};
pub use params::{split_list, Params, PARAMS};
pub use quantile::Quantile;
pub use request::{Analysis, Pct, PctInterval, Request};
pub use result::{
    Answer, Context, Crosstab, FreqRow, Frequencies, Group, Margins, Means, Percentages, Stat,
    Table, Totals,
};
pub use run::{
    check_values, partial, partial_round, run, run_many, run_many_each, PartOptions, Partial,
    Round, Step, MAX_ROUNDS,
};
pub use settings::{Settings, SettingsError, SettingsInfo};
pub use split::{
    catalog, catalog_parts, split, Catalog, CatalogError, CatalogPart, SplitReport, CATALOG,
    CATALOG_VERSION,
};
pub use staging::{remove_stale_staging, SelectError, SelectedImport, Staging};
pub use taylor::taylor_structure;

/// Why a request could not be answered.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The engine refused or failed the query (bad names, bad filters,
    /// too large a table, a damaged dataset …).
    #[error(transparent)]
    Engine(#[from] microtab_engine::Error),
    /// A comparison with a base group asked of a table of several
    /// grouping variables.
    #[error("a comparison with a base group needs one grouping variable, not {count}")]
    CompareGroups {
        /// The grouping variables given.
        count: usize,
    },
    /// Shares compared across columns of a recoded (or restricted) row
    /// variable.
    #[error("differences of shares need a row variable as stored, not the recode {var}")]
    CompareRecode {
        /// The row argument given.
        var: String,
    },
    /// Two groups of a comparison or a test are shown as the same value
    /// (a recode giving two ranges one label): they are named by their
    /// values, so neither could be told apart.
    #[error("two groups are both shown as {value:?}: comparisons and tests name groups by their values, so each needs its own")]
    SameValue {
        /// The value shown twice.
        value: String,
    },
    /// A ratio's or a correlation's variable is text.
    #[error("{variable} is a text variable: a ratio or a correlation needs numbers")]
    NotNumeric {
        /// The variable.
        variable: String,
    },
    /// No record has every variable an estimate needs.
    #[error("no record has a value of every variable used (after the filter)")]
    NoRecords,
    /// A correlation matrix of fewer than two variables, or of one twice.
    #[error("a correlation matrix needs two or more different variables: {given}")]
    CorrVariables {
        /// The variables given, as given.
        given: String,
    },
    /// A model cannot be fitted.
    #[error(transparent)]
    Model(#[from] crate::model::error::ModelError),
    /// Dataset access failed.
    #[error(transparent)]
    Store(#[from] microtab_store::Error),
    /// The weight is negative in rows the request uses and
    /// [`Request::allow_negative_weights`] is off.
    #[error("the weight {variable} is negative in {count} of the rows this query uses; weighted results with negative weights are not estimates of a population (replicate weights can be)")]
    NegativeWeights {
        /// The weight variable.
        variable: String,
        /// Rows with a negative weight.
        count: u64,
    },
    /// The request names a weight other than its dataset's survey design's,
    /// for which the design's standard errors do not hold.
    #[error("the dataset's survey design weights by {design}; its standard errors do not hold for the weight {weight}")]
    DesignWeight {
        /// The design's weight.
        design: String,
        /// The weight the request names.
        weight: String,
    },
    /// A Taylor design was set on another number of records than the
    /// dataset now has.
    #[error("the survey design was set on {set_on} records and the dataset now has {rows}")]
    DesignRecords {
        /// Records when the design was set.
        set_on: u64,
        /// Records now.
        rows: u64,
    },
    /// Records in strata a Taylor design does not know: the dataset
    /// changed since the design was set.
    #[error("{records} records are in strata the survey design does not know: the data changed since the design was set")]
    UnknownStrata {
        /// Those records.
        records: u64,
    },
    /// A Taylor design is answered over whole datasets, not ranges of rows.
    #[error("a Taylor linearization design is answered over the whole dataset: not over a range of rows (replicate weights can be)")]
    TaylorRange,
    /// Parts answered as one have different survey designs.
    #[error("the parts' survey designs differ (weights, replicate weights or their formula): their standard errors cannot be combined")]
    DesignsDiffer,
    /// Strata of a Taylor design with a single PSU, under
    /// [`LonelyPsu::Fail`](microtab_store::LonelyPsu::Fail).
    #[error("{} {}{} of {strata_variable} {} a single PSU (a lonely PSU): its variance cannot be estimated", if *.count == 1 { "stratum" } else { "strata" }, .strata.join(", "), if *.count > .strata.len() { format!(" and {} more", .count - .strata.len()) } else { String::new() }, if *.count == 1 { "has" } else { "have" })]
    LonelyPsu {
        /// The stratum variable (empty: one stratum).
        strata_variable: String,
        /// The first few such strata, as displayed.
        strata: Vec<String>,
        /// How many strata have a single PSU.
        count: usize,
    },
    /// A design's strata or clusters are stored as floating point, not
    /// codes.
    #[error("the {role} variable {variable} is stored as floating point: {role} must be integer or text codes")]
    NotCodes {
        /// `strata` or `cluster`.
        role: String,
        /// The variable.
        variable: String,
    },
    /// The request does not fit the dataset's survey design (the
    /// message says how).
    #[error("{0}")]
    Design(String),
    /// A file of a catalog of parts could not be read or written.
    #[error("{path}: {source}")]
    Io {
        /// The file or directory.
        path: String,
        /// The system's error.
        #[source]
        source: std::io::Error,
    },
    /// A catalog of parts ([`split()`]) is not what it should be, or a
    /// split cannot be made as asked.
    #[error(transparent)]
    Catalog(#[from] Box<CatalogError>),
    /// A text that is not a value of the variable it is given for.
    #[error(transparent)]
    Value(#[from] microtab_store::codec::NotAValue),
    /// A missing code that no record has.
    #[error("'{value}' does not occur in {variable}, so it cannot be a missing code")]
    NotInData {
        /// The value as typed.
        value: String,
        /// The variable.
        variable: String,
    },
    /// A new name that another variable has.
    #[error("{dataset} already has a variable {variable}")]
    NameTaken {
        /// The dataset.
        dataset: String,
        /// The variable that has the name.
        variable: String,
    },
    /// A change to a variable that the adjustment of the design's weight
    /// read (its values, missing codes or value labels, or its name):
    /// the linearized variance rebuilds the adjustment from it.
    #[error("{variable} is used by the adjustment the design's weight {weight} was made by: its standard errors rebuild that adjustment from {variable} as it was; change or clear the design first")]
    InAdjustment {
        /// The variable.
        variable: String,
        /// The design's weight.
        weight: String,
    },
    /// A variable to drop that the survey design uses.
    #[error("{variable} is part of the survey design: change or clear the design first")]
    InDesign {
        /// The variable.
        variable: String,
    },
    /// Dropping every variable.
    #[error("that would drop every variable of {dataset}")]
    DropAll {
        /// The dataset.
        dataset: String,
    },
    /// One dataset of several answered as one ([`run_many`]) failed, or
    /// could not be merged with the others.
    #[error("{dataset}: {error}")]
    InDataset {
        /// The dataset.
        dataset: String,
        /// What went wrong there.
        error: Box<Error>,
    },
}

impl microtab_store::Remedied for Error {
    /// The option that would answer the request: what the engine's and the
    /// store's errors say, and for this layer's own, the design's options.
    fn remedy(&self) -> Option<microtab_store::Remedy> {
        use microtab_store::{ColumnKind, Remedy};
        match self {
            Error::Engine(e) => e.remedy(),
            Error::Store(e) => e.remedy(),
            Error::NegativeWeights { .. } => Some(Remedy::AllowNegativeWeights),
            Error::DesignWeight { .. } | Error::TaylorRange | Error::DesignsDiffer => {
                Some(Remedy::NoDesign)
            }
            Error::DesignRecords { .. } | Error::UnknownStrata { .. } => Some(Remedy::SetDesign),
            Error::LonelyPsu { .. } => Some(Remedy::LonelyPsu),
            Error::NotCodes { variable, .. } => Some(Remedy::ColumnType {
                variable: Some(variable.clone()),
                kind: ColumnKind::IntOrString,
            }),
            Error::Catalog(e) => e.remedy(),
            Error::InDataset { error, .. } => error.remedy(),
            Error::Design(_)
            | Error::InDesign { .. }
            | Error::InAdjustment { .. }
            | Error::Value(_)
            | Error::NotInData { .. }
            | Error::NameTaken { .. }
            | Error::DropAll { .. }
            | Error::Io { .. }
            | Error::Model(_)
            | Error::CompareGroups { .. }
            | Error::CompareRecode { .. }
            | Error::SameValue { .. }
            | Error::NotNumeric { .. }
            | Error::NoRecords
            | Error::CorrVariables { .. } => None,
        }
    }
}

/// Result alias for this crate.
pub type Result<T> = std::result::Result<T, Error>;
