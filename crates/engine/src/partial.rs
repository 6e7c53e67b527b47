//! Partial results: a query's cube over part of the rows (a row range, or
//! one of several datasets with the same variables), kept exactly so that
//! partials merge in any order and grouping into the same bits.
//!
//! A [`Partial`] keeps each grouping's categories by value (string codes
//! differ between datasets), record counts, and the sums a result needs
//! (Σw, Σw·x, Σw·x²) exactly: as integers in stored units when every value
//! is an integer (implied decimals included) and the sums cannot overflow,
//! else as [`ExactSum`]s (exact sums of floating-point values). [`merge`]
//! adds them; [`Partial::finish`] rounds once, into the [`Cube`] a whole
//! query gives. Integer sums finish through the same formulas as
//! [`crate::run`], so a dataset's partials merged equal its whole query
//! bit for bit; float sums are exact in a partial and rounded once, where
//! [`crate::run`] sums in `f64` lanes (the two agree to about 1e-15
//! relative).
//!
//! [`merge`]: Partial::merge

use crate::acc::{Acc, CellSums, RepSums, Scanned};
use crate::core::{Error, ExactCell, Moments, Result};
use crate::cube::{Cube, RepCells};
use crate::exact::{div_pow10, exact_moments, ExactSum};
use crate::layout::{Dim, Layout};
use crate::physical::Plan;
use crate::plan::DimPlan;
use crate::taylor::TaylorPartial;
use crate::value::{Category, Value};
use microtab_store::{Column, Kind, PhysType, Variable};
use serde::{Deserialize, Serialize};
use std::cmp::Ordering;

/// A grouping dimension of a partial result.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PartialDim {
    /// Variable name.
    pub name: String,
    /// Variable label.
    pub label: Option<String>,
    /// Variable kind (strings merge with strings, numbers with numbers).
    pub kind: Kind,
    /// Categories with rows, in value order (system-missing last).
    pub categories: Vec<Category>,
}

/// A weight or analysis variable of a partial result.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Summed {
    /// Variable name.
    pub name: String,
    /// Variable label.
    pub label: Option<String>,
    /// Implied decimals of the sums' stored units (0 for floats).
    pub decimals: u32,
}

/// Per-cell sums of a partial result, in stored units: Σw (of the weight,
/// or of 1 for unweighted means), Σw·x and Σw·x² (with an analysis
/// variable; empty otherwise).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Sums {
    /// Unweighted counts only.
    None,
    /// Integer sums.
    Int {
        /// Σw per cell.
        w: Vec<i128>,
        /// Σw·x per cell.
        wx: Vec<i128>,
        /// Σw·x² per cell.
        wxx: Vec<i128>,
    },
    /// Exact sums of floating-point values.
    Exact {
        /// Σw per cell.
        w: Vec<ExactSum>,
        /// Σw·x per cell.
        wx: Vec<ExactSum>,
        /// Σw·x² per cell.
        wxx: Vec<ExactSum>,
    },
}

/// A query's result over part of the rows, ready to merge (see the module
/// documentation).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Partial {
    /// Grouping dimensions, outermost first.
    pub dims: Vec<PartialDim>,
    /// The weight.
    pub weight: Option<Summed>,
    /// The analysis variable.
    pub measure: Option<Summed>,
    /// Records per cell (dense over the dimensions' categories).
    pub counts: Vec<u64>,
    /// Sums per cell.
    pub sums: Sums,
    /// Rows the partial covers (before filters).
    pub rows: u64,
    /// Replicate-weight sums per cell (with `Query::replicates`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replicates: Option<RepPartial>,
    /// Taylor linearization sums (with `Query::taylor`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub taylor: Option<TaylorPartial>,
}

/// The sums of each replicate weight per cell, mergeable like the rest of
/// a [`Partial`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RepPartial {
    /// The replicate weights, in order (their names and implied decimals).
    pub weights: Vec<Summed>,
    /// Implied decimals of the analysis variable in `Σ w_r·x`.
    pub xdecimals: u32,
    /// The sums, per replicate and cell.
    pub sums: RepCellSums,
}

