//! From a formula's terms to the columns of the model (R's
//! `model.matrix`): a numeric part is its value, a factor its indicators;
//! a factor takes contrasts against its base (treatment coding) in a term
//! when the term without it is in the model (the intercept counting as
//! the empty term), else one indicator per category — R's rule, so the
//! columns and their names are R's.

use super::fit::Cells;
use super::ModelError;
use crate::family::Family;
use microtab_engine::{Category, Cube, Formula, RepCells, Value};
use microtab_store::{Dataset, Kind};
use serde::{Deserialize, Serialize};

/// How one part of a term becomes columns.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct PartCode {
    /// Its dimension in the query (`usize::MAX` for a value).
    dim: usize,
    /// Record by record, its value's index in [`Coding::values`] (a
    /// numeric variable of a model fitted on records).
    value: Option<usize>,
    /// Categorical: its levels' displayed values, in order.
    levels: Option<Vec<String>>,
    /// The base asked for (factor(X, base = K)).
    base: Option<String>,
    /// As written.
    text: String,
}

/// The coding of a model over its query's dimensions (serializable: the
/// parts of a model computed elsewhere carry it; see [`crate::run`]).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct Coding {
    /// The query's grouping arguments: the parts' specs, then the
    /// outcome's when it is a dimension.
    pub dims: Vec<String>,
    /// The outcome as the query's analysis variable (gaussian on a
    /// variable).
    pub measure: Option<String>,
    /// Numeric variables read record by record (a model fitted on
    /// records, [`super::rows`]): the numeric parts', then the outcome's
    /// when it is a measurement.
    pub values: Vec<String>,
    /// The outcome's index in [`Self::values`].
    pub y_value: Option<usize>,
    /// Column names.
    pub names: Vec<String>,
    pub intercept: bool,
    /// Per term, its parts (indices into `parts`), and per part whether
    /// it is coded by contrasts.
    terms: Vec<Vec<(usize, bool)>>,
    parts: Vec<PartCode>,
    /// The outcome's dimension, and its variable's name.
    outcome_dim: Option<usize>,
    outcome: String,
    /// The outcome is a condition (category 1 of its recode is 1).
    condition: bool,
    /// Per cube cell, its model cell (`usize::MAX`: none).
    #[serde(skip)]
    cell_map: Vec<usize>,
    family: Family,
}

/// A few values, and how many more.
fn list(v: &[&str]) -> String {
    let mut s = v.iter().take(5).copied().collect::<Vec<_>>().join(", ");
    if v.len() > 5 {
        s.push_str(&format!(" and {} more", v.len() - 5));
    }
    s
}

fn quote(name: &str) -> String {
    format!("`{}`", name.replace('`', "``"))
}

/// The numeric value of a category.
fn number(c: &Category) -> Option<f64> {
    match &c.value {
        Value::Int(i) => Some(*i as f64),
        Value::Num(x) => Some(*x),
        _ => None,
    }
}

