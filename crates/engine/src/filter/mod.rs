//! Filters: SDA's terms (`AGE(25-64) SEX(2) RACE(1,3-5) INCTOT<9999999`)
//! and the operators users type (`AGE >= 25 and (SEX = 2 or not
//! RACE in (1, 2))`, `AGE between 25 and 64`).
//!
//! A term is either `NAME(list)` where the list holds values, ranges `a-b`
//! and open ranges `a-*` / `*-b`, or a comparison `NAME op value` with `op`
//! one of `<`, `<=`, `>`, `>=`, `=` (`==`), `!=` (`<>`), spaces allowed
//! around it, or `NAME in (list)`, `NAME not in (list)`, `NAME between a
//! and b` (inclusive). Terms side by side, or joined by `and`/`&` or a
//! comma, must all hold; `or`/`|` needs one; `not`/`!` negates; parentheses
//! group (precedence: `not`, then `and`, then `or`). Keywords are read in
//! any case and reserved: a variable named `and`, `or`, `not`, `in` or
//! `between` is quoted. The grammar is `parse`'s.
//!
//! Values are given as displayed (decimals applied; strings as text,
//! quoted with `"` when they hold spaces or punctuation). A name with
//! spaces or punctuation is quoted with `"` or backticks: `"Body Mass
//! (g)"(3000-4000)`, `` `bill length`>40 ``.
//!
//! **Missing values** follow SQL's three-valued logic (DuckDB's `WHERE`,
//! R's `subset`): a term on a missing value (a missing code or an empty
//! value) is unknown, `not` of unknown is unknown, `unknown and false` is
//! false, `unknown or true` is true, and a record passes only when the
//! whole filter is true. So `not AGE > 25` and `AGE <= 25` both leave out
//! the records without an AGE.
//!
//! Text variables take values and value lists (`STATE("New York",Ohio)`,
//! `STATE!=Ohio`) but no ranges or order comparisons: `AGE(25-64)` on an
//! `AGE` imported as text is an error, never a comparison of strings
//! ("3" would fall between "25" and "64"). On a text variable a dash is
//! part of the value: `REGION(Nord-Norge)`, `GRADE(A-)`. Numbers must be
//! finite: `nan` and `inf` are refused.
//!
//! The terms of one variable, however combined, resolve to one set of its
//! stored values ([`Predicate`]), which the scan's mappers and the zone
//! maps read as they read `AGE(25-64)`; a part combining several variables
//! with `or` or `not` ([`Cond::Mixed`]) is evaluated record by record.

mod parse;

use crate::lex::{unquote, walk};
use crate::{Error, Result};
use microtab_store::{Kind, Variable};
pub use parse::{parse_filter, parse_tree};

/// A comparison operator.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[allow(missing_docs)]
pub enum CmpOp {
    Lt,
    Le,
    Gt,
    Ge,
    Eq,
    Ne,
}

/// One element of a `NAME(…)` list.
#[derive(Debug, Clone, PartialEq)]
pub enum Item {
    /// A single value.
    One(String),
    /// An inclusive range; `None` is an open end (`*`).
    Range(Option<String>, Option<String>),
}

/// A term's condition.
#[derive(Debug, Clone, PartialEq)]
pub enum Cond {
    /// Membership in a list of values and ranges.
    Set(Vec<Item>),
    /// A comparison with one value.
    Cmp(CmpOp, String),
    /// The variable's values the condition does not pass (its missing
    /// values pass neither).
    Not(Box<Cond>),
    /// Every condition holds.
    All(Vec<Cond>),
    /// Any condition holds.
    Any(Vec<Cond>),
    /// A combination of terms on several variables (the term's `var` is
    /// empty), evaluated record by record.
    Mixed(Box<Filter>),
    /// The records a caller chose (a front end's boolean mask; the term's
    /// `var` is empty): bit `r % 64` of word `r / 64` set for record `r`,
    /// a bitmap over every record of the dataset. Read as a mixed term's
    /// mask is ([`Term::rows`]).
    Rows(std::sync::Arc<Vec<u64>>),
}

/// A filter as written: terms (each of one variable) under `not`, `and`
/// and `or`, as [`parse_tree`] reads it.
#[derive(Debug, Clone, PartialEq)]
pub enum Filter {
    /// A term of one variable.
    Term(Term),
    /// True when the inner filter is false (unknown stays unknown).
    Not(Box<Filter>),
    /// Every one holds.
    And(Vec<Filter>),
    /// Any one holds.
    Or(Vec<Filter>),
}

impl Filter {
    /// The variables it names, in order, each once.
    pub fn vars(&self) -> Vec<&str> {
        let mut out: Vec<&str> = Vec::new();
        self.each_term(&mut |t| {
            if !out.contains(&t.var.as_str()) {
                out.push(t.var.as_str());
            }
        });
        out
    }

    /// Calls `f` with each term, left to right.
    pub fn each_term<'a>(&'a self, f: &mut dyn FnMut(&'a Term)) {
        match self {
            Filter::Term(t) => match &t.cond {
                Cond::Mixed(inner) => inner.each_term(f),
                _ => f(t),
            },
            Filter::Not(a) => a.each_term(f),
            Filter::And(v) | Filter::Or(v) => v.iter().for_each(|a| a.each_term(f)),
        }
    }

    /// The condition of a filter over one variable.
    pub(crate) fn cond(self) -> Cond {
        match self {
            Filter::Term(t) => t.cond,
            Filter::Not(a) => Cond::Not(Box::new(a.cond())),
            Filter::And(v) => Cond::All(v.into_iter().map(Filter::cond).collect()),
            Filter::Or(v) => Cond::Any(v.into_iter().map(Filter::cond).collect()),
        }
    }
}

/// One filter term.
#[derive(Debug, Clone, PartialEq)]
pub struct Term {
    /// Variable name as written (empty for a [`Cond::Mixed`] term).
    pub var: String,
    /// The condition.
    pub cond: Cond,
    /// The term's text (for messages).
    pub text: String,
}

fn err(text: &str, reason: impl Into<String>) -> Error {
    Error::Filter {
        text: text.to_string(),
        reason: reason.into(),
    }
}

