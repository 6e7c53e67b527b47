//! SAS programs (`.sas`): `PROC FORMAT` `VALUE` statements, and a DATA
//! step's `FILENAME`, `INFILE`, `INPUT`, `LABEL`, `FORMAT`, `LENGTH`,
//! `ATTRIB` and `IF V = CODE THEN V = .x` statements.

use super::desc::{divides, record_type, style_of, Desc, Field, Labelled};
use super::lex::{strip_comments, tokens, Cursor, Tok};
use crate::ddi::NumberStyle;
use std::collections::HashMap;

/// The statements of `text`, comments dropped, each with its first line.
fn statements(text: &str) -> Vec<(String, usize)> {
    let text = strip_comments(text, false);
    let mut out = Vec::new();
    let mut cur = String::new();
    let mut line = 1;
    let mut first = 1;
    let mut quote: Option<char> = None;
    for ch in text.chars() {
        if cur.trim().is_empty() && !ch.is_whitespace() {
            first = line;
        }
        if ch == '\n' {
            line += 1;
        }
        match quote {
            Some(q) if ch == q => quote = None,
            None if ch == '\'' || ch == '"' => quote = Some(ch),
            None if ch == ';' => {
                let s = std::mem::take(&mut cur);
                if !s.trim_start().starts_with('*') && !s.trim().is_empty() {
                    out.push((s, first));
                }
                continue;
            }
            _ => {}
        }
        cur.push(ch);
    }
    out
}

/// A format's name as a set key: `$RACE_f.` → `$race_f`.
fn set_key(f: &str) -> String {
    f.trim_end_matches('.').to_lowercase()
}

pub(crate) fn read(text: &str, file: usize) -> Result<Desc, String> {
    let mut d = Desc {
        lines: 1,
        ..Desc::default()
    };
    let mut in_format = false;
    let mut filerefs: HashMap<String, String> = HashMap::new();
    let mut formats: Vec<(String, String, usize)> = Vec::new();
    let mut input_seen = false;
    // DO blocks open: a record type's block (`IF RECTYPE = 'P' THEN DO`)
    // holds its type.
    let mut blocks: Vec<Option<String>> = Vec::new();
    for (s, line) in statements(text) {
        let mut toks = tokens(&s, line)?;
        // `ELSE IF …` as `IF …`; `ELSE DO` as `DO`.
        if toks.first().is_some_and(|t| t.is("else")) && toks.len() > 1 {
            toks.remove(0);
        }
        let mut c = Cursor::new(toks, line);
        // `IF V = 'P' THEN DO` / `THEN INPUT …`, V read by an INPUT
        // before: the records of that type.
        if let Some((var, value, then)) = type_test(&c, &d) {
            record_type(&mut d, &var, &value, (file, c.t[then].line))?;
            if c.t.get(then + 1).is_some_and(|t| t.is("do")) {
                blocks.push(Some(value));
            } else {
                c.i = then + 2;
                let before = d.fields.len();
                input(&mut c, &mut d, file)?;
                for f in &mut d.fields[before..] {
                    f.rectype = Some(value.clone());
                }
            }
            continue;
        }
        let w0 =
            c.t.first()
                .and_then(|t| t.word())
                .unwrap_or("")
                .to_ascii_lowercase();
        c.i = 1;
        match w0.as_str() {
            "proc" => in_format = c.peek().is_some_and(|t| t.is("format")),
            "run" | "quit" | "data" => in_format = false,
            "value" if in_format => value(&mut c, &mut d)?,
            "invalue" | "picture" if in_format => {}
            "filename" => {
                let r = c.next().and_then(|t| t.word().map(str::to_lowercase));
                if let (Some(r), Some(Tok::Str(p))) = (r, c.next().map(|t| t.tok)) {
                    filerefs.insert(r, p);
                }
            }
            "infile" => infile(&mut c, &mut d, &filerefs)?,
            "do" => blocks.push(None),
            "end" => {
                blocks.pop();
            }
            "input" if input_seen && blocks.iter().any(Option::is_some) => {
                let t = blocks.iter().rev().flatten().next().cloned();
                let before = d.fields.len();
                input(&mut c, &mut d, file)?;
                for f in &mut d.fields[before..] {
                    f.rectype = t.clone();
                }
            }
            "input" => {
                if input_seen {
                    return Err(format!(
                        "line {line}: a second INPUT statement (records of several types, read by IF … THEN INPUT): read the file with its DDI codebook, or one record type's INPUT"
                    ));
                }
                input_seen = true;
                input(&mut c, &mut d, file)?;
            }
            "label" => label(&mut c, &mut d)?,
            "format" => format(&mut c, &mut formats),
            "length" => length(&mut c, &mut d),
            "attrib" => attrib(&mut c, &mut d, &mut formats)?,
            "if" => {
                if let Some(t) = c.t.windows(2).find(|w| w[0].is("then") && w[1].is("input")) {
                    return Err(format!(
                        "line {}: a second INPUT statement (records of several types, read by IF … THEN INPUT): read the file with its DDI codebook, or one record type's INPUT",
                        t[1].line
                    ));
                }
                if !missing_if(&c, &mut d) {
                    d.notes.push(format!(
                        "line {line}: IF … is not run: the setup's layout, labels and missing values are read, statements that change values are not"
                    ));
                }
            }
            _ if divides(&c.t, &mut d) => {}
            _ => {
                // An assignment (`X = X / 100;`) changes values.
                if c.t.get(1).is_some_and(|t| t.sym('='))
                    && c.t.first().and_then(|t| t.word()).is_some()
                {
                    d.notes.push(format!(
                        "line {line}: {} is not run: the setup's layout, labels and missing values are read, statements that change values are not",
                        s.split_whitespace().take(5).collect::<Vec<_>>().join(" ")
                    ));
                }
            }
        }
    }
    for (var, f, line) in formats {
        // A format reference: name, then width and decimals (`$RACE_F.`,
        // `AGEF5.`, `8.1`); names cannot end in a digit.
        let k = set_key(&f);
        let name = k
            .trim_end_matches(|c: char| c.is_ascii_digit() || c == '.')
            .to_string();
        // A text format named without its `$` (as IPUMS writes them).
        let name = if !d.sets.contains_key(&name) && d.sets.contains_key(&format!("${name}")) {
            format!("${name}")
        } else {
            name
        };
        if d.sets.contains_key(&name) || !is_builtin(&name) {
            d.uses.push((var, name, line));
        }
    }
    Ok(d)
}