/// Replicate sums per replicate and cell: `w[r][cell]` = Σ w_r and, with an
/// analysis variable, `wx[r][cell]` = Σ w_r·x (empty without one).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum RepCellSums {
    /// Exact integers in stored units (integer replicate weights and
    /// analysis variable): parts merge bit for bit.
    Int {
        /// Σ w_r.
        w: Vec<Vec<i128>>,
        /// Σ w_r·x.
        wx: Vec<Vec<i128>>,
    },
    /// Floats in displayed units (float replicate weights or analysis
    /// values, or parts whose implied decimals differ): merged in `f64`.
    Float {
        /// Σ w_r.
        w: Vec<Vec<f64>>,
        /// Σ w_r·x.
        wx: Vec<Vec<f64>>,
    },
}

impl RepPartial {
    /// The sums as a cube holds them (displayed units; `wx` with an
    /// analysis variable).
    pub(crate) fn cells(&self, measured: bool) -> RepCells {
        let (w, wx) = self.displayed();
        RepCells {
            w,
            wx: measured.then_some(wx),
        }
    }

    /// The sums in displayed units.
    fn displayed(&self) -> (Vec<Vec<f64>>, Vec<Vec<f64>>) {
        match &self.sums {
            RepCellSums::Float { w, wx } => (w.clone(), wx.clone()),
            RepCellSums::Int { w, wx } => {
                let xs = 10f64.powi(self.xdecimals as i32);
                let ws: Vec<f64> = self
                    .weights
                    .iter()
                    .map(|s| 10f64.powi(s.decimals as i32))
                    .collect();
                (
                    w.iter()
                        .zip(&ws)
                        .map(|(v, s)| v.iter().map(|&x| x as f64 / s).collect())
                        .collect(),
                    wx.iter()
                        .zip(&ws)
                        .map(|(v, s)| v.iter().map(|&x| x as f64 / (s * xs)).collect())
                        .collect(),
                )
            }
        }
    }

    /// Unites two parts' replicate sums, each part's cells going where
    /// `maps` says, into `n` cells.
    fn merge(a: &RepPartial, b: &RepPartial, maps: [&[usize]; 2], n: usize) -> Result<RepPartial> {
        let names = |p: &RepPartial| -> Vec<String> {
            p.weights
                .iter()
                .map(|s| s.name.to_ascii_lowercase())
                .collect()
        };
        if names(a) != names(b) {
            return Err(Error::Invalid(
                "cannot merge partial results: their replicate weights differ".into(),
            ));
        }
        let weights = a
            .weights
            .iter()
            .zip(&b.weights)
            .map(|(x, y)| Summed {
                name: pick_name(&x.name, &y.name),
                label: pick_label(&x.label, &y.label),
                decimals: x.decimals,
            })
            .collect::<Vec<_>>();
        let same_units = a.xdecimals == b.xdecimals
            && a.weights
                .iter()
                .zip(&b.weights)
                .all(|(x, y)| x.decimals == y.decimals);
        let reps = a.weights.len();
        if let (RepCellSums::Int { w: aw, wx: awx }, RepCellSums::Int { w: bw, wx: bwx }, true) =
            (&a.sums, &b.sums, same_units)
        {
            let mut w = vec![vec![0i128; n]; reps];
            let mut wx = vec![vec![0i128; if awx.is_empty() { 0 } else { n }]; awx.len()];
            for ((pw, pwx), map) in [(aw, awx), (bw, bwx)].into_iter().zip(maps) {
                for r in 0..reps {
                    for (src, &dst) in map.iter().enumerate() {
                        w[r][dst] += pw[r][src];
                        if let Some(x) = pwx.get(r) {
                            wx[r][dst] += x[src];
                        }
                    }
                }
            }
            return Ok(RepPartial {
                weights,
                xdecimals: a.xdecimals,
                sums: RepCellSums::Int { w, wx },
            });
        }
        let (da, db) = (a.displayed(), b.displayed());
        let measured = !da.1.is_empty();
        let mut w = vec![vec![0.0; n]; reps];
        let mut wx = vec![vec![0.0; if measured { n } else { 0 }]; if measured { reps } else { 0 }];
        for ((pw, pwx), map) in [(&da.0, &da.1), (&db.0, &db.1)].into_iter().zip(maps) {
            for r in 0..reps {
                for (src, &dst) in map.iter().enumerate() {
                    w[r][dst] += pw[r][src];
                    if measured {
                        wx[r][dst] += pwx[r][src];
                    }
                }
            }
        }
        Ok(RepPartial {
            weights: a
                .weights
                .iter()
                .map(|s| Summed {
                    decimals: 0,
                    ..s.clone()
                })
                .collect(),
            xdecimals: 0,
            sums: RepCellSums::Float { w, wx },
        })
    }
}

