//! Starting a dataset for an import and completing its variables: the
//! steps every format takes the same way.

use crate::core::na::NaSet;
use crate::core::pipeline::ImportSummary;
use crate::error::{Error, Result};
use crate::note::Note;
use microtab_store::DatasetWriter;
use std::path::Path;

/// Creates the dataset an import writes at `target` (replacing one only
/// with `force`), for `ncols` columns read from `input`.
pub(crate) fn create_dataset(
    input: &Path,
    target: &Path,
    force: bool,
    io: &microtab_io::IoConfig,
    ncols: usize,
    plain: bool,
) -> Result<DatasetWriter> {
    let mut ds = DatasetWriter::create_with(target, force, io_for_columns(io, ncols))?;
    ds.set_packing(!plain);
    ds.set_transient_files(ncols > TRANSIENT_COLUMNS);
    ds.set_source(
        &input
            .file_name()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_default(),
    );
    Ok(ds)
}

/// What an import read, for its summary.
pub(crate) struct Read {
    /// Size of the input file on disk.
    pub bytes_in: u64,
    /// Bytes of text parsed.
    pub bytes_text: u64,
    /// Records sampled to choose column types.
    pub sampled: Option<u64>,
}

/// Publishes the dataset of `rows` records with the variables added to
/// it; the import's summary.
pub(crate) fn publish(
    ds: DatasetWriter,
    rows: u64,
    read: Read,
    notes: Vec<Note>,
) -> Result<ImportSummary> {
    let variables = ds.variables().count();
    let bytes_out = ds.variables().map(|v| v.bytes).sum();
    let path = ds.commit(rows)?;
    Ok(ImportSummary {
        path,
        rows,
        variables,
        bytes_in: read.bytes_in,
        bytes_text: read.bytes_text,
        bytes_out,
        sampled: read.sampled,
        notes,
    })
}

/// Above this many columns, column files are opened for each write only
/// (an import never holds a descriptor per column).
const TRANSIENT_COLUMNS: usize = 256;

/// Write settings for `ncols` columns: the per-column write buffer is
/// shrunk so that all of them together stay within 256 MiB (a 5,000-column
/// file would otherwise buffer 5 GB), but not below 64 KiB.
fn io_for_columns(io: &microtab_io::IoConfig, ncols: usize) -> microtab_io::IoConfig {
    let budget = 256usize << 20;
    microtab_io::IoConfig {
        block_size: io.block_size.min((budget / ncols.max(1)).max(64 << 10)),
    }
}

/// Adds user-missing codes given as written in the data to `var`.
pub(crate) fn add_missing_codes(
    var: &mut microtab_store::Variable,
    dict: &[String],
    codes: &[String],
    na: &NaSet,
    input: &Path,
    notes: &mut Vec<Note>,
) -> Result<()> {
    for c in codes {
        let code = match microtab_store::codec::stored_code(var, dict, c) {
            Ok(Some(code)) => code,
            Ok(None)
                if var.kind == microtab_store::Kind::String && na.contains_text(c.as_bytes()) =>
            {
                notes.push(Note::from(format!(
                    "{}: \"{c}\" is read as system-missing already",
                    var.name
                )));
                continue;
            }
            Ok(None) => {
                notes.push(Note::from(format!(
                    "{}: missing code \"{c}\" does not occur in the data",
                    var.name
                )));
                continue;
            }
            Err(_)
                if var.kind != microtab_store::Kind::String && na.contains(c.trim().as_bytes()) =>
            {
                notes.push(Note::from(format!(
                    "{}: \"{c}\" is read as system-missing already",
                    var.name
                )));
                continue;
            }
            Err(e) => {
                return Err(Error::Input {
                    path: input.to_path_buf(),
                    reason: format!("missing codes of {}: {e}", var.name),
                })
            }
        };
        if !var.missing_codes.contains(&code) {
            var.missing_codes.push(code);
        }
    }
    Ok(())
}
