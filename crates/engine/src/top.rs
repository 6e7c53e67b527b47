//! Counting the values of one variable (for codebooks) in bounded memory,
//! whatever the number of distinct values.
//!
//! Small code domains go through the ordinary tabulation. Wide ones (ids,
//! incomes, floats) are counted in hash maps of keys, and — so that a
//! 20-million-value id costs a bounded map, not twenty million entries —
//! in passes: pass `p` of `P` counts only the keys whose hash is `p`
//! modulo `P`, with `P` chosen so that no pass holds more than
//! [`MAX_KEYS`] keys. Categories are built only for the values kept.

use crate::hash::{IntMap, IntSet};
use crate::plan::{is_missing, is_table_mapped, key_category, key_value, Exclusion};
use crate::value::null_category;
use crate::{run, Category, Error, Query, Result};
use microtab_store::{Column, ColumnData, Dataset, Kind, Number, Variable};

/// Most distinct keys one counting pass holds (per worker): about 16 MB.
pub const MAX_KEYS: usize = 1 << 19;

/// Domains up to this many values are counted by the ordinary tabulation.
const DENSE_LIMIT: i64 = 1 << 16;

/// Counts of the values of one variable.
#[derive(Debug, Clone)]
pub struct ValueCounts {
    /// The values kept, with their record counts and weighted sums (with a
    /// weight): the `top` most frequent ones (ties in value order), every
    /// value asked for by key, missing codes and system-missing (flagged
    /// `missing`); most frequent first.
    pub values: Vec<(Category, u64, Option<f64>)>,
    /// Distinct values that are not missing.
    pub distinct: usize,
    /// The values not kept: how many distinct ones, their records and
    /// weighted sum.
    pub others: (usize, u64, Option<f64>),
}

/// The `n` most frequent values of a variable (see [`value_counts`]).
#[derive(Debug, Clone)]
pub struct TopValues {
    /// Values with their record counts, most frequent first (ties by value);
    /// missing codes and system-missing included, flagged `missing`.
    pub values: Vec<(Category, u64)>,
    /// Distinct values that are not missing.
    pub distinct: usize,
}

/// Counts every value of `name` and keeps the `n` most frequent.
pub fn top_values(ds: &Dataset, name: &str, n: usize) -> Result<TopValues> {
    let c = value_counts(ds, name, None, n, &[])?;
    let mut values: Vec<(Category, u64)> =
        c.values.into_iter().map(|(cat, n, _)| (cat, n)).collect();
    values.truncate(n);
    Ok(TopValues {
        values,
        distinct: c.distinct,
    })
}

/// Stored keys of a variable's values (the stored integer, or a float's
/// bits): what [`value_counts`] takes for values to keep.
pub fn value_key(var: &Variable, stored: f64) -> i64 {
    if var.kind == Kind::Float {
        (stored + 0.0).to_bits() as i64
    } else {
        stored as i64
    }
}

