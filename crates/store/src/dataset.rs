//! Opening, building and atomically publishing datasets.

use crate::column::ColumnWriter;
use crate::{Column, Error, Kind, Manifest, Result, Variable, FORMAT_VERSION};
use microtab_io::{sync_dir, write_file_atomic, FileLock, IoConfig};
use std::collections::HashMap;
use std::path::{Path, PathBuf};

const MANIFEST: &str = "manifest.json";
/// The writers' lock file inside a dataset directory.
const LOCK: &str = ".lock";
/// Most implied decimals an integer variable may have (its scale, 10^18,
/// still fits in an `i64`).
const MAX_DECIMALS: u32 = 18;
/// How the manifest's own checksum starts in its text: a top-level key
/// (indented by two spaces; the variables' checksums are deeper).
const SUM_KEY: &[u8] = b"\n  \"checksum\": \"xxh3:";

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

/// The manifest's text with its checksum filled in (see
/// [`Manifest::checksum`]).
fn manifest_text(m: &Manifest) -> Vec<u8> {
    let mut m = m.clone();
    m.checksum = Some(format!("xxh3:{}", "0".repeat(16)));
    let mut text = serde_json::to_vec_pretty(&m).expect("manifest serializes");
    text.push(b'\n');
    let at = find(&text, SUM_KEY).expect("checksum written") + SUM_KEY.len();
    let sum = crate::xxh3(&text);
    text[at..at + 16].copy_from_slice(format!("{sum:016x}").as_bytes());
    text
}

/// Checks a manifest's text against its own checksum. A manifest without
/// one is accepted only from format versions 1 and 2.
fn check_manifest(path: &Path, text: &[u8], version: u32) -> Result<()> {
    let corrupt = |reason: &str| Error::Corrupt {
        path: path.to_path_buf(),
        reason: reason.to_string(),
    };
    let Some(pos) = find(text, SUM_KEY) else {
        if version >= 3 {
            return Err(corrupt("the manifest has no checksum (damaged)"));
        }
        return Ok(());
    };
    let at = pos + SUM_KEY.len();
    let want = text
        .get(at..at + 16)
        .and_then(|h| std::str::from_utf8(h).ok())
        .and_then(|h| u64::from_str_radix(h, 16).ok())
        .ok_or_else(|| corrupt("the manifest's checksum is malformed (damaged)"))?;
    let mut copy = text.to_vec();
    copy[at..at + 16].fill(b'0');
    if crate::xxh3(&copy) != want {
        return Err(corrupt(
            "the manifest does not match its checksum: it is damaged, or was edited by hand (labels and missing codes are changed through microtab, which keeps the checksum)",
        ));
    }
    Ok(())
}

/// Takes the writers' lock of the dataset directory `dir`.
fn lock(dir: &Path) -> Result<FileLock> {
    let who = format!(
        "pid {} ({})",
        std::process::id(),
        std::env::args().take(2).collect::<Vec<_>>().join(" ")
    );
    let tried =
        FileLock::try_acquire(&dir.join(LOCK), &who).map_err(|e| unwritable(dir, Error::Io(e)))?;
    match tried {
        Ok(l) => Ok(l),
        Err(holder) => Err(Error::Locked {
            path: dir.to_path_buf(),
            holder: if holder.is_empty() {
                "another process".into()
            } else {
                holder
            },
        }),
    }
}

/// Removes `.manifest.json.tmp-PID` files left by killed writers (call
/// with the lock held: no other writer can be using one).
fn remove_stale_temps(dir: &Path) {
    let Ok(rd) = std::fs::read_dir(dir) else {
        return;
    };
    let mine = format!(".{MANIFEST}.tmp-{}", std::process::id());
    for e in rd.flatten() {
        let f = e.file_name().to_string_lossy().into_owned();
        if f.starts_with(&format!(".{MANIFEST}.tmp-")) && f != mine {
            let _ = std::fs::remove_file(e.path());
        }
    }
}

/// `e` as [`Error::CannotWrite`] naming `dataset` when the system refused
/// a write for want of permission or a writable file system (the file it
/// refused, such as the lock, is the dataset's business, not the user's).
fn unwritable(dataset: &Path, e: Error) -> Error {
    use std::io::ErrorKind as K;
    match e {
        Error::Io(io) if matches!(io.error.kind(), K::PermissionDenied | K::ReadOnlyFilesystem) => {
            Error::CannotWrite {
                dataset: dataset.to_path_buf(),
                error: io.error,
            }
        }
        e => e,
    }
}

fn io_err(path: &Path, e: std::io::Error) -> Error {
    Error::Io(microtab_io::Error {
        path: path.to_path_buf(),
        error: e,
    })
}

/// A published dataset: its manifest, read once when opened.
///
/// Opening reads only `manifest.json`; column files are mapped on demand,
/// so a query touches exactly the variables it names.
#[derive(Debug, Clone)]
pub struct Dataset {
    dir: PathBuf,
    manifest: Manifest,
    /// Whether column reads check stripe checksums.
    checked: bool,
}

