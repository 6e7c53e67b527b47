//! Permanent new variables: `compute` (an [expression](crate::expr)) and
//! `recode` (rules over one to six input variables), written as a new
//! column in a new generation of the dataset.
//!
//! The dataset's writers' lock is held from start to finish, so the inputs
//! are read from the generation the change is made to; readers keep the
//! dataset as they opened it until the new manifest is swapped in whole. A
//! failed or killed run leaves the dataset as it was (its half-written
//! column is an unreferenced file, removed by the next writer).
//!
//! The column is computed morsel by morsel on every core (inputs mapped,
//! unpacked and checked against their stripe checksums as any query reads
//! them), and written in order by one writer thread that packs and sums it
//! as an import does.

use crate::exec::{AHEAD, MORSEL, STEP};
use crate::expr::{
    case_node, load_nodes, slice, tabulate, Case, Node, Other, Program, Ty, Vals, NA, SUB,
};
use crate::filter::{parse_filter, resolve, Predicate};
use crate::lex::{quote_name, split, trailing_label, walk};
use crate::{Error, Result};
use microtab_store::{
    codec, Column, ColumnData, ColumnWriter, Dataset, DatasetWriter, Kind, Number, PhysType,
    Variable,
};
use std::collections::BTreeMap;
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Condvar, Mutex};

/// Options shared by `compute` and `recode`.
#[derive(Debug, Clone, Default)]
pub struct DeriveOptions {
    /// Replace an existing variable of the same name (never one the
    /// survey design uses).
    pub replace: bool,
    /// The new variable's label.
    pub label: Option<String>,
    /// Value labels, as (value as typed, label).
    pub value_labels: Vec<(String, String)>,
}

/// What `recode` gives records its rules do not cover.
#[derive(Debug, Clone, Default)]
pub struct RecodeOptions {
    /// Records no rule matches: a code, or the name of an input variable
    /// whose value they keep (SDA's OTHERCASES); `None`: missing.
    pub other: Option<String>,
    /// The code given to records with a missing input (recorded as a
    /// missing code of the new variable); `None`: system-missing.
    pub missing: Option<String>,
}

/// A new variable as written.
#[derive(Debug, Clone)]
pub struct Derived {
    /// Its manifest entry.
    pub var: Variable,
    /// Records.
    pub rows: u64,
    /// Stored bytes of the input columns read.
    pub input_bytes: u64,
    /// The dataset's generation now.
    pub generation: u64,
    /// What the user should know of the result: recode rules that take
    /// the same values (the first of them gives its code there), rules a
    /// `*` before them leaves nothing to take.
    pub notes: Vec<String>,
}

/// Whether `name` can name a variable (the grammar of filters and
/// grouping arguments must be able to read it unquoted).
pub fn check_name(name: &str) -> Result<()> {
    let bad = !name.starts_with(|c: char| c.is_alphabetic() || c == '_')
        || !name
            .chars()
            .all(|c| c.is_alphanumeric() || matches!(c, '_' | '.' | '$' | '#' | '@'));
    if bad {
        return Err(Error::Invalid(format!(
            "'{name}' cannot be a variable name: names start with a letter or '_' and hold letters, digits and _ . $ # @ only (so that expressions and filters can name them)"
        )));
    }
    const WORDS: [&str; 9] = ["and", "or", "not", "eq", "ne", "lt", "le", "gt", "ge"];
    if WORDS.iter().any(|w| w.eq_ignore_ascii_case(name)) {
        return Err(Error::Invalid(format!(
            "'{name}' cannot be a variable name: it is an operator in expressions"
        )));
    }
    Ok(())
}

/// Checks that `name` may be written: new, or replaced with `replace` and
/// not part of the design.
fn check_target(ds: &Dataset, name: &str, replace: bool) -> Result<String> {
    check_name(name)?;
    if let Ok(v) = ds.variable(name) {
        if !replace {
            return Err(Error::Exists {
                dataset: ds.dir().to_path_buf(),
                variable: v.name.clone(),
            });
        }
        if ds
            .manifest()
            .design
            .as_ref()
            .is_some_and(|d| d.variables().contains(&&v.name))
        {
            return Err(Error::Invalid(format!(
                "{} is part of the survey design and cannot be replaced (change or clear the design first)",
                v.name
            )));
        }
        // A replaced variable keeps its name as spelled.
        return Ok(v.name.clone());
    }
    Ok(name.to_string())
}

/// How the result is stored.
#[derive(Debug, Clone, Copy)]
enum Out {
    /// Integers (value times `10^dec`) in `ty`; `scale`: the node is a
    /// float on a grid, multiplied by it and rounded.
    Int {
        ty: PhysType,
        dec: u32,
        scale: Option<f64>,
    },
    Float,
}