/// Cells at indexes `dst` of a merged cube receive cell `src` of a part.
fn cell_map(maps: &[Vec<usize>], shape: &[usize]) -> Vec<usize> {
    let n: usize = maps.iter().map(Vec::len).product();
    let mut out = Vec::with_capacity(n);
    let mut idx = vec![0usize; maps.len()];
    for _ in 0..n {
        let mut dst = 0;
        for (d, &i) in idx.iter().enumerate() {
            dst = dst * shape[d] + maps[d][i];
        }
        out.push(dst);
        for d in (0..idx.len()).rev() {
            idx[d] += 1;
            if idx[d] < maps[d].len() {
                break;
            }
            idx[d] = 0;
        }
    }
    out
}

/// Order of category values: numbers by value (integers and decimals
/// compared exactly), text by bytes, system-missing last.
fn cmp_value(a: &Value, b: &Value) -> Ordering {
    use Value::*;
    match (a, b) {
        (Null, Null) => Ordering::Equal,
        (Null, _) => Ordering::Greater,
        (_, Null) => Ordering::Less,
        (Str(x), Str(y)) => x.cmp(y),
        (Int(x), Int(y)) => x.cmp(y),
        (Num(x), Num(y)) => x.total_cmp(y),
        (Int(i), Num(x)) => cmp_int_num(*i, *x),
        (Num(x), Int(i)) => cmp_int_num(*i, *x).reverse(),
        // Kinds are checked before categories are merged.
        (Str(_), _) => Ordering::Greater,
        (_, Str(_)) => Ordering::Less,
    }
}

fn cmp_int_num(i: i64, x: f64) -> Ordering {
    let f = i as f64;
    match f.total_cmp(&x) {
        Ordering::Equal => (i as i128).cmp(&(x as i128)),
        o => o,
    }
}

/// One of two differing labels, the same whichever side each is on.
fn pick_label(a: &Option<String>, b: &Option<String>) -> Option<String> {
    match (a, b) {
        (Some(x), Some(y)) => Some(x.min(y).clone()),
        (x, y) => x.clone().or_else(|| y.clone()),
    }
}

fn pick_category(a: &Category, b: &Category) -> Category {
    Category {
        value: a.value.clone(),
        display: if (a.display.len(), &a.display) <= (b.display.len(), &b.display) {
            a.display.clone()
        } else {
            b.display.clone()
        },
        label: pick_label(&a.label, &b.label),
        missing: a.missing,
    }
}

fn pick_name(a: &str, b: &str) -> String {
    a.min(b).to_string()
}

impl Sums {
    fn cells(&self) -> usize {
        match self {
            Sums::None => 0,
            Sums::Int { w, .. } => w.len(),
            Sums::Exact { w, .. } => w.len(),
        }
    }

    fn to_exact(&self) -> Sums {
        let conv = |v: &[i128]| -> Vec<ExactSum> {
            v.iter()
                .map(|&i| {
                    let mut s = ExactSum::default();
                    s.add_i128(i);
                    s
                })
                .collect()
        };
        match self {
            Sums::Int { w, wx, wxx } => Sums::Exact {
                w: conv(w),
                wx: conv(wx),
                wxx: conv(wxx),
            },
            s => s.clone(),
        }
    }

