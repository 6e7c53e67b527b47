//! Making weights: post-stratification, raking and calibration of a
//! weight to population totals — and of every replicate weight the same
//! way, so that replicate standard errors carry the adjustment — and
//! trimming ([`weight`]); and replicate weights built from a Taylor
//! design's strata and PSUs ([`replicate::replicate`]). The new weights are written as new columns in a new
//! generation of the dataset (atomic: other writers are refused, readers keep
//! the generation they opened, a killed run leaves the dataset as it
//! was), with the design that uses them.
//!
//! The records are first collapsed into groups that share every
//! adjustment variable's value; each weight's sum per group is all the
//! adjustment needs (a group's records all get the same factor), so
//! raking 14 million records with 80 replicate weights solves 81 small
//! problems. The arithmetic follows R `survey` (`postStratify`, `rake`,
//! `calibrate`'s `grake`, `trimWeights`); docs/research/weighting-r-survey.md
//! has the details and docs/WEIGHTING.md the user's guide.

mod error;
mod linearize;
mod model;
pub mod replicate;
mod solve;

pub(crate) use linearize::{correct, record_correction, supported, PerUnit, RecordCorrection};
pub(crate) mod write;

pub use error::WeightError;
pub use model::{read_totals, TotalRow};
pub use solve::Distance;

use microtab_store::{
    Calibration, Column, Dataset, DatasetWriter, Design, Replicates, Taylor, Variable,
};
use model::{Groups, Model, OUT};
use rayon::prelude::*;
use std::path::Path;

/// How a weight is adjusted.
#[derive(Debug, Clone, PartialEq)]
pub enum Method {
    /// Post-stratification to the totals of the cells of one variable or
    /// of several crossed (`AGEGRP*SEX`).
    PostStratify(String),
    /// Raking (iterative proportional fitting) to several margins, each a
    /// variable or several crossed, separated by `;` (`AGEGRP; SEX`).
    Rake(String),
    /// Calibration to totals of the terms of a model joined by `+`
    /// (`AGE + factor(SEX) + REGION*SEX`): a variable given by values
    /// (or in `factor()`) is categorical, one given by a single total
    /// numeric; with a distance and bounds on `g = new/old`.
    Calibrate {
        /// The model.
        model: String,
        /// The distance.
        distance: Distance,
        /// Bounds on `g` (`None`: unbounded).
        bounds: Option<(f64, f64)>,
    },
    /// No adjustment (trimming only).
    None,
}

impl Method {
    /// What the report calls it.
    pub fn name(&self) -> &'static str {
        match self {
            Method::PostStratify(_) => "post-stratification",
            Method::Rake(_) => "raking",
            Method::Calibrate { .. } => "calibration",
            Method::None => "trimming",
        }
    }
}

/// What to make.
#[derive(Debug, Clone)]
pub struct WeightSpec {
    /// The weight adjusted (`None`: the design's weight).
    pub from: Option<String>,
    /// The new weight's name; replicate weights follow as `NEW_1 … NEW_R`.
    pub new: String,
    /// The adjustment.
    pub method: Method,
    /// The population totals (empty for [`Method::None`]).
    pub totals: Vec<TotalRow>,
    /// Trim the adjusted weights to these bounds (weights, not factors).
    pub trim: Option<(f64, f64)>,
    /// Records outside the totals' categories (missing, or a value the
    /// totals do not list) keep their weight instead of failing the
    /// adjustment; categories with a total but no records are left out
    /// of the adjustment.
    pub allow_missing_cells: bool,
    /// Convergence: the largest `|achieved − target| / (1 + |target|)`
    /// allowed (default 1e-10).
    pub tolerance: f64,
    /// Newton steps (calibration) or cycles (raking) allowed (default 100
    /// and 1000).
    pub max_iterations: Option<usize>,
    /// Replace existing variables of the new names.
    pub replace: bool,
}

impl WeightSpec {
    /// A spec with the defaults.
    pub fn new(new: impl Into<String>, method: Method, totals: Vec<TotalRow>) -> WeightSpec {
        WeightSpec {
            from: None,
            new: new.into(),
            method,
            totals,
            trim: None,
            allow_missing_cells: false,
            tolerance: 1e-10,
            max_iterations: None,
            replace: false,
        }
    }
}

/// A target's total and what the new full-sample weight achieves.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Achieved {
    /// The term (`AGEGRP*SEX`, `AGE`, `(Intercept)`).
    pub term: String,
    /// The category (empty for a numeric term and the intercept).
    pub value: String,
    /// The population total.
    pub total: f64,
    /// `Σ new weight` (× the variable for a numeric term).
    pub achieved: f64,
    /// `Σ old weight` (× the variable).
    pub before: f64,
}

/// Range and spread of a weight.
#[derive(Debug, Clone, Copy, serde::Serialize)]
pub struct Spread {
    /// Smallest.
    pub min: f64,
    /// Largest.
    pub max: f64,
    /// Records with a weight of zero or less.
    pub nonpositive: u64,
    /// Σ weight.
    pub sum: f64,
    /// Kish's design effect of weighting, `n Σw² / (Σw)²` over the
    /// records with a positive weight.
    pub kish_deff: f64,
}

