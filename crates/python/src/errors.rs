//! Errors as Python sees them: the package's exception classes, the
//! libraries' errors mapped onto them (and onto Python's own:
//! `FileNotFoundError`, `MemoryError` …), and a library error's
//! [`Remedy`] worded as the keyword that applies it.

use microtab_store::{ColumnKind, Remedied, Remedy};
use pyo3::create_exception;
use pyo3::exceptions::{PyException, PyFileNotFoundError, PyOSError, PyPermissionError};
use pyo3::prelude::*;
use serde_json::Value as Json;

create_exception!(
    _microtab,
    MicrotabError,
    PyException,
    "Base class of microtab's errors."
);
create_exception!(
    _microtab,
    QueryError,
    MicrotabError,
    "A request that does not fit the dataset: unknown variable, bad filter or recode, design mismatch."
);
create_exception!(
    _microtab,
    TooLargeError,
    QueryError,
    "A result larger than the request allows (cells, distinct values)."
);
create_exception!(
    _microtab,
    CorruptError,
    MicrotabError,
    "A dataset file does not match its checksum or is not a microtab file."
);
create_exception!(
    _microtab,
    InputError,
    MicrotabError,
    "An input file that cannot be imported: the message names the file, line and field, and what was expected."
);
create_exception!(
    _microtab,
    ChangedError,
    MicrotabError,
    "The dataset was replaced or changed by another process while it was read: nothing of two generations is ever mixed; run the call again."
);
create_exception!(
    _microtab,
    LockedError,
    MicrotabError,
    "Another process is changing the dataset."
);

pub(crate) fn io_error(e: &microtab_io::Error) -> PyErr {
    let msg = e.to_string();
    match e.error.kind() {
        std::io::ErrorKind::NotFound => PyFileNotFoundError::new_err(msg),
        std::io::ErrorKind::PermissionDenied => PyPermissionError::new_err(msg),
        _ => PyOSError::new_err(msg),
    }
}

/// The advice for `r` in this package's words (its keywords and
/// methods); `None` for a remedy the package has no option for.
pub(crate) fn hint(r: &Remedy) -> Option<String> {
    Some(match r {
        Remedy::Force => "force=True replaces it".into(),
        Remedy::MaxCells { cells: Some(c) } => format!("max_cells={c} allows it"),
        Remedy::MaxCells { cells: None } => {
            "a larger max_cells= allows it (memory grows with it)".into()
        }
        Remedy::AllowNegativeWeights => "allow_negative_weights=True uses them".into(),
        Remedy::NoDesign => {
            "design=False answers without the survey design (or ds.design(...) changes it)".into()
        }
        Remedy::LonelyPsu => "ds.design(..., lonely_psu=\"remove\", \"certainty\", \"adjust\" or \"average\") chooses how to treat it".into(),
        Remedy::SetDesign => "set the design again with ds.design(...)".into(),
        Remedy::Filter => "query the full dataset with filter= instead".into(),
        Remedy::ColumnType { variable, kind } => {
            let name = variable.as_deref().unwrap_or("NAME");
            match kind {
                ColumnKind::IntOrString => format!(
                    "import it again with types={{\"{name}\": \"int\"}} (or \"string\")"
                ),
                k => format!("import it again with types={{\"{name}\": \"{}\"}}", k.word()),
            }
        }
        // The import options: spelled as `keyword` spells them in import's
        // notes, so an error and a note name an option the same way.
        Remedy::Encoding
        | Remedy::InferAllRows
        | Remedy::NaText
        | Remedy::KeepTextTokens
        | Remedy::KeepNiu
        | Remedy::RecordType
        | Remedy::Delimiter { .. }
        | Remedy::DecimalComma
        | Remedy::MissingCodes { .. } => format!("import it again with {}", keyword(r)),
        Remedy::ExactDecimals => {
            "ds.to_parquet(..., exact_decimals=True) carries such values exactly".into()
        }
        Remedy::NoLabels => "ds.to_parquet(...) without labels=True keeps the codes".into(),
        Remedy::NoCodebook => "import_parquet(...) without ddi= keeps the values as they are".into(),
        _ => return None,
    })
}

/// `err` with the advice for `remedy` appended to its message and as its
/// attributes `hint` (the words) and `option` (the option's name, as the
/// library calls it: `allow_negative_weights`, `no_design`, …).
pub(crate) fn hinted(err: PyErr, remedy: Option<Remedy>) -> PyErr {
    match remedy.and_then(|r| hint(&r).map(|h| (r, h))) {
        Some((r, h)) => with_hint(err, &r, h),
        None => err,
    }
}

