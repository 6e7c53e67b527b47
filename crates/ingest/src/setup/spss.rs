//! SPSS syntax (`.sps`): `DATA LIST`, `GET DATA /TYPE=TXT`, `VARIABLE
//! LABELS`, `VALUE LABELS`, `ADD VALUE LABELS`, `MISSING VALUES`.

use super::desc::{
    divides, expand, few, shared_columns, style_of, type_codes, Desc, Field, Labelled, RecordId,
    CLEAR,
};
use super::lex::{strip_comments, tokens, Cursor, Tok};
use crate::ddi::NumberStyle;

/// Commands that start a new command when a line begins with them, even
/// if the one before lacks its full stop.
const COMMANDS: &[&str] = &[
    "data list",
    "file type",
    "record type",
    "end file type",
    "get data",
    "variable labels",
    "value labels",
    "add value labels",
    "missing values",
    "formats",
    "execute",
    "save",
    "file handle",
    "variable level",
    "compute",
    "recode",
];

/// Commands that change the data: noted, not run.
const CHANGES: &[&str] = &[
    "compute",
    "recode",
    "if",
    "select",
    "do",
    "filter",
    "sample",
    "autorecode",
    "string",
    "numeric",
    "temporary",
    "split",
    "aggregate",
    "sort",
    "delete",
    "rename",
];

/// The commands of `text` (comments dropped), each with its first line.
fn commands(text: &str) -> Vec<(String, usize)> {
    let text = strip_comments(text, false);
    let mut out = Vec::new();
    let mut cur = String::new();
    let mut first = 0;
    let mut quote: Option<char> = None;
    for (n, line) in text.lines().enumerate() {
        let lower = line.to_ascii_lowercase();
        let words: Vec<&str> = lower
            .split(|c: char| c.is_whitespace() || c == '.')
            .filter(|w| !w.is_empty())
            .collect();
        let starts = !line.starts_with([' ', '\t'])
            && COMMANDS.iter().any(|c| {
                let cw: Vec<&str> = c.split(' ').collect();
                words.len() >= cw.len() && words[..cw.len()] == cw[..]
            });
        if (line.trim().is_empty() && quote.is_none()) || (starts && quote.is_none()) {
            if !cur.trim().is_empty() {
                out.push((std::mem::take(&mut cur), first));
            }
            cur.clear();
            if line.trim().is_empty() {
                continue;
            }
        }
        if cur.trim().is_empty() {
            first = n + 1;
            cur.clear();
        }
        quote = None;
        let t = if cur.trim().is_empty() { line } else { &cur };
        let t = t.trim_start().to_ascii_lowercase();
        let comment = t.starts_with('*') || t.starts_with("comment");
        for ch in line.chars().filter(|_| !comment) {
            match quote {
                Some(q) if ch == q => quote = None,
                None if ch == '\'' || ch == '"' => quote = Some(ch),
                _ => {}
            }
        }
        let trimmed = line.trim_end();
        if quote.is_none() && trimmed.ends_with('.') {
            cur.push_str(&trimmed[..trimmed.len() - 1]);
            out.push((std::mem::take(&mut cur), first));
            continue;
        }
        cur.push_str(line);
        cur.push('\n');
    }
    if !cur.trim().is_empty() {
        out.push((cur, first));
    }
    out.retain(|(c, _)| {
        let t = c.trim_start();
        !(t.starts_with('*') || t.to_ascii_lowercase().starts_with("comment"))
    });
    out
}

/// Whether `t` abbreviates `full` (SPSS takes the first three letters).
fn abbrev(t: &str, full: &str) -> bool {
    let t = t.to_ascii_lowercase();
    t.len() >= 3.min(full.len()) && full.starts_with(&t)
}

