//! Tokens of setup-file statements, shared by the three languages: each
//! language cuts its text into statements (and drops its comments) itself,
//! then tokenizes a statement here.

/// One token.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Tok {
    /// A name or keyword (`AGE`, `$5.`, `%10.2f`, `F8.2`, `.a`, `_column`).
    Word(String),
    /// A number as written (`12`, `1.5`, `.4`, `10.`).
    Num(String),
    /// A quoted string, quotes removed and doubled quotes undone.
    Str(String),
    /// Any other character (`-`, `(`, `/`, `=`, `:`, `,`).
    Sym(char),
}

/// A token and the line of the setup file it starts on (1-based).
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Token {
    pub tok: Tok,
    pub line: usize,
}

impl Token {
    /// Whether the token is the word `w` (any case).
    pub fn is(&self, w: &str) -> bool {
        matches!(&self.tok, Tok::Word(x) if x.eq_ignore_ascii_case(w))
    }

    /// Whether the token is the character `c`.
    pub fn sym(&self, c: char) -> bool {
        self.tok == Tok::Sym(c)
    }

    /// The token as written, for messages.
    pub fn show(&self) -> String {
        match &self.tok {
            Tok::Word(w) | Tok::Num(w) => w.clone(),
            Tok::Str(s) => format!("{s:?}"),
            Tok::Sym(c) => c.to_string(),
        }
    }

    /// A word's text.
    pub fn word(&self) -> Option<&str> {
        match &self.tok {
            Tok::Word(w) => Some(w),
            _ => None,
        }
    }

    /// A whole number (`12`).
    pub fn int(&self) -> Option<usize> {
        match &self.tok {
            Tok::Num(n) => n.parse().ok(),
            _ => None,
        }
    }
}

/// A statement's tokens and a position in them.
pub(crate) struct Cursor {
    pub t: Vec<Token>,
    pub i: usize,
    /// The statement's first line (for a message at its end).
    pub line: usize,
}

impl Cursor {
    pub fn new(t: Vec<Token>, line: usize) -> Cursor {
        Cursor { t, i: 0, line }
    }

    pub fn peek(&self) -> Option<&Token> {
        self.t.get(self.i)
    }

    pub fn peek_at(&self, k: usize) -> Option<&Token> {
        self.t.get(self.i + k)
    }

    pub fn next(&mut self) -> Option<Token> {
        let t = self.t.get(self.i).cloned();
        self.i += usize::from(t.is_some());
        t
    }

    pub fn done(&self) -> bool {
        self.i >= self.t.len()
    }

    /// The line of the current token (or the statement's last line).
    pub fn at(&self) -> usize {
        self.peek().or(self.t.last()).map_or(self.line, |t| t.line)
    }

    /// The words that come next (a list of names).
    pub fn words(&mut self) -> Vec<String> {
        let mut out = Vec::new();
        while let Some(w) = self.peek().and_then(|t| t.word()).map(str::to_string) {
            self.i += 1;
            out.push(w);
        }
        out
    }

    /// Takes the character `c` if it comes next.
    pub fn eat(&mut self, c: char) -> bool {
        let yes = self.peek().is_some_and(|t| t.sym(c));
        self.i += usize::from(yes);
        yes
    }

    /// Takes the word `w` (any case) if it comes next.
    pub fn eat_word(&mut self, w: &str) -> bool {
        let yes = self.peek().is_some_and(|t| t.is(w));
        self.i += usize::from(yes);
        yes
    }

    /// A value: a number (with its sign), a string, or a word such as
    /// `.a`, `LO`, `HI`; `None` at anything else.
    pub fn value(&mut self) -> Option<(String, bool)> {
        let neg = self.peek().is_some_and(|t| t.sym('-'))
            && matches!(self.peek_at(1).map(|t| &t.tok), Some(Tok::Num(_)));
        if neg {
            self.i += 1;
        }
        match self.peek().map(|t| t.tok.clone()) {
            Some(Tok::Num(n)) => {
                self.i += 1;
                Some((if neg { format!("-{n}") } else { n }, false))
            }
            // Text values may be joined by `+` too (SPSS).
            Some(Tok::Str(_)) => self.string().map(|s| (s, true)),
            _ => None,
        }
    }

