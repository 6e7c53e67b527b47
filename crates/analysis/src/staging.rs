//! Writing beside a target first: an import that keeps some variables and
//! records ([`SelectedImport`]) and an import cut into parts write a whole
//! dataset into a staging directory beside their target ([`Staging`],
//! `.OUT.import-PID`), then the selection or the parts to the target, so
//! that a failed or killed import leaves an existing target untouched; the
//! next writer to the target removes what a killed one left
//! ([`remove_stale_staging`]).
//!
//! The front ends run the import itself (any format, each with its own
//! options and progress) into [`SelectedImport::staging`]; this module
//! owns the checks made before the input is read, the staging name, the
//! selection (as `subset` writes it) and the clean-up.

use microtab_engine::subset::SubsetReport;
use microtab_engine::Term;
use microtab_store::{Dataset, Remedied, Remedy};
use std::path::{Path, PathBuf};

/// Why an import with a selection did not write its target.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SelectError {
    /// The target exists and replacing it was not asked for.
    #[error("{} exists", path.display())]
    Exists {
        /// The target.
        path: PathBuf,
    },
    /// The target has no directory name to put a staging one beside.
    #[error("{} is not a directory name", path.display())]
    Name {
        /// The target as given.
        path: PathBuf,
    },
    /// Another import into the same target runs in this process (its
    /// staging directory would be this one's).
    #[error("{}: another import into it is running in this process", path.display())]
    Busy {
        /// The target.
        path: PathBuf,
    },
    /// The filter does not parse (checked before the input is read).
    #[error(transparent)]
    Filter(Box<microtab_engine::Error>),
    /// The selection failed (an unknown variable, a filter naming one, a
    /// write that failed): the engine's error, its message naming the
    /// target where the engine named the staging dataset. (Not the
    /// error's `source()`: a chain printed whole would name the staging
    /// dataset again.)
    #[error("{}", shown(&error.to_string(), staging, out))]
    Select {
        /// The target.
        out: PathBuf,
        /// The staging dataset the engine read.
        staging: PathBuf,
        /// The engine's error.
        error: Box<microtab_engine::Error>,
    },
    /// The imported staging dataset could not be opened.
    #[error("{}", shown(&error.to_string(), staging, out))]
    Open {
        /// The target.
        out: PathBuf,
        /// The staging dataset.
        staging: PathBuf,
        /// The store's error.
        error: Box<microtab_store::Error>,
    },
}

impl Remedied for SelectError {
    /// [`Remedy::Force`] for a target in the way; the source's own
    /// otherwise.
    fn remedy(&self) -> Option<Remedy> {
        match self {
            SelectError::Exists { .. } => Some(Remedy::Force),
            SelectError::Filter(e) | SelectError::Select { error: e, .. } => e.remedy(),
            SelectError::Open { error, .. } => error.remedy(),
            SelectError::Name { .. } | SelectError::Busy { .. } => None,
        }
    }
}

/// `text` with the staging dataset's path replaced by the target's.
fn shown(text: &str, staging: &Path, out: &Path) -> String {
    text.replace(&staging.display().to_string(), &out.display().to_string())
}

/// A staging dataset beside a target OUT (`.OUT.import-PID`, the name
/// [`remove_stale_staging`] clears when a killed import leaves it),
/// removed when dropped.
#[derive(Debug)]
pub struct Staging(PathBuf);

/// The staging directories this process holds: one per target (threads
/// of one process share its PID, so two imports into one target would
/// share a name).
static HELD: std::sync::Mutex<Vec<PathBuf>> = std::sync::Mutex::new(Vec::new());

fn held() -> std::sync::MutexGuard<'static, Vec<PathBuf>> {
    HELD.lock().unwrap_or_else(|e| e.into_inner())
}

impl Staging {
    /// The staging directory beside `out` for this process (not created);
    /// an error while another thread of this process holds it.
    pub fn beside(out: &Path) -> Result<Staging, SelectError> {
        let name = out
            .file_name()
            .ok_or_else(|| SelectError::Name {
                path: out.to_path_buf(),
            })?
            .to_string_lossy()
            .to_string();
        let parent = match out.parent() {
            Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
            _ => PathBuf::from("."),
        };
        let path = parent.join(format!(".{name}.import-{}", std::process::id()));
        let mut h = held();
        if h.contains(&path) {
            return Err(SelectError::Busy {
                path: out.to_path_buf(),
            });
        }
        h.push(path.clone());
        Ok(Staging(path))
    }

    /// Its path.
    pub fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for Staging {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
        held().retain(|p| p != &self.0);
    }
}

