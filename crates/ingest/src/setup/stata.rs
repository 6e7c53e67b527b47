//! Stata dictionaries (`.dct`) and do-files (`.do`): `infix` and `infile`
//! dictionaries, the `infix … using` command, `import delimited`, `label
//! variable`, `label define`, `label values`, missing codes from `replace
//! V = .x if V == CODE` and `mvdecode`.

use super::desc::{expand, read_text, record_type, scale, shared_columns, Desc, Field, Labelled};
use super::lex::{stata_tokens as tokens, strip_comments, Cursor, Tok, Token};
use crate::error::{Error, Result};
use std::path::Path;

/// Commands that change the data: noted, not run.
const CHANGES: &[&str] = &[
    "replace", "recode", "gen", "generate", "egen", "drop", "keep", "destring", "tostring",
    "rename", "encode", "decode",
];

/// Statements of a do-file: lines (or `;`-ended under `#delimit ;`), each
/// with its first line, comments dropped.
fn statements(text: &str) -> Vec<(String, usize)> {
    let text = strip_comments(text, true);
    let mut out = Vec::new();
    let mut semi = false;
    let mut cur = String::new();
    let mut first = 0;
    for (n, line) in text.lines().enumerate() {
        let t = line.trim();
        if t.to_ascii_lowercase().starts_with("#delimit")
            || t.to_ascii_lowercase().starts_with("#d ")
        {
            semi = t.ends_with(';');
            continue;
        }
        if cur.trim().is_empty() {
            first = n + 1;
            cur.clear();
            if !semi && t.starts_with('*') {
                continue;
            }
        }
        if semi {
            let mut rest = line;
            while let Some(p) = rest.find(';') {
                cur.push_str(&rest[..p]);
                let s = std::mem::take(&mut cur);
                if !s.trim().is_empty() && !s.trim_start().starts_with('*') {
                    out.push((s, first));
                }
                first = n + 1;
                rest = &rest[p + 1..];
            }
            cur.push_str(rest);
            cur.push('\n');
        } else if let Some(l) = line
            .strip_suffix('\u{1}')
            .or_else(|| line.trim_end().strip_suffix('\u{1}'))
        {
            cur.push_str(l);
            cur.push('\n');
        } else {
            cur.push_str(line);
            out.push((std::mem::take(&mut cur), first));
        }
    }
    if !cur.trim().is_empty() {
        out.push((cur, first));
    }
    out
}

pub(crate) fn read(path: &Path, text: &str, file: usize) -> Result<Desc> {
    let err = |reason: String| Error::Codebook {
        path: path.to_path_buf(),
        reason,
    };
    let mut d = Desc {
        lines: 1,
        ..Desc::default()
    };
    let stripped = strip_comments(text, true);
    let lower = stripped.to_ascii_lowercase();
    // A dictionary: the text up to its closing brace.
    if let Some(p) = lower.find("dictionary") {
        let before = lower[..p].trim();
        if (before.is_empty() || before.ends_with("infix") || before.ends_with("infile"))
            && lower[p..].contains('{')
        {
            let end =
                dictionary(&stripped, before.ends_with("infix"), &mut d, file).map_err(err)?;
            let dct = path
                .extension()
                .is_some_and(|e| e.eq_ignore_ascii_case("dct") || e.eq_ignore_ascii_case("dict"));
            if dct {
                return Ok(d);
            }
            // A do-file with a dictionary in it: its statements go on after
            // the closing brace (lines kept, so their numbers hold).
            let rest: String = stripped[..end]
                .chars()
                .map(|c| if c == '\n' { '\n' } else { ' ' })
                .chain(stripped[end..].chars())
                .collect();
            return statements_into(path, &rest, d, file);
        }
    }
    statements_into(path, text, d, file)
}