/// `IF V = value THEN DO|INPUT` (or `IF (V = value)`, `EQ`) where `V` is
/// a field an INPUT read before: `V`, the value, and where `THEN` is.
fn type_test(c: &Cursor, d: &Desc) -> Option<(String, String, usize)> {
    let t = &c.t;
    if !t.first()?.is("if") {
        return None;
    }
    let then = t.iter().position(|x| x.is("then"))?;
    if !t.get(then + 1).is_some_and(|x| x.is("do") || x.is("input")) {
        return None;
    }
    let cond: Vec<_> = t[1..then]
        .iter()
        .filter(|x| !x.sym('(') && !x.sym(')'))
        .collect();
    let [v, eq, val] = cond.as_slice() else {
        return None;
    };
    let var = v.word()?;
    if !(eq.sym('=') || eq.is("eq")) || !d.fields.iter().any(|f| f.name.eq_ignore_ascii_case(var)) {
        return None;
    }
    let value = match &val.tok {
        Tok::Str(s) | Tok::Num(s) => s.trim().to_string(),
        _ => return None,
    };
    Some((var.to_string(), value, then))
}

/// SAS's own formats (not value labels).
fn is_builtin(f: &str) -> bool {
    let f = f.trim_start_matches('$').to_ascii_lowercase();
    f.is_empty()
        || [
            "best", "char", "comma", "commax", "date", "datetime", "dollar", "e", "f", "hex",
            "mmddyy", "ddmmyy", "yymmdd", "time", "w", "z", "percent", "yymmn", "monyy",
            "weekdate", "worddate", "timeampm", "dtdate", "year", "month", "numx", "ebcdic",
            "upcase", "quote",
        ]
        .contains(&f.as_str())
}

