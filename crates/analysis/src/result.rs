//! Typed answers. Each holds the engine's cube and produces its long part
//! (frequency rows, tables, groups) on demand, so that rendering or
//! serializing a result of any size never builds all of it in memory.

use crate::json::{CategoryJson, ValueJson};
use crate::survey::{
    proportions, ratio_variance, share_variance, DesignInfo, RaoScott, Survey, Uncertainty,
};
use crate::Pct;
use microtab_engine::stats::{association, chi_square, Association, ChiSquare};
use microtab_engine::{Category, Cube, Moments, Value, WeightCases};
use serde::ser::{SerializeMap, SerializeStruct, Serializer};
use serde::Serialize;

/// Serializes what an iterator yields as a sequence, element by element.
struct Stream<F>(F);

impl<F, I> Serialize for Stream<F>
where
    F: Fn() -> I,
    I: Iterator,
    I::Item: Serialize,
{
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_seq((self.0)())
    }
}

/// Defines `$json`, an optional engine struct `$t` as JSON: `null`, or an
/// object of the fields listed (in that order), named `$name`.
macro_rules! option_json {
    ($(#[$doc:meta])* $json:ident, $t:ty, $name:literal, [$($field:ident),+]) => {
        $(#[$doc])*
        struct $json<'a>(&'a Option<$t>);

        impl Serialize for $json<'_> {
            fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                let Some(x) = self.0 else {
                    return s.serialize_none();
                };
                let mut m = s.serialize_struct($name, [$(stringify!($field)),+].len())?;
                $(m.serialize_field(stringify!($field), &x.$field)?;)+
                m.end()
            }
        }
    };
}

option_json!(
    /// What the weight did with the rows a query selected, as JSON.
    CasesJson,
    WeightCases,
    "WeightCases",
    [negative, zero, missing]
);

option_json!(
    /// Chi-square statistics as JSON (`null` when not asked for or not
    /// defined).
    StatsJson,
    ChiSquare,
    "ChiSquare",
    [chi2, df, p, cramers_v, n]
);

/// How a result was computed: what every result carries.
#[derive(Debug, Clone, PartialEq)]
pub struct Context {
    /// The dataset, as opened.
    pub dataset: String,
    /// The weight, as requested.
    pub weight: Option<String>,
    /// The filter, as requested.
    pub filter: Option<String>,
    /// What the weight did with the selected rows (`None` unweighted).
    pub weight_cases: Option<WeightCases>,
    /// The survey design the standard errors come from (`None`: no
    /// standard errors).
    pub design: Option<DesignInfo>,
}

/// Serializes a result: `dataset`, the result's leading members,
/// `weight`, `filter`, its trailing members, `weight_cases`, and last its
/// long array (`key`), element by element.
fn serialize_result<S: Serializer>(
    s: S,
    context: &Context,
    lead: impl FnOnce(&mut S::SerializeMap) -> Result<(), S::Error>,
    trail: impl FnOnce(&mut S::SerializeMap) -> Result<(), S::Error>,
    key: &str,
    long: &impl Serialize,
) -> Result<S::Ok, S::Error> {
    let mut m = s.serialize_map(None)?;
    m.serialize_entry("dataset", &context.dataset)?;
    lead(&mut m)?;
    m.serialize_entry("weight", &context.weight)?;
    m.serialize_entry("filter", &context.filter)?;
    if let Some(d) = &context.design {
        m.serialize_entry("design", d)?;
    }
    trail(&mut m)?;
    m.serialize_entry("weight_cases", &CasesJson(&context.weight_cases))?;
    m.serialize_entry(key, long)?;
    m.end()
}

/// `impl Serialize` for a result, through [`serialize_result`]: its
/// leading members are its fields `lead` (named as the fields), `trail`
/// writes its trailing members to the map `m` (the result as `this`), and
/// its long array is what its method `long` yields, named as the method.
macro_rules! result_json {
    ($t:ty, [$($lead:ident),*], |$this:ident, $m:ident| $trail:block, $long:ident) => {
        impl Serialize for $t {
            fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                let $this = self;
                serialize_result(
                    s,
                    &self.context,
                    |m| {
                        $(m.serialize_entry(stringify!($lead), &self.$lead)?;)*
                        Ok(())
                    },
                    |$m| {
                        $trail
                        Ok(())
                    },
                    stringify!($long),
                    &Stream(|| self.$long()),
                )
            }
        }
    };
}

/// Record count and sum of weights (`None` unweighted).
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Totals {
    /// Records.
    pub count: u64,
    /// Sum of weights.
    pub weighted: Option<f64>,
}

/// The answer to a request.
#[derive(Debug, Clone)]
pub enum Answer {
    /// Frequencies.
    Freq(Frequencies),
    /// Crosstabs.
    Tab(Crosstab),
    /// Means by group.
    Means(Means),
    /// A regression model.
    Regress(Box<crate::model::Regression>),
    /// Ratios of totals.
    Ratio(Box<crate::ratio::Ratio>),
    /// A correlation matrix.
    Corr(Box<crate::corr::Correlations>),
}

impl Serialize for Answer {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            Answer::Freq(f) => f.serialize(s),
            Answer::Tab(t) => t.serialize(s),
            Answer::Means(m) => m.serialize(s),
            Answer::Regress(r) => r.serialize(s),
            Answer::Ratio(r) => r.serialize(s),
            Answer::Corr(r) => r.serialize(s),
        }
    }
}

/// `TryFrom<Answer>` for each kind of result, so that a front end that
/// asked for one kind takes it typed (the answer back when it is another).
macro_rules! answer_kinds {
    ($($variant:ident($t:ty)),+) => {
        $(impl TryFrom<Answer> for $t {
            type Error = Answer;

            fn try_from(a: Answer) -> Result<Self, Answer> {
                match a {
                    Answer::$variant(x) => Ok(x),
                    other => Err(other),
                }
            }
        })+
    };
}

answer_kinds!(
    Freq(Frequencies),
    Tab(Crosstab),
    Means(Means),
    Regress(Box<crate::model::Regression>),
    Ratio(Box<crate::ratio::Ratio>),
    Corr(Box<crate::corr::Correlations>)
);

// ---------------------------------------------------------------- freq

