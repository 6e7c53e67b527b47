//! The linearized variance of estimates under a Taylor design whose weight
//! was adjusted to population totals (R's calibrated `survey.design2`,
//! `svyrecvar`).
//!
//! An estimate's influence values `w*·u` (the new weight times the
//! estimate's linearized variable) are replaced by their residuals from
//! the adjustment: `w*·(u − r_g)`, with `r_g` a fitted value per group of
//! records sharing every adjustment variable's value:
//! - post-stratification and calibration (any distance): `r_g = x_g'B`,
//!   `B = (Σ w x x')⁻¹ Σ w x u`, `w` the weight before the adjustment, `x`
//!   the model's row (GREG residuals);
//! - raking: ten back-fitting sweeps over the margins in order, each
//!   subtracting a category's plain (unweighted) mean of the residual, as
//!   R's `svyrecvar` does for `rake()`.
//!
//! Every record gets its residual, in the estimate's domain or not, so the
//! PSU totals change everywhere. With `F_p` a PSU's total of `w*·r` and
//! `a_p` its total of `w*·u`, the variance `Σ_h c_h Σ_p a_p b_p − d_h A_h
//! B_h` becomes that of `a − F`: the engine's covariances plus a
//! correction `−Σ c F_A b − Σ c a F_B + Σ c F_A F_B` (and the strata's
//! `d_h` terms), made here from sums per group: the design's weight per
//! (PSU, group) and the domain's records' sums per (group, cell).

use super::model::{self, Groups, Model, OUT};
use super::{design_matrix, model_of, Method, WeightSpec};
use crate::{Error, Result};
use microtab_engine::{
    fold_rows, state_of, Category, Cube, Fold, FoldRows, FoldState, Query, ScanOptions, TaylorCells,
};
use microtab_store::{Calibration, Dataset, Taylor};
use rayon::prelude::*;
use std::collections::HashMap;
use std::sync::Arc;

/// Back-fitting sweeps of R's raking residuals.
const SWEEPS: usize = 10;

/// The design's part: who is where, and the adjustment's model.
struct Adjustment {
    /// Each record's group (`OUT`: outside the adjustment).
    group: Vec<u32>,
    groups: usize,
    /// Each record's weight, new and before the adjustment.
    new: Vec<f64>,
    old: Vec<f64>,
    /// Each record's PSU, each PSU's stratum.
    psu: Vec<u32>,
    stratum: Vec<u32>,
    /// Per PSU, its groups' totals of the new weight (`at[p]..at[p + 1]`
    /// of `entries`).
    at: Vec<usize>,
    entries: Vec<(u32, f64)>,
    /// `(c_h, d_h)` per stratum.
    coef: Vec<[f64; 2]>,
    fit: Fit,
}

/// How fitted values are made from a quantity's sums per group.
enum Fit {
    /// `r = X (Σ w x x')⁻¹ X' s`: the model's rows (`p` each, per group)
    /// and the cross products over the groups' old weights.
    Greg { x: Vec<f64>, p: usize, m: Vec<f64> },
    /// Back-fitting: per margin, each group's category (`u32::MAX`: none)
    /// and the categories' records (of non-zero weight).
    Rake {
        cats: Vec<Vec<u32>>,
        counts: Vec<Vec<f64>>,
        n: Vec<f64>,
    },
}

/// The weight spec that made the design's weight.
fn spec_of(c: &Calibration) -> Result<WeightSpec> {
    let method = match c.method.as_str() {
        "poststrata" => Method::PostStratify(c.terms.clone()),
        "rake" => Method::Rake(c.terms.clone()),
        // The distance and bounds change the weights, not the residuals.
        "calibrate" => Method::Calibrate {
            model: c.terms.clone(),
            distance: super::Distance::Linear,
            bounds: None,
        },
        m => {
            return Err(Error::Design(format!(
                "the design's adjustment '{m}' is not known to this version"
            )))
        }
    };
    let totals = c
        .totals
        .iter()
        .enumerate()
        .map(|(i, (variable, value, total))| model::TotalRow {
            variable: variable.clone(),
            value: value.clone(),
            total: *total,
            line: i as u64 + 2,
        })
        .collect();
    let mut spec = WeightSpec::new("", method, totals);
    spec.from = Some(c.source.clone());
    spec.allow_missing_cells = c.allow_missing_cells;
    Ok(spec)
}

fn weight_error(e: super::WeightError) -> Error {
    Error::Design(format!("the design's adjustment: {e}"))
}

