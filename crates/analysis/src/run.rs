//! From a request to an answer: the engine query, the checks around it,
//! and the typed result.

use crate::checks::{check_weights, design_of, verify};
use crate::model::parts::ModelPart;
use crate::result::{Answer, Context, Crosstab, Frequencies, Means};
use crate::sums::SumsPart;
use crate::survey::Survey;
use crate::{Analysis, Error, Request, Result};
use microtab_engine::{
    parse_filter, weight_cases, Cube, Margin, Query, ScanOptions, TaylorQuery, WeightCases,
};
use microtab_store::{Dataset, Design};
use serde::{Deserialize, Serialize};

/// The Taylor part of the engine query of `req` under design `t`: the
/// margins whose covariances its estimates need (frequencies: the
/// percentage base, the categories that are not missing; crosstabs: each
/// table's total, rows and columns, and every cell pair for the Rao–Scott
/// test; means: all groups).
fn taylor_query(req: &Request, t: &microtab_store::Taylor) -> TaylorQuery {
    let dims = req.group_by().len();
    let margin = |keep: Vec<bool>, skip_missing| Margin { keep, skip_missing };
    let (margins, full) = match &req.analysis {
        Analysis::Freq { .. } => (vec![margin(vec![false; dims], true)], None),
        Analysis::Tab { stats, .. } => {
            let ctrl = dims == 3;
            let with = |row: bool, col: bool| {
                let mut k = if ctrl { vec![true] } else { Vec::new() };
                k.extend([row, col]);
                k
            };
            (
                vec![
                    margin(with(false, false), false),
                    margin(with(true, false), false),
                    margin(with(false, true), false),
                ],
                // Every cell pair of each table: the Rao–Scott test, the
                // cells' z-statistics.
                (*stats || req.z).then_some(0),
            )
        }
        Analysis::Means { .. }
        | Analysis::Regress { .. }
        | Analysis::Ratio { .. }
        | Analysis::Corr { .. } => (vec![margin(vec![false; dims], false)], None),
    };
    TaylorQuery {
        margins,
        full,
        ..crate::taylor::query_of(t)
    }
}

/// The engine query of a request (under `design`: its weight, and its
/// replicate weights summed beside it).
fn query(req: &Request, design: Option<&Design>) -> Result<Query> {
    let filter = req.filter_terms()?;
    let (measure, include_missing) = match &req.analysis {
        Analysis::Means { var, .. } => (Some(var.clone()), false),
        _ => (None, req.include_missing),
    };
    Ok(Query {
        filter,
        group_by: req.group_by(),
        weight: design.map_or(req.weight.clone(), |d| Some(d.weight.clone())),
        measure,
        include_missing,
        max_cells: Some(req.max_cells),
        rows: req.rows.clone(),
        replicates: design
            .and_then(|d| d.replicates.as_ref())
            .map_or(Vec::new(), |r| r.weights.clone()),
        taylor: design
            .and_then(|d| d.taylor.as_ref())
            .map(|t| taylor_query(req, t)),
        distribution: matches!(req.analysis, Analysis::Means { .. }) && !req.quantiles.is_empty(),
        split: None,
        fold: None,
    })
}

/// A value of a text variable that the request's filter or recodes name
/// and no record has (in any of `datasets`, answered together) is an
/// error, not an empty group: checked once over all of them, since a part
/// may lack a value the others have. [`run`] and [`run_many`] check it
/// themselves; whoever merges [`partial`] results checks it once over all
/// the parts.
pub fn check_values(datasets: &[&Dataset], req: &Request) -> Result<()> {
    let filter = match &req.filter {
        Some(f) => parse_filter(f)?,
        None => Vec::new(),
    };
    microtab_engine::check_values(datasets, &filter, &req.group_by())?;
    Ok(())
}

/// The engine query of `req`, its result by `engine` (after the checks
/// the request asks for), what the weight did with the rows it counted,
/// and the survey design used.
fn scan<C>(
    ds: &Dataset,
    req: &Request,
    (opts, partial): (&ScanOptions, bool),
    engine: impl FnOnce(&Dataset, &Query, &ScanOptions) -> microtab_engine::Result<C>,
    counts: impl Fn(&C) -> &[u64],
) -> Result<Scanned<C>> {
    let design = design_of(ds, req, partial)?;
    let mut q = query(req, design.as_ref().map(|(d, _)| d))?;
    if let (Some(t), false, Analysis::Means { .. }, Some(_)) =
        (&mut q.taylor, partial, &req.analysis, req.test_mean)
    {
        // The tests' degrees of freedom: each group's domain, counted in
        // the same scan.
        t.domains = true;
    }
    if !partial {
        crate::contrast::prepare(&mut q, req);
    }
    verify(ds, req, &q)?;
    let cube = engine(ds, &q, opts)?;
    let counted = counts(&cube).iter().sum();
    let weights = weight_cases(ds, &q, opts, counted)?;
    Ok((q, cube, weights, design))
}

/// What [`scan`] gives: the engine query, its result, what the weight did,
/// and the design used with its variance formula.
type Scanned<C> = (Query, C, Option<WeightCases>, Option<(Design, Survey)>);