/// Reads the statements of a do-file's `text` into `d`.
fn statements_into(path: &Path, text: &str, mut d: Desc, file: usize) -> Result<Desc> {
    let err = |reason: String| Error::Codebook {
        path: path.to_path_buf(),
        reason,
    };
    // The first field of the last `infix` command, until a `drop if` or
    // `keep if` says which record type it reads.
    let mut last_infix: Option<(usize, usize)> = None;
    for (s, line) in statements(text) {
        let mut toks = tokens(&s, line).map_err(err)?;
        // Prefixes that change nothing of what the command says.
        while toks.first().is_some_and(|t| {
            [
                "quietly", "qui", "quiet", "noisily", "noi", "capture", "cap",
            ]
            .iter()
            .any(|p| t.is(p))
        }) {
            toks.remove(0);
        }
        let mut c = Cursor::new(toks, line);
        let w0 =
            c.t.first()
                .and_then(|t| t.word())
                .unwrap_or("")
                .to_ascii_lowercase();
        let w1 =
            c.t.get(1)
                .and_then(|t| t.word())
                .unwrap_or("")
                .to_ascii_lowercase();
        let ab = |w: &str, full: &str, min: usize| w.len() >= min && full.starts_with(w);
        if (w0 == "infix" || w0 == "infile") && w1 == "using" {
            // infix using FILE.dct: read the dictionary beside the do-file.
            c.i = 2;
            let name = file_name(&mut c)
                .ok_or_else(|| err(c.err("a dictionary file after infix using")))?;
            if let Some(q) = c.t[c.i..].iter().find(|t| t.is("if") || t.is("in")) {
                return Err(err(format!(
                    "line {}: {w0} using {name} {} …: the do-file reads only some records; microtab reads every record (read the file with a codebook of its record types, or select the records first)",
                    q.line,
                    q.show()
                )));
            }
            let p = resolve(path, &name, "dct");
            match p {
                Some(p) => {
                    let t = read_text(&p)?;
                    if !strip_comments(&t, true)
                        .to_ascii_lowercase()
                        .contains("dictionary")
                    {
                        return Err(err(format!(
                            "line {line}: {} is not a Stata dictionary (infix dictionary {{ … }})",
                            p.display()
                        )));
                    }
                    let sub = read(&p, &t, file)?;
                    d.fields.extend(sub.fields);
                    d.data_file = d.data_file.or(sub.data_file);
                    d.notes.extend(sub.notes);
                    d.lines = d.lines.max(sub.lines);
                    d.var_labels.extend(sub.var_labels);
                    d.uses.extend(sub.uses);
                    for (k, v) in sub.sets {
                        d.sets.entry(k).or_default().extend(v);
                    }
                }
                None => d.notes.push(format!(
                    "line {line}: the dictionary {name} it reads is not beside it: give it as a setup file too"
                )),
            }
        } else if w0 == "infix" {
            c.i = 1;
            last_infix = Some((d.fields.len(), line));
            infix_specs(&mut c, &mut d, file, true).map_err(err)?;
            if c.eat_word("using") {
                d.data_file = file_name(&mut c);
            }
        } else if w0 == "import" && ab(&w1, "delimited", 3) {
            c.i = 2;
            import_delimited(&mut c, &mut d).map_err(err)?;
        } else if ab(&w0, "label", 2) && ab(&w1, "variable", 3) {
            c.i = 2;
            let n = c.next().and_then(|t| t.word().map(str::to_string));
            match (n, c.string()) {
                (Some(n), Some(l)) => d.var_labels.push((n, l)),
                _ => {
                    return Err(err(format!(
                        "line {line}: label variable NAME \"label\" was expected"
                    )))
                }
            }
        } else if ab(&w0, "label", 2) && ab(&w1, "define", 3) {
            c.i = 2;
            label_define(&mut c, &mut d).map_err(err)?;
        } else if ab(&w0, "label", 2) && ab(&w1, "values", 3) {
            c.i = 2;
            let mut names: Vec<String> = Vec::new();
            while let Some(t) = c.next() {
                match &t.tok {
                    Tok::Word(w) => names.push(w.clone()),
                    Tok::Sym('-') => names.push("-".into()),
                    Tok::Sym(',') => break,
                    _ => {}
                }
            }
            if let Some(set) = names.pop() {
                for n in expand(&names, &d.fields) {
                    d.uses.push((n, set.clone(), line));
                }
            }
        } else if let Some((var, value)) = (w0 == "drop" || w0 == "keep")
            .then(|| type_test(&c, &d))
            .flatten()
        {
            // `drop if rectype != "H"` after an `infix` (IPUMS's
            // hierarchical do-files): that infix reads records of type H.
            let from = last_infix.take().map_or(d.fields.len(), |(k, _)| k);
            record_type(&mut d, &var, &value, (file, line)).map_err(err)?;
            for f in &mut d.fields[from..] {
                f.rectype = Some(value.clone());
            }
        } else if s.contains("_line_num")
            && ["gen", "generate", "drop", "sort"].contains(&w0.as_str())
        {
            // IPUMS's hierarchical do-files number the lines to keep the
            // file's order, which the import keeps.
        } else if w0 == "replace" && (missing_replace(&c, &mut d) || divides(&c, &mut d)) {
        } else if w0 == "mvdecode" {
            c.i = 1;
            mvdecode(&mut c, &mut d).map_err(err)?;
        } else if CHANGES.contains(&w0.as_str()) {
            d.notes.push(format!(
                "line {line}: {} is not run: the setup's layout, labels and missing values are read, commands that change values are not",
                s.split_whitespace().take(5).collect::<Vec<_>>().join(" ")
            ));
        }
    }
    if let (Some((_, line)), Some(_)) = (last_infix, &d.record_id) {
        return Err(err(format!(
            "line {line}: this infix reads records of every type, the ones before it records of one type each (drop if rectype != \"P\" after each)"
        )));
    }
    Ok(d)
}

