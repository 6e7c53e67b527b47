//! What a weighting adjusts to: the terms of the method (cells, margins,
//! calibration variables), the population totals read from a totals file,
//! and the records collapsed into groups that share every adjustment
//! variable's value (each group is one row of the calibration model, with
//! its sum of each weight).

use super::error::WeightError;
use super::write::BLOCK;
use microtab_store::{codec, Column, ColumnData, Dataset, Kind, Variable};
use rayon::prelude::*;
use std::collections::{BTreeMap, HashMap};
use std::path::Path;

/// One row of a totals file: `variable,value,total`.
#[derive(Debug, Clone, PartialEq)]
pub struct TotalRow {
    /// The variable as written: a name, `A*B` for crossed variables, or
    /// `(Intercept)` for the population size.
    pub variable: String,
    /// The value (`a*b` for crossed variables; empty for a numeric
    /// variable and the intercept).
    pub value: String,
    /// The population total.
    pub total: f64,
    /// The line of the file it was read from (from 1, the header line 1).
    pub line: u64,
}

/// Reads a totals file: a CSV file with the header `variable,value,total`
/// (any case, in that order, other columns refused).
pub fn read_totals(path: &Path) -> Result<Vec<TotalRow>, WeightError> {
    let bad = |line: u64, message: String| WeightError::Totals {
        path: path.to_path_buf(),
        line,
        message,
    };
    let mut r = csv::ReaderBuilder::new()
        .has_headers(true)
        .flexible(true)
        .trim(csv::Trim::All)
        .from_path(path)
        .map_err(|e| bad(0, e.to_string()))?;
    let header: Vec<String> = r
        .headers()
        .map_err(|e| bad(1, e.to_string()))?
        .iter()
        .map(|h| h.trim_start_matches('\u{feff}').to_ascii_lowercase())
        .collect();
    if header != ["variable", "value", "total"] {
        return Err(bad(
            1,
            format!(
                "expected the header variable,value,total, found {}",
                header.join(",")
            ),
        ));
    }
    let mut rows = Vec::new();
    for rec in r.records() {
        let rec = rec.map_err(|e| bad(e.position().map_or(0, |p| p.line()), e.to_string()))?;
        let line = rec.position().map_or(0, |p| p.line());
        if rec.iter().all(str::is_empty) {
            continue;
        }
        if rec.len() != 3 {
            return Err(bad(
                line,
                format!(
                    "expected 3 fields (variable,value,total), found {}",
                    rec.len()
                ),
            ));
        }
        let total: f64 = rec[2].parse().map_err(|_| {
            bad(
                line,
                format!(
                    "the total '{}' of {} {} is not a number",
                    &rec[2], &rec[0], &rec[1]
                ),
            )
        })?;
        if !total.is_finite() {
            return Err(bad(
                line,
                format!("the total of {} {} is not finite", &rec[0], &rec[1]),
            ));
        }
        if rec[0].is_empty() {
            return Err(bad(line, "the variable is empty".into()));
        }
        rows.push(TotalRow {
            variable: rec[0].to_string(),
            value: rec[1].to_string(),
            total,
            line,
        });
    }
    if rows.is_empty() {
        return Err(bad(1, "no totals in the file".into()));
    }
    Ok(rows)
}

/// A variable an adjustment reads, with how its values are told apart.
pub(crate) struct Input {
    pub var: Variable,
    /// Text variables: the dictionary (codes index it).
    pub dict: Vec<String>,
    /// Categorical (its values are levels listed by the totals) or
    /// numeric (its values enter the model as numbers).
    pub numeric: bool,
    /// Categorical: the stored codes that are levels, ascending.
    pub levels: Vec<f64>,
    /// Numeric: the distinct values in the data, ascending (found by a
    /// first pass).
    pub values: Vec<f64>,
    /// Text values the totals list that no record has.
    pub absent: Vec<String>,
}

