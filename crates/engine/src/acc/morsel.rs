//! What every kernel's accumulator sees of a morsel, and the wording of a
//! per-cell buffer that cannot be allocated: the leaf the `acc` modules
//! share (so none of them imports the folder's root).

use crate::physical::Plan;
use microtab_store::ColumnData;

/// One morsel as the kernels see it: the plan, the views of the distinct
/// columns (each role's at its slot, [`Plan::slots`]) and the rows
/// counted.
pub(crate) struct Morsel<'m, 'd> {
    pub(crate) p: &'m Plan<'m>,
    pub(crate) data: &'m [ColumnData<'d>],
    pub(crate) r: std::ops::Range<usize>,
}

/// What a per-cell buffer of a table of `cells` cells is, for the error
/// when it cannot be allocated.
pub(crate) fn what(buf: &'static str, cells: usize) -> impl FnOnce() -> String {
    move || format!("the {buf} of a table of {cells} cells")
}
