//! The numbers of a portable file: base 30 (digits `0`–`9`, `A`–`T`),
//! an optional `-`, an optional fraction after `.`, an optional exponent
//! (`+` or `-` and base-30 digits, a power of 30), ended by `/`; leading
//! spaces allowed; `*` and one more character (`*.`) is system-missing.
//!
//! A number is read character by character ([`Base30::push`]) and rounded
//! once to the nearest double: its digits are kept as an integer `m` and a
//! power of 30, and `m · 30^e = m · 15^e · 2^e` is computed in integers
//! where it fits (which covers every number a writer produces at its
//! precision), so that a value written from a double reads back as that
//! double.

/// Significant digits kept (30^25 < 2^123); later ones only scale.
const KEPT: u32 = 25;

/// What a number field holds.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum Value {
    /// A number (possibly infinite, when its exponent is beyond doubles).
    Num(f64),
    /// System-missing (`*.`).
    Sysmis,
}

/// Where a number is in its grammar.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum St {
    /// Before anything but spaces.
    Start,
    /// After `*`: one more character ends it.
    Star,
    /// In the whole part (after an optional `-`).
    Whole,
    /// In the fraction.
    Frac,
    /// After the exponent's sign.
    Exp,
}

/// A number being read, one character at a time.
#[derive(Debug, Clone)]
pub(crate) struct Base30 {
    st: St,
    neg: bool,
    /// The significant digits as an integer.
    mant: u128,
    /// Significant digits in `mant`.
    kept: u32,
    /// The power of 30 the digits are scaled by (minus the fraction's
    /// digits, plus whole digits beyond those kept).
    scale: i64,
    digits: bool,
    exp_neg: bool,
    exp: i64,
    exp_digits: bool,
}

/// The outcome of one character.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum Step {
    /// The number goes on.
    More,
    /// The number ended with this character.
    Done(Value),
    /// This character cannot come here.
    Bad,
}

/// The value of a base-30 digit (`0`–`9`, `A`–`T`).
fn digit(c: u8) -> Option<u8> {
    match c {
        b'0'..=b'9' => Some(c - b'0'),
        b'A'..=b'T' => Some(c - b'A' + 10),
        _ => None,
    }
}

impl Base30 {
    pub(crate) fn new() -> Base30 {
        Base30 {
            st: St::Start,
            neg: false,
            mant: 0,
            kept: 0,
            scale: 0,
            digits: false,
            exp_neg: false,
            exp: 0,
            exp_digits: false,
        }
    }

    /// Whether nothing but spaces has been read.
    pub(crate) fn started(&self) -> bool {
        self.st != St::Start
    }

    /// Reads the character `c` (its ASCII meaning; anything that is not a
    /// portable character of the grammar is `Bad`).
    #[inline]
    pub(crate) fn push(&mut self, c: u8) -> Step {
        match self.st {
            St::Start => match c {
                b' ' => Step::More,
                b'*' => {
                    self.st = St::Star;
                    Step::More
                }
                b'-' => {
                    self.neg = true;
                    self.st = St::Whole;
                    Step::More
                }
                b'.' => {
                    self.st = St::Frac;
                    Step::More
                }
                _ => match digit(c) {
                    Some(d) => {
                        self.st = St::Whole;
                        self.whole(d);
                        Step::More
                    }
                    None => Step::Bad,
                },
            },
            St::Star => Step::Done(Value::Sysmis),
            St::Whole | St::Frac => match c {
                b'/' if self.digits => Step::Done(self.value()),
                b'.' if self.st == St::Whole => {
                    self.st = St::Frac;
                    Step::More
                }
                b'+' | b'-' if self.digits => {
                    self.exp_neg = c == b'-';
                    self.st = St::Exp;
                    Step::More
                }
                _ => match digit(c) {
                    Some(d) if self.st == St::Whole => {
                        self.whole(d);
                        Step::More
                    }
                    Some(d) => {
                        self.frac(d);
                        Step::More
                    }
                    None => Step::Bad,
                },
            },
            St::Exp => match c {
                b'/' if self.exp_digits => Step::Done(self.value()),
                _ => match digit(c) {
                    Some(d) => {
                        // Beyond any double either way: saturate.
                        self.exp = (self.exp * 30 + d as i64).min(1 << 20);
                        self.exp_digits = true;
                        Step::More
                    }
                    None => Step::Bad,
                },
            },
        }
    }

    fn whole(&mut self, d: u8) {
        self.digits = true;
        if self.mant == 0 && d == 0 {
        } else if self.kept < KEPT {
            self.mant = self.mant * 30 + d as u128;
            self.kept += 1;
        } else {
            self.scale += 1;
        }
    }

