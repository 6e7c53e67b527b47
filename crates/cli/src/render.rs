//! Rendering results: aligned text tables, CSV and JSON.

// Number formats shared with the HTML codebook and the analysis page.
pub use microtab_analysis::{fmt_sig, group_digits};
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

/// How a category appears in a text table: code and label, the code
/// once when the label says the same (a string variable's value, `18 18`).
pub fn category_text(c: &Category, codes: bool) -> String {
    if matches!(c.value, Value::Null) {
        return "(missing)".into();
    }
    match (&c.label, codes) {
        (Some(l), false) if *l != c.display => format!("{} {}", c.display, l),
        _ => c.display.clone(),
    }
}

/// A text cut to `max` characters (with `…`), for one-line displays.
pub fn shorten(s: &str, max: usize) -> String {
    if s.chars().count() <= max {
        s.to_string()
    } else {
        s.chars().take(max.saturating_sub(1)).collect::<String>() + "…"
    }
}

/// Standard output for a result: buffered, written as it is produced, so
/// that a result with a million categories never sits in memory as text.
pub fn stdout() -> std::io::BufWriter<std::io::StdoutLock<'static>> {
    std::io::BufWriter::with_capacity(1 << 20, std::io::stdout().lock())
}

/// Optional float for CSV (empty when absent or not a number: an
/// undefined statistic is never written as one).
pub fn csv_num(x: Option<f64>) -> String {
    // Shortest round-trip text; very small or large numbers (a p-value of
    // 1e-200) in exponent form rather than hundreds of digits.
    x.filter(|v| v.is_finite())
        .map(|v| {
            if v != 0.0 && (v.abs() < 1e-6 || v.abs() >= 1e21) {
                format!("{v:e}")
            } else {
                format!("{v}")
            }
        })
        .unwrap_or_default()
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

/// A record's value as exported (CSV of `list` and `subset`): the exact
/// displayed text (implied decimals digit for digit, floats shortest
/// round-trip), empty for system-missing.
pub fn exact_value(c: &Category) -> String {
    match c.value {
        Value::Null => String::new(),
        _ => c.display.clone(),
    }
}

/// Plain text of a JSON scalar.
pub fn plain(j: &serde_json::Value) -> String {
    match j {
        serde_json::Value::Null => String::new(),
        serde_json::Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// A category's value as a CSV field (empty for system-missing).
pub fn plain_value(c: &Category) -> String {
    plain(&value_json(c))
}

/// The caption line above a table: title, label, weight and filter.
pub fn caption(
    title: &str,
    label: Option<&str>,
    weight: Option<&str>,
    filter: Option<&str>,
) -> String {
    let mut s = title.to_string();
    if let Some(l) = label {
        s += &format!(" — {l}");
    }
    if let Some(w) = weight {
        s += &format!("  (weighted by {w})");
    }
    if let Some(f) = filter {
        s += &format!("  [filter: {f}]");
    }
    s + "\n"
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn digits() {
        assert_eq!(group_digits(0), "0");
        assert_eq!(group_digits(1234567), "1,234,567");
        assert_eq!(microtab_analysis::group_float(-1234.5, 2), "-1,234.50");
        assert_eq!(microtab_analysis::group_float(-0.001, 2), "0.00");
        assert_eq!(csv_field("a,b"), "\"a,b\"");
    }

    /// Hand-checked: significant digits, not fixed decimals.
    #[test]
    fn significant_digits() {
        assert_eq!(fmt_sig(0.00087, 6), "0.00087");
        assert_eq!(fmt_sig(4107.142857, 6), "4,107.14");
        assert_eq!(fmt_sig(1234567.89, 6), "1,234,568");
        assert_eq!(fmt_sig(0.4, 6), "0.4");
        assert_eq!(fmt_sig(-2.5, 6), "-2.5");
        assert_eq!(fmt_sig(100.0, 6), "100");
        assert_eq!(fmt_sig(1.5e-12, 3), "1.50e-12");
        assert_eq!(fmt_sig(0.0, 6), "0");
        assert_eq!(shorten("abcdef", 4), "abc…");
    }
}
