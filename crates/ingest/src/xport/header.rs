//! The headers of a SAS transport file (XPORT, versions 5 and 8): the
//! library, the first member's descriptor and its variables (NAMESTR
//! records, and in version 8 the long names, labels and formats of the
//! LABELV8/LABELV9 records). Everything is in 80-byte card images; the
//! numbers of the variable descriptors are big-endian.

use crate::error::{Error, Result};
use crate::options::Encoding;
use std::io::Read;
use std::path::Path;

/// One card image.
pub(crate) const CARD: usize = 80;

/// What starts every header card.
const PREFIX: &[u8] = b"HEADER RECORD*******";

/// A variable of the member, as its descriptor gives it.
#[derive(Debug, Clone)]
pub(crate) struct Var {
    pub name: String,
    pub label: Option<String>,
    /// Numeric (else character).
    pub numeric: bool,
    /// Bytes in a record.
    pub len: usize,
    /// Offset in a record: the lengths of the variables before it (the
    /// descriptor's own position is SAS's order in memory, which SAS 9
    /// writes with the numbers first; records are in variable order).
    pub pos: usize,
    /// The display format's name (upper case, no width).
    pub format: String,
}

/// The first member of a transport file.
#[derive(Debug)]
pub(crate) struct Member {
    pub name: String,
    pub label: Option<String>,
    pub vars: Vec<Var>,
    /// Bytes of one record.
    pub row_len: usize,
    /// Where its records start (a multiple of [`CARD`]).
    pub data_start: u64,
}

/// Reads cards from the start of the file, counting bytes.
struct Cards<'a, R> {
    r: R,
    at: u64,
    path: &'a Path,
}

impl<R: Read> Cards<'_, R> {
    fn fail(&self, reason: impl Into<String>) -> Error {
        Error::Format {
            path: self.path.to_path_buf(),
            offset: self.at,
            reason: reason.into(),
        }
    }

    fn bytes(&mut self, n: usize, what: &str) -> Result<Vec<u8>> {
        let mut b = vec![0; n];
        let mut got = 0;
        while got < n {
            match self.r.read(&mut b[got..]) {
                Ok(0) => {
                    return Err(self.fail(format!(
                        "the file ends inside {what} ({got} of its {n} bytes)"
                    )))
                }
                Ok(k) => got += k,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => return Err(self.fail(format!("cannot read {what}: {e}"))),
            }
        }
        self.at += n as u64;
        Ok(b)
    }

    fn card(&mut self, what: &str) -> Result<Vec<u8>> {
        self.bytes(CARD, what)
    }

    /// Skips to the next card boundary.
    fn align(&mut self) -> Result<()> {
        let rest = (CARD - (self.at % CARD as u64) as usize) % CARD;
        self.bytes(rest, "the padding of a card")?;
        Ok(())
    }

    /// A header card named one of `names`: its name and six numbers.
    fn header(&mut self, names: &[&str], what: &str) -> Result<(String, [u64; 6], Vec<u8>)> {
        let at = self.at;
        let c = self.card(what)?;
        let parsed = parse_header(&c);
        match parsed {
            Some((name, nums)) if names.contains(&name.as_str()) => Ok((name, nums, c)),
            _ => Err(Error::Format {
                path: self.path.to_path_buf(),
                offset: at,
                reason: format!(
                    "expected {what} (a card `HEADER RECORD*******{} HEADER RECORD!!!!!!!…`), found {:?}",
                    names.join("|"),
                    crate::error::show(&c)
                ),
            }),
        }
    }
}

/// A header card's name and the numbers after it: six 5-digit fields
/// (blanks ignored), and the first number written there whatever its
/// place (version 8 writes LABELV8's count left-aligned: `2` then
/// blanks).
fn parse_header(c: &[u8]) -> Option<(String, [u64; 6])> {
    if !c.starts_with(PREFIX) || &c[28..48] != b"HEADER RECORD!!!!!!!" {
        return None;
    }
    let name = std::str::from_utf8(&c[20..28]).ok()?.trim_end().to_string();
    let number = |d: &[u8]| -> Option<u64> {
        let t = std::str::from_utf8(d).ok()?.trim();
        if t.is_empty() {
            Some(0)
        } else {
            t.parse().ok()
        }
    };
    let mut nums = [0u64; 6];
    for (i, n) in nums.iter_mut().enumerate() {
        // A field that is not a number (a left-aligned count running
        // into blanks) counts as 0; the counts read below say which
        // field they use.
        *n = number(&c[48 + 5 * i..53 + 5 * i]).unwrap_or(0);
    }
    Some((name, nums))
}

