//! Writing a dataset as an SPSS system file (bytecode-compressed, UTF-8,
//! little-endian: what SPSS itself writes by default), so that results go
//! back to SPSS and PSPP users with their labels and missing values.
//!
//! - **Types**: numbers become SPSS numbers (`F` formats with the
//!   column's decimals); text becomes strings of its longest value in bytes
//!   (up to 32,767: longer ones are SPSS's very long strings, in segments);
//!   text that is all ISO dates or datetimes (what an import of a Stata,
//!   SPSS or SAS file wrote) becomes `DATE11` or `DATETIME` numbers.
//! - **Missing values**: system-missing is SPSS's; up to three user-missing
//!   codes of a number become its discrete missing values; more become a
//!   range from the smallest to the largest code when no value of the data
//!   lies between them, else the three first (a note names the rest).
//!   Text missing codes (up to three, of at most 8 bytes) likewise.
//! - **Labels**: variable labels, value labels of numbers and of texts.
//! - **Names**: made valid SPSS names (64 bytes, a letter first, letters,
//!   digits, `.`, `_`, `$`, `#`, `@`), each change noted; the 8-byte short
//!   names the format needs are derived and the long names recorded.
//!
//! The file is written beside its target and renamed into place when
//! complete: a failed export leaves an existing file as it was.

use crate::core::export::{
    atomically, blocks, check, labelled, names, NameRules, WriteOptions, Written,
};
use crate::dta::write::{clock_ms, iso_days};
use crate::error::{Error, Result};
use microtab_store::{codec, match_column, Dataset, Kind, Variable, STRIPE_ROWS};
use std::collections::HashSet;
use std::io::Write;
use std::path::Path;

/// SPSS's system-missing value.
const SYSMIS: f64 = -f64::MAX;
/// Days from 1582-10-14 (SPSS's origin) to 1970-01-01.
const SPSS_TO_UNIX_DAYS: i64 = 141_428;
/// Bytecode compression's bias.
const BIAS: f64 = 100.0;

#[derive(Debug, Clone, Copy, PartialEq)]
enum Out {
    /// A number with this many decimals shown.
    Num(u32),
    /// Text of this width in bytes.
    Str(usize),
    /// Text that is all ISO dates (`true`: datetimes): seconds since
    /// 1582-10-14, from `Plan::when`.
    When(bool),
}

struct Plan {
    var: Variable,
    name: String,
    short: String,
    /// Short names of a very long string's other segments.
    seg_shorts: Vec<String>,
    out: Out,
    dict: Vec<String>,
    when: Vec<f64>,
    /// The first 8-byte slot of the variable in a case.
    slot: usize,
    /// Discrete missing values (numbers as doubles, texts as 8 bytes), or
    /// a range.
    missing: Vec<f64>,
    missing_text: Vec<String>,
    range: Option<(f64, f64)>,
    labels: Vec<(f64, String)>,
    text_labels: Vec<(String, String)>,
}

impl Plan {
    /// Slots of 8 bytes the variable takes in a case.
    fn slots(&self) -> usize {
        match self.out {
            Out::Str(w) => segments(w).iter().map(|&s| s.div_ceil(8)).sum(),
            _ => 1,
        }
    }
}

/// The widths of the segments of a string of `w` bytes: itself up to 255,
/// else SPSS's very long string segments (255 bytes each but the last,
/// each holding 252 bytes of text).
fn segments(w: usize) -> Vec<usize> {
    if w <= 255 {
        return vec![w.max(1)];
    }
    let n = w.div_ceil(252);
    let mut v = vec![255; n];
    v[n - 1] = w - 252 * (n - 1);
    v
}