/// Under a design whose weight was adjusted to population totals, the
/// Taylor covariances of `cube` (the answer to `q`) take the adjustment's
/// residuals.
fn adjusted(
    ds: &Dataset,
    q: &Query,
    design: Option<&Design>,
    cube: &mut Cube,
    opts: &ScanOptions,
) -> Result<()> {
    if let Some((t, c)) = design
        .and_then(|d| d.taylor.as_ref())
        .and_then(|t| t.calibration.as_ref().map(|c| (t, c)))
    {
        if crate::weighting::supported(q) {
            crate::weighting::correct(ds, q, t, c, cube, (opts, false))?;
        }
    }
    Ok(())
}

/// Answers `req` over `ds`, reading columns as `opts` says.
///
/// A weighted request also counts the rows whose weight is negative, zero
/// or missing (a scan each, only when the weight's range or missing codes
/// allow them); negative weights are [`Error::NegativeWeights`] unless
/// [`Request::allow_negative_weights`].
pub fn run(ds: &Dataset, req: &Request, opts: &ScanOptions) -> Result<Answer> {
    if let Analysis::Regress { formula, family } = &req.analysis {
        return Ok(Answer::Regress(Box::new(crate::regress::regress(
            ds, req, formula, *family, opts,
        )?)));
    }
    if let Analysis::Ratio {
        numerator,
        denominator,
        by,
    } = &req.analysis
    {
        return Ok(Answer::Ratio(Box::new(crate::ratio::ratio(
            ds,
            req,
            (numerator, denominator, by),
            opts,
        )?)));
    }
    if let Analysis::Corr { vars } = &req.analysis {
        return Ok(Answer::Corr(Box::new(crate::corr::corr(
            ds, req, vars, opts,
        )?)));
    }
    check_values(&[ds], req)?;
    let (q, mut cube, weights, design) =
        scan(ds, req, (opts, false), microtab_engine::run_with, |c| {
            &c.counts
        })?;
    if let Some(t) = cube.taylor.as_ref().filter(|t| t.unknown_strata > 0) {
        return Err(Error::UnknownStrata {
            records: t.unknown_strata,
        });
    }
    adjusted(ds, &q, design.as_ref().map(|(d, _)| d), &mut cube, opts)?;
    let weight = q.weight.as_deref().map(|n| ds.variable(n)).transpose()?;
    check_weights(req, &weights, weight.map(|v| v.name.as_str()))?;
    let survey = match design {
        Some((_, mut v)) => {
            // R counts records of weight 0 out of a Taylor design's SRS
            // size: each domain's are counted (one more scan).
            if v.info.method == "taylor" && weights.as_ref().is_some_and(|w| w.zero > 0) {
                v.zeros = microtab_engine::zero_weight_cells(ds, &q, opts)?
                    .map(|z| zero_counts(&cube, &z));
                v.srs_ok = v.zeros.is_some();
            }
            Some(v)
        }
        None => None,
    };
    let context = Context {
        dataset: ds.dir().display().to_string(),
        weight: q.weight.clone(),
        filter: req.shown_filter(),
        weight_cases: weights,
        design: survey.as_ref().map(|v| v.info.clone()),
    };
    let measure = match &req.analysis {
        Analysis::Means { var, .. } => {
            let v = ds.variable(var)?;
            Some((v.name.clone(), v.label.clone()))
        }
        _ => None,
    };
    let quantiles = if q.distribution {
        Some(crate::quantile::quantiles(
            ds,
            opts,
            &q,
            &cube,
            survey.as_ref(),
            &req.quantiles,
        )?)
    } else {
        None
    };
    let domains = cube
        .taylor
        .as_ref()
        .and_then(|t| t.domains.as_ref())
        .map(|d| crate::ttest::keyed_domains(&cube, d));
    crate::contrast::check_groups(req, &cube)?;
    let mut direct = crate::contrast::from_scan(ds, req, &q, &mut cube, survey.as_ref(), opts)?;
    // Replicate weights: the tests' domains' ranks, named by group.
    let replicated = survey
        .as_ref()
        .filter(|v| v.info.method == "replicate" && !q.replicates.is_empty())
        .map(crate::model::fitted::replicate_method);
    let mut answer = answer(req, context, cube, measure, survey, quantiles);
    if let (Some(base), Answer::Means(m), Analysis::Means { var, by }) =
        (&req.diff, &mut answer, &req.analysis)
    {
        let [g] = by.as_slice() else {
            return Err(Error::CompareGroups { count: by.len() });
        };
        m.comparison = Some(Box::new(match direct.take() {
            Some(crate::contrast::Direct::Means(c)) => c,
            _ => crate::compare::compare_means(ds, req, var, g, base, opts)?,
        }));
    }
    if let (Some(value), Answer::Means(m), Analysis::Means { var, by }) =
        (req.test_mean, &mut answer, &req.analysis)
    {
        let groups: Vec<Vec<microtab_engine::Category>> = m
            .groups()
            .map(|g| g.by.iter().map(|&c| c.clone()).collect())
            .collect();
        let t = match (&domains, replicated) {
            (Some(d), _) => {
                let of = (d, "linearization".to_string());
                crate::ttest::of_domains(req, value, groups, &spread_of(m), of)?
            }
            (None, Some(method)) => {
                // One early-stopping pass over the replicate weights: the
                // means query's records, whatever their value of `var`.
                let keys = groups
                    .iter()
                    .map(|g| g.iter().map(|c| c.display.clone()).collect())
                    .collect();
                let degf =
                    crate::model::degf::replicate_degf_by_key(ds, &q, &q.replicates, keys, opts)?;
                crate::ttest::of_domains(req, value, groups, &spread_of(m), (&degf, method))?
            }
            (None, None) => {
                crate::ttest::test_means(ds, req, (var, by, value), &spread_of(m), opts)?
            }
        };
        m.test = Some(Box::new(t));
    }
    if let (
        Some(base),
        Answer::Tab(x),
        Analysis::Tab {
            row, col, control, ..
        },
    ) = (&req.diff, &mut answer, &req.analysis)
    {
        if control.is_some() {
            return Err(Error::CompareGroups { count: 2 });
        }
        let rows = x.tables().next().map(|t| t.rows).unwrap_or_default();
        x.comparisons = Some(match direct.take() {
            Some(crate::contrast::Direct::Shares(c)) => c,
            _ => crate::compare::compare_shares(ds, req, (row, col, base), &rows, opts)?,
        });
    }
    Ok(answer)
}

