//! Ratios of two totals, `R = Σ w·y / Σ w·x` (R `svyratio`, Stata
//! `ratio`), per group, with design-based standard errors.
//!
//! Records with either variable missing are out (R's `na.rm = TRUE`: a
//! domain, not a rebuilt design). Under replicate weights each
//! replicate's ratio is `Σ w_r·y / Σ w_r·x`; under a Taylor design the
//! variance is the linearization `(V_Y − 2R·C_YX + R²·V_X) / X²` from the
//! design covariance of the two totals, which is R's `svyratio` (the
//! variance of the scores `(y − R·x)/X`). Without a design each record is
//! its own PSU: R's `svydesign(ids = ~1)` of the dataset, of which a
//! filter or a group is a domain.

use crate::model::Inference;
use crate::sums::{Scan, Spec, Sums};
use crate::survey::{Provenance, Survey};
use crate::{Request, Result};
use microtab_engine::{Category, ScanOptions, WeightCases};
use microtab_store::Dataset;
use serde::Serialize;
use std::sync::Arc;

/// A ratio of totals per group.
#[derive(Debug, Clone, Serialize)]
pub struct Ratio {
    /// The dataset (its path; the HTTP API gives its served name).
    pub dataset: String,
    /// The numerator's variable.
    pub numerator: String,
    /// The denominator's variable.
    pub denominator: String,
    /// The grouping variables.
    pub by: Vec<String>,
    /// Per group with records (in the grouping variables' order; none
    /// without grouping variables).
    pub groups: Vec<RatioRow>,
    /// All groups together.
    pub total: RatioRow,
    /// Degrees of freedom of the t tests and intervals: the design's
    /// (PSUs − strata, or the replicates' rank − 1), records − 1 without
    /// one.
    pub df: f64,
    /// How the standard errors were computed, and over what.
    #[serde(flatten)]
    pub provenance: Provenance,
}

/// One group's ratio.
#[derive(Debug, Clone, Serialize)]
pub struct RatioRow {
    /// The group's category of each grouping variable (none for the
    /// total; `{value, label}` in JSON, as a means group's).
    #[serde(serialize_with = "crate::json::categories_json")]
    pub by: Vec<Category>,
    /// Records with both variables.
    pub n: u64,
    /// `Σ w·y` over them.
    pub numerator_total: f64,
    /// `Σ w·x` over them.
    pub denominator_total: f64,
    /// The ratio with its SE, t (against 0), p and interval; `None` when
    /// the denominator's total is 0 (the SE `NaN`, `null` in JSON, when the
    /// variance cancels to rounding).
    #[serde(flatten)]
    pub inference: Option<Inference>,
    /// Its coefficient of variation (SE / |ratio|).
    pub cv: Option<f64>,
    /// Fewer records than the request's `min_n`, or a CV above its
    /// `max_cv`.
    pub unreliable: bool,
    /// Replicates left out (their denominator total is 0 in the group).
    pub replicates_dropped: u32,
}

/// The numeric variable `name` (text has no totals).
pub(crate) fn numeric<'a>(ds: &'a Dataset, name: &str) -> Result<&'a str> {
    let v = ds.variable(name)?;
    if v.kind == microtab_store::Kind::String {
        return Err(crate::Error::NotNumeric {
            variable: v.name.clone(),
        });
    }
    Ok(&v.name)
}

/// An estimate with its SE and the t test and interval on `df`.
pub(crate) fn inference(est: f64, se: f64, df: f64, level: f64) -> Inference {
    let t = est / se;
    let q = microtab_engine::stats::t_quantile(level, df);
    Inference {
        estimate: est,
        se,
        t,
        p: crate::model::summary::p_two_sided(t, Some(df)),
        lo: est - q * se,
        hi: est + q * se,
    }
}

/// The sums of a ratio: per record `(y, x)` when both are present, the
/// replicates' (under replicate weights), else the design covariance of
/// the two totals (Taylor, or each record its own PSU).
fn spec(replicates: bool) -> Spec {
    Spec {
        k: 2,
        values: 2,
        record: Arc::new(|v: &[f64], a: &mut [f64]| {
            if v[0].is_nan() || v[1].is_nan() {
                return false;
            }
            (a[0], a[1]) = (v[0], v[1]);
            true
        }),
        replicates,
        taylor: (!replicates).then_some(None),
        full: true,
        all: !replicates,
        skip_zero: false,
    }
}

