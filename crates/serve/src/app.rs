//! The server's state and its errors: the datasets served, the memory
//! budget queries reserve from, and an error as the client sees it (its
//! status, message, and the kind and option the page words as advice).

use axum::http::{HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use microtab_analysis::ScanOptions;
use microtab_store::Dataset;
use serde_json::json;
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::{Arc, RwLock};
use std::time::Duration;
use tokio::sync::Semaphore;

/// The memory all answers in progress may take together: each request
/// reserves its estimate before it runs and gives it back when its answer
/// has been sent, so the server does not grow with concurrent large
/// requests (the per-request cell limit alone bounds one request, not
/// many).
pub(crate) struct Budget {
    pub(crate) total: u64,
    pub(crate) used: std::sync::Mutex<u64>,
}

/// A request's share of the [`Budget`], given back when dropped.
pub(crate) struct Reservation {
    pub(crate) budget: Arc<Budget>,
    pub(crate) bytes: u64,
}

impl Drop for Reservation {
    fn drop(&mut self) {
        let mut u = self.budget.used.lock().unwrap_or_else(|e| e.into_inner());
        *u = u.saturating_sub(self.bytes);
    }
}

pub(crate) fn mb(b: u64) -> String {
    format!("{:.0} MB", (b as f64 / 1e6).ceil())
}

impl Budget {
    /// Reserves `bytes` for an answer of `cells` cells, or the error the
    /// client gets: 503 (with Retry-After) while other answers hold the
    /// memory, 400 when the request alone needs more than the whole budget.
    pub(crate) fn reserve(
        self: &Arc<Self>,
        bytes: u64,
        cells: u64,
    ) -> Result<Reservation, (StatusCode, String)> {
        if bytes > self.total {
            return Err((
                StatusCode::BAD_REQUEST,
                format!(
                    "the answer would need about {} of memory ({cells} cells), more than the server's budget of {} for all answers together; group by fewer or narrower variables, or filter",
                    mb(bytes),
                    mb(self.total)
                ),
            ));
        }
        let mut u = self.used.lock().unwrap_or_else(|e| e.into_inner());
        if *u + bytes > self.total {
            return Err((
                StatusCode::SERVICE_UNAVAILABLE,
                format!(
                    "the server is busy: this answer needs about {} of memory ({cells} cells) and other answers hold {} of its {} budget; try again shortly",
                    mb(bytes),
                    mb(*u),
                    mb(self.total)
                ),
            ));
        }
        *u += bytes;
        Ok(Reservation {
            budget: self.clone(),
            bytes,
        })
    }
}

/// Longest parameter value accepted (a filter, a recode).
pub(crate) const MAX_PARAM: usize = 4096;
/// Most parameters in one request.
pub(crate) const MAX_PARAMS: usize = 32;

pub(crate) struct App {
    pub(crate) root: PathBuf,
    pub(crate) datasets: RwLock<BTreeMap<String, PathBuf>>,
    pub(crate) scans: Arc<Semaphore>,
    pub(crate) timeout: Duration,
    pub(crate) max_cells: usize,
    pub(crate) scan: ScanOptions,
    /// The I/O settings in force (`scan` is theirs), as `info` shows them.
    pub(crate) settings: microtab_analysis::Settings,
    pub(crate) budget: Arc<Budget>,
}

/// An error as the client sees it: its status, its message and, when an
/// option of the request would help, what kind of error it is and that
/// option.
pub(crate) struct ApiError(
    pub(crate) StatusCode,
    pub(crate) String,
    pub(crate) Option<Why>,
);

/// The kind of a refused query and the option that would answer it, as
/// the API's JSON gives them (`kind`, `option`, `hint`): the page reads
/// `kind` and `option`, and words its own advice.
pub(crate) struct Why {
    /// The error's kind (`negative_weights`, `design_weight`, …).
    pub(crate) kind: &'static str,
    /// The option, as the library names it (`None`: no option would help;
    /// the kind alone tells the page what went wrong).
    pub(crate) remedy: Option<microtab_store::Remedy>,
    /// The most cells this server answers (a `max_cells` hint cannot go
    /// beyond it).
    pub(crate) max_cells: usize,
}

impl Why {
    /// The kind of an analysis error and its remedy, if an option would
    /// help.
    pub(crate) fn of(e: &microtab_analysis::Error, max_cells: usize) -> Option<Why> {
        use microtab_store::Remedied;
        Some(Why {
            kind: error_kind(e),
            remedy: e.remedy(),
            max_cells,
        })
    }

    /// The option in this API's words: its parameters.
    pub(crate) fn hint(&self) -> String {
        use microtab_store::Remedy as R;
        let Some(remedy) = &self.remedy else {
            return String::new();
        };
        match remedy {
            R::AllowNegativeWeights => "add allow_negative_weights=true to use negative weights".into(),
            R::NoDesign => "add design=false to answer without the survey design".into(),
            R::MaxCells { cells: Some(c) } if *c as usize <= self.max_cells => {
                format!("add max_cells={c} to allow it")
            }
            R::MaxCells { .. } => format!(
                "this server answers at most {} cells (max_cells=): group by fewer or narrower variables, or filter",
                self.max_cells
            ),
            R::SetDesign => "the dataset's survey design must be set again where the dataset is kept (this server only reads it)".into(),
            R::Filter => "add a filter= to the query of the whole dataset".into(),
            _ => String::new(),
        }
    }
}

/// The kind of an analysis error, as the API names it.
pub(crate) fn error_kind(e: &microtab_analysis::Error) -> &'static str {
    use microtab_analysis::Error as E;
    match e {
        E::Engine(microtab_engine::Error::TooLarge(_)) => "too_large",
        E::Engine(microtab_engine::Error::Store(s)) | E::Store(s) => match s {
            microtab_store::Error::Exists { .. } => "exists",
            _ => "store",
        },
        E::Engine(microtab_engine::Error::Grouping { .. }) => "grouping",
        E::Engine(_) => "query",
        E::NegativeWeights { .. } => "negative_weights",
        E::DesignWeight { .. } => "design_weight",
        E::DesignRecords { .. } => "design_records",
        E::UnknownStrata { .. } => "unknown_strata",
        E::TaylorRange => "taylor_range",
        E::DesignsDiffer => "designs_differ",
        E::LonelyPsu { .. } => "lonely_psu",
        E::NotCodes { .. } => "not_codes",
        E::InDataset { error, .. } => error_kind(error),
        _ => "query",
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let mut body = json!({"error": self.1, "status": self.0.as_u16()});
        if let (Some(w), Some(o)) = (&self.2, body.as_object_mut()) {
            o.insert("kind".into(), json!(w.kind));
            if let Some(r) = &w.remedy {
                o.insert("option".into(), json!(r));
            }
            let hint = w.hint();
            if !hint.is_empty() {
                o.insert("hint".into(), json!(hint));
            }
        }
        let mut r = (self.0, Json(body)).into_response();
        if self.0 == StatusCode::SERVICE_UNAVAILABLE {
            // Busy (scan slots or memory), not broken: come back.
            r.headers_mut().insert(
                axum::http::header::RETRY_AFTER,
                HeaderValue::from_static("1"),
            );
        }
        r
    }
}