impl Coding {
    /// The coding of `f` (levels are filled in from the cube by
    /// [`Self::cells`]); with `rows`, numeric variables are values read
    /// record by record rather than dimensions of the cube.
    pub(crate) fn new(
        ds: &Dataset,
        f: &Formula,
        family: Family,
        rows: bool,
    ) -> crate::Result<Coding> {
        let mut dims: Vec<String> = Vec::new();
        let mut values: Vec<String> = Vec::new();
        let mut parts: Vec<PartCode> = Vec::new();
        let mut terms = Vec::new();
        for t in &f.terms {
            let mut term = Vec::new();
            for p in t {
                let spec = microtab_engine::parse_dim_in(ds, &p.spec)?;
                let var = ds.variable(&spec.name)?;
                let text_var = var.kind == Kind::String && spec.recode.is_none();
                let factor = p.factor || text_var;
                let plain = spec.recode.is_none() && spec.valid.is_none();
                let value = (rows && !factor && plain).then(|| {
                    values
                        .iter()
                        .position(|v| *v == var.name)
                        .unwrap_or_else(|| {
                            values.push(var.name.clone());
                            values.len() - 1
                        })
                });
                let dim = match dims.iter().position(|d| *d == p.spec) {
                    _ if value.is_some() => usize::MAX,
                    Some(d) => d,
                    None => {
                        dims.push(p.spec.clone());
                        dims.len() - 1
                    }
                };
                let at = match parts.iter().position(|q| q.text == p.text) {
                    Some(i) => i,
                    None => {
                        parts.push(PartCode {
                            dim,
                            value,
                            levels: factor.then(Vec::new),
                            base: p.base.clone(),
                            text: p.text.clone(),
                        });
                        parts.len() - 1
                    }
                };
                term.push(at);
            }
            terms.push(term);
        }
        // R's rule: a factor in term T is coded by contrasts when T
        // without it is in the model (the empty term counting as in it);
        // without an intercept, the first factor of the first term that
        // has one is coded by indicators instead (R `model.matrix`).
        let part_sets: Vec<Vec<usize>> = terms.clone();
        let has = |set: &[usize]| -> bool {
            set.is_empty()
                || part_sets
                    .iter()
                    .any(|t| t.len() == set.len() && set.iter().all(|p| t.contains(p)))
        };
        let mut terms: Vec<Vec<(usize, bool)>> = terms
            .iter()
            .map(|t| {
                t.iter()
                    .map(|&p| {
                        let rest: Vec<usize> = t.iter().copied().filter(|&q| q != p).collect();
                        (p, parts[p].levels.is_some() && has(&rest))
                    })
                    .collect()
            })
            .collect();
        if !f.intercept {
            if let Some(first) = terms
                .iter_mut()
                .flat_map(|t| t.iter_mut())
                .find(|(p, _)| parts[*p].levels.is_some())
            {
                first.1 = false;
            }
        }
        let outcome_var = ds.variable(&f.outcome.name)?;
        // A binary outcome is a dimension (its values are checked, and
        // the cells' sums are Σ w over y = 1); a count or a measurement
        // is the query's analysis variable.
        let as_dim = f.outcome.condition.is_some() || family.binary();
        let mut y_value = None;
        let (outcome_dim, measure) = if as_dim {
            dims.push(match &f.outcome.condition {
                Some(c) => format!("{}(r: {c}; *)", quote(&outcome_var.name)),
                None => quote(&outcome_var.name),
            });
            (Some(dims.len() - 1), None)
        } else {
            if outcome_var.kind == Kind::String {
                return Err(ModelError::Text {
                    part: f.outcome.text.clone(),
                }
                .into());
            }
            if rows {
                values.push(outcome_var.name.clone());
                y_value = Some(values.len() - 1);
                (None, None)
            } else {
                (None, Some(outcome_var.name.clone()))
            }
        };
        Ok(Coding {
            dims,
            measure,
            values,
            y_value,
            names: Vec::new(),
            intercept: f.intercept,
            terms,
            parts,
            outcome_dim,
            outcome: outcome_var.name.clone(),
            condition: f.outcome.condition.is_some(),
            cell_map: Vec::new(),
            family,
        })
    }

    /// The levels of each factor from the cube's categories (text in
    /// R's sorted order, numbers ascending), the column names, and the
    /// cells the model is fitted on.
    pub(crate) fn cells(&mut self, cube: &Cube) -> crate::Result<Cells> {
        let cats: Vec<Vec<Category>> = cube.dims.iter().map(|d| d.categories.clone()).collect();
        self.set_levels(&cats)?;
        Ok(self.fill(cube))
    }

    /// The levels of each factor from the categories that occur in each
    /// dimension (text in R's sorted order, numbers ascending), the
    /// column names, and the outcome's check.
    pub(crate) fn set_levels(&mut self, dims: &[Vec<Category>]) -> crate::Result<()> {
        for p in &mut self.parts {
            if p.value.is_some() {
                continue;
            }
            if let Some(levels) = &mut p.levels {
                let cats = &dims[p.dim];
                let mut l: Vec<(Option<f64>, String)> = cats
                    .iter()
                    .filter(|c| !c.missing)
                    .map(|c| (number(c), c.display.clone()))
                    .collect();
                l.sort_by(|a, b| match (a.0, b.0) {
                    (Some(x), Some(y)) => x.total_cmp(&y),
                    _ => a.1.cmp(&b.1),
                });
                *levels = l.into_iter().map(|(_, d)| d).collect();
                if let Some(base) = &p.base {
                    let Some(i) = levels.iter().position(|l| l == base) else {
                        return Err(ModelError::NoBase {
                            part: p.text.clone(),
                            base: base.clone(),
                            levels: levels.join(", "),
                        }
                        .into());
                    };
                    let b = levels.remove(i);
                    levels.insert(0, b);
                }
            } else if dims[p.dim]
                .iter()
                .any(|c| !c.missing && number(c).is_none())
            {
                return Err(ModelError::Text {
                    part: p.text.clone(),
                }
                .into());
            }
        }
        self.names = self.column_names();
        self.check_outcome(dims)
    }