impl Input {
    /// Number of distinct keys this variable contributes to a group key
    /// (levels or values; records outside never get a key).
    fn radix(&self) -> usize {
        if self.numeric {
            self.values.len()
        } else {
            self.levels.len()
        }
        .max(1)
    }
}

/// A term of the model: a numeric variable (one column), or one variable
/// or several crossed, whose listed cells are columns.
#[derive(Debug, Clone)]
pub(crate) struct Term {
    /// As shown: `AGE`, `SEX`, `AGEGRP*SEX`.
    pub name: String,
    /// Indices into the inputs.
    pub vars: Vec<usize>,
    pub numeric: bool,
    /// Categorical: each cell's levels (per variable, an index into its
    /// input's `levels`), its value as shown and its population total.
    pub cells: Vec<Cell>,
    /// Numeric: the total of the variable.
    pub total: f64,
    /// Categorical: the cell of each combination of levels.
    pub index: HashMap<Vec<u32>, usize>,
}

/// A listed cell of a categorical term (its levels are the key of
/// [`Term::index`]).
#[derive(Debug, Clone)]
pub(crate) struct Cell {
    pub shown: String,
    pub total: f64,
}

/// The model: inputs, terms and whether an intercept (population size) is
/// a target.
pub(crate) struct Model {
    pub inputs: Vec<Input>,
    pub terms: Vec<Term>,
    pub intercept: Option<f64>,
}

/// How a method's text names its terms.
pub(crate) struct TermSpec {
    pub vars: Vec<String>,
    /// `factor(X)`: categorical whatever the totals say.
    pub factor: bool,
}

/// Splits a method's text into terms: `sep` between terms, `*` between
/// crossed variables, `factor(X)` marking a categorical variable.
pub(crate) fn parse_terms(text: &str, sep: char) -> Result<Vec<TermSpec>, WeightError> {
    let mut out = Vec::new();
    for raw in text.split(sep).map(str::trim) {
        if raw.is_empty() {
            continue;
        }
        let mut factor = false;
        let mut vars = Vec::new();
        for v in raw.split('*').map(str::trim) {
            let lower = v.to_ascii_lowercase();
            let name = if lower.starts_with("factor(") && v.ends_with(')') {
                factor = true;
                v[7..v.len() - 1].trim()
            } else {
                v
            };
            let name = name.trim_matches('`');
            if name.is_empty() {
                return Err(WeightError::Spec(format!(
                    "'{raw}': a variable name is empty"
                )));
            }
            vars.push(name.to_string());
        }
        out.push(TermSpec { vars, factor });
    }
    if out.is_empty() {
        return Err(WeightError::Spec(format!("'{text}' names no variable")));
    }
    Ok(out)
}

/// Whether a totals row's variable names `vars` (in any order; the order
/// of the row's variables is returned as a permutation of `vars`).
fn matches_term(row: &str, vars: &[String]) -> Option<Vec<usize>> {
    let parts: Vec<&str> = row.split('*').map(str::trim).collect();
    if parts.len() != vars.len() {
        return None;
    }
    let mut perm = Vec::new();
    for p in parts {
        let i = vars.iter().position(|v| v.eq_ignore_ascii_case(p))?;
        if perm.contains(&i) {
            return None;
        }
        perm.push(i);
    }
    Some(perm)
}