fn out_plan(ty: &Ty, na: bool) -> Out {
    let clamp = |v: i128| v.clamp(i64::MIN as i128 + 1, i64::MAX as i128) as i64;
    match *ty {
        Ty::Int { dec, lo, hi } => Out::Int {
            ty: PhysType::narrowest_int(clamp(lo), clamp(hi), na),
            dec,
            scale: None,
        },
        Ty::Float {
            lo,
            hi,
            grid: Some(g),
        } if g <= 15 => {
            let s = 10f64.powi(g as i32);
            let (a, b) = ((lo * s).floor(), (hi * s).ceil());
            if a.is_finite() && b.is_finite() && a.abs() < 2f64.powi(53) && b.abs() < 2f64.powi(53)
            {
                Out::Int {
                    ty: PhysType::narrowest_int(a as i64, b as i64, na),
                    dec: g,
                    scale: Some(s),
                }
            } else {
                Out::Float
            }
        }
        _ => Out::Float,
    }
}

/// Values of one morsel in the output type.
enum Chunk {
    U8(Vec<u8>),
    I8(Vec<i8>),
    U16(Vec<u16>),
    I16(Vec<i16>),
    U32(Vec<u32>),
    I32(Vec<i32>),
    I64(Vec<i64>),
    F64(Vec<f64>),
}

/// Range and missing count of the values written.
#[derive(Debug, Clone, Copy)]
struct Stats {
    lo: i64,
    hi: i64,
    flo: f64,
    fhi: f64,
    nulls: u64,
}

impl Stats {
    const EMPTY: Stats = Stats {
        lo: i64::MAX,
        hi: i64::MIN,
        flo: f64::INFINITY,
        fhi: f64::NEG_INFINITY,
        nulls: 0,
    };
    fn merge(&mut self, o: &Stats) {
        self.lo = self.lo.min(o.lo);
        self.hi = self.hi.max(o.hi);
        self.flo = self.flo.min(o.flo);
        self.fhi = self.fhi.max(o.fhi);
        self.nulls += o.nulls;
    }
}

macro_rules! narrow {
    ($dst:expr, $v:expr, $t:ty, $null:expr, $st:expr) => {{
        let null = $null as $t;
        let st: &mut Stats = $st;
        // Branch-free, so that it vectorises.
        let (mut lo, mut hi, mut nulls) = (i64::MAX, i64::MIN, 0u64);
        let out: &mut Vec<$t> = $dst;
        out.extend($v.iter().map(|&x| {
            let na = x == NA;
            nulls += na as u64;
            lo = lo.min(if na { i64::MAX } else { x });
            hi = hi.max(if na { i64::MIN } else { x });
            if na {
                null
            } else {
                x as $t
            }
        }));
        st.lo = st.lo.min(lo);
        st.hi = st.hi.max(hi);
        st.nulls += nulls;
    }};
}

impl Chunk {
    fn with_capacity(ty: PhysType, n: usize) -> Chunk {
        match ty {
            PhysType::U8 => Chunk::U8(Vec::with_capacity(n)),
            PhysType::I8 => Chunk::I8(Vec::with_capacity(n)),
            PhysType::U16 => Chunk::U16(Vec::with_capacity(n)),
            PhysType::I16 => Chunk::I16(Vec::with_capacity(n)),
            PhysType::U32 => Chunk::U32(Vec::with_capacity(n)),
            PhysType::I32 => Chunk::I32(Vec::with_capacity(n)),
            PhysType::I64 => Chunk::I64(Vec::with_capacity(n)),
            _ => Chunk::F64(Vec::with_capacity(n)),
        }
    }
}