/// The first number after a header card's name (LABELV8/LABELV9's count).
fn first_number(c: &[u8]) -> Option<u64> {
    std::str::from_utf8(&c[48..])
        .ok()?
        .split_whitespace()
        .next()?
        .parse()
        .ok()
}

/// Whether the first bytes of a file are those of a transport file: a
/// header card's first 20 bytes, so that a file whose library header is
/// damaged or cut short is read as one (and its error says where).
pub(crate) fn is_xport(head: &[u8]) -> bool {
    head.starts_with(PREFIX)
}

/// The first 48 bytes of a member header card, in either version.
const MEMBER_V5: &[u8] = b"HEADER RECORD*******MEMBER  HEADER RECORD!!!!!!!";
const MEMBER_V8: &[u8] = b"HEADER RECORD*******MEMBV8  HEADER RECORD!!!!!!!";
/// The first 48 bytes of the descriptor header card that follows it.
const DESCRIPTOR_V5: &[u8] = b"HEADER RECORD*******DSCRPTR HEADER RECORD!!!!!!!";
const DESCRIPTOR_V8: &[u8] = b"HEADER RECORD*******DSCPTV8 HEADER RECORD!!!!!!!";

/// Whether `b` (at least two cards) starts a member: a member header
/// card followed by a descriptor header card (a text value that merely
/// begins like a header does not end the data).
pub(crate) fn starts_member(b: &[u8]) -> bool {
    (b.starts_with(MEMBER_V5) && b[CARD..].starts_with(DESCRIPTOR_V5))
        || (b.starts_with(MEMBER_V8) && b[CARD..].starts_with(DESCRIPTOR_V8))
}

/// Text of a fixed field: trailing blanks and NULs cut, decoded.
pub(crate) fn text(
    raw: &[u8],
    enc: Encoding,
    what: impl FnOnce() -> String,
    path: &Path,
    offset: u64,
) -> Result<String> {
    let end = raw
        .iter()
        .rposition(|&b| b != b' ' && b != 0)
        .map_or(0, |i| i + 1);
    crate::core::binary::decode(&raw[..end], enc, what, path, offset)
}

fn be16(b: &[u8]) -> u16 {
    u16::from_be_bytes([b[0], b[1]])
}

/// Reads the headers of the first member of the transport file at `path`
/// (`file_len` its size, bounding what the header may claim).
pub(crate) fn read(path: &Path, r: impl Read, file_len: u64, enc: Encoding) -> Result<Member> {
    let mut c = Cards { r, at: 0, path };
    let (lib, ..) = c.header(&["LIBRARY", "LIBV8"], "the library header")?;
    let version = if lib == "LIBV8" { 8 } else { 5 };
    c.card("the library's first header")?;
    c.card("the library's dates")?;
    let (_, nums, _) = c.header(
        if version == 5 {
            &["MEMBER"]
        } else {
            &["MEMBV8"]
        },
        "the member header",
    )?;
    // The descriptor's length: 140 bytes (136 on VAX/VMS).
    let nlen = match nums[5] {
        0 => 140,
        n @ (136 | 140) => n as usize,
        n => {
            return Err(c.fail(format!(
                "the member header gives variable descriptors of {n} bytes; expected 140 (or 136)"
            )))
        }
    };
    c.header(
        if version == 5 {
            &["DSCRPTR"]
        } else {
            &["DSCPTV8"]
        },
        "the member's descriptor header",
    )?;
    let at = c.at;
    let m1 = c.card("the member's name")?;
    let name_len = if version == 5 { 8 } else { 32 };
    let name = text(
        &m1[8..8 + name_len],
        enc,
        || "the member's name".into(),
        path,
        at,
    )?;
    let at = c.at;
    let m2 = c.card("the member's label")?;
    let label = text(&m2[32..72], enc, || "the member's label".into(), path, at)?;
    let (_, nums, _) = c.header(
        if version == 5 {
            &["NAMESTR"]
        } else {
            &["NAMSTV8"]
        },
        "the variables' header",
    )?;
    let count = nums[1] as usize;
    if count == 0 {
        return Err(c.fail("the member has no variables"));
    }
    if (count as u64).saturating_mul(nlen as u64) > file_len.saturating_sub(c.at) {
        return Err(c.fail(format!(
            "the header claims {count} variables, more than the file's {file_len} bytes hold"
        )));
    }
    let mut vars = Vec::with_capacity(count);
    for i in 0..count {
        let at = c.at;
        let d = c.bytes(nlen, "a variable's descriptor")?;
        vars.push(namestr(&d, version, enc, (path, at), i)?);
    }
    c.align()?;
    let (next, _, card) = c.header(
        if version == 5 {
            &["OBS"]
        } else {
            &["OBSV8", "LABELV8", "LABELV9"]
        },
        "the observations' header",
    )?;
    if next != "OBS" && next != "OBSV8" {
        let count = first_number(&card).unwrap_or(0);
        long_labels(&mut c, &mut vars, (count, next == "LABELV9"), enc)?;
        c.align()?;
        c.header(&["OBSV8"], "the observations' header")?;
    }
    let row_len = check_layout(&c, &mut vars)?;
    if row_len as u64 > file_len {
        return Err(c.fail(format!(
            "the variables make records of {row_len} bytes, more than the file's {file_len}"
        )));
    }
    Ok(Member {
        name,
        label: (!label.is_empty()).then_some(label),
        vars,
        row_len,
        data_start: c.at,
    })
}