/// The comparison signs of filters and expressions, longer first (so that
/// `<=` is not read as `<`).
pub(crate) const CMP_SIGNS: [(&str, CmpOp); 8] = [
    ("<=", CmpOp::Le),
    (">=", CmpOp::Ge),
    ("!=", CmpOp::Ne),
    ("<>", CmpOp::Ne),
    ("==", CmpOp::Eq),
    ("<", CmpOp::Lt),
    (">", CmpOp::Gt),
    ("=", CmpOp::Eq),
];

/// Splits a list item on its range dash: a `-` outside quotes that is not
/// the first character and does not directly follow another `-` or an
/// exponent's `e` (so `-5--1` is the range −5…−1).
fn split_range(item: &str) -> Option<(&str, &str)> {
    let b = item.as_bytes();
    walk(item)
        .find(|ch| {
            ch.out && ch.c == '-' && ch.at > 0 && !matches!(b[ch.at - 1], b'-' | b'e' | b'E')
        })
        .map(|ch| (&item[..ch.at], &item[ch.at + 1..]))
}

/// A list item: a value, a range or `*`.
fn item(t: &str, raw: &str) -> Result<Item> {
    let raw = raw.trim();
    if raw.is_empty() {
        return Err(err(t, "empty value in list (expected e.g. RACE(1,3-5))"));
    }
    // `*` alone: every value (the variable's missing values aside, as in
    // any term), as in a recode's `*` rule.
    if raw == "*" {
        return Ok(Item::Range(None, None));
    }
    let Some((a, b)) = split_range(raw) else {
        return Ok(Item::One(unquote(raw)));
    };
    let number = |s: &str| s.trim().parse::<f64>().is_ok();
    let end = |s: &str, other: &str| {
        let s = s.trim();
        if s == "*" {
            Ok(None)
        } else if s.is_empty() && number(other) {
            Err(err(
                t,
                format!(
                    "incomplete range '{raw}' (write {}-* or *-{} for an open range)",
                    other.trim(),
                    other.trim()
                ),
            ))
        } else {
            Ok(Some(unquote(s)))
        }
    };
    // A dash with no number beside it is text: `GRADE(A-)`.
    if (a.trim().is_empty() || b.trim().is_empty()) && !number(a) && !number(b) {
        return Ok(Item::One(unquote(raw)));
    }
    Ok(Item::Range(end(a, b)?, end(b, a)?))
}

/// An interval over stored values.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Interval {
    pub lo: f64,
    pub lo_open: bool,
    pub hi: f64,
    pub hi_open: bool,
}

impl Interval {
    #[inline]
    pub fn contains(&self, v: f64) -> bool {
        (if self.lo_open {
            v > self.lo
        } else {
            v >= self.lo
        }) && (if self.hi_open {
            v < self.hi
        } else {
            v <= self.hi
        })
    }
}

/// A resolved term: the stored values that pass.
///
/// Int and string kinds compare exact integers (every `i64`, including
/// values beyond 2^53); floats compare floats.
#[derive(Debug, Clone)]
pub(crate) enum Predicate {
    /// Inclusive integer ranges.
    Ints(Vec<(i64, i64)>),
    /// Float intervals.
    Floats(Vec<Interval>),
}

impl Predicate {
    #[inline]
    pub fn test_int(&self, v: i64) -> bool {
        match self {
            Predicate::Ints(r) => r.iter().any(|&(lo, hi)| v >= lo && v <= hi),
            Predicate::Floats(_) => self.test(v as f64),
        }
    }

    #[inline]
    pub fn test(&self, v: f64) -> bool {
        match self {
            Predicate::Floats(r) => r.iter().any(|i| i.contains(v)),
            Predicate::Ints(r) => {
                v.fract() == 0.0 && r.iter().any(|&(lo, hi)| v >= lo as f64 && v <= hi as f64)
            }
        }
    }
}

/// Sorted, disjoint, non-adjacent integer ranges.
fn merge_ints(mut r: Vec<(i64, i64)>) -> Vec<(i64, i64)> {
    r.retain(|(a, b)| a <= b);
    r.sort_unstable();
    let mut out: Vec<(i64, i64)> = Vec::with_capacity(r.len());
    for (a, b) in r {
        match out.last_mut() {
            Some(l) if a <= l.1.saturating_add(1) => l.1 = l.1.max(b),
            _ => out.push((a, b)),
        }
    }
    out
}

impl Interval {
    fn is_empty(&self) -> bool {
        self.lo > self.hi || (self.lo == self.hi && (self.lo_open || self.hi_open))
    }
}

/// Sorted, disjoint float intervals.
fn merge_floats(mut r: Vec<Interval>) -> Vec<Interval> {
    r.retain(|i| !i.is_empty());
    // By lower bound, a closed one first.
    r.sort_by(|a, b| a.lo.total_cmp(&b.lo).then(a.lo_open.cmp(&b.lo_open)));
    let mut out: Vec<Interval> = Vec::with_capacity(r.len());
    for i in r {
        match out.last_mut() {
            Some(l) if i.lo < l.hi || (i.lo == l.hi && !(i.lo_open && l.hi_open)) => {
                if i.hi > l.hi || (i.hi == l.hi && !i.hi_open) {
                    l.hi = i.hi;
                    l.hi_open = i.hi_open;
                }
            }
            _ => out.push(i),
        }
    }
    out
}

impl Predicate {
    /// Every value this one does not pass.
    pub(crate) fn complement(&self) -> Predicate {
        match self {
            Predicate::Ints(r) => {
                let mut out = Vec::new();
                let mut next = Some(i64::MIN);
                for &(a, b) in &merge_ints(r.clone()) {
                    if let Some(n) = next {
                        if a > n {
                            out.push((n, a - 1));
                        }
                    }
                    next = b.checked_add(1);
                }
                if let Some(n) = next {
                    out.push((n, i64::MAX));
                }
                Predicate::Ints(out)
            }
            Predicate::Floats(r) => {
                let mut out = Vec::new();
                let (mut lo, mut lo_open) = (f64::NEG_INFINITY, false);
                for i in merge_floats(r.clone()) {
                    out.push(Interval {
                        lo,
                        lo_open,
                        hi: i.lo,
                        hi_open: !i.lo_open,
                    });
                    (lo, lo_open) = (i.hi, !i.hi_open);
                }
                out.push(Interval {
                    lo,
                    lo_open,
                    hi: f64::INFINITY,
                    hi_open: false,
                });
                Predicate::Floats(merge_floats(out))
            }
        }
    }

