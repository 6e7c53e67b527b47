//! Turning grouping variables and filter terms into per-value lookups.
//!
//! Every grouping variable becomes a [`Mapper`] from stored value to a
//! pre-multiplied cell offset (`category × stride`) or [`TRASH`]; every
//! filter term becomes a mapper to `0` (pass) or [`TRASH`]. The kernel
//! combines them with one add and one or per row and value.

use crate::filter::Predicate;
use crate::hash::{IntMap, IntSet};
use crate::value::{category, null_category, Category};
use microtab_store::{Column, ColumnData, Kind, Variable};

/// Set in a row's cell index when the row is excluded.
pub(crate) const TRASH: u32 = 1 << 31;
/// Largest value range mapped through a direct table.
pub(crate) const MAX_TABLE: i64 = 1 << 20;

/// Stored value → entry (`offset` or [`TRASH`]).
#[derive(Clone)]
pub(crate) enum Mapper {
    /// Full table for a `u8` column: no range check, no bounds check.
    Byte(Box<[u32; 256]>),
    /// Full table for a `u16` column.
    Word(Box<[u32; 65536]>),
    /// Direct table over `base .. base + table.len()`; anything outside
    /// (the null code) maps to `outside`.
    Table {
        base: i64,
        table: Vec<u32>,
        outside: u32,
    },
    /// An integer range too wide for a direct table, mapped through a
    /// bitmap of the values that occur and a running count of its set bits
    /// (a rank dictionary): the entry of `v` is
    /// `(prefix[w] + popcount(bits[w] & below(v))) · stride`, `w` the word
    /// of `v − base`; `null` for the null code, TRASH for values whose bit
    /// is clear (missing codes). 1 bit and 1/2 byte per value of the range:
    /// INCTOT's 10 M-value range takes 1.9 MB, against hashing every row.
    Rank {
        base: i64,
        /// `max − min + 1`: offsets at or beyond it (the null code) are null.
        len: u64,
        bits: Vec<u64>,
        prefix: Vec<u32>,
        stride: u32,
        null: u32,
    },
    /// Distinct values (as `i64`, or `f64` bits for floats) → entry.
    Hash {
        map: IntMap<u64, u32>,
        float: bool,
        null: u32,
        other: u32,
    },
    /// Inclusive integer ranges that pass (sorted, disjoint; missing codes
    /// and the null code already cut out): filters on integer columns too
    /// wide for a table, tested branch-free per row.
    Ranges(Vec<(i64, i64)>),
    /// Evaluate a predicate per row (filters on floats).
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
    /// Per category: its key (stored integer, or `f64` bits for floats);
    /// `None` for system-missing.
    pub keys: Vec<Option<i64>>,
    /// How values reach categories.
    pub map: DimMap,
    /// A recode's lookup table: the first stored value, and each value's
    /// category (`TRASH`: none) ([`crate::recode`]).
    pub recode: Option<(i64, Vec<u32>)>,
    /// A recode of a float or of an integer range too wide for a table:
    /// each distinct stored key (`f64` bits for floats) with its category.
    pub recode_keys: Option<Vec<(i64, u32)>>,
}

/// How a grouping variable's values reach its categories.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum DimMap {
    /// A direct table over its range (every value of the range a
    /// category, or with a compacted plan every value that occurs; the
    /// others map to no cell).
    Table,
    /// A rank dictionary over its range (the values that occur).
    Rank,
    /// A hash map of the values that occur (floats; integer ranges beyond
    /// [`MAX_RANK`]).
    Hash,
}

/// Largest integer range mapped through a rank dictionary (32 MiB of
/// bitmap and 16 MiB of counts at most).
pub(crate) const MAX_RANK: i64 = 1 << 28;

/// The exact integer range of an int or string variable when it spans
/// fewer than `limit` values.
fn int_range(var: &Variable, limit: i64) -> Option<(i64, i64)> {
    match (var.min, var.max) {
        (Some(lo), Some(hi)) if var.kind != Kind::Float => {
            let (lo, hi) = (lo.as_i64(), hi.as_i64());
            (hi.checked_sub(lo).is_some_and(|d| d < limit)).then_some((lo, hi))
        }
        _ => None,
    }
}

