//! Running a query: open the columns it names, choose how to read them,
//! build the physical plan, scan, and reshape the result.

use crate::acc::Acc;
use crate::core::{Error, Result, ScanOptions, DEFAULT_MAX_CELLS};
use crate::cube::Cube;
use crate::filter::{resolve, Predicate};
use crate::finish::compact;
use crate::kernels::{fused_table, FUSED_TRASH};
use crate::partial::{self, Partial};
use crate::physical::*;
use crate::plan::{
    dim_categories, dim_mapper, filter_mapper, passes_all_valid, passing_ranges, specialize,
    zone_fates, DimPlan, Exclusion, Fate,
};
use crate::query::Query;
use crate::scan::{cold_path, scan_inline, scan_mapped, scan_streamed, Morsels};
// The scan's sizes, where the grammar modules (`derive`, `list`, `subset`) look for them.
pub(crate) use crate::core::{AHEAD, MORSEL, STEP};
use microtab_io::ReadPath;
use microtab_store::{Column, Dataset};

/// Runs `q` over `ds` with the settings from the environment
/// ([`ScanOptions::from_env`]).
pub fn run(ds: &Dataset, q: &Query) -> Result<Cube> {
    run_with(ds, q, &ScanOptions::from_env())
}

/// Runs `q` over `ds` reading columns as `opts` says.
pub fn run_with(ds: &Dataset, q: &Query, opts: &ScanOptions) -> Result<Cube> {
    execute(ds, q, opts, false, compact)?
}

/// Each morsel's fate under the filters, from their columns' zone maps
/// (`None` when they rule out no morsel).
fn morsel_fates(filters: &[(Column, Predicate)], rows: usize) -> Option<Vec<Fate>> {
    let nm = rows.div_ceil(MORSEL);
    let mut out = vec![Fate::Pass; nm];
    for (c, p) in filters {
        let zoned = match (p, c.zones()) {
            (Predicate::Ints(r), Some(z)) if c.var().kind != microtab_store::Kind::Float => {
                Some(zone_fates(
                    &passing_ranges(c.var(), r),
                    z,
                    microtab_store::STRIPE_ROWS,
                    MORSEL,
                ))
            }
            _ => None,
        };
        match zoned {
            Some(f) if f.len() == nm => {
                for (o, f) in out.iter_mut().zip(f) {
                    *o = o.and(f);
                }
            }
            // No zone map: every morsel is tested.
            _ => out.iter_mut().for_each(|o| *o = o.and(Fate::Scan)),
        }
    }
    out.iter().any(|&f| f != Fate::Scan).then_some(out)
}

/// Runs `q` over `ds` (or the rows [`Query::rows`] names) into a
/// [`Partial`] result: exact sums, to be merged with other parts and
/// finished ([`Partial::finish`]).
pub fn run_partial(ds: &Dataset, q: &Query, opts: &ScanOptions) -> Result<Partial> {
    let rows = ds.rows();
    let covered = q
        .rows
        .as_ref()
        .map_or(rows, |r| r.end.min(rows).saturating_sub(r.start.min(rows)));
    let edges = taylor_edges(ds, q)?;
    execute(ds, q, opts, true, |plans, acc, plan, w, x| {
        partial::from_acc(plans, acc, plan, w, x, (covered, &edges))
    })
}

/// `k` with `decimals` implied decimals, exactly, without trailing zeros
/// (`101000`, 3 → `101`; `1015`, 1 → `101.5`).
fn decimal_text(k: i64, decimals: u32) -> String {
    if decimals == 0 {
        return k.to_string();
    }
    let p = 10i128.pow(decimals);
    let (int, frac) = ((k as i128).abs() / p, (k as i128).abs() % p);
    let sign = if k < 0 { "-" } else { "" };
    if frac == 0 {
        return format!("{sign}{int}");
    }
    let f = format!("{frac:0w$}", w = decimals as usize);
    format!("{sign}{int}.{}", f.trim_end_matches('0'))
}

