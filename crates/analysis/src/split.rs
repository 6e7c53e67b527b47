//! A dataset cut into parts by records, and the catalog that names them:
//! the parts a cluster answers as one ([`crate::Partial`]s merged), each
//! a dataset of its own.
//!
//! A catalog is a directory holding the parts (`part-001.mtab` …) and
//! [`CATALOG`] (`catalog.json`), which lists them in record order with
//! their first record, size and dataset id. Every reader that takes
//! several datasets (`microtab tab CATALOG …`, Python's `open_many` and
//! `microtab.dask.parts`) takes the catalog's directory for all of its
//! parts.
//!
//! Parts are known by what their manifests say, not by their paths or
//! sizes: each part's manifest holds its dataset id (drawn when its
//! records were written; a copy has the same) and which records of which
//! dataset it holds ([`microtab_store::PartOf`]), and the catalog records
//! each part's id. [`catalog_parts`] refuses a catalog in which two
//! entries are one dataset (a link, a `..` path, a copied directory, an
//! entry listed twice), or a part's manifest disagrees with its entry (a
//! part replaced by another dataset or another split's part of the same
//! size, a part imported again after the split, parts reordered): the
//! answer would count records twice or answer for other records.
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

use crate::staging::remove_stale_staging;
use crate::{DesignSpec, Error, Result};
use microtab_store::{Dataset, Design, PartOf};
use serde::{Deserialize, Serialize};
use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};

/// Most parts a split writes.
pub const MAX_PARTS: usize = 100_000;

/// The catalog file in a directory of parts.
pub const CATALOG: &str = "catalog.json";

/// The catalog format written and read: version 2 records each part's
/// dataset id (version 1 did not, and is refused: see [`CatalogError::Old`]).
pub const CATALOG_VERSION: u32 = 2;

/// A catalog of parts (see the module documentation).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Catalog {
    /// The catalog format's version ([`CATALOG_VERSION`]).
    pub microtab_parts: u32,
    /// The dataset the parts were cut from.
    pub source: String,
    /// That dataset's id (`None`: it had none).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source_id: Option<String>,
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
    /// Its dataset id ([`microtab_store::Manifest::id`]) when it was
    /// written (absent in version 1 catalogs).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
}