/// Frequencies of one variable.
#[derive(Debug, Clone)]
pub struct Frequencies {
    /// How it was computed.
    pub context: Context,
    /// The variable's name.
    pub variable: String,
    /// Its label.
    pub label: Option<String>,
    /// All rows counted (missing categories included when shown).
    pub total: Totals,
    cube: Cube,
    /// Percentage base: the measure of the non-missing categories.
    base: f64,
    /// The design's variance and each replicate's percentage base (none
    /// for Taylor designs).
    survey: Option<(Survey, Vec<f64>)>,
}

/// One category of a frequency table.
#[derive(Debug, Clone, PartialEq)]
pub struct FreqRow<'a> {
    /// The category.
    pub category: &'a Category,
    /// Records.
    pub count: u64,
    /// Sum of weights (weighted requests).
    pub weighted: Option<f64>,
    /// Percent of the non-missing total (`None` for missing categories,
    /// or when that total is 0).
    pub percent: Option<f64>,
    /// Standard error and interval of `weighted` (with a design).
    pub weighted_se: Option<Uncertainty>,
    /// Standard error and logit interval of `percent` (with a design).
    pub percent_se: Option<Uncertainty>,
}

impl Serialize for FreqRow<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut m = s.serialize_map(Some(6))?;
        m.serialize_entry("value", &ValueJson(&self.category.value))?;
        m.serialize_entry("label", &self.category.label)?;
        m.serialize_entry("missing", &self.category.missing)?;
        m.serialize_entry("count", &self.count)?;
        m.serialize_entry("weighted", &self.weighted)?;
        m.serialize_entry("percent", &self.percent)?;
        if self.weighted_se.is_some() || self.percent_se.is_some() {
            m.serialize_entry("weighted_se", &self.weighted_se)?;
            m.serialize_entry("percent_se", &self.percent_se)?;
        }
        m.end()
    }
}

impl Frequencies {
    /// The frequencies of the one dimension of `cube`: its variable is
    /// the variable counted.
    pub(crate) fn new(context: Context, cube: Cube, survey: Option<Survey>) -> Self {
        let (variable, label) = cube
            .dims
            .first()
            .map(|d| (d.var.name.clone(), d.var.label.clone()))
            .unwrap_or_default();
        let cats = cube.dims.first().map_or(&[][..], |d| &d.categories[..]);
        let survey = survey.map(|v| {
            let bases = cube.replicates.as_ref().map_or(Vec::new(), |reps| {
                reps.w
                    .iter()
                    .map(|w| {
                        (0..cats.len())
                            .filter(|&i| !cats[i].missing)
                            .map(|i| w[i])
                            .sum()
                    })
                    .collect()
            });
            (v, bases)
        });
        let measure = |i: usize| {
            cube.weighted
                .as_ref()
                .map_or(cube.counts[i] as f64, |w| w[i])
        };
        let base = (0..cats.len())
            .filter(|&i| !cats[i].missing)
            .map(measure)
            .sum();
        let total = Totals {
            count: cube.counts.iter().sum(),
            weighted: cube.weighted.as_ref().map(|w| w.iter().sum()),
        };
        Frequencies {
            context,
            variable,
            label,
            total,
            cube,
            base,
            survey,
        }
    }

    /// Number of categories.
    pub fn len(&self) -> usize {
        self.cube.dims.first().map_or(0, |d| d.categories.len())
    }

    /// Whether no category was counted.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The percentage base: the weighted (or counted) total of the
    /// categories that are not missing.
    pub fn base(&self) -> f64 {
        self.base
    }

    /// The categories with their counts, in value order.
    pub fn rows(&self) -> impl Iterator<Item = FreqRow<'_>> + '_ {
        let cats = self
            .cube
            .dims
            .first()
            .map_or(&[][..], |d| &d.categories[..]);
        // The percentages' domain: the records of the categories that are
        // not missing.
        let base_n: u64 = cats
            .iter()
            .zip(&self.cube.counts)
            .filter(|(c, _)| !c.missing)
            .map(|(_, &n)| n)
            .sum();
        // The design effects' SRS size: without records of weight 0
        // under a Taylor design (R's).
        let srs_n = base_n
            - self
                .survey
                .as_ref()
                .and_then(|(v, _)| v.zeros.as_ref())
                .map_or(0, |z| {
                    (0..cats.len())
                        .filter(|&i| !cats[i].missing)
                        .map(|i| z[i])
                        .sum()
                });
        cats.iter().enumerate().map(move |(i, c)| {
            let weighted = self.cube.weighted.as_ref().map(|w| w[i]);
            let m = weighted.unwrap_or(self.cube.counts[i] as f64);
            let percent = (!c.missing && self.base != 0.0).then(|| 100.0 * m / self.base);
            let (mut weighted_se, mut percent_se) = (None, None);
            let n = self.cube.counts[i];
            match (&self.survey, &self.cube.replicates, &self.cube.taylor) {
                (Some((v, bases)), Some(reps), _) => {
                    let rw: Vec<f64> = reps.w.iter().map(|w| w[i]).collect();
                    weighted_se = v.wald(m, v.variance(m, &rw), n);
                    percent_se = percent.and_then(|p| {
                        let rp: Vec<f64> = rw
                            .iter()
                            .zip(bases)
                            .map(|(&w, &b)| if b != 0.0 { 100.0 * w / b } else { f64::NAN })
                            .collect();
                        v.percent(p, v.variance(p, &rp), n, base_n)
                    });
                }
                (Some((v, _)), None, Some(t)) => {
                    weighted_se = v.wald(m, t.all_scale * t.cell[i][0], n);
                    let base = &t.margins[0];
                    percent_se = percent.zip(base.group[i]).and_then(|(p, g)| {
                        let var = ratio_variance(
                            m,
                            self.base,
                            [t.cell[i][0], base.cross[i], base.var[g][0]],
                        );
                        v.percent(p, 1e4 * t.all_scale * var, n, base_n)
                    });
                }
                _ => {}
            }
            if self.survey.as_ref().is_some_and(|(v, _)| v.srs_ok) && !c.missing {
                let n = srs_n;
                let s2 = share_variance(m / self.base, n);
                weighted_se = weighted_se.map(|u| u.srs(s2, n, self.base, self.base * self.base));
                percent_se = percent_se.map(|u| u.srs(s2, n, self.base, 1e4));
            }
            FreqRow {
                category: c,
                count: self.cube.counts[i],
                weighted,
                percent,
                weighted_se,
                percent_se,
            }
        })
    }
}

result_json!(
    Frequencies,
    [variable, label],
    |f, m| {
        m.serialize_entry("total", &f.total)?;
    },
    rows
);

