//! Values as users type and read them ↔ the codes a column stores.
//!
//! One codec for every place that turns a typed value into a stored code
//! (missing codes given on import or by `microtab missing`, value labels,
//! filters) or a stored code into text: integers with implied decimals are
//! exact (`-0.5` in a column with one decimal is the code `-5`; in an
//! integer column it is not a value at all, never `-1`), floats must be
//! finite, strings are positions in the sorted dictionary.

use crate::{Kind, Variable};

/// Parses `[+-]digits[.digits]` exactly: `(mantissa, decimals)`, so that
/// `"-12.50"` is `(-1250, 2)`. `None` for anything else (exponents, `nan`,
/// more than 36 digits).
pub fn parse_exact(s: &str) -> Option<(i128, u32)> {
    let (neg, body) = match s.strip_prefix('-') {
        Some(b) => (true, b),
        None => (false, s.strip_prefix('+').unwrap_or(s)),
    };
    let (int, frac) = body.split_once('.').unwrap_or((body, ""));
    if int.is_empty() && frac.is_empty()
        || !int.bytes().chain(frac.bytes()).all(|b| b.is_ascii_digit())
        || int.len() + frac.len() > 36
    {
        return None;
    }
    let mut m: i128 = 0;
    for b in int.bytes().chain(frac.bytes()) {
        m = m * 10 + (b - b'0') as i128;
    }
    Some((if neg { -m } else { m }, frac.len() as u32))
}

/// `m / 10^d` in units of `decimals` decimals, if exact and within `i64`.
pub fn rescale_exact(m: i128, d: u32, decimals: u32) -> Option<i64> {
    let v = if d <= decimals {
        m.checked_mul(10i128.checked_pow(decimals - d)?)?
    } else {
        let k = 10i128.checked_pow(d - decimals)?;
        if m % k != 0 {
            return None;
        }
        m / k
    };
    i64::try_from(v).ok()
}

/// A text that is not a value of a variable.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("'{text}' is not a value of {var}: expected {expected}")]
pub struct NotAValue {
    /// The text given.
    pub text: String,
    /// The variable's name.
    pub var: String,
    /// What its values look like.
    pub expected: String,
}

/// What values of `var` look like, for messages.
pub fn expected_values(var: &Variable) -> String {
    match var.kind {
        Kind::Int if var.decimals > 0 => {
            format!("a number with at most {} decimals", var.decimals)
        }
        Kind::Int => "an integer".to_string(),
        Kind::Float => "a finite number".to_string(),
        Kind::String => "text".to_string(),
    }
}

/// The stored code of `text` as a value of `var`. For a string variable
/// `dict` is its dictionary and the code is `None` when the string does
/// not occur in the data; numbers always have a code.
pub fn stored_code(var: &Variable, dict: &[String], text: &str) -> Result<Option<f64>, NotAValue> {
    let bad = || NotAValue {
        text: text.to_string(),
        var: var.name.clone(),
        expected: expected_values(var),
    };
    match var.kind {
        Kind::String => Ok(dict
            .binary_search_by(|d| d.as_str().cmp(text))
            .ok()
            .map(|c| c as f64)),
        Kind::Int => {
            let (m, d) = parse_exact(text.trim()).ok_or_else(bad)?;
            let v = rescale_exact(m, d, var.decimals).ok_or_else(bad)?;
            Ok(Some(v as f64))
        }
        Kind::Float => {
            let t = text.trim();
            // Only numbers as written in data: no `nan`, `inf`, `infinity`.
            if !t.bytes().any(|b| b.is_ascii_digit()) {
                return Err(bad());
            }
            let x: f64 = t.parse().map_err(|_| bad())?;
            if !x.is_finite() {
                return Err(bad());
            }
            Ok(Some(x))
        }
    }
}

/// The text of a stored numeric code as users see it (and as value-label
/// keys are written): `1`, `12.50` for two implied decimals, the shortest
/// round-trip text of a float. String codes are dictionary positions: see
/// the dictionary instead.
pub fn display_code(var: &Variable, code: f64) -> String {
    match var.kind {
        Kind::Int => display_int(var.decimals, code as i64),
        Kind::Float | Kind::String => format_float(code),
    }
}