/// Why a catalog of parts is refused, or a split cannot be made as asked.
/// Each names the catalog file (and the part) and what disagrees.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum CatalogError {
    /// The file is not a catalog of parts.
    #[error("{file}: not a catalog of parts ({reason}): expected what a split writes")]
    Unreadable {
        /// The catalog file.
        file: String,
        /// What the JSON reader said.
        reason: String,
    },
    /// A catalog version this build does not read.
    #[error("{file}: catalog version {version} (this microtab reads version {CATALOG_VERSION})")]
    Version {
        /// The catalog file.
        file: String,
        /// The version found.
        version: u32,
    },
    /// A version 1 catalog: its parts carry no identity, so a part listed
    /// twice or replaced cannot be told.
    #[error("{file}: a catalog of version 1, written before parts carried their identity: a part listed twice or replaced could not be detected, so it is not answered. Write it again: split the source dataset again, or import the file again with parts, into this directory")]
    Old {
        /// The catalog file.
        file: String,
    },
    /// An entry of the catalog is not what the catalog's own listing
    /// needs (order, coverage, a path outside the catalog, no id).
    #[error("{file}: part {part}: {what}")]
    Listing {
        /// The catalog file.
        file: String,
        /// The part's path as listed.
        part: String,
        /// What is wrong.
        what: String,
    },
    /// A listed part is not there.
    #[error("{file}: part {part} (records {first}–{last}) is missing: the catalog's answers would lack its records")]
    Missing {
        /// The catalog file.
        file: String,
        /// The part's path as listed.
        part: String,
        /// Its first record.
        first: u64,
        /// Its last record.
        last: u64,
    },
    /// Two entries are the same dataset.
    #[error("{file}: parts {first} and {second} are the same dataset ({how}): its records would be counted twice")]
    Duplicate {
        /// The catalog file.
        file: String,
        /// The entry listed first.
        first: String,
        /// The entry listed second.
        second: String,
        /// How they are the same (one directory, or one dataset id).
        how: String,
    },
    /// A part's manifest disagrees with its entry in the catalog.
    #[error("{file}: part {part} is not the part the split wrote: its manifest gives {what} {found}, the catalog {expected} ({why}); split the source dataset again to write a catalog of the parts as they are")]
    Mismatch {
        /// The catalog file.
        file: String,
        /// The part's path as listed.
        part: String,
        /// The field that disagrees.
        what: &'static str,
        /// Its value in the part's manifest.
        found: String,
        /// Its value in the catalog.
        expected: String,
        /// What that means.
        why: &'static str,
    },
    /// The parts' records do not add up to the catalog's total.
    #[error("{file}: the parts hold {parts} records, the catalog says {rows}")]
    Total {
        /// The catalog file.
        file: String,
        /// Records over the listed parts.
        parts: u64,
        /// The catalog's total.
        rows: u64,
    },
    /// The split's target exists.
    #[error("{path} exists{}", if *.ours { "" } else { " and is not a dataset or catalog of parts: choose another name" })]
    Exists {
        /// The target directory.
        path: String,
        /// Whether it is a dataset or catalog of parts (which may be
        /// replaced); anything else never is.
        ours: bool,
    },
    /// A Taylor design that cannot go to the parts, and the split was not
    /// asked to write them without it.
    #[error("{reason}. Nothing was written (parts without the design are unweighted unless a query names a weight, and have no design-based standard errors)")]
    DesignNotCarried {
        /// Why the design cannot go to the parts.
        reason: String,
    },
    /// A split that cannot be made as asked.
    #[error("{0}")]
    Split(String),
}

impl microtab_store::Remedied for CatalogError {
    /// [`Remedy::Force`](microtab_store::Remedy::Force) for a catalog or
    /// dataset in the way, [`Remedy::NoDesign`](microtab_store::Remedy::NoDesign)
    /// for a design the parts cannot carry.
    fn remedy(&self) -> Option<microtab_store::Remedy> {
        use microtab_store::Remedy;
        match self {
            CatalogError::Exists { ours: true, .. } => Some(Remedy::Force),
            CatalogError::DesignNotCarried { .. } => Some(Remedy::NoDesign),
            _ => None,
        }
    }
}

fn catalog_err(e: CatalogError) -> Error {
    Error::Catalog(Box::new(e))
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
    let name = file.display().to_string();
    let text = std::fs::read_to_string(&file).map_err(io(&file))?;
    // The version first, so that a catalog of another version is named
    // as such rather than as a file with unexpected fields.
    #[derive(Deserialize)]
    struct Version {
        microtab_parts: u32,
    }
    let unreadable = |e: serde_json::Error| {
        catalog_err(CatalogError::Unreadable {
            file: name.clone(),
            reason: e.to_string(),
        })
    };
    let v: Version = serde_json::from_str(&text).map_err(unreadable)?;
    match v.microtab_parts {
        CATALOG_VERSION => {}
        1 => return Err(catalog_err(CatalogError::Old { file: name })),
        version => {
            return Err(catalog_err(CatalogError::Version {
                file: name,
                version,
            }))
        }
    }
    Ok(Some(serde_json::from_str(&text).map_err(unreadable)?))
}