pub(crate) fn read(text: &str, file: usize) -> Result<Desc, String> {
    let mut d = Desc {
        lines: 1,
        ..Desc::default()
    };
    // Within FILE TYPE … END FILE TYPE: the record type the next DATA
    // LIST reads (none: RECORD TYPE OTHER, whose records are skipped).
    let mut types: Option<String> = None;
    for (cmd, line) in commands(text) {
        let mut c = Cursor::new(tokens(&cmd, line)?, line);
        let w: Vec<String> =
            c.t.iter()
                .take(3)
                .map(|t| t.word().unwrap_or("").to_ascii_lowercase())
                .collect();
        let w = |k: usize| w.get(k).map(String::as_str).unwrap_or("");
        if abbrev(w(0), "data") && abbrev(w(1), "list") {
            c.i = 2;
            let before = d.fields.len();
            data_list(&mut c, &mut d, file)?;
            if d.record_id.is_some() {
                let read: Vec<Field> = d.fields.drain(before..).collect();
                match &types {
                    None if d.record_types.is_empty() => {
                        return Err(format!(
                            "line {line}: DATA LIST within FILE TYPE comes before any RECORD TYPE"
                        ))
                    }
                    None => d.notes.push(format!(
                        "line {line}: the DATA LIST of RECORD TYPE OTHER is not read: records of types the setup does not name are skipped"
                    )),
                    Some(t) => d.fields.extend(read.into_iter().map(|mut f| {
                        f.rectype = Some(t.clone());
                        f
                    })),
                }
            }
        } else if w(0) == "file" && w(1) == "type" {
            c.i = 2;
            file_type(&mut c, &mut d, file)?;
        } else if abbrev(w(0), "record") && w(1) == "type" {
            c.i = 2;
            if d.record_id.is_none() {
                return Err(format!(
                    "line {line}: RECORD TYPE outside FILE TYPE … END FILE TYPE"
                ));
            }
            if c.peek().is_some_and(|t| t.is("other")) {
                types = None;
                continue;
            }
            let mut ts = Vec::new();
            while let Some(t) = c.next() {
                match &t.tok {
                    Tok::Str(v) | Tok::Num(v) => ts.push(v.trim().to_string()),
                    Tok::Sym(',') => {}
                    Tok::Word(w) if w.eq_ignore_ascii_case("thru") => {
                        return Err(format!(
                            "line {line}: RECORD TYPE with a range of types: list each type"
                        ))
                    }
                    _ => break,
                }
            }
            if ts.is_empty() {
                return Err(c.err("a record type (RECORD TYPE 'H' or RECORD TYPE 1)"));
            }
            // Several codes of one type: one layout, named by the first.
            type_codes(&mut d, &ts);
            types = Some(ts[0].clone());
        } else if w(0) == "end" && w(1) == "file" && w(2) == "type" {
            types = None;
        } else if w(0) == "get" && w(1) == "data" {
            c.i = 2;
            get_data(&mut c, &mut d, file)?;
        } else if abbrev(w(0), "variable") && abbrev(w(1), "labels") {
            c.i = 2;
            var_labels(&mut c, &mut d)?;
        } else if abbrev(w(0), "value") && abbrev(w(1), "labels") {
            c.i = 2;
            value_labels(&mut c, &mut d, true)?;
        } else if w(0) == "add" && abbrev(w(1), "value") && abbrev(w(2), "labels") {
            c.i = 3;
            value_labels(&mut c, &mut d, false)?;
        } else if abbrev(w(0), "missing") && abbrev(w(1), "values") {
            c.i = 2;
            missing_values(&mut c, &mut d)?;
        } else if w(0) == "weight" {
            d.notes.push(format!(
                "line {line}: WEIGHT names a weight variable (set it with a design to use it)"
            ));
        } else if w(0) == "compute" && divides(&c.t, &mut d) {
        } else if CHANGES.contains(&w(0)) {
            d.notes.push(format!(
                "line {line}: {} is not run: the setup's layout, labels and missing values are read, commands that change values are not",
                cmd.split_whitespace().take(4).collect::<Vec<_>>().join(" ")
            ));
        }
    }
    Ok(d)
}