/// Builds the model of `specs` over `ds` from the totals `rows`; every
/// totals row must be used by a term (or be the intercept).
pub(crate) fn build_model(
    ds: &Dataset,
    specs: &[TermSpec],
    rows: &[TotalRow],
    numeric_allowed: bool,
) -> Result<Model, WeightError> {
    let mut inputs: Vec<Input> = Vec::new();
    let mut terms: Vec<Term> = Vec::new();
    let mut used = vec![false; rows.len()];
    if let Some(r) = rows.iter().find(|r| !r.total.is_finite()) {
        return Err(WeightError::TotalsRow {
            line: r.line,
            message: format!(
                "the total of {} {} is not a finite number",
                r.variable, r.value
            ),
        });
    }
    let intercept = intercept_of(rows, &mut used)?;
    for spec in specs {
        let mut vars = Vec::new();
        for name in &spec.vars {
            let v = ds.variable(name)?.clone();
            if vars.contains(&v.name) {
                return Err(WeightError::Spec(format!(
                    "{} is crossed with itself",
                    v.name
                )));
            }
            vars.push(v.name.clone());
        }
        let name = vars.join("*");
        if let Some(t) = same_term(&terms, &inputs, &vars) {
            return Err(WeightError::Spec(format!("{} is named twice", t.name)));
        }
        let mine: Vec<(usize, Vec<usize>)> = rows
            .iter()
            .enumerate()
            .filter_map(|(k, r)| matches_term(&r.variable, &vars).map(|p| (k, p)))
            .collect();
        if mine.is_empty() {
            return Err(WeightError::NoTotals { term: name });
        }
        let categorical_rows = mine
            .iter()
            .filter(|(k, _)| !rows[*k].value.is_empty())
            .count();
        let numeric = !spec.factor && vars.len() == 1 && categorical_rows == 0;
        if numeric && !numeric_allowed {
            return Err(WeightError::Spec(format!(
                "{name} has a total but no values: post-stratification and raking take categories (a row per value)"
            )));
        }
        if vars.len() > 1 && categorical_rows != mine.len() {
            return Err(WeightError::Spec(format!(
                "{name} crosses variables, which takes a total per cell (a*b); a number crossed with categories is not a target microtab makes"
            )));
        }
        if !numeric && categorical_rows != mine.len() {
            let k = mine
                .iter()
                .find(|(k, _)| rows[*k].value.is_empty())
                .expect("one")
                .0;
            return Err(WeightError::TotalsRow {
                line: rows[k].line,
                message: format!("{name} is taken by categories, but this row gives no value"),
            });
        }
        let idx = term_inputs(ds, &mut inputs, &vars, numeric)?;
        let mut term = Term {
            name: name.clone(),
            vars: idx.clone(),
            numeric,
            cells: Vec::new(),
            total: 0.0,
            index: HashMap::new(),
        };
        if numeric {
            if mine.len() > 1 {
                return Err(WeightError::TotalsRow {
                    line: rows[mine[1].0].line,
                    message: format!("{name}'s total is given twice"),
                });
            }
            term.total = rows[mine[0].0].total;
            used[mine[0].0] = true;
        } else {
            register_cells(&mut inputs, &idx, &vars, rows, &mine, &mut used)?;
            terms.push(term);
            continue;
        }
        terms.push(term);
    }
    if let Some(k) = used.iter().position(|u| !u) {
        return Err(WeightError::TotalsRow {
            line: rows[k].line,
            message: format!(
                "{} is not one of the variables adjusted to ({})",
                rows[k].variable,
                terms
                    .iter()
                    .map(|t| t.name.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        });
    }
    let mut model = Model {
        inputs,
        terms,
        intercept,
    };
    fix_levels(&mut model, rows);
    Ok(model)
}

/// The `(Intercept)` row's total (the population size), if given.
fn intercept_of(rows: &[TotalRow], used: &mut [bool]) -> Result<Option<f64>, WeightError> {
    let mut intercept = None;
    for (k, r) in rows.iter().enumerate() {
        if r.variable.eq_ignore_ascii_case("(Intercept)") {
            if !r.value.is_empty() {
                return Err(WeightError::TotalsRow {
                    line: r.line,
                    message: "the (Intercept) row takes no value".into(),
                });
            }
            if intercept.is_some() {
                return Err(WeightError::TotalsRow {
                    line: r.line,
                    message: "(Intercept) is given twice".into(),
                });
            }
            intercept = Some(r.total);
            used[k] = true;
        }
    }
    Ok(intercept)
}

/// The inputs (indices) of a term over `vars`, added to `inputs` unless
/// another term reads them already (as the same kind).
fn term_inputs(
    ds: &Dataset,
    inputs: &mut Vec<Input>,
    vars: &[String],
    numeric: bool,
) -> Result<Vec<usize>, WeightError> {
    let mut idx = Vec::new();
    for v in vars {
        let var = ds.variable(v)?.clone();
        if numeric && var.kind == Kind::String {
            return Err(WeightError::Spec(format!(
                "{v} is a text variable: give its totals by value (a row per value)"
            )));
        }
        let i = match inputs.iter().position(|x| x.var.name == *v) {
            Some(i) => {
                if inputs[i].numeric != numeric {
                    return Err(WeightError::Spec(format!(
                        "{v} is used both as a number and by categories"
                    )));
                }
                i
            }
            None => {
                let dict = if var.kind == Kind::String {
                    ds.dictionary(&var)?
                } else {
                    Vec::new()
                };
                inputs.push(Input {
                    var,
                    dict,
                    numeric,
                    levels: Vec::new(),
                    values: Vec::new(),
                    absent: Vec::new(),
                });
                inputs.len() - 1
            }
        };
        idx.push(i);
    }
    Ok(idx)
}

/// The term of `terms` over the variables `vars` (in any order), if any.
fn same_term<'a>(terms: &'a [Term], inputs: &[Input], vars: &[String]) -> Option<&'a Term> {
    let mut a: Vec<&String> = vars.iter().collect();
    a.sort();
    terms.iter().find(|t| {
        let mut b: Vec<&String> = t.vars.iter().map(|&i| &inputs[i].var.name).collect();
        b.sort();
        a == b
    })
}