    /// The values either passes (both of one variable, so of one kind).
    pub(crate) fn union(self, other: Predicate) -> Predicate {
        match (self, other) {
            (Predicate::Ints(mut a), Predicate::Ints(b)) => {
                a.extend(b);
                Predicate::Ints(merge_ints(a))
            }
            (Predicate::Floats(mut a), Predicate::Floats(b)) => {
                a.extend(b);
                Predicate::Floats(merge_floats(a))
            }
            (a, b) => a.complement().intersect(&b.complement()).complement(),
        }
    }

    /// The values both pass.
    pub(crate) fn intersect(&self, other: &Predicate) -> Predicate {
        match (self, other) {
            (Predicate::Ints(a), Predicate::Ints(b)) => {
                let mut out = Vec::new();
                for &(a0, a1) in a {
                    for &(b0, b1) in b {
                        out.push((a0.max(b0), a1.min(b1)));
                    }
                }
                Predicate::Ints(merge_ints(out))
            }
            (Predicate::Floats(a), Predicate::Floats(b)) => {
                let mut out = Vec::new();
                for x in a {
                    for y in b {
                        let (lo, lo_open) = match x.lo.total_cmp(&y.lo) {
                            std::cmp::Ordering::Less => (y.lo, y.lo_open),
                            std::cmp::Ordering::Greater => (x.lo, x.lo_open),
                            std::cmp::Ordering::Equal => (x.lo, x.lo_open || y.lo_open),
                        };
                        let (hi, hi_open) = match x.hi.total_cmp(&y.hi) {
                            std::cmp::Ordering::Less => (x.hi, x.hi_open),
                            std::cmp::Ordering::Greater => (y.hi, y.hi_open),
                            std::cmp::Ordering::Equal => (x.hi, x.hi_open || y.hi_open),
                        };
                        out.push(Interval {
                            lo,
                            lo_open,
                            hi,
                            hi_open,
                        });
                    }
                }
                Predicate::Floats(merge_floats(out))
            }
            // One kind per variable: not reached, but exact anyway.
            (Predicate::Ints(a), f @ Predicate::Floats(_))
            | (f @ Predicate::Floats(_), Predicate::Ints(a)) => {
                let fl = a
                    .iter()
                    .map(|&(lo, hi)| Interval {
                        lo: lo as f64,
                        lo_open: false,
                        hi: hi as f64,
                        hi_open: false,
                    })
                    .collect();
                Predicate::Floats(fl).intersect(f)
            }
        }
    }
}

/// A value in stored units: exact when it is an integer there.
#[derive(Clone, Copy)]
enum Stored {
    Exact(i128),
    /// Strictly between this integer and the next (a value with more
    /// decimals than the variable stores, exactly: `2.5` on integers).
    Between(i128),
    Approx(f64),
}

impl Stored {
    fn floor(self) -> i128 {
        match self {
            Stored::Exact(i) | Stored::Between(i) => i,
            Stored::Approx(f) => f.floor().clamp(-1.7e38, 1.7e38) as i128,
        }
    }
    fn ceil(self) -> i128 {
        match self {
            Stored::Exact(i) => i,
            Stored::Between(i) => i + 1,
            Stored::Approx(f) => f.ceil().clamp(-1.7e38, 1.7e38) as i128,
        }
    }
    fn f(self) -> f64 {
        match self {
            Stored::Exact(i) => i as f64,
            Stored::Between(i) => i as f64 + 0.5,
            Stored::Approx(f) => f,
        }
    }
}

/// Parses `[+-]digits[.digits][e[+-]digits]` exactly into stored units
/// with `decimals`: the integer, or the integer below it when the value
/// lies strictly between two stored values. Any number of digits is exact
/// (`0.999…95` with 40 nines is not 1). `None`: not such a number, or an
/// integer part beyond `i128` (then the value is far outside every stored
/// one, and its nearest double compares the same).
fn exact_decimal(s: &str, decimals: u32) -> Option<Stored> {
    let s = s.trim();
    let (neg, body) = match s.strip_prefix('-') {
        Some(b) => (true, b),
        None => (false, s.strip_prefix('+').unwrap_or(s)),
    };
    let (mant, exp) = match body.find(['e', 'E']) {
        Some(i) => {
            let e = &body[i + 1..];
            let digits = e.strip_prefix(['+', '-']).unwrap_or(e);
            if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
                return None;
            }
            // Beyond this the value is 0 or far beyond i128 all the same.
            let mag = digits.parse::<i64>().unwrap_or(i64::MAX).min(1 << 40);
            (&body[..i], if e.starts_with('-') { -mag } else { mag })
        }
        None => (body, 0),
    };
    let (int, frac) = mant.split_once('.').unwrap_or((mant, ""));
    if int.is_empty() && frac.is_empty()
        || !int.bytes().chain(frac.bytes()).all(|b| b.is_ascii_digit())
    {
        return None;
    }
    // The digits, and the place of the point in stored units after the
    // first `point` of them.
    let digits = int.as_bytes().iter().chain(frac.as_bytes());
    let point = int.len() as i64 + exp + decimals as i64;
    let (mut m, mut rest) = (0i128, false);
    for (i, &b) in digits.enumerate() {
        let d = (b - b'0') as i128;
        if (i as i64) < point {
            m = m.checked_mul(10)?.checked_add(d)?;
        } else if d != 0 {
            rest = true;
        }
    }
    let len = (int.len() + frac.len()) as i64;
    if point > len && m != 0 {
        m = m.checked_mul(10i128.checked_pow(u32::try_from(point - len).ok()?)?)?;
    }
    Some(match (neg, rest) {
        (false, false) => Stored::Exact(m),
        (false, true) => Stored::Between(m),
        (true, false) => Stored::Exact(-m),
        (true, true) => Stored::Between(-m - 1),
    })
}