/// What was made.
#[derive(Debug, Clone, serde::Serialize)]
pub struct WeightReport {
    /// The method's name.
    pub method: &'static str,
    /// The weight adjusted.
    pub from: String,
    /// The new weight.
    pub weight: String,
    /// The new replicate weights (empty without replicates).
    pub replicates: Vec<String>,
    /// Records.
    pub records: u64,
    /// Groups of records sharing every adjustment variable's value.
    pub groups: usize,
    /// Records outside the totals' categories, which kept their weight.
    pub outside: u64,
    /// Categories with a total but no records, left out.
    pub empty_cells: Vec<String>,
    /// The targets and what the new weight achieves.
    pub achieved: Vec<Achieved>,
    /// Iterations of the full-sample weight.
    pub iterations: usize,
    /// The most iterations any replicate took.
    pub replicate_iterations: usize,
    /// The worst relative misfit over every weight and target, before
    /// trimming.
    pub worst_misfit: f64,
    /// The tolerance.
    pub tolerance: f64,
    /// R's rescaling before calibration, when every target is more than
    /// 20 times its sample total (bounds then apply after it).
    pub rescaled: Option<f64>,
    /// The old weight.
    pub before: Spread,
    /// The new weight.
    pub after: Spread,
    /// Trimming: records trimmed (full sample) and the passes taken.
    pub trimmed: Option<(u64, usize)>,
    /// The dataset's generation now.
    pub generation: u64,
    /// What the user should know.
    pub notes: Vec<String>,
}

/// The adjustment's targets, flattened: per target its term index (or
/// `None` for the intercept) and cell.
struct Targets {
    names: Vec<(String, String)>,
    totals: Vec<f64>,
}

/// Makes the weights `spec` asks of the dataset at `dir`.
pub fn weight(dir: &Path, spec: &WeightSpec) -> Result<WeightReport, WeightError> {
    let mut w = DatasetWriter::extend(dir)?;
    let ds = w.snapshot().expect("an extending writer");
    let rows = ds.rows() as usize;
    let design = ds.manifest().design.clone();
    let from = match (&spec.from, &design) {
        (Some(f), _) => ds.variable(f)?.name.clone(),
        (None, Some(d)) => d.weight.clone(),
        (None, None) => {
            return Err(WeightError::Weight(format!(
                "{} has no survey design, so which weight to adjust must be given",
                dir.display()
            )))
        }
    };
    let fvar = ds.variable(&from)?;
    if fvar.kind == microtab_store::Kind::String {
        return Err(WeightError::Weight(format!(
            "the weight {from} is a text variable"
        )));
    }
    // Replicates follow the design's weight.
    let reps: Vec<String> = match &design {
        Some(Design {
            weight,
            replicates: Some(r),
            ..
        }) if *weight == from => r.weights.clone(),
        _ => Vec::new(),
    };
    let mut names = vec![new_name(&ds, &spec.new, spec.replace)?];
    for k in 1..=reps.len() {
        names.push(new_name(&ds, &format!("{}_{k}", spec.new), spec.replace)?);
    }
    if let Some(d) = &design {
        if let Some(v) = names.iter().find(|n| d.variables().contains(n)) {
            return Err(WeightError::Weight(format!(
                "{v} is part of the survey design and cannot be replaced"
            )));
        }
    }
    check_adjustable(spec, design.as_ref(), &from, &names[0])?;
    let wnames: Vec<String> = std::iter::once(from.clone())
        .chain(reps.iter().cloned())
        .collect();

    // The model and the groups.
    let mut model = model_of(&ds, spec)?;
    model::numeric_values(&ds, &mut model)?;
    let groups = model::group_records(&ds, &model)?;
    let ngroups = groups.keys.len();
    if groups.outside.records > 0
        && !spec.allow_missing_cells
        && !matches!(spec.method, Method::None)
    {
        return Err(WeightError::Outside {
            records: groups.outside.records,
            detail: outside_detail(&model, &groups),
        });
    }

    // Each weight's sum per group, and the old weight's spread.
    let wcols: Vec<(Column, Variable)> = wnames
        .iter()
        .map(|n| Ok((ds.column(n)?, ds.variable(n)?.clone())))
        .collect::<Result<_, microtab_store::Error>>()?;
    let sums = group_sums(&wcols, &groups, ngroups)?;
    let before = spread_of(&wcols[0].0, &wcols[0].1)?;

    // The problem and its solution, weight by weight.
    let tol = spec.tolerance;
    let (targets, results, empty_cells) = solve_all(spec, &model, &groups, &sums, &wnames)?;

    // Trimming: each weight's passes, from its adjusted values.
    let (trims, trimmed_full) = trim_all(&ds, &wnames, &groups, &results, spec.trim)?;

    // Write.
    let written =
        write::write_f64_columns::<WeightError, _>(&mut w, rows, &names, |c, start, out| {
            let n = out.len();
            model::block_values(&wcols[c].0, &wcols[c].1, start, n, |vals| {
                let scale = wcols[c].1.scale();
                let g = &results[c].g;
                let of = &groups.of_record[start..start + n];
                for ((o, &v), &gid) in out.iter_mut().zip(vals).zip(of) {
                    let x = v / scale;
                    let a = if gid == OUT { x } else { x * g[gid as usize] };
                    *o = if trims[c].is_empty() {
                        a
                    } else {
                        solve::trimmed(a, spec.trim.expect("trimming"), &trims[c])
                    };
                }
            })
        })?;
    let new_col = (
        w.finished_column(&written[0], rows as u64)?,
        written[0].clone(),
    );

    // The report, from the new weight as written (before it is published).
    let after = spread_of(&new_col.0, &new_col.1)?;
    let old_col = (ds.column(&from)?, ds.variable(&from)?.clone());
    let achieved = achieved_totals(&ds, &model, &groups, [new_col, old_col], &sums[0], &targets)?;
    let trimmed = spec.trim.map(|_| (trimmed_full, trims[0].len()));

    // The design.
    let cal = calibration_of(spec, &from, &model);
    let weighted = rows as u64 - after.nonpositive;
    let new = new_design(design.as_ref(), &from, &names, cal, (rows as u64, weighted));
    if let Some(d) = &new {
        w.set_design(d.clone());
    }
    let generation = ds.manifest().generation + 1;
    w.commit(rows as u64)?;

    let notes = notes_of(
        spec,
        design.as_ref(),
        &from,
        &names[0],
        &results[0],
        &after,
        groups.outside.records,
    );
    Ok(WeightReport {
        method: spec.method.name(),
        from: from.clone(),
        weight: names[0].clone(),
        replicates: names[1..].to_vec(),
        records: rows as u64,
        groups: ngroups,
        outside: groups.outside.records,
        empty_cells,
        achieved,
        iterations: results[0].iterations,
        replicate_iterations: results[1..].iter().map(|r| r.iterations).max().unwrap_or(0),
        worst_misfit: results.iter().map(|r| r.worst).fold(0.0, f64::max),
        tolerance: tol,
        rescaled: results[0].rescaled,
        before,
        after,
        trimmed,
        generation,
        notes,
    })
}