impl Dataset {
    /// Opens the dataset directory `dir`: reads `manifest.json` and checks
    /// it against its own checksum.
    pub fn open(dir: &Path) -> Result<Self> {
        let manifest = read_manifest(dir)?;
        Ok(Dataset {
            dir: dir.to_path_buf(),
            manifest,
            checked: true,
        })
    }

    /// Whether reads of column values check them against their stripe
    /// checksums (on by default; off only to measure what checking costs).
    pub fn set_checked_reads(&mut self, checked: bool) {
        self.checked = checked;
    }

    /// Reads every file of the dataset whole and checks it against its
    /// checksums: each column file's header, size, stripe table, stripes
    /// and payload, and each dictionary. Returns the problems found
    /// (empty when the dataset is intact), one per damaged file.
    pub fn verify_all(&self) -> Vec<Error> {
        let mut problems = Vec::new();
        for v in &self.manifest.variables {
            let r = Column::open(&self.dir.join(&v.file), v, self.manifest.rows, true)
                .and_then(|c| c.verify().and_then(|()| c.verify_claims()));
            if let Err(e) = r {
                problems.push(e);
            }
            if v.dictionary.is_some() {
                if let Err(e) = self.dictionary(v) {
                    problems.push(e);
                }
            }
        }
        problems
    }
}

fn read_manifest(dir: &Path) -> Result<Manifest> {
    {
        let mpath = dir.join(MANIFEST);
        let text = match std::fs::read(&mpath) {
            Ok(t) => t,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                if !dir.exists() {
                    return Err(io_err(dir, e));
                }
                return Err(Error::NotADataset {
                    path: dir.to_path_buf(),
                });
            }
            Err(e) if e.kind() == std::io::ErrorKind::PermissionDenied => {
                return Err(Error::CannotRead {
                    dataset: dir.to_path_buf(),
                    error: e,
                });
            }
            Err(e) => return Err(io_err(&mpath, e)),
        };
        // Checked before it is parsed, so that no damaged field is believed.
        let summed = find(&text, SUM_KEY).is_some();
        if summed {
            check_manifest(&mpath, &text, 0)?;
        }
        let manifest: Manifest = serde_json::from_slice(&text).map_err(|e| Error::Corrupt {
            path: mpath.clone(),
            reason: format!("{e} (damaged or truncated)"),
        })?;
        if manifest.format != "microtab" || manifest.version > FORMAT_VERSION {
            return Err(Error::Corrupt {
                path: mpath,
                reason: format!(
                    "format '{}' version {} is not supported (this build reads version {})",
                    manifest.format, manifest.version, FORMAT_VERSION
                ),
            });
        }
        if !summed {
            check_manifest(&mpath, &text, manifest.version)?;
        }
        check_consistent(&mpath, &manifest)?;
        Ok(manifest)
    }
}

/// Checks what the manifest says about itself: unique variable names and
/// files, files inside `vars/`, known limits.
fn check_consistent(path: &Path, m: &Manifest) -> Result<()> {
    let corrupt = |reason: String| Error::Corrupt {
        path: path.to_path_buf(),
        reason,
    };
    let mut names = std::collections::HashSet::new();
    let mut files = std::collections::HashSet::new();
    for v in &m.variables {
        if !names.insert(v.name.to_ascii_lowercase()) {
            return Err(corrupt(format!("variable {} is listed twice", v.name)));
        }
        for f in std::iter::once(&v.file).chain(v.dictionary.iter()) {
            let ok =
                f.starts_with("vars/") && !f.contains("..") && !f[5..].contains('/') && f.len() > 5;
            if !ok || !files.insert(f.clone()) {
                return Err(corrupt(format!(
                    "variable {} names file '{f}', which is not a file of its own under vars/",
                    v.name
                )));
            }
        }
        // What a variable's kind says must agree with how it is stored: a
        // manifest edited (and resealed) to call floats integers, or to
        // give text columns decimals, would have its values misread.
        let stored_as = match (v.kind, v.ty.is_float(), v.dictionary.is_some()) {
            (Kind::Float, true, false)
            | (Kind::Int, false, false)
            | (Kind::String, false, true) => None,
            (Kind::String, false, false) => Some("has no dictionary".to_string()),
            (_, _, true) => Some("has a dictionary".to_string()),
            (_, f, _) => Some(format!(
                "is stored as {}",
                if f { "floats" } else { "integers" }
            )),
        };
        if let Some(why) = stored_as {
            return Err(corrupt(format!(
                "variable {} is of kind {:?} but {why}",
                v.name, v.kind
            )));
        }
        if v.decimals > 0 && (v.kind != Kind::Int || v.decimals > MAX_DECIMALS) {
            return Err(corrupt(format!(
                "variable {} of kind {:?} has {} implied decimals (integers may have 0 to {MAX_DECIMALS})",
                v.name, v.kind, v.decimals
            )));
        }
        if v.null_code
            .is_some_and(|c| v.ty.is_float() || c != v.ty.null_code())
        {
            return Err(corrupt(format!(
                "variable {} names null code {:?}, but {} columns mark nulls {}",
                v.name,
                v.null_code,
                v.ty.name(),
                if v.ty.is_float() {
                    "as NaN".to_string()
                } else {
                    format!("with {}", v.ty.null_code())
                }
            )));
        }
        if v.nulls > m.rows {
            return Err(corrupt(format!(
                "variable {} has more nulls ({}) than the dataset has rows ({})",
                v.name, v.nulls, m.rows
            )));
        }
    }
    Ok(())
}