/// Appends `vals` to `dst` in the output type, adding to `st`.
fn to_chunk(vals: Vals, out: Out, st: &mut Stats, dst: &mut Chunk) {
    match out {
        Out::Float => {
            let (Vals::F(v), Chunk::F64(dst)) = (vals, dst) else {
                unreachable!("float output of an integer node")
            };
            // Branch-free passes (they vectorise); -0.0 becomes 0.
            let start = dst.len();
            dst.extend(v.iter().map(|&x| x + 0.0));
            let s = &dst[start..];
            st.nulls += s.iter().map(|x| x.is_nan() as u64).sum::<u64>();
            // `f64::min`/`max` ignore NaN.
            st.flo = s.iter().fold(st.flo, |a, &x| a.min(x));
            st.fhi = s.iter().fold(st.fhi, |a, &x| a.max(x));
        }
        Out::Int { ty, scale, .. } => {
            let ints: Vec<i64> = match (vals, scale) {
                (Vals::I(v), None) => v,
                (Vals::F(v), Some(s)) => v
                    .iter()
                    .map(|&x| {
                        if x.is_nan() {
                            NA
                        } else {
                            (x * s).round() as i64
                        }
                    })
                    .collect(),
                _ => unreachable!("output plan and node type disagree"),
            };
            let null = ty.null_code();
            match dst {
                Chunk::U8(d) => narrow!(d, ints, u8, null, st),
                Chunk::I8(d) => narrow!(d, ints, i8, null, st),
                Chunk::U16(d) => narrow!(d, ints, u16, null, st),
                Chunk::I16(d) => narrow!(d, ints, i16, null, st),
                Chunk::U32(d) => narrow!(d, ints, u32, null, st),
                Chunk::I32(d) => narrow!(d, ints, i32, null, st),
                Chunk::I64(d) => narrow!(d, ints, i64, null, st),
                Chunk::F64(_) => unreachable!("integer output in a float chunk"),
            }
        }
    }
}

fn append(
    w: &mut ColumnWriter,
    c: &Chunk,
    st: &Stats,
    sum: Option<u64>,
) -> microtab_store::Result<()> {
    let r = Some((st.lo, st.hi, st.nulls > 0));
    match (c, sum) {
        (Chunk::U8(v), _) => w.append_ranged(v, r),
        (Chunk::I8(v), _) => w.append_ranged(v, r),
        (Chunk::U16(v), _) => w.append_ranged(v, r),
        (Chunk::I16(v), _) => w.append_ranged(v, r),
        (Chunk::U32(v), _) => w.append_ranged(v, r),
        (Chunk::I32(v), _) => w.append_ranged(v, r),
        (Chunk::I64(v), Some(s)) => w.append_summed(v, r, s),
        (Chunk::I64(v), None) => w.append_ranged(v, r),
        (Chunk::F64(v), Some(s)) => w.append_summed(v, None, s),
        (Chunk::F64(v), None) => w.append(v),
    }
}

impl Chunk {
    /// The checksum of a whole stripe of a type never packed (i64, f64),
    /// computed on the worker.
    fn stripe_sum(&self) -> Option<u64> {
        let bytes: &[u8] = match self {
            Chunk::I64(v) if v.len() == microtab_store::STRIPE_ROWS => {
                microtab_store::NativeType::as_bytes(&v[..])
            }
            Chunk::F64(v) if v.len() == microtab_store::STRIPE_ROWS => {
                microtab_store::NativeType::as_bytes(&v[..])
            }
            _ => return None,
        };
        Some(microtab_store::xxh3(bytes))
    }
}

/// Morsels computed ahead of the one being written, at most.
const WINDOW: usize = 64;