// ---------------------------------------------------------------- tab

/// Crosstabs of a row by a column variable, one per control category.
#[derive(Debug, Clone)]
pub struct Crosstab {
    /// How it was computed.
    pub context: Context,
    /// Row variable.
    pub row_var: String,
    /// Column variable.
    pub col_var: String,
    /// Control variable.
    pub control_var: Option<String>,
    /// The table's percentages (the first of [`pcts`](Self::pcts)).
    pub pct: Option<Pct>,
    /// Every percentage base asked for, in order; with more than one,
    /// each table has them all in [`Table::percentages`].
    pub pcts: Vec<Pct>,
    /// Whether each table has its chi-square statistics.
    pub stats: bool,
    /// Whether each table has its cells' z-statistics.
    pub z: bool,
    /// With a base column (`Request::diff`): per row category, each
    /// column's share of it minus the base column's share
    /// ([`crate::compare::compare_shares`]).
    pub comparisons: Option<Vec<crate::compare::RowComparison>>,
    cube: Cube,
    survey: Option<Survey>,
}

/// Row or column totals of a table.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Margins {
    /// Records per row (column).
    pub counts: Vec<u64>,
    /// Sum of weights per row (column), weighted requests.
    pub weighted: Option<Vec<f64>>,
}

/// One two-way table: the rows and columns that have records in it.
#[derive(Debug, Clone, PartialEq)]
pub struct Table {
    /// The control category (tables with a control variable).
    pub control: Option<Category>,
    /// Row categories.
    pub rows: Vec<Category>,
    /// Column categories.
    pub cols: Vec<Category>,
    /// Records per cell, `[row][col]`.
    pub counts: Vec<Vec<u64>>,
    /// Sum of weights per cell (weighted requests).
    pub weighted: Option<Vec<Vec<f64>>>,
    /// Percentages per cell (`None` where the base is 0).
    pub pct: Option<Vec<Vec<Option<f64>>>>,
    /// Row totals.
    pub row_totals: Margins,
    /// Column totals.
    pub col_totals: Margins,
    /// Table total.
    pub total: Totals,
    /// Chi-square test and Cramér's V (when asked for and defined).
    pub stats: Option<ChiSquare>,
    /// Measures of association (`--stats`, without a design): the
    /// likelihood-ratio chi-square, gamma, Kendall's tau-b and tau-c,
    /// Somers' d, lambda, Pearson's r and Spearman's rho.
    pub association: Option<Association>,
    /// Standard errors and intervals of the weighted cells (with a design).
    pub weighted_se: Option<Vec<Vec<Option<Uncertainty>>>>,
    /// Standard errors and logit intervals of the percentages (with a
    /// design and percentages).
    pub pct_se: Option<Vec<Vec<Option<Uncertainty>>>>,
    /// The design-based Rao–Scott test (with a design, when statistics
    /// are asked for and defined).
    pub rao_scott: Option<RaoScott>,
    /// Per cell, the z-statistic of the difference between its
    /// percentage along [`Crosstab::z_along`] and the same percentage of
    /// all the table's records (SDA's coloured cells); `None` where
    /// undefined (one row or column, a zero variance). See
    /// [`Crosstab::z_method`].
    pub z: Option<Vec<Vec<Option<f64>>>>,
    /// With several percentage bases ([`Crosstab::pcts`]): each one's
    /// percentages and their SEs, in the order asked (empty otherwise;
    /// [`pct`](Self::pct) is the first's).
    pub percentages: Vec<Percentages>,
}

/// One percentage base's percentages of a table.
#[derive(Debug, Clone, PartialEq)]
pub struct Percentages {
    /// Their base.
    pub base: Pct,
    /// Percentages per cell (`None` where the base is 0).
    pub pct: Vec<Vec<Option<f64>>>,
    /// Their standard errors and intervals (with a design).
    pub pct_se: Option<Vec<Vec<Option<Uncertainty>>>>,
}

/// A table's [`Percentages`] as JSON: `{"col": {"pct": …, "pct_se": …}, …}`.
struct PercentagesJson<'a>(&'a [Percentages]);

impl Serialize for PercentagesJson<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        #[derive(Serialize)]
        struct One<'a> {
            pct: &'a Vec<Vec<Option<f64>>>,
            pct_se: &'a Option<Vec<Vec<Option<Uncertainty>>>>,
        }
        let mut m = s.serialize_map(Some(self.0.len()))?;
        for p in self.0 {
            m.serialize_entry(
                pct_name(p.base),
                &One {
                    pct: &p.pct,
                    pct_se: &p.pct_se,
                },
            )?;
        }
        m.end()
    }
}

/// What one cut of a crosstab's table computes.
#[derive(Debug, Clone, Copy)]
struct Ask {
    pct: Option<Pct>,
    stats: bool,
    z: bool,
}

impl Table {
    /// The cells' measure: sums of weights, or counts unweighted.
    pub fn measure(&self) -> Vec<Vec<f64>> {
        match &self.weighted {
            Some(w) => w.clone(),
            None => self
                .counts
                .iter()
                .map(|r| r.iter().map(|&c| c as f64).collect())
                .collect(),
        }
    }

    fn empty() -> Table {
        Table {
            control: None,
            rows: vec![],
            cols: vec![],
            counts: vec![],
            weighted: None,
            pct: None,
            row_totals: Margins {
                counts: vec![],
                weighted: None,
            },
            col_totals: Margins {
                counts: vec![],
                weighted: None,
            },
            total: Totals {
                count: 0,
                weighted: None,
            },
            stats: None,
            association: None,
            weighted_se: None,
            pct_se: None,
            rao_scott: None,
            z: None,
            percentages: Vec::new(),
        }
    }
}