/// Bitmap of the values of an integer column that occur, over `lo..=hi`
/// (one bit each; the null code lies outside): the column header's value
/// set where it has one, or else built in parallel over stretches of rows.
fn occurring(col: &Column, lo: i64, hi: i64) -> microtab_store::Result<Vec<u64>> {
    if let Some(bits) = col.occurring(lo, hi) {
        // The header's value set (columns of at most 16 bits): no scan.
        return Ok(bits);
    }
    let span = (hi - lo) as u64;
    let words = (span >> 6) as usize + 1;
    if hi - lo >= MAX_TABLE {
        return fold_keys(
            col,
            || vec![0u64; words],
            |bits, o| bits[(o >> 6) as usize] |= 1 << (o & 63),
            |a, b| a.iter_mut().zip(b).for_each(|(x, y)| *x |= y),
            (lo, span),
        );
    }
    // A byte a value: each row is one store with no read of the word it
    // lands in (a run of equal values, as sorted codes give, set bits at
    // one word's read-modify-write latency a row: 8.5 ms against ~2 ms for
    // PUMA on the 14.1 M census).
    let seen = fold_keys(
        col,
        || vec![0u8; span as usize + 1],
        |seen, o| seen[o as usize] = 1,
        |a, b| a.iter_mut().zip(b).for_each(|(x, y)| *x |= y),
        (lo, span),
    )?;
    let mut bits = vec![0u64; words];
    for (o, &b) in seen.iter().enumerate() {
        bits[o >> 6] |= (b as u64) << (o & 63);
    }
    Ok(bits)
}

/// Folds the offsets `key − lo` within `0..=span` of an integer column's
/// values into one state a worker (`mark`), in parallel over stretches of
/// rows, and merges the workers' states.
fn fold_keys<S: Send>(
    col: &Column,
    init: impl Fn() -> S + Sync + Send,
    mark: impl Fn(&mut S, u64) + Sync + Send,
    merge: impl Fn(&mut S, &S) + Sync + Send,
    (lo, span): (i64, u64),
) -> microtab_store::Result<S> {
    use rayon::prelude::*;
    const STRETCH: usize = 1 << 16;
    let rows = col.rows();
    fn each<T: Copy, S>(
        v: &[T],
        key: impl Fn(T) -> i64,
        s: &mut S,
        lo: i64,
        span: u64,
        mark: &impl Fn(&mut S, u64),
    ) {
        for &x in v {
            let o = key(x).wrapping_sub(lo) as u64;
            if o <= span {
                mark(s, o);
            }
        }
    }
    (0..rows.div_ceil(STRETCH))
        .into_par_iter()
        .try_fold(
            || (init(), Vec::<u64>::new()),
            |(mut st, mut buf), i| {
                let s = i * STRETCH;
                let data = col.rows_view(s, STRETCH.min(rows - s), &mut buf)?;
                let (b, m) = (&mut st, &mark);
                match data {
                    ColumnData::U8(v) => each(v, |x| x as i64, b, lo, span, m),
                    ColumnData::I8(v) => each(v, |x| x as i64, b, lo, span, m),
                    ColumnData::U16(v) => each(v, |x| x as i64, b, lo, span, m),
                    ColumnData::I16(v) => each(v, |x| x as i64, b, lo, span, m),
                    ColumnData::U32(v) => each(v, |x| x as i64, b, lo, span, m),
                    ColumnData::I32(v) => each(v, |x| x as i64, b, lo, span, m),
                    ColumnData::I64(v) => each(v, |x| x, b, lo, span, m),
                    ColumnData::F32(_) | ColumnData::F64(_) => unreachable!("integer column"),
                }
                Ok::<_, microtab_store::Error>((st, buf))
            },
        )
        .map(|r| r.map(|(st, _)| st))
        .try_reduce(&init, |mut a, b| {
            merge(&mut a, &b);
            Ok(a)
        })
}

pub(crate) fn is_missing(var: &Variable, v: f64) -> bool {
    var.missing_codes.contains(&v)
}

pub(crate) fn key_value(var: &Variable, key: i64) -> f64 {
    if var.kind == Kind::Float {
        f64::from_bits(key as u64)
    } else {
        key as f64
    }
}

/// The exact integer range of an int or string variable, if small enough
/// for a direct table.
fn table_range(var: &Variable) -> Option<(i64, i64)> {
    match (var.min, var.max) {
        (None, None) => Some((0, -1)),
        _ => int_range(var, MAX_TABLE),
    }
}

/// The category of a stored key (see [`DimPlan::keys`]).
pub(crate) fn key_category(var: &Variable, dict: &[String], key: i64) -> Category {
    let missing = is_missing(var, key_value(var, key));
    let mut c = category(var, key, missing);
    if var.kind == Kind::String {
        let s = dict.get(key as usize).cloned().unwrap_or_default();
        c.display = s.clone();
        c.label = var.value_labels.get(&s).cloned();
        c.value = crate::Value::Str(s);
    }
    c
}

