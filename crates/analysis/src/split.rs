//! A dataset cut into parts by records, and the catalog that names them:
//! the parts a cluster answers as one ([`crate::Partial`]s merged), each
//! a dataset of its own.
//!
//! A catalog is a directory holding the parts (`part-001.mtab` …) and
//! [`CATALOG`] (`catalog.json`), which lists them in record order with
//! their first record and size. Every reader that takes several datasets
//! (`microtab tab CATALOG …`, Python's `open_many` and `microtab.dask.parts`)
//! takes the catalog's directory for all of its parts.
//!
//! Survey designs: a replicate design is carried to every part (replicate
//! totals add up). A Taylor design's variance rests on each stratum's PSU
//! count, so the cuts are moved to the next change of stratum and the
//! design is set again on each part's own records: when every stratum is
//! one run of records, each part holds whole strata and the merged parts
//! give the whole dataset's standard errors. When strata are not runs of
//! records (or there are no strata), the parts carry no Taylor design, and
//! the report says why (ranges of the one dataset keep it:
//! `microtab.dask.split`).

use crate::{DesignSpec, Error, Result};
use microtab_store::{Dataset, Design};
use serde::{Deserialize, Serialize};
use std::collections::HashSet;
use std::path::{Path, PathBuf};

/// Most parts a split writes.
pub const MAX_PARTS: usize = 100_000;

/// The catalog file in a directory of parts.
pub const CATALOG: &str = "catalog.json";

/// A catalog of parts (see the module documentation).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Catalog {
    /// The catalog format's version (1).
    pub microtab_parts: u32,
    /// The dataset the parts were cut from.
    pub source: String,
    /// Records over all parts.
    pub rows: u64,
    /// The parts, in record order.
    pub parts: Vec<CatalogPart>,
    /// How the source's survey design went to the parts.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub design: Option<String>,
}

/// One part of a [`Catalog`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CatalogPart {
    /// The part's dataset directory, relative to the catalog's.
    pub path: String,
    /// Its first record's number in the source (from 1).
    pub first_record: u64,
    /// Its records.
    pub rows: u64,
}

/// What [`split()`] wrote.
#[derive(Debug, Clone)]
pub struct SplitReport {
    /// The catalog written.
    pub catalog: Catalog,
}

fn io(path: &Path) -> impl FnOnce(std::io::Error) -> Error + '_ {
    move |source| Error::Io {
        path: path.display().to_string(),
        source,
    }
}

/// The catalog in directory `dir`, if it is a catalog of parts.
pub fn catalog(dir: &Path) -> Result<Option<Catalog>> {
    let file = dir.join(CATALOG);
    if !file.is_file() {
        return Ok(None);
    }
    let text = std::fs::read_to_string(&file).map_err(io(&file))?;
    let c: Catalog = serde_json::from_str(&text).map_err(|e| {
        Error::Catalog(format!(
            "{}: not a catalog of parts ({e}): expected what `microtab split` writes",
            file.display()
        ))
    })?;
    if c.microtab_parts != 1 {
        return Err(Error::Catalog(format!(
            "{}: catalog version {} (this microtab reads version 1)",
            file.display(),
            c.microtab_parts
        )));
    }
    Ok(Some(c))
}

/// The parts' directories of the catalog in `dir`, in record order
/// (`None`: `dir` is not a catalog). A part named in the catalog that is
/// not there is an error: an answer without it would be silently short.
pub fn catalog_parts(dir: &Path) -> Result<Option<Vec<PathBuf>>> {
    let Some(c) = catalog(dir)? else {
        return Ok(None);
    };
    let mut out = Vec::with_capacity(c.parts.len());
    let file = dir.join(CATALOG);
    let mut next = 1u64;
    for p in &c.parts {
        // Parts in record order, each once, none missing: else records
        // would be counted twice or not at all.
        if p.first_record != next {
            return Err(Error::Catalog(format!(
                "{}: part {} starts at record {}, but the parts before it end at record {}: the catalog's parts must cover the records once, in order",
                file.display(),
                p.path,
                p.first_record,
                next - 1
            )));
        }
        next = p.first_record + p.rows;
        let rel = Path::new(&p.path);
        if rel.is_absolute() || rel.components().count() != 1 {
            return Err(Error::Catalog(format!(
                "{}: part {} is not a directory inside the catalog",
                dir.join(CATALOG).display(),
                p.path
            )));
        }
        let path = dir.join(rel);
        if !path.join("manifest.json").is_file() {
            return Err(Error::Catalog(format!(
                "{}: part {} (records {}–{}) is missing: the catalog's answers would lack its records",
                dir.join(CATALOG).display(),
                p.path,
                p.first_record,
                p.first_record + p.rows.saturating_sub(1)
            )));
        }
        let rows = Dataset::open(&path)?.rows();
        if rows != p.rows {
            return Err(Error::Catalog(format!(
                "{}: part {} has {rows} records, the catalog says {}: it was changed after the split",
                file.display(),
                p.path,
                p.rows
            )));
        }
        out.push(path);
    }
    if next - 1 != c.rows {
        return Err(Error::Catalog(format!(
            "{}: the parts hold {} records, the catalog says {}",
            file.display(),
            next - 1,
            c.rows
        )));
    }
    Ok(Some(out))
}