impl Serialize for Table {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut m = s.serialize_map(Some(10))?;
        m.serialize_entry(
            "control",
            &self.control.as_ref().map(|c| CategoryJson(c, true)),
        )?;
        m.serialize_entry(
            "rows",
            &Stream(|| self.rows.iter().map(|c| CategoryJson(c, true))),
        )?;
        m.serialize_entry(
            "cols",
            &Stream(|| self.cols.iter().map(|c| CategoryJson(c, true))),
        )?;
        m.serialize_entry("counts", &self.counts)?;
        m.serialize_entry("weighted", &self.weighted)?;
        m.serialize_entry("pct", &self.pct)?;
        m.serialize_entry("row_totals", &self.row_totals)?;
        m.serialize_entry("col_totals", &self.col_totals)?;
        m.serialize_entry("total", &self.total)?;
        m.serialize_entry("stats", &StatsJson(&self.stats))?;
        if self.stats.is_some() || self.association.is_some() {
            m.serialize_entry("association", &self.association)?;
        }
        if self.weighted_se.is_some() {
            m.serialize_entry("weighted_se", &self.weighted_se)?;
            m.serialize_entry("pct_se", &self.pct_se)?;
            m.serialize_entry("rao_scott", &self.rao_scott)?;
        }
        if !self.percentages.is_empty() {
            // As the HTTP API has always shown several: by base's name.
            m.serialize_entry("percentages", &PercentagesJson(&self.percentages))?;
        }
        if self.z.is_some() {
            m.serialize_entry("z", &self.z)?;
        }
        m.end()
    }
}

/// A table's row sums, column sums and total.
fn margins(m: &[Vec<f64>]) -> (Vec<f64>, Vec<f64>, f64) {
    let rs: Vec<f64> = m.iter().map(|r| r.iter().sum()).collect();
    let cs = col_sums(m, m.first().map_or(0, |r| r.len()));
    let tot = rs.iter().sum();
    (rs, cs, tot)
}

/// `f(i, j, x)` for every cell `x` (row `i`, column `j`) of the table `m`.
fn cells<T, U>(m: &[Vec<T>], mut f: impl FnMut(usize, usize, &T) -> U) -> Vec<Vec<U>> {
    m.iter()
        .enumerate()
        .map(|(i, r)| r.iter().enumerate().map(|(j, x)| f(i, j, x)).collect())
        .collect()
}

/// A base's name in JSON (`row`, `col`, `total`).
fn pct_name(p: Pct) -> &'static str {
    match p {
        Pct::Row => "row",
        Pct::Col => "col",
        Pct::Total => "total",
    }
}

fn percents(m: &[Vec<f64>], pct: Pct) -> Vec<Vec<Option<f64>>> {
    let (rs, cs, tot) = margins(m);
    cells(m, |i, j, &x| {
        let base = match pct {
            Pct::Row => rs[i],
            Pct::Col => cs[j],
            Pct::Total => tot,
        };
        (base != 0.0).then(|| 100.0 * x / base)
    })
}

/// The records of the percentage base (`kind`) of cell `(i, j)` of table
/// `t`: the table's, its row's or its column's.
fn domain_n(t: &Table, kind: Option<Pct>, i: usize, j: usize) -> u64 {
    match kind {
        Some(Pct::Row) => t.row_totals.counts[i],
        Some(Pct::Col) => t.col_totals.counts[j],
        _ => t.total.count,
    }
}

fn col_sums<T: Copy + std::iter::Sum<T>>(m: &[Vec<T>], nc: usize) -> Vec<T> {
    (0..nc).map(|j| m.iter().map(|r| r[j]).sum()).collect()
}

/// Per cell of the table `m`, the difference (a fraction) between its
/// share of its column (`along` [`Pct::Col`]; of its row for
/// [`Pct::Row`]) and its row's (column's) share of the table: the
/// estimate whose z-statistic colours the cell. `None` where a base is 0.
fn z_diffs(m: &[Vec<f64>], along: Pct) -> Vec<Vec<Option<f64>>> {
    let (rs, cs, n) = margins(m);
    cells(m, |i, j, &x| {
        let (own, overall) = match along {
            Pct::Row => (rs[i], cs[j]),
            _ => (cs[j], rs[i]),
        };
        (own != 0.0 && n != 0.0).then(|| x / own - overall / n)
    })
}

/// A difference over its standard error; `None` when the variance is 0
/// or undefined.
fn z_of(d: f64, var: f64) -> Option<f64> {
    (var > 0.0 && var.is_finite()).then(|| d / var.sqrt())
}

/// The cells' z-statistics under simple random sampling: adjusted
/// residuals `(O − E)/√(E (1 − Rᵢ/N)(1 − Cⱼ/N))` (Agresti; the same along
/// rows and columns) of the table `m` scaled to its `n` records (weights
/// normalized to the sample size; unweighted, the counts themselves).
fn srs_z(m: &[Vec<f64>], n: u64) -> Vec<Vec<Option<f64>>> {
    let (rs, cs, total) = margins(m);
    let k = if total > 0.0 { n as f64 / total } else { 0.0 };
    let (rs, cs): (Vec<f64>, Vec<f64>) = (
        rs.iter().map(|r| k * r).collect(),
        cs.iter().map(|c| k * c).collect(),
    );
    let n = n as f64;
    cells(m, |i, j, &x| {
        let e = rs[i] * cs[j] / n;
        z_of(k * x - e, e * (1.0 - rs[i] / n) * (1.0 - cs[j] / n))
    })
}

/// The cells' z-statistics under a linearized design: the difference of
/// [`z_diffs`] over its standard error `√(gᵀ Σ g)`, `g` the difference's
/// gradient in the cells' weighted counts and `cov(i, j, i2, j2)` their
/// covariance `Σ`. `g` is a column's part plus a part that depends on the
/// row only, so each cell costs `r²` after sums over `Σ`'s columns.
fn taylor_z(
    m: &[Vec<f64>],
    along: Pct,
    cov: &dyn Fn(usize, usize, usize, usize) -> f64,
) -> Vec<Vec<Option<f64>>> {
    if along == Pct::Row {
        // Along rows is along columns of the transposed table.
        let nc = m.first().map_or(0, |r| r.len());
        let mt: Vec<Vec<f64>> = (0..nc).map(|j| m.iter().map(|r| r[j]).collect()).collect();
        let zt = taylor_z(&mt, Pct::Col, &|a, b, a2, b2| cov(b, a, b2, a2));
        return (0..m.len())
            .map(|i| zt.iter().map(|r| r[i]).collect())
            .collect();
    }
    let (nr, nc) = (m.len(), m.first().map_or(0, |r| r.len()));
    let (rs, cs, n) = margins(m);
    // rowcov[a][b][a2] = Σ_b2 Σ[(a,b),(a2,b2)]; both[a][a2] = Σ_b of it.
    let rowcov: Vec<Vec<Vec<f64>>> = (0..nr)
        .map(|a| {
            (0..nc)
                .map(|b| {
                    (0..nr)
                        .map(|a2| (0..nc).map(|b2| cov(a, b, a2, b2)).sum())
                        .collect()
                })
                .collect()
        })
        .collect();
    let both: Vec<Vec<f64>> = (0..nr)
        .map(|a| {
            (0..nr)
                .map(|a2| (0..nc).map(|b| rowcov[a][b][a2]).sum())
                .collect()
        })
        .collect();
    let d = z_diffs(m, Pct::Col);
    (0..nr)
        .map(|i| {
            (0..nc)
                .map(|j| {
                    let diff = d[i][j]?;
                    if n == 0.0 || cs[j] == 0.0 {
                        return None;
                    }
                    let p = m[i][j] / cs[j];
                    let big_p = rs[i] / n;
                    let ind = |a: usize| if a == i { 1.0 } else { 0.0 };
                    // g = A (column j only) + B (by row, every column).
                    let ga: Vec<f64> = (0..nr).map(|a| (ind(a) - p) / cs[j]).collect();
                    let gb: Vec<f64> = (0..nr).map(|a| -(ind(a) - big_p) / n).collect();
                    let mut var = 0.0;
                    for a in 0..nr {
                        for a2 in 0..nr {
                            var += ga[a] * ga[a2] * cov(a, j, a2, j)
                                + 2.0 * ga[a] * gb[a2] * rowcov[a][j][a2]
                                + gb[a] * gb[a2] * both[a][a2];
                        }
                    }
                    z_of(diff, var)
                })
                .collect()
        })
        .collect()
}