/// Writes the variables `vars` of `ds` — the records `selection` keeps
/// (bit `r % 64` of word `r / 64`, and how many; `None`: all) — as an
/// SPSS system file at `out`, replacing an existing file only with
/// `opts.force`; without `opts.value_labels`, no value-label records.
pub fn write_sav(
    ds: &Dataset,
    vars: &[Variable],
    selection: Option<(&[u64], u64)>,
    out: &Path,
    opts: WriteOptions,
) -> Result<Written> {
    check(out, opts.force, vars)?;
    let vars = &labelled(vars, opts)[..];
    let rows = selection.map_or(ds.rows(), |(_, n)| n);
    let mut notes = Vec::new();
    let names = spss_names(vars, &mut notes);
    let mut plans = Vec::with_capacity(vars.len());
    let mut slot = 0;
    let mut shorts = HashSet::new();
    for (v, name) in vars.iter().zip(names) {
        let short = short_name(&name, &mut shorts);
        let mut p = plan(ds, v, name, short, slot, &mut notes)?;
        if let Out::Str(wd) = p.out {
            for si in 1..segments(wd).len() {
                p.seg_shorts
                    .push(short_name(&format!("{}{si}", p.short), &mut shorts));
            }
        }
        slot += p.slots();
        plans.push(p);
    }
    let slots = slot;
    atomically(out, |w| {
        let title = ds.manifest().title.as_deref().unwrap_or("");
        dictionary(w, &plans, slots, rows, title)?;
        data(ds, &plans, slots, selection, w)
    })?;
    Ok(Written {
        rows,
        vars: plans.len(),
        notes,
    })
}

fn valid_name(n: &str) -> bool {
    const RESERVED: &[&str] = &[
        "ALL", "AND", "BY", "EQ", "GE", "GT", "LE", "LT", "NE", "NOT", "OR", "TO", "WITH",
    ];
    let mut c = n.chars();
    let Some(first) = c.next() else { return false };
    (first.is_alphabetic() || first == '@')
        && c.all(|x| x.is_alphanumeric() || "._$#@".contains(x))
        && n.len() <= 64
        && !n.ends_with('.')
        && !RESERVED.contains(&n.to_ascii_uppercase().as_str())
}

/// Valid, distinct SPSS names (without regard to case), a note for each
/// change; valid names are kept.
fn spss_names(vars: &[Variable], notes: &mut Vec<String>) -> Vec<String> {
    names(
        vars,
        &NameRules {
            valid: valid_name,
            keep: |c| c.is_alphanumeric() || "._$#@".contains(c),
            lead: 'v',
            max: 64,
            cut: |s, k| {
                let mut e = s.len().min(k);
                while !s.is_char_boundary(e) {
                    e -= 1;
                }
                s[..e].trim_end_matches('.').to_string()
            },
            fold: true,
            format: "SPSS",
        },
        notes,
    )
}

/// A distinct short name of at most 8 bytes (upper case ASCII) for the
/// long name `n`.
fn short_name(n: &str, taken: &mut HashSet<String>) -> String {
    let mut s: String = n
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || "_$#@".contains(c) {
                c.to_ascii_uppercase()
            } else {
                '_'
            }
        })
        .take(8)
        .collect();
    if !s.starts_with(|c: char| c.is_ascii_alphabetic() || c == '@') {
        s = format!("V{}", &s[..s.len().min(7)]);
    }
    let base = s.clone();
    let mut k = 1;
    while !taken.insert(s.clone()) {
        let suffix = k.to_string();
        s = format!("{}{suffix}", &base[..base.len().min(8 - suffix.len())]);
        k += 1;
    }
    s
}