pub(crate) fn bad(m: impl Into<String>) -> ApiError {
    ApiError(StatusCode::BAD_REQUEST, m.into(), None)
}

/// The datasets under `root`: each subdirectory with a manifest, named by
/// its directory name without `.mtab` (or `root` itself).
pub(crate) fn scan(root: &std::path::Path) -> BTreeMap<String, PathBuf> {
    let name = |p: &std::path::Path| {
        let n = p
            .file_name()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_default();
        n.strip_suffix(".mtab").map(str::to_string).unwrap_or(n)
    };
    let mut out = BTreeMap::new();
    if root.join("manifest.json").is_file() {
        out.insert(name(root), root.to_path_buf());
        return out;
    }
    if let Ok(rd) = std::fs::read_dir(root) {
        for e in rd.flatten() {
            let p = e.path();
            if p.is_dir() && p.join("manifest.json").is_file() {
                out.insert(name(&p), p);
            }
        }
    }
    out
}

impl App {
    /// The dataset called `name`, from the served list only.
    pub(crate) fn path(&self, name: &str) -> Result<PathBuf, ApiError> {
        if let Some(p) = self
            .datasets
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .get(name)
        {
            return Ok(p.clone());
        }
        // A dataset added since: look again, still only in the directory.
        let fresh = scan(&self.root);
        let found = fresh.get(name).cloned();
        *self.datasets.write().unwrap_or_else(|e| e.into_inner()) = fresh;
        found.ok_or_else(|| {
            ApiError(
                StatusCode::NOT_FOUND,
                format!("no dataset named {name:?} is served (GET /api/v1/datasets lists them)"),
                None,
            )
        })
    }
}

/// Opens a served dataset; a failure names it as served, not by its path.
pub(crate) fn open(path: &std::path::Path, name: &str) -> Result<Dataset, ApiError> {
    Dataset::open(path).map_err(|e| {
        ApiError(
            StatusCode::INTERNAL_SERVER_ERROR,
            e.to_string().replace(&path.display().to_string(), name),
            None,
        )
    })
}

/// A failure to describe a served dataset, naming it as served.
pub(crate) fn described(e: microtab_store::Error, ds: &Dataset, name: &str) -> ApiError {
    ApiError(
        StatusCode::INTERNAL_SERVER_ERROR,
        e.to_string().replace(&ds.dir().display().to_string(), name),
        None,
    )
}

/// Percent-encodes a query value (RFC 3986 unreserved characters kept).
pub(crate) fn encode(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || b"-_.~".contains(&b) {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}