impl Dataset {
    /// The dataset directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The manifest.
    pub fn manifest(&self) -> &Manifest {
        &self.manifest
    }

    /// Number of records.
    pub fn rows(&self) -> u64 {
        self.manifest.rows
    }

    /// Looks a variable up by name, case-insensitively.
    pub fn variable(&self, name: &str) -> Result<&Variable> {
        self.manifest
            .variables
            .iter()
            .find(|v| v.name.eq_ignore_ascii_case(name))
            .ok_or_else(|| {
                let all = || self.manifest.variables.iter().map(|v| v.name.as_str());
                Error::UnknownVariable {
                    name: name.to_string(),
                    dataset: self.dir.clone(),
                    known: all().take(crate::LISTED).map(String::from).collect(),
                    count: self.manifest.variables.len(),
                    close: crate::close_names(name, all()),
                }
            })
    }

    /// Maps the column of variable `name`.
    pub fn column(&self, name: &str) -> Result<Column> {
        let var = self.variable(name)?;
        match Column::open(
            &self.dir.join(&var.file),
            var,
            self.manifest.rows,
            self.checked,
        ) {
            Err(Error::Io(e)) if e.error.kind() == std::io::ErrorKind::NotFound => {
                // A writer may have published a new generation (and removed
                // this one's files) since the manifest was read.
                Err(self.changed().unwrap_or(Error::Io(e)))
            }
            r => r,
        }
    }

    /// The error to report when the dataset's manifest on disk is no
    /// longer the one this handle read.
    fn changed(&self) -> Option<Error> {
        let now = read_manifest(&self.dir).ok()?.generation;
        (now != self.manifest.generation).then(|| Error::Changed {
            path: self.dir.clone(),
            was: self.manifest.generation,
            now,
        })
    }

    /// Reads a string variable's dictionary (code `i` is entry `i`).
    pub fn dictionary(&self, var: &Variable) -> Result<Vec<String>> {
        let Some(rel) = &var.dictionary else {
            return Ok(Vec::new());
        };
        let path = self.dir.join(rel);
        let text = match std::fs::read(&path) {
            Ok(t) => t,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                return Err(self.changed().unwrap_or_else(|| io_err(&path, e)));
            }
            Err(e) => return Err(io_err(&path, e)),
        };
        match &var.dictionary_checksum {
            Some(want) => {
                let got = format!("xxh3:{:016x}", crate::xxh3(&text));
                if &got != want {
                    return Err(Error::Corrupt {
                        path,
                        reason: format!(
                            "the dictionary hashes to {got}, the manifest says {want} (the file is damaged)"
                        ),
                    });
                }
            }
            None if self.manifest.version >= 3 => {
                return Err(Error::Corrupt {
                    path,
                    reason: "the manifest gives no checksum for this dictionary".into(),
                });
            }
            None => {}
        }
        let dict: Vec<String> = serde_json::from_slice(&text).map_err(|e| Error::Corrupt {
            path: path.clone(),
            reason: e.to_string(),
        })?;
        let n = dict.len() as i64;
        if var.max.is_some_and(|m| m.as_i64() >= n) || !dict.windows(2).all(|w| w[0] < w[1]) {
            return Err(Error::Corrupt {
                path,
                reason: format!(
                    "the dictionary of {} has {n} entries, not the sorted distinct {} the manifest needs",
                    var.name,
                    var.max.map_or(0, |m| m.as_i64() + 1)
                ),
            });
        }
        Ok(dict)
    }

    /// Replaces the manifest atomically with `f(manifest)` (metadata-only
    /// changes such as labels or missing codes; column files are untouched).
    ///
    /// Writers exclude each other: this takes the dataset's lock (failing
    /// with [`Error::Locked`] while another process changes the dataset)
    /// and fails with [`Error::Changed`] if the dataset changed since this
    /// handle read it, so no change is ever made to a stale manifest.
    pub fn update_manifest(&mut self, f: impl FnOnce(&mut Manifest)) -> Result<()> {
        let _lock = lock(&self.dir)?;
        remove_stale_temps(&self.dir);
        let now = read_manifest(&self.dir)?;
        if now.generation != self.manifest.generation {
            return Err(Error::Changed {
                path: self.dir.clone(),
                was: self.manifest.generation,
                now: now.generation,
            });
        }
        let mut m = self.manifest.clone();
        f(&mut m);
        m.generation += 1;
        // The version says what the files hold (an old dataset's columns
        // keep theirs); the manifest gets its checksum whatever the version.
        write_manifest(&self.dir, &m).map_err(|e| unwritable(&self.dir, e))?;
        self.manifest = m;
        Ok(())
    }
}

