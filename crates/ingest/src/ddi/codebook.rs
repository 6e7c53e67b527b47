//! Reading a DDI 2.x codebook (the XML that IPUMS ships with every
//! fixed-width extract): where each variable sits in a record, its implied
//! decimals, labels, description, value labels and missing codes, and for
//! hierarchical files the record types.
//!
//! Only the parts of DDI that describe a data file are read:
//!
//! | DDI | becomes |
//! | --- | --- |
//! | `fileDscr/fileTxt/fileName` | [`Codebook::file_name`] |
//! | `fileType/@charset` | [`Codebook::charset`] |
//! | `fileStrc/@type`, `recGrp/@rectype @recidvar @keyvar` | [`Codebook::record_groups`] |
//! | `var/@name @dcml @rectype` | name, [`DdiVariable::decimals`], record types |
//! | `var/location/@StartPos @EndPos @width` | columns (1-based, inclusive) |
//! | `var/varFormat/@type="character"` | a text variable |
//! | `var/labl`, `var/txt` | label, description |
//! | `var/catgry` (`catValu`, `labl`, `@missing="Y"`) | value labels, missing codes |
//! | `var/invalrng` (`item/@VALUE`, `range/@min @max`) | missing codes |
//!
//! Element names are matched without their namespace prefix, so both the
//! old (`http://www.icpsr.umich.edu/DDI`) and the DDI 2.5
//! (`ddi:codebook:2_5`) namespaces work.
//!
//! One file (~810 lines before its tests): a streaming parser of one XML
//! vocabulary, whose element handlers share the parser's stack and
//! positions for their error messages.

use crate::error::{Error, Result};
use crate::note::Note;
use microtab_store::Remedy;
use quick_xml::events::{BytesStart, Event};
use quick_xml::Reader;
use std::path::{Path, PathBuf};

/// Most values a missing-value range (`<range min max>`) may expand to.
const MAX_RANGE_CODES: i64 = 10_000;

/// Text encoding of the data file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Charset {
    /// ISO-8859-1 (IPUMS's default): each byte is one character.
    Latin1,
    /// UTF-8.
    Utf8,
}

/// One record type of a hierarchical file (`<recGrp>`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RecordGroup {
    /// The record-type code in the data (`H`, `P`).
    pub rectype: String,
    /// Its label (`Household Record`).
    pub label: Option<String>,
    /// The variable holding the record type (`RECTYPE`).
    pub recidvar: Option<String>,
    /// The variable linking the record to its parent (`SERIAL`); absent on
    /// the top-level record type.
    pub keyvar: Option<String>,
    /// Further codes that mark records of this type (a setup's `RECORD
    /// TYPE 'A', 'B'` or `IF T IN ('A', 'B')`); empty in a DDI codebook.
    pub codes: Vec<String>,
}

/// One value category (`<catgry>`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DdiCategory {
    /// The code as the codebook writes it (`"01"`, `"0A"`).
    pub value: String,
    /// Its label; `None` when the codebook gives an empty one.
    pub label: Option<String>,
    /// Declared missing (`missing="Y"`).
    pub missing: bool,
}

/// One variable (`<var>`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DdiVariable {
    /// Name (`name` attribute, else `ID`).
    pub name: String,
    /// Variable label (`<labl>`).
    pub label: Option<String>,
    /// Description (`<txt>`).
    pub description: Option<String>,
    /// First column, 1-based.
    pub start: usize,
    /// Last column, 1-based and inclusive.
    pub end: usize,
    /// Implied decimals (`dcml`): the digits `000123` with 2 mean `1.23`.
    pub decimals: u32,
    /// Of [`DdiVariable::decimals`], those that divide every value, written
    /// with a decimal point or not (a setup file's `replace V = V / 100`);
    /// 0 for a DDI codebook, whose implied decimals give way to a point.
    pub divide: u32,
    /// Alphabetic (`varFormat type="character"`).
    pub text: bool,
    /// How a number is written: plain digits (a DDI codebook), or with
    /// grouping and currency signs (a setup's `COMMA`, `DOLLAR` formats).
    pub style: NumberStyle,
    /// Record types the variable appears on (hierarchical files; empty for
    /// rectangular ones).
    pub record_types: Vec<String>,
    /// Value categories in codebook order.
    pub categories: Vec<DdiCategory>,
    /// Missing codes from `<invalrng>` (`item` values and expanded
    /// `range`s), as written in the codebook.
    pub invalid: Vec<String>,
    /// Whole-number `<invalrng>` ranges too wide to expand here (more than
    /// 10,000 values), as written: the importer keeps the codes of each
    /// that lie within the values the data hold.
    pub invalid_ranges: Vec<(String, String)>,
    /// Coding instructions (`<codInstr>`), where IPUMS lists codes such as
    /// `99999999 = N.I.U. (Not in Universe).` that have no `<catgry>`.
    pub coding: Option<String>,
    /// Codes the codebook names "not in universe", missing, unknown or
    /// blank without declaring them missing: in a value label, or in the
    /// description or coding instructions. The importer makes them missing
    /// codes ([`Codebook::keep_niu_codes`] keeps them as values).
    pub niu: Vec<NiuCode>,
}

/// How the numbers of a fixed-width field are written.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum NumberStyle {
    /// Digits, a sign and a decimal point.
    #[default]
    Plain,
    /// Commas group the digits and `$` or `%` may be written (SAS's
    /// `COMMA` and `DOLLAR` informats, SPSS's `COMMA`, `DOLLAR`, `PCT`):
    /// `$1,234.50` is 1234.50.
    Grouped,
    /// Points group the digits and a comma is the decimal point (SAS's
    /// `COMMAX`, SPSS's `DOT`): `1.234,50` is 1234.50.
    DecimalComma,
}

/// A code the codebook names not-in-universe or missing (see
/// [`DdiVariable::niu`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NiuCode {
    /// The code as the codebook writes it (`99999999`, `0`).
    pub value: String,
    /// Where the codebook says so: its value label, or the sentence of its
    /// text (`99999998 = Missing`).
    pub evidence: String,
    /// Whether the evidence is a value label (else the variable's text).
    pub from_label: bool,
}

impl DdiVariable {
    /// Width in columns.
    pub fn width(&self) -> usize {
        self.end + 1 - self.start
    }
}

