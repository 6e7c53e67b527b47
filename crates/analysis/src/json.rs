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
