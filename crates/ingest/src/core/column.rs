//! The chunk model every text format parses into: a column of one chunk
//! ([`ColBuf`]) built value by value ([`ColParser`]), in the narrowest
//! kind seen so far (exact scaled integers, then floats; or dictionary
//! codes), with what is worth a note about it ([`FieldNote`]). The parser
//! threads of each format fill these; the writer ([`crate::core::sink`])
//! appends them to the column files.

use crate::error::show;
use std::collections::HashMap;

/// Marks system-missing in [`ColBuf::Int`] values.
pub(crate) const NULL_I64: i64 = i64::MIN;

/// Something about a column worth telling the user, found while parsing:
/// the first line where it was seen, the field, and how often.
#[derive(Debug, Clone)]
pub(crate) struct FieldNote {
    pub line: u64,
    pub example: String,
    pub count: u64,
}

impl FieldNote {
    pub fn add(slot: &mut Option<FieldNote>, line: u64, raw: &[u8]) {
        match slot {
            Some(n) => n.count += 1,
            None => {
                *slot = Some(FieldNote {
                    line,
                    example: show(raw),
                    count: 1,
                })
            }
        }
    }

    /// Merges the note of a later chunk.
    pub fn merge(slot: &mut Option<FieldNote>, later: Option<FieldNote>) {
        match (slot.as_mut(), later) {
            (Some(a), Some(b)) => a.count += b.count,
            (None, b) => *slot = b,
            _ => {}
        }
    }
}

/// What a column was planned to hold when parsing started.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Plan {
    /// Integers or fixed-point decimals; may turn into floats.
    Numeric,
    /// Integers or fixed-point decimals only (a column forced to integers).
    IntOnly,
    /// Floats.
    Float,
    /// Dictionary-encoded text.
    Str,
}

/// One column of one chunk.
#[derive(Debug)]
pub(crate) enum ColBuf {
    Int {
        vals: Vec<i64>,
        decimals: u32,
        nulls: u64,
        min: i64,
        max: i64,
    },
    Float {
        vals: Vec<f64>,
        nulls: u64,
        min: f64,
        max: f64,
    },
    Str {
        codes: Vec<u32>,
        dict: Vec<String>,
        nulls: u64,
    },
    /// Text given by keys (`crate::columnar::Chunk::Keyed`): codes into
    /// `keys` (`u32::MAX` missing), each key shown by `show`.
    Keyed {
        codes: Vec<u32>,
        keys: Vec<u64>,
        show: fn(u64) -> String,
        nulls: u64,
    },
}

impl ColBuf {
    /// Values (records) held.
    pub(crate) fn len(&self) -> usize {
        match self {
            ColBuf::Int { vals, .. } => vals.len(),
            ColBuf::Float { vals, .. } => vals.len(),
            ColBuf::Str { codes, .. } | ColBuf::Keyed { codes, .. } => codes.len(),
        }
    }
}

pub(crate) fn pow10(d: u32) -> i64 {
    10i64.pow(d)
}

/// Scaled integers (`value / 10^decimals`) as floats, system-missing
/// ([`NULL_I64`]) as NaN.
pub(crate) fn scaled_floats(vals: &[i64], decimals: u32) -> impl Iterator<Item = f64> + '_ {
    let scale = pow10(decimals) as f64;
    vals.iter().map(move |&x| {
        if x == NULL_I64 {
            f64::NAN
        } else {
            x as f64 / scale
        }
    })
}

/// Builder for one column of a chunk (shared by the CSV and fixed-width
/// parsers).
pub(crate) struct ColParser {
    pub(crate) plan: Plan,
    pub(crate) buf: ColBuf,
    map: HashMap<String, u32>,
    /// Code of the last string appended: runs of one value (common in
    /// sorted or hierarchical files) skip the hash lookup.
    last: u32,
    /// Numbers written with leading zeros after the type was chosen.
    pub(crate) leading_zeros: Option<FieldNote>,
    /// Missing tokens read as missing in a text column.
    pub(crate) na_text: Option<FieldNote>,
}

impl ColParser {
    pub(crate) fn new(plan: Plan, cap: usize) -> Self {
        let buf = match plan {
            Plan::Numeric | Plan::IntOnly => ColBuf::Int {
                vals: Vec::with_capacity(cap),
                decimals: 0,
                nulls: 0,
                min: i64::MAX,
                max: i64::MIN,
            },
            Plan::Float => ColBuf::Float {
                vals: Vec::with_capacity(cap),
                nulls: 0,
                min: f64::INFINITY,
                max: f64::NEG_INFINITY,
            },
            Plan::Str => ColBuf::Str {
                codes: Vec::with_capacity(cap),
                dict: Vec::new(),
                nulls: 0,
            },
        };
        ColParser {
            plan,
            buf,
            map: HashMap::new(),
            last: u32::MAX,
            leading_zeros: None,
            na_text: None,
        }
    }