/// The PSUs of a range of rows that may continue beyond it: those of its
/// first and last record when the design's PSUs are contiguous, every one
/// when they are not; none for the whole dataset (a PSU lies within one
/// dataset).
fn taylor_edges(ds: &Dataset, q: &Query) -> Result<partial::TaylorEdges> {
    let mut e = partial::TaylorEdges {
        source: ds.dir().display().to_string(),
        ..Default::default()
    };
    let Some(t) = &q.taylor else {
        return Ok(e);
    };
    e.values = match &t.strata {
        Some(name) => {
            let var = ds.variable(name)?;
            let dict = match var.kind {
                microtab_store::Kind::String => Some(ds.dictionary(var)?),
                _ => None,
            };
            t.strata_keys
                .iter()
                .map(|&k| match &dict {
                    Some(d) => d.get(k as usize).cloned().unwrap_or_else(|| k.to_string()),
                    None => decimal_text(k, var.decimals),
                })
                .collect()
        }
        None => vec![String::new(); t.strata_keys.len()],
    };
    let Some(r) = &q.rows else {
        return Ok(e);
    };
    let Some(cluster) = &t.cluster else {
        // Every record its own PSU: none continues.
        return Ok(e);
    };
    if !t.contiguous {
        e.all_open = true;
        return Ok(e);
    }
    let rows = ds.rows();
    let (start, end) = (r.start.min(rows), r.end.min(rows));
    if start >= end {
        return Ok(e);
    }
    let key = |name: Option<&String>, row: u64| -> Result<i64> {
        let Some(name) = name else { return Ok(0) };
        let col = ds.column(name)?;
        let mut buf = Vec::new();
        // Whole checksummed stripes are read.
        let stripe = microtab_store::STRIPE_ROWS;
        let at = row as usize / stripe * stripe;
        let n = stripe.min(col.rows() - at);
        Ok(col.rows_view(at, n, &mut buf)?.get_i64(row as usize - at))
    };
    for row in [start, end - 1] {
        e.keys
            .push((key(t.strata.as_ref(), row)?, key(Some(cluster), row)?));
    }
    Ok(e)
}

