//! SDA-style filters: `AGE(25-64) SEX(2) RACE(1,3-5) INCTOT<9999999`.
//!
//! Terms are separated by spaces and all must hold. A term is either
//! `NAME(list)` where the list holds values, ranges `a-b` and open ranges
//! `a-*` / `*-b`, or a comparison `NAME op value` with `op` one of `<`,
//! `<=`, `>`, `>=`, `=`, `!=`. Values are given as displayed (decimals
//! applied; strings as text, quoted with `"` when they hold spaces or
//! punctuation). A name with spaces or punctuation is quoted with `"` or
//! backticks: `"Body Mass (g)"(3000-4000)`, `` `bill length`>40 ``. A row
//! whose variable is missing fails the term.
//!
//! Text variables take values and value lists (`STATE("New York",Ohio)`,
//! `STATE!=Ohio`) but no ranges or order comparisons: `AGE(25-64)` on an
//! `AGE` imported as text is an error, never a comparison of strings
//! ("3" would fall between "25" and "64"). Numbers must be finite: `nan`
//! and `inf` are refused.

use crate::lex::{is_quote, quoted, split, unquote, walk, Depth};
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

/// Splits filter text into terms: whitespace separates terms except inside
/// parentheses or quotes.
fn split_terms(text: &str) -> Result<Vec<&str>> {
    let mut terms: Vec<&str> = Vec::new();
    let (mut w, mut depth, mut start) = (walk(text), Depth::default(), 0);
    for ch in w.by_ref() {
        let top = depth.top(ch);
        if depth.0 < 0 {
            return Err(err(text, "unbalanced ')'"));
        }
        let cur = &text[start..ch.at];
        // SDA separates terms by commas too: `year(2017-2020, 2022),
        // migrate1(5)` — a comma after a term's closing parenthesis.
        let comma = ch.c == ','
            && (cur.ends_with(')')
                || (cur.is_empty() && terms.last().is_some_and(|t| t.ends_with(')'))));
        if top && (ch.c.is_whitespace() || comma) {
            if !cur.is_empty() {
                terms.push(cur);
            }
            start = ch.at + ch.c.len_utf8();
        }
    }
    if let Some(q) = w.quote {
        return Err(err(text, format!("unterminated '{q}'")));
    }
    if depth.0 != 0 {
        return Err(err(text, "missing ')'"));
    }
    if start < text.len() {
        terms.push(&text[start..]);
    }
    Ok(terms)
}

fn is_name_char(c: char) -> bool {
    !matches!(c, '(' | ')' | '<' | '>' | '=' | '!' | '"' | ',') && !c.is_whitespace()
}

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
    let end = |s: &str| {
        let s = s.trim();
        if s == "*" {
            Ok(None)
        } else if s.is_empty() {
            Err(err(t, format!("incomplete range '{raw}'")))
        } else {
            Ok(Some(unquote(s)))
        }
    };
    Ok(Item::Range(end(a)?, end(b)?))
}

/// A term's condition: `(list)` or a comparison with a value.
fn condition(t: &str, rest: &str) -> Result<Cond> {
    if let Some(inner) = rest.strip_prefix('(') {
        let Some(inner) = inner.strip_suffix(')') else {
            return Err(err(t, "expected ')' at the end of the term"));
        };
        let items = split(inner, false, |c| c == ',');
        return Ok(Cond::Set(
            items
                .into_iter()
                .map(|raw| item(t, raw))
                .collect::<Result<_>>()?,
        ));
    }
    let Some((sym, op)) = CMP_SIGNS.iter().find(|(s, _)| rest.starts_with(s)) else {
        return Err(err(
            t,
            "expected '(' or a comparison (<, <=, >, >=, =, !=) after the variable name",
        ));
    };
    let v = rest[sym.len()..].trim();
    if v.is_empty() {
        return Err(err(t, format!("expected a value after '{sym}'")));
    }
    Ok(Cond::Cmp(*op, unquote(v)))
}

/// Terms with a comparison written with spaces (`AGE >= 18`, `AGE >=18`,
/// `AGE>= 18`) joined into one (`AGE>=18`): a bare name and a term that
/// starts with a comparison sign mean nothing alone.
fn spaced_comparisons(terms: Vec<&str>) -> Vec<String> {
    let starts_cmp = |t: &str| CMP_SIGNS.iter().any(|(s, _)| t.starts_with(s));
    let ends_cmp = |t: &str| CMP_SIGNS.iter().any(|(s, _)| t.ends_with(s));
    let bare = |t: &str| !t.is_empty() && t.chars().all(is_name_char);
    let mut out: Vec<String> = Vec::new();
    for t in terms {
        if let Some(last) = out.last_mut() {
            if (bare(last) && starts_cmp(t)) || (ends_cmp(last) && !starts_cmp(t)) {
                last.push_str(t);
                continue;
            }
        }
        out.push(t.to_string());
    }
    out
}

