//! Why a model cannot be fitted: a leaf, so the crate's `Error` can hold it.

/// Why a model cannot be fitted (facts; each front end words them).
#[derive(Debug, Clone, PartialEq, thiserror::Error, serde::Serialize, serde::Deserialize)]
pub enum ModelError {
    /// A column is a linear combination of those before it (or constant
    /// like the intercept) in the model's records.
    #[error("the model's column {term} is collinear with the columns before it in the records used (aliased): leave it out or merge categories")]
    Collinear {
        /// The column (as R names it).
        term: String,
    },
    /// The fit did not converge.
    #[error("the model did not converge in {iterations} iterations (perfect separation or a degenerate outcome?)")]
    NoConvergence {
        /// Iterations made.
        iterations: usize,
    },
    /// Fitted probabilities of 0 or 1 (or means of 0) in some cells: the
    /// outcome is perfectly predicted there.
    #[error("perfect separation: the outcome is predicted without error where {cells}; the estimates and their standard errors are not finite")]
    Separation {
        /// The predictors' values of the cells (a few).
        cells: String,
    },
    /// A binary model's outcome takes other values than 0 and 1.
    #[error("the outcome {variable} of a {family} model must be 0 or 1, but it takes {values}: write a condition such as {variable}(1)")]
    NotBinary {
        /// The outcome variable.
        variable: String,
        /// The family.
        family: String,
        /// Some of its other values, in words ("the values 2, 3", "729497
        /// distinct values").
        values: String,
    },
    /// A Poisson outcome is negative somewhere.
    #[error("the outcome {variable} of a poisson model must not be negative (it takes {value})")]
    Negative {
        /// The outcome variable.
        variable: String,
        /// A negative value.
        value: String,
    },
    /// A factor's base is not one of its categories.
    #[error("factor {part}: the base {base} is not one of its categories in the records used ({levels})")]
    NoBase {
        /// The factor as written.
        part: String,
        /// The base asked for.
        base: String,
        /// Its categories.
        levels: String,
    },
    /// A numeric term takes text values.
    #[error("{part} is text: write factor({part}) to use it as categories")]
    Text {
        /// The part as written.
        part: String,
    },
    /// No record has every model variable.
    #[error("no record has a value of every model variable (after the filter)")]
    Empty,
    /// More columns than records with weight.
    #[error("the model has {columns} columns but only {cells} distinct combinations of predictors in the records used")]
    TooFew {
        /// Columns of the model.
        columns: usize,
        /// Combinations with weight.
        cells: usize,
    },
}