/// One 140-byte variable descriptor (NAMESTR).
fn namestr(
    d: &[u8],
    version: u8,
    enc: Encoding,
    (path, at): (&Path, u64),
    i: usize,
) -> Result<Var> {
    let what = |f: &'static str| move || format!("variable {}'s {f}", i + 1);
    let numeric = match be16(&d[0..2]) {
        1 => true,
        2 => false,
        t => {
            return Err(Error::Format {
                path: path.to_path_buf(),
                offset: at,
                reason: format!(
                    "variable {}: type {t}; expected 1 (numeric) or 2 (character)",
                    i + 1
                ),
            })
        }
    };
    let short = text(&d[8..16], enc, what("name"), path, at + 8)?;
    let long = if version == 8 && d.len() >= 120 {
        text(&d[88..120], enc, what("name"), path, at + 88)?
    } else {
        String::new()
    };
    let label = text(&d[16..56], enc, what("label"), path, at + 16)?;
    let format = text(&d[56..64], enc, what("format"), path, at + 56)?.to_ascii_uppercase();
    Ok(Var {
        name: if long.is_empty() { short } else { long },
        label: (!label.is_empty()).then_some(label),
        numeric,
        len: usize::from(be16(&d[4..6])),
        pos: 0,
        format,
    })
}

/// The LABELV8 (names and labels) or LABELV9 (also formats) records of
/// `count` variables.
fn long_labels<R: Read>(
    c: &mut Cards<'_, R>,
    vars: &mut [Var],
    (count, v9): (u64, bool),
    enc: Encoding,
) -> Result<()> {
    if count > vars.len() as u64 {
        return Err(c.fail(format!("{count} long labels for {} variables", vars.len())));
    }
    for _ in 0..count {
        let at = c.at;
        let h = c.bytes(if v9 { 10 } else { 6 }, "a long label's lengths")?;
        let index = usize::from(be16(&h[0..2]));
        let Some(v) = index.checked_sub(1).and_then(|i| vars.get_mut(i)) else {
            return Err(Error::Format {
                path: c.path.to_path_buf(),
                offset: at,
                reason: format!("a long label of variable {index}, which does not exist"),
            });
        };
        let lens: Vec<usize> = h[2..].chunks(2).map(|b| usize::from(be16(b))).collect();
        let mut field = |n: usize, what: &str| -> Result<String> {
            let at = c.at;
            let b = c.bytes(n, what)?;
            text(&b, enc, || format!("variable {index}'s {what}"), c.path, at)
        };
        let name = field(lens[0], "long name")?;
        let label = field(lens[1], "long label")?;
        if !name.is_empty() {
            v.name = name;
        }
        v.label = (!label.is_empty()).then_some(label).or(v.label.take());
        if v9 {
            let format = field(lens[2], "format")?;
            field(lens[3], "informat")?;
            if !format.is_empty() {
                // A format with its width: the name is what precedes
                // the digits.
                let f = format.to_ascii_uppercase();
                let name_end = f
                    .find(|ch: char| ch.is_ascii_digit() || ch == '.')
                    .unwrap_or(f.len());
                v.format = f[..name_end].to_string();
            }
        }
    }
    Ok(())
}

/// The record's length and each variable's offset in it; every variable
/// of a length its type allows.
fn check_layout<R: Read>(c: &Cards<'_, R>, vars: &mut [Var]) -> Result<usize> {
    let mut row_len = 0usize;
    for v in vars.iter_mut() {
        let bad = |why: String| c.fail(format!("variable {}: {why}", v.name));
        if v.name.is_empty() {
            return Err(c.fail("a variable without a name"));
        }
        if v.numeric && !(2..=8).contains(&v.len) {
            return Err(bad(format!(
                "a numeric variable of {} bytes; expected 2 to 8",
                v.len
            )));
        }
        if v.len == 0 {
            return Err(bad("a character variable of 0 bytes".into()));
        }
        v.pos = row_len;
        row_len += v.len;
    }
    Ok(row_len)
}