    /// The columns' names, as R's `model.matrix` names them.
    fn column_names(&self) -> Vec<String> {
        let mut names = Vec::new();
        if self.intercept {
            names.push("(Intercept)".to_string());
        }
        for t in &self.terms {
            let mut cols: Vec<String> = vec![String::new()];
            for &(p, contrast) in t {
                let part = &self.parts[p];
                let own: Vec<String> = match &part.levels {
                    None => vec![part.text.clone()],
                    Some(l) => l
                        .iter()
                        .skip(usize::from(contrast))
                        .map(|v| format!("{}{v}", part.text))
                        .collect(),
                };
                // The earlier parts vary fastest.
                let mut next = Vec::new();
                for o in &own {
                    for c in &cols {
                        next.push(if c.is_empty() {
                            o.clone()
                        } else {
                            format!("{c}:{o}")
                        });
                    }
                }
                cols = next;
            }
            names.extend(cols);
        }
        names
    }

    /// The columns of a cell whose categories are `cats` (one per query
    /// dimension); `None` for a missing or unknown category.
    pub(crate) fn row(&self, cats: &[&Category]) -> Option<Vec<f64>> {
        let mut x = Vec::with_capacity(self.names.len());
        if self.intercept {
            x.push(1.0);
        }
        for t in &self.terms {
            let mut cols: Vec<f64> = vec![1.0];
            for &(p, contrast) in t {
                let part = &self.parts[p];
                if part.value.is_some() {
                    // Multiplied in record by record (`column_values`).
                    continue;
                }
                let c = cats[part.dim];
                if c.missing {
                    return None;
                }
                let own: Vec<f64> = match &part.levels {
                    None => vec![number(c)?],
                    Some(l) => {
                        let i = l.iter().position(|v| *v == c.display)?;
                        (usize::from(contrast)..l.len())
                            .map(|j| f64::from(u8::from(j == i)))
                            .collect()
                    }
                };
                let mut next = Vec::with_capacity(cols.len() * own.len());
                for o in &own {
                    for c in &cols {
                        next.push(c * o);
                    }
                }
                cols = next;
            }
            x.extend(cols);
        }
        Some(x)
    }

    /// Per column, the values (indices into [`Self::values`]) its
    /// record's entry is multiplied by: the numeric parts of its term.
    pub(crate) fn column_values(&self) -> Vec<Vec<usize>> {
        let mut out = Vec::new();
        if self.intercept {
            out.push(Vec::new());
        }
        for t in &self.terms {
            let mut width = 1;
            let mut vals = Vec::new();
            for &(p, contrast) in t {
                let part = &self.parts[p];
                match (&part.levels, part.value) {
                    (_, Some(v)) => vals.push(v),
                    (Some(l), None) => width *= l.len() - usize::from(contrast),
                    (None, None) => {}
                }
            }
            out.extend(std::iter::repeat_n(vals, width));
        }
        out
    }

    /// The model's family.
    pub(crate) fn family(&self) -> Family {
        self.family
    }

    /// Whether cube cell `c` is in the model (after [`Self::cells`]).
    pub(crate) fn in_model(&self, c: usize) -> bool {
        self.cell_map.get(c).is_some_and(|&m| m != usize::MAX)
    }

    /// Whether the outcome is a dimension (binary, or a condition).
    pub(crate) fn has_outcome_dim(&self) -> bool {
        self.outcome_dim.is_some()
    }

