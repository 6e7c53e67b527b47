//! Writing a dataset as a Stata file (release 118, what Stata 14 to 19
//! read), so that results go back to Stata users with their labels and
//! missing values.
//!
//! - **Types**: integers become `byte`, `int` or `long` when their values
//!   fit Stata's ranges, else `double`; exact decimals and floats become
//!   `double`; text becomes `strN` (N its longest value in bytes), or `strL`
//!   beyond 2045 bytes.
//! - **Missing values**: system-missing is `.`; user-missing codes become
//!   `.a`, `.b` … (the codes of Stata's own `.a`–`.z` kept as they are, so
//!   a Stata or SAS file imported and exported keeps its letters), each
//!   labelled by the code's label or, without one, by the code; past 26
//!   codes the rest stay values, with a note. Text has no missing values
//!   in Stata: a text's missing codes stay text, with a note.
//! - **Labels**: variable labels (80 characters at most), value labels of
//!   integer values (Stata labels no other); a text's value labels are left
//!   out, with a note.
//! - **Names**: made valid Stata names (letters, digits and `_`, not
//!   starting with a digit, at most 32 characters, no reserved word), each
//!   change noted.
//!
//! The file is written beside its target and renamed into place when
//! complete: a failed export leaves an existing file as it was.

use crate::core::dates::{iso_date, tagged_code};
use crate::core::export::{atomically, blocks, check, labelled, names, target_error, NameRules};
pub use crate::core::export::{WriteOptions, Written};
use crate::error::{Error, Result};
use microtab_store::{codec, match_column, Dataset, Kind, Variable, STRIPE_ROWS};
use std::collections::{BTreeMap, HashMap};
use std::io::{Seek, SeekFrom, Write};
use std::path::Path;

/// Stata's `.` and the first of `.a`–`.z` for each integer type.
const BYTE_DOT: i64 = 101;
const INT_DOT: i64 = 32_741;
const LONG_DOT: i64 = 2_147_483_621;
/// The largest `strN`.
const STR_MAX: usize = 2045;
/// Stata 118's variable limit.
const MAX_VARS: usize = 32_767;

const RESERVED: &[&str] = &[
    "_all", "_b", "byte", "_coef", "_cons", "double", "float", "if", "in", "int", "long", "_n",
    "_N", "_pi", "_pred", "_rc", "_skip", "strL", "using", "with",
];

#[derive(Debug, Clone, Copy, PartialEq)]
enum Out {
    Byte,
    Int,
    Long,
    Double,
    Str(usize),
    StrL,
    /// Text that is all ISO dates: `long` `%td`, from `Plan::when`.
    Date,
    /// Text that is all ISO datetimes: `double` `%tc`, from `Plan::when`.
    DateTime,
}

impl Out {
    fn width(self) -> usize {
        match self {
            Out::Byte => 1,
            Out::Int => 2,
            Out::Long | Out::Date => 4,
            Out::Double | Out::StrL | Out::DateTime => 8,
            Out::Str(n) => n,
        }
    }

    fn code(self) -> u16 {
        match self {
            Out::Byte => 65530,
            Out::Int => 65529,
            Out::Long | Out::Date => 65528,
            Out::Double | Out::DateTime => 65526,
            Out::Str(n) => n as u16,
            Out::StrL => 32768,
        }
    }
}

/// One variable's plan.
struct Plan {
    var: Variable,
    name: String,
    out: Out,
    /// Text: the dictionary.
    dict: Vec<String>,
    /// Stored value (int and text: the integer; float: the bits) → its
    /// letter (1 = `.a`).
    tags: HashMap<i64, u8>,
    /// Value labels: Stata's integer key → label.
    labels: BTreeMap<i32, String>,
    /// Dates and datetimes: each dictionary entry's Stata value (the bits
    /// of a `%tc` double).
    when: Vec<i64>,
    offset: usize,
}

