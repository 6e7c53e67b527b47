//! What decides a query's kernel: the bounds under which each sum stays
//! exact or fits its lanes, read from the columns' types, ranges and
//! missing codes.

use super::{fused_fits, ByteRanges, FilterEval, Form, Fused, Kernel, MeansFuse, MAX_BYTE_RANGES};
use crate::core::{
    Error, ExactCell, Moments, Result, BIG_TABLE_CELLS, LANES, MORSEL, PACK_SHIFT, XLANES,
};
use crate::kernels::{fused_table, FUSED_TRASH};
use crate::plan::{Exclusion, Mapper};
use microtab_store::{Column, Dataset, Kind, Variable};

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

/// The codes a byte filter table passes, if they form at most
/// [`MAX_BYTE_RANGES`] ranges, each `(lo, hi − lo)` (a row passes when
/// `code − lo ≤ hi − lo` in wrapping `u8` for one of them).
pub(crate) fn byte_ranges(t: &[u32; 256]) -> Option<ByteRanges> {
    let mut out = ByteRanges::new();
    let mut i = 0;
    while i < 256 {
        if t[i] != 0 {
            i += 1;
            continue;
        }
        let lo = i;
        while i < 256 && t[i] == 0 {
            i += 1;
        }
        if out.len() == MAX_BYTE_RANGES {
            return None;
        }
        out.push((lo as u8, (i - 1 - lo) as u8));
    }
    Some(out)
}

/// Largest table whose exact means are summed per morsel in 64-bit cells
/// first (the cells are cleared and folded once per morsel of 32 Ki rows:
/// with 4,096 cells that is 16 Ki lanes a morsel, against i128 adds per
/// row otherwise). Means of AGE by PUMA (3,601 cells) took 24.9 ms so,
/// against 28.1 ms row by row; by CITIZEN and PUMA (14.4 K cells) 42.4
/// against 34.8 ms (14.1 M census, 2 cores).
pub(crate) const MAX_MORSEL_SUM_CELLS: usize = 4096;

/// Largest table counted by the fused kernels (four lanes a cell).
pub(crate) const FUSED_MAX_CELLS: usize = 64 * 1024;

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
    // Morsels whose packed sums can add up before the fold: each lane's
    // record count below 2^24 (its bits of the packed word), Σw below
    // 2^40 and |Σw·x| below 2^62, counting every record of K morsels in
    // one lane. Folding 4 lanes of thousands of cells every morsel cost
    // a third of `means INCTOT --by PUMA` (docs/BENCHMARKS.md).
    let rows = MORSEL as f64;
    let k = [
        2f64.powi(64 - PACK_SHIFT as i32) / rows - 1.0,
        2f64.powi(PACK_SHIFT as i32) / (whi.max(1.0) * rows) - 1.0,
        2f64.powi(62) / (whi.max(1.0) * xm.max(1.0) * rows) - 1.0,
    ]
    .into_iter()
    .fold(f64::INFINITY, f64::min);
    Some(MeansFuse {
        xcodes,
        fold_every: (k.floor() as usize).max(1),
    })
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

