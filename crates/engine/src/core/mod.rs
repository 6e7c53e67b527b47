//! What every part of the engine shares and that depends on no other part
//! of it: the sizes of the scan's units ([`MORSEL`], the lanes of a cell),
//! the error type, and the per-cell sum types the kernels fill and the
//! finishing code reads. Nothing here imports another engine module
//! (`alloc`, fallible allocation of the per-cell buffers, lives here too).

pub(crate) mod alloc;
mod cells;
mod error;
mod options;

pub use alloc::ExitOnOutOfMemory;
pub use cells::Moments;
pub(crate) use cells::{ExactCell, MorselCell};
pub use error::{Error, Result};
pub use options::ScanOptions;

/// Rows per morsel: small enough that a morsel's cell indexes and values
/// stay in L2, large enough to amortize the per-morsel work.
pub(crate) const MORSEL: usize = 32 * 1024;
// Every morsel is a whole number of checksummed stripes, checked as it is read.
const _: () = assert!(MORSEL.is_multiple_of(microtab_store::STRIPE_ROWS));
/// Morsels between read-ahead hints.
pub(crate) const STEP: usize = 16;
/// How far ahead of the scan (in morsels) the read-ahead window runs.
pub(crate) const AHEAD: usize = 64;
/// Largest cube (cells) a query builds unless [`Query::max_cells`](crate::Query::max_cells) says
/// otherwise: with the per-worker accumulators this bounds a query's
/// memory (about 1 M cells × at most 300 bytes × (workers + 1)).
pub const DEFAULT_MAX_CELLS: usize = 1_000_000;

/// Sub-histograms per cell: consecutive rows that hit the same cell update
/// different lanes, so an add does not wait for the previous row's store
/// to the same address (measured: the store-to-load chain was 40% of Q3).
pub(crate) const LANES: usize = 4;

/// Largest table counted in [`LANES`] lanes a cell (512 KiB of counts a
/// worker); beyond it the counts kernel adds into one lane a cell, whose
/// misses are a quarter as many.
pub(crate) const BIG_TABLE_CELLS: usize = 16 * 1024;
/// Lanes for exact moment cells (16 measured no better than 4).
pub(crate) const XLANES: usize = 4;
/// Bit where a packed morsel cell keeps its record count: the low 40 bits
/// hold Σw.
pub(crate) const PACK_SHIFT: u32 = 40;