    /// Multiplies the sums by `10^fw` (Σw), `10^(fw+fx)` (Σw·x) and
    /// `10^(fw+2fx)` (Σw·x²): a change of stored units. Integers that
    /// would overflow turn into exact sums.
    fn rescale(&mut self, fw: u32, fx: u32) {
        if fw == 0 && fx == 0 {
            return;
        }
        let pows = [fw, fw + fx, fw + 2 * fx];
        if let Sums::Int { w, wx, wxx } = self {
            let ok = [&mut *w, &mut *wx, &mut *wxx]
                .iter()
                .zip(pows)
                .all(|(v, k)| {
                    v.iter().all(|&i| {
                        10i128
                            .checked_pow(k)
                            .and_then(|p| i.checked_mul(p))
                            .is_some()
                    })
                });
            if ok {
                for (v, k) in [w, wx, wxx].into_iter().zip(pows) {
                    for i in v.iter_mut() {
                        *i *= 10i128.pow(k);
                    }
                }
                return;
            }
            *self = self.to_exact();
        }
        if let Sums::Exact { w, wx, wxx } = self {
            for (v, k) in [w, wx, wxx].into_iter().zip(pows) {
                for s in v.iter_mut() {
                    for _ in 0..k {
                        s.mul_small(10);
                    }
                }
            }
        }
    }

    fn empty_like(&self, n: usize, measured: bool) -> Sums {
        let m = if measured { n } else { 0 };
        match self {
            Sums::None => Sums::None,
            Sums::Int { .. } => Sums::Int {
                w: vec![0; n],
                wx: vec![0; m],
                wxx: vec![0; m],
            },
            Sums::Exact { .. } => Sums::Exact {
                w: vec![ExactSum::default(); n],
                wx: vec![ExactSum::default(); m],
                wxx: vec![ExactSum::default(); m],
            },
        }
    }

    /// Adds this part's cell `src` into `into`'s cell `dst`.
    fn add_cell(&self, src: usize, into: &mut Sums, dst: usize) {
        match (self, into) {
            (Sums::None, _) => {}
            (
                Sums::Int { w, wx, wxx },
                Sums::Int {
                    w: a,
                    wx: b,
                    wxx: c,
                },
            ) => {
                a[dst] = a[dst].wrapping_add(w[src]);
                if !wx.is_empty() {
                    b[dst] = b[dst].wrapping_add(wx[src]);
                    c[dst] = c[dst].wrapping_add(wxx[src]);
                }
            }
            (
                Sums::Exact { w, wx, wxx },
                Sums::Exact {
                    w: a,
                    wx: b,
                    wxx: c,
                },
            ) => {
                a[dst].add(&w[src]);
                if !wx.is_empty() {
                    b[dst].add(&wx[src]);
                    c[dst].add(&wxx[src]);
                }
            }
            _ => unreachable!("sums brought to one kind before adding"),
        }
    }

    /// Whether integer sums could overflow when `a` and `b` are added
    /// (then both are merged as exact sums).
    fn may_overflow(a: &Sums, b: &Sums) -> bool {
        let big = |s: &Sums| match s {
            Sums::Int { w, wx, wxx } => w
                .iter()
                .chain(wx)
                .chain(wxx)
                .map(|i| i.unsigned_abs())
                .max()
                .unwrap_or(0),
            _ => 0,
        };
        big(a).max(big(b)) >= 1u128 << 125
    }
}

/// Errors unless two partial results are of the same query: the same
/// grouping variables (of one kind each), weight and analysis variable.
fn check_same_query(a: &Partial, b: &Partial) -> Result<()> {
    let mismatch = |what: String| Error::Invalid(format!("cannot merge partial results: {what}"));
    if a.dims.len() != b.dims.len() {
        return Err(mismatch(format!(
            "one groups by {} variables, the other by {}",
            a.dims.len(),
            b.dims.len()
        )));
    }
    for (x, y) in a.dims.iter().zip(&b.dims) {
        if !x.name.eq_ignore_ascii_case(&y.name) {
            return Err(mismatch(format!(
                "one groups by {}, the other by {}",
                x.name, y.name
            )));
        }
        // A part with no categories here (no rows, or only empty
        // values, which import as numbers) merges with either kind.
        let empty = x.categories.is_empty() || y.categories.is_empty();
        if !empty && (x.kind == Kind::String) != (y.kind == Kind::String) {
            return Err(mismatch(format!(
                "{} is text in one part and numbers in the other",
                x.name
            )));
        }
    }
    let same = |x: &Option<Summed>, y: &Option<Summed>, role: &str| -> Result<()> {
        match (x, y) {
            (None, None) => Ok(()),
            (Some(x), Some(y)) if x.name.eq_ignore_ascii_case(&y.name) => Ok(()),
            _ => Err(mismatch(format!(
                "the {role} differs ({} and {})",
                x.as_ref().map_or("none", |s| &s.name),
                y.as_ref().map_or("none", |s| &s.name)
            ))),
        }
    };
    same(&a.weight, &b.weight, "weight")?;
    same(&a.measure, &b.measure, "analysis variable")
}