/// Converts a displayed value to stored units of `var`.
fn to_stored(term: &Term, var: &Variable, dict: &[String], s: &str) -> Result<Stored> {
    if var.kind == Kind::String {
        // The dictionary is sorted: a string's position is its code, and a
        // string not in it falls between two codes.
        return Ok(match dict.binary_search_by(|d| d.as_str().cmp(s)) {
            Ok(i) => Stored::Exact(i as i128),
            Err(i) => Stored::Approx(i as f64 - 0.5),
        });
    }
    if var.kind == Kind::Int {
        if let Some(v) = exact_decimal(s, var.decimals) {
            return Ok(v);
        }
    }
    let t = s.trim();
    let x: f64 = t
        .parse()
        .ok()
        .filter(|x: &f64| x.is_finite() && t.bytes().any(|b| b.is_ascii_digit()))
        .ok_or_else(|| {
            // A value label written for its value: name the value.
            let codes: Vec<&String> = var
                .value_labels
                .iter()
                .filter(|(_, l)| match_key(l) == match_key(s))
                .map(|(c, _)| c)
                .collect();
            let hint = match codes.first() {
                Some(c) => format!(" ('{s}' is the label of {c}: write {c})"),
                None => String::new(),
            };
            err(
                &term.text,
                format!(
                    "expected a finite number for {}, found '{s}'{hint}",
                    var.name
                ),
            )
        })?;
    Ok(Stored::Approx(x * var.scale()))
}

/// What two spellings of a value have in common when they differ only in
/// case, spaces or punctuation (`Full-Time`, `full time`).
fn match_key(s: &str) -> String {
    s.chars()
        .filter(|c| c.is_alphanumeric())
        .flat_map(char::to_lowercase)
        .collect()
}

/// Edit distance of two short strings (insertions, deletions,
/// substitutions).
fn edits(a: &[char], b: &[char]) -> usize {
    let mut prev: Vec<usize> = (0..=b.len()).collect();
    for (i, x) in a.iter().enumerate() {
        let mut cur = vec![i + 1; b.len() + 1];
        for (j, y) in b.iter().enumerate() {
            cur[j + 1] = (prev[j] + (x != y) as usize)
                .min(prev[j + 1] + 1)
                .min(cur[j] + 1);
        }
        prev = cur;
    }
    prev[b.len()]
}

/// The values of `dicts` a mistyped `value` probably meant: those equal
/// to it but for case, spaces and punctuation, else those a letter away
/// from it (two for six letters or more; at most five, sorted).
pub(crate) fn close_values(value: &str, dicts: &[&[String]]) -> Vec<String> {
    let key = match_key(value);
    let mut same: Vec<String> = Vec::new();
    let mut near: Vec<(usize, String)> = Vec::new();
    let kc: Vec<char> = key.chars().collect();
    // A letter off in a short word, two in a longer one.
    let most = if kc.len() >= 6 { 2 } else { 1 };
    for d in dicts {
        for e in d.iter() {
            let k = match_key(e);
            if k == key {
                same.push(e.clone());
            } else if kc.len() >= 3 && k.chars().count().abs_diff(kc.len()) <= most {
                let n = edits(&kc, &k.chars().collect::<Vec<_>>());
                if n <= most {
                    near.push((n, e.clone()));
                }
            }
        }
    }
    let mut out = if same.is_empty() {
        near.sort();
        near.into_iter().map(|(_, e)| e).collect()
    } else {
        same.sort();
        same
    };
    out.dedup();
    out.truncate(5);
    out
}

impl Term {
    /// The terms of one variable it is made of: itself, or a
    /// [`Cond::Mixed`] term's.
    pub fn leaves(&self) -> Vec<&Term> {
        match &self.cond {
            Cond::Mixed(f) => {
                let mut out = Vec::new();
                f.each_term(&mut |t| out.push(t));
                out
            }
            // A mask names no variable.
            Cond::Rows(_) => Vec::new(),
            _ => vec![self],
        }
    }

    /// A term passing the records whose bits are set in `bits` (a bitmap
    /// over every record: bit `r % 64` of word `r / 64`), `n` of them;
    /// the scan checks the bitmap covers the dataset's records.
    pub fn rows(bits: Vec<u64>, n: u64) -> Term {
        Term {
            var: String::new(),
            cond: Cond::Rows(std::sync::Arc::new(bits)),
            text: format!("a selection of {n} records"),
        }
    }
}

/// `cond` as it reads on a text variable, whose values are `dicts`: a
/// range between two values is one value with its dash (`Nord-Norge`,
/// ranges being refused on text) when that is a value of the variable or
/// an end is not a number; `AGE(25-64)` on an AGE imported as text stays
/// a range, refused as one.
fn on_text(cond: &Cond, dicts: &[&[String]]) -> Cond {
    let each = |v: &[Cond]| v.iter().map(|c| on_text(c, dicts)).collect();
    let number = |s: &str| s.trim().parse::<f64>().is_ok();
    match cond {
        Cond::Set(items) => Cond::Set(
            items
                .iter()
                .map(|i| match i {
                    Item::Range(Some(a), Some(b)) => {
                        let joined = format!("{a}-{b}");
                        let known = dicts
                            .iter()
                            .any(|d| d.binary_search_by(|e| e.as_str().cmp(&joined)).is_ok());
                        if known || !number(a) || !number(b) {
                            Item::One(joined)
                        } else {
                            i.clone()
                        }
                    }
                    i => i.clone(),
                })
                .collect(),
        ),
        Cond::Not(c) => Cond::Not(Box::new(on_text(c, dicts))),
        Cond::All(v) => Cond::All(each(v)),
        Cond::Any(v) => Cond::Any(each(v)),
        c => c.clone(),
    }
}

/// The condition of `term` on `var`, whose values are `dicts`.
fn cond_on(term: &Term, var: &Variable, dicts: &[&[String]]) -> Cond {
    if var.kind == Kind::String {
        on_text(&term.cond, dicts)
    } else {
        term.cond.clone()
    }
}

/// The values a condition names (not its ranges).
fn values_of<'a>(cond: &'a Cond, out: &mut Vec<&'a String>) {
    match cond {
        Cond::Set(items) => out.extend(items.iter().filter_map(|i| match i {
            Item::One(s) => Some(s),
            Item::Range(..) => None,
        })),
        Cond::Cmp(_, s) => out.push(s),
        Cond::Not(c) => values_of(c, out),
        Cond::All(v) | Cond::Any(v) => v.iter().for_each(|c| values_of(c, out)),
        Cond::Mixed(_) | Cond::Rows(_) => {}
    }
}