/// `err` with the advice `h` (for `r`) appended to its message and as its
/// `hint` and `option` attributes.
fn with_hint(err: PyErr, r: &Remedy, h: String) -> PyErr {
    Python::attach(|py| {
        let msg = format!("{}; {h}", err.value(py));
        let new = PyErr::from_type(err.get_type(py), msg);
        let option = serde_json::to_value(r)
            .ok()
            .and_then(|v| v.get("option")?.as_str().map(str::to_string));
        let v = new.value(py);
        // Attributes of an exception instance cannot fail to be set.
        let _ = v.setattr("hint", h);
        let _ = v.setattr("option", option);
        new
    })
}

/// A library error `e` as the Python exception `raise` picks for it, with
/// the hint of its remedy; `raise` gives `Err` for an error of another
/// crate that `e` wraps, already converted (and hinted) by that crate's
/// function.
fn raised<E: Remedied>(e: E, raise: impl FnOnce(E) -> Result<PyErr, PyErr>) -> PyErr {
    let remedy = e.remedy();
    match raise(e) {
        Ok(err) => hinted(err, remedy),
        Err(wrapped) => wrapped,
    }
}

pub(crate) fn store_error(e: microtab_store::Error) -> PyErr {
    use microtab_store::Error as E;
    raised(e, |e| {
        Ok(match &e {
            E::Io(io) => io_error(io),
            E::NotADataset { .. } => PyFileNotFoundError::new_err(e.to_string()),
            E::Exists { .. } => pyo3::exceptions::PyFileExistsError::new_err(e.to_string()),
            E::Corrupt { .. } => CorruptError::new_err(e.to_string()),
            E::UnknownVariable { .. } => QueryError::new_err(e.to_string()),
            E::Locked { .. } | E::CreatedMeanwhile { .. } => LockedError::new_err(e.to_string()),
            E::Changed { .. } => ChangedError::new_err(e.to_string()),
            E::CannotWrite { error, .. } | E::CannotRead { error, .. } => {
                if error.kind() == std::io::ErrorKind::PermissionDenied {
                    PyPermissionError::new_err(e.to_string())
                } else {
                    PyOSError::new_err(e.to_string())
                }
            }
            _ => MicrotabError::new_err(e.to_string()),
        })
    })
}

pub(crate) fn engine_error(e: microtab_engine::Error) -> PyErr {
    use microtab_engine::Error as E;
    raised(e, |e| {
        Ok(match e {
            E::Store(s) => return Err(store_error(s)),
            e @ (E::TooLarge(_) | E::TooManyCells { .. }) => TooLargeError::new_err(e.to_string()),
            e @ E::OutOfMemory { .. } => pyo3::exceptions::PyMemoryError::new_err(e.to_string()),
            e => QueryError::new_err(e.to_string()),
        })
    })
}

pub(crate) fn analysis_error(e: microtab_analysis::Error) -> PyErr {
    use microtab_analysis::Error as E;
    raised(e, |e| {
        Ok(match e {
            E::Engine(e) => return Err(engine_error(e)),
            E::Store(s) => return Err(store_error(s)),
            E::InDataset { dataset, error } => {
                let inner = analysis_error(*error);
                return Err(Python::attach(|py| {
                    let v = inner.value(py);
                    let msg = format!("{dataset}: {v}");
                    let new = PyErr::from_type(inner.get_type(py), msg);
                    for a in ["hint", "option"] {
                        if let Ok(x) = v.getattr(a) {
                            let _ = new.value(py).setattr(a, x);
                        }
                    }
                    new
                }));
            }
            e @ E::Io { .. } => pyo3::exceptions::PyOSError::new_err(e.to_string()),
            E::Catalog(c) if matches!(*c, microtab_analysis::CatalogError::Exists { .. }) => {
                pyo3::exceptions::PyFileExistsError::new_err(c.to_string())
            }
            e @ E::Catalog(_) => MicrotabError::new_err(e.to_string()),
            e => QueryError::new_err(e.to_string()),
        })
    })
}

pub(crate) fn replicate_error(e: microtab_analysis::weighting::replicate::ReplicateError) -> PyErr {
    use microtab_analysis::weighting::replicate::ReplicateError as E;
    raised(e, |e| {
        Ok(match e {
            E::Store(s) => return Err(store_error(s)),
            E::Analysis(a) => return Err(analysis_error(a)),
            e @ E::NameTaken { .. } => pyo3::exceptions::PyFileExistsError::new_err(e.to_string()),
            e => QueryError::new_err(e.to_string()),
        })
    })
}

