//! Running a query: open the columns it names, choose how to read them,
//! build the physical plan, scan, and reshape the result.

use crate::acc::{Acc, Scanned};
use crate::core::{Error, Result, ScanOptions, DEFAULT_MAX_CELLS};
use crate::cube::Cube;
use crate::filter::{resolve, Predicate};
use crate::finish::compact;
use crate::partial::{self, Partial};
use crate::physical::*;
use crate::plan::{
    dim_categories, dim_mapper, filter_mapper, passes_all_valid, passing_ranges, specialize,
    zone_fates, DimPlan, Exclusion, Fate, Mapper,
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

/// The records a [`Folded`] fold was handed, and its result.
pub struct Folded {
    /// The query's table.
    pub cube: Cube,
    /// The workers' states merged (`None`: the query has no fold, or no
    /// worker ran).
    pub state: Option<Box<dyn crate::fold::FoldState>>,
    /// Per grouping variable, its planned categories: a record's cell is
    /// its categories' indices, row-major (the last variable fastest),
    /// each dimension at least one wide.
    pub categories: Vec<Vec<crate::Category>>,
}

/// Runs `q`, whose [`Query::fold`] is handed every record the table
/// counts (those passing the filter with a category in every grouping
/// variable), with its cell and the fold's variables.
pub fn fold_rows(ds: &Dataset, q: &Query, opts: &ScanOptions) -> Result<Folded> {
    execute(ds, q, opts, false, |mut s| {
        let state = s.acc.take_fold();
        let categories = s.plans.iter().map(|p| p.categories.clone()).collect();
        Ok(Folded {
            cube: compact(s)?,
            state,
            categories,
        })
    })?
}

/// [`run_with`] (or, with `partial`, [`run_partial`] finished), and the
/// name of the kernel the planner chose for the query: for tests that must
/// cover every kernel. Not a stable interface.
#[doc(hidden)]
pub fn run_traced(
    ds: &Dataset,
    q: &Query,
    opts: &ScanOptions,
    partial: bool,
) -> Result<(Cube, &'static str)> {
    if !partial {
        return execute(ds, q, opts, false, |s| {
            let kernel = s.plan.kernel.name();
            Ok((compact(s)?, kernel))
        })?;
    }
    partial_with(ds, q, opts, |p, plan| (p.finish(), plan.kernel.name()))
}

/// Each morsel's fate under the filters, from their columns' zone maps,
/// and which filters they settle for it (bit `i`: every row passes filter
/// `i`); `None` when they rule out, pass or settle no morsel.
fn morsel_fates(filters: &[(Column, Predicate)], rows: usize) -> Option<(Vec<Fate>, Vec<u32>)> {
    let nm = rows.div_ceil(MORSEL);
    let mut out = vec![Fate::Pass; nm];
    let mut settled = vec![0u32; nm];
    for (i, (c, p)) in filters.iter().enumerate() {
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
                for ((o, s), f) in out.iter_mut().zip(settled.iter_mut()).zip(f) {
                    *o = o.and(f);
                    if f == Fate::Pass && i < 32 {
                        *s |= 1 << i;
                    }
                }
            }
            // No zone map: every morsel is tested.
            _ => out.iter_mut().for_each(|o| *o = o.and(Fate::Scan)),
        }
    }
    let useful = out
        .iter()
        .zip(&settled)
        .any(|(&f, &s)| f != Fate::Scan || s != 0);
    useful.then_some((out, settled))
}

/// Runs `q` over `ds` (or the rows [`Query::rows`] names) into a
/// [`Partial`] result: exact sums, to be merged with other parts and
/// finished ([`Partial::finish`]).
pub fn run_partial(ds: &Dataset, q: &Query, opts: &ScanOptions) -> Result<Partial> {
    partial_with(ds, q, opts, |p, _| p)
}