/// The categories of two parts' dimension united by value, and where
/// each part's go among them.
fn unite_dim(x: &PartialDim, y: &PartialDim) -> (PartialDim, Vec<usize>, Vec<usize>) {
    let (mut i, mut j) = (0, 0);
    let mut cats = Vec::new();
    let (mut ma, mut mb) = (Vec::new(), Vec::new());
    while i < x.categories.len() || j < y.categories.len() {
        let o = match (x.categories.get(i), y.categories.get(j)) {
            // A value missing in one part and valid in another
            // stays two categories: each part's codebook decides.
            (Some(p), Some(q)) => cmp_value(&p.value, &q.value).then(p.missing.cmp(&q.missing)),
            (Some(_), None) => Ordering::Less,
            _ => Ordering::Greater,
        };
        match o {
            Ordering::Less => {
                cats.push(x.categories[i].clone());
                ma.push(cats.len() - 1);
                i += 1;
            }
            Ordering::Greater => {
                cats.push(y.categories[j].clone());
                mb.push(cats.len() - 1);
                j += 1;
            }
            Ordering::Equal => {
                cats.push(pick_category(&x.categories[i], &y.categories[j]));
                ma.push(cats.len() - 1);
                mb.push(cats.len() - 1);
                i += 1;
                j += 1;
            }
        }
    }
    let d = PartialDim {
        name: pick_name(&x.name, &y.name),
        label: pick_label(&x.label, &y.label),
        kind: if x.kind == y.kind {
            x.kind
        } else {
            Kind::Float
        },
        categories: cats,
    };
    (d, ma, mb)
}

