//! Temporary recodes of a grouping variable inside a request (SDA's
//! syntax): `AGE(r: 0-17 "Child"; 18-64 "Adult"; 65-* "Senior")` groups
//! values and ranges into new categories (unmatched values and missing
//! codes are missing), and `AGE(18-65)` keeps the variable's own categories
//! but treats values outside the list as missing. Both are lookup tables
//! built once per query: a recoded query scans as the raw one does.

use crate::filter::{parse_filter, resolve, Predicate, Term};
use crate::lex::{is_quote, quote_name, quoted, split, trailing_label};
use crate::plan::{is_missing, DimMap, DimPlan, TRASH};
use crate::value::Category;
use crate::{Error, Result, Value};
use microtab_store::Kind;

/// A grouping argument: a variable, recoded or restricted.
#[derive(Debug, Clone, PartialEq)]
pub struct DimSpec {
    /// The variable.
    pub name: String,
    /// Groups of values becoming categories 1, 2, … (`r:`).
    pub recode: Option<Vec<Group>>,
    /// The values kept; others are missing (a filter on the variable).
    pub valid: Option<Term>,
}

/// One group of a recode.
#[derive(Debug, Clone, PartialEq)]
pub struct Group {
    /// Its values and ranges, as a filter term on the variable.
    pub term: Term,
    /// Its label (`"Adult"`), if given.
    pub label: Option<String>,
    /// The values as written (`18-64`).
    pub text: String,
}

/// Parses a grouping argument: `NAME`, `NAME(items)` or `NAME(r: items
/// ["label"]; …)`; a name with spaces or parentheses is quoted as
/// [`crate::lex`] says (`` `Body Mass (g)`(r: 0-3000; 3001-*) `` or
/// `"Body Mass (g)"(r: 0-3000; 3001-*)`). A caller holding the dataset
/// takes an argument that is a variable's whole name as that variable
/// first ([`parse_dim_in`]).
pub fn parse_dim(spec: &str) -> Result<DimSpec> {
    let s = spec.trim();
    let plain = |name: &str| DimSpec {
        name: name.to_string(),
        recode: None,
        valid: None,
    };
    let (name, rest) = match s.chars().next().filter(|&c| is_quote(c)) {
        Some(_) => match quoted(s) {
            Some((name, rest)) => (name, rest.trim()),
            None => return Ok(plain(s)),
        },
        None => match s.find('(') {
            Some(open) if s.ends_with(')') => (s[..open].trim().to_string(), &s[open..]),
            Some(open) => return Err(unclosed(spec, &s[..open], s)),
            None => return Ok(plain(s)),
        },
    };
    if rest.is_empty() {
        return Ok(plain(&name));
    }
    let Some(inner) = rest.strip_prefix('(').and_then(|r| r.strip_suffix(')')) else {
        if rest.starts_with('(') {
            return Err(unclosed(spec, &quote_name(&name), s));
        }
        return Ok(plain(s));
    };
    let inner = inner.trim();
    let qname = quote_name(&name);
    let bad = |reason: String| Error::Grouping {
        spec: spec.to_string(),
        reason,
    };
    if name.is_empty() {
        return Err(bad("expected a variable name before '('".into()));
    }
    let one_term = |items: &str| -> Result<Term> {
        let mut terms = parse_filter(&format!("{qname}({items})")).map_err(|e| match e {
            Error::Filter { reason, .. } => bad(format!("{reason} (in '{items}')")),
            e => e,
        })?;
        if terms.len() != 1 {
            return Err(bad(format!(
                "'{items}' is not one list of values and ranges"
            )));
        }
        Ok(terms.remove(0))
    };
    // `r:` (any case, spaces allowed before the colon) starts the groups.
    let rules = inner
        .strip_prefix(['r', 'R'])
        .map(str::trim_start)
        .and_then(|r| r.strip_prefix(':'));
    let Some(rules) = rules else {
        return Ok(DimSpec {
            name: name.clone(),
            recode: None,
            valid: Some(one_term(inner)?),
        });
    };
    let mut groups = Vec::new();
    for g in split(rules, false, |c| c == ';') {
        let g = g.trim();
        if g.is_empty() {
            continue;
        }
        // A trailing quoted label — not a quoted value closing the list
        // (`"New York"`, `Ohio,"New York"`), as in `recode`'s rules.
        let (items, label) = match trailing_label(g, &[',', '-']) {
            Some((items, label)) => (items, Some(label)),
            None => (g, None),
        };
        if items.is_empty() {
            return Err(bad(format!(
                "group '{g}' has no values (expected e.g. 18-64 \"Adult\")"
            )));
        }
        let term = one_term(items).map_err(|e| match e {
            Error::Grouping { spec, reason } => Error::Grouping {
                spec,
                reason: format!("recode of {name}: {reason}"),
            },
            e => e,
        })?;
        groups.push(Group {
            term,
            label,
            text: items.to_string(),
        });
    }
    if groups.is_empty() {
        return Err(bad(
            "a recode needs at least one group, as in AGE(r: 0-17 \"Child\"; 18-64; 65-*)".into(),
        ));
    }
    Ok(DimSpec {
        name,
        recode: Some(groups),
        valid: None,
    })
}

