//! A reader of binary file headers that knows where it is and how long
//! the file is, so that no count in a header makes an import allocate
//! more than the file holds, and every error names the byte (Stata and
//! SPSS files).

use crate::error::{Error, Result};
use crate::options::Encoding;
use std::io::{BufReader, Read, Seek, SeekFrom};
use std::path::Path;

/// A reader that knows where it is and how long the file is, so that no
/// count in a header makes it allocate more than the file holds.
pub(crate) struct Cursor<'a> {
    r: BufReader<std::fs::File>,
    pub at: u64,
    pub len: u64,
    pub path: &'a Path,
    /// Most significant byte first.
    pub big: bool,
}

impl<'a> Cursor<'a> {
    pub(crate) fn open(path: &'a Path) -> Result<Cursor<'a>> {
        let f = std::fs::File::open(path).map_err(|e| Error::Input {
            path: path.to_path_buf(),
            reason: format!("cannot open: {e}"),
        })?;
        let len = f.metadata().map(|m| m.len()).unwrap_or(0);
        Ok(Cursor {
            r: BufReader::with_capacity(1 << 16, f),
            at: 0,
            len,
            path,
            big: false,
        })
    }

    pub(crate) fn err(&self, offset: u64, reason: impl Into<String>) -> Error {
        Error::Format {
            path: self.path.to_path_buf(),
            offset,
            reason: reason.into(),
        }
    }

    /// `n` bytes holding `what`; an error when the file ends first.
    pub(crate) fn bytes(&mut self, n: u64, what: &str) -> Result<Vec<u8>> {
        if n > self.len.saturating_sub(self.at) {
            return Err(self.err(
                self.at,
                format!(
                    "{what} needs {n} bytes but the file has {} left: it is truncated or damaged",
                    self.len.saturating_sub(self.at)
                ),
            ));
        }
        let mut b = vec![0u8; n as usize];
        self.r.read_exact(&mut b).map_err(|e| Error::Input {
            path: self.path.to_path_buf(),
            reason: format!("cannot read: {e}"),
        })?;
        self.at += n;
        Ok(b)
    }

    pub(crate) fn skip(&mut self, n: u64, what: &str) -> Result<()> {
        if n > self.len.saturating_sub(self.at) {
            return Err(self.err(
                self.at,
                format!(
                    "{what} of {n} bytes runs past the end of the file: it is truncated or damaged"
                ),
            ));
        }
        self.seek(self.at + n)
    }

    pub(crate) fn seek(&mut self, to: u64) -> Result<()> {
        if to > self.len {
            return Err(self.err(
                to,
                format!(
                    "a section is said to start at byte {to}, past the end of the file ({} bytes)",
                    self.len
                ),
            ));
        }
        self.r.seek(SeekFrom::Start(to)).map_err(|e| Error::Input {
            path: self.path.to_path_buf(),
            reason: format!("cannot read: {e}"),
        })?;
        self.at = to;
        Ok(())
    }

    /// The tag `t`, or an error naming what was found.
    pub(crate) fn tag(&mut self, t: &str) -> Result<()> {
        let at = self.at;
        let n = (t.len() as u64).min(self.len.saturating_sub(at));
        let got = self.bytes(n, &format!("the tag {t}"))?;
        if got.len() < t.len() && t.as_bytes().starts_with(&got) {
            return Err(self.err(
                at,
                format!("the file ends inside the tag {t}: it is truncated"),
            ));
        }
        if got != t.as_bytes() {
            return Err(self.err(
                at,
                format!(
                    "expected the tag {t}, found {:?}: the file is damaged",
                    crate::error::show(&got)
                ),
            ));
        }
        Ok(())
    }

    /// An unsigned integer of `width` bytes in the file's byte order.
    pub(crate) fn uint(&mut self, width: usize, what: &str) -> Result<u64> {
        let b = self.bytes(width as u64, what)?;
        let mut v = 0u64;
        for k in 0..width {
            let byte = if self.big { b[k] } else { b[width - 1 - k] };
            v = (v << 8) | byte as u64;
        }
        Ok(v)
    }

    /// A signed 32-bit integer in the file's byte order.
    pub(crate) fn i32(&mut self, what: &str) -> Result<i32> {
        Ok(self.uint(4, what)? as u32 as i32)
    }

    /// A count (a 32-bit integer) of items of at least `each` bytes: an
    /// error when negative or more than the rest of the file can hold.
    pub(crate) fn count(&mut self, each: u64, what: &str) -> Result<u64> {
        let at = self.at;
        let n = self.i32(what)?;
        if n < 0 || (n as u64).saturating_mul(each) > self.len.saturating_sub(self.at) {
            return Err(self.err(
                at,
                format!("{what} is {n}, more than the file can hold: it is damaged"),
            ));
        }
        Ok(n as u64)
    }
}

/// Text decoded in `enc`; an error naming `what` and the offset.
pub(crate) fn decode(
    raw: &[u8],
    enc: Encoding,
    what: impl FnOnce() -> String,
    path: &Path,
    at: u64,
) -> Result<String> {
    match enc.decode(raw) {
        Some(s) => Ok(s.into_owned()),
        None => Err(Error::Format {
            path: path.to_path_buf(),
            offset: at,
            reason: format!(
                "{} is not valid {}: {:?} (give the file's encoding)",
                what(),
                enc.name(),
                crate::error::show(raw)
            ),
        }),
    }
}
