//! What a front end asks.

use serde::{Deserialize, Deserializer, Serialize};
use std::str::FromStr;

/// Implements `FromStr` from a table of each variant's words (read
/// trimmed, any case; `what` names the option in the error, which lists
/// `expected`), and `Deserialize` through it, so that every front end
/// (URL parameters, Python keywords as JSON, command-line flags) reads an
/// option's words the one same way.
macro_rules! from_words {
    ($t:ty, $what:literal, $expected:literal, { $($($word:literal)|+ => $v:expr),+ $(,)? }) => {
        impl FromStr for $t {
            type Err = String;

            fn from_str(s: &str) -> Result<Self, String> {
                match s.trim().to_ascii_lowercase().as_str() {
                    $($($word)|+ => Ok($v),)+
                    _ => Err(format!(concat!($what, " '{}': expected ", $expected), s)),
                }
            }
        }

        impl<'de> Deserialize<'de> for $t {
            fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                let s = String::deserialize(d)?;
                s.parse().map_err(serde::de::Error::custom)
            }
        }
    };
}

/// Percentage base of a crosstab.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Pct {
    /// Of the row total.
    Row,
    /// Of the column total.
    Col,
    /// Of the table total.
    Total,
}

// `row`, `col` (or `column`), `total`, any case.
from_words!(Pct, "pct", "row, col or total", {
    "row" => Pct::Row,
    "col" | "column" => Pct::Col,
    "total" => Pct::Total,
});

impl Pct {
    /// Several bases separated by commas (`col,row,total`), in the order
    /// given, each once; empty entries are skipped (`""`: none).
    pub fn list(s: &str) -> Result<Vec<Pct>, String> {
        let mut out = Vec::new();
        for w in s.split(',').map(str::trim).filter(|w| !w.is_empty()) {
            let p: Pct = w.parse()?;
            if !out.contains(&p) {
                out.push(p);
            }
        }
        Ok(out)
    }
}

/// How percentages' confidence intervals are formed under a design.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Default)]
#[serde(rename_all = "kebab-case")]
pub enum PctInterval {
    /// `logit(p) ± t·SE/(p(1 − p))`, transformed back (R `svyciprop`
    /// `"xlogit"`, Stata `svy: tab`).
    #[default]
    Logit,
    /// Korn–Graubard: Clopper–Pearson on the effective sample size (R
    /// `svyciprop(method = "beta")`).
    KornGraubard,
}

// `logit`, `korn-graubard` (or `beta`, R's name), any case.
from_words!(PctInterval, "percentage interval", "logit or korn-graubard (beta)", {
    "logit" => PctInterval::Logit,
    "korn-graubard" | "beta" => PctInterval::KornGraubard,
});

/// The analysis to run.
#[derive(Debug, Clone, PartialEq)]
pub enum Analysis {
    /// Frequencies of one variable.
    Freq {
        /// The variable counted.
        var: String,
    },
    /// `row × col` crosstabs, one per category of `control`.
    Tab {
        /// Row variable.
        row: String,
        /// Column variable.
        col: String,
        /// Control variable (one table per category).
        control: Option<String>,
        /// Percentages to compute, in the order shown (none: counts
        /// only); with several, each cell has every one with its SE.
        pct: Vec<Pct>,
        /// Chi-square test and Cramér's V per table.
        stats: bool,
    },
    /// Mean, SD, N and sum of weights of `var` per group of `by`.
    Means {
        /// Analysis variable.
        var: String,
        /// Grouping variables, outermost first.
        by: Vec<String>,
    },
    /// A regression model (`Y ~ X1 + factor(F)`) with design-based
    /// standard errors ([`crate::model`]).
    Regress {
        /// The formula, as R writes it.
        formula: String,
        /// The family and link.
        family: crate::family::Family,
    },
    /// The ratio of two totals per group (R `svyratio`).
    Ratio {
        /// The numerator's variable.
        numerator: String,
        /// The denominator's variable.
        denominator: String,
        /// Grouping variables (none: one ratio).
        by: Vec<String>,
    },
    /// Weighted correlations of two or more variables (SDA CORRTAB).
    Corr {
        /// The variables.
        vars: Vec<String>,
    },
}

