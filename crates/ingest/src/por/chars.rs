//! The characters of a portable file: lines of 80 columns read as one
//! stream (line ends dropped, a short line padded with spaces to 80),
//! and the file's own character set, translated by the table in its
//! header to ASCII and to the bytes of the text encoding.

use crate::options::Encoding;
use std::io::{self, Read};

/// Columns of a line.
const LINE: usize = 80;

/// Characters expanded at a time.
const BLOCK: usize = 1 << 16;

/// Where a run of characters of a block came from.
#[derive(Debug, Clone, Copy)]
struct Run {
    /// Its first character's index in the block.
    start: usize,
    /// The file offset of its first byte (for padding: of the line end).
    offset: u64,
    /// Whether it pads a short line.
    pad: bool,
}

/// Where a character was read: its block and index in it.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Mark(u64, usize);

/// The characters of a portable file, a block at a time: its bytes with
/// the line ends dropped and each short line padded to 80 columns with
/// the file's space.
pub(crate) struct Chars<R> {
    r: R,
    raw: Box<[u8]>,
    rpos: usize,
    rend: usize,
    /// The file offset of `raw[0]`.
    rbase: u64,
    /// Characters read on the current line.
    col: usize,
    /// A CR ended the bytes read so far: a LF after it is the same line
    /// end.
    after_cr: bool,
    eof: bool,
    /// The byte short lines are padded with.
    space: u8,
    /// The current block of characters, and the next one's index.
    buf: Vec<u8>,
    i: usize,
    /// Blocks before the current one.
    block: u64,
    runs: Vec<Run>,
    /// The previous block's runs (a field read across two blocks).
    last_runs: Vec<Run>,
}

impl<R: Read> Chars<R> {
    pub(crate) fn new(r: R) -> Chars<R> {
        Chars {
            r,
            raw: vec![0u8; BLOCK].into_boxed_slice(),
            rpos: 0,
            rend: 0,
            rbase: 0,
            col: 0,
            after_cr: false,
            eof: false,
            space: b' ',
            buf: Vec::with_capacity(BLOCK + 2 * LINE),
            i: 0,
            block: 0,
            runs: Vec::new(),
            last_runs: Vec::new(),
        }
    }

    /// The next character; `None` at the end of the file.
    #[inline]
    pub(crate) fn next(&mut self) -> io::Result<Option<u8>> {
        if self.i == self.buf.len() && !self.refill()? {
            return Ok(None);
        }
        self.i += 1;
        Ok(Some(self.buf[self.i - 1]))
    }

    /// The characters left in the current block (none at its end: see
    /// [`Chars::take`]).
    #[inline]
    pub(crate) fn rest(&self) -> &[u8] {
        &self.buf[self.i..]
    }

    /// Moves past `n` characters of [`Chars::rest`].
    #[inline]
    pub(crate) fn skip(&mut self, n: usize) {
        self.i += n;
    }

    /// The next characters, at most `max` (`max` ≥ 1), from the current
    /// block or the next one; empty at the end of the file.
    pub(crate) fn take(&mut self, max: usize) -> io::Result<&[u8]> {
        if self.i == self.buf.len() && !self.refill()? {
            return Ok(&[]);
        }
        let k = max.min(self.buf.len() - self.i);
        self.i += k;
        Ok(&self.buf[self.i - k..self.i])
    }

    /// Where the next character is.
    #[inline]
    pub(crate) fn mark(&self) -> Mark {
        if self.i < self.buf.len() {
            Mark(self.block, self.i)
        } else {
            // The next block's first.
            Mark(self.block + 1, 0)
        }
    }

    /// The file offset of the character at `m` (of the line end, for a
    /// padding space; the next character's when `m` is older than the
    /// previous block).
    pub(crate) fn offset_of(&self, m: Mark) -> u64 {
        let runs = match self.block.checked_sub(m.0) {
            Some(0) => &self.runs,
            Some(1) => &self.last_runs,
            _ => return self.offset(),
        };
        let k = runs.partition_point(|r| r.start <= m.1);
        match k.checked_sub(1).map(|k| runs[k]) {
            Some(r) if r.pad => r.offset,
            Some(r) => r.offset + (m.1 - r.start) as u64,
            None => self.offset(),
        }
    }