/// `drop if V != value` or `keep if V == value` (`~=` too), `V` a field
/// of the last `infix`: `V` and the value.
fn type_test(c: &Cursor, d: &Desc) -> Option<(String, String)> {
    let t = &c.t;
    if !t.get(1)?.is("if") {
        return None;
    }
    let keep = t[0].is("keep");
    let var = t.get(2)?.word()?;
    let (op, k) = match (t.get(3).map(|x| &x.tok), t.get(4).map(|x| &x.tok)) {
        (Some(Tok::Sym('!' | '~')), Some(Tok::Sym('='))) => ("!=", 5),
        (Some(Tok::Sym('=')), Some(Tok::Sym('='))) => ("==", 5),
        _ => return None,
    };
    if (op == "==") != keep || t.len() != k + 1 {
        return None;
    }
    let value = match &t[k].tok {
        Tok::Str(s) | Tok::Num(s) => s.trim().to_string(),
        _ => return None,
    };
    d.fields
        .iter()
        .any(|f| f.name.eq_ignore_ascii_case(var))
        .then(|| (var.to_string(), value))
}

/// A file name: a string or words up to a comma.
fn file_name(c: &mut Cursor) -> Option<String> {
    match c.peek().map(|t| t.tok.clone())? {
        Tok::Str(s) => {
            c.i += 1;
            Some(s)
        }
        _ => {
            // An unquoted path: words and path signs, up to a comma or an
            // `if`/`in`/`using`.
            let mut s = String::new();
            while let Some(t) = c.peek() {
                let part = match &t.tok {
                    Tok::Word(w)
                        if !["if", "in", "using"].contains(&w.to_ascii_lowercase().as_str()) =>
                    {
                        w.clone()
                    }
                    Tok::Num(n) => n.clone(),
                    Tok::Sym(ch @ ('/' | '\\' | '.' | ':' | '-' | '~')) => ch.to_string(),
                    _ => break,
                };
                s.push_str(&part);
                c.i += 1;
            }
            (!s.is_empty()).then_some(s)
        }
    }
}

/// `name` beside `from` (with `ext` added when it has none), if it exists.
fn resolve(from: &Path, name: &str, ext: &str) -> Option<std::path::PathBuf> {
    let base = Path::new(name).file_name()?;
    let dir = from.parent().unwrap_or(Path::new("."));
    let mut cands = vec![dir.join(name), dir.join(base)];
    if Path::new(name).extension().is_none() {
        cands.push(dir.join(base).with_extension(ext));
    }
    cands.into_iter().find(|p| p.is_file())
}

/// A Stata storage type word: whether text.
fn storage(w: &str) -> Option<bool> {
    let l = w.to_ascii_lowercase();
    match l.as_str() {
        "byte" | "int" | "long" | "float" | "double" => Some(false),
        "str" | "strl" => Some(true),
        _ if l.starts_with("str") && l[3..].chars().all(|c| c.is_ascii_digit()) => Some(true),
        _ => None,
    }
}