/// Bytes a cube cell of a table of `cells` cells takes in each worker's
/// accumulator (and once more in the result), for the memory estimate of
/// a refused query: the counts kernel keeps one lane a cell beyond
/// [`BIG_TABLE_CELLS`], four below.
pub(crate) fn cell_bytes(cells: usize, weighted: bool, measure: bool, exact: bool) -> usize {
    let lanes = if !measure && cells > BIG_TABLE_CELLS {
        1
    } else {
        LANES
    };
    let mut b = lanes * 8 + 8;
    if weighted {
        b += lanes * 16 + 8;
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

/// Whether (and how) the filters go through the selection column
/// ([`Fused::selection`]), and whether only to gather the passing rows
/// ([`Fused::gather_only`]): one filter on a byte code whose passing codes
/// are a few ranges is cheap as one more code column of the kernel, but
/// when few rows pass, counting only them is cheaper (`freq EDUC --filter
/// GQ!=1`, 1.2% passing: 7.6 → 5.3 ms, 14.1 M census).
pub(crate) fn selection(filters: &[(&Column, Mapper)]) -> (Option<Vec<FilterEval>>, bool) {
    use microtab_store::PhysType;
    if let [(c, Mapper::Byte(t))] = filters {
        // Gathering needs the selection first, as ranges (which the
        // compiler vectorizes), not looked up code by code.
        return match (c.var().ty, byte_ranges(t)) {
            (PhysType::U8, Some(r)) => (Some(vec![FilterEval::Bytes(r)]), true),
            _ => (None, false),
        };
    }
    (sieve_kinds(filters), false)
}

/// How each filter is evaluated into a selection, when every filter can
/// be without its mapper's per-row entries: byte and `u16` code tables
/// and integer ranges.
pub(crate) fn sieve_kinds(filters: &[(&Column, Mapper)]) -> Option<Vec<FilterEval>> {
    use microtab_store::PhysType;
    let usable = |(c, m): &(&Column, Mapper)| match (m, c.var().ty) {
        (Mapper::Byte(_), PhysType::U8) | (Mapper::Word(_), PhysType::U16) => true,
        (Mapper::Ranges(_), ty) => !matches!(ty, PhysType::F32 | PhysType::F64),
        _ => false,
    };
    if filters.is_empty() || !filters.iter().all(usable) {
        return None;
    }
    Some(filter_evals(filters))
}

/// How each filter is evaluated into a selection: byte and `u16` code
/// columns by their passing codes, any other through its mapper.
pub(crate) fn filter_evals(filters: &[(&Column, Mapper)]) -> Vec<FilterEval> {
    use microtab_store::PhysType;
    filters
        .iter()
        .map(|(c, m)| match (m, c.var().ty) {
            (Mapper::Byte(t), PhysType::U8) => {
                byte_ranges(t).map_or(FilterEval::Mapper, FilterEval::Bytes)
            }
            (Mapper::Word(t), PhysType::U16) => word_eval(t),
            _ => FilterEval::Mapper,
        })
        .collect()
}

/// The `u16` codes a filter's table passes (entry 0): at most
/// [`MAX_BYTE_RANGES`] ranges `(lo, hi − lo)`, else a bitmap. One pass
/// over the table builds the bitmap 64 codes at a time (a loop the
/// compiler vectorizes), and the ranges are read from its words: a plan
/// asks for this once per filter and per plan made from it, and a query
/// the zone maps answer takes under a millisecond.
pub(crate) fn word_eval(t: &[u32; 65536]) -> FilterEval {
    let mut bits = Box::new([0u64; 1024]);
    for (w, chunk) in bits.iter_mut().zip(t.chunks_exact(64)) {
        let mut m = 0u64;
        for (k, &e) in chunk.iter().enumerate() {
            m |= ((e == 0) as u64) << k;
        }
        *w = m;
    }
    // Runs of set bits: a run starts where a bit is set and the one
    // below it (across words) is clear.
    let mut ranges: Vec<(u16, u16)> = Vec::new();
    let mut start: Option<usize> = None;
    for (wi, &w) in bits.iter().enumerate() {
        if (w == 0 && start.is_none()) || (w == u64::MAX && start.is_some()) {
            continue;
        }
        for b in 0..64 {
            let v = wi * 64 + b;
            match (w >> b & 1 == 1, start) {
                (true, None) => start = Some(v),
                (false, Some(lo)) => {
                    if ranges.len() == MAX_BYTE_RANGES {
                        return FilterEval::WordBits(bits);
                    }
                    ranges.push((lo as u16, (v - 1 - lo) as u16));
                    start = None;
                }
                _ => {}
            }
        }
    }
    if let Some(lo) = start {
        if ranges.len() == MAX_BYTE_RANGES {
            return FilterEval::WordBits(bits);
        }
        ranges.push((lo as u16, (65535 - lo) as u16));
    }
    FilterEval::Words(ranges)
}

/// What [`Kernel::choose`] reads: the planned cells and columns.
pub(crate) struct KernelInputs<'c, 'a> {
    /// Cells of the table.
    pub(crate) cells: usize,
    /// The dimensions and their mappers.
    pub(crate) dims: &'c [(&'a Column, Mapper)],
    /// The filters' mappers.
    pub(crate) filters: &'c [(&'a Column, Mapper)],
    /// The weight.
    pub(crate) weight: Option<&'a Column>,
    /// The analysis variable.
    pub(crate) measure: Option<&'a Column>,
    /// Rows of the dataset.
    pub(crate) rows: usize,
    /// The scan makes a partial result (sums kept exact).
    pub(crate) partial: bool,
    /// Sums that follow each row's cell index (replicate weights, Taylor
    /// sums, distributions, a split), which the fused kernels do not build.
    pub(crate) per_row: bool,
}

