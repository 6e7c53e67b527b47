//! Why weights could not be made.

use std::path::PathBuf;

/// Why weights could not be made.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum WeightError {
    /// The dataset could not be read or written.
    #[error(transparent)]
    Store(#[from] microtab_store::Error),
    /// A name or value was refused by the engine.
    #[error(transparent)]
    Engine(#[from] microtab_engine::Error),
    /// The totals file cannot be read.
    #[error("{}{}: {message}", path.display(), if *line > 0 { format!(", line {line}") } else { String::new() })]
    Totals {
        /// The file.
        path: PathBuf,
        /// The line (0: the file as a whole).
        line: u64,
        /// What is wrong.
        message: String,
    },
    /// A row of the totals does not fit the dataset or the method.
    #[error("totals, line {line}: {message}")]
    TotalsRow {
        /// The line of the totals file.
        line: u64,
        /// What is wrong.
        message: String,
    },
    /// A term of the method has no totals.
    #[error("the totals give nothing for {term}")]
    NoTotals {
        /// The term.
        term: String,
    },
    /// The method's text is malformed, or asks what cannot be done.
    #[error("{0}")]
    Spec(String),
    /// Records are outside the totals' categories.
    #[error("{records} records are outside the totals' categories ({detail})")]
    Outside {
        /// The records.
        records: u64,
        /// Which variables and values, and how many records each.
        detail: String,
    },
    /// A category with a population total has no weight.
    #[error("{weight} has no weight in {term} = {value}, whose population total is {total}")]
    EmptyCell {
        /// The weight (full-sample or a replicate).
        weight: String,
        /// The term.
        term: String,
        /// The category.
        value: String,
        /// Its total.
        total: f64,
    },
    /// Totals that cannot all hold: margins with different sums, or a
    /// total that other totals imply differently.
    #[error("the totals disagree: {0}")]
    Inconsistent(String),
    /// Category totals of zero with records in them.
    #[error("{term} = {value} has a population total of 0 but {records} records")]
    ZeroTotal {
        /// The term.
        term: String,
        /// The category.
        value: String,
        /// Its records.
        records: u64,
    },
    /// The iterations ran out.
    #[error("{method} of {weight} did not converge: after {iterations} iterations {target} misses its total of {total} by {off} (relative misfit {worst:.3e}, tolerance {tolerance:.1e}); the bounds may be too tight or the totals impossible for the sample")]
    NotConverged {
        /// The method.
        method: &'static str,
        /// The weight.
        weight: String,
        /// Iterations made.
        iterations: usize,
        /// The target furthest off.
        target: String,
        /// By how much it misses.
        off: f64,
        /// Its total.
        total: f64,
        /// `|achieved − total| / (1 + |total|)`.
        worst: f64,
        /// The tolerance.
        tolerance: f64,
    },
    /// Trimming cannot bring every weight within the bounds.
    #[error("trimming {weight} to [{lo}, {hi}] is impossible: every weight would be at a bound and the total would still not be kept")]
    Trim {
        /// The weight.
        weight: String,
        /// The bounds.
        lo: f64,
        /// The bounds.
        hi: f64,
    },
    /// A new weight's name is taken.
    #[error("{dataset} already has a variable {variable}")]
    Exists {
        /// The dataset.
        dataset: PathBuf,
        /// The variable.
        variable: String,
    },
    /// The weight to adjust is unusable or unknown.
    #[error("{0}")]
    Weight(String),
}
