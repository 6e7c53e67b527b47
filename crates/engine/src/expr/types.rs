//! The typed form of an expression: each node's operation, its storage
//! type and the range its values can take (derived from the inputs'
//! stored ranges), and the arithmetic of those ranges.

use super::LIMIT;
use crate::filter::{CmpOp, Predicate};
use microtab_store::{Kind, Variable};

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
    pub(crate) op: Op,
    pub(crate) ty: Ty,
    /// Whether the node can be missing.
    pub(crate) na: bool,
}

#[derive(Debug, Clone, Copy)]
pub(crate) enum Math {
    Ln,
    Log10,
    Exp,
    Sqrt,
    Floor,
    Ceil,
    Trunc,
}

#[derive(Debug, Clone)]
pub(crate) enum Op {
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
    pub(super) ins: Vec<TabIn>,
    pub(super) vals: Vals,
    /// The subexpression itself, for a stretch with a value outside the
    /// inputs' recorded ranges (never expected; never guessed).
    pub(super) fallback: Node,
}

#[derive(Debug, Clone)]
pub(crate) struct TabIn {
    pub(super) input: usize,
    pub(super) lo: i64,
    /// Values `lo..lo + span`, then the null code's slot if any.
    pub(super) span: i64,
    pub(super) null: Option<i64>,
    pub(super) size: usize,
    pub(super) stride: usize,
}

/// Most combinations a tabulated subexpression may have.
pub(super) const MAX_TABLE: usize = 1 << 16;

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

pub(super) fn pow10(k: u32) -> i128 {
    10i128.pow(k)
}

pub(super) fn float_bounds(ty: &Ty) -> (f64, f64) {
    match *ty {
        Ty::Int { dec, lo, hi } => (lo as f64 / pow10(dec) as f64, hi as f64 / pow10(dec) as f64),
        Ty::Float { lo, hi, .. } => (lo, hi),
        Ty::Text => (f64::NEG_INFINITY, f64::INFINITY),
    }
}

/// Interval product.
pub(super) fn mul_bounds(a: (f64, f64), b: (f64, f64)) -> (f64, f64) {
    let p = [a.0 * b.0, a.0 * b.1, a.1 * b.0, a.1 * b.1];
    if p.iter().any(|x| x.is_nan()) {
        return (f64::NEG_INFINITY, f64::INFINITY);
    }
    (
        p.iter().cloned().fold(f64::INFINITY, f64::min),
        p.iter().cloned().fold(f64::NEG_INFINITY, f64::max),
    )
}

pub(super) fn imul_bounds(a: (i128, i128), b: (i128, i128)) -> Option<(i128, i128)> {
    let p = [
        a.0.checked_mul(b.0)?,
        a.0.checked_mul(b.1)?,
        a.1.checked_mul(b.0)?,
        a.1.checked_mul(b.1)?,
    ];
    Some((*p.iter().min()?, *p.iter().max()?))
}

pub(super) fn fits(lo: i128, hi: i128) -> bool {
    lo >= -LIMIT && hi <= LIMIT
}

/// The input columns an expression reads and how their values load.
#[derive(Debug, Clone)]
pub(crate) struct Input {
    pub var: Variable,
    /// Stored missing codes (ints) and null code.
    pub(super) miss_i: Vec<i64>,
    pub(super) miss_f: Vec<f64>,
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

    pub(super) fn can_be_missing(&self) -> bool {
        self.var.nulls > 0 || !self.var.missing_codes.is_empty()
    }
}

pub(super) fn int(op: Op, dec: u32, lo: i128, hi: i128, na: bool) -> Node {
    Node {
        op,
        ty: Ty::Int { dec, lo, hi },
        na,
    }
}

pub(super) fn float(op: Op, lo: f64, hi: f64, grid: Option<u32>, na: bool) -> Node {
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
pub(super) fn widen(lo: f64, hi: f64) -> (f64, f64) {
    let pad = |x: f64| x.abs() * 1e-12 + f64::MIN_POSITIVE;
    (lo - pad(lo), hi + pad(hi))
}

pub(super) fn boolean(op: Op, na: bool) -> Node {
    int(op, 0, 0, 1, na)
}

pub(super) fn b(n: Node) -> Box<Node> {
    Box::new(n)
}

impl Node {
    /// The node's operands.
    pub(super) fn children_mut(&mut self) -> Vec<&mut Node> {
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
    pub(super) fn inputs_of(&mut self, out: &mut Vec<usize>) -> bool {
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

/// A vector of values: exact integers (`NA` missing) or floats (NaN
/// missing).
#[derive(Debug, Clone)]
pub(crate) enum Vals {
    I(Vec<i64>),
    F(Vec<f64>),
}

impl Vals {
    pub(super) fn i(self) -> Vec<i64> {
        match self {
            Vals::I(v) => v,
            Vals::F(_) => unreachable!("typed as integers"),
        }
    }
    pub(super) fn f(self) -> Vec<f64> {
        match self {
            Vals::F(v) => v,
            Vals::I(_) => unreachable!("typed as floats"),
        }
    }
}
