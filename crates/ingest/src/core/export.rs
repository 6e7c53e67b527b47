//! What the writers of other formats (`dta::write`, `sav::write`) share:
//! the checks of the target and the variables, the atomic write (beside
//! the target, renamed into place when complete), and the records a
//! selection keeps, block by block.

use crate::error::{Error, Result};
use microtab_store::{Variable, STRIPE_ROWS};
use std::fs::File;
use std::io::BufWriter;
use std::path::{Path, PathBuf};

/// What an export wrote.
#[derive(Debug, Clone)]
pub struct Written {
    /// Records written.
    pub rows: u64,
    /// Variables written.
    pub vars: usize,
    /// What changed on the way (renamed variables, labels left out …).
    pub notes: Vec<String>,
}

/// How an export writes its file.
#[derive(Debug, Clone, Copy)]
pub struct WriteOptions {
    /// Replace an existing file (else an existing file is an error).
    pub force: bool,
    /// Write the variables' value-label sets (the default). Without them
    /// the codes go out alone; variable labels are still written and
    /// missing values still declared.
    pub value_labels: bool,
}

impl Default for WriteOptions {
    fn default() -> Self {
        WriteOptions {
            force: false,
            value_labels: true,
        }
    }
}

/// `vars` as the export writes them: without their value labels unless
/// `opts` asks for them.
pub(crate) fn labelled(vars: &[Variable], opts: WriteOptions) -> Vec<Variable> {
    vars.iter()
        .map(|v| {
            let mut v = v.clone();
            if !opts.value_labels {
                v.value_labels.clear();
            }
            v
        })
        .collect()
}

/// An error about the target `out`.
pub(crate) fn target_error(out: &Path, reason: String) -> Error {
    Error::Input {
        path: out.to_path_buf(),
        reason,
    }
}

/// Refuses an existing `out` (without `force`) and a variable named twice.
pub(crate) fn check(out: &Path, force: bool, vars: &[Variable]) -> Result<()> {
    if out.exists() && !force {
        return Err(target_error(
            out,
            "the file exists, and replacing it was not asked for".into(),
        ));
    }
    for (i, v) in vars.iter().enumerate() {
        if vars[..i].iter().any(|w| w.name == v.name) {
            return Err(target_error(
                out,
                format!("variable {} is named twice", v.name),
            ));
        }
    }
    Ok(())
}

/// The temporary file beside `out` a write goes to.
pub(crate) fn temp_path(out: &Path) -> PathBuf {
    let name = out
        .file_name()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default();
    out.with_file_name(format!(".{name}.tmp-{}", std::process::id()))
}

/// Writes `out` by `write` into a file beside it, synced and renamed into
/// place when `write` succeeds; removed otherwise, so that an existing
/// `out` stays as it was.
pub(crate) fn atomically(
    out: &Path,
    write: impl FnOnce(&mut BufWriter<File>) -> std::io::Result<Result<()>>,
) -> Result<()> {
    let tmp = temp_path(out);
    let written = (|| -> std::io::Result<Result<()>> {
        let f = File::create(&tmp)?;
        let mut w = BufWriter::with_capacity(1 << 20, f);
        if let Err(e) = write(&mut w)? {
            return Ok(Err(e));
        }
        let f = w.into_inner().map_err(|e| e.into_error())?;
        f.sync_all()?;
        Ok(Ok(()))
    })();
    let done = match written {
        Ok(Ok(())) => {
            std::fs::rename(&tmp, out).map_err(|e| target_error(out, format!("cannot write: {e}")))
        }
        Ok(Err(e)) => Err(e),
        Err(e) => Err(target_error(out, format!("cannot write: {e}"))),
    };
    if let Err(e) = done {
        let _ = std::fs::remove_file(&tmp);
        return Err(e);
    }
    if let Some(dir) = out.parent().filter(|d| !d.as_os_str().is_empty()) {
        let _ = microtab_io::sync_dir(dir);
    }
    Ok(())
}

/// The blocks of records to read (`start`, `n`: whole stripes) and, in
/// each, the positions `selection` keeps (all when `None`); blocks that
/// keep none are left out.
pub(crate) fn blocks(
    rows: usize,
    selection: Option<(&[u64], u64)>,
) -> impl Iterator<Item = (usize, usize, Vec<usize>)> + '_ {
    (0..rows).step_by(8 * STRIPE_ROWS).filter_map(move |start| {
        let n = (8 * STRIPE_ROWS).min(rows - start);
        let keep: Vec<usize> = match selection {
            None => (0..n).collect(),
            Some((bits, _)) => (0..n)
                .filter(|&i| {
                    let r = start + i;
                    bits[r / 64] >> (r % 64) & 1 == 1
                })
                .collect(),
        };
        (!keep.is_empty()).then_some((start, n, keep))
    })
}

/// How a format names variables: what a valid name is, the characters
/// kept, what goes before a name that starts wrong, how a name is cut to
/// `max` (and a suffix fits), whether case matters, the format's name.
pub(crate) struct NameRules {
    pub valid: fn(&str) -> bool,
    pub keep: fn(char) -> bool,
    pub lead: char,
    pub max: usize,
    pub cut: fn(&str, usize) -> String,
    pub fold: bool,
    pub format: &'static str,
}

/// Valid, distinct names for `vars` under `r`, a note for each change:
/// valid names are kept (so that `my_var` stays `my_var`), others made
/// valid without taking one of them.
pub(crate) fn names(vars: &[Variable], r: &NameRules, notes: &mut Vec<String>) -> Vec<String> {
    let key = |n: &str| {
        if r.fold {
            n.to_uppercase()
        } else {
            n.to_string()
        }
    };
    let mut taken: std::collections::HashSet<String> = vars
        .iter()
        .filter(|v| (r.valid)(&v.name))
        .map(|v| key(&v.name))
        .collect();
    vars.iter()
        .map(|v| {
            if (r.valid)(&v.name) {
                return v.name.clone();
            }
            let mut n: String = v
                .name
                .chars()
                .map(|c| if (r.keep)(c) { c } else { '_' })
                .collect();
            if !(r.valid)(&(r.cut)(&n, r.max)) {
                // A wrong first character or a reserved word.
                n.insert(0, r.lead);
            }
            n = (r.cut)(&n, r.max);
            let base = n.clone();
            let mut k = 2;
            while !(r.valid)(&n) || !taken.insert(key(&n)) {
                let suffix = format!("_{k}");
                n = format!("{}{suffix}", (r.cut)(&base, r.max - suffix.len()));
                k += 1;
            }
            notes.push(format!(
                "variable {} is named {n} in the {} file",
                v.name, r.format
            ));
            n
        })
        .collect()
}