/// The model of `spec`'s method over `ds`.
fn model_of(ds: &Dataset, spec: &WeightSpec) -> Result<Model, WeightError> {
    let model = match &spec.method {
        Method::None => Model {
            inputs: Vec::new(),
            terms: Vec::new(),
            intercept: None,
        },
        m => {
            let (text, sep, numeric) = match m {
                Method::PostStratify(t) => (t, '+', false),
                Method::Rake(t) => (t, ';', false),
                Method::Calibrate { model, .. } => (model, '+', true),
                Method::None => unreachable!(),
            };
            let specs = model::parse_terms(text, sep)?;
            if matches!(m, Method::PostStratify(_)) && specs.len() != 1 {
                return Err(WeightError::Spec(format!(
                    "post-stratification takes one variable or several crossed (A*B), not '{text}'"
                )));
            }
            model::build_model(ds, &specs, &spec.totals, numeric)?
        }
    };
    if !matches!(spec.method, Method::Calibrate { .. }) && model.intercept.is_some() {
        return Err(WeightError::Spec(
            "(Intercept) is a calibration total: post-stratification and raking take the totals of categories".into(),
        ));
    }
    Ok(model)
}

/// Each weight's adjustment: the targets, the solutions (full sample
/// first), and the cells left out.
fn solve_all(
    spec: &WeightSpec,
    model: &Model,
    groups: &Groups,
    sums: &[Vec<f64>],
    wnames: &[String],
) -> Result<(Targets, Vec<solve::Solved>, Vec<String>), WeightError> {
    let ngroups = groups.keys.len();
    let tol = spec.tolerance;
    let solved: Vec<Result<solve::Solved, solve::Failure>>;
    let targets: Targets;
    let mut empty_cells = Vec::new();
    match &spec.method {
        Method::None => {
            targets = Targets {
                names: Vec::new(),
                totals: Vec::new(),
            };
            solved = sums
                .iter()
                .map(|_| {
                    Ok(solve::Solved {
                        g: vec![1.0; ngroups],
                        iterations: 0,
                        worst: 0.0,
                        rescaled: None,
                    })
                })
                .collect();
        }
        Method::PostStratify(_) | Method::Rake(_) => {
            let mut margins = Vec::new();
            let mut names = Vec::new();
            let mut totals = Vec::new();
            for t in &model.terms {
                let cell: Vec<u32> = groups
                    .keys
                    .iter()
                    .map(|k| model::cell_of(t, k).expect("a listed cell") as u32)
                    .collect();
                let mut tt: Vec<f64> = t.cells.iter().map(|c| c.total).collect();
                check_cells(
                    t,
                    &cell,
                    &sums[0],
                    &mut tt,
                    spec.allow_missing_cells,
                    &mut empty_cells,
                )?;
                names.extend(t.cells.iter().map(|c| (t.name.clone(), c.shown.clone())));
                // The report shows the totals as given (a cell left out
                // has 0 as the adjustment's target).
                totals.extend(t.cells.iter().map(|c| c.total));
                margins.push((cell, tt));
            }
            check_margins(model, &margins)?;
            targets = Targets { names, totals };
            let max = spec.max_iterations.unwrap_or(1000);
            solved = sums
                .par_iter()
                .map(|w| {
                    if matches!(spec.method, Method::PostStratify(_)) {
                        solve::poststratify(w, &margins[0].0, &margins[0].1)
                    } else {
                        solve::rake(w, &margins, tol, max)
                    }
                })
                .collect();
        }
        Method::Calibrate {
            distance, bounds, ..
        } => {
            let bounds = bounds.unwrap_or((f64::NEG_INFINITY, f64::INFINITY));
            if *distance == Distance::Logit && !(bounds.0.is_finite() && bounds.1.is_finite()) {
                return Err(WeightError::Spec(
                    "logit calibration needs finite bounds".into(),
                ));
            }
            if !(bounds.0 < 1.0 && 1.0 < bounds.1) {
                return Err(WeightError::Spec(format!(
                    "the bounds on g = new/old weight must hold 1 strictly inside, not [{}, {}]",
                    bounds.0, bounds.1
                )));
            }
            let Matrix {
                x,
                kept,
                names,
                totals,
                r_cols,
            } = design_matrix(
                model,
                groups,
                &sums[0],
                spec.allow_missing_cells,
                &mut empty_cells,
            )?;
            let solver_totals: Vec<f64> = kept.iter().map(|&k| totals[k]).collect();
            targets = Targets { names, totals };
            let max = spec.max_iterations.unwrap_or(100);
            // Failures name targets by their index among all columns.
            let map = |f: solve::Failure| match f {
                solve::Failure::Empty(t) => solve::Failure::Empty(kept[t]),
                solve::Failure::NotConverged {
                    worst,
                    at,
                    iterations,
                } => solve::Failure::NotConverged {
                    worst,
                    at: kept[at],
                    iterations,
                },
            };
            solved = sums
                .par_iter()
                .map(|w| {
                    let r = solve::rescaling(w, &r_cols);
                    solve::calibrate(w, &x, &solver_totals, *distance, bounds, tol, max, r)
                        .map_err(map)
                })
                .collect();
        }
    }
    let results = solved
        .into_iter()
        .enumerate()
        .map(|(k, r)| r.map_err(|f| named(f, &wnames[k], spec, &targets)))
        .collect::<Result<Vec<_>, _>>()?;
    Ok((targets, results, empty_cells))
}