/// A request: an analysis and the options every analysis shares.
#[derive(Debug, Clone, PartialEq)]
pub struct Request {
    /// What to compute.
    pub analysis: Analysis,
    /// Weight variable.
    pub weight: Option<String>,
    /// Filter in the SDA syntax (`AGE(25-64) SEX(2) INCTOT<9999999`).
    pub filter: Option<String>,
    /// Show missing codes and system-missing as categories (freq, tab).
    pub include_missing: bool,
    /// Most cells a result may have; a larger one is refused before any
    /// memory is taken for it.
    pub max_cells: usize,
    /// Accept negative weights (otherwise an error).
    pub allow_negative_weights: bool,
    /// Check the whole files of every variable used before answering.
    pub verify: bool,
    /// Count only the records with these row numbers (`None`: all).
    pub rows: Option<std::ops::Range<u64>>,
    /// Use the dataset's survey design, if it has one (its weight, and
    /// standard errors from its replicate weights); `false` tabulates
    /// plainly, like `--no-design`.
    pub use_design: bool,
    /// Confidence level of the intervals (0.95).
    pub level: f64,
    /// Estimates from fewer records are flagged unreliable (30).
    pub min_n: u64,
    /// Estimates with a larger coefficient of variation are flagged
    /// unreliable (0.30).
    pub max_cv: f64,
    /// Means: also these weighted quantiles of the analysis variable per
    /// group (probabilities in (0, 1); 0.5 the median), with Woodruff
    /// intervals under a design.
    pub quantiles: Vec<f64>,
    /// How percentages' intervals are formed under a design.
    pub pct_interval: PctInterval,
    /// Crosstabs: each cell's z-statistic (SDA's coloured cells; see
    /// [`Crosstab::z_along`](crate::Crosstab::z_along)). Under a Taylor
    /// design it needs the covariance of every pair of a table's cells.
    pub z: bool,
    /// Means: compare each group of the (one) grouping variable with the
    /// group of this displayed value; crosstabs (no control variable):
    /// each row category's share in each column with its share in the
    /// column of this displayed value ([`crate::compare`]).
    pub diff: Option<String>,
    /// Means: test each group's mean (and the total's) against this value
    /// (R `svyttest(I(y − value) ~ 0)`).
    pub test_mean: Option<f64>,
    /// A survey design the front end holds for this request (built by
    /// [`build_design`](crate::build_design), never stored): used instead
    /// of the dataset's own (Python's `with_design`).
    pub design: Option<microtab_store::Design>,
    /// The records the front end chose besides the filter (a boolean
    /// mask: [`Term::rows`](microtab_engine::Term::rows)).
    pub selection: Option<microtab_engine::Term>,
}

impl Request {
    /// A request for `analysis` with the default options: unweighted, no
    /// filter, missing values excluded, at most
    /// [`DEFAULT_MAX_CELLS`](microtab_engine::DEFAULT_MAX_CELLS) cells.
    pub fn new(analysis: Analysis) -> Self {
        Request {
            analysis,
            weight: None,
            filter: None,
            include_missing: false,
            max_cells: microtab_engine::DEFAULT_MAX_CELLS,
            allow_negative_weights: false,
            verify: false,
            rows: None,
            use_design: true,
            level: 0.95,
            min_n: 30,
            max_cv: 0.30,
            quantiles: Vec::new(),
            pct_interval: PctInterval::Logit,
            z: false,
            diff: None,
            test_mean: None,
            design: None,
            selection: None,
        }
    }

    /// The filter's terms and the selection's (every record passes none).
    pub fn filter_terms(&self) -> microtab_engine::Result<Vec<microtab_engine::Term>> {
        let mut terms = match &self.filter {
            Some(f) => microtab_engine::parse_filter(f)?,
            None => Vec::new(),
        };
        terms.extend(self.selection.clone());
        Ok(terms)
    }

    /// The filter as results show it: its text, and the selection's.
    pub fn shown_filter(&self) -> Option<String> {
        let sel = self.selection.as_ref().map(|t| t.text.clone());
        match (&self.filter, sel) {
            (Some(f), Some(s)) => Some(format!("{f} and {s}")),
            (f, s) => f.clone().or(s),
        }
    }

    /// The grouping variables of the engine query, outermost first.
    pub(crate) fn group_by(&self) -> Vec<String> {
        match &self.analysis {
            Analysis::Freq { var } => vec![var.clone()],
            Analysis::Tab {
                row, col, control, ..
            } => control.iter().chain([row, col]).cloned().collect(),
            Analysis::Means { by, .. } => by.clone(),
            Analysis::Ratio { by, .. } => by.clone(),
            // A model's query is built from its formula (crate::model);
            // correlations' by crate::corr.
            Analysis::Regress { .. } | Analysis::Corr { .. } => Vec::new(),
        }
    }
}