impl Partial {
    /// Merges two partial results of the same query (over different rows
    /// or datasets). Exact, associative and commutative: any grouping and
    /// order of merges gives the same bits. Categories are united by value;
    /// where the parts' codebooks differ, the label and display kept are
    /// chosen by a rule that does not depend on the order (a label over
    /// none, else the smaller). Errors when the parts are of different
    /// queries or a variable is text in one part and numbers in another.
    pub fn merge(self, o: Partial) -> Result<Partial> {
        let (mut a, mut b) = (self, o);
        check_same_query(&a, &b)?;
        // One set of stored units: the larger number of decimals.
        let dec = |s: &Option<Summed>| s.as_ref().map_or(0, |s| s.decimals);
        let (wd, xd) = (
            dec(&a.weight).max(dec(&b.weight)),
            dec(&a.measure).max(dec(&b.measure)),
        );
        for p in [&mut a, &mut b] {
            let (fw, fx) = (wd - dec(&p.weight), xd - dec(&p.measure));
            p.sums.rescale(fw, fx);
        }
        // One kind of sums.
        let exact = matches!(a.sums, Sums::Exact { .. })
            || matches!(b.sums, Sums::Exact { .. })
            || Sums::may_overflow(&a.sums, &b.sums);
        if exact {
            a.sums = a.sums.to_exact();
            b.sums = b.sums.to_exact();
        }
        // United categories, and where each part's go.
        let mut dims = Vec::with_capacity(a.dims.len());
        let mut maps_a = Vec::new();
        let mut maps_b = Vec::new();
        for (x, y) in a.dims.iter().zip(&b.dims) {
            let (d, ma, mb) = unite_dim(x, y);
            dims.push(d);
            maps_a.push(ma);
            maps_b.push(mb);
        }
        let shape: Vec<usize> = dims.iter().map(|d| d.categories.len()).collect();
        let n: usize = if dims.is_empty() {
            1
        } else {
            shape.iter().product()
        };
        let measured = a.measure.is_some();
        let mut counts = vec![0u64; n];
        let mut sums = a.sums.empty_like(n, measured);
        let cell_maps: Vec<Vec<usize>> = [&maps_a, &maps_b]
            .iter()
            .zip([&a, &b])
            .map(|(maps, p)| {
                if p.counts.is_empty() {
                    Vec::new()
                } else {
                    cell_map(maps, &shape)
                }
            })
            .collect();
        let mismatch =
            |what: String| Error::Invalid(format!("cannot merge partial results: {what}"));
        let replicates = match (&a.replicates, &b.replicates) {
            (None, None) => None,
            (Some(x), Some(y)) => Some(RepPartial::merge(x, y, [&cell_maps[0], &cell_maps[1]], n)?),
            _ => {
                return Err(mismatch(
                    "one has replicate weights, the other not".to_string(),
                ))
            }
        };
        for (p, map) in [(&a, &cell_maps[0]), (&b, &cell_maps[1])] {
            if p.counts.is_empty() {
                continue;
            }
            for (src, &dst) in map.iter().enumerate() {
                counts[dst] += p.counts[src];
                if p.sums.cells() > 0 {
                    p.sums.add_cell(src, &mut sums, dst);
                }
            }
        }
        let taylor = match (&a.taylor, &b.taylor) {
            (None, None) => None,
            (Some(x), Some(y)) => Some(TaylorPartial::merge(x, y, [&maps_a, &maps_b], &shape)?),
            _ => {
                return Err(mismatch(
                    "one has Taylor linearization sums, the other not".to_string(),
                ))
            }
        };
        let summed = |x: &Option<Summed>, y: &Option<Summed>, d: u32| {
            x.as_ref().zip(y.as_ref()).map(|(x, y)| Summed {
                name: pick_name(&x.name, &y.name),
                label: pick_label(&x.label, &y.label),
                decimals: d,
            })
        };
        Ok(Partial {
            weight: summed(&a.weight, &b.weight, wd),
            measure: summed(&a.measure, &b.measure, xd),
            dims,
            counts,
            sums,
            rows: a.rows + b.rows,
            replicates,
            taylor,
        })
    }

    /// The dimensions as the plans the Taylor finishing lays its margins
    /// out by (their categories; no mapping: nothing is scanned).
    fn dim_plans(&self) -> Vec<DimPlan> {
        self.dims
            .iter()
            .map(|d| DimPlan {
                var: Variable::new(&d.name, d.kind, PhysType::I64),
                categories: d.categories.clone(),
                keys: vec![None; d.categories.len()],
                map: crate::plan::DimMap::Hash,
                recode: None,
                recode_keys: None,
            })
            .collect()
    }

    /// The result: sums rounded once and scaled to displayed units.
    pub fn finish(&self) -> Cube {
        let n = self.counts.len();
        let wscale = 10f64.powi(self.weight.as_ref().map_or(0, |s| s.decimals as i32));
        let xscale = 10f64.powi(self.measure.as_ref().map_or(0, |s| s.decimals as i32));
        let (wdec, xdec) = (
            self.weight.as_ref().map_or(0, |s| s.decimals),
            self.measure.as_ref().map_or(0, |s| s.decimals),
        );
        // Integer sums finish as a whole query does (the same bits);
        // exact float sums are rounded once, in displayed units.
        let weighted = self.weight.as_ref().map(|_| {
            (0..n)
                .map(|c| match &self.sums {
                    Sums::None => self.counts[c] as f64 / wscale,
                    Sums::Int { w, .. } => w[c] as f64 / wscale,
                    Sums::Exact { w, .. } => div_pow10(&w[c], wdec),
                })
                .collect()
        });
        let moments = self.measure.as_ref().map(|_| {
            (0..n)
                .map(|c| match &self.sums {
                    Sums::Int { w, wx, wxx } => match i64::try_from(w[c]) {
                        Ok(wi) => ExactCell {
                            n: self.counts[c],
                            w: wi,
                            wx: wx[c],
                            wxx: wxx[c],
                        }
                        .moments()
                        .scaled(wscale, xscale),
                        Err(_) => {
                            exact_cell_moments(self.counts[c], &self.sums.to_exact(), c, wdec, xdec)
                        }
                    },
                    s => exact_cell_moments(self.counts[c], s, c, wdec, xdec),
                })
                .collect()
        });
        let dims = self
            .dims
            .iter()
            .map(|d| {
                let mut var = Variable::new(&d.name, d.kind, PhysType::I64);
                var.label = d.label.clone();
                Dim {
                    var,
                    categories: d.categories.clone(),
                }
            })
            .collect();
        let replicates = self
            .replicates
            .as_ref()
            .map(|r| r.cells(self.measure.is_some()));
        Cube {
            dims,
            counts: self.counts.clone(),
            weighted,
            moments,
            replicates,
            taylor: self
                .taylor
                .as_ref()
                .map(|t| t.finish(&self.dim_plans(), &self.counts)),
            distribution: None,
        }
    }
}