/// `FILE TYPE MIXED|NESTED /FILE=… /RECORD=[name] a-b [(A)]`: a file of
/// records of several types, the type in columns `a`-`b`. (Either way the
/// import reads it as NESTED does: a row for each record of the lowest
/// type, with the household's variables.)
fn file_type(c: &mut Cursor, d: &mut Desc, file: usize) -> Result<(), String> {
    let line = c.at();
    let kind = c.next().and_then(|t| t.word().map(str::to_ascii_lowercase));
    match kind.as_deref() {
        Some("mixed" | "nested") => {}
        Some("grouped") => {
            return Err(format!(
                "line {line}: FILE TYPE GROUPED (a case's records of several types, in any order) is not supported: read each record type with its own DATA LIST"
            ))
        }
        _ => return Err(c.err("MIXED, NESTED or GROUPED after FILE TYPE")),
    }
    let mut id = RecordId {
        at: (file, line),
        ..RecordId::default()
    };
    while !c.done() {
        // Subcommands: `/RECORD=…`, the first one's slash optional.
        let bare = c.peek().is_some_and(|t| t.is("file") || t.is("record"))
            && c.peek_at(1).is_some_and(|t| t.sym('='));
        if !bare && !c.eat('/') {
            c.i += 1;
            continue;
        }
        let sub = c.next().and_then(|t| t.word().map(str::to_ascii_lowercase));
        c.eat('=');
        match sub.as_deref() {
            Some("file") => {
                if let Some(Tok::Str(s) | Tok::Word(s)) = c.next().map(|t| t.tok) {
                    d.data_file = Some(s);
                }
            }
            Some("record") => {
                if let Some(n) = c.peek().and_then(|t| t.word()).map(str::to_string) {
                    c.i += 1;
                    id.name = Some(n);
                }
                let a = c
                    .next()
                    .and_then(|t| t.int())
                    .ok_or_else(|| c.err("the columns of the record type after /RECORD="))?;
                let b = if c.eat('-') {
                    c.next()
                        .and_then(|t| t.int())
                        .ok_or_else(|| c.err("a column number after -"))?
                } else {
                    a
                };
                if a == 0 || b < a {
                    return Err(format!(
                        "line {line}: /RECORD columns {a}-{b} are not a range of columns (numbered from 1)"
                    ));
                }
                id.cols = Some((a, b));
                // `(A)`: the type is text; else a number (`01` is 1).
                if c.peek().is_some_and(|t| t.sym('(')) {
                    c.i += 1;
                    id.text = Some(c.next().is_some_and(|t| t.is("a")));
                    c.eat(')');
                } else {
                    id.text = Some(false);
                }
            }
            _ => {}
        }
    }
    if id.cols.is_none() {
        return Err(format!(
            "line {line}: FILE TYPE without /RECORD= (the columns of the record type)"
        ));
    }
    d.record_id = Some(id);
    // WILD=NOWARN, SPSS's default: records of other types are skipped.
    d.skip_unlisted = true;
    Ok(())
}

/// The format in parentheses after a field: text, decimals.
fn paren_format(
    c: &mut Cursor,
    notes: &mut Vec<String>,
    names: &[String],
) -> Result<(bool, u32, NumberStyle), String> {
    let mut text = false;
    let mut dec = 0;
    let mut style = NumberStyle::Plain;
    let line = c.at();
    let mut words = Vec::new();
    while let Some(t) = c.next() {
        if t.sym(')') {
            break;
        }
        words.push(t);
    }
    match words.first().map(|t| t.tok.clone()) {
        None => {}
        Some(Tok::Num(n)) => {
            dec = n
                .parse()
                .map_err(|_| format!("line {line}: ({n}) is not a number of decimals"))?
        }
        Some(Tok::Word(w)) => {
            let f = w.to_ascii_uppercase();
            let letters: String = f.chars().take_while(|c| c.is_ascii_alphabetic()).collect();
            match letters.as_str() {
                "A" | "AHEX" => text = true,
                "Z" => {
                    return Err(format!(
                        "line {line}: {} read with format {w} (zoned decimal, the sign overpunched): not supported",
                        few(names)
                    ))
                }
                "F" | "N" | "COMMA" | "DOT" | "E" | "PCT" | "DOLLAR" => {
                    style = style_of(&letters);
                    // `(F,2)` or `(F8.2)`: its decimals.
                    if let Some(p) = f.find('.') {
                        dec = f[p + 1..].parse().unwrap_or(0);
                    } else if let Some(Tok::Num(n)) = words.get(2).map(|t| t.tok.clone()) {
                        dec = n.parse().unwrap_or(0);
                    }
                }
                _ => {
                    text = true;
                    notes.push(format!(
                        "line {line}: {} read with format {w}: kept as text as written",
                        few(names)
                    ));
                }
            }
        }
        Some(_) => return Err(format!("line {line}: a format in parentheses was expected")),
    }
    Ok((text, dec, style))
}