/// Writes the variables `vars` of `ds` — the records `selection` keeps
/// (bit `r % 64` of word `r / 64`, and how many; `None`: all) — as a Stata
/// release-118 file at `out`, replacing an existing file only with
/// `opts.force`; without `opts.value_labels`, no value-label table (the
/// missing letters `.a`, `.b` … unlabelled too).
pub fn write_dta(
    ds: &Dataset,
    vars: &[Variable],
    selection: Option<(&[u64], u64)>,
    out: &Path,
    opts: WriteOptions,
) -> Result<Written> {
    let bad = |reason: String| target_error(out, reason);
    check(out, opts.force, vars)?;
    let vars = &labelled(vars, opts)[..];
    if vars.len() > MAX_VARS {
        return Err(bad(format!(
            "{} variables: a Stata file (release 118) holds at most {MAX_VARS}; choose some",
            vars.len()
        )));
    }
    let rows = selection.map_or(ds.rows(), |(_, n)| n);
    let mut notes = Vec::new();
    let names = stata_names(vars, &mut notes);
    let mut plans = Vec::with_capacity(vars.len());
    let mut offset = 0;
    for (v, name) in vars.iter().zip(names) {
        let mut p = plan(ds, v, name, offset, &mut notes)?;
        if !opts.value_labels {
            // The labels a plan gives missing letters and dates' tags.
            p.labels.clear();
        }
        offset += p.out.width();
        plans.push(p);
    }
    let row_len = offset;
    atomically(out, |w| {
        let title = label80(ds.manifest().title.as_deref().unwrap_or(""));
        let map_at = header(w, &plans, rows, &title)?;
        let mut map = [0u64; 14];
        map[1] = map_at;
        // The descriptors, their offsets noted in the map.
        let at = |w: &mut std::io::BufWriter<std::fs::File>| w.stream_position();
        map[2] = at(w)?;
        w.write_all(b"<variable_types>")?;
        for p in &plans {
            w.write_all(&p.out.code().to_le_bytes())?;
        }
        w.write_all(b"</variable_types>")?;
        map[3] = at(w)?;
        w.write_all(b"<varnames>")?;
        for p in &plans {
            w.write_all(&fixed(&p.name, 129))?;
        }
        w.write_all(b"</varnames>")?;
        map[4] = at(w)?;
        w.write_all(b"<sortlist>")?;
        w.write_all(&vec![0u8; 2 * (plans.len() + 1)])?;
        w.write_all(b"</sortlist>")?;
        map[5] = at(w)?;
        w.write_all(b"<formats>")?;
        for p in &plans {
            w.write_all(&fixed(&format_of(p), 57))?;
        }
        w.write_all(b"</formats>")?;
        map[6] = at(w)?;
        w.write_all(b"<value_label_names>")?;
        for p in &plans {
            let n = if p.labels.is_empty() { "" } else { &p.name };
            w.write_all(&fixed(n, 129))?;
        }
        w.write_all(b"</value_label_names>")?;
        map[7] = at(w)?;
        w.write_all(b"<variable_labels>")?;
        for p in &plans {
            w.write_all(&fixed(&label80(p.var.label.as_deref().unwrap_or("")), 321))?;
        }
        w.write_all(b"</variable_labels>")?;
        map[8] = at(w)?;
        w.write_all(b"<characteristics></characteristics>")?;
        map[9] = at(w)?;
        w.write_all(b"<data>")?;
        let strls = match data(ds, &plans, row_len, selection, w)? {
            Ok(s) => s,
            Err(e) => return Ok(Err(e)),
        };
        w.write_all(b"</data>")?;
        map[10] = at(w)?;
        w.write_all(b"<strls>")?;
        for (v, o, text) in strls {
            w.write_all(b"GSO")?;
            w.write_all(&v.to_le_bytes())?;
            w.write_all(&o.to_le_bytes())?;
            w.write_all(&[0x82])?;
            w.write_all(&(text.len() as u32 + 1).to_le_bytes())?;
            w.write_all(text.as_bytes())?;
            w.write_all(&[0])?;
        }
        w.write_all(b"</strls>")?;
        map[11] = at(w)?;
        w.write_all(b"<value_labels>")?;
        for p in plans.iter().filter(|p| !p.labels.is_empty()) {
            value_label_table(w, p)?;
        }
        w.write_all(b"</value_labels>")?;
        map[12] = at(w)?;
        w.write_all(b"</stata_dta>")?;
        map[13] = at(w)?;
        w.seek(SeekFrom::Start(map_at + 5))?;
        for m in map {
            w.write_all(&m.to_le_bytes())?;
        }
        Ok(Ok(()))
    })?;
    Ok(Written {
        rows,
        vars: plans.len(),
        notes,
    })
}

