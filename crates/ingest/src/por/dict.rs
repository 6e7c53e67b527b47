//! The header and dictionary of a portable file, read into the
//! description of an SPSS system file ([`Sav`]) so that the system file's
//! import decodes the records: the splash and translation table, the
//! signature, then tagged records up to the data (`F`).

use super::chars::{signed, Chars, Table};
use super::number::{Base30, Step, Value};
use crate::core::dates::Shown;
use crate::error::{Error, Result};
use crate::options::Encoding;
use crate::sav::{format_text, shown_of, Missing, Sav, Var};
use std::fs::File;
use std::path::{Path, PathBuf};

/// Characters of the header before the signature: the splash (5 × 40)
/// and the translation table (256).
const HEADER: usize = 456;

/// The longest text of the dictionary (names, labels).
const LONGEST_TEXT: i64 = 65_535;

/// The widest string (SPSS's limit).
const WIDEST: i64 = 32_767;

/// The longest record the data may need (the variables' widths): 16 MiB.
const LONGEST_RECORD: usize = 16 << 20;

/// Some format types are written 82 higher in files from the wild
/// (ReadStat's issue 158): a type above this is read 82 lower.
const FORMAT_SHIFT: i64 = 82;

/// The fields of a portable file, read one after the other from its
/// characters, each error naming the byte where the field starts.
pub(crate) struct Fields {
    pub chars: Chars<File>,
    pub table: Table,
    pub path: PathBuf,
    /// The file's size.
    pub len: u64,
    pub enc: Encoding,
    /// Texts holding bytes beyond ASCII the table does not name.
    pub foreign: u64,
}

impl Fields {
    pub(crate) fn err(&self, offset: u64, reason: impl Into<String>) -> Error {
        Error::Format {
            path: self.path.clone(),
            offset,
            reason: reason.into(),
        }
    }

    fn io(&self, e: std::io::Error) -> Error {
        Error::Input {
            path: self.path.clone(),
            reason: format!("cannot read: {e}"),
        }
    }

    /// Bytes of the file after the next character.
    pub(crate) fn left(&self) -> u64 {
        self.len.saturating_sub(self.chars.offset())
    }

    /// The next character; the end of the file is an error naming `what`
    /// was being read.
    pub(crate) fn next(&mut self, what: &dyn Fn() -> String) -> Result<u8> {
        match self.chars.next() {
            Ok(Some(c)) => Ok(c),
            Ok(None) => Err(self.err(
                self.chars.offset(),
                format!("the file ends inside {}: it is truncated", what()),
            )),
            Err(e) => Err(self.io(e)),
        }
    }

    /// A number field holding `what`.
    pub(crate) fn number(&mut self, what: &dyn Fn() -> String) -> Result<Value> {
        let at = self.chars.offset();
        let mut b = Base30::new();
        let mut seen = Vec::new();
        loop {
            let c = self.next(what)?;
            let a = self.table.ascii[c as usize];
            if seen.len() < 24 {
                seen.push(if a == 0 { b'?' } else { a });
            }
            match b.push(a) {
                Step::More => {}
                Step::Done(v) => return Ok(v),
                Step::Bad => {
                    return Err(self.err(
                        at,
                        format!(
                        "{} is not a base-30 number ending in /: found {:?}: the file is damaged",
                        what(),
                        String::from_utf8_lossy(&seen).trim_start()
                    ),
                    ))
                }
            }
        }
    }

    /// A whole number from `lo` to `hi` holding `what`.
    pub(crate) fn int(&mut self, what: &dyn Fn() -> String, lo: i64, hi: i64) -> Result<i64> {
        let at = self.chars.offset();
        match self.number(what)? {
            Value::Num(x) if x.fract() == 0.0 && x >= lo as f64 && x <= hi as f64 => Ok(x as i64),
            v => Err(self.err(
                at,
                format!(
                    "{} is {}, where a whole number from {lo} to {hi} is expected: the file is damaged",
                    what(),
                    match v {
                        Value::Num(x) => microtab_store::codec::format_float(x),
                        Value::Sysmis => "missing (*.)".into(),
                    }
                ),
            )),
        }
    }

    /// A string field holding `what` (at most `longest` characters), as
    /// the bytes of the text encoding.
    fn raw_string(&mut self, what: &dyn Fn() -> String, longest: i64) -> Result<(Vec<u8>, u64)> {
        let at = self.chars.offset();
        let n = self.int(&|| format!("the length of {}", what()), 0, longest)?;
        let mut out = Vec::new();
        let mut foreign = false;
        for _ in 0..n {
            let c = self.next(what)? as usize;
            out.extend_from_slice(&self.table.local[c]);
            foreign |= self.table.foreign[c];
        }
        self.foreign += u64::from(foreign);
        Ok((out, at))
    }