    /// The finished column.
    pub(crate) fn into_buf(self) -> ColBuf {
        self.buf
    }

    /// Appends system-missing.
    #[inline]
    pub(crate) fn push_null(&mut self) {
        match &mut self.buf {
            ColBuf::Int { vals, nulls, .. } => {
                vals.push(NULL_I64);
                *nulls += 1;
            }
            ColBuf::Float { vals, nulls, .. } => {
                vals.push(f64::NAN);
                *nulls += 1;
            }
            ColBuf::Str { codes, nulls, .. } | ColBuf::Keyed { codes, nulls, .. } => {
                codes.push(u32::MAX);
                *nulls += 1;
            }
        }
    }

    /// Appends the number `m / 10^d` to an integer column exactly, bringing
    /// the column and the value to the same number of decimals. Returns
    /// false (nothing appended) when that does not fit in an `i64`, or when
    /// the column is not an integer column.
    #[inline]
    pub(crate) fn push_scaled(&mut self, mut m: i64, d: u32) -> bool {
        let ColBuf::Int {
            vals,
            decimals,
            min,
            max,
            ..
        } = &mut self.buf
        else {
            return false;
        };
        let ok = if d > *decimals {
            rescale(vals, min, max, pow10(d - *decimals)).map(|_| *decimals = d)
        } else if d < *decimals {
            m.checked_mul(pow10(*decimals - d)).map(|x| m = x)
        } else {
            Some(())
        };
        if ok.is_some() && m != NULL_I64 {
            vals.push(m);
            *min = (*min).min(m);
            *max = (*max).max(m);
            true
        } else {
            false
        }
    }

    /// Appends a float, turning an integer column into a float one first.
    pub(crate) fn push_float(&mut self, v: f64) {
        self.promote_to_float();
        if let ColBuf::Float { vals, min, max, .. } = &mut self.buf {
            vals.push(v);
            *min = min.min(v);
            *max = max.max(v);
        }
    }

    /// Appends a non-empty string to a text column.
    #[inline]
    pub(crate) fn push_text(&mut self, s: &str) {
        let ColBuf::Str { codes, dict, .. } = &mut self.buf else {
            unreachable!("text value for a numeric column")
        };
        if let Some(d) = dict.get(self.last as usize) {
            if d == s {
                codes.push(self.last);
                return;
            }
        }
        let code = match self.map.get(s) {
            Some(&c) => c,
            None => {
                let c = dict.len() as u32;
                dict.push(s.to_string());
                self.map.insert(s.to_string(), c);
                c
            }
        };
        self.last = code;
        codes.push(code);
    }

    fn promote_to_float(&mut self) {
        if let ColBuf::Int {
            vals,
            decimals,
            nulls,
            ..
        } = &self.buf
        {
            let vals: Vec<f64> = scaled_floats(vals, *decimals).collect();
            let (min, max) = vals
                .iter()
                .filter(|x| !x.is_nan())
                .fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), &x| {
                    (a.min(x), b.max(x))
                });
            self.buf = ColBuf::Float {
                vals,
                nulls: *nulls,
                min,
                max,
            };
        }
    }
}

/// Multiplies every non-null value by `k`; `None` on overflow.
pub(crate) fn rescale(vals: &mut [i64], min: &mut i64, max: &mut i64, k: i64) -> Option<()> {
    if !vals.is_empty() {
        let lo = if *min == i64::MAX { 0 } else { *min };
        let hi = if *max == i64::MIN { 0 } else { *max };
        lo.checked_mul(k)?;
        hi.checked_mul(k)?;
        if lo.checked_mul(k)? == NULL_I64 {
            return None;
        }
    }
    for v in vals.iter_mut() {
        if *v != NULL_I64 {
            *v *= k;
        }
    }
    if *min != i64::MAX {
        *min *= k;
    }
    if *max != i64::MIN {
        *max *= k;
    }
    Some(())
}

/// The parsed contents of one chunk.
#[derive(Debug)]
pub(crate) struct Parsed {
    pub rows: u64,
    pub cols: Vec<ColBuf>,
    /// Per column: numbers written with leading zeros (numeric columns).
    pub leading_zeros: Vec<Option<FieldNote>>,
    /// Per column: missing tokens read as missing (text columns).
    pub na_text: Vec<Option<FieldNote>>,
    /// Records skipped (a hierarchical file's records of unlisted types):
    /// how many, and the first one's line and type.
    pub skipped: Option<FieldNote>,
}
