//! The settings a call runs with (the I/O settings `microtab tune`
//! writes, read as every front end reads them) and the analysis layer's
//! description of a dataset under them.

use crate::errors::{store_error, MicrotabError};
use microtab_analysis::{ScanOptions, Settings};
use microtab_store::Dataset;
use pyo3::exceptions::{PyOSError, PyPermissionError};
use pyo3::prelude::*;

/// The I/O settings in force (defaults < the file `microtab tune` writes <
/// environment variables), read at each call as the CLI reads them at
/// each command, so a changed file or variable applies to the next query.
pub(crate) fn settings() -> PyResult<Settings> {
    Settings::load().map_err(|e| match &e {
        microtab_analysis::SettingsError::Read { source, .. } => {
            let msg = e.to_string();
            match source.kind() {
                std::io::ErrorKind::PermissionDenied => PyPermissionError::new_err(msg),
                _ => PyOSError::new_err(msg),
            }
        }
        _ => MicrotabError::new_err(e.to_string()),
    })
}

/// The query read settings in force ([`settings`]).
pub(crate) fn scan_options() -> PyResult<ScanOptions> {
    Ok(settings()?.scan)
}

/// The analysis layer's description of the dataset of `ds` named `name`
/// (`microtab info --format json`), with the settings in force.
pub(crate) fn describe(ds: &Dataset, name: &str) -> PyResult<String> {
    let info = microtab_analysis::DatasetInfo::of(ds, name, &settings()?).map_err(store_error)?;
    serde_json::to_string(&info).map_err(|e| MicrotabError::new_err(e.to_string()))
}