/// Moments of cell `c` from exact sums, in displayed units.
fn exact_cell_moments(n: u64, s: &Sums, c: usize, wdec: u32, xdec: u32) -> Moments {
    let Sums::Exact { w, wx, wxx } = s else {
        unreachable!("exact sums")
    };
    let (w, mean, m2) = exact_moments(&w[c], &wx[c], &wxx[c], wdec, xdec);
    Moments { n, w, mean, m2 }
}

/// The replicate sums of a scan, per replicate and kept cell (`None`
/// without replicate weights): exact integers in stored units, or floats in
/// displayed units.
pub(crate) fn rep_partial(
    acc: &Acc,
    plan: &Plan,
    layout: &Layout,
    counts: &[u64],
    measure: Option<&Column>,
) -> Option<RepPartial> {
    let rep_sums = &acc.reps.as_ref()?.sums;
    let reps = plan.replicates.len();
    let n = plan.cells + 1;
    // The cells some row was counted in, and where they go.
    let mut kept: Vec<(usize, usize)> = Vec::new();
    layout.each_kept(counts, |c, dst| kept.push((c, dst)));
    let (total, measured) = (layout.total, measure.is_some());
    let xr = if measured { reps } else { 0 };
    fn spread<T: Copy + Default, U>(
        src: &[T],
        reps: usize,
        n: usize,
        total: usize,
        kept: &[(usize, usize)],
        f: impl Fn(usize, T) -> U,
    ) -> Vec<Vec<U>>
    where
        U: Copy + Default,
    {
        (0..reps)
            .map(|r| {
                let mut v = vec![U::default(); total];
                for &(c, dst) in kept {
                    v[dst] = f(r, src[r * n + c]);
                }
                v
            })
            .collect()
    }
    let sums = match rep_sums {
        RepSums::Int { w, wx } => RepCellSums::Int {
            w: spread(w, reps, n, total, &kept, |_, v| v as i128),
            wx: spread(wx, xr, n, total, &kept, |_, v| v),
        },
        RepSums::Float { w, wx } => {
            let rs: Vec<f64> = plan.replicates.iter().map(|c| c.var().scale()).collect();
            let xs = 10f64.powi(sum_decimals(measure) as i32);
            RepCellSums::Float {
                w: spread(w, reps, n, total, &kept, |r, v| v / rs[r]),
                wx: spread(wx, xr, n, total, &kept, |r, v| v / (rs[r] * xs)),
            }
        }
    };
    Some(RepPartial {
        weights: plan
            .replicates
            .iter()
            .map(|c| Summed {
                name: c.var().name.clone(),
                label: c.var().label.clone(),
                decimals: sum_decimals(Some(c)),
            })
            .collect(),
        xdecimals: if plan.replicates_exact {
            sum_decimals(measure)
        } else {
            0
        },
        sums,
    })
}

/// Implied decimals of a weight's or analysis variable's stored units (0
/// for floats, and without the variable).
pub(crate) fn sum_decimals(c: Option<&Column>) -> u32 {
    c.filter(|c| c.var().kind == Kind::Int)
        .map_or(0, |c| c.var().decimals)
}

