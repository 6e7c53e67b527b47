//! The header, dictionary, strL index and value labels of a Stata `.dta`
//! file, releases 104 to 119 (the binary layout before 117, the tagged
//! one from 117).

pub(crate) use crate::core::binary::{decode, Cursor};
use crate::error::Result;
use crate::options::Encoding;
use std::path::Path;

/// A variable's storage type.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Ty {
    /// `byte`: 1-byte integer.
    I8,
    /// `int`: 2-byte integer.
    I16,
    /// `long`: 4-byte integer.
    I32,
    /// `float`: 4-byte IEEE.
    F32,
    /// `double`: 8-byte IEEE.
    F64,
    /// `str#`: a fixed number of bytes, NUL-padded.
    Str(usize),
    /// `strL`: an 8-byte reference into the strL table.
    StrL,
}

impl Ty {
    /// Bytes in a record.
    pub(crate) fn width(self) -> usize {
        match self {
            Ty::I8 => 1,
            Ty::I16 => 2,
            Ty::I32 | Ty::F32 => 4,
            Ty::F64 | Ty::StrL => 8,
            Ty::Str(n) => n,
        }
    }
}

/// One variable of the dictionary.
#[derive(Debug, Clone)]
pub(crate) struct Var {
    pub name: String,
    pub ty: Ty,
    /// Display format (`%9.0g`, `%td`, `%tc…`).
    pub format: String,
    /// The name of its value-label set (empty: none).
    pub labels: String,
    /// Variable label.
    pub label: String,
    /// Offset in the record.
    pub pos: usize,
}

/// What the header and dictionary say.
#[derive(Debug)]
pub(crate) struct Dta {
    pub release: u8,
    /// Most significant byte first.
    pub big: bool,
    pub records: u64,
    /// The dataset label.
    pub label: String,
    pub vars: Vec<Var>,
    pub row_len: usize,
    /// The file offset of the first record.
    pub data_start: u64,
    /// The file offset of `<strls>` (117 on).
    pub strls: Option<u64>,
    /// The file offset of the value labels.
    pub value_labels: u64,
    /// The text encoding.
    pub enc: Encoding,
}

impl Dta {
    /// Tagged missing values `.a`–`.z` exist (113 on).
    pub(crate) fn tagged(&self) -> bool {
        self.release >= 113
    }

    /// Big-endian-aware integer readers.
    pub(crate) fn u16(&self, b: &[u8]) -> u16 {
        let a = [b[0], b[1]];
        if self.big {
            u16::from_be_bytes(a)
        } else {
            u16::from_le_bytes(a)
        }
    }

    pub(crate) fn u32(&self, b: &[u8]) -> u32 {
        let a = [b[0], b[1], b[2], b[3]];
        if self.big {
            u32::from_be_bytes(a)
        } else {
            u32::from_le_bytes(a)
        }
    }

    pub(crate) fn u64(&self, b: &[u8]) -> u64 {
        let a: [u8; 8] = b[..8].try_into().expect("8 bytes");
        if self.big {
            u64::from_be_bytes(a)
        } else {
            u64::from_le_bytes(a)
        }
    }
}

/// Whether `head` (the file's first bytes) starts a Stata file: the tag
/// `<stata_dta>` (117 on), or a release byte 104–116 followed by a byte
/// order (1 or 2), the file type 1 and a zero byte.
pub(crate) fn is_dta(head: &[u8]) -> bool {
    head.starts_with(b"<stata_dta>")
        || (head.len() >= 4
            && (104..=116).contains(&head[0])
            && (head[1] == 1 || head[1] == 2)
            && head[2] == 1
            && head[3] == 0)
}

/// NUL-terminated text of a fixed field, decoded.
pub(crate) fn cstr(
    raw: &[u8],
    enc: Encoding,
    what: impl FnOnce() -> String,
    c: &Cursor,
    at: u64,
) -> Result<String> {
    let end = raw.iter().position(|&b| b == 0).unwrap_or(raw.len());
    decode(&raw[..end], enc, what, c.path, at)
}

