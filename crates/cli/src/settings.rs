//! I/O settings in force: built-in defaults, overridden by the file that
//! `microtab tune` writes, overridden by environment variables.

use anyhow::{Context, Result};
use microtab_engine::{ReadPath, ScanOptions};
use microtab_io::IoConfig;
use serde::{Deserialize, Serialize};
use std::path::PathBuf;

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
    /// A file written by `microtab tune`.
    Tuned(PathBuf),
}

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

impl Settings {
    /// Loads defaults, then the tuned file if present, then the environment.
    pub fn load() -> Result<Settings> {
        let mut scan = ScanOptions::default();
        let mut origin = Origin::Default;
        let path = config_path();
        if path.exists() {
            let text = std::fs::read(&path)
                .with_context(|| format!("cannot read settings {}", path.display()))?;
            let f: SettingsFile = serde_json::from_slice(&text).with_context(|| {
                format!(
                    "{}: not a microtab settings file (delete it or run `microtab tune`)",
                    path.display()
                )
            })?;
            scan.read_path = ReadPath::parse(&f.read_path).with_context(|| {
                format!("{}: unknown read_path '{}'", path.display(), f.read_path)
            })?;
            scan.block_size = f.block_size.max(4096);
            scan.segment_bytes = f.segment_bytes.max(4096);
            scan.readahead_segments = f.readahead_segments.max(1);
            origin = Origin::Tuned(path);
        }
        let env_scan = ScanOptions::from_env_over(scan.clone());
        let env: Vec<String> = [
            "MICROTAB_READ_PATH",
            "MICROTAB_BLOCK_SIZE",
            "MICROTAB_SEGMENT_BYTES",
            "MICROTAB_READAHEAD",
        ]
        .iter()
        .filter(|k| std::env::var_os(k).is_some())
        .map(|k| k.to_string())
        .collect();
        Ok(Settings {
            io: IoConfig {
                block_size: env_scan.block_size,
            },
            scan: env_scan,
            origin,
            env,
        })
    }

    /// [`describe`](Self::describe), plus what `auto` does for data in
    /// the file system holding `data` (warm and cold paths).
    pub fn describe_for(&self, data: &std::path::Path) -> Vec<(String, String)> {
        let mut out = self.describe();
        if self.scan.read_path == microtab_engine::ReadPath::Auto {
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
            out.insert(
                1,
                (
                    "auto here".into(),
                    format!("warm inline, cold {} ({why})", cold.name()),
                ),
            );
        }
        out
    }

    /// One line per setting with its origin, for `info`.
    pub fn describe(&self) -> Vec<(String, String)> {
        let from = match &self.origin {
            Origin::Default => "default".to_string(),
            Origin::Tuned(p) => format!("tuned ({})", p.display()),
        };
        let from = if self.env.is_empty() {
            from
        } else {
            format!("{from}, overridden by {}", self.env.join(" "))
        };
        vec![
            ("read path".into(), self.scan.read_path.name().into()),
            ("block size".into(), format!("{} bytes", self.io.block_size)),
            (
                "segment".into(),
                format!("{} bytes", self.scan.segment_bytes),
            ),
            (
                "read-ahead".into(),
                format!("{} segments", self.scan.readahead_segments),
            ),
            ("from".into(), from),
        ]
    }
}