/// `VALUE [$]name [(options)] range = 'label' …`.
fn value(c: &mut Cursor, d: &mut Desc) -> Result<(), String> {
    // `$NAME` or `$ NAME` (IPUMS writes the latter).
    let dollar = c.eat_word("$");
    let name = c
        .next()
        .and_then(|t| t.word().map(set_key))
        .map(|n| if dollar { format!("${n}") } else { n })
        .ok_or_else(|| c.err("a format name after VALUE"))?;
    if c.eat('(') {
        while !c.done() && !c.eat(')') {
            c.i += 1;
        }
    }
    let mut set = Vec::new();
    while !c.done() {
        // A list of values and ranges, then = 'label'.
        let mut items: Vec<(Item, Option<Item>)> = Vec::new();
        let line = c.at();
        loop {
            let lo = item(c);
            // `a-b`, `a<-b` (a left out), `a-<b` (b left out).
            let lo_out =
                c.peek().is_some_and(|t| t.sym('<')) && c.peek_at(1).is_some_and(|t| t.sym('-'));
            if lo_out {
                c.i += 1;
            }
            let (hi, hi_out) = if c.eat('-') {
                let out = c.eat('<');
                (Some(item(c)), out)
            } else {
                (None, false)
            };
            let step = |i: Item, by: i64| match i {
                Item::Value(v) => match v.parse::<i64>() {
                    Ok(x) => Item::Value((x + by).to_string()),
                    // A bound left out of a range of non-integers: no
                    // single values to label.
                    Err(_) => Item::Special(format!("{v} (excluded)")),
                },
                other => other,
            };
            let lo = if lo_out { step(lo, 1) } else { lo };
            let hi = match hi {
                Some(h) if hi_out => Some(step(h, -1)),
                h => h,
            };
            items.push((lo, hi));
            if !c.eat(',') {
                break;
            }
        }
        if !c.eat('=') {
            return Err(c.err("= between a value and its label in VALUE"));
        }
        let mut label = c
            .string()
            .or_else(|| c.next().map(|t| t.show()))
            .ok_or_else(|| c.err("a label"))?;
        // A long label in adjacent strings (IPUMS's setups): those not
        // starting the next value.
        while let Some(Tok::Str(more)) = c.peek().map(|t| t.tok.clone()) {
            if c.peek_at(1)
                .is_some_and(|t| t.sym('=') || t.sym(',') || t.sym('-') || t.sym('<'))
            {
                break;
            }
            label.push_str(&more);
            c.i += 1;
        }
        for (lo, hi) in items {
            match (lo, hi) {
                (Item::Value(lo), None) => set.push(Labelled {
                    lo,
                    hi: None,
                    label: label.clone(),
                }),
                (Item::Value(lo), Some(Item::Value(hi))) => set.push(Labelled {
                    lo,
                    hi: Some(hi),
                    label: label.clone(),
                }),
                (lo, hi) => {
                    let show = |i: &Item| match i {
                        Item::Value(v) | Item::Special(v) => v.clone(),
                        Item::Nothing => "?".into(),
                    };
                    let what = match &hi {
                        Some(h) => format!("{}-{}", show(&lo), show(h)),
                        None => show(&lo),
                    };
                    d.notes.push(format!(
                        "line {line}: format {name}: the label {label:?} of {what} is not kept (labels of values and of ranges of integers are)"
                    ));
                }
            }
        }
    }
    d.sets.entry(name).or_default().extend(set);
    Ok(())
}

/// One end of a VALUE range.
enum Item {
    /// A number or a text.
    Value(String),
    /// `.`, `.A`, `LOW`, `HIGH`, `OTHER`: no single value.
    Special(String),
    /// Nothing a range can hold.
    Nothing,
}

fn item(c: &mut Cursor) -> Item {
    if let Some((mut v, text)) = c.value() {
        // A long text value in adjacent strings.
        while let (true, Some(Tok::Str(more))) = (text, c.peek().map(|t| t.tok.clone())) {
            v.push_str(&more);
            c.i += 1;
        }
        return Item::Value(v);
    }
    if c.eat('.') {
        return Item::Special(".".into());
    }
    match c.peek().and_then(|t| t.word()).map(str::to_string) {
        Some(w)
            if w.starts_with('.')
                || ["low", "high", "other"].contains(&w.to_ascii_lowercase().as_str()) =>
        {
            c.i += 1;
            Item::Special(w)
        }
        _ => Item::Nothing,
    }
}

