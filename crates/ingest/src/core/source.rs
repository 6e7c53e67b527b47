//! Opening an input file: plain, or gzip-compressed (recognised by its
//! magic bytes, whatever the file is called).
//!
//! Gzip is decompressed on a thread of its own that hands 1 MiB blocks to
//! the pipeline's reader stage, so decompression overlaps the cutting and
//! parsing of the text it has already produced.

use crate::error::{Error, Result};
use std::fs::File;
use std::io::{Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{sync_channel, Receiver};
use std::sync::Arc;

/// Decompressed bytes per block handed from the gunzip thread.
const GZ_BLOCK: usize = 1 << 20;
/// Compressed bytes per read from the file.
const GZ_READ: usize = 1 << 20;

/// An opened input: a byte stream of its (decompressed) text and how far
/// into the file on disk it has got.
pub(crate) struct Input {
    /// The text.
    pub reader: Box<dyn Read + Send>,
    /// Bytes of the file on disk consumed so far (compressed bytes for gzip).
    pub consumed: Arc<AtomicU64>,
    /// Size of the file on disk.
    pub total: u64,
    /// Whether the file is gzip-compressed.
    pub gzip: bool,
    /// A plain (uncompressed) file mapped into memory: parsers read chunks
    /// straight from the mapping, with no copy into buffers (measured: the
    /// kernel's copy of a `read` was 22% of a CSV import's CPU time).
    pub map: Option<Arc<microtab_io::MappedFile>>,
    path: PathBuf,
}

impl Input {
    /// Turns a read error of this input into a crate error: for gzip input,
    /// one that says the compressed data is damaged and how far it got.
    pub fn read_error(&self, e: std::io::Error, lines_read: u64) -> Error {
        // An operating-system error (EIO, …) is one whatever the format;
        // anything else the decompressor reports is damaged data.
        if self.gzip && e.raw_os_error().is_none() {
            Error::Decompress {
                path: self.path.clone(),
                after_line: lines_read,
                reason: e.to_string(),
            }
        } else {
            io_err(&self.path, e)
        }
    }
}

pub(crate) fn io_err(path: &Path, e: std::io::Error) -> Error {
    Error::Io(microtab_io::Error {
        path: path.to_path_buf(),
        error: e,
    })
}

/// Counts the bytes read from the file on disk.
struct Counting<R> {
    inner: R,
    n: Arc<AtomicU64>,
}

impl<R: Read> Read for Counting<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let k = self.inner.read(buf)?;
        self.n.fetch_add(k as u64, Ordering::Relaxed);
        Ok(k)
    }
}

/// Reads the blocks the gunzip thread sends.
struct Blocks {
    rx: Receiver<std::io::Result<Vec<u8>>>,
    cur: Vec<u8>,
    pos: usize,
}

impl Read for Blocks {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        if self.pos == self.cur.len() {
            match self.rx.recv() {
                Ok(Ok(b)) => {
                    self.cur = b;
                    self.pos = 0;
                }
                Ok(Err(e)) => return Err(e),
                // The thread ended after the last block: end of the text.
                Err(_) => return Ok(0),
            }
        }
        let n = buf.len().min(self.cur.len() - self.pos);
        buf[..n].copy_from_slice(&self.cur[self.pos..self.pos + n]);
        self.pos += n;
        Ok(n)
    }
}

