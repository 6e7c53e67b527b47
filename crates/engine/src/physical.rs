//! The physical plan of a query: which columns, which mappers, and which
//! kernel counts them — chosen once per query from the columns' types,
//! ranges and missing codes.

use crate::core::{Error, ExactCell, Moments, Result, LANES, MORSEL, PACK_SHIFT, XLANES};
use crate::kernels::FusedTab;
use crate::plan::{Exclusion, Mapper};
use microtab_store::{Column, ColumnData, Dataset, Kind, Variable};

/// How a means query over byte code columns runs as one fused pass
/// (chosen by [`means_fuse`]).
#[derive(Debug, Clone, Copy)]
pub(crate) struct MeansFuse {
    /// Excluded analysis-variable codes that occur in the column (padded
    /// with a value no ≤32-bit column can hold).
    pub(crate) xcodes: [i64; 2],
}

pub(crate) struct Plan<'a> {
    pub(crate) cells: usize,
    pub(crate) dims: Vec<(&'a Column, Mapper)>,
    pub(crate) filters: Vec<(&'a Column, Mapper)>,
    pub(crate) weight: Option<(&'a Column, Exclusion)>,
    pub(crate) measure: Option<(&'a Column, Exclusion)>,
    /// Sum moments exactly in integers (int-kind measure and weight whose
    /// ranges cannot overflow i128).
    pub(crate) exact: bool,
    /// Try the fused byte-column kernel (no measure, weight never missing).
    pub(crate) fused: bool,
    /// Exact path with few cells and |w·x| small enough that a morsel's
    /// Σw·x fits in an i64: sum each morsel in 64-bit cells first.
    pub(crate) morsel_sums: bool,
    /// Try the fused means kernel (exact morsel sums over byte codes).
    pub(crate) means_fuse: Option<MeansFuse>,
    /// The fused kernel packs count and Σw in one word per cell lane
    /// (integer weights ≥ 0, a morsel's Σw < 2^40, a small table).
    pub(crate) pack_weights: bool,
    /// The filters are evaluated first, per morsel, into a selection byte
    /// column (0: the row passes) that the fused kernels read as one more
    /// code column: two or more filters, or any filter on a column that is
    /// not a byte code (u16 tables, integer ranges). Per filter, the byte
    /// code range it passes `(lo, hi − lo)` when it is one, else `None`
    /// (its mapper is looked up).
    pub(crate) selection: Option<Vec<Option<(u8, u8)>>>,
    /// For each column in role order (dimensions, filters, weight,
    /// measure), its index among the distinct columns the scan reads: a
    /// variable used in two roles (a filter on a grouping or analysis
    /// variable) is read, checked and unpacked once.
    pub(crate) slots: Vec<usize>,
    /// Sum weights and moments in [`ExactSum`](crate::exact::ExactSum)s,
    /// row by row (partial results whose weight or analysis variable is
    /// not summed exactly in integers by the other paths).
    pub(crate) exact_floats: bool,
    /// The fused kernels' tables of the dimensions and filters, in that
    /// order ([`fused_table`](crate::kernels::fused_table)).
    pub(crate) fused_tabs: Vec<FusedTab>,
    /// Replicate weights, summed per cell after the weight and measure
    /// (role order: dimensions, filters, weight, measure, replicates).
    pub(crate) replicates: Vec<&'a Column>,
    /// The replicate sums are exact integers (see [`replicates_exact`]).
    pub(crate) replicates_exact: bool,
    /// Taylor linearization sums (role order: after the replicates, the
    /// strata then the cluster column).
    pub(crate) taylor: Option<std::sync::Arc<crate::taylor::TaylorPlan<'a>>>,
    /// Distributions of the measure per cell ([`crate::Query::distribution`]).
    pub(crate) distribution: bool,
    /// The split at per-cell thresholds (its column: after the Taylor
    /// columns in role order).
    pub(crate) split: Option<std::sync::Arc<crate::quantile::SplitPlan>>,
}

/// Whether replicate sums can be kept exactly in integers: integer
/// replicate weights, and an integer analysis variable summed exactly
/// (`exact`), with `|w_r| · rows` and `|w_r · x|` far inside `i64`.
pub(crate) fn replicates_exact(
    reps: &[&Column],
    measure: Option<&Column>,
    exact: bool,
    rows: usize,
) -> bool {
    let mag = |c: &Column| {
        let v = c.var();
        let m = |n: Option<microtab_store::Number>| n.map_or(0.0, |n| n.as_f64().abs());
        m(v.min).max(m(v.max)).max(1.0)
    };
    let w = reps.iter().map(|c| mag(c)).fold(1.0, f64::max);
    reps.iter().all(|c| c.var().kind == Kind::Int)
        && w * (rows.max(1) as f64) < 2f64.powi(62)
        && match measure {
            None => true,
            Some(x) => exact && x.var().kind == Kind::Int && w * mag(x) < 2f64.powi(62),
        }
}

/// Whether a partial result needs [`Plan::exact_floats`]: a float weight
/// or analysis variable, or integers whose sums the integer paths cannot
/// keep exact (a weight whose f64 lane sums could pass 2^53, moments that
/// are not [`exact_ok`]). Integers beyond ±2^53 cannot be summed exactly
/// through `f64` at all: an error then.
pub(crate) fn needs_exact_floats(
    measure: Option<&Column>,
    weight: Option<&Column>,
    rows: usize,
) -> Result<bool> {
    let big = |c: &Column| {
        let v = c.var();
        let m = |n: Option<microtab_store::Number>| n.map_or(0.0, |n| n.as_f64().abs());
        (v.kind == Kind::Int, m(v.min).max(m(v.max)))
    };
    for c in measure.iter().chain(weight.iter()) {
        let (int, m) = big(c);
        if int && m >= 2f64.powi(53) {
            return Err(Error::Invalid(format!(
                "{} has values beyond ±2^53, too large to sum exactly in a partial result",
                c.var().name
            )));
        }
    }
    Ok(match (measure, weight) {
        (Some(_), _) => !exact_ok(measure, weight, rows),
        (None, Some(w)) => {
            let (int, m) = big(w);
            !int || m * rows.max(1) as f64 >= 2f64.powi(53)
        }
        (None, None) => false,
    })
}

/// Whether float weights or analysis values are so large or so small that
/// summing w·x and w·x² in `f64` lanes could overflow, or underflow every
/// term to zero (a column whose values all lie beyond 2^±250, weights
/// beyond 2^±500): then the exact sums are used for the whole query too.
pub(crate) fn extreme_floats(measure: Option<&Column>, weight: Option<&Column>) -> bool {
    let extreme = |c: Option<&Column>, bits: i32| {
        c.is_some_and(|c| {
            let v = c.var();
            let m = |n: Option<microtab_store::Number>| n.map_or(0.0, |n| n.as_f64().abs());
            let big = m(v.min).max(m(v.max));
            v.kind == Kind::Float
                && big != 0.0
                && (big >= 2f64.powi(bits) || big <= 2f64.powi(-bits))
        })
    };
    measure.is_some() && (extreme(measure, 250) || extreme(weight, 500))
}

pub(crate) fn dict_of(ds: &Dataset, var: &Variable) -> Result<Vec<String>> {
    Ok(if var.kind == Kind::String {
        ds.dictionary(var)?
    } else {
        Vec::new()
    })
}

pub(crate) fn numeric(var: &Variable, role: &str) -> Result<()> {
    if var.kind == Kind::String {
        return Err(Error::Invalid(format!(
            "{} is a string variable and cannot be used as {role}",
            var.name
        )));
    }
    Ok(())
}

/// Whether Σw·x² over `rows` rows stays far inside i128 for these columns.
pub(crate) fn exact_ok(measure: Option<&Column>, weight: Option<&Column>, rows: usize) -> bool {
    let bound = |c: &Column| -> Option<f64> {
        let v = c.var();
        if v.kind != Kind::Int {
            return None;
        }
        let m = |n: Option<microtab_store::Number>| n.map_or(0.0, |n| n.as_f64().abs());
        Some(m(v.min).max(m(v.max)).max(1.0))
    };
    let Some(x) = measure.and_then(bound) else {
        return false;
    };
    let w = match weight {
        Some(c) => match bound(c) {
            Some(w) => w,
            None => return false,
        },
        None => 1.0,
    };
    x * w < 2f64.powi(62)
        && w * (rows.max(1) as f64) < 2f64.powi(62)
        && x * x * w * (rows.max(1) as f64) < 2f64.powi(120)
}

/// The codes a byte filter table passes, if they form one range: `(lo,
/// hi − lo)` (a row passes when `code − lo ≤ hi − lo` in wrapping `u8`).
pub(crate) fn byte_range(t: &[u32; 256]) -> Option<(u8, u8)> {
    let lo = t.iter().position(|&e| e == 0)?;
    let hi = t.iter().rposition(|&e| e == 0)?;
    t[lo..=hi]
        .iter()
        .all(|&e| e == 0)
        .then_some((lo as u8, (hi - lo) as u8))
}

/// Largest table whose exact means are summed per morsel in 64-bit cells
/// first (the cells are cleared and folded once per morsel of 32 Ki rows:
/// with 2,048 cells that is 8 Ki lanes a morsel, against i128 adds per row
/// otherwise).
pub(crate) const MAX_MORSEL_SUM_CELLS: usize = 2048;

/// Largest table whose lanes are packed per morsel (the fold costs
/// `cells × LANES` per 32 Ki rows).
pub(crate) const MAX_PACKED_CELLS: usize = 255;

/// Integer weights ≥ 0 whose sum over a morsel stays below 2^40.
pub(crate) fn packable_weight(v: &Variable) -> bool {
    let m = |n: Option<microtab_store::Number>| n.map_or(0.0, |n| n.as_f64());
    v.kind == Kind::Int
        && v.ty.width() <= 4
        && m(v.min) >= 0.0
        && m(v.max) * (MORSEL as f64) < 2f64.powi(PACK_SHIFT as i32)
}

/// Whether a means query can run through [`fused_means`]: integer columns
/// of at most 32 bits, a weight ≥ 0 that is never excluded with a
/// morsel's Σw < 2^40, at most two excluded analysis codes present in the
/// data, and |w|·x² < 2^62 for every row.
pub(crate) fn means_fuse(measure: Option<&Column>, weight: Option<&Column>) -> Option<MeansFuse> {
    let narrow = |c: &Column| c.var().ty.width() <= 4 && c.var().kind == Kind::Int;
    let bound = |c: &Column| -> (f64, f64) {
        let m = |n: Option<microtab_store::Number>| n.map_or(0.0, |n| n.as_f64());
        (m(c.var().min), m(c.var().max))
    };
    // Codes that can occur: a missing code within [min, max], the null
    // code only when the column has nulls.
    let codes = |c: &Column| -> Vec<i64> {
        let (lo, hi) = bound(c);
        let v = c.var();
        let mut out: Vec<i64> = v
            .missing_codes
            .iter()
            .filter(|&&m| m.fract() == 0.0 && m >= lo && m <= hi)
            .map(|&m| m as i64)
            .collect();
        if v.nulls > 0 {
            out.extend(v.null_code);
        }
        out
    };
    let x = measure?;
    if !narrow(x) || !weight.is_none_or(narrow) {
        return None;
    }
    let (xlo, xhi) = bound(x);
    let (wlo, whi) = weight.map_or((1.0, 1.0), bound);
    let xm = xlo.abs().max(xhi.abs());
    if weight.is_some_and(|w| !codes(w).is_empty())
        || wlo < 0.0
        || whi * (MORSEL as f64) >= 2f64.powi(PACK_SHIFT as i32)
        || whi * xm * xm >= 2f64.powi(62)
    {
        return None;
    }
    let xcodes = match codes(x)[..] {
        [] => [i64::MIN; 2],
        [a] => [a, i64::MIN],
        [a, b] => [a, b],
        _ => return None,
    };
    Some(MeansFuse { xcodes })
}

/// Whether a morsel's Σw and Σw·x fit in i64 for these columns.
pub(crate) fn morsel_sums_ok(measure: Option<&Column>, weight: Option<&Column>) -> bool {
    let bound = |c: &Column| -> f64 {
        let m = |n: Option<microtab_store::Number>| n.map_or(0.0, |n| n.as_f64().abs());
        m(c.var().min).max(m(c.var().max)).max(1.0)
    };
    let x = measure.map_or(f64::INFINITY, bound);
    let w = weight.map_or(1.0, bound);
    x * w * (MORSEL as f64) < 2f64.powi(62)
}

/// Bytes a cube cell takes in each worker's accumulator (and once more
/// in the result), for the memory estimate of a refused query.
pub(crate) fn cell_bytes(weighted: bool, measure: bool, exact: bool) -> usize {
    let mut b = LANES * 8 + 8;
    if weighted {
        b += LANES * 16 + 8;
    }
    if measure {
        b += if exact {
            XLANES * std::mem::size_of::<ExactCell>()
        } else {
            64
        } + std::mem::size_of::<Moments>();
    }
    b
}

impl<'a> Plan<'a> {
    /// The views of a morsel in role order, from the views of the distinct
    /// columns.
    #[inline]
    pub(crate) fn roles<'d>(&self, distinct: &[ColumnData<'d>]) -> Vec<ColumnData<'d>> {
        self.slots.iter().map(|&i| distinct[i]).collect()
    }

    /// The same query without its filters: the plan of morsels whose every
    /// row passes them (by the filter columns' zone maps). It counts into
    /// the same accumulators (they depend on the cells, weight and measure
    /// only) and reads none of the columns used only as filters.
    pub(crate) fn without_filters(&self) -> Plan<'a> {
        let (nd, nf) = (self.dims.len(), self.filters.len());
        Plan {
            cells: self.cells,
            dims: self.dims.clone(),
            filters: Vec::new(),
            weight: self.weight.as_ref().map(|(c, e)| (*c, e.clone())),
            measure: self.measure.as_ref().map(|(c, e)| (*c, e.clone())),
            exact: self.exact,
            fused: self.fused,
            morsel_sums: self.morsel_sums,
            means_fuse: self.means_fuse,
            pack_weights: self.pack_weights,
            selection: None,
            slots: self.slots[..nd]
                .iter()
                .chain(&self.slots[nd + nf..])
                .copied()
                .collect(),
            exact_floats: self.exact_floats,
            fused_tabs: self.fused_tabs[..nd].to_vec(),
            replicates: self.replicates.clone(),
            replicates_exact: self.replicates_exact,
            taylor: self.taylor.clone(),
            distribution: self.distribution,
            split: self.split.clone(),
        }
    }

    /// Which of the `n` distinct columns this plan reads.
    pub(crate) fn reads(&self, n: usize) -> Vec<bool> {
        let mut r = vec![false; n];
        for &s in &self.slots {
            r[s] = true;
        }
        r
    }
}

