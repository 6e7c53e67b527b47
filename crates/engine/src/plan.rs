//! Turning grouping variables and filter terms into per-value lookups.
//!
//! Every grouping variable becomes a [`Mapper`] from stored value to a
//! pre-multiplied cell offset (`category × stride`) or [`TRASH`]; every
//! filter term becomes a mapper to `0` (pass) or [`TRASH`]. The kernel
//! combines them with one add and one or per row and value.

use crate::filter::Predicate;
use crate::value::{category, null_category, Category};
use microtab_store::{Column, ColumnData, Kind, Variable};
use std::collections::HashMap;

/// Set in a row's cell index when the row is excluded.
pub(crate) const TRASH: u32 = 1 << 31;
/// Largest value range mapped through a direct table.
pub(crate) const MAX_TABLE: i64 = 1 << 20;

/// Stored value → entry (`offset` or [`TRASH`]).
pub(crate) enum Mapper {
    /// Direct table over `base .. base + table.len()`; anything outside
    /// (the null code) maps to `outside`.
    Table {
        base: i64,
        table: Vec<u32>,
        outside: u32,
    },
    /// Distinct values (as `i64`, or `f64` bits for floats) → entry.
    Hash {
        map: HashMap<u64, u32>,
        float: bool,
        null: u32,
        other: u32,
    },
    /// Evaluate a predicate per row (filters on floats or wide ranges).
    Eval {
        pred: Predicate,
        missing: Vec<f64>,
        null_code: Option<i64>,
        float: bool,
    },
}

/// A grouping variable: its categories and how values reach them.
pub(crate) struct DimPlan {
    pub var: Variable,
    pub categories: Vec<Category>,
    /// Per category: its stored value (for table building); `None` for null.
    pub stored: Vec<Option<f64>>,
    pub hashed: bool,
}

fn is_missing(var: &Variable, v: f64) -> bool {
    var.missing_codes.contains(&v)
}

/// Lists the categories of a grouping variable: every value in its range
/// (table-mapped) or every distinct value (hash-mapped, found by a scan).
pub(crate) fn dim_categories(col: &Column, dict: Vec<String>, include_missing: bool) -> DimPlan {
    let var = col.var().clone();
    let mut categories = Vec::new();
    let mut stored = Vec::new();
    let mut push = |v: f64, cats: &mut Vec<Category>| {
        let missing = is_missing(&var, v);
        if missing && !include_missing {
            return;
        }
        let mut c = category(&var, v, missing);
        if var.kind == Kind::String {
            let s = dict.get(v as usize).cloned().unwrap_or_default();
            c.display = s.clone();
            c.label = var.value_labels.get(&s).cloned();
            c.value = crate::Value::Str(s);
        }
        cats.push(c);
        stored.push(Some(v));
    };
    let table_range = match (var.min, var.max) {
        (Some(lo), Some(hi)) if var.kind != Kind::Float && hi - lo < MAX_TABLE as f64 => {
            Some((lo as i64, hi as i64))
        }
        (None, None) => Some((0, -1)),
        _ => None,
    };
    let hashed = table_range.is_none();
    match table_range {
        Some((lo, hi)) => {
            for v in lo..=hi {
                push(v as f64, &mut categories);
            }
        }
        None => {
            for v in distinct_values(col) {
                push(v, &mut categories);
            }
        }
    }
    if include_missing && var.nulls > 0 {
        categories.push(null_category());
        stored.push(None);
    }
    DimPlan {
        var,
        categories,
        stored,
        hashed,
    }
}