/// What the means answer `m` knows of each group (and of all, the empty
/// key) for its one-sample tests.
fn spread_of(m: &Means) -> crate::ttest::Spread {
    let known = |s: &crate::Stat, u: &Option<crate::survey::Uncertainty>| crate::ttest::Known {
        sd: s.sd,
        n: s.n,
        mean: s.mean,
        se: u.map(|u| u.se),
    };
    let mut spread: crate::ttest::Spread = m
        .groups()
        .map(|g| {
            let key = g.by.iter().map(|c| c.display.clone()).collect();
            (key, known(&g.stat, &g.mean_se))
        })
        .collect();
    spread.insert(Vec::new(), known(&m.total, &m.total_se));
    spread
}

/// Per cell of `cube`, its rows of weight 0 as `zero` (the query's rows
/// of weight 0, by their cells) counts them: the rows with a value of the
/// analysis variable (means), else all. Cells are matched by their
/// categories' displayed values.
fn zero_counts(cube: &Cube, zero: &Cube) -> Vec<u64> {
    let mut out = vec![0; cube.counts.len()];
    let index: Vec<std::collections::HashMap<&str, usize>> = cube
        .dims
        .iter()
        .map(|d| {
            d.categories
                .iter()
                .enumerate()
                .map(|(i, c)| (c.display.as_str(), i))
                .collect()
        })
        .collect();
    for c in 0..zero.counts.len() {
        let n = match &zero.moments {
            Some(m) => m[c].n,
            None => zero.counts[c],
        };
        if n == 0 {
            continue;
        }
        let idx = zero.index_of(c);
        let found: Option<Vec<usize>> = idx
            .iter()
            .enumerate()
            .map(|(d, &i)| {
                index[d]
                    .get(zero.dims[d].categories[i].display.as_str())
                    .copied()
            })
            .collect();
        if let Some(at) = found {
            out[cube.cell(&at)] += n;
        }
    }
    out
}

/// The typed result of `req` from its cube; `measure` is the analysis
/// variable's name and label (means); `survey` the replicate variance of
/// its design.
fn answer(
    req: &Request,
    context: Context,
    cube: Cube,
    measure: Option<(String, Option<String>)>,
    survey: Option<Survey>,
    quantiles: Option<crate::quantile::Quantiles>,
) -> Answer {
    let name = |i: usize| cube.dims[i].var.name.clone();
    match &req.analysis {
        Analysis::Freq { .. } => Answer::Freq(Frequencies::new(context, cube, survey)),
        Analysis::Tab {
            control,
            pct,
            stats,
            ..
        } => {
            let off = control.is_some() as usize;
            let names = [name(off), name(off + 1)];
            let control = control.as_ref().map(|_| name(0));
            Answer::Tab(Crosstab::new(
                context,
                names,
                control,
                pct.clone(),
                [*stats, req.z],
                cube,
                survey,
            ))
        }
        Analysis::Means { .. } => {
            let (name, label) = measure.expect("means have an analysis variable");
            Answer::Means(Means::new(context, name, label, cube, survey, quantiles))
        }
        Analysis::Regress { .. } | Analysis::Ratio { .. } | Analysis::Corr { .. } => {
            unreachable!("answered by crate::model, crate::ratio and crate::corr")
        }
    }
}

/// A request's result over part of the data (a range of rows, or one of
/// several datasets with the same variables): merge parts with
/// [`Partial::merge`] and finish with [`Partial::finish`]. Serializable, so
/// parts computed elsewhere (Dask workers) can be sent and merged.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Partial {
    /// The datasets the parts came from, sorted, each once.
    pub datasets: Vec<String>,
    /// Rows with a negative, zero or missing weight, over all parts.
    pub weight_cases: Option<WeightCases>,
    /// The engine's exact partial cube.
    pub cube: microtab_engine::Partial,
    /// The survey design the parts were computed under (the same for
    /// every part; a Taylor design's PSU structure is in `taylor`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub design: Option<microtab_store::Design>,
    /// A Taylor design's PSU structure in each dataset, by dataset.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub taylor: Vec<(String, microtab_store::Taylor)>,
    /// A model's coding and round (regressions).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<ModelPart>,
    /// The sums of a fold (ratios, correlations).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) sums: Option<SumsPart>,
    /// A correlation's round and its variables.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) corr: Option<(crate::corr::Stage, Vec<String>)>,
    /// Means tested against a value: the tests' sums.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) test: Option<crate::ttest::TestPart>,
    /// Shares compared with a base column: per row category, its
    /// comparison's model (from the second round).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) shares: Option<Vec<Share>>,
    /// Means compared with a base group: the comparison's model.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) compare: Option<Compare>,
    /// The request the part is of ([`fingerprint`]).
    #[serde(default)]
    request: String,
}