    /// The outcome of a cell (outcome a dimension).
    pub(crate) fn y(&self, cats: &[&Category]) -> Option<f64> {
        let c = cats[self.outcome_dim?];
        if c.missing {
            return None;
        }
        if self.condition {
            // The recode's first group (the condition) is category 1.
            return Some(f64::from(u8::from(number(c)? == 1.0)));
        }
        number(c)
    }

    /// The error of an outcome value `y` the family refuses (binary: not
    /// 0 or 1; Poisson: negative).
    pub(crate) fn refused_outcome(&self, y: f64) -> ModelError {
        // As displayed: 12 significant digits at most.
        let shown = format!("{}", (y * 1e12).round() / 1e12);
        if self.family.binary() {
            ModelError::NotBinary {
                variable: self.outcome.clone(),
                family: self.family.name().to_string(),
                values: format!("the value {shown}"),
            }
        } else {
            ModelError::Negative {
                variable: self.outcome.clone(),
                value: shown,
            }
        }
    }

    /// A binary outcome is 0 or 1; a Poisson one not negative.
    fn check_outcome(&self, dims: &[Vec<Category>]) -> crate::Result<()> {
        let Some(d) = self.outcome_dim.filter(|_| !self.condition) else {
            return Ok(());
        };
        let cats: Vec<&Category> = dims[d].iter().filter(|c| !c.missing).collect();
        if let Some(c) = cats.iter().find(|c| number(c).is_none()) {
            return Err(ModelError::Text {
                part: format!("{} ({})", self.outcome, c.display),
            }
            .into());
        }
        if self.family.binary() {
            let bad: Vec<&str> = cats
                .iter()
                .filter(|c| number(c).is_some_and(|v| v != 0.0 && v != 1.0))
                .map(|c| c.display.as_str())
                .collect();
            if !bad.is_empty() {
                return Err(ModelError::NotBinary {
                    variable: self.outcome.clone(),
                    family: self.family.name().to_string(),
                    values: format!("the values {}", list(&bad)),
                }
                .into());
            }
        }
        if let Some(c) = cats.iter().find(|c| number(c).is_some_and(|v| v < 0.0)) {
            if self.family == Family::Poisson {
                return Err(ModelError::Negative {
                    variable: self.outcome.clone(),
                    value: c.display.clone(),
                }
                .into());
            }
        }
        Ok(())
    }

    /// The model's cells from the cube (cells differing only in the
    /// outcome are one), and each cube cell's model cell.
    fn fill(&mut self, cube: &Cube) -> Cells {
        let p = self.names.len();
        let mut index: std::collections::HashMap<Vec<u64>, usize> = Default::default();
        let mut cells = Cells {
            p,
            x: Vec::new(),
            n: Vec::new(),
            w: Vec::new(),
            y: Vec::new(),
            s: Vec::new(),
            s_known: self.family != Family::Poisson || self.outcome_dim.is_some(),
        };
        self.cell_map = vec![usize::MAX; cube.counts.len()];
        for c in 0..cube.counts.len() {
            let n = match &cube.moments {
                Some(m) => m[c].n,
                None => cube.counts[c],
            };
            if n == 0 {
                continue;
            }
            let cats = cube.categories_of(c);
            let Some(x) = self.row(&cats) else { continue };
            let (w, wy, s) = self.sums(cube, c, &cats);
            if !wy.is_finite() {
                continue;
            }
            let key: Vec<u64> = x.iter().map(|v| v.to_bits()).collect();
            let m = *index.entry(key).or_insert_with(|| {
                cells.x.extend_from_slice(&x);
                cells.n.push(0);
                cells.w.push(0.0);
                cells.y.push(0.0);
                cells.s.push(0.0);
                cells.n.len() - 1
            });
            cells.n[m] += n;
            cells.w[m] += w;
            cells.y[m] += wy;
            cells.s[m] += s;
            self.cell_map[c] = m;
        }
        cells
    }

