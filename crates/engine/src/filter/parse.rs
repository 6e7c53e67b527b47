//! The filter grammar: SDA's terms (`AGE(25-64) SEX(2) INCTOT<9999999`)
//! combined with `and`/`&`, `or`/`|`, `not`/`!` and parentheses, with
//! `X between a and b` and `X in (a, b)` / `X not in (…)`.
//!
//! Precedence, lowest first: `or`, `and` (also a comma between terms, or
//! terms side by side), `not`. Keywords are read in any case and are
//! reserved: a variable named `and`, `or`, `not`, `in` or `between` is
//! quoted (`` `in`(1) ``). A parenthesis right after a variable name opens
//! its list of values (`AGE(25-64)`, `AGE (25-64)`); anywhere else it
//! groups.
//!
//! The tree is then cut into [`Term`]s that must all hold (the top-level
//! `and`s): a part that names one variable becomes one term whose
//! condition combines its comparisons ([`Cond::Not`], [`Cond::All`],
//! [`Cond::Any`]); a part that names several (`SEX(1) or AGE > 60`) is one
//! [`Cond::Mixed`] term, read record by record.

use super::{err, CmpOp, Cond, Filter, Term, CMP_SIGNS};
use crate::lex::{group_end, quoted, unquote, walk};
use crate::Result;

#[derive(Debug, Clone, PartialEq)]
enum Tok {
    Open,
    Close,
    Comma,
    Cmp(&'static str, CmpOp),
    And,
    Or,
    Not,
    /// A name or a value as written (quotes kept).
    Word,
}

#[derive(Debug, Clone)]
struct Token {
    tok: Tok,
    at: usize,
    end: usize,
}

fn ends_word(c: char) -> bool {
    c.is_whitespace() || matches!(c, '(' | ')' | ',' | '<' | '>' | '=' | '!' | '&' | '|')
}

struct Parser<'a> {
    text: &'a str,
    pos: usize,
    /// `not`s and parentheses open around the current term.
    depth: usize,
}

/// The deepest nesting of `not`s and parentheses a filter may have (the
/// parser and the evaluation recurse once a level).
const MAX_DEPTH: usize = 100;

/// A keyword (unquoted, any case).
fn keyword(word: &str) -> Option<&'static str> {
    ["and", "or", "not", "in", "between"]
        .into_iter()
        .find(|k| word.eq_ignore_ascii_case(k))
}

impl<'a> Parser<'a> {
    /// The token at `pos` (`None` at the end), or an error for an
    /// unterminated quote.
    fn token_at(&self, pos: usize) -> Result<Option<Token>> {
        let s = &self.text[pos..];
        let Some(skip) = s.find(|c: char| !c.is_whitespace()) else {
            return Ok(None);
        };
        let at = pos + skip;
        let rest = &self.text[at..];
        let one = |tok, len: usize| {
            Ok(Some(Token {
                tok,
                at,
                end: at + len,
            }))
        };
        let c = rest.chars().next().expect("not empty");
        match c {
            '(' => return one(Tok::Open, 1),
            ')' => return one(Tok::Close, 1),
            ',' => return one(Tok::Comma, 1),
            '&' => return one(Tok::And, if rest.starts_with("&&") { 2 } else { 1 }),
            '|' => return one(Tok::Or, if rest.starts_with("||") { 2 } else { 1 }),
            _ => {}
        }
        if let Some((sign, op)) = CMP_SIGNS.iter().find(|(s, _)| rest.starts_with(s)) {
            return one(Tok::Cmp(sign, *op), sign.len());
        }
        if c == '!' {
            return one(Tok::Not, 1);
        }
        let mut w = walk(rest);
        let mut end = rest.len();
        for ch in w.by_ref() {
            if ch.out && ends_word(ch.c) {
                end = ch.at;
                break;
            }
        }
        if end == rest.len() {
            if let Some(q) = w.quote {
                return Err(err(
                    self.text,
                    format!("unterminated {q} opened at character {}", self.col(at)),
                ));
            }
        }
        let word = &rest[..end];
        let tok = match keyword(word) {
            Some("and") => Tok::And,
            Some("or") => Tok::Or,
            Some("not") => Tok::Not,
            _ => Tok::Word,
        };
        one(tok, end)
    }

