//! Expressions over a dataset's variables, for `microtab compute`:
//! `INCTOT * PERWT`, `if(AGE >= 65, 1, 0)`, `round(INCTOT / 12)`,
//! `ln(INCWAGE) + missing(EDUC)`, `AGE(18-64) and SEX(2)`.
//!
//! **Grammar** (lowest precedence first): `or` (`|`), `and` (`&`), `not`
//! (`!`), comparisons (`= == != <> < <= > >=`, also `eq ne lt le gt ge`;
//! not chained), `+ -`, `* /`, unary `-`, powers (`^` or `**`, right
//! associative). Atoms: numbers (`12`, `2.5`, `1e6`), variables (quoted
//! with backticks when their names have spaces: `` `Body Mass (g)` ``),
//! quoted text (`"Ohio"`, only in `==`/`!=` with a text variable), function
//! calls, and SDA's range tests `NAME(values and ranges)` (`AGE(18-64)`,
//! `RACE(1,3-5)`, `STATE("New York",Ohio)`), true (1) when the value is
//! listed.
//!
//! **Functions**: `abs ln log10 exp sqrt float`, `round(x)`,
//! `round(x, n)` (half away from zero, n from −9 to 9 decimals), `floor
//! ceil trunc` (`int` = `trunc`), `min(a, b, …) max(a, b, …)`, `mod(a, b)`
//! (floored: the sign of b, as Stata and R), `if(cond, a, b)`,
//! `inrange(x, lo, hi)`, `missing(x)`.
//!
//! **Numbers are exact where they can be**: integers and implied-decimal
//! variables are computed as exact integers (decimals aligned, products
//! adding decimals), so `PERWT * INCTOT` has no rounding at all; division,
//! powers with non-integer exponents, `ln exp sqrt` and floating-point
//! variables compute in `f64`. The range each result can take is derived
//! from the inputs' stored ranges before anything is read: an integer
//! result that might not fit 64 bits is refused (wrap it in `float()`),
//! never wrapped; the new column gets the narrowest type that range allows
//! (an integer result, or a rounded float within ±2^53, is stored as an
//! integer).
//!
//! **Missing values propagate**: a variable's missing codes and
//! system-missing values are missing, and so is any arithmetic, comparison
//! or function of a missing value; also division by zero, `ln`/`log10` of
//! a value ≤ 0, `sqrt` of a negative value, `mod(a, 0)`, and results
//! beyond the `f64` range. `and`/`or` follow SQL's three-valued logic
//! (`0 and missing` is 0, `1 or missing` is 1); `if` with a missing
//! condition is missing; `missing(x)` is never missing.

use crate::filter::{parse_filter, resolve, CmpOp, Predicate};
use crate::physical::dict_of;
use crate::{Error, Result};
use microtab_store::{ColumnData, Dataset, Kind, Number, Variable};

/// The missing value of integer vectors.
pub(crate) const NA: i64 = i64::MIN;
/// Most decimals an exact integer result may carry.
const MAX_DEC: u32 = 18;
/// Largest magnitude of an exact integer value (`NA` is below it).
const LIMIT: i128 = i64::MAX as i128;

// ---------------------------------------------------------------- parsing

/// A binary operator.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Bop {
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
enum Ast {
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

const FUNCTIONS: &[&str] = &[
    "abs", "ln", "log10", "exp", "sqrt", "float", "round", "floor", "ceil", "trunc", "int", "min",
    "max", "mod", "if", "inrange", "missing",
];

fn is_name_start(c: char) -> bool {
    c.is_alphabetic() || c == '_'
}

fn is_name_char(c: char) -> bool {
    c.is_alphanumeric() || c == '_' || c == '.' || c == '$' || c == '#' || c == '@'
}

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

    fn expr(&mut self) -> Result<Ast> {
        self.depth += 1;
        if self.depth > MAX_DEPTH {
            return self.err(&format!(
                "the expression is nested more than {MAX_DEPTH} deep"
            ));
        }
        let r = self.expr_inner();
        self.depth -= 1;
        r
    }

    fn expr_inner(&mut self) -> Result<Ast> {
        let mut a = self.and()?;
        while self.word("or") || self.sym("||") || self.sym("|") {
            let b = self.and()?;
            a = Ast::Bin(Bop::Or, Box::new(a), Box::new(b));
        }
        Ok(a)
    }

    fn and(&mut self) -> Result<Ast> {
        let mut a = self.not()?;
        while self.word("and") || self.sym("&&") || self.sym("&") {
            let b = self.not()?;
            a = Ast::Bin(Bop::And, Box::new(a), Box::new(b));
        }
        Ok(a)
    }

    fn not(&mut self) -> Result<Ast> {
        self.ws();
        if self.word("not") || (self.rest().starts_with('!') && !self.rest().starts_with("!=")) {
            if self.rest().starts_with('!') {
                self.i += 1;
            }
            self.depth += 1;
            if self.depth > MAX_DEPTH {
                return self.err(&format!(
                    "the expression is nested more than {MAX_DEPTH} deep"
                ));
            }
            let x = self.not()?;
            self.depth -= 1;
            return Ok(Ast::Not(Box::new(x)));
        }
        self.cmp()
    }

