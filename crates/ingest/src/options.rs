//! The import options: one type for every format and front end, and the
//! words each option accepts. The CLI's flags and Python's keywords both
//! parse a user's words (`latin_1`, `integer`, `all` …) with the
//! [`FromStr`] implementations here, so they accept the same words
//! (listed in docs/CLI.md).

use crate::core::pipeline::Progress;
use crate::ddi::Codebook;
use std::fmt;
use std::str::FromStr;

/// A word an option does not accept.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WordError {
    /// The word given.
    pub word: String,
    /// What the option accepts.
    pub expected: &'static str,
}

impl fmt::Display for WordError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "expected {}, got '{}'", self.expected, self.word)
    }
}

impl std::error::Error for WordError {}

fn word_error(word: &str, expected: &'static str) -> WordError {
    WordError {
        word: word.to_string(),
        expected,
    }
}

/// The text encoding of an input file.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Encoding {
    /// UTF-8 (ASCII included); anything else is an error naming the field.
    #[default]
    Utf8,
    /// ISO-8859-1: every byte is the character of the same number.
    Latin1,
    /// Windows-1252: Latin-1 with printable characters (€, “ ”, …) in
    /// 0x80–0x9F.
    Windows1252,
    /// Any other encoding of the WHATWG Encoding Standard (`windows-1251`,
    /// `iso-8859-2`, `shift_jis`, `gb18030`, …), the code pages SPSS and
    /// SAS files name; bytes it cannot decode are an error.
    Other(&'static encoding_rs::Encoding),
}

/// Characters of Windows-1252 at 0x80–0x9F (undefined ones as in Latin-1).
const CP1252_HIGH: [char; 32] = [
    '€', '\u{81}', '‚', 'ƒ', '„', '…', '†', '‡', 'ˆ', '‰', 'Š', '‹', 'Œ', '\u{8d}', 'Ž', '\u{8f}',
    '\u{90}', '‘', '’', '“', '”', '•', '–', '—', '˜', '™', 'š', '›', 'œ', '\u{9d}', 'ž', 'Ÿ',
];

impl Encoding {
    /// Decodes `raw` to text; `None` when it is not valid in this encoding
    /// (only UTF-8 can be invalid).
    pub(crate) fn decode(self, raw: &[u8]) -> Option<std::borrow::Cow<'_, str>> {
        if raw.is_ascii() {
            // SAFETY: ASCII is valid UTF-8.
            return Some(unsafe { std::str::from_utf8_unchecked(raw) }.into());
        }
        match self {
            Encoding::Utf8 => std::str::from_utf8(raw).ok().map(Into::into),
            Encoding::Latin1 => Some(raw.iter().map(|&b| b as char).collect::<String>().into()),
            Encoding::Windows1252 => Some(
                raw.iter()
                    .map(|&b| match b {
                        0x80..=0x9F => CP1252_HIGH[(b - 0x80) as usize],
                        _ => b as char,
                    })
                    .collect::<String>()
                    .into(),
            ),
            Encoding::Other(e) => e.decode_without_bom_handling_and_without_replacement(raw),
        }
    }

    /// The encoding's name, for messages (`UTF-8`, `windows-1251`).
    pub fn name(self) -> &'static str {
        match self {
            Encoding::Utf8 => "UTF-8",
            Encoding::Latin1 => "Latin-1",
            Encoding::Windows1252 => "Windows-1252",
            Encoding::Other(e) => e.name(),
        }
    }

    /// The encoding a name or code page means: `utf-8`, `latin1` and
    /// `windows-1252` as [`FromStr`] takes them, any other WHATWG label
    /// (`windows-1251`, `iso-8859-2`, `shift_jis`, `big5`, …), and
    /// `cpNNNN`/`NNNN` for the Windows and DOS code pages SPSS files name.
    pub fn named(name: &str) -> Option<Encoding> {
        let t = name.trim();
        if let Ok(e) = t.parse::<Encoding>() {
            return Some(e);
        }
        let digits = t
            .to_ascii_lowercase()
            .trim_start_matches("cp")
            .trim_start_matches("windows-")
            .to_string();
        let label = match digits.parse::<u32>() {
            Ok(65001) => return Some(Encoding::Utf8),
            Ok(20127) | Ok(2) => return Some(Encoding::Utf8),
            Ok(28591) | Ok(819) => return Some(Encoding::Latin1),
            Ok(n @ 1250..=1258) => format!("windows-{n}"),
            Ok(n @ 28592..=28606) => format!("iso-8859-{}", n - 28590),
            Ok(866) => "ibm866".into(),
            Ok(874) => "windows-874".into(),
            Ok(932) => "shift_jis".into(),
            Ok(936) => "gbk".into(),
            Ok(949) => "euc-kr".into(),
            Ok(950) => "big5".into(),
            Ok(20866) => "koi8-r".into(),
            Ok(21866) => "koi8-u".into(),
            Ok(_) => return None,
            Err(_) => t.to_ascii_lowercase(),
        };
        let e = encoding_rs::Encoding::for_label(label.as_bytes())
            .or_else(|| encoding_rs::Encoding::for_label(label.replace('_', "-").as_bytes()))?;
        Some(if e == encoding_rs::UTF_8 {
            Encoding::Utf8
        } else if e == encoding_rs::WINDOWS_1252 && !label.contains("1252") {
            // WHATWG reads ISO-8859-1 as Windows-1252; SAS and SPSS mean
            // ISO-8859-1 itself.
            Encoding::Latin1
        } else {
            Encoding::Other(e)
        })
    }
}