/// Computes `root` over every record and writes it as column `name`.
fn write_column(
    w: &mut DatasetWriter,
    ds: &Dataset,
    name: &str,
    inputs: &[crate::expr::Input],
    root: &Node,
    out: Out,
) -> Result<(Variable, Stats)> {
    let rows = ds.rows() as usize;
    let cols: Vec<Column> = inputs
        .iter()
        .map(|i| ds.column(&i.var.name))
        .collect::<std::result::Result<_, _>>()?;
    let phys = match out {
        Out::Int { ty, .. } => ty,
        Out::Float => PhysType::F64,
    };
    let cw = w.column_writer(name, phys)?;
    let nm = rows.div_ceil(MORSEL);
    let next = AtomicUsize::new(0);
    let stop = AtomicBool::new(false);
    let written = (Mutex::new(0usize), Condvar::new());
    let failed: Mutex<Option<Error>> = Mutex::new(None);
    let (tx, rx) = std::sync::mpsc::sync_channel::<(usize, Chunk, Stats, Option<u64>)>(2 * WINDOW);
    let result = std::thread::scope(|s| {
        let (stop, written) = (&stop, &written);
        let writer = s.spawn(move || -> Result<(ColumnWriter, Stats)> {
            let mut cw = cw;
            let mut st = Stats::EMPTY;
            let mut pending: BTreeMap<usize, (Chunk, Stats, Option<u64>)> = BTreeMap::new();
            let mut at = 0usize;
            let r = (|| -> Result<()> {
                for (m, c, cs, sum) in rx.iter() {
                    pending.insert(m, (c, cs, sum));
                    while let Some((c, cs, sum)) = pending.remove(&at) {
                        append(&mut cw, &c, &cs, sum)?;
                        st.merge(&cs);
                        at += 1;
                        *written.0.lock().expect("lock") = at;
                        written.1.notify_all();
                    }
                }
                Ok(())
            })();
            if r.is_err() {
                stop.store(true, Ordering::Relaxed);
                written.1.notify_all();
            }
            r.map(|_| (cw, st))
        });
        rayon::broadcast(|_| {
            let tx = tx.clone();
            let mut bufs: Vec<Vec<u64>> = cols.iter().map(|_| Vec::new()).collect();
            loop {
                if stop.load(Ordering::Relaxed) {
                    break;
                }
                let m = next.fetch_add(1, Ordering::Relaxed);
                if m >= nm {
                    break;
                }
                {
                    let mut g = written.0.lock().expect("lock");
                    while m >= *g + WINDOW && !stop.load(Ordering::Relaxed) {
                        g = written.1.wait(g).expect("lock");
                    }
                }
                if m.is_multiple_of(STEP) && (m + AHEAD) < nm {
                    for c in &cols {
                        c.prefetch((m + AHEAD) * MORSEL, STEP * MORSEL);
                    }
                }
                let start = m * MORSEL;
                let n = MORSEL.min(rows - start);
                let views = cols
                    .iter()
                    .zip(bufs.iter_mut())
                    .map(|(c, b)| c.rows_view(start, n, b))
                    .collect::<std::result::Result<Vec<ColumnData<'_>>, _>>();
                let views = match views {
                    Ok(v) => v,
                    Err(e) => {
                        failed.lock().expect("lock").get_or_insert(e.into());
                        stop.store(true, Ordering::Relaxed);
                        written.1.notify_all();
                        break;
                    }
                };
                let mut st = Stats::EMPTY;
                let mut chunk = Chunk::with_capacity(phys, n);
                for a in (0..n).step_by(SUB) {
                    let b = (a + SUB).min(n);
                    let sub: Vec<ColumnData<'_>> = views.iter().map(|v| slice(v, a, b)).collect();
                    let vals = root.eval(inputs, &sub, b - a);
                    to_chunk(vals, out, &mut st, &mut chunk);
                }
                let sum = chunk.stripe_sum();
                if tx.send((m, chunk, st, sum)).is_err() {
                    break;
                }
            }
        });
        drop(tx);
        writer.join().expect("writer thread")
    });
    if let Some(e) = failed.into_inner().expect("lock") {
        return Err(e);
    }
    let (cw, st) = result?;
    if let Out::Int { ty, .. } = out {
        // The type was chosen from the range derived before reading; a
        // value beyond it would have been cast into a wrong one (or onto
        // the null code). Never expected: refused rather than written.
        let (tlo, thi) = ty.int_range();
        let null = ty.null_code();
        if st.lo <= st.hi && (st.lo < tlo || st.hi > thi || st.lo == null || st.hi == null) {
            return Err(Error::Invalid(format!(
                "internal error: {name}'s values reach {}..{}, outside the range derived for it from its inputs' stored ranges; nothing was written",
                st.lo, st.hi
            )));
        }
    }
    let (kind, dec) = match out {
        Out::Int { dec, .. } => (Kind::Int, dec),
        Out::Float => (Kind::Float, 0),
    };
    let mut var = Variable::new(name, kind, phys);
    var.decimals = dec;
    var.nulls = st.nulls;
    match out {
        Out::Int { ty, .. } => {
            if st.nulls > 0 {
                var.null_code = Some(ty.null_code());
            }
            if st.lo <= st.hi {
                var.min = Some(Number::Int(st.lo));
                var.max = Some(Number::Int(st.hi));
            }
        }
        Out::Float => {
            if st.flo <= st.fhi {
                var.min = Some(Number::Float(st.flo));
                var.max = Some(Number::Float(st.fhi));
            }
        }
    }
    let var = cw.finish(var)?;
    Ok((var, st))
}

/// Checks value labels against the kind of variable `out` makes.
fn check_labels(out: Out, opts: &DeriveOptions) -> Result<()> {
    let v = match out {
        Out::Int { ty, dec, .. } => {
            let mut v = Variable::new("the new variable", Kind::Int, ty);
            v.decimals = dec;
            v
        }
        Out::Float => Variable::new("the new variable", Kind::Float, PhysType::F64),
    };
    for (value, _) in &opts.value_labels {
        codec::stored_code(&v, &[], value).map_err(|e| Error::Invalid(e.to_string()))?;
    }
    Ok(())
}