/// The partial result of a scan (see `Kernel::ExactFloats`).
pub(crate) fn from_acc(s: Scanned<'_, '_>, (rows, edges): (u64, &TaylorEdges)) -> Partial {
    let (plans, mut acc, plan) = (s.plans, s.acc, s.plan);
    let (weight, measure) = (s.weight, s.measure);
    let dense = acc.take_counts(plan.cells);
    let layout = Layout::new(&plans, &dense);
    let total = layout.total;
    let mut counts = vec![0u64; total];
    let measured = measure.is_some();
    let m = if measured { total } else { 0 };
    let exact = matches!(acc.sums, CellSums::Exact(_));
    let mut sums = if matches!(acc.sums, CellSums::ExactFloats(..)) {
        Sums::Exact {
            w: vec![ExactSum::default(); total],
            wx: vec![ExactSum::default(); m],
            wxx: vec![ExactSum::default(); m],
        }
    } else if exact || weight.is_some() {
        Sums::Int {
            w: vec![0; total],
            wx: vec![0; m],
            wxx: vec![0; m],
        }
    } else {
        Sums::None
    };
    layout.each_kept(&dense, |c, dst| {
        counts[dst] = dense[c];
        match (&mut sums, &acc.sums) {
            (Sums::None, _) => {}
            (Sums::Exact { w, wx, wxx }, CellSums::ExactFloats(_, s)) => {
                let s = &s.sup[c];
                w[dst] = s.w.clone();
                if measured {
                    wx[dst] = s.wx.clone();
                    wxx[dst] = s.wxx.clone();
                }
            }
            (Sums::Int { w, wx, wxx }, CellSums::Exact(e)) => {
                let e = e.cell(c);
                w[dst] = e.w as i128;
                wx[dst] = e.wx;
                wxx[dst] = e.wxx;
            }
            (Sums::Int { w, .. }, CellSums::Tally(t) | CellSums::Moments(t, _)) => {
                // Integer weights: integer lanes, and f64 lanes that
                // hold integers below 2^53 (`needs_exact_floats`).
                let l = t.cell_lanes(c);
                w[dst] = t.wsum[l.clone()].iter().map(|&f| f as i128).sum::<i128>()
                    + t.wsum_int[l].iter().map(|&i| i as i128).sum::<i128>();
            }
            _ => unreachable!("the sums are made for the kernel's"),
        }
    });
    let summed = |c: Option<&Column>| {
        c.map(|c| Summed {
            name: c.var().name.clone(),
            label: c.var().label.clone(),
            decimals: sum_decimals(Some(c)),
        })
    };
    let dims = layout
        .dims(plans)
        .into_iter()
        .map(|d| PartialDim {
            name: d.var.name,
            label: d.var.label,
            kind: d.var.kind,
            categories: d.categories,
        })
        .collect();
    let replicates = rep_partial(&acc, plan, &layout, &dense, measure);
    let taylor = match (acc.taylor.take(), &plan.taylor) {
        (Some(t), Some(tp)) => {
            let scales = (
                weight.map_or(1.0, |c| c.var().scale()),
                measure.map_or(1.0, |c| c.var().scale()),
            );
            Some(t.into_partial(
                tp,
                &layout,
                |c| dense[c] > 0,
                scales,
                |k| edges.all_open || edges.keys.contains(k),
                (&edges.source, &edges.values),
            ))
        }
        _ => None,
    };
    Partial {
        dims,
        weight: summed(weight),
        measure: summed(measure),
        counts,
        sums,
        rows,
        replicates,
        taylor,
    }
}

/// Which PSUs of a part may continue in another part (kept open in its
/// [`TaylorPartial`]), and the dataset whose design it is.
#[derive(Debug, Clone, Default)]
pub(crate) struct TaylorEdges {
    /// The PSUs of the range's first and last record.
    pub(crate) keys: Vec<(i64, i64)>,
    /// Every PSU (a range of a design whose PSUs are not contiguous).
    pub(crate) all_open: bool,
    /// The dataset.
    pub(crate) source: String,
    /// The design's strata as the data gives them (text, or numbers with
    /// their decimals), in the order of its keys.
    pub(crate) values: Vec<String>,
}