    /// A string field holding `what`, decoded (trailing blanks cut).
    pub(crate) fn text(&mut self, what: &dyn Fn() -> String) -> Result<String> {
        let (raw, at) = self.raw_string(what, LONGEST_TEXT)?;
        crate::core::binary::decode(&raw, self.enc, what, &self.path, at)
            .map(|s| s.trim_end_matches([' ', '\0']).to_string())
    }

    /// A numeric or string value (a missing value or a labelled value)
    /// of a variable of `width` (0 numeric).
    fn value(&mut self, width: usize, what: &dyn Fn() -> String) -> Result<Given> {
        if width == 0 {
            Ok(match self.number(what)? {
                Value::Num(x) => Given::Num(x),
                Value::Sysmis => Given::Sysmis,
            })
        } else {
            self.text(what).map(Given::Text)
        }
    }
}

/// A value the dictionary gives.
enum Given {
    Num(f64),
    Sysmis,
    Text(String),
}

/// A variable as its records describe it.
struct PorVar {
    name: String,
    /// 0 numeric, else the string's width.
    width: usize,
    /// The print format's type, width and decimals.
    print: (i64, i64, i64),
    label: Option<String>,
    missing: Missing,
    /// Discrete missing values given.
    discrete: usize,
    ranged: bool,
    labels: Vec<(f64, String)>,
    text_labels: Vec<(String, String)>,
}

/// A portable file's dictionary, and its fields from the first record of
/// the data on.
pub(crate) struct Por {
    pub sav: Sav,
    /// What was left out of the dictionary.
    pub notes: Vec<String>,
    pub fields: Fields,
}

/// Reads the header and dictionary of the portable file at `path`; text
/// beyond the portable characters is read in `enc` (Windows-1252 when
/// `None`).
pub(crate) fn read(path: &Path, enc: Option<Encoding>) -> Result<Por> {
    let file = File::open(path).map_err(|e| Error::Input {
        path: path.to_path_buf(),
        reason: format!("cannot open: {e}"),
    })?;
    let len = file.metadata().map(|m| m.len()).unwrap_or(0);
    let enc = enc.unwrap_or(Encoding::Windows1252);
    let mut f = Fields {
        chars: Chars::new(file),
        table: Table::new(&[b'0'; 256], enc),
        path: path.to_path_buf(),
        len,
        enc,
        foreign: 0,
    };
    let mut head = Vec::with_capacity(HEADER + 8);
    while head.len() < HEADER + 8 {
        match f.chars.next() {
            Ok(Some(c)) => head.push(c),
            Ok(None) => {
                return Err(f.err(
                    f.chars.offset(),
                    format!(
                        "not an SPSS portable file: it ends after {} characters, before the signature SPSSPORT at character {HEADER}",
                        head.len()
                    ),
                ))
            }
            Err(e) => return Err(f.io(e)),
        }
    }
    let raw = head;
    if !signed(&raw) {
        return Err(f.err(
            f.chars.offset().saturating_sub(8),
            format!(
                "not an SPSS portable file: the 8 characters after the splash and translation table are {:?}, not SPSSPORT in the table's characters",
                crate::error::show(&raw[HEADER..])
            ),
        ));
    }
    f.table = Table::new(&raw[200..HEADER], enc);
    f.chars.set_space(f.table.space);
    // The file label, where SPSS and ReadStat write it: after the
    // splash's ASCII name.
    let label = enc
        .decode(&raw[60..80])
        .map_or_else(
            || String::from_utf8_lossy(&raw[60..80]).into_owned(),
            |s| s.into_owned(),
        )
        .trim()
        .to_string();
    // The version (a character) and the creation date and time.
    f.next(&|| "the version".into())?;
    f.text(&|| "the creation date".into())?;
    f.text(&|| "the creation time".into())?;
    let mut count: Option<usize> = None;
    let mut vars: Vec<PorVar> = Vec::new();
    let mut weight = None;
    let mut notes = Vec::new();
    loop {
        let at = f.chars.offset();
        let c = f.next(&|| "the dictionary".into())?;
        let tag = f.table.ascii[c as usize];
        let out_of_place = |f: &Fields, why: &str| {
            f.err(
                at,
                format!("a record of tag {} {why}: the file is damaged", tag as char),
            )
        };
        match tag {
            b'1' | b'2' | b'3' => {
                f.text(&|| format!("the identification record {}", tag as char))?;
            }
            b'4' => {
                if count.is_some() || !vars.is_empty() {
                    return Err(out_of_place(
                        &f,
                        "(the variable count) comes twice, or after variables",
                    ));
                }
                let bound = (f.left() / 8) as i64;
                let n = f.int(&|| "the variable count".into(), 0, i64::MAX)?;
                if n > bound {
                    return Err(f.err(
                        at,
                        format!(
                            "the variable count is {n}, more than the {} bytes left in the file can describe: it is truncated or damaged",
                            f.left()
                        ),
                    ));
                }
                count = Some(n as usize);
            }
            b'5' => {
                f.int(&|| "the precision".into(), 0, 1000)?;
            }
            b'6' => weight = Some(f.text(&|| "the weight variable's name".into())?),
            b'7' => {
                let Some(n) = count else {
                    return Err(out_of_place(
                        &f,
                        "(a variable) comes before the variable count",
                    ));
                };
                if vars.len() >= n {
                    return Err(out_of_place(
                        &f,
                        &format!("(a variable) comes after the {n} variables the file announces"),
                    ));
                }
                vars.push(variable(&mut f, vars.len() + 1)?);
            }
            b'8' | b'9' | b'A' | b'B' => {
                let Some(v) = vars.last_mut() else {
                    return Err(out_of_place(
                        &f,
                        "(a missing value) comes before any variable",
                    ));
                };
                missing(&mut f, v, tag, at, &mut notes)?;
            }
            b'C' => {
                let Some(v) = vars.last_mut() else {
                    return Err(out_of_place(
                        &f,
                        "(a variable label) comes before any variable",
                    ));
                };
                let name = v.name.clone();
                let l = f.text(&|| format!("the label of {name}"))?;
                v.label = Some(l).filter(|l| !l.is_empty());
            }
            b'D' => value_labels(&mut f, &mut vars, at)?,
            b'E' => {
                let n = f.int(
                    &|| "the number of document lines".into(),
                    0,
                    f.left() as i64,
                )?;
                for k in 0..n {
                    f.text(&|| format!("document line {}", k + 1))?;
                }
            }
            b'F' => {
                let n = count.unwrap_or(0);
                if vars.len() != n {
                    return Err(f.err(
                        at,
                        format!(
                            "the data begin after {} variables of the {n} the file announces: it is damaged",
                            vars.len()
                        ),
                    ));
                }
                break;
            }
            _ => {
                let shown = if tag == 0 {
                    format!("byte {c}")
                } else {
                    format!("{:?}", tag as char)
                };
                return Err(f.err(
                    at,
                    format!("expected a record tag (1-9, A-F), found {shown}: the file is damaged"),
                ));
            }
        }
    }
    let data_start = f.chars.offset();
    let sav = describe(&f, vars, label, weight, data_start)?;
    Ok(Por {
        sav,
        notes,
        fields: f,
    })
}