/// What the report tells the user besides the numbers.
fn notes_of(
    spec: &WeightSpec,
    design: Option<&Design>,
    from: &str,
    new: &str,
    full: &solve::Solved,
    after: &Spread,
    outside: u64,
) -> Vec<String> {
    let mut notes = Vec::new();
    if let Some(s) = full.rescaled {
        notes.push(format!(
            "every total is more than 20 times its sample total, so {from} was first multiplied by {s:.4} (as R's calibrate does); the bounds apply to g after that"
        ));
    }
    if after.nonpositive > 0 {
        notes.push(format!(
            "{} record{} a new weight of zero or less",
            after.nonpositive,
            if after.nonpositive == 1 {
                " has"
            } else {
                "s have"
            }
        ));
    }
    if spec.trim.is_some() && !matches!(spec.method, Method::None) {
        notes.push("trimming moves the totals away from their targets (the achieved totals are after trimming)".into());
    }
    if outside > 0 {
        notes.push(format!(
            "{outside} record{} outside the totals' categories kept {} weight; the achieved totals count {}, so they can differ from the targets",
            if outside == 1 { "" } else { "s" },
            if outside == 1 { "its" } else { "their" },
            if outside == 1 { "it" } else { "them" }
        ));
    }
    match design {
        Some(d) if d.weight != from => notes.push(format!(
            "the survey design still weights by {}: {new} is not part of it",
            d.weight
        )),
        Some(Design {
            replicates: Some(_),
            ..
        }) => {}
        _ if !matches!(spec.method, Method::None) => notes.push(format!(
            "the design is a linearization design on {new} that keeps the adjustment: every standard error subtracts its residuals (R's calibrated designs){}",
            if spec.trim.is_some() {
                " (after trimming, the residuals are those of the adjustment before it)"
            } else {
                ""
            }
        )),
        _ => {}
    }
    notes
}

/// A failed adjustment of `weight` as an error naming the target.
fn named(f: solve::Failure, weight: &str, spec: &WeightSpec, targets: &Targets) -> WeightError {
    match f {
        solve::Failure::Empty(t) => {
            let (term, value) = targets.names[t].clone();
            WeightError::EmptyCell {
                weight: weight.to_string(),
                term,
                value,
                total: targets.totals[t],
            }
        }
        solve::Failure::NotConverged {
            worst,
            at,
            iterations,
        } => {
            let (term, value) = targets.names[at].clone();
            let total = targets.totals[at];
            WeightError::NotConverged {
                method: spec.method.name(),
                weight: weight.to_string(),
                iterations,
                target: if value.is_empty() {
                    term
                } else {
                    format!("{term} = {value}")
                },
                off: worst * (1.0 + total.abs()),
                total,
                worst,
                tolerance: spec.tolerance,
            }
        }
    }
}

/// `name` as a new variable's name: valid, and new unless `replace`.
fn new_name(ds: &Dataset, name: &str, replace: bool) -> Result<String, WeightError> {
    microtab_engine::check_name(name)?;
    match ds.variable(name) {
        Ok(v) if !replace => Err(WeightError::Exists {
            dataset: ds.dir().to_path_buf(),
            variable: v.name.clone(),
        }),
        Ok(v) => Ok(v.name.clone()),
        Err(_) => Ok(name.to_string()),
    }
}

/// The design after weighting: the new weight (and its replicates) in
/// place of the old; a weight-only design on a dataset without one;
/// `None` (unchanged) when the design is another weight's.
fn new_design(
    old: Option<&Design>,
    from: &str,
    names: &[String],
    cal: Option<Calibration>,
    (rows, weighted): (u64, u64),
) -> Option<Design> {
    // Without strata or clusters: each record its own PSU (R's
    // `svydesign(ids = ~1, weights = ~W)`), so that the adjustment's
    // residuals can be kept.
    let plain = || Taylor {
        strata: None,
        cluster: None,
        fpc: None,
        lonely_psu: microtab_store::LonelyPsu::Fail,
        strata_keys: vec![0],
        psus: vec![rows],
        population: None,
        contiguous: true,
        weighted_psus: weighted,
        weighted_strata: u64::from(weighted > 0),
        rows,
        calibration: cal.clone(),
    };
    match old {
        Some(d) if d.weight == from => Some(Design {
            weight: names[0].clone(),
            // The input replicate design's rank (R's degf) is kept: each
            // replicate is the old one times a factor per group.
            replicates: d.replicates.as_ref().map(|r| Replicates {
                weights: names[1..].to_vec(),
                ..r.clone()
            }),
            taylor: match (&d.taylor, &d.replicates) {
                (Some(t), _) => Some(Taylor {
                    calibration: cal.clone(),
                    ..t.clone()
                }),
                (None, None) => cal.as_ref().map(|_| plain()),
                (None, Some(_)) => None,
            },
        }),
        // Another weight's design stays as it is.
        Some(_) => None,
        None => Some(Design {
            weight: names[0].clone(),
            replicates: None,
            taylor: cal.as_ref().map(|_| plain()),
        }),
    }
}