    fn cmp_op(&mut self) -> Option<CmpOp> {
        for (s, op) in [
            ("==", CmpOp::Eq),
            ("!=", CmpOp::Ne),
            ("<>", CmpOp::Ne),
            ("<=", CmpOp::Le),
            (">=", CmpOp::Ge),
            ("=", CmpOp::Eq),
            ("<", CmpOp::Lt),
            (">", CmpOp::Gt),
        ] {
            if self.sym(s) {
                return Some(op);
            }
        }
        for (w, op) in [
            ("eq", CmpOp::Eq),
            ("ne", CmpOp::Ne),
            ("lt", CmpOp::Lt),
            ("le", CmpOp::Le),
            ("gt", CmpOp::Gt),
            ("ge", CmpOp::Ge),
        ] {
            if self.word(w) {
                return Some(op);
            }
        }
        None
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

    fn add(&mut self) -> Result<Ast> {
        let mut a = self.mul()?;
        loop {
            let op = if self.sym("+") {
                Bop::Add
            } else if self.sym("-") {
                Bop::Sub
            } else {
                return Ok(a);
            };
            let b = self.mul()?;
            a = Ast::Bin(op, Box::new(a), Box::new(b));
        }
    }

    fn mul(&mut self) -> Result<Ast> {
        let mut a = self.unary()?;
        loop {
            self.ws();
            let op = if self.rest().starts_with("**") {
                return Ok(a);
            } else if self.sym("*") {
                Bop::Mul
            } else if self.sym("/") {
                Bop::Div
            } else {
                return Ok(a);
            };
            let b = self.unary()?;
            a = Ast::Bin(op, Box::new(a), Box::new(b));
        }
    }

    fn unary(&mut self) -> Result<Ast> {
        if self.sym("-") {
            self.depth += 1;
            if self.depth > MAX_DEPTH {
                return self.err(&format!(
                    "the expression is nested more than {MAX_DEPTH} deep"
                ));
            }
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
        let start = self.i;
        let (mut depth, mut quote) = (0usize, false);
        for (k, c) in self.rest().char_indices() {
            match c {
                '"' => quote = !quote,
                '(' if !quote => depth += 1,
                ')' if !quote => {
                    if depth == 0 {
                        let text = self.s[start..start + k].to_string();
                        self.i = start + k + 1;
                        return Ok(text);
                    }
                    depth -= 1;
                }
                _ => {}
            }
        }
        self.err("expected ')'")
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
            let Some(end) = r[1..].find('"') else {
                return self.err("unterminated quoted text");
            };
            self.i += end + 2;
            return Ok(Ast::Str(r[1..end + 1].to_string()));
        }
        let name = if c == '`' {
            let Some(end) = r[1..].find('`') else {
                return self.err("unterminated `quoted name`");
            };
            self.i += end + 2;
            r[1..end + 1].to_string()
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

fn parse(text: &str) -> Result<Ast> {
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

// ---------------------------------------------------------------- typing

/// A node's static type and the range its values can take.
#[derive(Debug, Clone)]
pub(crate) enum Ty {
    /// Exact integers: the value times `10^dec`, within `lo..=hi`.
    Int { dec: u32, lo: i128, hi: i128 },
    /// Floats within `lo..=hi`; `grid`: every value is a whole number of
    /// `10^-grid` (the output of a rounding).
    Float { lo: f64, hi: f64, grid: Option<u32> },
    /// A text variable's codes.
    Text,
}

/// A typed node.
#[derive(Debug, Clone)]
pub(crate) struct Node {
    op: Op,
    pub(crate) ty: Ty,
    /// Whether the node can be missing.
    pub(crate) na: bool,
}

#[derive(Debug, Clone, Copy)]
enum Math {
    Ln,
    Log10,
    Exp,
    Sqrt,
    Floor,
    Ceil,
    Trunc,
}

#[derive(Debug, Clone)]
enum Op {
    ConstI(i64),
    ConstF(f64),
    /// An input column (by index into the program's inputs).
    Load(usize),
    /// Int times a power of ten.
    Scale(Box<Node>, i64),
    /// Int (value times `10^dec`) to float: divided by the factor.
    ToF(Box<Node>, f64),
    NegI(Box<Node>),
    NegF(Box<Node>),
    AddI(Box<Node>, Box<Node>),
    SubI(Box<Node>, Box<Node>),
    MulI(Box<Node>, Box<Node>),
    AddF(Box<Node>, Box<Node>),
    SubF(Box<Node>, Box<Node>),
    MulF(Box<Node>, Box<Node>),
    /// Division of two Ints of the same decimals.
    DivI(Box<Node>, Box<Node>),
    DivF(Box<Node>, Box<Node>),
    PowI(Box<Node>, u32),
    PowF(Box<Node>, Box<Node>),
    CmpI(CmpOp, Box<Node>, Box<Node>),
    CmpF(CmpOp, Box<Node>, Box<Node>),
    /// A text variable compared with a value (`None`: not in the data).
    TextEq(Box<Node>, Option<i64>, bool),
    /// Float to logical (nonzero).
    Truth(Box<Node>),
    Not(Box<Node>),
    And(Box<Node>, Box<Node>),
    Or(Box<Node>, Box<Node>),
    IfI(Box<Node>, Box<Node>, Box<Node>),
    IfF(Box<Node>, Box<Node>, Box<Node>),
    Missing(Box<Node>),
    AbsI(Box<Node>),
    AbsF(Box<Node>),
    MinI(Vec<Node>),
    MaxI(Vec<Node>),
    MinF(Vec<Node>),
    MaxF(Vec<Node>),
    ModI(Box<Node>, Box<Node>),
    ModF(Box<Node>, Box<Node>),
    /// Round an Int with `k` decimals away (half away from zero), then
    /// multiply by `m`.
    RoundI(Box<Node>, i64, i64),
    /// Floor (`true`) or ceiling of an Int divided by `k`.
    FloorI(Box<Node>, i64, bool),
    TruncI(Box<Node>, i64),
    /// `round(x * 10^n) / 10^n` of a float.
    RoundF(Box<Node>, i32),
    MathF(Math, Box<Node>),
    /// Membership of an input's value (the loaded node) in a predicate.
    InSet(Box<Node>, Predicate),
    /// A recode: see [`crate::derive`].
    Case(Box<Case>),
    /// A subexpression over small-domain inputs, tabulated.
    Table(Box<Table>),
}

/// A subexpression whose inputs are integer or text variables with few
/// distinct stored values between them (at most [`MAX_TABLE`]
/// combinations): evaluated once for every combination when the program
/// is built, then one index computation and one lookup per record.
#[derive(Debug, Clone)]
pub(crate) struct Table {
    ins: Vec<TabIn>,
    vals: Vals,
    /// The subexpression itself, for a stretch with a value outside the
    /// inputs' recorded ranges (never expected; never guessed).
    fallback: Node,
}

#[derive(Debug, Clone)]
struct TabIn {
    input: usize,
    lo: i64,
    /// Values `lo..lo + span`, then the null code's slot if any.
    span: i64,
    null: Option<i64>,
    size: usize,
    stride: usize,
}

/// Most combinations a tabulated subexpression may have.
const MAX_TABLE: usize = 1 << 16;

/// A recode's rules compiled: the output of each record.
#[derive(Debug, Clone)]
pub(crate) struct Case {
    /// The inputs (loaded nodes).
    pub inputs: Vec<Node>,
    /// Rules in order: (input index, predicate) terms that must all hold,
    /// and the output code.
    pub arms: Vec<(Vec<(usize, Predicate)>, i64)>,
    /// Output of records no rule matches: a code, an input's value scaled
    /// by a factor, or missing.
    pub other: Other,
    /// Output of records with a missing input.
    pub missing: i64,
}

/// What a recode gives records no rule matches.
#[derive(Debug, Clone)]
pub(crate) enum Other {
    Missing,
    Code(i64),
    /// The value of input `i` times the factor.
    Input(usize, i64),
}

fn pow10(k: u32) -> i128 {
    10i128.pow(k)
}

fn float_bounds(ty: &Ty) -> (f64, f64) {
    match *ty {
        Ty::Int { dec, lo, hi } => (lo as f64 / pow10(dec) as f64, hi as f64 / pow10(dec) as f64),
        Ty::Float { lo, hi, .. } => (lo, hi),
        Ty::Text => (f64::NEG_INFINITY, f64::INFINITY),
    }
}

/// Interval product.
fn mul_bounds(a: (f64, f64), b: (f64, f64)) -> (f64, f64) {
    let p = [a.0 * b.0, a.0 * b.1, a.1 * b.0, a.1 * b.1];
    if p.iter().any(|x| x.is_nan()) {
        return (f64::NEG_INFINITY, f64::INFINITY);
    }
    (
        p.iter().cloned().fold(f64::INFINITY, f64::min),
        p.iter().cloned().fold(f64::NEG_INFINITY, f64::max),
    )
}

fn imul_bounds(a: (i128, i128), b: (i128, i128)) -> Option<(i128, i128)> {
    let p = [
        a.0.checked_mul(b.0)?,
        a.0.checked_mul(b.1)?,
        a.1.checked_mul(b.0)?,
        a.1.checked_mul(b.1)?,
    ];
    Some((*p.iter().min()?, *p.iter().max()?))
}

fn fits(lo: i128, hi: i128) -> bool {
    lo >= -LIMIT && hi <= LIMIT
}

/// The input columns an expression reads and how their values load.
#[derive(Debug, Clone)]
pub(crate) struct Input {
    pub var: Variable,
    /// Stored missing codes (ints) and null code.
    miss_i: Vec<i64>,
    miss_f: Vec<f64>,
}

impl Input {
    pub(crate) fn new(var: &Variable) -> Self {
        let mut miss_i: Vec<i64> = var
            .missing_codes
            .iter()
            .filter(|c| c.fract() == 0.0)
            .map(|&c| c as i64)
            .collect();
        if var.kind != Kind::Float {
            if let Some(n) = var.null_code {
                if var.nulls > 0 {
                    miss_i.push(n);
                }
            }
        }
        Input {
            var: var.clone(),
            miss_i,
            miss_f: var.missing_codes.clone(),
        }
    }

    fn can_be_missing(&self) -> bool {
        self.var.nulls > 0 || !self.var.missing_codes.is_empty()
    }
}

/// A typed expression ready to run over a dataset.
#[derive(Debug, Clone)]
pub struct Program {
    pub(crate) root: Node,
    pub(crate) inputs: Vec<Input>,
    pub(crate) text: String,
}

struct Typer<'d> {
    ds: &'d Dataset,
    inputs: Vec<Input>,
    text: &'d str,
}

fn int(op: Op, dec: u32, lo: i128, hi: i128, na: bool) -> Node {
    Node {
        op,
        ty: Ty::Int { dec, lo, hi },
        na,
    }
}

fn float(op: Op, lo: f64, hi: f64, grid: Option<u32>, na: bool) -> Node {
    // Any float operation can end in NaN (overflow to infinity, 0 × ∞,
    // a bound derived a rounding short): every float node but a constant
    // may be missing, so that the integer operations over it (a
    // comparison, `not`, `+ 1` of a truth value) check for missing values.
    let na = na || !matches!(op, Op::ConstF(_));
    Node {
        op,
        ty: Ty::Float { lo, hi, grid },
        na,
    }
}

/// Bounds moved outward by a few units in the last place: a bound derived
/// through an operation that rounds (`x · (1/y)` for `x / y`, `ln`,
/// `exp`) may fall short of a value computed from the data by as much.
fn widen(lo: f64, hi: f64) -> (f64, f64) {
    let pad = |x: f64| x.abs() * 1e-12 + f64::MIN_POSITIVE;
    (lo - pad(lo), hi + pad(hi))
}

fn boolean(op: Op, na: bool) -> Node {
    int(op, 0, 0, 1, na)
}

fn b(n: Node) -> Box<Node> {
    Box::new(n)
}

impl Typer<'_> {
    fn bad<T>(&self, what: String) -> Result<T> {
        Err(Error::Invalid(format!(
            "bad expression '{}': {what}",
            self.text
        )))
    }

    fn input(&mut self, name: &str) -> Result<usize> {
        let var = self.ds.variable(name)?;
        if let Some(i) = self.inputs.iter().position(|x| x.var.name == var.name) {
            return Ok(i);
        }
        self.inputs.push(Input::new(var));
        Ok(self.inputs.len() - 1)
    }

    /// The loaded node of input `i`.
    pub(crate) fn load(&self, i: usize) -> Node {
        let inp = &self.inputs[i];
        let v = &inp.var;
        let na = inp.can_be_missing();
        match v.kind {
            Kind::String => Node {
                op: Op::Load(i),
                ty: Ty::Text,
                na,
            },
            Kind::Float => {
                let lo = v.min.map_or(0.0, Number::as_f64);
                let hi = v.max.map_or(0.0, Number::as_f64);
                float(Op::Load(i), lo, hi, None, na || v.min.is_none())
            }
            Kind::Int => {
                let lo = v.min.map_or(0, Number::as_i64) as i128;
                let hi = v.max.map_or(0, Number::as_i64) as i128;
                int(Op::Load(i), v.decimals, lo, hi, na || v.min.is_none())
            }
        }
    }

    fn text_err<T>(&self, n: &Node) -> Result<T> {
        let name = match &n.op {
            Op::Load(i) => self.inputs[*i].var.name.clone(),
            _ => "a text variable".into(),
        };
        self.bad(format!(
            "{name} is a text variable: it can only be compared with == or != to a quoted value ({name} == \"x\") or tested with {name}(values); it has no arithmetic"
        ))
    }

    /// `n` as a float node.
    fn to_f(&self, n: Node) -> Result<Node> {
        match n.ty {
            Ty::Float { .. } => Ok(n),
            Ty::Text => self.text_err(&n),
            Ty::Int { dec, lo, hi } => {
                let k = pow10(dec) as f64;
                let na = n.na;
                Ok(float(
                    Op::ToF(b(n), k),
                    lo as f64 / k,
                    hi as f64 / k,
                    (dec <= 15).then_some(dec),
                    na,
                ))
            }
        }
    }

    /// `n` (an Int) with `to` decimals (≥ its own).
    fn rescale(&self, n: Node, to: u32) -> Result<Node> {
        let Ty::Int { dec, lo, hi } = n.ty else {
            unreachable!("rescale of a non-integer")
        };
        if dec == to {
            return Ok(n);
        }
        if to > MAX_DEC {
            return self.bad(format!(
                "exact results are limited to {MAX_DEC} decimals; wrap part of it in float()"
            ));
        }
        let f = pow10(to - dec);
        let (lo, hi) = (lo * f, hi * f);
        if !fits(lo, hi) {
            return self.overflow();
        }
        let na = n.na;
        Ok(int(Op::Scale(b(n), f as i64), to, lo, hi, na))
    }

    fn overflow<T>(&self) -> Result<T> {
        self.bad(
            "its values could exceed the range of 64-bit integers (judged from the variables' stored ranges); compute in floating point by wrapping a part in float(), e.g. float(A) * B".into(),
        )
    }

    /// Both Ints at the larger of their decimals, or both floats.
    fn unify(&self, a: Node, b: Node) -> Result<(Node, Node)> {
        match (&a.ty, &b.ty) {
            (Ty::Text, _) => self.text_err(&a),
            (_, Ty::Text) => self.text_err(&b),
            (Ty::Int { dec: da, .. }, Ty::Int { dec: db, .. }) => {
                let d = (*da).max(*db);
                Ok((self.rescale(a, d)?, self.rescale(b, d)?))
            }
            _ => Ok((self.to_f(a)?, self.to_f(b)?)),
        }
    }

    /// `n` as a logical (Int 0/1 or any Int: nonzero is true).
    fn logical(&self, n: Node) -> Result<Node> {
        match n.ty {
            Ty::Int { .. } => Ok(n),
            Ty::Float { .. } => {
                let na = n.na;
                Ok(boolean(Op::Truth(b(n)), na))
            }
            Ty::Text => self.text_err(&n),
        }
    }

    fn literal_int(&self, n: &Node) -> Option<i64> {
        match (&n.op, &n.ty) {
            (Op::ConstI(v), Ty::Int { dec: 0, .. }) => Some(*v),
            (Op::NegI(x), _) => self.literal_int(x).map(|v| -v),
            _ => None,
        }
    }

    fn node(&mut self, a: &Ast) -> Result<Node> {
        match a {
            Ast::Num(t) => {
                if let Some((m, d)) = microtab_store::codec::parse_exact(t) {
                    if d <= MAX_DEC && m.abs() <= LIMIT {
                        return Ok(int(Op::ConstI(m as i64), d, m, m, false));
                    }
                }
                match t.parse::<f64>() {
                    Ok(f) if f.is_finite() => Ok(float(Op::ConstF(f), f, f, None, false)),
                    _ => self.bad(format!("'{t}' is not a finite number")),
                }
            }
            Ast::Str(s) => self.bad(format!(
                "\"{s}\" is text: quoted values go only in == or != with a text variable"
            )),
            Ast::Var(name) => {
                let i = self.input(name)?;
                Ok(self.load(i))
            }
            Ast::Neg(x) => {
                let x = self.node(x)?;
                let na = x.na;
                match x.ty {
                    Ty::Int { dec, lo, hi } => Ok(int(Op::NegI(b(x)), dec, -hi, -lo, na)),
                    Ty::Float { lo, hi, grid } => Ok(float(Op::NegF(b(x)), -hi, -lo, grid, na)),
                    Ty::Text => self.text_err(&x),
                }
            }
            Ast::Not(x) => {
                let x = self.node(x)?;
                let x = self.logical(x)?;
                let na = x.na;
                Ok(boolean(Op::Not(b(x)), na))
            }
            Ast::InSet(name, items) => {
                if self.ds.variable(name).is_err() {
                    return self.bad(format!(
                        "{name}(…) is neither a function ({}) nor a variable of {}",
                        FUNCTIONS.join(" "),
                        self.ds.dir().display()
                    ));
                }
                let i = self.input(name)?;
                let var = self.inputs[i].var.clone();
                let dict = dict_of(self.ds, &var)?;
                let mut terms = parse_filter(&format!("`{}`({items})", var.name))?;
                if terms.len() != 1 {
                    return self.bad(format!("'{name}({items})' is not one list of values"));
                }
                let term = terms.remove(0);
                crate::filter::check_text_values(&term, &var, &[&dict])?;
                let pred = resolve(&term, &var, &dict)?;
                let x = self.load(i);
                let na = x.na;
                Ok(boolean(Op::InSet(b(x), pred), na))
            }
            Ast::Bin(op, x, y) => self.binary(*op, x, y),
            Ast::Either(name, args, items) => {
                // A function, unless a variable has that name and it is not
                // written as the function's lower-case name.
                let lower = name.to_ascii_lowercase();
                let var = self.ds.variable(name).ok().map(|v| v.name.clone());
                let function = match &var {
                    None => true,
                    Some(v) if *name == lower && *v == lower => {
                        return self.bad(format!(
                            "{name}(…) could be the function {lower}() or a range test of the variable {v}: write `{v}`({items}) for the variable"
                        ))
                    }
                    Some(_) => *name == lower,
                };
                if function {
                    match args {
                        Ok(a) => self.call(&lower, a),
                        Err(e) => Err(Error::Invalid(e.clone())),
                    }
                } else {
                    self.node(&Ast::InSet(name.clone(), items.clone()))
                }
            }
        }
    }

    fn binary(&mut self, op: Bop, x: &Ast, y: &Ast) -> Result<Node> {
        // Text comparisons first: the quoted side is not a node.
        if let Bop::Cmp(c) = op {
            let text_side = match (x, y) {
                (Ast::Str(s), other) | (other, Ast::Str(s)) => Some((s, other)),
                _ => None,
            };
            if let Some((s, other)) = text_side {
                let n = self.node(other)?;
                let Op::Load(i) = n.op else {
                    return self.bad(format!(
                        "\"{s}\" is text: it can only be compared with a text variable"
                    ));
                };
                let var = self.inputs[i].var.clone();
                if var.kind != Kind::String {
                    return self.bad(format!(
                        "{} holds numbers: compare it with a number, not the text \"{s}\"",
                        var.name
                    ));
                }
                let ne = match c {
                    CmpOp::Eq => false,
                    CmpOp::Ne => true,
                    _ => {
                        return self.bad(format!(
                            "{} is a text variable: only == and != compare it (< and > would compare text, not numbers)",
                            var.name
                        ))
                    }
                };
                let dict = self.ds.dictionary(&var)?;
                let code = dict.binary_search_by(|e| e.as_str().cmp(s)).ok();
                if code.is_none() {
                    return Err(Error::NoSuchValue {
                        variable: var.name.clone(),
                        value: s.clone(),
                        close: crate::filter::close_values(s, &[&dict]),
                    });
                }
                let na = n.na;
                return Ok(boolean(Op::TextEq(b(n), code.map(|c| c as i64), ne), na));
            }
        }
        let l = self.node(x)?;
        let r = self.node(y)?;
        let na = l.na || r.na;
        match op {
            Bop::And | Bop::Or => {
                let (l, r) = (self.logical(l)?, self.logical(r)?);
                Ok(boolean(
                    if op == Bop::And {
                        Op::And(b(l), b(r))
                    } else {
                        Op::Or(b(l), b(r))
                    },
                    na,
                ))
            }
            Bop::Cmp(c) => {
                let (l, r) = self.unify(l, r)?;
                Ok(boolean(
                    if matches!(l.ty, Ty::Int { .. }) {
                        Op::CmpI(c, b(l), b(r))
                    } else {
                        Op::CmpF(c, b(l), b(r))
                    },
                    na,
                ))
            }
            Bop::Add | Bop::Sub => {
                let (l, r) = self.unify(l, r)?;
                match (&l.ty, &r.ty) {
                    (Ty::Int { dec, lo: a, hi: bb }, Ty::Int { lo: c, hi: d, .. }) => {
                        let (lo, hi) = if op == Bop::Add {
                            (a + c, bb + d)
                        } else {
                            (a - d, bb - c)
                        };
                        if !fits(lo, hi) {
                            return self.overflow();
                        }
                        let dec = *dec;
                        let o = if op == Bop::Add {
                            Op::AddI(b(l), b(r))
                        } else {
                            Op::SubI(b(l), b(r))
                        };
                        Ok(int(o, dec, lo, hi, na))
                    }
                    (
                        Ty::Float {
                            lo: a,
                            hi: bb,
                            grid: g1,
                        },
                        Ty::Float {
                            lo: c,
                            hi: d,
                            grid: g2,
                        },
                    ) => {
                        let (lo, hi) = if op == Bop::Add {
                            (a + c, bb + d)
                        } else {
                            (a - d, bb - c)
                        };
                        let grid = g1.zip(*g2).map(|(x, y)| x.max(y));
                        let o = if op == Bop::Add {
                            Op::AddF(b(l), b(r))
                        } else {
                            Op::SubF(b(l), b(r))
                        };
                        Ok(float(
                            o,
                            lo,
                            hi,
                            grid,
                            na || !(lo.is_finite() && hi.is_finite()),
                        ))
                    }
                    _ => unreachable!(),
                }
            }
            Bop::Mul => match (&l.ty, &r.ty) {
                (Ty::Text, _) => self.text_err(&l),
                (_, Ty::Text) => self.text_err(&r),
                (
                    Ty::Int {
                        dec: d1,
                        lo: a,
                        hi: bb,
                    },
                    Ty::Int {
                        dec: d2,
                        lo: c,
                        hi: d,
                    },
                ) => {
                    let dec = d1 + d2;
                    if dec > MAX_DEC {
                        return self.bad(format!(
                            "exact results are limited to {MAX_DEC} decimals; wrap part of it in float()"
                        ));
                    }
                    let Some((lo, hi)) =
                        imul_bounds((*a, *bb), (*c, *d)).filter(|(lo, hi)| fits(*lo, *hi))
                    else {
                        return self.overflow();
                    };
                    Ok(int(Op::MulI(b(l), b(r)), dec, lo, hi, na))
                }
                _ => {
                    let (l, r) = (self.to_f(l)?, self.to_f(r)?);
                    let (lo, hi) = mul_bounds(float_bounds(&l.ty), float_bounds(&r.ty));
                    let grid = match (&l.ty, &r.ty) {
                        (Ty::Float { grid: Some(x), .. }, Ty::Float { grid: Some(y), .. }) => {
                            Some(x + y)
                        }
                        _ => None,
                    };
                    Ok(float(Op::MulF(b(l), b(r)), lo, hi, grid, na))
                }
            },
            Bop::Div => {
                let (l, r) = self.unify(l, r)?;
                let (al, ah) = float_bounds(&l.ty);
                let (bl, bh) = float_bounds(&r.ty);
                let (lo, hi) = if bl > 0.0 || bh < 0.0 {
                    mul_bounds((al, ah), (1.0 / bh, 1.0 / bl))
                } else if let Ty::Int { dec, .. } = r.ty {
                    // A nonzero value with `dec` decimals is at least 10^-dec.
                    let m = al.abs().max(ah.abs()) * pow10(dec) as f64;
                    (-m, m)
                } else {
                    (f64::NEG_INFINITY, f64::INFINITY)
                };
                let (lo, hi) = widen(lo, hi);
                let o = if matches!(l.ty, Ty::Int { .. }) {
                    Op::DivI(b(l), b(r))
                } else {
                    Op::DivF(b(l), b(r))
                };
                Ok(float(o, lo, hi, None, true))
            }
            Bop::Pow => {
                if let (Ty::Int { dec, lo, hi }, Some(k)) = (&l.ty, self.literal_int(&r)) {
                    if (0..=16).contains(&k) {
                        let k = k as u32;
                        let dec2 = dec * k;
                        let mut bounds = Some((1i128, 1i128));
                        for _ in 0..k {
                            bounds = bounds.and_then(|bd| imul_bounds(bd, (*lo, *hi)));
                        }
                        // An even power is never negative.
                        let bounds = bounds.map(|(a, c)| {
                            if k.is_multiple_of(2) {
                                (a.max(0), c)
                            } else {
                                (a, c)
                            }
                        });
                        if dec2 <= MAX_DEC {
                            if let Some((a, c)) = bounds.filter(|(a, c)| fits(*a, *c)) {
                                return Ok(int(Op::PowI(b(l), k), dec2, a, c, na));
                            }
                        }
                        return self.overflow();
                    }
                }
                let (l, r) = (self.to_f(l)?, self.to_f(r)?);
                Ok(float(
                    Op::PowF(b(l), b(r)),
                    f64::NEG_INFINITY,
                    f64::INFINITY,
                    None,
                    true,
                ))
            }
        }
    }

    fn call(&mut self, f: &str, args: &[Ast]) -> Result<Node> {
        let arity = |n: usize| -> Result<()> {
            if args.len() != n {
                return Err(Error::Invalid(format!(
                    "bad expression '{}': {f}() takes {n} argument{}, not {}",
                    self.text,
                    if n == 1 { "" } else { "s" },
                    args.len()
                )));
            }
            Ok(())
        };
        match f {
            "missing" => {
                arity(1)?;
                let x = self.node(&args[0])?;
                Ok(boolean(Op::Missing(b(x)), false))
            }
            "float" => {
                arity(1)?;
                let x = self.node(&args[0])?;
                let x = self.to_f(x)?;
                Ok(x)
            }
            "abs" => {
                arity(1)?;
                let x = self.node(&args[0])?;
                let na = x.na;
                match x.ty {
                    Ty::Int { dec, lo, hi } => {
                        let m = lo.abs().max(hi.abs());
                        let l = if lo <= 0 && hi >= 0 {
                            0
                        } else {
                            lo.abs().min(hi.abs())
                        };
                        Ok(int(Op::AbsI(b(x)), dec, l, m, na))
                    }
                    Ty::Float { lo, hi, grid } => {
                        let m = lo.abs().max(hi.abs());
                        let l = if lo <= 0.0 && hi >= 0.0 {
                            0.0
                        } else {
                            lo.abs().min(hi.abs())
                        };
                        Ok(float(Op::AbsF(b(x)), l, m, grid, na))
                    }
                    Ty::Text => self.text_err(&x),
                }
            }
            "ln" | "log10" | "exp" | "sqrt" => {
                arity(1)?;
                let x = self.node(&args[0])?;
                let x = self.to_f(x)?;
                let (lo, hi) = float_bounds(&x.ty);
                // The smallest positive value: the lower bound, or one unit
                // of the grid the values lie on.
                let tiny = match x.ty {
                    _ if lo > 0.0 => lo,
                    Ty::Float { grid: Some(g), .. } => 10f64.powi(-(g as i32)),
                    _ => 0.0,
                };
                let (m, lo2, hi2) = match f {
                    "ln" => (Math::Ln, tiny.ln(), hi.ln()),
                    "log10" => (Math::Log10, tiny.log10(), hi.log10()),
                    "exp" => (Math::Exp, lo.exp(), hi.exp()),
                    _ => (Math::Sqrt, lo.max(0.0).sqrt(), hi.max(0.0).sqrt()),
                };
                // No valid value at all (e.g. ln of values all ≤ 0).
                let (lo2, hi2) = if lo2.is_nan() || hi2.is_nan() || lo2 > hi2 {
                    (0.0, 0.0)
                } else {
                    widen(lo2, hi2)
                };
                Ok(float(Op::MathF(m, b(x)), lo2, hi2, None, true))
            }
            "floor" | "ceil" | "trunc" | "int" => {
                arity(1)?;
                let x = self.node(&args[0])?;
                let na = x.na;
                match x.ty {
                    Ty::Int { dec, lo, hi } => {
                        if dec == 0 {
                            return Ok(x);
                        }
                        let k = pow10(dec);
                        let (lo2, hi2) = (lo.div_euclid(k), -(-hi).div_euclid(k));
                        let o = match f {
                            "floor" => Op::FloorI(b(x), k as i64, true),
                            "ceil" => Op::FloorI(b(x), k as i64, false),
                            _ => Op::TruncI(b(x), k as i64),
                        };
                        Ok(int(o, 0, lo2, hi2, na))
                    }
                    Ty::Float { lo, hi, .. } => {
                        let m = match f {
                            "floor" => Math::Floor,
                            "ceil" => Math::Ceil,
                            _ => Math::Trunc,
                        };
                        Ok(float(
                            Op::MathF(m, b(x)),
                            lo.floor(),
                            hi.ceil(),
                            Some(0),
                            na,
                        ))
                    }
                    Ty::Text => self.text_err(&x),
                }
            }
            "round" => {
                if args.is_empty() || args.len() > 2 {
                    return self.bad(format!(
                        "round() takes 1 or 2 arguments, not {}",
                        args.len()
                    ));
                }
                let x = self.node(&args[0])?;
                let n = match args.get(1) {
                    None => 0,
                    Some(a) => {
                        let nn = self.node(a)?;
                        match self.literal_int(&nn) {
                            Some(v) if (-9..=9).contains(&v) => v,
                            _ => {
                                return self.bad(
                                    "round(x, n) takes n as a whole number from -9 to 9".into(),
                                )
                            }
                        }
                    }
                };
                let na = x.na;
                match x.ty {
                    Ty::Int { dec, lo, hi } => {
                        if n >= dec as i64 {
                            return Ok(x);
                        }
                        let k = pow10((dec as i64 - n) as u32);
                        let mult = if n < 0 { pow10((-n) as u32) } else { 1 };
                        let r = |v: i128| {
                            let q = (v.abs() + k / 2) / k;
                            v.signum() * q * mult
                        };
                        let (lo2, hi2) = (r(lo), r(hi));
                        if !fits(lo2, hi2) {
                            return self.overflow();
                        }
                        Ok(int(
                            Op::RoundI(b(x), k as i64, mult as i64),
                            n.max(0) as u32,
                            lo2,
                            hi2,
                            na,
                        ))
                    }
                    Ty::Float { lo, hi, .. } => {
                        let s = 10f64.powi(n as i32);
                        let (lo2, hi2) = ((lo * s).round() / s, (hi * s).round() / s);
                        Ok(float(
                            Op::RoundF(b(x), n as i32),
                            lo2,
                            hi2,
                            Some(n.max(0) as u32),
                            na,
                        ))
                    }
                    Ty::Text => self.text_err(&x),
                }
            }
            "min" | "max" => {
                if args.len() < 2 {
                    return self.bad(format!("{f}() takes two or more arguments"));
                }
                let mut xs: Vec<Node> = args.iter().map(|a| self.node(a)).collect::<Result<_>>()?;
                let na = xs.iter().any(|x| x.na);
                if let Some(t) = xs.iter().find(|x| matches!(x.ty, Ty::Text)) {
                    return self.text_err(t);
                }
                if xs.iter().all(|x| matches!(x.ty, Ty::Int { .. })) {
                    let d = xs
                        .iter()
                        .map(|x| match x.ty {
                            Ty::Int { dec, .. } => dec,
                            _ => 0,
                        })
                        .max()
                        .unwrap_or(0);
                    xs = xs
                        .into_iter()
                        .map(|x| self.rescale(x, d))
                        .collect::<Result<_>>()?;
                    let bs: Vec<(i128, i128)> = xs
                        .iter()
                        .map(|x| match x.ty {
                            Ty::Int { lo, hi, .. } => (lo, hi),
                            _ => (0, 0),
                        })
                        .collect();
                    let (lo, hi) = if f == "min" {
                        (
                            bs.iter().map(|b| b.0).min().unwrap_or(0),
                            bs.iter().map(|b| b.1).min().unwrap_or(0),
                        )
                    } else {
                        (
                            bs.iter().map(|b| b.0).max().unwrap_or(0),
                            bs.iter().map(|b| b.1).max().unwrap_or(0),
                        )
                    };
                    let o = if f == "min" {
                        Op::MinI(xs)
                    } else {
                        Op::MaxI(xs)
                    };
                    return Ok(int(o, d, lo, hi, na));
                }
                xs = xs
                    .into_iter()
                    .map(|x| self.to_f(x))
                    .collect::<Result<_>>()?;
                let bs: Vec<(f64, f64)> = xs.iter().map(|x| float_bounds(&x.ty)).collect();
                let grid = xs
                    .iter()
                    .map(|x| match x.ty {
                        Ty::Float { grid, .. } => grid,
                        _ => None,
                    })
                    .try_fold(0u32, |acc, g| g.map(|g| acc.max(g)));
                let (lo, hi) = if f == "min" {
                    (
                        bs.iter().map(|b| b.0).fold(f64::INFINITY, f64::min),
                        bs.iter().map(|b| b.1).fold(f64::INFINITY, f64::min),
                    )
                } else {
                    (
                        bs.iter().map(|b| b.0).fold(f64::NEG_INFINITY, f64::max),
                        bs.iter().map(|b| b.1).fold(f64::NEG_INFINITY, f64::max),
                    )
                };
                let o = if f == "min" {
                    Op::MinF(xs)
                } else {
                    Op::MaxF(xs)
                };
                Ok(float(o, lo, hi, grid, na))
            }
            "mod" => {
                arity(2)?;
                let x = self.node(&args[0])?;
                let y = self.node(&args[1])?;
                let (x, y) = self.unify(x, y)?;
                match (&x.ty, &y.ty) {
                    (Ty::Int { dec, .. }, Ty::Int { lo, hi, .. }) => {
                        let m = lo.abs().max(hi.abs());
                        let (l2, h2) = (
                            if *lo < 0 { -(m - 1).max(0) } else { 0 },
                            if *hi > 0 { (m - 1).max(0) } else { 0 },
                        );
                        let dec = *dec;
                        Ok(int(Op::ModI(b(x), b(y)), dec, l2, h2, true))
                    }
                    _ => {
                        let (bl, bh) = float_bounds(&y.ty);
                        let m = bl.abs().max(bh.abs());
                        Ok(float(Op::ModF(b(x), b(y)), -m, m, None, true))
                    }
                }
            }
            "if" => {
                arity(3)?;
                let c = self.node(&args[0])?;
                let c = self.logical(c)?;
                let x = self.node(&args[1])?;
                let y = self.node(&args[2])?;
                let na = c.na || x.na || y.na;
                let (x, y) = self.unify(x, y)?;
                match (&x.ty, &y.ty) {
                    (Ty::Int { dec, lo: a, hi: bb }, Ty::Int { lo: cc, hi: d, .. }) => {
                        let (dec, lo, hi) = (*dec, *a.min(cc), *bb.max(d));
                        Ok(int(Op::IfI(b(c), b(x), b(y)), dec, lo, hi, na))
                    }
                    (
                        Ty::Float {
                            lo: a,
                            hi: bb,
                            grid: g1,
                        },
                        Ty::Float {
                            lo: cc,
                            hi: d,
                            grid: g2,
                        },
                    ) => {
                        let grid = g1.zip(*g2).map(|(p, q)| p.max(q));
                        let (lo, hi) = (a.min(*cc), bb.max(*d));
                        Ok(float(Op::IfF(b(c), b(x), b(y)), lo, hi, grid, na))
                    }
                    _ => unreachable!(),
                }
            }
            "inrange" => {
                arity(3)?;
                let ge = Ast::Bin(
                    Bop::Cmp(CmpOp::Ge),
                    Box::new(args[0].clone()),
                    Box::new(args[1].clone()),
                );
                let le = Ast::Bin(
                    Bop::Cmp(CmpOp::Le),
                    Box::new(args[0].clone()),
                    Box::new(args[2].clone()),
                );
                self.binary(Bop::And, &ge, &le)
            }
            _ => self.bad(format!("unknown function {f}()")),
        }
    }
}

impl Program {
    /// Parses and types `text` against `ds`'s variables.
    pub fn parse(ds: &Dataset, text: &str) -> Result<Program> {
        let ast = parse(text)?;
        let mut t = Typer {
            ds,
            inputs: Vec::new(),
            text,
        };
        let root = t.node(&ast)?;
        if matches!(root.ty, Ty::Text) {
            return t.bad(
                "the result is a text variable; compute numbers (copying text variables is not supported)"
                    .into(),
            );
        }
        Ok(Program {
            root,
            inputs: t.inputs,
            text: text.to_string(),
        })
    }

    /// The expression as given.
    pub fn text(&self) -> &str {
        &self.text
    }

    /// The variables it reads.
    pub fn inputs(&self) -> Vec<&Variable> {
        self.inputs.iter().map(|i| &i.var).collect()
    }
}

/// A filter (terms that must all hold) as a program whose value is 1 for
/// the records that pass (0 or missing for the others: a record whose
/// variable is missing fails the term, as in every query); `None` for no
/// terms.
pub(crate) fn filter_program(ds: &Dataset, terms: &[crate::Term]) -> Result<Option<Program>> {
    let mut t = Typer {
        ds,
        inputs: Vec::new(),
        text: "",
    };
    let mut root: Option<Node> = None;
    for term in terms {
        let i = t.input(&term.var)?;
        let var = t.inputs[i].var.clone();
        let dict = dict_of(ds, &var)?;
        crate::filter::check_text_values(term, &var, &[&dict])?;
        let p = resolve(term, &var, &dict)?;
        let x = t.load(i);
        let na = x.na;
        let n = boolean(Op::InSet(b(x), p), na);
        root = Some(match root {
            None => n,
            Some(a) => {
                let na = a.na || n.na;
                boolean(Op::And(b(a), b(n)), na)
            }
        });
    }
    Ok(root.map(|root| Program {
        root,
        inputs: t.inputs,
        text: terms
            .iter()
            .map(|t| t.text.as_str())
            .collect::<Vec<_>>()
            .join(" "),
    }))
}

impl Node {
    /// The node's operands.
    fn children_mut(&mut self) -> Vec<&mut Node> {
        match &mut self.op {
            Op::ConstI(_) | Op::ConstF(_) | Op::Load(_) | Op::Table(_) => Vec::new(),
            Op::Scale(x, _)
            | Op::ToF(x, _)
            | Op::NegI(x)
            | Op::NegF(x)
            | Op::PowI(x, _)
            | Op::TextEq(x, ..)
            | Op::Truth(x)
            | Op::Not(x)
            | Op::Missing(x)
            | Op::AbsI(x)
            | Op::AbsF(x)
            | Op::RoundI(x, ..)
            | Op::FloorI(x, ..)
            | Op::TruncI(x, _)
            | Op::RoundF(x, _)
            | Op::MathF(_, x)
            | Op::InSet(x, _) => vec![&mut **x],
            Op::AddI(a, b)
            | Op::SubI(a, b)
            | Op::MulI(a, b)
            | Op::AddF(a, b)
            | Op::SubF(a, b)
            | Op::MulF(a, b)
            | Op::DivI(a, b)
            | Op::DivF(a, b)
            | Op::PowF(a, b)
            | Op::CmpI(_, a, b)
            | Op::CmpF(_, a, b)
            | Op::And(a, b)
            | Op::Or(a, b)
            | Op::ModI(a, b)
            | Op::ModF(a, b) => vec![&mut **a, &mut **b],
            Op::IfI(c, a, b) | Op::IfF(c, a, b) => vec![&mut **c, &mut **a, &mut **b],
            Op::MinI(xs) | Op::MaxI(xs) | Op::MinF(xs) | Op::MaxF(xs) => xs.iter_mut().collect(),
            Op::Case(c) => c.inputs.iter_mut().collect(),
        }
    }

    /// The program inputs the node reads (`None` if it holds a table).
    fn inputs_of(&mut self, out: &mut Vec<usize>) -> bool {
        match self.op {
            Op::Load(i) => {
                out.push(i);
                true
            }
            Op::Table(_) => false,
            _ => self.children_mut().into_iter().all(|c| c.inputs_of(out)),
        }
    }
}

/// Replaces the largest subexpressions over small-domain inputs (integer
/// or text variables whose stored ranges, and null code, combine into at
/// most [`MAX_TABLE`] cases) by lookup tables. `AGE >= 18 and SEX = 2`,
/// a recode of AGE × SEX × EDUC, `if(AGE >= 65, …)`'s condition: each a
/// gather per record instead of a pass per operator.
pub(crate) fn tabulate(node: &mut Node, inputs: &[Input]) {
    if matches!(
        node.op,
        Op::ConstI(_) | Op::ConstF(_) | Op::Load(_) | Op::Table(_)
    ) {
        return;
    }
    let mut ins = Vec::new();
    if node.inputs_of(&mut ins) && !ins.is_empty() {
        ins.sort_unstable();
        ins.dedup();
        if let Some(t) = table_for(node, inputs, &ins) {
            let ty = node.ty.clone();
            let na = node.na;
            *node = Node {
                op: Op::Table(Box::new(t)),
                ty,
                na,
            };
            return;
        }
    }
    for c in node.children_mut() {
        tabulate(c, inputs);
    }
}

fn table_for(node: &Node, inputs: &[Input], ins: &[usize]) -> Option<Table> {
    let mut tab = Vec::new();
    let mut stride = 1usize;
    for &i in ins {
        let v = &inputs[i].var;
        if v.kind == Kind::Float {
            return None;
        }
        let (lo, hi) = (v.min?.as_i64(), v.max?.as_i64());
        let span = hi.checked_sub(lo)?.checked_add(1)?;
        let null = v.null_code.filter(|_| v.nulls > 0);
        let size = usize::try_from(span)
            .ok()?
            .checked_add(null.is_some() as usize)?;
        tab.push(TabIn {
            input: i,
            lo,
            span,
            null,
            size,
            stride,
        });
        stride = stride.checked_mul(size).filter(|&s| s <= MAX_TABLE)?;
    }
    let n = stride;
    // Every combination of stored values, one synthetic record each.
    let mut synth: Vec<Vec<i64>> = vec![Vec::new(); inputs.len()];
    for t in &tab {
        synth[t.input] = (0..n)
            .map(|c| {
                let slot = ((c / t.stride) % t.size) as i64;
                if slot == t.span {
                    t.null.unwrap_or(NA)
                } else {
                    t.lo + slot
                }
            })
            .collect();
    }
    let cols: Vec<ColumnData<'_>> = synth.iter().map(|v| ColumnData::I64(v)).collect();
    let vals = node.eval(inputs, &cols, n);
    Some(Table {
        ins: tab,
        vals,
        fallback: node.clone(),
    })
}

macro_rules! add_slots {
    ($v:expr, $t:expr, $idx:expr, $ok:expr) => {{
        let t: &TabIn = $t;
        let (lo, span, null, size, stride) =
            (t.lo, t.span, t.null.unwrap_or(NA), t.size as u64, t.stride);
        for (ix, &x) in $idx.iter_mut().zip($v.iter()) {
            let x = x as i64;
            let s = if x == null { span } else { x.wrapping_sub(lo) };
            $ok &= (s as u64) < size;
            *ix = ix.wrapping_add((s as usize).wrapping_mul(stride));
        }
    }};
}

impl Table {
    fn eval(&self, inputs: &[Input], cols: &[ColumnData<'_>], n: usize) -> Vals {
        let mut idx = vec![0usize; n];
        let mut ok = true;
        for t in &self.ins {
            match &cols[t.input] {
                ColumnData::U8(v) => add_slots!(v, t, idx, ok),
                ColumnData::I8(v) => add_slots!(v, t, idx, ok),
                ColumnData::U16(v) => add_slots!(v, t, idx, ok),
                ColumnData::I16(v) => add_slots!(v, t, idx, ok),
                ColumnData::U32(v) => add_slots!(v, t, idx, ok),
                ColumnData::I32(v) => add_slots!(v, t, idx, ok),
                ColumnData::I64(v) => add_slots!(v, t, idx, ok),
                _ => ok = false,
            }
        }
        if !ok {
            return self.fallback.eval(inputs, cols, n);
        }
        match &self.vals {
            Vals::I(tab) => Vals::I(idx.iter().map(|&i| tab[i]).collect()),
            Vals::F(tab) => Vals::F(idx.iter().map(|&i| tab[i]).collect()),
        }
    }
}

/// A helper for recodes: the loaded node of each input variable.
pub(crate) fn load_nodes(ds: &Dataset, vars: &[Variable]) -> (Vec<Input>, Vec<Node>) {
    let mut t = Typer {
        ds,
        inputs: vars.iter().map(Input::new).collect(),
        text: "",
    };
    let nodes = (0..vars.len()).map(|i| t.load(i)).collect();
    let inputs = std::mem::take(&mut t.inputs);
    (inputs, nodes)
}

/// A recode node over `case`, of type `ty`.
pub(crate) fn case_node(case: Case, ty: Ty, na: bool) -> Node {
    Node {
        op: Op::Case(Box::new(case)),
        ty,
        na,
    }
}

// ---------------------------------------------------------------- evaluation

/// A vector of values: exact integers (`NA` missing) or floats (NaN
/// missing).
#[derive(Debug, Clone)]
pub(crate) enum Vals {
    I(Vec<i64>),
    F(Vec<f64>),
}

impl Vals {
    fn i(self) -> Vec<i64> {
        match self {
            Vals::I(v) => v,
            Vals::F(_) => unreachable!("typed as integers"),
        }
    }
    fn f(self) -> Vec<f64> {
        match self {
            Vals::F(v) => v,
            Vals::I(_) => unreachable!("typed as floats"),
        }
    }
}

#[inline]
fn fin(x: f64) -> f64 {
    if x.is_finite() {
        x
    } else {
        f64::NAN
    }
}

macro_rules! load_ints {
    ($v:expr, $miss:expr) => {{
        let miss: &[i64] = $miss;
        match miss.len() {
            0 => $v.iter().map(|&x| x as i64).collect(),
            1 => {
                let m = miss[0];
                $v.iter()
                    .map(|&x| if x as i64 == m { NA } else { x as i64 })
                    .collect()
            }
            _ => $v
                .iter()
                .map(|&x| {
                    if miss.contains(&(x as i64)) {
                        NA
                    } else {
                        x as i64
                    }
                })
                .collect(),
        }
    }};
}

fn load(inp: &Input, d: &ColumnData<'_>) -> Vals {
    if inp.var.kind == Kind::Float {
        let miss = &inp.miss_f;
        let conv = |x: f64| {
            if miss.contains(&x) {
                f64::NAN
            } else {
                x
            }
        };
        return Vals::F(match d {
            ColumnData::F32(v) => v.iter().map(|&x| conv(x as f64)).collect(),
            ColumnData::F64(v) => v.iter().map(|&x| conv(x)).collect(),
            _ => (0..d.len()).map(|i| conv(d.get_f64(i))).collect(),
        });
    }
    let m = &inp.miss_i[..];
    Vals::I(match d {
        ColumnData::U8(v) => load_ints!(v, m),
        ColumnData::I8(v) => load_ints!(v, m),
        ColumnData::U16(v) => load_ints!(v, m),
        ColumnData::I16(v) => load_ints!(v, m),
        ColumnData::U32(v) => load_ints!(v, m),
        ColumnData::I32(v) => load_ints!(v, m),
        ColumnData::I64(v) => load_ints!(v, m),
        _ => (0..d.len()).map(|i| d.get_i64(i)).collect(),
    })
}

/// A right operand: values, or one constant for every row.
enum Rhs<T> {
    V(Vec<T>),
    C(T),
}

/// Applies `f` to pairs, `NA` where either is missing (when `check`), in
/// place of `a`.
#[inline]
fn zip_i(mut a: Vec<i64>, b: Rhs<i64>, check: bool, f: impl Fn(i64, i64) -> i64) -> Vec<i64> {
    match b {
        Rhs::V(b) if check => {
            for (x, &y) in a.iter_mut().zip(&b) {
                let r = f(*x, y);
                *x = if *x == NA || y == NA { NA } else { r };
            }
        }
        Rhs::V(b) => {
            for (x, &y) in a.iter_mut().zip(&b) {
                *x = f(*x, y);
            }
        }
        Rhs::C(y) if check => {
            for x in a.iter_mut() {
                let r = f(*x, y);
                *x = if *x == NA || y == NA { NA } else { r };
            }
        }
        Rhs::C(y) => {
            for x in a.iter_mut() {
                *x = f(*x, y);
            }
        }
    }
    a
}

#[inline]
fn zip_f(mut a: Vec<f64>, b: Rhs<f64>, f: impl Fn(f64, f64) -> f64) -> Vec<f64> {
    match b {
        Rhs::V(b) => {
            for (x, &y) in a.iter_mut().zip(&b) {
                *x = f(*x, y);
            }
        }
        Rhs::C(y) => {
            for x in a.iter_mut() {
                *x = f(*x, y);
            }
        }
    }
    a
}

fn cmp_i(op: CmpOp, a: i64, b: i64) -> bool {
    match op {
        CmpOp::Lt => a < b,
        CmpOp::Le => a <= b,
        CmpOp::Gt => a > b,
        CmpOp::Ge => a >= b,
        CmpOp::Eq => a == b,
        CmpOp::Ne => a != b,
    }
}

fn cmp_f(op: CmpOp, a: f64, b: f64) -> bool {
    match op {
        CmpOp::Lt => a < b,
        CmpOp::Le => a <= b,
        CmpOp::Gt => a > b,
        CmpOp::Ge => a >= b,
        CmpOp::Eq => a == b,
        CmpOp::Ne => a != b,
    }
}

/// Floored modulo (the sign of `b`).
fn fmod_i(a: i64, b: i64) -> i64 {
    if a == NA || b == NA || b == 0 {
        return NA;
    }
    let r = a.rem_euclid(b.wrapping_abs());
    if b < 0 && r != 0 {
        r + b
    } else {
        r
    }
}

impl Node {
    /// Evaluates the node over `n` rows whose input columns are `cols`.
    pub(crate) fn eval(&self, inputs: &[Input], cols: &[ColumnData<'_>], n: usize) -> Vals {
        let ev = |x: &Node| x.eval(inputs, cols, n);
        let ri = |x: &Node| match x.op {
            Op::ConstI(v) => Rhs::C(v),
            _ => Rhs::V(ev(x).i()),
        };
        let rf = |x: &Node| match x.op {
            Op::ConstF(v) => Rhs::C(v),
            _ => Rhs::V(ev(x).f()),
        };
        match &self.op {
            Op::ConstI(v) => Vals::I(vec![*v; n]),
            Op::ConstF(v) => Vals::F(vec![*v; n]),
            Op::Load(i) => load(&inputs[*i], &cols[*i]),
            Op::Scale(x, f) => {
                let f = *f;
                let mut v = ev(x).i();
                for y in v.iter_mut() {
                    if *y != NA {
                        *y *= f;
                    }
                }
                Vals::I(v)
            }
            Op::ToF(x, k) => {
                let k = *k;
                Vals::F(
                    ev(x)
                        .i()
                        .iter()
                        .map(|&y| if y == NA { f64::NAN } else { y as f64 / k })
                        .collect(),
                )
            }
            Op::NegI(x) => {
                let mut v = ev(x).i();
                for y in v.iter_mut() {
                    if *y != NA {
                        *y = -*y;
                    }
                }
                Vals::I(v)
            }
            Op::NegF(x) => {
                let mut v = ev(x).f();
                v.iter_mut().for_each(|y| *y = -*y);
                Vals::F(v)
            }
            Op::AddI(a, b) => {
                let c = a.na || b.na;
                Vals::I(zip_i(ev(a).i(), ri(b), c, i64::wrapping_add))
            }
            Op::SubI(a, b) => {
                let c = a.na || b.na;
                Vals::I(zip_i(ev(a).i(), ri(b), c, i64::wrapping_sub))
            }
            Op::MulI(a, b) => {
                let c = a.na || b.na;
                Vals::I(zip_i(ev(a).i(), ri(b), c, i64::wrapping_mul))
            }
            Op::AddF(a, b) => Vals::F(zip_f(ev(a).f(), rf(b), |x, y| fin(x + y))),
            Op::SubF(a, b) => Vals::F(zip_f(ev(a).f(), rf(b), |x, y| fin(x - y))),
            Op::MulF(a, b) => Vals::F(zip_f(ev(a).f(), rf(b), |x, y| fin(x * y))),
            Op::DivF(a, b) => Vals::F(zip_f(ev(a).f(), rf(b), |x, y| fin(x / y))),
            Op::DivI(a, b) => {
                let (x, y) = (ev(a).i(), ev(b).i());
                Vals::F(
                    x.iter()
                        .zip(&y)
                        .map(|(&p, &q)| {
                            if p == NA || q == NA || q == 0 {
                                f64::NAN
                            } else {
                                fin(p as f64 / q as f64)
                            }
                        })
                        .collect(),
                )
            }
            Op::PowI(x, k) => {
                let k = *k;
                let mut v = ev(x).i();
                for y in v.iter_mut() {
                    if *y != NA {
                        *y = y.wrapping_pow(k);
                    }
                }
                Vals::I(v)
            }
            // IEEE's pow(NaN, 0) = pow(1, NaN) = 1 would turn a missing
            // operand into 1: missing in, missing out.
            Op::PowF(a, b) => Vals::F(zip_f(ev(a).f(), rf(b), |x, y| {
                if x.is_nan() || y.is_nan() {
                    f64::NAN
                } else {
                    fin(x.powf(y))
                }
            })),
            Op::CmpI(op, a, b) => {
                let op = *op;
                let c = a.na || b.na;
                Vals::I(zip_i(ev(a).i(), ri(b), c, |x, y| cmp_i(op, x, y) as i64))
            }
            Op::CmpF(op, a, b) => {
                let op = *op;
                let (x, y) = (ev(a).f(), ev(b).f());
                Vals::I(
                    x.iter()
                        .zip(&y)
                        .map(|(&p, &q)| {
                            if p.is_nan() || q.is_nan() {
                                NA
                            } else {
                                cmp_f(op, p, q) as i64
                            }
                        })
                        .collect(),
                )
            }
            Op::TextEq(x, code, ne) => {
                let (code, ne) = (code.unwrap_or(NA), *ne);
                let mut v = ev(x).i();
                for y in v.iter_mut() {
                    if *y != NA {
                        *y = ((*y == code) != ne) as i64;
                    }
                }
                Vals::I(v)
            }
            Op::Truth(x) => Vals::I(
                ev(x)
                    .f()
                    .iter()
                    .map(|&y| if y.is_nan() { NA } else { (y != 0.0) as i64 })
                    .collect(),
            ),
            Op::Not(x) => {
                let mut v = ev(x).i();
                for y in v.iter_mut() {
                    if *y != NA {
                        *y = (*y == 0) as i64;
                    }
                }
                Vals::I(v)
            }
            Op::And(a, b) => Vals::I(zip_i(ev(a).i(), ri(b), false, |x, y| {
                if (x != NA && x == 0) || (y != NA && y == 0) {
                    0
                } else if x == NA || y == NA {
                    NA
                } else {
                    1
                }
            })),
            Op::Or(a, b) => Vals::I(zip_i(ev(a).i(), ri(b), false, |x, y| {
                if (x != NA && x != 0) || (y != NA && y != 0) {
                    1
                } else if x == NA || y == NA {
                    NA
                } else {
                    0
                }
            })),
            Op::IfI(c, a, b) => {
                let (c, mut x) = (ev(c).i(), ev(a).i());
                match ri(b) {
                    Rhs::V(y) => {
                        for ((r, &t), &e) in x.iter_mut().zip(&c).zip(&y) {
                            *r = if t == NA {
                                NA
                            } else if t != 0 {
                                *r
                            } else {
                                e
                            };
                        }
                    }
                    Rhs::C(e) => {
                        for (r, &t) in x.iter_mut().zip(&c) {
                            *r = if t == NA {
                                NA
                            } else if t != 0 {
                                *r
                            } else {
                                e
                            };
                        }
                    }
                }
                Vals::I(x)
            }
            Op::IfF(c, a, b) => {
                let (c, mut x) = (ev(c).i(), ev(a).f());
                match rf(b) {
                    Rhs::V(y) => {
                        for ((r, &t), &e) in x.iter_mut().zip(&c).zip(&y) {
                            *r = if t == NA {
                                f64::NAN
                            } else if t != 0 {
                                *r
                            } else {
                                e
                            };
                        }
                    }
                    Rhs::C(e) => {
                        for (r, &t) in x.iter_mut().zip(&c) {
                            *r = if t == NA {
                                f64::NAN
                            } else if t != 0 {
                                *r
                            } else {
                                e
                            };
                        }
                    }
                }
                Vals::F(x)
            }
            Op::Missing(x) => Vals::I(match ev(x) {
                Vals::I(v) => v.iter().map(|&y| (y == NA) as i64).collect(),
                Vals::F(v) => v.iter().map(|&y| y.is_nan() as i64).collect(),
            }),
            Op::AbsI(x) => {
                let mut v = ev(x).i();
                for y in v.iter_mut() {
                    if *y != NA {
                        *y = y.abs();
                    }
                }
                Vals::I(v)
            }
            Op::AbsF(x) => {
                let mut v = ev(x).f();
                v.iter_mut().for_each(|y| *y = y.abs());
                Vals::F(v)
            }
            Op::MinI(xs) | Op::MaxI(xs) => {
                let is_min = matches!(self.op, Op::MinI(_));
                let mut acc = ev(&xs[0]).i();
                for x in &xs[1..] {
                    acc = zip_i(
                        acc,
                        ri(x),
                        true,
                        |p, q| {
                            if is_min {
                                p.min(q)
                            } else {
                                p.max(q)
                            }
                        },
                    );
                }
                Vals::I(acc)
            }
            Op::MinF(xs) | Op::MaxF(xs) => {
                let is_min = matches!(self.op, Op::MinF(_));
                let mut acc = ev(&xs[0]).f();
                for x in &xs[1..] {
                    acc = zip_f(acc, rf(x), |p, q| {
                        if p.is_nan() || q.is_nan() {
                            f64::NAN
                        } else if is_min {
                            p.min(q)
                        } else {
                            p.max(q)
                        }
                    });
                }
                Vals::F(acc)
            }
            Op::ModI(a, b) => Vals::I(zip_i(ev(a).i(), ri(b), true, fmod_i)),
            Op::ModF(a, b) => Vals::F(zip_f(ev(a).f(), rf(b), |x, y| {
                if y == 0.0 {
                    f64::NAN
                } else {
                    // fmod is exact; then the sign of y.
                    let r = x % y;
                    if r != 0.0 && (r < 0.0) != (y < 0.0) {
                        r + y
                    } else {
                        r
                    }
                }
            })),
            Op::RoundI(x, k, m) => {
                let (k, m) = (*k, *m);
                let mut v = ev(x).i();
                for y in v.iter_mut() {
                    if *y != NA {
                        let q = (y.unsigned_abs() + (k as u64) / 2) / k as u64;
                        *y = y.signum() * q as i64 * m;
                    }
                }
                Vals::I(v)
            }
            Op::FloorI(x, k, down) => {
                let (k, down) = (*k, *down);
                let mut v = ev(x).i();
                for y in v.iter_mut() {
                    if *y != NA {
                        *y = if down {
                            y.div_euclid(k)
                        } else {
                            -(-*y).div_euclid(k)
                        };
                    }
                }
                Vals::I(v)
            }
            Op::TruncI(x, k) => {
                let k = *k;
                let mut v = ev(x).i();
                for y in v.iter_mut() {
                    if *y != NA {
                        *y /= k;
                    }
                }
                Vals::I(v)
            }
            Op::RoundF(x, nd) => {
                let s = 10f64.powi(*nd);
                let mut v = ev(x).f();
                // Beyond 2^52 a float has no fraction: rounding to n ≥ 0
                // decimals leaves it (and x·10^n may overflow).
                let big = 4503599627370496.0;
                v.iter_mut().for_each(|y| {
                    if !(*nd >= 0 && y.abs() >= big) {
                        *y = fin((*y * s).round() / s);
                    }
                });
                Vals::F(v)
            }
            Op::MathF(m, x) => {
                let m = *m;
                let mut v = ev(x).f();
                v.iter_mut().for_each(|y| {
                    *y = match m {
                        Math::Ln => {
                            if *y > 0.0 {
                                y.ln()
                            } else {
                                f64::NAN
                            }
                        }
                        Math::Log10 => {
                            if *y > 0.0 {
                                y.log10()
                            } else {
                                f64::NAN
                            }
                        }
                        Math::Exp => fin(y.exp()),
                        Math::Sqrt => {
                            if *y >= 0.0 {
                                y.sqrt()
                            } else {
                                f64::NAN
                            }
                        }
                        Math::Floor => y.floor(),
                        Math::Ceil => y.ceil(),
                        Math::Trunc => y.trunc(),
                    }
                });
                Vals::F(v)
            }
            Op::InSet(x, p) => Vals::I(match ev(x) {
                Vals::I(v) => v
                    .iter()
                    .map(|&y| if y == NA { NA } else { p.test_int(y) as i64 })
                    .collect(),
                Vals::F(v) => v
                    .iter()
                    .map(|&y| if y.is_nan() { NA } else { p.test(y) as i64 })
                    .collect(),
            }),
            Op::Case(c) => Vals::I(c.eval(inputs, cols, n)),
            Op::Table(t) => t.eval(inputs, cols, n),
        }
    }
}

impl Case {
    /// The output for one record given its inputs' loaded values (`None`:
    /// missing).
    fn one(&self, vals: &[Option<f64>], ints: &[i64]) -> i64 {
        if vals.iter().any(Option::is_none) {
            return self.missing;
        }
        for (terms, code) in &self.arms {
            if terms.iter().all(|(i, p)| match self.inputs[*i].ty {
                Ty::Float { .. } => p.test(vals[*i].unwrap_or(f64::NAN)),
                _ => p.test_int(ints[*i]),
            }) {
                return *code;
            }
        }
        match self.other {
            Other::Missing => NA,
            Other::Code(c) => c,
            Other::Input(i, f) => ints[i] * f,
        }
    }

    fn eval(&self, inputs: &[Input], cols: &[ColumnData<'_>], n: usize) -> Vec<i64> {
        let loaded: Vec<Vals> = self
            .inputs
            .iter()
            .map(|x| x.eval(inputs, cols, n))
            .collect();
        let mut vals = vec![None; loaded.len()];
        let mut ints = vec![0i64; loaded.len()];
        (0..n)
            .map(|r| {
                for (k, l) in loaded.iter().enumerate() {
                    match l {
                        Vals::I(v) => {
                            ints[k] = v[r];
                            vals[k] = (v[r] != NA).then_some(v[r] as f64);
                        }
                        Vals::F(v) => vals[k] = (!v[r].is_nan()).then_some(v[r]),
                    }
                }
                self.one(&vals, &ints)
            })
            .collect()
    }
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
    fn floored_mod() {
        // Stata/R: mod(x, y) = x - y * floor(x / y).
        for (a, b) in [(7, 3), (-7, 3), (7, -3), (-7, -3), (6, 3), (-6, 3), (0, -5)] {
            let want = a - b * ((a as f64 / b as f64).floor() as i64);
            assert_eq!(fmod_i(a, b), want, "{a} mod {b}");
        }
        assert_eq!(fmod_i(5, 0), NA);
    }
}