fn dictionary(
    text: &str,
    infix: bool,
    d: &mut Desc,
    file: usize,
) -> std::result::Result<usize, String> {
    let open = text.find('{').expect("checked");
    let close = text[open..]
        .find('}')
        .map(|p| open + p)
        .ok_or_else(|| "the dictionary's { is not closed by }".to_string())?;
    let head_line = text[..open].matches('\n').count() + 1;
    let head = tokens(&text[..open], 1)?;
    if let Some(p) = head.iter().position(|t| t.is("using")) {
        let mut c = Cursor::new(head[p + 1..].to_vec(), head_line);
        d.data_file = file_name(&mut c);
    }
    let body_line = head_line;
    if text[close + 1..]
        .trim()
        .lines()
        .any(|l| !l.trim().is_empty())
        && d.data_file.is_none()
    {
        d.notes.push(
            "data follow the dictionary in the same file: give them as a file of their own".into(),
        );
    }
    // Lines starting with * are comments inside a dictionary.
    let body: String = text[open + 1..close]
        .split('\n')
        .map(|l| {
            if l.trim_start().starts_with('*') {
                ""
            } else {
                l
            }
        })
        .collect::<Vec<_>>()
        .join("\n");
    let mut c = Cursor::new(tokens(&body, body_line)?, body_line);
    if infix {
        infix_specs(&mut c, d, file, false)?;
    } else {
        infile_specs(&mut c, d, file)?;
    }
    Ok(close + 1)
}

/// `infix` specifications: `[# lines] [#:] [type] names [#:]start[-end]`.
fn infix_specs(
    c: &mut Cursor,
    d: &mut Desc,
    file: usize,
    command: bool,
) -> std::result::Result<(), String> {
    let mut rec = 1usize;
    while !c.done() {
        if command && c.peek().is_some_and(|t| t.is("using")) {
            return Ok(());
        }
        if c.peek().and_then(|t| t.int()).is_some() && c.peek_at(1).is_some_and(|t| t.is("lines")) {
            d.lines = c.next().and_then(|t| t.int()).unwrap_or(1);
            c.i += 1;
            continue;
        }
        if c.peek().and_then(|t| t.int()).is_some() && c.peek_at(1).is_some_and(|t| t.sym(':')) {
            rec = c.next().and_then(|t| t.int()).unwrap_or(1);
            c.i += 1;
            d.lines = d.lines.max(rec);
            continue;
        }
        if c.eat('/') {
            rec += 1;
            d.lines = d.lines.max(rec);
            continue;
        }
        let line = c.at();
        let mut text = false;
        let mut names: Vec<String> = Vec::new();
        while let Some(w) = c.peek().and_then(|t| t.word()).map(str::to_string) {
            c.i += 1;
            if names.is_empty() && !text {
                if let Some(t) = storage(&w) {
                    if c.peek().and_then(|t| t.word()).is_some() {
                        text = t;
                        continue;
                    }
                }
            }
            names.push(w);
        }
        if names.is_empty() {
            return Err(c.err("a variable name was expected"));
        }
        // `1: 7-9`: the line, then the columns.
        let mut on = rec;
        if c.peek().and_then(|t| t.int()).is_some() && c.peek_at(1).is_some_and(|t| t.sym(':')) {
            on = c.next().and_then(|t| t.int()).unwrap_or(1);
            c.i += 1;
            d.lines = d.lines.max(on);
        }
        let a = c.next().and_then(|t| t.int()).ok_or_else(|| {
            format!(
                "line {line}: columns (start-end) were expected after {}",
                names.join(" ")
            )
        })?;
        let b = if c.eat('-') {
            c.next()
                .and_then(|t| t.int())
                .ok_or_else(|| c.err("a column after -"))?
        } else {
            a
        };
        shared_columns(d, &names, (a, b), on, (text, 0), (file, line))?;
    }
    Ok(())
}