impl Dataset {
    /// Atomically replaces the manifest with `f` applied to variable
    /// `name`'s entry (case-insensitive), e.g. to set labels or missing codes.
    pub fn update_variable(&mut self, name: &str, f: impl FnOnce(&mut Variable)) -> Result<()> {
        let exact = self.variable(name)?.name.clone();
        self.update_manifest(|m| {
            if let Some(v) = m.variables.iter_mut().find(|v| v.name == exact) {
                f(v);
            }
        })
    }
}

/// A title or description as stored: trimmed, `None` when blank.
pub fn about_text(text: Option<&str>) -> Option<String> {
    text.map(str::trim)
        .filter(|t| !t.is_empty())
        .map(str::to_string)
}

fn write_manifest(dir: &Path, m: &Manifest) -> Result<()> {
    write_file_atomic(&dir.join(MANIFEST), &manifest_text(m))?;
    Ok(())
}

/// Where a writer puts its files until it publishes them.
enum Mode {
    /// A brand-new dataset built in a hidden sibling directory, renamed onto
    /// the target name when complete (`swap`: exchanged atomically with a
    /// damaged dataset there, which is then removed; `force`: replacing
    /// was asked for, so a target another writer created meanwhile is a
    /// race lost, not a refusal to replace).
    Fresh {
        staging: PathBuf,
        swap: bool,
        force: bool,
    },
    /// A new generation inside an existing dataset: new files beside the
    /// old ones, then the manifest is swapped.
    Replace { old: Box<Manifest> },
    /// New variables added to an existing dataset (or one of its variables
    /// replaced): the other variables' files are kept as they are.
    Extend { old: Box<Manifest> },
}

/// Builds a dataset and publishes it atomically with [`commit`](Self::commit).
///
/// Until `commit` returns, nothing is visible under the target name (or the
/// existing dataset there is unchanged). Dropping the writer, a failed
/// import or a killed process leaves only hidden staging files, which the
/// next writer for the same target removes.
pub struct DatasetWriter {
    /// The writers' lock of the dataset being replaced.
    _lock: Option<FileLock>,
    target: PathBuf,
    root: PathBuf,
    mode: Mode,
    generation: u64,
    cfg: IoConfig,
    variables: Vec<Variable>,
    files: HashMap<String, String>,
    seq: u64,
    committed: bool,
    source: Option<String>,
    title: Option<String>,
    description: Option<String>,
    pack: bool,
    transient: bool,
    design: Option<crate::Design>,
    /// The removal of an earlier writer's leftover files, running while
    /// this one works (joined at commit).
    cleanup: Option<std::thread::JoinHandle<()>>,
}

fn sanitize(name: &str) -> String {
    let s: String = name
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' || c == '-' {
                c
            } else {
                '_'
            }
        })
        .take(64)
        .collect();
    if s.is_empty() {
        "var".into()
    } else {
        s
    }
}

fn pid_alive(pid: u32) -> bool {
    microtab_io::sys::process_alive(pid)
}

impl DatasetWriter {
    /// Starts writing to `target`. If `target` is an existing dataset it is
    /// replaced on commit only when `force` is set.
    pub fn create(target: &Path, force: bool) -> Result<Self> {
        Self::create_with(target, force, IoConfig::default())
    }