/// A parsed codebook.
#[derive(Debug, Clone)]
pub struct Codebook {
    /// The XML file it was read from (for messages).
    pub path: PathBuf,
    /// The data file it describes (`<fileName>`), if given.
    pub file_name: Option<String>,
    /// Encoding of text in the data file.
    pub charset: Charset,
    /// Whether the file is hierarchical (`fileStrc type="hierarchical"`).
    pub hierarchical: bool,
    /// Record types (hierarchical files), in codebook order.
    pub record_groups: Vec<RecordGroup>,
    /// Variables in codebook order.
    pub variables: Vec<DdiVariable>,
    /// Read the data as Stata, SPSS and SAS read text (setup files): a
    /// field past a record's end or holding `.` is missing, and numbers
    /// may be written in E notation; a DDI codebook's records must hold
    /// every field, each a number where it says so.
    pub lenient: bool,
    /// The widths of the lines of a record spread over several lines (a
    /// setup's `RECORDS=`, `#2`, `_line(2)`): each line is cut or padded
    /// with blanks to its width and the lines are joined, and variables'
    /// columns count in the joined record. Empty: a record is one line.
    pub record_lines: Vec<usize>,
    /// Records of a type no record group lists are skipped and counted
    /// (a setup's records of types it reads no layout for: SPSS's `FILE
    /// TYPE` skips them, a SAS program never outputs them), where a DDI
    /// codebook's are an error.
    pub skip_unlisted: bool,
    /// The record type a setup's program outputs (SAS `OUTPUT` within one
    /// type's block): the type whose records become rows when none is
    /// asked for.
    pub output_type: Option<String>,
    /// Things the codebook declares that could not be used (e.g. a huge
    /// missing-value range); worth showing to the user.
    pub warnings: Vec<Note>,
    /// The study's title (`stdyDscr/citation/titlStmt/titl`; IPUMS writes
    /// "User Extract cps_00006.dat"), the dataset's title on import.
    pub title: Option<String>,
    /// The study's abstract (`stdyDscr/stdyInfo/abstract`), else its notes
    /// (`stdyDscr/notes`: IPUMS writes the extract's user-provided
    /// description there), the dataset's description on import.
    pub description: Option<String>,
}

#[derive(Default)]
struct VarBuilder {
    name: String,
    start: Option<usize>,
    end: Option<usize>,
    width: Option<usize>,
    decimals: u32,
    text: bool,
    record_types: Vec<String>,
    label: Option<String>,
    description: Option<String>,
    categories: Vec<DdiCategory>,
    invalid: Vec<String>,
    invalid_ranges: Vec<(String, String)>,
    coding: Option<String>,
    line: u64,
}

#[derive(Default)]
struct CatBuilder {
    value: Option<String>,
    label: Option<String>,
    missing: bool,
}

impl Codebook {
    /// Reads and parses the codebook at `path`.
    pub fn read(path: &Path) -> Result<Codebook> {
        let bytes = std::fs::read(path).map_err(|e| crate::core::source::io_err(path, e))?;
        let text = match String::from_utf8(bytes) {
            Ok(t) => t,
            Err(e) => {
                let b = e.into_bytes();
                // An XML declaration naming a single-byte encoding is fine.
                let head = String::from_utf8_lossy(&b[..b.len().min(200)]).to_ascii_lowercase();
                if head.starts_with("<?xml") && head.contains("iso-8859-1") {
                    b.iter().map(|&c| c as char).collect()
                } else {
                    return Err(Error::Codebook {
                        path: path.to_path_buf(),
                        reason: "not a DDI codebook: the file is not UTF-8 text".into(),
                    });
                }
            }
        };
        Codebook::parse(path, &text)
    }

    /// Parses codebook XML `text`; `path` is used in messages.
    pub fn parse(path: &Path, text: &str) -> Result<Codebook> {
        Parser::new(path, text.strip_prefix('\u{feff}').unwrap_or(text)).run()
    }

    /// The variable named `name` (case-insensitive).
    pub fn variable(&self, name: &str) -> Option<&DdiVariable> {
        self.variables
            .iter()
            .find(|v| v.name.eq_ignore_ascii_case(name))
    }

    /// Keeps the codes the codebook names not-in-universe or missing only
    /// in labels or text ([`DdiVariable::niu`]) as ordinary values; codes
    /// it declares missing (`missing="Y"`, `<invalrng>`) stay missing.
    pub fn keep_niu_codes(&mut self) {
        for v in &mut self.variables {
            v.niu.clear();
        }
    }

    /// The record-type variable of a hierarchical file (`RECTYPE`).
    pub fn record_id_variable(&self) -> Option<&DdiVariable> {
        let name = self
            .record_groups
            .iter()
            .find_map(|g| g.recidvar.as_deref())
            .unwrap_or("RECTYPE");
        self.variable(name)
    }

    /// The person record type of a hierarchical file: the one a setup's
    /// program outputs ([`Codebook::output_type`]), else `P` when the
    /// codebook lists it, else the one whose label names persons (ATUS
    /// numbers its types: `2`, "Person Record").
    pub fn person_record_type(&self) -> Option<&str> {
        let g = &self.record_groups;
        if let Some(t) = g
            .iter()
            .find(|r| Some(&r.rectype) == self.output_type.as_ref())
        {
            return Some(&t.rectype);
        }
        g.iter()
            .find(|r| r.rectype == "P")
            .or_else(|| {
                let mut people = g.iter().filter(|r| {
                    r.label
                        .as_deref()
                        .is_some_and(|l| l.to_ascii_lowercase().contains("person"))
                });
                match (people.next(), people.next()) {
                    (Some(p), None) => Some(p),
                    _ => None,
                }
            })
            .map(|r| r.rectype.as_str())
    }

    /// The label of record type `t`, if the codebook gives one.
    pub fn record_type_label(&self, t: &str) -> Option<&str> {
        self.record_groups
            .iter()
            .find(|r| r.rectype == t)
            .and_then(|r| r.label.as_deref())
    }

    /// The top-level record type of a hierarchical file (the household):
    /// the one without a `keyvar`, else `H`, else the first listed.
    pub fn top_record_type(&self) -> Option<&str> {
        let g = &self.record_groups;
        let mut tops = g.iter().filter(|r| r.keyvar.is_none());
        if let (Some(t), None) = (tops.next(), tops.next()) {
            return Some(&t.rectype);
        }
        g.iter()
            .find(|r| r.rectype == "H")
            .or(g.first())
            .map(|r| r.rectype.as_str())
    }
}

