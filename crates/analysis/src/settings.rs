//! The I/O settings in force, the same for every front end (the CLI, the
//! HTTP server, the Python package): built-in defaults, overridden by the
//! file the tuning command writes (`microtab tune`), overridden by
//! environment variables.
//!
//! ```
//! let s = microtab_analysis::Settings::load().unwrap();
//! assert!(s.scan.block_size >= 4096);
//! ```

use microtab_engine::{ReadPath, ScanOptions};
use microtab_io::IoConfig;
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

/// The settings file's contents.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct SettingsFile {
    /// `auto`, `mmap`, `pread`, `direct` or `inline`.
    pub read_path: String,
    /// Bytes per `read`/`write` call.
    pub block_size: usize,
    /// Bytes of the widest column per streamed segment.
    pub segment_bytes: usize,
    /// Segments read ahead of the workers.
    pub readahead_segments: usize,
    /// When and where it was measured.
    #[serde(default)]
    pub tuned: Option<serde_json::Value>,
}

/// Where the settings came from.
#[derive(Debug, Clone)]
pub enum Origin {
    /// Built-in defaults.
    Default,
    /// A settings file.
    Tuned(PathBuf),
}

/// Why the settings could not be read.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SettingsError {
    /// The settings file exists but cannot be read.
    #[error("cannot read the I/O settings {}: {source}", path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// The system's error.
        #[source]
        source: std::io::Error,
    },
    /// The settings file is not a settings file.
    #[error("{}: not a microtab I/O settings file ({source}); deleting it restores the defaults", path.display())]
    Parse {
        /// The file.
        path: PathBuf,
        /// What did not parse.
        #[source]
        source: serde_json::Error,
    },
    /// The file names a read path there is none of.
    #[error("{}: unknown read_path '{value}' (expected auto, mmap, pread, direct or inline)", path.display())]
    ReadPath {
        /// The file.
        path: PathBuf,
        /// The word it has.
        value: String,
    },
}

/// The environment variables that override a setting.
const ENV: [&str; 4] = [
    "MICROTAB_READ_PATH",
    "MICROTAB_BLOCK_SIZE",
    "MICROTAB_SEGMENT_BYTES",
    "MICROTAB_READAHEAD",
];

/// Settings in force.
#[derive(Debug, Clone)]
pub struct Settings {
    /// Query read settings.
    pub scan: ScanOptions,
    /// Import/export block settings.
    pub io: IoConfig,
    /// Where they came from.
    pub origin: Origin,
    /// Environment variables that overrode them.
    pub env: Vec<String>,
}

/// The settings file path: `$MICROTAB_CONFIG`, else
/// `$XDG_CONFIG_HOME/microtab/io.json`, else `~/.config/microtab/io.json`.
pub fn config_path() -> PathBuf {
    if let Some(p) = std::env::var_os("MICROTAB_CONFIG") {
        return PathBuf::from(p);
    }
    let base = std::env::var_os("XDG_CONFIG_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".config")))
        .unwrap_or_else(|| PathBuf::from("."));
    base.join("microtab").join("io.json")
}

/// The settings as every front end shows them (`info`): the values in
/// force, where they came from, and what `auto` does for a dataset's disk.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SettingsInfo {
    /// `auto`, `mmap`, `pread`, `direct` or `inline`.
    pub read_path: String,
    /// With `auto`: the paths it takes for data on the dataset's disk,
    /// warm and cold, and why.
    pub auto_here: Option<String>,
    /// Bytes per `read`/`write` call.
    pub block_size: usize,
    /// Bytes of the widest column per streamed segment.
    pub segment_bytes: usize,
    /// Segments read ahead of the workers.
    pub readahead_segments: usize,
    /// `default` or `tuned`.
    pub origin: String,
    /// The settings file, when tuned (`None` too where a front end does
    /// not show its machine's paths: the HTTP API).
    pub file: Option<String>,
    /// Environment variables that overrode the defaults or the file.
    pub env: Vec<String>,
}

impl SettingsInfo {
    /// One line per setting (name, value), for a text display.
    pub fn lines(&self) -> Vec<(String, String)> {
        let mut from = match (self.origin.as_str(), &self.file) {
            ("tuned", Some(f)) => format!("tuned ({f})"),
            (o, _) => o.to_string(),
        };
        if !self.env.is_empty() {
            from = format!("{from}, overridden by {}", self.env.join(" "));
        }
        let mut out = vec![("read path".to_string(), self.read_path.clone())];
        if let Some(a) = &self.auto_here {
            out.push(("auto here".into(), a.clone()));
        }
        out.extend([
            ("block size".into(), format!("{} bytes", self.block_size)),
            ("segment".into(), format!("{} bytes", self.segment_bytes)),
            (
                "read-ahead".into(),
                format!("{} segments", self.readahead_segments),
            ),
            ("from".into(), from),
        ]);
        out
    }
}

impl Settings {
    /// Loads defaults, then the settings file if present, then the
    /// environment.
    pub fn load() -> Result<Settings, SettingsError> {
        let mut scan = ScanOptions::default();
        let mut origin = Origin::Default;
        let path = config_path();
        if path.exists() {
            let text = std::fs::read(&path).map_err(|source| SettingsError::Read {
                path: path.clone(),
                source,
            })?;
            let f: SettingsFile =
                serde_json::from_slice(&text).map_err(|source| SettingsError::Parse {
                    path: path.clone(),
                    source,
                })?;
            scan.read_path =
                ReadPath::parse(&f.read_path).ok_or_else(|| SettingsError::ReadPath {
                    path: path.clone(),
                    value: f.read_path.clone(),
                })?;
            scan.block_size = f.block_size.max(4096);
            scan.segment_bytes = f.segment_bytes.max(4096);
            scan.readahead_segments = f.readahead_segments.max(1);
            origin = Origin::Tuned(path);
        }
        let scan = ScanOptions::from_env_over(scan);
        let env = ENV
            .iter()
            .filter(|k| std::env::var_os(k).is_some())
            .map(|k| k.to_string())
            .collect();
        Ok(Settings {
            io: IoConfig {
                block_size: scan.block_size,
            },
            scan,
            origin,
            env,
        })
    }

    /// The settings as shown, with what `auto` does for data in the file
    /// system holding `data` (`None`: not said).
    pub fn info(&self, data: Option<&Path>) -> SettingsInfo {
        let auto_here = data
            .filter(|_| self.scan.read_path == ReadPath::Auto)
            .map(auto_here);
        let (origin, file) = match &self.origin {
            Origin::Default => ("default", None),
            Origin::Tuned(p) => ("tuned", Some(p.display().to_string())),
        };
        SettingsInfo {
            read_path: self.scan.read_path.name().into(),
            auto_here,
            block_size: self.io.block_size,
            segment_bytes: self.scan.segment_bytes,
            readahead_segments: self.scan.readahead_segments,
            origin: origin.into(),
            file,
            env: self.env.clone(),
        }
    }
}

/// The paths `auto` takes for data on the disk holding `data`, and why.
fn auto_here(data: &Path) -> String {
    let cold = microtab_io::auto_cold_path(data);
    let why = match microtab_io::device_readahead(data) {
        Some(ra) => format!(
            "kernel read-ahead {} KiB {} {} KiB",
            ra / 1024,
            if ra >= microtab_io::INLINE_COLD_READAHEAD {
                "≥"
            } else {
                "<"
            },
            microtab_io::INLINE_COLD_READAHEAD / 1024
        ),
        None => "kernel read-ahead unknown".into(),
    };
    format!("warm inline, cold {} ({why})", cold.name())
}