/// A variable record (tag `7`): width, name, print and write formats.
fn variable(f: &mut Fields, k: usize) -> Result<PorVar> {
    let width = f.int(&|| format!("the width of variable {k}"), 0, WIDEST)? as usize;
    let name = f.text(&|| format!("the name of variable {k}"))?;
    let name = name.trim().to_string();
    if name.is_empty() {
        return Err(f.err(
            f.chars.offset(),
            format!("variable {k} has no name: the file is damaged"),
        ));
    }
    let mut fmt = [0i64; 6];
    for (i, x) in fmt.iter_mut().enumerate() {
        let part = ["type", "width", "decimals"][i % 3];
        let which = if i < 3 { "print" } else { "write" };
        let hi = if i % 3 == 1 {
            65_535
        } else {
            255 + FORMAT_SHIFT
        };
        *x = f.int(&|| format!("the {which} format's {part} of {name}"), 0, hi)?;
    }
    let ty = if fmt[0] > FORMAT_SHIFT {
        fmt[0] - FORMAT_SHIFT
    } else {
        fmt[0]
    };
    Ok(PorVar {
        name,
        width,
        print: (ty, fmt[1], fmt[2]),
        label: None,
        missing: Missing::default(),
        discrete: 0,
        ranged: false,
        labels: Vec::new(),
        text_labels: Vec::new(),
    })
}