/// The parts' directories of the catalog in `dir`, in record order
/// (`None`: `dir` is not a catalog), each checked against what its
/// manifest says: its dataset id is the one the catalog recorded and no
/// other entry's, and it holds the records the catalog lists of the
/// catalog's source. A part that is not there is an error: an answer
/// without it would be silently short; one listed twice or not the part
/// the split wrote is an error too (see the module documentation).
pub fn catalog_parts(dir: &Path) -> Result<Option<Vec<PathBuf>>> {
    let Some(c) = catalog(dir)? else {
        return Ok(None);
    };
    let file = dir.join(CATALOG).display().to_string();
    let listing = |part: &str, what: String| {
        catalog_err(CatalogError::Listing {
            file: file.clone(),
            part: part.to_string(),
            what,
        })
    };
    let mismatch = |part: &str, what, found: String, expected: String, why| {
        catalog_err(CatalogError::Mismatch {
            file: file.clone(),
            part: part.to_string(),
            what,
            found,
            expected,
            why,
        })
    };
    let mut out = Vec::with_capacity(c.parts.len());
    let mut by_dir: HashMap<PathBuf, &str> = HashMap::new();
    let mut by_id: HashMap<String, &str> = HashMap::new();
    let mut next = 1u64;
    for p in &c.parts {
        // Parts in record order, each once, none missing: else records
        // would be counted twice or not at all.
        if p.first_record != next {
            return Err(listing(
                &p.path,
                format!(
                    "starts at record {}, but the parts before it end at record {}: the catalog's parts must cover the records once, in order",
                    p.first_record,
                    next - 1
                ),
            ));
        }
        next = p.first_record + p.rows;
        let rel = Path::new(&p.path);
        if rel.is_absolute()
            || rel.components().count() != 1
            || !matches!(
                rel.components().next(),
                Some(std::path::Component::Normal(_))
            )
        {
            return Err(listing(
                &p.path,
                "is not the name of a directory inside the catalog".into(),
            ));
        }
        let Some(want) = &p.id else {
            return Err(listing(
                &p.path,
                "has no dataset id in the catalog: the split records each part's".into(),
            ));
        };
        let path = dir.join(rel);
        if !path.join("manifest.json").is_file() {
            return Err(catalog_err(CatalogError::Missing {
                file: file.clone(),
                part: p.path.clone(),
                first: p.first_record,
                last: p.first_record + p.rows.saturating_sub(1),
            }));
        }
        // One directory (a symbolic link, a link's target) listed twice.
        let real = std::fs::canonicalize(&path).map_err(io(&path))?;
        if let Some(first) = by_dir.insert(real.clone(), &p.path) {
            return Err(catalog_err(CatalogError::Duplicate {
                file: file.clone(),
                first: first.to_string(),
                second: p.path.clone(),
                how: format!("both are {}", real.display()),
            }));
        }
        let ds = Dataset::open(&path).map_err(|e| Error::InDataset {
            dataset: format!("{file}: part {}", p.path),
            error: Box::new(e.into()),
        })?;
        let m = ds.manifest();
        // One dataset under two names (a copied or hard-linked directory).
        if let Some(id) = &m.id {
            if let Some(first) = by_id.insert(id.clone(), &p.path) {
                return Err(catalog_err(CatalogError::Duplicate {
                    file: file.clone(),
                    first: first.to_string(),
                    second: p.path.clone(),
                    how: format!("dataset id {id}: a copy of the one directory"),
                }));
            }
        }
        check_manifest(&ds, p, want, &c.source_id, &mismatch)?;
        out.push(path);
    }
    if next - 1 != c.rows {
        return Err(catalog_err(CatalogError::Total {
            file,
            parts: next - 1,
            rows: c.rows,
        }));
    }
    Ok(Some(out))
}

/// The mismatch error of a catalog entry (part, field, found, expected,
/// why).
type Mismatch<'a> = dyn Fn(&str, &'static str, String, String, &'static str) -> Error + 'a;