/// The distinct columns among `cols` (role order, matched by variable
/// name) and, for each of `cols`, its index among them.
pub(crate) fn distinct_columns<'a>(cols: &[&'a Column]) -> (Vec<&'a Column>, Vec<usize>) {
    let mut distinct: Vec<&Column> = Vec::new();
    let slots = cols
        .iter()
        .map(
            |c| match distinct.iter().position(|d| d.var().name == c.var().name) {
                Some(i) => i,
                None => {
                    distinct.push(c);
                    distinct.len() - 1
                }
            },
        )
        .collect();
    (distinct, slots)
}

/// Whether (and how) the filters go through the selection column
/// ([`Plan::selection`]).
pub(crate) fn selection(filters: &[(&Column, Mapper)]) -> Option<Vec<Option<(u8, u8)>>> {
    use microtab_store::PhysType;
    let usable = |(c, m): &(&Column, Mapper)| match (m, c.var().ty) {
        (Mapper::Byte(_), PhysType::U8) | (Mapper::Word(_), PhysType::U16) => true,
        (Mapper::Ranges(_), ty) => !matches!(ty, PhysType::F32 | PhysType::F64),
        _ => false,
    };
    let one_byte_table = filters.len() == 1 && matches!(filters[0].1, Mapper::Byte(_));
    if filters.is_empty() || one_byte_table || !filters.iter().all(usable) {
        return None;
    }
    Some(
        filters
            .iter()
            .map(|(_, m)| match m {
                Mapper::Byte(t) => byte_range(t),
                _ => None,
            })
            .collect(),
    )
}
