//! Expression text to a syntax tree: precedence climbing by recursive
//! descent, quotes and groups found by the shared [`crate::lex`].

use crate::filter::{CmpOp, CMP_SIGNS};
use crate::lex::{group_end, is_name_char, is_name_start, quoted};
use crate::{Error, Result};

/// A binary operator.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) enum Bop {
    Add,
    Sub,
    Mul,
    Div,
    Pow,
    And,
    Or,
    Cmp(CmpOp),
}

/// The syntax tree.
#[derive(Debug, Clone)]
pub(super) enum Ast {
    Num(String),
    Str(String),
    Var(String),
    Neg(Box<Ast>),
    Not(Box<Ast>),
    Bin(Bop, Box<Ast>, Box<Ast>),
    /// `NAME(items)`: the name and the items' text.
    InSet(String, String),
    /// `name(…)` where `name` is a function's: the function's arguments
    /// (if they parse), the name as written and the items' text, decided
    /// by the dataset's variables.
    Either(String, std::result::Result<Vec<Ast>, String>, String),
}

struct Parser<'a> {
    s: &'a str,
    i: usize,
    /// Nesting of the recursion, bounded.
    depth: usize,
}

/// Deepest nesting an expression may have (parentheses, unary operators,
/// chains of binary operators).
const MAX_DEPTH: usize = 200;

impl Ast {
    fn depth(&self) -> usize {
        match self {
            Ast::Num(_) | Ast::Str(_) | Ast::Var(_) | Ast::InSet(..) => 1,
            Ast::Neg(x) | Ast::Not(x) => 1 + x.depth(),
            Ast::Bin(_, a, b) => 1 + a.depth().max(b.depth()),
            Ast::Either(_, Ok(a), _) => 1 + a.iter().map(Ast::depth).max().unwrap_or(0),
            Ast::Either(_, Err(_), _) => 1,
        }
    }
}

pub(super) const FUNCTIONS: &[&str] = &[
    "abs", "ln", "log10", "exp", "sqrt", "float", "round", "floor", "ceil", "trunc", "int", "min",
    "max", "mod", "if", "inrange", "missing",
];

impl<'a> Parser<'a> {
    fn err<T>(&self, what: &str) -> Result<T> {
        let near: String = self.s[self.i..].chars().take(20).collect();
        Err(Error::Invalid(format!(
            "bad expression '{}': {what} at character {}{}",
            self.s,
            self.s[..self.i].chars().count() + 1,
            if near.is_empty() {
                " (the end)".to_string()
            } else {
                format!(" ('{near}')")
            }
        )))
    }

    fn ws(&mut self) {
        while let Some(c) = self.rest().chars().next() {
            if c.is_whitespace() {
                self.i += c.len_utf8();
            } else {
                break;
            }
        }
    }

