//! The errors of a CSV chunk, found by a parser thread before the file
//! path and the column names are known.

use crate::error::Error;
use crate::error::Fix;
use std::path::Path;

/// An error found by a parser thread, before the file path and the column
/// names are attached.
#[derive(Debug)]
pub(crate) enum RowError {
    Value {
        line: u64,
        column: usize,
        expected: String,
        found: String,
        /// Options that would read the field.
        fix: Fix,
    },
    Ragged {
        line: u64,
        found: usize,
    },
    Syntax {
        line: u64,
        reason: String,
        fix: Fix,
    },
}

impl RowError {
    pub(crate) fn into_error(self, path: &Path, names: &[String]) -> Error {
        let path = path.to_path_buf();
        match self {
            RowError::Value {
                line,
                column,
                expected,
                found,
                fix,
            } => {
                let name = names.get(column).cloned().unwrap_or_default();
                Error::Value {
                    path,
                    line,
                    column: column + 1,
                    expected,
                    found,
                    fix,
                    name,
                }
            }
            RowError::Ragged { line, found } => Error::Ragged {
                path,
                line,
                expected: names.len(),
                found,
            },
            RowError::Syntax { line, reason, fix } => Error::Syntax {
                path,
                line,
                reason,
                fix,
            },
        }
    }
}