/// Whether `n` is a valid Stata name: letters (Unicode ones too, as
/// Stata 14 on takes them), digits and `_`, not starting with a digit, at
/// most 32 characters, no reserved word (`int`, `_n`, `str7` …).
fn valid_name(n: &str) -> bool {
    let mut chars = n.chars();
    let Some(first) = chars.next() else {
        return false;
    };
    let str_n = n
        .strip_prefix("str")
        .is_some_and(|d| !d.is_empty() && d.bytes().all(|c| c.is_ascii_digit()));
    (first.is_alphabetic() || first == '_')
        && chars.all(|c| c.is_alphanumeric() || c == '_')
        && n.chars().count() <= 32
        && !RESERVED.contains(&n)
        && !str_n
}

/// Valid, distinct Stata names for `vars`, a note for each change.
fn stata_names(vars: &[Variable], notes: &mut Vec<String>) -> Vec<String> {
    names(
        vars,
        &NameRules {
            valid: valid_name,
            keep: |c| c.is_alphanumeric() || c == '_',
            lead: '_',
            max: 32,
            cut: |s, k| s.chars().take(k).collect(),
            fold: false,
            format: "Stata",
        },
        notes,
    )
}

/// A label cut to Stata's 80 characters.
fn label80(s: &str) -> String {
    s.chars().take(80).collect()
}

/// `s` in `n` bytes (UTF-8 cut at a character, NUL-padded, at least one
/// NUL at the end).
fn fixed(s: &str, n: usize) -> Vec<u8> {
    let mut end = s.len().min(n - 1);
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    let mut b = s.as_bytes()[..end].to_vec();
    b.resize(n, 0);
    b
}

fn format_of(p: &Plan) -> String {
    match p.out {
        Out::Byte => "%8.0g".into(),
        Out::Int => "%8.0g".into(),
        Out::Long => "%12.0g".into(),
        Out::Double if p.var.kind == Kind::Int && p.var.decimals > 0 => {
            format!("%12.{}f", p.var.decimals)
        }
        Out::Double => "%10.0g".into(),
        Out::Str(n) => format!("%{}s", n.min(STR_MAX)),
        Out::StrL => "%9s".into(),
        Out::Date => "%td".into(),
        Out::DateTime => "%tc".into(),
    }
}