/// Whether a value label says "not in universe" or missing: every part of
/// it (split at brackets, commas, slashes and "or") is one of the phrases
/// IPUMS and survey codebooks use — `NIU`, `N.I.U. (Not in Universe)`,
/// `N/A`, `Missing`, `Unknown/missing`, `Blank`, `Don't know`, `Refused`
/// — so that "Unknown cause" or "999 or more" are not.
pub fn is_niu_label(label: &str) -> bool {
    const PHRASES: &[&str] = &[
        "niu",
        "n.i.u",
        "not in universe",
        "n/a",
        "not applicable",
        "missing",
        "missing data",
        "unknown",
        "blank",
        "not reported",
        "no response",
        "don't know",
        "dont know",
        "refused",
        "illegible",
        "not ascertained",
    ];
    let l = label.to_lowercase().replace('\u{2019}', "'");
    let phrase = |p: &str| {
        let p = p.trim().trim_end_matches('.').trim();
        PHRASES.contains(&p)
    };
    let mut parts = 0;
    for part in l
        .split(['(', ')', ',', ';', '[', ']'])
        .flat_map(|p| p.split(" or "))
    {
        if part.trim().trim_end_matches('.').trim().is_empty() {
            continue;
        }
        parts += 1;
        if !(phrase(part) || part.split('/').all(|q| !q.trim().is_empty() && phrase(q))) {
            return false;
        }
    }
    parts > 0
}

/// The codes a variable's labels and text name not-in-universe or missing
/// (not those already declared missing). Text is read for `CODE = LABEL`
/// and `CODE: LABEL` (IPUMS's coding instructions), a code being at most
/// `width` digits.
fn niu_codes(v: &VarBuilder, width: usize) -> Vec<NiuCode> {
    niu_of(
        &v.categories,
        &v.invalid,
        v.text,
        [v.coding.as_deref(), v.description.as_deref()],
        width,
    )
}

/// The not-in-universe codes of a variable described by its categories,
/// declared missing codes, kind and texts (coding instructions,
/// description); see [`DdiVariable::niu`]. Setup files give the same parts.
pub(crate) fn niu_of(
    categories: &[DdiCategory],
    invalid: &[String],
    text: bool,
    texts: [Option<&str>; 2],
    width: usize,
) -> Vec<NiuCode> {
    let mut out: Vec<NiuCode> = Vec::new();
    let declared = |c: &str| {
        invalid.iter().any(|x| x == c) || categories.iter().any(|k| k.missing && k.value == c)
    };
    for c in categories {
        if !c.missing && !declared(&c.value) {
            if let Some(l) = c.label.as_deref().filter(|l| is_niu_label(l)) {
                out.push(NiuCode {
                    value: c.value.clone(),
                    evidence: l.to_string(),
                    from_label: true,
                });
            }
        }
    }
    if text {
        return out;
    }
    for text in texts.into_iter().flatten() {
        let b = text.as_bytes();
        let mut i = 0;
        while i < b.len() {
            // A code: digits (optionally signed) not inside a word or a
            // longer number.
            let starts = b[i].is_ascii_digit()
                && (i == 0 || !(b[i - 1].is_ascii_alphanumeric() || b[i - 1] == b'.'));
            if !starts {
                i += 1;
                continue;
            }
            let neg = i > 0 && b[i - 1] == b'-' && (i == 1 || !b[i - 2].is_ascii_alphanumeric());
            let mut j = i;
            while j < b.len() && b[j].is_ascii_digit() {
                j += 1;
            }
            let code = format!("{}{}", if neg { "-" } else { "" }, &text[i..j]);
            i = j;
            if code.len() > width {
                continue;
            }
            let mut k = j;
            while k < b.len() && b[k] == b' ' {
                k += 1;
            }
            if !matches!(b.get(k), Some(b'=' | b':')) {
                continue;
            }
            let rest = &text[k + 1..];
            let end = rest.find(['\n', ';']).unwrap_or(rest.len());
            let label = rest[..end].trim();
            // "N.I.U. (Not in Universe). 99999998 = Missing." on one line:
            // the label ends where the next code starts.
            let label = match label.find(|c: char| c.is_ascii_digit()) {
                Some(d) => label[..d].trim(),
                None => label,
            };
            // And at the end of a sentence ("Missing. Values can be
            // negative."), which abbreviations ("N.I.U. (Not …") make
            // ambiguous: the longest stretch up to a full stop that is a
            // label of the kind.
            let label = label
                .match_indices(". ")
                .map(|(d, _)| &label[..d])
                .chain([label])
                .filter(|l| is_niu_label(l))
                .last()
                .unwrap_or("");
            if is_niu_label(label)
                && !declared(&code)
                && !out
                    .iter()
                    .any(|n| n.value.trim_start_matches('0') == code.trim_start_matches('0'))
            {
                out.push(NiuCode {
                    evidence: format!("{code} = {}", label.trim_end_matches('.')),
                    value: code,
                    from_label: false,
                });
            }
        }
    }
    out
}

struct Parser<'a> {
    path: &'a Path,
    text: &'a str,
    reader: Reader<&'a [u8]>,
    /// Open elements (local names) and the text gathered in each.
    stack: Vec<(String, String)>,
    cb: Codebook,
    var: Option<VarBuilder>,
    cat: Option<CatBuilder>,
    group: Option<RecordGroup>,
    saw_root: bool,
    saw_data_dscr: bool,
    /// A study abstract was read (it is the description, not the notes).
    abstract_seen: bool,
}

fn local_name(e: &BytesStart<'_>) -> String {
    String::from_utf8_lossy(e.local_name().as_ref()).into_owned()
}

/// Trimmed text, without the control characters XML 1.0 forbids (a damaged
/// codebook's `name="\u{6}1"` is the variable `1`, as a lenient XML
/// reader sees it, not a name no one can type); `None` when empty.
/// Keeps the first text an element gives (a later one of the same
/// element is ignored).
fn first(slot: &mut Option<String>, text: &str) {
    if slot.is_none() {
        *slot = clean(text);
    }
}

fn clean(s: &str) -> Option<String> {
    let forbidden = |c: char| matches!(c, '\0'..='\u{8}' | '\u{b}' | '\u{c}' | '\u{e}'..='\u{1f}');
    // Line ends as XML reads them (CR LF and a lone CR are LF).
    let s = s.replace("\r\n", "\n").replace('\r', "\n");
    let t: String = s.chars().filter(|&c| !forbidden(c)).collect();
    let t = t.trim();
    (!t.is_empty()).then(|| t.to_string())
}