    /// The character number (from 1) of byte offset `at`, for messages.
    fn col(&self, at: usize) -> usize {
        self.text[..at].chars().count() + 1
    }

    fn peek(&self) -> Result<Option<Token>> {
        self.token_at(self.pos)
    }

    fn bump(&mut self, t: &Token) {
        self.pos = t.end;
    }

    /// An error at token `t` (or the end): what was expected there.
    fn expected(&self, t: Option<&Token>, what: &str) -> crate::Error {
        match t {
            Some(t) => err(
                self.text,
                format!(
                    "expected {what} at character {}, found '{}'",
                    self.col(t.at),
                    &self.text[t.at..t.end]
                ),
            ),
            None => err(self.text, format!("expected {what} at the end")),
        }
    }

    fn word_is(&self, t: &Token, kw: &str) -> bool {
        t.tok == Tok::Word && self.text[t.at..t.end].eq_ignore_ascii_case(kw)
    }

    fn or(&mut self) -> Result<Filter> {
        let mut parts = vec![self.and()?];
        while let Some(t) = self.peek()? {
            if t.tok != Tok::Or {
                break;
            }
            self.bump(&t);
            self.operand(&t)?;
            parts.push(self.and()?);
        }
        Ok(if parts.len() == 1 {
            parts.pop().expect("one")
        } else {
            Filter::Or(parts)
        })
    }

    /// Refuses an operator with nothing after it (`AGE(1) and`, `and or`).
    fn operand(&self, op: &Token) -> Result<()> {
        let next = self.peek()?;
        let starts = next
            .as_ref()
            .is_some_and(|t| matches!(t.tok, Tok::Open | Tok::Not | Tok::Word));
        if starts {
            return Ok(());
        }
        let sign = &self.text[op.at..op.end];
        Err(match next {
            None => err(
                self.text,
                format!(
                    "'{sign}' at character {} has no term after it",
                    self.col(op.at)
                ),
            ),
            Some(n) => err(
                self.text,
                format!(
                    "'{sign}' at character {} is followed by '{}', not a term",
                    self.col(op.at),
                    &self.text[n.at..n.end]
                ),
            ),
        })
    }

    fn and(&mut self) -> Result<Filter> {
        let mut parts = vec![self.unary()?];
        while let Some(t) = self.peek()? {
            match t.tok {
                // SDA's lists of terms may end in a comma.
                Tok::Comma if self.token_at(t.end)?.is_none() => {
                    self.bump(&t);
                    break;
                }
                Tok::And | Tok::Comma => {
                    self.bump(&t);
                    self.operand(&t)?;
                }
                // Terms side by side: SDA's `AGE(25-64) SEX(2)`.
                Tok::Open | Tok::Not | Tok::Word => {}
                _ => break,
            }
            parts.push(self.unary()?);
        }
        Ok(if parts.len() == 1 {
            parts.pop().expect("one")
        } else {
            Filter::And(parts)
        })
    }

    fn unary(&mut self) -> Result<Filter> {
        let t = self.peek()?;
        if let Some(t) = t.as_ref().filter(|t| matches!(t.tok, Tok::Not | Tok::Open)) {
            if self.depth >= MAX_DEPTH {
                return Err(err(
                    self.text,
                    format!(
                        "the filter nests 'not's and parentheses more than {MAX_DEPTH} deep (at character {})",
                        self.col(t.at)
                    ),
                ));
            }
            self.depth += 1;
            let f = self.unary_at(Some(t.clone()));
            self.depth -= 1;
            return f;
        }
        self.unary_at(t)
    }