impl Kernel {
    /// The kernel counting a query's morsels, from its columns' types,
    /// ranges and missing codes.
    pub(crate) fn choose(k: &KernelInputs<'_, '_>) -> Result<Kernel> {
        let (x, w) = (k.measure, k.weight);
        let exact_floats = (k.partial && needs_exact_floats(x, w, k.rows)?) || extreme_floats(x, w);
        if exact_floats {
            // Row by row into exact sums: none of the fast paths.
            return Ok(Kernel::ExactFloats);
        }
        // The fused kernels' tables mark rejected codes with FUSED_TRASH.
        let fusable = !k.per_row && k.cells < FUSED_TRASH as usize;
        let fused = |x: Option<&Column>, pack: bool| -> Option<Fused> {
            let (selection, gather_only) = selection(k.filters);
            let mut f = Fused {
                tabs: k
                    .dims
                    .iter()
                    .chain(k.filters)
                    .map(|(_, m)| fused_table(m))
                    .collect(),
                selection,
                gather_only,
                pack,
                fits: [false; 3],
            };
            f.fits = fused_fits(&f, k.dims.len(), w, x);
            let forms = match (&f.selection, gather_only) {
                (Some(_), true) => [Form::Columns, Form::Gathered],
                (Some(_), false) => [Form::Selection, Form::Gathered],
                (None, _) => [Form::Columns, Form::Columns],
            };
            // Morsels every row of which passes the filters (by the zone
            // maps) are counted without them: the dimensions alone.
            let unfiltered = || {
                let dims = Fused {
                    tabs: f.tabs[..k.dims.len()].to_vec(),
                    selection: None,
                    gather_only: false,
                    ..f.clone()
                };
                fused_fits(&dims, k.dims.len(), w, x)[Form::Columns as usize]
            };
            // A kernel that takes none of the forms the morsels can have
            // would leave every morsel to the index kernel.
            (forms.iter().any(|&form| f.takes(form)) || unfiltered()).then_some(f)
        };
        let Some(xc) = x else {
            let never_missing = w.is_none_or(|c| Exclusion::of(c.var()).is_empty());
            let pack = k.cells <= MAX_PACKED_CELLS && w.is_some_and(|c| packable_weight(c.var()));
            // Beyond FUSED_MAX_CELLS the fused kernels' four lanes a cell
            // miss the cache: PUMA by AGE (345 K cells) took 120 ms fused
            // against 27 ms counted in one lane (14.1 M census). Below it
            // the fused filters win: PUMA by MARST (21.6 K cells, three
            // filters) 19.8 ms fused against 36.9 ms.
            let small = k.cells <= FUSED_MAX_CELLS;
            return Ok(match fusable && never_missing && small {
                true => fused(None, pack).map_or(Kernel::Counts, Kernel::Fused),
                false => Kernel::Counts,
            });
        };
        if !exact_ok(x, w, k.rows) {
            return Ok(Kernel::Moments);
        }
        if !(k.cells <= MAX_MORSEL_SUM_CELLS && morsel_sums_ok(x, w)) {
            return Ok(Kernel::Exact);
        }
        Ok(match means_fuse(x, w).filter(|_| fusable) {
            Some(m) => {
                fused(Some(xc), false).map_or(Kernel::ExactMorsel, |f| Kernel::FusedMeans(f, m))
            }
            None => Kernel::ExactMorsel,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A filter table passing `pass` (entry 0), rejecting the rest.
    fn table(pass: &[std::ops::RangeInclusive<usize>]) -> Box<[u32; 65536]> {
        let mut t = Box::new([crate::plan::TRASH; 65536]);
        for r in pass {
            for v in r.clone() {
                t[v] = 0;
            }
        }
        t
    }

    fn words(pass: &[std::ops::RangeInclusive<usize>]) -> Option<Vec<(u16, u16)>> {
        match word_eval(&table(pass)) {
            FilterEval::Words(r) => Some(r),
            FilterEval::WordBits(b) => {
                // The bitmap holds exactly the passing codes.
                for v in 0..65536 {
                    let set = b[v >> 6] >> (v & 63) & 1 == 1;
                    assert_eq!(set, pass.iter().any(|r| r.contains(&v)), "code {v}");
                }
                None
            }
            _ => unreachable!(),
        }
    }

    #[test]
    fn word_eval_by_hand() {
        assert_eq!(words(&[]), Some(vec![]));
        assert_eq!(
            words(&[2010..=2010, 2388..=2388]),
            Some(vec![(2010, 0), (2388, 0)])
        );
        // Runs across words, and at both ends of the codes.
        assert_eq!(
            words(&[0..=0, 60..=130, 65535..=65535]),
            Some(vec![(0, 0), (60, 70), (65535, 0)])
        );
        assert_eq!(words(&[0..=65535]), Some(vec![(0, 65535)]));
        assert_eq!(
            words(&[64..=127, 200..=65535]),
            Some(vec![(64, 63), (200, 65335)])
        );
        // Five runs: a bitmap.
        assert_eq!(words(&[1..=1, 5..=5, 9..=9, 13..=13, 17..=20]), None);
        assert_eq!(words(&[1..=1, 5..=5, 9..=9, 13..=13, 65000..=65535]), None);
    }
}