/// Refuses an adjustment whose design could not keep it: the new weight
/// replacing the one adjusted, or a design whose weight was itself
/// adjusted (its residuals would be lost).
fn check_adjustable(
    spec: &WeightSpec,
    design: Option<&Design>,
    from: &str,
    new: &str,
) -> Result<(), WeightError> {
    // The design keeps the adjusted weight (its residuals need it).
    if new.eq_ignore_ascii_case(from) && !matches!(spec.method, Method::None) {
        return Err(WeightError::Weight(format!(
            "the new weight cannot replace {from}, the weight it is made from"
        )));
    }
    if let Some(Design {
        weight,
        replicates: None,
        taylor: Some(t),
    }) = &design
    {
        if let (true, Some(c)) = (*weight == from, &t.calibration) {
            return Err(WeightError::Weight(format!(
                "the design's weight {from} was itself adjusted ({} of {} to {}): adjusting it again would lose that adjustment's residuals in the standard errors; adjust {} to all the totals at once",
                c.method, c.source, c.terms, c.source
            )));
        }
    }
    Ok(())
}

/// What a Taylor design keeps of the adjustment (`None`: trimming only).
fn calibration_of(spec: &WeightSpec, from: &str, model: &Model) -> Option<Calibration> {
    let (method, terms) = match &spec.method {
        Method::PostStratify(t) => ("poststrata", t),
        Method::Rake(t) => ("rake", t),
        Method::Calibrate { model, .. } => ("calibrate", model),
        Method::None => return None,
    };
    Some(Calibration {
        source: from.to_string(),
        method: method.to_string(),
        terms: terms.clone(),
        variables: model.inputs.iter().map(|i| i.var.name.clone()).collect(),
        totals: spec
            .totals
            .iter()
            .map(|r| (r.variable.clone(), r.value.clone(), r.total))
            .collect(),
        allow_missing_cells: spec.allow_missing_cells,
        trimmed: spec.trim.is_some(),
    })
}

/// Lists what puts records outside.
fn outside_detail(model: &Model, groups: &Groups) -> String {
    let o = &groups.outside;
    let mut parts = Vec::new();
    for (j, inp) in model.inputs.iter().enumerate() {
        if o.missing[j] > 0 {
            parts.push(format!("{}: {} missing", inp.var.name, o.missing[j]));
        }
        if !o.unlisted[j].is_empty() {
            let vals: Vec<String> = o.unlisted[j]
                .iter()
                .take(5)
                .map(|(bits, n)| {
                    let code = f64::from_bits(*bits);
                    let shown = if inp.var.kind == microtab_store::Kind::String {
                        inp.dict.get(code as usize).cloned().unwrap_or_default()
                    } else {
                        microtab_store::codec::display_code(&inp.var, code)
                    };
                    format!("{shown} ({n})")
                })
                .collect();
            let more = if o.unlisted[j].len() > 5 {
                format!(" and {} more values", o.unlisted[j].len() - 5)
            } else {
                String::new()
            };
            parts.push(format!(
                "{} values the totals do not list: {}{more}",
                inp.var.name,
                vals.join(", ")
            ));
        }
    }
    for (t, &n) in model.terms.iter().zip(&o.cells) {
        if n > 0 {
            parts.push(format!("{n} in cells of {} the totals do not list", t.name));
        }
    }
    parts.join("; ")
}

/// Each weight's sum per group (in blocks of fixed size, added in order:
/// the same sums whatever the number of threads).
fn group_sums(
    cols: &[(Column, Variable)],
    groups: &Groups,
    ngroups: usize,
) -> Result<Vec<Vec<f64>>, WeightError> {
    let rows = groups.of_record.len();
    let blocks = rows.div_ceil(write::BLOCK);
    cols.par_iter()
        .map(|(col, var)| -> Result<Vec<f64>, WeightError> {
            let name = &var.name;
            let scale = var.scale();
            let parts = (0..blocks)
                .into_par_iter()
                .map(|b| -> Result<Vec<f64>, WeightError> {
                    let start = b * write::BLOCK;
                    let n = write::BLOCK.min(rows - start);
                    model::block_values(col, var, start, n, |vals| {
                        let mut s = vec![0.0; ngroups];
                        let of = &groups.of_record[start..start + n];
                        for (k, (&v, &g)) in vals.iter().zip(of).enumerate() {
                            if v.is_nan() {
                                return Err(WeightError::Weight(format!(
                                    "the weight {name} is missing in record {}",
                                    start + k + 1
                                )));
                            }
                            if g != OUT {
                                s[g as usize] += v / scale;
                            }
                        }
                        Ok(s)
                    })?
                })
                .collect::<Result<Vec<_>, _>>()?;
            let mut total = vec![0.0; ngroups];
            for p in parts {
                for (t, x) in total.iter_mut().zip(p) {
                    *t += x;
                }
            }
            Ok(total)
        })
        .collect()
}