/// Counts every value of `name` (weighted by `weight` too, rows with a
/// missing weight left out) and keeps the `top` most frequent, every value
/// whose key is in `keep`, missing codes and system-missing.
pub fn value_counts(
    ds: &Dataset,
    name: &str,
    weight: Option<&str>,
    top: usize,
    keep: &[i64],
) -> Result<ValueCounts> {
    let var = ds.variable(name)?.clone();
    let dense = is_table_mapped(&var)
        && match (var.min, var.max) {
            (Some(a), Some(b)) => b.as_i64().saturating_sub(a.as_i64()) < DENSE_LIMIT,
            _ => true,
        };
    let dict = if var.kind == Kind::String {
        ds.dictionary(&var)?
    } else {
        Vec::new()
    };
    // (key or None for system-missing, count, weighted)
    let mut all: Vec<(Option<i64>, u64, Option<f64>)> = Vec::new();
    let mut distinct = 0usize;
    // Values not kept (counted as they are dropped from the top).
    let mut others = (0usize, 0u64, weight.map(|_| 0.0));
    let keep: IntSet<i64> = keep.iter().copied().collect();
    let missing = |k: i64| is_missing(&var, key_value(&var, k));
    if dense {
        let cube = run(
            ds,
            &Query {
                group_by: vec![var.name.clone()],
                weight: weight.map(str::to_string),
                include_missing: true,
                max_cells: Some(usize::MAX),
                ..Query::default()
            },
        )?;
        let cats = cube
            .dims
            .first()
            .map(|d| d.categories.clone())
            .unwrap_or_default();
        for (i, c) in cats.iter().enumerate() {
            let key = category_key(&var, &dict, c);
            if key.is_some_and(|k| !missing(k)) {
                distinct += 1;
            }
            all.push((key, cube.counts[i], cube.weighted.as_ref().map(|w| w[i])));
        }
    } else {
        let col = ds.column(name)?;
        let wcol = weight.map(|w| ds.column(w)).transpose()?;
        if let Some(w) = &wcol {
            if w.var().kind == Kind::String {
                return Err(Error::Invalid(format!(
                    "{} is a string variable and cannot be used as a weight",
                    w.var().name
                )));
            }
        }
        let bound = match (var.kind, var.min, var.max) {
            (Kind::Int | Kind::String, Some(Number::Int(a)), Some(Number::Int(b))) => {
                (b as i128 - a as i128 + 1).min(ds.rows() as i128) as u64
            }
            _ => ds.rows(),
        };
        let parts = bound.div_ceil(MAX_KEYS as u64).max(1);
        let mut best: Vec<(i64, u64, f64)> = Vec::new();
        let mut nulls = (0u64, 0f64);
        let mut dropped = (0usize, 0u64, 0f64);
        for p in 0..parts {
            let (map, n) = count_part(&col, wcol.as_ref(), p, parts)?;
            if p == 0 {
                nulls = n;
            }
            for (&k, &(c, w)) in &map {
                if !missing(k) {
                    distinct += 1;
                }
                if keep.contains(&k) || missing(k) {
                    all.push((Some(k), c, wcol.as_ref().map(|_| w)));
                }
            }
            best.extend(
                map.into_iter()
                    .filter(|(k, _)| !keep.contains(k) && !missing(*k))
                    .map(|(k, (c, w))| (k, c, w)),
            );
            for (_, c, w) in keep_top(&mut best, top, var.kind == Kind::Float) {
                dropped.0 += 1;
                dropped.1 += c;
                dropped.2 += w;
            }
        }
        others = (dropped.0, dropped.1, wcol.as_ref().map(|_| dropped.2));
        if var.nulls > 0 {
            all.push((None, nulls.0, wcol.as_ref().map(|_| nulls.1)));
        }
        let weighted = wcol.is_some();
        all.extend(
            best.into_iter()
                .map(|(k, c, w)| (Some(k), c, weighted.then_some(w))),
        );
    }
    // Most frequent first; ties in value order.
    let float = var.kind == Kind::Float;
    let by_value = |a: &Option<i64>, b: &Option<i64>| match (a, b) {
        (None, None) => std::cmp::Ordering::Equal,
        (None, _) => std::cmp::Ordering::Greater,
        (_, None) => std::cmp::Ordering::Less,
        (Some(x), Some(y)) if float => {
            f64::from_bits(*x as u64).total_cmp(&f64::from_bits(*y as u64))
        }
        (Some(x), Some(y)) => x.cmp(y),
    };
    all.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| by_value(&a.0, &b.0)));
    // Kept: asked-for keys, missing ones, and the `top` most frequent others.
    let mut kept = Vec::new();
    let mut plain_kept = 0;
    for (k, c, w) in all {
        let always = match k {
            None => true,
            Some(k) => keep.contains(&k) || missing(k),
        };
        if always || plain_kept < top {
            if !always {
                plain_kept += 1;
            }
            let cat = match k {
                Some(k) => key_category(&var, &dict, k),
                None => null_category(),
            };
            kept.push((cat, c, w));
        } else if c > 0 {
            others.0 += 1;
            others.1 += c;
            if let (Some(o), Some(w)) = (others.2.as_mut(), w) {
                *o += w;
            }
        }
    }
    Ok(ValueCounts {
        values: kept,
        distinct,
        others,
    })
}

/// Keeps the `n` most frequent keys (ties by value) in `v`; returns the
/// others.
fn keep_top(v: &mut Vec<(i64, u64, f64)>, n: usize, float: bool) -> Vec<(i64, u64, f64)> {
    let order = |a: &(i64, u64, f64), b: &(i64, u64, f64)| {
        b.1.cmp(&a.1).then_with(|| {
            if float {
                f64::from_bits(a.0 as u64).total_cmp(&f64::from_bits(b.0 as u64))
            } else {
                a.0.cmp(&b.0)
            }
        })
    };
    if n == 0 {
        std::mem::take(v)
    } else if v.len() > n {
        v.select_nth_unstable_by(n - 1, order);
        v.split_off(n)
    } else {
        Vec::new()
    }
}