impl<'a> Parser<'a> {
    fn new(path: &'a Path, text: &'a str) -> Self {
        Parser {
            path,
            text,
            reader: Reader::from_str(text),
            stack: Vec::new(),
            cb: Codebook {
                path: path.to_path_buf(),
                file_name: None,
                charset: Charset::Latin1,
                hierarchical: false,
                record_groups: Vec::new(),
                variables: Vec::new(),
                warnings: Vec::new(),
                lenient: false,
                record_lines: Vec::new(),
                skip_unlisted: false,
                output_type: None,
                title: None,
                description: None,
            },
            var: None,
            cat: None,
            group: None,
            saw_root: false,
            saw_data_dscr: false,
            abstract_seen: false,
        }
    }

    fn line_at(&self, pos: u64) -> u64 {
        let pos = (pos as usize).min(self.text.len());
        1 + memchr::memchr_iter(b'\n', &self.text.as_bytes()[..pos]).count() as u64
    }

    fn err(&self, reason: String) -> Error {
        Error::Codebook {
            path: self.path.to_path_buf(),
            reason,
        }
    }

    fn not_ddi(&self, why: &str) -> Error {
        self.err(format!(
            "not a DDI codebook: {why} (expected an XML <codeBook> document such as IPUMS ships with a fixed-width extract)"
        ))
    }

    fn run(mut self) -> Result<Codebook> {
        loop {
            let ev = self.reader.read_event();
            match ev {
                Err(e) => {
                    let line = self.line_at(self.reader.error_position());
                    return Err(if self.saw_root {
                        self.err(format!("line {line}: malformed XML: {e}"))
                    } else {
                        self.not_ddi(&format!("line {line}: not well-formed XML ({e})"))
                    });
                }
                Ok(Event::Start(e)) => {
                    let name = local_name(&e);
                    self.open(&name, &e)?;
                    self.stack.push((name, String::new()));
                }
                Ok(Event::Empty(e)) => {
                    let name = local_name(&e);
                    self.open(&name, &e)?;
                    self.stack.push((name, String::new()));
                    self.close()?;
                }
                Ok(Event::End(_)) => self.close()?,
                Ok(Event::Text(t)) => {
                    let s = t
                        .xml10_content()
                        .map_err(|e| self.err(format!("undecodable text: {e}")))?;
                    if self.stack.is_empty() && !s.trim().is_empty() {
                        return Err(self.not_ddi("text outside any XML element"));
                    }
                    if let Some(top) = self.stack.last_mut() {
                        top.1.push_str(&s);
                    }
                }
                Ok(Event::CData(t)) => {
                    let s = t
                        .decode()
                        .map_err(|e| self.err(format!("undecodable text: {e}")))?;
                    if let Some(top) = self.stack.last_mut() {
                        top.1.push_str(&s);
                    }
                }
                Ok(Event::GeneralRef(r)) => {
                    let s = match r.resolve_char_ref() {
                        Ok(Some(c)) => c.to_string(),
                        _ => {
                            let name = r.decode().unwrap_or_default().into_owned();
                            match quick_xml::escape::resolve_predefined_entity(&name) {
                                Some(v) => v.to_string(),
                                None => format!("&{name};"),
                            }
                        }
                    };
                    if let Some(top) = self.stack.last_mut() {
                        top.1.push_str(&s);
                    }
                }
                Ok(Event::Eof) => break,
                Ok(_) => {}
            }
        }
        if !self.saw_root {
            return Err(self.not_ddi("no XML element found"));
        }
        if let Some((open, _)) = self.stack.last() {
            // A codebook cut short (an interrupted download) would otherwise
            // lose every variable after the cut without a word.
            let line = self.line_at(self.text.len() as u64);
            let unclosed: Vec<&str> = self.stack.iter().map(|(n, _)| n.as_str()).collect();
            return Err(self.err(format!(
                "the codebook ends at line {line} inside <{open}> (unclosed: <{}>): it is truncated or damaged",
                unclosed.join("> <")
            )));
        }
        if !self.saw_data_dscr || self.cb.variables.is_empty() {
            return Err(self.not_ddi("it describes no variables (no <dataDscr>/<var> elements)"));
        }
        self.check()?;
        Ok(self.cb)
    }

    /// Whether the open elements end with `path` (outermost first).
    fn path_is(&self, path: &[&str]) -> bool {
        self.stack.len() >= path.len()
            && self.stack[self.stack.len() - path.len()..]
                .iter()
                .zip(path)
                .all(|((n, _), p)| n == p)
    }

    fn parent(&self) -> Option<&str> {
        self.stack.last().map(|(n, _)| n.as_str())
    }

    fn attr(&self, e: &BytesStart<'_>, key: &str) -> Result<Option<String>> {
        for a in e.attributes() {
            let a = a.map_err(|err| {
                let line = self.line_at(self.reader.buffer_position());
                self.err(format!("line {line}: malformed XML attribute: {err}"))
            })?;
            if a.key.local_name().as_ref() == key.as_bytes() {
                let v = a
                    .normalized_value(quick_xml::XmlVersion::Implicit1_0)
                    .map_err(|err| {
                        let line = self.line_at(self.reader.buffer_position());
                        self.err(format!("line {line}: malformed XML attribute: {err}"))
                    })?;
                return Ok(Some(v.into_owned()));
            }
        }
        Ok(None)
    }

    fn number_attr(&self, e: &BytesStart<'_>, key: &str, what: &str) -> Result<Option<usize>> {
        match self.attr(e, key)? {
            None => Ok(None),
            Some(v) if v.trim().is_empty() => Ok(None),
            Some(v) => v.trim().parse::<usize>().map(Some).map_err(|_| {
                let line = self.line_at(self.reader.buffer_position());
                self.err(format!(
                    "line {line}: {what}: {key}=\"{v}\" is not a whole number"
                ))
            }),
        }
    }

    fn var_name(&self) -> String {
        self.var
            .as_ref()
            .map(|v| v.name.clone())
            .unwrap_or_default()
    }

