//! The number grammars of text fields: CSV's (`[+-]digits[.digits]`,
//! anything `f64` parses) and fixed-width's (digits with *implied*
//! decimals, as DDI codebooks describe them), and what makes a number look
//! like a code (leading zeros).

/// Most decimals a CSV field keeps as a scaled integer; more become a
/// float.
pub(crate) const MAX_DECIMALS: u32 = 9;

/// Most implied decimals a fixed-width field keeps as a scaled integer
/// (10^18 fits in an i64).
pub(crate) const MAX_FIXED_DECIMALS: u32 = 18;

/// Whether `s` is a number written with leading zeros (`01`, `-007`,
/// `00.5`): a zero-padded code rather than a quantity.
#[inline]
pub(crate) fn leading_zeros(s: &[u8]) -> bool {
    let d = match s.first() {
        Some(b'-' | b'+') => &s[1..],
        _ => s,
    };
    d.len() >= 2 && d[0] == b'0' && d[1].is_ascii_digit()
}

/// Whether `s` is an integer literal (`[+-]digits`).
pub(crate) fn int_literal(s: &[u8]) -> bool {
    let d = match s.first() {
        Some(b'-' | b'+') => &s[1..],
        _ => s,
    };
    !d.is_empty() && d.iter().all(u8::is_ascii_digit)
}

/// Parses `[+-]digits[.digits]` into (scaled mantissa, decimals).
#[inline]
pub(crate) fn parse_decimal(s: &[u8]) -> Option<(i64, u32)> {
    let (neg, mut i) = match s.first()? {
        b'-' => (true, 1),
        b'+' => (false, 1),
        _ => (false, 0),
    };
    let mut m: i64 = 0;
    let mut digits = 0u32;
    let mut decimals = 0u32;
    let mut seen_dot = false;
    while i < s.len() {
        let b = s[i];
        if b.is_ascii_digit() {
            m = m.checked_mul(10)?.checked_add((b - b'0') as i64)?;
            digits += 1;
            if seen_dot {
                decimals += 1;
            }
        } else if b == b'.' && !seen_dot {
            seen_dot = true;
        } else {
            return None;
        }
        i += 1;
    }
    if digits == 0 || decimals > MAX_DECIMALS {
        return None;
    }
    Some((if neg { -m } else { m }, decimals))
}

/// Parses any finite number (exponents allowed).
pub(crate) fn parse_float(s: &[u8]) -> Option<f64> {
    let t = std::str::from_utf8(s).ok()?;
    if !t.bytes().any(|b| b.is_ascii_digit()) {
        return None;
    }
    t.parse::<f64>().ok().filter(|v| v.is_finite())
}

/// A number written with a decimal comma (`1,5`, `-12,25`) as the
/// grammar above reads it (`1.5`); `None` for a field holding a point,
/// which is no number where the comma is the decimal mark (`1.234,5`
/// groups thousands with it, and is not read as a number either).
pub(crate) fn comma_to_point(s: &[u8]) -> Option<std::borrow::Cow<'_, [u8]>> {
    if s.contains(&b'.') {
        return None;
    }
    Some(match memchr::memchr(b',', s) {
        None => std::borrow::Cow::Borrowed(s),
        Some(_) => s
            .iter()
            .map(|&b| if b == b',' { b'.' } else { b })
            .collect::<Vec<u8>>()
            .into(),
    })
}

/// Whether `s` looks like a number with a decimal comma: `[+-]digits,digits`.
pub(crate) fn decimal_comma_like(s: &[u8]) -> bool {
    let d = match s.first() {
        Some(b'-' | b'+') => &s[1..],
        _ => s,
    };
    match d.iter().position(|&b| b == b',') {
        Some(at) => {
            at > 0
                && at + 1 < d.len()
                && d[..at].iter().all(u8::is_ascii_digit)
                && d[at + 1..].iter().all(u8::is_ascii_digit)
        }
        None => false,
    }
}

pub(crate) fn trim(s: &[u8]) -> &[u8] {
    let mut a = 0;
    let mut b = s.len();
    while a < b && s[a] == b' ' {
        a += 1;
    }
    while b > a && s[b - 1] == b' ' {
        b -= 1;
    }
    &s[a..b]
}

/// A numeric field's value.
#[derive(Debug, PartialEq)]
pub(crate) enum Num {
    Null,
    /// `m / 10^d`.
    Scaled(i64, u32),
    /// Too many digits for an `i64`, with decimals: approximate.
    Big(f64),
    /// An integer (no decimals) beyond the `i64` range: not stored
    /// exactly, so refused rather than merged with its neighbours.
    BigInt,
    Bad,
}

pub(crate) fn trim_blanks(s: &[u8]) -> &[u8] {
    let mut a = 0;
    let mut b = s.len();
    while a < b && (s[a] == b' ' || s[a] == b'\t') {
        a += 1;
    }
    while b > a && (s[b - 1] == b' ' || s[b - 1] == b'\t') {
        b -= 1;
    }
    &s[a..b]
}

/// Parses a numeric field: blanks around, an optional sign, digits, at most
/// one decimal point; without a point the value has `implied` decimals.
#[inline]
pub(crate) fn parse_number(field: &[u8], implied: u32) -> Num {
    // Fast path: IPUMS writes numbers as zero-padded digits. Up to 18
    // digits cannot overflow an i64; the check for non-digits is folded
    // into the loop (a non-digit makes `ok` false and the value is unused).
    if !field.is_empty() && field.len() <= 18 {
        let mut m: i64 = 0;
        let mut ok = true;
        for &b in field {
            let d = b.wrapping_sub(b'0');
            ok &= d < 10;
            m = m.wrapping_mul(10).wrapping_add(d as i64);
        }
        if ok {
            return Num::Scaled(m, implied);
        }
    }
    let s = trim_blanks(field);
    let Some(&first) = s.first() else {
        return Num::Null;
    };
    let (neg, digits) = match first {
        b'-' => (true, &s[1..]),
        b'+' => (false, &s[1..]),
        _ => (false, s),
    };
    let mut m: i64 = 0;
    let mut n = 0usize;
    let mut overflow = false;
    let mut dot = None;
    for (i, &b) in digits.iter().enumerate() {
        let d = b.wrapping_sub(b'0');
        if d < 10 {
            n += 1;
            match m.checked_mul(10).and_then(|x| x.checked_add(d as i64)) {
                Some(x) => m = x,
                None => overflow = true,
            }
        } else if b == b'.' && dot.is_none() {
            dot = Some(i);
        } else {
            return Num::Bad;
        }
    }
    if n == 0 {
        return Num::Bad;
    }
    let d = match dot {
        None => implied,
        Some(i) => (digits.len() - 1 - i) as u32,
    };
    if overflow && d == 0 {
        return Num::BigInt;
    }
    if overflow || d > MAX_FIXED_DECIMALS {
        // Only digits, a sign and a point are left: valid float syntax;
        // the exponent applies implied decimals with one rounding.
        let text = std::str::from_utf8(s).unwrap_or("0");
        let v: f64 = if dot.is_none() {
            format!("{text}e-{d}").parse().unwrap_or(f64::NAN)
        } else {
            text.parse().unwrap_or(f64::NAN)
        };
        return Num::Big(v);
    }
    Num::Scaled(if neg { -m } else { m }, d)
}
