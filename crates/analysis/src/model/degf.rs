//! The degrees of freedom of a replicate design over a model's domain.
//! R's `degf` of an `svyrep.design` is the rank of its replicate weights
//! (the records' rows of them) less one; over a subset, that of the
//! subset's rows. A domain that lies in a few of the design's clusters
//! (JK1, BRR) or has fewer records than replicates has fewer degrees of
//! freedom than the whole design, and its t tests and intervals use
//! them, as R's `svyglm` on `subset(design, …)` does.

use microtab_engine::{state_of, Fold, FoldRows, FoldState, Query, ScanOptions};
use microtab_store::Dataset;
use std::any::Any;
use std::collections::{HashMap, HashSet};
use std::sync::Arc;

/// A row is independent of the basis when what is left of it after
/// projection is above this share of its length (R's `qr` tolerance).
const TOL: f64 = 1e-5;
/// Distinct rows remembered to skip repeats (JK1's rows repeat per
/// cluster); past it, rows are projected without the lookup.
const SEEN: usize = 1 << 16;

struct Rank {
    /// The values that must be present for a record to count, first.
    complete: usize,
    width: usize,
    basis: Vec<Vec<f64>>,
    seen: HashSet<Vec<i64>>,
    row: Vec<f64>,
}

impl Rank {
    fn new(complete: usize, width: usize) -> Rank {
        Rank {
            complete,
            width,
            basis: Vec::new(),
            seen: HashSet::new(),
            row: vec![0.0; width],
        }
    }

    /// Offers `rows` (another state's basis, or sums of rows) until the
    /// basis is full.
    fn absorb(&mut self, rows: impl IntoIterator<Item = Vec<f64>>) {
        for b in rows {
            if self.basis.len() == self.width {
                return;
            }
            self.offer(b);
        }
    }

    /// Adds `row` (its length normalized) to the basis when independent.
    fn offer(&mut self, mut row: Vec<f64>) {
        let norm = row.iter().map(|x| x * x).sum::<f64>().sqrt();
        if norm == 0.0 || !norm.is_finite() {
            return;
        }
        row.iter_mut().for_each(|x| *x /= norm);
        if self.seen.len() < SEEN {
            let key: Vec<i64> = row.iter().map(|x| (x * 1e12).round() as i64).collect();
            if !self.seen.insert(key) {
                return;
            }
        }
        // Gram–Schmidt, twice for accuracy.
        for _ in 0..2 {
            for b in &self.basis {
                let d: f64 = b.iter().zip(&row).map(|(x, y)| x * y).sum();
                row.iter_mut().zip(b).for_each(|(r, x)| *r -= d * x);
            }
        }
        let left = row.iter().map(|x| x * x).sum::<f64>().sqrt();
        if left > TOL {
            row.iter_mut().for_each(|x| *x /= left);
            self.basis.push(row);
        }
    }
}

impl FoldState for Rank {
    #[allow(clippy::needless_range_loop)]
    fn add(&mut self, rows: &FoldRows<'_>) {
        let v = rows.values;
        for i in 0..rows.cells.len() {
            if self.basis.len() == self.width {
                return;
            }
            if (0..self.complete).any(|k| v[k][i].is_nan()) {
                continue;
            }
            for (j, r) in self.row.iter_mut().enumerate() {
                *r = v[self.complete + j][i];
            }
            let row = self.row.clone();
            self.offer(row);
        }
    }

    fn merge(&mut self, other: Box<dyn FoldState>) {
        self.absorb(state_of::<Rank>(other).basis);
    }

    fn into_any(self: Box<Self>) -> Box<dyn Any> {
        self
    }

    fn done(&self) -> bool {
        self.basis.len() == self.width
    }

    fn stop(&self) -> bool {
        self.done()
    }
}

/// The rank of `rows` (each of the replicates' width), less one, when it
/// is full: the rows' sums over groups of records (a cube's cells) span
/// no more than the records' rows, so a full rank of the sums is the
/// records' rank, without reading them.
pub(crate) fn full_rank_degf(rows: impl Iterator<Item = Vec<f64>>, width: usize) -> Option<f64> {
    let mut r = Rank::new(0, width);
    r.absorb(rows);
    (r.basis.len() == width).then(|| width.saturating_sub(1) as f64)
}