const ENCODINGS: &str =
    "utf-8, latin1, windows-1252 or another encoding label (windows-1251, iso-8859-2, shift_jis, gb18030, …)";

impl FromStr for Encoding {
    type Err = WordError;

    /// `utf-8` (`utf8`), `latin1` (`latin-1`, `latin_1`, `iso-8859-1`),
    /// `windows-1252` (`cp1252`, `win1252`); case and `_`/`-` do not
    /// matter.
    fn from_str(s: &str) -> Result<Self, WordError> {
        Ok(match s.to_ascii_lowercase().replace('_', "-").as_str() {
            "utf-8" | "utf8" => Encoding::Utf8,
            "latin1" | "latin-1" | "iso-8859-1" | "iso8859-1" => Encoding::Latin1,
            "windows-1252" | "cp1252" | "win1252" => Encoding::Windows1252,
            "" => return Err(word_error(s, ENCODINGS)),
            l => match encoding_rs::Encoding::for_label(l.as_bytes()) {
                Some(e) if e == encoding_rs::UTF_8 => Encoding::Utf8,
                Some(e) if e == encoding_rs::WINDOWS_1252 => Encoding::Windows1252,
                Some(e)
                    if e != encoding_rs::REPLACEMENT
                        && e != encoding_rs::UTF_16BE
                        && e != encoding_rs::UTF_16LE =>
                {
                    Encoding::Other(e)
                }
                _ => return Err(word_error(s, ENCODINGS)),
            },
        })
    }
}

/// A forced type for a column.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TypeHint {
    /// Integers or fixed-point decimals (stored exactly as scaled integers).
    Int,
    /// Floating point.
    Float,
    /// Text (dictionary-encoded).
    String,
}

impl FromStr for TypeHint {
    type Err = WordError;

    /// `int` (`integer`), `float` (`double`), `string` (`str`, `text`),
    /// in any case.
    fn from_str(s: &str) -> Result<Self, WordError> {
        Ok(match s.to_ascii_lowercase().as_str() {
            "int" | "integer" => TypeHint::Int,
            "float" | "double" => TypeHint::Float,
            "string" | "str" | "text" => TypeHint::String,
            _ => return Err(word_error(s, "int, float or string")),
        })
    }
}

/// How many records are sampled to choose column types.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct InferRows(pub u64);

impl InferRows {
    /// Every record (a first pass over the whole file).
    pub const ALL: InferRows = InferRows(u64::MAX);
}

impl FromStr for InferRows {
    type Err = WordError;

    /// A number of records (at least 1), or `all`.
    fn from_str(s: &str) -> Result<Self, WordError> {
        if s.eq_ignore_ascii_case("all") {
            return Ok(InferRows::ALL);
        }
        match s.parse::<u64>() {
            Ok(n) if n > 0 => Ok(InferRows(n)),
            _ => Err(word_error(s, "a number of records or 'all'")),
        }
    }
}

/// A field delimiter.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Delimiter(pub u8);

impl FromStr for Delimiter {
    type Err = WordError;

    /// One ASCII character (not a quote or a newline), or `tab`.
    fn from_str(s: &str) -> Result<Self, WordError> {
        match s {
            "tab" | "\\t" | "\t" => Ok(Delimiter(b'\t')),
            s if s.len() == 1 && s.is_ascii() && s != "\"" && s != "\n" => {
                Ok(Delimiter(s.as_bytes()[0]))
            }
            _ => Err(word_error(s, "one ASCII character or 'tab'")),
        }
    }
}