/// Sets the label and value labels, adds the variable and commits.
fn publish(
    mut w: DatasetWriter,
    ds: &Dataset,
    mut var: Variable,
    opts: &DeriveOptions,
    input_bytes: u64,
) -> Result<Derived> {
    var.label = opts.label.clone().filter(|l| !l.is_empty());
    for (value, label) in &opts.value_labels {
        let code = codec::stored_code(&var, &[], value)
            .map_err(|e| Error::Invalid(e.to_string()))?
            .ok_or_else(|| {
                Error::Invalid(format!("'{value}' is not a value {} can take", var.name))
            })?;
        var.value_labels
            .insert(codec::display_code(&var, code), label.clone());
    }
    let rows = ds.rows();
    w.set_variable(var.clone());
    w.commit(rows)?;
    Ok(Derived {
        var,
        rows,
        input_bytes,
        generation: ds.manifest().generation + 1,
        notes: Vec::new(),
    })
}

/// `microtab compute DS NAME = EXPR`: writes the expression's value for
/// every record as the new variable `name`.
pub fn compute(dir: &Path, name: &str, expr: &str, opts: &DeriveOptions) -> Result<Derived> {
    let mut w = DatasetWriter::extend(dir)?;
    let ds = w.snapshot().expect("an extending writer");
    let name = &check_target(&ds, name, opts.replace)?;
    let mut prog = Program::parse(&ds, expr)?;
    tabulate(&mut prog.root, &prog.inputs);
    // A null code is always reserved: which operations can give a missing
    // value (overflow to infinity, …) is not worth guessing.
    let out = out_plan(&prog.root.ty, true);
    check_labels(out, opts)?;
    let input_bytes = prog.inputs.iter().map(|i| i.var.bytes).sum();
    let (var, _) = write_column(&mut w, &ds, name, &prog.inputs, &prog.root, out)?;
    publish(w, &ds, var, opts, input_bytes)
}

/// Whether `cond` (quotes aside) holds parentheses or comparison signs: a
/// filter over the inputs rather than a list of values of the one input.
fn looks_like_filter(cond: &str) -> bool {
    walk(cond).any(|ch| ch.out && matches!(ch.c, '(' | '<' | '>' | '=' | '!')) || cond.contains('`')
}

/// `cond` without the spaces around comparison signs (outside quotes), so
/// that `AGE >= 65` reads as the filter term `AGE>=65`.
fn compact_ops(cond: &str) -> String {
    let mut out = String::new();
    let op = |c: Option<char>| matches!(c, Some('<' | '>' | '=' | '!'));
    for ch in walk(cond) {
        if ch.out && ch.c.is_whitespace() {
            let next = cond[ch.at..].chars().find(|c| !c.is_whitespace());
            if op(cond[..ch.at].trim_end().chars().last()) || op(next) {
                continue;
            }
        }
        out.push_str(&cond[ch.at..ch.at + ch.len]);
    }
    out
}

/// A code as written: its digits and decimals (`1.5`: (15, 1)).
type Code = (i128, u32);

/// One parsed rule.
struct Rule {
    code: Option<Code>,
    terms: Vec<(usize, Predicate)>,
    label: Option<String>,
    text: String,
    all: bool,
}

/// A recode's input variables and their dictionaries.
struct Inputs {
    vars: Vec<Variable>,
    dicts: Vec<Vec<String>>,
}

impl Inputs {
    fn new(ds: &Dataset, from: &[String]) -> Result<Inputs> {
        // One list grammar: a whole name, or names split at commas and
        // spaces outside quotes.
        let from = crate::list::var_names(ds, from);
        if from.is_empty() || from.len() > 6 {
            return Err(Error::Invalid(format!(
                "a recode takes one to six input variables, not {}",
                from.len()
            )));
        }
        let mut vars: Vec<Variable> = Vec::new();
        for f in &from {
            let v = ds.variable(f)?;
            if !vars.iter().any(|x| x.name == v.name) {
                vars.push(v.clone());
            }
        }
        let dicts =
            (vars.iter().map(|v| crate::physical::dict_of(ds, v))).collect::<Result<_>>()?;
        Ok(Inputs { vars, dicts })
    }

    /// The input `name` is (by index), if it is one.
    fn position(&self, ds: &Dataset, name: &str) -> Result<Option<usize>> {
        let v = ds.variable(name)?;
        Ok(self.vars.iter().position(|x| x.name == v.name))
    }

    /// Their names, for messages.
    fn names(&self) -> String {
        let names: Vec<&str> = self.vars.iter().map(|v| v.name.as_str()).collect();
        names.join(", ")
    }
}

