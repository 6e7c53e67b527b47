//! Splitting a chunk of CSV into records and fields (RFC 4180).

use super::error::RowError;
use crate::error::Fix;

/// Where a field's bytes are: in the chunk itself, or (for quoted fields
/// with doubled quotes) unescaped into the scratch buffer.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Field {
    Buf(u32, u32),
    Scratch(u32, u32),
}

/// Reads records from a chunk that starts at a record boundary.
pub(crate) struct Tokenizer<'a> {
    buf: &'a [u8],
    pos: usize,
    delim: u8,
    /// Physical line (1-based) of the next byte.
    pub line: u64,
    pub scratch: Vec<u8>,
}

impl<'a> Tokenizer<'a> {
    pub fn new(buf: &'a [u8], delim: u8, line: u64) -> Self {
        Tokenizer {
            buf,
            pos: 0,
            delim,
            line,
            scratch: Vec::new(),
        }
    }

    /// Offset of the next record.
    #[inline]
    pub fn pos(&self) -> usize {
        self.pos
    }

    /// Moves past one single-line record that ended just before `end`
    /// (read by the caller).
    #[inline]
    pub fn skip_to(&mut self, end: usize) {
        self.pos = end;
        self.line += 1;
    }

    /// The bytes of a field returned by [`read_record`](Self::read_record).
    #[inline]
    pub fn get(&self, f: Field) -> &[u8] {
        match f {
            Field::Buf(s, e) => &self.buf[s as usize..e as usize],
            Field::Scratch(s, e) => &self.scratch[s as usize..e as usize],
        }
    }

    /// Reads the next non-empty record into `fields`; returns the line it
    /// started on, or `None` at the end of the chunk. Blank lines are skipped.
    pub fn read_record(&mut self, fields: &mut Vec<Field>) -> Result<Option<u64>, RowError> {
        fields.clear();
        self.scratch.clear();
        let buf = self.buf;
        // Skip blank lines.
        loop {
            if self.pos >= buf.len() {
                return Ok(None);
            }
            match buf[self.pos] {
                b'\n' => {
                    self.pos += 1;
                    self.line += 1;
                }
                b'\r' if buf.get(self.pos + 1) == Some(&b'\n') => {
                    self.pos += 2;
                    self.line += 1;
                }
                // A lone CR ending the file: a blank line too.
                b'\r' if self.pos + 1 == buf.len() => {
                    self.pos += 1;
                }
                _ => break,
            }
        }
        let start_line = self.line;
        loop {
            // At the start of a field.
            if self.pos < buf.len() && buf[self.pos] == b'"' {
                let f = self.quoted(start_line)?;
                fields.push(f);
                // After the closing quote: delimiter, end of record, or CRLF.
                match buf.get(self.pos) {
                    None => return Ok(Some(start_line)),
                    Some(&b) if b == self.delim => {
                        self.pos += 1;
                        continue;
                    }
                    Some(b'\n') => {
                        self.pos += 1;
                        self.line += 1;
                        return Ok(Some(start_line));
                    }
                    Some(b'\r') if buf.get(self.pos + 1) == Some(&b'\n') => {
                        self.pos += 2;
                        self.line += 1;
                        return Ok(Some(start_line));
                    }
                    Some(_) => {
                        return Err(RowError::Syntax {
 fix: Fix::None,
                            line: self.line,
                            reason: format!(
                                "expected a delimiter or end of line after the closing quote of field {}",
                                fields.len()
                            ),
                        })
                    }
                }
            }
            let s = self.pos;
            let mut i = s;
            while i < buf.len() {
                let b = buf[i];
                if b == self.delim || b == b'\n' {
                    break;
                }
                if b == b'"' {
                    return Err(RowError::Syntax {
 fix: Fix::None,
                        line: self.line,
                        reason: format!(
                            "quote inside unquoted field {} (quote the whole field and double the quote)",
                            fields.len() + 1
                        ),
                    });
                }
                if b == b'\r' && i + 1 < buf.len() && buf[i + 1] != b'\n' {
                    // Other readers end the record here, others keep the
                    // CR as data: neither is a safe guess.
                    return Err(RowError::Syntax {
 fix: Fix::None,
                        line: self.line,
                        reason: format!(
                            "a carriage return (CR) inside unquoted field {}: lines must end in LF or CRLF (quote the field if the CR is data)",
                            fields.len() + 1
                        ),
                    });
                }
                i += 1;
            }
            if i >= buf.len() {
                let e = if i > s && buf[i - 1] == b'\r' {
                    i - 1
                } else {
                    i
                };
                fields.push(Field::Buf(s as u32, e as u32));
                self.pos = i;
                return Ok(Some(start_line));
            }
            if buf[i] == b'\n' {
                let e = if i > s && buf[i - 1] == b'\r' {
                    i - 1
                } else {
                    i
                };
                fields.push(Field::Buf(s as u32, e as u32));
                self.pos = i + 1;
                self.line += 1;
                return Ok(Some(start_line));
            }
            fields.push(Field::Buf(s as u32, i as u32));
            self.pos = i + 1;
        }
    }