/// The plan of variable `v`: its Stata type (from a pass over its
/// values), missing letters and value labels.
fn plan(
    ds: &Dataset,
    v: &Variable,
    name: String,
    offset: usize,
    notes: &mut Vec<String>,
) -> Result<Plan> {
    let mut p = Plan {
        var: v.clone(),
        name,
        out: Out::Double,
        dict: Vec::new(),
        tags: HashMap::new(),
        labels: BTreeMap::new(),
        when: Vec::new(),
        offset,
    };
    match v.kind {
        Kind::String => {
            p.dict = ds.dictionary(v)?;
            if let Some((out, when, tags)) = dates(&p.dict) {
                p.out = out;
                p.when = when;
                for (k, text) in tags {
                    p.labels.insert((LONG_DOT + i64::from(k)) as i32, text);
                }
                return Ok(p);
            }
            let longest = p.dict.iter().map(String::len).max().unwrap_or(0).max(1);
            p.out = if longest > STR_MAX {
                Out::StrL
            } else {
                Out::Str(longest)
            };
            if !v.missing_codes.is_empty() {
                notes.push(format!(
                    "variable {}: Stata text has no missing values: its missing codes stay text",
                    v.name
                ));
            }
            if !v.value_labels.is_empty() {
                notes.push(format!(
                    "variable {}: Stata labels only numbers: its value labels are left out",
                    v.name
                ));
            }
            return Ok(p);
        }
        Kind::Int => {
            let codes: Vec<i64> = v.missing_codes.iter().map(|&c| c as i64).collect();
            assign_tags(&mut p, &codes, notes);
            let beyond = |n: &Option<microtab_store::Number>| matches!(n, Some(microtab_store::Number::Int(x)) if x.unsigned_abs() > 1 << 53);
            if v.decimals > 0 && (beyond(&v.min) || beyond(&v.max)) {
                notes.push(format!(
                    "variable {}: decimals beyond 2^53 units of their last digit lose precision as Stata doubles",
                    v.name
                ));
            }
            if v.decimals == 0 {
                let (lo, hi) = range(ds, v, &p.tags)?;
                p.out = if lo >= -127 && hi <= 100 {
                    Out::Byte
                } else if lo >= -32_767 && hi <= 32_740 {
                    Out::Int
                } else if lo >= -2_147_483_647 && hi <= 2_147_483_620 {
                    Out::Long
                } else {
                    if lo.unsigned_abs().max(hi.unsigned_abs()) > 1 << 53 {
                        notes.push(format!(
                            "variable {}: integers beyond 2^53 lose precision as Stata doubles",
                            v.name
                        ));
                    }
                    Out::Double
                };
            }
        }
        Kind::Float => {
            let codes: Vec<i64> = v.missing_codes.iter().map(|c| c.to_bits() as i64).collect();
            assign_tags(&mut p, &codes, notes);
        }
    }
    // Value labels: integer keys (the labels of missing codes on their
    // letters).
    let mut left_out = Vec::new();
    for (key, label) in &v.value_labels {
        let Ok(x) = key.trim().parse::<f64>() else {
            left_out.push(key.clone());
            continue;
        };
        let stored = match v.kind {
            Kind::Float => Some(x.to_bits() as i64),
            _ => codec::parse_exact(key.trim())
                .and_then(|(m, d)| codec::rescale_exact(m, d, v.decimals)),
        };
        if let Some(&k) = stored.and_then(|s| p.tags.get(&s)) {
            p.labels
                .insert((LONG_DOT + i64::from(k)) as i32, label.clone());
        } else if x.fract() == 0.0 && (-2_147_483_647.0..=2_147_483_620.0).contains(&x) {
            p.labels.insert(x as i32, label.clone());
        } else {
            left_out.push(key.clone());
        }
    }
    // A missing code without a label is labelled by its value.
    for (&stored, &k) in &p.tags {
        let key = (LONG_DOT + i64::from(k)) as i32;
        p.labels.entry(key).or_insert_with(|| match v.kind {
            Kind::Float => codec::format_float(f64::from_bits(stored as u64)),
            _ => codec::display_int(v.decimals, stored),
        });
    }
    if !left_out.is_empty() {
        notes.push(format!(
            "variable {}: Stata labels only integers: the labels of {} are left out",
            v.name,
            left_out.join(", ")
        ));
    }
    Ok(p)
}