/// Rule `k` (from 1) of a recode: `[CODE =] CONDITION ["label"]`.
fn parse_rule(ds: &Dataset, ins: &Inputs, k: usize, raw: &str) -> Result<Rule> {
    let r = raw.trim();
    let bad = |why: String| Error::Invalid(format!("bad recode rule {k} '{r}': {why}"));
    let (body, label) = match trailing_label(r, &['(', ',', '=', '<', '>']) {
        Some((body, label)) => (body, Some(label)),
        None => (r, None),
    };
    // `CODE = condition`: a number before the first `=` (not `==`).
    let mut code = None;
    let mut cond = body;
    if let Some(eq) = body.find('=') {
        if !body[eq + 1..].starts_with('=') {
            if let Some(c) = codec::parse_exact(body[..eq].trim()) {
                code = Some(c);
                cond = body[eq + 1..].trim();
            }
        }
    }
    if cond.is_empty() {
        return Err(bad(
            "expected a condition (values, ranges or a filter)".into()
        ));
    }
    let mut terms = Vec::new();
    let all = cond == "*";
    if !all {
        let filter = if ins.vars.len() == 1 && !looks_like_filter(cond) {
            format!("{}({cond})", quote_name(&ins.vars[0].name))
        } else {
            compact_ops(cond)
        };
        for t in parse_filter(&filter).map_err(|e| bad(e.to_string()))? {
            if matches!(t.cond, crate::filter::Cond::Mixed(_)) {
                return Err(bad(format!(
                    "'{}' combines several variables with 'or' or 'not'; a rule's condition is terms that must all hold (write one rule per alternative)",
                    t.text
                )));
            }
            let Some(i) = ins.position(ds, &t.var).map_err(|e| bad(e.to_string()))? else {
                return Err(bad(format!(
                    "{} is not one of the recode's input variables ({})",
                    ds.variable(&t.var)?.name,
                    ins.names()
                )));
            };
            let (var, dict) = (&ins.vars[i], &ins.dicts[i]);
            crate::filter::check_text_values(&t, var, &[dict])?;
            terms.push((i, resolve(&t, var, dict).map_err(|e| bad(e.to_string()))?));
        }
    }
    Ok(Rule {
        code,
        terms,
        label,
        text: cond.to_string(),
        all,
    })
}

/// The rules of a recode, and their codes as given (1, 2, 3 … when none
/// is).
fn parse_rules(ds: &Dataset, ins: &Inputs, rules: &str) -> Result<(Vec<Rule>, Vec<Code>)> {
    let parsed: Vec<Rule> = split(rules, false, |c| c == ';' || c == '\n')
        .into_iter()
        .filter(|r| !r.trim().is_empty())
        .enumerate()
        .map(|(k, raw)| parse_rule(ds, ins, k + 1, raw))
        .collect::<Result<_>>()?;
    if parsed.is_empty() {
        return Err(Error::Invalid(
            "a recode needs at least one rule, as in '0-17 \"Child\"; 18-64 \"Adult\"; 65-* \"Senior\"'"
                .into(),
        ));
    }
    let with_codes = parsed.iter().filter(|r| r.code.is_some()).count();
    if with_codes != 0 && with_codes != parsed.len() {
        return Err(Error::Invalid(
            "give every recode rule its code (CODE = condition) or none (codes 1, 2, 3 …)".into(),
        ));
    }
    let codes = (parsed.iter().enumerate())
        .map(|(i, r)| r.code.unwrap_or((i as i128 + 1, 0)))
        .collect();
    Ok((parsed, codes))
}

/// What a recode gives: the rules' codes, other cases and records with a
/// missing input, with the decimals they share and their range.
struct Outputs {
    dec: u32,
    codes: Vec<i64>,
    other: Other,
    missing: Option<i64>,
    lo: i128,
    hi: i128,
}

/// What other cases get: a code, or the value of an input (by index).
enum OtherIs {
    Code(Code),
    Input(usize),
}

/// The code for other cases: a number, or one of the inputs whose value
/// they keep.
fn other_cases(ds: &Dataset, ins: &Inputs, other: &str) -> Result<OtherIs> {
    if let Some(c) = codec::parse_exact(other.trim()) {
        return Ok(OtherIs::Code(c));
    }
    let Some(i) = ins.position(ds, other.trim())? else {
        return Err(Error::Invalid(format!(
            "'{other}' for other cases: expected a code or one of the input variables of the recode ({})",
            ins.names()
        )));
    };
    if ins.vars[i].kind != Kind::Int {
        return Err(Error::Invalid(format!(
            "other cases can keep the value of an integer or implied-decimal variable only, not of {}",
            ins.vars[i].name
        )));
    }
    Ok(OtherIs::Input(i))
}