    /// A cube cell's `(Σ w, Σ w·y, Σ w·y²)` (or `Σ w·y·log y`).
    fn sums(&self, cube: &Cube, c: usize, cats: &[&Category]) -> (f64, f64, f64) {
        let w = match (&cube.moments, &cube.weighted) {
            (Some(m), _) => m[c].w,
            (None, Some(w)) => w[c],
            (None, None) => cube.counts[c] as f64,
        };
        match &cube.moments {
            Some(m) => {
                let m = m[c];
                let s = if self.family == Family::Poisson {
                    0.0
                } else {
                    m.m2 + m.w * m.mean * m.mean
                };
                (m.w, m.w * m.mean, s)
            }
            None => match self.y(cats) {
                Some(y) => {
                    let ylogy = if y > 0.0 { y * y.ln() } else { 0.0 };
                    let s = if self.family == Family::Poisson {
                        ylogy
                    } else {
                        y * y
                    };
                    (w, w * y, w * s)
                }
                None => (w, f64::NAN, 0.0),
            },
        }
    }
}

impl Coding {
    /// Replicate `r`'s `(Σ w_r, Σ w_r·y)` per model cell (`k` cells).
    pub(crate) fn replicate_sums(
        &self,
        cube: &Cube,
        reps: &RepCells,
        r: usize,
        k: usize,
    ) -> (Vec<f64>, Vec<f64>) {
        let (mut w, mut y) = (vec![0.0; k], vec![0.0; k]);
        for (c, &m) in self.cell_map.iter().enumerate() {
            if m == usize::MAX {
                continue;
            }
            let wr = reps.w[r][c];
            w[m] += wr;
            y[m] += match &reps.wx {
                Some(wx) if self.outcome_dim.is_none() => wx[r][c],
                _ => wr * self.y(&cube.categories_of(c)).unwrap_or(0.0),
            };
        }
        (w, y)
    }

    /// A cell's score coefficients under the fit `beta`: its records add
    /// `w·x·(y − μ)·μ'/V` to their PSU's score, as `w·a + w·y·b` (outcome
    /// the analysis variable) or `w·a` (outcome a dimension).
    pub(crate) fn score(
        &self,
        family: Family,
        beta: &[f64],
        cats: &[&Category],
    ) -> Option<(Vec<f64>, Vec<f64>)> {
        let x = self.row(cats)?;
        let eta = super::fit::dot(&x, beta);
        let mu = family.mu(eta);
        let g = family.dmu(eta) / family.var(mu);
        match self.outcome_dim {
            Some(_) => {
                let y = self.y(cats)?;
                let a = x.iter().map(|v| v * (y - mu) * g).collect();
                Some((a, vec![0.0; x.len()]))
            }
            None => {
                let a = x.iter().map(|v| -v * mu * g).collect();
                let b = x.iter().map(|v| v * g).collect();
                Some((a, b))
            }
        }
    }

    /// Perfect separation: a cell whose observed outcome is all 0 (or all
    /// 1) fitted as 0 (or 1) to within 1e-8.
    pub(crate) fn check_separation(
        &self,
        family: Family,
        cells: &Cells,
        beta: &[f64],
    ) -> crate::Result<()> {
        if family == Family::Gaussian {
            return Ok(());
        }
        let p = cells.p;
        let mut found = Vec::new();
        for c in 0..cells.w.len() {
            if cells.w[c] <= 0.0 {
                continue;
            }
            let x = &cells.x[c * p..(c + 1) * p];
            let mu = family.mu(super::fit::dot(x, beta));
            let ybar = cells.y[c] / cells.w[c];
            let at_zero = ybar == 0.0 && mu < 1e-8;
            let at_one = family.binary() && ybar == 1.0 && mu > 1.0 - 1e-8;
            if at_zero || at_one {
                let desc: Vec<String> = self
                    .names
                    .iter()
                    .zip(x)
                    .filter(|(n, &v)| v != 0.0 && *n != "(Intercept)")
                    .map(|(n, v)| {
                        if *v == 1.0 {
                            n.clone()
                        } else {
                            format!("{n} = {v}")
                        }
                    })
                    .collect();
                found.push(if desc.is_empty() {
                    "every predictor is at its base".to_string()
                } else {
                    desc.join(", ")
                });
            }
        }
        if found.is_empty() {
            return Ok(());
        }
        let refs: Vec<&str> = found.iter().map(|s| s.as_str()).collect();
        Err(ModelError::Separation { cells: list(&refs) }.into())
    }
}
