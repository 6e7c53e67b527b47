//! Subsets (SDA's SUBSET): the records that pass a filter and the chosen
//! variables, as a new dataset with the same metadata (labels, missing
//! codes, decimals; text variables re-encoded to the values they still
//! have), published atomically as an import is.

use crate::exec::MORSEL;
use crate::expr::filter_program;
use crate::{Error, Result, Term};
use microtab_store::{fold_floats, match_column};
use microtab_store::{
    Column, ColumnWriter, Dataset, DatasetWriter, Design, Kind, Number, Variable,
};
use microtab_store::{Remedied, Remedy};
use std::path::Path;

/// What was written.
#[derive(Debug, Clone)]
pub struct SubsetReport {
    /// Records kept.
    pub rows: u64,
    /// Variables written.
    pub vars: Vec<String>,
    /// The design carried over, if any.
    pub design: Option<Design>,
    /// Why the source's design was not carried over (if it had one), as
    /// text.
    pub design_note: Option<String>,
    /// Why the source's design was not carried over, as facts (with the
    /// option that would help: [`Remedied`]).
    pub design_dropped: Option<DesignDropped>,
}

/// The rows that pass `filter` (all rows for no terms): a bitmap, bit
/// `r % 64` of word `r / 64` set for row `r`, and how many are set. A
/// record whose variable is missing fails a term, as in every query.
pub fn selection(ds: &Dataset, filter: &[Term]) -> Result<(Vec<u64>, u64)> {
    selection_in(ds, filter, 0..ds.rows() as usize, true)
}

/// [`selection`] of the rows in `range` (those outside are not set, nor
/// read but for the morsels the range shares); `judge`: as
/// `filter_program`'s.
pub(crate) fn selection_in(
    ds: &Dataset,
    filter: &[Term],
    range: std::ops::Range<usize>,
    judge: bool,
) -> Result<(Vec<u64>, u64)> {
    // A caller's selections are bitmaps already: the other terms are
    // evaluated, then each selection cuts their records.
    let (chosen, terms): (Vec<Term>, Vec<Term>) = filter
        .iter()
        .cloned()
        .partition(|t| matches!(t.cond, crate::Cond::Rows(_)));
    let (mut bits, kept) = evaluate(ds, &terms, range, judge)?;
    if chosen.is_empty() {
        return Ok((bits, kept));
    }
    let all = ds.rows() as usize;
    for t in &chosen {
        if let crate::Cond::Rows(sel) = &t.cond {
            if sel.len() != bits.len() {
                return Err(Error::Invalid(format!(
                    "{} is a bitmap of {} records, not of the dataset's {all}",
                    t.text,
                    sel.len() * 64
                )));
            }
            bits.iter_mut().zip(sel.iter()).for_each(|(a, b)| *a &= b);
        }
    }
    if !all.is_multiple_of(64) {
        // Bits past the last record are not records.
        if let Some(w) = bits.last_mut() {
            *w &= (1u64 << (all % 64)) - 1;
        }
    }
    let kept = bits.iter().map(|w| u64::from(w.count_ones())).sum();
    Ok((bits, kept))
}

