//! Counts and weight sums per cell lane: the state of the counts kernels
//! ([`Kernel::Counts`](crate::physical::Kernel) and the fused one), and
//! the counts beside the moments and exact float sums.

use super::index::Rows;
use super::morsel::{what, Morsel};
use crate::core::alloc::{reserved, try_grow, zeroed};
use crate::core::{Result, BIG_TABLE_CELLS, LANES};
use crate::kernels::{accumulate_counts, accumulate_weighted, dispatch, Val, WeightSum};
use crate::physical::Plan;
use microtab_store::Kind;

/// Per cell and lane (`cell * lanes + lane`, the trash cell last).
pub(crate) struct Tally {
    /// Lanes per cell: [`LANES`], so that a run of rows in one cell adds
    /// into independent sums, or 1 for a table too large for the cache
    /// ([`Tally::lanes_for`]), where the lanes would only multiply the
    /// misses.
    lanes: usize,
    pub(crate) counts: Vec<u64>,
    /// Float weight sums (and weights that may be missing).
    pub(crate) wsum: Vec<f64>,
    /// Integer weight sums (weights never missing, summed from the column).
    pub(crate) wsum_int: Vec<i64>,
    /// While a wide table's rows are few, its counted rows listed instead
    /// of added into its cells: `counts`, `wsum` and `wsum_int` then hold
    /// no values yet (only their capacity, reserved up front), and
    /// [`densify`](Self::densify) adds these in.
    pending: Option<Pending>,
}

/// The rows a deferred [`Tally`] has counted, by cell (the trash cell's
/// left out: nothing reads it), as its three kinds of row add them.
#[derive(Default)]
struct Pending {
    /// The cells' values (the trash cell's included), and the weight
    /// sums' (none unweighted), once added in.
    size: (usize, usize),
    /// Unweighted rows.
    counts: Vec<u32>,
    /// Rows with integer weights summed from the column.
    int: Vec<(u32, i64)>,
    /// Rows with float (or missing-checked) weights.
    float: Vec<(u32, f64)>,
}

impl Pending {
    fn len(&self) -> usize {
        self.counts.len() + self.int.len() + self.float.len()
    }

    /// Appends `o`'s rows, or returns false (both unchanged) when the
    /// memory for them cannot be had.
    fn append(&mut self, o: &mut Pending) -> bool {
        if !(try_grow(&mut self.counts, o.counts.len())
            && try_grow(&mut self.int, o.int.len())
            && try_grow(&mut self.float, o.float.len()))
        {
            return false;
        }
        self.counts.append(&mut o.counts);
        self.int.append(&mut o.int);
        self.float.append(&mut o.float);
        true
    }

    /// Makes room for `n` more rows in the list a morsel of `p` adds to,
    /// or returns false when the memory cannot be had (the lists are
    /// sized by the data, so they grow fallibly).
    fn room(&mut self, p: &Plan, n: usize) -> bool {
        match list_of(p) {
            List::Counts => try_grow(&mut self.counts, n),
            List::Int(_) => try_grow(&mut self.int, n),
            List::Float(_) => try_grow(&mut self.float, n),
        }
    }
}

/// Which of a [`Pending`]'s lists the rows of a morsel of a plan go to,
/// as [`Tally::morsel`] adds them: no weight, integer weights summed from
/// the column, or float (or missing-checked) weights.
enum List {
    Counts,
    /// From the weight column at this slot.
    Int(usize),
    /// From the weight column at this slot, or (`None`) through the
    /// missing-checked float weights.
    Float(Option<usize>),
}

fn list_of(p: &Plan) -> List {
    match (&p.weight, p.slots.weight) {
        (Some((col, ex)), Some(k)) if ex.is_empty() => match col.var().kind {
            Kind::Int => List::Int(k),
            _ => List::Float(Some(k)),
        },
        (Some(_), _) => List::Float(None),
        (None, _) => List::Counts,
    }
}

/// The largest number of rows a deferred tally of `cells` cells lists
/// before it adds them into its cells: half the cells (the list then takes
/// no more memory than the cells' counts, and adding in one pass beats
/// clearing and merging each worker's cells).
fn pending_cap(cells: usize) -> usize {
    cells / 2
}

impl Tally {
    /// Lanes per cell for the counts kernel over `cells` cells: one when
    /// a worker's lanes would outgrow the L2 cache. PUMA by BPL (216 K
    /// cells once compacted, 14.1 M records) scanned in 57 ms with four
    /// lanes, 3.5 MB of one.
    pub(crate) fn lanes_for(cells: usize) -> usize {
        if cells > BIG_TABLE_CELLS {
            1
        } else {
            LANES
        }
    }