/// How to import a file, whatever its format: the user's options (each
/// parsed from words by the `FromStr` of its type, or by
/// [`add_type`](Self::add_type) and [`add_missing`](Self::add_missing)),
/// and how the work is cut up. Options a format has no use for are
/// ignored by it.
#[derive(Clone)]
pub struct ImportOptions {
    /// CSV: the field delimiter (`None`: detected from the first lines
    /// among `,`, tab, `;` and `|`, whichever splits every sampled line
    /// into the same number (> 1) of fields, `,` first).
    pub delimiter: Option<u8>,
    /// CSV: forced types by column name (case-insensitive).
    pub types: Vec<(String, TypeHint)>,
    /// User-missing codes by column name, as written in the data
    /// (`9999999`, `-0.5`, `Unknown`); each must be a value of the
    /// column's type. For fixed-width files, added to the codebook's.
    pub missing: Vec<(String, Vec<String>)>,
    /// CSV: field texts read as system-missing (empty fields always are).
    /// `None`: the common missing tokens ([`DEFAULT_NA`](crate::DEFAULT_NA):
    /// `NA`, `NaN`, `.`, `N/A`, …) in numeric columns, and in text columns
    /// those of them that mean missing in any column
    /// ([`DEFAULT_TEXT_NA`](crate::DEFAULT_TEXT_NA): `NA`, `N/A`, `NaN`,
    /// `NULL`, … but not `.`), as R and pandas read them. `Some(list)`:
    /// exactly these, in every column unless `na_text` is given
    /// (`Some(vec![])`: only empty fields).
    pub na: Option<Vec<String>>,
    /// CSV: field texts read as system-missing in text columns, replacing
    /// what `na` gives them (`Some(vec![])`: only empty fields, every
    /// other text is a value).
    pub na_text: Option<Vec<String>>,
    /// The text encoding of the file; `None`: the format's own (UTF-8 for
    /// CSV and SAS transport files, Windows-1252 for Stata files before
    /// release 118 and UTF-8 from it; a fixed-width file's is its
    /// codebook's).
    pub encoding: Option<Encoding>,
    /// CSV: records sampled to choose column types (`u64::MAX`: every
    /// record, in a first pass over the whole file).
    pub sample_rows: u64,
    /// A DDI codebook describing the columns: for a CSV file (an IPUMS
    /// extract delivered as CSV) its alphabetic variables are imported
    /// as text, its numeric ones as numbers, and columns it describes get
    /// its labels, description, value labels and missing codes (matched
    /// by name, case-insensitively); a fixed-width file needs one.
    pub codebook: Option<Codebook>,
    /// Hierarchical fixed-width files: the record type that becomes a
    /// row. Default: the person type (`P`, or the type labelled as person
    /// records) when the file holds records of it; else the one type below
    /// the top that has records, or the top type when only it has; several
    /// others with records and none of them persons is an
    /// [`Error::RecordTypeChoice`](crate::Error::RecordTypeChoice).
    pub record_type: Option<String>,
    /// Keep the codes a codebook names "not in universe", missing,
    /// unknown or blank only in value labels or text as ordinary values
    /// (by default they become missing codes, and a note names each).
    pub keep_niu: bool,
    /// Store every column as a plain array (no bit-packing), readable
    /// with `numpy.memmap` directly.
    pub plain: bool,
    /// A SAS format catalog (`.sas7bcat`) whose formats give a SAS data
    /// set's value labels.
    pub catalog: Option<std::path::PathBuf>,
    /// Bytes of input per parse task.
    pub chunk_size: usize,
    /// Parser threads (default: all cores).
    pub threads: usize,
    /// Called as chunks are written.
    pub progress: Option<Progress>,
    /// CSV: numbers are written with a decimal comma (`1,5` is one and a
    /// half; a field with a point is then no number).
    pub decimal_comma: bool,
    /// Block size for writing column files (from `microtab tune`).
    pub io: microtab_io::IoConfig,
}

impl Default for ImportOptions {
    fn default() -> Self {
        ImportOptions {
            delimiter: None,
            types: Vec::new(),
            missing: Vec::new(),
            na: None,
            na_text: None,
            encoding: None,
            sample_rows: 50_000,
            codebook: None,
            record_type: None,
            keep_niu: false,
            decimal_comma: false,
            plain: false,
            catalog: None,
            chunk_size: 4 << 20,
            threads: std::thread::available_parallelism()
                .map(|n| n.get())
                .unwrap_or(2),
            progress: None,
            io: microtab_io::IoConfig::default(),
        }
    }
}

impl ImportOptions {
    /// Forces column `name` to the type `word` names ([`TypeHint`]'s
    /// words).
    pub fn add_type(&mut self, name: &str, word: &str) -> Result<(), WordError> {
        self.types.push((name.to_string(), word.parse()?));
        Ok(())
    }

    /// Declares the user-missing `codes` of column `name` (at least one).
    pub fn add_missing(&mut self, name: &str, codes: Vec<String>) -> Result<(), WordError> {
        if codes.is_empty() {
            return Err(word_error("", "at least one code"));
        }
        // Given again for the same column: the codes add up.
        match self
            .missing
            .iter_mut()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
        {
            Some((_, have)) => {
                for c in codes {
                    if !have.contains(&c) {
                        have.push(c);
                    }
                }
            }
            None => self.missing.push((name.to_string(), codes)),
        }
        Ok(())
    }