/// [`selection_in`] of terms that are not selections.
fn evaluate(
    ds: &Dataset,
    filter: &[Term],
    range: std::ops::Range<usize>,
    judge: bool,
) -> Result<(Vec<u64>, u64)> {
    let rows = ds.rows() as usize;
    let mut bits = vec![0u64; rows.div_ceil(64)];
    let Some(p) = filter_program(ds, filter, judge)? else {
        let range = range.start.min(rows)..range.end.min(rows);
        if range == (0..rows) {
            for (i, w) in bits.iter_mut().enumerate() {
                let n = (rows - i * 64).min(64);
                *w = if n == 64 { u64::MAX } else { (1u64 << n) - 1 };
            }
        } else {
            for r in range.clone() {
                bits[r / 64] |= 1 << (r % 64);
            }
        }
        return Ok((bits, range.len() as u64));
    };
    let cols: Vec<Column> = p
        .inputs
        .iter()
        .map(|i| ds.column(&i.var.name))
        .collect::<std::result::Result<_, _>>()?;
    let mut bufs: Vec<Vec<u64>> = cols.iter().map(|_| Vec::new()).collect();
    let mut kept = 0u64;
    let end = range.end.min(rows);
    for start in (range.start / MORSEL * MORSEL..end).step_by(MORSEL) {
        let n = MORSEL.min(rows - start);
        let views = cols
            .iter()
            .zip(bufs.iter_mut())
            .map(|(c, b)| c.rows_view(start, n, b))
            .collect::<std::result::Result<Vec<_>, _>>()?;
        p.each_pass(&views, n, |k| {
            let r = start + k;
            if range.contains(&r) {
                bits[r / 64] |= 1 << (r % 64);
                kept += 1;
            }
        });
    }
    Ok((bits, kept))
}

#[inline]
fn picked(bits: &[u64], r: usize) -> bool {
    bits[r / 64] >> (r % 64) & 1 == 1
}

macro_rules! gather {
    ($v:expr, $bits:expr, $start:expr) => {{
        let v = $v;
        (0..v.len())
            .filter(|&i| picked($bits, $start + i))
            .map(|i| v[i])
            .collect::<Vec<_>>()
    }};
}

/// Copies the selected rows of one column into `w`, remapping text codes
/// through `remap` (old code → new code), and returns (min, max, nulls).
/// No row of `start..start + n` is picked (a morsel left out whole is not
/// read: a split reads each part's records only).
fn none_picked(bits: &[u64], start: usize, n: usize) -> bool {
    bits[start / 64..(start + n).div_ceil(64)]
        .iter()
        .all(|&w| w == 0)
}

fn copy_column(
    col: &Column,
    var: &Variable,
    bits: &[u64],
    remap: Option<&[i64]>,
    w: &mut ColumnWriter,
) -> Result<(Option<Number>, Option<Number>, u64)> {
    let rows = col.rows();
    let mut buf = Vec::new();
    let null = var.null_code.filter(|_| var.nulls > 0);
    let (mut lo, mut hi, mut flo, mut fhi, mut nulls) =
        (i64::MAX, i64::MIN, f64::INFINITY, f64::NEG_INFINITY, 0u64);
    for start in (0..rows).step_by(MORSEL) {
        let n = MORSEL.min(rows - start);
        if none_picked(bits, start, n) {
            continue;
        }
        let view = col.rows_view(start, n, &mut buf)?;
        macro_rules! ints {
            ($v:expr) => {{
                let mut g = gather!($v, bits, start);
                for x in g.iter_mut() {
                    let y = *x as i64;
                    if Some(y) == null {
                        nulls += 1;
                        continue;
                    }
                    let y = match remap {
                        Some(m) => {
                            let z = m[y as usize];
                            *x = z as _;
                            z
                        }
                        None => y,
                    };
                    lo = lo.min(y);
                    hi = hi.max(y);
                }
                w.append(&g)?;
            }};
        }
        macro_rules! floats {
            ($v:expr) => {{
                let g = gather!($v, bits, start);
                fold_floats(&g, &mut flo, &mut fhi, &mut nulls);
                w.append(&g)?;
            }};
        }
        match_column!(view, |v| ints => ints!(v), floats => floats!(v))
    }
    Ok(if var.kind == Kind::Float {
        if flo <= fhi {
            (Some(Number::Float(flo)), Some(Number::Float(fhi)), nulls)
        } else {
            (None, None, nulls)
        }
    } else if lo <= hi {
        (Some(Number::Int(lo)), Some(Number::Int(hi)), nulls)
    } else {
        (None, None, nulls)
    })
}