fn data_list(c: &mut Cursor, d: &mut Desc, file: usize) -> Result<(), String> {
    let mut records = None;
    // Options up to the first slash.
    while let Some(t) = c.peek().cloned() {
        if t.sym('/') {
            break;
        }
        c.i += 1;
        if t.is("file") {
            c.eat('=');
            match c.next().map(|t| t.tok) {
                Some(Tok::Str(s)) | Some(Tok::Word(s)) => d.data_file = Some(s),
                _ => return Err(c.err("a file name after FILE=")),
            }
        } else if t.is("records") {
            c.eat('=');
            d.lines = c
                .next()
                .and_then(|t| t.int())
                .ok_or_else(|| c.err("a number after RECORDS="))?;
            records = Some((d.lines, t.line));
        } else if t.is("free") || t.is("list") {
            return Err(format!(
                "line {}: DATA LIST {}: values separated by blanks without a header line of names; microtab reads fixed columns, or delimited text with a header",
                t.line,
                t.show().to_uppercase()
            ));
        } else if t.is("skip") {
            c.eat('=');
            let n = c.next().and_then(|t| t.int()).unwrap_or(0);
            if n > 0 {
                return Err(format!("line {}: SKIP={n}: lines before the data are not skipped by a fixed-width import (remove them first)", t.line));
            }
        } else if t.is("encoding") || t.is("end") {
            c.eat('=');
            c.next();
        }
    }
    let before = d.fields.len();
    fixed_specs(c, d, file, false)?;
    // As SPSS: a field on a line past RECORDS= is a mistake in one or the
    // other, not a longer record.
    if let Some((n, line)) = records {
        if let Some(f) = d.fields[before..].iter().find(|f| f.record_line > n) {
            return Err(format!(
                "line {}: {} is on line {} of a record, but RECORDS={n} (line {line}) gives records of {n} line{}",
                f.at.1,
                f.name,
                f.record_line,
                if n == 1 { "" } else { "s" }
            ));
        }
    }
    Ok(())
}

