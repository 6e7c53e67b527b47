//! Text for the human-readable front ends (the terminal tables, the HTML
//! codebook, the analysis page): escaping and number formats, one copy
//! for all of them.

/// Escapes text for HTML element content and quoted attribute values.
pub fn html_escape(s: &str) -> String {
    let mut o = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => o.push_str("&amp;"),
            '<' => o.push_str("&lt;"),
            '>' => o.push_str("&gt;"),
            '"' => o.push_str("&quot;"),
            '\'' => o.push_str("&#39;"),
            c => o.push(c),
        }
    }
    o
}

/// A count with thousands separators: `14,081,466`.
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

/// `x` for people: `sig` significant digits (never fewer than the whole
/// integer part), thousands separators, no trailing zeros after the point;
/// scientific notation beyond 10^15 or below 10^-9. `0.00087` stays
/// `0.00087` where a fixed two decimals said `0.00`.
pub fn fmt_sig(x: f64, sig: i32) -> String {
    if !x.is_finite() {
        return format!("{x}");
    }
    if x == 0.0 {
        return "0".into();
    }
    let mag = x.abs().log10().floor() as i32;
    if !(-9..15).contains(&mag) {
        return format!("{:.*e}", (sig - 1).max(0) as usize, x);
    }
    let dec = (sig - 1 - mag).max(0) as usize;
    let s = group_float(x, dec);
    if s.contains('.') {
        s.trim_end_matches('0').trim_end_matches('.').to_string()
    } else {
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escapes_markup_and_quotes() {
        assert_eq!(
            html_escape(r#"<a href="x">Tom's & Jerry</a>"#),
            "&lt;a href=&quot;x&quot;&gt;Tom&#39;s &amp; Jerry&lt;/a&gt;"
        );
    }

    #[test]
    fn numbers_for_people() {
        assert_eq!(group_digits(14081466), "14,081,466");
        assert_eq!(group_digits(999), "999");
        assert_eq!(group_float(-1234.5, 2), "-1,234.50");
        assert_eq!(group_float(-0.001, 2), "0.00");
        assert_eq!(fmt_sig(4.0 / 3.0, 6), "1.33333");
        assert_eq!(fmt_sig(0.00087, 2), "0.00087");
        assert_eq!(fmt_sig(1234567.0, 3), "1,234,567");
    }
}