/// Writes the records of `ds` that pass `filter`, with the variables
/// `vars` (all when empty), as the new dataset `out` (replacing a dataset
/// there only with `force`). A replicate-weight design whose variables are
/// all kept is carried over (domain estimates from a subset equal those of
/// the full sample with a filter); a Taylor design only when every record
/// is kept (its strata and PSU counts describe the whole sample).
pub fn subset(
    ds: &Dataset,
    out: &Path,
    vars: &[String],
    filter: &[Term],
    force: bool,
) -> Result<SubsetReport> {
    let source = format!("subset of {}", ds.dir().display());
    subset_from(ds, out, vars, filter, force, &source)
}

/// [`subset`], the new dataset's manifest giving `source` (followed by
/// the filter) as where its records come from: an import that selects
/// while importing names its input, not the staging dataset it read.
pub fn subset_from(
    ds: &Dataset,
    out: &Path,
    vars: &[String],
    filter: &[Term],
    force: bool,
    source: &str,
) -> Result<SubsetReport> {
    let chosen: Vec<Variable> = if vars.is_empty() {
        ds.manifest().variables.clone()
    } else {
        let mut v: Vec<Variable> = Vec::new();
        for n in vars {
            let var = ds.variable(n)?;
            if !v.iter().any(|x| x.name == var.name) {
                v.push(var.clone());
            }
        }
        v
    };
    if std::fs::canonicalize(out).ok() == std::fs::canonicalize(ds.dir()).ok() && out.exists() {
        return Err(Error::Invalid(
            "a subset cannot replace the dataset it is taken from; write it elsewhere".into(),
        ));
    }
    let (bits, kept) = selection(ds, filter)?;
    let source = if filter.is_empty() {
        source.to_string()
    } else {
        format!(
            "{source} where {}",
            filter
                .iter()
                .map(|t| t.text.as_str())
                .collect::<Vec<_>>()
                .join(" ")
        )
    };
    write_selected(ds, out, &chosen, (&bits, kept), &source, force)
}

/// Records `range` (0-based, end exclusive) of every variable as a new
/// dataset at `out`, with the design [`carried_design`] allows: a part of
/// a dataset cut by records ([`crate::subset`]'s sibling for splitting).
pub fn subset_rows(
    ds: &Dataset,
    out: &Path,
    range: std::ops::Range<u64>,
    force: bool,
) -> Result<SubsetReport> {
    let rows = ds.rows();
    let (a, b) = (range.start.min(rows), range.end.min(rows));
    let mut bits = vec![0u64; (rows as usize).div_ceil(64)];
    for r in a..b {
        bits[(r / 64) as usize] |= 1 << (r % 64);
    }
    let source = format!("records {}–{} of {}", a + 1, b, ds.dir().display());
    let chosen = ds.manifest().variables.clone();
    write_selected(
        ds,
        out,
        &chosen,
        (&bits, b.saturating_sub(a)),
        &source,
        force,
    )
}

