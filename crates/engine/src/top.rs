//! The most frequent values of one variable (for codebooks), in memory
//! bounded by the number of distinct values, not by a category per value.

use crate::plan::{is_missing, is_table_mapped, key_category, key_counts, key_value};
use crate::value::null_category;
use crate::{run, Category, Query, Result};
use microtab_store::{Dataset, Kind};

/// The `n` most frequent values of a variable and how many distinct
/// non-missing values it has.
#[derive(Debug, Clone)]
pub struct TopValues {
    /// Values with their record counts, most frequent first (ties by value);
    /// missing codes and system-missing included, flagged `missing`.
    pub values: Vec<(Category, u64)>,
    /// Distinct values that are not missing.
    pub distinct: usize,
}

/// Counts every value of `name` and keeps the `n` most frequent.
///
/// Small code domains go through the ordinary tabulation; wide ones (ids,
/// incomes) are counted in a hash map of keys, and categories are built
/// only for the values kept, so a 5-million-value id costs a hash map, not
/// five million labelled categories.
pub fn top_values(ds: &Dataset, name: &str, n: usize) -> Result<TopValues> {
    let var = ds.variable(name)?.clone();
    let mut all: Vec<(Category, u64)>;
    let distinct;
    if is_table_mapped(&var) {
        let cube = run(
            ds,
            &Query {
                group_by: vec![var.name.clone()],
                include_missing: true,
                ..Query::default()
            },
        )?;
        let cats = cube
            .dims
            .first()
            .map(|d| d.categories.clone())
            .unwrap_or_default();
        distinct = cats.iter().filter(|c| !c.missing).count();
        all = cats.into_iter().zip(cube.counts).collect();
        // Stable: ties stay in value order.
        all.sort_by_key(|x| std::cmp::Reverse(x.1));
        all.truncate(n);
    } else {
        let col = ds.column(name)?;
        let dict = if var.kind == Kind::String {
            ds.dictionary(&var)?
        } else {
            Vec::new()
        };
        let (counts, nulls) = key_counts(&col)?;
        let mut keys: Vec<(i64, u64)> = counts.into_iter().collect();
        let float = var.kind == Kind::Float;
        distinct = keys
            .iter()
            .filter(|(k, _)| !is_missing(&var, key_value(&var, *k)))
            .count();
        let order = |a: &(i64, u64), b: &(i64, u64)| {
            b.1.cmp(&a.1).then_with(|| {
                if float {
                    f64::from_bits(a.0 as u64).total_cmp(&f64::from_bits(b.0 as u64))
                } else {
                    a.0.cmp(&b.0)
                }
            })
        };
        let k = n.min(keys.len());
        if k > 0 && k < keys.len() {
            keys.select_nth_unstable_by(k - 1, order);
            keys.truncate(k);
        }
        // Ties in value order, whatever the hash map's order was.
        keys.sort_by(order);
        all = keys
            .iter()
            .map(|&(key, c)| (key_category(&var, &dict, key), c))
            .collect();
        if nulls > 0 {
            all.push((null_category(), nulls));
        }
        all.sort_by_key(|x| std::cmp::Reverse(x.1));
        all.truncate(n);
    }
    Ok(TopValues {
        values: all,
        distinct,
    })
}
