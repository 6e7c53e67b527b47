//! The header and dictionary of an SPSS system file (`.sav`, and `.zsav`
//! whose data are zlib blocks): variables, labels, missing values, value
//! labels, long names, very long strings and the encoding. The whole
//! dictionary is read first (each count checked against the file's size),
//! then its texts are decoded in the encoding it names.

use crate::core::binary::Cursor;
use crate::error::Result;
use crate::options::Encoding;
use std::collections::BTreeMap;
use std::path::Path;

/// Days from 1582-10-14 (SPSS's origin) to 1960-01-01 (SAS's, which the
/// shared date formatting counts from).
pub(crate) const SPSS_TO_1960_DAYS: f64 = 137_775.0;

pub(crate) use crate::core::dates::Shown;

/// User-missing values of a variable.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct Missing {
    /// Discrete values (numbers), at most 3.
    pub values: Vec<f64>,
    /// A range `lo THRU hi` (LO and HI as the lowest and highest doubles).
    pub range: Option<(f64, f64)>,
    /// Discrete text values.
    pub texts: Vec<String>,
}

/// One variable of the file (a very long string's segments joined).
#[derive(Debug, Clone)]
pub(crate) struct Var {
    pub name: String,
    pub label: Option<String>,
    /// Text width in bytes; `None` for a number.
    pub width: Option<usize>,
    /// Where its bytes are in a record: (byte offset, bytes), one piece
    /// for a number (8 bytes) or a short string, one per segment of a very
    /// long string (255 bytes of each 256).
    pub pieces: Vec<(usize, usize)>,
    pub shown: Shown,
    /// The print format, as SPSS writes it (`F8.2`, `DATE11`, `A20`).
    pub format: String,
    pub missing: Missing,
    /// Value labels of a number.
    pub labels: Vec<(f64, String)>,
    /// Value labels of a text.
    pub text_labels: Vec<(String, String)>,
}

/// What the header and dictionary say.
#[derive(Debug)]
pub(crate) struct Sav {
    pub big: bool,
    /// 0 none, 1 bytecode, 2 zlib blocks of bytecode; -1 records rebuilt
    /// from a portable file's text (whose offsets are not the file's).
    pub compression: i32,
    pub bias: f64,
    /// Records, when the file says.
    pub records: Option<u64>,
    pub label: String,
    /// The weight variable's name.
    pub weight: Option<String>,
    pub vars: Vec<Var>,
    /// Bytes of an uncompressed record.
    pub row_len: usize,
    /// The file offset of the data.
    pub data_start: u64,
    /// The system-missing value's bits.
    pub sysmis: u64,
    pub enc: Encoding,
    /// The encoding the file names (for notes).
    pub named_encoding: Option<String>,
}

/// Whether `head` starts an SPSS system file (`$FL2`, or `$FL3` for
/// `.zsav`).
pub(crate) fn is_sav(head: &[u8]) -> bool {
    head.starts_with(b"$FL2") || head.starts_with(b"$FL3")
}

/// A dictionary entry as stored: one per 8-byte slot group.
struct Entry {
    /// First slot.
    slot: usize,
    /// Slots (1 + continuation records).
    slots: usize,
    /// 0 numeric, else the string width.
    width: i32,
    name: Vec<u8>,
    label: Option<(Vec<u8>, u64)>,
    print: i32,
    n_missing: i32,
    missing: Vec<[u8; 8]>,
    labels: Vec<([u8; 8], Vec<u8>)>,
}

fn f64_of(b: &[u8], big: bool) -> f64 {
    let a: [u8; 8] = b[..8].try_into().expect("8 bytes");
    f64::from_bits(if big {
        u64::from_be_bytes(a)
    } else {
        u64::from_le_bytes(a)
    })
}

/// A 32-bit integer in the file's byte order.
pub(crate) fn i32_of(b: &[u8], big: bool) -> i32 {
    let a = [b[0], b[1], b[2], b[3]];
    if big {
        i32::from_be_bytes(a)
    } else {
        i32::from_le_bytes(a)
    }
}

/// A 64-bit integer in the file's byte order.
pub(crate) fn i64_of(b: &[u8], big: bool) -> i64 {
    let a: [u8; 8] = b[..8].try_into().expect("8 bytes");
    if big {
        i64::from_be_bytes(a)
    } else {
        i64::from_le_bytes(a)
    }
}

/// The SPSS print format as text (`F8.2`), from its packed form.
fn format_name(print: i32) -> (u8, String) {
    let ty = ((print >> 16) & 0xFF) as u8;
    (
        ty,
        format_text(ty, ((print >> 8) & 0xFF) as u32, (print & 0xFF) as u32),
    )
}