impl Adjustment {
    fn new(ds: &Dataset, t: &Taylor, c: &Calibration, weight: &str) -> Result<Adjustment> {
        let spec = spec_of(c)?;
        let mut model: Model = model_of(ds, &spec).map_err(weight_error)?;
        model::numeric_values(ds, &mut model).map_err(weight_error)?;
        let groups: Groups = model::group_records(ds, &model).map_err(weight_error)?;
        let ng = groups.keys.len();
        let var = |n: &str| -> Result<microtab_store::Variable> { Ok(ds.variable(n)?.clone()) };
        let new = crate::taylor::values(ds, &var(weight)?, "weight")?;
        let old = crate::taylor::values(ds, &var(&c.source)?, "weight")?;
        let rows = new.len();
        // Strata and PSUs.
        let strata: Vec<u32> = match &t.strata {
            Some(s) => crate::taylor::keys(ds, &var(s)?, "strata")?
                .into_iter()
                .map(|k| t.strata_keys.binary_search(&k).unwrap_or(0) as u32)
                .collect(),
            None => vec![0; rows],
        };
        let (psu, stratum) = match &t.cluster {
            Some(cl) => {
                let keys = crate::taylor::keys(ds, &var(cl)?, "cluster")?;
                let mut stratum = Vec::new();
                let psu: Vec<u32> = if t.contiguous {
                    // Each PSU one run of rows: numbered as met.
                    let mut last = None;
                    keys.iter()
                        .zip(&strata)
                        .map(|(&k, &h)| {
                            if last != Some((h, k)) {
                                last = Some((h, k));
                                stratum.push(h);
                            }
                            stratum.len() as u32 - 1
                        })
                        .collect()
                } else {
                    let mut ids: HashMap<(u32, i64), u32> = HashMap::new();
                    keys.iter()
                        .zip(&strata)
                        .map(|(&k, &h)| {
                            *ids.entry((h, k)).or_insert_with(|| {
                                stratum.push(h);
                                stratum.len() as u32 - 1
                            })
                        })
                        .collect()
                };
                (psu, stratum)
            }
            None => ((0..rows as u32).collect(), strata),
        };
        // Each PSU's groups' totals of the new weight.
        let mut order: Vec<u32> = (0..rows as u32)
            .filter(|&i| groups.of_record[i as usize] != OUT && new[i as usize] != 0.0)
            .collect();
        // PSUs in order (a stable sort: linear on runs already sorted).
        order.sort_by_key(|&i| psu[i as usize]);
        let npsu = stratum.len();
        let mut at = vec![0usize; npsu + 1];
        let mut entries: Vec<(u32, f64)> = Vec::new();
        let mut k = 0;
        while k < order.len() {
            let p = psu[order[k] as usize];
            let start = entries.len();
            while k < order.len() && psu[order[k] as usize] == p {
                let i = order[k] as usize;
                let g = groups.of_record[i];
                match entries[start..].iter_mut().find(|e| e.0 == g) {
                    Some(e) => e.1 += new[i],
                    None => entries.push((g, new[i])),
                }
                k += 1;
            }
            at[p as usize + 1] = entries.len() - start;
        }
        for p in 0..npsu {
            at[p + 1] += at[p];
        }
        let fit = fit_of(&spec, &model, &groups, (&new, &old))?;
        let (coef, _) = crate::taylor::coefficients(t);
        Ok(Adjustment {
            group: groups.of_record,
            groups: ng,
            new,
            old,
            psu,
            stratum,
            at,
            entries,
            coef,
            fit,
        })
    }

    fn psu_entries(&self, p: usize) -> &[(u32, f64)] {
        &self.entries[self.at[p]..self.at[p + 1]]
    }
}

/// The adjustment's model over the groups.
fn fit_of(
    spec: &WeightSpec,
    model: &Model,
    groups: &Groups,
    (new, old): (&[f64], &[f64]),
) -> Result<Fit> {
    let ng = groups.keys.len();
    if let Method::Rake(_) = spec.method {
        let mut n = vec![0.0; ng];
        for (&g, &w) in groups.of_record.iter().zip(new) {
            if g != OUT && w != 0.0 {
                n[g as usize] += 1.0;
            }
        }
        let mut cats = Vec::new();
        let mut counts = Vec::new();
        for t in &model.terms {
            let cat: Vec<u32> = groups
                .keys
                .iter()
                .map(|k| model::cell_of(t, k).map_or(u32::MAX, |c| c as u32))
                .collect();
            let mut cn = vec![0.0; t.cells.len()];
            for (g, &c) in cat.iter().enumerate() {
                if c != u32::MAX {
                    cn[c as usize] += n[g];
                }
            }
            cats.push(cat);
            counts.push(cn);
        }
        return Ok(Fit::Rake { cats, counts, n });
    }
    let mut wsum = vec![0.0; ng];
    for (&g, &w) in groups.of_record.iter().zip(old) {
        if g != OUT {
            wsum[g as usize] += w;
        }
    }
    let mut empty = Vec::new();
    let mx = design_matrix(model, groups, &wsum, spec.allow_missing_cells, &mut empty)
        .map_err(weight_error)?;
    let p = mx.kept.len();
    let x = mx.x;
    let mut m = vec![0.0; p * p];
    for (g, &w) in wsum.iter().enumerate() {
        let row = &x[g * p..(g + 1) * p];
        for a in 0..p {
            if row[a] == 0.0 {
                continue;
            }
            for b in 0..p {
                m[a * p + b] += w * row[a] * row[b];
            }
        }
    }
    Ok(Fit::Greg { x, p, m })
}

/// Sums of two numbers per (row, planned cell): dense while small, else
/// hashed.
struct Table {
    rows: usize,
    width: usize,
    /// The most entries a dense table may have.
    limit: usize,
    dense: Vec<[f64; 2]>,
    map: HashMap<(u32, u32), [f64; 2]>,
}