    fn frac(&mut self, d: u8) {
        self.digits = true;
        if self.mant == 0 && d == 0 {
            self.scale -= 1;
        } else if self.kept < KEPT {
            self.mant = self.mant * 30 + d as u128;
            self.kept += 1;
            self.scale -= 1;
        }
    }

    fn value(&self) -> Value {
        let e = self.scale + if self.exp_neg { -self.exp } else { self.exp };
        let x = scaled(self.mant, e);
        Value::Num(if self.neg { -x } else { x })
    }
}

/// The number at the start of `s` when it is a short one (the common
/// case: leading spaces, `-`, at most 12 digits with an optional fraction
/// and exponent, `/`; or `*.`) lying whole in `s`, with the characters it
/// takes; `None` otherwise (then [`Base30`] reads it). `ascii` gives each
/// byte's meaning.
#[inline]
pub(crate) fn quick(s: &[u8], ascii: &[u8; 256]) -> Option<(Value, usize)> {
    let mut k = 0;
    let c = |k: usize| s.get(k).map(|&b| ascii[b as usize]);
    while c(k)? == b' ' {
        k += 1;
    }
    if c(k)? == b'*' {
        return s.get(k + 1).map(|_| (Value::Sysmis, k + 2));
    }
    let neg = c(k)? == b'-';
    k += usize::from(neg);
    let mut m = 0u64;
    let mut n = 0;
    let mut e = 0i64;
    let mut frac = false;
    loop {
        let x = c(k)?;
        match digit(x) {
            Some(d) => {
                m = m * 30 + d as u64;
                n += 1;
                e -= i64::from(frac);
            }
            None if x == b'.' && !frac => frac = true,
            None => break,
        }
        k += 1;
        if n > 12 {
            return None;
        }
    }
    if n == 0 {
        return None;
    }
    let mut x = c(k)?;
    if x == b'+' || x == b'-' {
        let minus = x == b'-';
        let mut p = 0i64;
        let mut pn = 0;
        k += 1;
        loop {
            x = c(k)?;
            match digit(x) {
                Some(d) if pn < 4 => p = p * 30 + d as i64,
                _ => break,
            }
            pn += 1;
            k += 1;
        }
        if pn == 0 {
            return None;
        }
        e += if minus { -p } else { p };
    }
    if x != b'/' {
        return None;
    }
    let v = scaled(m as u128, e);
    Some((Value::Num(if neg { -v } else { v }), k + 1))
}

/// Powers of 30 below 2^53 (exact as doubles).
const P30: [f64; 11] = [
    1.0,
    30.0,
    900.0,
    27_000.0,
    810_000.0,
    24_300_000.0,
    729_000_000.0,
    21_870_000_000.0,
    656_100_000_000.0,
    19_683_000_000_000.0,
    590_490_000_000_000.0,
];

/// `m · 30^e` rounded to the nearest double.
fn scaled(m: u128, e: i64) -> f64 {
    if m == 0 {
        return 0.0;
    }
    if m < 1 << 53 {
        // Both operands exact: one rounding (Clinger's fast path); the
        // digits as a u64, whose conversion is one instruction.
        let x = m as u64 as f64;
        if e == 0 {
            return x;
        }
        if (-10..0).contains(&e) {
            return x / P30[(-e) as usize];
        }
        if (1..=10).contains(&e) && x * P30[e as usize] < 9_007_199_254_740_992.0 {
            return x * P30[e as usize];
        }
    }
    // m · 30^e = m · 15^e · 2^e: the power of 2 is exact.
    if e > 0 {
        if let Some(n) = 15u128
            .checked_pow(e.min(64) as u32)
            .and_then(|p| m.checked_mul(p))
        {
            return ldexp(n as f64, e);
        }
    } else if e >= -32 {
        // m / 15^k with 15^k < 2^126, by long division: m shifted to the
        // top of 128 bits, then as many more quotient bits as it takes to
        // hold 56; the remainder is a sticky bit (so that `as f64` rounds
        // up a tie only when the exact value is one).
        let k = (-e) as u32;
        let d = 15u128.pow(k);
        let s = m.leading_zeros();
        let n = m << s;
        let (mut q, mut r) = (n / d, n % d);
        let mut more = 0i64;
        while q < 1 << 56 {
            // r < d < 2^126: 2 to 64 bits at a time (q stays below 2^120).
            let t = r.leading_zeros().min(64);
            let wide = r << t;
            q = (q << t) | (wide / d);
            r = wide % d;
            more += t as i64;
        }
        if r != 0 {
            q |= 1;
        }
        return ldexp(q as f64, e - s as i64 - more);
    }
    // Far beyond the digits any writer gives: a close approximation.
    let mut x = m as f64;
    let mut e = e;
    while e > 0 && x.is_finite() {
        let k = e.min(10);
        x *= P30[k as usize];
        e -= k;
    }
    while e < 0 && x != 0.0 {
        let k = (-e).min(10);
        x /= P30[k as usize];
        e += k;
    }
    x
}