fn infile(c: &mut Cursor, d: &mut Desc, refs: &HashMap<String, String>) -> Result<(), String> {
    match c.next().map(|t| t.tok) {
        Some(Tok::Str(p)) => d.data_file = Some(p),
        Some(Tok::Word(r)) => d.data_file = refs.get(&r.to_lowercase()).cloned().or(Some(r)),
        _ => return Err(c.err("a file after INFILE")),
    }
    let mut first = 1;
    while let Some(t) = c.next() {
        let Some(w) = t.word().map(str::to_ascii_lowercase) else {
            continue;
        };
        let arg = |c: &mut Cursor| -> Option<Tok> {
            c.eat('=');
            c.next().map(|t| t.tok)
        };
        match w.as_str() {
            "dsd" => {
                d.delimited.get_or_insert(b',');
            }
            "dlm" | "delimiter" => {
                let v = arg(c);
                let hex = c.peek().is_some_and(|t| t.is("x"));
                if hex {
                    c.i += 1;
                }
                if let Some(Tok::Str(s)) = v {
                    let b = if hex {
                        u8::from_str_radix(&s, 16).unwrap_or(b',')
                    } else {
                        s.bytes().next().unwrap_or(b',')
                    };
                    d.delimited = Some(b);
                }
            }
            "firstobs" => {
                if let Some(Tok::Num(n)) = arg(c) {
                    first = n.parse().unwrap_or(1);
                }
            }
            // N=: the lines a record's `#n` pointers range over.
            "n" => {
                if let Some(Tok::Num(n)) = arg(c) {
                    let n: usize = n.parse().unwrap_or(1);
                    if n > 10_000 {
                        return Err(format!(
                            "line {}: N={n}: at most 10000 lines a record",
                            c.line
                        ));
                    }
                    d.lines = d.lines.max(n);
                }
            }
            "lrecl" | "encoding" | "obs" => {
                arg(c);
            }
            _ => {}
        }
    }
    d.header = first == 2;
    if first > 2 || (first == 2 && d.delimited.is_none()) {
        return Err(format!(
            "line {}: FIRSTOBS={first}: lines before the data are not skipped by a fixed-width import (remove them first)",
            c.line
        ));
    }
    Ok(())
}

/// An informat (`8.`, `8.2`, `$10.`, `$CHAR10.`, `COMMA10.2`,
/// `YYMMDD10.`): width (0 when none), decimals, text.
fn informat(f: &str) -> Option<(usize, u32, bool)> {
    let body = f.strip_suffix('.').unwrap_or(f);
    let dot = f.contains('.');
    if !dot {
        return None;
    }
    let text = body.starts_with('$');
    let b = body.trim_start_matches('$');
    let letters: String = b
        .chars()
        .take_while(|c| c.is_ascii_alphabetic() || *c == '_')
        .collect();
    let rest = &b[letters.len()..];
    let (w, dec) = match rest.split_once('.') {
        Some((w, d)) => (w.parse().unwrap_or(0), d.parse().unwrap_or(0)),
        None => (rest.parse().unwrap_or(0), 0),
    };
    let l = letters.to_ascii_lowercase();
    let numeric = [
        "", "f", "best", "z", "bz", "comma", "commax", "d", "e", "numx", "dollar", "dollarx",
        "percent",
    ]
    .contains(&l.as_str());
    Some((w, dec, text || !numeric))
}