fn plan(
    ds: &Dataset,
    v: &Variable,
    name: String,
    short: String,
    slot: usize,
    notes: &mut Vec<String>,
) -> Result<Plan> {
    let mut p = Plan {
        var: v.clone(),
        name,
        short,
        seg_shorts: Vec::new(),
        out: Out::Num(0),
        dict: Vec::new(),
        when: Vec::new(),
        slot,
        missing: Vec::new(),
        missing_text: Vec::new(),
        range: None,
        labels: Vec::new(),
        text_labels: Vec::new(),
    };
    match v.kind {
        Kind::String => {
            p.dict = ds.dictionary(v)?;
            if let Some((dt, when, tags)) = spss_dates(&p.dict) {
                p.out = Out::When(dt);
                p.when = when;
                if tags > 0 {
                    notes.push(format!(
                        "variable {}: SPSS has no special missing dates: its {tags} kinds of .A-.Z are system-missing",
                        v.name
                    ));
                }
                return Ok(p);
            }
            let longest = p.dict.iter().map(String::len).max().unwrap_or(0).max(1);
            if longest > 32_767 {
                return Err(Error::Input {
                    path: ds.dir().to_path_buf(),
                    reason: format!(
                        "variable {}: a text of {longest} bytes; an SPSS string holds at most 32,767",
                        v.name
                    ),
                });
            }
            p.out = Out::Str(longest);
            let codes: Vec<String> = v
                .missing_codes
                .iter()
                .filter_map(|&c| p.dict.get(c as usize).cloned())
                .collect();
            let fit: Vec<String> = if longest <= 8 {
                codes.iter().take(3).cloned().collect()
            } else {
                Vec::new()
            };
            if fit.len() < codes.len() {
                notes.push(format!(
                    "variable {}: microtab writes at most three text missing values, of text of at most 8 bytes: {} stay values",
                    v.name,
                    codes.iter().filter(|c| !fit.contains(c)).cloned().collect::<Vec<_>>().join(", ")
                ));
            }
            p.missing_text = fit;
            p.text_labels = v
                .value_labels
                .iter()
                .map(|(k, l)| (k.clone(), l.clone()))
                .collect();
            return Ok(p);
        }
        Kind::Int => p.out = Out::Num(v.decimals),
        Kind::Float => p.out = Out::Num(0),
    }
    let value = |c: f64| match v.kind {
        Kind::Int => c / v.scale(),
        _ => c,
    };
    let mut codes: Vec<f64> = v.missing_codes.iter().map(|&c| value(c)).collect();
    codes.sort_by(f64::total_cmp);
    codes.dedup();
    if codes.len() <= 3 {
        p.missing = codes;
    } else {
        let (lo, hi) = (codes[0], codes[codes.len() - 1]);
        if !any_value_between(ds, v, lo, hi)? {
            p.range = Some((lo, hi));
        } else {
            notes.push(format!(
                "variable {}: SPSS keeps at most three missing values (or a range): {} stay values",
                v.name,
                codes[3..]
                    .iter()
                    .map(|&c| codec::format_float(c))
                    .collect::<Vec<_>>()
                    .join(", ")
            ));
            p.missing = codes[..3].to_vec();
        }
    }
    for (k, l) in &v.value_labels {
        match k.trim().parse::<f64>() {
            Ok(x) => p.labels.push((x, l.clone())),
            Err(_) => notes.push(format!(
                "variable {}: the label of {k:?} is left out",
                v.name
            )),
        }
    }
    Ok(p)
}

/// Whether a value of `v` other than its missing codes lies in `lo..=hi`.
// The macro casts every stored type to f64, f64 included.
#[allow(clippy::unnecessary_cast)]
fn any_value_between(ds: &Dataset, v: &Variable, lo: f64, hi: f64) -> Result<bool> {
    let col = ds.column(&v.name)?;
    let rows = ds.rows() as usize;
    let null = v.null_code.filter(|_| v.nulls > 0);
    let codes: Vec<f64> = v.missing_codes.clone();
    let scale = v.scale();
    let mut buf = Vec::new();
    let mut start = 0;
    while start < rows {
        let n = (8 * STRIPE_ROWS).min(rows - start);
        let view = col.rows_view(start, n, &mut buf)?;
        let hit = match_column!(view, |d| ints => {
            d.iter().any(|&x| {
                let x = x as i64;
                Some(x) != null && !codes.contains(&(x as f64)) && {
                    let f = x as f64 / scale;
                    f >= lo && f <= hi
                }
            })
        }, floats => {
            d.iter().any(|&x| {
                let x = x as f64;
                !x.is_nan() && !codes.contains(&x) && x >= lo && x <= hi
            })
        });
        if hit {
            return Ok(true);
        }
        start += n;
    }
    Ok(false)
}