    fn open(&mut self, name: &str, e: &BytesStart<'_>) -> Result<()> {
        let raw = e.name();
        let raw = raw.as_ref();
        // DDI names are ASCII.
        let well_formed = raw
            .first()
            .is_some_and(|&c| c.is_ascii_alphabetic() || c == b'_' || c == b':')
            && raw
                .iter()
                .all(|&c| c.is_ascii_alphanumeric() || b"_:.-".contains(&c));
        if !well_formed {
            let line = self.line_at(self.reader.buffer_position());
            return Err(self.err(format!(
                "line {line}: malformed XML: element name {:?} (the codebook is damaged)",
                String::from_utf8_lossy(raw)
            )));
        }
        // Attributes separated by white space, as XML requires.
        {
            let raw = e.attributes_raw();
            let mut quote: Option<u8> = None;
            for (i, &c) in raw.iter().enumerate() {
                match quote {
                    Some(q) if c == q => {
                        quote = None;
                        if raw
                            .get(i + 1)
                            .is_some_and(|n| !n.is_ascii_whitespace() && *n != b'/')
                        {
                            let line = self.line_at(self.reader.buffer_position());
                            return Err(self.err(format!(
                                "line {line}: malformed XML: attributes of <{name}> not separated by white space (the codebook is damaged)"
                            )));
                        }
                    }
                    None if c == b'"' || c == b'\'' => quote = Some(c),
                    _ => {}
                }
            }
        }
        // Every attribute well-formed (a lookup stops at the one it wants
        // and would not see junk after it), none given twice.
        let mut seen: Vec<Vec<u8>> = Vec::new();
        for a in e.attributes().with_checks(true) {
            let a = a.map_err(|err| {
                let line = self.line_at(self.reader.buffer_position());
                self.err(format!(
                    "line {line}: malformed XML attribute in <{name}>: {err}"
                ))
            })?;
            let k = a.key.as_ref().to_vec();
            let ok = k
                .first()
                .is_some_and(|&c| c.is_ascii_alphabetic() || c == b'_' || c == b':')
                && k.iter()
                    .all(|&c| c.is_ascii_alphanumeric() || b"_:.-".contains(&c));
            // XML forbids `<` in a value, and every `&` starts a
            // reference that must resolve.
            let value_ok = !a.value.contains(&b'<')
                && a.normalized_value(quick_xml::XmlVersion::Implicit1_0)
                    .is_ok();
            if !ok || !value_ok || seen.contains(&k) {
                let line = self.line_at(self.reader.buffer_position());
                return Err(self.err(format!(
                    "line {line}: malformed XML attribute {:?} in <{name}> (the codebook is damaged)",
                    String::from_utf8_lossy(&k)
                )));
            }
            seen.push(k);
        }
        // Children of the elements whose meaning microtab reads, as the DDI
        // 2.5 schema lists them: anything else there is a damaged or
        // misspelled element (a <catgrx missing="Y"> would otherwise drop a
        // missing code without a word) and is reported.
        const DATA_DSCR: &[&str] = &["varGrp", "nCubeGrp", "var", "nCube", "notes"];
        const VAR: &[&str] = &[
            "location",
            "labl",
            "imputation",
            "security",
            "embargo",
            "respUnit",
            "anlysUnit",
            "qstn",
            "valrng",
            "invalrng",
            "undocCod",
            "universe",
            "TotlResp",
            "sumStat",
            "txt",
            "stdCatgry",
            "catgryGrp",
            "catgry",
            "codInstr",
            "verStmt",
            "concept",
            "derivation",
            "varFormat",
            "geomap",
            "catLevel",
            "notes",
        ];
        const CATGRY: &[&str] = &["catValu", "labl", "txt", "catStat", "mrow"];
        let known = match self.parent() {
            Some("dataDscr") => Some(DATA_DSCR),
            Some("var") if self.var.is_some() => Some(VAR),
            Some("catgry") if self.cat.is_some() => Some(CATGRY),
            _ => None,
        };
        if let Some(k) = known {
            if !k.contains(&name) {
                let line = self.line_at(self.reader.buffer_position());
                let at = match self.parent() {
                    Some("dataDscr") => "<dataDscr>".to_string(),
                    Some(p) => format!("<{p}> of variable {}", self.var_name()),
                    None => String::new(),
                };
                self.cb.warnings.push(Note::from(format!(
                    "line {line}: unknown element <{name}> in {at} ignored (a damaged or misspelled codebook element?)"
                )));
            }
        }
        if self.saw_root && self.stack.is_empty() {
            let line = self.line_at(self.reader.buffer_position());
            return Err(self.err(format!(
                "line {line}: element <{name}> after the end of <codeBook> (the codebook is damaged)"
            )));
        }
        if !self.saw_root {
            if name != "codeBook" {
                return Err(self.not_ddi(&format!("the root element is <{name}>")));
            }
            self.saw_root = true;
            return Ok(());
        }
        let in_var = self.var.is_some();
        match name {
            "dataDscr" => self.saw_data_dscr = true,
            "fileStrc" => {
                let t = self.attr(e, "type")?.unwrap_or_default();
                self.cb.hierarchical = t.eq_ignore_ascii_case("hierarchical");
            }
            "recGrp" => {
                self.group = Some(RecordGroup {
                    rectype: self.attr(e, "rectype")?.unwrap_or_default(),
                    label: None,
                    recidvar: self.attr(e, "recidvar")?.and_then(|s| clean(&s)),
                    keyvar: self.attr(e, "keyvar")?.and_then(|s| clean(&s)),
                    codes: Vec::new(),
                });
            }
            "fileType" => {
                if let Some(cs) = self.attr(e, "charset")? {
                    let c = cs.to_ascii_lowercase().replace('_', "-");
                    self.cb.charset = if c == "utf-8" || c == "utf8" {
                        Charset::Utf8
                    } else {
                        if !(c.contains("8859-1") || c.contains("latin") || c.contains("1252")) {
                            self.cb.warnings.push(Note::from(format!(
                                "charset \"{cs}\" is not supported; reading text as ISO-8859-1"
                            )));
                        }
                        Charset::Latin1
                    };
                }
            }
            "var" if self.parent() == Some("dataDscr") => {
                let line = self.line_at(self.reader.buffer_position());
                let vname = match self.attr(e, "name")?.and_then(|s| clean(&s)) {
                    Some(n) => n,
                    None => self
                        .attr(e, "ID")?
                        .and_then(|s| clean(&s))
                        .ok_or_else(|| self.err(format!("line {line}: <var> without a name")))?,
                };
                let decimals = match self.attr(e, "dcml")? {
                    None => 0,
                    Some(d) if d.trim().is_empty() => 0,
                    Some(d) => d
                        .trim()
                        .parse::<u32>()
                        .ok()
                        .filter(|&d| d <= 18)
                        .ok_or_else(|| {
                            self.err(format!(
                                "variable {vname}: dcml=\"{d}\" is not a number of decimals (0-18)"
                            ))
                        })?,
                };
                let record_types = self
                    .attr(e, "rectype")?
                    .map(|s| s.split_whitespace().map(str::to_string).collect())
                    .unwrap_or_default();
                self.var = Some(VarBuilder {
                    name: vname,
                    decimals,
                    record_types,
                    line,
                    ..VarBuilder::default()
                });
            }
            "location" if in_var => {
                let what = format!("variable {}", self.var_name());
                let start = self.number_attr(e, "StartPos", &what)?;
                let end = self.number_attr(e, "EndPos", &what)?;
                let width = self.number_attr(e, "width", &what)?;
                let v = self.var.as_mut().unwrap();
                if v.start.is_none() {
                    (v.start, v.end, v.width) = (start, end, width);
                }
            }
            "varFormat" if in_var => {
                let t = self.attr(e, "type")?.unwrap_or_default();
                self.var.as_mut().unwrap().text = t.eq_ignore_ascii_case("character");
            }
            "catgry" if in_var => {
                let missing = self
                    .attr(e, "missing")?
                    .is_some_and(|m| m.trim().eq_ignore_ascii_case("y"));
                self.cat = Some(CatBuilder {
                    missing,
                    ..CatBuilder::default()
                });
            }
            "item" if in_var && self.parent() == Some("invalrng") => {
                if let Some(v) = self.attr(e, "VALUE")?.and_then(|s| clean(&s)) {
                    self.var.as_mut().unwrap().invalid.push(v);
                }
            }
            "range" if in_var && self.parent() == Some("invalrng") => {
                let lo = self.attr(e, "min")?.and_then(|s| clean(&s));
                let hi = self.attr(e, "max")?.and_then(|s| clean(&s));
                self.invalid_range(lo, hi);
            }
            _ => {}
        }
        Ok(())
    }

