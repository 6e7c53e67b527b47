//! Model formulas as R writes them: `Y ~ X1 + factor(F) + X1:X2`,
//! `A*B` (`A + B + A:B`), `- 1` or `+ 0` for no intercept. A term's parts
//! are grouping arguments ([`crate::parse_dim`]): a variable, a
//! restricted one (`AGE(18-64)`) or a temporary recode (`AGE(r: 0-17;
//! 18-*)`); `factor(PART)` or `factor(PART, base = K)` makes a part
//! categorical. The outcome is a variable or a condition on one
//! (`EMPSTAT(1)`: 1 where it holds, 0 where not, missing stays missing).
//! Names are quoted as [`crate::lex`] says (backticks, as in R).
//!
//! This module reads the text into terms; coding the terms into columns
//! (which factor takes contrasts) is the analysis layer's.

use crate::lex::{quoted, split, unquote};
use crate::{Error, Result};

/// A model formula.
#[derive(Debug, Clone, PartialEq)]
pub struct Formula {
    /// The outcome: a grouping argument (a variable, or a condition on
    /// one written `NAME(values)`).
    pub outcome: Outcome,
    /// The terms, main effects first, then interactions by order (R's
    /// `terms()` order); within a term, parts in the order their
    /// variables first appear in the formula.
    pub terms: Vec<Vec<Part>>,
    /// Whether the model has an intercept.
    pub intercept: bool,
}

/// The left-hand side of a formula.
#[derive(Debug, Clone, PartialEq)]
pub struct Outcome {
    /// The variable's name.
    pub name: String,
    /// With a condition (`EMPSTAT(1)`, `AGE(18-64)`): its values as
    /// written inside the parentheses; the outcome is 1 where the
    /// variable takes one of them.
    pub condition: Option<String>,
    /// As written (trimmed).
    pub text: String,
}

/// One factor of a term.
#[derive(Debug, Clone, PartialEq)]
pub struct Part {
    /// The grouping argument whose categories or values the part takes
    /// (`AGE`, `AGE(r: 0-17; 18-*)`).
    pub spec: String,
    /// Categorical (`factor(...)`, or a text variable: the analysis layer
    /// decides for those).
    pub factor: bool,
    /// With `factor(X, base = K)`: the base category's displayed value.
    pub base: Option<String>,
    /// As written (trimmed), the start of its columns' names.
    pub text: String,
}

fn bad(formula: &str, reason: impl Into<String>) -> Error {
    Error::Invalid(format!("formula '{formula}': {}", reason.into()))
}

/// Parses a formula.
pub fn parse_formula(text: &str) -> Result<Formula> {
    let sides = split(text, true, |c| c == '~');
    if sides.len() != 2 {
        return Err(bad(
            text,
            "expected one '~' between the outcome and the terms (Y ~ X1 + X2)",
        ));
    }
    let (lhs, rhs) = (sides[0].trim(), sides[1].trim());
    if lhs.is_empty() {
        return Err(bad(text, "no outcome before '~'"));
    }
    let outcome = outcome(text, lhs)?;
    let mut intercept = true;
    let mut terms: Vec<Vec<Part>> = Vec::new();
    // Summands with their signs: '+' and '-' outside quotes and
    // parentheses (a recode's ranges `0-17` are inside them).
    let mut pieces: Vec<(bool, &str)> = Vec::new();
    let mut sign = true;
    let mut start = 0;
    let cuts = split_points(rhs);
    for (at, c) in cuts {
        pieces.push((sign, &rhs[start..at]));
        sign = c == '+';
        start = at + 1;
    }
    pieces.push((sign, &rhs[start..]));
    for (i, (plus, piece)) in pieces.into_iter().enumerate() {
        let p = piece.trim();
        if p.is_empty() {
            if i == 0 && !plus {
                continue; // a leading '-'
            }
            if i == 0 {
                return Err(bad(
                    text,
                    "no terms after '~' (write 1 for the intercept alone)",
                ));
            }
            return Err(bad(text, "an empty term between two signs"));
        }
        match (p, plus) {
            ("1", true) => intercept = true,
            ("0", true) | ("1", false) => intercept = false,
            ("0", false) => intercept = true,
            (_, false) => {
                return Err(bad(
                    text,
                    format!("'- {p}': only '- 1' (no intercept) may be subtracted"),
                ))
            }
            _ => {
                for t in expand(text, p)? {
                    if !terms.iter().any(|u| same_term(u, &t)) {
                        terms.push(t);
                    }
                }
            }
        }
    }
    // Parts in the order their variables first appear; terms by order.
    let mut seen: Vec<String> = Vec::new();
    for t in &terms {
        for p in t {
            if !seen.contains(&p.text) {
                seen.push(p.text.clone());
            }
        }
    }
    for t in &mut terms {
        t.sort_by_key(|p| seen.iter().position(|s| *s == p.text));
    }
    terms.sort_by_key(|t| t.len());
    Ok(Formula {
        outcome,
        terms,
        intercept,
    })
}

/// The offsets of the `+` and `-` signs between summands.
fn split_points(s: &str) -> Vec<(usize, char)> {
    let mut out = Vec::new();
    let mut depth = crate::lex::Depth::default();
    for ch in crate::lex::walk(s) {
        if depth.top(ch) && (ch.c == '+' || ch.c == '-') {
            out.push((ch.at, ch.c));
        }
    }
    out
}

fn same_term(a: &[Part], b: &[Part]) -> bool {
    a.len() == b.len() && a.iter().all(|p| b.iter().any(|q| q.text == p.text))
}