    fn unary_at(&mut self, t: Option<Token>) -> Result<Filter> {
        match t {
            Some(t) if t.tok == Tok::Not => {
                self.bump(&t);
                self.operand(&t)?;
                Ok(Filter::Not(Box::new(self.unary()?)))
            }
            Some(t) if t.tok == Tok::Open => {
                self.bump(&t);
                let inner = self.or()?;
                match self.peek()? {
                    Some(c) if c.tok == Tok::Close => {
                        self.bump(&c);
                        Ok(inner)
                    }
                    None => Err(err(
                        self.text,
                        format!(
                            "the '(' at character {} is never closed (missing ')')",
                            self.col(t.at)
                        ),
                    )),
                    Some(c) => Err(self.expected(Some(&c), "')' or 'and'/'or'")),
                }
            }
            Some(t) if t.tok == Tok::Word => self.term(t),
            Some(t) if t.tok == Tok::Close => Err(err(
                self.text,
                format!(
                    "unbalanced ')' at character {} (no '(' opens it)",
                    self.col(t.at)
                ),
            )),
            Some(t) if keyword(&self.text[t.at..t.end]).is_some() => {
                // A keyword where a variable's name goes: a variable of
                // that name is quoted.
                let w = &self.text[t.at..t.end];
                Err(err(
                    self.text,
                    format!(
                        "expected a term, as in AGE(25-64), AGE >= 25 or SEX = 2 at character {}, found '{w}' (a variable named {w} is quoted: `{w}`)",
                        self.col(t.at)
                    ),
                ))
            }
            t => Err(self.expected(t.as_ref(), "a term, as in AGE(25-64), AGE >= 25 or SEX = 2")),
        }
    }

    /// A value after a comparison, `between` or `and`.
    fn value(&mut self, after: &str) -> Result<(String, usize)> {
        match self.peek()? {
            Some(t) if t.tok == Tok::Word && keyword(&self.text[t.at..t.end]).is_none() => {
                self.bump(&t);
                Ok((unquote(&self.text[t.at..t.end]), t.end))
            }
            t => Err(self.expected(t.as_ref(), &format!("a value after '{after}'"))),
        }
    }

    /// A parenthesized list of values and ranges (`AGE(25-64)`, `in (1, 2)`)
    /// from the `(` token `open`: its condition and where it ends.
    fn list(&mut self, open: &Token, name_at: usize) -> Result<(Cond, usize)> {
        let text = self.text;
        let inner = &text[open.end..];
        let Some(close) = group_end(inner) else {
            return Err(err(
                self.text,
                format!(
                    "the '(' at character {} is never closed (missing ')')",
                    self.col(open.at)
                ),
            ));
        };
        let end = open.end + close + 1;
        self.pos = end;
        let body = &inner[..close];
        let term = &text[name_at..end];
        let items = crate::lex::split(body, false, |c| c == ',');
        let items = items
            .into_iter()
            .map(|raw| super::item(term, raw))
            .collect::<Result<_>>()?;
        Ok((Cond::Set(items), end))
    }

    /// A variable name and its condition.
    fn term(&mut self, name: Token) -> Result<Filter> {
        let raw = &self.text[name.at..name.end];
        let var = match raw.chars().next() {
            Some(q) if crate::lex::is_quote(q) => match quoted(raw) {
                Some((n, "")) => n,
                _ => {
                    return Err(err(
                        raw,
                        format!(
                            "expected a variable name, found {raw} (text after the closing {q})"
                        ),
                    ))
                }
            },
            _ => raw.to_string(),
        };
        if keyword(raw).is_some() {
            return Err(err(
                self.text,
                format!(
                    "'{raw}' at character {} needs a term before it (a variable named {raw} is quoted: `{raw}`)",
                    self.col(name.at)
                ),
            ));
        }
        self.bump(&name);
        let next = self.peek()?;
        let mut negate = false;
        let next = match next {
            Some(t) if t.tok == Tok::Not => {
                // `X not in (…)`, `X not between a and b`.
                let after = self.token_at(t.end)?;
                match after {
                    Some(a) if self.word_is(&a, "in") || self.word_is(&a, "between") => {
                        negate = true;
                        self.bump(&t);
                        Some(a)
                    }
                    _ => Some(t),
                }
            }
            t => t,
        };
        let (cond, end) = match next {
            Some(t) if t.tok == Tok::Open => self.list(&t, name.at)?,
            Some(t) if self.word_is(&t, "in") => {
                self.bump(&t);
                match self.peek()? {
                    Some(o) if o.tok == Tok::Open => self.list(&o, name.at)?,
                    o => {
                        return Err(self.expected(o.as_ref(), "'(' and a list of values after 'in'"))
                    }
                }
            }
            Some(t) if self.word_is(&t, "between") => {
                self.bump(&t);
                let (lo, _) = self.value("between")?;
                match self.peek()? {
                    Some(a) if a.tok == Tok::And => self.bump(&a),
                    a => {
                        return Err(err(
                            self.text,
                            format!(
                                "'between' at character {} needs 'and' and an upper bound ({var} between {lo} and …){}",
                                self.col(t.at),
                                a.map(|a| format!(", found '{}'", &self.text[a.at..a.end]))
                                    .unwrap_or_default()
                            ),
                        ))
                    }
                }
                let (hi, end) = self.value("and")?;
                // Two comparisons, not a range: on a text variable a dash
                // joins a value, but `between` is refused as an order.
                let cond = Cond::All(vec![Cond::Cmp(CmpOp::Ge, lo), Cond::Cmp(CmpOp::Le, hi)]);
                (cond, end)
            }
            Some(t) => match t.tok {
                Tok::Cmp(sign, op) => {
                    self.bump(&t);
                    let (v, end) = self.value(sign)?;
                    (Cond::Cmp(op, v), end)
                }
                _ => return Err(self.after_name(&var, Some(&t))),
            },
            None => return Err(self.after_name(&var, None)),
        };
        let cond = if negate {
            Cond::Not(Box::new(cond))
        } else {
            cond
        };
        Ok(Filter::Term(Term {
            var,
            cond,
            text: self.text[name.at..end].to_string(),
        }))
    }