    fn invalid_range(&mut self, lo: Option<String>, hi: Option<String>) {
        let name = self.var_name();
        let parsed = (
            lo.as_deref().and_then(|s| s.parse::<i64>().ok()),
            hi.as_deref().and_then(|s| s.parse::<i64>().ok()),
        );
        match parsed {
            (Some(a), Some(b)) if a <= b && (b as i128 - a as i128) < MAX_RANGE_CODES as i128 => {
                let width = lo.as_deref().map_or(0, str::len);
                let v = self.var.as_mut().unwrap();
                for x in a..=b {
                    // Keep the codebook's zero padding ("097") for text codes.
                    v.invalid.push(format!("{x:0width$}"));
                }
            }
            (Some(a), Some(b)) if a <= b => {
                // Too wide to list: narrowed to the data's values on import.
                let v = self.var.as_mut().unwrap();
                v.invalid_ranges.push((lo.unwrap(), hi.unwrap()));
            }
            _ => self.cb.warnings.push(Note::hinted(
                format!(
                    "variable {name}: missing-value range {}..{} not used (only whole-number ranges are)",
                    lo.unwrap_or_else(|| "*".into()),
                    hi.unwrap_or_else(|| "*".into())
                ),
                Remedy::MissingCodes {
                    variable: name.clone(),
                    codes: Vec::new(),
                },
                "declares the codes",
            )),
        }
    }

    fn close(&mut self) -> Result<()> {
        let Some((name, text)) = self.stack.pop() else {
            return Ok(());
        };
        let parent = self.parent().map(str::to_string);
        let parent = parent.as_deref();
        match name.as_str() {
            "labl" if parent == Some("catgry") && self.cat.is_some() => {
                first(&mut self.cat.as_mut().unwrap().label, &text);
            }
            "catValu" if parent == Some("catgry") && self.cat.is_some() => {
                first(&mut self.cat.as_mut().unwrap().value, &text);
            }
            "catgry" if self.var.is_some() => {
                if let Some(c) = self.cat.take() {
                    if let Some(value) = c.value {
                        self.var.as_mut().unwrap().categories.push(DdiCategory {
                            value,
                            label: c.label,
                            missing: c.missing,
                        });
                    }
                }
            }
            "labl" if parent == Some("var") && self.var.is_some() => {
                first(&mut self.var.as_mut().unwrap().label, &text);
            }
            "codInstr" if parent == Some("var") && self.var.is_some() => {
                first(&mut self.var.as_mut().unwrap().coding, &text);
            }
            "txt" if parent == Some("var") && self.var.is_some() => {
                first(&mut self.var.as_mut().unwrap().description, &text);
            }
            "labl" if parent == Some("recGrp") => {
                if let Some(g) = self.group.as_mut() {
                    g.label = clean(&text);
                }
            }
            "recGrp" => {
                if let Some(g) = self.group.take() {
                    self.cb.record_groups.push(g);
                }
            }
            "titl" if self.path_is(&["stdyDscr", "citation", "titlStmt"]) => {
                first(&mut self.cb.title, &text);
            }
            "abstract" if self.path_is(&["stdyDscr", "stdyInfo"]) => {
                // The abstract wins over notes read before it.
                if let Some(t) = clean(&text) {
                    if !self.abstract_seen {
                        self.cb.description = Some(t);
                        self.abstract_seen = true;
                    }
                }
            }
            "notes" if parent == Some("stdyDscr") && !self.abstract_seen => {
                if let Some(t) = clean(&text) {
                    let t = t
                        .strip_prefix("User-provided description:")
                        .map_or(t.clone(), |d| d.trim().to_string());
                    first(&mut self.cb.description, &t);
                }
            }
            "fileName" if parent == Some("fileTxt") && self.cb.file_name.is_none() => {
                self.cb.file_name = clean(&text);
            }
            "var" if self.var.is_some() && parent == Some("dataDscr") => {
                let v = self.var.take().unwrap();
                let var = self.finish_var(v)?;
                self.cb.variables.push(var);
            }
            _ => {}
        }
        Ok(())
    }

    fn finish_var(&self, v: VarBuilder) -> Result<DdiVariable> {
        let at =
            |reason: String| self.err(format!("line {}: variable {}: {reason}", v.line, v.name));
        let start = v
            .start
            .ok_or_else(|| at("no <location StartPos=…> giving its columns".into()))?;
        if start == 0 {
            return Err(at("StartPos=\"0\": columns are numbered from 1".into()));
        }
        let end = match (v.end, v.width) {
            (Some(e), Some(w)) if e + 1 != start + w => {
                return Err(at(format!(
                    "location StartPos={start} EndPos={e} does not agree with width={w}"
                )))
            }
            (Some(e), _) => e,
            (None, Some(w)) if w > 0 => start + w - 1,
            _ => return Err(at("<location> gives neither EndPos nor width".into())),
        };
        if end < start {
            return Err(at(format!("EndPos={end} is before StartPos={start}")));
        }
        if !v.text && end + 1 - start > 40 {
            return Err(at(format!(
                "a numeric field {} columns wide is not supported (at most 40)",
                end + 1 - start
            )));
        }
        let niu = niu_codes(&v, end + 1 - start);
        Ok(DdiVariable {
            niu,
            coding: v.coding,
            name: v.name,
            label: v.label,
            description: v.description,
            start,
            end,
            decimals: if v.text { 0 } else { v.decimals },
            style: NumberStyle::Plain,
            divide: 0,
            text: v.text,
            record_types: v.record_types,
            categories: v.categories,
            invalid: v.invalid,
            invalid_ranges: v.invalid_ranges,
        })
    }

