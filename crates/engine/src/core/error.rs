//! The engine's error type: a kind and the facts, never an option's
//! spelling (each front end words the remedy, [`microtab_store::Remedied`]).

use microtab_store::{did_you_mean, Remedied, Remedy};

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
    /// A grouping argument (`AGE(r: 0-17; 18-*)`, `EDUC(6-11)`) that does
    /// not parse: what is wrong with it, not an unknown variable named by
    /// the whole text.
    #[error("bad grouping argument '{spec}': {reason}")]
    Grouping {
        /// The argument as given.
        spec: String,
        /// What is wrong, naming the variable and the part at fault.
        reason: String,
    },
    /// The result would be larger than the query allows.
    #[error("{0}")]
    TooLarge(String),
    /// The result table would have more cells than the query allows
    /// ([`Query::max_cells`](crate::Query::max_cells)); refused before any
    /// memory is taken for it.
    #[error("{}", too_many_cells(.cells, .limit, .bytes, .variable, .shape))]
    TooManyCells {
        /// Cells the table would have (`None` when a grouping variable
        /// alone has more than `limit` values: how many more is not counted).
        cells: Option<u64>,
        /// The most cells allowed.
        limit: u64,
        /// Memory the table would take (0 when not known).
        bytes: u64,
        /// The grouping variable with too many values, when one alone is.
        variable: Option<String>,
        /// Each grouping variable with its number of categories, outermost
        /// first (empty when not known).
        shape: Vec<(String, usize)>,
    },
    /// A buffer the query needs could not be allocated (a memory limit,
    /// or not enough memory): the query is refused, the process goes on.
    #[error("this needs {bytes} bytes ({:.1} MB) for {what}, which could not be allocated (a memory limit, or not enough memory)", *bytes as f64 / 1e6)]
    OutOfMemory {
        /// Size of the buffer.
        bytes: u64,
        /// What it was for.
        what: String,
    },
    /// A filter, recode or expression gives a text variable a range or an
    /// order comparison, which would compare text, not numbers (a column
    /// of numbers imported as text).
    #[error("bad filter '{text}': {variable} is a text variable: it takes values and lists of values ({variable}(a,b), {variable}=a, {variable}!=a), not ranges or < > comparisons, which would compare text rather than numbers")]
    TextOrder {
        /// The variable.
        variable: String,
        /// The term as given.
        text: String,
    },
    /// A new variable would take the name of one the dataset has.
    #[error("{} already has a variable {variable}", .dataset.display())]
    Exists {
        /// The dataset.
        dataset: std::path::PathBuf,
        /// The variable, as the dataset spells it.
        variable: String,
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

/// Result alias for this crate.
pub type Result<T> = std::result::Result<T, Error>;

/// The facts of [`Error::TooManyCells`] in words.
fn too_many_cells(
    cells: &Option<u64>,
    limit: &u64,
    bytes: &u64,
    variable: &Option<String>,
    shape: &[(String, usize)],
) -> String {
    if let Some(v) = variable {
        return format!(
            "{v} has more than {limit} distinct values, the most cells a result may have; group by a narrower variable"
        );
    }
    let shape = shape
        .iter()
        .map(|(name, n)| format!("{name} {n}"))
        .collect::<Vec<_>>()
        .join(" × ");
    format!(
        "the table would have {} cells ({shape} categories), more than the limit of {limit}; it would need about {} MB of memory. Group by fewer or narrower variables, or filter",
        cells.unwrap_or(0),
        bytes.div_ceil(1 << 20)
    )
}

// The remedies of the engine's own errors. (Kept as one small block so
// the arms other modules' errors need are added beside these.)
impl Remedied for Error {
    fn remedy(&self) -> Option<Remedy> {
        match self {
            Error::TooManyCells { cells, .. } => Some(Remedy::MaxCells { cells: *cells }),
            Error::TextOrder { variable, .. } => Some(Remedy::ColumnType {
                variable: Some(variable.clone()),
                kind: microtab_store::ColumnKind::Int,
            }),
            Error::Exists { .. } => Some(Remedy::Replace),
            Error::Store(e) => e.remedy(),
            _ => None,
        }
    }
}