fn input(c: &mut Cursor, d: &mut Desc, file: usize) -> Result<(), String> {
    let mut rec = 1usize;
    let mut pos = 1usize;
    // Fields read by list input (no columns).
    let mut listed: Vec<usize> = Vec::new();
    while let Some(t) = c.next() {
        let line = t.line;
        match &t.tok {
            Tok::Sym('@') => {
                if let Some(n) = c.peek().and_then(|t| t.int()) {
                    c.i += 1;
                    pos = n;
                } else if !c.done() && !c.peek().is_some_and(|t| t.sym('@')) {
                    return Err(c.err("a column number after @"));
                }
            }
            Tok::Sym('+') => {
                let n = c
                    .next()
                    .and_then(|t| t.int())
                    .ok_or_else(|| c.err("a number after +"))?;
                pos = pos.saturating_add(n);
            }
            Tok::Sym('/') => {
                rec += 1;
                pos = 1;
                d.lines = d.lines.max(rec);
            }
            Tok::Sym('(') => {
                return Err(format!(
                    "line {line}: grouped variables and informats ((A B C) (3.)) in INPUT: list each variable with its columns"
                ))
            }
            Tok::Word(w) if w.starts_with('#') => {
                rec = w[1..].parse().map_err(|_| format!("line {line}: {w} is not a line pointer"))?;
                if rec == 0 || rec > 10_000 {
                    return Err(format!("line {line}: {w}: a record has lines 1 to at most 10000"));
                }
                pos = 1;
                d.lines = d.lines.max(rec);
            }
            Tok::Word(name) => {
                let name = name.clone();
                let mut text = c.eat_word("$");
                // Column input: start[-end] [.dec].
                if let Some(a) = c.peek().and_then(|t| t.int()) {
                    c.i += 1;
                    let b = if c.eat('-') {
                        c.next().and_then(|t| t.int()).ok_or_else(|| c.err("a column after -"))?
                    } else {
                        a
                    };
                    let mut dec = 0;
                    if let Some(Tok::Num(n)) = c.peek().map(|t| t.tok.clone()) {
                        if let Some(x) = n.strip_prefix('.') {
                            c.i += 1;
                            dec = x.parse().map_err(|_| format!("line {line}: {n} is not a number of decimals"))?;
                        }
                    }
                    if a == 0 || b < a {
                        return Err(format!("line {line}: columns {a}-{b} of {name} are not a range of columns (numbered from 1)"));
                    }
                    d.fields.push(Field {
                        name,
                        rectype: None,
                        record_line: rec,
                        start: a,
                        end: b,
                        decimals: dec,
                        divide: 0,
                        text,
                        at: (file, line),
                    });
                    pos = b + 1;
                    continue;
                }
                let colon = c.eat(':') || c.eat('&');
                // Formatted input: an informat.
                let fmt = match c.peek().map(|t| t.tok.clone()) {
                    Some(Tok::Num(n)) if n.contains('.') => Some(n),
                    Some(Tok::Word(w)) if w.ends_with('.') || (w.contains('.') && w.len() > 1) => Some(w),
                    _ => None,
                };
                let (w, dec, ftext) = match fmt.as_deref().and_then(informat) {
                    Some(f) => {
                        c.i += 1;
                        f
                    }
                    None => (0, 0, false),
                };
                text |= ftext;
                if let Some(f) = &fmt {
                    let l = f.to_ascii_lowercase();
                    if l.starts_with("bz") || l.starts_with("zd") {
                        return Err(format!("line {line}: {name} is read with {f}: blanks read as zeros (BZ) and zoned decimals (ZD) are not supported"));
                    }
                    let style = style_of(f);
                    if !text && style != NumberStyle::Plain {
                        d.styles.push((name.clone(), style));
                    }
                    if ftext && !l.starts_with('$') {
                        d.notes.push(format!("line {line}: {name} is read with {f}: kept as text as written"));
                    }
                }
                if colon || w == 0 {
                    // List input: the delimited file's next column.
                    listed.push(d.fields.len());
                    d.fields.push(Field {
                        name: name.clone(),
                        rectype: None,
                        record_line: rec,
                        start: 1,
                        end: 1,
                        divide: 0,
                        decimals: 0,
                        text,
                        at: (file, line),
                    });
                    if text {
                        d.text.push(name);
                    }
                    continue;
                }
                d.fields.push(Field {
                    name,
                    rectype: None,
                    record_line: rec,
                    start: pos,
                        divide: 0,
                    end: pos.saturating_add(w - 1),
                    decimals: dec,
                    text,
                    at: (file, line),
                });
                pos = pos.saturating_add(w);
            }
            _ => return Err(format!("line {line}: {} in INPUT", t.show())),
        }
    }
    if let (None, Some(k)) = (d.delimited, listed.first()) {
        let f = &d.fields[*k];
        return Err(format!(
            "line {}: {} is read by list input (no columns) and INFILE gives no DSD or DLM=: values separated by blanks are not read (give its columns, or DSD for delimited text)",
            f.at.1, f.name
        ));
    }
    Ok(())
}

fn label(c: &mut Cursor, d: &mut Desc) -> Result<(), String> {
    while !c.done() {
        let name = c
            .next()
            .and_then(|t| t.word().map(str::to_string))
            .ok_or_else(|| c.err("a variable name in LABEL"))?;
        c.eat('=');
        let mut l = c
            .string()
            .ok_or_else(|| c.err(&format!("a quoted label for {name}")))?;
        // A long label in adjacent strings (IPUMS's setups).
        while let Some(Tok::Str(more)) = c.peek().map(|t| t.tok.clone()) {
            l.push_str(&more);
            c.i += 1;
        }
        d.var_labels.push((name, l));
    }
    Ok(())
}