/// The SPSS format of type code `ty`, width `w` and `d` decimals as text
/// (`F8.2`, `DATE11`; an unknown type as `F`).
pub(crate) fn format_text(ty: u8, w: u32, d: u32) -> String {
    let name = match ty {
        1 => "A",
        2 => "AHEX",
        3 => "COMMA",
        4 => "DOLLAR",
        5 => "F",
        6 => "IB",
        7 => "PIBHEX",
        8 => "P",
        9 => "PIB",
        10 => "PK",
        11 => "RB",
        12 => "RBHEX",
        15 => "Z",
        16 => "N",
        17 => "E",
        20 => "DATE",
        21 => "TIME",
        22 => "DATETIME",
        23 => "ADATE",
        24 => "JDATE",
        25 => "DTIME",
        26 => "WKDAY",
        27 => "MONTH",
        28 => "MOYR",
        29 => "QYR",
        30 => "WKYR",
        31 => "PCT",
        32 => "DOT",
        33 => "CCA",
        34 => "CCB",
        35 => "CCC",
        36 => "CCD",
        37 => "CCE",
        38 => "EDATE",
        39 => "SDATE",
        40 => "MTIME",
        41 => "YMDHMS",
        _ => "F",
    };
    if d > 0 {
        format!("{name}{w}.{d}")
    } else {
        format!("{name}{w}")
    }
}

/// How a number of format type `ty` is shown: dates (`DATE`, `ADATE`,
/// `JDATE`, `EDATE`, `SDATE`), datetimes (`DATETIME`, `YMDHMS`), times
/// (`TIME`, `DTIME`), else as a number.
pub(crate) fn shown_of(ty: u8) -> Shown {
    match ty {
        20 | 23 | 24 | 38 | 39 => Shown::Date,
        22 | 41 => Shown::DateTime,
        21 | 25 => Shown::Time,
        _ => Shown::Number,
    }
}

/// The encoding a code page (subtype 3) or an encoding name (subtype 20)
/// means.
fn encoding_of(name: &str) -> Option<Encoding> {
    Encoding::named(name)
}