/// A text column's dictionary as Stata dates (`%td`, days since
/// 1960-01-01) when every entry is an ISO date, or datetimes (`%tc`,
/// milliseconds) when every one is an ISO datetime; entries `.A`–`.Z`,
/// `._` (a SAS or Stata file's tagged missing values) become `.a`–`.z`.
/// Each entry's Stata value, and the tags' letters with their text.
#[allow(clippy::type_complexity)]
fn dates(dict: &[String]) -> Option<(Out, Vec<i64>, Vec<(u8, String)>)> {
    let is_tag = |s: &str| {
        s.len() == 2
            && s.starts_with('.')
            && (s.as_bytes()[1].is_ascii_alphabetic() || s.ends_with('_'))
    };
    let values: Vec<&String> = dict.iter().filter(|s| !is_tag(s)).collect();
    let first = values.first()?;
    let out = if first.len() == 10 {
        Out::Date
    } else {
        Out::DateTime
    };
    // Letters: a tag's own, `._` the first one free.
    let mut tags: Vec<(u8, String)> = Vec::new();
    let mut letter = HashMap::new();
    for s in dict.iter().filter(|s| is_tag(s)) {
        let c = s.as_bytes()[1].to_ascii_lowercase();
        if c != b'_' {
            letter.insert(s.clone(), c - b'a' + 1);
        }
    }
    for s in dict.iter().filter(|s| is_tag(s) && s.ends_with('_')) {
        let k = (1..=26u8).find(|k| !letter.values().any(|x| x == k))?;
        letter.insert(s.clone(), k);
    }
    let mut when = Vec::with_capacity(dict.len());
    for s in dict {
        if let Some(&k) = letter.get(s) {
            tags.push((k, s.clone()));
            when.push(match out {
                Out::Date => LONG_DOT + i64::from(k),
                _ => tagged_code(u64::from(k)).to_bits() as i64,
            });
            continue;
        }
        let days = iso_days(s.get(..10)?)? + 3653;
        when.push(match out {
            Out::Date if s.len() == 10 && (-4_000_000..=2_000_000_000).contains(&days) => days,
            Out::DateTime if s.len() > 10 => {
                let t = s.strip_prefix(&s[..10])?.strip_prefix('T')?;
                let ms = clock_ms(t)?;
                ((days * 86_400_000 + ms) as f64).to_bits() as i64
            }
            _ => return None,
        });
    }
    Some((out, when, tags))
}

/// `YYYY-MM-DD` as days since 1970-01-01 (Howard Hinnant's
/// days_from_civil); `None` when it is not a date.
pub(crate) fn iso_days(s: &str) -> Option<i64> {
    let b = s.as_bytes();
    if b.len() != 10 || b[4] != b'-' || b[7] != b'-' {
        return None;
    }
    let num = |r: std::ops::Range<usize>| -> Option<i64> {
        b[r.clone()]
            .iter()
            .all(u8::is_ascii_digit)
            .then(|| s[r].parse().ok())?
    };
    let (y, m, d) = (num(0..4)?, num(5..7)?, num(8..10)?);
    let leap = y % 4 == 0 && (y % 100 != 0 || y % 400 == 0);
    let days_in = [
        31,
        if leap { 29 } else { 28 },
        31,
        30,
        31,
        30,
        31,
        31,
        30,
        31,
        30,
        31,
    ];
    if !(1..=12).contains(&m) || d < 1 || d > days_in[(m - 1) as usize] {
        return None;
    }
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    Some(era * 146_097 + doe - 719_468)
}

/// `HH:MM:SS[.ffffff]` as milliseconds (rounded); `None` otherwise.
pub(crate) fn clock_ms(t: &str) -> Option<i64> {
    let (hms, frac) = t.split_once('.').unwrap_or((t, ""));
    let p: Vec<&str> = hms.split(':').collect();
    if p.len() != 3
        || p.iter()
            .any(|x| x.len() != 2 || !x.bytes().all(|c| c.is_ascii_digit()))
    {
        return None;
    }
    if !frac.bytes().all(|c| c.is_ascii_digit()) || frac.len() > 9 {
        return None;
    }
    let (h, m, sec): (i64, i64, i64) = (p[0].parse().ok()?, p[1].parse().ok()?, p[2].parse().ok()?);
    if h > 23 || m > 59 || sec > 60 {
        return None;
    }
    let f: f64 = if frac.is_empty() {
        0.0
    } else {
        format!("0.{frac}").parse().ok()?
    };
    Some((h * 3600 + m * 60 + sec) * 1000 + (f * 1000.0).round() as i64)
}