fn format(c: &mut Cursor, formats: &mut Vec<(String, String, usize)>) {
    let mut names: Vec<String> = Vec::new();
    while let Some(t) = c.next() {
        let f = match &t.tok {
            Tok::Word(w) if w.ends_with('.') => w.clone(),
            Tok::Num(n) if n.ends_with('.') || n.contains('.') => n.clone(),
            Tok::Word(w) => {
                names.push(w.clone());
                continue;
            }
            _ => continue,
        };
        for n in names.drain(..) {
            formats.push((n, f.clone(), t.line));
        }
    }
}

fn length(c: &mut Cursor, d: &mut Desc) {
    let mut names: Vec<String> = Vec::new();
    while let Some(t) = c.next() {
        match &t.tok {
            Tok::Word(w) if w.starts_with('$') => {
                d.text.append(&mut names);
            }
            Tok::Word(w) => names.push(w.clone()),
            Tok::Num(_) => names.clear(),
            _ => {}
        }
    }
}

fn attrib(
    c: &mut Cursor,
    d: &mut Desc,
    formats: &mut Vec<(String, String, usize)>,
) -> Result<(), String> {
    let mut var: Option<String> = None;
    while let Some(t) = c.next() {
        let Some(w) = t.word().map(str::to_string) else {
            continue;
        };
        let l = w.to_ascii_lowercase();
        if c.peek().is_some_and(|t| t.sym('='))
            && ["label", "format", "length", "informat"].contains(&l.as_str())
        {
            c.i += 1;
            let Some(v) = var.clone() else {
                return Err(format!("line {}: {w}= before a variable in ATTRIB", t.line));
            };
            match l.as_str() {
                "label" => {
                    if let Some(s) = c.string() {
                        d.var_labels.push((v, s));
                    }
                }
                "format" => {
                    if let Some(f) = c.next() {
                        formats.push((v, f.show(), t.line));
                    }
                }
                "length" => {
                    if c.peek().is_some_and(|t| t.is("$"))
                        || c.peek()
                            .and_then(|t| t.word())
                            .is_some_and(|w| w.starts_with('$'))
                    {
                        d.text.push(v);
                    }
                    c.i += 1;
                }
                _ => {
                    c.i += 1;
                }
            }
        } else {
            var = Some(w);
        }
    }
    Ok(())
}

/// `IF V = CODE THEN V = .x` (or `= .`, `= ''`), `IF V IN (a, b) THEN …`:
/// the codes are missing.
fn missing_if(c: &Cursor, d: &mut Desc) -> bool {
    // `IF (V = 9) THEN …`: the condition's parentheses.
    let mut t = c.t.clone();
    if t.get(1).is_some_and(|x| x.sym('(')) {
        if let Some(th) = t.iter().position(|x| x.is("then")) {
            if th >= 3 && t[th - 1].sym(')') {
                t.remove(th - 1);
                t.remove(1);
            }
        }
    }
    let t = &t;
    let Some(var) = t.get(1).and_then(|t| t.word()) else {
        return false;
    };
    let mut k = 2;
    let mut codes = Vec::new();
    let mut rest = Cursor::new(t.to_vec(), c.line);
    if t.get(k).is_some_and(|t| t.sym('=') || t.is("eq")) {
        rest.i = k + 1;
        match rest.value() {
            Some((v, _)) => codes.push(v),
            None => return false,
        }
    } else if t.get(k).is_some_and(|t| t.is("in")) && t.get(k + 1).is_some_and(|t| t.sym('(')) {
        rest.i = k + 2;
        while !rest.eat(')') {
            if rest.eat(',') {
                continue;
            }
            match rest.value() {
                Some((v, _)) => codes.push(v),
                None => return false,
            }
        }
    } else {
        return false;
    }
    k = rest.i;
    let ok = t.get(k).is_some_and(|t| t.is("then"))
        && t.get(k + 1)
            .and_then(|t| t.word())
            .is_some_and(|w| w.eq_ignore_ascii_case(var))
        && t.get(k + 2).is_some_and(|t| t.sym('='))
        && match t.get(k + 3).map(|t| &t.tok) {
            Some(Tok::Sym('.')) => true,
            Some(Tok::Word(w)) => w.starts_with('.') && w.len() == 2,
            Some(Tok::Str(s)) => s.trim().is_empty(),
            _ => false,
        }
        && t.len() == k + 4;
    if ok {
        for v in codes {
            d.missing.push((
                var.to_string(),
                Labelled {
                    lo: v,
                    hi: None,
                    label: String::new(),
                },
            ));
        }
    }
    ok
}
