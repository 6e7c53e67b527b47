//! Values as users see them: decimals applied, strings decoded, labels.

use microtab_store::{Kind, Variable};

/// A category's value in displayed form.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Value {
    /// An integer (no implied decimals).
    Int(i64),
    /// A number with decimals (implied-decimal integers and floats).
    Num(f64),
    /// Text.
    Str(String),
    /// System-missing (empty).
    Null,
}

/// One category of a grouping variable.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Category {
    /// The value.
    pub value: Value,
    /// The value formatted (`"123.45"`, `"Ohio"`, `""` for null).
    pub display: String,
    /// Its value label, if the variable has one.
    pub label: Option<String>,
    /// Whether it is a missing code or system-missing.
    pub missing: bool,
}

/// Formats a stored value of `var` for display. `key` is the stored
/// integer for int and string kinds, the `f64` bits for floats.
pub(crate) fn display_stored(var: &Variable, key: i64) -> (Value, String) {
    match var.kind {
        Kind::Int if var.decimals == 0 => (Value::Int(key), key.to_string()),
        Kind::Int => (
            Value::Num(key as f64 / var.scale()),
            microtab_store::codec::display_int(var.decimals, key),
        ),
        Kind::Float => {
            let f = f64::from_bits(key as u64);
            (Value::Num(f), format_float(f))
        }
        Kind::String => (Value::Int(key), key.to_string()),
    }
}

pub use microtab_store::codec::format_float;

pub(crate) fn category(var: &Variable, key: i64, missing: bool) -> Category {
    let (value, display) = display_stored(var, key);
    let label = var.value_labels.get(&display).cloned();
    Category {
        value,
        display,
        label,
        missing,
    }
}

pub(crate) fn null_category() -> Category {
    Category {
        value: Value::Null,
        display: String::new(),
        label: None,
        missing: true,
    }
}
