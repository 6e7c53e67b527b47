//! Case listing (SDA's LISTCASES): the values of chosen variables for the
//! records that pass a filter, in file order, as categories (value,
//! display text, value label, whether missing), handed to the caller one
//! record at a time so that a listing of every record needs no memory for
//! them.

use crate::exec::MORSEL;
use crate::expr::filter_program;
use crate::lex::{quoted, split};
use crate::plan::key_category;
use crate::value::null_category;
use crate::{Category, Result, Term};
use microtab_store::{Column, ColumnData, Dataset, Kind, Variable};

/// Which records and variables to list.
#[derive(Debug, Clone, Default)]
pub struct ListQuery {
    /// The variables, in order.
    pub vars: Vec<String>,
    /// Filter terms, all of which must hold.
    pub filter: Vec<Term>,
    /// Only records in this range of row numbers (0-based, end exclusive).
    pub rows: Option<std::ops::Range<u64>>,
}

/// The variables `q` lists (case-insensitive names resolved).
pub fn list_vars(ds: &Dataset, q: &ListQuery) -> Result<Vec<Variable>> {
    q.vars.iter().map(|n| Ok(ds.variable(n)?.clone())).collect()
}

/// Splits a list of names or grouping arguments at commas (and, with
/// `spaces`, whitespace) outside parentheses and quotes ([`crate::lex`]),
/// so that recodes (`AGE(r: 0-17; 18-64; 65-*)`), value lists
/// (`RACE(1,3)`) and quoted names (`` `Body Mass (g)` ``) stay whole.
/// Elements are trimmed; empty ones are dropped.
pub fn split_list(s: &str, spaces: bool) -> Vec<String> {
    split(s, true, |c| c == ',' || (spaces && c.is_whitespace()))
        .into_iter()
        .map(str::trim)
        .filter(|x| !x.is_empty())
        .map(String::from)
        .collect()
}

/// Variable names from command-line arguments. An argument that names a
/// variable of `ds` as it stands is kept whole, so names with spaces or
/// commas (`Body Mass (g)`, from CSV headers) can be given as one argument;
/// any other argument is split at commas and spaces outside quotes
/// ([`split_list`]), and a quoted name (`"Flipper Length, mm"`,
/// `` `Body Mass (g)` ``) loses its quotes.
pub fn var_names(ds: &Dataset, args: &[String]) -> Vec<String> {
    let unquoted = |t: String| match quoted(&t) {
        Some((name, "")) if !name.is_empty() => name,
        _ => t,
    };
    args.iter()
        .flat_map(|a| match ds.variable(a.trim()) {
            Ok(_) => vec![a.trim().to_string()],
            Err(_) => split_list(a, true).into_iter().map(unquoted).collect(),
        })
        .collect()
}

/// One argument as a list of names or grouping arguments: the argument
/// whole when it names one of `ds`'s variables as it stands (`Body Mass
/// (g)`, `Flipper Length, mm`), else [`split_list`] of it (quotes kept,
/// for [`crate::parse_dim`] to read).
pub fn arg_list(ds: &Dataset, arg: &str, spaces: bool) -> Vec<String> {
    if ds.variable(arg.trim()).is_ok() {
        vec![arg.trim().to_string()]
    } else {
        split_list(arg, spaces)
    }
}

/// A value of a view as a key (the stored integer, or a float's bits).
fn key_at(d: &ColumnData<'_>, i: usize) -> Option<i64> {
    match d {
        ColumnData::F32(v) => {
            let x = v[i] as f64;
            (!x.is_nan()).then_some((x + 0.0).to_bits() as i64)
        }
        ColumnData::F64(v) => (!v[i].is_nan()).then_some((v[i] + 0.0).to_bits() as i64),
        _ => Some(d.get_i64(i)),
    }
}

