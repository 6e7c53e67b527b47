//! SAS programs (`.sas`): `PROC FORMAT` `VALUE` statements, and a DATA
//! step's `FILENAME`, `INFILE`, `INPUT`, `LABEL`, `FORMAT`, `LENGTH`,
//! `ATTRIB` and `IF V = CODE THEN V = .x` statements.

use super::desc::{divides, record_type, style_of, type_codes, Desc, Field, Informat, Labelled};
use super::lex::{strip_comments, tokens, Cursor, Tok, Token};
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

/// A DO block of the DATA step.
enum Block {
    Plain,
    /// A record type's block (`IF RT = 'P' THEN DO`, `WHEN ('P') DO`).
    Type(String),
    /// `SELECT (V)` … `END`.
    Select,
}

impl Block {
    fn rectype(&self) -> Option<&String> {
        match self {
            Block::Type(t) => Some(t),
            _ => None,
        }
    }
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
    let mut blocks: Vec<Block> = Vec::new();
    // An INPUT ended with `@` holds the line for the next INPUT: the type
    // tests between them choose the records each reads.
    let mut held = false;
    // The type a subsetting IF keeps (`IF RT = 'P';`), for INPUTs after it.
    let mut subset: Option<String> = None;
    // `SELECT (V)`'s variable.
    let mut select: Option<String> = None;
    for (s, line) in statements(text) {
        let mut toks = tokens(&s, line)?;
        // `ELSE IF …` as `IF …`; `ELSE DO` as `DO`.
        let mut otherwise = toks.first().is_some_and(|t| t.is("otherwise"));
        if toks.first().is_some_and(|t| t.is("else")) && toks.len() > 1 {
            toks.remove(0);
            otherwise = toks[0].is("do") || toks[0].is("input");
        }
        // `WHEN ('A', 'B') DO` within `SELECT (V)`: as `IF V IN ('A', 'B')
        // THEN DO`.
        if let (Some(v), true) = (&select, toks.first().is_some_and(|t| t.is("when"))) {
            if let Some(close) = toks.iter().position(|t| t.sym(')')) {
                let at = |tok: Tok| Token { tok, line };
                let mut w = vec![
                    at(Tok::Word("if".into())),
                    at(Tok::Word(v.clone())),
                    at(Tok::Word("in".into())),
                ];
                w.extend(toks[1..=close].iter().cloned());
                w.push(at(Tok::Word("then".into())));
                w.extend(toks[close + 1..].iter().cloned());
                toks = w;
            }
        }
        if otherwise && held && d.record_id.is_some() {
            let what = if toks[0].is("otherwise") {
                "OTHERWISE"
            } else {
                "ELSE"
            };
            if toks.iter().any(|t| t.is("input") || t.is("do")) {
                return Err(format!(
                    "line {line}: {what} reads the records of every type not tested before: give their type (ELSE IF {} = 'P' THEN DO)",
                    d.record_id.as_ref().and_then(|r| r.name.clone()).unwrap_or_default()
                ));
            }
            // `OTHERWISE DELETE;`, `OTHERWISE;`: other types are skipped.
            continue;
        }
        let mut c = Cursor::new(toks, line);
        // `IF V = 'P' THEN DO` / `THEN INPUT …`, V read by an INPUT
        // before: the records of that type.
        if let Some((var, codes, then)) = type_test(&c, &d).filter(|_| held) {
            record_type(&mut d, &var, &codes[0], (file, c.t[then].line))?;
            type_codes(&mut d, &codes);
            let value = codes[0].clone();
            if c.t.get(then + 1).is_some_and(|t| t.is("do")) {
                blocks.push(Block::Type(value));
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
        // `IF V = 'P';` or `IF V NE 'P' THEN DELETE;`: one type read.
        if let Some((var, codes)) = subsetting(&c, &d).filter(|_| held) {
            record_type(&mut d, &var, &codes[0], (file, line))?;
            type_codes(&mut d, &codes);
            subset = Some(codes[0].clone());
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
            "invalue" if in_format => invalue(&mut c, &mut d)?,
            "picture" if in_format => {}
            "filename" => {
                let r = c.next().and_then(|t| t.word().map(str::to_lowercase));
                if let (Some(r), Some(Tok::Str(p))) = (r, c.next().map(|t| t.tok)) {
                    filerefs.insert(r, p);
                }
            }
            "infile" => infile(&mut c, &mut d, &filerefs)?,
            "do" => blocks.push(Block::Plain),
            "select" if held => {
                let v = c.t.get(2).and_then(|t| t.word()).map(str::to_string);
                select = v.filter(|v| d.fields.iter().any(|f| f.name.eq_ignore_ascii_case(v)));
                blocks.push(Block::Select);
            }
            "end" => {
                if let Some(Block::Select) = blocks.pop() {
                    select = None;
                }
            }
            "output" => {
                if let Some(t) = blocks
                    .iter()
                    .rev()
                    .find_map(Block::rectype)
                    .or(subset.as_ref())
                {
                    if !d.output.contains(t) {
                        d.output.push(t.clone());
                    }
                }
            }
            "input"
                if input_seen
                    && (blocks.iter().any(|b| b.rectype().is_some()) || subset.is_some()) =>
            {
                let t = blocks
                    .iter()
                    .rev()
                    .find_map(Block::rectype)
                    .or(subset.as_ref())
                    .cloned();
                let before = d.fields.len();
                input(&mut c, &mut d, file)?;
                for f in &mut d.fields[before..] {
                    f.rectype = t.clone();
                }
            }
            "input" => {
                if input_seen {
                    return Err(format!(
                        "line {line}: a second INPUT statement that no record type's test leads to: records of several types are read by a first INPUT holding the line (`INPUT RT $ 1 @;`), then `IF RT = 'P' THEN DO; INPUT …; END;` per type"
                    ));
                }
                input_seen = true;
                held = c.t.last().is_some_and(|t| t.sym('@'));
                input(&mut c, &mut d, file)?;
            }
            "label" => label(&mut c, &mut d)?,
            "format" => format(&mut c, &mut formats),
            "length" => length(&mut c, &mut d),
            "attrib" => attrib(&mut c, &mut d, &mut formats)?,
            "if" => {
                if let Some(t) = c.t.windows(2).find(|w| w[0].is("then") && w[1].is("input")) {
                    return Err(format!(
                        "line {}: a second INPUT statement that no record type's test leads to: records of several types are read by a first INPUT holding the line (`INPUT RT $ 1 @;`), then `IF RT = 'P' THEN DO; INPUT …; END;` per type",
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

/// A test of the record type: `V = 'H'`, `V EQ 1`, `V IN ('A', 'B')`,
/// `V = 'A' OR V = 'B'` (parentheses aside), or their negation (`V NE
/// 'P'`, `V ^= 'P'`, `V NOT IN (…)`, `NOT (V = 'P')`), where `V` is a
/// field an INPUT read before: `V`, the codes, and whether negated.
fn type_cond(t: &[Token], d: &Desc) -> Option<(String, Vec<String>, bool)> {
    let t: Vec<&Token> = t.iter().filter(|x| !x.sym('(') && !x.sym(')')).collect();
    let mut k = 0;
    let mut negated = false;
    if t.first()?.is("not") {
        negated = true;
        k = 1;
    }
    let var = t.get(k)?.word()?.to_string();
    if !d.fields.iter().any(|f| f.name.eq_ignore_ascii_case(&var)) {
        return None;
    }
    let code = |x: &Token| match &x.tok {
        Tok::Str(s) | Tok::Num(s) => Some(s.trim().to_string()),
        _ => None,
    };
    let mut codes = Vec::new();
    let mut ne = None;
    loop {
        if !t
            .get(k)?
            .word()
            .is_some_and(|w| w.eq_ignore_ascii_case(&var))
        {
            return None;
        }
        k += 1;
        let op = t.get(k)?;
        // `^=`, `~=`, `NE`: not equal; `NOT IN`.
        let (not, eq, list) = if op.sym('^') || op.sym('~') {
            k += 1;
            (true, t.get(k)?.sym('='), false)
        } else if op.is("not") && t.get(k + 1)?.is("in") {
            k += 1;
            (true, true, true)
        } else {
            (
                op.is("ne"),
                op.sym('=') || op.is("eq") || op.is("ne"),
                op.is("in"),
            )
        };
        if !(eq || list) || ne.is_some_and(|n| n != not) {
            return None;
        }
        ne = Some(not);
        k += 1;
        if list {
            while let Some(x) = t.get(k).and_then(|x| code(x)) {
                codes.push(x);
                k += 1;
                if t.get(k).is_some_and(|x| x.sym(',')) {
                    k += 1;
                }
            }
        } else {
            codes.push(code(t.get(k)?)?);
            k += 1;
        }
        match t.get(k) {
            None => break,
            Some(x) if x.is("or") && ne == Some(false) => k += 1,
            _ => return None,
        }
    }
    if codes.is_empty() {
        return None;
    }
    Some((var, codes, negated ^ ne.unwrap_or(false)))
}

/// `IF test THEN DO|INPUT` on the record type ([`type_cond`], not
/// negated): `V`, the codes, and where `THEN` is.
fn type_test(c: &Cursor, d: &Desc) -> Option<(String, Vec<String>, usize)> {
    let t = &c.t;
    if !t.first()?.is("if") {
        return None;
    }
    let then = t.iter().position(|x| x.is("then"))?;
    if !t.get(then + 1).is_some_and(|x| x.is("do") || x.is("input")) {
        return None;
    }
    match type_cond(&t[1..then], d)? {
        (v, codes, false) => Some((v, codes, then)),
        _ => None,
    }
}

/// A statement keeping only records of one type, for the INPUTs after
/// it: a subsetting `IF V = 'P';` or `IF V NE 'P' THEN DELETE;`. The
/// variable and the codes.
fn subsetting(c: &Cursor, d: &Desc) -> Option<(String, Vec<String>)> {
    let t = &c.t;
    if !t.first()?.is("if") {
        return None;
    }
    match t.iter().position(|x| x.is("then")) {
        None => match type_cond(&t[1..], d)? {
            (v, codes, false) => Some((v, codes)),
            _ => None,
        },
        Some(then) if t.len() == then + 2 && t[then + 1].is("delete") => {
            match type_cond(&t[1..then], d)? {
                (v, codes, true) => Some((v, codes)),
                _ => None,
            }
        }
        _ => None,
    }
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
    // A name with digits within (`N3PF`) is no built-in informat.
    if !rest.bytes().all(|c| c.is_ascii_digit() || c == b'.') {
        return None;
    }
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

/// `INVALUE [$]name [(options)] 'code' = . | .A … OTHER = (|w.d|)`: an
/// informat of the program's own, as AHRQ's HCUP load programs define
/// theirs (`N3PF`: three columns, `-99` missing, `-88` `.A`).
fn invalue(c: &mut Cursor, d: &mut Desc) -> Result<(), String> {
    let line = c.at();
    let name = c
        .next()
        .and_then(|t| t.word().map(str::to_string))
        .ok_or_else(|| c.err("an informat name after INVALUE"))?;
    let mut f = Informat {
        text: name.starts_with('$'),
        line,
        ..Informat::default()
    };
    if c.eat('(') {
        while !c.done() && !c.eat(')') {
            c.i += 1;
        }
    }
    let mut other = false;
    while !c.done() {
        let at = c.at();
        let code = if c.peek().is_some_and(|t| t.is("other")) {
            c.i += 1;
            other = true;
            None
        } else {
            let (v, _) = c
                .value()
                .ok_or_else(|| c.err("a value, or OTHER, in INVALUE"))?;
            if c.peek().is_some_and(|t| t.sym('-') || t.sym('<')) {
                return Err(format!(
                    "line {at}: INVALUE {name}: ranges of codes are not read (list each code)"
                ));
            }
            Some(v)
        };
        if !c.eat('=') {
            return Err(c.err("= after a code in INVALUE"));
        }
        let target = c
            .next()
            .ok_or_else(|| c.err("what INVALUE reads a code as"))?;
        match (code, &target.tok) {
            (Some(code), Tok::Sym('.')) => f.missing.push((code, String::new())),
            (Some(code), Tok::Word(w)) if w.starts_with('.') && w.len() == 2 => {
                f.missing.push((code, w.to_ascii_uppercase()))
            }
            (None, Tok::Sym('(')) => {
                // `(|w.d|)`: the codes not listed are read with `w.d`.
                c.eat('|');
                let inner = c.next().map(|t| t.show()).unwrap_or_default();
                let (w, dec, text) = informat(&inner)
                    .ok_or_else(|| format!("line {at}: INVALUE {name}: OTHER = (|{inner}|) is not an informat"))?;
                f.width = w;
                f.decimals = dec;
                f.text |= text;
                c.eat('|');
                c.eat(')');
            }
            (_, _) => {
                return Err(format!(
                    "line {at}: INVALUE {name}: {} = {} changes a value: only codes read as missing (. or .A) and OTHER = (|w.d|) are read",
                    if other { "OTHER".to_string() } else { "a code".to_string() },
                    target.show()
                ))
            }
        }
    }
    d.informats.insert(set_key(&name), f);
    Ok(())
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
                // An informat of the program's own (`N3PF.`): its width,
                // and its codes read as missing.
                let own = fmt.as_deref().and_then(|f| d.informats.get(&set_key(f))).cloned();
                let (w, dec, ftext) = match (&own, fmt.as_deref().and_then(informat)) {
                    (Some(u), _) => {
                        c.i += 1;
                        if u.width == 0 {
                            return Err(format!("line {line}: {name} is read with {}, whose INVALUE (line {}) gives no width (OTHER = (|w.|))", fmt.as_deref().unwrap_or(""), u.line));
                        }
                        for (code, _) in &u.missing {
                            d.missing.push((name.clone(), Labelled { lo: code.trim().to_string(), hi: None, label: String::new() }));
                        }
                        (u.width, u.decimals, u.text)
                    }
                    (None, Some(f)) => {
                        c.i += 1;
                        f
                    }
                    (None, None) => match &fmt {
                        Some(f) if !f.starts_with(|c: char| c.is_ascii_digit() || c == '.') => {
                            return Err(format!("line {line}: {name} is read with {f}, an informat that is neither SAS's own nor one the program defines (INVALUE)"));
                        }
                        _ => (0, 0, false),
                    },
                };
                let fmt = if own.is_some() { None } else { fmt };
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