/// Reads the header and dictionary of the `.dta` file at `path`; `enc`
/// overrides the release's encoding.
pub(crate) fn read(path: &Path, enc: Option<Encoding>) -> Result<Dta> {
    let mut c = Cursor::open(path)?;
    let head = c.bytes(c.len.min(11), "the header")?;
    c.seek(0)?;
    if head.starts_with(b"<stata_dta>") {
        read_tagged(c, enc)
    } else if is_dta(&head) {
        read_binary(c, enc)
    } else if head.len() >= 4 && (head[0] == 102 || head[0] == 103) && head[2] == 1 {
        Err(c.err(
            0,
            format!(
                "a Stata file of release {} (Stata 1 or 2): microtab reads releases 104 to 119",
                head[0]
            ),
        ))
    } else {
        Err(c.err(
            0,
            "not a Stata file: it starts neither with <stata_dta> nor with a release byte (104-116) and a byte order",
        ))
    }
}

/// Sizes of the dictionary's fields by release.
pub(crate) struct Widths {
    pub name: u64,
    pub format: u64,
    pub vlabel_name: u64,
    pub label: u64,
}

pub(crate) fn widths(release: u8) -> Widths {
    let name = match release {
        ..=109 => 9,
        110..=117 => 33,
        _ => 129,
    };
    Widths {
        name,
        format: match release {
            ..=104 => 7,
            105..=113 => 12,
            114..=117 => 49,
            _ => 57,
        },
        vlabel_name: name,
        label: match release {
            ..=107 => 32,
            108..=117 => 81,
            _ => 321,
        },
    }
}

/// The type of type code `code` in `release`.
fn ty(release: u8, code: u16) -> Option<Ty> {
    Some(match release {
        117.. => match code {
            0xFFFA => Ty::I8,
            0xFFF9 => Ty::I16,
            0xFFF8 => Ty::I32,
            0xFFF7 => Ty::F32,
            0xFFF6 => Ty::F64,
            0x8000 => Ty::StrL,
            1..=2045 => Ty::Str(code as usize),
            _ => return None,
        },
        111..=116 => match code {
            0xFB => Ty::I8,
            0xFC => Ty::I16,
            0xFD => Ty::I32,
            0xFE => Ty::F32,
            0xFF => Ty::F64,
            1..=244 => Ty::Str(code as usize),
            _ => return None,
        },
        _ => match code {
            0x62 => Ty::I8,  // b
            0x69 => Ty::I16, // i
            0x6C => Ty::I32, // l
            0x66 => Ty::F32, // f
            0x64 => Ty::F64, // d
            0x80..=0xFF => Ty::Str(code as usize - 0x7F),
            _ => return None,
        },
    })
}

/// Binary files, releases 104–116.
fn read_binary(mut c: Cursor, enc: Option<Encoding>) -> Result<Dta> {
    let h = c.bytes(4, "the header")?;
    let release = h[0];
    c.big = h[1] == 1;
    let nvar = c.uint(2, "the number of variables")?;
    let records = c.uint(4, "the number of records")?;
    let enc = enc.unwrap_or(Encoding::Windows1252);
    let w = widths(release);
    let at = c.at;
    let raw = c.bytes(w.label, "the dataset label")?;
    let label = cstr(&raw, enc, || "the dataset label".into(), &c, at)?;
    if release >= 105 {
        c.bytes(18, "the time stamp")?;
    }
    let per_var = 1 + w.name + 2 + w.format + w.vlabel_name + w.label;
    check_count(&c, nvar, per_var, "variables")?;
    let types_at = c.at;
    let types = c.bytes(nvar, "the variable types")?;
    let codes: Vec<u16> = types.iter().map(|&b| b as u16).collect();
    let mut d = dictionary(&mut c, release, (&codes, types_at), &w, enc, 2)?;
    // Expansion fields (characteristics): type, length, contents; a zero
    // type and length end them.
    if release >= 105 {
        let len_width = if release >= 110 { 4 } else { 2 };
        loop {
            let at = c.at;
            let t = c.bytes(1, "an expansion field")?[0];
            let len = c.uint(len_width, "an expansion field's length")?;
            if t == 0 && len == 0 {
                break;
            }
            if t != 1 {
                return Err(c.err(at, format!("an expansion field of type {t} (expected 1, or 0 to end them): the file is damaged")));
            }
            c.skip(len, "an expansion field")?;
        }
    }
    d.data_start = c.at;
    d.records = records;
    d.release = release;
    d.big = c.big;
    d.label = label;
    d.enc = enc;
    d.value_labels = data_end(&c, &d)?;
    Ok(d)
}