/// The stored key of a category of a table-mapped variable (`None` for
/// system-missing).
fn category_key(var: &Variable, dict: &[String], c: &Category) -> Option<i64> {
    match &c.value {
        crate::Value::Null => None,
        crate::Value::Str(s) => dict.binary_search(s).ok().map(|i| i as i64),
        crate::Value::Int(i) => Some(*i),
        crate::Value::Num(x) => Some((x * var.scale()).round() as i64),
    }
}

/// Which of `parts` passes a key belongs to.
#[inline]
fn part_of(k: i64, parts: u64) -> u64 {
    if parts == 1 {
        0
    } else {
        (k as u64)
            .wrapping_mul(0x9E37_79B9_7F4A_7C15)
            .rotate_left(29)
            % parts
    }
}

/// Counts (and weighs) every non-null key of pass `part` of `parts`
/// (parallel over stretches of 64 Ki rows, each checked against its
/// stripe checksums as it is read); also the system-missing rows of the
/// whole column. Rows whose weight is missing are left out.
#[allow(clippy::type_complexity)]
fn count_part(
    col: &Column,
    weight: Option<&Column>,
    part: u64,
    parts: u64,
) -> microtab_store::Result<(IntMap<i64, (u64, f64)>, (u64, f64))> {
    use rayon::prelude::*;
    const STRETCH: usize = 1 << 16;
    let null = col.var().null_code;
    let float = col.var().kind == Kind::Float;
    let ex = weight.map(|w| Exclusion::of(w.var()));
    let wscale = weight.map_or(1.0, |w| w.var().scale());
    let rows = col.rows();
    type Acc = (IntMap<i64, (u64, f64)>, (u64, f64), Vec<u64>, Vec<u64>);
    let out = (0..rows.div_ceil(STRETCH))
        .into_par_iter()
        .try_fold(
            || -> Acc { (IntMap::default(), (0, 0.0), Vec::new(), Vec::new()) },
            |(mut m, mut nulls, mut buf, mut wbuf), i| -> microtab_store::Result<Acc> {
                let s = i * STRETCH;
                let n = STRETCH.min(rows - s);
                let vals = col.rows_view(s, n, &mut buf)?;
                let ws = match weight {
                    Some(w) => Some(w.rows_view(s, n, &mut wbuf)?),
                    None => None,
                };
                for r in 0..n {
                    let w = match (ws, &ex) {
                        (Some(d), Some(ex)) => match weight_at(d, r, ex) {
                            Some(w) => w / wscale,
                            None => continue,
                        },
                        _ => 1.0,
                    };
                    let key = if float {
                        let x = vals.get_f64(r);
                        (!x.is_nan()).then(|| (x + 0.0).to_bits() as i64)
                    } else {
                        let x = vals.get_i64(r);
                        (Some(x) != null).then_some(x)
                    };
                    match key {
                        Some(k) if part_of(k, parts) == part => {
                            let e = m.entry(k).or_insert((0, 0.0));
                            e.0 += 1;
                            e.1 += w;
                        }
                        Some(_) => {}
                        None => {
                            nulls.0 += 1;
                            nulls.1 += w;
                        }
                    }
                }
                Ok((m, nulls, buf, wbuf))
            },
        )
        .map(|r| r.map(|(m, n, _, _)| (m, n)))
        .try_reduce(
            || (IntMap::default(), (0, 0.0)),
            |(a, na), (b, nb)| {
                let nulls = (na.0 + nb.0, na.1 + nb.1);
                Ok(if a.len() < b.len() {
                    merge(b, a, nulls)
                } else {
                    merge(a, b, nulls)
                })
            },
        )?;
    Ok(out)
}

#[allow(clippy::type_complexity)]
fn merge(
    mut a: IntMap<i64, (u64, f64)>,
    b: IntMap<i64, (u64, f64)>,
    nulls: (u64, f64),
) -> (IntMap<i64, (u64, f64)>, (u64, f64)) {
    for (k, (c, w)) in b {
        let e = a.entry(k).or_insert((0, 0.0));
        e.0 += c;
        e.1 += w;
    }
    (a, nulls)
}

/// The weight of row `r` in stored units, `None` when it is missing.
#[inline]
fn weight_at(d: ColumnData<'_>, r: usize, ex: &Exclusion) -> Option<f64> {
    let x = d.get_f64(r);
    if ex.float && x.is_nan() {
        return None;
    }
    if !ex.float && ex.null_code.is_some_and(|n| d.get_i64(r) == n) {
        return None;
    }
    (!ex.missing.contains(&x)).then_some(x)
}