    /// The user-missing codes given for column `name`.
    pub(crate) fn missing_of(&self, name: &str) -> Option<&[String]> {
        self.missing
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, c)| c.as_slice())
    }

    /// The codebook with what [`keep_niu`](Self::keep_niu) asks of it.
    pub(crate) fn codebook_used<'a>(&self, cb: &'a Codebook) -> std::borrow::Cow<'a, Codebook> {
        if self.keep_niu {
            let mut cb = cb.clone();
            cb.keep_niu_codes();
            std::borrow::Cow::Owned(cb)
        } else {
            std::borrow::Cow::Borrowed(cb)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn words_each_option_takes() {
        for w in ["utf-8", "UTF8", "utf_8"] {
            assert_eq!(w.parse::<Encoding>(), Ok(Encoding::Utf8), "{w}");
        }
        for w in ["latin1", "latin_1", "Latin-1", "ISO-8859-1", "iso8859_1"] {
            assert_eq!(w.parse::<Encoding>(), Ok(Encoding::Latin1), "{w}");
        }
        for w in ["windows-1252", "cp1252", "WIN1252", "windows_1252"] {
            assert_eq!(w.parse::<Encoding>(), Ok(Encoding::Windows1252), "{w}");
        }
        assert_eq!(
            "ebcdic".parse::<Encoding>().unwrap_err().to_string(),
            format!("expected {ENCODINGS}, got 'ebcdic'")
        );
        // Other WHATWG labels and the code pages SPSS and SAS files name.
        let other = |w: &str| match w.parse::<Encoding>() {
            Ok(Encoding::Other(e)) => e.name(),
            x => panic!("{w}: {x:?}"),
        };
        assert_eq!(other("windows-1251"), "windows-1251");
        assert_eq!(other("Shift_JIS"), "Shift_JIS");
        assert_eq!(other("big5"), "Big5");
        assert!("utf-16le".parse::<Encoding>().is_err());
        let named = |w: &str| Encoding::named(w).map(|e| e.name());
        assert_eq!(named("1255"), Some("windows-1255"));
        assert_eq!(named("CP950"), Some("Big5"));
        assert_eq!(named("ISO-8859-1"), Some("Latin-1"));
        assert_eq!(named("65001"), Some("UTF-8"));
        assert_eq!(named("28592"), Some("ISO-8859-2"));
        assert_eq!(named("WINDOWS-1252"), Some("Windows-1252"));
        assert_eq!(named("12345"), None);
        // Decoding: a Cyrillic byte, and bytes Shift_JIS cannot decode.
        let cp1251 = Encoding::named("1251").unwrap();
        assert_eq!(cp1251.decode(&[0xC0]).as_deref(), Some("А"));
        assert_eq!(Encoding::named("shift_jis").unwrap().decode(&[0x82]), None);
        for (w, t) in [
            ("int", TypeHint::Int),
            ("Integer", TypeHint::Int),
            ("float", TypeHint::Float),
            ("DOUBLE", TypeHint::Float),
            ("string", TypeHint::String),
            ("str", TypeHint::String),
            ("text", TypeHint::String),
        ] {
            assert_eq!(w.parse::<TypeHint>(), Ok(t), "{w}");
        }
        assert!("decimal".parse::<TypeHint>().is_err());
        assert_eq!("all".parse::<InferRows>(), Ok(InferRows::ALL));
        assert_eq!("ALL".parse::<InferRows>(), Ok(InferRows(u64::MAX)));
        assert_eq!("1000".parse::<InferRows>(), Ok(InferRows(1000)));
        for w in ["0", "-5", "many", ""] {
            assert!(w.parse::<InferRows>().is_err(), "{w}");
        }
        assert_eq!("tab".parse::<Delimiter>(), Ok(Delimiter(b'\t')));
        assert_eq!("\t".parse::<Delimiter>(), Ok(Delimiter(b'\t')));
        assert_eq!(";".parse::<Delimiter>(), Ok(Delimiter(b';')));
        for w in ["\"", "ab", "\n", "é"] {
            assert!(w.parse::<Delimiter>().is_err(), "{w:?}");
        }
        let mut o = ImportOptions::default();
        assert!(o.add_missing("X", Vec::new()).is_err());
        o.add_missing("X", vec!["9".into()]).unwrap();
        o.add_type("ZIP", "TEXT").unwrap();
        assert_eq!(o.missing_of("x"), Some(&["9".to_string()][..]));
        // Given twice (any case): both codes.
        o.add_missing("X", vec!["99".into(), "9".into()]).unwrap();
        assert_eq!(
            o.missing_of("x"),
            Some(&["9".to_string(), "99".to_string()][..])
        );
        assert_eq!(o.types, vec![("ZIP".to_string(), TypeHint::String)]);
    }
}