/// Plans and scans `q`; `partial` sums exactly ([`Plan::exact_floats`]
/// where the other paths would not).
fn execute<R>(
    ds: &Dataset,
    q: &Query,
    opts: &ScanOptions,
    partial: bool,
    finish: impl FnOnce(Vec<DimPlan>, Acc, &Plan<'_>, Option<&Column>, Option<&Column>) -> R,
) -> Result<R> {
    let rows = ds.rows() as usize;
    // Grouping arguments may recode (`AGE(r: 0-17; 18-*)`) or restrict
    // (`AGE(18-65)`: a filter on the variable) their variable.
    let specs: Vec<crate::recode::DimSpec> = q
        .group_by
        .iter()
        .map(|s| crate::recode::parse_dim_in(ds, s))
        .collect::<Result<_>>()?;
    let filter_terms: Vec<crate::Term> = q
        .filter
        .iter()
        .cloned()
        .chain(specs.iter().filter_map(|s| s.valid.clone()))
        .collect();
    // Open every column first so a bad name fails before any work.
    let dim_cols: Vec<Column> = specs
        .iter()
        .map(|s| ds.column(&s.name))
        .collect::<std::result::Result<_, _>>()?;
    let filter_cols: Vec<Column> = filter_terms
        .iter()
        .map(|t| ds.column(&t.var))
        .collect::<std::result::Result<_, _>>()?;
    let weight_col = q.weight.as_deref().map(|n| ds.column(n)).transpose()?;
    let measure_col = q.measure.as_deref().map(|n| ds.column(n)).transpose()?;
    let rep_cols: Vec<Column> = q
        .replicates
        .iter()
        .map(|n| ds.column(n))
        .collect::<std::result::Result<_, _>>()?;
    for c in &rep_cols {
        numeric(c.var(), "a replicate weight")?;
        let v = c.var();
        if v.nulls > 0 || !v.missing_codes.is_empty() {
            return Err(Error::Invalid(format!(
                "replicate weight {} has {} (a replicate weight must be present for every record: a missing one would change every standard error)",
                v.name,
                if v.nulls > 0 {
                    format!("{} empty values", v.nulls)
                } else {
                    "missing codes".to_string()
                }
            )));
        }
    }
    if let Some(c) = &weight_col {
        numeric(c.var(), "a weight")?;
    }
    let taylor_col = |n: &Option<String>, role: &str| -> Result<Option<Column>> {
        let Some(c) = n.as_deref().map(|n| ds.column(n)).transpose()? else {
            return Ok(None);
        };
        if c.var().kind == microtab_store::Kind::Float {
            return Err(Error::Invalid(format!(
                "the {role} variable {} has decimal values",
                c.var().name
            )));
        }
        Ok(Some(c))
    };
    let (strata_col, cluster_col) = match &q.taylor {
        Some(t) => {
            // A range of rows is a part of a whole (see `run_partial`).
            if weight_col.is_none() || !rep_cols.is_empty() || (q.rows.is_some() && !partial) {
                return Err(Error::Invalid(
                    "a Taylor design needs the weight, and neither replicate weights nor a range of rows".into(),
                ));
            }
            (
                taylor_col(&t.strata, "strata")?,
                taylor_col(&t.cluster, "cluster")?,
            )
        }
        None => (None, None),
    };
    let split_col = match &q.split {
        Some(s) => {
            let c = ds.column(&s.var)?;
            numeric(c.var(), "a split variable")?;
            Some(c)
        }
        None => None,
    };
    if q.distribution && measure_col.is_none() {
        return Err(Error::Invalid(
            "a distribution needs an analysis variable".into(),
        ));
    }
    if let Some(c) = &measure_col {
        numeric(c.var(), "an analysis variable")?;
    }
    // Resolve the filters; drop those that pass every value their
    // variable can have in the rows counted anyway (`INCTOT<9999999` in a
    // mean of INCTOT, whose missing code is excluded already).
    let excluded_anyway = |v: &microtab_store::Variable| {
        let is = |c: &Option<Column>| c.as_ref().is_some_and(|c| c.var().name == v.name);
        is(&measure_col)
            || is(&weight_col)
            || (!q.include_missing && dim_cols.iter().any(|c| c.var().name == v.name))
    };
    let mut filters_kept: Vec<(Column, Predicate)> = Vec::new();
    for (t, c) in filter_terms.iter().zip(filter_cols) {
        let dict = dict_of(ds, c.var())?;
        let pred = resolve(t, c.var(), &dict)?;
        if !(excluded_anyway(c.var()) && passes_all_valid(c.var(), &pred)) {
            filters_kept.push((c, pred));
        }
    }
    let fates = morsel_fates(&filters_kept, rows);
    let (filter_cols, preds): (Vec<Column>, Vec<Predicate>) = filters_kept.into_iter().unzip();
    let all_cols: Vec<&Column> = dim_cols
        .iter()
        .chain(&filter_cols)
        .chain(weight_col.iter())
        .chain(measure_col.iter())
        .chain(rep_cols.iter())
        .chain(strata_col.iter())
        .chain(cluster_col.iter())
        .chain(split_col.iter())
        .collect();
    let read_path = match opts.read_path {
        ReadPath::Auto => {
            // Cached columns are fastest copied morsel by morsel into each
            // worker's cache (no page faults; 3–7% faster than mapped on
            // Q1–Q5); cold ones stream fastest through large preads with
            // read-ahead (measured: docs/IO.md).
            if all_cols.iter().all(|c| c.resident_fraction() >= 0.9) {
                ReadPath::Inline
            } else {
                cold_path(&all_cols)
            }
        }
        p => p,
    };
    if read_path == ReadPath::Mmap {
        // Start the kernel reading the first stretch of every column now, so
        // the reads overlap planning; the scan keeps the window moving.
        for c in &all_cols {
            c.prefetch(0, (opts.readahead + STEP) * MORSEL);
        }
    }

    let mut plans: Vec<DimPlan> = Vec::new();
    for (c, s) in dim_cols.iter().zip(&specs) {
        let dict = dict_of(ds, c.var())?;
        plans.push(match &s.recode {
            Some(groups) => crate::recode::recode_plan(c, &dict, groups, q.include_missing)?,
            None => dim_categories(
                c,
                dict,
                q.include_missing,
                q.max_cells.unwrap_or(DEFAULT_MAX_CELLS),
            )?,
        });
    }
    let split = match (&q.split, &split_col) {
        (Some(s), Some(c)) => {
            let sp = crate::quantile::SplitPlan::new(s, c.var(), &plans);
            plans.push(crate::quantile::split_dim(c.var()));
            Some(std::sync::Arc::new(sp))
        }
        _ => None,
    };
    let mut cells = 1usize;
    for p in &plans {
        cells = cells.saturating_mul(p.categories.len().max(1));
    }
    let max_cells = q.max_cells.unwrap_or(DEFAULT_MAX_CELLS);
    if cells > max_cells {
        let shape = plans
            .iter()
            .map(|p| (p.var.name.clone(), p.categories.len()))
            .collect();
        let per_cell = cell_bytes(
            weight_col.is_some(),
            measure_col.is_some(),
            exact_ok(measure_col.as_ref(), weight_col.as_ref(), rows),
        ) * (rayon::current_num_threads() + 1);
        return Err(Error::TooManyCells {
            cells: Some(cells as u64),
            limit: max_cells as u64,
            bytes: (cells as u64).saturating_mul(per_cell as u64),
            variable: None,
            shape,
        });
    }
    let mut strides = vec![1u32; plans.len()];
    for i in (0..plans.len().saturating_sub(1)).rev() {
        strides[i] = strides[i + 1] * plans[i + 1].categories.len().max(1) as u32;
    }
    let mut filters = Vec::new();
    for (pred, c) in preds.into_iter().zip(&filter_cols) {
        filters.push((c, specialize(filter_mapper(c.var(), pred), c.var().ty)));
    }
    let plan = Plan {
        cells,
        dims: dim_cols
            .iter()
            .zip(&plans)
            .zip(&strides)
            .map(|((c, p), &s)| (c, specialize(dim_mapper(p, s), c.var().ty)))
            .collect(),
        filters,
        weight: weight_col.as_ref().map(|c| (c, Exclusion::of(c.var()))),
        measure: measure_col.as_ref().map(|c| (c, Exclusion::of(c.var()))),
        exact: exact_ok(measure_col.as_ref(), weight_col.as_ref(), rows),
        morsel_sums: cells <= MAX_MORSEL_SUM_CELLS
            && morsel_sums_ok(measure_col.as_ref(), weight_col.as_ref()),
        means_fuse: None,
        selection: None,
        slots: Vec::new(),
        exact_floats: (partial
            && needs_exact_floats(measure_col.as_ref(), weight_col.as_ref(), rows)?)
            || extreme_floats(measure_col.as_ref(), weight_col.as_ref()),
        pack_weights: cells <= MAX_PACKED_CELLS
            && weight_col
                .as_ref()
                .is_some_and(|c| packable_weight(c.var())),
        fused_tabs: Vec::new(),
        replicates: rep_cols.iter().collect(),
        replicates_exact: false,
        taylor: q.taylor.as_ref().map(|t| {
            crate::taylor::TaylorPlan::new(
                t,
                &plans,
                cells,
                strata_col.as_ref(),
                cluster_col.as_ref(),
                measure_col.as_ref().map(|c| c.var()),
            )
        }),
        distribution: q.distribution,
        split,
        fused: measure_col.is_none()
            && weight_col
                .as_ref()
                .is_none_or(|c| Exclusion::of(c.var()).is_empty()),
    };
    let mut plan = plan;
    plan.fused_tabs = plan
        .dims
        .iter()
        .chain(&plan.filters)
        .map(|(_, m)| fused_table(m))
        .collect();
    if plan.exact_floats {
        // Row by row into exact sums: none of the fast paths.
        (plan.exact, plan.fused, plan.morsel_sums, plan.pack_weights) =
            (false, false, false, false);
    }
    if plan.exact && plan.morsel_sums {
        plan.means_fuse = means_fuse(measure_col.as_ref(), weight_col.as_ref());
    }
    if plan.taylor.is_some() || plan.split.is_some() || plan.distribution {
        // Taylor sums, splits and distributions follow each row's cell
        // index, which the fused kernels do not build.
        (plan.fused, plan.means_fuse) = (false, None);
    }
    if !plan.replicates.is_empty() {
        // Replicate sums follow each row's cell index, which the fused
        // kernels do not build.
        (plan.fused, plan.means_fuse) = (false, None);
        plan.replicates_exact =
            replicates_exact(&plan.replicates, measure_col.as_ref(), plan.exact, rows);
    }
    // The fused kernels' tables mark rejected codes with FUSED_TRASH.
    if cells >= FUSED_TRASH as usize {
        (plan.fused, plan.means_fuse) = (false, None);
    }
    if plan.fused || plan.means_fuse.is_some() {
        plan.selection = selection(&plan.filters);
    }
    let (distinct, slots) = distinct_columns(&all_cols);
    plan.slots = slots;
    // If any dimension has no categories the cube is empty.
    let empty = plans.iter().any(|p| p.categories.is_empty());
    let range = match &q.rows {
        Some(r) => (r.start.min(rows as u64) as usize)..(r.end.min(rows as u64) as usize),
        None => 0..rows,
    };
    let fates = fates.as_deref();
    let skips = fates.is_some_and(|f| f.contains(&Fate::Skip));
    let morsels = Morsels::new(&plan, fates, distinct.len());
    let acc =
        if empty || range.is_empty() || fates.is_some_and(|f| f.iter().all(|&f| f == Fate::Skip)) {
            Acc::new(&plan)?
        } else if read_path == ReadPath::Inline
            || ((range != (0..rows) || skips) && read_path != ReadPath::Mmap)
        {
            // Streamed segments start at row 0 and hold every morsel: a part
            // of the rows, or the morsels the zone maps leave, are read
            // inline (each worker's morsels with one pread per column).
            scan_inline(&morsels, &distinct, rows, range)?
        } else if read_path == ReadPath::Mmap {
            scan_mapped(&morsels, &distinct, rows, range, opts)?
        } else {
            scan_streamed(&morsels, &distinct, rows, read_path, opts)?
        };
    Ok(finish(
        plans,
        acc,
        &plan,
        weight_col.as_ref(),
        measure_col.as_ref(),
    ))
}