    /// Zeroed lanes (`lanes` a cell) for `cells` cells and the trash
    /// cell; weight sums when `weighted`.
    pub(crate) fn new(cells: usize, weighted: bool, lanes: usize) -> Result<Tally> {
        let per_lane = (cells + 1).saturating_mul(lanes);
        let weights = if weighted { per_lane } else { 0 };
        Ok(Tally {
            lanes,
            counts: zeroed(per_lane, what("counts", cells))?,
            wsum: zeroed(weights, what("weight sums", cells))?,
            wsum_int: zeroed(weights, what("weight sums", cells))?,
            pending: None,
        })
    }

    /// A tally of one lane a cell for a wide table (the counts kernel's
    /// beyond [`BIG_TABLE_CELLS`]) that lists its rows until they are
    /// many ([`pending_cap`]): a filter that leaves few rows of a table of
    /// millions of cells then costs neither clearing nor merging each
    /// worker's cells. The cells' memory is reserved here, so that a table
    /// too large is refused before the scan.
    pub(crate) fn deferred(cells: usize, weighted: bool) -> Result<Tally> {
        let per_lane = cells.saturating_add(1);
        let weights = if weighted { per_lane } else { 0 };
        Ok(Tally {
            lanes: 1,
            counts: reserved(per_lane, what("counts", cells))?,
            wsum: reserved(weights, what("weight sums", cells))?,
            wsum_int: reserved(weights, what("weight sums", cells))?,
            pending: Some(Pending {
                size: (per_lane, weights),
                ..Pending::default()
            }),
        })
    }

    /// Adds a deferred tally's listed rows into its cells (no-op for one
    /// that is not deferred, or no longer).
    pub(crate) fn densify(&mut self) {
        let Some(p) = self.pending.take() else {
            return;
        };
        // Within the capacity reserved by `deferred`: no allocation.
        let (n, w) = p.size;
        self.counts.resize(n, 0);
        self.wsum.resize(w, 0.0);
        self.wsum_int.resize(w, 0);
        for &i in &p.counts {
            self.counts[i as usize] += 1;
        }
        for &(i, w) in &p.int {
            self.counts[i as usize] += 1;
            self.wsum_int[i as usize] += w;
        }
        for &(i, w) in &p.float {
            self.counts[i as usize] += 1;
            self.wsum[i as usize] += w;
        }
    }

    /// The counts kernel: rows `r` counted (and weighed) in the cells
    /// `rows` holds ([`Rows::index`]).
    pub(crate) fn morsel(&mut self, m: &Morsel<'_, '_>, rows: &mut Rows) {
        let (p, data, r) = (m.p, m.data, m.r.clone());
        let trash = p.cells as u32;
        if self.lanes == 1 {
            return self.morsel_one_lane(m, rows);
        }
        match (&p.weight, p.slots.weight) {
            (Some((col, ex)), Some(k)) if ex.is_empty() => {
                // Weights that cannot be missing: add straight from the column.
                let (counts, wsum, wsum_int) =
                    (&mut self.counts, &mut self.wsum, &mut self.wsum_int);
                let idx = &rows.idx;
                if col.var().kind == Kind::Int {
                    dispatch!(data[k], r, |v| accumulate_weighted(
                        idx, v, trash, counts, wsum_int
                    ));
                } else {
                    dispatch!(data[k], r, |v| accumulate_weighted(
                        idx, v, trash, counts, wsum
                    ));
                }
            }
            (Some(_), _) => {
                rows.load_f64(m, true);
                accumulate_weighted(
                    &rows.idx,
                    &rows.wbuf,
                    trash,
                    &mut self.counts,
                    &mut self.wsum,
                );
            }
            (None, _) => accumulate_counts(&rows.idx, trash, &mut self.counts),
        }
    }