/// Parses filter text into terms (names are resolved later, against a dataset).
pub fn parse_filter(text: &str) -> Result<Vec<Term>> {
    let mut out = Vec::new();
    for t in spaced_comparisons(split_terms(text)?) {
        let t = t.as_str();
        let (name, rest) = match t.chars().next() {
            Some(q) if is_quote(q) => match quoted(t) {
                Some(found) => found,
                None => return Err(err(t, format!("unterminated '{q}' in the variable name"))),
            },
            _ => {
                let name_end = t.find(|c: char| !is_name_char(c)).unwrap_or(t.len());
                (t[..name_end].to_string(), &t[name_end..])
            }
        };
        if name.is_empty() {
            return Err(err(
                t,
                "expected a variable name, as in AGE(25-64) or INCTOT<9999999 (quote names with spaces: `Body Mass (g)`(3000-4000))",
            ));
        }
        out.push(Term {
            var: name,
            cond: condition(t, rest)?,
            text: t.to_string(),
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

/// A value in stored units: exact when it is an integer there.
#[derive(Clone, Copy)]
enum Stored {
    Exact(i128),
    Approx(f64),
}

impl Stored {
    fn floor(self) -> i128 {
        match self {
            Stored::Exact(i) => i,
            Stored::Approx(f) => f.floor().clamp(-1.7e38, 1.7e38) as i128,
        }
    }
    fn ceil(self) -> i128 {
        match self {
            Stored::Exact(i) => i,
            Stored::Approx(f) => f.ceil().clamp(-1.7e38, 1.7e38) as i128,
        }
    }
    fn f(self) -> f64 {
        match self {
            Stored::Exact(i) => i as f64,
            Stored::Approx(f) => f,
        }
    }
}

/// Parses `[+-]digits[.digits]` exactly into stored units with `decimals`
/// (`None` when it has more decimals than that, or is not such a number).
fn exact_decimal(s: &str, decimals: u32) -> Option<i128> {
    let (m, d) = microtab_store::codec::parse_exact(s.trim())?;
    if d <= decimals {
        m.checked_mul(10i128.checked_pow(decimals - d)?)
    } else {
        let k = 10i128.checked_pow(d - decimals)?;
        (m % k == 0).then(|| m / k)
    }
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
            return Ok(Stored::Exact(v));
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

/// Refuses a value of a text variable that none of its records has (in
/// any of `dicts`, the variable's dictionaries in the datasets answered
/// together): matching nothing, it would give an empty group, `Total 0` or
/// (with `!=`) every record without a word. `*` (every value) is no value.
pub(crate) fn check_text_values(term: &Term, var: &Variable, dicts: &[&[String]]) -> Result<()> {
    if var.kind != Kind::String {
        return Ok(());
    }
    // A range or order comparison is refused with its own reason first.
    check_text_term(term, var)?;
    let values: Vec<&String> = match &term.cond {
        Cond::Set(items) => items
            .iter()
            .filter_map(|i| match i {
                Item::One(s) => Some(s),
                Item::Range(..) => None,
            })
            .collect(),
        Cond::Cmp(_, s) => vec![s],
    };
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

/// Refuses ranges and order comparisons on a text variable.
fn check_text_term(term: &Term, var: &Variable) -> Result<()> {
    if var.kind != Kind::String {
        return Ok(());
    }
    let ordered = match &term.cond {
        Cond::Cmp(op, _) => !matches!(op, CmpOp::Eq | CmpOp::Ne),
        // `*` (every value) orders nothing.
        Cond::Set(items) => items
            .iter()
            .any(|i| matches!(i, Item::Range(..)) && *i != Item::Range(None, None)),
    };
    if ordered {
        return Err(Error::TextOrder {
            variable: var.name.clone(),
            text: term.text.clone(),
        });
    }
    Ok(())
}

/// Resolves a term against its variable.
pub(crate) fn resolve(term: &Term, var: &Variable, dict: &[String]) -> Result<Predicate> {
    check_text_term(term, var)?;
    let inf = f64::INFINITY;
    let conv = |s: &str| to_stored(term, var, dict, s);
    // Bounds as (lower, upper) pairs; `None` is unbounded.
    let mut spans: Vec<(Option<Stored>, bool, Option<Stored>, bool)> = Vec::new();
    match &term.cond {
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
    }
    if var.kind == Kind::Float {
        return Ok(Predicate::Floats(
            spans
                .into_iter()
                .map(|(lo, lo_open, hi, hi_open)| Interval {
                    lo: lo.map_or(-inf, Stored::f),
                    lo_open,
                    hi: hi.map_or(inf, Stored::f),
                    hi_open,
                })
                .collect(),
        ));
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
    Ok(Predicate::Ints(ints))
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
}