/// Reads the header and dictionary of the system file at `path`; `enc`
/// overrides the encoding it names.
pub(crate) fn read(path: &Path, enc: Option<Encoding>) -> Result<Sav> {
    let mut c = Cursor::open(path)?;
    let len = c.len;
    let h = c.bytes(176.min(len), "the header")?;
    if !is_sav(&h) {
        return Err(c.err(
            0,
            "not an SPSS system file: it does not start with $FL2 or $FL3",
        ));
    }
    if h.len() < 176 {
        return Err(c.err(
            0,
            format!(
                "the header needs 176 bytes but the file has {}: it is truncated",
                h.len()
            ),
        ));
    }
    let layout = i32_of(&h[64..68], false);
    c.big = !(layout == 2 || layout == 3);
    if c.big && !matches!(i32_of(&h[64..68], true), 2 | 3) {
        return Err(c.err(64, format!("the layout code {layout} is neither 2 nor 3 in either byte order: the file is damaged")));
    }
    let big = c.big;
    let compression = i32_of(&h[72..76], big);
    if !(0..=2).contains(&compression) || (compression == 2) != h.starts_with(b"$FL3") {
        return Err(c.err(
            72,
            format!(
                "the compression code {compression} does not fit a {} file",
                String::from_utf8_lossy(&h[..4])
            ),
        ));
    }
    let weight_slot = i32_of(&h[76..80], big);
    let ncases = i32_of(&h[80..84], big);
    let bias = f64_of(&h[84..92], big);
    let file_label = h[109..173].to_vec();

    let mut entries: Vec<Entry> = Vec::new();
    let mut slot = 0usize;
    let mut long_names: Option<Vec<u8>> = None;
    let mut very_long: Option<Vec<u8>> = None;
    let mut enc_name: Option<String> = None;
    let mut code_page: Option<i32> = None;
    let mut sysmis = (-f64::MAX).to_bits();
    let mut ncases64: Option<i64> = None;
    let mut long_labels: Vec<u8> = Vec::new();
    let mut long_missing: Vec<u8> = Vec::new();
    loop {
        let at = c.at;
        let rec = c.i32("a dictionary record's type")?;
        match rec {
            2 => {
                let b = c.bytes(28, "a variable record")?;
                let ty = i32_of(&b[0..4], big);
                let has_label = i32_of(&b[4..8], big);
                let n_missing = i32_of(&b[8..12], big);
                let print = i32_of(&b[12..16], big);
                let name = b[20..28].to_vec();
                let label = if has_label != 0 {
                    let n = c.count(1, "a variable label's length")?;
                    let lat = c.at;
                    let raw = c.bytes(n, "a variable label")?;
                    c.bytes((4 - n % 4) % 4, "a variable label's padding")?;
                    Some((raw, lat))
                } else {
                    None
                };
                if !(-3..=3).contains(&n_missing) || n_missing == -1 {
                    return Err(c.err(at, format!("a variable record gives {n_missing} missing values (expected 0 to 3, -2 or -3): the file is damaged")));
                }
                let mut missing = Vec::new();
                for _ in 0..n_missing.unsigned_abs() {
                    let m = c.bytes(8, "a missing value")?;
                    missing.push(m.try_into().expect("8 bytes"));
                }
                if ty < 0 {
                    // A continuation of the previous string.
                    let Some(last) = entries.last_mut() else {
                        return Err(
                            c.err(at, "a continuation record comes first: the file is damaged")
                        );
                    };
                    if last.width == 0 {
                        return Err(c.err(
                            at,
                            "a continuation record follows a numeric variable: the file is damaged",
                        ));
                    }
                    last.slots += 1;
                } else {
                    if ty > 255 {
                        return Err(c.err(at, format!("a string variable {ty} bytes wide (at most 255 in a variable record): the file is damaged")));
                    }
                    entries.push(Entry {
                        slot,
                        slots: 1,
                        width: ty,
                        name,
                        label,
                        print,
                        n_missing,
                        missing,
                        labels: Vec::new(),
                    });
                }
                slot += 1;
            }
            3 => {
                let n = c.count(9, "the number of value labels")?;
                let mut labels = Vec::with_capacity(n as usize);
                for _ in 0..n {
                    let v: [u8; 8] = c.bytes(8, "a labelled value")?.try_into().expect("8 bytes");
                    let l = c.bytes(1, "a value label's length")?[0] as u64;
                    let padded = (l + 8) / 8 * 8 - 1;
                    let raw = c.bytes(padded, "a value label")?;
                    labels.push((v, raw[..l as usize].to_vec()));
                }
                let at4 = c.at;
                if c.i32("the record after value labels")? != 4 {
                    return Err(c.err(at4, "value labels are not followed by the record naming their variables (type 4): the file is damaged"));
                }
                let k = c.count(4, "the number of labelled variables")?;
                for _ in 0..k {
                    let vat = c.at;
                    let idx = c.i32("a labelled variable's index")?;
                    let Some(e) = entries.iter_mut().find(|e| e.slot as i64 == idx as i64 - 1)
                    else {
                        return Err(c.err(vat, format!("value labels name variable index {idx}, which is no variable: the file is damaged")));
                    };
                    e.labels.extend(labels.iter().cloned());
                }
            }
            6 => {
                let n = c.count(80, "the number of document lines")?;
                c.bytes(80 * n, "the documents")?;
            }
            7 => {
                let sub = c.i32("an extension record's subtype")?;
                let size = c.i32("an extension record's size")?;
                let count = c.i32("an extension record's count")?;
                let bytes = (size as i64).saturating_mul(count as i64);
                if size < 0 || count < 0 || bytes as u64 > c.len.saturating_sub(c.at) {
                    return Err(c.err(at, format!("an extension record (subtype {sub}) of {count} × {size} bytes, more than the file holds: it is damaged")));
                }
                let data = c.bytes(bytes as u64, "an extension record")?;
                match sub {
                    3 if data.len() >= 32 => code_page = Some(i32_of(&data[28..32], big)),
                    4 if data.len() >= 8 => sysmis = f64_of(&data[0..8], big).to_bits(),
                    13 => long_names = Some(data),
                    14 => very_long = Some(data),
                    16 if data.len() >= 16 => ncases64 = Some(i64_of(&data[8..16], big)),
                    20 => {
                        enc_name = Some(
                            String::from_utf8_lossy(&data)
                                .trim_end_matches('\0')
                                .trim()
                                .to_string(),
                        )
                    }
                    21 => long_labels = data,
                    22 => long_missing = data,
                    _ => {}
                }
            }
            999 => {
                c.i32("the dictionary's end")?;
                break;
            }
            t => {
                return Err(c.err(at, format!("a dictionary record of type {t} (expected 2, 3, 4, 6, 7 or 999): the file is damaged")));
            }
        }
    }
    let data_start = c.at;
    let named = enc_name.clone().or(code_page.map(|p| p.to_string()));
    let enc = match enc {
        Some(e) => e,
        None => match &named {
            None => Encoding::Windows1252,
            Some(n) => encoding_of(n).ok_or_else(|| {
                c.err(
                    0,
                    format!(
                        "the file's text is in the encoding {n}, which microtab does not know (give the encoding to read it as such)"
                    ),
                )
            })?,
        },
    };
    let text = |raw: &[u8], what: &dyn Fn() -> String, at: u64| -> Result<String> {
        crate::core::binary::decode(raw, enc, what, path, at)
            .map(|s| s.trim_end_matches([' ', '\0']).to_string())
    };
    // Long names and very long string widths, keyed by short name.
    let pairs = |data: &Option<Vec<u8>>, sep: u8| -> BTreeMap<String, String> {
        let mut m = BTreeMap::new();
        if let Some(d) = data {
            for part in d.split(|&b| b == sep) {
                let part: Vec<u8> = part.iter().copied().filter(|&b| b != 0).collect();
                if let Some(eq) = part.iter().position(|&b| b == b'=') {
                    let k = String::from_utf8_lossy(&part[..eq]).trim().to_string();
                    let v = enc
                        .decode(&part[eq + 1..])
                        .map(|s| s.trim().to_string())
                        .unwrap_or_else(|| {
                            String::from_utf8_lossy(&part[eq + 1..]).trim().to_string()
                        });
                    m.insert(k.to_ascii_uppercase(), v);
                }
            }
        }
        m
    };
    let long = pairs(&long_names, b'\t');
    let widths = pairs(&very_long, b'\t');
    let row_len = slot * 8;
    for e in &entries {
        if e.width > 0 && (e.width as usize).div_ceil(8) != e.slots {
            let short = String::from_utf8_lossy(&e.name).trim_end().to_string();
            return Err(c.err(
                0,
                format!(
                    "variable {short} is {} bytes wide but has {} continuation records (expected {}): the file is damaged",
                    e.width,
                    e.slots - 1,
                    (e.width as usize).div_ceil(8) - 1
                ),
            ));
        }
    }
    let mut vars = Vec::new();
    let mut i = 0;
    while i < entries.len() {
        let e = &entries[i];
        let short = String::from_utf8_lossy(&e.name).trim_end().to_string();
        let name = long
            .get(&short.to_ascii_uppercase())
            .cloned()
            .unwrap_or_else(|| short.clone());
        let label = match &e.label {
            Some((raw, at)) => {
                Some(text(raw, &|| format!("the label of {name}"), *at)?).filter(|s| !s.is_empty())
            }
            None => None,
        };
        let (fty, format) = format_name(e.print);
        let numeric = e.width == 0;
        let mut pieces = vec![(e.slot * 8, if numeric { 8 } else { e.width as usize })];
        let mut width = (!numeric).then_some(e.width as usize);
        let mut n = 1;
        if let Some(w) = widths
            .get(&short.to_ascii_uppercase())
            .and_then(|w| w.parse::<usize>().ok())
        {
            if !numeric && w > 255 {
                // Segments of 255 bytes, each in 256 (32 slots), the last
                // the rest.
                let segs = w.div_ceil(252);
                if i + segs > entries.len() {
                    return Err(c.err(0, format!("variable {name} is {w} bytes wide, in {segs} segments, but the dictionary ends first: the file is damaged")));
                }
                pieces.clear();
                for k in 0..segs {
                    let s = &entries[i + k];
                    if s.width == 0 {
                        return Err(c.err(0, format!("segment {} of the very long string {name} is numeric: the file is damaged", k + 1)));
                    }
                    pieces.push((s.slot * 8, (s.slots * 8).min(255)));
                }
                width = Some(w);
                n = segs;
            }
        }
        let shown = if numeric {
            shown_of(fty)
        } else {
            Shown::Number
        };
        let mut missing = Missing::default();
        if numeric {
            let vals: Vec<f64> = e.missing.iter().map(|m| f64_of(m, big)).collect();
            match e.n_missing {
                -2 => missing.range = Some((vals[0], vals[1])),
                -3 => {
                    missing.range = Some((vals[0], vals[1]));
                    missing.values.push(vals[2]);
                }
                _ => missing.values = vals,
            }
        } else {
            for (k, m) in e.missing.iter().enumerate() {
                missing.texts.push(text(
                    m,
                    &|| format!("missing value {} of {name}", k + 1),
                    0,
                )?);
            }
        }
        let mut labels = Vec::new();
        let mut text_labels = Vec::new();
        for (v, raw) in &e.labels {
            let l = text(raw, &|| format!("a value label of {name}"), 0)?;
            if numeric {
                labels.push((f64_of(v, big), l));
            } else {
                text_labels.push((text(v, &|| format!("a labelled value of {name}"), 0)?, l));
            }
        }
        vars.push(Var {
            name,
            label,
            width,
            pieces,
            shown,
            format,
            missing,
            labels,
            text_labels,
        });
        i += n;
    }
    if let Some(v) = vars
        .iter()
        .find(|v| v.pieces.iter().any(|&(o, l)| o + l > row_len))
    {
        return Err(c.err(
            0,
            format!(
                "variable {} lies beyond the {row_len}-byte record: the file is damaged",
                v.name
            ),
        ));
    }
    long_string_extras(&c, &mut vars, &long_labels, &long_missing, big, enc)?;
    let weight = entries
        .iter()
        .find(|e| weight_slot > 0 && e.slot as i32 == weight_slot - 1)
        .map(|e| {
            let short = String::from_utf8_lossy(&e.name).trim_end().to_string();
            long.get(&short.to_ascii_uppercase())
                .cloned()
                .unwrap_or(short)
        });
    let records = match (ncases64, ncases) {
        (Some(n), _) if n >= 0 => Some(n as u64),
        (_, n) if n >= 0 => Some(n as u64),
        _ => None,
    };
    let label = text(&file_label, &|| "the file label".into(), 109)?;
    Ok(Sav {
        big,
        compression,
        bias,
        records,
        label,
        weight,
        vars,
        row_len,
        data_start,
        sysmis,
        enc,
        named_encoding: named,
    })
}