    fn rest(&self) -> &'a str {
        &self.s[self.i..]
    }

    /// Consumes `sym` (after spaces) if it comes next.
    fn sym(&mut self, sym: &str) -> bool {
        self.ws();
        if self.rest().starts_with(sym) {
            self.i += sym.len();
            true
        } else {
            false
        }
    }

    /// Consumes the word `w` (any case, not followed by a name character).
    fn word(&mut self, w: &str) -> bool {
        self.ws();
        let r = self.rest();
        if r.len() >= w.len()
            && r.is_char_boundary(w.len())
            && r[..w.len()].eq_ignore_ascii_case(w)
            && !r[w.len()..].chars().next().is_some_and(is_name_char)
        {
            self.i += w.len();
            true
        } else {
            false
        }
    }

    /// One level deeper into the recursion, refused beyond [`MAX_DEPTH`].
    fn deeper(&mut self) -> Result<()> {
        self.depth += 1;
        if self.depth > MAX_DEPTH {
            return self.err(&format!(
                "the expression is nested more than {MAX_DEPTH} deep"
            ));
        }
        Ok(())
    }

    fn expr(&mut self) -> Result<Ast> {
        self.deeper()?;
        let r = self.expr_inner();
        self.depth -= 1;
        r
    }

    fn expr_inner(&mut self) -> Result<Ast> {
        self.chain(
            Self::and,
            &[("or", Bop::Or), ("||", Bop::Or), ("|", Bop::Or)],
        )
    }

    fn and(&mut self) -> Result<Ast> {
        self.chain(
            Self::not,
            &[("and", Bop::And), ("&&", Bop::And), ("&", Bop::And)],
        )
    }

    fn not(&mut self) -> Result<Ast> {
        self.ws();
        if self.word("not") || (self.rest().starts_with('!') && !self.rest().starts_with("!=")) {
            if self.rest().starts_with('!') {
                self.i += 1;
            }
            self.deeper()?;
            let x = self.not()?;
            self.depth -= 1;
            return Ok(Ast::Not(Box::new(x)));
        }
        self.cmp()
    }

    fn cmp_op(&mut self) -> Option<CmpOp> {
        let words = [
            ("eq", CmpOp::Eq),
            ("ne", CmpOp::Ne),
            ("lt", CmpOp::Lt),
            ("le", CmpOp::Le),
            ("gt", CmpOp::Gt),
            ("ge", CmpOp::Ge),
        ];
        (CMP_SIGNS.iter().find(|(s, _)| self.sym(s)))
            .or_else(|| words.iter().find(|(w, _)| self.word(w)))
            .map(|&(_, op)| op)
    }

    fn cmp(&mut self) -> Result<Ast> {
        let a = self.add()?;
        let Some(op) = self.cmp_op() else {
            return Ok(a);
        };
        let b = self.add()?;
        let save = self.i;
        if self.cmp_op().is_some() {
            self.i = save;
            return self.err("comparisons cannot be chained (write a < b and b < c)");
        }
        Ok(Ast::Bin(Bop::Cmp(op), Box::new(a), Box::new(b)))
    }

    /// Operands read by `next`, joined left to right by the operators of
    /// `ops` (words such as `and`, or symbols; `**` is a power, read by
    /// `unary`, and ends the chain).
    fn chain(&mut self, next: fn(&mut Self) -> Result<Ast>, ops: &[(&str, Bop)]) -> Result<Ast> {
        let mut a = next(self)?;
        loop {
            self.ws();
            if self.rest().starts_with("**") {
                return Ok(a);
            }
            let op = ops.iter().find(|(s, _)| {
                if s.starts_with(|c: char| c.is_ascii_alphabetic()) {
                    self.word(s)
                } else {
                    self.sym(s)
                }
            });
            let Some(&(_, op)) = op else {
                return Ok(a);
            };
            let b = next(self)?;
            a = Ast::Bin(op, Box::new(a), Box::new(b));
        }
    }

    fn add(&mut self) -> Result<Ast> {
        self.chain(Self::mul, &[("+", Bop::Add), ("-", Bop::Sub)])
    }

    fn mul(&mut self) -> Result<Ast> {
        self.chain(Self::unary, &[("*", Bop::Mul), ("/", Bop::Div)])
    }

    fn unary(&mut self) -> Result<Ast> {
        if self.sym("-") {
            self.deeper()?;
            let x = self.unary()?;
            self.depth -= 1;
            return Ok(Ast::Neg(Box::new(x)));
        }
        if self.sym("+") {
            return self.unary();
        }
        self.pow()
    }

    fn pow(&mut self) -> Result<Ast> {
        let a = self.atom()?;
        if self.sym("^") || self.sym("**") {
            let b = self.unary()?;
            return Ok(Ast::Bin(Bop::Pow, Box::new(a), Box::new(b)));
        }
        Ok(a)
    }

    /// The text up to the `)` closing the `(` just consumed (quotes
    /// respected), consuming it.
    fn raw_group(&mut self) -> Result<String> {
        let Some(end) = group_end(self.rest()) else {
            return self.err("expected ')'");
        };
        let text = self.rest()[..end].to_string();
        self.i += end + 1;
        Ok(text)
    }

    fn atom(&mut self) -> Result<Ast> {
        self.ws();
        let r = self.rest();
        let Some(c) = r.chars().next() else {
            return self.err("expected a value");
        };
        if c == '(' {
            self.i += 1;
            let e = self.expr()?;
            if !self.sym(")") {
                return self.err("expected ')'");
            }
            return Ok(e);
        }
        if c.is_ascii_digit() || c == '.' {
            let b = r.as_bytes();
            let mut k = 0;
            while k < b.len() && (b[k].is_ascii_digit() || b[k] == b'.') {
                k += 1;
            }
            if k < b.len() && (b[k] == b'e' || b[k] == b'E') {
                let mut j = k + 1;
                if j < b.len() && (b[j] == b'+' || b[j] == b'-') {
                    j += 1;
                }
                if j < b.len() && b[j].is_ascii_digit() {
                    while j < b.len() && b[j].is_ascii_digit() {
                        j += 1;
                    }
                    k = j;
                }
            }
            let text = &r[..k];
            if text.matches('.').count() > 1 || text == "." {
                return self.err("malformed number");
            }
            self.i += k;
            return Ok(Ast::Num(text.to_string()));
        }
        if c == '"' {
            let Some((text, after)) = quoted(r) else {
                return self.err("unterminated quoted text");
            };
            self.i += r.len() - after.len();
            return Ok(Ast::Str(text));
        }
        let name = if c == '`' {
            let Some((name, after)) = quoted(r) else {
                return self.err("unterminated `quoted name`");
            };
            self.i += r.len() - after.len();
            name
        } else if is_name_start(c) {
            let k = r.find(|c: char| !is_name_char(c)).unwrap_or(r.len());
            self.i += k;
            r[..k].to_string()
        } else {
            return self.err("expected a value");
        };
        let quoted = c == '`';
        self.ws();
        if !self.rest().starts_with('(') {
            return Ok(Ast::Var(name));
        }
        self.i += 1;
        let lower = name.to_ascii_lowercase();
        if !quoted && FUNCTIONS.contains(&lower.as_str()) {
            let open = self.i;
            let items = self.raw_group()?;
            let after = self.i;
            self.i = open;
            let mut args = Ok(Vec::new());
            if !self.sym(")") {
                loop {
                    match self.expr() {
                        Ok(a) => {
                            if let Ok(v) = args.as_mut() {
                                v.push(a)
                            }
                        }
                        Err(e) => {
                            args = Err(e.to_string());
                            break;
                        }
                    }
                    if self.sym(")") {
                        break;
                    }
                    if !self.sym(",") {
                        args = self
                            .err::<Vec<Ast>>("expected ',' or ')'")
                            .map_err(|e| e.to_string());
                        break;
                    }
                }
            }
            if args.is_ok() && self.i != after {
                args = Err(format!("bad arguments to {lower}(…)"));
            }
            self.i = after;
            return Ok(Ast::Either(name, args, items));
        }
        let items = self.raw_group()?;
        Ok(Ast::InSet(name, items))
    }
}

