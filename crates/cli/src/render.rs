//! Rendering results: aligned text tables, CSV and JSON.

use microtab_engine::{Category, Value};
use serde_json::{json, Value as Json};

/// A category's value as JSON (number, string or null).
pub fn value_json(c: &Category) -> Json {
    match &c.value {
        Value::Int(i) => json!(i),
        Value::Num(x) => json!(x),
        Value::Str(s) => json!(s),
        Value::Null => Json::Null,
    }
}

/// `{"value", "label", "missing"}` for a category.
pub fn category_json(c: &Category) -> Json {
    json!({"value": value_json(c), "label": c.label, "missing": c.missing})
}

/// How a category appears in a text table.
pub fn category_text(c: &Category, codes: bool) -> String {
    if matches!(c.value, Value::Null) {
        return "(missing)".into();
    }
    match (&c.label, codes) {
        (Some(l), false) => format!("{} {}", c.display, l),
        _ => c.display.clone(),
    }
}

/// Thousands-separated integer.
pub fn group_digits(n: u64) -> String {
    let s = n.to_string();
    let mut out = String::with_capacity(s.len() + s.len() / 3);
    for (i, ch) in s.chars().enumerate() {
        if i > 0 && (s.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(ch);
    }
    out
}

/// Thousands-separated number with `dec` decimals.
pub fn group_float(x: f64, dec: usize) -> String {
    let s = format!("{:.*}", dec, x.abs());
    let (int, frac) = match s.split_once('.') {
        Some((a, b)) => (a.to_string(), format!(".{b}")),
        None => (s.clone(), String::new()),
    };
    let int: u64 = int.parse().unwrap_or(0);
    let sign = if x < 0.0 && s.chars().any(|c| c.is_ascii_digit() && c != '0') {
        "-"
    } else {
        ""
    };
    format!("{sign}{}{frac}", group_digits(int))
}

/// Optional float for CSV (empty when absent).
pub fn csv_num(x: Option<f64>) -> String {
    x.map(|v| format!("{v}")).unwrap_or_default()
}

/// Quotes a CSV field when needed.
pub fn csv_field(s: &str) -> String {
    if s.contains([',', '"', '\n', '\r']) {
        format!("\"{}\"", s.replace('"', "\"\""))
    } else {
        s.to_string()
    }
}

/// Joins fields into a CSV line.
pub fn csv_line(fields: &[String]) -> String {
    let mut s = fields
        .iter()
        .map(|f| csv_field(f))
        .collect::<Vec<_>>()
        .join(",");
    s.push('\n');
    s
}

/// Column alignment.
#[derive(Clone, Copy, PartialEq)]
pub enum Align {
    /// Left.
    Left,
    /// Right.
    Right,
}

/// Formats rows as an aligned table with a header and a rule.
pub fn text_table(header: &[String], rows: &[Vec<String>], align: &[Align]) -> String {
    let n = header.len();
    let mut w = vec![0usize; n];
    for r in std::iter::once(header).chain(rows.iter().map(|r| r.as_slice())) {
        for (i, c) in r.iter().enumerate().take(n) {
            w[i] = w[i].max(c.chars().count());
        }
    }
    let line = |r: &[String]| {
        let mut s = String::new();
        for (i, wi) in w.iter().enumerate() {
            let c = r.get(i).map(|s| s.as_str()).unwrap_or("");
            let pad = wi - c.chars().count();
            if i > 0 {
                s.push_str("  ");
            }
            if align.get(i) == Some(&Align::Right) {
                s.push_str(&" ".repeat(pad));
                s.push_str(c);
            } else {
                s.push_str(c);
                if i + 1 < n {
                    s.push_str(&" ".repeat(pad));
                }
            }
        }
        s.trim_end().to_string() + "\n"
    };
    let mut out = line(header);
    out.push_str(&"-".repeat(w.iter().sum::<usize>() + 2 * n.saturating_sub(1)));
    out.push('\n');
    for r in rows {
        out.push_str(&line(r));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn digits() {
        assert_eq!(group_digits(0), "0");
        assert_eq!(group_digits(1234567), "1,234,567");
        assert_eq!(group_float(-1234.5, 2), "-1,234.50");
        assert_eq!(group_float(-0.001, 2), "0.00");
        assert_eq!(csv_field("a,b"), "\"a,b\"");
    }
}