fn outputs(
    ds: &Dataset,
    ins: &Inputs,
    parsed: &[Rule],
    codes: &[Code],
    ropts: &RecodeOptions,
) -> Result<Outputs> {
    let (other_code, other_var) = match ropts.other.as_deref() {
        Some(o) => match other_cases(ds, ins, o)? {
            OtherIs::Code(c) => (Some(c), None),
            OtherIs::Input(i) => (None, Some(i)),
        },
        None => (None, None),
    };
    let missing_code = (ropts.missing.as_ref())
        .map(|m| {
            codec::parse_exact(m.trim()).ok_or_else(|| {
                Error::Invalid(format!(
                    "the code for records with a missing input must be a number, not '{m}'"
                ))
            })
        })
        .transpose()?;
    let dec = (codes.iter().chain(&other_code).chain(&missing_code))
        .map(|c| c.1)
        .chain(other_var.map(|i| ins.vars[i].decimals))
        .max()
        .unwrap_or(0);
    if dec > 9 {
        return Err(Error::Invalid(
            "recode codes have at most 9 decimals".into(),
        ));
    }
    let scaled = |(m, d): (i128, u32)| -> Result<i64> {
        codec::rescale_exact(m, d, dec)
            .filter(|&v| v != NA)
            .ok_or_else(|| Error::Invalid(format!("code {m}e-{d} is too large")))
    };
    let codes: Vec<i64> = codes.iter().map(|&c| scaled(c)).collect::<Result<_>>()?;
    let missing = missing_code.map(scaled).transpose()?;
    if let Some(k) = missing.and_then(|m| codes.iter().position(|&c| c == m)) {
        return Err(Error::Invalid(format!(
            "the code for records with a missing input, {}, is also the code of rule {} '{}', whose records would count as missing; choose another code",
            ropts.missing.as_deref().unwrap_or_default().trim(),
            k + 1,
            parsed[k].text
        )));
    }
    let other = match (other_code, other_var) {
        (Some(c), _) => Other::Code(scaled(c)?),
        (None, Some(i)) => Other::Input(i, 10i64.pow(dec - ins.vars[i].decimals)),
        _ => Other::Missing,
    };
    let fixed = codes.iter().chain(&missing).chain(match &other {
        Other::Code(c) => Some(c),
        _ => None,
    });
    let (mut lo, mut hi) = (i128::MAX, i128::MIN);
    for &c in fixed {
        (lo, hi) = (lo.min(c as i128), hi.max(c as i128));
    }
    if let Other::Input(i, f) = other {
        let v = &ins.vars[i];
        let (a, b) = (
            v.min.map_or(0, Number::as_i64) as i128 * f as i128,
            v.max.map_or(0, Number::as_i64) as i128 * f as i128,
        );
        if a.abs() > i64::MAX as i128 || b.abs() > i64::MAX as i128 {
            return Err(Error::Invalid(format!(
                "other cases keep the value of {}, which does not fit with {dec} decimals",
                v.name
            )));
        }
        (lo, hi) = (lo.min(a), hi.max(b));
    }
    Ok(Outputs {
        dec,
        codes,
        other,
        missing,
        lo,
        hi,
    })
}