/// A further round of partial results a request needs (see [`Step`]):
/// computed by [`partial_round`] over every part, merged and finished as
/// the first round was.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Round {
    of: RoundOf,
    /// The request it is a round of ([`fingerprint`]).
    request: String,
}

/// What identifies a request's partial results: every option but the
/// records a part covers (and whether whole files are checked). Parts and
/// rounds of one request merge and finish only with that request.
fn fingerprint(req: &Request) -> String {
    // Each part's own: its records, its share of a mask over all the
    // parts' records, the design held for it (built on its dataset: its
    // formula is checked when partial results merge).
    format!(
        "{:?}",
        Request {
            rows: None,
            verify: false,
            selection: None,
            design: None,
            ..req.clone()
        }
    )
}

/// An error for parts, or a round, of another request.
fn other_request() -> Error {
    Error::Design(
        "the partial results are of another request (or a round of another request): compute them again for this one".into(),
    )
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
enum RoundOf {
    Model(crate::model::parts::Stage),
    Corr(crate::corr::Stage),
    /// The comparison's model's round (means with a base group).
    Compare(Box<Round>),
    /// Each row category's comparison's model's round (`None`: its first;
    /// shares compared with a base column).
    Shares(Vec<(microtab_engine::Category, Option<Round>)>),
}

/// Groups' means compared with a base group over parts: the model whose
/// coefficients are the differences, as a partial result of its own.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct Compare {
    formula: String,
    factor: String,
    base: String,
    part: Box<Partial>,
}

/// One row category's shares compared with a base column over parts: the
/// model whose coefficients are the differences, in its round.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct Share {
    row: microtab_engine::Category,
    formula: String,
    factor: String,
    round: Option<Round>,
    part: Box<Partial>,
}

/// Row categories and their models' next rounds.
type RoundRows = Vec<(microtab_engine::Category, Option<Round>)>;

/// What merged partial results give: the answer, or a further round of
/// partial results to compute over every part ([`partial_round`]), merge
/// and finish again (a model under a Taylor design: the scores of its
/// fit).
#[derive(Debug)]
// Given once per query: not worth boxing the answer.
#[allow(clippy::large_enum_variant)]
pub enum Step {
    /// The answer.
    Answer(Answer),
    /// Another round.
    Again(Round),
}

/// Computes `req` over `ds` (only [`Request::rows`] when set) as a
/// [`Partial`]. Negative weights are checked when the parts are finished.
pub fn partial(ds: &Dataset, req: &Request, opts: &ScanOptions) -> Result<Partial> {
    partial_round(ds, req, None, opts)
}

/// [`partial`] in a further `round` that [`Partial::step`] asked for
/// (`None`: the first).
pub fn partial_round(
    ds: &Dataset,
    req: &Request,
    round: Option<&Round>,
    opts: &ScanOptions,
) -> Result<Partial> {
    let request = fingerprint(req);
    if round.is_some_and(|r| r.request != request) {
        return Err(other_request());
    }
    let mut p = answer_part(ds, req, round, opts)?;
    p.request = request;
    Ok(p)
}