/// Letters for the missing codes `codes` (stored units, floats as bits):
/// Stata's own codes of `.a`–`.z` keep their letter, the others take the
/// first free ones; past 26 they stay values, with a note.
fn assign_tags(p: &mut Plan, codes: &[i64], notes: &mut Vec<String>) {
    let mut free: Vec<u8> = (1..=26).collect();
    let mut rest = Vec::new();
    for &c in codes {
        let own = (1..=26u8).find(|&k| {
            p.var.kind == Kind::Float && tagged_code(u64::from(k)).to_bits() as i64 == c
        });
        match own {
            Some(k) if free.contains(&k) => {
                free.retain(|&x| x != k);
                p.tags.insert(c, k);
            }
            _ => rest.push(c),
        }
    }
    let mut kept = 0;
    for c in rest {
        if free.is_empty() {
            kept += 1;
            continue;
        }
        let k = free.remove(0);
        p.tags.insert(c, k);
    }
    if kept > 0 {
        notes.push(format!(
            "variable {}: {kept} missing codes beyond Stata's 26 (.a-.z) stay values",
            p.var.name
        ));
    }
}

/// The smallest and largest stored value of the integer variable `v`
/// that is neither missing nor a missing code (0, 0 when none is).
// The macro casts every stored type to i64, i64 included.
#[allow(clippy::unnecessary_cast)]
fn range(ds: &Dataset, v: &Variable, tags: &HashMap<i64, u8>) -> Result<(i64, i64)> {
    let col = ds.column(&v.name)?;
    let rows = ds.rows() as usize;
    let null = v.null_code.filter(|_| v.nulls > 0);
    let (mut lo, mut hi) = (i64::MAX, i64::MIN);
    let mut buf = Vec::new();
    let mut start = 0;
    while start < rows {
        let n = (8 * STRIPE_ROWS).min(rows - start);
        let view = col.rows_view(start, n, &mut buf)?;
        match_column!(view, |d| ints => {
            for &x in d {
                let x = x as i64;
                if Some(x) != null && !tags.contains_key(&x) {
                    lo = lo.min(x);
                    hi = hi.max(x);
                }
            }
        }, floats => {
            let _ = d;
        });
        start += n;
    }
    Ok(if lo > hi { (0, 0) } else { (lo, hi) })
}

/// Writes `<stata_dta><header>…</header>` (`label`: the dataset label,
/// the dataset's title) and an empty map; where the map starts.
fn header(
    w: &mut (impl Write + Seek),
    plans: &[Plan],
    rows: u64,
    label: &str,
) -> std::io::Result<u64> {
    w.write_all(b"<stata_dta><header><release>118</release><byteorder>LSF</byteorder><K>")?;
    w.write_all(&(plans.len() as u16).to_le_bytes())?;
    w.write_all(b"</K><N>")?;
    w.write_all(&rows.to_le_bytes())?;
    w.write_all(b"</N><label>")?;
    // At most 80 characters: 320 bytes of UTF-8.
    w.write_all(&(label.len() as u16).to_le_bytes())?;
    w.write_all(label.as_bytes())?;
    w.write_all(b"</label><timestamp>")?;
    let ts = timestamp();
    w.write_all(&[ts.len() as u8])?;
    w.write_all(ts.as_bytes())?;
    w.write_all(b"</timestamp></header>")?;
    let at = w.stream_position()?;
    w.write_all(b"<map>")?;
    w.write_all(&[0u8; 14 * 8])?;
    w.write_all(b"</map>")?;
    Ok(at)
}

/// Now as Stata writes it: `27 Nov 2026 14:05`.
fn timestamp() -> String {
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs() as i64);
    let iso = iso_date(secs.div_euclid(86_400));
    let (y, m, d) = (&iso[..4], &iso[5..7], &iso[8..10]);
    const MONTHS: [&str; 12] = [
        "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
    ];
    let mon = MONTHS[m.parse::<usize>().unwrap_or(1).clamp(1, 12) - 1];
    let t = secs.rem_euclid(86_400);
    format!("{d} {mon} {y} {:02}:{:02}", t / 3600, t / 60 % 60)
}