/// The end of the data (where value labels start); an error when the
/// file is shorter.
fn data_end(c: &Cursor, d: &Dta) -> Result<u64> {
    let bytes = (d.row_len as u64).checked_mul(d.records);
    match bytes.and_then(|b| b.checked_add(d.data_start)) {
        Some(end) if end <= c.len => Ok(end),
        _ => Err(c.err(
            d.data_start,
            format!(
                "the header announces {} records of {} bytes, more than the {} bytes left in the file: it is truncated or damaged",
                d.records,
                d.row_len,
                c.len.saturating_sub(d.data_start)
            ),
        )),
    }
}

/// No more than the file can hold: `n` entries of at least `each` bytes.
fn check_count(c: &Cursor, n: u64, each: u64, what: &str) -> Result<()> {
    if n.saturating_mul(each) > c.len.saturating_sub(c.at) {
        return Err(c.err(
            c.at,
            format!(
                "the header announces {n} {what}, more than the file's {} bytes can describe: it is damaged",
                c.len
            ),
        ));
    }
    Ok(())
}

/// Names, sort list, formats, value-label names and labels (after the
/// types, read at `types_at`), and the record layout.
fn dictionary(
    c: &mut Cursor,
    release: u8,
    (codes, types_at): (&[u16], u64),
    w: &Widths,
    enc: Encoding,
    sort_width: u64,
) -> Result<Dta> {
    let nvar = codes.len() as u64;
    let tagged = release >= 117;
    if tagged {
        c.tag("<varnames>")?;
    }
    let at = c.at;
    let names = c.bytes(w.name * nvar, "the variable names")?;
    if tagged {
        c.tag("</varnames>")?;
        c.tag("<sortlist>")?;
    }
    // K + 1 entries, the last ending the list.
    c.bytes(sort_width * (nvar + 1), "the sort order")?;
    if tagged {
        c.tag("</sortlist>")?;
    }
    let mut d = rest(c, release, (codes, types_at), w, enc)?;
    for (i, v) in d.vars.iter_mut().enumerate() {
        let o = i * w.name as usize;
        v.name = cstr(
            &names[o..o + w.name as usize],
            enc,
            || format!("the name of variable {}", i + 1),
            c,
            at + o as u64,
        )?;
        if v.name.is_empty() {
            return Err(c.err(
                at + o as u64,
                format!("variable {} has no name: the file is damaged", i + 1),
            ));
        }
    }
    Ok(d)
}

/// Tagged files, releases 117–119.
fn read_tagged(mut c: Cursor, enc: Option<Encoding>) -> Result<Dta> {
    c.tag("<stata_dta>")?;
    c.tag("<header>")?;
    c.tag("<release>")?;
    let at = c.at;
    let r = c.bytes(3, "the release")?;
    let release = std::str::from_utf8(&r)
        .ok()
        .and_then(|s| s.parse::<u8>().ok())
        .filter(|r| (117..=119).contains(r))
        .ok_or_else(|| {
            c.err(
                at,
                format!(
                    "the release {:?} is not one microtab reads (117, 118 or 119 in this layout)",
                    crate::error::show(&r)
                ),
            )
        })?;
    c.tag("</release>")?;
    c.tag("<byteorder>")?;
    let at = c.at;
    let bo = c.bytes(3, "the byte order")?;
    c.big = match &bo[..] {
        b"MSF" => true,
        b"LSF" => false,
        _ => {
            return Err(c.err(
                at,
                format!(
                    "the byte order {:?} is neither MSF nor LSF",
                    crate::error::show(&bo)
                ),
            ))
        }
    };
    c.tag("</byteorder>")?;
    c.tag("<K>")?;
    let nvar = c.uint(
        if release >= 119 { 4 } else { 2 },
        "the number of variables",
    )?;
    c.tag("</K>")?;
    c.tag("<N>")?;
    let records = c.uint(if release >= 118 { 8 } else { 4 }, "the number of records")?;
    c.tag("</N>")?;
    let enc = enc.unwrap_or(if release >= 118 {
        Encoding::Utf8
    } else {
        Encoding::Windows1252
    });
    c.tag("<label>")?;
    let len = c.uint(
        if release >= 118 { 2 } else { 1 },
        "the dataset label's length",
    )?;
    let at = c.at;
    let raw = c.bytes(len, "the dataset label")?;
    let label = decode(&raw, enc, || "the dataset label".into(), c.path, at)?;
    c.tag("</label>")?;
    c.tag("<timestamp>")?;
    let len = c.uint(1, "the time stamp's length")?;
    c.bytes(len, "the time stamp")?;
    c.tag("</timestamp>")?;
    c.tag("</header>")?;
    c.tag("<map>")?;
    let mut map = [0u64; 14];
    for m in map.iter_mut() {
        *m = c.uint(8, "the map")?;
    }
    c.tag("</map>")?;
    let w = widths(release);
    let per_var = 2 + w.name + 4 + w.format + w.vlabel_name + w.label;
    check_count(&c, nvar, per_var, "variables")?;
    c.tag("<variable_types>")?;
    let types_at = c.at;
    let types = c.bytes(2 * nvar, "the variable types")?;
    c.tag("</variable_types>")?;
    let codes: Vec<u16> = types
        .chunks(2)
        .map(|b| {
            let a = [b[0], b[1]];
            if c.big {
                u16::from_be_bytes(a)
            } else {
                u16::from_le_bytes(a)
            }
        })
        .collect();
    let sort_width = if release >= 119 { 4 } else { 2 };
    let mut d = dictionary(&mut c, release, (&codes, types_at), &w, enc, sort_width)?;
    // The map gives the data (map[9]), strLs (map[10]) and value labels
    // (map[11]); each is checked where it is read.
    c.seek(map[9])?;
    c.tag("<data>")?;
    d.data_start = c.at;
    d.records = records;
    d.label = label;
    let end = data_end(&c, &d)?;
    c.seek(end)?;
    c.tag("</data>")?;
    d.strls = Some(map[10]);
    d.value_labels = map[11];
    Ok(d)
}

