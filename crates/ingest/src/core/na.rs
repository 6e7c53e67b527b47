//! Which field texts are system-missing: the common missing tokens of R,
//! pandas, SAS, Stata, spreadsheets and databases, or the user's list.

use crate::core::number::parse_decimal;

/// Missing-value tokens read as system-missing by default in columns that
/// are otherwise numeric: how R (`NA`), pandas (`NaN`, `nan`, `<NA>`),
/// SAS and Stata (`.`, and Stata's extended `.a`…`.z`), spreadsheets
/// (`#N/A`) and databases (`NULL`) write missing numbers.
pub const DEFAULT_NA: &[&str] = &[
    "NA", "N/A", "n/a", "NaN", "nan", "-nan", "<NA>", "#N/A", "NULL", "null", ".", ".a", ".b",
    ".c", ".d", ".e", ".f", ".g", ".h", ".i", ".j", ".k", ".l", ".m", ".n", ".o", ".p", ".q", ".r",
    ".s", ".t", ".u", ".v", ".w", ".x", ".y", ".z",
];

/// Missing-value tokens read as system-missing by default in text columns:
/// those of [`DEFAULT_NA`] that R (`NA`), pandas (all of these) and
/// spreadsheets (`#N/A`) write for a missing value of any type. Stata's and
/// SAS's `.`, `.a`…`.z` are missing only in numeric columns (both write a
/// missing text as an empty field, and `.` is a legitimate text value
/// elsewhere), as is `-nan`. pandas' `None` is left out: it is an answer
/// ("None of these") in many questionnaires.
pub const DEFAULT_TEXT_NA: &[&str] = &[
    "NA", "N/A", "n/a", "NaN", "nan", "<NA>", "#N/A", "NULL", "null",
];

/// Which field texts are system-missing, in numeric and in text columns.
/// Empty fields are always missing.
#[derive(Debug, Clone)]
pub(crate) struct NaSet {
    tokens: Vec<Vec<u8>>,
    text_tokens: Vec<Vec<u8>>,
}

fn token_bytes(t: &[String]) -> Vec<Vec<u8>> {
    t.iter()
        .filter(|t| !t.is_empty())
        .map(|t| t.as_bytes().to_vec())
        .collect()
}

impl NaSet {
    /// `numeric`: the tokens for numeric columns (`None`: [`DEFAULT_NA`]);
    /// `text`: those for text columns (`None`: the numeric list when one is
    /// given, else [`DEFAULT_TEXT_NA`]).
    pub fn new(numeric: Option<&[String]>, text: Option<&[String]>) -> Self {
        let defaults = |d: &[&str]| d.iter().map(|t| t.as_bytes().to_vec()).collect();
        NaSet {
            tokens: numeric.map_or_else(|| defaults(DEFAULT_NA), token_bytes),
            text_tokens: match (text, numeric) {
                (Some(t), _) | (None, Some(t)) => token_bytes(t),
                (None, None) => defaults(DEFAULT_TEXT_NA),
            },
        }
    }

    /// Whether `s` is missing in a numeric column.
    #[inline]
    pub fn contains(&self, s: &[u8]) -> bool {
        !self.tokens.is_empty() && self.tokens.iter().any(|t| t == s)
    }

    /// Whether `s` is missing in a text column.
    #[inline]
    pub fn contains_text(&self, s: &[u8]) -> bool {
        !self.text_tokens.is_empty() && self.text_tokens.iter().any(|t| t == s)
    }

    /// Whether a token looks like a number (`-99`): then numbers read
    /// by the one-pass parser are checked against the tokens too.
    pub fn has_numbers(&self) -> bool {
        self.tokens.iter().any(|t| parse_decimal(t).is_some())
    }
}