/// The ratio's variables (numeric) and the scan of them under `design`.
fn scan_of<'a>(
    ds: &'a Dataset,
    req: &Request,
    (numerator, denominator, by): (&str, &str, &[String]),
    design: (&Option<(microtab_store::Design, Survey)>, bool),
    opts: &'a ScanOptions,
) -> Result<([String; 2], Scan<'a>)> {
    let values = [
        numeric(ds, numerator)?.to_string(),
        numeric(ds, denominator)?.to_string(),
    ];
    let scan = Scan::new(ds, req, (by, &values), design, opts)?;
    Ok((values, scan))
}

/// A ratio's sums over part of the data (a range of records, one of
/// several datasets): the fold's, replicates included, to merge with the
/// other parts' (see [`crate::Partial`]).
pub(crate) fn part(
    ds: &Dataset,
    req: &Request,
    ratio: (&str, &str, &[String]),
    opts: &ScanOptions,
) -> Result<crate::sums::SumsPart> {
    let design = crate::checks::design_of(ds, req, true)?;
    let (_, scan) = scan_of(ds, req, ratio, (&design, false), opts)?;
    scan.part(spec(scan.replicated()))
}

/// The ratio from merged parts' sums (see [`part`]).
pub(crate) fn of_parts(
    sums: crate::sums::SumsPart,
    req: &Request,
    (numerator, denominator, by): (&str, &str, &[String]),
    (dataset, survey, weight, cases): (String, Option<Survey>, Option<&str>, Option<WeightCases>),
) -> Result<Ratio> {
    let records = sums.records();
    let sums = sums.finish()?;
    let replicated = survey
        .as_ref()
        .is_some_and(|v| v.info.method == "replicate");
    let (survey_, method) = survey_of(req, survey.as_ref(), weight, records);
    let values = [numerator.to_string(), denominator.to_string()];
    build(
        &sums,
        req,
        (&values, by, replicated),
        (survey_, method, survey.as_ref()),
        (dataset, weight, &cases),
    )
}

/// The design and the no-design stand-in (each record its own PSU).
pub(crate) fn survey_of(
    req: &Request,
    design: Option<&Survey>,
    weight: Option<&str>,
    records: u64,
) -> (Survey, String) {
    match design {
        Some(v) => {
            let method = match v.info.method {
                "replicate" => format!("replicate weights ({})", v.info.kind),
                _ => "linearization".to_string(),
            };
            (v.clone(), method)
        }
        None => (
            Survey::records(weight, records, req.level, (req.min_n, req.max_cv)),
            "linearization, each record independent (no survey design)".to_string(),
        ),
    }
}

/// A filter term keeping the records with a value of `var`.
pub(crate) fn present(var: &str) -> microtab_engine::Term {
    microtab_engine::Term {
        var: var.to_string(),
        cond: microtab_engine::Cond::Set(vec![microtab_engine::Item::Range(None, None)]),
        text: format!("{var}(*-*)"),
    }
}

/// Under replicate weights, the groups' totals and each replicate's from
/// the engine's means kernel (exact integer sums, the cost of a `means`
/// query each): `Σ w·y` and `Σ w_r·y` over the records with both values,
/// then the same of `x`.
fn replicate_sums(
    ds: &Dataset,
    query: &microtab_engine::Query,
    (values, design): (&[String; 2], Option<&microtab_store::Design>),
    opts: &ScanOptions,
) -> Result<Sums> {
    let reps = design
        .and_then(|d| d.replicates.as_ref())
        .map_or(Vec::new(), |r| r.weights.clone());
    let cube = |measure: &str, other: &str| {
        let mut filter = query.filter.clone();
        filter.push(present(other));
        let q = microtab_engine::Query {
            filter,
            measure: Some(measure.to_string()),
            replicates: reps.clone(),
            fold: None,
            ..query.clone()
        };
        microtab_engine::run_with(ds, &q, opts)
    };
    let (cy, cx) = (cube(&values[0], &values[1])?, cube(&values[1], &values[0])?);
    let cells = cy.counts.len();
    let r = reps.len();
    let moments = |c: &microtab_engine::Cube| c.moments.clone().unwrap_or_default();
    let (my, mx) = (moments(&cy), moments(&cx));
    let wx = |c: &microtab_engine::Cube| {
        c.replicates
            .as_ref()
            .and_then(|x| x.wx.clone())
            .unwrap_or_default()
    };
    let (ry, rx) = (wx(&cy), wx(&cx));
    let groups: Vec<crate::sums::Group> = (0..cells)
        .map(|c| {
            let total = |m: &[microtab_engine::Moments]| m.get(c).map_or(0.0, |m| m.mean * m.w);
            crate::sums::Group {
                n: my.get(c).map_or(0, |m| m.n),
                t: vec![total(&my), total(&mx)],
                reps: (0..r).flat_map(|k| [ry[k][c], rx[k][c]]).collect(),
            }
        })
        .collect();
    let mut all = crate::sums::Group {
        n: 0,
        t: vec![0.0; 2],
        reps: vec![0.0; 2 * r],
    };
    for g in &groups {
        all.absorb(g);
    }
    Ok(Sums {
        groups,
        all,
        cov: Vec::new(),
        psus: Vec::new(),
        categories: cy.dims.iter().map(|d| d.categories.clone()).collect(),
        names: cy.dims.iter().map(|d| d.var.name.clone()).collect(),
    })
}