    /// The file offset of the next character.
    pub(crate) fn offset(&self) -> u64 {
        if self.i < self.buf.len() {
            self.offset_of(self.mark())
        } else {
            self.rbase + self.rpos as u64
        }
    }

    /// Pads short lines with `b` from the next character on (a file's
    /// space, once its table is read).
    pub(crate) fn set_space(&mut self, b: u8) {
        self.space = b;
        for k in 0..self.runs.len() {
            let r = self.runs[k];
            if r.pad {
                let end = self.runs.get(k + 1).map_or(self.buf.len(), |n| n.start);
                for c in &mut self.buf[r.start.max(self.i)..end.max(self.i)] {
                    *c = b;
                }
            }
        }
    }

    /// The next block of characters; `false` at the end of the file.
    fn refill(&mut self) -> io::Result<bool> {
        std::mem::swap(&mut self.runs, &mut self.last_runs);
        self.runs.clear();
        self.buf.clear();
        self.i = 0;
        self.block += 1;
        while self.buf.len() < BLOCK {
            if self.rpos == self.rend {
                if self.eof {
                    break;
                }
                self.rbase += self.rend as u64;
                self.rpos = 0;
                self.rend = loop {
                    match self.r.read(&mut self.raw) {
                        Ok(n) => break n,
                        Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                        Err(e) => return Err(e),
                    }
                };
                if self.rend == 0 {
                    self.eof = true;
                    break;
                }
            }
            let rest = &self.raw[self.rpos..self.rend];
            if self.after_cr {
                self.after_cr = false;
                if rest[0] == b'\n' {
                    self.rpos += 1;
                    continue;
                }
            }
            let k = memchr::memchr2(b'\r', b'\n', rest).unwrap_or(rest.len());
            if k > 0 {
                self.runs.push(Run {
                    start: self.buf.len(),
                    offset: self.rbase + self.rpos as u64,
                    pad: false,
                });
                self.buf.extend_from_slice(&rest[..k]);
                self.col += k;
                self.rpos += k;
            }
            if k < rest.len() {
                // A line end: CR, LF or CR LF.
                self.after_cr = rest[k] == b'\r';
                let offset = self.rbase + self.rpos as u64;
                self.rpos += 1;
                if self.col < LINE {
                    self.runs.push(Run {
                        start: self.buf.len(),
                        offset,
                        pad: true,
                    });
                    self.buf
                        .resize(self.buf.len() + LINE - self.col, self.space);
                }
                self.col = 0;
            }
        }
        Ok(!self.buf.is_empty())
    }
}

/// The portable character at position `i` of the translation table
/// (positions 64–188; the others are control characters or reserved).
/// Position 151, a pound sign in the format's description, holds `#` in
/// the files SPSS and ReadStat write.
fn portable(i: usize) -> Option<char> {
    const SYMBOLS: &str = ".<(+|&[]!$*);^-/|,%_>?`:#@'=\"≤□±■°†~–└┌≥⁰¹²³⁴⁵⁶⁷⁸⁹┘┐≠—⁽⁾⸸{}\\¢•";
    match i {
        64..=73 => Some((b'0' + (i - 64) as u8) as char),
        74..=99 => Some((b'A' + (i - 74) as u8) as char),
        100..=125 => Some((b'a' + (i - 100) as u8) as char),
        126 => Some(' '),
        127..=188 => SYMBOLS.chars().nth(i - 127),
        _ => None,
    }
}

