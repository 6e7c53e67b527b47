//! Syntax tree to typed nodes: each operation's storage type (exact
//! integers with decimals, or floats) and the range of its values, derived
//! from the inputs' stored ranges before anything is read.

use super::parser::{Ast, Bop, FUNCTIONS};
use super::types::{
    b, boolean, fits, float, float_bounds, imul_bounds, int, mul_bounds, pow10, widen, Input, Math,
    Node, Op, Ty,
};
use super::{LIMIT, MAX_DEC};
use crate::filter::{parse_filter, resolve, CmpOp};
use crate::lex::quote_name;
use crate::physical::dict_of;
use crate::{Error, Result};
use microtab_store::{Dataset, Kind, Number};

/// The state of typing one expression.
pub(super) struct Typer<'d> {
    pub(super) ds: &'d Dataset,
    pub(super) inputs: Vec<Input>,
    pub(super) text: &'d str,
}

impl Typer<'_> {
    pub(super) fn bad<T>(&self, what: String) -> Result<T> {
        Err(Error::Invalid(format!(
            "bad expression '{}': {what}",
            self.text
        )))
    }

    pub(super) fn input(&mut self, name: &str) -> Result<usize> {
        let var = self.ds.variable(name)?;
        if let Some(i) = self.inputs.iter().position(|x| x.var.name == var.name) {
            return Ok(i);
        }
        self.inputs.push(Input::new(var));
        Ok(self.inputs.len() - 1)
    }

    /// The loaded node of input `i`.
    pub(super) fn load(&self, i: usize) -> Node {
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

    pub(super) fn text_err<T>(&self, n: &Node) -> Result<T> {
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
            return self.too_many_decimals();
        }
        let f = pow10(to - dec);
        let (lo, hi) = (lo * f, hi * f);
        if !fits(lo, hi) {
            return self.overflow();
        }
        let na = n.na;
        Ok(int(Op::Scale(b(n), f as i64), to, lo, hi, na))
    }

    fn too_many_decimals<T>(&self) -> Result<T> {
        self.bad(format!(
            "exact results are limited to {MAX_DEC} decimals; wrap part of it in float()"
        ))
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

    pub(super) fn node(&mut self, a: &Ast) -> Result<Node> {
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
                let mut terms = parse_filter(&format!("{}({items})", quote_name(&var.name)))?;
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
            match (x, y) {
                (Ast::Str(s), other) | (other, Ast::Str(s)) => return self.text_cmp(c, s, other),
                _ => {}
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
            Bop::Add | Bop::Sub => self.add_sub(op == Bop::Add, l, r, na),
            Bop::Mul => self.mul(l, r, na),
            Bop::Div => self.div(l, r),
            Bop::Pow => self.pow(l, r, na),
        }
    }

    /// A text variable (`other`) compared with the quoted value `s`.
    fn text_cmp(&mut self, c: CmpOp, s: &str, other: &Ast) -> Result<Node> {
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
                value: s.to_string(),
                close: crate::filter::close_values(s, &[&dict]),
            });
        }
        let na = n.na;
        Ok(boolean(Op::TextEq(b(n), code.map(|c| c as i64), ne), na))
    }

    /// `l + r` (`add`) or `l - r`.
    fn add_sub(&self, add: bool, l: Node, r: Node, na: bool) -> Result<Node> {
        let (l, r) = self.unify(l, r)?;
        let bounds = |(a, bb): (f64, f64), (c, d): (f64, f64)| {
            if add {
                (a + c, bb + d)
            } else {
                (a - d, bb - c)
            }
        };
        match (&l.ty, &r.ty) {
            (&Ty::Int { dec, lo: a, hi: bb }, &Ty::Int { lo: c, hi: d, .. }) => {
                let (lo, hi) = if add {
                    (a + c, bb + d)
                } else {
                    (a - d, bb - c)
                };
                if !fits(lo, hi) {
                    return self.overflow();
                }
                let o = if add {
                    Op::AddI(b(l), b(r))
                } else {
                    Op::SubI(b(l), b(r))
                };
                Ok(int(o, dec, lo, hi, na))
            }
            (
                &Ty::Float {
                    lo: a,
                    hi: bb,
                    grid: g1,
                },
                &Ty::Float {
                    lo: c,
                    hi: d,
                    grid: g2,
                },
            ) => {
                let (lo, hi) = bounds((a, bb), (c, d));
                let grid = g1.zip(g2).map(|(x, y)| x.max(y));
                let o = if add {
                    Op::AddF(b(l), b(r))
                } else {
                    Op::SubF(b(l), b(r))
                };
                let na = na || !(lo.is_finite() && hi.is_finite());
                Ok(float(o, lo, hi, grid, na))
            }
            _ => unreachable!(),
        }
    }

    /// `l * r`: exact when both are Ints (decimals adding up).
    fn mul(&self, l: Node, r: Node, na: bool) -> Result<Node> {
        match (&l.ty, &r.ty) {
            (Ty::Text, _) => self.text_err(&l),
            (_, Ty::Text) => self.text_err(&r),
            (
                &Ty::Int {
                    dec: d1,
                    lo: a,
                    hi: bb,
                },
                &Ty::Int {
                    dec: d2,
                    lo: c,
                    hi: d,
                },
            ) => {
                let dec = d1 + d2;
                if dec > MAX_DEC {
                    return self.too_many_decimals();
                }
                let Some((lo, hi)) = imul_bounds((a, bb), (c, d)).filter(|(lo, hi)| fits(*lo, *hi))
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
        }
    }

    /// `l / r`, always a float (missing where `r` is 0).
    fn div(&self, l: Node, r: Node) -> Result<Node> {
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

    /// `l ^ r`: exact for an Int to a literal power from 0 to 16.
    fn pow(&self, l: Node, r: Node, na: bool) -> Result<Node> {
        if let (&Ty::Int { dec, lo, hi }, Some(k)) = (&l.ty, self.literal_int(&r)) {
            if (0..=16).contains(&k) {
                let k = k as u32;
                let dec2 = dec * k;
                let mut bounds = Some((1i128, 1i128));
                for _ in 0..k {
                    bounds = bounds.and_then(|bd| imul_bounds(bd, (lo, hi)));
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

    fn call(&mut self, f: &str, args: &[Ast]) -> Result<Node> {
        match f {
            "missing" => {
                self.arity(f, args, 1)?;
                let x = self.node(&args[0])?;
                Ok(boolean(Op::Missing(b(x)), false))
            }
            "float" => {
                self.arity(f, args, 1)?;
                let x = self.node(&args[0])?;
                self.to_f(x)
            }
            "abs" => self.abs_of(f, args),
            "ln" | "log10" | "exp" | "sqrt" => self.math(f, args),
            "floor" | "ceil" | "trunc" | "int" => self.whole(f, args),
            "round" => self.round(args),
            "min" | "max" => self.min_max(f, args),
            "mod" => self.modulo(f, args),
            "if" => self.if_else(f, args),
            "inrange" => self.inrange(f, args),
            _ => self.bad(format!("unknown function {f}()")),
        }
    }

    /// Refuses a call of `f` with other than `n` arguments.
    fn arity(&self, f: &str, args: &[Ast], n: usize) -> Result<()> {
        if args.len() != n {
            return self.bad(format!(
                "{f}() takes {n} argument{}, not {}",
                if n == 1 { "" } else { "s" },
                args.len()
            ));
        }
        Ok(())
    }

    /// `abs(x)`.
    fn abs_of(&mut self, f: &str, args: &[Ast]) -> Result<Node> {
        self.arity(f, args, 1)?;
        let x = self.node(&args[0])?;
        let na = x.na;
        // The range of |x| for x in lo..=hi (integers or floats).
        macro_rules! abs_range {
            ($lo:expr, $hi:expr, $zero:expr) => {{
                let (lo, hi, zero) = ($lo, $hi, $zero);
                let m = lo.abs().max(hi.abs());
                let l = if lo <= zero && hi >= zero {
                    zero
                } else {
                    lo.abs().min(hi.abs())
                };
                (l, m)
            }};
        }
        match x.ty {
            Ty::Int { dec, lo, hi } => {
                let (l, m) = abs_range!(lo, hi, 0);
                Ok(int(Op::AbsI(b(x)), dec, l, m, na))
            }
            Ty::Float { lo, hi, grid } => {
                let (l, m) = abs_range!(lo, hi, 0.0);
                Ok(float(Op::AbsF(b(x)), l, m, grid, na))
            }
            Ty::Text => self.text_err(&x),
        }
    }

    /// `ln log10 exp sqrt`: floats, missing where undefined.
    fn math(&mut self, f: &str, args: &[Ast]) -> Result<Node> {
        self.arity(f, args, 1)?;
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

    /// `floor ceil trunc int`: exact for Ints.
    fn whole(&mut self, f: &str, args: &[Ast]) -> Result<Node> {
        self.arity(f, args, 1)?;
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

    /// `round(x)` and `round(x, n)`: half away from zero.
    fn round(&mut self, args: &[Ast]) -> Result<Node> {
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
                        return self
                            .bad("round(x, n) takes n as a whole number from -9 to 9".into())
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

    /// `min(a, b, …)` and `max(a, b, …)`: Ints at their largest decimals, or floats.
    fn min_max(&mut self, f: &str, args: &[Ast]) -> Result<Node> {
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

    /// `mod(a, b)`: floored, the sign of b.
    fn modulo(&mut self, f: &str, args: &[Ast]) -> Result<Node> {
        self.arity(f, args, 2)?;
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

    /// `if(cond, a, b)`.
    fn if_else(&mut self, f: &str, args: &[Ast]) -> Result<Node> {
        self.arity(f, args, 3)?;
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

    /// `inrange(x, lo, hi)`: `x >= lo and x <= hi`.
    fn inrange(&mut self, f: &str, args: &[Ast]) -> Result<Node> {
        self.arity(f, args, 3)?;
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
}