/// `infile` dictionary entries: `_column(#)`, `_skip(#)`, `_line(#)`,
/// `_lines(#)`, `_newline`, and `[type] name [:lbl] [%infmt] ["label"]`.
fn infile_specs(c: &mut Cursor, d: &mut Desc, file: usize) -> std::result::Result<(), String> {
    let mut rec = 1usize;
    let mut pos = 1usize;
    let arg = |c: &mut Cursor| -> Option<usize> {
        if c.eat('(') {
            let n = c.next().and_then(|t| t.int());
            c.eat(')');
            n
        } else {
            None
        }
    };
    while let Some(t) = c.next() {
        let w = match &t.tok {
            Tok::Word(w) => w.to_ascii_lowercase(),
            _ => return Err(format!("line {}: {} in the dictionary", t.line, t.show())),
        };
        match w.as_str() {
            "_column" => pos = arg(c).ok_or_else(|| c.err("_column(#)"))?,
            "_skip" => pos = pos.saturating_add(arg(c).unwrap_or(1)),
            "_line" => {
                rec = arg(c).ok_or_else(|| c.err("_line(#)"))?;
                pos = 1;
            }
            "_newline" => {
                rec += arg(c).unwrap_or(1);
                pos = 1;
            }
            "_lines" => d.lines = arg(c).ok_or_else(|| c.err("_lines(#)"))?,
            "_lrecl" | "_firstlineoffile" => {
                let n = arg(c);
                if w == "_firstlineoffile" && n.is_some_and(|n| n > 1) {
                    return Err(format!("line {}: _firstlineoffile: lines before the data are not skipped by a fixed-width import (remove them first)", t.line));
                }
            }
            _ => {
                let (text, name) = match storage(&w) {
                    Some(s)
                        if c.peek()
                            .and_then(|t| t.word())
                            .is_some_and(|x| !x.starts_with('%')) =>
                    {
                        (
                            s,
                            c.next()
                                .and_then(|t| t.word().map(str::to_string))
                                .unwrap_or_default(),
                        )
                    }
                    _ => (false, t.word().unwrap_or_default().to_string()),
                };
                let mut set = None;
                if c.eat(':') {
                    set = c.next().and_then(|t| t.word().map(str::to_string));
                }
                let (width, dec, fmt_text) = match c.peek().and_then(|t| t.word()).filter(|w| w.starts_with('%')) {
                    Some(f) => {
                        let f = f.to_string();
                        c.i += 1;
                        infmt(&f).ok_or_else(|| format!("line {}: {f} is not an input format (%#f, %#.#f, %#s)", t.line))?
                    }
                    None => {
                        return Err(format!(
                            "line {}: {name} has no input format (%#f, %#s): fields without a width are read by position only in free format",
                            t.line
                        ))
                    }
                };
                let label = c.string();
                d.fields.push(Field {
                    name: name.clone(),
                    rectype: None,
                    record_line: rec,
                    start: pos,
                    end: pos.saturating_add(width - 1),
                    divide: 0,
                    decimals: dec,
                    text: text || fmt_text,
                    at: (file, t.line),
                });
                pos = pos.saturating_add(width);
                if let Some(l) = label {
                    d.var_labels.push((name.clone(), l));
                }
                if let Some(s) = set {
                    d.uses.push((name, s, t.line));
                }
            }
        }
    }
    Ok(())
}

/// An input format: `%10f`, `%8.2f` (2 implied decimals when the field has
/// no decimal point), `%5s`, `%5S`: width, decimals, text.
fn infmt(f: &str) -> Option<(usize, u32, bool)> {
    let body = f.strip_prefix('%')?;
    let kind = body.chars().last()?;
    let num = &body[..body.len() - 1];
    let (w, dec) = match num.split_once('.') {
        Some((w, d)) => (w.parse().ok()?, d.parse().ok()?),
        None => (num.parse().ok()?, 0),
    };
    if w == 0 {
        return None;
    }
    match kind {
        'f' | 'g' | 'e' => Some((w, dec, false)),
        's' | 'S' => Some((w, 0, true)),
        _ => None,
    }
}

fn import_delimited(c: &mut Cursor, d: &mut Desc) -> std::result::Result<(), String> {
    c.eat_word("using");
    d.data_file = file_name(c);
    d.delimited = Some(b',');
    d.header = true;
    let mut strings: Vec<usize> = Vec::new();
    c.eat(',');
    while let Some(t) = c.next() {
        let Some(opt) = t.word().map(str::to_ascii_lowercase) else {
            continue;
        };
        let mut args: Vec<Token> = Vec::new();
        if c.eat('(') {
            let mut depth = 1;
            while let Some(a) = c.next() {
                if a.sym('(') {
                    depth += 1;
                } else if a.sym(')') {
                    depth -= 1;
                    if depth == 0 {
                        break;
                    }
                }
                args.push(a);
            }
        }
        match opt.as_str() {
            "delimiters" | "delimiter" | "delim" => {
                if let Some(Tok::Str(s)) = args.first().map(|a| a.tok.clone()) {
                    d.delimited = Some(if s == "\\t" || s == "tab" {
                        b'\t'
                    } else {
                        s.bytes().next().unwrap_or(b',')
                    });
                }
            }
            "varnames" => {
                d.header = args.first().and_then(|a| a.int()) == Some(1);
            }
            "stringcols" => strings.extend(args.iter().filter_map(|a| a.int())),
            _ => {}
        }
    }
    // The columns are known by the header; stringcols name text ones by
    // position.
    d.notes.extend(
        strings
            .iter()
            .map(|k| format!("column {k} is read as text (stringcols)"))
            .take(0),
    );
    d.text_cols = strings;
    Ok(())
}

