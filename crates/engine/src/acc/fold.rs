//! A caller's fold ([`crate::Query::fold`]): each morsel's counted
//! records, their cells and the fold's values in displayed units, handed
//! to the worker's state.

use crate::fold::{FoldRows, FoldState};
use crate::kernels::Val;
use crate::physical::FoldPlan;
use microtab_store::{match_column, ColumnData};

/// The most rows handed to a fold's state at once.
const STRETCH: usize = 4096;

pub(crate) struct FoldAcc {
    pub(crate) state: Box<dyn FoldState>,
    rows: Vec<usize>,
    /// The rows' numbers in the dataset.
    abs: Vec<usize>,
    cells: Vec<u32>,
    values: Vec<Vec<f64>>,
}

impl FoldAcc {
    pub(crate) fn new(fp: &FoldPlan<'_>) -> Self {
        let mut state = (fp.make)();
        state.planned(&fp.categories);
        FoldAcc {
            state,
            rows: Vec::new(),
            abs: Vec::new(),
            cells: Vec::new(),
            values: vec![Vec::new(); fp.values.len()],
        }
    }

    /// Hands the rows `r` of the morsel whose cell (`idx`, from `r.start`)
    /// is counted (below `trash`) to the state.
    pub(crate) fn morsel(
        &mut self,
        fp: &FoldPlan<'_>,
        slots: &[usize],
        (idx, trash): (&[u32], u32),
        data: &[ColumnData<'_>],
        r: std::ops::Range<usize>,
        base: usize,
    ) {
        if self.state.done() {
            return;
        }
        self.rows.clear();
        self.abs.clear();
        self.cells.clear();
        for (i, &c) in idx.iter().enumerate().take(r.len()) {
            if c < trash {
                self.rows.push(r.start + i);
                self.abs.push(base + r.start + i);
                self.cells.push(c);
            }
        }
        // A stretch at a time, so its values stay in cache while the state
        // reads them (a fold of many variables, replicate weights).
        for at in (0..self.rows.len()).step_by(STRETCH) {
            if at > 0 && self.state.done() {
                return;
            }
            let end = (at + STRETCH).min(self.rows.len());
            self.stretch(fp, slots, data, at..end);
        }
    }

    /// Hands the counted rows `at` (of [`Self::rows`]) to the state.
    fn stretch(
        &mut self,
        fp: &FoldPlan<'_>,
        slots: &[usize],
        data: &[ColumnData<'_>],
        at: std::ops::Range<usize>,
    ) {
        for ((out, (_, ex, scale)), &slot) in self.values.iter_mut().zip(&fp.values).zip(slots) {
            out.clear();
            let rows = &self.rows[at.clone()];
            // Multiplying by the inverse (not dividing: 5× faster) is
            // within an ulp of the quotient.
            let inv = 1.0 / scale;
            let shown = |v: f64| {
                let missing = v.is_nan()
                    || ex.null_code.is_some_and(|n| v == n as f64)
                    || ex.missing.contains(&v);
                if missing {
                    f64::NAN
                } else if *scale == 1.0 {
                    v
                } else {
                    v * inv
                }
            };
            if ex.missing.is_empty() && ex.null_code.is_none() && *scale == 1.0 {
                // Nothing to look for (replicate weights).
                match_column!(data[slot], |v| out.extend(rows.iter().map(|&i| v[i].f())));
            } else if ex.missing.is_empty() && ex.null_code.is_none() {
                // Nothing to look for, in decimals.
                match_column!(data[slot], |v| out
                    .extend(rows.iter().map(|&i| v[i].f() * inv)));
            } else {
                match_column!(data[slot], |v| out
                    .extend(rows.iter().map(|&i| shown(v[i].f()))));
            }
        }
        self.state.add(&FoldRows {
            rows: &self.abs[at.clone()],
            cells: &self.cells[at],
            values: &self.values,
        });
    }
}