/// The error of a grouping argument whose `(` is never closed
/// (`AGE(r: 18-`): what is wrong inside it too, when something is, rather
/// than "unknown variable 'AGE(r: 18-'".
fn unclosed(spec: &str, name: &str, s: &str) -> Error {
    let name = name.trim();
    let reason = if name.is_empty() {
        "expected a variable name before '('".to_string()
    } else {
        match parse_dim(&format!("{s})")) {
            Err(Error::Grouping { reason, .. }) => {
                format!("{reason}; and no ')' closes the list after {name}")
            }
            _ => format!("no ')' closes the list after {name}: write {s})"),
        }
    };
    Error::Grouping {
        spec: spec.to_string(),
        reason,
    }
}

/// Largest range of stored values a recode's lookup table spans.
const MAX_RECODE_RANGE: i64 = 1 << 24;

/// The categories of a recoded variable and its lookup table over the
/// variable's stored range (each value's group, `TRASH` for values in no
/// group, missing codes and the null code). `spec` is the grouping
/// argument as given (for errors).
pub(crate) fn recode_plan(
    col: &microtab_store::Column,
    dict: &[String],
    (spec, groups): (&str, &[Group]),
    include_missing: bool,
) -> Result<DimPlan> {
    let var = col.var();
    let preds: Vec<Predicate> = groups
        .iter()
        .map(|g| {
            resolve(&g.term, var, dict).map_err(|e| match e {
                // A group that is no value of the variable: the grouping
                // argument is at fault.
                Error::Filter { reason, .. } => Error::Grouping {
                    spec: spec.to_string(),
                    reason: format!(
                        "recode of {}: {reason} (in the group '{}')",
                        var.name, g.text
                    ),
                },
                e => e,
            })
        })
        .collect::<Result<_>>()?;
    let (lo, hi) = match (var.min, var.max) {
        (Some(a), Some(b)) if var.kind != Kind::Float => (a.as_i64(), b.as_i64()),
        _ => (0, -1),
    };
    if var.kind == Kind::Float || hi.saturating_sub(lo) >= MAX_RECODE_RANGE {
        return keyed_plan(col, dict, groups, &preds, include_missing);
    }
    // With --include-missing, the missing codes that occur and
    // system-missing follow the groups as categories of their own.
    let k = groups.len() as u32;
    let mut extra: Vec<(Option<i64>, Category)> = Vec::new();
    if include_missing {
        let mut codes: Vec<i64> = var
            .missing_codes
            .iter()
            .map(|&c| c as i64)
            .filter(|&c| c >= lo && c <= hi)
            .collect();
        codes.sort_unstable();
        codes.dedup();
        for c in codes {
            extra.push((Some(c), crate::plan::key_category(var, dict, c)));
        }
        if var.nulls > 0 {
            extra.push((None, crate::value::null_category()));
        }
    }
    let extra_of = |v: i64| -> Option<u32> {
        extra
            .iter()
            .position(|(key, _)| *key == Some(v))
            .map(|i| k + i as u32)
    };
    let table: Vec<u32> = (lo..=hi)
        .map(|v| {
            if let Some(e) = extra_of(v) {
                return e;
            }
            if is_missing(var, v as f64) || var.null_code == Some(v) {
                return TRASH;
            }
            preds
                .iter()
                .position(|p| p.test_int(v))
                .map_or(TRASH, |g| g as u32)
        })
        .collect();
    let (categories, keys) = group_categories(groups, extra);
    Ok(DimPlan {
        var: var.clone(),
        categories,
        keys,
        map: DimMap::Table,
        recode: Some((lo, table)),
        recode_keys: None,
    })
}

