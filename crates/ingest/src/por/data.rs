//! The data of a portable file as the records of an uncompressed system
//! file: each number as the 8 bytes of its double (system-missing as the
//! system file's code), each string its width in bytes, padded with
//! blanks, in the text encoding. The system file's decoder then does the
//! rest on every core.

use super::chars::Mark;
use super::dict::Fields;
use super::number::{quick, Base30, Step, Value};
use crate::core::pipeline::Progress;
use crate::error::{Error, Result};
use crate::options::Encoding;
use crate::sav::Sav;
use std::io::{self, Read};
use std::sync::{Arc, Mutex};

/// What reading the data found beside the records.
#[derive(Debug, Default)]
pub(crate) struct Outcome {
    /// The error that ended the records (the stream reports only that
    /// reading failed).
    pub error: Option<Error>,
    /// Per variable, the values longer than its width, cut.
    pub cut: Vec<u64>,
    /// Values holding bytes beyond ASCII the table does not name.
    pub foreign: u64,
}

/// Bytes of the file between progress reports.
const REPORT: u64 = 1 << 22;

/// The records of a portable file's data, rebuilt as a system file's.
pub(crate) struct Records {
    f: Fields,
    /// Per variable: its offset in a record, and a string's width.
    layout: Vec<(usize, Option<usize>)>,
    names: Vec<String>,
    row_len: usize,
    /// Records read.
    n: u64,
    /// A record read into the stream's last short buffer, and how much of
    /// it was handed on.
    rest: Vec<u8>,
    rest_at: usize,
    ended: bool,
    sysmis: [u8; 8],
    cut: Vec<u64>,
    foreign: u64,
    outcome: Arc<Mutex<Outcome>>,
    progress: Option<Progress>,
    reported: u64,
}

impl Records {
    /// The records after the dictionary `f` read, laid out as `s`.
    pub(crate) fn new(
        f: Fields,
        s: &Sav,
        outcome: Arc<Mutex<Outcome>>,
        progress: Option<Progress>,
    ) -> Records {
        Records {
            layout: s.vars.iter().map(|v| (v.pieces[0].0, v.width)).collect(),
            names: s.vars.iter().map(|v| v.name.clone()).collect(),
            row_len: s.row_len,
            n: 0,
            rest: Vec::new(),
            rest_at: 0,
            ended: false,
            sysmis: s.sysmis.to_le_bytes(),
            cut: vec![0; s.vars.len()],
            foreign: f.foreign,
            f,
            outcome,
            progress,
            reported: 0,
        }
    }

    /// Reads the next record into `out` (`row_len` bytes); `false` at the
    /// end of the data.
    fn record(&mut self, out: &mut [u8]) -> Result<bool> {
        for i in 0..self.layout.len() {
            let (off, width) = self.layout[i];
            let at = self.f.chars.mark();
            let v = if let Some((v, k)) = quick(self.f.chars.rest(), &self.f.table.ascii) {
                self.f.chars.skip(k);
                Some(v)
            } else {
                self.field(at, i, width.is_some())?
            };
            let v = match v {
                Some(v) => v,
                None => return Ok(false),
            };
            match (width, v) {
                (None, Value::Num(x)) if x.is_finite() => {
                    out[off..off + 8].copy_from_slice(&x.to_le_bytes())
                }
                (None, Value::Sysmis) => out[off..off + 8].copy_from_slice(&self.sysmis),
                (None, Value::Num(_)) => {
                    return Err(self.bad(
                        at,
                        i,
                        "a number beyond the range of doubles: the file is damaged".into(),
                    ))
                }
                (Some(w), Value::Num(n)) if n >= 0.0 && n.fract() == 0.0 && n < 9e15 => {
                    self.text(&mut out[off..off + w], n as u64, i, at)?
                }
                (Some(_), v) => {
                    return Err(self.bad(
                        at,
                        i,
                        format!(
                            "a text said to be {} characters long: the file is damaged",
                            match v {
                                Value::Num(x) => microtab_store::codec::format_float(x),
                                Value::Sysmis => "missing (*.)".into(),
                            }
                        ),
                    ))
                }
            }
        }
        self.n += 1;
        Ok(true)
    }

    /// The field of variable `i` starting at `at`, read character by
    /// character (a number or a text's length); `None` at the end mark `Z`
    /// before the first variable.
    fn field(&mut self, at: Mark, i: usize, text: bool) -> Result<Option<Value>> {
        let mut b = Base30::new();
        loop {
            let c = match self.f.chars.next() {
                Ok(Some(c)) => c,
                Ok(None) => return Err(self.ended_early(i, b.started())),
                Err(e) => {
                    return Err(Error::Input {
                        path: self.f.path.clone(),
                        reason: format!("cannot read: {e}"),
                    })
                }
            };
            let a = self.f.table.ascii[c as usize];
            if a == b'Z' && !b.started() {
                if i == 0 {
                    return Ok(None);
                }
                return Err(self.bad(
                    at,
                    i,
                    "the data end (Z) inside the record: the file is damaged".into(),
                ));
            }
            match b.push(a) {
                Step::More => {}
                Step::Done(v) => return Ok(Some(v)),
                Step::Bad => {
                    return Err(self.bad(
                        at,
                        i,
                        format!(
                            "expected {} (a base-30 number ending in /), found {:?}: the file is damaged",
                            if text { "the length of a text" } else { "a number" },
                            if a == 0 { '?' } else { a as char }
                        ),
                    ))
                }
            }
        }
    }