/// The range, sum and Kish design effect of a weight column.
fn spread_of(col: &Column, var: &Variable) -> Result<Spread, WeightError> {
    let rows = col.rows();
    let scale = var.scale();
    let blocks = rows.div_ceil(write::BLOCK);
    // Per block: min, max, records ≤ 0, records > 0, Σw, Σw (w > 0),
    // Σw² (w > 0).
    type Part = (f64, f64, u64, u64, f64, f64, f64);
    let parts = (0..blocks)
        .into_par_iter()
        .map(|b| -> Result<Part, WeightError> {
            let start = b * write::BLOCK;
            let n = write::BLOCK.min(rows - start);
            model::block_values(col, var, start, n, |vals| {
                let mut p: Part = (f64::INFINITY, f64::NEG_INFINITY, 0, 0, 0.0, 0.0, 0.0);
                for &v in vals {
                    let x = v / scale;
                    if x.is_nan() {
                        continue;
                    }
                    p.0 = p.0.min(x);
                    p.1 = p.1.max(x);
                    p.4 += x;
                    if x <= 0.0 {
                        p.2 += 1;
                    } else {
                        p.3 += 1;
                        p.5 += x;
                        p.6 += x * x;
                    }
                }
                p
            })
        })
        .collect::<Result<Vec<_>, _>>()?;
    let mut t: Part = (f64::INFINITY, f64::NEG_INFINITY, 0, 0, 0.0, 0.0, 0.0);
    for p in parts {
        t = (
            t.0.min(p.0),
            t.1.max(p.1),
            t.2 + p.2,
            t.3 + p.3,
            t.4 + p.4,
            t.5 + p.5,
            t.6 + p.6,
        );
    }
    Ok(Spread {
        min: t.0,
        max: t.1,
        nonpositive: t.2,
        sum: t.4,
        kish_deff: if t.5 > 0.0 {
            t.3 as f64 * t.6 / (t.5 * t.5)
        } else {
            f64::NAN
        },
    })
}

/// Checks a categorical term's cells against the full-sample weight:
/// cells with a total and no weight (left out with `allow`), cells with
/// records and a total of 0.
fn check_cells(
    t: &model::Term,
    cell: &[u32],
    w: &[f64],
    totals: &mut [f64],
    allow: bool,
    empty: &mut Vec<String>,
) -> Result<(), WeightError> {
    let mut sum = vec![0.0; totals.len()];
    let mut n = vec![0u64; totals.len()];
    for (&c, &wg) in cell.iter().zip(w) {
        sum[c as usize] += wg;
        n[c as usize] += 1;
    }
    for (c, tot) in totals.iter_mut().enumerate() {
        if sum[c] == 0.0 && *tot != 0.0 {
            if !allow {
                return Err(WeightError::EmptyCell {
                    weight: "the sample".into(),
                    term: t.name.clone(),
                    value: t.cells[c].shown.clone(),
                    total: *tot,
                });
            }
            empty.push(format!("{} = {}", t.name, t.cells[c].shown));
            *tot = 0.0;
        } else if *tot == 0.0 && sum[c] != 0.0 {
            return Err(WeightError::ZeroTotal {
                term: t.name.clone(),
                value: t.cells[c].shown.clone(),
                records: n[c],
            });
        }
    }
    Ok(())
}

/// Margins of a raking must have the same sum.
fn check_margins(model: &Model, margins: &[(Vec<u32>, Vec<f64>)]) -> Result<(), WeightError> {
    let sums: Vec<f64> = margins.iter().map(|m| m.1.iter().sum()).collect();
    let first = sums[0];
    if sums
        .iter()
        .any(|s| (s - first).abs() > 1e-9 * first.abs().max(1.0))
    {
        let list: Vec<String> = model
            .terms
            .iter()
            .zip(&sums)
            .map(|(t, s)| format!("{} sums to {}", t.name, fmt_total(*s)))
            .collect();
        return Err(WeightError::Inconsistent(list.join(", ")));
    }
    Ok(())
}

/// A total as shown in messages.
fn fmt_total(x: f64) -> String {
    // Twelve significant digits: sums of the totals carry rounding.
    let x: f64 = format!("{x:.11e}").parse().unwrap_or(x);
    if x == x.round() && x.abs() < 1e15 {
        format!("{x:.0}")
    } else {
        format!("{x}")
    }
}

/// R's model columns (treatment contrasts: each categorical term's first
/// cell, in the order of its levels, left out) among `cols`, with their
/// totals, for its rescaling.
fn r_columns(model: &Model, cols: &[Vec<f64>], totals: &[f64]) -> Vec<(Vec<f64>, f64)> {
    let mut r_cols = Vec::new();
    let mut at = usize::from(model.intercept.is_some());
    if model.intercept.is_some() {
        r_cols.push((cols[0].clone(), totals[0]));
    }
    for t in &model.terms {
        if t.numeric {
            r_cols.push((cols[at].clone(), totals[at]));
            at += 1;
            continue;
        }
        let mut order: Vec<usize> = (0..t.cells.len()).collect();
        order.sort_by_key(|&c| {
            t.index
                .iter()
                .find(|(_, &i)| i == c)
                .map(|(k, _)| k.clone())
                .unwrap_or_default()
        });
        for &c in order.iter().skip(1) {
            r_cols.push((cols[at + c].clone(), totals[at + c]));
        }
        at += t.cells.len();
    }
    r_cols
}

/// A calibration model over the groups.
struct Matrix {
    /// The kept columns' values, row-major (a row per group).
    x: Vec<f64>,
    /// The kept columns, as indices into `names` and `totals`.
    kept: Vec<usize>,
    /// Every column's term and category.
    names: Vec<(String, String)>,
    /// Every column's total.
    totals: Vec<f64>,
    /// R's columns (treatment contrasts) and their totals.
    r_cols: Vec<(Vec<f64>, f64)>,
}

