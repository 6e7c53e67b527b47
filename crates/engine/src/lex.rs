//! The one lexer of microtab's text grammars: filters (`AGE(25-64)
//! SEX(2)`), temporary recodes (`AGE(r: 0-17 "Child"; 18-64)`), the rules
//! of `recode`, expressions (`compute`) and lists of names or grouping
//! arguments (`AGE SEX,"Body Mass (g)"`). Each grammar reads its own
//! structure, but quotes, parentheses and separators are found here, so a
//! name is written the same way in all of them.
//!
//! **Quoting.** A name holding spaces, commas, parentheses, quotes or
//! operator signs is written between backticks (`` `Body Mass (g)` ``); in
//! filters, recodes and lists, where a name is expected, double quotes do
//! too (`"Body Mass (g)"(3000-4000)`). Double quotes around a value make it
//! text (`STATE("New York")`, `S == "Ohio"`). Inside quotes, the quote
//! character itself is doubled (`` `a``b` `` is the name a`b, `"say
//! ""hi"""` the text say "hi"); separators and parentheses are text.

/// A character of a text, as [`Walk`] yields it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Ch {
    /// Its byte offset.
    pub at: usize,
    /// The character.
    pub c: char,
    /// Outside quotes (a quote mark opening or closing them is not).
    pub out: bool,
    /// The bytes of the text it stands for (a doubled quote mark is one
    /// character of two marks).
    pub len: usize,
}

/// Walks a text character by character, telling which characters stand
/// outside quotes. A doubled quote mark inside quotes of its kind is part
/// of the quoted text.
pub(crate) struct Walk<'a> {
    s: &'a str,
    i: usize,
    /// The quote mark of the quotes open at this point.
    pub quote: Option<char>,
}

/// A [`Walk`] over `s`.
pub(crate) fn walk(s: &str) -> Walk<'_> {
    Walk {
        s,
        i: 0,
        quote: None,
    }
}

impl Iterator for Walk<'_> {
    type Item = Ch;

    fn next(&mut self) -> Option<Ch> {
        let c = self.s[self.i..].chars().next()?;
        let at = self.i;
        self.i += c.len_utf8();
        let out = match self.quote {
            None if is_quote(c) => {
                self.quote = Some(c);
                false
            }
            None => true,
            Some(q) if c == q => {
                if self.s[self.i..].starts_with(q) {
                    // A doubled quote mark: one of the text's characters;
                    // its twin is consumed with it.
                    self.i += q.len_utf8();
                } else {
                    self.quote = None;
                }
                false
            }
            Some(_) => false,
        };
        Some(Ch {
            at,
            c,
            out,
            len: self.i - at,
        })
    }
}

/// Whether `c` opens quotes (`"` or `` ` ``).
pub(crate) fn is_quote(c: char) -> bool {
    c == '"' || c == '`'
}

/// Parenthesis depth outside quotes, following a [`Walk`].
#[derive(Debug, Default)]
pub(crate) struct Depth(pub i32);

impl Depth {
    /// Feeds one character; whether it stands outside quotes and
    /// parentheses (a parenthesis itself does not).
    pub fn top(&mut self, ch: Ch) -> bool {
        if !ch.out {
            return false;
        }
        match ch.c {
            '(' => {
                self.0 += 1;
                false
            }
            ')' => {
                self.0 -= 1;
                false
            }
            _ => self.0 == 0,
        }
    }
}

/// The pieces of `s` between separators (`sep`) that stand outside
/// quotes and, with `nest`, outside parentheses. Pieces are not trimmed;
/// there is one more piece than separators.
pub(crate) fn split(s: &str, nest: bool, sep: impl Fn(char) -> bool) -> Vec<&str> {
    let mut out = Vec::new();
    let (mut start, mut depth) = (0, Depth::default());
    for ch in walk(s) {
        let top = if nest { depth.top(ch) } else { ch.out };
        if top && sep(ch.c) {
            out.push(&s[start..ch.at]);
            start = ch.at + ch.c.len_utf8();
        }
    }
    out.push(&s[start..]);
    out
}

/// The byte offset of the `)` that closes a parenthesis opened just before
/// `s` (parentheses in quotes are text), if any.
pub(crate) fn group_end(s: &str) -> Option<usize> {
    let mut depth = Depth::default();
    walk(s).find_map(|ch| {
        let close = ch.out && ch.c == ')' && depth.0 == 0;
        depth.top(ch);
        close.then_some(ch.at)
    })
}

/// The quoted text at the start of `s` (which starts with `"` or
/// `` ` ``), its doubled quote marks made single, and what follows the
/// closing quote; `None` when `s` does not start with quotes or they are
/// not closed.
pub(crate) fn quoted(s: &str) -> Option<(String, &str)> {
    let q = s.chars().next().filter(|&c| is_quote(c))?;
    let mut w = walk(s);
    w.next();
    let mut text = String::new();
    while let Some(ch) = w.next() {
        if w.quote.is_none() {
            return Some((text, &s[ch.at + q.len_utf8()..]));
        }
        text.push(ch.c);
    }
    None
}