/// Writes the records; the strLs they refer to (`(v, o, text)`).
// The macro casts every stored type to i64 or f64, those included.
#[allow(clippy::type_complexity, clippy::unnecessary_cast)]
fn data(
    ds: &Dataset,
    plans: &[Plan],
    row_len: usize,
    selection: Option<(&[u64], u64)>,
    w: &mut impl Write,
) -> std::io::Result<std::result::Result<Vec<(u32, u64, String)>, Error>> {
    let rows = ds.rows() as usize;
    let cols = match plans
        .iter()
        .map(|p| ds.column(&p.var.name))
        .collect::<std::result::Result<Vec<_>, _>>()
    {
        Ok(c) => c,
        Err(e) => return Ok(Err(e.into())),
    };
    let mut strls: Vec<(u32, u64, String)> = Vec::new();
    let mut strl_first: Vec<HashMap<i64, u64>> = vec![HashMap::new(); plans.len()];
    let mut bufs: Vec<Vec<u64>> = vec![Vec::new(); plans.len()];
    let mut out = Vec::new();
    let mut written = 0u64;
    for (start, n, keep) in blocks(rows, selection) {
        out.clear();
        out.resize(keep.len() * row_len, 0);
        for (vi, ((p, col), buf)) in plans.iter().zip(&cols).zip(bufs.iter_mut()).enumerate() {
            let view = match col.rows_view(start, n, buf) {
                Ok(v) => v,
                Err(e) => return Ok(Err(e.into())),
            };
            let null = p.var.null_code.filter(|_| p.var.nulls > 0);
            let mut put = |j: usize, bytes: &[u8]| {
                let at = j * row_len + p.offset;
                out[at..at + bytes.len()].copy_from_slice(bytes);
            };
            match_column!(view, |d| ints => {
                for (j, &i) in keep.iter().enumerate() {
                    let x = d[i] as i64;
                    let tag = p.tags.get(&x).copied();
                    let is_null = Some(x) == null;
                    match p.out {
                        Out::Byte => put(j, &[match (is_null, tag) {
                            (true, _) => BYTE_DOT,
                            (_, Some(k)) => BYTE_DOT + i64::from(k),
                            _ => x,
                        } as i8 as u8]),
                        Out::Int => put(j, &(match (is_null, tag) {
                            (true, _) => INT_DOT,
                            (_, Some(k)) => INT_DOT + i64::from(k),
                            _ => x,
                        } as i16).to_le_bytes()),
                        Out::Long => put(j, &(match (is_null, tag) {
                            (true, _) => LONG_DOT,
                            (_, Some(k)) => LONG_DOT + i64::from(k),
                            _ => x,
                        } as i32).to_le_bytes()),
                        Out::Double => {
                            let f = match (is_null, tag) {
                                (true, _) => f64::from_bits(0x7FE0_0000_0000_0000),
                                (_, Some(k)) => tagged_code(u64::from(k)),
                                _ => x as f64 / p.var.scale(),
                            };
                            put(j, &f.to_le_bytes());
                        }
                        Out::Date => put(j, &(if is_null {
                            LONG_DOT
                        } else {
                            p.when[x as usize]
                        } as i32).to_le_bytes()),
                        Out::DateTime => put(j, &(if is_null {
                            0x7FE0_0000_0000_0000
                        } else {
                            p.when[x as usize] as u64
                        }).to_le_bytes()),
                        Out::Str(_) => {
                            if !is_null {
                                if let Some(s) = p.dict.get(x as usize) {
                                    put(j, s.as_bytes());
                                }
                            }
                        }
                        Out::StrL => {
                            let text = if is_null { None } else { p.dict.get(x as usize) };
                            if let Some(s) = text.filter(|s| !s.is_empty()) {
                                let o = *strl_first[vi].entry(x).or_insert_with(|| {
                                    let o = written + j as u64 + 1;
                                    strls.push((vi as u32 + 1, o, s.clone()));
                                    o
                                });
                                let r = (vi as u64 + 1) | (o << 16);
                                put(j, &r.to_le_bytes());
                            }
                        }
                    }
                }
            }, floats => {
                for (j, &i) in keep.iter().enumerate() {
                    let x = d[i] as f64;
                    let f = if x.is_nan() {
                        f64::from_bits(0x7FE0_0000_0000_0000)
                    } else if let Some(&k) = p.tags.get(&(x.to_bits() as i64)) {
                        tagged_code(u64::from(k))
                    } else {
                        x
                    };
                    put(j, &f.to_le_bytes());
                }
            });
        }
        w.write_all(&out)?;
        written += keep.len() as u64;
    }
    Ok(Ok(strls))
}