    /// [`morsel`](Self::morsel) into one lane a cell.
    fn morsel_one_lane(&mut self, m: &Morsel<'_, '_>, rows: &mut Rows) {
        if let Some(pending) = self.pending.as_mut() {
            if pending.room(m.p, rows.idx.len()) {
                list_rows(pending, m, rows);
                if pending.len() <= pending_cap(pending.size.0) {
                    return;
                }
                // Many rows: the cells from now on.
                return self.densify();
            }
            // No memory for a longer list: the cells (reserved up front)
            // from this morsel on.
            self.densify();
        }
        let (p, data, r) = (m.p, m.data, m.r.clone());
        let trash = p.cells as u32;
        let idx = &rows.idx;
        match (&p.weight, p.slots.weight) {
            (Some((col, ex)), Some(k)) if ex.is_empty() => {
                let counts = &mut self.counts;
                if col.var().kind == Kind::Int {
                    let wsum = &mut self.wsum_int;
                    dispatch!(data[k], r, |v| accumulate_one_lane(
                        idx, v, trash, counts, wsum
                    ));
                } else {
                    let wsum = &mut self.wsum;
                    dispatch!(data[k], r, |v| accumulate_one_lane(
                        idx, v, trash, counts, wsum
                    ));
                }
            }
            (Some(_), _) => {
                rows.load_f64(m, true);
                accumulate_one_lane(
                    &rows.idx,
                    &rows.wbuf,
                    trash,
                    &mut self.counts,
                    &mut self.wsum,
                );
            }
            (None, _) => {
                for &i in idx {
                    self.counts[i.min(trash) as usize] += 1;
                }
            }
        }
    }

    /// The lanes of cell `c`.
    pub(crate) fn cell_lanes(&self, c: usize) -> std::ops::Range<usize> {
        c * self.lanes..(c + 1) * self.lanes
    }

    /// Sum of weights in cell `c` (stored units).
    pub(crate) fn wsum(&self, c: usize) -> f64 {
        let l = self.cell_lanes(c);
        self.wsum[l.clone()].iter().sum::<f64>() + self.wsum_int[l].iter().sum::<i64>() as f64
    }

    /// The first `cells` cells' counts (a deferred tally's listed rows
    /// added in first): the counts themselves with one lane a cell
    /// (leaving none), or their lanes' sums.
    pub(crate) fn take_counts(&mut self, cells: usize) -> Vec<u64> {
        self.densify();
        if self.lanes == 1 {
            let mut v = std::mem::take(&mut self.counts);
            v.truncate(cells);
            v
        } else {
            self.counts
                .chunks_exact(self.lanes)
                .take(cells)
                .map(|l| l.iter().sum())
                .collect()
        }
    }

    pub(crate) fn merge(&mut self, mut o: Tally) {
        if let (Some(a), Some(b)) = (self.pending.as_mut(), o.pending.as_mut()) {
            // Else (many rows, or no memory for the joined list) the
            // cells, reserved up front.
            if a.len() + b.len() <= pending_cap(a.size.0) && a.append(b) {
                return;
            }
        }
        self.densify();
        o.densify();
        for (a, b) in self.counts.iter_mut().zip(&o.counts) {
            *a += b;
        }
        for (a, b) in self.wsum.iter_mut().zip(&o.wsum) {
            *a += b;
        }
        for (a, b) in self.wsum_int.iter_mut().zip(&o.wsum_int) {
            *a += b;
        }
    }
}

/// Lists the rows of a morsel that `rows` puts in a cell (not the trash
/// cell) in `pending`, with their weights as [`Tally::morsel`] would add
/// them.
fn list_rows(pending: &mut Pending, m: &Morsel<'_, '_>, rows: &mut Rows) {
    let (p, data, r) = (m.p, m.data, m.r.clone());
    let trash = p.cells as u32;
    let idx = &rows.idx;
    match list_of(p) {
        List::Int(k) => {
            let out = &mut pending.int;
            dispatch!(data[k], r, |v| list_weighted(idx, v, trash, out));
        }
        List::Float(Some(k)) => {
            let out = &mut pending.float;
            dispatch!(data[k], r, |v| list_weighted(idx, v, trash, out));
        }
        List::Float(None) => {
            rows.load_f64(m, true);
            list_weighted(&rows.idx, &rows.wbuf, trash, &mut pending.float);
        }
        List::Counts => pending
            .counts
            .extend(idx.iter().copied().filter(|&i| i < trash)),
    }
}

/// The rows of `idx` in a cell below `trash`, with their weights, added
/// to `out`.
fn list_weighted<T: Val, S: WeightSum>(idx: &[u32], w: &[T], trash: u32, out: &mut Vec<(u32, S)>) {
    out.extend(
        idx.iter()
            .zip(w)
            .filter(|(&i, _)| i < trash)
            .map(|(&i, &w)| (i, S::of(w))),
    );
}

/// Counts and weight sums of the rows of `idx` (cells `trash` and beyond
/// in the trash cell), one lane a cell.
fn accumulate_one_lane<T: Val, S: WeightSum>(
    idx: &[u32],
    w: &[T],
    trash: u32,
    counts: &mut [u64],
    wsum: &mut [S],
) {
    for (&i, &w) in idx.iter().zip(w) {
        let c = i.min(trash) as usize;
        counts[c] += 1;
        wsum[c] += S::of(w);
    }
}