/// `s` trimmed and, when it is one quoted text whole, that text.
pub(crate) fn unquote(s: &str) -> String {
    let t = s.trim();
    match quoted(t) {
        Some((text, "")) => text,
        _ => t.to_string(),
    }
}

/// `name` as the grammars read it whole: between backticks (a backtick in
/// it doubled).
pub(crate) fn quote_name(name: &str) -> String {
    format!("`{}`", name.replace('`', "``"))
}

/// A rule or group ending in a quoted label (`18-64 "Adult"`): the text
/// before the label (trimmed) and the label. Not a label: a quoted text
/// that is the whole rule, or that follows one of `after` (then it is a
/// value: `Ohio,"New York"`, `S = "Ohio"`).
pub(crate) fn trailing_label<'a>(s: &'a str, after: &[char]) -> Option<(&'a str, String)> {
    let s = s.trim();
    let (mut w, mut open) = (walk(s), None);
    loop {
        let before = w.quote;
        let Some(ch) = w.next() else { break };
        if before.is_none() && ch.c == '"' {
            open = Some(ch.at);
        }
    }
    let at = open.filter(|_| w.quote.is_none())?;
    let (label, rest) = quoted(&s[at..])?;
    let head = s[..at].trim_end();
    (rest.is_empty() && !head.is_empty() && !head.ends_with(after)).then_some((head, label))
}

/// Whether `c` may start an unquoted name.
pub(crate) fn is_name_start(c: char) -> bool {
    c.is_alphabetic() || c == '_'
}

/// Whether `c` may continue an unquoted name in an expression.
pub(crate) fn is_name_char(c: char) -> bool {
    c.is_alphanumeric() || matches!(c, '_' | '.' | '$' | '#' | '@')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quotes_of_either_kind_with_doubled_marks() {
        assert_eq!(
            quoted("`Body Mass (g)`(1)"),
            Some(("Body Mass (g)".into(), "(1)"))
        );
        assert_eq!(
            quoted(r#""say ""hi""" x"#),
            Some((r#"say "hi""#.into(), " x"))
        );
        assert_eq!(quoted("`a``b`"), Some(("a`b".into(), "")));
        assert_eq!(quoted("`a \"b` c"), Some(("a \"b".into(), " c")));
        assert_eq!(quoted("\"open"), None);
        assert_eq!(quoted("plain"), None);
        assert_eq!(unquote(" \"a, b\" "), "a, b");
        assert_eq!(unquote("\"a\"b"), "\"a\"b");
        for name in ["a`b", "Body Mass (g)", "x,\"y\"", "``"] {
            assert_eq!(unquote(&quote_name(name)), name);
        }
    }

    #[test]
    fn splits_outside_quotes_and_parentheses() {
        let comma = |c: char| c == ',';
        assert_eq!(
            split("a,`b,c`,\"d,e\",f(1,2)", true, comma),
            ["a", "`b,c`", "\"d,e\"", "f(1,2)"]
        );
        assert_eq!(split("f(1,2)", false, comma), ["f(1", "2)"]);
        assert_eq!(split("`a``,b`,c", true, comma), ["`a``,b`", "c"]);
        assert_eq!(split("", true, comma), [""]);
        assert_eq!(group_end("1, \")\", (2))) x"), Some(11));
        assert_eq!(group_end("1, (2"), None);
    }

    #[test]
    fn a_doubled_quote_mark_is_one_character_of_two_bytes() {
        let chs: Vec<Ch> = walk(r#"a"b""c"d"#).collect();
        let text: String = chs.iter().map(|ch| ch.c).collect();
        assert_eq!(text, r#"a"b"c"d"#);
        let spans: String = (chs.iter().map(|ch| &r#"a"b""c"d"#[ch.at..ch.at + ch.len])).collect();
        assert_eq!(spans, r#"a"b""c"d"#);
        let outside: Vec<bool> = chs.iter().map(|ch| ch.out).collect();
        assert_eq!(outside, [true, false, false, false, false, false, true]);
    }

    #[test]
    fn finds_trailing_labels() {
        let after = [',', '-'];
        assert_eq!(
            trailing_label("18-64 \"Adult\"", &after),
            Some(("18-64", "Adult".into()))
        );
        assert_eq!(
            trailing_label(r#"1 "a ""b"" c""#, &after),
            Some(("1", r#"a "b" c"#.into()))
        );
        assert_eq!(trailing_label("Ohio,\"New York\"", &after), None);
        assert_eq!(trailing_label("\"Utah\"", &after), None);
        assert_eq!(
            trailing_label("\"A B\" \"lab\"", &after),
            Some(("\"A B\"", "lab".into()))
        );
        assert_eq!(trailing_label("18-64", &after), None);
    }
}