/// `query` without the sums a rank fold needs none of (its records are
/// the same).
fn records_only(query: &Query) -> Query {
    Query {
        replicates: Vec::new(),
        measure: None,
        taylor: None,
        ..query.clone()
    }
}

/// The rank of the replicate weights of the records `query` counts that
/// have every one of `complete`, less one.
pub(crate) fn replicate_degf(
    ds: &Dataset,
    query: &Query,
    complete: &[String],
    replicates: &[String],
    opts: &ScanOptions,
) -> crate::Result<f64> {
    let basis = replicate_basis(ds, query, complete, replicates, opts)?;
    Ok(basis.len().saturating_sub(1) as f64)
}

/// An orthonormal basis of the replicate weights of the records `query`
/// counts that have every one of `complete` (over [`Query::rows`] when
/// set): the parts of a model computed elsewhere carry theirs, and
/// [`basis_degf`] unites them.
pub(crate) fn replicate_basis(
    ds: &Dataset,
    query: &Query,
    complete: &[String],
    replicates: &[String],
    opts: &ScanOptions,
) -> crate::Result<Vec<Vec<f64>>> {
    let (c, w) = (complete.len(), replicates.len());
    let mut q = records_only(query);
    q.fold = Some(Fold {
        values: complete.iter().chain(replicates).cloned().collect(),
        make: Arc::new(move || Box::new(Rank::new(c, w)) as Box<dyn FoldState>),
    });
    let folded = microtab_engine::fold_rows(ds, &q, opts)?;
    Ok(folded
        .state
        .map_or(Vec::new(), |s| state_of::<Rank>(s).basis))
}

/// A basis of the union of two parts' ([`replicate_basis`]).
pub(crate) fn unite_bases(a: Vec<Vec<f64>>, b: Vec<Vec<f64>>) -> Vec<Vec<f64>> {
    let width = a.first().or(b.first()).map_or(0, Vec::len);
    let mut r = Rank::new(0, width);
    r.absorb(a.into_iter().chain(b));
    r.basis
}

/// Per cell of a query's table, the rank of its records' replicate
/// weights.
struct Ranks {
    width: usize,
    cells: HashMap<u32, Rank>,
    /// The cells known to have records: once each is of full rank, no
    /// record can change an answer.
    expect: Arc<Vec<u32>>,
    /// The same by the groups' displayed values, named in cells when the
    /// scan tells its categories ([`FoldState::planned`]).
    keys: Option<Arc<HashSet<Vec<String>>>>,
}

impl FoldState for Ranks {
    fn add(&mut self, rows: &FoldRows<'_>) {
        let width = self.width;
        for (i, &c) in rows.cells.iter().enumerate() {
            let r = self.cells.entry(c).or_insert_with(|| Rank::new(0, width));
            if r.basis.len() == width {
                continue;
            }
            let row = (0..width).map(|j| rows.values[j][i]).collect();
            r.offer(row);
        }
    }

    fn merge(&mut self, other: Box<dyn FoldState>) {
        for (c, r) in state_of::<Ranks>(other).cells {
            let mine = self.cells.entry(c).or_insert_with(|| Rank::new(0, r.width));
            mine.absorb(r.basis);
        }
    }

    fn into_any(self: Box<Self>) -> Box<dyn Any> {
        self
    }

    fn stop(&self) -> bool {
        self.done()
    }

    fn planned(&mut self, categories: &[Vec<microtab_engine::Category>]) {
        let Some(keys) = &self.keys else {
            return;
        };
        let shape: Vec<usize> = categories.iter().map(|c| c.len().max(1)).collect();
        let cells: usize = shape.iter().product();
        let expect = (0..cells)
            .filter(|&c| keys.contains(&key_of(categories, &shape, c)))
            .map(|c| c as u32)
            .collect();
        self.expect = Arc::new(expect);
    }

    fn done(&self) -> bool {
        !self.expect.is_empty()
            && self.expect.iter().all(|c| {
                self.cells
                    .get(c)
                    .is_some_and(|r| r.basis.len() == self.width)
            })
    }
}