    /// Like [`create`](Self::create) with explicit I/O settings.
    pub fn create_with(target: &Path, force: bool, cfg: IoConfig) -> Result<Self> {
        let parent = match target.parent() {
            Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
            _ => PathBuf::from("."),
        };
        if !parent.is_dir() {
            return Err(io_err(
                &parent,
                std::io::Error::new(std::io::ErrorKind::NotFound, "directory does not exist"),
            ));
        }
        let name = target
            .file_name()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_else(|| "dataset".into());
        cleanup_stale_staging(&parent, &name);
        let mut held = None;
        let mut swap = false;
        let replace = if target.exists() {
            if !force {
                return Err(Error::Exists {
                    path: target.to_path_buf(),
                });
            }
            if !target.join(MANIFEST).is_file() {
                return Err(Error::Corrupt {
                    path: target.to_path_buf(),
                    reason: "exists but is not a microtab dataset (no manifest.json); refusing to replace it".into(),
                });
            }
            held = Some(lock(target)?);
            match Dataset::open(target) {
                Ok(old) => Some(old.manifest),
                Err(Error::Corrupt { .. }) => {
                    // A damaged dataset: built beside it and swapped in whole.
                    swap = true;
                    None
                }
                Err(e) => return Err(e),
            }
        } else {
            None
        };
        let (root, mode, generation) = match replace {
            Some(old) => {
                remove_orphans(target, &old);
                remove_stale_temps(target);
                let generation = old.generation + 1;
                (
                    target.to_path_buf(),
                    Mode::Replace { old: Box::new(old) },
                    generation,
                )
            }
            None => {
                let staging = parent.join(format!(".{name}.importing-{}", std::process::id()));
                let _ = std::fs::remove_dir_all(&staging);
                std::fs::create_dir_all(staging.join("vars"))
                    .map_err(|e| unwritable(target, io_err(&staging, e)))?;
                (
                    staging.clone(),
                    Mode::Fresh {
                        staging,
                        swap,
                        force,
                    },
                    1,
                )
            }
        };
        Ok(DatasetWriter {
            _lock: held,
            target: target.to_path_buf(),
            root,
            mode,
            generation,
            cfg,
            variables: Vec::new(),
            files: HashMap::new(),
            seq: 0,
            committed: false,
            source: None,
            title: None,
            description: None,
            pack: true,
            transient: false,
            design: None,
            cleanup: None,
        })
    }

    /// Starts adding variables to the existing dataset `dir` (derived
    /// variables: `compute`, `recode`). Takes the dataset's writers' lock
    /// until the writer is committed or dropped; [`snapshot`](Self::snapshot)
    /// is the dataset as it stands under that lock, to read the inputs from.
    /// Until `commit`, readers see the dataset unchanged; a failed or killed
    /// writer leaves only unreferenced files, removed by the next writer.
    pub fn extend(dir: &Path) -> Result<Self> {
        // A clear error for a path that is not a dataset, before the lock.
        read_manifest(dir)?;
        let held = lock(dir)?;
        let old = read_manifest(dir)?;
        // Leftovers (a replaced variable's old column, a killed writer's
        // files) are listed now and removed while this writer works:
        // unlinking gigabytes takes seconds, and files made from now on are
        // not in the list.
        let mut leftovers = orphans(dir, &old);
        // Those of the generation this writer writes (a killed writer's)
        // could have the names of its own files: removed first.
        let mine = format!(".{}.", old.generation + 1);
        leftovers.retain(|f| {
            let same = f
                .file_name()
                .is_some_and(|n| n.to_string_lossy().contains(&mine));
            if same {
                let _ = std::fs::remove_file(f);
            }
            !same
        });
        let cleanup = (!leftovers.is_empty()).then(|| {
            std::thread::spawn(move || {
                for f in leftovers {
                    let _ = std::fs::remove_file(f);
                }
            })
        });
        remove_stale_temps(dir);
        let mut files = HashMap::new();
        for v in &old.variables {
            files.insert(v.name.clone(), v.file.clone());
        }
        Ok(DatasetWriter {
            _lock: Some(held),
            target: dir.to_path_buf(),
            root: dir.to_path_buf(),
            generation: old.generation + 1,
            cfg: IoConfig::default(),
            variables: old.variables.clone(),
            files,
            seq: 0,
            committed: false,
            source: old.source.clone(),
            title: old.title.clone(),
            description: old.description.clone(),
            pack: true,
            transient: false,
            design: old.design.clone(),
            cleanup,
            mode: Mode::Extend { old: Box::new(old) },
        })
    }

    /// The dataset as it stands under an [`extend`](Self::extend) writer's
    /// lock (`None` for a writer building a new dataset).
    pub fn snapshot(&self) -> Option<Dataset> {
        match &self.mode {
            Mode::Extend { old } => Some(Dataset {
                dir: self.target.clone(),
                manifest: (**old).clone(),
                checked: true,
            }),
            _ => None,
        }
    }

    /// Adds a finished variable, or replaces the variable of the same name
    /// (case-insensitive) in place.
    pub fn set_variable(&mut self, var: Variable) {
        match self
            .variables
            .iter_mut()
            .find(|v| v.name.eq_ignore_ascii_case(&var.name))
        {
            Some(v) => *v = var,
            None => self.variables.push(var),
        }
    }

    /// Records where the data came from (shown by `info`).
    pub fn set_source(&mut self, source: &str) {
        self.source = Some(source.to_string());
    }

    /// Records the dataset's title ([`Manifest::title`]; blank: none).
    pub fn set_title(&mut self, title: Option<&str>) {
        self.title = about_text(title);
    }

    /// Records the dataset's description ([`Manifest::description`];
    /// blank: none).
    pub fn set_description(&mut self, description: Option<&str>) {
        self.description = about_text(description);
    }

    /// Records a survey design in the manifest (an IPUMS extract's
    /// replicate weights).
    pub fn set_design(&mut self, design: crate::Design) {
        self.design = Some(design);
    }

