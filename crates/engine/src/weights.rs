//! What a weighted query did with the rows it selected: how many had a
//! negative, zero or missing weight.
//!
//! A weight's manifest entry (its range, nulls and missing codes) says
//! whether any of these can occur; only then is the question asked, as
//! ordinary counting queries over the same filter and grouping (so the
//! answer is exact and follows the same rules as the table).

use crate::filter::{CmpOp, Cond, Term};
use crate::{run_with, Cube, Query, Result, ScanOptions};
use microtab_store::{Dataset, Number};

/// Rows a weighted query selected (filter passed, grouping values not
/// missing) by the state of their weight.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct WeightCases {
    /// Rows with a negative weight (counted, and summed as negative).
    pub negative: u64,
    /// Rows with a zero weight (counted in `N`, adding nothing to sums).
    pub zero: u64,
    /// Rows left out of every count and sum because their weight is
    /// system-missing or a user-missing code.
    pub missing: u64,
}

impl WeightCases {
    /// True when every selected row had a positive weight.
    pub fn is_clean(&self) -> bool {
        *self == WeightCases::default()
    }
}

fn total(ds: &Dataset, q: &Query, opts: &ScanOptions) -> Result<u64> {
    Ok(run_with(ds, q, opts)?.counts.iter().sum())
}

/// Counts, for the weighted query `q` whose result counted `counted`
/// rows, the rows with a negative, zero or missing weight. Returns `None`
/// for an unweighted query, and all zeros without a scan when the weight's
/// range has no value below 1 and it has no nulls or missing codes.
pub fn weight_cases(
    ds: &Dataset,
    q: &Query,
    opts: &ScanOptions,
    counted: u64,
) -> Result<Option<WeightCases>> {
    let Some(name) = &q.weight else {
        return Ok(None);
    };
    let var = ds.variable(name)?.clone();
    let mut out = WeightCases::default();
    let min = var.min.map(Number::as_f64);
    let missing_possible = var.nulls > 0 || !var.missing_codes.is_empty();
    let unweighted = counts_only(q);
    let with_term = |op: CmpOp| {
        let mut t = unweighted.clone();
        t.filter.push(Term {
            var: var.name.clone(),
            cond: Cond::Cmp(op, "0".into()),
            text: format!("{}{}0", var.name, if op == CmpOp::Lt { "<" } else { "=" }),
        });
        t
    };
    // Stored units: 0 is 0 whatever the decimals.
    if min.is_some_and(|m| m < 0.0) {
        out.negative = total(ds, &with_term(CmpOp::Lt), opts)?;
    }
    if min.is_some_and(|m| m <= 0.0) {
        out.zero = total(ds, &with_term(CmpOp::Eq), opts)?;
    }
    if missing_possible {
        out.missing = total(ds, &unweighted, opts)?.saturating_sub(counted);
    }
    Ok(Some(out))
}

/// `q` counting records only: no weight, replicate or Taylor sums,
/// distributions or splits.
fn counts_only(q: &Query) -> Query {
    Query {
        weight: None,
        replicates: Vec::new(),
        taylor: None,
        distribution: false,
        split: None,
        ..q.clone()
    }
}

/// The rows of the weighted query `q` whose weight is 0, counted by its
/// cells (with the analysis variable's moments: their `n` is the rows
/// with a value): R leaves them out of a Taylor design's simple random
/// sample size, so a design effect needs each domain's count. `None` for
/// an unweighted query.
pub fn zero_weight_cells(ds: &Dataset, q: &Query, opts: &ScanOptions) -> Result<Option<Cube>> {
    let Some(name) = &q.weight else {
        return Ok(None);
    };
    let var = ds.variable(name)?.clone();
    let mut z = counts_only(q);
    z.filter.push(Term {
        var: var.name.clone(),
        cond: Cond::Cmp(CmpOp::Eq, "0".into()),
        text: format!("{}=0", var.name),
    });
    Ok(Some(run_with(ds, &z, opts)?))
}