/// Checks that the part `ds` listed as `p` is the dataset `want` the
/// split wrote, cut from `source_id`, with the records the entry lists.
fn check_manifest(
    ds: &Dataset,
    p: &CatalogPart,
    want: &str,
    source_id: &Option<String>,
    mismatch: &Mismatch<'_>,
) -> Result<()> {
    let shown = |id: &Option<String>| id.clone().unwrap_or_else(|| "none".into());
    if ds.manifest().id.as_deref() != Some(want) {
        return Err(mismatch(
            &p.path,
            "dataset id",
            shown(&ds.manifest().id),
            want.to_string(),
            "another dataset is in its place: replaced, copied over or imported again after the split",
        ));
    }
    let Some(of) = &ds.manifest().part_of else {
        return Err(mismatch(
            &p.path,
            "the records it holds as",
            "none".into(),
            format!("records {}–{}", p.first_record, p.first_record + p.rows - 1),
            "it does not say it is a part of a split",
        ));
    };
    if of.dataset != *source_id {
        return Err(mismatch(
            &p.path,
            "source dataset id",
            shown(&of.dataset),
            shown(source_id),
            "it was cut from another dataset",
        ));
    }
    if (of.first_record, of.rows) != (p.first_record, p.rows) {
        return Err(mismatch(
            &p.path,
            "records",
            format!(
                "{}–{}",
                of.first_record,
                (of.first_record + of.rows).saturating_sub(1)
            ),
            format!("{}–{}", p.first_record, p.first_record + p.rows - 1),
            "it holds other records of the source: the parts were moved or reordered",
        ));
    }
    if ds.rows() != p.rows {
        return Err(mismatch(
            &p.path,
            "a record count of",
            ds.rows().to_string(),
            p.rows.to_string(),
            "it was changed after the split",
        ));
    }
    Ok(())
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
    // What killed splits and imports into `out` left: each as large as
    // the data.
    remove_stale_staging(out);
    check_target(ds, out, parts, force)?;
    let rows = ds.rows();
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
    let (per_part_taylor, mut note) = taylor_plan(taylor, strata_keys.as_deref(), &ranges);
    if let (Some(n), true) = (&note, taylor.is_some() && !without_design) {
        return Err(catalog_err(CatalogError::DesignNotCarried {
            reason: n.clone(),
        }));
    }
    // Written beside `out`, renamed into place when complete.
    let parent = match out.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    };
    let name = out
        .file_name()
        .ok_or_else(|| {
            catalog_err(CatalogError::Split(format!(
                "{} is not a directory name",
                out.display()
            )))
        })?
        .to_string_lossy()
        .to_string();
    let staging = parent.join(format!(".{name}.split-{}", std::process::id()));
    if staging.exists() {
        std::fs::remove_dir_all(&staging).map_err(io(&staging))?;
    }
    std::fs::create_dir_all(&staging).map_err(io(&staging))?;
    let guard = Staging(staging.clone());
    let width = ranges.len().to_string().len().max(3);
    let source_id = ds.manifest().id.clone();
    let mut listed = Vec::with_capacity(ranges.len());
    for (i, &(a, b)) in ranges.iter().enumerate() {
        let part = format!("part-{:0width$}.mtab", i + 1);
        let dir = staging.join(&part);
        let r = microtab_engine::subset::subset_rows(ds, &dir, a..b, false)?;
        let mut pds = Dataset::open(&dir)?;
        let mut part_design = None;
        if per_part_taylor {
            let d = design.as_ref().expect("a Taylor design");
            let t = d.taylor.as_ref().expect("a Taylor design");
            let mut spec = DesignSpec::new(d.weight.clone());
            spec.strata = t.strata.clone();
            spec.cluster = t.cluster.clone();
            spec.fpc = t.fpc.clone();
            spec.lonely_psu = t.lonely_psu;
            let built: Design = crate::build_design(&pds, &spec).map_err(|e| Error::InDataset {
                dataset: format!("part {} (records {}–{})", i + 1, a + 1, b),
                error: Box::new(e),
            })?;
            part_design = Some(built);
        } else if i == 0 && note.is_none() {
            note = r.design_note.clone();
        }
        // What the part is, in its own manifest: which records of which
        // dataset (checked against the catalog by every reader).
        let of = PartOf {
            dataset: source_id.clone(),
            first_record: a + 1,
            rows: b - a,
        };
        pds.update_manifest(|m| {
            m.part_of = Some(of);
            if part_design.is_some() {
                m.design = part_design;
            }
        })?;
        listed.push(CatalogPart {
            path: part,
            first_record: a + 1,
            rows: b - a,
            id: pds.manifest().id.clone(),
        });
    }
    let design_text = design_text(design.as_ref(), per_part_taylor, note);
    let catalog = Catalog {
        microtab_parts: CATALOG_VERSION,
        source: ds.dir().display().to_string(),
        source_id,
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

/// Refuses a split of `ds` into `parts` at `out` that cannot be made:
/// no parts, more parts than records, or a target in the way.
fn check_target(ds: &Dataset, out: &Path, parts: usize, force: bool) -> Result<()> {
    if parts == 0 {
        return Err(catalog_err(CatalogError::Split(
            "the number of parts must be at least 1".into(),
        )));
    }
    let rows = ds.rows();
    if parts as u64 > rows.max(1) || parts > MAX_PARTS {
        return Err(catalog_err(CatalogError::Split(format!(
            "{parts} parts of {rows} records: at most {} (one record or more a part, and at most {MAX_PARTS} parts)",
            rows.clamp(1, MAX_PARTS as u64)
        ))));
    }
    if out.exists() {
        let ours = out.join(CATALOG).is_file() || out.join("manifest.json").is_file();
        if !force || !ours {
            return Err(catalog_err(CatalogError::Exists {
                path: out.display().to_string(),
                ours,
            }));
        }
    }
    if std::fs::canonicalize(out).ok() == std::fs::canonicalize(ds.dir()).ok() && out.exists() {
        return Err(catalog_err(CatalogError::Split(
            "a split cannot replace the dataset it cuts; write it elsewhere".into(),
        )));
    }
    Ok(())
}

/// Whether a Taylor design `taylor` is set on each part's own records
/// (cut at `ranges`, strata keys `keys`), and else why it is not carried
/// to the parts (`None`: no Taylor design, or one part).
fn taylor_plan(
    taylor: Option<&microtab_store::Taylor>,
    keys: Option<&[i64]>,
    ranges: &[(u64, u64)],
) -> (bool, Option<String>) {
    let mut note = None;
    let per_part_taylor = match (taylor, keys) {
        (None, _) => false,
        (Some(_), _) if ranges.len() == 1 => false,
        (Some(t), _) if t.calibration.is_some() => {
            note = Some(format!(
                "the Taylor design is not carried to the parts: its weight was adjusted to population totals (from {}), and the adjustment's residuals span every part (make replicate weights from the design first and adjust those)",
                t.calibration.as_ref().map_or("", |c| c.source.as_str())
            ));
            false
        }
        (Some(_), None) => {
            note = Some("the Taylor design is not carried to the parts: without strata its one stratum spans every part, and its variance rests on the PSU count of the whole (query ranges of the dataset instead: microtab.dask.split)".to_string());
            false
        }
        (Some(t), Some(k)) => {
            // Whole strata in each part: no stratum seen in an earlier part.
            let mut seen: HashSet<i64> = HashSet::new();
            let mut ok = true;
            for &(a, b) in ranges {
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
    (per_part_taylor, note)
}

/// What the catalog says of the parts' design.
fn design_text(
    design: Option<&Design>,
    per_part_taylor: bool,
    note: Option<String>,
) -> Option<String> {
    match (design, per_part_taylor, note) {
        (_, _, Some(n)) => Some(n),
        (Some(d), true, _) => Some(format!(
            "the Taylor design is set on each part's own records (whole strata of {} in each part)",
            d.taylor
                .as_ref()
                .and_then(|t| t.strata.as_deref())
                .unwrap_or("")
        )),
        (Some(_), false, None) => Some("the survey design is carried to every part".to_string()),
        (None, _, _) => None,
    }
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
    use super::*;
    use microtab_store::{DatasetWriter, Kind, PhysType, Variable};

    /// A dataset of `n` records of one variable X = 0, 1, ….
    fn dataset(path: &Path, n: u16) -> Dataset {
        let mut w = DatasetWriter::create(path, false).unwrap();
        let mut c = w.column_writer("X", PhysType::U16).unwrap();
        c.append(&(0..n).collect::<Vec<u16>>()).unwrap();
        w.add_variable(
            c.finish(Variable::new("X", Kind::Int, PhysType::U16))
                .unwrap(),
        );
        w.commit(n as u64).unwrap();
        Dataset::open(path).unwrap()
    }

    fn copy_dir(from: &Path, to: &Path) {
        std::fs::create_dir_all(to).unwrap();
        for e in std::fs::read_dir(from).unwrap().flatten() {
            let t = to.join(e.file_name());
            if e.file_type().unwrap().is_dir() {
                copy_dir(&e.path(), &t);
            } else {
                std::fs::copy(e.path(), t).unwrap();
            }
        }
    }

    #[test]
    fn parts_are_known_by_their_manifests() {
        let dir = tempfile::tempdir().unwrap();
        let ds = dataset(&dir.path().join("d.mtab"), 40);
        let cat = dir.path().join("d.parts");
        let c = split(&ds, &cat, 4, false, false).unwrap().catalog;
        assert_eq!(c.microtab_parts, CATALOG_VERSION);
        assert_eq!(c.source_id, ds.manifest().id);
        assert_eq!(catalog_parts(&cat).unwrap().unwrap().len(), 4);
        let p2 = Dataset::open(&cat.join("part-002.mtab")).unwrap();
        let m = p2.manifest();
        assert_eq!(m.id, c.parts[1].id);
        assert_eq!(
            m.part_of,
            Some(PartOf {
                dataset: ds.manifest().id.clone(),
                first_record: 11,
                rows: 10
            })
        );
        // A copy of part 1 in part 2's place: one dataset twice.
        std::fs::remove_dir_all(cat.join("part-002.mtab")).unwrap();
        copy_dir(&cat.join("part-001.mtab"), &cat.join("part-002.mtab"));
        match catalog_parts(&cat) {
            Err(Error::Catalog(e)) => match *e {
                CatalogError::Duplicate { first, second, .. } => assert_eq!(
                    (first.as_str(), second.as_str()),
                    ("part-001.mtab", "part-002.mtab")
                ),
                e => panic!("expected a duplicate, got {e}"),
            },
            other => panic!("expected a duplicate, got {other:?}"),
        }
        // Another split's part 3 (the same size) in part 2's place.
        let other = dir.path().join("o.parts");
        split(&ds, &other, 4, false, false).unwrap();
        std::fs::remove_dir_all(cat.join("part-002.mtab")).unwrap();
        copy_dir(&other.join("part-003.mtab"), &cat.join("part-002.mtab"));
        assert!(matches!(
            catalog_parts(&cat),
            Err(Error::Catalog(e)) if matches!(*e, CatalogError::Mismatch { what: "dataset id", .. })
        ));
    }

    #[test]
    fn stale_staging_of_dead_writers_is_removed() {
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("c.parts");
        // A pid that is not running: the largest one Linux can give, plus one.
        let dead = std::fs::read_to_string("/proc/sys/kernel/pid_max")
            .map_or(4_194_304, |s| s.trim().parse::<u32>().unwrap_or(4_194_304));
        let me = std::process::id();
        let names = [
            (format!(".c.parts.split-{dead}"), false),
            (format!(".c.parts.import-{dead}"), false),
            (format!("..c.parts.import-{dead}.importing-{dead}"), false),
            (format!(".c.parts.split-{me}"), true),
            (".c.parts.split-x".to_string(), true),
            (format!(".other.split-{dead}"), true),
        ];
        for (n, _) in &names {
            std::fs::create_dir_all(dir.path().join(n).join("part-001.mtab")).unwrap();
        }
        remove_stale_staging(&out);
        for (n, kept) in &names {
            assert_eq!(dir.path().join(n).exists(), *kept, "{n}");
        }
    }

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
