//! Import errors: each names the file and, where it applies, the line or
//! record, the column or variable, and what was expected; those that an
//! option would avoid carry it as [`Hint`]s (facts only: each front end
//! spells the option).

use crate::note::Hint;
use microtab_store::{ColumnKind, Remedied, Remedy};
use std::path::PathBuf;

/// Which options would read a field that does not fit (an
/// [`Error::Value`] or [`Error::Syntax`]); [`Error::hints`] says them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum Fix {
    /// None: the input is wrong.
    #[default]
    None,
    /// Another text encoding.
    Encoding,
    /// The column as text, or as approximate numbers (an integer beyond
    /// 64 bits).
    TextOrFloat,
    /// Types chosen from every record, or the column as text (a
    /// non-number after the records sampled).
    SampleAllOrText,
}

impl Fix {
    /// The hints, for column `name` when the fix is about a column.
    pub fn hints(self, name: Option<&str>) -> Vec<Hint> {
        let column = |kind, effect: &str| {
            Hint::new(
                Remedy::ColumnType {
                    variable: name.map(str::to_string),
                    kind,
                },
                effect,
            )
        };
        match self {
            Fix::None => Vec::new(),
            Fix::Encoding => vec![Hint::new(
                Remedy::Encoding,
                "reads a Latin-1 or Windows-1252 file",
            )],
            Fix::TextOrFloat => vec![
                column(ColumnKind::String, "imports the column as text"),
                column(ColumnKind::Float, "as approximate numbers"),
            ],
            Fix::SampleAllOrText => vec![
                Hint::new(Remedy::InferAllRows, "samples every record"),
                column(ColumnKind::String, "imports the column as text"),
            ],
        }
    }
}

/// Result alias for this crate.
pub type Result<T> = std::result::Result<T, Error>;