/// Most entries of a dense [`Table`].
const MAX_DENSE: usize = 1 << 21;

impl Table {
    /// A table of `rows` rows, dense when its entries are at most `limit`.
    fn new(rows: usize, limit: usize) -> Table {
        Table {
            rows,
            width: 0,
            limit: limit.min(MAX_DENSE),
            dense: Vec::new(),
            map: HashMap::new(),
        }
    }

    /// Told the planned cells: dense when few enough.
    fn planned(&mut self, cells: usize) {
        self.width = cells;
        if self.rows.saturating_mul(cells) <= self.limit {
            self.dense = vec![[0.0; 2]; self.rows * cells];
        }
    }

    #[inline]
    fn add(&mut self, row: u32, cell: u32, a: f64, b: f64) {
        let e = if self.dense.is_empty() {
            self.map.entry((row, cell)).or_default()
        } else {
            &mut self.dense[row as usize * self.width + cell as usize]
        };
        e[0] += a;
        e[1] += b;
    }

    fn merge(&mut self, o: Table) {
        if !self.dense.is_empty() && self.dense.len() == o.dense.len() {
            for (a, b) in self.dense.iter_mut().zip(&o.dense) {
                a[0] += b[0];
                a[1] += b[1];
            }
            return;
        }
        for ((r, c), v) in o.entries() {
            self.add(r, c, v[0], v[1]);
        }
    }

    /// The non-zero entries: (row, cell), sums.
    fn entries(&self) -> Vec<((u32, u32), [f64; 2])> {
        if self.dense.is_empty() {
            return self.map.iter().map(|(k, v)| (*k, *v)).collect();
        }
        let w = self.width.max(1);
        self.dense
            .iter()
            .enumerate()
            .filter(|(_, v)| v[0] != 0.0 || v[1] != 0.0)
            .map(|(i, v)| (((i / w) as u32, (i % w) as u32), *v))
            .collect()
    }
}

/// A fold's sums per quantity: per (group, planned cell) the sums the fit
/// takes (`s`: old weights, or plain for raking) and `Σ_p c_h T_pg a_p`
/// (`q`), and per (stratum, planned cell) the strata's totals `A_h` (`a`).
struct Tables {
    s: Table,
    q: Table,
    a: Table,
}

impl Tables {
    fn new(adj: &Adjustment) -> Tables {
        // Dense while not much larger than the records could fill (a
        // record touches a few entries).
        let limit = adj.new.len().saturating_mul(4).max(1 << 16);
        Tables {
            s: Table::new(adj.groups, limit),
            q: Table::new(adj.groups, limit),
            a: Table::new(adj.coef.len(), limit),
        }
    }

    fn planned(&mut self, cells: usize) {
        self.s.planned(cells);
        self.q.planned(cells);
        self.a.planned(cells);
    }

    fn merge(&mut self, o: Tables) {
        self.s.merge(o.s);
        self.q.merge(o.q);
        self.a.merge(o.a);
    }

    /// Adds record `row` of the domain: `put(table, row, f)` adds `f`
    /// times the record's values (per unit of weight) to a table's row.
    #[inline]
    fn record(&mut self, adj: &Adjustment, row: usize, put: impl Fn(&mut Table, u32, f64)) {
        let w = adj.new[row];
        let g = adj.group[row];
        if g != OUT {
            match adj.fit {
                Fit::Rake { .. } if w != 0.0 => put(&mut self.s, g, 1.0),
                Fit::Rake { .. } => {}
                Fit::Greg { .. } => put(&mut self.s, g, adj.old[row]),
            }
        }
        if w == 0.0 {
            return;
        }
        let p = adj.psu[row] as usize;
        let h = adj.stratum[p];
        let c = adj.coef[h as usize][0];
        for &(g2, tw) in adj.psu_entries(p) {
            put(&mut self.q, g2, c * tw * w);
        }
        put(&mut self.a, h, w);
    }
}

/// A worker's sums over the domain's records, per quantity `k` of a
/// cell (`2·cell`: its weighted count, `2·cell + 1`: its total of the
/// analysis variable less the shift).
struct Sums {
    adj: Arc<Adjustment>,
    shift: f64,
    measure: bool,
    /// A ratio's denominator ([`microtab_engine::TaylorQuery::times`]) is
    /// the fold's last value: each record's count is `v` (records without
    /// it are not counted).
    times: bool,
    t: Tables,
}

impl FoldState for Sums {
    fn add(&mut self, rows: &FoldRows<'_>) {
        let adj = &*self.adj;
        for (i, (&row, &cell)) in rows.rows.iter().zip(rows.cells).enumerate() {
            let y = if self.measure {
                rows.values[0][i] - self.shift
            } else {
                0.0
            };
            let v = if self.times {
                let v = rows.values[rows.values.len() - 1][i];
                if v.is_nan() {
                    continue;
                }
                v
            } else {
                1.0
            };
            // The record's values: `v` (its count's) and `y` (its
            // total's).
            self.t
                .record(adj, row, |t, r, f| t.add(r, cell, f * v, f * y));
        }
    }

    fn merge(&mut self, other: Box<dyn FoldState>) {
        let o: Sums = state_of(other);
        self.t.merge(o.t);
    }