/// The category of one stored value.
pub(crate) fn cell(var: &Variable, dict: &[String], key: Option<i64>) -> Category {
    match key {
        None => null_category(),
        Some(k) if var.kind != Kind::Float && var.nulls > 0 && var.null_code == Some(k) => {
            null_category()
        }
        Some(k) => key_category(var, dict, k),
    }
}

/// Calls `each(record, values)` for every record that passes the filter,
/// in file order (records numbered from 1), until it returns `false`.
/// Returns the number of records it was called for.
pub fn list_cases(
    ds: &Dataset,
    q: &ListQuery,
    mut each: impl FnMut(u64, &[Category]) -> bool,
) -> Result<u64> {
    let vars = list_vars(ds, q)?;
    let dicts: Vec<Vec<String>> = vars
        .iter()
        .map(|v| crate::physical::dict_of(ds, v))
        .collect::<Result<_>>()?;
    let cols: Vec<Column> = vars
        .iter()
        .map(|v| ds.column(&v.name))
        .collect::<std::result::Result<_, _>>()?;
    let filter = filter_program(ds, &q.filter, true)?;
    let fcols: Vec<Column> = match &filter {
        Some(p) => p
            .inputs
            .iter()
            .map(|i| ds.column(&i.var.name))
            .collect::<std::result::Result<_, _>>()?,
        None => Vec::new(),
    };
    let rows = ds.rows() as usize;
    let (first, last) = match &q.rows {
        Some(r) => (
            r.start.min(rows as u64) as usize,
            r.end.min(rows as u64) as usize,
        ),
        None => (0, rows),
    };
    let mut bufs: Vec<Vec<u64>> = cols.iter().map(|_| Vec::new()).collect();
    let mut fbufs: Vec<Vec<u64>> = fcols.iter().map(|_| Vec::new()).collect();
    let mut cells: Vec<Category> = Vec::with_capacity(vars.len());
    let mut called = 0u64;
    let mut m = first / MORSEL;
    while m * MORSEL < last {
        let start = m * MORSEL;
        let n = MORSEL.min(rows - start);
        m += 1;
        let fviews = fcols
            .iter()
            .zip(fbufs.iter_mut())
            .map(|(c, b)| c.rows_view(start, n, b))
            .collect::<std::result::Result<Vec<_>, _>>()?;
        let mut pass = vec![true; n];
        if let Some(p) = &filter {
            pass.fill(false);
            p.each_pass(&fviews, n, |r| pass[r] = true);
        }
        for (i, p) in pass.iter_mut().enumerate() {
            let r = start + i;
            if r < first || r >= last {
                *p = false;
            }
        }
        if !pass.iter().any(|&p| p) {
            continue;
        }
        let views = cols
            .iter()
            .zip(bufs.iter_mut())
            .map(|(c, b)| c.rows_view(start, n, b))
            .collect::<std::result::Result<Vec<_>, _>>()?;
        for (i, _) in pass.iter().enumerate().filter(|(_, &p)| p) {
            cells.clear();
            for ((v, d), view) in vars.iter().zip(&dicts).zip(&views) {
                cells.push(cell(v, d, key_at(view, i)));
            }
            called += 1;
            if !each((start + i) as u64 + 1, &cells) {
                return Ok(called);
            }
        }
    }
    Ok(called)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lists_split_outside_quotes_and_parentheses() {
        assert_eq!(
            split_list(
                r#"AGE SEX,"Body Mass (g)" `a, b` AGE(r: 1-2; 3-*) RACE(1,3)"#,
                true
            ),
            [
                "AGE",
                "SEX",
                "\"Body Mass (g)\"",
                "`a, b`",
                "AGE(r: 1-2; 3-*)",
                "RACE(1,3)"
            ]
        );
        assert_eq!(split_list("a b, c", false), ["a b", "c"]);
        assert_eq!(
            split_list(r#""say ""hi"", x",y"#, false),
            [r#""say ""hi"", x""#, "y"]
        );
        assert!(split_list(" , ", true).is_empty());
    }
}
