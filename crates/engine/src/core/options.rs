//! How a scan reads its columns: settings a front end passes down.

use super::AHEAD;
use microtab_io::ReadPath;

/// How a scan reads its columns (chosen by measurement: `microtab tune`).
#[derive(Debug, Clone)]
pub struct ScanOptions {
    /// auto, mmap, pread or O_DIRECT.
    pub read_path: ReadPath,
    /// Bytes per `pread` call.
    pub block_size: usize,
    /// Bytes of the widest column per streamed segment.
    pub segment_bytes: usize,
    /// Segments read ahead of the workers (pread / direct).
    pub readahead_segments: usize,
    /// Morsels the mmap read-ahead window runs ahead of the scan.
    pub readahead: usize,
}

impl Default for ScanOptions {
    fn default() -> Self {
        ScanOptions {
            read_path: ReadPath::Auto,
            block_size: microtab_io::DEFAULT_BLOCK_SIZE,
            segment_bytes: 1 << 20,
            readahead_segments: 2,
            readahead: AHEAD,
        }
    }
}

impl ScanOptions {
    /// Defaults overridden by `MICROTAB_READ_PATH` (auto|mmap|pread|direct|inline) and
    /// `MICROTAB_BLOCK_SIZE`, `MICROTAB_SEGMENT_BYTES`, `MICROTAB_READAHEAD`
    /// (segments) when set.
    pub fn from_env() -> Self {
        Self::from_env_over(ScanOptions::default())
    }

    /// `base` overridden by the environment variables of [`from_env`](Self::from_env).
    pub fn from_env_over(base: ScanOptions) -> Self {
        let mut o = base;
        let num = |k: &str| std::env::var(k).ok().and_then(|v| v.parse::<usize>().ok());
        if let Some(p) = std::env::var("MICROTAB_READ_PATH")
            .ok()
            .and_then(|v| ReadPath::parse(&v))
        {
            o.read_path = p;
        }
        if let Some(n) = num("MICROTAB_BLOCK_SIZE") {
            o.block_size = n;
        }
        if let Some(n) = num("MICROTAB_SEGMENT_BYTES") {
            o.segment_bytes = n;
        }
        if let Some(n) = num("MICROTAB_READAHEAD") {
            o.readahead_segments = n;
        }
        o
    }
}