/// Sorted distinct non-null values of a column (parallel scan).
fn distinct_values(col: &Column) -> Vec<f64> {
    use rayon::prelude::*;
    let null = col.var().null_code;
    fn scan<T: Copy + Send + Sync + Into<f64>>(v: &[T], null: Option<i64>) -> Vec<f64> {
        let sets = v
            .par_chunks(1 << 16)
            .fold(HashMap::<u64, ()>::new, |mut s, c| {
                for &x in c {
                    let f: f64 = x.into();
                    if f.is_nan() || null.is_some_and(|n| f == n as f64) {
                        continue;
                    }
                    s.insert(f.to_bits(), ());
                }
                s
            })
            .reduce(HashMap::new, |mut a, b| {
                a.extend(b);
                a
            });
        let mut out: Vec<f64> = sets.into_keys().map(f64::from_bits).collect();
        out.sort_by(|a, b| a.partial_cmp(b).unwrap());
        out
    }
    match col.data() {
        ColumnData::U8(v) => scan(v, null),
        ColumnData::I8(v) => scan(v, null),
        ColumnData::U16(v) => scan(v, null),
        ColumnData::I16(v) => scan(v, null),
        ColumnData::U32(v) => scan(v, null),
        ColumnData::I32(v) => scan(v, null),
        ColumnData::I64(v) => {
            let conv: Vec<f64> = v.iter().map(|&x| x as f64).collect();
            scan(&conv, null)
        }
        ColumnData::F32(v) => scan(v, null),
        ColumnData::F64(v) => scan(v, null),
    }
}

/// Builds the mapper of a (possibly compacted) dimension with `stride`.
pub(crate) fn dim_mapper(d: &DimPlan, stride: u32) -> Mapper {
    let null_entry = d
        .stored
        .iter()
        .position(|s| s.is_none())
        .map(|i| i as u32 * stride)
        .unwrap_or(TRASH);
    if d.hashed {
        let float = d.var.kind == Kind::Float;
        let map = d
            .stored
            .iter()
            .enumerate()
            .filter_map(|(i, s)| {
                s.map(|v| {
                    let key = if float { v.to_bits() } else { v as i64 as u64 };
                    (key, i as u32 * stride)
                })
            })
            .collect();
        return Mapper::Hash {
            map,
            float,
            null: null_entry,
            other: TRASH,
        };
    }
    let (lo, hi) = match (d.var.min, d.var.max) {
        (Some(lo), Some(hi)) => (lo as i64, hi as i64),
        _ => (0, -1),
    };
    let mut table = vec![TRASH; (hi - lo + 1).max(0) as usize];
    for (i, s) in d.stored.iter().enumerate() {
        if let Some(v) = s {
            table[(*v as i64 - lo) as usize] = i as u32 * stride;
        }
    }
    Mapper::Table {
        base: lo,
        table,
        outside: null_entry,
    }
}

/// Builds the pass/fail mapper of a filter term on `var`.
pub(crate) fn filter_mapper(var: &Variable, pred: Predicate) -> Mapper {
    match (var.min, var.max) {
        (Some(lo), Some(hi)) if var.kind != Kind::Float && hi - lo < MAX_TABLE as f64 => {
            let (lo, hi) = (lo as i64, hi as i64);
            let table = (lo..=hi)
                .map(|v| {
                    let f = v as f64;
                    if !is_missing(var, f) && pred.test(f) {
                        0
                    } else {
                        TRASH
                    }
                })
                .collect();
            Mapper::Table {
                base: lo,
                table,
                outside: TRASH,
            }
        }
        (None, None) => Mapper::Table {
            base: 0,
            table: Vec::new(),
            outside: TRASH,
        },
        _ => Mapper::Eval {
            pred,
            missing: var.missing_codes.clone(),
            null_code: var.null_code,
            float: var.kind == Kind::Float,
        },
    }
}

/// Stored values that make a row unusable as a weight or analysis value.
pub(crate) struct Exclusion {
    pub missing: Vec<f64>,
    pub null_code: Option<i64>,
}

impl Exclusion {
    pub fn of(var: &Variable) -> Self {
        Exclusion {
            missing: var.missing_codes.clone(),
            null_code: if var.kind == Kind::Float {
                None
            } else {
                var.null_code
            },
        }
    }
}