/// The calibration model's rows per group (`p` values each), the names
/// and totals of its columns, after leaving out columns that other
/// columns determine over the sample (the totals of those must agree).
#[allow(clippy::type_complexity)]
fn design_matrix(
    model: &Model,
    groups: &Groups,
    w: &[f64],
    allow: bool,
    empty: &mut Vec<String>,
) -> Result<Matrix, WeightError> {
    // Every column, in order: the intercept, then each term's.
    let g = groups.keys.len();
    let mut cols: Vec<Vec<f64>> = Vec::new();
    let mut names: Vec<(String, String)> = Vec::new();
    let mut totals: Vec<f64> = Vec::new();
    // Cells left out (a total but no records, allowed).
    let mut left_out: Vec<bool> = Vec::new();
    if let Some(n) = model.intercept {
        cols.push(vec![1.0; g]);
        left_out.push(false);
        names.push(("(Intercept)".into(), String::new()));
        totals.push(n);
    }
    for t in &model.terms {
        if t.numeric {
            let j = t.vars[0];
            cols.push(groups.keys.iter().map(|k| k[j]).collect());
            left_out.push(false);
            names.push((t.name.clone(), String::new()));
            totals.push(t.total);
        } else {
            let cell: Vec<usize> = groups
                .keys
                .iter()
                .map(|k| model::cell_of(t, k).expect("a listed cell"))
                .collect();
            let mut tt: Vec<f64> = t.cells.iter().map(|c| c.total).collect();
            let cell32: Vec<u32> = cell.iter().map(|&c| c as u32).collect();
            check_cells(t, &cell32, w, &mut tt, allow, empty)?;
            for (idx, (c, tc)) in t.cells.iter().zip(&tt).enumerate() {
                cols.push(cell.iter().map(|&x| (x == idx) as u8 as f64).collect());
                names.push((t.name.clone(), c.shown.clone()));
                totals.push(c.total);
                left_out.push(*tc == 0.0 && c.total != 0.0);
            }
        }
    }
    // Columns another combination determines: dropped, their totals
    // checked (incremental Cholesky of the weighted cross products).
    let p = cols.len();
    let dot = |a: &[f64], b: &[f64]| -> f64 {
        a.iter().zip(b).zip(w).map(|((x, y), wg)| x * y * wg).sum()
    };
    let mut kept: Vec<usize> = Vec::new();
    let mut l: Vec<Vec<f64>> = Vec::new(); // rows of L over kept columns
    for j in 0..p {
        let mjj = dot(&cols[j], &cols[j]);
        if mjj == 0.0 {
            // No weight at all: an empty cell (checked above, left out
            // when allowed) or a numeric variable that is zero throughout.
            if totals[j] != 0.0 && !left_out[j] {
                return Err(WeightError::EmptyCell {
                    weight: "the sample".into(),
                    term: names[j].0.clone(),
                    value: names[j].1.clone(),
                    total: totals[j],
                });
            }
            continue;
        }
        let b: Vec<f64> = kept.iter().map(|&k| dot(&cols[k], &cols[j])).collect();
        // Forward solve L r = b.
        let mut r = vec![0.0; kept.len()];
        for i in 0..kept.len() {
            let mut s = b[i];
            for k in 0..i {
                s -= l[i][k] * r[k];
            }
            r[i] = s / l[i][i];
        }
        let d = mjj - r.iter().map(|x| x * x).sum::<f64>();
        if d <= 1e-9 * mjj {
            // Dependent: x_j = Σ c_k x_k, c = L'⁻¹ r.
            let mut c = r.clone();
            for i in (0..kept.len()).rev() {
                for k in i + 1..kept.len() {
                    c[i] -= l[k][i] * c[k];
                }
                c[i] /= l[i][i];
            }
            let implied: f64 = c.iter().zip(&kept).map(|(ck, &k)| ck * totals[k]).sum();
            let scale = totals[j].abs().max(implied.abs()).max(1.0);
            if (implied - totals[j]).abs() > 1e-9 * scale {
                let what = |k: usize| {
                    if names[k].1.is_empty() {
                        names[k].0.clone()
                    } else {
                        format!("{} = {}", names[k].0, names[k].1)
                    }
                };
                return Err(WeightError::Inconsistent(format!(
                    "the total of {} is {}, but the other totals make it {} (each variable's categories must add up to the same population)",
                    what(j),
                    fmt_total(totals[j]),
                    fmt_total(implied)
                )));
            }
            continue;
        }
        let mut row = r;
        row.push(d.sqrt());
        l.push(row);
        kept.push(j);
    }
    let q = kept.len();
    let mut x = vec![0.0; g * q];
    for (i, &k) in kept.iter().enumerate() {
        for (gi, &v) in cols[k].iter().enumerate() {
            x[gi * q + i] = v;
        }
    }
    let r_cols = r_columns(model, &cols, &totals);
    Ok(Matrix {
        x,
        kept,
        names,
        totals,
        r_cols,
    })
}

/// Each weight's trimming passes, from its adjusted values (none without
/// bounds), and the full-sample records outside the bounds before them.
fn trim_all(
    ds: &Dataset,
    wnames: &[String],
    groups: &Groups,
    results: &[solve::Solved],
    bounds: Option<(f64, f64)>,
) -> Result<(Vec<Vec<f64>>, u64), WeightError> {
    let Some(bounds) = bounds else {
        return Ok((vec![Vec::new(); results.len()], 0));
    };
    if bounds.0.is_nan() || bounds.1.is_nan() || bounds.0 >= bounds.1 || bounds.0 < 0.0 {
        return Err(WeightError::Spec(format!(
            "trimming bounds must be 0 ≤ low < high, not [{}, {}]",
            bounds.0, bounds.1
        )));
    }
    let each = wnames
        .par_iter()
        .zip(results)
        .map(|(name, r)| {
            let vals = adjusted(ds, name, groups, &r.g)?;
            let outside = vals
                .iter()
                .filter(|&&x| x != 0.0 && (x < bounds.0 || x > bounds.1))
                .count() as u64;
            let shares =
                solve::trim_shares(&vals, bounds, 1000).map_err(|_| WeightError::Trim {
                    weight: name.clone(),
                    lo: bounds.0,
                    hi: bounds.1,
                })?;
            Ok((shares, outside))
        })
        .collect::<Result<Vec<_>, WeightError>>()?;
    let full = each[0].1;
    Ok((each.into_iter().map(|(shares, _)| shares).collect(), full))
}