/// One table's cells in a crosstab's cube: control category `k`'s block
/// of `nr` × `nc` cells, and the rows and columns with records in it.
struct Cut {
    k: usize,
    nr: usize,
    nc: usize,
    keep_r: Vec<usize>,
    keep_c: Vec<usize>,
}

impl Cut {
    fn new(k: usize, nr: usize, nc: usize, counts: &[u64]) -> Cut {
        let mut cut = Cut {
            k,
            nr,
            nc,
            keep_r: Vec::new(),
            keep_c: Vec::new(),
        };
        cut.keep_r = (0..nr)
            .filter(|&i| (0..nc).any(|j| counts[cut.at(i, j)] > 0))
            .collect();
        cut.keep_c = (0..nc)
            .filter(|&j| (0..nr).any(|i| counts[cut.at(i, j)] > 0))
            .collect();
        cut
    }

    /// The cube's index of row `i`, column `j` of the block.
    fn at(&self, i: usize, j: usize) -> usize {
        self.k * self.nr * self.nc + i * self.nc + j
    }

    /// The kept cells of a cube-shaped vector `x`, row by row.
    fn pick<T: Copy>(&self, x: &[T]) -> Vec<Vec<T>> {
        self.keep_r
            .iter()
            .map(|&i| self.keep_c.iter().map(|&j| x[self.at(i, j)]).collect())
            .collect()
    }
}

/// Pearson's r and the other measures of association of table `t` (its
/// measure `m`), with the categories' codes as numbers when every one has
/// a numeric code.
fn code_association(t: &Table, m: &[Vec<f64>]) -> Option<Association> {
    let values = |cats: &[Category]| -> Option<Vec<f64>> {
        cats.iter()
            .map(|c| match c.value {
                Value::Int(v) => Some(v as f64),
                Value::Num(v) => Some(v),
                _ => None,
            })
            .collect()
    };
    let (xs, ys) = (values(&t.rows), values(&t.cols));
    association(m, xs.as_deref(), ys.as_deref())
}

impl Crosstab {
    pub(crate) fn new(
        context: Context,
        [row_var, col_var]: [String; 2],
        control_var: Option<String>,
        pcts: Vec<Pct>,
        [stats, z]: [bool; 2],
        cube: Cube,
        survey: Option<Survey>,
    ) -> Self {
        Crosstab {
            context,
            row_var,
            col_var,
            control_var,
            pct: pcts.first().copied(),
            pcts,
            stats,
            z,
            comparisons: None,
            cube,
            survey,
        }
    }

    /// The percentages the cells' z-statistics compare: a cell's share of
    /// its row with its column's share of the table for row percentages
    /// ([`Pct::Row`]); otherwise its share of its column with its row's
    /// share of the table ([`Pct::Col`], SDA's default).
    pub fn z_along(&self) -> Pct {
        if self.pct == Some(Pct::Row) {
            Pct::Row
        } else {
            Pct::Col
        }
    }