pub(crate) fn ingest_error(e: microtab_ingest::Error) -> PyErr {
    use microtab_ingest::Error as E;
    let hints = e.hints();
    match e {
        E::Io(io) => io_error(&io),
        E::Store(s) => store_error(s),
        e => match hints.first() {
            // The options in import's keywords, as its notes spell them.
            Some(first) => with_hint(
                InputError::new_err(e.to_string()),
                &first.remedy,
                microtab_ingest::Hint::join(&hints, keyword),
            ),
            None => InputError::new_err(e.to_string()),
        },
    }
}

/// A remedy as the keyword of the import functions that applies it.
pub(crate) fn keyword(r: &microtab_store::Remedy) -> String {
    use microtab_store::Remedy as R;
    let py = |s: &str| Json::from(s).to_string();
    match r {
        R::ColumnType { variable, kind } => format!(
            "types={{{}: {}}}",
            py(variable.as_deref().unwrap_or("VAR")),
            py(kind.word())
        ),
        R::Encoding => "encoding=\"latin1\" (or \"windows-1252\")".into(),
        R::InferAllRows => "infer_rows=\"all\"".into(),
        R::NaText => "na_text=[...]".into(),
        R::KeepTextTokens => "na_text=[]".into(),
        R::KeepNiu => "keep_niu=True".into(),
        R::RecordType => "rectype=\"TYPE\"".into(),
        R::DecimalComma => "decimal_comma=True".into(),
        R::Delimiter { delimiter: Some(c) } => format!("delimiter={}", py(&c.to_string())),
        R::Delimiter { delimiter: None } => "delimiter=".into(),
        R::MissingCodes { variable, codes } if codes.is_empty() => {
            format!("missing={{{}: [...]}}", py(variable))
        }
        R::MissingCodes { variable, codes } => {
            format!(
                "missing={{{}: {}}}",
                py(variable),
                Json::from(codes.clone())
            )
        }
        r => format!("{r:?}"),
    }
}

pub(crate) fn arrow_error(e: microtab_arrow::Error) -> PyErr {
    use microtab_arrow::Error as E;
    raised(e, |e| {
        Ok(match e {
            E::Store(s) => return Err(store_error(s)),
            E::Engine(e) => return Err(engine_error(e)),
            E::Ingest(e) => return Err(ingest_error(*e)),
            E::Io { path, error } => {
                let msg = format!("{}: {error}", path.display());
                match error.kind() {
                    std::io::ErrorKind::NotFound => PyFileNotFoundError::new_err(msg),
                    std::io::ErrorKind::PermissionDenied => PyPermissionError::new_err(msg),
                    _ => PyOSError::new_err(msg),
                }
            }
            e @ E::Exists { .. } => pyo3::exceptions::PyFileExistsError::new_err(e.to_string()),
            e @ E::Request { .. } => QueryError::new_err(e.to_string()),
            e @ (E::Parquet { .. } | E::Input { .. } | E::NotDecimal { .. }) => {
                InputError::new_err(e.to_string())
            }
            e => MicrotabError::new_err(e.to_string()),
        })
    })
}

/// `err` with its message passed through `f` (the same class, `hint` and
/// `option`).
pub(crate) fn renamed(err: PyErr, f: impl FnOnce(&str) -> String) -> PyErr {
    Python::attach(|py| {
        let v = err.value(py);
        let new = PyErr::from_type(err.get_type(py), f(&v.to_string()));
        for a in ["hint", "option"] {
            if let Ok(x) = v.getattr(a) {
                let _ = new.value(py).setattr(a, x);
            }
        }
        new
    })
}

/// An import's selection error (`vars=`, `filter=`): the engine's and the
/// store's as theirs are raised, naming the target where they named the
/// staging dataset; a target in the way as `FileExistsError`.
pub(crate) fn select_error(e: microtab_analysis::SelectError) -> PyErr {
    use microtab_analysis::SelectError as S;
    let text = e.to_string();
    let remedy = e.remedy();
    match e {
        S::Exists { .. } => hinted(pyo3::exceptions::PyFileExistsError::new_err(text), remedy),
        S::Filter(source) => engine_error(*source),
        S::Select {
            out,
            staging,
            error,
        } => renamed(engine_error(*error), |m| shown(m, &staging, &out)),
        S::Open {
            out,
            staging,
            error,
        } => renamed(store_error(*error), |m| shown(m, &staging, &out)),
        _ => MicrotabError::new_err(text),
    }
}

/// `text` naming `out` where it named `staging`.
fn shown(text: &str, staging: &std::path::Path, out: &std::path::Path) -> String {
    text.replace(&staging.display().to_string(), &out.display().to_string())
}