    /// Whether integer columns are bit-packed where their range allows
    /// (the default); `false` stores every column as a plain array that
    /// `numpy.memmap` reads directly.
    pub fn set_packing(&mut self, pack: bool) {
        self.pack = pack;
    }

    /// Whether column files are opened for each write only (for inputs
    /// with more columns than open files may be allowed; off by default).
    pub fn set_transient_files(&mut self, transient: bool) {
        self.transient = transient;
    }

    /// I/O settings in force.
    pub fn io_config(&self) -> &IoConfig {
        &self.cfg
    }

    fn final_rel(&mut self, name: &str) -> String {
        if let Some(f) = self.files.get(name) {
            if !matches!(self.mode, Mode::Extend { .. })
                || f.contains(&format!(".{}.", self.generation))
            {
                return f.clone();
            }
            // A variable replaced by an extending writer: a new file, the
            // old one stays for readers of the old generation.
            self.files.remove(name);
        }
        let base = sanitize(name);
        let mut rel = format!("vars/{base}.{}.col", self.generation);
        let mut n = 1;
        while self.files.values().any(|f| f.eq_ignore_ascii_case(&rel)) {
            n += 1;
            rel = format!("vars/{base}_{n}.{}.col", self.generation);
        }
        self.files.insert(name.to_string(), rel.clone());
        rel
    }

    /// Opens a writer for variable `name`'s column. Calling it again for the
    /// same name (to rewrite the column in a wider type) is allowed; the
    /// last writer finished wins.
    pub fn column_writer(&mut self, name: &str, ty: crate::PhysType) -> Result<ColumnWriter> {
        let rel = self.final_rel(name);
        self.seq += 1;
        let tmp = self.root.join(format!("{rel}.part{}", self.seq));
        let mut w =
            ColumnWriter::create(&tmp, self.root.join(&rel), rel, ty, &self.cfg, self.pack)?;
        w.set_transient(self.transient);
        Ok(w)
    }

    /// Writes a string variable's dictionary and returns its relative path.
    /// Returns the file's path relative to the dataset and its checksum,
    /// for [`Variable::dictionary`] and [`Variable::dictionary_checksum`].
    pub fn write_dictionary(&mut self, name: &str, entries: &[String]) -> Result<(String, String)> {
        let col = self.final_rel(name);
        let rel = col.trim_end_matches(".col").to_string() + ".dict.json";
        let text = serde_json::to_vec(entries).expect("strings serialize");
        let path = self.root.join(&rel);
        let mut w = microtab_io::BlockWriter::create(&path, &self.cfg)?;
        w.write_all(&text)?;
        w.finish_deferred()?;
        let sum = format!("xxh3:{:016x}", crate::xxh3(&text));
        Ok((rel, sum))
    }

    /// Opens the finished column of `var` (from
    /// [`ColumnWriter::finish`](crate::ColumnWriter::finish)) for reading
    /// back before the dataset is published, every read checked.
    pub fn finished_column(&self, var: &Variable, rows: u64) -> Result<Column> {
        Column::open(&self.root.join(&var.file), var, rows, true)
    }

    /// The finished variables added so far, in order.
    pub fn variables(&self) -> impl Iterator<Item = &Variable> {
        self.variables.iter()
    }

    /// Adds a finished variable (in output order).
    pub fn add_variable(&mut self, var: Variable) {
        self.variables.push(var);
    }