/// The bytes of `c` in `enc` (`?` where it has none).
fn local_bytes(c: char, enc: Encoding) -> Vec<u8> {
    if c.is_ascii() {
        return vec![c as u8];
    }
    let coded = |e: &'static encoding_rs::Encoding| {
        let mut utf8 = [0u8; 4];
        let (b, _, bad) = e.encode(c.encode_utf8(&mut utf8));
        if bad {
            b"?".to_vec()
        } else {
            b.into_owned()
        }
    };
    match enc {
        Encoding::Utf8 => c.to_string().into_bytes(),
        Encoding::Latin1 if (c as u32) < 0x100 => vec![c as u32 as u8],
        Encoding::Latin1 => b"?".to_vec(),
        Encoding::Windows1252 => coded(encoding_rs::WINDOWS_1252),
        Encoding::Other(e) => coded(e),
    }
}

/// What each byte of the file means, by its translation table.
pub(crate) struct Table {
    /// Its ASCII character (0 when it is no portable character with one).
    pub ascii: [u8; 256],
    /// The bytes it becomes in text, in the text encoding (a byte the
    /// table does not name stays itself).
    pub local: Vec<Vec<u8>>,
    /// Whether it is a byte beyond ASCII the table does not name (its
    /// encoding is not the table's to say).
    pub foreign: [bool; 256],
    /// The byte that stands for a space (short lines are padded with it).
    pub space: u8,
}

impl Table {
    /// The table of the 256 codes at positions 0–255 of a file's
    /// translation table: the byte at position `i` stands for portable
    /// character `i`. Positions holding the byte of `0` (position 64) are
    /// characters the file's set lacks; where a byte stands at several
    /// positions the first counts (PSPP puts the digits' bytes at the
    /// superscripts' positions too).
    pub(crate) fn new(table: &[u8], enc: Encoding) -> Table {
        let mut t = Table {
            ascii: [0; 256],
            local: (0..=255u8).map(|b| vec![b]).collect(),
            foreign: [false; 256],
            space: b' ',
        };
        for b in 0x80..0x100 {
            t.foreign[b] = true;
        }
        let zero = table[64];
        let mut named = [false; 256];
        for (i, &b) in table.iter().enumerate().take(189).skip(64) {
            if (i != 64 && b == zero) || named[b as usize] {
                continue;
            }
            let Some(ch) = portable(i) else { continue };
            named[b as usize] = true;
            t.ascii[b as usize] = if ch.is_ascii() { ch as u8 } else { 0 };
            t.local[b as usize] = local_bytes(ch, enc);
            t.foreign[b as usize] = false;
        }
        // Short lines padded with the byte of a space (where the table
        // puts it, if it counts there; else any byte that is one).
        t.space = if t.ascii[table[126] as usize] == b' ' {
            table[126]
        } else {
            (0..=255u8)
                .find(|&b| t.ascii[b as usize] == b' ')
                .unwrap_or(b' ')
        };
        t
    }
}

/// The characters `SPSSPORT` spells, as positions of the portable set.
const SIGNATURE: [usize; 8] = [92, 89, 92, 92, 89, 88, 91, 93];

