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
use crate::expr::{case_node, load_nodes, tabulate, Case, Node, Other, Program, Ty, Vals, NA};
use crate::filter::{parse_filter, resolve, Predicate};
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
            return Err(Error::Invalid(format!(
                "{} already has a variable {} (give --replace to overwrite it)",
                ds.dir().display(),
                v.name
            )));
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

/// Rows evaluated at a time: vectors that stay in the core's caches (and
/// below the allocator's mapping threshold).
const SUB: usize = 2048;

/// Rows `a..b` of a view.
pub(crate) fn slice<'a>(d: &ColumnData<'a>, a: usize, b: usize) -> ColumnData<'a> {
    match *d {
        ColumnData::U8(v) => ColumnData::U8(&v[a..b]),
        ColumnData::I8(v) => ColumnData::I8(&v[a..b]),
        ColumnData::U16(v) => ColumnData::U16(&v[a..b]),
        ColumnData::I16(v) => ColumnData::I16(&v[a..b]),
        ColumnData::U32(v) => ColumnData::U32(&v[a..b]),
        ColumnData::I32(v) => ColumnData::I32(&v[a..b]),
        ColumnData::I64(v) => ColumnData::I64(&v[a..b]),
        ColumnData::F32(v) => ColumnData::F32(&v[a..b]),
        ColumnData::F64(v) => ColumnData::F64(&v[a..b]),
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

/// Splits `s` at `;` and newlines outside double quotes.
fn split_rules(s: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let (mut quote, mut start) = (false, 0);
    for (i, c) in s.char_indices() {
        if c == '"' {
            quote = !quote;
        } else if (c == ';' || c == '\n') && !quote {
            out.push(&s[start..i]);
            start = i + 1;
        }
    }
    out.push(&s[start..]);
    out
}

/// Whether `cond` (quotes aside) holds parentheses or comparison signs: a
/// filter over the inputs rather than a list of values of the one input.
fn looks_like_filter(cond: &str) -> bool {
    let mut quote = false;
    for c in cond.chars() {
        if c == '"' {
            quote = !quote;
        } else if !quote && matches!(c, '(' | '<' | '>' | '=' | '!' | '`') {
            return true;
        }
    }
    false
}

/// `cond` without the spaces around comparison signs (outside quotes), so
/// that `AGE >= 65` reads as the filter term `AGE>=65`.
fn compact_ops(cond: &str) -> String {
    let mut out = String::new();
    let mut quote = false;
    let chars: Vec<char> = cond.chars().collect();
    for (i, &c) in chars.iter().enumerate() {
        if c == '"' {
            quote = !quote;
        }
        if !quote && c.is_whitespace() {
            let prev = out.trim_end().chars().last();
            let next = chars[i..].iter().find(|c| !c.is_whitespace());
            let op = |c: Option<&char>| matches!(c, Some('<' | '>' | '=' | '!'));
            if op(prev.as_ref()) || op(next) {
                continue;
            }
        }
        out.push(c);
    }
    out
}

/// One parsed rule.
struct Rule {
    code: Option<(i128, u32)>,
    terms: Vec<(usize, Predicate)>,
    label: Option<String>,
    text: String,
    all: bool,
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
    if from.is_empty() || from.len() > 6 {
        return Err(Error::Invalid(format!(
            "a recode takes one to six input variables (--from), not {}",
            from.len()
        )));
    }
    let mut vars: Vec<Variable> = Vec::new();
    for f in from {
        let v = ds.variable(f)?;
        if !vars.iter().any(|x| x.name == v.name) {
            vars.push(v.clone());
        }
    }
    let dicts: Vec<Vec<String>> = vars
        .iter()
        .map(|v| crate::physical::dict_of(&ds, v))
        .collect::<Result<_>>()?;
    let bad = |k: usize, text: &str, why: String| {
        Error::Invalid(format!("bad recode rule {k} '{}': {why}", text.trim()))
    };
    let mut parsed: Vec<Rule> = Vec::new();
    for (k, raw) in split_rules(rules)
        .into_iter()
        .filter(|r| !r.trim().is_empty())
        .enumerate()
    {
        let k = k + 1;
        let r = raw.trim();
        let (body, label) = match r
            .strip_suffix('"')
            .and_then(|h| h.rfind('"').map(|q| (h, q)))
        {
            Some((h, q))
                if !h[..q].trim().is_empty()
                    && !h[..q].trim_end().ends_with(['(', ',', '=', '<', '>']) =>
            {
                (h[..q].trim(), Some(h[q + 1..].to_string()))
            }
            _ => (r, None),
        };
        // `CODE = condition`: a number before the first `=` (not `==`).
        let mut code = None;
        let mut cond = body;
        if let Some(eq) = body.find('=') {
            let left = body[..eq].trim();
            if !body[eq + 1..].starts_with('=') {
                if let Some(c) = codec::parse_exact(left) {
                    code = Some(c);
                    cond = body[eq + 1..].trim();
                }
            }
        }
        if cond.is_empty() {
            return Err(bad(
                k,
                r,
                "expected a condition (values, ranges or a filter)".into(),
            ));
        }
        let mut terms = Vec::new();
        let all = cond == "*";
        if !all {
            let filter = if vars.len() == 1 && !looks_like_filter(cond) {
                format!("`{}`({cond})", vars[0].name)
            } else {
                compact_ops(cond)
            };
            let parsed_terms = parse_filter(&filter).map_err(|e| bad(k, r, e.to_string()))?;
            for t in parsed_terms {
                let v = ds.variable(&t.var).map_err(|e| bad(k, r, e.to_string()))?;
                let Some(i) = vars.iter().position(|x| x.name == v.name) else {
                    return Err(bad(
                        k,
                        r,
                        format!(
                            "{} is not one of the recode's input variables (--from {})",
                            v.name,
                            from.join(",")
                        ),
                    ));
                };
                crate::filter::check_text_values(&t, &vars[i], &[&dicts[i]])?;
                let p = resolve(&t, &vars[i], &dicts[i]).map_err(|e| bad(k, r, e.to_string()))?;
                terms.push((i, p));
            }
        }
        parsed.push(Rule {
            code,
            terms,
            label,
            text: cond.to_string(),
            all,
        });
    }
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
    let codes: Vec<(i128, u32)> = parsed
        .iter()
        .enumerate()
        .map(|(i, r)| r.code.unwrap_or((i as i128 + 1, 0)))
        .collect();
    // Other cases and the missing code.
    let mut other_var = None;
    let mut other_code = None;
    if let Some(o) = &ropts.other {
        if let Some(c) = codec::parse_exact(o.trim()) {
            other_code = Some(c);
        } else {
            let v = ds.variable(o.trim())?;
            let Some(i) = vars.iter().position(|x| x.name == v.name) else {
                return Err(Error::Invalid(format!(
                    "--other {o}: expected a code or one of the input variables (--from {})",
                    from.join(",")
                )));
            };
            if vars[i].kind != Kind::Int {
                return Err(Error::Invalid(format!(
                    "--other {}: other cases can keep the value of an integer or implied-decimal variable only",
                    vars[i].name
                )));
            }
            other_var = Some(i);
        }
    }
    let missing_code = match &ropts.missing {
        None => None,
        Some(m) => Some(codec::parse_exact(m.trim()).ok_or_else(|| {
            Error::Invalid(format!(
                "--missing {m}: expected a number (the code for records with a missing input)"
            ))
        })?),
    };
    let dec = codes
        .iter()
        .chain(other_code.iter())
        .chain(missing_code.iter())
        .map(|c| c.1)
        .chain(other_var.map(|i| vars[i].decimals))
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
    let out_codes: Vec<i64> = codes.iter().map(|&c| scaled(c)).collect::<Result<_>>()?;
    let missing = missing_code.map(scaled).transpose()?;
    if let Some(m) = missing {
        if let Some(k) = out_codes.iter().position(|&c| c == m) {
            return Err(Error::Invalid(format!(
                "--missing {}: rule {} '{}' gives that code too, and its records would count as missing; choose another code",
                ropts.missing.as_deref().unwrap_or_default(),
                k + 1,
                parsed[k].text
            )));
        }
    }
    let other = match (other_code, other_var) {
        (Some(c), _) => Other::Code(scaled(c)?),
        (None, Some(i)) => Other::Input(i, 10i64.pow(dec - vars[i].decimals)),
        _ => Other::Missing,
    };
    // The range of the outputs.
    let mut lo = i128::MAX;
    let mut hi = i128::MIN;
    for &c in out_codes.iter().chain(missing.iter()) {
        lo = lo.min(c as i128);
        hi = hi.max(c as i128);
    }
    if let Other::Code(c) = other {
        lo = lo.min(c as i128);
        hi = hi.max(c as i128);
    }
    if let Other::Input(i, f) = other {
        let (a, b) = (
            vars[i].min.map_or(0, Number::as_i64) as i128 * f as i128,
            vars[i].max.map_or(0, Number::as_i64) as i128 * f as i128,
        );
        if a.abs() > i64::MAX as i128 || b.abs() > i64::MAX as i128 {
            return Err(Error::Invalid(format!(
                "--other {}: its values do not fit with {dec} decimals",
                vars[i].name
            )));
        }
        lo = lo.min(a);
        hi = hi.max(b);
    }
    let (inputs, nodes) = load_nodes(&ds, &vars);
    let can_miss = inputs
        .iter()
        .any(|i| i.var.nulls > 0 || !i.var.missing_codes.is_empty());
    let catch_all = parsed.iter().any(|r| r.all);
    let na = (missing.is_none() && can_miss) || (matches!(other, Other::Missing) && !catch_all);
    let case = Case {
        inputs: nodes,
        arms: parsed
            .iter()
            .zip(&out_codes)
            .map(|(r, &c)| (r.terms.clone(), c))
            .collect(),
        other,
        missing: missing.unwrap_or(NA),
    };
    let mut node = case_node(
        case,
        Ty::Int {
            dec,
            lo: lo.min(hi),
            hi: hi.max(lo),
        },
        na,
    );
    tabulate(&mut node, &inputs);
    let out = out_plan(&node.ty, true);
    check_labels(out, opts)?;
    let input_bytes = vars.iter().map(|v| v.bytes).sum();
    let (mut var, _) = write_column(&mut w, &ds, name, &inputs, &node, out)?;
    // Labels: each rule's (or its condition), the first for a code.
    for (r, &c) in parsed.iter().zip(&out_codes) {
        let key = codec::display_int(dec, c);
        let label = r.label.clone().unwrap_or_else(|| r.text.clone());
        var.value_labels.entry(key).or_insert(label);
    }
    if let Some(m) = missing {
        var.missing_codes = vec![m as f64];
    }
    publish(w, &ds, var, opts, input_bytes)
}