/// Checks a categorical term's totals rows (`mine`: each row and the
/// order of its variables) and registers their values as levels of the
/// term's inputs (`idx`).
fn register_cells(
    inputs: &mut [Input],
    idx: &[usize],
    vars: &[String],
    rows: &[TotalRow],
    mine: &[(usize, Vec<usize>)],
    used: &mut [bool],
) -> Result<(), WeightError> {
    let mut seen: HashMap<Vec<u64>, u64> = HashMap::new();
    for (k, perm) in mine {
        let r = &rows[*k];
        let parts = value_parts(&r.value, vars.len());
        if parts.len() != vars.len() {
            return Err(WeightError::TotalsRow {
                line: r.line,
                message: format!(
                    "{} crosses {} variables, but the value '{}' has {} parts (write a*b)",
                    r.variable,
                    vars.len(),
                    r.value,
                    parts.len()
                ),
            });
        }
        let mut codes = vec![0.0; vars.len()];
        for (p, &j) in parts.iter().zip(perm) {
            let inp = &mut inputs[idx[j]];
            codes[j] = register_code(inp, p).map_err(|message| WeightError::TotalsRow {
                line: r.line,
                message,
            })?;
        }
        let key: Vec<u64> = codes.iter().map(|c| c.to_bits()).collect();
        if let Some(first) = seen.insert(key, r.line) {
            return Err(WeightError::TotalsRow {
                line: r.line,
                message: format!("{} {} is also given on line {first}", r.variable, r.value),
            });
        }
        if r.total < 0.0 {
            return Err(WeightError::TotalsRow {
                line: r.line,
                message: format!("the total of {} {} is negative", r.variable, r.value),
            });
        }
        for (j, &c) in codes.iter().enumerate() {
            let inp = &mut inputs[idx[j]];
            if !inp.levels.contains(&c) {
                inp.levels.push(c);
            }
        }
        used[*k] = true;
    }
    Ok(())
}

/// The stored code of the value `text` of a categorical input; a text
/// value absent from the data gets a code past the dictionary's (a level
/// no record has).
fn register_code(inp: &mut Input, text: &str) -> Result<f64, String> {
    if let Some(c) = labelled_code(inp, text) {
        return Ok(c);
    }
    match codec::stored_code(&inp.var, &inp.dict, text).map_err(|e| {
        format!("{e} (a value is a code as stored; a value label is read only when it is the label of one code)")
    })? {
        Some(c) => Ok(c),
        None => {
            if !inp.absent.iter().any(|a| a == text) {
                inp.absent.push(text.to_string());
            }
            Ok(lookup_code(inp, text))
        }
    }
}

