//! Choosing each CSV column's type from a sample of its records.

use super::error::RowError;
use super::tokenizer::Tokenizer;
use crate::core::column::FieldNote;
use crate::core::column::Plan;
use crate::core::na::NaSet;
use crate::core::number::{
    comma_to_point, decimal_comma_like, int_literal, leading_zeros, parse_decimal, parse_float,
    trim,
};
use crate::error::show;

/// Why a sampled column became text.
#[derive(Debug, Clone)]
pub(crate) enum TextWhy {
    /// A value that is not a number.
    NotANumber,
    /// Numbers written with leading zeros (zero-padded codes such as `01`):
    /// kept as text so that `01` and `1` stay apart and print as written.
    LeadingZeros(FieldNote),
    /// An integer beyond the 64-bit range: an identifier, kept exactly.
    BeyondI64(FieldNote),
    /// Numbers written with a decimal comma (`1,5`), every other value
    /// sampled an integer: the first such number.
    DecimalComma(FieldNote),
}

/// What a sample said about each column.
#[derive(Debug, Clone, Default)]
pub(crate) struct Sampled {
    /// Records sampled.
    pub rows: u64,
    /// Per column: why it is text (`None`: numeric).
    pub text: Vec<Option<TextWhy>>,
    /// Per column: missing tokens of numeric columns seen that text
    /// columns keep as values (`.`).
    pub na_in_text: Vec<Option<FieldNote>>,
}

impl Sampled {
    pub fn new(ncols: usize) -> Self {
        Sampled {
            rows: 0,
            text: vec![None; ncols],
            na_in_text: vec![None; ncols],
        }
    }

    /// Adds what a later stretch of the file said.
    pub fn merge(&mut self, later: Sampled) {
        self.rows += later.rows;
        for (a, b) in self.text.iter_mut().zip(later.text) {
            if a.is_none() {
                *a = b;
            }
        }
        for (a, b) in self.na_in_text.iter_mut().zip(later.na_in_text) {
            FieldNote::merge(a, b);
        }
    }

    pub fn plans(&self) -> Vec<Plan> {
        self.text
            .iter()
            .map(|t| {
                if t.is_some() {
                    Plan::Str
                } else {
                    Plan::Numeric
                }
            })
            .collect()
    }
}

/// Samples up to `max_rows` records of `buf` (starting on physical line
/// `line`): a column is text if any sampled value is not a number (empty
/// fields and missing tokens aside), is an integer beyond 64 bits, or is
/// written with leading zeros; numeric otherwise. `comma`: numbers are
/// written with a decimal comma (`1,5`); else a text column whose values
/// all look so is said to ([`TextWhy::DecimalComma`]).
pub(crate) fn infer(
    buf: &[u8],
    delim: u8,
    ncols: usize,
    max_rows: u64,
    line: u64,
    na: &NaSet,
    comma: bool,
) -> Result<Sampled, RowError> {
    let mut out = Sampled::new(ncols);
    let mut na_seen: Vec<Option<FieldNote>> = vec![None; ncols];
    // Per column: the first number with a decimal comma, and whether a
    // value was neither such a number nor an integer.
    let mut commas: Vec<Option<FieldNote>> = vec![None; ncols];
    let mut not_comma = vec![comma || delim == b','; ncols];
    let mut t = Tokenizer::new(buf, delim, line);
    let mut fields = Vec::new();
    while out.rows < max_rows {
        let Some(l) = t.read_record(&mut fields)? else {
            break;
        };
        for (c, f) in fields.iter().take(ncols).enumerate() {
            let s = trim(t.get(*f));
            if s.is_empty() {
                continue;
            }
            if na.contains(s) {
                if !na.contains_text(s) {
                    FieldNote::add(&mut na_seen[c], l, s);
                }
                continue;
            }
            if !not_comma[c] {
                if decimal_comma_like(s) {
                    if commas[c].is_none() {
                        FieldNote::add(&mut commas[c], l, s);
                    }
                } else if !int_literal(s) {
                    not_comma[c] = true;
                }
            }
            if out.text[c].is_some() {
                continue;
            }
            let point = if comma {
                comma_to_point(s)
            } else {
                Some(s.into())
            };
            let s: &[u8] = match &point {
                Some(p) => p,
                None => {
                    out.text[c] = Some(TextWhy::NotANumber);
                    continue;
                }
            };
            let number = parse_decimal(s).is_some() || parse_float(s).is_some();
            out.text[c] = if !number {
                Some(TextWhy::NotANumber)
            } else if int_literal(s) && parse_decimal(s).is_none() {
                Some(TextWhy::BeyondI64(FieldNote {
                    line: l,
                    example: show(s),
                    count: 1,
                }))
            } else if leading_zeros(s) {
                Some(TextWhy::LeadingZeros(FieldNote {
                    line: l,
                    example: show(s),
                    count: 1,
                }))
            } else {
                None
            };
        }
        out.rows += 1;
    }
    for (c, n) in na_seen.into_iter().enumerate() {
        if out.text[c].is_some() {
            out.na_in_text[c] = n;
        }
    }
    for (c, n) in commas.into_iter().enumerate() {
        if let (Some(n), false, Some(TextWhy::NotANumber)) = (n, not_comma[c], &out.text[c]) {
            out.text[c] = Some(TextWhy::DecimalComma(n));
        }
    }
    Ok(out)
}