    /// Reads the `n` characters of text variable `i` into `out` (its
    /// width), padded with blanks; characters beyond the width are cut.
    fn text(&mut self, out: &mut [u8], n: u64, i: usize, at: Mark) -> Result<()> {
        let w = out.len();
        let mut k = 0usize;
        let mut full = false;
        let mut cut = false;
        let mut foreign = false;
        let mut high = false;
        let mut left = n;
        while left > 0 {
            let t = &self.f.table;
            let chunk = match self.f.chars.take(left.min(1 << 16) as usize) {
                Ok([]) => return Err(self.ended_early(i, true)),
                Ok(c) => c,
                Err(e) => {
                    return Err(Error::Input {
                        path: self.f.path.clone(),
                        reason: format!("cannot read: {e}"),
                    })
                }
            };
            left -= chunk.len() as u64;
            for &c in chunk {
                let c = c as usize;
                let a = t.ascii[c];
                if full {
                    cut |= a != b' ';
                } else if a != 0 {
                    if k < w {
                        out[k] = a;
                        k += 1;
                    } else {
                        full = true;
                        cut |= a != b' ';
                    }
                } else {
                    let bytes = &t.local[c];
                    foreign |= t.foreign[c];
                    high |= bytes[0] >= 0x80;
                    if k + bytes.len() <= w {
                        out[k..k + bytes.len()].copy_from_slice(bytes);
                        k += bytes.len();
                    } else {
                        full = true;
                        cut = true;
                    }
                }
            }
        }
        if self.f.enc == Encoding::Utf8 && cut {
            // A character cut in two by the width is dropped.
            if let Err(e) = std::str::from_utf8(&out[..k]) {
                if e.error_len().is_none() {
                    k = e.valid_up_to();
                }
            }
        }
        out[k..].fill(b' ');
        self.foreign += u64::from(foreign);
        self.cut[i] += u64::from(cut);
        if high && self.f.enc.decode(&out[..k]).is_none() {
            return Err(self.bad(
                at,
                i,
                format!(
                    "{:?} is not valid {} (give the file's encoding)",
                    crate::error::show(&out[..k]),
                    self.f.enc.name()
                ),
            ));
        }
        Ok(())
    }

    /// The error of a field of variable `i` of the current record.
    fn bad(&self, at: Mark, i: usize, what: String) -> Error {
        self.f.err(
            self.f.chars.offset_of(at),
            format!("record {}, variable {}: {what}", self.n + 1, self.names[i]),
        )
    }

    /// The error of a file that ends before the end mark: inside a
    /// record (at variable `i`, `begun` its field), or between records.
    fn ended_early(&self, i: usize, begun: bool) -> Error {
        if i == 0 && !begun {
            self.f.err(
                self.f.chars.offset(),
                format!(
                    "the file ends after record {} without the end mark Z: it is truncated",
                    self.n
                ),
            )
        } else {
            self.bad(
                self.f.chars.mark(),
                i,
                "the file ends inside the record: it is truncated".into(),
            )
        }
    }

    /// Keeps `e` for the import and returns what the stream reports.
    fn fail(&mut self, e: Error) -> io::Error {
        let msg = e.to_string();
        self.lock().error = Some(e);
        io::Error::other(msg)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Outcome> {
        self.outcome.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The data ended well: what was seen goes to the import.
    fn end(&mut self) {
        self.ended = true;
        let (cut, foreign) = (std::mem::take(&mut self.cut), self.foreign);
        let mut o = self.lock();
        o.cut = cut;
        o.foreign = foreign;
    }

    fn report(&mut self) {
        if let Some(p) = &self.progress {
            let at = self.f.chars.offset();
            if at >= self.reported + REPORT {
                self.reported = at;
                p(at, self.f.len);
            }
        }
    }
}

impl Read for Records {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        if self.rest_at < self.rest.len() {
            let k = buf.len().min(self.rest.len() - self.rest_at);
            buf[..k].copy_from_slice(&self.rest[self.rest_at..self.rest_at + k]);
            self.rest_at += k;
            return Ok(k);
        }
        if self.ended || buf.is_empty() || self.row_len == 0 {
            return Ok(0);
        }
        let row = self.row_len;
        let mut n = 0;
        while buf.len() - n >= row {
            match self.record(&mut buf[n..n + row]) {
                Ok(true) => n += row,
                Ok(false) => {
                    self.end();
                    break;
                }
                Err(e) => return Err(self.fail(e)),
            }
        }
        if n == 0 && !self.ended {
            // A buffer shorter than a record: the record is handed on in
            // pieces.
            let mut rec = std::mem::take(&mut self.rest);
            rec.resize(row, 0);
            match self.record(&mut rec) {
                Ok(true) => {
                    n = buf.len();
                    buf.copy_from_slice(&rec[..n]);
                    self.rest = rec;
                    self.rest_at = n;
                }
                Ok(false) => self.end(),
                Err(e) => return Err(self.fail(e)),
            }
        }
        self.report();
        Ok(n)
    }
}