    /// How the cells' z-statistics' standard errors are found: `"design"`
    /// (the survey design: replicate weights or linearization), `"srs"`
    /// (unweighted: adjusted residuals), or `"srs-weighted"` (weights
    /// normalized to the records, as if they were a simple random sample:
    /// the weights' own variance is not accounted for — set a design).
    pub fn z_method(&self) -> &'static str {
        if self.survey.is_some() {
            "design"
        } else if self.context.weight.is_some() {
            "srs-weighted"
        } else {
            "srs"
        }
    }

    /// The tables, one per control category that has records (one table,
    /// possibly empty, without a control variable), each cut from the cube
    /// when it is reached.
    pub fn tables(&self) -> impl Iterator<Item = Table> + '_ {
        let control = self.control_var.is_some();
        let n = if self.cube.counts.is_empty() {
            0
        } else if control {
            self.cube.dims[0].categories.len()
        } else {
            1
        };
        (0..n)
            .filter_map(move |k| self.cut(k))
            .chain((n == 0 && !control).then(Table::empty))
    }

    /// Table `k` (the `k`-th control category's) without the rows and
    /// columns empty in it; `None` for a control category with no records.
    fn cut(&self, k: usize) -> Option<Table> {
        let ask = Ask {
            pct: self.pct,
            stats: self.stats,
            z: self.z,
        };
        let mut t = self.cut_as(k, ask)?;
        if self.pcts.len() > 1 {
            // Each further base's percentages from the same cells (the
            // table's own tests and z computed once).
            t.percentages = self
                .pcts
                .iter()
                .map(|&base| {
                    let (pct, pct_se) = if Some(base) == self.pct {
                        (t.pct.clone(), t.pct_se.clone())
                    } else {
                        let o = self.cut_as(
                            k,
                            Ask {
                                pct: Some(base),
                                stats: false,
                                z: false,
                            },
                        );
                        o.map_or((None, None), |o| (o.pct, o.pct_se))
                    };
                    Percentages {
                        base,
                        pct: pct.unwrap_or_default(),
                        pct_se,
                    }
                })
                .collect();
        }
        Some(t)
    }

    /// Table `k` with the percentages, tests and z of `ask`.
    fn cut_as(&self, k: usize, ask: Ask) -> Option<Table> {
        let cube = &self.cube;
        let control = self.control_var.is_some();
        let off = control as usize;
        let (rd, cd) = (&cube.dims[off], &cube.dims[off + 1]);
        let cut = Cut::new(k, rd.categories.len(), cd.categories.len(), &cube.counts);
        if control && cut.keep_r.is_empty() {
            return None;
        }
        let counts = cut.pick(&cube.counts);
        let weighted = cube.weighted.as_ref().map(|w| cut.pick(w));
        let ncols = cut.keep_c.len();
        let row_counts: Vec<u64> = counts.iter().map(|r| r.iter().sum()).collect();
        let row_w: Option<Vec<f64>> = weighted
            .as_ref()
            .map(|w| w.iter().map(|r| r.iter().sum()).collect());
        let mut t = Table {
            control: control.then(|| cube.dims[0].categories[k].clone()),
            rows: cut
                .keep_r
                .iter()
                .map(|&i| rd.categories[i].clone())
                .collect(),
            cols: cut
                .keep_c
                .iter()
                .map(|&j| cd.categories[j].clone())
                .collect(),
            col_totals: Margins {
                counts: col_sums(&counts, ncols),
                weighted: weighted.as_ref().map(|w| col_sums(w, ncols)),
            },
            total: Totals {
                count: row_counts.iter().sum(),
                weighted: row_w.as_ref().map(|r| r.iter().sum()),
            },
            row_totals: Margins {
                counts: row_counts,
                weighted: row_w,
            },
            counts,
            weighted,
            ..Table::empty()
        };
        let m = t.measure();
        t.pct = ask.pct.map(|p| percents(&m, p));
        // With a design, Pearson's statistic on weighted counts would
        // overstate significance (by N̂/n and the design effect): none.
        if ask.stats && self.survey.is_none() {
            t.stats = chi_square(&m);
            t.association = code_association(&t, &m);
        }
        if ask.z && self.survey.is_none() {
            t.z = Some(srs_z(&m, t.total.count));
        }
        if let (Some(v), Some(tc)) = (&self.survey, &cube.taylor) {
            self.taylor_ses(&mut t, v, tc, &cut, ask);
        }
        if let (Some(v), Some(reps)) = (&self.survey, &cube.replicates) {
            // Each replicate's table.
            let rm: Vec<Vec<Vec<f64>>> = reps.w.iter().map(|w| cut.pick(w)).collect();
            self.replicate_ses(&mut t, v, &m, &rm, ask);
        }
        if let Some(v) = self.survey.as_ref().filter(|v| v.srs_ok) {
            // Records of weight 0 per kept cell (Taylor designs: out of
            // the SRS sizes).
            let zeros = match &v.zeros {
                Some(z) => cut.pick(z),
                None => vec![vec![0; ncols]; cut.keep_r.len()],
            };
            self.design_effects(&mut t, &zeros, ask);
        }
        Some(t)
    }

    /// The standard errors of table `t` (its measure `m`) from the
    /// replicates' tables `rm`: counts, percentages, z and Rao–Scott.
    fn replicate_ses(
        &self,
        t: &mut Table,
        v: &Survey,
        m: &[Vec<f64>],
        rm: &[Vec<Vec<f64>>],
        ask: Ask,
    ) {
        if ask.stats {
            t.rao_scott = v.rao_scott(m, rm, t.total.count as f64);
        }
        // z: each replicate's differences, and their variance.
        t.z = ask.z.then(|| {
            let along = self.z_along();
            let rd: Vec<Vec<Vec<Option<f64>>>> = rm.iter().map(|m| z_diffs(m, along)).collect();
            cells(&z_diffs(m, along), |i, j, &x| {
                let x = x?;
                let reps: Vec<f64> = rd.iter().map(|r| r[i][j].unwrap_or(f64::NAN)).collect();
                z_of(x, v.variance(x, &reps).v)
            })
        });
        let rp: Option<Vec<Vec<Vec<Option<f64>>>>> =
            ask.pct.map(|p| rm.iter().map(|m| percents(m, p)).collect());
        let reps_of = |f: &dyn Fn(usize) -> f64| -> Vec<f64> { (0..rm.len()).map(f).collect() };
        t.weighted_se = Some(cells(m, |i, j, &x| {
            let reps = reps_of(&|r| rm[r][i][j]);
            v.wald(x, v.variance(x, &reps), t.counts[i][j])
        }));
        if let (Some(pct), Some(rp)) = (&t.pct, &rp) {
            let pct_se = cells(pct, |i, j, p| {
                let p = (*p)?;
                let reps = reps_of(&|r| rp[r][i][j].unwrap_or(f64::NAN));
                let d = domain_n(t, ask.pct, i, j);
                v.percent(p, v.variance(p, &reps), t.counts[i][j], d)
            });
            t.pct_se = Some(pct_se);
        }
    }

    /// The design effects of table `t`'s counts (its domain: the table)
    /// and percentages (their base's); `zeros`: the records of weight 0
    /// per cell, left out of the SRS sizes.
    fn design_effects(&self, t: &mut Table, zeros: &[Vec<u64>], ask: Ask) {
        let Some(m) = t.weighted.clone() else {
            return;
        };
        let zr: Vec<u64> = zeros.iter().map(|r| r.iter().sum()).collect();
        let zc: Vec<u64> = col_sums(zeros, zeros.first().map_or(0, |r| r.len()));
        let zt: u64 = zr.iter().sum();
        let (n, w) = (t.total.count - zt, t.total.weighted.unwrap_or(0.0));
        if let Some(se) = t.weighted_se.as_mut() {
            for (i, row) in se.iter_mut().enumerate() {
                for (j, u) in row.iter_mut().enumerate() {
                    *u = u.map(|u| u.srs(share_variance(m[i][j] / w, n), n, w, w * w));
                }
            }
        }
        let rw = t.row_totals.weighted.clone().unwrap_or_default();
        let cw = t.col_totals.weighted.clone().unwrap_or_default();
        if let (Some(se), Some(kind)) = (t.pct_se.as_mut(), ask.pct) {
            for (i, row) in se.iter_mut().enumerate() {
                for (j, u) in row.iter_mut().enumerate() {
                    let (n, w) = match kind {
                        Pct::Total => (n, w),
                        Pct::Row => (t.row_totals.counts[i] - zr[i], rw[i]),
                        Pct::Col => (t.col_totals.counts[j] - zc[j], cw[j]),
                    };
                    *u = u.map(|u| u.srs(share_variance(m[i][j] / w, n), n, w, 1e4));
                }
            }
        }
    }
}