    fn planned(&mut self, categories: &[Vec<Category>]) {
        let cells = categories.iter().map(|c| c.len().max(1)).product();
        self.t.planned(cells);
    }

    fn into_any(self: Box<Self>) -> Box<dyn std::any::Any> {
        self
    }
}

/// Whether the engine query has Taylor sums to take the adjustment's
/// residuals.
pub(crate) fn supported(q: &Query) -> bool {
    q.taylor.is_some()
}

/// Adds the adjustment's residuals to the Taylor covariances of `cube`
/// (the result of `q` under design `t`, whose weight `weight` was made by
/// `c`).
pub(crate) fn correct(
    ds: &Dataset,
    q: &Query,
    t: &Taylor,
    c: &Calibration,
    cube: &mut Cube,
    (opts, only_scores): (&ScanOptions, bool),
) -> Result<()> {
    let Some(tc) = cube.taylor.as_ref() else {
        return Ok(());
    };
    if tc.cell.is_empty() {
        return Ok(());
    }
    let weight = q.weight.clone().expect("a Taylor design's weight");
    let adj = Arc::new(Adjustment::new(ds, t, c, &weight)?);
    let shift = tc.shift;
    let measure = q.measure.is_some();
    let times = q.taylor.as_ref().and_then(|t| t.times.clone());
    let has_times = times.is_some();
    let fq = Query {
        taylor: None,
        replicates: Vec::new(),
        distribution: false,
        fold: Some(Fold {
            values: q.measure.iter().cloned().chain(times).collect(),
            make: {
                let adj = adj.clone();
                Arc::new(move || {
                    Box::new(Sums {
                        adj: adj.clone(),
                        shift,
                        measure,
                        times: has_times,
                        t: Tables::new(&adj),
                    }) as Box<dyn FoldState>
                })
            },
        }),
        ..q.clone()
    };
    let folded = fold_rows(ds, &fq, opts)?;
    let Some(state) = folded.state else {
        return Ok(());
    };
    let sums: Sums = state_of(state);
    let map = CellMap::new(&folded.categories, cube);
    let total = cube.taylor.as_ref().map_or(0, |t| t.cell.len());
    let shape = cube_shape(cube);
    let cats: Vec<Vec<&Category>> = (0..total)
        .map(|dst| {
            let mut r = dst;
            let mut idx = vec![0; shape.len()];
            for d in (0..shape.len()).rev() {
                idx[d] = r % shape[d];
                r /= shape[d];
            }
            cube.dims
                .iter()
                .zip(&idx)
                .filter_map(|(dim, &i)| dim.categories.get(i))
                .collect()
        })
        .collect();
    let mut tc = cube.taylor.take().expect("Taylor sums");
    match q.taylor.as_ref().and_then(|t| t.scores.as_ref()) {
        // A regression reads only its scores: the cells' sums are folded
        // into the scores' first, so each score is fitted once, not each
        // cell's count and total.
        Some(spec) if only_scores => {
            let len = spec.len;
            let width = len.div_ceil(2);
            let mut st = Tables::new(&adj);
            st.planned(width);
            let coef: Vec<_> = cats.iter().map(|c| (spec.of)(c)).collect();
            let mut e = vec![0.0; len];
            for (src, dst) in [
                (&sums.t.s, &mut st.s),
                (&sums.t.q, &mut st.q),
                (&sums.t.a, &mut st.a),
            ] {
                for ((row, cell), v) in src.entries() {
                    let Some(Some((a, b))) = coef.get(map.get(cell)) else {
                        continue;
                    };
                    for (k, x) in e.iter_mut().enumerate() {
                        *x = (a[k] + b[k] * shift) * v[0] + b[k] * v[1];
                    }
                    add_vec(dst, row, &e, 1.0);
                }
            }
            let parts = Parts::new(&adj, &st, &|c| c as usize, width)?;
            let base: Vec<[Vec<f64>; 5]> = (0..len).map(|k| parts.combine(&[(k, 1.0)])).collect();
            if let Some(sc) = tc.scores.as_mut() {
                for i in 0..len {
                    for j in i..len {
                        let v = Parts::pair(&base[i], &base[j], &parts.d);
                        sc[i * len + j] += v;
                        if i != j {
                            sc[j * len + i] += v;
                        }
                    }
                }
            }
        }
        _ => {
            let parts = Parts::new(&adj, &sums.t, &|c| map.get(c), total)?;
            apply(&mut tc, &parts, q, &shape, &cats);
        }
    }
    if let Some(f) = whole_design_scale(t) {
        tc.cell_scale.iter_mut().for_each(|x| *x = f);
        for m in tc.margins.iter_mut() {
            m.scale.iter_mut().for_each(|x| *x = f);
        }
        tc.all_scale = f;
    }
    cube.taylor = Some(tc);
    Ok(())
}

/// Under `--lonely-psu average`, the scale of every domain's variance:
/// every record carries a residual, in a domain or not, so each domain's
/// variance has every stratum's terms and the lonely strata's are made up
/// over the whole design (R's `average`).
fn whole_design_scale(t: &Taylor) -> Option<f64> {
    if t.lonely_psu != microtab_store::LonelyPsu::Average {
        return None;
    }
    let h = t.psus.len() as f64;
    let ok = t.psus.iter().filter(|&&n| n > 1).count() as f64;
    Some(if ok > 0.0 { h / ok } else { f64::NAN })
}