/// Fixed-column specifications: `[/n] names start[-end] [(fmt)]` or
/// `names (fmt list)`; with `zero`, columns count from 0 (GET DATA).
fn fixed_specs(c: &mut Cursor, d: &mut Desc, file: usize, zero: bool) -> Result<(), String> {
    let mut rec = 1usize;
    let mut pos = vec![1usize; 2];
    let mut started = false;
    while !c.done() {
        if c.eat('/') {
            match c.peek().and_then(|t| t.int()) {
                Some(n) => {
                    c.i += 1;
                    if n == 0 || n > 10_000 {
                        return Err(format!(
                            "line {}: /{n}: a record has lines 1 to at most 10000",
                            c.at()
                        ));
                    }
                    rec = n;
                }
                None if started => rec += 1,
                None => {}
            }
            started = true;
            if pos.len() <= rec {
                pos.resize(rec + 1, 1);
            }
            d.lines = d.lines.max(rec);
            continue;
        }
        started = true;
        let line = c.at();
        let names = c.words();
        if names.is_empty() {
            return Err(c.err("a variable name was expected"));
        }
        let names = expand_to(&names);
        if let Some(a) = c.peek().and_then(|t| t.int()) {
            c.i += 1;
            let b = if c.eat('-') {
                c.next()
                    .and_then(|t| t.int())
                    .ok_or_else(|| c.err("a column number after -"))?
            } else {
                a
            };
            let (a, b) = if zero {
                (a.saturating_add(1), b.saturating_add(1))
            } else {
                (a, b)
            };
            let (text, dec) = if c.eat('(') {
                let (text, dec, style) = paren_format(c, &mut d.notes, &names)?;
                if style != NumberStyle::Plain {
                    d.styles.extend(names.iter().map(|n| (n.clone(), style)));
                }
                (text, dec)
            } else if zero {
                // GET DATA: a format word follows; its decimals are not
                // implied (as PSPP reads it: `F8.2` reads 12345 as 12345).
                let w = c
                    .next()
                    .and_then(|t| t.word().map(str::to_string))
                    .unwrap_or_default();
                let style = style_of(&w);
                if style != NumberStyle::Plain {
                    d.styles.extend(names.iter().map(|n| (n.clone(), style)));
                }
                (format_word(&w).0, 0)
            } else {
                (false, 0)
            };
            shared_columns(d, &names, (a, b), rec, (text, dec), (file, line))?;
            if pos.len() <= rec {
                pos.resize(rec + 1, 1);
            }
            pos[rec] = b + 1;
        } else if c.eat('(') {
            // FORTRAN-like: (F8.2, A10, 2F3, 1X, T20), applied in order
            // to the names, again from its start while names are left.
            enum It {
                F(bool, u32, usize, NumberStyle),
                Skip(usize),
                Tab(usize),
            }
            let mut items: Vec<It> = Vec::new();
            let mut count = 1usize;
            while let Some(t) = c.next() {
                match &t.tok {
                    Tok::Sym(')') => break,
                    Tok::Sym(',') => {}
                    Tok::Num(n) => {
                        count = n
                            .parse::<usize>()
                            .map_err(|_| format!("line {}: {n} is not a repeat count", t.line))?
                            .min(names.len().max(1))
                    }
                    Tok::Word(w) => {
                        let f = w.to_ascii_uppercase();
                        if f == "X" {
                            items.push(It::Skip(count));
                        } else if let Some(col) =
                            f.strip_prefix('T').and_then(|x| x.parse::<usize>().ok())
                        {
                            items.push(It::Tab(col));
                        } else {
                            let letters: String =
                                f.chars().take_while(|c| c.is_ascii_alphabetic()).collect();
                            let rest = &f[letters.len()..];
                            let (w, dec) = match rest.split_once('.') {
                                Some((w, p)) => (
                                    w.parse::<usize>().unwrap_or(0),
                                    p.parse::<u32>().unwrap_or(0),
                                ),
                                None => (rest.parse::<usize>().unwrap_or(0), 0),
                            };
                            if w == 0 {
                                return Err(format!("line {}: format {f} gives no width", t.line));
                            }
                            let (text, _) = format_word(&f);
                            for _ in 0..count {
                                items.push(It::F(text, dec, w, style_of(&f)));
                            }
                        }
                        count = 1;
                    }
                    _ => return Err(format!("line {}: {} in a format list", t.line, t.show())),
                }
            }
            if !items.iter().any(|i| matches!(i, It::F(..))) {
                return Err(format!(
                    "line {line}: the format list of {} gives no widths",
                    few(&names)
                ));
            }
            let mut left = names.iter();
            let mut next = left.next();
            'list: loop {
                for it in &items {
                    match *it {
                        It::Skip(n) => pos[rec] = pos[rec].saturating_add(n),
                        It::Tab(col) => pos[rec] = col,
                        It::F(text, dec, w, style) => {
                            let Some(n) = next else { break 'list };
                            let a = pos[rec];
                            if style != NumberStyle::Plain {
                                d.styles.push((n.clone(), style));
                            }
                            d.fields.push(Field {
                                name: n.clone(),
                                rectype: None,
                                record_line: rec,
                                start: a,
                                end: a.saturating_add(w - 1),
                                divide: 0,
                                decimals: dec,
                                text,
                                at: (file, line),
                            });
                            pos[rec] = a.saturating_add(w);
                            next = left.next();
                        }
                    }
                }
                if next.is_none() {
                    break;
                }
            }
        } else {
            return Err(c.err(&format!(
                "columns (start-end) or a format after {}",
                few(&names)
            )));
        }
    }
    Ok(())
}