/// `x · 2^n`, exact unless the result leaves the normal doubles.
fn ldexp(mut x: f64, mut n: i64) -> f64 {
    let pow2 = |k: i64| f64::from_bits(((k + 1023) as u64) << 52);
    while n > 1000 && x.is_finite() {
        x *= pow2(1000);
        n -= 1000;
    }
    while n < -1000 && x != 0.0 {
        x *= pow2(-1000);
        n += 1000;
    }
    if x == 0.0 || !x.is_finite() {
        return x;
    }
    x * pow2(n.clamp(-1000, 1000))
}

/// Parses a whole number field (tests and callers holding the text).
#[cfg(test)]
pub(crate) fn parse(text: &str) -> Option<Value> {
    let mut b = Base30::new();
    for c in text.bytes() {
        match b.push(c) {
            Step::More => {}
            Step::Done(v) => return Some(v),
            Step::Bad => return None,
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn num(t: &str) -> f64 {
        match parse(t) {
            Some(Value::Num(x)) => x,
            v => panic!("{t}: {v:?}"),
        }
    }

    /// A double written in base 30 exactly (as a writer would with every
    /// digit): `x = m · 2^-k = m · 15^k / 30^k`, `m · 15^k` in a small
    /// big integer (32-bit limbs, least significant first).
    fn base30(x: f64) -> String {
        let neg = x < 0.0;
        let bits = x.abs().to_bits();
        let exp = ((bits >> 52) & 0x7FF) as i64;
        let (mut m, mut k) = if exp == 0 {
            (bits & ((1 << 52) - 1), 1074)
        } else {
            ((bits & ((1 << 52) - 1)) | (1 << 52), 1075 - exp)
        };
        while m > 0 && m % 2 == 0 && k > 0 {
            m /= 2;
            k -= 1;
        }
        let mut big: Vec<u64> = vec![m & 0xFFFF_FFFF, m >> 32];
        let mul = |big: &mut Vec<u64>, f: u64| {
            let mut carry = 0;
            for l in big.iter_mut() {
                let v = *l * f + carry;
                *l = v & 0xFFFF_FFFF;
                carry = v >> 32;
            }
            while carry > 0 {
                big.push(carry & 0xFFFF_FFFF);
                carry >>= 32;
            }
        };
        let frac = k.max(0) as usize;
        if k > 0 {
            for _ in 0..k {
                mul(&mut big, 15);
            }
        } else {
            for _ in 0..-k {
                mul(&mut big, 2);
            }
        }
        let mut digits = Vec::new();
        while big.iter().any(|&l| l != 0) {
            let mut rem = 0;
            for l in big.iter_mut().rev() {
                let v = (rem << 32) | *l;
                *l = v / 30;
                rem = v % 30;
            }
            let d = rem as u8;
            digits.push(if d < 10 { b'0' + d } else { b'A' + d - 10 });
        }
        while digits.len() <= frac {
            digits.push(b'0');
        }
        digits.reverse();
        let cut = digits.len() - frac;
        let mut out = String::new();
        if neg {
            out.push('-');
        }
        out.push_str(std::str::from_utf8(&digits[..cut]).unwrap());
        if frac > 0 {
            out.push('.');
            out.push_str(std::str::from_utf8(&digits[cut..]).unwrap());
        }
        out.push('/');
        out
    }

    #[test]
    fn the_grammar() {
        assert_eq!(num("0/"), 0.0);
        assert_eq!(num("1/"), 1.0);
        assert_eq!(num("A/"), 10.0);
        assert_eq!(num("T/"), 29.0);
        assert_eq!(num("10/"), 30.0);
        assert_eq!(num("-1/"), -1.0);
        assert_eq!(num("   1K/"), 50.0);
        assert_eq!(num("A.F/"), 10.5);
        assert_eq!(num("-3.7F/"), -3.25);
        assert_eq!(num(".F/"), 0.5);
        assert_eq!(num("-.F/"), -0.5);
        assert_eq!(num("1+2/"), 900.0);
        assert_eq!(num("1-1/"), 1.0 / 30.0);
        assert_eq!(num("IPJ2+3/"), num("IPJ2000/"));
        assert_eq!(parse("*."), Some(Value::Sysmis));
        assert_eq!(parse("  *."), Some(Value::Sysmis));
        // pyreadstat's 1e-5 and PSPP's 13197686400 (a date).
        assert_eq!(num("83000000000C-F/"), 1e-5);
        assert_eq!(num("DMBM+3/"), 10_021_104_000.0);
        for bad in [
            "/", "-/", "./", "1", "1+/", "U/", "1.2.3/", "+1/", "1 2/", "1-/", "Z",
        ] {
            assert!(parse(bad).is_none(), "{bad:?} parsed as {:?}", parse(bad));
        }
    }

    #[test]
    fn the_quick_path_reads_as_the_grammar_does() {
        let mut ascii = [0u8; 256];
        for b in 0..128u8 {
            ascii[b as usize] = b;
        }
        for t in [
            "0/",
            "1/",
            "-1/",
            "   1K/",
            "A.F/",
            "-3.7F/",
            ".F/",
            "1+2/",
            "1-1/",
            "IPJ2+3/",
            "83000000000C-F/",
            "DMBM+3/",
            "*.",
            "  *.",
            "8J.K3/",
            "TTTTTTTTTTTT/",
        ] {
            let (v, k) = quick(t.as_bytes(), &ascii).unwrap_or_else(|| panic!("{t}"));
            assert_eq!((Some(v), k), (parse(t), t.len()), "{t}");
        }
        // Beyond it, or cut short, or wrong: left to the full reader.
        for t in [
            "TTTTTTTTTTTTT/",
            "1",
            "1+",
            "*",
            "",
            "Z",
            "1.2.3/",
            "1+/",
            "-/",
            "1+TTTTT/",
        ] {
            assert_eq!(quick(t.as_bytes(), &ascii), None, "{t}");
        }
    }

    #[test]
    fn exponents_beyond_doubles_saturate() {
        assert_eq!(num("1+TTTTTTT/"), f64::INFINITY);
        assert_eq!(num("1-TTTTTTT/"), 0.0);
        let many = format!("1{}/", "0".repeat(400));
        assert_eq!(num(&many), f64::INFINITY);
        let tiny = format!(".{}1/", "0".repeat(400));
        assert_eq!(num(&tiny), 0.0);
    }

    #[test]
    fn doubles_written_exactly_read_back_exactly() {
        // A small LCG: no dependency for random bits.
        let mut s = 0x2545_F491_4F6C_DD1Du64;
        let mut next = || {
            s = s
                .wrapping_mul(6_364_136_223_846_793_005)
                .wrapping_add(1_442_695_040_888_963_407);
            s
        };
        let mut xs = vec![
            0.1,
            0.2,
            0.3,
            1.0 / 3.0,
            123.456,
            -99.99,
            1e-5,
            2.5e10,
            13_197_686_400.0,
        ];
        for _ in 0..20_000 {
            let bits = next();
            // Doubles from 2^-30 to 2^60 (30 or more base-30 digits: more
            // than the 25 kept).
            let e = (bits >> 52) % 90;
            let x = f64::from_bits((bits & ((1 << 52) - 1)) | ((e + 1023 - 30) << 52));
            xs.push(if bits & (1 << 63) != 0 { -x } else { x });
        }
        for x in xs {
            let t = base30(x);
            assert_eq!(num(&t), x, "{t}");
        }
    }

    #[test]
    fn rounded_digits_round_to_the_nearest_double() {
        // 11 significant digits (a writer's precision), from decimal
        // values: within an ulp of the decimal, and exact for those
        // that fit.
        for (t, want) in [("3.9/", 3.3), ("-2K.4/", -80.13333333333334)] {
            let x = num(t);
            assert!(
                (x - want).abs() <= want.abs() * 2.3e-16,
                "{t}: {x} vs {want}"
            );
        }
        // 1/3 = 0.A (base 30), correctly rounded.
        assert_eq!(num(".A/"), 1.0 / 3.0);
        assert_eq!(num(".A000000000000000000000000000000000/"), 1.0 / 3.0);
        assert_eq!(num(".AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA/"), 10.0 / 29.0);
        // Far below the digits kept: close.
        for x in [1.234e-40, -7.5e-200, 3.3e250] {
            let y = num(&base30(x));
            assert!((y - x).abs() <= x.abs() * 1e-14, "{x}: {y}");
        }
    }
}