/// A missing value (tag `8`) or range (`9` LO THRU x, `A` x THRU HI, `B`
/// x THRU y) of `v`.
fn missing(
    f: &mut Fields,
    v: &mut PorVar,
    tag: u8,
    at: u64,
    notes: &mut Vec<String>,
) -> Result<()> {
    let name = v.name.clone();
    let what = || format!("a missing value of {name}");
    let mut given = Vec::new();
    for _ in 0..if tag == b'B' { 2 } else { 1 } {
        given.push(f.value(v.width, &what)?);
    }
    let many = |f: &Fields| {
        f.err(
            at,
            format!(
                "variable {name} has more missing values than SPSS allows (three, or a range and one): the file is damaged"
            ),
        )
    };
    if tag == b'8' {
        if v.discrete >= 3 || (v.ranged && v.discrete >= 1) {
            return Err(many(f));
        }
        v.discrete += 1;
        match given.pop() {
            Some(Given::Num(x)) => v.missing.values.push(x),
            Some(Given::Text(t)) => v.missing.texts.push(t),
            _ => {}
        }
        return Ok(());
    }
    if v.ranged || v.discrete > 1 {
        return Err(many(f));
    }
    v.ranged = true;
    let num = |g: &Given| match g {
        Given::Num(x) => Some(*x),
        _ => None,
    };
    let (lo, hi) = match tag {
        b'9' => (Some(-f64::MAX), num(&given[0])),
        b'A' => (num(&given[0]), Some(f64::MAX)),
        _ => (num(&given[0]), num(&given[1])),
    };
    match (v.width, lo, hi) {
        (0, Some(lo), Some(hi)) => v.missing.range = Some((lo, hi)),
        (0, _, _) => {}
        _ => notes.push(format!(
            "variable {name}: its range of text missing values is left out (SPSS gives ranges to numbers only)"
        )),
    }
    Ok(())
}

/// A value-label record (tag `D`): the variables it names (all numeric or
/// all strings), then the values and their labels.
fn value_labels(f: &mut Fields, vars: &mut [PorVar], at: u64) -> Result<()> {
    let n = f.int(
        &|| "the number of variables given value labels".into(),
        0,
        f.left() as i64,
    )?;
    let mut which: Vec<usize> = Vec::new();
    for k in 0..n {
        let vat = f.chars.offset();
        let name = f.text(&|| format!("variable {} given value labels", k + 1))?;
        let found = vars
            .iter()
            .position(|v| v.name == name)
            .or_else(|| vars.iter().position(|v| v.name.eq_ignore_ascii_case(&name)));
        let Some(i) = found else {
            return Err(f.err(
                vat,
                format!(
                    "value labels name the variable {name:?}, which the dictionary does not define: the file is damaged"
                ),
            ));
        };
        if let Some(&j) = which.first() {
            if (vars[j].width == 0) != (vars[i].width == 0) {
                return Err(f.err(
                    vat,
                    format!(
                        "value labels name the {} variable {} and the {} variable {} together: the file is damaged",
                        kind(vars[j].width),
                        vars[j].name,
                        kind(vars[i].width),
                        vars[i].name
                    ),
                ));
            }
        }
        which.push(i);
    }
    let width = which.first().map_or(0, |&i| vars[i].width);
    let m = f.int(&|| "the number of value labels".into(), 0, f.left() as i64)?;
    let mut nums = Vec::new();
    let mut texts = Vec::new();
    for k in 0..m {
        let value = f.value(width, &|| {
            format!("labelled value {} of the record at byte {at}", k + 1)
        })?;
        let label = f.text(&|| format!("value label {} of the record at byte {at}", k + 1))?;
        match value {
            Given::Num(x) => nums.push((x, label)),
            Given::Text(t) => texts.push((t, label)),
            Given::Sysmis => {}
        }
    }
    for i in which {
        vars[i].labels.extend(nums.iter().cloned());
        vars[i].text_labels.extend(texts.iter().cloned());
    }
    Ok(())
}

fn kind(width: usize) -> &'static str {
    if width == 0 {
        "numeric"
    } else {
        "string"
    }
}

/// The dictionary as a system file's: each number 8 bytes of a record, each
/// string its width in bytes.
fn describe(
    f: &Fields,
    vars: Vec<PorVar>,
    label: String,
    weight: Option<String>,
    data_start: u64,
) -> Result<Sav> {
    let mut at = 0usize;
    let mut out = Vec::with_capacity(vars.len());
    for v in vars {
        let (ty, w, d) = v.print;
        let numeric = v.width == 0;
        let bytes = if numeric { 8 } else { v.width };
        out.push(Var {
            name: v.name,
            label: v.label,
            width: (!numeric).then_some(v.width),
            pieces: vec![(at, bytes)],
            shown: if numeric {
                shown_of(ty as u8)
            } else {
                Shown::Number
            },
            format: format_text(ty as u8, w as u32, d as u32),
            missing: v.missing,
            labels: v.labels,
            text_labels: v.text_labels,
        });
        at += bytes;
        if at > LONGEST_RECORD {
            return Err(f.err(
                data_start,
                format!(
                    "the variables' widths make records of more than {} MiB, more than microtab reads: the file is damaged",
                    LONGEST_RECORD >> 20
                ),
            ));
        }
    }
    Ok(Sav {
        big: false,
        compression: -1,
        bias: 100.0,
        records: None,
        label,
        weight,
        vars: out,
        row_len: at,
        data_start,
        sysmis: (-f64::MAX).to_bits(),
        enc: f.enc,
        named_encoding: None,
    })
}