/// [`partial_round`] once the round is known to be the request's.
fn answer_part(
    ds: &Dataset,
    req: &Request,
    round: Option<&Round>,
    opts: &ScanOptions,
) -> Result<Partial> {
    let wrong =
        || Error::Design("a round of another request: compute the first round again".into());
    if matches!(req.analysis, Analysis::Regress { .. }) {
        let stage = match round.map(|r| &r.of) {
            None => None,
            Some(RoundOf::Model(s)) => Some(s),
            Some(_) => return Err(wrong()),
        };
        let (cube, weights, design, model) = crate::model::parts::partial(ds, req, stage, opts)?;
        let mut p = Partial::of(ds, cube, weights, design);
        p.model = Some(model);
        return Ok(p);
    }
    if matches!(req.analysis, Analysis::Ratio { .. } | Analysis::Corr { .. }) {
        // The groups' records and the weight's cases from a count (no
        // design sums), the estimator's sums from its fold.
        let design = design_of(ds, req, true)?;
        let mut q = query(req, design.as_ref().map(|(d, _)| d))?;
        (q.taylor, q.replicates) = (None, Vec::new());
        verify(ds, req, &q)?;
        let cube = microtab_engine::run_partial(ds, &q, opts)?;
        let weights = weight_cases(ds, &q, opts, cube.counts.iter().sum())?;
        let mut p = Partial::of(ds, cube, weights, design.map(|(d, _)| d));
        match (&req.analysis, round.map(|r| &r.of)) {
            (
                Analysis::Ratio {
                    numerator,
                    denominator,
                    by,
                },
                None,
            ) => {
                p.sums = Some(crate::ratio::part(
                    ds,
                    req,
                    (numerator, denominator, by),
                    opts,
                )?)
            }
            (Analysis::Corr { vars }, stage @ (None | Some(RoundOf::Corr(_)))) => {
                let stage = match stage {
                    Some(RoundOf::Corr(s)) => s.clone(),
                    _ => crate::corr::Stage::Means,
                };
                let (names, sums) = crate::corr::part(ds, req, vars, &stage, opts)?;
                p.sums = Some(sums);
                p.corr = Some((stage, names));
            }
            _ => return Err(wrong()),
        }
        return Ok(p);
    }
    if let (Some(base), Analysis::Means { var, by }) = (&req.diff, &req.analysis) {
        let [g] = by.as_slice() else {
            return Err(Error::CompareGroups { count: by.len() });
        };
        let inner = match round.map(|r| &r.of) {
            None => None,
            Some(RoundOf::Compare(r)) => Some(&**r),
            Some(_) => return Err(wrong()),
        };
        let (formula, factor) = crate::compare::model_of(ds, var, g, base);
        let mreq = crate::compare::model_request(req, &formula);
        let part = Box::new(partial_round(ds, &mreq, inner, opts)?);
        let means = Request {
            diff: None,
            ..req.clone()
        };
        let mut p = partial_round(ds, &means, None, opts)?;
        p.compare = Some(Compare {
            formula,
            factor,
            base: base.clone(),
            part,
        });
        return Ok(p);
    }
    if let (
        Some(base),
        Analysis::Tab {
            row, col, control, ..
        },
    ) = (&req.diff, &req.analysis)
    {
        if control.is_some() {
            return Err(Error::CompareGroups { count: 2 });
        }
        let rows = match round.map(|r| &r.of) {
            None => None,
            Some(RoundOf::Shares(rows)) => Some(rows),
            Some(_) => return Err(wrong()),
        };
        // A recoded row variable is refused before any scan.
        crate::compare::check_share_row(ds, row)?;
        let table = Request {
            diff: None,
            ..req.clone()
        };
        let mut p = partial_round(ds, &table, None, opts)?;
        p.shares = rows
            .map(|rows| {
                rows.iter()
                    .map(|(r, round)| {
                        let (formula, factor) =
                            crate::compare::share_model(ds, (row, col, base), &r.display)?;
                        let mreq = crate::compare::model_request(req, &formula);
                        let part = Box::new(partial_round(ds, &mreq, round.as_ref(), opts)?);
                        Ok(Share {
                            row: r.clone(),
                            formula,
                            factor,
                            round: round.clone(),
                            part,
                        })
                    })
                    .collect::<Result<Vec<_>>>()
            })
            .transpose()?;
        return Ok(p);
    }
    if !req.quantiles.is_empty() {
        return Err(Error::Design(
            "quantiles are answered over one whole dataset: not over several datasets or a range of rows".into(),
        ));
    }
    let (_, cube, weight_cases, design) =
        scan(ds, req, (opts, true), microtab_engine::run_partial, |c| {
            &c.counts
        })?;
    let mut p = Partial::of(ds, cube, weight_cases, design.map(|(d, _)| d));
    if let (Some(_), Analysis::Means { var, by }) = (req.test_mean, &req.analysis) {
        p.test = Some(crate::ttest::part(ds, req, (var, by), opts)?);
    }
    Ok(p)
}

impl Partial {
    /// The partial result of `ds` from its engine partial `cube`.
    pub(crate) fn of(
        ds: &Dataset,
        cube: microtab_engine::Partial,
        weight_cases: Option<WeightCases>,
        design: Option<Design>,
    ) -> Partial {
        let name = ds.dir().display().to_string();
        let taylor = design
            .as_ref()
            .and_then(|d| d.taylor.clone())
            .map(|t| vec![(name.clone(), t)])
            .unwrap_or_default();
        Partial {
            datasets: vec![name],
            weight_cases,
            cube,
            design,
            taylor,
            model: None,
            sums: None,
            corr: None,
            test: None,
            shares: None,
            compare: None,
            request: String::new(),
        }
    }