/// A text column's dictionary as SPSS dates or datetimes (seconds since
/// 1582-10-14) when every entry is an ISO date, or every one an ISO
/// datetime; `.A`–`.Z` entries are system-missing. Whether datetimes, each
/// entry's value, and how many entries were such tags.
fn spss_dates(dict: &[String]) -> Option<(bool, Vec<f64>, usize)> {
    let is_tag = |s: &str| {
        s.len() == 2
            && s.starts_with('.')
            && (s.as_bytes()[1].is_ascii_alphabetic() || s.ends_with('_'))
    };
    let first = dict.iter().find(|s| !is_tag(s))?;
    let dt = first.len() > 10;
    let mut tags = 0;
    let mut when = Vec::with_capacity(dict.len());
    for s in dict {
        if is_tag(s) {
            tags += 1;
            when.push(SYSMIS);
            continue;
        }
        let days = iso_days(s.get(..10)?)? + SPSS_TO_UNIX_DAYS;
        when.push(match (dt, s.len()) {
            (false, 10) => days as f64 * 86_400.0,
            (true, l) if l > 10 => {
                let t = s[10..].strip_prefix('T')?;
                (days * 86_400_000 + clock_ms(t)?) as f64 / 1000.0
            }
            _ => return None,
        });
    }
    Some((dt, when, tags))
}

/// SPSS's print/write format: type, width, decimals.
fn format_of(p: &Plan) -> i32 {
    let (ty, w, d) = match p.out {
        Out::Num(d) => (5, (d + 10).min(40), d.min(16)),
        Out::Str(w) => (1, w.min(32_767) as u32, 0),
        Out::When(false) => (20, 11, 0),
        Out::When(true) => (22, 23, 3),
    };
    (ty << 16) | ((w.min(255) as i32) << 8) | d as i32
}