/// Whether a variable's values map through a direct table (small range).
pub(crate) fn is_table_mapped(var: &Variable) -> bool {
    table_range(var).is_some()
}

/// Every distinct non-null key of a column (parallel over stretches of 64
/// Ki rows, each unpacked and checked on its own; for wide domains), or
/// `None` as soon as there are more than `limit` of them, so that a
/// grouping the query refuses never takes memory for all its values.
pub(crate) fn distinct_key_set(
    col: &Column,
    limit: usize,
) -> microtab_store::Result<Option<IntSet<i64>>> {
    use rayon::prelude::*;
    const STRETCH: usize = 1 << 16;
    let null = col.var().null_code;
    fn add<T: Copy>(v: &[T], key: impl Fn(T) -> Option<i64>, m: &mut IntSet<i64>) {
        for &x in v {
            if let Some(k) = key(x) {
                m.insert(k);
            }
        }
    }
    enum Stop {
        Err(microtab_store::Error),
        TooMany,
    }
    let int = |x: i64| (Some(x) != null).then_some(x);
    // -0.0 + 0.0 is +0.0: one category for zero.
    let flt = |x: f64| (!x.is_nan()).then_some((x + 0.0).to_bits() as i64);
    let rows = col.rows();
    let r = (0..rows.div_ceil(STRETCH))
        .into_par_iter()
        .try_fold(
            || (IntSet::<i64>::default(), Vec::<u64>::new()),
            |(mut m, mut buf), i| {
                let s = i * STRETCH;
                let data = col
                    .rows_view(s, STRETCH.min(rows - s), &mut buf)
                    .map_err(Stop::Err)?;
                match data {
                    ColumnData::U8(v) => add(v, |x| int(x as i64), &mut m),
                    ColumnData::I8(v) => add(v, |x| int(x as i64), &mut m),
                    ColumnData::U16(v) => add(v, |x| int(x as i64), &mut m),
                    ColumnData::I16(v) => add(v, |x| int(x as i64), &mut m),
                    ColumnData::U32(v) => add(v, |x| int(x as i64), &mut m),
                    ColumnData::I32(v) => add(v, |x| int(x as i64), &mut m),
                    ColumnData::I64(v) => add(v, int, &mut m),
                    ColumnData::F32(v) => add(v, |x| flt(x as f64), &mut m),
                    ColumnData::F64(v) => add(v, flt, &mut m),
                }
                if m.len() > limit {
                    return Err(Stop::TooMany);
                }
                Ok((m, buf))
            },
        )
        .map(|r| r.map(|(m, _)| m))
        .try_reduce(IntSet::default, |a, b| {
            let (mut a, b) = if a.len() >= b.len() { (a, b) } else { (b, a) };
            a.extend(b);
            if a.len() > limit {
                return Err(Stop::TooMany);
            }
            Ok(a)
        });
    match r {
        Ok(m) => Ok(Some(m)),
        Err(Stop::TooMany) => Ok(None),
        Err(Stop::Err(e)) => Err(e),
    }
}