    /// Merges two parts of the same request: exact, associative and
    /// commutative (see [`microtab_engine::Partial::merge`]).
    pub fn merge(self, o: Partial) -> Result<Partial> {
        if self.request != o.request {
            return Err(other_request());
        }
        let mut datasets = self.datasets;
        datasets.extend(o.datasets);
        datasets.sort();
        datasets.dedup();
        let weight_cases = match (self.weight_cases, o.weight_cases) {
            (Some(a), Some(b)) => Some(WeightCases {
                negative: a.negative + b.negative,
                zero: a.zero + b.zero,
                missing: a.missing + b.missing,
            }),
            (a, b) => a.or(b),
        };
        let same = |a: &Option<microtab_store::Design>, b: &Option<microtab_store::Design>| {
            let key = |d: &microtab_store::Design| {
                let mut d = d.clone();
                d.weight = d.weight.to_ascii_lowercase();
                if let Some(r) = d.replicates.as_mut() {
                    r.weights
                        .iter_mut()
                        .for_each(|w| *w = w.to_ascii_lowercase());
                    // Each dataset's own: combined below.
                    r.rank = None;
                }
                // A Taylor design's formula; its PSU structure is each
                // dataset's own.
                if let Some(t) = d.taylor.as_mut() {
                    let low = |s: &mut Option<String>| {
                        if let Some(s) = s.as_mut() {
                            *s = s.to_ascii_lowercase();
                        }
                    };
                    low(&mut t.strata);
                    low(&mut t.cluster);
                    low(&mut t.fpc);
                    (t.strata_keys, t.psus, t.population) = (Vec::new(), Vec::new(), None);
                    (t.contiguous, t.weighted_psus, t.weighted_strata, t.rows) = (false, 0, 0, 0);
                }
                d
            };
            a.as_ref().map(key) == b.as_ref().map(key)
        };
        if !same(&self.design, &o.design) {
            return Err(Error::DesignsDiffer);
        }
        // The rank of the stacked replicate weights is at least each
        // part's: the largest (every part's when they are one dataset's
        // rows, or parts of one split, which carry its rank).
        let mut design = self.design;
        if let (Some(a), Some(b)) = (
            design.as_mut().and_then(|d| d.replicates.as_mut()),
            o.design.as_ref().and_then(|d| d.replicates.as_ref()),
        ) {
            a.rank = a.rank.max(b.rank);
        }
        let mut taylor = self.taylor;
        for (name, t) in o.taylor {
            match taylor.iter().find(|(n, _)| *n == name) {
                Some((_, u)) if *u != t => {
                    return Err(Error::Design(format!(
                        "the parts of {name} were computed under different Taylor designs: compute them again"
                    )))
                }
                Some(_) => {}
                None => taylor.push((name, t)),
            }
        }
        taylor.sort_by(|a, b| a.0.cmp(&b.0));
        // A model fitted on its cube in one part and record by record in
        // the other: the record-by-record part's cube (of no records) is
        // kept, and every part counts its records in the next round.
        let records = |p: &Option<ModelPart>| p.as_ref().is_some_and(ModelPart::records);
        let cube = if records(&self.model) == records(&o.model) {
            self.cube.merge(o.cube)?
        } else if records(&self.model) {
            self.cube
        } else {
            o.cube
        };
        let model = both(self.model, o.model, ModelPart::merge)?;
        let sums = both(self.sums, o.sums, SumsPart::merge)?;
        let compare = both(self.compare, o.compare, |a, b| {
            if (&a.formula, &a.factor, &a.base) != (&b.formula, &b.factor, &b.base) {
                return Err(Error::Design(
                    "the parts are of different comparisons: compute them again".into(),
                ));
            }
            Ok(Compare {
                part: Box::new(a.part.merge(*b.part)?),
                ..a
            })
        })?;
        let corr = both(self.corr, o.corr, |a, b| match a == b {
            true => Ok(a),
            false => Err(Error::Design(
                "the parts are of different rounds: compute them again".into(),
            )),
        })?;

        let test = both(self.test, o.test, crate::ttest::TestPart::merge)?;
        let shares = both(self.shares, o.shares, |a, b| {
            if a.len() != b.len() {
                return Err(Error::Design(
                    "the parts are of different rounds: compute them again".into(),
                ));
            }
            a.into_iter()
                .zip(b)
                .map(|(a, b)| {
                    if (&a.row, &a.formula, &a.round) != (&b.row, &b.formula, &b.round) {
                        return Err(Error::Design(
                            "the parts are of different rounds: compute them again".into(),
                        ));
                    }
                    Ok(Share {
                        part: Box::new(a.part.merge(*b.part)?),
                        ..a
                    })
                })
                .collect()
        })?;
        Ok(Partial {
            datasets,
            weight_cases,
            cube,
            design,
            taylor,
            model,
            sums,
            corr,
            test,
            shares,
            compare,
            request: self.request,
        })
    }

    /// The answer to `req` (the request the parts were computed for) from
    /// the merged parts; an error when it needs another round (see
    /// [`Partial::step`]).
    pub fn finish(&self, req: &Request) -> Result<Answer> {
        match self.step(req)? {
            Step::Answer(a) => Ok(a),
            Step::Again(_) => Err(Error::Design(
                "this request needs another round of partial results (Partial::step)".into(),
            )),
        }
    }