/// Writes the selected records of `chosen` as a new dataset.
fn write_selected(
    ds: &Dataset,
    out: &Path,
    chosen: &[Variable],
    (bits, kept): (&[u64], u64),
    source: &str,
    force: bool,
) -> Result<SubsetReport> {
    let mut w = DatasetWriter::create(out, force)?;
    w.set_source(source);
    w.set_title(ds.manifest().title.as_deref());
    w.set_description(ds.manifest().description.as_deref());
    for var in chosen {
        let col = ds.column(&var.name)?;
        let mut nv = var.clone();
        let mut remap = None;
        if var.kind == Kind::String {
            // Only the values the kept records have, in sorted order.
            let dict = ds.dictionary(var)?;
            let mut used = vec![false; dict.len()];
            let null = var.null_code.filter(|_| var.nulls > 0);
            let mut buf = Vec::new();
            for start in (0..col.rows()).step_by(MORSEL) {
                let n = MORSEL.min(col.rows() - start);
                if none_picked(bits, start, n) {
                    continue;
                }
                let view = col.rows_view(start, n, &mut buf)?;
                for i in 0..n {
                    if picked(bits, start + i) {
                        let c = view.get_i64(i);
                        if Some(c) != null {
                            if let Some(u) = used.get_mut(c as usize) {
                                *u = true;
                            }
                        }
                    }
                }
            }
            let mut m = vec![-1i64; dict.len()];
            let mut entries = Vec::new();
            for (i, e) in dict.iter().enumerate() {
                if used[i] {
                    m[i] = entries.len() as i64;
                    entries.push(e.clone());
                }
            }
            let (rel, sum) = w.write_dictionary(&var.name, &entries)?;
            nv.dictionary = Some(rel);
            nv.dictionary_checksum = Some(sum);
            remap = Some(m);
        }
        let mut cw = w.column_writer(&var.name, var.ty)?;
        let (lo, hi, nulls) = copy_column(&col, var, bits, remap.as_deref(), &mut cw)?;
        nv.min = lo;
        nv.max = hi;
        nv.nulls = nulls;
        if nulls == 0 {
            nv.null_code = None;
        }
        let fin = cw.finish(nv)?;
        w.add_variable(fin);
    }
    let names: Vec<String> = chosen.iter().map(|v| v.name.clone()).collect();
    let (design, dropped) = match design_carried(ds, &names, kept) {
        Ok(d) => (d, None),
        Err(why) => (None, Some(why)),
    };
    if let Some(d) = &design {
        w.set_design(d.clone());
    }
    w.commit(kept)?;
    Ok(SubsetReport {
        rows: kept,
        vars: names,
        design,
        design_note: dropped.as_ref().map(ToString::to_string),
        design_dropped: dropped,
    })
}

/// Why a source's survey design is not carried over to a copy of some of
/// its records or variables.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum DesignDropped {
    /// The copy lacks these of the design's variables.
    Lacks(Vec<String>),
    /// A Taylor design, and the copy holds only some of the records: the
    /// design's strata and PSUs describe the whole sample.
    TaylorPart,
}

impl std::fmt::Display for DesignDropped {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            DesignDropped::Lacks(names) => write!(
                f,
                "the survey design is not carried over: the subset lacks {}",
                names.join(", ")
            ),
            DesignDropped::TaylorPart => f.write_str(
                "the Taylor design is not carried over: its strata and PSUs describe the whole sample, and a subset's standard errors for a domain need them (a filter on the full dataset gives them)",
            ),
        }
    }
}

impl Remedied for DesignDropped {
    fn remedy(&self) -> Option<Remedy> {
        match self {
            DesignDropped::TaylorPart => Some(Remedy::Filter),
            DesignDropped::Lacks(_) => None,
        }
    }
}

/// The source's survey design as it applies to a copy of `names` holding
/// `kept` of its records (`None`: it has none), or why it does not: a
/// replicate design needs all its weights (it gives a domain's SEs like
/// the full sample with a filter), a Taylor design also every record (its
/// strata and PSUs describe the whole sample).
pub fn design_carried(
    ds: &Dataset,
    names: &[String],
    kept: u64,
) -> std::result::Result<Option<Design>, DesignDropped> {
    let Some(d) = &ds.manifest().design else {
        return Ok(None);
    };
    let missing: Vec<String> = d
        .variables()
        .into_iter()
        .filter(|n| !names.iter().any(|m| m.eq_ignore_ascii_case(n)))
        .cloned()
        .collect();
    if !missing.is_empty() {
        Err(DesignDropped::Lacks(missing))
    } else if d.taylor.is_some() && kept != ds.rows() {
        Err(DesignDropped::TaylorPart)
    } else {
        Ok(Some(d.clone()))
    }
}

/// [`design_carried`], the reason as text: the design carried over, or
/// why it is not.
pub fn carried_design(
    ds: &Dataset,
    names: &[String],
    kept: u64,
) -> (Option<Design>, Option<String>) {
    match design_carried(ds, names, kept) {
        Ok(d) => (d, None),
        Err(why) => (None, Some(why.to_string())),
    }
}
