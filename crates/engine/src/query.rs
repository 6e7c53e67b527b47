//! What a query asks for: the request types of a scan ([`Query`] and
//! the parts of it that name a design or a split). Plain data: planning
//! them is `exec`'s.

use crate::filter::Term;

/// What to compute.
#[derive(Debug, Clone, Default)]
pub struct Query {
    /// Filter terms, all of which must hold.
    pub filter: Vec<Term>,
    /// Grouping variables, outermost first (row, column, control …).
    pub group_by: Vec<String>,
    /// Weight variable.
    pub weight: Option<String>,
    /// Analysis variable for means.
    pub measure: Option<String>,
    /// Replicate weight variables: each cell also sums each of them (and,
    /// with a measure, each times the measure) over the rows the weight
    /// counts, into [`Cube::replicates`](crate::Cube::replicates).
    pub replicates: Vec<String>,
    /// A stratified cluster design: the design covariances of the cells'
    /// totals are accumulated PSU by PSU into [`Cube::taylor`](crate::Cube::taylor) (needs
    /// `weight`; not with `replicates` or `rows`).
    pub taylor: Option<TaylorQuery>,
    /// Also give each cell's weighted distribution of the analysis
    /// variable ([`Cube::distribution`](crate::Cube::distribution); needs `measure`).
    pub distribution: bool,
    /// Split each cell's records at a threshold of its own: one more,
    /// last, dimension with the categories `≤` and `>`.
    pub split: Option<Split>,
    /// Show missing codes and system-missing as categories instead of
    /// excluding them (grouping variables only).
    pub include_missing: bool,
    /// Most cells the result may have (`None`: [`DEFAULT_MAX_CELLS`](crate::DEFAULT_MAX_CELLS)); a
    /// larger table is refused with [`Error::TooManyCells`](crate::Error::TooManyCells) before any memory
    /// is taken for it.
    pub max_cells: Option<usize>,
    /// Count only the records in this range of row numbers (`None`: all);
    /// the part of a dataset a partial result covers. Categories are still
    /// those of the whole dataset (a grouping's domain does not depend on
    /// the range); the stripes the range touches are read and checked
    /// whole.
    pub rows: Option<std::ops::Range<u64>>,
    /// The caller's own sums over the records counted
    /// ([`crate::fold_rows`]; not with [`Self::rows`]).
    pub fold: Option<crate::fold::Fold>,
}

/// A stratified cluster design's part of a [`Query`](crate::Query).
#[derive(Debug, Clone, Default)]
pub struct TaylorQuery {
    /// The strata variable (`None`: one stratum).
    pub strata: Option<String>,
    /// The PSU variable (`None`: every record its own PSU).
    pub cluster: Option<String>,
    /// The strata's stored values, ascending (`[0]` without strata).
    pub strata_keys: Vec<i64>,
    /// Per stratum, `(c_h, d_h)`: its variance contribution is `c_h Σ_j
    /// z_hj² − d_h (Σ_j z_hj)²`.
    pub coef: Vec<[f64; 2]>,
    /// Each PSU's records are one run of rows.
    pub contiguous: bool,
    /// Margins whose totals' covariances are wanted (percentage bases,
    /// overall means).
    pub margins: Vec<Margin>,
    /// The margin whose groups are separate tables, within each of which
    /// the covariance of every pair of cells' weighted counts is wanted
    /// (the Rao–Scott test).
    pub full: Option<usize>,
    /// The full tables hold the covariances of every pair of cells'
    /// totals `(W, Y)`, not of their weighted counts alone (differences
    /// of domain means): `2k × 2k` per table of `k` cells, a cell's `W`
    /// at `2a` and its `Y` at `2a + 1`. Not with a partial result.
    pub full_values: bool,
    /// Lonely PSUs `average`d (R's `survey.lonely.psu = "average"`): per
    /// stratum, whether it is one whose variance is missing. A domain's
    /// variance is then scaled by its strata over its strata with a
    /// variance (both counted among the strata with records in the
    /// domain), into [`TaylorCells::cell_scale`](crate::TaylorCells::cell_scale), [`MarginCov::scale`](crate::MarginCov::scale) and
    /// [`TaylorCells::all_scale`](crate::TaylorCells::all_scale). Empty otherwise.
    pub average: Vec<bool>,
    /// Linear scores whose design covariance is wanted (a model's
    /// estimating equations, a contrast of domain means), into
    /// [`TaylorCells::scores`](crate::TaylorCells::scores). Without
    /// margins or full tables, only the scores' covariance is computed
    /// (each stratum keeps its score total, not its totals per cell: a
    /// few numbers per stratum whatever the cells), and the cells'
    /// variances are NaN.
    pub scores: Option<Scores>,
    /// Count each cell's domain, as R's `degf()` of the design subset to
    /// it: its PSUs with a record of non-zero weight, and their strata,
    /// records whose analysis value is missing included (R's `svyttest`
    /// of a mean with `na.rm = TRUE` tests on the subset's `degf`), into
    /// [`TaylorCells::domains`](crate::TaylorCells::domains). Not with a
    /// partial result.
    pub domains: bool,
    /// The Taylor sums take `w·v` in place of the weight `w`, `v` this
    /// numeric variable: each cell's `W` is then the total of `v`, and its
    /// variances those of the totals of `v` and of the analysis variable
    /// and their covariance (a ratio of two totals'). Records whose `v`
    /// is missing are not counted (in the cube either); the analysis
    /// variable is not shifted; the domains' PSUs count those with a
    /// record of non-zero `w·v`. Not with linear scores, the domains'
    /// counts or a partial result.
    pub times: Option<String>,
}

/// A vector of linear scores: each record adds `w·a + w·x·b` to its PSU's
/// score (`w` the weight, `x` the analysis variable, in displayed units),
/// `a` and `b` given per cell by the cell's categories. The covariance of
/// the scores' totals is accumulated PSU by PSU beside the cells'.
#[derive(Clone)]
pub struct Scores {
    /// The length of the score vector.
    pub len: usize,
    /// Per cell, given by its categories (one per grouping variable,
    /// outermost first): `(a, b)`, each of `len` numbers; `None` adds
    /// nothing.
    #[allow(clippy::type_complexity)]
    pub of:
        std::sync::Arc<dyn Fn(&[&crate::Category]) -> Option<(Vec<f64>, Vec<f64>)> + Send + Sync>,
}

impl std::fmt::Debug for Scores {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Scores {{ len: {} }}", self.len)
    }
}

/// A margin of the cube: the cells summed over the dimensions not kept.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Margin {
    /// Per dimension, whether the margin keeps it.
    pub keep: Vec<bool>,
    /// Leave out cells with a missing category in a dimension summed over
    /// (a frequency table's percentage base).
    pub skip_missing: bool,
}

/// Each cell's records split at a threshold of the cell's own: those
/// whose `var` is at most it, and the others — a last dimension of the
/// cube with the categories `≤` and `>`. Records whose `var` is missing
/// are left out.
#[derive(Debug, Clone, PartialEq)]
pub struct Split {
    /// The variable compared.
    pub var: String,
    /// Per cell of the grouping variables, given by its categories'
    /// displayed values (outermost first), the threshold in displayed
    /// units; an empty list of values: every cell's. Cells not listed have
    /// none: all their records are `>`.
    pub thresholds: Vec<(Vec<String>, f64)>,
}