    /// Publishes the dataset with `rows` records: writes the manifest and
    /// makes it visible atomically.
    pub fn commit(mut self, rows: u64) -> Result<PathBuf> {
        if let Some(c) = self.cleanup.take() {
            let _ = c.join();
        }
        let version = match &self.mode {
            // The old columns keep the version they were written in.
            Mode::Extend { old } => old.version,
            _ => FORMAT_VERSION,
        };
        // New records, a new identity; new variables over the same
        // records keep it (and keep which records of a split they are).
        let (id, part_of) = match &self.mode {
            Mode::Extend { old } => (old.id.clone(), old.part_of.clone()),
            _ => (Some(crate::new_dataset_id()), None),
        };
        let manifest = Manifest {
            format: "microtab".into(),
            version,
            checksum: None,
            generation: self.generation,
            id,
            rows,
            source: self.source.clone(),
            part_of,
            title: self.title.clone(),
            description: self.description.clone(),
            variables: std::mem::take(&mut self.variables),
            design: self.design.clone(),
        };
        // Every column file durable (one file-system sync, not one fsync a
        // file), then their names, then the manifest that publishes them.
        microtab_io::sync_filesystem(&self.root)?;
        sync_dir(&self.root.join("vars"))?;
        match &self.mode {
            Mode::Fresh {
                staging,
                swap: true,
                ..
            } => {
                write_manifest(staging, &manifest)?;
                exchange(staging, &self.target)?;
                // `staging` now holds the damaged dataset.
                let _ = std::fs::remove_dir_all(staging);
            }
            Mode::Fresh { staging, force, .. } => {
                write_manifest(staging, &manifest)?;
                if self.target.exists() {
                    // Another writer published it since this one started:
                    // it is not replaced under its readers (the two
                    // datasets' files share names).
                    return Err(if *force {
                        Error::CreatedMeanwhile {
                            path: self.target.clone(),
                        }
                    } else {
                        Error::Exists {
                            path: self.target.clone(),
                        }
                    });
                }
                std::fs::rename(staging, &self.target)
                    .map_err(|e| unwritable(&self.target, io_err(&self.target, e)))?;
                let parent = self.target.parent().unwrap_or(Path::new("."));
                let parent = if parent.as_os_str().is_empty() {
                    Path::new(".")
                } else {
                    parent
                };
                sync_dir(parent)?;
            }
            Mode::Extend { old } => {
                if old.rows != rows {
                    return Err(Error::Corrupt {
                        path: self.target.clone(),
                        reason: format!(
                            "a new variable has {rows} records, the dataset {}",
                            old.rows
                        ),
                    });
                }
                // A replaced variable's old file stays until the next writer
                // (readers of the old generation may still open it).
                write_manifest(&self.target, &manifest)?;
            }
            Mode::Replace { old } => {
                write_manifest(&self.target, &manifest)?;
                // The old generation is unreachable now; readers that mapped
                // its files keep them until they unmap.
                for v in &old.variables {
                    if !manifest.variables.iter().any(|n| n.file == v.file) {
                        let _ = std::fs::remove_file(self.target.join(&v.file));
                        if let Some(d) = &v.dictionary {
                            let _ = std::fs::remove_file(self.target.join(d));
                        }
                    }
                }
            }
        }
        self.committed = true;
        Ok(self.target.clone())
    }
}

impl Drop for DatasetWriter {
    fn drop(&mut self) {
        if let Some(c) = self.cleanup.take() {
            let _ = c.join();
        }
        if self.committed {
            return;
        }
        match &self.mode {
            Mode::Fresh { staging, .. } => {
                let _ = std::fs::remove_dir_all(staging);
            }
            Mode::Replace { old } | Mode::Extend { old } => remove_orphans(&self.target, old),
        }
    }
}

/// Swaps two directories ([`microtab_io::sys::exchange_dirs`]) and
/// flushes `b`'s parent directory: on Linux and macOS a reader sees one or
/// the other, never neither, whenever the process stops (Windows has no
/// atomic exchange: see there).
pub fn exchange(a: &Path, b: &Path) -> Result<()> {
    microtab_io::sys::exchange_dirs(a, b).map_err(|e| io_err(b, e))?;
    let parent = b.parent().filter(|p| !p.as_os_str().is_empty());
    sync_dir(parent.unwrap_or(Path::new(".")))?;
    Ok(())
}

/// Removes files in `vars/` that the manifest does not reference (left by a
/// killed writer).
fn remove_orphans(dir: &Path, m: &Manifest) {
    for f in orphans(dir, m) {
        let _ = std::fs::remove_file(f);
    }
}

/// The files of `dir/vars` that manifest `m` does not use.
fn orphans(dir: &Path, m: &Manifest) -> Vec<PathBuf> {
    let Ok(rd) = std::fs::read_dir(dir.join("vars")) else {
        return Vec::new();
    };
    rd.flatten()
        .filter(|e| {
            let rel = format!("vars/{}", e.file_name().to_string_lossy());
            !m.variables
                .iter()
                .any(|v| v.file == rel || v.dictionary.as_deref() == Some(rel.as_str()))
        })
        .map(|e| e.path())
        .collect()
}