/// `microtab recode DS NAME --from VARS RULES`: SDA's RECODE. Rules are
/// separated by `;` or newlines, each `[CODE =] CONDITION ["label"]`: the
/// condition is values and ranges of the single input (`18-64`,
/// `1,3-5`, `"New York"`), a filter over the inputs (`AGE(18-34)
/// SEX(1)`, `AGE>=65`), or `*` (any record). Without codes the rules give
/// 1, 2, 3 …. A record takes the first rule it matches; records with a
/// missing input get the `missing` code (or system-missing), records no
/// rule matches get `other` (or system-missing). Unlabeled rules are
/// labeled by their condition, as SDA labels temporary recodes.
pub fn recode(
    dir: &Path,
    name: &str,
    from: &[String],
    rules: &str,
    ropts: &RecodeOptions,
    opts: &DeriveOptions,
) -> Result<Derived> {
    let mut w = DatasetWriter::extend(dir)?;
    let ds = w.snapshot().expect("an extending writer");
    let name = &check_target(&ds, name, opts.replace)?;
    let ins = Inputs::new(&ds, from)?;
    let (parsed, codes) = parse_rules(&ds, &ins, rules)?;
    let notes = overlaps(&ins, &parsed);
    let o = outputs(&ds, &ins, &parsed, &codes, ropts)?;
    let (inputs, nodes) = load_nodes(&ds, &ins.vars);
    let can_miss = inputs
        .iter()
        .any(|i| i.var.nulls > 0 || !i.var.missing_codes.is_empty());
    let catch_all = parsed.iter().any(|r| r.all);
    let na = (o.missing.is_none() && can_miss) || (matches!(o.other, Other::Missing) && !catch_all);
    let case = Case {
        inputs: nodes,
        arms: (parsed.iter().zip(&o.codes))
            .map(|(r, &c)| (r.terms.clone(), c))
            .collect(),
        other: o.other,
        missing: o.missing.unwrap_or(NA),
    };
    let (dec, lo, hi) = (o.dec, o.lo.min(o.hi), o.hi.max(o.lo));
    let mut node = case_node(case, Ty::Int { dec, lo, hi }, na);
    tabulate(&mut node, &inputs);
    let out = out_plan(&node.ty, true);
    check_labels(out, opts)?;
    let input_bytes = ins.vars.iter().map(|v| v.bytes).sum();
    let (mut var, _) = write_column(&mut w, &ds, name, &inputs, &node, out)?;
    // Labels: each rule's (or its condition), the first for a code.
    for (r, &c) in parsed.iter().zip(&o.codes) {
        let key = codec::display_int(dec, c);
        let label = r.label.clone().unwrap_or_else(|| r.text.clone());
        var.value_labels.entry(key).or_insert(label);
    }
    if let Some(m) = o.missing {
        var.missing_codes = vec![m as f64];
    }
    let mut d = publish(w, &ds, var, opts, input_bytes)?;
    d.notes = notes;
    Ok(d)
}

/// Rules that take the same values of one input (a record gets the first
/// rule's code, so the later rule's share of those values is silently
/// someone else's), and rules after a `*` (which takes every record left).
fn overlaps(ins: &Inputs, rules: &[Rule]) -> Vec<String> {
    let mut notes = Vec::new();
    if let Some(k) = rules.iter().position(|r| r.all) {
        if k + 1 < rules.len() {
            notes.push(format!(
                "recode rule {} '*' takes every record the rules before it leave, so rule{} {} never give{} a code",
                k + 1,
                if k + 2 < rules.len() { "s" } else { "" },
                (k + 2..=rules.len()).map(|i| i.to_string()).collect::<Vec<_>>().join(", "),
                if k + 2 < rules.len() { "" } else { "s" },
            ));
        }
    }
    fn single(r: &Rule) -> Option<(usize, &Predicate)> {
        match r.terms.as_slice() {
            [(i, p)] if !r.all => Some((*i, p)),
            _ => None,
        }
    }
    for (a, ra) in rules.iter().enumerate() {
        let Some((ia, pa)) = single(ra) else { continue };
        for (b, rb) in rules.iter().enumerate().skip(a + 1) {
            let Some((ib, pb)) = single(rb) else { continue };
            if ia != ib {
                continue;
            }
            let var = &ins.vars[ia];
            let shared = shared_values(pa, pb, !ins.dicts[ia].is_empty(), var.decimals);
            let Some(shared) = shared else { continue };
            notes.push(format!(
                "recode rules {} '{}' and {} '{}' both take {}{shared}: a record gets the code of the first rule it matches",
                a + 1,
                ra.text,
                b + 1,
                rb.text,
                var.name,
            ));
        }
    }
    notes
}

/// The values two predicates both take (`" 10-17"`, or `""` for text,
/// whose codes are no values to show; stored integers shown with
/// `decimals`; the first stretch, `…` when there are more), or `None` when
/// they share none ([`Predicate::intersect`]).
fn shared_values(a: &Predicate, b: &Predicate, text: bool, decimals: u32) -> Option<String> {
    let end = |v: i64| match v {
        i64::MIN | i64::MAX => "*".to_string(),
        v => codec::display_int(decimals, v),
    };
    let show = |x: f64| {
        if x.is_infinite() {
            "*".to_string()
        } else {
            format!("{x}")
        }
    };
    let (first, more) = match a.intersect(b) {
        Predicate::Ints(r) => {
            let &(lo, hi) = r.first()?;
            let first = if lo == hi {
                end(lo)
            } else {
                format!("{}-{}", end(lo), end(hi))
            };
            (first, r.len() > 1)
        }
        Predicate::Floats(r) => {
            let i = r.first()?;
            let first = if i.lo == i.hi {
                show(i.lo)
            } else {
                format!("values from {} to {}", show(i.lo), show(i.hi))
            };
            (first, r.len() > 1)
        }
    };
    if text {
        return Some(String::new());
    }
    Some(format!(" {first}{}", if more { " …" } else { "" }))
}
