//! What a user may give to change an outcome: the facts a library error or
//! import note carries about the option that would help, never the option's
//! spelling. Each front end words a [`Remedy`] itself: the CLI as a flag
//! (`--force`), Python as a keyword (`force=True`), HTTP as a parameter
//! and a JSON `hint` the page shows. So no library message names a flag
//! that one of the front ends does not have.

use serde::Serialize;

/// An option of a request or command that would change an outcome, with
/// the facts the front end needs to word it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "option", rename_all = "snake_case")]
#[non_exhaustive]
pub enum Remedy {
    /// Replace what exists at the target (a dataset, a file, a catalog).
    Force,
    /// Replace an existing variable of the same name.
    Replace,
    /// Raise the most cells a result may have.
    MaxCells {
        /// The cells the refused result would have, when known.
        cells: Option<u64>,
    },
    /// Accept negative weights (replicate weights may have them).
    AllowNegativeWeights,
    /// Answer (or write) without the dataset's survey design.
    NoDesign,
    /// Say how a stratum with a single PSU is treated.
    LonelyPsu,
    /// Describe, change or remove the dataset's survey design.
    SetDesign,
    /// Restrict a query to a domain with a filter (rather than a subset).
    Filter,
    /// Import a column with another type.
    ColumnType {
        /// The column (`None`: whichever column the user means).
        variable: Option<String>,
        /// The type that would help.
        kind: ColumnKind,
    },
    /// Read the file in another text encoding.
    Encoding,
    /// Sample every record (not the first few thousand) to choose types.
    InferAllRows,
    /// The texts read as missing in text columns (an empty list keeps
    /// them as values).
    NaText,
    /// Keep the codebook's not-in-universe and missing codes as values.
    KeepNiu,
    /// Choose the record type that becomes a row of a hierarchical file.
    RecordType,
    /// Export with exact decimals (a decimal column rather than a double).
    ExactDecimals,
    /// Export codes rather than their labels.
    NoLabels,
    /// Import without the DDI codebook's decimals.
    NoCodebook,
    /// Keep every non-empty text of text columns as a value (read no
    /// token as missing there: an empty list of [`Remedy::NaText`]).
    KeepTextTokens,
    /// Choose the field delimiter of a delimited text file.
    Delimiter {
        /// The delimiter that would help, when one is known.
        delimiter: Option<char>,
    },
    /// Read numbers written with a decimal comma (`1,5`) in delimited text.
    DecimalComma,
    /// Declare user-missing codes of a variable.
    MissingCodes {
        /// The variable.
        variable: String,
        /// The codes, as written in the data (empty: whichever the user
        /// means).
        codes: Vec<String>,
    },
}

/// The type a [`Remedy::ColumnType`] asks for, in the import options'
/// words.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum ColumnKind {
    /// Integers.
    Int,
    /// Floating point.
    Float,
    /// Text.
    String,
    /// Integer codes or text (the choice is the user's).
    IntOrString,
}

impl ColumnKind {
    /// The import options' word for it (`int`, `float`, `string`;
    /// `int` for either-or, the first choice).
    pub fn word(self) -> &'static str {
        match self {
            ColumnKind::Int | ColumnKind::IntOrString => "int",
            ColumnKind::Float => "float",
            ColumnKind::String => "string",
        }
    }
}

/// An error or note that may name a [`Remedy`].
pub trait Remedied {
    /// The option that would change the outcome, if there is one.
    fn remedy(&self) -> Option<Remedy>;
}