/// Where to cut `rows` records into `parts` of about equal size: the
/// first record of each part after the first, moved forward to the next
/// change of `keys` when given.
fn cuts(rows: u64, parts: usize, keys: Option<&[i64]>) -> Vec<u64> {
    let mut out: Vec<u64> = Vec::new();
    for i in 1..parts as u64 {
        let mut c = (rows as u128 * i as u128 / parts as u128) as u64;
        if let Some(k) = keys {
            while c > 0 && c < rows && k[c as usize] == k[c as usize - 1] {
                c += 1;
            }
        }
        if c > 0 && c < rows && out.last().is_none_or(|&l| c > l) {
            out.push(c);
        }
    }
    out
}

/// Cuts `ds` into `parts` datasets of consecutive records under the
/// catalog directory `out` (see the module documentation). The parts are
/// written into a directory beside `out` and renamed into place when all
/// are complete, so a failed or killed split leaves no catalog at `out`
/// and an existing one (replaced only with `force`) untouched.
///
/// A Taylor design that cannot go to the parts (strata not runs of
/// records, or no strata) is an error unless `without_design`: parts
/// without it answer unweighted unless a query names the weight.
pub fn split(
    ds: &Dataset,
    out: &Path,
    parts: usize,
    force: bool,
    without_design: bool,
) -> Result<SplitReport> {
    if parts == 0 {
        return Err(Error::Catalog(
            "the number of parts must be at least 1".into(),
        ));
    }
    let rows = ds.rows();
    if parts as u64 > rows.max(1) || parts > MAX_PARTS {
        return Err(Error::Catalog(format!(
            "{parts} parts of {rows} records: at most {} (one record or more a part, and at most {MAX_PARTS} parts)",
            rows.clamp(1, MAX_PARTS as u64)
        )));
    }
    if out.exists() {
        let ours = out.join(CATALOG).is_file() || out.join("manifest.json").is_file();
        if !force || !ours {
            return Err(Error::Catalog(format!(
                "{} exists{}",
                out.display(),
                if ours {
                    " (give --force to replace it)"
                } else {
                    " and is not a dataset or catalog of parts: choose another name"
                }
            )));
        }
    }
    if std::fs::canonicalize(out).ok() == std::fs::canonicalize(ds.dir()).ok() && out.exists() {
        return Err(Error::Catalog(
            "a split cannot replace the dataset it cuts; write it elsewhere".into(),
        ));
    }
    let design = ds.manifest().design.clone();
    // A Taylor design: cut at changes of stratum, so each part can hold
    // whole strata.
    let taylor = design.as_ref().and_then(|d| d.taylor.as_ref());
    let strata_keys = match taylor.and_then(|t| t.strata.as_ref()) {
        Some(s) => Some(crate::taylor::keys(ds, ds.variable(s)?, "strata")?),
        None => None,
    };
    let cut = cuts(
        rows,
        parts.min(rows.max(1) as usize),
        strata_keys.as_deref(),
    );
    let mut bounds = vec![0];
    bounds.extend(&cut);
    bounds.push(rows);
    let ranges: Vec<(u64, u64)> = bounds.windows(2).map(|w| (w[0], w[1])).collect();
    let mut note = None;
    let per_part_taylor = match (taylor, &strata_keys) {
        (None, _) => false,
        (Some(_), _) if ranges.len() == 1 => false,
        (Some(_), None) => {
            note = Some("the Taylor design is not carried to the parts: without strata its one stratum spans every part, and its variance rests on the PSU count of the whole (query ranges of the dataset instead: microtab.dask.split)".to_string());
            false
        }
        (Some(t), Some(k)) => {
            // Whole strata in each part: no stratum seen in an earlier part.
            let mut seen: HashSet<i64> = HashSet::new();
            let mut ok = true;
            for &(a, b) in &ranges {
                let here: HashSet<i64> = k[a as usize..b as usize].iter().copied().collect();
                if here.iter().any(|s| seen.contains(s)) {
                    ok = false;
                    break;
                }
                seen.extend(here);
            }
            if !ok {
                note = Some(format!(
                    "the Taylor design is not carried to the parts: the strata of {} are not runs of records, so a part would hold part of a stratum (sort the data by stratum first, or query ranges of the dataset: microtab.dask.split)",
                    t.strata.as_deref().unwrap_or("")
                ));
            }
            ok
        }
    };
    if let (Some(n), true) = (&note, taylor.is_some() && !without_design) {
        return Err(Error::Catalog(format!(
            "{n}. Nothing was written; give --no-design to write the parts without the design (their queries are then unweighted unless they name --weight, and have no design-based standard errors)"
        )));
    }
    // Written beside `out`, renamed into place when complete.
    let parent = match out.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    };
    let name = out
        .file_name()
        .ok_or_else(|| Error::Catalog(format!("{} is not a directory name", out.display())))?
        .to_string_lossy()
        .to_string();
    let staging = parent.join(format!(".{name}.split-{}", std::process::id()));
    if staging.exists() {
        std::fs::remove_dir_all(&staging).map_err(io(&staging))?;
    }
    std::fs::create_dir_all(&staging).map_err(io(&staging))?;
    let guard = Staging(staging.clone());
    let width = ranges.len().to_string().len().max(3);
    let mut listed = Vec::with_capacity(ranges.len());
    for (i, &(a, b)) in ranges.iter().enumerate() {
        let part = format!("part-{:0width$}.mtab", i + 1);
        let dir = staging.join(&part);
        let r = microtab_engine::subset::subset_rows(ds, &dir, a..b, false)?;
        if per_part_taylor {
            let d = design.as_ref().expect("a Taylor design");
            let t = d.taylor.as_ref().expect("a Taylor design");
            let mut spec = DesignSpec::new(d.weight.clone());
            spec.strata = t.strata.clone();
            spec.cluster = t.cluster.clone();
            spec.fpc = t.fpc.clone();
            spec.lonely_psu = t.lonely_psu;
            let mut pds = Dataset::open(&dir)?;
            let built: Design = crate::build_design(&pds, &spec).map_err(|e| Error::InDataset {
                dataset: format!("part {} (records {}–{})", i + 1, a + 1, b),
                error: Box::new(e),
            })?;
            pds.update_manifest(|m| m.design = Some(built))?;
        } else if i == 0 && note.is_none() {
            note = r.design_note.clone();
        }
        listed.push(CatalogPart {
            path: part,
            first_record: a + 1,
            rows: b - a,
        });
    }
    let design_text = match (&design, per_part_taylor, &note) {
        (_, _, Some(n)) => Some(n.clone()),
        (Some(d), true, _) => Some(format!(
            "the Taylor design is set on each part's own records (whole strata of {} in each part)",
            d.taylor
                .as_ref()
                .and_then(|t| t.strata.as_deref())
                .unwrap_or("")
        )),
        (Some(_), false, None) => Some("the survey design is carried to every part".to_string()),
        (None, _, _) => None,
    };
    let catalog = Catalog {
        microtab_parts: 1,
        source: ds.dir().display().to_string(),
        rows,
        parts: listed,
        design: design_text,
    };
    let file = staging.join(CATALOG);
    let text = serde_json::to_string_pretty(&catalog).expect("a catalog serializes") + "\n";
    write_synced(&file, text.as_bytes())?;
    // Into place: swapped with an existing catalog (with --force) in one
    // step, whose old contents the staging guard then removes; renamed
    // when there is none.
    if out.exists() {
        microtab_store::exchange(&staging, out)?;
        drop(guard);
    } else {
        std::fs::rename(&staging, out).map_err(io(out))?;
        std::mem::forget(guard);
        if let Ok(d) = std::fs::File::open(&parent) {
            let _ = d.sync_all();
        }
    }
    Ok(SplitReport { catalog })
}

/// Writes `bytes` to `path` and flushes it to disk.
fn write_synced(path: &Path, bytes: &[u8]) -> Result<()> {
    use std::io::Write;
    let mut f = std::fs::File::create(path).map_err(io(path))?;
    f.write_all(bytes).map_err(io(path))?;
    f.sync_all().map_err(io(path))
}

/// The staging directory of a split, removed unless it was moved into
/// place.
struct Staging(PathBuf);

impl Drop for Staging {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

#[cfg(test)]
mod tests {
    use super::cuts;

    #[test]
    fn cuts_are_even_and_move_to_stratum_changes() {
        assert_eq!(cuts(10, 3, None), vec![3, 6]);
        assert_eq!(cuts(2, 5, None), vec![1]);
        let k = [1, 1, 1, 2, 2, 2, 2, 3, 3, 3];
        // 3 → 3 (a change), 6 → 7.
        assert_eq!(cuts(10, 3, Some(&k)), vec![3, 7]);
        // One stratum: no cut at all.
        assert_eq!(cuts(4, 2, Some(&[5, 5, 5, 5])), Vec::<u64>::new());
    }
}