/// Under a Taylor design, the groups' totals and the design covariance
/// of each group's two totals from the engine's Taylor sums in one scan
/// of the means kernel: of `y` with `w·x` in the weight's place
/// ([`microtab_engine::TaylorQuery::times`]), so each cell's `W` is
/// `Σ w·x`; and `Σ w·x` itself from a means query of `x` without the
/// design (the records with both values in each).
fn taylor_sums(
    ds: &Dataset,
    query: &microtab_engine::Query,
    (values, t): (&[String; 2], &microtab_store::Taylor),
    opts: &ScanOptions,
) -> Result<Sums> {
    let tq = microtab_engine::TaylorQuery {
        margins: vec![microtab_engine::Margin {
            keep: vec![false; query.group_by.len()],
            skip_missing: false,
        }],
        times: Some(values[1].clone()),
        ..crate::taylor::query_of(t)
    };
    let q = microtab_engine::Query {
        measure: Some(values[0].clone()),
        taylor: Some(tq),
        fold: None,
        ..query.clone()
    };
    let mut cy = microtab_engine::run_with(ds, &q, opts)?;
    if let Some(c) = &t.calibration {
        // A weight adjusted to population totals: its residuals.
        crate::weighting::correct(ds, &q, t, c, &mut cy, (opts, false))?;
    }
    let tc = cy.taylor.as_ref().expect("a Taylor query's sums");
    if tc.unknown_strata > 0 {
        return Err(crate::Error::UnknownStrata {
            records: tc.unknown_strata,
        });
    }
    let mut filter = query.filter.clone();
    filter.push(present(&values[0]));
    let qx = microtab_engine::Query {
        filter,
        measure: Some(values[1].clone()),
        fold: None,
        ..query.clone()
    };
    let cx = microtab_engine::run_with(ds, &qx, opts)?;
    if cx.counts != cy.counts {
        // Both count the records with both values: a difference is a bug.
        return Err(crate::Error::Engine(microtab_engine::Error::Invalid(
            "the ratio's two scans counted different records".into(),
        )));
    }
    let total = |c: &microtab_engine::Cube, i: usize| {
        c.moments
            .as_ref()
            .and_then(|m| m.get(i))
            .map_or(0.0, |m| m.mean * m.w)
    };
    // `[Var(Y), Cov(Y, X), Cov(X, Y), Var(X)]` from `[Var(W), Cov(W, Y),
    // Var(Y)]` of `W = Σ w·x`, scaled for averaged lonely PSUs.
    let cov = |v: [f64; 3], scale: f64| {
        let [vx, c, vy] = v.map(|x| x * scale);
        vec![vy, c, c, vx]
    };
    let cells = cy.counts.len();
    let groups: Vec<crate::sums::Group> = (0..cells)
        .map(|c| crate::sums::Group {
            n: cy.counts[c],
            t: vec![total(&cy, c), total(&cx, c)],
            reps: Vec::new(),
        })
        .collect();
    let mut all = crate::sums::Group {
        n: 0,
        t: vec![0.0; 2],
        reps: Vec::new(),
    };
    for g in &groups {
        all.absorb(g);
    }
    let mut covs: Vec<Vec<f64>> = (0..cells)
        .map(|c| cov(tc.cell[c], tc.cell_scale[c]))
        .collect();
    let whole = tc
        .margins
        .first()
        .and_then(|m| m.var.first().copied())
        .unwrap_or([0.0; 3]);
    covs.push(cov(whole, tc.all_scale));
    Ok(Sums {
        groups,
        all,
        cov: covs,
        psus: Vec::new(),
        categories: cy.dims.iter().map(|d| d.categories.clone()).collect(),
        names: cy.dims.iter().map(|d| d.var.name.clone()).collect(),
    })
}