    /// The answer to `req` (the request the parts were computed for) from
    /// the merged parts, or the further round it needs.
    pub fn step(&self, req: &Request) -> Result<Step> {
        let request = fingerprint(req);
        if self.request != request {
            return Err(other_request());
        }
        let again = |of: RoundOf| {
            Ok(Step::Again(Round {
                of,
                request: request.clone(),
            }))
        };
        if req.diff.is_some() || req.test_mean.is_some() {
            // As over one dataset: groups shown as one value cannot be
            // named apart (the parts' tests and comparisons key groups by
            // value), before any round of the comparison's model.
            crate::contrast::check_groups(req, &self.cube.finish())?;
        }
        let mut comparison = None;
        if let Some(c) = &self.compare {
            let mreq = crate::compare::model_request(req, &c.formula);
            match c.part.step(&mreq)? {
                Step::Again(r) => return again(RoundOf::Compare(Box::new(r))),
                Step::Answer(Answer::Regress(r)) => {
                    comparison = Some(crate::compare::comparison(*r, &c.base, &c.factor));
                }
                Step::Answer(_) => unreachable!("a comparison's model"),
            }
        }
        if let Some(m) = &self.model {
            return Ok(
                match crate::model::parts::step(
                    (&self.datasets, &self.cube, self.weight_cases),
                    m,
                    req,
                    (self.survey(req), self.replicates()),
                )? {
                    Ok(r) => Step::Answer(Answer::Regress(Box::new(r))),
                    Err(stage) => return again(RoundOf::Model(stage)),
                },
            );
        }
        let weight = self.cube.weight.as_ref().map(|w| w.name.as_str());
        check_weights(req, &self.weight_cases, weight)?;
        let survey = self.survey(req);
        if let (
            Some(sums),
            Analysis::Ratio {
                numerator,
                denominator,
                by,
            },
        ) = (&self.sums, &req.analysis)
        {
            let r = crate::ratio::of_parts(
                sums.clone(),
                req,
                (numerator, denominator, by),
                (self.datasets.join(", "), survey, weight, self.weight_cases),
            )?;
            return Ok(Step::Answer(Answer::Ratio(Box::new(r))));
        }
        if let (Some(sums), Some((stage, names))) = (&self.sums, &self.corr) {
            let records = sums.records();
            let sums = sums.clone().finish()?;
            let setting = crate::corr::Setting {
                names,
                req,
                survey: survey.as_ref(),
                weight,
                records,
                cases: &self.weight_cases,
                dataset: self.datasets.join(", "),
            };
            return Ok(match crate::corr::advance(stage, &sums, &setting)? {
                crate::corr::Next::Done(c) => Step::Answer(Answer::Corr(c)),
                crate::corr::Next::Scan(s) => return again(RoundOf::Corr(s)),
            });
        }
        let mut answer = self.answer(req, survey.clone())?;
        if let (Some(base), Answer::Tab(x)) = (&req.diff, &mut answer) {
            match &self.shares {
                // The first round: the table's row categories.
                None => {
                    let rows: RoundRows = x
                        .tables()
                        .next()
                        .map(|t| t.rows)
                        .unwrap_or_default()
                        .into_iter()
                        .filter(|r| !r.missing)
                        .map(|r| (r.clone(), None))
                        .collect();
                    if !rows.is_empty() {
                        return again(RoundOf::Shares(rows));
                    }
                    x.comparisons = Some(Vec::new());
                }
                Some(shares) => match shared(shares, req, base)? {
                    Ok(c) => x.comparisons = Some(c),
                    Err(rows) => return again(RoundOf::Shares(rows)),
                },
            }
        }
        if let (Some(c), Answer::Means(m)) = (comparison, &mut answer) {
            m.comparison = Some(Box::new(c));
        }
        if let (Some(t), Some(value), Answer::Means(m)) = (&self.test, req.test_mean, &mut answer) {
            let spread = spread_of(m);
            m.test = Some(Box::new(t.clone().finish(
                req,
                value,
                survey.as_ref(),
                &spread,
            )?));
        }
        Ok(Step::Answer(answer))
    }

    /// The design's replicate weights (0: none).
    fn replicates(&self) -> usize {
        self.design
            .as_ref()
            .and_then(|d| d.replicates.as_ref())
            .map_or(0, |r| r.weights.len())
    }

    /// The design's variance formula over the merged parts.
    fn survey(&self, req: &Request) -> Option<Survey> {
        let limits = (req.min_n, req.max_cv);
        self.design.as_ref().and_then(|d| {
            let mut v = match (&d.replicates, &d.taylor) {
                (Some(r), _) => Survey::new(&d.weight, r, req.level, limits),
                (None, Some(_)) => {
                    let mut v =
                        Survey::taylor(&d.weight, &self.combined_taylor()?, req.level, limits);
                    // As over one dataset: records of weight 0 are out of
                    // R's SRS size, so design effects are withheld.
                    if self.weight_cases.is_some_and(|w| w.zero > 0) {
                        v.srs_ok = false;
                    }
                    v
                }
                (None, None) => return None,
            };
            v.info.pct_interval = req.pct_interval;
            Some(v)
        })
    }

    /// The rest of [`Partial::step`] for the requests of one round.
    fn answer(&self, req: &Request, survey: Option<Survey>) -> Result<Answer> {
        let cube = self.cube.finish();
        if let Some(t) = cube.taylor.as_ref().filter(|t| t.unknown_strata > 0) {
            return Err(Error::UnknownStrata {
                records: t.unknown_strata,
            });
        }
        let context = Context {
            dataset: self.datasets.join(", "),
            weight: req.weight.clone().or_else(|| {
                survey
                    .as_ref()
                    .and(self.cube.weight.as_ref())
                    .map(|w| w.name.clone())
            }),
            filter: req.shown_filter(),
            weight_cases: self.weight_cases,
            design: survey.as_ref().map(|v| v.info.clone()),
        };
        let measure = self
            .cube
            .measure
            .as_ref()
            .map(|m| (m.name.clone(), m.label.clone()));
        Ok(answer(req, context, cube, measure, survey, None))
    }