/// Whether the 464 characters after the splash (`head`, the file's first
/// bytes) hold a translation table and the signature `SPSSPORT` in the
/// file's characters as that table gives them.
pub(crate) fn signed(head: &[u8]) -> bool {
    let mut c = Chars::new(head);
    let mut codes = Vec::with_capacity(464);
    while codes.len() < 464 {
        match c.next() {
            Ok(Some(x)) => codes.push(x),
            _ => return false,
        }
    }
    let table = &codes[200..456];
    let sig = &codes[456..464];
    // S, P, O, R and T must be five characters, each where the table
    // puts it.
    let mut letters: Vec<u8> = [92, 89, 88, 91, 93].iter().map(|&i| table[i]).collect();
    letters.sort_unstable();
    letters.dedup();
    letters.len() == 5 && SIGNATURE.iter().zip(sig).all(|(&i, &s)| table[i] == s)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn all(bytes: &[u8]) -> Vec<u8> {
        let mut c = Chars::new(bytes);
        let mut out = Vec::new();
        while let Some(x) = c.next().unwrap() {
            out.push(x);
        }
        out
    }

    #[test]
    fn lines_are_one_stream_and_short_ones_padded() {
        let line = |ch: u8| vec![ch; 80];
        let mut f = line(b'a');
        f.extend_from_slice(b"\r\n");
        f.extend_from_slice(b"bb\n");
        f.extend(line(b'c'));
        f.extend_from_slice(b"\r");
        f.extend_from_slice(b"d");
        let got = all(&f);
        assert_eq!(got.len(), 80 + 80 + 80 + 1);
        assert!(got[..80].iter().all(|&x| x == b'a'));
        assert_eq!(&got[80..82], b"bb");
        assert!(got[82..160].iter().all(|&x| x == b' '));
        assert!(got[160..240].iter().all(|&x| x == b'c'));
        assert_eq!(got[240], b'd');
        // Lines longer than 80 columns (or none at all) are read on.
        assert_eq!(all(&[b'x'; 200]).len(), 200);
        // Offsets: of each character, of the line end for padding.
        let mut c = Chars::new(&f[..]);
        for k in 0..85 {
            let m = c.mark();
            c.next().unwrap();
            let want = match k {
                0..=79 => k as u64,
                80 | 81 => k as u64 + 2,
                _ => 84,
            };
            assert_eq!(c.offset_of(m), want, "{k}");
        }
    }

    #[test]
    fn blocks_join_and_a_cr_lf_split_between_reads_is_one_line_end() {
        // Lines of 79 characters (one pad each), CR LF, over many blocks;
        // a reader handing over 7 bytes at a time.
        struct Slow<'a>(&'a [u8]);
        impl Read for Slow<'_> {
            fn read(&mut self, b: &mut [u8]) -> io::Result<usize> {
                let k = b.len().min(7).min(self.0.len());
                b[..k].copy_from_slice(&self.0[..k]);
                self.0 = &self.0[k..];
                Ok(k)
            }
        }
        let mut f = Vec::new();
        for _ in 0..3000 {
            f.extend_from_slice(&[b'q'; 79]);
            f.extend_from_slice(b"\r\n");
        }
        let mut c = Chars::new(Slow(&f));
        let mut n = 0;
        while let Some(x) = c.next().unwrap() {
            assert_eq!(x, if n % 80 == 79 { b' ' } else { b'q' }, "{n}");
            n += 1;
        }
        assert_eq!(n, 3000 * 80);
    }

    #[test]
    fn the_portable_set() {
        assert_eq!(portable(64), Some('0'));
        assert_eq!(portable(99), Some('Z'));
        assert_eq!(portable(126), Some(' '));
        assert_eq!(portable(142), Some('/'));
        assert_eq!(portable(151), Some('#'));
        assert_eq!(portable(155), Some('"'));
        assert_eq!(portable(158), Some('±'));
        assert_eq!(portable(176), Some('⁹'));
        assert_eq!(portable(186), Some('\\'));
        assert_eq!(portable(188), Some('•'));
        assert_eq!(portable(189), None);
    }

    #[test]
    fn the_table_translates_and_the_first_position_counts() {
        let mut table = [b'0'; 256];
        for (i, b) in table.iter_mut().enumerate().take(189).skip(64) {
            let c = portable(i).unwrap();
            *b = if c.is_ascii() { c as u8 } else { b'0' };
        }
        // Superscript one (position 168) written as the digit's byte.
        table[168] = b'1';
        // Plus-minus (158) as Latin-1's byte.
        table[158] = 0xB1;
        let t = Table::new(&table, Encoding::Utf8);
        assert_eq!(t.ascii[b'1' as usize], b'1');
        assert_eq!(t.ascii[b'Z' as usize], b'Z');
        assert_eq!(t.local[0xB1], "±".as_bytes());
        assert!(!t.foreign[0xB1] && t.foreign[0xC3]);
        assert_eq!(t.local[0xC3], vec![0xC3]);
        assert_eq!(t.space, b' ');
        let t = Table::new(&table, Encoding::Windows1252);
        assert_eq!(t.local[0xB1], vec![0xB1]);
    }
}