    /// Strings joined by `+` (SPSS), or one string.
    pub fn string(&mut self) -> Option<String> {
        let mut out = match self.peek().map(|t| t.tok.clone()) {
            Some(Tok::Str(s)) => s,
            _ => return None,
        };
        self.i += 1;
        while self.peek().is_some_and(|t| t.sym('+'))
            && matches!(self.peek_at(1).map(|t| &t.tok), Some(Tok::Str(_)))
        {
            if let Some(Tok::Str(s)) = self.peek_at(1).map(|t| t.tok.clone()) {
                out.push_str(&s);
            }
            self.i += 2;
        }
        Some(out)
    }

    /// A message about the current token.
    pub fn err(&self, what: &str) -> String {
        match self.peek() {
            Some(t) => format!("line {}: {what}, found {}", t.line, t.show()),
            None => format!("line {}: {what}, found the statement's end", self.at()),
        }
    }
}

fn word_start(c: char) -> bool {
    c.is_alphabetic() || matches!(c, '_' | '$' | '%' | '#')
}

fn word_char(c: char) -> bool {
    c.is_alphanumeric() || matches!(c, '_' | '.' | '$' | '#' | '@')
}

/// The tokens of `text`, whose first line is line `line` of the file; an
/// unterminated string is an error giving its line. Stata's compound
/// quotes (`` `"…"' ``) are strings too.
pub(crate) fn tokens(text: &str, line: usize) -> std::result::Result<Vec<Token>, String> {
    tokens_with(text, line, true)
}

/// Stata's tokens: `'` opens no string (it closes macros and compound
/// quotes), so a macro reference is a few symbols, not an open string.
pub(crate) fn stata_tokens(text: &str, line: usize) -> std::result::Result<Vec<Token>, String> {
    tokens_with(text, line, false)
}

fn tokens_with(
    text: &str,
    line: usize,
    single_quotes: bool,
) -> std::result::Result<Vec<Token>, String> {
    let c: Vec<char> = text.chars().collect();
    let mut out = Vec::new();
    let (mut i, mut line) = (0, line);
    while i < c.len() {
        let ch = c[i];
        if ch == '\n' {
            line += 1;
            i += 1;
            continue;
        }
        if ch.is_whitespace() {
            i += 1;
            continue;
        }
        let at = line;
        if ch == '`' && c.get(i + 1) == Some(&'"') {
            // Stata's compound quotes: `"…"'.
            let mut j = i + 2;
            let mut s = String::new();
            while j < c.len() && !(c[j] == '"' && c.get(j + 1) == Some(&'\'')) {
                if c[j] == '\n' {
                    line += 1;
                }
                s.push(c[j]);
                j += 1;
            }
            if j >= c.len() {
                return Err(format!("line {at}: a string opened with `\" is not closed"));
            }
            out.push(Token {
                tok: Tok::Str(s),
                line: at,
            });
            i = j + 2;
            continue;
        }
        if (ch == '\'' && single_quotes) || ch == '"' {
            let mut j = i + 1;
            let mut s = String::new();
            loop {
                if j >= c.len() {
                    return Err(format!(
                        "line {at}: a string opened with {ch} is not closed"
                    ));
                }
                if c[j] == ch {
                    if c.get(j + 1) == Some(&ch) {
                        s.push(ch);
                        j += 2;
                        continue;
                    }
                    break;
                }
                if c[j] == '\n' {
                    line += 1;
                }
                s.push(c[j]);
                j += 1;
            }
            out.push(Token {
                tok: Tok::Str(s),
                line: at,
            });
            i = j + 1;
            continue;
        }
        let digit = |k: usize| c.get(k).is_some_and(|d| d.is_ascii_digit());
        if ch.is_ascii_digit() || (ch == '.' && digit(i + 1)) {
            let mut j = i;
            while j < c.len() && (c[j].is_ascii_digit() || c[j] == '.') {
                j += 1;
            }
            // An exponent (1e5, 2.5E-3).
            if j < c.len()
                && (c[j] == 'e' || c[j] == 'E')
                && (digit(j + 1) || (matches!(c.get(j + 1), Some('-' | '+')) && digit(j + 2)))
            {
                j += 2;
                while digit(j) {
                    j += 1;
                }
            }
            out.push(Token {
                tok: Tok::Num(c[i..j].iter().collect()),
                line: at,
            });
            i = j;
            continue;
        }
        if word_start(ch)
            || (ch == '.' && c.get(i + 1).is_some_and(|d| d.is_alphabetic() || *d == '_'))
        {
            let mut j = i + 1;
            while j < c.len() && word_char(c[j]) {
                j += 1;
            }
            out.push(Token {
                tok: Tok::Word(c[i..j].iter().collect()),
                line: at,
            });
            i = j;
            continue;
        }
        out.push(Token {
            tok: Tok::Sym(ch),
            line: at,
        });
        i += 1;
    }
    Ok(out)
}