    /// One Taylor design's PSU structure over every dataset of the parts
    /// (their strata are disjoint: the engine's merge checks it).
    fn combined_taylor(&self) -> Option<microtab_store::Taylor> {
        let mut it = self.taylor.iter().map(|(_, t)| t);
        let mut out = it.next()?.clone();
        for t in it {
            let mut strata: Vec<(i64, u64, Option<f64>)> = out
                .strata_keys
                .iter()
                .zip(&out.psus)
                .enumerate()
                .map(|(i, (&k, &n))| (k, n, out.population.as_ref().map(|p| p[i])))
                .chain(
                    t.strata_keys
                        .iter()
                        .zip(&t.psus)
                        .enumerate()
                        .map(|(i, (&k, &n))| (k, n, t.population.as_ref().map(|p| p[i]))),
                )
                .collect();
            strata.sort_by_key(|s| s.0);
            out.strata_keys = strata.iter().map(|s| s.0).collect();
            out.psus = strata.iter().map(|s| s.1).collect();
            out.population = out
                .population
                .is_some()
                .then(|| strata.iter().map(|s| s.2.unwrap_or(f64::NAN)).collect());
            out.contiguous &= t.contiguous;
            out.weighted_psus += t.weighted_psus;
            out.weighted_strata += t.weighted_strata;
            out.rows += t.rows;
        }
        Some(out)
    }
}

/// Shares compared with a base column from the merged parts' `shares`:
/// the comparisons, or each row's next round.
fn shared(
    shares: &[Share],
    req: &Request,
    base: &str,
) -> Result<std::result::Result<Vec<crate::compare::RowComparison>, RoundRows>> {
    let (mut done, mut next, mut pending) = (Vec::new(), Vec::new(), false);
    for s in shares {
        let mreq = crate::compare::model_request(req, &s.formula);
        match s.part.step(&mreq)? {
            Step::Again(r) => {
                pending = true;
                next.push((s.row.clone(), Some(r)));
            }
            Step::Answer(Answer::Regress(r)) => {
                // Answered: the same round again while others go on.
                next.push((s.row.clone(), s.round.clone()));
                let c = crate::compare::comparison(*r, base, &s.factor);
                done.push(crate::compare::row_comparison(&s.row, c));
            }
            Step::Answer(_) => unreachable!("a comparison's model"),
        }
    }
    Ok(if pending { Err(next) } else { Ok(done) })
}

/// Two parts' `Option`al sums merged by `merge`: both or neither (a part
/// of another request has none).
fn both<T>(a: Option<T>, b: Option<T>, merge: impl Fn(T, T) -> Result<T>) -> Result<Option<T>> {
    match (a, b) {
        (Some(a), Some(b)) => merge(a, b).map(Some),
        (None, None) => Ok(None),
        _ => Err(Error::Design(
            "the parts are of different requests: compute them again".into(),
        )),
    }
}

/// The most rounds of partial results a request takes: a model fitted
/// record by record takes one per IRLS step of its fit and of its
/// replicates' refits (at most 101 each) and three more; a table's shares
/// compared with a base column take one for the table's rows, then their
/// models' (the cube, a rank or the scores).
pub const MAX_ROUNDS: usize = 256;

/// Answers `req` over several datasets with the same variables as if they
/// were one: a partial result of each, merged exactly, finished (in as
/// many rounds as the request needs: [`Partial::step`]).
pub fn run_many(datasets: &[Dataset], req: &Request, opts: &ScanOptions) -> Result<Answer> {
    run_many_each(datasets, req, &[], opts)
}

/// What one dataset of several answered as one has of its own
/// ([`run_many_each`]).
#[derive(Debug, Clone, Default)]
pub struct PartOptions {
    /// The design held for it (built on it by
    /// [`build_design`](crate::build_design)), instead of its stored one.
    pub design: Option<microtab_store::Design>,
    /// Its records among those a front end chose: its share of a boolean
    /// mask over all the datasets' records
    /// ([`Term::rows`](microtab_engine::Term::rows) over its records).
    pub selection: Option<microtab_engine::Term>,
}

/// [`run_many`] with each dataset's own options (`own[i]` the `i`-th
/// dataset's; none: the request's): a design held for the datasets
/// (built on each), a mask over all their records (cut at their edges).
/// The answer shows `req`'s filter and selection.
pub fn run_many_each(
    datasets: &[Dataset],
    req: &Request,
    own: &[PartOptions],
    opts: &ScanOptions,
) -> Result<Answer> {
    check_values(&datasets.iter().collect::<Vec<_>>(), req)?;
    let reqs: Vec<Request> = own
        .iter()
        .map(|o| Request {
            design: o.design.clone().or_else(|| req.design.clone()),
            selection: o.selection.clone().or_else(|| req.selection.clone()),
            ..req.clone()
        })
        .collect();
    let mut round = None;
    for _ in 0..MAX_ROUNDS {
        let mut acc: Option<Partial> = None;
        for (i, ds) in datasets.iter().enumerate() {
            let name = ds.dir().display().to_string();
            let here = |e: Error| Error::InDataset {
                dataset: name.clone(),
                error: Box::new(e),
            };
            let r = reqs.get(i).unwrap_or(req);
            let p = partial_round(ds, r, round.as_ref(), opts).map_err(here)?;
            acc = Some(match acc {
                Some(a) => a.merge(p).map_err(here)?,
                None => p,
            });
        }
        let Some(p) = acc else {
            return Err(Error::Engine(microtab_engine::Error::Invalid(
                "no datasets to answer from".into(),
            )));
        };
        match p.step(req)? {
            Step::Answer(a) => return Ok(a),
            Step::Again(r) => round = Some(r),
        }
    }
    Err(Error::Design(
        "the request took more rounds than it may".into(),
    ))
}