    fn after_name(&self, var: &str, t: Option<&Token>) -> crate::Error {
        self.expected(
            t,
            &format!(
                "'(' or a comparison (<, <=, >, >=, =, !=), 'in' or 'between' after the variable name {var}"
            ),
        )
    }
}

/// Parses filter text into terms that must all hold (names are resolved
/// later, against a dataset).
pub fn parse_filter(text: &str) -> Result<Vec<Term>> {
    Ok(parse_tree(text)?.map(terms).unwrap_or_default())
}

/// Parses filter text into its boolean tree (`None` for an empty text).
pub fn parse_tree(text: &str) -> Result<Option<Filter>> {
    let mut p = Parser {
        text,
        pos: 0,
        depth: 0,
    };
    if p.peek()?.is_none() {
        return Ok(None);
    }
    let f = p.or()?;
    match p.peek()? {
        None => Ok(Some(f)),
        Some(t) if t.tok == Tok::Close => Err(err(
            text,
            format!(
                "unbalanced ')' at character {} (no '(' opens it)",
                p.col(t.at)
            ),
        )),
        Some(t) => Err(p.expected(Some(&t), "'and', 'or' or the end")),
    }
}

/// The text of a part of the tree, for messages.
fn text_of(f: &Filter) -> String {
    match f {
        Filter::Term(t) => t.text.clone(),
        Filter::Not(a) => format!("not {}", text_of(a)),
        Filter::And(v) => format!(
            "({})",
            v.iter().map(text_of).collect::<Vec<_>>().join(" and ")
        ),
        Filter::Or(v) => format!(
            "({})",
            v.iter().map(text_of).collect::<Vec<_>>().join(" or ")
        ),
    }
}

/// Cuts a tree into terms that must all hold: its top-level `and`s.
fn terms(f: Filter) -> Vec<Term> {
    let parts = match f {
        Filter::And(v) => v,
        f => vec![f],
    };
    let mut out = Vec::new();
    for part in parts {
        if let Filter::And(_) = part {
            out.extend(terms(part));
            continue;
        }
        let vars: Vec<String> = part.vars().into_iter().map(str::to_string).collect();
        match (vars.len(), part) {
            (_, Filter::Term(t)) => out.push(t),
            (1, part) => {
                let text = text_of(&part);
                out.push(Term {
                    var: vars[0].clone(),
                    cond: part.cond(),
                    text,
                })
            }
            (_, part) => out.push(Term {
                var: String::new(),
                text: text_of(&part),
                cond: Cond::Mixed(Box::new(part)),
            }),
        }
    }
    out
}