/// The marker of a statement that replaces what came before.
fn cleared() -> Labelled {
    Labelled {
        lo: CLEAR.to_string(),
        hi: None,
        label: String::new(),
    }
}

/// SPSS's `A TO D` in a list of new names: `V1 TO V3` → V1 V2 V3.
fn expand_to(names: &[String]) -> Vec<String> {
    let mut out = Vec::new();
    let mut i = 0;
    while i < names.len() {
        if i + 2 < names.len() && names[i + 1].eq_ignore_ascii_case("to") {
            let (a, b) = (&names[i], &names[i + 2]);
            let split = |s: &str| {
                let p = s.trim_end_matches(|c: char| c.is_ascii_digit()).len();
                (s[..p].to_string(), s[p..].to_string())
            };
            let ((pa, na), (pb, nb)) = (split(a), split(b));
            if let (true, Ok(x), Ok(y)) = (
                pa.eq_ignore_ascii_case(&pb),
                na.parse::<usize>(),
                nb.parse::<usize>(),
            ) {
                if x <= y && y - x < 100_000 {
                    let w = na.len();
                    out.extend((x..=y).map(|k| format!("{pa}{k:0w$}")));
                    i += 3;
                    continue;
                }
            }
        }
        out.push(names[i].clone());
        i += 1;
    }
    out
}

/// An SPSS format word (`A5`, `F8.2`, `DATE11`): text, decimals.
fn format_word(w: &str) -> (bool, u32) {
    let f = w.to_ascii_uppercase();
    let letters: String = f.chars().take_while(|c| c.is_ascii_alphabetic()).collect();
    let dec = f
        .split_once('.')
        .and_then(|(_, p)| p.parse().ok())
        .unwrap_or(0);
    match letters.as_str() {
        "F" | "N" | "COMMA" | "DOT" | "E" | "Z" | "PCT" | "DOLLAR" | "" => (false, dec),
        _ => (true, 0),
    }
}

fn get_data(c: &mut Cursor, d: &mut Desc, file: usize) -> Result<(), String> {
    let mut delimited = false;
    let mut delim = b',';
    let mut first = 1usize;
    while !c.done() {
        if !c.eat('/') {
            c.i += 1;
            continue;
        }
        let Some(sub) = c.next() else { break };
        c.eat('=');
        if sub.is("file") {
            if let Some(Tok::Str(s)) | Some(Tok::Word(s)) = c.next().map(|t| t.tok) {
                d.data_file = Some(s);
            }
        } else if sub.is("type") {
            let t = c.next().map(|t| t.show()).unwrap_or_default();
            if !t.eq_ignore_ascii_case("txt") {
                return Err(format!(
                    "line {}: GET DATA /TYPE={t}: only text data (TXT) are described by a setup",
                    sub.line
                ));
            }
        } else if sub.is("arrangement") {
            delimited = c.next().is_some_and(|t| t.is("delimited"));
        } else if sub.is("firstcase") {
            first = c.next().and_then(|t| t.int()).unwrap_or(1);
        } else if sub.is("delimiters") {
            if let Some(Tok::Str(s)) = c.next().map(|t| t.tok) {
                let s = s.replace("\\t", "\t");
                delim = s.bytes().next().unwrap_or(b',');
            }
        } else if sub.is("variables") {
            if delimited {
                while let Some(t) = c.next() {
                    let Some(name) = t.word().map(str::to_string) else {
                        return Err(format!(
                            "line {}: a variable name was expected, found {}",
                            t.line,
                            t.show()
                        ));
                    };
                    let fmt = c
                        .next()
                        .and_then(|t| t.word().map(str::to_string))
                        .ok_or_else(|| c.err(&format!("a format after {name}")))?;
                    let (text, _) = format_word(&fmt);
                    d.fields.push(Field {
                        name,
                        rectype: None,
                        record_line: 1,
                        start: 1,
                        divide: 0,
                        end: 1,
                        decimals: 0,
                        text,
                        at: (file, t.line),
                    });
                }
            } else {
                if first > 1 {
                    return Err(format!("line {}: /FIRSTCASE={first}: lines before the data are not skipped by a fixed-width import (remove them first)", sub.line));
                }
                fixed_specs(c, d, file, true)?;
            }
        }
    }
    if delimited {
        d.delimited = Some(delim);
        d.header = first == 2;
        if first > 2 {
            return Err(format!(
                "line {}: /FIRSTCASE={first}: the data must start on the line after the header",
                c.line
            ));
        }
    }
    Ok(())
}