impl Crosstab {
    /// The standard errors of table `t` (the cube's cells `cut`) from the
    /// Taylor covariances of its totals; its Rao–Scott test.
    fn taylor_ses(
        &self,
        t: &mut Table,
        v: &Survey,
        tc: &microtab_engine::TaylorCells,
        cut: &Cut,
        ask: Ask,
    ) {
        let (keep_r, keep_c, k) = (&cut.keep_r[..], &cut.keep_c[..], cut.k);
        let at = |i: usize, j: usize| cut.at(i, j);
        let Some(m) = t.weighted.clone() else {
            return;
        };
        // The table's domain's factor (lonely PSUs averaged).
        let table_scale = keep_r
            .iter()
            .flat_map(|&i| keep_c.iter().map(move |&j| (i, j)))
            .find_map(|(i, j)| tc.margins[0].group[at(i, j)])
            .map_or(1.0, |g| tc.margins[0].scale[g]);
        t.weighted_se = Some(cells(&m, |i, j, &x| {
            v.wald(
                x,
                table_scale * tc.cell[at(keep_r[i], keep_c[j])][0],
                t.counts[i][j],
            )
        }));
        if let (Some(pct), Some(kind)) = (&t.pct, ask.pct) {
            // The query's margins: the table's total, its rows, its columns.
            let mc = &tc.margins[match kind {
                Pct::Total => 0,
                Pct::Row => 1,
                Pct::Col => 2,
            }];
            t.pct_se = Some(cells(pct, |i, j, p| {
                let c = at(keep_r[i], keep_c[j]);
                let (p, g) = ((*p)?, mc.group[c]?);
                let base = match kind {
                    Pct::Total => m.iter().flatten().sum(),
                    Pct::Row => m[i].iter().sum(),
                    Pct::Col => m.iter().map(|r| r[j]).sum(),
                };
                let var = ratio_variance(m[i][j], base, [tc.cell[c][0], mc.cross[c], mc.var[g][0]]);
                let d = domain_n(t, ask.pct, i, j);
                v.percent(p, 1e4 * mc.scale[g] * var, t.counts[i][j], d)
            }));
        }
        let Some(full) = tc.full.as_ref().and_then(|f| f.get(k)) else {
            return;
        };
        let ncube = self.cube.dims[self.cube.dims.len() - 1].categories.len();
        let size = (full.len() as f64).sqrt() as usize;
        let pos = |ci: usize, cj: usize| ci * ncube + cj;
        // z: the linearized variance of each difference, from the
        // covariance of the kept cells' weighted counts.
        let cov = |i: usize, j: usize, i2: usize, j2: usize| {
            table_scale * full[pos(keep_r[i], keep_c[j]) * size + pos(keep_r[i2], keep_c[j2])]
        };
        if ask.z {
            t.z = Some(taylor_z(&m, self.z_along(), &cov));
        }
        if ask.stats {
            // The covariance of the kept cells' proportions (rows varying
            // fastest) from that of their weighted counts.
            let Some(p) = proportions(&m) else {
                return;
            };
            let total: f64 = m.iter().flatten().sum();
            let cells: Vec<usize> = keep_c
                .iter()
                .flat_map(|&cj| keep_r.iter().map(move |&ci| pos(ci, cj)))
                .collect();
            let f = |a: usize, b: usize| full[a * size + b];
            let row_sum: Vec<f64> = cells
                .iter()
                .map(|&a| (0..size).map(|b| f(a, b)).sum())
                .collect();
            let all: f64 = (0..size)
                .map(|a| (0..size).map(|b| f(a, b)).sum::<f64>())
                .sum();
            let cov: Vec<Vec<f64>> = (0..cells.len())
                .map(|x| {
                    (0..cells.len())
                        .map(|y| {
                            table_scale
                                * (f(cells[x], cells[y]) - p[x] * row_sum[y] - p[y] * row_sum[x]
                                    + p[x] * p[y] * all)
                                / (total * total)
                        })
                        .collect()
                })
                .collect();
            t.rao_scott = v.rao_scott_cov(&m, &cov, t.total.count as f64);
        }
    }
}

result_json!(
    Crosstab,
    [row_var, col_var, control_var],
    |x, m| {
        m.serialize_entry("pct", &x.pct)?;
        if x.pcts.len() > 1 {
            m.serialize_entry("pcts", &x.pcts)?;
        }
        if x.z {
            m.serialize_entry("z_along", &x.z_along())?;
            m.serialize_entry("z_method", x.z_method())?;
        }
        if let Some(c) = &x.comparisons {
            m.serialize_entry("comparisons", c)?;
        }
    },
    tables
);

// ---------------------------------------------------------------- means

/// Mean, SD, N and sum of weights.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Stat {
    /// Weighted mean (`None` when the sum of weights is 0).
    pub mean: Option<f64>,
    /// Frequency-weight standard deviation (`None` when the sum of
    /// weights is at most 1).
    pub sd: Option<f64>,
    /// Records.
    pub n: u64,
    /// Sum of weights (records unweighted).
    pub sum_weights: f64,
}

impl From<&Moments> for Stat {
    fn from(m: &Moments) -> Self {
        Stat {
            mean: (m.w != 0.0).then_some(m.mean),
            sd: m.sd(),
            n: m.n,
            sum_weights: m.w,
        }
    }
}

/// Means of an analysis variable by group.
#[derive(Debug, Clone)]
pub struct Means {
    /// How it was computed.
    pub context: Context,
    /// The analysis variable.
    pub variable: String,
    /// Its label.
    pub label: Option<String>,
    /// The grouping variables, outermost first.
    pub by: Vec<String>,
    /// Over all groups.
    pub total: Stat,
    /// Standard error and interval of the mean over all groups (with a
    /// design).
    pub total_se: Option<Uncertainty>,
    /// The quantiles over all groups (`Request::quantiles`).
    pub total_quantiles: Vec<crate::Quantile>,
    /// Each group's mean minus the base group's (`Request::diff`).
    pub comparison: Option<Box<crate::compare::Comparison>>,
    /// Each group's mean (and the total's) tested against a value
    /// ([`Request::test_mean`](crate::Request::test_mean)).
    pub test: Option<Box<crate::ttest::MeanTests>>,
    cube: Cube,
    survey: Option<Survey>,
    /// Each group's quantiles (cube order).
    quantiles: Vec<Vec<crate::Quantile>>,
}