/// Refuses a value of a text variable that none of its records has (in
/// any of `dicts`, the variable's dictionaries in the datasets answered
/// together): matching nothing, it would give an empty group, `Total 0` or
/// (with `!=`) every record without a word. `*` (every value) is no value.
pub(crate) fn check_text_values(term: &Term, var: &Variable, dicts: &[&[String]]) -> Result<()> {
    if var.kind != Kind::String {
        return Ok(());
    }
    // A range or order comparison is refused with its own reason first.
    check_text_term(term, var, dicts)?;
    let cond = cond_on(term, var, dicts);
    let mut values = Vec::new();
    values_of(&cond, &mut values);
    for v in values {
        if !dicts
            .iter()
            .any(|d| d.binary_search_by(|e| e.as_str().cmp(v)).is_ok())
        {
            return Err(Error::NoSuchValue {
                variable: var.name.clone(),
                value: v.clone(),
                close: close_values(v, dicts),
            });
        }
    }
    Ok(())
}

/// Whether a condition holds a range or an order comparison.
fn ordered(cond: &Cond) -> bool {
    match cond {
        Cond::Cmp(op, _) => !matches!(op, CmpOp::Eq | CmpOp::Ne),
        // `*` (every value) orders nothing.
        Cond::Set(items) => items
            .iter()
            .any(|i| matches!(i, Item::Range(..)) && *i != Item::Range(None, None)),
        Cond::Not(c) => ordered(c),
        Cond::All(v) | Cond::Any(v) => v.iter().any(ordered),
        Cond::Mixed(_) | Cond::Rows(_) => false,
    }
}

/// Refuses ranges and order comparisons on a text variable.
fn check_text_term(term: &Term, var: &Variable, dicts: &[&[String]]) -> Result<()> {
    if var.kind != Kind::String {
        return Ok(());
    }
    if ordered(&cond_on(term, var, dicts)) {
        return Err(Error::TextOrder {
            variable: var.name.clone(),
            text: term.text.clone(),
        });
    }
    Ok(())
}

/// Bounds of a span of stored values: (lower, open, upper, open); `None`
/// is unbounded.
type Span = (Option<Stored>, bool, Option<Stored>, bool);

/// The spans of stored values a list or a comparison passes.
fn spans(term: &Term, cond: &Cond, var: &Variable, dict: &[String]) -> Result<Vec<Span>> {
    let conv = |s: &str| to_stored(term, var, dict, s);
    let mut spans: Vec<Span> = Vec::new();
    match cond {
        Cond::Set(items) => {
            for it in items {
                match it {
                    Item::One(s) => {
                        let v = conv(s)?;
                        spans.push((Some(v), false, Some(v), false));
                    }
                    Item::Range(a, b) => {
                        let lo = a.as_deref().map(conv).transpose()?;
                        let hi = b.as_deref().map(conv).transpose()?;
                        if let (Some(l), Some(h)) = (lo, hi) {
                            if l.f() > h.f() {
                                return Err(Error::Filter {
                                    text: term.text.clone(),
                                    reason: format!(
                                        "the range {}-{} is reversed (it holds no value; write {}-{})",
                                        a.as_deref().unwrap_or_default(),
                                        b.as_deref().unwrap_or_default(),
                                        b.as_deref().unwrap_or_default(),
                                        a.as_deref().unwrap_or_default()
                                    ),
                                });
                            }
                        }
                        spans.push((lo, false, hi, false));
                    }
                }
            }
        }
        Cond::Cmp(op, s) => {
            let v = Some(conv(s)?);
            match op {
                CmpOp::Lt => spans.push((None, false, v, true)),
                CmpOp::Le => spans.push((None, false, v, false)),
                CmpOp::Gt => spans.push((v, true, None, false)),
                CmpOp::Ge => spans.push((v, false, None, false)),
                CmpOp::Eq => spans.push((v, false, v, false)),
                CmpOp::Ne => {
                    spans.push((None, false, v, true));
                    spans.push((v, true, None, false));
                }
            }
        }
        _ => unreachable!("combinations are resolved by `resolve_cond`"),
    }
    Ok(spans)
}

/// The predicate of spans on `var`'s storage.
fn predicate(var: &Variable, spans: Vec<Span>) -> Predicate {
    let inf = f64::INFINITY;
    if var.kind == Kind::Float {
        return Predicate::Floats(
            spans
                .into_iter()
                .map(|(lo, lo_open, hi, hi_open)| Interval {
                    lo: lo.map_or(-inf, Stored::f),
                    lo_open,
                    hi: hi.map_or(inf, Stored::f),
                    hi_open,
                })
                .collect(),
        );
    }
    let clamp = |v: i128| v.clamp(i64::MIN as i128, i64::MAX as i128) as i64;
    let ints = spans
        .into_iter()
        .filter_map(|(lo, lo_open, hi, hi_open)| {
            let lo = match lo {
                None => i64::MIN as i128,
                Some(v) if lo_open => v.floor() + 1,
                Some(v) => v.ceil(),
            };
            let hi = match hi {
                None => i64::MAX as i128,
                Some(v) if hi_open => v.ceil() - 1,
                Some(v) => v.floor(),
            };
            (lo <= hi).then(|| (clamp(lo), clamp(hi)))
        })
        .collect();
    Predicate::Ints(ints)
}

/// The predicate of a condition: its lists and comparisons combined as
/// sets of stored values (missing values are cut out by the caller, so
/// `not` of a set is every other value, never a missing one).
fn resolve_cond(term: &Term, cond: &Cond, var: &Variable, dict: &[String]) -> Result<Predicate> {
    let all = |v: &[Cond]| -> Result<Vec<Predicate>> {
        v.iter().map(|c| resolve_cond(term, c, var, dict)).collect()
    };
    Ok(match cond {
        Cond::Not(c) => resolve_cond(term, c, var, dict)?.complement(),
        Cond::All(v) => all(v)?
            .into_iter()
            .reduce(|a, b| a.intersect(&b))
            .unwrap_or_else(|| predicate(var, vec![(None, false, None, false)])),
        Cond::Any(v) => all(v)?
            .into_iter()
            .reduce(|a, b| a.union(b))
            .unwrap_or_else(|| predicate(var, Vec::new())),
        Cond::Mixed(_) | Cond::Rows(_) => {
            return Err(Error::Invalid(format!(
                "internal error: the filter '{}' names several variables and has no one predicate",
                term.text
            )))
        }
        c => predicate(var, spans(term, c, var, dict)?),
    })
}

