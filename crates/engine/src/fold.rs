//! A caller's own sums over a query's records: for estimators whose sums
//! the engine's kernels do not keep (a regression's cross products over
//! predictors with many distinct values). The scan hands each worker's
//! state the records it counts — their cell and the values of the
//! variables asked for — and merges the workers' states at the end.

use std::any::Any;
use std::sync::Arc;

/// The records of one stretch of a morsel that the query counts.
pub struct FoldRows<'a> {
    /// Each record's number in the dataset (from 0).
    pub rows: &'a [usize],
    /// Each record's cell of the query's table (row-major over the
    /// grouping variables' planned categories; see [`crate::fold_rows`]).
    pub cells: &'a [u32],
    /// Per variable of [`Fold::values`], each record's value in displayed
    /// units (`NaN`: missing, a missing code or empty); a text
    /// variable's are its codes (keys, such as strata or PSUs).
    pub values: &'a [Vec<f64>],
}

/// A worker's state of a [`Fold`].
pub trait FoldState: Send {
    /// Adds records.
    fn add(&mut self, rows: &FoldRows<'_>);
    /// Adds another worker's state (of the same fold).
    fn merge(&mut self, other: Box<dyn FoldState>);
    /// The state, to be downcast by its maker.
    fn into_any(self: Box<Self>) -> Box<dyn Any>;
    /// Whether further records would change nothing: the scan then stops
    /// handing them over (it still reads its other columns).
    fn done(&self) -> bool {
        false
    }
    /// Whether the scan may end now: [`done`](Self::done), and the caller
    /// wants nothing else of the scan (the query's table is then left
    /// incomplete). Each worker ends on its own state's word.
    fn stop(&self) -> bool {
        false
    }
    /// Told, before any record, each grouping variable's planned
    /// categories (a record's cell is their indices, row-major, each
    /// dimension at least one wide; as [`crate::exec::Folded::categories`]),
    /// so a state can name in cells what it knows by categories.
    fn planned(&mut self, _categories: &[Vec<crate::Category>]) {}
}

/// A fold's state as the type its maker made (a worker's state handed to
/// [`FoldState::merge`], or the scan's merged state).
///
/// # Panics
/// When the state is of another type: a fold's workers all share one
/// maker, so this is a caller's bug.
pub fn state_of<T: 'static>(state: Box<dyn FoldState>) -> T {
    *state
        .into_any()
        .downcast::<T>()
        .expect("a fold's states are all of its maker's type")
}

/// Sums of the caller's over the records a query counts (see
/// [`crate::fold_rows`]).
#[derive(Clone)]
pub struct Fold {
    /// Numeric variables whose values each record brings.
    pub values: Vec<String>,
    /// A worker's empty state.
    #[allow(clippy::type_complexity)]
    pub make: Arc<dyn Fn() -> Box<dyn FoldState> + Send + Sync>,
}

impl std::fmt::Debug for Fold {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Fold {{ values: {:?} }}", self.values)
    }
}