/// One group of a means result.
#[derive(Debug, Clone, PartialEq)]
pub struct Group<'a> {
    /// Its category of each grouping variable.
    pub by: Vec<&'a Category>,
    /// Its statistics.
    pub stat: Stat,
    /// Standard error and interval of its mean (with a design).
    pub mean_se: Option<Uncertainty>,
    /// Its quantiles (`Request::quantiles`), each with its SE and
    /// interval under a design.
    pub quantiles: &'a [crate::Quantile],
}

impl Serialize for Group<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut m = s.serialize_map(Some(5))?;
        m.serialize_entry("mean", &self.stat.mean)?;
        m.serialize_entry("sd", &self.stat.sd)?;
        m.serialize_entry("n", &self.stat.n)?;
        m.serialize_entry("sum_weights", &self.stat.sum_weights)?;
        if self.mean_se.is_some() {
            m.serialize_entry("mean_se", &self.mean_se)?;
        }
        if !self.quantiles.is_empty() {
            m.serialize_entry("quantiles", &self.quantiles)?;
        }
        m.serialize_entry(
            "by",
            &Stream(|| self.by.iter().map(|c| CategoryJson(c, false))),
        )?;
        m.end()
    }
}

/// The moments of all of a means cube's groups that have records, merged.
fn all_groups(cube: &Cube) -> Moments {
    cube.moments
        .iter()
        .flatten()
        .filter(|m| m.n > 0)
        .fold(Moments::default(), |mut t, m| {
            t.merge(m);
            t
        })
}

impl Means {
    pub(crate) fn new(
        context: Context,
        variable: String,
        label: Option<String>,
        cube: Cube,
        survey: Option<Survey>,
        quantiles: Option<crate::quantile::Quantiles>,
    ) -> Self {
        let quantiles = quantiles.unwrap_or_default();
        let total = all_groups(&cube);
        let mut means = Means {
            context,
            variable,
            label,
            by: cube.dims.iter().map(|d| d.var.name.clone()).collect(),
            total: Stat::from(&total),
            total_se: None,
            total_quantiles: quantiles.total,
            comparison: None,
            test: None,
            cube,
            survey,
            quantiles: quantiles.cells,
        };
        means.total_se = means.mean_se(None);
        means
    }

    /// The standard error of the mean of cell `c` (`None`: over all
    /// cells), from each replicate's Σ w_r·x / Σ w_r.
    fn mean_se(&self, c: Option<usize>) -> Option<Uncertainty> {
        let v = self.survey.as_ref()?;
        let u = self.mean_se_only(c)?;
        if !v.srs_ok {
            return Some(u);
        }
        // The domain's moments: the group's, or all groups'.
        let m = match c {
            Some(c) => self.cube.moments.as_ref()?[c],
            None => all_groups(&self.cube),
        };
        // Under a Taylor design, R's SRS size leaves out records of
        // weight 0.
        let zero: u64 = v.zeros.as_ref().map_or(0, |z| match c {
            Some(c) => z[c],
            None => z.iter().sum(),
        });
        let k = m.n - zero;
        let n = k as f64;
        Some(u.srs(n / (n - 1.0) * m.m2 / m.w, k, m.w, 1.0))
    }

    /// [`mean_se`](Self::mean_se) without the design effects.
    fn mean_se_only(&self, c: Option<usize>) -> Option<Uncertainty> {
        let v = self.survey.as_ref()?;
        if let Some(t) = &self.cube.taylor {
            let (m, var, scale) = match c {
                Some(c) => (self.cube.moments.as_ref()?[c], t.cell[c], t.cell_scale[c]),
                None => {
                    let g = t.margins.first()?;
                    let m = Moments {
                        n: self.total.n,
                        w: self.total.sum_weights,
                        mean: self.total.mean?,
                        m2: 0.0,
                    };
                    (m, *g.var.first()?, t.all_scale)
                }
            };
            if m.w == 0.0 {
                return None;
            }
            let var = ratio_variance((m.mean - t.shift) * m.w, m.w, [var[2], var[1], var[0]]);
            return v.wald(m.mean, scale * var, m.n);
        }
        let reps = self.cube.replicates.as_ref()?;
        let wx = reps.wx.as_ref()?;
        let sum = |x: &[f64]| match c {
            Some(c) => x[c],
            None => x.iter().sum(),
        };
        let rm: Vec<f64> = reps
            .w
            .iter()
            .zip(wx)
            .map(|(w, wx)| sum(wx) / sum(w))
            .collect();
        let (est, n) = match c {
            Some(c) => {
                let m = &self.cube.moments.as_ref()?[c];
                (m.mean, m.n)
            }
            None => (self.total.mean?, self.total.n),
        };
        v.wald(est, v.variance(est, &rm), n)
    }

    /// The groups that have records, in category order.
    pub fn groups(&self) -> impl Iterator<Item = Group<'_>> + '_ {
        let shape = self.cube.shape();
        self.cube
            .moments
            .iter()
            .flatten()
            .enumerate()
            .filter(|(_, m)| m.n > 0)
            .map(move |(c, m)| {
                let idx = microtab_engine::unravel(c, &shape);
                Group {
                    by: idx
                        .iter()
                        .enumerate()
                        .map(|(d, &i)| &self.cube.dims[d].categories[i])
                        .collect(),
                    stat: Stat::from(m),
                    mean_se: self.mean_se(Some(c)),
                    quantiles: self.quantiles.get(c).map_or(&[], |q| &q[..]),
                }
            })
    }
}

result_json!(
    Means,
    [variable, label, by],
    |means, m| {
        m.serialize_entry("total", &means.total)?;
        if means.total_se.is_some() {
            m.serialize_entry("total_se", &means.total_se)?;
        }
        if !means.total_quantiles.is_empty() {
            m.serialize_entry("total_quantiles", &means.total_quantiles)?;
        }
        if let Some(c) = &means.comparison {
            m.serialize_entry("comparison", c)?;
        }
        if let Some(t) = &means.test {
            m.serialize_entry("test", t)?;
        }
    },
    groups
);
