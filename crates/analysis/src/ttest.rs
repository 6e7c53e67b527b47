//! One-sample t tests of means (`means --test-mean VALUE`): each group's
//! mean, and all groups', against a value, as R's `svyttest(I(y − value)
//! ~ 0, subset(design, group), na.rm = TRUE)`.
//!
//! The mean is the ratio `Σ w·y / Σ w` over the records with a value, and
//! its SE the ratio's ([`crate::ratio`]): replicate means, or the
//! linearization over the design's PSUs. The degrees of freedom are R's:
//! `degf` of the group's domain less one — under a Taylor design its
//! PSUs less its strata (those with a record of the group of non-zero
//! weight, with a value or not), under replicate weights the rank of its
//! records' replicate weights less one; without a design each record is a
//! PSU. Unweighted and without a design it is the classic test
//! (`scipy.stats.ttest_1samp`): `SE = sd/√n` on `n − 1` df.

use crate::model::Inference;
use crate::ratio::{inference, survey_of};
use crate::sums::{Scan, Spec};
use crate::{Request, Result};
use microtab_engine::{Category, ScanOptions};
use microtab_store::Dataset;
use serde::Serialize;
use std::collections::HashMap;
use std::sync::Arc;

/// Means tested against a value.
#[derive(Debug, Clone, Serialize)]
pub struct MeanTests {
    /// The value tested.
    pub value: f64,
    /// Per group with records.
    pub groups: Vec<MeanTest>,
    /// All groups together.
    pub total: MeanTest,
    /// How the standard errors were computed.
    pub method: String,
}

/// One group's test.
#[derive(Debug, Clone, Serialize)]
pub struct MeanTest {
    /// The group's category of each grouping variable (none for the
    /// total).
    #[serde(serialize_with = "crate::json::categories_json")]
    pub by: Vec<Category>,
    /// Its mean.
    pub mean: f64,
    /// Degrees of freedom of the test.
    pub df: f64,
    /// The mean less the value, with its SE, t, p and interval (`None`:
    /// no SE, as with a single record).
    #[serde(flatten)]
    pub inference: Option<Inference>,
}

/// Per group (its categories' displayed values; none: all groups), its
/// SD and records, for the classic test.
pub(crate) type Spread = HashMap<Vec<String>, (Option<f64>, u64)>;

/// Tests the mean of `var` in each group of `by` (and in all) against
/// `value`; `spread` is the groups' SDs and records (the classic test's).
pub(crate) fn test_means(
    ds: &Dataset,
    req: &Request,
    (var, by, value): (&str, &[String], f64),
    spread: &Spread,
    opts: &ScanOptions,
) -> Result<MeanTests> {
    let design = crate::checks::design_of(ds, req, false)?;
    let values = [crate::ratio::numeric(ds, var)?.to_string()];
    let scan = Scan::new(ds, req, (by, &values), &design, opts)?;
    let replicated = scan.replicated();
    // Every record of the group counts for its PSUs; those with a value
    // for the mean: `[y, 1]`, else `[0, 0]`.
    let sums = scan.run(Spec {
        k: 2,
        values: 1,
        record: Arc::new(|v: &[f64], a: &mut [f64]| {
            (a[0], a[1]) = if v[0].is_nan() {
                (0.0, 0.0)
            } else {
                (v[0], 1.0)
            };
            true
        }),
        replicates: replicated,
        taylor: (!replicated).then_some(None),
        full: true,
        all: true,
        skip_zero: true,
    })?;
    let cells = sums.groups.len();
    let (ranks, all_rank) = match &design {
        Some((d, _)) if replicated => {
            let reps = &d.replicates.as_ref().expect("replicate weights").weights;
            crate::model::degf::replicate_degf_by(ds, &scan.query, reps, cells, opts)?
        }
        _ => (Vec::new(), 0.0),
    };
    let plain = design.is_none() && scan.query.weight.is_none();
    let (survey, method) = survey_of(req, &design, scan.query.weight.as_deref(), 0);
    let method = if plain {
        "one-sample t test (unweighted, no survey design)".to_string()
    } else {
        method
    };
    let shape: Vec<usize> = sums.categories.iter().map(|c| c.len().max(1)).collect();
    let test = |c: usize, g: &crate::sums::Group, cats: Vec<Category>| -> Option<MeanTest> {
        let (y, w) = (g.t[0], g.t[1]);
        if w == 0.0 {
            return None;
        }
        let mean = y / w;
        let (se, df) = if plain {
            let key: Vec<String> = cats.iter().map(|c| c.display.clone()).collect();
            let (sd, n) = *spread.get(&key)?;
            (sd.map(|s| s / (n as f64).sqrt()), n as f64 - 1.0)
        } else if replicated {
            let reps: Vec<f64> = g.reps.chunks(2).map(|r| r[0] / r[1]).collect();
            let v = survey.variance(mean, &reps).v;
            let df = if c == cells { all_rank } else { ranks[c]? };
            (v.is_finite().then(|| v.max(0.0).sqrt()), df - 1.0)
        } else {
            let v = &sums.cov[c];
            let var = crate::survey::ratio_variance(y, w, [v[0], v[1], v[3]]);
            let (p, h) = sums.psus[c];
            (
                var.is_finite().then(|| var.max(0.0).sqrt()),
                p as f64 - h as f64 - 1.0,
            )
        };
        Some(MeanTest {
            by: cats,
            mean,
            df,
            inference: se
                .filter(|_| df > 0.0)
                .map(|se| inference(mean - value, se, df, req.level)),
        })
    };
    let groups = sums
        .groups
        .iter()
        .enumerate()
        .filter(|(_, g)| g.t[1] != 0.0)
        .filter_map(|(c, g)| {
            let cats = microtab_engine::unravel(c, &shape)
                .iter()
                .enumerate()
                .map(|(d, &i)| sums.categories[d][i].clone())
                .collect();
            test(c, g, cats)
        })
        .collect();
    let total = test(cells, &sums.all, Vec::new()).ok_or(crate::Error::NoRecords)?;
    Ok(MeanTests {
        value,
        groups,
        total,
        method,
    })
}