/// A summand's terms: `A*B*C` is every non-empty product of its
/// `:`-joined factors.
fn expand(formula: &str, s: &str) -> Result<Vec<Vec<Part>>> {
    let crossed: Vec<Vec<Part>> = split(s, true, |c| c == '*')
        .into_iter()
        .map(|f| {
            split(f, true, |c| c == ':')
                .into_iter()
                .map(|p| part(formula, p))
                .collect::<Result<Vec<Part>>>()
        })
        .collect::<Result<_>>()?;
    let mut out: Vec<Vec<Part>> = Vec::new();
    for mask in 1u32..(1 << crossed.len().min(16)) {
        let mut t: Vec<Part> = Vec::new();
        for (i, c) in crossed.iter().enumerate() {
            if mask & (1 << i) != 0 {
                for p in c {
                    if !t.iter().any(|q| q.text == p.text) {
                        t.push(p.clone());
                    }
                }
            }
        }
        out.push(t);
    }
    // Lower orders first, as R's `A*B` gives `A + B + A:B`.
    out.sort_by_key(|t| t.len());
    Ok(out)
}

/// One factor of a term: `factor(SPEC[, base = K])` or `SPEC`.
fn part(formula: &str, s: &str) -> Result<Part> {
    let text = s.trim();
    if text.is_empty() {
        return Err(bad(formula, "an empty factor in an interaction"));
    }
    if let Some(inner) = text
        .strip_prefix("factor(")
        .or_else(|| text.strip_prefix("factor ("))
        .and_then(|r| r.strip_suffix(')'))
    {
        let args = split(inner, true, |c| c == ',');
        let spec = args[0].trim();
        if spec.is_empty() {
            return Err(bad(formula, "factor() names no variable"));
        }
        let base = match &args[1..] {
            [] => None,
            [b] => {
                let kv = split(b, true, |c| c == '=');
                if kv.len() != 2 || kv[0].trim() != "base" {
                    return Err(bad(
                        formula,
                        format!("factor({inner}): expected factor(VAR) or factor(VAR, base = K)"),
                    ));
                }
                Some(unquote(kv[1]))
            }
            _ => {
                return Err(bad(
                    formula,
                    format!("factor({inner}): expected factor(VAR) or factor(VAR, base = K)"),
                ))
            }
        };
        return Ok(Part {
            spec: spec.to_string(),
            factor: true,
            base,
            text: text.to_string(),
        });
    }
    Ok(Part {
        spec: text.to_string(),
        factor: false,
        base: None,
        text: text.to_string(),
    })
}

/// The outcome: `NAME` or `NAME(values)`.
fn outcome(formula: &str, s: &str) -> Result<Outcome> {
    let (name, rest) = match quoted(s) {
        Some((name, rest)) => (name, rest.trim()),
        None => match s.find('(') {
            Some(open) => (s[..open].trim().to_string(), &s[open..]),
            None => (s.to_string(), ""),
        },
    };
    let condition = if rest.is_empty() {
        None
    } else {
        let inner = rest
            .strip_prefix('(')
            .and_then(|r| r.strip_suffix(')'))
            .filter(|r| !r.trim().is_empty())
            .ok_or_else(|| {
                bad(
                    formula,
                    format!("outcome '{s}': expected a variable or a condition such as EMPSTAT(1)"),
                )
            })?;
        if inner.trim_start().starts_with("r:") {
            return Err(bad(
                formula,
                format!("outcome '{s}': a recode cannot be an outcome; write a condition such as EMPSTAT(1)"),
            ));
        }
        Some(inner.trim().to_string())
    };
    Ok(Outcome {
        name,
        condition,
        text: s.to_string(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn labels(f: &Formula) -> Vec<String> {
        f.terms
            .iter()
            .map(|t| {
                t.iter()
                    .map(|p| p.text.as_str())
                    .collect::<Vec<_>>()
                    .join(":")
            })
            .collect()
    }

    #[test]
    fn terms_as_r_orders_them() {
        // R: attr(terms(y ~ a:b + c + a*d), "term.labels")
        //    "c" "a" "d" "a:b" "a:d"
        let f = parse_formula("y ~ a:b + c + a*d").unwrap();
        assert_eq!(labels(&f), ["c", "a", "d", "a:b", "a:d"]);
        assert!(f.intercept);
        let f = parse_formula("y ~ x - 1").unwrap();
        assert!(!f.intercept);
        let f = parse_formula("y ~ 0 + x").unwrap();
        assert!(!f.intercept);
        // R: y ~ a*b*c gives a b c a:b a:c b:c a:b:c
        let f = parse_formula("y ~ a*b*c").unwrap();
        assert_eq!(labels(&f), ["a", "b", "c", "a:b", "a:c", "b:c", "a:b:c"]);
    }

    #[test]
    fn parts_keep_recodes_and_bases() {
        let f = parse_formula("EMPSTAT(1) ~ factor(AGE(r: 0-17; 18-64; 65-*)) + factor(EDUC, base = 6) + `Body Mass (g)`").unwrap();
        assert_eq!(f.outcome.name, "EMPSTAT");
        assert_eq!(f.outcome.condition.as_deref(), Some("1"));
        assert_eq!(f.terms[0][0].spec, "AGE(r: 0-17; 18-64; 65-*)");
        assert!(f.terms[0][0].factor);
        assert_eq!(f.terms[1][0].base.as_deref(), Some("6"));
        assert_eq!(f.terms[2][0].spec, "`Body Mass (g)`");
        assert!(!f.terms[2][0].factor);
    }

    #[test]
    fn errors_name_the_formula() {
        for bad in ["y x", "~ x", "y ~ x - z", "y ~ x + + z", "y ~ factor(x, 2)"] {
            let e = parse_formula(bad).unwrap_err().to_string();
            assert!(e.contains(bad), "{e}");
        }
    }
}