/// Lists the categories of a grouping variable: every value in its range
/// (table-mapped), or every value that occurs (rank- or hash-mapped, found
/// by a scan). With `compact`, a table-mapped variable keeps only the
/// values that occur too (found by a scan; its table sends the others to
/// no cell), so that a cross of wide code ranges, most of whose values
/// never occur, plans the cells the data can fill and not the product of
/// the ranges.
pub(crate) fn dim_categories(
    col: &Column,
    dict: Vec<String>,
    include_missing: bool,
    max_cells: usize,
    compact: bool,
) -> crate::core::Result<DimPlan> {
    let var = col.var().clone();
    let mut categories = Vec::new();
    let mut keys = Vec::new();
    let mut push = |key: i64, cats: &mut Vec<Category>| {
        let missing = is_missing(&var, key_value(&var, key));
        if missing && !include_missing {
            return;
        }
        cats.push(key_category(&var, &dict, key));
        keys.push(Some(key));
    };
    let too_many = || crate::core::Error::TooManyCells {
        cells: None,
        limit: max_cells as u64,
        bytes: 0,
        variable: Some(var.name.clone()),
        shape: Vec::new(),
    };
    let map = match (table_range(&var), int_range(&var, MAX_RANK)) {
        (Some((lo, hi)), _) if compact && hi >= lo => {
            let bits = occurring(col, lo, hi)?;
            for v in lo..=hi {
                let o = (v - lo) as usize;
                if bits[o >> 6] >> (o & 63) & 1 == 1 {
                    push(v, &mut categories);
                }
            }
            DimMap::Table
        }
        (Some((lo, hi)), _) => {
            for v in lo..=hi {
                push(v, &mut categories);
            }
            DimMap::Table
        }
        (None, Some((lo, hi))) => {
            let bits = occurring(col, lo, hi)?;
            let n: u64 = bits.iter().map(|w| w.count_ones() as u64).sum();
            if n > max_cells as u64 {
                return Err(too_many());
            }
            for (w, &word) in bits.iter().enumerate() {
                let mut x = word;
                while x != 0 {
                    let b = x.trailing_zeros() as i64;
                    push(lo + ((w as i64) << 6) + b, &mut categories);
                    x &= x - 1;
                }
            }
            DimMap::Rank
        }
        (None, None) => {
            let Some(keys) = distinct_keys(col, max_cells)? else {
                return Err(too_many());
            };
            for v in keys {
                push(v, &mut categories);
            }
            DimMap::Hash
        }
    };
    if include_missing && var.nulls > 0 {
        categories.push(null_category());
        keys.push(None);
    }
    Ok(DimPlan {
        var,
        categories,
        keys,
        map,
        recode: None,
        recode_keys: None,
    })
}

/// Sorted distinct non-null keys of a column (parallel scan): exact
/// integers for int and string kinds, `f64` bits for floats.
pub(crate) fn distinct_keys(
    col: &Column,
    limit: usize,
) -> microtab_store::Result<Option<Vec<i64>>> {
    let Some(set) = distinct_key_set(col, limit)? else {
        return Ok(None);
    };
    let mut out: Vec<i64> = set.into_iter().collect();
    if col.var().kind == Kind::Float {
        out.sort_by(|a, b| f64::from_bits(*a as u64).total_cmp(&f64::from_bits(*b as u64)));
    } else {
        out.sort_unstable();
    }
    Ok(Some(out))
}