/// Removes `.NAME.importing-PID` directories whose process is gone.
fn cleanup_stale_staging(parent: &Path, name: &str) {
    let prefix = format!(".{name}.importing-");
    let Ok(rd) = std::fs::read_dir(parent) else {
        return;
    };
    for e in rd.flatten() {
        let f = e.file_name().to_string_lossy().into_owned();
        if let Some(pid) = f.strip_prefix(&prefix).and_then(|p| p.parse::<u32>().ok()) {
            if !pid_alive(pid) {
                let _ = std::fs::remove_dir_all(e.path());
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Kind, PhysType};

    fn write(target: &Path, force: bool, vals: &[u16]) -> Result<PathBuf> {
        let mut w = DatasetWriter::create(target, force)?;
        let mut c = w.column_writer("X", PhysType::U16)?;
        c.append(vals)?;
        let v = c.finish(Variable::new("X", Kind::Int, PhysType::U16))?;
        w.add_variable(v);
        w.commit(vals.len() as u64)
    }

    #[test]
    fn replace_needs_force_and_swaps_generation() {
        let dir = tempfile::tempdir().unwrap();
        let t = dir.path().join("d.mtab");
        write(&t, false, &[1, 2, 3]).unwrap();
        assert!(matches!(write(&t, false, &[4]), Err(Error::Exists { .. })));
        write(&t, true, &[7, 8]).unwrap();
        let ds = Dataset::open(&t).unwrap();
        assert_eq!(ds.manifest().generation, 2);
        let c = ds.column("x").unwrap();
        c.verify().unwrap();
        match c.data().unwrap() {
            crate::ColumnData::U16(v) => assert_eq!(v, &[7, 8]),
            _ => panic!(),
        }
        // Only generation-2 files remain.
        let names: Vec<_> = std::fs::read_dir(t.join("vars"))
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        assert_eq!(names, vec!["X.2.col".to_string()]);
    }

    /// Two writers of a new target: the one that commits second, given
    /// force, says another process created the target meanwhile (not that
    /// force is needed); without force, that it exists. The first one's
    /// dataset stays whole.
    #[test]
    fn a_target_created_meanwhile_is_not_replaced() {
        let dir = tempfile::tempdir().unwrap();
        let t = dir.path().join("d.mtab");
        for force in [true, false] {
            let _ = std::fs::remove_dir_all(&t);
            let mut late = DatasetWriter::create(&t, force).unwrap();
            // Another process's import, published meanwhile (written under
            // another name: this process's staging name is the late one's).
            let other = dir.path().join("other.mtab");
            write(&other, false, &[5, 6, 7]).unwrap();
            std::fs::rename(&other, &t).unwrap();
            let mut c = late.column_writer("X", PhysType::U16).unwrap();
            c.append(&[9u16]).unwrap();
            late.add_variable(
                c.finish(Variable::new("X", Kind::Int, PhysType::U16))
                    .unwrap(),
            );
            match (force, late.commit(1)) {
                (true, Err(e @ Error::CreatedMeanwhile { .. })) => {
                    assert!(e.to_string().contains("created by another process"), "{e}")
                }
                (false, Err(Error::Exists { .. })) => {}
                (_, r) => panic!("force {force}: {r:?}"),
            }
            let ds = Dataset::open(&t).unwrap();
            assert_eq!(ds.rows(), 3);
            ds.column("X").unwrap().verify().unwrap();
            // Nothing of the late writer is left beside it.
            let left: Vec<_> = std::fs::read_dir(dir.path())
                .unwrap()
                .map(|e| e.unwrap().file_name().into_string().unwrap())
                .filter(|n| n != "d.mtab")
                .collect();
            assert!(left.is_empty(), "{left:?}");
        }
    }

    /// A dataset as version 1 wrote it (plain arrays, version 1 in the
    /// manifest and in every column header) still opens and reads; a newer
    /// version is refused with a clear error.
    #[test]
    fn reads_version_1_and_refuses_newer() {
        let dir = tempfile::tempdir().unwrap();
        let t = dir.path().join("v1.mtab");
        let mut w = DatasetWriter::create(&t, false).unwrap();
        w.set_packing(false);
        let mut c = w.column_writer("X", PhysType::U16).unwrap();
        c.append(&[3u16, 1, 4, 1, 5]).unwrap();
        w.add_variable(
            c.finish(Variable::new("X", Kind::Int, PhysType::U16))
                .unwrap(),
        );
        w.commit(5).unwrap();
        // Rewrites the dataset as an older (or newer) version would have
        // written it: versions 1 and 2 had no manifest checksum, no stripe
        // table and no header checksum.
        let set_version = |v: u32| {
            let m = t.join("manifest.json");
            let mut man: Manifest = serde_json::from_slice(&std::fs::read(&m).unwrap()).unwrap();
            man.version = v;
            let text = if v < 3 {
                man.checksum = None;
                serde_json::to_vec_pretty(&man).unwrap()
            } else {
                manifest_text(&man)
            };
            std::fs::write(&m, text).unwrap();
            let col = t.join("vars/X.1.col");
            let mut b = std::fs::read(&col).unwrap();
            b[8..12].copy_from_slice(&v.to_le_bytes());
            if v < 3 {
                b[52..crate::HEADER_SIZE].fill(0);
                b.truncate(crate::HEADER_SIZE + 10);
            }
            std::fs::write(&col, b).unwrap();
        };
        set_version(1);
        let ds = Dataset::open(&t).unwrap();
        assert_eq!(ds.manifest().version, 1);
        match ds.column("X").unwrap().data().unwrap() {
            crate::ColumnData::U16(v) => assert_eq!(v, &[3, 1, 4, 1, 5]),
            _ => panic!(),
        }
        set_version(5);
        let e = match Dataset::open(&t) {
            Ok(_) => panic!("version 5 opened"),
            Err(e) => e.to_string(),
        };
        assert!(e.contains("version 5 is not supported"), "{e}");
    }

    #[test]
    fn dropped_writer_leaves_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let t = dir.path().join("d.mtab");
        {
            let mut w = DatasetWriter::create(&t, false).unwrap();
            let mut c = w.column_writer("X", PhysType::U8).unwrap();
            c.append(&[1u8]).unwrap();
        }
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
    }
}