fn label_define(c: &mut Cursor, d: &mut Desc) -> std::result::Result<(), String> {
    let name = c
        .next()
        .and_then(|t| t.word().map(str::to_string))
        .ok_or_else(|| c.err("a label name"))?;
    let mut set = Vec::new();
    while !c.done() {
        if c.eat(',') {
            break;
        }
        let v = match c.peek().map(|t| t.tok.clone()) {
            Some(Tok::Word(w)) if w.starts_with('.') => {
                c.i += 1;
                w
            }
            _ => c
                .value()
                .map(|v| v.0)
                .ok_or_else(|| c.err("a value to label"))?,
        };
        let l = c
            .string()
            .or_else(|| c.next().and_then(|t| t.word().map(str::to_string)))
            .ok_or_else(|| c.err(&format!("a label for {v}")))?;
        if !v.starts_with('.') {
            set.push(Labelled {
                lo: v,
                hi: None,
                label: l,
            });
        }
    }
    // Stata's label names are case-sensitive.
    d.sets.entry(name).or_default().extend(set);
    Ok(())
}

/// `replace V = .x if V == CODE` (or `= ""` for text): CODE is missing.
fn missing_replace(c: &Cursor, d: &mut Desc) -> bool {
    let t = &c.t;
    let Some(var) = t.get(1).and_then(|t| t.word()) else {
        return false;
    };
    if !t.get(2).is_some_and(|t| t.sym('=')) {
        return false;
    }
    let is_missing = match t.get(3).map(|t| &t.tok) {
        Some(Tok::Word(w)) => w.starts_with('.') && w.len() == 2,
        Some(Tok::Sym('.')) => true,
        Some(Tok::Str(s)) => s.is_empty(),
        _ => false,
    };
    if !is_missing || !t.get(4).is_some_and(|t| t.is("if")) {
        return false;
    }
    if !t
        .get(5)
        .and_then(|t| t.word())
        .is_some_and(|w| w.eq_ignore_ascii_case(var))
    {
        return false;
    }
    if !(t.get(6).is_some_and(|t| t.sym('=')) && t.get(7).is_some_and(|t| t.sym('='))) {
        return false;
    }
    let mut rest = Cursor::new(t[8..].to_vec(), c.line);
    match rest.value() {
        Some((v, _)) if rest.done() => {
            d.missing.push((
                var.to_string(),
                Labelled {
                    lo: v,
                    hi: None,
                    label: String::new(),
                },
            ));
            true
        }
        _ => false,
    }
}

/// `replace V = V / 10000`: implied decimals.
fn divides(c: &Cursor, d: &mut Desc) -> bool {
    let t = &c.t;
    match (
        t.get(1).and_then(|t| t.word()),
        t.get(3).and_then(|t| t.word()),
        t.get(5),
    ) {
        (Some(a), Some(b), Some(n))
            if t.len() == 6 && a.eq_ignore_ascii_case(b) && t[2].sym('=') && t[4].sym('/') =>
        {
            match &n.tok {
                Tok::Num(n) => scale(d, a, n, c.line),
                _ => false,
            }
        }
        _ => false,
    }
}

/// `mvdecode VARS, mv(9 99 = .a \ 8 = .b)`: the codes are missing.
fn mvdecode(c: &mut Cursor, d: &mut Desc) -> std::result::Result<(), String> {
    let mut names = Vec::new();
    while let Some(t) = c.next() {
        match &t.tok {
            Tok::Word(w) => names.push(w.clone()),
            Tok::Sym('-') => names.push("-".into()),
            Tok::Sym(',') => break,
            _ => {}
        }
    }
    let names = expand(&names, &d.fields);
    if !(c.eat_word("mv") && c.eat('(')) {
        return Err(c.err("mv(…) after mvdecode's variables"));
    }
    while !c.done() && !c.eat(')') {
        if c.eat('=') {
            // `= .a`: the missing value the codes become.
            c.i += 1;
            continue;
        }
        if let Some((v, _)) = c.value() {
            // A numlist range: `-9/-1`.
            let hi = if c.eat('/') {
                c.value().map(|h| h.0)
            } else {
                None
            };
            for n in &names {
                d.missing.push((
                    n.clone(),
                    Labelled {
                        lo: v.clone(),
                        hi: hi.clone(),
                        label: String::new(),
                    },
                ));
            }
        } else {
            c.i += 1;
        }
    }
    Ok(())
}
