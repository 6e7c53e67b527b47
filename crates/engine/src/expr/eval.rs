//! Typed nodes evaluated over a stretch of columns, one vector per
//! operation (missing values as `NA` or NaN), and the lookups of tabulated
//! subexpressions.

use super::types::{Case, Input, Math, Node, Op, Other, TabIn, Table, Ty, Vals};
use super::NA;
use crate::filter::CmpOp;
use microtab_store::{match_column, ColumnData, Kind};

/// Rows evaluated at a time: vectors that stay in the core's caches (and
/// below the allocator's mapping threshold).
pub(crate) const SUB: usize = 2048;

/// Rows `a..b` of a view.
pub(crate) fn slice<'a>(d: &ColumnData<'a>, a: usize, b: usize) -> ColumnData<'a> {
    match_column!(*d, |v| ColumnData::from(&v[a..b]))
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
            match_column!(&cols[t.input], |v| ints => add_slots!(v, t, idx, ok), floats => ok = false);
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
    Vals::I(match_column!(d, |v| ints => load_ints!(v, m), floats => {
        (0..d.len()).map(|i| d.get_i64(i)).collect()
    }))
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

/// `a op b`, for integers and floats alike.
#[inline]
fn cmp<T: PartialOrd>(op: CmpOp, a: T, b: T) -> bool {
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

/// What a node is evaluated over: the program's inputs and their columns
/// over `n` rows.
#[derive(Clone, Copy)]
struct Cx<'a, 'c> {
    inputs: &'a [Input],
    cols: &'a [ColumnData<'c>],
    n: usize,
}

impl Cx<'_, '_> {
    fn ev(&self, x: &Node) -> Vals {
        x.eval(self.inputs, self.cols, self.n)
    }

    /// `f` of each value of `x` (an integer node), missing values left
    /// missing.
    #[inline]
    fn map_i(&self, x: &Node, f: impl Fn(i64) -> i64) -> Vals {
        let mut v = self.ev(x).i();
        for y in v.iter_mut() {
            if *y != NA {
                *y = f(*y);
            }
        }
        Vals::I(v)
    }

    /// `f` of two integer nodes' values, missing where either is (checked
    /// only when either can be missing).
    #[inline]
    fn zip_ints(&self, a: &Node, b: &Node, f: impl Fn(i64, i64) -> i64) -> Vals {
        Vals::I(zip_i(self.ev(a).i(), self.ri(b), a.na || b.na, f))
    }

    /// A right operand of integers: a constant stays one.
    fn ri(&self, x: &Node) -> Rhs<i64> {
        match x.op {
            Op::ConstI(v) => Rhs::C(v),
            _ => Rhs::V(self.ev(x).i()),
        }
    }

    /// A right operand of floats: a constant stays one.
    fn rf(&self, x: &Node) -> Rhs<f64> {
        match x.op {
            Op::ConstF(v) => Rhs::C(v),
            _ => Rhs::V(self.ev(x).f()),
        }
    }
}

