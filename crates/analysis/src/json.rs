//! How categories and values are written as JSON, for every result.

use microtab_engine::{Category, Value};
use serde::ser::SerializeStruct;
use serde::{Serialize, Serializer};

/// A category as `{"value", "label", "missing"}`, or, without `missing`
/// (`.1` false), as `{"value", "label"}` (a group of means, never a
/// missing category).
pub(crate) struct CategoryJson<'a>(pub &'a Category, pub bool);

impl Serialize for CategoryJson<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let CategoryJson(c, missing) = *self;
        let mut m = s.serialize_struct("Category", if missing { 3 } else { 2 })?;
        m.serialize_field("value", &ValueJson(&c.value))?;
        m.serialize_field("label", &c.label)?;
        if missing {
            m.serialize_field("missing", &c.missing)?;
        }
        m.end()
    }
}

/// Categories as JSON (`{value, label}` each), as a means group's `by`.
pub(crate) fn categories_json<S: Serializer>(c: &[Category], s: S) -> Result<S::Ok, S::Error> {
    s.collect_seq(c.iter().map(|c| CategoryJson(c, false)))
}

/// A value as a JSON number, string or null.
pub(crate) struct ValueJson<'a>(pub &'a Value);

impl Serialize for ValueJson<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self.0 {
            Value::Int(i) => s.serialize_i64(*i),
            Value::Num(x) => s.serialize_f64(*x),
            Value::Str(t) => s.serialize_str(t),
            Value::Null => s.serialize_none(),
        }
    }
}

/// A number that may be NaN or infinite (unknown, diverged) in a partial
/// result's JSON (which has neither): `null` there, NaN when read back.
pub(crate) mod unknown_nan {
    use serde::{Deserialize, Deserializer, Serializer};

    /// Writes `x`, or `null` when it is not finite.
    pub fn serialize<S: Serializer>(x: &f64, s: S) -> Result<S::Ok, S::Error> {
        match x.is_finite() {
            true => s.serialize_some(x),
            false => s.serialize_none(),
        }
    }

    /// Reads a number, `null` as NaN.
    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<f64, D::Error> {
        Ok(Option::<f64>::deserialize(d)?.unwrap_or(f64::NAN))
    }
}

/// [`unknown_nan`] for a list of numbers.
pub(crate) mod unknown_nans {
    use serde::{Deserialize, Deserializer, Serializer};

    /// Writes `v`, each number that is not finite as `null`.
    pub fn serialize<S: Serializer>(v: &[f64], s: S) -> Result<S::Ok, S::Error> {
        s.collect_seq(v.iter().map(|x| x.is_finite().then_some(*x)))
    }

    /// Reads a list of numbers, `null` as NaN.
    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<f64>, D::Error> {
        let v = Vec::<Option<f64>>::deserialize(d)?;
        Ok(v.into_iter().map(|x| x.unwrap_or(f64::NAN)).collect())
    }
}

/// An answer as a JSON value for a front end to send: every `-0.0` (a sum
/// or difference rounding to zero from below) written `0.0`, as R, Stata
/// and pandas print it, so a zero never reads as negative. A value with
/// integers beyond 64 bits (exact partial sums) goes through
/// [`answer_text`] instead: a JSON value cannot hold them.
pub fn answer_json(value: &impl Serialize) -> serde_json::Result<serde_json::Value> {
    let mut v = serde_json::to_value(value)?;
    unsign_zeros(&mut v);
    Ok(v)
}

/// An answer (or any result: exact partial sums with 128-bit integers
/// too) as JSON text, every `-0.0` written `0.0` ([`answer_json`]).
pub fn answer_text(value: &impl Serialize) -> serde_json::Result<String> {
    let s = serde_json::to_string(value)?;
    Ok(unsign_zero_text(s))
}

/// `s`, a JSON text, with each number `-0.0` outside strings written
/// `0.0` (serde_json writes a negative zero so and no other number that
/// way: `-0.05` is left alone).
fn unsign_zero_text(s: String) -> String {
    if !s.contains("-0.0") {
        return s;
    }
    let b = s.as_bytes();
    let (mut out, mut last) = (String::with_capacity(s.len()), 0);
    let (mut in_str, mut esc) = (false, false);
    for (i, &c) in b.iter().enumerate() {
        if in_str {
            match c {
                _ if esc => esc = false,
                b'\\' => esc = true,
                b'"' => in_str = false,
                _ => {}
            }
        } else if c == b'"' {
            in_str = true;
        } else if c == b'-'
            && s[i..].starts_with("-0.0")
            && matches!(b.get(i + 4), None | Some(b',' | b']' | b'}'))
        {
            out.push_str(&s[last..i]);
            last = i + 1;
        }
    }
    out.push_str(&s[last..]);
    out
}

fn unsign_zeros(v: &mut serde_json::Value) {
    use serde_json::Value as J;
    match v {
        J::Number(n)
            if n.is_f64() && n.as_f64().is_some_and(|x| x == 0.0 && x.is_sign_negative()) =>
        {
            *v = J::from(0.0);
        }
        J::Array(a) => a.iter_mut().for_each(unsign_zeros),
        J::Object(o) => o.values_mut().for_each(unsign_zeros),
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn negative_zeros_are_written_as_zeros() {
        let v = super::answer_json(&serde_json::json!({
            "a": -0.0, "b": [1.5, -0.0, {"c": -0.0}], "d": -2.0, "e": 0.0, "f": -0
        }))
        .unwrap();
        assert_eq!(
            serde_json::to_string(&v).unwrap(),
            r#"{"a":0.0,"b":[1.5,0.0,{"c":0.0}],"d":-2.0,"e":0.0,"f":0}"#
        );
    }

    #[derive(serde::Serialize)]
    struct Partial {
        big: i128,
        zero: f64,
        small: f64,
        label: &'static str,
        list: Vec<f64>,
    }

    #[test]
    fn the_text_form_keeps_128_bit_integers_and_strings() {
        let p = Partial {
            big: -(1i128 << 100),
            zero: -0.0,
            small: -0.05,
            label: "a \"-0.0,\" b -0.0",
            list: vec![-0.0, -0.0, 2.0],
        };
        // A JSON value cannot hold the 128-bit sum; the text can.
        assert!(super::answer_json(&p).is_err());
        assert_eq!(
            super::answer_text(&p).unwrap(),
            r#"{"big":-1267650600228229401496703205376,"zero":0.0,"small":-0.05,"label":"a \"-0.0,\" b -0.0","list":[0.0,0.0,2.0]}"#
        );
    }
}