/// `text` with `/* … */` comments blanked (newlines kept, so lines keep
/// their numbers); quotes are respected. With `line_comments`, `//` after a
/// blank or at a line's start blanks the rest of the line (Stata), and
/// `///` joins the next line.
pub(crate) fn strip_comments(text: &str, line_comments: bool) -> String {
    let c: Vec<char> = text.chars().collect();
    let mut out = String::with_capacity(text.len());
    let mut i = 0;
    let mut quote: Option<char> = None;
    while i < c.len() {
        let ch = c[i];
        if let Some(q) = quote {
            out.push(ch);
            if ch == q || ch == '\n' {
                quote = None;
            }
            i += 1;
            continue;
        }
        if ch == '/' && c.get(i + 1) == Some(&'*') {
            let mut j = i + 2;
            while j < c.len() && !(c[j] == '*' && c.get(j + 1) == Some(&'/')) {
                if c[j] == '\n' {
                    out.push('\n');
                }
                j += 1;
            }
            out.push(' ');
            i = (j + 2).min(c.len());
            continue;
        }
        let after_blank = i == 0 || c[i - 1].is_whitespace();
        if line_comments && ch == '/' && c.get(i + 1) == Some(&'/') && after_blank {
            let joins = c.get(i + 2) == Some(&'/');
            let mut j = i;
            while j < c.len() && c[j] != '\n' {
                j += 1;
            }
            if joins && j < c.len() {
                // `///`: the statement goes on on the next line.
                out.push(' ');
                out.push('\u{1}');
                i = j;
                continue;
            }
            i = j;
            continue;
        }
        if ch == '"' || ch == '\'' {
            // Stata's `'` closes macros and compound quotes; only `"` and,
            // outside Stata, `'` open strings.
            if ch == '"' || !line_comments {
                quote = Some(ch);
            }
        }
        out.push(ch);
        i += 1;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn toks(s: &str) -> Vec<Tok> {
        tokens(s, 1).unwrap().into_iter().map(|t| t.tok).collect()
    }

    #[test]
    fn tokens_of_each_language() {
        use Tok::*;
        assert_eq!(
            toks("HWTSUPP 38-47 (4)"),
            vec![
                Word("HWTSUPP".into()),
                Num("38".into()),
                Sym('-'),
                Num("47".into()),
                Sym('('),
                Num("4".into()),
                Sym(')')
            ]
        );
        assert_eq!(
            toks("RECTYPE $ 1-1 HWT 2-9 .4 @10 N $char5. YEAR_f."),
            vec![
                Word("RECTYPE".into()),
                Word("$".into()),
                Num("1".into()),
                Sym('-'),
                Num("1".into()),
                Word("HWT".into()),
                Num("2".into()),
                Sym('-'),
                Num("9".into()),
                Num(".4".into()),
                Sym('@'),
                Num("10".into()),
                Word("N".into()),
                Word("$char5.".into()),
                Word("YEAR_f.".into())
            ]
        );
        assert_eq!(
            toks(r#"_column(3) str10 name :nm %10s "It's" `"say "hi""' 'a''b' .a"#),
            vec![
                Word("_column".into()),
                Sym('('),
                Num("3".into()),
                Sym(')'),
                Word("str10".into()),
                Word("name".into()),
                Sym(':'),
                Word("nm".into()),
                Word("%10s".into()),
                Str("It's".into()),
                Str("say \"hi\"".into()),
                Str("a'b".into()),
                Word(".a".into()),
            ]
        );
        assert!(tokens("x 'open", 3).unwrap_err().starts_with("line 3:"));
    }

    #[test]
    fn comments_blanked_lines_kept() {
        let s = strip_comments("a /* x\ny */ b // c\nd \"//e\"", true);
        assert_eq!(s.lines().count(), 3);
        assert!(s.contains('a') && s.contains('b') && !s.contains('c') && s.contains("\"//e\""));
        assert!(!strip_comments("a /* b */ c", false).contains('b'));
    }
}