impl Node {
    /// Evaluates the node over `n` rows whose input columns are `cols`.
    pub(crate) fn eval(&self, inputs: &[Input], cols: &[ColumnData<'_>], n: usize) -> Vals {
        let cx = Cx { inputs, cols, n };
        match &self.op {
            Op::ConstI(v) => Vals::I(vec![*v; n]),
            Op::ConstF(v) => Vals::F(vec![*v; n]),
            Op::Load(i) => load(&inputs[*i], &cols[*i]),
            Op::Case(c) => Vals::I(c.eval(inputs, cols, n)),
            Op::Table(t) => t.eval(inputs, cols, n),
            Op::Scale(..)
            | Op::ToF(..)
            | Op::NegI(_)
            | Op::NegF(_)
            | Op::AddI(..)
            | Op::SubI(..)
            | Op::MulI(..)
            | Op::AddF(..)
            | Op::SubF(..)
            | Op::MulF(..)
            | Op::DivF(..)
            | Op::DivI(..)
            | Op::PowI(..)
            | Op::PowF(..)
            | Op::ModI(..)
            | Op::ModF(..) => self.arith(cx),
            Op::CmpI(..)
            | Op::CmpF(..)
            | Op::TextEq(..)
            | Op::Truth(_)
            | Op::Not(_)
            | Op::And(..)
            | Op::Or(..)
            | Op::IfI(..)
            | Op::IfF(..)
            | Op::Missing(_)
            | Op::InSet(..) => self.logic(cx),
            _ => self.function(cx),
        }
    }

    /// Arithmetic: scaling, conversion, `+ - * / ^`, `mod`.
    fn arith(&self, cx: Cx<'_, '_>) -> Vals {
        match &self.op {
            Op::Scale(x, f) => {
                let f = *f;
                cx.map_i(x, |y| y * f)
            }
            Op::ToF(x, k) => {
                let k = *k;
                Vals::F(
                    cx.ev(x)
                        .i()
                        .iter()
                        .map(|&y| if y == NA { f64::NAN } else { y as f64 / k })
                        .collect(),
                )
            }
            Op::NegI(x) => cx.map_i(x, |y| -y),
            Op::NegF(x) => {
                let mut v = cx.ev(x).f();
                v.iter_mut().for_each(|y| *y = -*y);
                Vals::F(v)
            }
            Op::AddI(a, b) => cx.zip_ints(a, b, i64::wrapping_add),
            Op::SubI(a, b) => cx.zip_ints(a, b, i64::wrapping_sub),
            Op::MulI(a, b) => cx.zip_ints(a, b, i64::wrapping_mul),
            Op::AddF(a, b) => Vals::F(zip_f(cx.ev(a).f(), cx.rf(b), |x, y| fin(x + y))),
            Op::SubF(a, b) => Vals::F(zip_f(cx.ev(a).f(), cx.rf(b), |x, y| fin(x - y))),
            Op::MulF(a, b) => Vals::F(zip_f(cx.ev(a).f(), cx.rf(b), |x, y| fin(x * y))),
            Op::DivF(a, b) => Vals::F(zip_f(cx.ev(a).f(), cx.rf(b), |x, y| fin(x / y))),
            Op::DivI(a, b) => {
                let (x, y) = (cx.ev(a).i(), cx.ev(b).i());
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
                cx.map_i(x, |y| y.wrapping_pow(k))
            }
            // IEEE's pow(NaN, 0) = pow(1, NaN) = 1 would turn a missing
            // operand into 1: missing in, missing out.
            Op::PowF(a, b) => Vals::F(zip_f(cx.ev(a).f(), cx.rf(b), |x, y| {
                if x.is_nan() || y.is_nan() {
                    f64::NAN
                } else {
                    fin(x.powf(y))
                }
            })),
            Op::ModI(a, b) => Vals::I(zip_i(cx.ev(a).i(), cx.ri(b), true, fmod_i)),
            Op::ModF(a, b) => Vals::F(zip_f(cx.ev(a).f(), cx.rf(b), |x, y| {
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
            _ => unreachable!("not an arithmetic node"),
        }
    }

    /// Comparisons, logic (three-valued), `if`, `missing` and value lists.
    fn logic(&self, cx: Cx<'_, '_>) -> Vals {
        match &self.op {
            Op::CmpI(op, a, b) => {
                let op = *op;
                cx.zip_ints(a, b, |x, y| cmp(op, x, y) as i64)
            }
            Op::CmpF(op, a, b) => {
                let op = *op;
                let (x, y) = (cx.ev(a).f(), cx.ev(b).f());
                Vals::I(
                    x.iter()
                        .zip(&y)
                        .map(|(&p, &q)| {
                            if p.is_nan() || q.is_nan() {
                                NA
                            } else {
                                cmp(op, p, q) as i64
                            }
                        })
                        .collect(),
                )
            }
            Op::TextEq(x, code, ne) => {
                let (code, ne) = (code.unwrap_or(NA), *ne);
                cx.map_i(x, |y| ((y == code) != ne) as i64)
            }
            Op::Truth(x) => Vals::I(
                cx.ev(x)
                    .f()
                    .iter()
                    .map(|&y| if y.is_nan() { NA } else { (y != 0.0) as i64 })
                    .collect(),
            ),
            Op::Not(x) => cx.map_i(x, |y| (y == 0) as i64),
            Op::And(a, b) => Vals::I(zip_i(cx.ev(a).i(), cx.ri(b), false, |x, y| {
                if (x != NA && x == 0) || (y != NA && y == 0) {
                    0
                } else if x == NA || y == NA {
                    NA
                } else {
                    1
                }
            })),
            Op::Or(a, b) => Vals::I(zip_i(cx.ev(a).i(), cx.ri(b), false, |x, y| {
                if (x != NA && x != 0) || (y != NA && y != 0) {
                    1
                } else if x == NA || y == NA {
                    NA
                } else {
                    0
                }
            })),
            Op::IfI(c, a, b) => {
                let (c, mut x) = (cx.ev(c).i(), cx.ev(a).i());
                match cx.ri(b) {
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
                let (c, mut x) = (cx.ev(c).i(), cx.ev(a).f());
                match cx.rf(b) {
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
            Op::Missing(x) => Vals::I(match cx.ev(x) {
                Vals::I(v) => v.iter().map(|&y| (y == NA) as i64).collect(),
                Vals::F(v) => v.iter().map(|&y| y.is_nan() as i64).collect(),
            }),
            Op::InSet(x, p) => Vals::I(match cx.ev(x) {
                Vals::I(v) => v
                    .iter()
                    .map(|&y| if y == NA { NA } else { p.test_int(y) as i64 })
                    .collect(),
                Vals::F(v) => v
                    .iter()
                    .map(|&y| if y.is_nan() { NA } else { p.test(y) as i64 })
                    .collect(),
            }),
            _ => unreachable!("not a logic node"),
        }
    }

    /// The other functions: `abs min max round floor ceil trunc ln log10 exp sqrt`.
    fn function(&self, cx: Cx<'_, '_>) -> Vals {
        match &self.op {
            Op::AbsI(x) => cx.map_i(x, |y| y.abs()),
            Op::AbsF(x) => {
                let mut v = cx.ev(x).f();
                v.iter_mut().for_each(|y| *y = y.abs());
                Vals::F(v)
            }
            Op::MinI(xs) | Op::MaxI(xs) => {
                let is_min = matches!(self.op, Op::MinI(_));
                let mut acc = cx.ev(&xs[0]).i();
                for x in &xs[1..] {
                    acc = zip_i(acc, cx.ri(x), true, |p, q| {
                        if is_min {
                            p.min(q)
                        } else {
                            p.max(q)
                        }
                    });
                }
                Vals::I(acc)
            }
            Op::MinF(xs) | Op::MaxF(xs) => {
                let is_min = matches!(self.op, Op::MinF(_));
                let mut acc = cx.ev(&xs[0]).f();
                for x in &xs[1..] {
                    acc = zip_f(acc, cx.rf(x), |p, q| {
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
            Op::RoundI(x, k, m) => {
                let (k, m) = (*k, *m);
                cx.map_i(x, |y| {
                    let q = (y.unsigned_abs() + (k as u64) / 2) / k as u64;
                    y.signum() * q as i64 * m
                })
            }
            Op::FloorI(x, k, down) => {
                let (k, down) = (*k, *down);
                cx.map_i(x, |y| {
                    if down {
                        y.div_euclid(k)
                    } else {
                        -(-y).div_euclid(k)
                    }
                })
            }
            Op::TruncI(x, k) => {
                let k = *k;
                cx.map_i(x, |y| y / k)
            }
            Op::RoundF(x, nd) => {
                let mut v = cx.ev(x).f();
                // Beyond 2^52 a float has no fraction: rounding to n ≥ 0
                // decimals leaves it (and x·10^n may overflow).
                let big = 4503599627370496.0;
                v.iter_mut().for_each(|y| {
                    if !(*nd >= 0 && y.abs() >= big) {
                        *y = fin(round_decimals(*y, *nd));
                    }
                });
                Vals::F(v)
            }
            Op::MathF(m, x) => {
                let m = *m;
                let mut v = cx.ev(x).f();
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
            _ => unreachable!("not a function node"),
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
    fn floored_mod() {
        // Stata/R: mod(x, y) = x - y * floor(x / y).
        for (a, b) in [(7, 3), (-7, 3), (7, -3), (-7, -3), (6, 3), (-6, 3), (0, -5)] {
            let want = a - b * ((a as f64 / b as f64).floor() as i64);
            assert_eq!(fmod_i(a, b), want, "{a} mod {b}");
        }
        assert_eq!(fmod_i(5, 0), NA);
    }
}

/// `y` rounded to `nd` decimals (−9 ≤ nd ≤ 9), half away from zero, as
/// the exact value of `y` is: `y·10^n` (or `y/10^−n`) rounded to a float
/// can land on a half the exact value is not on (0.6575 is stored as
/// 0.65749999…, and 0.65749999…·1000 rounds to 657.5), so a tie of the
/// rounded quotient is settled by the sign of its rounding error.
pub(crate) fn round_decimals(y: f64, nd: i32) -> f64 {
    let d = 10f64.powi(nd.abs());
    // t ≈ the exact y·10^nd, and err's sign: exact − t.
    let (t, err) = if nd >= 0 {
        let (p, e) = two_product(y, d);
        (p, e)
    } else {
        let t = y / d;
        let (p, e) = two_product(t, d);
        // y − t·d, exactly (y and p are within a rounding of each other).
        (t, (y - p) - e)
    };
    let mut r = t.round();
    if (t - t.trunc()).abs() == 0.5 && err != 0.0 && (err > 0.0) != (t > 0.0) {
        // The exact value is on zero's side of the half.
        r = t.trunc();
    }
    if nd >= 0 {
        r / d
    } else {
        r * d
    }
}

/// `a·b` as a float and the exact error of that product (Dekker's
/// product by Veltkamp's split; no fused multiply-add, which would call
/// the C library).
fn two_product(a: f64, b: f64) -> (f64, f64) {
    let split = |x: f64| {
        let c = 134_217_729.0 * x;
        let hi = c - (c - x);
        (hi, x - hi)
    };
    let p = a * b;
    if !p.is_finite() {
        return (p, 0.0);
    }
    let ((ah, al), (bh, bl)) = (split(a), split(b));
    (p, ((ah * bh - p) + ah * bl + al * bh) + al * bl)
}

#[cfg(test)]
mod round_tests {
    use super::round_decimals;

    /// Against Python's `round`, which rounds the exact value of the float
    /// (ties of the exact value, which it sends to even, left out: here
    /// they go away from zero).
    #[test]
    fn ties_of_the_product_follow_the_exact_value() {
        for (y, nd, want) in [
            (-1.315 / -2.0, 3, 0.657),
            (0.6575, 3, 0.657),
            (-0.6575, 3, -0.657),
            (2.675, 2, 2.67),
            (1.005, 2, 1.0),
            (0.125, 2, 0.13),
            (-0.125, 2, -0.13),
            (2.5, 0, 3.0),
            (-2.5, 0, -3.0),
            (1250.0, -2, 1300.0),
            (-1250.0, -2, -1300.0),
            (1249.9999999999998, -2, 1200.0),
            (0.285, 2, 0.28),
            (1.0e-5, 3, 0.0),
        ] {
            assert_eq!(round_decimals(y, nd), want, "round({y:?}, {nd})");
        }
    }
}