pub(super) fn parse(text: &str) -> Result<Ast> {
    let mut p = Parser {
        s: text,
        i: 0,
        depth: 0,
    };
    let e = p.expr()?;
    p.ws();
    if p.i < text.len() {
        return p.err("unexpected text");
    }
    // A long chain of binary operators nests as deep as it is long.
    if e.depth() > MAX_DEPTH {
        return Err(Error::Invalid(format!(
            "bad expression '{}': it nests more than {MAX_DEPTH} operations deep; split it into several computes",
            text.chars().take(80).collect::<String>()
        )));
    }
    Ok(e)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_precedence() {
        let s = |t: &str| format!("{:?}", parse(t).unwrap());
        assert_eq!(s("1 + 2 * 3"), s("1 + (2 * 3)"));
        assert_eq!(s("-2 ^ 2"), s("-(2 ^ 2)"));
        assert_eq!(s("2 ^ 3 ^ 2"), s("2 ^ (3 ^ 2)"));
        assert_eq!(
            s("a = 1 or b < 2 and not c"),
            s("(a = 1) or ((b < 2) and (not c))")
        );
        assert_eq!(s("A ge 3"), s("A >= 3"));
        assert_eq!(s("2 ** 3"), s("2 ^ 3"));
        assert!(matches!(parse("AGE(18-64)").unwrap(), Ast::InSet(..)));
        assert!(matches!(parse("round(AGE)").unwrap(), Ast::Either(..)));
        assert!(matches!(parse("`round`(1-5)").unwrap(), Ast::InSet(..)));
    }

    #[test]
    fn refuses_malformed() {
        for t in [
            "",
            "1 +",
            "(1",
            "1 < 2 < 3",
            "f(",
            "1 2",
            "\"abc",
            "`x",
            "1..2",
            "AGE(1-2",
        ] {
            assert!(parse(t).is_err(), "{t}");
        }
    }

    #[test]
    fn quoted_names_and_text_with_doubled_quotes() {
        let s = |t: &str| format!("{:?}", parse(t).unwrap());
        assert_eq!(s("`Body Mass (g)` * 2"), s("`Body Mass (g)`*2"));
        match parse("`a, b (c)` + `say ``x```").unwrap() {
            Ast::Bin(Bop::Add, a, b) => {
                assert!(matches!(*a, Ast::Var(ref n) if n == "a, b (c)"));
                assert!(matches!(*b, Ast::Var(ref n) if n == "say `x`"));
            }
            e => panic!("{e:?}"),
        }
        match parse(r#"S == "He said ""no""""#).unwrap() {
            Ast::Bin(_, _, b) => assert!(matches!(*b, Ast::Str(ref v) if v == r#"He said "no""#)),
            e => panic!("{e:?}"),
        }
        // A range test of a quoted name keeps its items' text whole.
        match parse(r#"`Body Mass (g)`(3000-4000, ")")"#).unwrap() {
            Ast::InSet(n, items) => {
                assert_eq!(n, "Body Mass (g)");
                assert_eq!(items, r#"3000-4000, ")""#);
            }
            e => panic!("{e:?}"),
        }
    }
}