/// Per cell of `query`'s table (its group of records, whatever their
/// values), an orthonormal basis of its records' replicate weights (over
/// [`Query::rows`] when set). `expect`: the cells known to have records
/// (the scan stops once each is of full rank; a worker's state stops on
/// its own, so each worker may stop before the others).
pub(crate) fn replicate_bases_by(
    ds: &Dataset,
    query: &Query,
    replicates: &[String],
    expect: Vec<u32>,
    opts: &ScanOptions,
) -> crate::Result<HashMap<u32, Vec<Vec<f64>>>> {
    let mut q = records_only(query);
    q.fold = Some(ranks_fold(replicates, Arc::new(expect), None));
    let folded = microtab_engine::fold_rows(ds, &q, opts)?;
    let ranks = folded
        .state
        .map_or(HashMap::new(), |s| state_of::<Ranks>(s).cells);
    Ok(ranks.into_iter().map(|(c, r)| (c, r.basis)).collect())
}

/// R's `degf` of each cell's domain (`bases`: per planned cell of
/// `cells`, its basis of [`replicate_bases_by`]) and of all the cells'
/// records: the rank of the records' replicate weights less one (`None`:
/// no record).
pub(crate) fn degf_of_bases(
    bases: HashMap<u32, Vec<Vec<f64>>>,
    cells: usize,
) -> (Vec<Option<f64>>, f64) {
    let df = |b: &Vec<Vec<f64>>| b.len().saturating_sub(1) as f64;
    let per = (0..cells as u32).map(|c| bases.get(&c).map(df)).collect();
    // The rank of all records: of the union of the cells' bases.
    let all = bases.into_values().fold(Vec::new(), unite_bases);
    (per, df(&all))
}

/// The fold of each cell's rank of `replicates`, expecting the cells
/// `expect` (or the groups `keys`, by their values) to have records.
fn ranks_fold(
    replicates: &[String],
    expect: Arc<Vec<u32>>,
    keys: Option<Arc<HashSet<Vec<String>>>>,
) -> Fold {
    let width = replicates.len();
    Fold {
        values: replicates.to_vec(),
        make: Arc::new(move || {
            Box::new(Ranks {
                width,
                cells: HashMap::new(),
                expect: expect.clone(),
                keys: keys.clone(),
            }) as Box<dyn FoldState>
        }),
    }
}

/// Cell `c`'s categories' displayed values (`categories` planned, of
/// `shape`); a dimension without categories gives none.
fn key_of(categories: &[Vec<microtab_engine::Category>], shape: &[usize], c: usize) -> Vec<String> {
    microtab_engine::unravel(c, shape)
        .iter()
        .zip(categories)
        .filter_map(|(&i, cats)| cats.get(i).map(|c| c.display.clone()))
        .collect()
}

/// R's `degf` of each group's domain of `query`'s table — the rank of the
/// replicate weights of its records, whatever their values, less one — by
/// the group's categories' displayed values, and of all the groups'
/// records (the empty key). `expect`: the groups known to have records,
/// by their values (the scan stops once each is of full rank).
pub(crate) fn replicate_degf_by_key(
    ds: &Dataset,
    query: &Query,
    replicates: &[String],
    expect: HashSet<Vec<String>>,
    opts: &ScanOptions,
) -> crate::Result<HashMap<Vec<String>, f64>> {
    let mut q = records_only(query);
    q.fold = Some(ranks_fold(
        replicates,
        Arc::new(Vec::new()),
        Some(Arc::new(expect)),
    ));
    let folded = microtab_engine::fold_rows(ds, &q, opts)?;
    let shape: Vec<usize> = folded.categories.iter().map(|c| c.len().max(1)).collect();
    let cells = folded
        .state
        .map_or(HashMap::new(), |s| state_of::<Ranks>(s).cells);
    let df = |b: &Vec<Vec<f64>>| b.len().saturating_sub(1) as f64;
    let mut out = HashMap::new();
    let mut all = Vec::new();
    for (c, r) in cells {
        out.insert(key_of(&folded.categories, &shape, c as usize), df(&r.basis));
        all = unite_bases(all, r.basis);
    }
    out.insert(Vec::new(), df(&all));
    Ok(out)
}
