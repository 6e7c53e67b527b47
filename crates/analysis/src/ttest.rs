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
use serde::{Deserialize, Serialize};
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

/// A group's numbers from the means answer: its SD and records (the
/// classic test's), and under a design its mean and that mean's SE.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Known {
    pub sd: Option<f64>,
    pub n: u64,
    pub mean: Option<f64>,
    pub se: Option<f64>,
}

/// Per group (its categories' displayed values; none: all groups), what
/// the means answer knows of it.
pub(crate) type Spread = HashMap<Vec<String>, Known>;

/// The sums of the tests: per record of the group `[y, 1]` with a value
/// for the mean, else `[0, 0]` (every record of the group counts for its
/// PSUs); the design sums of PSUs (Taylor, or without a design each
/// record its own PSU), with their covariance when weighted without a
/// design (`weighted_only`: the sums give the SE too).
fn spec(replicated: bool, weighted_only: bool) -> Spec {
    Spec {
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
        replicates: false,
        taylor: (!replicated).then_some(None),
        full: weighted_only,
        all: true,
        skip_zero: true,
    }
}

/// How the tests' standard errors and degrees of freedom come.
#[derive(Debug, Clone, Copy)]
struct Kind {
    /// Unweighted, no design: the classic test.
    plain: bool,
    /// Weighted without a design: the SE from the sums.
    weighted_only: bool,
    /// Replicate weights: the df from the ranks.
    replicated: bool,
}

/// The scan of the tests' sums and how they are tested.
fn scan_of<'a>(
    ds: &'a Dataset,
    req: &Request,
    (var, by): (&str, &[String]),
    design: (
        &Option<(microtab_store::Design, crate::survey::Survey)>,
        bool,
    ),
    opts: &'a ScanOptions,
) -> Result<(Scan<'a>, Kind)> {
    let values = [crate::ratio::numeric(ds, var)?.to_string()];
    let scan = Scan::new(ds, req, (by, &values), design, opts)?;
    let none = design.0.is_none();
    let kind = Kind {
        plain: none && scan.query.weight.is_none(),
        weighted_only: none && scan.query.weight.is_some(),
        replicated: scan.replicated(),
    };
    Ok((scan, kind))
}

/// Tests the mean of `var` in each group of `by` (and in all) against
/// `value` without a design (under one, the means query's own scan gives
/// the domains' df: [`of_domains`]); `spread` is what the means answer
/// knows of each group.
pub(crate) fn test_means(
    ds: &Dataset,
    req: &Request,
    (var, by, value): (&str, &[String], f64),
    spread: &Spread,
    opts: &ScanOptions,
) -> Result<MeanTests> {
    let (scan, kind) = scan_of(ds, req, (var, by), (&None, true), opts)?;
    let sums = scan.run(spec(false, kind.weighted_only))?;
    let (_, method) = survey_of(req, None, scan.query.weight.as_deref(), 0);
    build(
        &sums,
        (Vec::new(), 0.0),
        (kind, method),
        (value, req.level),
        spread,
    )
}

/// The tests' sums over part of the data (a range of records, one of
/// several datasets), to merge with the other parts' (see
/// [`crate::Partial`]): the fold's sums and, under replicate weights,
/// each group's basis of its records' replicate weights (by its
/// categories' values, as the parts' cells differ).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct TestPart {
    sums: crate::sums::SumsPart,
    bases: Vec<(GroupKey, Vec<Vec<f64>>)>,
    weighted: bool,
}

/// A group's key among the parts: its categories' displayed values, and
/// whether each is a missing code.
type GroupKey = Vec<(String, bool)>;

/// The key of cell `c` of the planned categories `cats` (of `shape`).
fn key_of(cats: &[Vec<Category>], shape: &[usize], c: usize) -> GroupKey {
    microtab_engine::unravel(c, shape)
        .iter()
        .enumerate()
        .map(|(d, &i)| {
            let c = &cats[d][i];
            (c.display.clone(), c.missing)
        })
        .collect()
}