/// One value-label table (`<lbl>`): the variable's labels, named as it is.
fn value_label_table(w: &mut impl Write, p: &Plan) -> std::io::Result<()> {
    let mut offs = Vec::new();
    let mut vals = Vec::new();
    let mut txt = Vec::new();
    for (&k, l) in &p.labels {
        offs.push(txt.len() as u32);
        vals.push(k);
        txt.extend_from_slice(fixed(l, l.len().min(32_000) + 1).as_slice());
    }
    let n = p.labels.len() as u32;
    let len = 8 + 8 * n + txt.len() as u32;
    w.write_all(b"<lbl>")?;
    w.write_all(&len.to_le_bytes())?;
    w.write_all(&fixed(&p.name, 129))?;
    w.write_all(&[0u8; 3])?;
    w.write_all(&n.to_le_bytes())?;
    w.write_all(&(txt.len() as u32).to_le_bytes())?;
    for o in offs {
        w.write_all(&o.to_le_bytes())?;
    }
    for v in vals {
        w.write_all(&v.to_le_bytes())?;
    }
    w.write_all(&txt)?;
    w.write_all(b"</lbl>")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_become_valid_stata_names() {
        let v = |n: &str| Variable::new(n, Kind::Int, microtab_store::PhysType::I32);
        let mut notes = Vec::new();
        let got = stata_names(
            &[
                v("AGE"),
                v("2nd"),
                v("a b"),
                v("int"),
                v(&"x".repeat(40)),
                v("a_b"),
                v("ñame"),
                v("str7"),
            ],
            &mut notes,
        );
        // `a_b` is valid and kept; `a b` takes the next free name.
        assert_eq!(
            got,
            [
                "AGE",
                "_2nd",
                "a_b_2",
                "_int",
                &"x".repeat(32),
                "a_b",
                "ñame",
                "_str7"
            ]
        );
        assert_eq!(notes.len(), 5);
    }

    #[test]
    fn iso_dates_and_datetimes_become_stata_numbers() {
        assert_eq!(iso_days("1970-01-01"), Some(0));
        assert_eq!(iso_days("1960-01-01"), Some(-3653));
        assert_eq!(iso_days("2000-02-29"), Some(11_016));
        assert_eq!(iso_days("1900-02-29"), None);
        assert_eq!(iso_days("2020-13-01"), None);
        assert_eq!(iso_days("0001-01-01"), Some(-719_162));
        assert_eq!(clock_ms("10:10:10.5"), Some(36_610_500));
        assert_eq!(clock_ms("24:00:00"), None);
        let d = |v: &[&str]| dates(&v.iter().map(|s| s.to_string()).collect::<Vec<_>>());
        let (out, when, tags) = d(&[".A", "1960-01-02", "2018-05-06"]).unwrap();
        assert_eq!(out, Out::Date);
        assert_eq!(when, [LONG_DOT + 1, 1, 21_310]);
        assert_eq!(tags, [(1, ".A".to_string())]);
        let (out, when, _) = d(&["1960-01-01T00:00:01.5"]).unwrap();
        assert_eq!(out, Out::DateTime);
        assert_eq!(f64::from_bits(when[0] as u64), 1500.0);
        assert!(d(&["2018-05-06", "soon"]).is_none());
        assert!(d(&["10:10:10"]).is_none());
        assert!(d(&[".A"]).is_none());
    }

    #[test]
    fn fixed_fields_cut_at_a_character() {
        assert_eq!(fixed("abc", 5), b"abc\0\0");
        assert_eq!(fixed("ééé", 5), "éé".bytes().chain([0]).collect::<Vec<_>>());
    }
}