/// The code whose value label is `text`, when `text` is not itself a
/// value of the variable and exactly one code has that label.
fn labelled_code(inp: &Input, text: &str) -> Option<f64> {
    if matches!(codec::stored_code(&inp.var, &inp.dict, text), Ok(Some(_))) {
        return None;
    }
    let mut found = inp
        .var
        .value_labels
        .iter()
        .filter(|(_, l)| l.as_str() == text);
    let (code, _) = found.next()?;
    if found.next().is_some() {
        return None;
    }
    codec::stored_code(&inp.var, &inp.dict, code).ok().flatten()
}

/// The code [`register_code`] gave `text`.
fn lookup_code(inp: &Input, text: &str) -> f64 {
    if let Some(c) = labelled_code(inp, text) {
        return c;
    }
    match codec::stored_code(&inp.var, &inp.dict, text) {
        Ok(Some(c)) => c,
        _ => {
            let k = inp.absent.iter().position(|a| a == text).unwrap_or(0);
            (inp.dict.len() + k) as f64
        }
    }
}

/// A totals value's parts: `a*b` split for crossed variables; whole for
/// one variable (a text value may hold `*`).
fn value_parts(value: &str, vars: usize) -> Vec<&str> {
    if vars == 1 {
        vec![value.trim()]
    } else {
        value.split('*').map(str::trim).collect()
    }
}

/// `a*b` written in the order of the term's variables.
fn ordered_value(value: &str, perm: &[usize]) -> String {
    let parts = value_parts(value, perm.len());
    let mut out = vec![""; parts.len()];
    for (p, &j) in parts.iter().zip(perm) {
        out[j] = p;
    }
    out.join("*")
}

/// Sorts each categorical input's levels and sets every cell's levels as
/// indices into them.
fn fix_levels(model: &mut Model, rows: &[TotalRow]) {
    for inp in model.inputs.iter_mut().filter(|i| !i.numeric) {
        inp.levels.sort_by(f64::total_cmp);
    }
    for term in model.terms.iter_mut().filter(|t| !t.numeric) {
        let vars: Vec<String> = term
            .vars
            .iter()
            .map(|&i| model.inputs[i].var.name.clone())
            .collect();
        term.cells.clear();
        for r in rows {
            let Some(perm) = matches_term(&r.variable, &vars) else {
                continue;
            };
            let parts = value_parts(&r.value, vars.len());
            let mut levels = vec![0u32; vars.len()];
            for (p, &j) in parts.iter().zip(&perm) {
                let inp = &model.inputs[term.vars[j]];
                let code = lookup_code(inp, p);
                levels[j] = inp
                    .levels
                    .binary_search_by(|x| x.total_cmp(&code))
                    .expect("a registered level") as u32;
            }
            term.index.insert(levels, term.cells.len());
            term.cells.push(Cell {
                shown: ordered_value(&r.value, &perm),
                total: r.total,
            });
        }
    }
}