/// An import that keeps some variables and records: [`begin`] checks the
/// target and the filter before the input is read, the front end imports
/// the whole input into [`staging`] (replacing whatever is there), and
/// [`finish`] writes the selection to the target. Dropped at any point,
/// it removes the staging dataset; the target is written only by
/// [`finish`], atomically.
///
/// [`begin`]: SelectedImport::begin
/// [`staging`]: SelectedImport::staging
/// [`finish`]: SelectedImport::finish
#[derive(Debug)]
pub struct SelectedImport {
    out: PathBuf,
    force: bool,
    vars: Vec<String>,
    filter: Vec<Term>,
    staging: Staging,
}

impl SelectedImport {
    /// Checks before the input is read: the filter's words, and that `out`
    /// may be written (an existing dataset only with `force`). Removes the
    /// staging datasets killed imports into `out` left. `vars` are names
    /// or lists of names (commas or spaces), as `engine::var_names` reads
    /// them; empty keeps every variable.
    pub fn begin(
        out: &Path,
        force: bool,
        vars: &[String],
        filter: Option<&str>,
    ) -> Result<SelectedImport, SelectError> {
        let filter = match filter.filter(|f| !f.trim().is_empty()) {
            Some(f) => {
                microtab_engine::parse_filter(f).map_err(|e| SelectError::Filter(Box::new(e)))?
            }
            None => Vec::new(),
        };
        remove_stale_staging(out);
        if out.exists() && !force {
            return Err(SelectError::Exists {
                path: out.to_path_buf(),
            });
        }
        Ok(SelectedImport {
            out: out.to_path_buf(),
            force,
            vars: vars.to_vec(),
            filter,
            staging: Staging::beside(out)?,
        })
    }

    /// Where the import writes the whole input (replacing what is there).
    pub fn staging(&self) -> &Path {
        self.staging.path()
    }

    /// Whether a filter chooses records.
    pub fn filtered(&self) -> bool {
        !self.filter.is_empty()
    }

    /// Writes the chosen variables of the records that pass the filter
    /// from the imported staging dataset to the target (atomically, as
    /// `subset` does; its manifest names the input the import read), and
    /// removes the staging dataset.
    pub fn finish(self) -> Result<SubsetReport, SelectError> {
        let staging = self.staging.path().to_path_buf();
        let ds = Dataset::open(&staging).map_err(|error| SelectError::Open {
            out: self.out.clone(),
            staging: staging.clone(),
            error: Box::new(error),
        })?;
        let vars = microtab_engine::var_names(&ds, &self.vars);
        let source = ds
            .manifest()
            .source
            .clone()
            .unwrap_or_else(|| "an import".into());
        microtab_engine::subset::subset_from(
            &ds,
            &self.out,
            &vars,
            &self.filter,
            self.force,
            &source,
        )
        .map_err(|error| SelectError::Select {
            out: self.out.clone(),
            staging,
            error: Box::new(error),
        })
    }
}

/// Removes what killed splits and imports with parts into `out` left
/// beside it (a split's staging directory of parts, an import's whole
/// dataset and its own staging), when the process that wrote it is gone:
/// each is as large as the data. Called by the next writer to `out`.
pub fn remove_stale_staging(out: &Path) {
    let Some(name) = out.file_name().map(|n| n.to_string_lossy().into_owned()) else {
        return;
    };
    let parent = match out.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    };
    let Ok(rd) = std::fs::read_dir(&parent) else {
        return;
    };
    let gone = |pid: &str| {
        pid.parse::<u32>()
            .is_ok_and(|pid| pid != std::process::id() && !microtab_io::sys::process_alive(pid))
    };
    let entries: Vec<String> = rd
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    let split = format!(".{name}.split-");
    let import = format!(".{name}.import-");
    // The import's own staging (`.<its name>.importing-<pid>`, written by
    // the importing process or by a child it ran).
    let inner = format!("..{name}.import-");
    for f in &entries {
        let stale = if let Some(pid) = f.strip_prefix(&split) {
            gone(pid)
        } else if let Some(rest) = f.strip_prefix(&inner) {
            rest.split_once(".importing-")
                .is_some_and(|(pid, child)| gone(pid) && gone(child))
        } else if let Some(pid) = f.strip_prefix(&import) {
            // Not while a child that outlived it still writes into it.
            let busy = entries.iter().any(|g| {
                g.strip_prefix(&format!("..{name}.import-{pid}.importing-"))
                    .is_some_and(|child| !gone(child))
            });
            gone(pid) && !busy
        } else {
            false
        };
        if stale {
            let _ = std::fs::remove_dir_all(parent.join(f));
        }
    }
}