/// Writes the header (`label`: the file label, the dataset's title, cut
/// to 64 bytes) and the dictionary.
fn dictionary(
    w: &mut impl Write,
    plans: &[Plan],
    slots: usize,
    rows: u64,
    label: &str,
) -> std::io::Result<()> {
    let i32b = |x: i32| x.to_le_bytes();
    let mut h = Vec::with_capacity(176);
    h.extend_from_slice(b"$FL2");
    h.extend_from_slice(&pad(b"@(#) SPSS DATA FILE microtab", 60, b' '));
    h.extend_from_slice(&i32b(2));
    h.extend_from_slice(&i32b(slots as i32));
    h.extend_from_slice(&i32b(1));
    h.extend_from_slice(&i32b(0));
    h.extend_from_slice(&i32b(i32::try_from(rows).unwrap_or(-1)));
    h.extend_from_slice(&BIAS.to_le_bytes());
    let (date, time) = now();
    h.extend_from_slice(date.as_bytes());
    h.extend_from_slice(time.as_bytes());
    h.extend_from_slice(&pad(cut_bytes(label, 64), 64, b' '));
    h.extend_from_slice(&[0; 3]);
    w.write_all(&h)?;
    // Variable records: a segment's first record, then continuations.
    let mut very_long = Vec::new();
    for p in plans {
        let widths = match p.out {
            Out::Str(wd) => segments(wd),
            _ => vec![0],
        };
        if widths.len() > 1 {
            very_long.push(format!(
                "{}={:05}\0\t",
                p.short,
                match p.out {
                    Out::Str(wd) => wd,
                    _ => 0,
                }
            ));
        }
        for (si, &sw) in widths.iter().enumerate() {
            let short = if si == 0 {
                p.short.clone()
            } else {
                p.seg_shorts[si - 1].clone()
            };
            let fmt = if sw == 0 {
                format_of(p)
            } else {
                (1 << 16) | ((sw.min(255) as i32) << 8)
            };
            w.write_all(&i32b(2))?;
            w.write_all(&i32b(sw as i32))?;
            let label = p.var.label.as_deref().filter(|_| si == 0).unwrap_or("");
            w.write_all(&i32b(i32::from(!label.is_empty())))?;
            let (n_missing, vals): (i32, Vec<[u8; 8]>) = if si > 0 {
                (0, Vec::new())
            } else if let Some((lo, hi)) = p.range {
                (-2, vec![lo.to_le_bytes(), hi.to_le_bytes()])
            } else if !p.missing_text.is_empty() {
                let v: Vec<[u8; 8]> = p
                    .missing_text
                    .iter()
                    .map(|t| pad(t.as_bytes(), 8, b' ').try_into().expect("8 bytes"))
                    .collect();
                (v.len() as i32, v)
            } else {
                (
                    p.missing.len() as i32,
                    p.missing.iter().map(|x| x.to_le_bytes()).collect(),
                )
            };
            w.write_all(&i32b(n_missing))?;
            w.write_all(&i32b(fmt))?;
            w.write_all(&i32b(fmt))?;
            w.write_all(&pad(short.as_bytes(), 8, b' '))?;
            if !label.is_empty() {
                let b = cut_bytes(label, 255);
                w.write_all(&i32b(b.len() as i32))?;
                w.write_all(&pad(b, b.len().div_ceil(4) * 4, b' '))?;
            }
            for v in vals {
                w.write_all(&v)?;
            }
            // Continuation records for the segment's other slots.
            for _ in 1..sw.max(1).div_ceil(8) {
                w.write_all(&i32b(2))?;
                w.write_all(&i32b(-1))?;
                w.write_all(&[0; 16])?;
                w.write_all(&pad(b"", 8, b' '))?;
            }
        }
    }
    // Value labels of numbers and of texts of at most 8 bytes (types 3
    // and 4), each variable its own set.
    for p in plans {
        let labels: Vec<([u8; 8], &String)> = match p.out {
            Out::Str(wd) if wd <= 8 => p
                .text_labels
                .iter()
                .map(|(v, l)| (pad(v.as_bytes(), 8, b' ').try_into().expect("8 bytes"), l))
                .collect(),
            Out::Str(_) => continue,
            _ => p.labels.iter().map(|(x, l)| (x.to_le_bytes(), l)).collect(),
        };
        if labels.is_empty() {
            continue;
        }
        w.write_all(&i32b(3))?;
        w.write_all(&i32b(labels.len() as i32))?;
        for (x, l) in labels {
            w.write_all(&x)?;
            let b = cut_bytes(l, 120);
            let mut e = vec![b.len() as u8];
            e.extend_from_slice(b);
            let n = e.len().div_ceil(8) * 8;
            w.write_all(&pad(&e, n, b' '))?;
        }
        w.write_all(&i32b(4))?;
        w.write_all(&i32b(1))?;
        w.write_all(&i32b(p.slot as i32 + 1))?;
    }
    let ext = |w: &mut dyn Write, sub: i32, size: i32, data: &[u8]| -> std::io::Result<()> {
        w.write_all(&i32b(7))?;
        w.write_all(&i32b(sub))?;
        w.write_all(&i32b(size))?;
        w.write_all(&i32b((data.len() / size as usize) as i32))?;
        w.write_all(data)
    };
    // Machine integer and float info; the encoding.
    let mut ints = Vec::new();
    for x in [1, 0, 0, -1, 1, 1, 2, 65001] {
        ints.extend_from_slice(&i32b(x));
    }
    ext(w, 3, 4, &ints)?;
    let mut fl = Vec::new();
    for x in [SYSMIS, f64::MAX, f64::from_bits(0xFFEF_FFFF_FFFF_FFFE)] {
        fl.extend_from_slice(&x.to_le_bytes());
    }
    ext(w, 4, 8, &fl)?;
    // Long names, very long strings.
    let long: Vec<String> = plans
        .iter()
        .map(|p| format!("{}={}", p.short, p.name))
        .collect();
    ext(w, 13, 1, long.join("\t").as_bytes())?;
    if !very_long.is_empty() {
        ext(w, 14, 1, very_long.concat().as_bytes())?;
    }
    // Value labels of texts (subtype 21).
    let mut sl = Vec::new();
    for p in plans.iter().filter(|p| !p.text_labels.is_empty()) {
        let Out::Str(wd) = p.out else { continue };
        if wd <= 8 {
            continue;
        }
        sl.extend_from_slice(&i32b(p.name.len() as i32));
        sl.extend_from_slice(p.name.as_bytes());
        sl.extend_from_slice(&i32b(wd as i32));
        sl.extend_from_slice(&i32b(p.text_labels.len() as i32));
        for (v, l) in &p.text_labels {
            sl.extend_from_slice(&i32b(wd as i32));
            sl.extend_from_slice(&pad(v.as_bytes(), wd, b' '));
            sl.extend_from_slice(&i32b(l.len() as i32));
            sl.extend_from_slice(l.as_bytes());
        }
    }
    if !sl.is_empty() {
        ext(w, 21, 1, &sl)?;
    }
    ext(w, 20, 1, b"UTF-8")?;
    w.write_all(&i32b(999))?;
    w.write_all(&i32b(0))
}