/// A recode's categories — groups 1, 2, … (an unlabeled group labeled by
/// its values, as SDA does), then `extra` (missing codes and
/// system-missing with --include-missing) — and their keys.
fn group_categories(
    groups: &[Group],
    extra: Vec<(Option<i64>, Category)>,
) -> (Vec<Category>, Vec<Option<i64>>) {
    let mut categories: Vec<Category> = groups
        .iter()
        .enumerate()
        .map(|(i, g)| {
            let label = g.label.clone().unwrap_or_else(|| g.text.clone());
            Category {
                value: Value::Int(i as i64 + 1),
                display: label.clone(),
                label: Some(label),
                missing: false,
            }
        })
        .collect();
    let mut keys: Vec<Option<i64>> = (0..groups.len() as i64).map(Some).collect();
    for (key, cat) in extra {
        keys.push(key);
        categories.push(cat);
    }
    (categories, keys)
}

/// Most distinct values a recode of a float (or of an integer range too
/// wide for a table) maps through a hash map.
const MAX_RECODE_KEYS: usize = 1 << 22;

/// A recode of a float variable, or of an integer one whose range is too
/// wide for a table: the column's distinct values, each with its group,
/// in a hash map (one lookup per record, as the variable's own categories
/// would take).
fn keyed_plan(
    col: &microtab_store::Column,
    dict: &[String],
    groups: &[Group],
    preds: &[Predicate],
    include_missing: bool,
) -> Result<DimPlan> {
    let var = col.var();
    let keys = crate::plan::distinct_keys(col, MAX_RECODE_KEYS)?.ok_or_else(|| {
        Error::TooLarge(format!(
            "{}: more than {MAX_RECODE_KEYS} distinct values to recode",
            var.name
        ))
    })?;
    let float = var.kind == Kind::Float;
    let k = groups.len() as u32;
    let mut extra: Vec<(Option<i64>, Category)> = Vec::new();
    let mut pairs = Vec::with_capacity(keys.len());
    for key in keys {
        let v = crate::plan::key_value(var, key);
        let g = if is_missing(var, v) {
            if include_missing {
                extra.push((Some(key), crate::plan::key_category(var, dict, key)));
                k + extra.len() as u32 - 1
            } else {
                TRASH
            }
        } else {
            preds
                .iter()
                .position(|p| if float { p.test(v) } else { p.test_int(key) })
                .map_or(TRASH, |g| g as u32)
        };
        pairs.push((key, g));
    }
    if include_missing && var.nulls > 0 {
        extra.push((None, crate::value::null_category()));
    }
    let (categories, cat_keys) = group_categories(groups, extra);
    Ok(DimPlan {
        var: var.clone(),
        categories,
        keys: cat_keys,
        map: DimMap::Hash,
        recode: None,
        recode_keys: Some(pairs),
    })
}

/// [`parse_dim`], except that an argument naming one of `ds`'s variables
/// whole (`c 2 (float)`) is that variable.
pub fn parse_dim_in(ds: &microtab_store::Dataset, spec: &str) -> Result<DimSpec> {
    match ds.variable(spec.trim()) {
        Ok(v) => Ok(DimSpec {
            name: v.name.clone(),
            recode: None,
            valid: None,
        }),
        Err(_) => parse_dim(spec),
    }
}

