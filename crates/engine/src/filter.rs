//! SDA-style filters: `AGE(25-64) SEX(2) RACE(1,3-5) INCTOT<9999999`.
//!
//! Terms are separated by spaces and all must hold. A term is either
//! `NAME(list)` where the list holds values, ranges `a-b` and open ranges
//! `a-*` / `*-b`, or a comparison `NAME op value` with `op` one of `<`,
//! `<=`, `>`, `>=`, `=`, `!=`. Values are given as displayed (decimals
//! applied; strings as text, quoted with `"` when they hold spaces or
//! punctuation). A row whose variable is missing fails the term.

use crate::{Error, Result};
use microtab_store::{Kind, Variable};

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
}

/// One filter term.
#[derive(Debug, Clone, PartialEq)]
pub struct Term {
    /// Variable name as written.
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

/// Splits filter text into terms: whitespace separates terms except inside
/// parentheses or quotes.
fn split_terms(text: &str) -> Result<Vec<String>> {
    let mut terms = Vec::new();
    let mut cur = String::new();
    let mut depth = 0i32;
    let mut quote = false;
    for c in text.chars() {
        match c {
            '"' => {
                quote = !quote;
                cur.push(c);
            }
            '(' if !quote => {
                depth += 1;
                cur.push(c);
            }
            ')' if !quote => {
                depth -= 1;
                if depth < 0 {
                    return Err(err(text, "unbalanced ')'"));
                }
                cur.push(c);
            }
            c if c.is_whitespace() && !quote && depth == 0 => {
                if !cur.is_empty() {
                    terms.push(std::mem::take(&mut cur));
                }
            }
            c => cur.push(c),
        }
    }
    if quote {
        return Err(err(text, "unterminated '\"'"));
    }
    if depth != 0 {
        return Err(err(text, "missing ')'"));
    }
    if !cur.is_empty() {
        terms.push(cur);
    }
    Ok(terms)
}

fn unquote(s: &str) -> String {
    let t = s.trim();
    if t.len() >= 2 && t.starts_with('"') && t.ends_with('"') {
        t[1..t.len() - 1].to_string()
    } else {
        t.to_string()
    }
}

fn is_name_char(c: char) -> bool {
    !matches!(c, '(' | ')' | '<' | '>' | '=' | '!' | '"' | ',') && !c.is_whitespace()
}

/// Splits a list item on its range dash: a `-` that is not the first
/// character and does not directly follow another `-` (so `-5--1` is the
/// range −5…−1).
fn split_range(item: &str) -> Option<(&str, &str)> {
    let b = item.as_bytes();
    let mut quote = false;
    for i in 0..b.len() {
        if b[i] == b'"' {
            quote = !quote;
        }
        if !quote
            && b[i] == b'-'
            && i > 0
            && b[i - 1] != b'-'
            && b[i - 1] != b'e'
            && b[i - 1] != b'E'
        {
            return Some((&item[..i], &item[i + 1..]));
        }
    }
    None
}

fn split_items(list: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut cur = String::new();
    let mut quote = false;
    for c in list.chars() {
        if c == '"' {
            quote = !quote;
        }
        if c == ',' && !quote {
            out.push(std::mem::take(&mut cur));
        } else {
            cur.push(c);
        }
    }
    out.push(cur);
    out
}

/// Parses filter text into terms (names are resolved later, against a dataset).
pub fn parse_filter(text: &str) -> Result<Vec<Term>> {
    let mut out = Vec::new();
    for t in split_terms(text)? {
        let name_end = t.find(|c: char| !is_name_char(c)).unwrap_or(t.len());
        let name = &t[..name_end];
        if name.is_empty() {
            return Err(err(
                &t,
                "expected a variable name, as in AGE(25-64) or INCTOT<9999999",
            ));
        }
        let rest = &t[name_end..];
        let cond = if let Some(inner) = rest.strip_prefix('(') {
            let Some(inner) = inner.strip_suffix(')') else {
                return Err(err(&t, "expected ')' at the end of the term"));
            };
            let mut items = Vec::new();
            for raw in split_items(inner) {
                let raw = raw.trim();
                if raw.is_empty() {
                    return Err(err(&t, "empty value in list (expected e.g. RACE(1,3-5))"));
                }
                let item = match split_range(raw) {
                    Some((a, b)) => {
                        let end = |s: &str| {
                            let s = s.trim();
                            if s == "*" {
                                Ok(None)
                            } else if s.is_empty() {
                                Err(err(&t, format!("incomplete range '{raw}'")))
                            } else {
                                Ok(Some(unquote(s)))
                            }
                        };
                        Item::Range(end(a)?, end(b)?)
                    }
                    None => Item::One(unquote(raw)),
                };
                items.push(item);
            }
            Cond::Set(items)
        } else {
            let ops = [
                ("<=", CmpOp::Le),
                (">=", CmpOp::Ge),
                ("!=", CmpOp::Ne),
                ("<>", CmpOp::Ne),
                ("==", CmpOp::Eq),
                ("<", CmpOp::Lt),
                (">", CmpOp::Gt),
                ("=", CmpOp::Eq),
            ];
            let Some((sym, op)) = ops.iter().find(|(s, _)| rest.starts_with(s)) else {
                return Err(err(
                    &t,
                    "expected '(' or a comparison (<, <=, >, >=, =, !=) after the variable name",
                ));
            };
            let v = rest[sym.len()..].trim();
            if v.is_empty() {
                return Err(err(&t, format!("expected a value after '{sym}'")));
            }
            Cond::Cmp(*op, unquote(v))
        };
        out.push(Term {
            var: name.to_string(),
            cond,
            text: t.clone(),
        });
    }
    Ok(out)
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
    fn closed(lo: f64, hi: f64) -> Self {
        Interval {
            lo,
            lo_open: false,
            hi,
            hi_open: false,
        }
    }

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
#[derive(Debug, Clone)]
pub(crate) struct Predicate {
    pub any: Vec<Interval>,
}

impl Predicate {
    #[inline]
    pub fn test(&self, v: f64) -> bool {
        self.any.iter().any(|i| i.contains(v))
    }
}

/// Converts a displayed value to stored units of `var`.
fn to_stored(term: &Term, var: &Variable, dict: &[String], s: &str, side: Side) -> Result<f64> {
    if var.kind == Kind::String {
        // The dictionary is sorted: a string's position is its code, and a
        // missing string falls between two codes.
        return Ok(match dict.binary_search_by(|d| d.as_str().cmp(s)) {
            Ok(i) => i as f64,
            Err(i) => match side {
                Side::Lo => i as f64 - 0.5,
                Side::Hi => i as f64 - 0.5,
            },
        });
    }
    let x: f64 = s.trim().parse().map_err(|_| {
        err(
            &term.text,
            format!("expected a number for {}, found '{s}'", var.name),
        )
    })?;
    let v = x * var.scale();
    if var.kind == Kind::Int && (v - v.round()).abs() < 1e-6 {
        Ok(v.round())
    } else {
        Ok(v)
    }
}

#[derive(Clone, Copy)]
enum Side {
    Lo,
    Hi,
}

/// Resolves a term against its variable.
pub(crate) fn resolve(term: &Term, var: &Variable, dict: &[String]) -> Result<Predicate> {
    let inf = f64::INFINITY;
    let mut any = Vec::new();
    match &term.cond {
        Cond::Set(items) => {
            for it in items {
                match it {
                    Item::One(s) => {
                        let v = to_stored(term, var, dict, s, Side::Lo)?;
                        any.push(Interval::closed(v, v));
                    }
                    Item::Range(a, b) => {
                        let lo = match a {
                            Some(s) => to_stored(term, var, dict, s, Side::Lo)?,
                            None => -inf,
                        };
                        let hi = match b {
                            Some(s) => to_stored(term, var, dict, s, Side::Hi)?,
                            None => inf,
                        };
                        any.push(Interval::closed(lo, hi));
                    }
                }
            }
        }
        Cond::Cmp(op, s) => {
            let v = to_stored(term, var, dict, s, Side::Lo)?;
            let iv = |lo, lo_open, hi, hi_open| Interval {
                lo,
                lo_open,
                hi,
                hi_open,
            };
            match op {
                CmpOp::Lt => any.push(iv(-inf, false, v, true)),
                CmpOp::Le => any.push(iv(-inf, false, v, false)),
                CmpOp::Gt => any.push(iv(v, true, inf, false)),
                CmpOp::Ge => any.push(iv(v, false, inf, false)),
                CmpOp::Eq => any.push(Interval::closed(v, v)),
                CmpOp::Ne => {
                    any.push(iv(-inf, false, v, true));
                    any.push(iv(v, true, inf, false));
                }
            }
        }
    }
    Ok(Predicate { any })
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
}