/// The first bytes of `s`, at most `n`, cut at a character.
fn cut_bytes(s: &str, n: usize) -> &[u8] {
    let mut e = s.len().min(n);
    while !s.is_char_boundary(e) {
        e -= 1;
    }
    &s.as_bytes()[..e]
}

fn pad(b: &[u8], n: usize, with: u8) -> Vec<u8> {
    let mut v = b[..b.len().min(n)].to_vec();
    v.resize(n, with);
    v
}

/// Today as SPSS writes it: `27 Nov 26`, `14:05:00`.
fn now() -> (String, String) {
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs() as i64);
    let iso = crate::core::dates::iso_date(secs.div_euclid(86_400));
    const MONTHS: [&str; 12] = [
        "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
    ];
    let mon = MONTHS[iso[5..7].parse::<usize>().unwrap_or(1).clamp(1, 12) - 1];
    let t = secs.rem_euclid(86_400);
    (
        format!("{} {mon} {}", &iso[8..10], &iso[2..4]),
        format!("{:02}:{:02}:{:02}", t / 3600, t / 60 % 60, t % 60),
    )
}

/// Writes the cases, bytecode-compressed.
// The macro casts every stored type to i64 or f64, those included.
#[allow(clippy::unnecessary_cast)]
fn data(
    ds: &Dataset,
    plans: &[Plan],
    slots: usize,
    selection: Option<(&[u64], u64)>,
    w: &mut impl Write,
) -> std::io::Result<std::result::Result<(), Error>> {
    let rows = ds.rows() as usize;
    let cols = match plans
        .iter()
        .map(|p| ds.column(&p.var.name))
        .collect::<std::result::Result<Vec<_>, _>>()
    {
        Ok(c) => c,
        Err(e) => return Ok(Err(e.into())),
    };
    // Which slots hold numbers (the rest text).
    let mut numeric = vec![false; slots];
    for p in plans {
        if !matches!(p.out, Out::Str(_)) {
            numeric[p.slot] = true;
        }
    }
    let mut bufs: Vec<Vec<u64>> = vec![Vec::new(); plans.len()];
    let mut raw: Vec<u8> = Vec::new();
    let mut comp = Compressor::default();
    for (start, n, keep) in blocks(rows, selection) {
        raw.clear();
        raw.resize(keep.len() * slots * 8, b' ');
        let case = slots * 8;
        for ((p, col), buf) in plans.iter().zip(&cols).zip(bufs.iter_mut()) {
            let view = match col.rows_view(start, n, buf) {
                Ok(v) => v,
                Err(e) => return Ok(Err(e.into())),
            };
            let null = p.var.null_code.filter(|_| p.var.nulls > 0);
            let at = p.slot * 8;
            match_column!(view, |d| ints => {
                for (j, &i) in keep.iter().enumerate() {
                    let x = d[i] as i64;
                    let o = j * case + at;
                    match p.out {
                        Out::Num(_) => {
                            let f = if Some(x) == null { SYSMIS } else { x as f64 / p.var.scale() };
                            raw[o..o + 8].copy_from_slice(&f.to_le_bytes());
                        }
                        Out::When(_) => {
                            let f = if Some(x) == null { SYSMIS } else { p.when[x as usize] };
                            raw[o..o + 8].copy_from_slice(&f.to_le_bytes());
                        }
                        Out::Str(wd) => {
                            if Some(x) != null {
                                if let Some(s) = p.dict.get(x as usize) {
                                    put_text(&mut raw[o..], s.as_bytes(), wd);
                                }
                            }
                        }
                    }
                }
            }, floats => {
                for (j, &i) in keep.iter().enumerate() {
                    let x = d[i] as f64;
                    let o = j * case + at;
                    let f = if x.is_nan() { SYSMIS } else { x };
                    raw[o..o + 8].copy_from_slice(&f.to_le_bytes());
                }
            });
        }
        for (k, s) in raw.chunks_exact(8).enumerate() {
            comp.push(s, numeric[k % slots], w)?;
        }
    }
    comp.finish(w)?;
    Ok(Ok(()))
}