/// Why an import failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A field's value does not fit its column.
    #[error("{path}: line {line}, column {column} ({name}): expected {expected}, found {found:?}")]
    Value {
        /// Input file.
        path: PathBuf,
        /// 1-based physical line where the record starts.
        line: u64,
        /// 1-based column number.
        column: usize,
        /// Column name from the header.
        name: String,
        /// What the column needed.
        expected: String,
        /// The offending text (shortened).
        found: String,
        /// Options that would read it.
        fix: Fix,
    },
    /// A record with the wrong number of fields.
    #[error("{path}: line {line}: expected {expected} fields as in the header, found {found}")]
    Ragged {
        /// Input file.
        path: PathBuf,
        /// 1-based line of the record.
        line: u64,
        /// Fields in the header.
        expected: usize,
        /// Fields in this record.
        found: usize,
    },
    /// Malformed CSV syntax (quotes).
    #[error("{path}: line {line}: {reason}")]
    Syntax {
        /// Input file.
        path: PathBuf,
        /// 1-based line.
        line: u64,
        /// What is wrong.
        reason: String,
        /// Options that would read it.
        fix: Fix,
    },
    /// A problem with the header line or the options.
    #[error("{path}: {reason}")]
    Input {
        /// Input file.
        path: PathBuf,
        /// What is wrong.
        reason: String,
    },
    /// A fixed-width field that does not hold what the codebook says.
    #[error("{path}: line {record}, variable {name} (columns {start}-{end}): expected {expected}, found {found:?}")]
    Field {
        /// Data file.
        path: PathBuf,
        /// 1-based record (line) number.
        record: u64,
        /// Variable name from the codebook.
        name: String,
        /// First column of the field (1-based).
        start: usize,
        /// Last column of the field (1-based, inclusive).
        end: usize,
        /// What the codebook says the field holds.
        expected: String,
        /// The offending text (shortened).
        found: String,
    },
    /// A fixed-width record too short to hold a variable the codebook
    /// places in it.
    #[error("{path}: line {record} is {len} characters long, but the codebook puts variable {name} in columns {start}-{end}")]
    ShortRecord {
        /// Data file.
        path: PathBuf,
        /// 1-based record (line) number.
        record: u64,
        /// Length of the record in bytes (without the line ending).
        len: usize,
        /// The first variable that does not fit.
        name: String,
        /// First column of that variable (1-based).
        start: usize,
        /// Last column of that variable (1-based, inclusive).
        end: usize,
    },
    /// A hierarchical file's record whose record type the codebook does not
    /// describe.
    #[error("{path}: line {record}: record type {found:?} (variable {name}) is not one of the record types described ({known})")]
    RecordType {
        /// Data file.
        path: PathBuf,
        /// 1-based record (line) number.
        record: u64,
        /// The record-type variable (e.g. `RECTYPE`).
        name: String,
        /// The record type found.
        found: String,
        /// The record types the codebook lists.
        known: String,
    },
    /// A file of records spread over several lines that ends within a
    /// record.
    #[error("{path}: line {record}: the file ends after line {read} of a record of {lines} lines")]
    PartialRecord {
        /// Data file.
        path: PathBuf,
        /// 1-based line where the unfinished record starts.
        record: u64,
        /// Lines of it the file holds.
        read: usize,
        /// Lines a record has.
        lines: usize,
    },
    /// A hierarchical file's record that comes before any record of the
    /// type it belongs to (a person before any household).
    #[error("{path}: line {record}: record of type {child:?} comes before any record of type {parent:?} it could belong to")]
    Orphan {
        /// Data file.
        path: PathBuf,
        /// 1-based record (line) number.
        record: u64,
        /// Its record type.
        child: String,
        /// The parent record type.
        parent: String,
    },
    /// A hierarchical file with records of several types, none of them the
    /// person type, and no record type chosen to become the rows.
    #[error("{path} holds records of several types and none of them are person records ({}): choose the record type that becomes a row", show_counts(.counts))]
    RecordTypeChoice {
        /// Data file.
        path: PathBuf,
        /// Each record type the codebook lists, its label and how many
        /// records of it the file holds.
        counts: Vec<(String, Option<String>, u64)>,
    },
    /// Gzip input that is damaged or ends early.
    #[error("{path}: corrupt or truncated gzip data after line {after_line}: {reason}")]
    Decompress {
        /// Input file.
        path: PathBuf,
        /// Complete lines decompressed before the damage.
        after_line: u64,
        /// What the decompressor reported.
        reason: String,
    },
    /// A codebook (DDI XML) that is malformed or cannot describe the data.
    #[error("{path}: {reason}")]
    Codebook {
        /// The codebook file.
        path: PathBuf,
        /// What is wrong, naming the XML line or the variable.
        reason: String,
    },
    /// A binary file (SAS transport) that is not what its format says:
    /// a damaged header, a field that cannot be read, data that end
    /// early.
    #[error("{path}: byte {offset}: {reason}")]
    Format {
        /// Input file.
        path: PathBuf,
        /// Where the damage is (0-based byte offset).
        offset: u64,
        /// What is wrong, naming the record and variable where it applies.
        reason: String,
    },
    /// Reading the input failed.
    #[error(transparent)]
    Io(#[from] microtab_io::Error),
    /// Writing the dataset failed.
    #[error(transparent)]
    Store(#[from] microtab_store::Error),
}

impl Error {
    /// The options that would avoid the error (none for most).
    pub fn hints(&self) -> Vec<Hint> {
        match self {
            Error::Value { fix, name, .. } => fix.hints(Some(name)),
            Error::Syntax { fix, .. } => fix.hints(None),
            Error::RecordTypeChoice { .. } => vec![Hint::new(
                Remedy::RecordType,
                "chooses the records that become rows",
            )],
            _ => Vec::new(),
        }
    }
}

impl Remedied for Error {
    fn remedy(&self) -> Option<Remedy> {
        self.hints().into_iter().next().map(|h| h.remedy)
    }
}

/// `2 (Person Record): 24,336 records, 3 …`.
fn show_counts(counts: &[(String, Option<String>, u64)]) -> String {
    counts
        .iter()
        .map(|(t, l, n)| match l {
            Some(l) => format!("type {t} ({l}): {n} records"),
            None => format!("type {t}: {n} records"),
        })
        .collect::<Vec<_>>()
        .join(", ")
}

/// Shortens and makes printable a field for an error message.
pub(crate) fn show(bytes: &[u8]) -> String {
    let s = String::from_utf8_lossy(&bytes[..bytes.len().min(40)]).into_owned();
    if bytes.len() > 40 {
        s + "…"
    } else {
        s
    }
}