/// The ratio `numerator / denominator` per group of `by` over `ds`.
pub fn ratio(
    ds: &Dataset,
    req: &Request,
    (numerator, denominator, by): (&str, &str, &[String]),
    opts: &ScanOptions,
) -> Result<Ratio> {
    let design = crate::checks::design_of(ds, req, false)?;
    let (values, scan) = scan_of(ds, req, (numerator, denominator, by), (&design, true), opts)?;
    let replicated = scan.replicated();
    let taylor = design.as_ref().and_then(|(d, _)| d.taylor.as_ref());
    let sums = match taylor {
        _ if replicated => replicate_sums(
            ds,
            &scan.query,
            (&values, design.as_ref().map(|(d, _)| d)),
            opts,
        )?,
        Some(t) => taylor_sums(ds, &scan.query, (&values, t), opts)?,
        None => scan.run(spec(false))?,
    };
    let cases = crate::checks::weights_ok(ds, req, &scan.query, opts)?;
    let survey = design.as_ref().map(|(_, v)| v);
    let weight = scan.query.weight.as_deref();
    let (survey_, method) = survey_of(req, survey, weight, scan.plain_df_records());
    build(
        &sums,
        req,
        (&values, by, replicated),
        (survey_, method, survey),
        (ds.dir().display().to_string(), weight, &cases),
    )
}

/// The ratio per group and in total from the groups' sums.
fn build(
    sums: &Sums,
    req: &Request,
    (values, by, replicated): (&[String; 2], &[String], bool),
    (survey, method, design): (Survey, String, Option<&Survey>),
    (dataset, weight, cases): (String, Option<&str>, &Option<WeightCases>),
) -> Result<Ratio> {
    let mut dropped_max = 0;
    let Sums {
        groups,
        all,
        cov,
        categories,
        ..
    } = sums;
    let shape: Vec<usize> = categories.iter().map(|c| c.len().max(1)).collect();
    let df = survey.info.df;
    let mut cancelled = false;
    let mut row = |g: &crate::sums::Group, c: usize, dropped: &mut u32| -> RatioRow {
        let (y, x) = (g.t[0], g.t[1]);
        let est = y / x;
        let mut replicates_dropped = 0;
        let var = if replicated {
            let reps: Vec<f64> = g.reps.chunks(2).map(|r| r[0] / r[1]).collect();
            let v = survey.variance(est, &reps);
            *dropped = (*dropped).max(v.dropped);
            replicates_dropped = v.dropped;
            v.v
        } else {
            let v = &cov[c];
            // The linearization from the totals' covariance cancels: when
            // what is left is rounding (y nearly proportional to x), the
            // variance is not known to any digit.
            let (a, b, d) = (v[0], v[1], v[3]);
            let size = a.abs() + 2.0 * (est * b).abs() + est * est * d.abs();
            if size > 0.0 && (a - 2.0 * est * b + est * est * d).abs() <= 1e-11 * size {
                cancelled = true;
                f64::NAN
            } else {
                crate::survey::ratio_variance(y, x, [a, b, d])
            }
        };
        let inference = (x != 0.0 && g.n > 0).then(|| {
            let se = if var.is_nan() {
                f64::NAN
            } else {
                var.max(0.0).sqrt()
            };
            inference(est, se, df, req.level)
        });
        let cv = inference
            .as_ref()
            .filter(|i| i.estimate != 0.0 && i.se.is_finite())
            .map(|i| i.se / i.estimate.abs());
        RatioRow {
            by: Vec::new(),
            n: g.n,
            numerator_total: y,
            denominator_total: x,
            inference,
            cv,
            unreliable: g.n < req.min_n || cv.is_some_and(|cv| cv > req.max_cv),
            replicates_dropped,
        }
    };
    let rows = groups
        .iter()
        .enumerate()
        .filter(|(_, g)| g.n > 0 && !by.is_empty())
        .map(|(c, g)| {
            let mut r = row(g, c, &mut dropped_max);
            r.by = microtab_engine::unravel(c, &shape)
                .iter()
                .enumerate()
                .map(|(d, &i)| categories[d][i].clone())
                .collect();
            r
        })
        .collect();
    let total = row(all, groups.len(), &mut dropped_max);
    if total.n == 0 {
        return Err(crate::Error::NoRecords);
    }
    let mut notes: Vec<String> = crate::checks::missing_weight_note(cases, weight)
        .into_iter()
        .collect();
    if cancelled {
        notes.push(format!(
            "in a group the variance of the ratio cancels to rounding ({} nearly proportional to {}): no standard error",
            values[0], values[1]
        ));
    }
    if dropped_max > 0 {
        notes.push(format!(
            "up to {dropped_max} replicates had a denominator total of 0 in a group and were left out of its variance"
        ));
    }
    Ok(Ratio {
        dataset,
        numerator: values[0].clone(),
        denominator: values[1].clone(),
        by: sums.names.clone(),
        groups: rows,
        total,
        df,
        provenance: Provenance::new(method, design, weight.map(str::to_string), req, notes),
    })
}