/// A record's linearized value per unit of its weight, from the fold's
/// values at position `i` of a stretch (its cell `rows.cells[i]`): fills
/// `e` (the estimate's `m` totals) and says whether the record is in the
/// estimate.
pub(crate) type PerUnit = Arc<dyn Fn(&FoldRows<'_>, usize, &mut [f64]) -> bool + Send + Sync>;

/// The adjustment's part of the design covariance of `m` totals `Σ w e`
/// whose values `e` a fold gives record by record (correlations,
/// regressions fitted record by record).
pub(crate) struct RecordCorrection {
    parts: Parts,
    m: usize,
    /// Under `--lonely-psu average`, every domain's scale.
    pub scale: Option<f64>,
}

impl RecordCorrection {
    /// The correction to the covariance of two combinations of the
    /// totals (`(index, coefficient)` each), before any lonely-PSU scale.
    pub(crate) fn pair(&self, a: &[(usize, f64)], b: &[(usize, f64)]) -> f64 {
        Parts::pair(
            &self.parts.combine(a),
            &self.parts.combine(b),
            &self.parts.d,
        )
    }

    /// The correction to the totals' covariance matrix (`m × m`).
    pub(crate) fn matrix(&self) -> Vec<f64> {
        let m = self.m;
        let base: Vec<[Vec<f64>; 5]> = (0..m).map(|k| self.parts.combine(&[(k, 1.0)])).collect();
        let mut out = vec![0.0; m * m];
        for i in 0..m {
            for j in i..m {
                let v = Parts::pair(&base[i], &base[j], &self.parts.d);
                out[i * m + j] = v;
                out[j * m + i] = v;
            }
        }
        out
    }
}

/// A worker's sums of the values `e` of the records a [`PerUnit`] keeps:
/// [`Sums`]' tables, the totals `k` at (row, `k / 2`), slot `k % 2`.
struct RecordSums {
    adj: Arc<Adjustment>,
    e: PerUnit,
    buf: Vec<f64>,
    t: Tables,
}

impl RecordSums {
    fn new(adj: &Arc<Adjustment>, e: &PerUnit, m: usize) -> RecordSums {
        let mut t = Tables::new(adj);
        t.planned(m.div_ceil(2));
        RecordSums {
            adj: adj.clone(),
            e: e.clone(),
            buf: vec![0.0; m],
            t,
        }
    }
}

/// Adds `f·e` to a table's row: the totals `k` at (row, `k / 2`), slot
/// `k % 2`.
fn add_vec(t: &mut Table, row: u32, e: &[f64], f: f64) {
    for (j, pair) in e.chunks(2).enumerate() {
        t.add(
            row,
            j as u32,
            f * pair[0],
            f * pair.get(1).copied().unwrap_or(0.0),
        );
    }
}

impl FoldState for RecordSums {
    fn add(&mut self, rows: &FoldRows<'_>) {
        let adj = &*self.adj;
        let e = &mut self.buf;
        for (i, &row) in rows.rows.iter().enumerate() {
            if !(self.e)(rows, i, e) {
                continue;
            }
            let e = &*e;
            self.t.record(adj, row, |t, r, f| add_vec(t, r, e, f));
        }
    }

    fn merge(&mut self, other: Box<dyn FoldState>) {
        let o: RecordSums = state_of(other);
        self.t.merge(o.t);
    }

    fn into_any(self: Box<Self>) -> Box<dyn std::any::Any> {
        self
    }
}

/// The adjustment's part of the design covariance of `m` totals `Σ w e`
/// over the records of `q` (its filter, groups, weight and range; the
/// fold reads `values`), `e` given by `per_unit`, under design `t` whose
/// weight was made by `c`.
pub(crate) fn record_correction(
    ds: &Dataset,
    (t, c): (&Taylor, &Calibration),
    q: &Query,
    (values, m, per_unit): (Vec<String>, usize, PerUnit),
    opts: &ScanOptions,
) -> Result<RecordCorrection> {
    let weight = q.weight.clone().expect("a Taylor design's weight");
    let adj = Arc::new(Adjustment::new(ds, t, c, &weight)?);
    let fq = Query {
        taylor: None,
        replicates: Vec::new(),
        measure: None,
        distribution: false,
        fold: Some(Fold {
            values,
            make: {
                let (adj, e) = (adj.clone(), per_unit.clone());
                Arc::new(move || Box::new(RecordSums::new(&adj, &e, m)) as Box<dyn FoldState>)
            },
        }),
        ..q.clone()
    };
    let folded = fold_rows(ds, &fq, opts)?;
    let total = m.div_ceil(2);
    let sums = match folded.state {
        Some(s) => state_of(s),
        None => RecordSums::new(&adj, &per_unit, m),
    };
    let parts = Parts::new(&adj, &sums.t, &|c| c as usize, total)?;
    Ok(RecordCorrection {
        parts,
        m,
        scale: whole_design_scale(t),
    })
}

fn cube_shape(cube: &Cube) -> Vec<usize> {
    cube.dims
        .iter()
        .map(|d| d.categories.len().max(1))
        .collect()
}

/// Each planned cell's compacted cell (`usize::MAX`: none), found when
/// asked (the planned cells may be many more than the cube's).
struct CellMap {
    /// Per dimension, each planned category's compacted index.
    per_dim: Vec<Vec<usize>>,
    planned: Vec<usize>,
    compacted: Vec<usize>,
}

impl CellMap {
    fn new(planned: &[Vec<Category>], cube: &Cube) -> CellMap {
        let per_dim = planned
            .iter()
            .zip(&cube.dims)
            .map(|(cats, dim)| {
                // The cube's categories are the planned ones that occur, in
                // the same order: one walk (a search where not).
                let mut at = 0;
                cats.iter()
                    .map(|c| {
                        let d = &dim.categories;
                        if at < d.len() && d[at] == *c {
                            at += 1;
                            return at - 1;
                        }
                        d.iter().position(|x| x == c).unwrap_or(usize::MAX)
                    })
                    .collect()
            })
            .collect();
        CellMap {
            per_dim,
            planned: planned.iter().map(|c| c.len().max(1)).collect(),
            compacted: cube_shape(cube),
        }
    }

    /// Planned cell `cell`'s compacted cell.
    fn get(&self, cell: u32) -> usize {
        let mut r = cell as usize;
        let mut dst = 0;
        let mut mult = 1;
        for d in (0..self.planned.len()).rev() {
            let i = r % self.planned[d];
            r /= self.planned[d];
            let j = if self.per_dim[d].is_empty() {
                0
            } else {
                self.per_dim[d][i]
            };
            if j == usize::MAX {
                return usize::MAX;
            }
            dst += j * mult;
            mult *= self.compacted[d];
        }
        dst
    }
}

/// Per base quantity (`2·cell`: the cell's weighted count, `2·cell + 1`:
/// its shifted total), the vectors its covariances' corrections are made
/// of: fitted values `r` and `Q` per group, `H r` (`H = Σ_p c_h t_p t_p'`,
/// `t_p` the PSU's weight per group), and per stratum the fitted and the
/// domain's totals.
struct Parts {
    groups: usize,
    strata: usize,
    r: Vec<Vec<f64>>,
    q: Vec<Vec<f64>>,
    hr: Vec<Vec<f64>>,
    rh: Vec<Vec<f64>>,
    ah: Vec<Vec<f64>>,
    /// `d_h` per stratum.
    d: Vec<f64>,
}

/// Most `quantities × groups` numbers the correction keeps.
const MAX_PARTS: usize = 1 << 26;

impl Parts {
    fn new(
        adj: &Adjustment,
        t: &Tables,
        map: &dyn Fn(u32) -> usize,
        total: usize,
    ) -> Result<Parts> {
        let nq = 2 * total;
        let ng = adj.groups;
        let strata = adj.coef.len();
        if nq.saturating_mul(ng + strata) > MAX_PARTS {
            return Err(Error::Design(format!(
                "the linearized variance of an adjusted weight over {total} cells and {ng} adjustment groups is too large to compute: fewer cells, or replicate weights"
            )));
        }
        let per = |m: &Table, rows: usize| -> Vec<Vec<f64>> {
            let mut out = vec![vec![0.0; rows]; nq];
            for ((g, cell), v) in m.entries() {
                let dst = map(cell);
                if dst != usize::MAX {
                    out[2 * dst][g as usize] += v[0];
                    out[2 * dst + 1][g as usize] += v[1];
                }
            }
            out
        };
        let (s, q, ah) = (per(&t.s, ng), per(&t.q, ng), per(&t.a, strata));
        let r: Vec<Vec<f64>> = s.par_iter().map(|sk| fitted(adj, sk)).collect();
        // Per quantity (on every core): `H r` and the strata's fitted
        // totals, from each PSU's fitted total F_p.
        let (hr, rh): (Vec<Vec<f64>>, Vec<Vec<f64>>) = r
            .par_iter()
            .map(|rk| {
                if rk.is_empty() {
                    return (Vec::new(), Vec::new());
                }
                let mut hr = vec![0.0; ng];
                let mut rh = vec![0.0; strata];
                for p in 0..adj.stratum.len() {
                    let e = adj.psu_entries(p);
                    if e.is_empty() {
                        continue;
                    }
                    let h = adj.stratum[p] as usize;
                    let c = adj.coef[h][0];
                    let f: f64 = e.iter().map(|&(g, tw)| tw * rk[g as usize]).sum();
                    rh[h] += f;
                    if c != 0.0 && f != 0.0 {
                        for &(g, tw) in e {
                            hr[g as usize] += c * tw * f;
                        }
                    }
                }
                (hr, rh)
            })
            .unzip();
        Ok(Parts {
            groups: ng,
            strata,
            r,
            q,
            hr,
            rh,
            ah,
            d: adj.coef.iter().map(|c| c[1]).collect(),
        })
    }

    /// A linear combination of the base quantities as its vectors.
    fn combine(&self, terms: &[(usize, f64)]) -> [Vec<f64>; 5] {
        let mut out = [
            vec![0.0; self.groups],
            vec![0.0; self.groups],
            vec![0.0; self.groups],
            vec![0.0; self.strata],
            vec![0.0; self.strata],
        ];
        for &(k, a) in terms {
            // A quantity without fitted values (none of its records in the
            // adjustment: records outside the totals' categories) keeps its
            // `Q` and strata totals, which the others' corrections meet.
            if a == 0.0 {
                continue;
            }
            let src = [
                &self.r[k],
                &self.q[k],
                &self.hr[k],
                &self.rh[k],
                &self.ah[k],
            ];
            for (o, v) in out.iter_mut().zip(src) {
                // Empty: all 0.
                for (x, y) in o.iter_mut().zip(v) {
                    *x += a * y;
                }
            }
        }
        out
    }

    /// The correction to the covariance of two combinations' totals:
    /// `−(r_A·Q_B + Q_A·r_B) + r_A·H r_B + Σ_h d_h (R_A A_B + A_A R_B −
    /// R_A R_B)`.
    fn pair(a: &[Vec<f64>; 5], b: &[Vec<f64>; 5], d: &[f64]) -> f64 {
        let dot = |x: &[f64], y: &[f64]| -> f64 { x.iter().zip(y).map(|(p, q)| p * q).sum() };
        let mut v = -(dot(&a[0], &b[1]) + dot(&a[1], &b[0])) + dot(&a[0], &b[2]);
        for h in 0..d.len() {
            if d[h] != 0.0 {
                v += d[h] * (a[3][h] * b[4][h] + a[4][h] * b[3][h] - a[3][h] * b[3][h]);
            }
        }
        v
    }
}

/// The fitted values per group of one quantity's sums `s` per group.
fn fitted(adj: &Adjustment, s: &[f64]) -> Vec<f64> {
    if s.iter().all(|&v| v == 0.0) {
        return Vec::new();
    }
    let ng = adj.groups;
    let mut r = vec![0.0; ng];
    match &adj.fit {
        Fit::Greg { x, p, m } => {
            let p = *p;
            let mut xs = vec![0.0; p];
            for (g, &v) in s.iter().enumerate() {
                if v != 0.0 {
                    for (o, &xv) in xs.iter_mut().zip(&x[g * p..(g + 1) * p]) {
                        *o += xv * v;
                    }
                }
            }
            let b = super::solve::solve_sym(m, &xs, p);
            for (g, rg) in r.iter_mut().enumerate() {
                *rg = x[g * p..(g + 1) * p]
                    .iter()
                    .zip(&b)
                    .map(|(a, b)| a * b)
                    .sum();
            }
        }
        Fit::Rake { cats, counts, n } => {
            for _ in 0..SWEEPS {
                for (cat, cn) in cats.iter().zip(counts) {
                    let mut sum = vec![0.0; cn.len()];
                    for g in 0..ng {
                        let c = cat[g];
                        if c != u32::MAX {
                            sum[c as usize] += s[g] - n[g] * r[g];
                        }
                    }
                    for g in 0..ng {
                        let c = cat[g];
                        if c != u32::MAX && cn[c as usize] > 0.0 {
                            r[g] += sum[c as usize] / cn[c as usize];
                        }
                    }
                }
            }
        }
    }
    r
}

/// Adds the corrections `corr` to `[V(W), C(W, Y), V(Y)]`. A variance
/// the adjustment cancels (a post-stratified margin's count, whose
/// variance is 0) is left with the rounding of the terms it cancels
/// (about 1e-15 of them): below 1e-13 of them it is 0, and the covariance
/// is kept within what the variances allow.
fn settle(v: &mut [f64; 3], corr: [f64; 3]) {
    for i in [0, 2] {
        let scale = v[i].abs().max(corr[i].abs());
        v[i] += corr[i];
        if v[i] < 1e-13 * scale {
            v[i] = 0.0;
        }
    }
    v[1] = within(v[1] + corr[1], v[0] * v[2]);
}

/// A covariance kept within `±√(product of the variances)` (NaN
/// variances, of cells not computed, leave it as it is).
fn within(c: f64, product: f64) -> f64 {
    if product.is_nan() || c.is_nan() {
        return c;
    }
    let b = product.max(0.0).sqrt();
    c.clamp(-b, b)
}

/// A compacted cell's index over the dimensions `keep` selects, and their
/// cells.
fn flat(dst: usize, keep: &dyn Fn(usize) -> bool, shape: &[usize]) -> (usize, usize) {
    let (mut r, mut g, mut mult, mut size) = (dst, 0, 1, 1);
    for d in (0..shape.len()).rev() {
        let i = r % shape[d];
        r /= shape[d];
        if keep(d) {
            g += i * mult;
            mult *= shape[d];
        }
    }
    for (d, &s) in shape.iter().enumerate() {
        if keep(d) {
            size *= s;
        }
    }
    (g, size)
}

/// Adds the corrections to the cells', margins', full tables' and scores'
/// covariances of `tc` (the result of `q` over a cube of `shape`, whose
/// cells' categories are `cats`).
fn apply(tc: &mut TaylorCells, parts: &Parts, q: &Query, shape: &[usize], cats: &[Vec<&Category>]) {
    let d = &parts.d;
    let one = |k: usize| parts.combine(&[(k, 1.0)]);
    let total = tc.cell.len();
    let base: Vec<[Vec<f64>; 5]> = (0..2 * total).map(one).collect();
    for (c, v) in tc.cell.iter_mut().enumerate() {
        let (w, y) = (&base[2 * c], &base[2 * c + 1]);
        let corr = [
            Parts::pair(w, w, d),
            Parts::pair(w, y, d),
            Parts::pair(y, y, d),
        ];
        settle(v, corr);
    }
    for m in tc.margins.iter_mut() {
        let mut members: Vec<Vec<usize>> = vec![Vec::new(); m.var.len()];
        for (c, g) in m.group.iter().enumerate() {
            if let Some(g) = g {
                members[*g].push(c);
            }
        }
        for (g, cells) in members.iter().enumerate() {
            if cells.is_empty() {
                continue;
            }
            let w = parts.combine(&cells.iter().map(|&c| (2 * c, 1.0)).collect::<Vec<_>>());
            let y = parts.combine(&cells.iter().map(|&c| (2 * c + 1, 1.0)).collect::<Vec<_>>());
            let corr = [
                Parts::pair(&w, &w, d),
                Parts::pair(&w, &y, d),
                Parts::pair(&y, &y, d),
            ];
            settle(&mut m.var[g], corr);
            for &a in cells {
                let c = m.cross[a] + Parts::pair(&base[2 * a], &w, d);
                m.cross[a] = within(c, tc.cell[a][0] * m.var[g][0]);
            }
        }
    }
    if let (Some(full), Some(tq)) = (tc.full.as_mut(), q.taylor.as_ref()) {
        let keep = &tq.margins[tq.full.unwrap_or(0)].keep;
        let width = if tq.full_values { 2 } else { 1 };
        // Each table's cells, by position.
        let mut tables: Vec<Vec<usize>> = vec![Vec::new(); full.len()];
        for dst in 0..total {
            let (t, _) = flat(dst, &|x| keep[x], shape);
            if t < tables.len() {
                tables[t].push(dst);
            }
        }
        for (t, cells) in tables.iter().enumerate() {
            let k = cells.len();
            for (ia, &ca) in cells.iter().enumerate() {
                let a = flat(ca, &|x| !keep[x], shape).0;
                for &cb in cells.iter().skip(ia) {
                    let b = flat(cb, &|x| !keep[x], shape).0;
                    for i in 0..width {
                        for j in 0..width {
                            let v = Parts::pair(&base[2 * ca + i], &base[2 * cb + j], d);
                            let n = width * k;
                            let (x, y) = (width * a + i, width * b + j);
                            if let Some(e) = full[t].get_mut(x * n + y) {
                                *e += v;
                            }
                            if ca != cb {
                                if let Some(e) = full[t].get_mut(y * n + x) {
                                    *e += v;
                                }
                            }
                        }
                    }
                }
            }
        }
    }
    if let (Some(sc), Some(spec)) = (
        tc.scores.as_mut(),
        q.taylor.as_ref().and_then(|t| t.scores.as_ref()),
    ) {
        // Each score as a combination of the cells' totals: `w·a + w·x·b`
        // is `a + b·shift` of the count and `b` of the shifted total.
        let len = spec.len;
        let mut terms: Vec<Vec<(usize, f64)>> = vec![Vec::new(); len];
        for (c, cc) in cats.iter().enumerate().take(total) {
            if let Some((a, b)) = (spec.of)(cc) {
                for k in 0..len {
                    terms[k].push((2 * c, a[k] + b[k] * tc.shift));
                    terms[k].push((2 * c + 1, b[k]));
                }
            }
        }
        let vs: Vec<[Vec<f64>; 5]> = terms.iter().map(|t| parts.combine(t)).collect();
        for i in 0..len {
            for j in i..len {
                let v = Parts::pair(&vs[i], &vs[j], d);
                sc[i * len + j] += v;
                if i != j {
                    sc[j * len + i] += v;
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn back_fitting_removes_each_margins_means() {
        // Two margins over four groups (a 2×2 table), one record each.
        let adj = Adjustment {
            group: vec![0, 1, 2, 3],
            groups: 4,
            new: vec![1.0; 4],
            old: vec![1.0; 4],
            psu: vec![0, 1, 2, 3],
            stratum: vec![0; 4],
            at: vec![0, 1, 2, 3, 4],
            entries: vec![(0, 1.0), (1, 1.0), (2, 1.0), (3, 1.0)],
            coef: vec![[4.0 / 3.0, 1.0 / 3.0]],
            fit: Fit::Rake {
                cats: vec![vec![0, 0, 1, 1], vec![0, 1, 0, 1]],
                counts: vec![vec![2.0, 2.0], vec![2.0, 2.0]],
                n: vec![1.0; 4],
            },
        };
        // u = 1 in group 0 only: an additive fit leaves the interaction.
        let s = vec![1.0, 0.0, 0.0, 0.0];
        let r = fitted(&adj, &s);
        let res: Vec<f64> = (0..4).map(|g| s[g] - r[g]).collect();
        for (x, want) in res.iter().zip([0.25, -0.25, -0.25, 0.25]) {
            assert!((x - want).abs() < 1e-12, "{res:?}");
        }
    }
}