fn var_labels(c: &mut Cursor, d: &mut Desc) -> Result<(), String> {
    while !c.done() {
        if c.eat('/') {
            continue;
        }
        let names = c.words();
        let label = c.string().ok_or_else(|| c.err("a quoted label"))?;
        for n in expand(&names, &d.fields) {
            d.var_labels.push((n, label.clone()));
        }
    }
    Ok(())
}

/// `VALUE LABELS` (`replace`: each list's labels replace the variables'
/// earlier ones) or `ADD VALUE LABELS`.
fn value_labels(c: &mut Cursor, d: &mut Desc, replace: bool) -> Result<(), String> {
    while !c.done() {
        c.eat('/');
        let names = c.words();
        if names.is_empty() {
            return Err(c.err("variable names were expected"));
        }
        let names = expand(&names, &d.fields);
        if replace {
            for n in &names {
                d.value_labels.push((n.clone(), cleared()));
            }
        }
        while !c.done() && !c.peek().is_some_and(|t| t.sym('/')) {
            let (v, _) = c.value().ok_or_else(|| c.err("a value to label"))?;
            let label = c
                .string()
                .ok_or_else(|| c.err(&format!("a quoted label for {v}")))?;
            for n in &names {
                d.value_labels.push((
                    n.clone(),
                    Labelled {
                        lo: v.clone(),
                        hi: None,
                        label: label.clone(),
                    },
                ));
            }
        }
    }
    Ok(())
}

/// An end of a missing-value range: `LO`, `LOWEST`, `HI`, `HIGHEST`.
fn bound(c: &mut Cursor) -> Option<String> {
    if c.eat_word("lo") || c.eat_word("lowest") {
        return Some("LO".into());
    }
    if c.eat_word("hi") || c.eat_word("highest") {
        return Some("HI".into());
    }
    c.value().map(|v| v.0)
}

fn missing_values(c: &mut Cursor, d: &mut Desc) -> Result<(), String> {
    while !c.done() {
        c.eat('/');
        let names = c.words();
        let names = expand(&names, &d.fields);
        // Each MISSING VALUES replaces the variables' earlier ones; `()`
        // clears them.
        for n in &names {
            d.missing.push((n.clone(), cleared()));
        }
        if !c.eat('(') {
            return Err(c.err("( after the variables of MISSING VALUES"));
        }
        while !c.eat(')') {
            if c.eat(',') {
                continue;
            }
            let lo = bound(c).ok_or_else(|| c.err("a missing value"))?;
            let hi = if c.eat_word("thru") || c.eat_word("through") {
                Some(bound(c).ok_or_else(|| c.err("the end of a range after THRU"))?)
            } else {
                None
            };
            for n in &names {
                d.missing.push((
                    n.clone(),
                    Labelled {
                        lo: lo.clone(),
                        hi: hi.clone(),
                        label: String::new(),
                    },
                ));
            }
        }
    }
    Ok(())
}