/// The tests' [`TestPart`] of `ds` (its [`Request::rows`] when set).
pub(crate) fn part(
    ds: &Dataset,
    req: &Request,
    (var, by): (&str, &[String]),
    opts: &ScanOptions,
) -> Result<TestPart> {
    let design = crate::checks::design_of(ds, req, true)?;
    let (scan, kind) = scan_of(ds, req, (var, by), (&design, false), opts)?;
    let sums = scan.part(spec(kind.replicated, kind.weighted_only))?;
    let mut bases = Vec::new();
    if let (Some((d, _)), true) = (&design, kind.replicated) {
        let (cats, counts) = sums.cells();
        let shape: Vec<usize> = cats.iter().map(|c| c.len().max(1)).collect();
        let expect = (0..counts.len() as u32)
            .filter(|&c| counts[c as usize] > 0)
            .collect();
        let reps = &d.replicates.as_ref().expect("replicate weights").weights;
        let by_cell = crate::model::degf::replicate_bases_by(ds, &scan.query, reps, expect, opts)?;
        bases = by_cell
            .into_iter()
            .map(|(c, b)| (key_of(&cats, &shape, c as usize), b))
            .collect();
        bases.sort_by(|a, b| a.0.cmp(&b.0));
    }
    Ok(TestPart {
        sums,
        bases,
        weighted: scan.query.weight.is_some(),
    })
}

impl TestPart {
    /// Unites two parts' sums and bases.
    pub(crate) fn merge(self, o: TestPart) -> Result<TestPart> {
        let sums = self.sums.merge(o.sums)?;
        let mut bases: HashMap<_, _> = self.bases.into_iter().collect();
        for (k, b) in o.bases {
            let mine = bases.remove(&k).unwrap_or_default();
            bases.insert(k, crate::model::degf::unite_bases(mine, b));
        }
        let mut bases: Vec<_> = bases.into_iter().collect();
        bases.sort_by(|a, b| a.0.cmp(&b.0));
        Ok(TestPart {
            sums,
            bases,
            weighted: self.weighted,
        })
    }

    /// The tests from the merged parts, `survey` the parts' design.
    pub(crate) fn finish(
        self,
        req: &Request,
        value: f64,
        survey: Option<&crate::survey::Survey>,
        spread: &Spread,
    ) -> Result<MeanTests> {
        let replicated = survey.is_some_and(|v| v.info.method == "replicate");
        let kind = Kind {
            plain: survey.is_none() && !self.weighted,
            weighted_only: survey.is_none() && self.weighted,
            replicated,
        };
        let records = self.sums.records();
        let sums = self.sums.finish()?;
        let cells = sums.groups.len();
        let ranks = if replicated {
            let shape: Vec<usize> = sums.categories.iter().map(|c| c.len().max(1)).collect();
            let at: HashMap<_, _> = (0..cells)
                .map(|c| (key_of(&sums.categories, &shape, c), c as u32))
                .collect();
            let bases = self
                .bases
                .into_iter()
                .filter_map(|(k, b)| Some((*at.get(&k)?, b)))
                .collect();
            crate::model::degf::degf_of_bases(bases, cells)
        } else {
            (Vec::new(), 0.0)
        };
        let (_, method) = survey_of(req, survey, None, records);
        build(&sums, ranks, (kind, method), (value, req.level), spread)
    }
}

/// Each group's domain (its categories' displayed values; none: all
/// groups) `[PSUs, strata]`, from the means query's counts of them.
pub(crate) type DegfByKey = HashMap<Vec<String>, f64>;