/// Text of a string of `wd` bytes laid into its segments (very long
/// strings: 252 bytes of text in each 255-byte segment of 256 bytes).
fn put_text(case: &mut [u8], s: &[u8], wd: usize) {
    let mut at = 0;
    for (k, seg) in segments(wd).iter().enumerate() {
        let take = if wd <= 255 { seg } else { &252 };
        let from = (k * 252).min(s.len());
        let to = (from + take).min(s.len());
        case[at..at + (to - from)].copy_from_slice(&s[from..to]);
        at += seg.div_ceil(8) * 8;
    }
}

/// SPSS's bytecode: groups of 8 command bytes, each followed by the
/// 8-byte slots its codes name raw (253).
#[derive(Default)]
struct Compressor {
    codes: Vec<u8>,
    raw: Vec<u8>,
}

impl Compressor {
    fn push(&mut self, slot: &[u8], numeric: bool, w: &mut impl Write) -> std::io::Result<()> {
        let code = if numeric {
            let x = f64::from_le_bytes(slot.try_into().expect("8 bytes"));
            if x == SYSMIS {
                255
            } else if x.fract() == 0.0
                && (1.0 - BIAS..=251.0 - BIAS).contains(&x)
                && x.to_bits() != (-0.0f64).to_bits()
            {
                (x + BIAS) as u8
            } else {
                253
            }
        } else if slot == b"        " {
            254
        } else {
            253
        };
        if code == 253 {
            self.raw.extend_from_slice(slot);
        }
        self.codes.push(code);
        if self.codes.len() == 8 {
            self.flush(w)?;
        }
        Ok(())
    }

    fn flush(&mut self, w: &mut impl Write) -> std::io::Result<()> {
        if self.codes.is_empty() {
            return Ok(());
        }
        self.codes.resize(8, 0);
        w.write_all(&self.codes)?;
        w.write_all(&self.raw)?;
        self.codes.clear();
        self.raw.clear();
        Ok(())
    }

    fn finish(&mut self, w: &mut impl Write) -> std::io::Result<()> {
        self.flush(w)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn segments_of_very_long_strings() {
        assert_eq!(segments(3), [3]);
        assert_eq!(segments(255), [255]);
        assert_eq!(segments(256), [255, 4]);
        assert_eq!(segments(600), [255, 255, 96]);
    }

    #[test]
    fn names_long_and_short() {
        let v = |n: &str| Variable::new(n, Kind::Int, microtab_store::PhysType::I32);
        let mut notes = Vec::new();
        let got = spss_names(
            &[v("AGE"), v("2nd"), v("a b"), v("a_b"), v("with")],
            &mut notes,
        );
        assert_eq!(got, ["AGE", "v2nd", "a_b_2", "a_b", "vwith"]);
        let mut taken = HashSet::new();
        assert_eq!(short_name("household_income", &mut taken), "HOUSEHOL");
        assert_eq!(short_name("household_size", &mut taken), "HOUSEHO1");
    }

    #[test]
    fn bytecode() {
        let mut c = Compressor::default();
        let mut out = Vec::new();
        c.push(&1.0f64.to_le_bytes(), true, &mut out).unwrap();
        c.push(&0.5f64.to_le_bytes(), true, &mut out).unwrap();
        c.push(&SYSMIS.to_le_bytes(), true, &mut out).unwrap();
        c.push(b"        ", false, &mut out).unwrap();
        c.push(b"ab      ", false, &mut out).unwrap();
        c.finish(&mut out).unwrap();
        assert_eq!(&out[..8], &[101, 253, 255, 254, 253, 0, 0, 0]);
        assert_eq!(&out[8..16], &0.5f64.to_le_bytes());
        assert_eq!(&out[16..24], b"ab      ");
    }
}