/// Reads `n` values of `col` from record `start` as floats in stored units
/// (`NaN` for a missing value: null, a user-missing code, or NaN).
pub(crate) fn read_block(
    col: &Column,
    var: &Variable,
    start: usize,
    n: usize,
    buf: &mut Vec<u64>,
    out: &mut Vec<f64>,
) -> Result<(), WeightError> {
    let view = col.rows_view(start, n, buf)?;
    out.clear();
    macro_rules! conv {
        ($v:expr) => {
            out.extend($v.iter().map(|&x| x as f64))
        };
    }
    match view {
        ColumnData::U8(v) => conv!(v),
        ColumnData::I8(v) => conv!(v),
        ColumnData::U16(v) => conv!(v),
        ColumnData::I16(v) => conv!(v),
        ColumnData::U32(v) => conv!(v),
        ColumnData::I32(v) => conv!(v),
        ColumnData::I64(v) => conv!(v),
        ColumnData::F32(v) => conv!(v),
        ColumnData::F64(v) => out.extend_from_slice(v),
    }
    // The mapped pages read are let go (they stay in the page cache): a
    // pass over many columns would otherwise count them all as its own.
    col.release(start, n);
    if let Some(null) = var.null_code {
        let null = null as f64;
        out.iter_mut()
            .filter(|x| **x == null)
            .for_each(|x| *x = f64::NAN);
    }
    if !var.missing_codes.is_empty() {
        for x in out.iter_mut() {
            if var.missing_codes.contains(x) {
                *x = f64::NAN;
            }
        }
    }
    Ok(())
}

thread_local! {
    /// A worker's buffers for [`block_values`] (reused: a pass over 81
    /// columns would otherwise zero fresh pages for every block).
    static BUFFERS: std::cell::RefCell<(Vec<u64>, Vec<f64>)> = const {
        std::cell::RefCell::new((Vec::new(), Vec::new()))
    };
}

/// `f` of `n` values of `col` from record `start` (as [`read_block`]
/// gives them), read into this thread's buffers. `f` must not read
/// another block itself.
pub(crate) fn block_values<R>(
    col: &Column,
    var: &Variable,
    start: usize,
    n: usize,
    f: impl FnOnce(&[f64]) -> R,
) -> Result<R, WeightError> {
    BUFFERS.with(|b| {
        let mut b = b.borrow_mut();
        let (buf, vals) = &mut *b;
        read_block(col, var, start, n, buf, vals)?;
        Ok(f(vals))
    })
}

/// Why records are outside the model: per variable, the records with a
/// missing value and those with an unlisted value (by value), and records
/// whose crossed cell is not listed.
#[derive(Debug, Clone, Default)]
pub(crate) struct Outside {
    /// Per input: records with a missing value.
    pub missing: Vec<u64>,
    /// Per input: unlisted values (stored code bits) and their records.
    pub unlisted: Vec<BTreeMap<u64, u64>>,
    /// Records in a cell of a crossed term the totals do not list, per
    /// term.
    pub cells: Vec<u64>,
    /// All records outside.
    pub records: u64,
}

/// The records collapsed into groups: each record's group (`u32::MAX`:
/// outside the model), and each group's levels or values per input.
pub(crate) struct Groups {
    pub of_record: Vec<u32>,
    /// Per group, per input: the level index (categorical) or the value
    /// in displayed units (numeric).
    pub keys: Vec<Vec<f64>>,
    pub outside: Outside,
}

/// Marks records outside.
pub(crate) const OUT: u32 = u32::MAX;

/// Finds each numeric input's distinct values (a first pass over their
/// columns only).
pub(crate) fn numeric_values(ds: &Dataset, model: &mut Model) -> Result<(), WeightError> {
    let rows = ds.rows() as usize;
    for inp in model.inputs.iter_mut().filter(|i| i.numeric) {
        let col = ds.column(&inp.var.name)?;
        let blocks = rows.div_ceil(BLOCK);
        // Displayed units (implied decimals divided out), as the groups
        // look them up.
        let scale = inp.var.scale();
        let sets = (0..blocks)
            .into_par_iter()
            .map(|b| -> Result<Vec<u64>, WeightError> {
                let (mut buf, mut vals) = (Vec::new(), Vec::new());
                let start = b * BLOCK;
                read_block(
                    &col,
                    &inp.var,
                    start,
                    BLOCK.min(rows - start),
                    &mut buf,
                    &mut vals,
                )?;
                let mut v: Vec<u64> = vals
                    .iter()
                    .filter(|x| !x.is_nan())
                    .map(|&x| (x / scale + 0.0).to_bits())
                    .collect();
                v.sort_unstable();
                v.dedup();
                Ok(v)
            })
            .collect::<Result<Vec<_>, _>>()?;
        let mut all: Vec<f64> = sets.into_iter().flatten().map(f64::from_bits).collect();
        all.sort_by(f64::total_cmp);
        all.dedup();
        inp.values = all;
    }
    Ok(())
}