/// Resolves a term of one variable against it.
pub(crate) fn resolve(term: &Term, var: &Variable, dict: &[String]) -> Result<Predicate> {
    check_text_term(term, var, &[dict])?;
    resolve_cond(term, &cond_on(term, var, &[dict]), var, dict)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_sda_syntax() {
        let t = parse_filter(
            "AGE(25-64) SEX(2)  RACE(1,3-5) INCTOT<9999999 X(-5--1,*-0) S=\"New York\"",
        )
        .unwrap();
        assert_eq!(t.len(), 6);
        assert_eq!(
            t[0].cond,
            Cond::Set(vec![Item::Range(Some("25".into()), Some("64".into()))])
        );
        assert_eq!(
            t[2].cond,
            Cond::Set(vec![
                Item::One("1".into()),
                Item::Range(Some("3".into()), Some("5".into()))
            ])
        );
        assert_eq!(t[3].cond, Cond::Cmp(CmpOp::Lt, "9999999".into()));
        assert_eq!(
            t[4].cond,
            Cond::Set(vec![
                Item::Range(Some("-5".into()), Some("-1".into())),
                Item::Range(None, Some("0".into()))
            ])
        );
        assert_eq!(t[5].cond, Cond::Cmp(CmpOp::Eq, "New York".into()));
    }

    #[test]
    fn comparisons_written_with_spaces_are_one_term() {
        for text in ["AGE >= 18 SEX=1", "AGE>= 18 SEX = 1", "AGE >=18 SEX =1"] {
            let t = parse_filter(text).unwrap();
            assert_eq!(t.len(), 2, "{text}");
            assert_eq!(t[0].var, "AGE");
            assert_eq!(t[0].cond, Cond::Cmp(CmpOp::Ge, "18".into()), "{text}");
            assert_eq!(t[1].cond, Cond::Cmp(CmpOp::Eq, "1".into()), "{text}");
        }
        // A bare name is still an error.
        assert!(parse_filter("AGE SEX(1)").is_err());
    }

    #[test]
    fn star_is_every_value() {
        let t = parse_filter("S(*) A(1,*) Q(\"*\")").unwrap();
        assert_eq!(t[0].cond, Cond::Set(vec![Item::Range(None, None)]));
        assert_eq!(
            t[1].cond.clone(),
            Cond::Set(vec![Item::One("1".into()), Item::Range(None, None)])
        );
        // Quoted, it is the text "*".
        assert_eq!(t[2].cond, Cond::Set(vec![Item::One("*".into())]));
        let s = Variable::new("S", Kind::String, microtab_store::PhysType::U8);
        let dict = vec!["a".to_string(), "b".to_string()];
        let p = resolve(&t[0], &s, &dict).unwrap();
        assert!(p.test_int(0) && p.test_int(1));
    }

    #[test]
    fn values_no_record_has_name_their_close_spellings() {
        let s = Variable::new("gender", Kind::String, microtab_store::PhysType::U8);
        let dict = vec!["Female".to_string(), "Male".to_string()];
        let check = |f: &str| check_text_values(&parse_filter(f).unwrap()[0], &s, &[&dict]);
        assert!(check("gender(Male,Female)").is_ok());
        assert!(check("gender(*)").is_ok());
        for (f, value, close) in [
            ("gender(male)", "male", vec!["Male"]),
            ("gender=\" Male \"", " Male ", vec!["Male"]),
            ("gender!=FEMALE", "FEMALE", vec!["Female"]),
            ("gender(Mal)", "Mal", vec!["Male"]),
            ("gender(Femal)", "Femal", vec!["Female"]),
            ("gender(other)", "other", vec![]),
        ] {
            match check(f) {
                Err(Error::NoSuchValue {
                    variable,
                    value: v,
                    close: c,
                }) => {
                    assert_eq!((variable.as_str(), v.as_str()), ("gender", value), "{f}");
                    assert_eq!(c, close, "{f}");
                }
                r => panic!("{f}: {r:?}"),
            }
        }
        let e = check("gender(male)").unwrap_err().to_string();
        assert_eq!(e, "gender has no value 'male' (did you mean 'Male'?)");
        // A value one of several datasets has is known.
        let other = vec!["Other".to_string()];
        let t = parse_filter("gender(Other)").unwrap();
        assert!(check_text_values(&t[0], &s, &[&dict, &other]).is_ok());
        // Numbers are not checked: an empty range is a question.
        let a = Variable::new("AGE", Kind::Int, microtab_store::PhysType::U8);
        assert!(check_text_values(&parse_filter("AGE(200)").unwrap()[0], &a, &[]).is_ok());
    }

    #[test]
    fn names_and_values_quoted_as_the_lexer_says() {
        let names = [
            "Body Mass (g)",
            "Flipper Length, mm",
            "say \"hi\"",
            "tick`name",
            "a<b=c",
        ];
        for name in names {
            let q = crate::lex::quote_name(name);
            let t = parse_filter(&format!("{q}(1-5),{q}>=3 {q}(\"x, (y)\")")).unwrap();
            assert_eq!(t.len(), 3, "{name}");
            assert!(t.iter().all(|t| t.var == name), "{name}: {t:?}");
            assert_eq!(t[1].cond, Cond::Cmp(CmpOp::Ge, "3".into()));
            assert_eq!(t[2].cond, Cond::Set(vec![Item::One("x, (y)".into())]));
        }
        // Double quotes name a variable too, a quote in it doubled.
        let t = parse_filter(r#""say ""hi"""(2) S="a ""b"" c""#).unwrap();
        assert_eq!(t[0].var, "say \"hi\"");
        assert_eq!(t[1].cond, Cond::Cmp(CmpOp::Eq, "a \"b\" c".into()));
        // A range dash inside quotes is text.
        let t = parse_filter(r#"S("a-b","c"-"d")"#).unwrap();
        assert_eq!(
            t[0].cond,
            Cond::Set(vec![
                Item::One("a-b".into()),
                Item::Range(Some("c".into()), Some("d".into()))
            ])
        );
        assert!(parse_filter("`open(1)").is_err());
    }

    #[test]
    fn rejects_malformed() {
        for bad in [
            "AGE(25-64",
            "AGE)",
            "(3)",
            "AGE",
            "AGE<",
            "AGE(1,,2)",
            "AGE(3-)",
        ] {
            assert!(parse_filter(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn decimal_bounds_beyond_doubles_are_exact() {
        // Hand-computed: 2^53 + 0.5 lies between 2^53 and 2^53 + 1, which
        // a double cannot tell apart from 2^53.
        let big = Variable::new("BIG", Kind::Int, microtab_store::PhysType::I64);
        let p = |text: &str, v: &Variable| resolve(&one(text), v, &[]).unwrap();
        let two53 = 9_007_199_254_740_992i64;
        let ge = p("BIG >= 9007199254740992.5", &big);
        assert!(!ge.test_int(two53) && ge.test_int(two53 + 1));
        let eq = p("BIG = 9007199254740992.5", &big);
        assert!(!eq.test_int(two53) && !eq.test_int(two53 + 1));
        let le = p("BIG <= 123456789012345677.5", &big);
        assert!(le.test_int(123_456_789_012_345_677) && !le.test_int(123_456_789_012_345_678));
        let ge = p("BIG >= 123456789012345677.9", &big);
        assert!(ge.test_int(123_456_789_012_345_678) && !ge.test_int(123_456_789_012_345_677));
        // Negative: -2.5 on integers lies between -3 and -2.
        let lt = p("BIG < -2.5", &big);
        assert!(lt.test_int(-3) && !lt.test_int(-2));
        // Two stored decimals: 12345678901234.561 lies between .56 and .57.
        let mut bd = Variable::new("BD", Kind::Int, microtab_store::PhysType::I64);
        bd.decimals = 2;
        let ge = p("BD >= 12345678901234.561", &bd);
        assert!(!ge.test_int(1_234_567_890_123_456) && ge.test_int(1_234_567_890_123_457));
        // Hand-computed: however many digits a value has, it is compared
        // exactly (a fuzz finding: 0.999…95 read as the double 1.0).
        let mut d1 = Variable::new("D", Kind::Int, microtab_store::PhysType::I16);
        d1.decimals = 1;
        let nines = format!("0.{}5", "9".repeat(60));
        for (text, hits) in [
            (format!("D({nines})"), vec![]),
            (format!("D = {nines}"), vec![]),
            (format!("D < {nines}"), vec![-10, -9, 0, 9]),
            (format!("D > {nines}"), vec![10, 11]),
            (format!("D >= -{nines}"), vec![-9, 0, 9, 10, 11]),
            (format!("D < -{nines}"), vec![-10]),
            (
                format!("D({}1)", "1.0".to_string() + &"0".repeat(50)),
                vec![],
            ),
            (format!("D(1.{})", "0".repeat(50)), vec![10]),
            ("D(25e-1)".into(), vec![]),
            ("D(0.25E1)".into(), vec![]),
            ("D(1e-400)".into(), vec![]),
            ("D(-1e-400 - 1e-400)".into(), vec![0]),
            ("D > 1e-400".into(), vec![9, 10, 11]),
            ("D(0.09e1, 11E-1)".into(), vec![9, 11]),
            ("D(-0.0)".into(), vec![0]),
        ] {
            let t = p(&text, &d1);
            let got: Vec<i64> = [-10, -9, 0, 9, 10, 11]
                .into_iter()
                .filter(|&v| t.test_int(v))
                .collect();
            assert_eq!(got, hits, "{text}");
        }
    }

    #[test]
    fn deep_nesting_is_an_error_not_a_crash() {
        let deep = format!("{}AGE>3{}", "!(".repeat(5000), ")".repeat(5000));
        let e = parse_filter(&deep).unwrap_err().to_string();
        assert!(e.contains("more than 100 deep"), "{e}");
        let ok = format!("{}AGE>3{}", "not (".repeat(50), ")".repeat(50));
        assert!(parse_filter(&ok).is_ok());
    }

    fn int_var(name: &str) -> Variable {
        let mut v = Variable::new(name, Kind::Int, microtab_store::PhysType::U8);
        v.min = Some(microtab_store::Number::Int(0));
        v.max = Some(microtab_store::Number::Int(99));
        v
    }

    fn one(text: &str) -> Term {
        let mut t = parse_filter(text).unwrap();
        assert_eq!(t.len(), 1, "{text}: {t:?}");
        t.pop().unwrap()
    }

    /// The values 0..100 of an integer variable that `text` passes.
    fn passing(text: &str) -> Vec<i64> {
        let ps: Vec<Predicate> = parse_filter(text)
            .unwrap()
            .iter()
            .map(|t| resolve(t, &int_var(&t.var), &[]).unwrap())
            .collect();
        (0..100)
            .filter(|&v| ps.iter().all(|p| p.test_int(v)))
            .collect()
    }

    #[test]
    fn operators_users_type() {
        let t = parse_filter("AGE >= 25 and SEX = 2 & RACE == 1 AND INC <> 3").unwrap();
        assert_eq!(t.len(), 4);
        assert_eq!(t[0].cond, Cond::Cmp(CmpOp::Ge, "25".into()));
        assert_eq!(t[2].cond, Cond::Cmp(CmpOp::Eq, "1".into()));
        assert_eq!(t[3].cond, Cond::Cmp(CmpOp::Ne, "3".into()));
        // One variable, however combined: one term.
        let t = one("AGE < 18 or AGE > 65");
        assert_eq!(t.var, "AGE");
        assert!(matches!(t.cond, Cond::Any(_)), "{t:?}");
        assert_eq!(passing("AGE < 3 or AGE > 97"), [0, 1, 2, 98, 99]);
        assert_eq!(passing("not AGE > 2"), [0, 1, 2]);
        assert_eq!(passing("!(AGE >= 3)"), [0, 1, 2]);
        assert_eq!(passing("AGE between 3 and 5"), [3, 4, 5]);
        assert_eq!(passing("AGE BETWEEN 3 AND 5"), [3, 4, 5]);
        assert_eq!(passing("AGE not between 2 and 98"), [0, 1, 99]);
        assert_eq!(passing("AGE in (1, 3-4)"), [1, 3, 4]);
        assert_eq!(passing("AGE Not In (2-99)"), [0, 1]);
        assert_eq!(passing("AGE(0-5) and not AGE(2,4)"), [0, 1, 3, 5]);
        assert_eq!(passing("(AGE < 2 | AGE > 97) & AGE != 99"), [0, 1, 98]);
        assert_eq!(
            passing("not (not AGE(1) and AGE(0-1)) or AGE = 0 and AGE > 0"),
            (1..100).collect::<Vec<_>>()
        );
        // Several variables: one mixed term beside the plain ones.
        let t = parse_filter("AGE(25-64) (SEX(1) or INC > 60) not (A=1 and B=2)").unwrap();
        assert_eq!(t.len(), 3);
        assert_eq!(t[0].var, "AGE");
        assert!(matches!(&t[1].cond, Cond::Mixed(f) if matches!(**f, Filter::Or(_))));
        assert!(matches!(&t[2].cond, Cond::Mixed(f) if matches!(**f, Filter::Not(_))));
        let vars: Vec<&str> = t[1].leaves().iter().map(|t| t.var.as_str()).collect();
        assert_eq!(vars, ["SEX", "INC"]);
        // `and` binds tighter than `or`.
        let t = one("A(1) or B(2) and C(3)");
        let Cond::Mixed(f) = t.cond else { panic!() };
        let Filter::Or(parts) = *f else { panic!() };
        assert!(matches!(parts[1], Filter::And(_)));
        // SDA's commas between terms, one at the end too.
        assert_eq!(parse_filter("AGE(1),SEX(2),").unwrap().len(), 2);
        // Keywords are names when quoted.
        let t = parse_filter("`in`(1) \"and\" = 2 `not` between 1 and 2").unwrap();
        assert_eq!(
            t.iter().map(|t| t.var.as_str()).collect::<Vec<_>>(),
            ["in", "and", "not"]
        );
    }

    #[test]
    fn float_sets_combine_with_their_open_ends() {
        let x = Variable::new("X", Kind::Float, microtab_store::PhysType::F64);
        let p = resolve(
            &one("(not (X > 1.5 and X <= 2.5) and X != 3) or X = 99"),
            &x,
            &[],
        )
        .unwrap();
        for (v, pass) in [
            (1.5, true),
            (1.6, false),
            (2.5, false),
            (2.51, true),
            (3.0, false),
            (-1e300, true),
            (99.0, true),
        ] {
            assert_eq!(p.test(v), pass, "{v}");
        }
        assert!(!p.test(f64::NAN));
    }

    #[test]
    fn dashed_text_values() {
        let mut r = Variable::new("REGION", Kind::String, microtab_store::PhysType::U8);
        r.min = Some(microtab_store::Number::Int(0));
        r.max = Some(microtab_store::Number::Int(2));
        let dict: Vec<String> = ["A-", "Nord-Norge", "Sør"].map(String::from).to_vec();
        for (f, code) in [
            ("REGION(Nord-Norge)", 1),
            ("REGION(A-)", 0),
            ("REGION in (Nord-Norge)", 1),
            ("REGION = Nord-Norge", 1),
        ] {
            let t = one(f);
            check_text_values(&t, &r, &[&dict]).unwrap();
            let p = resolve(&t, &r, &dict).unwrap();
            assert_eq!(
                (0..3).filter(|&c| p.test_int(c)).collect::<Vec<_>>(),
                [code],
                "{f}"
            );
        }
        let t = one("REGION not in (Nord-Norge, Sør)");
        let p = resolve(&t, &r, &dict).unwrap();
        assert_eq!((0..3).filter(|&c| p.test_int(c)).collect::<Vec<_>>(), [0]);
        // A value with a dash no record has names its close spellings.
        let e = check_text_values(&one("REGION(Nord-Norg)"), &r, &[&dict]).unwrap_err();
        assert!(e.to_string().contains("'Nord-Norge'"), "{e}");
        // Open ranges and comparisons are still refused on text.
        for f in ["REGION(A-*)", "REGION > A", "REGION between A and B"] {
            let e = check_text_values(&one(f), &r, &[&dict]).unwrap_err();
            assert!(matches!(e, Error::TextOrder { .. }), "{f}: {e}");
        }
        // Numbers on a text variable are still a range, refused as one,
        // unless the text with its dash is a value.
        let e = check_text_values(&one("REGION(1-5)"), &r, &[&dict]).unwrap_err();
        assert!(matches!(e, Error::TextOrder { .. }), "{e}");
        let bands: Vec<String> = ["10-14", "15-19"].map(String::from).to_vec();
        let t = one("REGION(10-14)");
        check_text_values(&t, &r, &[&bands]).unwrap();
        assert!(resolve(&t, &r, &bands).unwrap().test_int(0));
        // On numbers a dash is still a range, and `3-` incomplete.
        assert_eq!(passing("AGE(3-5)"), [3, 4, 5]);
        let e = parse_filter("AGE(3-)").unwrap_err().to_string();
        assert!(
            e.contains("incomplete range '3-'") && e.contains("3-*"),
            "{e}"
        );
    }

    #[test]
    fn errors_quote_the_mistake() {
        for (bad, says) in [
            (
                "(AGE(1) or SEX(2)",
                "the '(' at character 1 is never closed",
            ),
            ("AGE(1) or SEX(2))", "unbalanced ')' at character 17"),
            ("AGE(1) and", "'and' at character 8 has no term after it"),
            (
                "AGE(1) and or SEX(2)",
                "'and' at character 8 is followed by 'or'",
            ),
            ("and AGE(1)", "expected a term"),
            ("AGE between 1 64", "'between' at character 5 needs 'and'"),
            ("AGE between 1", "'between' at character 5 needs 'and'"),
            (
                "AGE in 1, 2",
                "expected '(' and a list of values after 'in' at character 8",
            ),
            ("AGE >", "expected a value after '>' at the end"),
            ("AGE(1) SEX", "after the variable name SEX at the end"),
            ("AGE(1) not", "'not' at character 8 has no term after it"),
            ("in(1)", "'in' at character 1 needs a term before it"),
            ("S = \"open", "unterminated \" opened at character 5"),
            // Characters, not bytes.
            ("R(Sør) and", "'and' at character 8 has no term after it"),
        ] {
            let e = parse_filter(bad).unwrap_err().to_string();
            assert!(e.contains(says), "{bad}: {e}");
        }
    }
}