/// Refuses values of text variables that none of the records has, in the
/// filter terms and in the grouping arguments' recodes and value lists,
/// over the datasets answered together (a value is known when one of them
/// has it: a part or a year without it counts none there). Call it once
/// with every dataset of a request: each part's own scan does not judge.
pub fn check_values(
    datasets: &[&microtab_store::Dataset],
    filter: &[Term],
    group_by: &[String],
) -> Result<()> {
    let Some(first) = datasets.first() else {
        return Ok(());
    };
    let mut terms: Vec<Term> = filter.to_vec();
    for spec in group_by {
        let d = parse_dim_in(first, spec)?;
        terms.extend(d.recode.into_iter().flatten().map(|g| g.term));
        terms.extend(d.valid);
    }
    for t in terms.iter().flat_map(Term::leaves) {
        let mut var = None;
        let mut dicts = Vec::new();
        for ds in datasets {
            if let Ok(v) = ds.variable(&t.var) {
                if v.kind == Kind::String {
                    dicts.push(ds.dictionary(v)?);
                    var.get_or_insert_with(|| v.clone());
                }
            }
        }
        if let Some(var) = var {
            let refs: Vec<&[String]> = dicts.iter().map(Vec::as_slice).collect();
            crate::filter::check_text_values(t, &var, &refs)?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_recodes_and_valid_ranges() {
        let d = parse_dim("AGE").unwrap();
        assert!(d.recode.is_none() && d.valid.is_none() && d.name == "AGE");
        let d = parse_dim("AGE(18-65)").unwrap();
        assert!(d.valid.is_some() && d.recode.is_none());
        let d = parse_dim(r#"AGE(r: 0-17 "Child; young"; 18-64 "Adult"; 65-*)"#).unwrap();
        let g = d.recode.unwrap();
        assert_eq!(g.len(), 3);
        assert_eq!(g[0].label.as_deref(), Some("Child; young"));
        assert_eq!(g[2].label, None);
        assert_eq!(g[2].text, "65-*");
        let d = parse_dim("RACE(r: 1; 2, 3-5 \"Other\")").unwrap();
        assert_eq!(d.recode.unwrap()[1].text, "2, 3-5");
        assert!(parse_dim("AGE(r: )").is_err());
        let d = parse_dim(r#""Body Mass (g)"(r: 0-3000; 3001-*)"#).unwrap();
        assert_eq!(d.name, "Body Mass (g)");
        assert_eq!(d.recode.unwrap().len(), 2);
        // A quoted value closing a group is a value, not its label.
        let d = parse_dim(r#"S(r: Ohio,"New York"; "Utah"; "A B" "lab")"#).unwrap();
        let g = d.recode.unwrap();
        assert_eq!(
            (g[0].text.as_str(), g[0].label.as_deref()),
            ("Ohio,\"New York\"", None)
        );
        assert_eq!(
            (g[1].text.as_str(), g[1].label.as_deref()),
            ("\"Utah\"", None)
        );
        assert_eq!(g[2].label.as_deref(), Some("lab"));
        // A name quoted either way, with commas, parentheses and quotes.
        for spec in [
            "`Body Mass, (g) \"x\"`(r: 0-3000 \"light\"; 3001-*)",
            r#""Body Mass, (g) ""x"""(r: 0-3000 "light"; 3001-*)"#,
        ] {
            let d = parse_dim(spec).unwrap();
            assert_eq!(d.name, "Body Mass, (g) \"x\"", "{spec}");
            let g = d.recode.unwrap();
            assert_eq!(g[0].label.as_deref(), Some("light"));
            assert_eq!(g[0].term.var, d.name);
        }
        // An unclosed list names what is wrong, not an unknown variable.
        let e = parse_dim("AGE(r: 18-").unwrap_err().to_string();
        assert!(e.contains("recode of AGE: incomplete range '18-'"), "{e}");
        assert!(e.contains("no ')' closes the list after AGE"), "{e}");
        let e = parse_dim("AGE(r: 18-30; 31-*").unwrap_err().to_string();
        assert!(
            e.ends_with("no ')' closes the list after AGE: write AGE(r: 18-30; 31-*)"),
            "{e}"
        );
        let e = parse_dim("`a b`(1,3").unwrap_err().to_string();
        assert!(e.contains("no ')' closes the list after `a b`"), "{e}");
        assert!(matches!(parse_dim("(r: 1"), Err(Error::Grouping { .. })));
        let d = parse_dim("`a(b)`(1,3)").unwrap();
        assert_eq!(
            (d.name.as_str(), d.valid.unwrap().var.as_str()),
            ("a(b)", "a(b)")
        );
        assert_eq!(parse_dim("`x y`").unwrap().name, "x y");
        // `*` alone: every value, for numbers and text alike.
        let d = parse_dim(r#"W(r: "Full-Time","Part-Time" "working"; *)"#).unwrap();
        let g = d.recode.unwrap();
        assert_eq!(
            g[1].term.cond,
            crate::filter::Cond::Set(vec![crate::filter::Item::Range(None, None)])
        );
    }
}