/// Collapses the records into groups (one pass over the inputs' columns).
pub(crate) fn group_records(ds: &Dataset, model: &Model) -> Result<Groups, WeightError> {
    let rows = ds.rows() as usize;
    let ninp = model.inputs.len();
    // Mixed radix over the inputs.
    let mut strides = Vec::with_capacity(ninp);
    let mut span: u128 = 1;
    for inp in &model.inputs {
        strides.push(span as u64);
        span *= inp.radix() as u128;
        if span > u64::MAX as u128 {
            return Err(WeightError::Spec(
                "the adjustment variables have too many combinations of values".into(),
            ));
        }
    }
    let cols: Vec<Column> = model
        .inputs
        .iter()
        .map(|i| ds.column(&i.var.name))
        .collect::<Result<_, _>>()?;
    let blocks = rows.div_ceil(BLOCK);
    // Few combinations: keys index a table directly.
    let dense = (span <= DENSE as u128).then_some(span as usize);
    // Per block: each record's key (u64::MAX: outside), the distinct keys,
    // and why records were outside.
    type BlockOut = (Vec<u64>, Vec<u64>, Outside);
    let per_block: Vec<BlockOut> = (0..blocks)
        .into_par_iter()
        .map(|b| -> Result<BlockOut, WeightError> {
            let start = b * BLOCK;
            let n = BLOCK.min(rows - start);
            let mut keys = vec![0u64; n];
            let mut out = Outside {
                missing: vec![0; ninp],
                unlisted: vec![BTreeMap::new(); ninp],
                cells: vec![0; model.terms.len()],
                records: 0,
            };
            let (mut buf, mut vals) = (Vec::new(), Vec::new());
            for (j, (inp, col)) in model.inputs.iter().zip(&cols).enumerate() {
                read_block(col, &inp.var, start, n, &mut buf, &mut vals)?;
                let scale = inp.var.scale();
                for (k, &x) in keys.iter_mut().zip(&vals) {
                    if *k == u64::MAX {
                        continue;
                    }
                    if x.is_nan() {
                        out.missing[j] += 1;
                        *k = u64::MAX;
                        continue;
                    }
                    let found = if inp.numeric {
                        let v = x / scale + 0.0;
                        inp.values.binary_search_by(|y| y.total_cmp(&v))
                    } else {
                        inp.levels.binary_search_by(|y| y.total_cmp(&x))
                    };
                    match found {
                        Ok(i) => *k += i as u64 * strides[j],
                        Err(_) => {
                            *out.unlisted[j].entry(x.to_bits()).or_insert(0) += 1;
                            *k = u64::MAX;
                        }
                    }
                }
            }
            let distinct = distinct_keys(&keys, dense);
            Ok((keys, distinct, out))
        })
        .collect::<Result<_, _>>()?;
    let mut distinct: Vec<u64> = per_block.iter().flat_map(|b| b.1.iter().copied()).collect();
    distinct.sort_unstable();
    distinct.dedup();
    let (keys_of, gid_of, unlisted_cell) = groups_of(model, &strides, &distinct);
    let table: Option<Vec<u32>> = dense.map(|span| {
        let mut t = vec![OUT; span];
        for (&k, &g) in &gid_of {
            t[k as usize] = g;
        }
        t
    });
    let mut outside = Outside {
        missing: vec![0; ninp],
        unlisted: vec![BTreeMap::new(); ninp],
        cells: vec![0; model.terms.len()],
        records: 0,
    };
    let mut of_record = Vec::with_capacity(rows);
    for (keys, _, out) in per_block {
        for j in 0..ninp {
            outside.missing[j] += out.missing[j];
            for (v, c) in &out.unlisted[j] {
                *outside.unlisted[j].entry(*v).or_insert(0) += c;
            }
        }
        match &table {
            Some(t) => {
                of_record.extend(
                    keys.iter()
                        .map(|&k| if k == u64::MAX { OUT } else { t[k as usize] }),
                )
            }
            None => of_record.extend(keys.iter().map(|k| {
                if *k == u64::MAX {
                    OUT
                } else {
                    gid_of.get(k).copied().unwrap_or(OUT)
                }
            })),
        }
        if !unlisted_cell.is_empty() {
            for k in keys.iter().filter(|k| **k != u64::MAX) {
                if let Some(&t) = unlisted_cell.get(k) {
                    outside.cells[t] += 1;
                }
            }
        }
    }
    outside.records = of_record.iter().filter(|&&g| g == OUT).count() as u64;
    Ok(Groups {
        of_record,
        keys: keys_of,
        outside,
    })
}

