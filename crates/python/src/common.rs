//! What the native functions share: opening a dataset, answering in
//! JSON, a boolean mask as a selection.

use microtab_store::Dataset;
use pyo3::prelude::*;

use crate::errors::{store_error, MicrotabError};

/// The dataset at `path`, opened (its manifest read).
pub(crate) fn open(path: &str) -> PyResult<Dataset> {
    Dataset::open(std::path::Path::new(path)).map_err(store_error)
}

/// What crosses back to Python: a value as JSON text (`-0.0` as `0.0`).
pub(crate) fn to_json(value: &impl serde::Serialize) -> PyResult<String> {
    // As text: partial results hold exact sums beyond 64 bits.
    microtab_analysis::answer_text(value).map_err(|e| MicrotabError::new_err(e.to_string()))
}

/// The records a boolean mask chose, as a filter term: `mask` is the
/// bitmap's bytes (bit `r % 8` of byte `r / 8` for record `r`, numpy's
/// `packbits(..., bitorder="little")`), for `rows` records.
pub(crate) fn selection_term(mask: &[u8], rows: u64) -> PyResult<microtab_engine::Term> {
    let (bits, n) = selection_bits(mask, rows)?;
    Ok(microtab_engine::Term::rows(bits, n))
}

/// A boolean mask's bitmap (bit `r % 64` of word `r / 64`) over `rows`
/// records, and how many it chose (see `selection_term`).
pub(crate) fn selection_bits(mask: &[u8], rows: u64) -> PyResult<(Vec<u64>, u64)> {
    let words = (rows as usize).div_ceil(64);
    if mask.len().div_ceil(8) != words {
        return Err(pyo3::exceptions::PyValueError::new_err(format!(
            "the mask holds {} records' bits; the dataset has {rows} records",
            mask.len() * 8
        )));
    }
    let mut bits = vec![0u64; words];
    for (w, chunk) in bits.iter_mut().zip(mask.chunks(8)) {
        let mut b = [0u8; 8];
        b[..chunk.len()].copy_from_slice(chunk);
        *w = u64::from_le_bytes(b);
    }
    if !rows.is_multiple_of(64) {
        if let Some(w) = bits.last_mut() {
            *w &= (1u64 << (rows % 64)) - 1;
        }
    }
    let n = bits.iter().map(|w| u64::from(w.count_ones())).sum();
    Ok((bits, n))
}
