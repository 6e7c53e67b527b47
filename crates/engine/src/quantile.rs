//! What quantiles need from a scan: each cell's weighted distribution of
//! the analysis variable ([`Query::distribution`](crate::Query)), and a
//! split of each cell's records at a threshold of its own
//! ([`Query::split`](crate::Query)) for the variance of the share below it.

use crate::hash::IntMap;
use crate::kernels::{dispatch, Val};
use crate::layout::Layout;
use crate::plan::{DimMap, DimPlan, Exclusion, TRASH};
pub use crate::query::Split;
use crate::value::Category;
use microtab_store::{ColumnData, Kind, Variable};

/// A cell's weighted distribution: `(value, Σ w)` by ascending value, in
/// displayed units (records of weight 0 included, with 0).
pub type Distribution = Vec<(f64, f64)>;

/// The planned split: each planned cell's threshold in stored units.
pub(crate) struct SplitPlan {
    pub(crate) thresholds: Vec<f64>,
    pub(crate) exclusion: Exclusion,
}

impl SplitPlan {
    /// The thresholds of the planned cells of `plans` (the grouping
    /// dimensions, before the split's own).
    pub(crate) fn new(s: &Split, var: &Variable, plans: &[DimPlan]) -> SplitPlan {
        let shape: Vec<usize> = plans.iter().map(|p| p.categories.len().max(1)).collect();
        let cells: usize = shape.iter().product();
        let scale = if var.kind == Kind::Float {
            1.0
        } else {
            var.scale()
        };
        let by: std::collections::HashMap<&[String], f64> =
            s.thresholds.iter().map(|(k, t)| (&k[..], *t)).collect();
        let thresholds = (0..cells)
            .map(|c| {
                let mut r = c;
                let mut key = vec![String::new(); shape.len()];
                for d in (0..shape.len()).rev() {
                    let i = r % shape[d];
                    r /= shape[d];
                    key[d] = plans[d]
                        .categories
                        .get(i)
                        .map_or(String::new(), |c| c.display.clone());
                }
                // Values are integers in stored units for an integer
                // variable: "at most t" is "at most ⌊t·scale⌋" (t came
                // from a stored value, so t·scale is one within rounding).
                by.get(&key[..])
                    .or_else(|| by.get(&[][..]))
                    .map_or(f64::NEG_INFINITY, |&t| {
                        if var.kind == Kind::Float {
                            t
                        } else {
                            (t * scale + 1e-7).floor()
                        }
                    })
            })
            .collect();
        SplitPlan {
            thresholds,
            exclusion: Exclusion::of(var),
        }
    }

    /// Moves each counted row of `idx` (cells of the grouping dimensions
    /// times 2) to its half: `+ 1` when its value is above its cell's
    /// threshold; rows whose value is missing are excluded.
    pub(crate) fn apply(
        &self,
        data: ColumnData<'_>,
        r: std::ops::Range<usize>,
        idx: &mut [u32],
        cells: u32,
    ) {
        let ex = &self.exclusion;
        dispatch!(data, r, |v| {
            for (x, y) in idx.iter_mut().zip(v) {
                if *x >= cells {
                    continue;
                }
                let y = y.f();
                let bad = y.is_nan()
                    || ex.null_code.is_some_and(|n| y == n as f64)
                    || ex.missing.contains(&y);
                if bad {
                    *x |= TRASH;
                } else if y > self.thresholds[(*x / 2) as usize] {
                    *x += 1;
                }
            }
        })
    }
}

/// The split's dimension: `≤` (0) and `>` (1).
pub(crate) fn split_dim(var: &Variable) -> DimPlan {
    let cat = |v: i64, d: &str| Category {
        value: crate::Value::Int(v),
        display: d.to_string(),
        label: None,
        missing: false,
    };
    DimPlan {
        var: var.clone(),
        categories: vec![cat(0, "≤"), cat(1, ">")],
        keys: vec![Some(0), Some(1)],
        map: DimMap::Table,
        recode: None,
        recode_keys: None,
    }
}

/// A worker's distributions: per planned cell, Σ w by stored value (the
/// `f64` bits for floats).
#[derive(Debug, Clone, Default)]
pub(crate) struct DistAcc {
    maps: Vec<IntMap<i64, f64>>,
}

impl DistAcc {
    /// One map per cell, allocated fallibly ([`crate::Error::OutOfMemory`]).
    pub(crate) fn new(cells: usize) -> crate::core::Result<Self> {
        Ok(DistAcc {
            maps: crate::core::alloc::filled(cells, IntMap::default(), || {
                format!("the distributions of a table of {cells} cells")
            })?,
        })
    }

    /// Adds rows `r`: `idx` their cells (`trash` and beyond not counted),
    /// `w` the weight column (none: 1 each), `x` the analysis variable's.
    pub(crate) fn morsel(
        &mut self,
        idx: &[u32],
        trash: u32,
        w: Option<ColumnData<'_>>,
        x: ColumnData<'_>,
        r: std::ops::Range<usize>,
        float: bool,
    ) {
        let mut ws: Vec<f64> = Vec::new();
        if let Some(w) = w {
            dispatch!(w, r.clone(), |v| ws.extend(v.iter().map(|a| a.f())));
        }
        let maps = &mut self.maps;
        dispatch!(x, r, |v| {
            for (j, (&i, y)) in idx.iter().zip(v).enumerate() {
                if i >= trash {
                    continue;
                }
                let key = if float { y.f().to_bits() as i64 } else { y.i() };
                let w = if ws.is_empty() { 1.0 } else { ws[j] };
                *maps[i as usize].entry(key).or_insert(0.0) += w;
            }
        })
    }

    pub(crate) fn merge(&mut self, o: DistAcc) {
        for (a, b) in self.maps.iter_mut().zip(o.maps) {
            if a.is_empty() {
                *a = b;
                continue;
            }
            for (k, w) in b {
                *a.entry(k).or_insert(0.0) += w;
            }
        }
    }

    /// Each compacted cell's distribution, in displayed units.
    pub(crate) fn finish(
        self,
        layout: &Layout,
        counted: impl Fn(usize) -> bool,
        wscale: f64,
        xvar: &Variable,
    ) -> Vec<Distribution> {
        let float = xvar.kind == Kind::Float;
        let xscale = if float { 1.0 } else { xvar.scale() };
        let mut out = vec![Vec::new(); layout.total];
        // The last map is the trash cell's (rows not counted).
        let cells = self.maps.len().saturating_sub(1);
        for (c, m) in self.maps.into_iter().enumerate().take(cells) {
            if !counted(c) {
                continue;
            }
            let mut d: Distribution = m
                .into_iter()
                .map(|(k, w)| {
                    let y = if float {
                        f64::from_bits(k as u64)
                    } else {
                        k as f64 / xscale
                    };
                    (y, w / wscale)
                })
                .collect();
            d.sort_unstable_by(|a, b| a.0.total_cmp(&b.0));
            out[layout.dst(c)] = d;
        }
        out
    }
}