/// The groups of the distinct keys: each one's levels or values per input
/// and its number, and the keys in a cell a crossed term does not list
/// (with the term).
#[allow(clippy::type_complexity)]
fn groups_of(
    model: &Model,
    strides: &[u64],
    distinct: &[u64],
) -> (Vec<Vec<f64>>, HashMap<u64, u32>, HashMap<u64, usize>) {
    // Each group's key decoded, and whether each crossed term lists its
    // cell.
    let decode = |key: u64| -> Vec<f64> {
        model
            .inputs
            .iter()
            .zip(strides)
            .map(|(inp, &s)| {
                let i = (key / s) % inp.radix() as u64;
                if inp.numeric {
                    inp.values[i as usize]
                } else {
                    i as f64
                }
            })
            .collect()
    };
    let mut keys_of: Vec<Vec<f64>> = Vec::with_capacity(distinct.len());
    let mut gid_of: HashMap<u64, u32> = HashMap::with_capacity(distinct.len());
    let mut unlisted_cell: HashMap<u64, usize> = HashMap::new();
    for &k in distinct {
        let key = decode(k);
        let missing_cell = model
            .terms
            .iter()
            .position(|t| !t.numeric && cell_of(t, &key).is_none());
        match missing_cell {
            Some(t) => {
                unlisted_cell.insert(k, t);
            }
            None => {
                gid_of.insert(k, keys_of.len() as u32);
                keys_of.push(key);
            }
        }
    }
    (keys_of, gid_of, unlisted_cell)
}

/// Combinations of values up to this many are found with a bitmap and
/// looked up in a table (beyond, sorted and hashed).
const DENSE: usize = 1 << 22;

/// The distinct keys of `keys` (`u64::MAX` left out), ascending: with a
/// bitmap of `dense` bits when given, else by sorting.
fn distinct_keys(keys: &[u64], dense: Option<usize>) -> Vec<u64> {
    match dense {
        Some(span) => {
            let mut bits = vec![0u64; span.div_ceil(64)];
            for &k in keys.iter().filter(|&&k| k != u64::MAX) {
                bits[(k / 64) as usize] |= 1 << (k % 64);
            }
            let mut out = Vec::new();
            for (w, &b) in bits.iter().enumerate() {
                let mut b = b;
                while b != 0 {
                    out.push(w as u64 * 64 + b.trailing_zeros() as u64);
                    b &= b - 1;
                }
            }
            out
        }
        None => {
            let mut d: Vec<u64> = keys.iter().copied().filter(|&k| k != u64::MAX).collect();
            d.sort_unstable();
            d.dedup();
            d
        }
    }
}

/// The cell of categorical term `t` that a group with `key` is in.
pub(crate) fn cell_of(t: &Term, key: &[f64]) -> Option<usize> {
    let levels: Vec<u32> = t.vars.iter().map(|&i| key[i] as u32).collect();
    t.index.get(&levels).copied()
}