/// Builds the mapper of a dimension with `stride`.
pub(crate) fn dim_mapper(d: &DimPlan, stride: u32) -> Mapper {
    // The missing category's cell, when missing values are a category of
    // their own; TRASH otherwise.
    let null_entry = d
        .keys
        .iter()
        .position(|k| k.is_none())
        .map_or(TRASH, |i| i as u32 * stride);
    // A group's cell (TRASH: in no group).
    let cell = |g: u32| if g == TRASH { TRASH } else { g * stride };
    if let Some(pairs) = &d.recode_keys {
        return Mapper::Hash {
            // Every value that occurs is in the map (those in no group as
            // TRASH): an integer key missing from it is the null code.
            map: pairs.iter().map(|&(k, g)| (k as u64, cell(g))).collect(),
            float: d.var.kind == Kind::Float,
            null: null_entry,
            other: TRASH,
        };
    }
    if let Some((base, codes)) = &d.recode {
        return Mapper::Table {
            base: *base,
            table: codes.iter().map(|&g| cell(g)).collect(),
            // Outside the range: the null code.
            outside: null_entry,
        };
    }
    if d.map == DimMap::Rank {
        let (lo, hi) = int_range(&d.var, MAX_RANK).expect("rank-mapped");
        let words = ((hi - lo) as usize >> 6) + 1;
        let mut bits = vec![0u64; words];
        for k in d.keys.iter().flatten() {
            let o = (k - lo) as usize;
            bits[o >> 6] |= 1 << (o & 63);
        }
        let mut prefix = Vec::with_capacity(words);
        let mut n = 0u32;
        for w in &bits {
            prefix.push(n);
            n += w.count_ones();
        }
        return Mapper::Rank {
            base: lo,
            len: (hi - lo) as u64 + 1,
            bits,
            prefix,
            stride,
            null: null_entry,
        };
    }
    if d.map == DimMap::Hash {
        let float = d.var.kind == Kind::Float;
        let map = d
            .keys
            .iter()
            .enumerate()
            .filter_map(|(i, k)| k.map(|k| (k as u64, i as u32 * stride)))
            .collect();
        return Mapper::Hash {
            map,
            float,
            null: null_entry,
            other: TRASH,
        };
    }
    let (lo, hi) = table_range(&d.var).expect("table-mapped");
    let mut table = vec![TRASH; (hi - lo + 1).max(0) as usize];
    for (i, k) in d.keys.iter().enumerate() {
        if let Some(v) = k {
            table[(*v - lo) as usize] = i as u32 * stride;
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
    // Beyond byte codes (whose 1 KiB table stays in L1), one or two ranges
    // compared per row beat a table lookup: a u16 column's 256 KiB table
    // misses the L1 cache (OCC(100-500) 35 vs 25 ms on the census).
    if let Predicate::Ints(r) = &pred {
        if var.kind != Kind::Float && var.ty != microtab_store::PhysType::U8 {
            let ranges = passing_ranges(var, r);
            if ranges.len() <= 2 {
                return Mapper::Ranges(ranges);
            }
        }
    }
    match table_range(var) {
        Some((lo, hi)) => {
            let table = (lo..=hi)
                .map(|v| {
                    let f = v as f64;
                    if !is_missing(var, f) && pred.test_int(v) {
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
        None => match pred {
            Predicate::Ints(r) if var.kind != Kind::Float => {
                Mapper::Ranges(passing_ranges(var, &r))
            }
            pred => Mapper::Eval {
                pred,
                missing: var.missing_codes.clone(),
                null_code: var.null_code,
                float: var.kind == Kind::Float,
            },
        },
    }
}

/// Whether `pred` passes every value of `var` that is not missing (so on
/// rows where `var` is excluded when missing anyway, it filters nothing).
pub(crate) fn passes_all_valid(var: &Variable, pred: &Predicate) -> bool {
    match pred {
        Predicate::Ints(r) if var.kind != Kind::Float && var.min.is_some() => {
            passing_ranges(var, r) == passing_ranges(var, &[(i64::MIN, i64::MAX)])
        }
        _ => false,
    }
}

/// The stored values of an integer variable that pass the ranges `r`:
/// within the variable's range, without its missing codes and null code,
/// as sorted disjoint inclusive ranges.
pub(crate) fn passing_ranges(var: &Variable, r: &[(i64, i64)]) -> Vec<(i64, i64)> {
    let (lo, hi) = match (var.min, var.max) {
        (Some(a), Some(b)) => (a.as_i64(), b.as_i64()),
        _ => return Vec::new(),
    };
    let mut ranges: Vec<(i64, i64)> = r
        .iter()
        .map(|&(a, b)| (a.max(lo), b.min(hi)))
        .filter(|(a, b)| a <= b)
        .collect();
    ranges.sort_unstable();
    let mut merged: Vec<(i64, i64)> = Vec::with_capacity(ranges.len());
    for (a, b) in ranges {
        match merged.last_mut() {
            Some(l) if a <= l.1.saturating_add(1) => l.1 = l.1.max(b),
            _ => merged.push((a, b)),
        }
    }
    let mut cut: Vec<i64> = var
        .missing_codes
        .iter()
        .filter(|m| m.fract() == 0.0 && m.abs() < 9.2e18)
        .map(|&m| m as i64)
        .chain(var.null_code)
        .collect();
    cut.sort_unstable();
    cut.dedup();
    for c in cut {
        let mut out = Vec::with_capacity(merged.len() + 1);
        for (a, b) in merged {
            if c < a || c > b {
                out.push((a, b));
                continue;
            }
            if a < c {
                out.push((a, c - 1));
            }
            if c < b {
                out.push((c + 1, b));
            }
        }
        merged = out;
    }
    merged
}

/// What a filter's zone maps say of a morsel.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Fate {
    /// No row can pass: the morsel is not read.
    Skip,
    /// Rows must be tested.
    Scan,
    /// Every row passes.
    Pass,
}

impl Fate {
    /// The fate of a morsel under two filters' fates.
    pub(crate) fn and(self, o: Fate) -> Fate {
        match (self, o) {
            (Fate::Skip, _) | (_, Fate::Skip) => Fate::Skip,
            (Fate::Pass, Fate::Pass) => Fate::Pass,
            _ => Fate::Scan,
        }
    }
}

/// The fate of each morsel of `morsel_rows` rows under a filter passing
/// the stored values `ranges` (sorted, disjoint: [`passing_ranges`]),
/// from its column's zone map (`zones`: one per stripe of
/// `stripe_rows` rows, which divides `morsel_rows`).
pub(crate) fn zone_fates(
    ranges: &[(i64, i64)],
    zones: &[microtab_store::Zone],
    stripe_rows: usize,
    morsel_rows: usize,
) -> Vec<Fate> {
    let stripe = |z: &microtab_store::Zone| {
        if z.lo > z.hi {
            return Fate::Skip; // nulls only: they fail every filter
        }
        // The first range ending at or after the smallest value.
        let i = ranges.partition_point(|&(_, b)| b < z.lo);
        match ranges.get(i) {
            Some(&(a, b)) if a <= z.lo && z.hi <= b && !z.nulls => Fate::Pass,
            Some(&(a, _)) if a <= z.hi => Fate::Scan,
            _ => Fate::Skip,
        }
    };
    let per = morsel_rows / stripe_rows;
    zones
        .chunks(per)
        .map(|m| {
            let f: Vec<Fate> = m.iter().map(stripe).collect();
            if f.iter().all(|&f| f == Fate::Skip) {
                Fate::Skip
            } else if f.iter().all(|&f| f == Fate::Pass) {
                Fate::Pass
            } else {
                Fate::Scan
            }
        })
        .collect()
}

/// Stored values that make a row unusable as a weight or analysis value.
#[derive(Clone)]
pub(crate) struct Exclusion {
    pub missing: Vec<f64>,
    pub null_code: Option<i64>,
    pub float: bool,
}

impl Exclusion {
    /// True when no value can be excluded (no missing codes, no nulls, not float).
    pub fn is_empty(&self) -> bool {
        self.missing.is_empty() && self.null_code.is_none() && !self.float
    }

    pub fn of(var: &Variable) -> Self {
        Exclusion {
            missing: var.missing_codes.clone(),
            null_code: if var.kind == Kind::Float {
                None
            } else {
                var.null_code
            },
            float: var.kind == Kind::Float,
        }
    }
}

/// Turns a range table on a `u8`/`u16` column into a full table indexed by
/// the raw code, so the kernel needs no subtraction or bounds check.
pub(crate) fn specialize(m: Mapper, ty: microtab_store::PhysType) -> Mapper {
    use microtab_store::PhysType;
    let Mapper::Table {
        base,
        table,
        outside,
    } = &m
    else {
        return m;
    };
    let full = |n: usize| -> Vec<u32> {
        (0..n as i64)
            .map(|v| {
                let off = v - base;
                if off >= 0 && (off as usize) < table.len() {
                    table[off as usize]
                } else {
                    *outside
                }
            })
            .collect()
    };
    match ty {
        PhysType::U8 => Mapper::Byte(full(256).into_boxed_slice().try_into().expect("256")),
        PhysType::U16 => Mapper::Word(full(65536).into_boxed_slice().try_into().expect("65536")),
        _ => m,
    }
}

#[cfg(test)]
mod tests {
    use super::{zone_fates, Fate};
    use microtab_store::Zone;

    fn z(lo: i64, hi: i64, nulls: bool) -> Zone {
        Zone { lo, hi, nulls }
    }

    /// Zones against passing ranges, worked out by hand: a zone inside one
    /// range passes whole unless it holds nulls; one touching a range at
    /// either end, or spanning a gap between ranges, is scanned; one in a
    /// gap, beyond every range or holding only nulls is skipped.
    #[test]
    fn zone_fates_by_hand() {
        let ranges = [(10, 20), (30, 40)];
        let zones = [
            z(12, 18, false),            // inside the first range
            z(12, 18, true),             // inside, but nulls fail
            z(5, 10, false),             // touches 10
            z(40, 50, false),            // touches 40
            z(21, 29, false),            // in the gap
            z(15, 35, false),            // spans the gap
            z(0, 9, false),              // below
            z(41, 99, false),            // above
            z(i64::MAX, i64::MIN, true), // nulls only
            z(30, 40, false),            // exactly the second range
        ];
        use Fate::*;
        assert_eq!(
            zone_fates(&ranges, &zones, 1, 1),
            [Pass, Scan, Scan, Scan, Skip, Scan, Skip, Skip, Skip, Pass]
        );
        // Morsels of two stripes: skipped or passed only when both are
        // (a stripe skipped beside one passed whole is scanned).
        assert_eq!(
            zone_fates(&ranges, &zones, 1, 2),
            [Scan, Scan, Scan, Skip, Scan]
        );
        assert_eq!(zone_fates(&ranges, &[zones[0], zones[9]], 1, 2), [Pass]);
        // No passing values: every stripe is skipped.
        assert_eq!(zone_fates(&[], &zones[..2], 1, 1), [Skip, Skip]);
        assert_eq!(Pass.and(Scan), Scan);
        assert_eq!(Scan.and(Skip), Skip);
        assert_eq!(Pass.and(Pass), Pass);
    }
}