/// A weight's adjusted values, every record (for trimming).
fn adjusted(ds: &Dataset, name: &str, groups: &Groups, g: &[f64]) -> Result<Vec<f64>, WeightError> {
    let rows = ds.rows() as usize;
    let var = ds.variable(name)?.clone();
    let col = ds.column(name)?;
    let scale = var.scale();
    let mut out = vec![0.0; rows];
    out.par_chunks_mut(write::BLOCK).enumerate().try_for_each(
        |(b, o)| -> Result<(), WeightError> {
            let start = b * write::BLOCK;
            let (mut buf, mut vals) = (Vec::new(), Vec::new());
            model::read_block(&col, &var, start, o.len(), &mut buf, &mut vals)?;
            let of = &groups.of_record[start..start + o.len()];
            for ((x, &v), &gid) in o.iter_mut().zip(&vals).zip(of) {
                let a = v / scale;
                *x = if gid == OUT { a } else { a * g[gid as usize] };
            }
            Ok(())
        },
    )?;
    Ok(out)
}

/// Each target's total, and what the old and new full-sample weights
/// give it (from the columns as written).
fn achieved_totals(
    ds: &Dataset,
    model: &Model,
    groups: &Groups,
    new_and_old: [(Column, Variable); 2],
    old_sums: &[f64],
    targets: &Targets,
) -> Result<Vec<Achieved>, WeightError> {
    if targets.totals.is_empty() {
        return Ok(Vec::new());
    }
    let g = groups.keys.len();
    let new_sums = group_sums(&new_and_old[..1], groups, g)?.remove(0);
    let sums = [new_sums.as_slice(), old_sums];
    let outside = if groups.outside.records > 0 {
        outside_sums(ds, model, groups, &new_and_old)?
    } else {
        std::collections::HashMap::new()
    };
    let mut out = Vec::new();
    for ((term, value), &total) in targets.names.iter().zip(&targets.totals) {
        let mut a = [0.0, 0.0];
        if term == "(Intercept)" {
            a = [sums[0].iter().sum(), sums[1].iter().sum()];
        } else {
            let t = model
                .terms
                .iter()
                .find(|t| t.name == *term)
                .expect("a term");
            for (gi, k) in groups.keys.iter().enumerate() {
                let x = if t.numeric {
                    k[t.vars[0]]
                } else {
                    let c = model::cell_of(t, k).expect("a listed cell");
                    (t.cells[c].shown == *value) as u8 as f64
                };
                a[0] += sums[0][gi] * x;
                a[1] += sums[1][gi] * x;
            }
        }
        if let Some(o) = outside.get(&(term.clone(), value.clone())) {
            a[0] += o[0];
            a[1] += o[1];
        }
        out.push(Achieved {
            term: term.clone(),
            value: value.clone(),
            total,
            achieved: a[0],
            before: a[1],
        });
    }
    Ok(out)
}

/// What the records outside the model (which keep their weight) add to
/// each target whose category they are in: per (term, category), the
/// sums of the new and the old weight (× the variable for a numeric
/// term; the intercept's category is empty).
#[allow(clippy::type_complexity)]
fn outside_sums(
    ds: &Dataset,
    model: &Model,
    groups: &Groups,
    new_and_old: &[(Column, Variable)],
) -> Result<std::collections::HashMap<(String, String), [f64; 2]>, WeightError> {
    let rows = groups.of_record.len();
    let inputs: Vec<Column> = model
        .inputs
        .iter()
        .map(|i| ds.column(&i.var.name))
        .collect::<Result<_, _>>()?;
    let mut out: std::collections::HashMap<(String, String), [f64; 2]> = Default::default();
    let (mut buf, mut vals) = (Vec::new(), Vec::new());
    for start in (0..rows).step_by(write::BLOCK) {
        let n = write::BLOCK.min(rows - start);
        let of = &groups.of_record[start..start + n];
        if !of.contains(&OUT) {
            continue;
        }
        let mut x: Vec<Vec<f64>> = Vec::new();
        for (c, inp) in inputs.iter().zip(&model.inputs) {
            model::read_block(c, &inp.var, start, n, &mut buf, &mut vals)?;
            x.push(vals.clone());
        }
        let mut w: Vec<Vec<f64>> = Vec::new();
        for (c, v) in new_and_old {
            model::read_block(c, v, start, n, &mut buf, &mut vals)?;
            let scale = v.scale();
            w.push(vals.iter().map(|a| a / scale).collect());
        }
        for (i, _) in of.iter().enumerate().filter(|(_, g)| **g == OUT) {
            let mut add = |key: (String, String), m: f64| {
                let e = out.entry(key).or_insert([0.0, 0.0]);
                e[0] += w[0][i] * m;
                e[1] += w[1][i] * m;
            };
            add(("(Intercept)".into(), String::new()), 1.0);
            for t in &model.terms {
                if t.numeric {
                    let j = t.vars[0];
                    let v = x[j][i] / model.inputs[j].var.scale();
                    if !v.is_nan() {
                        add((t.name.clone(), String::new()), v);
                    }
                    continue;
                }
                let levels: Option<Vec<u32>> = t
                    .vars
                    .iter()
                    .map(|&j| {
                        let v = x[j][i];
                        (!v.is_nan())
                            .then(|| {
                                model.inputs[j]
                                    .levels
                                    .binary_search_by(|l| l.total_cmp(&v))
                                    .ok()
                            })
                            .flatten()
                            .map(|l| l as u32)
                    })
                    .collect();
                if let Some(c) = levels.and_then(|l| t.index.get(&l).copied()) {
                    add((t.name.clone(), t.cells[c].shown.clone()), 1.0);
                }
            }
        }
    }
    Ok(out)
}