/// Opens `path`; gzip input starts its decompression thread.
pub(crate) fn open(path: &Path) -> Result<Input> {
    let mut file = File::open(path).map_err(|e| io_err(path, e))?;
    let total = file.metadata().map_err(|e| io_err(path, e))?.len();
    let mut magic = [0u8; 2];
    let mut got = 0;
    while got < 2 {
        match file.read(&mut magic[got..]) {
            Ok(0) => break,
            Ok(n) => got += n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(io_err(path, e)),
        }
    }
    file.seek(SeekFrom::Start(0)).map_err(|e| io_err(path, e))?;
    let consumed = Arc::new(AtomicU64::new(0));
    let counted = Counting {
        inner: file,
        n: Arc::clone(&consumed),
    };
    let gzip = got == 2 && magic == [0x1f, 0x8b];
    let reader: Box<dyn Read + Send> = if gzip {
        let (tx, rx) = sync_channel::<std::io::Result<Vec<u8>>>(4);
        std::thread::Builder::new()
            .name("gunzip".into())
            .spawn(move || {
                let mut dec = flate2::read::MultiGzDecoder::new(std::io::BufReader::with_capacity(
                    GZ_READ, counted,
                ));
                loop {
                    let mut block = vec![0u8; GZ_BLOCK];
                    let mut filled = 0;
                    let mut failed = None;
                    while filled < GZ_BLOCK {
                        match dec.read(&mut block[filled..]) {
                            Ok(0) => break,
                            Ok(n) => filled += n,
                            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                            Err(e) => {
                                failed = Some(e);
                                break;
                            }
                        }
                    }
                    block.truncate(filled);
                    let end = filled < GZ_BLOCK;
                    // The text before a damaged spot still goes out first,
                    // so the error can say how far the file was readable.
                    if filled > 0 && tx.send(Ok(block)).is_err() {
                        return;
                    }
                    if let Some(e) = failed {
                        let _ = tx.send(Err(e));
                        return;
                    }
                    if end {
                        // Dropping the sender marks the end of the text.
                        return;
                    }
                }
            })
            .map_err(|e| io_err(path, e))?;
        Box::new(Blocks {
            rx,
            cur: Vec::new(),
            pos: 0,
        })
    } else {
        Box::new(counted)
    };
    let map = if gzip || total == 0 {
        None
    } else {
        microtab_io::MappedFile::open(path).ok().map(Arc::new)
    };
    Ok(Input {
        reader,
        consumed,
        total,
        gzip,
        map,
        path: path.to_path_buf(),
    })
}

/// Reads until `buf` holds `want` bytes or the input ends; returns false at
/// the end of the input.
pub(crate) fn fill(r: &mut dyn Read, buf: &mut Vec<u8>, want: usize) -> std::io::Result<bool> {
    while buf.len() < want {
        let len = buf.len();
        buf.resize(want, 0);
        match r.read(&mut buf[len..]) {
            Ok(0) => {
                buf.truncate(len);
                return Ok(false);
            }
            Ok(n) => buf.truncate(len + n),
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => buf.truncate(len),
            Err(e) => {
                buf.truncate(len);
                return Err(e);
            }
        }
    }
    Ok(true)
}

/// Counts newline bytes (physical lines) in `buf`.
pub(crate) fn count_lines(buf: &[u8]) -> u64 {
    buf.iter().filter(|&&b| b == b'\n').count() as u64
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    fn gz(data: &[u8]) -> Vec<u8> {
        let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        e.write_all(data).unwrap();
        e.finish().unwrap()
    }

    #[test]
    fn gzip_is_recognised_by_content_and_read_whole() {
        let dir = tempfile::tempdir().unwrap();
        let text: Vec<u8> = (0..3_000_000u32).map(|i| b'0' + (i % 10) as u8).collect();
        let p = dir.path().join("no-suffix");
        std::fs::write(&p, gz(&text)).unwrap();
        let mut inp = open(&p).unwrap();
        assert!(inp.gzip);
        let mut out = Vec::new();
        loop {
            let want = out.len() + 100_000;
            if !fill(&mut *inp.reader, &mut out, want).unwrap() {
                break;
            }
        }
        assert_eq!(out, text);
        assert_eq!(inp.consumed.load(Ordering::Relaxed), inp.total);
    }

    #[test]
    fn truncated_gzip_is_an_error_after_the_readable_part() {
        let dir = tempfile::tempdir().unwrap();
        let text = b"line\n".repeat(100_000);
        let z = gz(&text);
        let p = dir.path().join("t.gz");
        std::fs::write(&p, &z[..z.len() / 2]).unwrap();
        let mut inp = open(&p).unwrap();
        let mut out = Vec::new();
        let err = loop {
            let want = out.len() + 4096;
            match fill(&mut *inp.reader, &mut out, want) {
                Ok(true) => continue,
                Ok(false) => panic!("truncated gzip read to the end without error"),
                Err(e) => break e,
            }
        };
        assert!(!out.is_empty() && text.starts_with(&out));
        let e = inp.read_error(err, 7);
        assert!(
            e.to_string().contains("t.gz") && e.to_string().contains("line 7"),
            "{e}"
        );
    }

    #[test]
    fn plain_file_passes_through() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("x.dat");
        std::fs::write(&p, b"\x1fabc").unwrap();
        let mut inp = open(&p).unwrap();
        assert!(!inp.gzip);
        let mut out = Vec::new();
        fill(&mut *inp.reader, &mut out, 100).unwrap();
        assert_eq!(out, b"\x1fabc");
    }
}