/// The text of a stored integer with `decimals` implied decimals, exact at
/// any size (the integer split at the decimal point, never through a
/// float): `-5` with 2 decimals is `-0.05`.
pub fn display_int(decimals: u32, c: i64) -> String {
    if decimals == 0 {
        return c.to_string();
    }
    let k = 10u64.pow(decimals);
    let sign = if c < 0 { "-" } else { "" };
    let a = c.unsigned_abs();
    format!("{sign}{}.{:0w$}", a / k, a % k, w = decimals as usize)
}

/// Shortest round-trip text of a float, without a trailing `.0`; from
/// 10^16 on in exponent form (`8.98846567431158e307`), not as hundreds
/// of digits.
pub fn format_float(x: f64) -> String {
    if x.fract() == 0.0 && x.abs() < 1e15 {
        format!("{}", x as i64)
    } else if x.abs() >= 1e16 && x.is_finite() {
        format!("{x:e}")
    } else {
        format!("{x}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::PhysType;

    fn var(kind: Kind, decimals: u32) -> Variable {
        let mut v = Variable::new("X", kind, PhysType::I32);
        v.decimals = decimals;
        v
    }

    #[test]
    fn float_text() {
        assert_eq!(format_float(3.0), "3");
        assert_eq!(format_float(-0.25), "-0.25");
        assert_eq!(format_float(1e15), "1000000000000000");
        assert_eq!(format_float(1e16), "1e16");
        assert_eq!(
            format_float(f64::from_bits(0x7FE0_0100_0000_0000)),
            "8.990660123939097e307"
        );
        assert_eq!(format_float(-2.5e20), "-2.5e20");
    }

    #[test]
    fn exact_numbers() {
        assert_eq!(parse_exact("-12.50"), Some((-1250, 2)));
        assert_eq!(parse_exact("+7"), Some((7, 0)));
        assert_eq!(parse_exact(".5"), Some((5, 1)));
        assert_eq!(parse_exact("1e3"), None);
        assert_eq!(parse_exact("nan"), None);
        assert_eq!(parse_exact("-"), None);
        assert_eq!(parse_exact(""), None);
    }

    /// Hand-computed: `-0.5` is not an integer (was rounded to -1 by the
    /// import), is -5 with one decimal; 1.50 is 150 with two.
    #[test]
    fn codes_are_exact_or_refused() {
        let int = var(Kind::Int, 0);
        assert!(stored_code(&int, &[], "-0.5").is_err());
        assert_eq!(stored_code(&int, &[], "-0.0"), Ok(Some(0.0)));
        assert_eq!(stored_code(&int, &[], "9999999"), Ok(Some(9999999.0)));
        assert!(stored_code(&int, &[], "99999999999999999999").is_err());
        let one = var(Kind::Int, 1);
        assert_eq!(stored_code(&one, &[], "-0.5"), Ok(Some(-5.0)));
        assert!(stored_code(&one, &[], "0.55").is_err());
        let two = var(Kind::Int, 2);
        assert_eq!(stored_code(&two, &[], "1.5"), Ok(Some(150.0)));
        let f = var(Kind::Float, 0);
        assert_eq!(stored_code(&f, &[], "-0.5"), Ok(Some(-0.5)));
        for bad in ["nan", "NaN", "inf", "-infinity", "1e999", "x"] {
            assert!(stored_code(&f, &[], bad).is_err(), "{bad}");
        }
        let s = var(Kind::String, 0);
        let dict = ["NA".to_string(), "Ohio".to_string()];
        assert_eq!(stored_code(&s, &dict, "Ohio"), Ok(Some(1.0)));
        assert_eq!(stored_code(&s, &dict, "Utah"), Ok(None));
    }

    #[test]
    fn display() {
        assert_eq!(display_code(&var(Kind::Int, 0), -7.0), "-7");
        assert_eq!(display_code(&var(Kind::Int, 2), -5.0), "-0.05");
        assert_eq!(display_code(&var(Kind::Int, 2), 12345.0), "123.45");
        // Beyond 2^53 a float would round the last digits.
        assert_eq!(
            display_int(2, 123_456_789_012_345_678),
            "1234567890123456.78"
        );
        assert_eq!(display_int(3, -i64::MAX), "-9223372036854775.807");
        assert_eq!(display_code(&var(Kind::Float, 0), 0.1), "0.1");
        assert_eq!(display_code(&var(Kind::Float, 0), 3.0), "3");
    }
}