/// The [`Partial`] of `q`, then `then` of it and the plan.
fn partial_with<R>(
    ds: &Dataset,
    q: &Query,
    opts: &ScanOptions,
    then: impl FnOnce(Partial, &Plan<'_>) -> R,
) -> Result<R> {
    let rows = ds.rows();
    let covered = q
        .rows
        .as_ref()
        .map_or(rows, |r| r.end.min(rows).saturating_sub(r.start.min(rows)));
    if q.fold.is_some() {
        return Err(Error::Invalid(
            "a fold of the caller's sums has no partial result".into(),
        ));
    }
    if q.taylor
        .as_ref()
        .is_some_and(|t| t.domains || t.times.is_some() || t.full_values)
    {
        return Err(Error::Invalid(
            "the Taylor domains' counts, sums of a variable's totals and covariances of the cells' values have no partial result"
                .into(),
        ));
    }
    let edges = taylor_edges(ds, q)?;
    execute(ds, q, opts, true, |s| {
        let plan = s.plan;
        then(partial::from_acc(s, (covered, &edges)), plan)
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

/// The columns a query names, opened and checked, and its filters
/// resolved.
struct Columns {
    /// The grouping arguments (a variable, and its recode or restriction).
    specs: Vec<crate::recode::DimSpec>,
    dims: Vec<Column>,
    /// The filters that can reject a row the query would count.
    filters: Vec<(Column, Predicate)>,
    weight: Option<Column>,
    measure: Option<Column>,
    replicates: Vec<Column>,
    strata: Option<Column>,
    cluster: Option<Column>,
    split: Option<Column>,
    /// The variable whose totals the Taylor sums take in place of the
    /// weight's ([`crate::TaylorQuery::times`]).
    times: Option<Column>,
    /// A fold's variables.
    values: Vec<Column>,
    /// Where the filter's terms on several variables were evaluated (the
    /// mask among `filters` reads its file until the scan ends).
    _mask: Option<microtab_store::DatasetWriter>,
}

impl Columns {
    /// Every column, role by role (a column may be in two roles).
    fn all(&self) -> Vec<&Column> {
        self.dims
            .iter()
            .chain(self.filters.iter().map(|(c, _)| c))
            .chain(self.weight.iter())
            .chain(self.measure.iter())
            .chain(self.replicates.iter())
            .chain(self.strata.iter())
            .chain(self.cluster.iter())
            .chain(self.times.iter())
            .chain(self.split.iter())
            .chain(self.values.iter())
            .collect()
    }
}

/// A replicate weight must be numeric and present for every record.
fn check_replicate(c: &Column) -> Result<()> {
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
    Ok(())
}

/// The strata and cluster columns of a Taylor design (integer codes).
fn taylor_columns(
    ds: &Dataset,
    q: &Query,
    c: &Columns,
    partial: bool,
) -> Result<(Option<Column>, Option<Column>)> {
    let Some(t) = &q.taylor else {
        return Ok((None, None));
    };
    // A range of rows is a part of a whole (see `run_partial`).
    if c.weight.is_none() || !c.replicates.is_empty() || (q.rows.is_some() && !partial) {
        return Err(Error::Invalid(
            "a Taylor design needs the weight, and neither replicate weights nor a range of rows"
                .into(),
        ));
    }
    let open = |n: &Option<String>, role: &str| -> Result<Option<Column>> {
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
    Ok((open(&t.strata, "strata")?, open(&t.cluster, "cluster")?))
}

/// Opens every column `q` names (so a bad name fails before any work) and
/// checks each is fit for its role.
fn open_columns(ds: &Dataset, q: &Query, partial: bool) -> Result<Columns> {
    // Grouping arguments may recode (`AGE(r: 0-17; 18-*)`) or restrict
    // (`AGE(18-65)`: a filter on the variable) their variable.
    let specs: Vec<crate::recode::DimSpec> = q
        .group_by
        .iter()
        .map(|s| crate::recode::parse_dim_in(ds, s))
        .collect::<Result<_>>()?;
    let open_all = |names: &mut dyn Iterator<Item = &str>| -> Result<Vec<Column>> {
        Ok(names
            .map(|n| ds.column(n))
            .collect::<std::result::Result<_, _>>()?)
    };
    let dims = open_all(&mut specs.iter().map(|s| s.name.as_str()))?;
    let terms: Vec<crate::Term> = q
        .filter
        .iter()
        .cloned()
        .chain(specs.iter().filter_map(|s| s.valid.clone()))
        // A record counts only with a value of the Taylor sums' variable.
        .chain(
            q.taylor
                .as_ref()
                .and_then(|t| t.times.as_ref())
                .map(|v| crate::Term {
                    var: v.clone(),
                    cond: crate::Cond::Set(vec![crate::Item::Range(None, None)]),
                    text: format!("{v}(*-*)"),
                }),
        )
        .collect();
    // Terms combining several variables (`SEX(1) or AGE > 60`) are
    // evaluated once, record by record, into a mask column.
    let (mixed, terms): (Vec<crate::Term>, Vec<crate::Term>) = terms
        .into_iter()
        .partition(|t| matches!(t.cond, crate::Cond::Mixed(_) | crate::Cond::Rows(_)));
    let filter_cols = open_all(&mut terms.iter().map(|t| t.var.as_str()))?;
    let mut c = Columns {
        weight: q.weight.as_deref().map(|n| ds.column(n)).transpose()?,
        measure: q.measure.as_deref().map(|n| ds.column(n)).transpose()?,
        replicates: open_all(&mut q.replicates.iter().map(|n| n.as_str()))?,
        specs,
        dims,
        filters: Vec::new(),
        strata: None,
        cluster: None,
        split: None,
        times: None,
        values: match &q.fold {
            Some(f) => open_all(&mut f.values.iter().map(|n| n.as_str()))?,
            None => Vec::new(),
        },
        _mask: None,
    };
    for r in &c.replicates {
        check_replicate(r)?;
    }
    if let Some(w) = &c.weight {
        numeric(w.var(), "a weight")?;
    }
    (c.strata, c.cluster) = taylor_columns(ds, q, &c, partial)?;
    if let Some(t) = &q.taylor {
        if t.times.is_some() && (t.scores.is_some() || t.domains) {
            return Err(Error::Invalid(
                "the Taylor sums of a variable's totals go with neither linear scores nor the domains' counts".into(),
            ));
        }
        if let Some(v) = &t.times {
            let col = ds.column(v)?;
            numeric(col.var(), "a Taylor sums' variable")?;
            c.times = Some(col);
        }
    }
    if let Some(s) = &q.split {
        let col = ds.column(&s.var)?;
        numeric(col.var(), "a split variable")?;
        c.split = Some(col);
    }
    if q.distribution && c.measure.is_none() {
        return Err(Error::Invalid(
            "a distribution needs an analysis variable".into(),
        ));
    }
    if let Some(m) = &c.measure {
        numeric(m.var(), "an analysis variable")?;
    }
    c.filters = resolve_filters(ds, q, &c, terms, filter_cols)?;
    if let Some((writer, col)) = mask_column(ds, &mixed, q.rows.as_ref())? {
        c.filters.push((col, Predicate::Ints(vec![(1, 1)])));
        c._mask = Some(writer);
    }
    Ok(c)
}

/// The records that pass `terms` (each combining several variables) as a
/// column of 0 and 1 beside the dataset's (those of `rows` only: the
/// scan reads no other), in a dataset being written in
/// the temporary directory and never published (it is removed when the
/// writer is dropped). The scan's kernels and zone maps read it as any
/// filter column; a record with a missing value the terms need is 0 when
/// the three-valued logic gives unknown.
fn mask_column(
    ds: &Dataset,
    terms: &[crate::Term],
    rows: Option<&std::ops::Range<u64>>,
) -> Result<Option<(microtab_store::DatasetWriter, Column)>> {
    use std::sync::atomic::{AtomicU64, Ordering};
    static SEQ: AtomicU64 = AtomicU64::new(0);
    if terms.is_empty() {
        return Ok(None);
    }
    let all = ds.rows() as usize;
    // A part of the rows (a partial result) evaluates its own records only.
    let range = rows.map_or(0..all, |r| {
        (r.start.min(all as u64) as usize)..(r.end.min(all as u64) as usize)
    });
    // Text values were judged over every dataset answered together.
    let (bits, _) = crate::subset::selection_in(ds, terms, range, false)?;
    let rows = all;
    let tmp = std::env::temp_dir();
    let target = tmp.join(format!(
        "microtab-filter-{}-{}",
        std::process::id(),
        SEQ.fetch_add(1, Ordering::Relaxed)
    ));
    let mut w = microtab_store::DatasetWriter::create(&target, false).map_err(|e| {
        Error::Invalid(format!(
            "a filter joining several variables keeps its records in a temporary column, which cannot be written in {} (the temporary directory, TMPDIR): {}",
            tmp.display(),
            e
        ))
    })?;
    // No variable of a dataset has this name (slots match columns by name).
    let name = "\u{1}filter";
    let mut cw = w.column_writer(name, microtab_store::PhysType::U8)?;
    let mut buf: Vec<u8> = Vec::with_capacity(MORSEL);
    for start in (0..rows).step_by(MORSEL) {
        let n = MORSEL.min(rows - start);
        buf.clear();
        buf.extend((start..start + n).map(|r| (bits[r / 64] >> (r % 64) & 1) as u8));
        cw.append(&buf)?;
    }
    let var = cw.finish(microtab_store::Variable::new(
        name,
        microtab_store::Kind::Int,
        microtab_store::PhysType::U8,
    ))?;
    let col = w.finished_column(&var, rows as u64)?;
    Ok(Some((w, col)))
}

/// Resolves the filters; drops those that pass every value their variable
/// can have in the rows counted anyway (`INCTOT<9999999` in a mean of
/// INCTOT, whose missing code is excluded already).
fn resolve_filters(
    ds: &Dataset,
    q: &Query,
    c: &Columns,
    terms: Vec<crate::Term>,
    cols: Vec<Column>,
) -> Result<Vec<(Column, Predicate)>> {
    // The Taylor domains count records lacking the analysis value: a
    // filter on it is kept for them.
    let domains = q.taylor.as_ref().is_some_and(|t| t.domains);
    let excluded_anyway = |v: &microtab_store::Variable| {
        let is = |c: &Option<Column>| c.as_ref().is_some_and(|c| c.var().name == v.name);
        (is(&c.measure) && !domains)
            || is(&c.weight)
            || (!q.include_missing && c.dims.iter().any(|c| c.var().name == v.name))
    };
    let mut kept = Vec::new();
    for (t, col) in terms.iter().zip(cols) {
        let dict = dict_of(ds, col.var())?;
        let pred = resolve(t, col.var(), &dict)?;
        if !(excluded_anyway(col.var()) && passes_all_valid(col.var(), &pred)) {
            kept.push((col, pred));
        }
    }
    Ok(kept)
}

/// How the scan reads the columns.
fn read_path(opts: &ScanOptions, all: &[&Column]) -> ReadPath {
    let path = match opts.read_path {
        // Cached columns are fastest copied morsel by morsel into each
        // worker's cache (no page faults; 3–7% faster than mapped on
        // Q1–Q5); cold ones stream fastest through large preads with
        // read-ahead (measured: docs/IO.md).
        ReadPath::Auto if all.iter().all(|c| c.resident_fraction() >= 0.9) => ReadPath::Inline,
        ReadPath::Auto => cold_path(all),
        p => p,
    };
    if path == ReadPath::Mmap {
        // Start the kernel reading the first stretch of every column now, so
        // the reads overlap planning; the scan keeps the window moving.
        for c in all {
            c.prefetch(0, (opts.readahead + STEP) * MORSEL);
        }
    }
    path
}

/// Each grouping variable's categories (and the split's last dimension).
fn dim_plans(
    ds: &Dataset,
    q: &Query,
    c: &Columns,
) -> Result<(
    Vec<DimPlan>,
    Option<std::sync::Arc<crate::quantile::SplitPlan>>,
)> {
    let mut plans: Vec<DimPlan> = Vec::new();
    for ((col, s), arg) in c.dims.iter().zip(&c.specs).zip(&q.group_by) {
        let dict = dict_of(ds, col.var())?;
        plans.push(match &s.recode {
            Some(groups) => crate::recode::recode_plan(
                col,
                &dict,
                (arg.as_str(), groups.as_slice()),
                q.include_missing,
            )?,
            None => dim_categories(
                col,
                dict,
                q.include_missing,
                q.max_cells.unwrap_or(DEFAULT_MAX_CELLS),
                false,
            )?,
        });
    }
    compact_wide_dims(ds, q, c, &mut plans)?;
    let split = match (&q.split, &c.split) {
        (Some(s), Some(col)) => {
            let sp = crate::quantile::SplitPlan::new(s, col.var(), &plans);
            plans.push(crate::quantile::split_dim(col.var()));
            Some(std::sync::Arc::new(sp))
        }
        _ => None,
    };
    Ok((plans, split))
}

/// A worker's cell sums larger than this (a quarter of the L3 cache of a
/// 2-core EPYC slice) are worth a scan of each wide grouping variable for
/// the values that occur (~4 ms a u16 column of 14.1 M records on 2
/// cores), where its column header has no value set to list them: PUMA
/// (3,601 codes) by BPL (600 codes, 60 of them used) plans 2.2 M cells,
/// of which 216 K can fill (234 ms against 36 ms once compacted and
/// counted in one lane, on the 14.1 M census).
const COMPACT_BYTES: usize = 8 << 20;

/// Fewest codes of a grouping variable worth scanning for the values
/// that occur.
const COMPACT_MIN_CODES: usize = 64;

/// Replaces the plans of wide table-mapped grouping variables (not
/// recodes) by plans of only the values that occur, widest first: each
/// whose column header lists them (no scan), and the others while the
/// table's cell sums would take more than [`COMPACT_BYTES`] a worker. The
/// answer is the same: a category no record has is dropped anyway.
fn compact_wide_dims(ds: &Dataset, q: &Query, c: &Columns, plans: &mut [DimPlan]) -> Result<()> {
    let cells = |plans: &[DimPlan]| {
        plans
            .iter()
            .fold(1usize, |n, p| n.saturating_mul(p.categories.len().max(1)))
    };
    let (w, x) = (c.weight.as_ref(), c.measure.as_ref());
    let exact = exact_ok(x, w, ds.rows() as usize);
    let per_cell = |cells: usize| cell_bytes(cells, w.is_some(), x.is_some(), exact);
    let mut wide: Vec<usize> = (0..c.dims.len())
        .filter(|&i| {
            c.specs[i].recode.is_none()
                && plans[i].map == crate::plan::DimMap::Table
                && plans[i].categories.len() >= COMPACT_MIN_CODES
        })
        .collect();
    wide.sort_by_key(|&i| std::cmp::Reverse(plans[i].categories.len()));
    for i in wide {
        let n = cells(plans);
        let col = &c.dims[i];
        if n.saturating_mul(per_cell(n)) <= COMPACT_BYTES && col.header().values.is_none() {
            continue;
        }
        plans[i] = dim_categories(
            col,
            dict_of(ds, col.var())?,
            q.include_missing,
            q.max_cells.unwrap_or(DEFAULT_MAX_CELLS),
            true,
        )?;
    }
    Ok(())
}

/// The cells of the table, refused when more than the query allows
/// (before any memory is taken for them).
fn table_cells(q: &Query, plans: &[DimPlan], c: &Columns, rows: usize) -> Result<usize> {
    let mut cells = 1usize;
    for p in plans {
        cells = cells.saturating_mul(p.categories.len().max(1));
    }
    let max_cells = q.max_cells.unwrap_or(DEFAULT_MAX_CELLS);
    if cells <= max_cells {
        return Ok(cells);
    }
    let (w, x) = (c.weight.as_ref(), c.measure.as_ref());
    let per_cell = cell_bytes(cells, w.is_some(), x.is_some(), exact_ok(x, w, rows))
        * (rayon::current_num_threads() + 1);
    Err(Error::TooManyCells {
        cells: Some(cells as u64),
        limit: max_cells as u64,
        bytes: (cells as u64).saturating_mul(per_cell as u64),
        variable: None,
        shape: plans
            .iter()
            .map(|p| (p.var.name.clone(), p.categories.len()))
            .collect(),
    })
}

/// The physical plan of `q`, and the distinct columns it reads.
fn physical_plan<'a>(
    q: &Query,
    c: &'a Columns,
    plans: &[DimPlan],
    (cells, rows, partial): (usize, usize, bool),
    split: Option<std::sync::Arc<crate::quantile::SplitPlan>>,
) -> Result<(Plan<'a>, Vec<&'a Column>)> {
    let mut strides = vec![1u32; plans.len()];
    for i in (0..plans.len().saturating_sub(1)).rev() {
        strides[i] = strides[i + 1] * plans[i + 1].categories.len().max(1) as u32;
    }
    let mut d = Distinct::default();
    let dims: Vec<(&Column, Mapper)> = c
        .dims
        .iter()
        .zip(plans)
        .zip(&strides)
        .map(|((col, p), &s)| (col, specialize(dim_mapper(p, s), col.var().ty)))
        .collect();
    let filters: Vec<(&Column, Mapper)> = c
        .filters
        .iter()
        .map(|(col, pred)| {
            (
                col,
                specialize(filter_mapper(col.var(), pred.clone()), col.var().ty),
            )
        })
        .collect();
    let slots = Slots {
        dims: c.dims.iter().map(|col| d.slot(col)).collect(),
        filters: c.filters.iter().map(|(col, _)| d.slot(col)).collect(),
        weight: c.weight.as_ref().map(|col| d.slot(col)),
        measure: c.measure.as_ref().map(|col| d.slot(col)),
        replicates: c.replicates.iter().map(|col| d.slot(col)).collect(),
        strata: c.strata.as_ref().map(|col| d.slot(col)),
        cluster: c.cluster.as_ref().map(|col| d.slot(col)),
        times: c.times.as_ref().map(|col| d.slot(col)),
        split: c.split.as_ref().map(|col| d.slot(col)),
        values: c.values.iter().map(|col| d.slot(col)).collect(),
    };
    let (w, x) = (c.weight.as_ref(), c.measure.as_ref());
    let per_row = q.taylor.is_some()
        || split.is_some()
        || q.distribution
        || !c.replicates.is_empty()
        || q.fold.is_some();
    let kernel = Kernel::choose(&KernelInputs {
        cells,
        dims: &dims,
        filters: &filters,
        weight: w,
        measure: x,
        rows,
        partial,
        per_row,
    })?;
    let replicates: Vec<&Column> = c.replicates.iter().collect();
    let replicates_exact = !replicates.is_empty()
        && replicates_exact(&replicates, x, kernel.sums() == SumsKind::Exact, rows);
    let taylor = q.taylor.as_ref().map(|t| {
        let ws = w.map_or(1.0, |c| c.var().scale());
        let tvar = c.times.as_ref().map(|c| c.var());
        crate::taylor::TaylorPlan::new(
            t,
            plans,
            cells,
            c.strata.as_ref(),
            (x.map(|c| c.var()), tvar),
            ws,
            partial,
        )
    });
    let plan = Plan {
        cells,
        dims,
        filters,
        weight: w.map(|c| (c, Exclusion::of(c.var()))),
        measure: x.map(|c| (c, Exclusion::of(c.var()))),
        kernel,
        slots,
        replicates,
        replicates_exact,
        taylor,
        distribution: q.distribution,
        split,
        fold: q.fold.as_ref().map(|f| crate::physical::FoldPlan {
            make: f.make.clone(),
            values: c
                .values
                .iter()
                .map(|col| (col, Exclusion::of(col.var()), col.var().scale()))
                .collect(),
            categories: std::sync::Arc::new(plans.iter().map(|p| p.categories.clone()).collect()),
        }),
    };
    Ok((plan, d.cols))
}

/// Counts the rows of `range` (the morsels the zone maps leave) into the
/// workers' accumulators, merged.
fn scan(
    plan: &Plan<'_>,
    distinct: &[&Column],
    fates: Option<(&[Fate], &[u32])>,
    (read_path, opts): (ReadPath, &ScanOptions),
    range: std::ops::Range<usize>,
    rows: usize,
) -> Result<Acc> {
    let skips = fates.is_some_and(|(f, _)| f.contains(&Fate::Skip));
    if range.is_empty() || fates.is_some_and(|(f, _)| f.iter().all(|&f| f == Fate::Skip)) {
        // No morsel to read: no plans made for them either.
        return Acc::new(plan);
    }
    let morsels = Morsels::new(plan, fates, distinct.len());
    if read_path == ReadPath::Inline
        || ((range != (0..rows) || skips) && read_path != ReadPath::Mmap)
    {
        // Streamed segments start at row 0 and hold every morsel: a part
        // of the rows, or the morsels the zone maps leave, are read
        // inline (each worker's morsels with one pread per column).
        scan_inline(&morsels, distinct, rows, range)
    } else if read_path == ReadPath::Mmap {
        scan_mapped(&morsels, distinct, rows, range, opts)
    } else {
        scan_streamed(&morsels, distinct, rows, read_path, opts)
    }
}

/// Plans and scans `q`; `partial` sums exactly (the `ExactFloats` kernel
/// where the others would not).
fn execute<R>(
    ds: &Dataset,
    q: &Query,
    opts: &ScanOptions,
    partial: bool,
    finish: impl FnOnce(Scanned<'_, '_>) -> R,
) -> Result<R> {
    let rows = ds.rows() as usize;
    let c = open_columns(ds, q, partial)?;
    let fates = morsel_fates(&c.filters, rows);
    let read_path = read_path(opts, &c.all());
    let (plans, split) = dim_plans(ds, q, &c)?;
    let cells = table_cells(q, &plans, &c, rows)?;
    let (plan, distinct) = physical_plan(q, &c, &plans, (cells, rows, partial), split)?;
    let range = match &q.rows {
        Some(r) => (r.start.min(rows as u64) as usize)..(r.end.min(rows as u64) as usize),
        None => 0..rows,
    };
    // If any dimension has no categories the cube is empty.
    let acc = match plans.iter().any(|p| p.categories.is_empty()) {
        true => Acc::new(&plan)?,
        false => scan(
            &plan,
            &distinct,
            fates.as_ref().map(|(f, s)| (&f[..], &s[..])),
            (read_path, opts),
            range,
            rows,
        )?,
    };
    Ok(finish(Scanned {
        plans,
        acc,
        plan: &plan,
        weight: c.weight.as_ref(),
        measure: c.measure.as_ref(),
    }))
}