/// Formats, value-label names and variable labels (after the names and
/// sort list), and the record layout.
fn rest(
    c: &mut Cursor,
    release: u8,
    (codes, types_at): (&[u16], u64),
    w: &Widths,
    enc: Encoding,
) -> Result<Dta> {
    let nvar = codes.len() as u64;
    let tagged = release >= 117;
    let mut vars = Vec::with_capacity(codes.len());
    let mut pos = 0usize;
    for (i, &code) in codes.iter().enumerate() {
        let Some(t) = ty(release, code) else {
            let each = if tagged { 2 } else { 1 };
            return Err(c.err(
                types_at + (i * each) as u64,
                format!("variable {} has the type code {code}, which release {release} does not define: the file is damaged", i + 1),
            ));
        };
        vars.push(Var {
            name: String::new(),
            ty: t,
            format: String::new(),
            labels: String::new(),
            label: String::new(),
            pos,
        });
        pos += t.width();
    }
    let mut field = |tag: &str, width: u64, what: &str| -> Result<(Vec<u8>, u64)> {
        if tagged {
            c.tag(&format!("<{tag}>"))?;
        }
        let at = c.at;
        let b = c.bytes(width * nvar, what)?;
        if tagged {
            c.tag(&format!("</{tag}>"))?;
        }
        Ok((b, at))
    };
    let (formats, at) = field("formats", w.format, "the display formats")?;
    let (vlabels, at2) = field("value_label_names", w.vlabel_name, "the value-label names")?;
    let (labels, at3) = field("variable_labels", w.label, "the variable labels")?;
    for (i, v) in vars.iter_mut().enumerate() {
        let (f, l, b) = (w.format as usize, w.vlabel_name as usize, w.label as usize);
        let n = i + 1;
        v.format = cstr(
            &formats[i * f..(i + 1) * f],
            enc,
            || format!("the format of variable {n}"),
            c,
            at + (i * f) as u64,
        )?;
        v.labels = cstr(
            &vlabels[i * l..(i + 1) * l],
            enc,
            || format!("the value-label name of variable {n}"),
            c,
            at2 + (i * l) as u64,
        )?;
        v.label = cstr(
            &labels[i * b..(i + 1) * b],
            enc,
            || format!("the label of variable {n}"),
            c,
            at3 + (i * b) as u64,
        )?;
    }
    Ok(Dta {
        release,
        big: c.big,
        records: 0,
        label: String::new(),
        vars,
        row_len: pos,
        data_start: 0,
        strls: None,
        value_labels: 0,
        enc,
    })
}