    /// Parses a quoted field starting at `self.pos` (the opening quote).
    fn quoted(&mut self, start_line: u64) -> Result<Field, RowError> {
        let buf = self.buf;
        let s = self.pos + 1;
        let mut i = s;
        let mut escaped = false;
        loop {
            match memchr::memchr2(b'"', b'\n', &buf[i..]) {
                None => {
                    return Err(RowError::Syntax {
                        fix: Fix::None,
                        line: start_line,
                        reason: "unterminated quoted field (missing closing quote)".into(),
                    })
                }
                Some(k) => {
                    let j = i + k;
                    if buf[j] == b'\n' {
                        self.line += 1;
                        i = j + 1;
                        continue;
                    }
                    if buf.get(j + 1) == Some(&b'"') {
                        escaped = true;
                        i = j + 2;
                        continue;
                    }
                    self.pos = j + 1;
                    if !escaped {
                        return Ok(Field::Buf(s as u32, j as u32));
                    }
                    let from = self.scratch.len();
                    let mut k = s;
                    while k < j {
                        self.scratch.push(buf[k]);
                        k += if buf[k] == b'"' { 2 } else { 1 };
                    }
                    return Ok(Field::Scratch(from as u32, self.scratch.len() as u32));
                }
            }
        }
    }
}

/// Finds the end of the last complete record in `buf` (just past its
/// newline), counting newlines in the whole buffer. Quotes toggle the
/// "inside a quoted field" state; a newline inside quotes is data.
pub(crate) fn last_record_end(buf: &[u8]) -> Option<usize> {
    if memchr::memchr(b'"', buf).is_none() {
        return memchr::memrchr(b'\n', buf).map(|p| p + 1);
    }
    let mut in_quote = false;
    let mut last = None;
    for p in memchr::memchr2_iter(b'"', b'\n', buf) {
        if buf[p] == b'"' {
            in_quote = !in_quote;
        } else if !in_quote {
            last = Some(p + 1);
        }
    }
    last
}

#[cfg(test)]
mod tests {
    use super::*;

    fn records(text: &str) -> Vec<Vec<String>> {
        let mut t = Tokenizer::new(text.as_bytes(), b',', 1);
        let mut f = Vec::new();
        let mut out = Vec::new();
        while t.read_record(&mut f).unwrap().is_some() {
            out.push(
                f.iter()
                    .map(|&x| String::from_utf8(t.get(x).to_vec()).unwrap())
                    .collect(),
            );
        }
        out
    }

    #[test]
    fn quoting_and_line_endings() {
        let r = records("a,\"b,c\",\"say \"\"hi\"\"\"\r\n1,\"x\ny\",\r\n\n3,,\"\"");
        assert_eq!(r[0], vec!["a", "b,c", "say \"hi\""]);
        assert_eq!(r[1], vec!["1", "x\ny", ""]);
        assert_eq!(r[2], vec!["3", "", ""]);
        assert_eq!(r.len(), 3);
    }

    #[test]
    fn boundary_respects_quotes() {
        let b = b"a,b\n\"x\ny\",2\n3,\"4\n";
        assert_eq!(last_record_end(b), Some(12));
        assert_eq!(last_record_end(b"1,2\n3,4"), Some(4));
    }

    #[test]
    fn lines_counted_through_quoted_newlines() {
        let text = "a\n\"x\ny\"\nbad\"q\n";
        let mut t = Tokenizer::new(text.as_bytes(), b',', 1);
        let mut f = Vec::new();
        assert_eq!(t.read_record(&mut f).unwrap(), Some(1));
        assert_eq!(t.read_record(&mut f).unwrap(), Some(2));
        match t.read_record(&mut f) {
            Err(RowError::Syntax { line, .. }) => assert_eq!(line, 4),
            other => panic!("{other:?}"),
        }
    }
}
