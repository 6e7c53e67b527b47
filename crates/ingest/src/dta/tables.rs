//! The tables after a `.dta` file's records: value labels (every
//! release) and the strL table (117 on), indexed rather than loaded, so
//! that memory does not grow with the strings.

use super::header::{decode, widths, Cursor, Dta};
use crate::error::Result;
use std::collections::BTreeMap;

/// An unsigned integer of `b.len()` bytes in the file's byte order.
pub(crate) fn uint(b: &[u8], big: bool) -> u64 {
    let mut v = 0u64;
    for k in 0..b.len() {
        let byte = if big { b[k] } else { b[b.len() - 1 - k] };
        v = (v << 8) | byte as u64;
    }
    v
}

/// Value-label sets by name: `(value, label)` pairs.
pub(crate) type LabelSets = BTreeMap<String, Vec<(i32, String)>>;

/// The value-label sets by name: `(value, label)` pairs. `None` for
/// releases before 108, whose layout microtab does not read.
pub(crate) fn value_labels(c: &mut Cursor, d: &Dta) -> Result<Option<LabelSets>> {
    if d.release < 108 {
        return Ok(None);
    }
    let mut sets = BTreeMap::new();
    c.seek(d.value_labels)?;
    let tagged = d.release >= 117;
    if tagged {
        c.tag("<value_labels>")?;
    }
    let name_len = widths(d.release).vlabel_name;
    loop {
        let start = c.at;
        if tagged {
            let left = c.len - c.at;
            let peek = c.bytes(left.min(5), "the value labels")?;
            if peek != b"<lbl>" {
                c.seek(start)?;
                c.tag("</value_labels>")?;
                break;
            }
        } else if c.at == c.len {
            break;
        }
        let len = uint(&c.bytes(4, "a value-label table's length")?, d.big);
        let at = c.at;
        let raw = c.bytes(name_len, "a value-label table's name")?;
        let end = raw.iter().position(|&b| b == 0).unwrap_or(raw.len());
        let name = decode(
            &raw[..end],
            d.enc,
            || "a value-label table's name".into(),
            c.path,
            at,
        )?;
        c.bytes(3, "a value-label table's padding")?;
        let at = c.at;
        let t = c.bytes(len, &format!("the value-label table {name}"))?;
        if tagged {
            c.tag("</lbl>")?;
        }
        let bad = |why: String| {
            c.err(
                at,
                format!("the value-label table {name} is damaged: {why}"),
            )
        };
        if t.len() < 8 {
            return Err(bad(format!(
                "{} bytes, fewer than its 8-byte header",
                t.len()
            )));
        }
        let n = uint(&t[0..4], d.big) as usize;
        let txt_len = uint(&t[4..8], d.big) as usize;
        let need = n
            .checked_mul(8)
            .and_then(|x| x.checked_add(8))
            .and_then(|x| x.checked_add(txt_len));
        if need.is_none_or(|need| need > t.len()) {
            return Err(bad(format!(
                "{n} labels and {txt_len} bytes of text do not fit its {} bytes",
                t.len()
            )));
        }
        let txt = &t[8 + 8 * n..8 + 8 * n + txt_len];
        let mut entries = Vec::with_capacity(n);
        for k in 0..n {
            let off = uint(&t[8 + 4 * k..12 + 4 * k], d.big) as usize;
            let val = uint(&t[8 + 4 * n + 4 * k..12 + 4 * n + 4 * k], d.big) as u32 as i32;
            if off >= txt_len {
                return Err(bad(format!(
                    "label {} points to byte {off} of its {txt_len} bytes of text",
                    k + 1
                )));
            }
            let s = &txt[off..];
            let e = s.iter().position(|&b| b == 0).unwrap_or(s.len());
            let lab = decode(
                &s[..e],
                d.enc,
                || format!("a label of the value-label table {name}"),
                c.path,
                (at as usize + 8 + 8 * n + off) as u64,
            )?;
            entries.push((val, lab));
        }
        sets.insert(name, entries);
    }
    Ok(Some(sets))
}

/// One strL: where its bytes are.
#[derive(Debug, Clone, Copy)]
pub(crate) struct StrL {
    pub v: u32,
    pub o: u64,
    /// File offset of its bytes.
    pub at: u64,
    pub len: u32,
    /// Stored as text with a terminating NUL (type 130), not binary (129).
    pub nul: bool,
}

/// The strL table's entries, sorted by `(v, o)`.
pub(crate) fn strls(c: &mut Cursor, d: &Dta) -> Result<Vec<StrL>> {
    let Some(at) = d.strls else {
        return Ok(Vec::new());
    };
    c.seek(at)?;
    c.tag("<strls>")?;
    let o_width = if d.release >= 118 { 8 } else { 4 };
    let mut out = Vec::new();
    loop {
        let at = c.at;
        let t = c.bytes(3.min(c.len - c.at), "the strL table")?;
        if t == b"</s" {
            c.tag("trls>")?;
            break;
        }
        if t != b"GSO" {
            return Err(c.err(
                at,
                format!(
                    "expected a strL (GSO) or </strls>, found {:?}: the file is damaged",
                    crate::error::show(&t)
                ),
            ));
        }
        let h = c.bytes(4 + o_width + 1 + 4, "a strL's header")?;
        let v = uint(&h[0..4], d.big) as u32;
        let o = uint(&h[4..4 + o_width as usize], d.big);
        let ty = h[4 + o_width as usize];
        let len = uint(&h[5 + o_width as usize..], d.big) as u32;
        if ty != 0x81 && ty != 0x82 {
            return Err(c.err(at, format!("the strL ({v}, {o}) has the type {ty} (expected 129 or 130): the file is damaged")));
        }
        let start = c.at;
        c.skip(len as u64, &format!("the strL ({v}, {o})"))?;
        out.push(StrL {
            v,
            o,
            at: start,
            len,
            nul: ty == 0x82,
        });
    }
    out.sort_by_key(|s| (s.v, s.o));
    Ok(out)
}

/// The `(v, o)` of a strL reference in a record of release `release`.
pub(crate) fn strl_ref(b: &[u8], release: u8, big: bool) -> (u32, u64) {
    match release {
        ..=117 => (uint(&b[0..4], big) as u32, uint(&b[4..8], big)),
        118 => (uint(&b[0..2], big) as u32, uint(&b[2..8], big)),
        _ => (uint(&b[0..3], big) as u32, uint(&b[3..8], big)),
    }
}