    /// Whole-codebook checks: unique names; record types consistent.
    fn check(&mut self) -> Result<()> {
        let vars = &self.cb.variables;
        for (i, v) in vars.iter().enumerate() {
            if let Some(w) = vars[..i]
                .iter()
                .find(|w| w.name.eq_ignore_ascii_case(&v.name))
            {
                return Err(self.err(format!(
                    "variable {} is described twice (names must be unique ignoring case: {} and {})",
                    v.name, w.name, v.name
                )));
            }
        }
        if self.cb.hierarchical {
            if self.cb.record_groups.is_empty() {
                return Err(self.err(
                    "the file structure is hierarchical but no record types (<recGrp rectype=…>) are listed"
                        .into(),
                ));
            }
            if let Some(g) = self.cb.record_groups.iter().find(|g| g.rectype.is_empty()) {
                return Err(self.err(format!(
                    "a record group ({}) has no rectype",
                    g.label.as_deref().unwrap_or("unlabelled")
                )));
            }
            if self.cb.record_id_variable().is_none() {
                let name = self
                    .cb
                    .record_groups
                    .iter()
                    .find_map(|g| g.recidvar.clone())
                    .unwrap_or_else(|| "RECTYPE".into());
                return Err(self.err(format!(
                    "the record-type variable {name} of this hierarchical file is not described"
                )));
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(xml: &str) -> Result<Codebook> {
        Codebook::parse(Path::new("t.xml"), xml)
    }

    /// Control characters XML 1.0 forbids are dropped from names and
    /// labels (found by the fuzzer: `name="\u{6}1"` became a variable no
    /// one could name); other characters stay.
    #[test]
    fn forbidden_control_characters_are_dropped() {
        assert_eq!(clean("\u{6}1").as_deref(), Some("1"));
        assert_eq!(clean(" A\u{1f}B\tC ").as_deref(), Some("AB\tC"));
        assert_eq!(clean("\u{1}\u{2}"), None);
        assert_eq!(clean("Année").as_deref(), Some("Année"));
    }

    const RECT: &str = r#"<?xml version="1.0" encoding="UTF-8"?>
<codeBook xmlns="ddi:codebook:2_5" version="2.5">
  <fileDscr ID="ExtractData"><fileTxt>
    <fileName>x.dat</fileName>
    <fileStrc type="rectangular"/>
    <fileType charset="ISO-8859-1">ISO-8859-1 data file</fileType>
  </fileTxt></fileDscr>
  <dataDscr>
    <var ID="YEAR" name="YEAR" dcml="0" intrvl="contin">
      <location StartPos="1" width="4" EndPos="4"/>
      <labl>Survey year</labl>
      <txt><![CDATA[YEAR reports the year & more.]]></txt>
      <varFormat schema="other" type="numeric"/>
    </var>
    <var ID="WT" name="WT" dcml="2">
      <location EndPos="10" StartPos="5" width="6"/>
      <labl>Weight &amp; such</labl>
    </var>
    <var ID="SEX" name="SEX">
      <location StartPos="11" width="1"/>
      <labl>Sex</labl>
      <catgry><catValu>1</catValu><labl>Male</labl></catgry>
      <catgry><catValu>2</catValu><labl>Female</labl></catgry>
      <catgry missing="Y"><catValu>9</catValu><labl>Unknown</labl></catgry>
      <invalrng><item VALUE="8"/><range min="6" max="7"/></invalrng>
    </var>
    <var ID="SUF" name="SUF">
      <location StartPos="12" EndPos="13"/>
      <catgry><catValu>0A</catValu><labl/></catgry>
      <varFormat type="character"/>
    </var>
  </dataDscr>
</codeBook>"#;

    #[test]
    fn rectangular_codebook() {
        let cb = parse(RECT).unwrap();
        assert!(!cb.hierarchical);
        let with_bom = parse(&format!("\u{feff}{RECT}")).unwrap();
        assert_eq!(with_bom.variables, cb.variables);
        assert_eq!(cb.file_name.as_deref(), Some("x.dat"));
        assert_eq!(cb.charset, Charset::Latin1);
        let names: Vec<&str> = cb.variables.iter().map(|v| v.name.as_str()).collect();
        assert_eq!(names, ["YEAR", "WT", "SEX", "SUF"]);
        let y = &cb.variables[0];
        assert_eq!((y.start, y.end, y.decimals, y.text), (1, 4, 0, false));
        assert_eq!(y.label.as_deref(), Some("Survey year"));
        assert_eq!(
            y.description.as_deref(),
            Some("YEAR reports the year & more.")
        );
        let w = &cb.variables[1];
        assert_eq!((w.start, w.end, w.decimals), (5, 10, 2));
        assert_eq!(w.label.as_deref(), Some("Weight & such"));
        let s = &cb.variables[2];
        assert_eq!((s.start, s.end, s.width()), (11, 11, 1));
        assert_eq!(s.categories.len(), 3);
        assert_eq!(s.categories[1].label.as_deref(), Some("Female"));
        assert!(s.categories[2].missing && !s.categories[0].missing);
        assert_eq!(s.invalid, ["8", "6", "7"]);
        let t = &cb.variables[3];
        assert!(t.text);
        assert_eq!((t.start, t.end), (12, 13));
        assert_eq!(t.categories[0].value, "0A");
        assert_eq!(t.categories[0].label, None);
    }

    #[test]
    fn hierarchical_codebook() {
        let xml = r#"<codeBook xmlns="http://www.icpsr.umich.edu/DDI"><fileDscr><fileTxt>
          <fileStrc type="hierarchical">
            <recGrp keyvar="SERIAL" recidvar="RECTYPE" rectype="P"><labl>Person Record</labl></recGrp>
            <recGrp recidvar="RECTYPE" rectype="H"><labl>Household Record</labl></recGrp>
          </fileStrc></fileTxt></fileDscr>
          <dataDscr>
            <var name="RECTYPE" rectype="H P"><location StartPos="1" EndPos="1"/><varFormat type="character"/></var>
            <var name="SERIAL" rectype="H P"><location StartPos="2" EndPos="4"/></var>
            <var name="STATE" rectype="H"><location StartPos="5" EndPos="6"/></var>
            <var name="AGE" rectype="P"><location StartPos="5" EndPos="6"/></var>
          </dataDscr></codeBook>"#;
        let cb = parse(xml).unwrap();
        assert!(cb.hierarchical);
        assert_eq!(cb.record_groups.len(), 2);
        assert_eq!(cb.record_groups[0].label.as_deref(), Some("Person Record"));
        assert_eq!(cb.top_record_type(), Some("H"));
        assert_eq!(cb.record_id_variable().unwrap().name, "RECTYPE");
        assert_eq!(cb.variables[1].record_types, ["H", "P"]);
    }

    #[test]
    fn not_ddi() {
        for (xml, needle) in [
            ("<html><body>hi</body></html>", "root element is <html>"),
            ("just some text", "not a DDI codebook"),
            ("", "no XML element"),
            ("<codeBook><stdyDscr/></codeBook>", "describes no variables"),
        ] {
            let e = parse(xml).unwrap_err().to_string();
            assert!(e.starts_with("t.xml: ") && e.contains(needle), "{e}");
        }
    }

    #[test]
    fn malformed_xml_names_the_line() {
        let xml = "<codeBook>\n<dataDscr>\n<var name=\"A\">\n</dataDscr>\n</codeBook>";
        let e = parse(xml).unwrap_err().to_string();
        assert!(e.contains("line 4") && e.contains("malformed XML"), "{e}");
    }

    #[test]
    fn attribute_values_xml_forbids_are_refused() {
        // Python's XML parser rejects each: `<` in a value (even one
        // microtab does not read), an entity that does not resolve.
        for bad in [
            r#"xmlns="ddi:code<ook:2_5""#,
            r#"version="2&x;5""#,
            r#"version="2 & 5""#,
        ] {
            let xml = RECT.replacen(r#"xmlns="ddi:codebook:2_5""#, bad, 1);
            let e = parse(&xml).unwrap_err().to_string();
            assert!(
                e.contains("line 2") && e.contains("malformed XML attribute"),
                "{bad}: {e}"
            );
        }
        // References that resolve are values like any other.
        let ok = RECT.replacen(r#"version="2.5""#, r#"version="2&#46;5 &amp; &lt;""#, 1);
        assert!(parse(&ok).is_ok());
    }

    #[test]
    fn bad_locations_name_the_variable() {
        let wrap = |v: &str| format!("<codeBook><dataDscr>{v}</dataDscr></codeBook>");
        for (v, needle) in [
            (
                r#"<var name="A"><labl>x</labl></var>"#,
                "variable A: no <location",
            ),
            (
                r#"<var name="B"><location StartPos="0" EndPos="2"/></var>"#,
                "variable B: StartPos=\"0\"",
            ),
            (
                r#"<var name="C"><location StartPos="3" EndPos="1"/></var>"#,
                "variable C: EndPos=1 is before",
            ),
            (
                r#"<var name="D"><location StartPos="1" EndPos="2" width="3"/></var>"#,
                "variable D: location",
            ),
            (
                r#"<var name="E"><location StartPos="x" EndPos="2"/></var>"#,
                "variable E: StartPos=\"x\"",
            ),
            (
                r#"<var name="F" dcml="z"><location StartPos="1" EndPos="2"/></var>"#,
                "variable F: dcml",
            ),
        ] {
            let e = parse(&wrap(v)).unwrap_err().to_string();
            assert!(e.contains(needle), "{e}");
        }
        let dup = wrap(
            r#"<var name="A"><location StartPos="1" EndPos="1"/></var><var name="a"><location StartPos="2" EndPos="2"/></var>"#,
        );
        assert!(parse(&dup)
            .unwrap_err()
            .to_string()
            .contains("described twice"));
    }

    #[test]
    fn niu_labels() {
        for l in [
            "NIU",
            "N.I.U. (Not in Universe)",
            "Not in universe",
            "N/A",
            "N/A (not in universe)",
            "Unknown/missing",
            "Missing",
            "Blank",
            "Don\u{2019}t know",
            "Missing or blank",
            "NIU (not in universe)",
        ] {
            assert!(is_niu_label(l), "{l}");
        }
        for l in [
            "Unknown cause",
            "998 or more",
            "At work",
            "",
            "Not in labor force",
            "Missing a limb",
            "None",
        ] {
            assert!(!is_niu_label(l), "{l}");
        }
    }

    #[test]
    fn niu_codes_from_text_and_labels() {
        let cb = parse(
            r#"<codeBook><dataDscr>
<var name="INCTOT"><location StartPos="1" EndPos="8"/>
<txt>Income in 2019 dollars; 12 = 12 months.</txt>
<codInstr>99999999 = N.I.U. (Not in Universe).
99999998 = Missing.
Values can be negative.</codInstr></var>
<var name="ONELINE"><location StartPos="9" EndPos="12"/>
<codInstr>9999 = N.I.U. (Not in Universe). 9998 = Missing. 123456 = Missing.</codInstr></var>
<var name="E"><location StartPos="13" EndPos="14"/>
<catgry><catValu>00</catValu><labl>NIU</labl></catgry>
<catgry><catValu>10</catValu><labl>At work</labl></catgry>
<catgry missing="Y"><catValu>99</catValu><labl>Missing</labl></catgry></var>
</dataDscr></codeBook>"#,
        )
        .unwrap();
        let codes = |n: &str| -> Vec<(String, bool)> {
            cb.variable(n)
                .unwrap()
                .niu
                .iter()
                .map(|c| (c.value.clone(), c.from_label))
                .collect()
        };
        assert_eq!(
            codes("INCTOT"),
            [("99999999".into(), false), ("99999998".into(), false)]
        );
        assert_eq!(
            cb.variable("INCTOT").unwrap().niu[0].evidence,
            "99999999 = N.I.U. (Not in Universe)"
        );
        // One line, several codes; a code wider than the field is not one.
        assert_eq!(
            codes("ONELINE"),
            [("9999".into(), false), ("9998".into(), false)]
        );
        // Declared missing already: not repeated.
        assert_eq!(codes("E"), [("00".into(), true)]);
        let mut cb = cb;
        cb.keep_niu_codes();
        assert!(cb.variables.iter().all(|v| v.niu.is_empty()));
    }
}