/// The domains' `degf` (PSUs − strata) of the means query's `cube` by
/// group.
pub(crate) fn keyed_domains(
    cube: &microtab_engine::Cube,
    d: &microtab_engine::Domains,
) -> DegfByKey {
    let shape: Vec<usize> = cube.dims.iter().map(|d| d.categories.len()).collect();
    let degf = |[p, h]: [u64; 2]| p as f64 - h as f64;
    let mut out: DegfByKey = d
        .cell
        .iter()
        .enumerate()
        .map(|(c, &n)| {
            let key = microtab_engine::unravel(c, &shape)
                .iter()
                .enumerate()
                .map(|(k, &i)| cube.dims[k].categories[i].display.clone())
                .collect();
            (key, degf(n))
        })
        .collect();
    out.insert(Vec::new(), degf(d.all));
    out
}

/// The tests of the means answer's groups (their categories, `groups`;
/// their means and SEs in `spread`) on each group's domain's degrees of
/// freedom, `degf` by group (the empty key: all groups), less one, as R's
/// one-sample `svyttest`: under a Taylor design the domains the means
/// query counted, under replicate weights the ranks of the domains'
/// replicate weights.
pub(crate) fn of_domains(
    req: &Request,
    value: f64,
    groups: Vec<Vec<Category>>,
    spread: &Spread,
    (degf, method): (&DegfByKey, String),
) -> Result<MeanTests> {
    let test = |cats: Vec<Category>| -> Option<MeanTest> {
        let key: Vec<String> = cats.iter().map(|c| c.display.clone()).collect();
        let known = spread.get(&key)?;
        let df = degf.get(&key)? - 1.0;
        tested(cats, (known.mean?, known.se, df), (value, req.level))
    };
    let groups = groups.into_iter().filter_map(test).collect();
    let total = test(Vec::new()).ok_or(crate::Error::NoRecords)?;
    Ok(MeanTests {
        value,
        groups,
        total,
        method,
    })
}

/// A group's test of its `mean` (with its `se`) against `value` on `df`.
fn tested(
    cats: Vec<Category>,
    (mean, se, df): (f64, Option<f64>, f64),
    (value, level): (f64, f64),
) -> Option<MeanTest> {
    Some(MeanTest {
        by: cats,
        mean,
        df,
        // Without degrees of freedom (a domain in one PSU), the
        // difference and its SE but no test or interval.
        inference: se.map(|se| {
            if df > 0.0 {
                inference(mean - value, se, df, level)
            } else {
                Inference {
                    estimate: mean - value,
                    se,
                    t: f64::NAN,
                    p: f64::NAN,
                    lo: f64::NAN,
                    hi: f64::NAN,
                }
            }
        }),
    })
}

/// The tests from the sums, the replicate domains' df (`ranks`: per
/// cell and of all), and the means answer's `spread`.
fn build(
    sums: &crate::sums::Sums,
    (ranks, all_rank): (Vec<Option<f64>>, f64),
    (kind, method): (Kind, String),
    (value, level): (f64, f64),
    spread: &Spread,
) -> Result<MeanTests> {
    let Kind {
        plain,
        weighted_only,
        replicated,
    } = kind;
    let cells = sums.groups.len();
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
        let key: Vec<String> = cats.iter().map(|c| c.display.clone()).collect();
        let known = *spread.get(&key)?;
        let (mean, se, df) = if plain {
            let n = known.n as f64;
            (y / w, known.sd.map(|s| s / n.sqrt()), n - 1.0)
        } else if weighted_only {
            let v = &sums.cov[c];
            let var = crate::survey::ratio_variance(y, w, [v[0], v[1], v[3]]);
            let (p, h) = sums.psus[c];
            let se = var.is_finite().then(|| var.max(0.0).sqrt());
            (y / w, se, p as f64 - h as f64 - 1.0)
        } else {
            let df = if replicated {
                (if c == cells { all_rank } else { ranks[c]? }) - 1.0
            } else {
                let (p, h) = sums.psus[c];
                p as f64 - h as f64 - 1.0
            };
            (known.mean?, known.se, df)
        };
        tested(cats, (mean, se, df), (value, level))
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