/// Value labels and missing values of strings wider than 8 bytes
/// (subtypes 21 and 22), by variable name.
fn long_string_extras(
    c: &Cursor,
    vars: &mut [Var],
    labels: &[u8],
    missing: &[u8],
    big: bool,
    enc: Encoding,
) -> Result<()> {
    let bad = |what: &str| c.err(0, format!("{what} is damaged"));
    let dec = |raw: &[u8]| -> String {
        enc.decode(raw)
            .map(|s| s.trim_end_matches([' ', '\0']).to_string())
            .unwrap_or_else(|| String::from_utf8_lossy(raw).trim_end().to_string())
    };
    let mut p = 0usize;
    let take = |p: &mut usize, n: usize, d: &[u8], what: &str| -> Result<std::ops::Range<usize>> {
        if *p + n > d.len() {
            return Err(bad(what));
        }
        *p += n;
        Ok(*p - n..*p)
    };
    let what = "the value labels of long strings (extension 21)";
    while p < labels.len() {
        let r = take(&mut p, 4, labels, what)?;
        let n = i32_of(&labels[r], big).max(0) as usize;
        let r = take(&mut p, n, labels, what)?;
        let name = dec(&labels[r]);
        take(&mut p, 4, labels, what)?; // width
        let r = take(&mut p, 4, labels, what)?;
        let count = i32_of(&labels[r], big).max(0) as usize;
        let mut pairs = Vec::new();
        for _ in 0..count {
            let r = take(&mut p, 4, labels, what)?;
            let n = i32_of(&labels[r], big).max(0) as usize;
            let r = take(&mut p, n, labels, what)?;
            let v = dec(&labels[r]);
            let r = take(&mut p, 4, labels, what)?;
            let n = i32_of(&labels[r], big).max(0) as usize;
            let r = take(&mut p, n, labels, what)?;
            pairs.push((v, dec(&labels[r])));
        }
        if let Some(v) = vars.iter_mut().find(|v| v.name.eq_ignore_ascii_case(&name)) {
            v.text_labels.extend(pairs);
        }
    }
    let what = "the missing values of long strings (extension 22)";
    let mut p = 0usize;
    while p < missing.len() {
        let r = take(&mut p, 4, missing, what)?;
        let n = i32_of(&missing[r], big).max(0) as usize;
        let r = take(&mut p, n, missing, what)?;
        let name = dec(&missing[r]);
        let r = take(&mut p, 1, missing, what)?;
        let count = missing[r][0] as usize;
        let r = take(&mut p, 4, missing, what)?;
        let len = i32_of(&missing[r], big).max(0) as usize;
        let mut texts = Vec::new();
        for _ in 0..count {
            let r = take(&mut p, len, missing, what)?;
            texts.push(dec(&missing[r]));
        }
        if let Some(v) = vars.iter_mut().find(|v| v.name.eq_ignore_ascii_case(&name)) {
            v.missing.texts.extend(texts);
        }
    }
    Ok(())
}
