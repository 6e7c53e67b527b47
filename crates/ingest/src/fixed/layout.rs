//! Where each variable is in a fixed-width record, from a DDI codebook:
//! the slots of a rectangular file, and the record-type dispatch of a
//! hierarchical one; the errors a record can have.

use crate::core::number::{trim, MAX_FIXED_DECIMALS};
use crate::ddi::{Charset, Codebook, DdiVariable, NumberStyle};
use crate::error::{Error, Result};
use std::path::Path;

/// One output variable's place in a record.
#[derive(Debug, Clone)]
pub(crate) struct Slot {
    /// Index into the codebook's variables.
    pub(crate) var: usize,
    pub(crate) name: String,
    /// 0-based first byte.
    pub(crate) start: usize,
    /// 0-based end (exclusive).
    pub(crate) end: usize,
    pub(crate) decimals: u32,
    /// Of `decimals`, those that divide every value (a point or not).
    pub(crate) divide: u32,
    pub(crate) text: bool,
    /// How its numbers are written.
    pub(crate) style: NumberStyle,
    /// Read from the parent (household) record rather than the row's own.
    pub(crate) parent: bool,
    /// The line of a record of several lines it is on (0-based), and
    /// where that line starts in the joined record.
    pub(crate) line: usize,
    pub(crate) offset: usize,
}

/// Record-type handling of a hierarchical file.
#[derive(Debug, Clone)]
pub(crate) struct Hier {
    pub(crate) id_name: String,
    pub(crate) id_start: usize,
    pub(crate) id_end: usize,
    /// Every record type the codebook lists, by name.
    pub(crate) names: Vec<String>,
    /// The codes marking each type in the data (as [`Hier::canon`] makes
    /// them), with the type's index in `names`.
    pub(crate) codes: Vec<(Vec<u8>, usize)>,
    /// Records of this type become rows.
    pub(crate) row: usize,
    /// Records of this type supply `parent` slots (`None` when the rows are
    /// the top-level records themselves).
    pub(crate) parent: Option<usize>,
    /// The type variable is a number: `01` and ` 1` are type 1.
    pub(crate) numeric: bool,
    /// Records of unlisted types are skipped, not an error.
    pub(crate) skip_unlisted: bool,
}

/// What a record is to a hierarchical import.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    /// A record of the row type.
    Row,
    /// A record of the parent (household) type.
    Parent,
    /// A record of another type the codebook lists (not read).
    Other,
    /// A record of a type the codebook does not list.
    Unlisted,
}

impl Hier {
    /// A type code as compared: blanks trimmed, and a number's leading
    /// zeros dropped.
    pub(crate) fn canon(code: &[u8], numeric: bool) -> &[u8] {
        let t = trim(code);
        if numeric && !t.is_empty() && t.iter().all(u8::is_ascii_digit) {
            let z = t.iter().take_while(|&&b| b == b'0').count();
            return &t[z.min(t.len() - 1)..];
        }
        t
    }

    /// Every code of every record group of `cb`, as [`Hier::canon`] makes
    /// it, with the group's index; and whether the type is a number.
    pub(crate) fn codes(cb: &Codebook) -> (Vec<(Vec<u8>, usize)>, bool) {
        let numeric = cb.record_id_variable().is_some_and(|v| !v.text);
        let codes = cb
            .record_groups
            .iter()
            .enumerate()
            .flat_map(|(k, g)| {
                std::iter::once(&g.rectype)
                    .chain(&g.codes)
                    .map(move |c| (Hier::canon(c.as_bytes(), numeric).to_vec(), k))
            })
            .collect();
        (codes, numeric)
    }

    /// What record `line` (at least `id_end` bytes long) is.
    pub(crate) fn kind(&self, line: &[u8]) -> Kind {
        let rt = Self::canon(&line[self.id_start..self.id_end], self.numeric);
        match self.codes.iter().find(|(c, _)| c.as_slice() == rt) {
            Some(&(_, t)) if t == self.row => Kind::Row,
            Some(&(_, t)) if Some(t) == self.parent => Kind::Parent,
            Some(_) => Kind::Other,
            None => Kind::Unlisted,
        }
    }

    /// The name of the row type.
    pub(crate) fn row_name(&self) -> &str {
        &self.names[self.row]
    }

    /// The name of the parent type, if any.
    pub(crate) fn parent_name(&self) -> &str {
        self.parent.map_or("", |p| &self.names[p])
    }
}

/// Where every output variable is in a record, derived from a codebook.
#[derive(Debug, Clone)]
pub(crate) struct Layout {
    pub(crate) slots: Vec<Slot>,
    pub(crate) charset: Charset,
    pub(crate) hier: Option<Hier>,
    /// Fields past a record's end and `.` are missing; E notation is read
    /// ([`Codebook::lenient`]).
    pub(crate) lenient: bool,
    /// Widths of the lines of a record of several lines
    /// ([`Codebook::record_lines`]); empty for one line.
    pub(crate) lines: Vec<usize>,
}

impl Layout {
    pub(crate) fn new(cb: &Codebook, record_type: Option<&str>) -> Result<Layout> {
        let cb_err = |reason: String| Error::Codebook {
            path: cb.path.clone(),
            reason,
        };
        // The line of a record of several lines that a column is on, and
        // where that line starts.
        let on_line = |col: usize| {
            let mut offset = 0;
            for (k, w) in cb.record_lines.iter().enumerate() {
                if col < offset + w {
                    return (k, offset);
                }
                offset += w;
            }
            (0, 0)
        };
        let slot = |i: usize, v: &DdiVariable, parent: bool| {
            let (line, offset) = on_line(v.start - 1);
            Slot {
                var: i,
                name: v.name.clone(),
                start: v.start - 1,
                end: v.end,
                decimals: v.decimals.min(MAX_FIXED_DECIMALS),
                divide: v.divide.min(v.decimals.min(MAX_FIXED_DECIMALS)),
                text: v.text,
                style: v.style,
                parent,
                line,
                offset,
            }
        };
        if cb.record_lines.len() > 1 {
            if cb.hierarchical {
                return Err(cb_err(
                    "records of several types, each of several lines, are not supported".into(),
                ));
            }
            let width: usize = cb.record_lines.iter().sum();
            if let Some(v) = cb.variables.iter().find(|v| v.end > width) {
                return Err(cb_err(format!(
                    "{} ends at column {} of a record of {width} columns on {} lines",
                    v.name,
                    v.end,
                    cb.record_lines.len()
                )));
            }
        }
        if !cb.hierarchical {
            if let Some(t) = record_type {
                return Err(cb_err(format!(
                    "record type {t:?} asked for, but the codebook describes a rectangular file"
                )));
            }
            return Ok(Layout {
                slots: cb
                    .variables
                    .iter()
                    .enumerate()
                    .map(|(i, v)| slot(i, v, false))
                    .collect(),
                charset: cb.charset,
                hier: None,
                lenient: cb.lenient,
                lines: if cb.record_lines.len() > 1 {
                    cb.record_lines.clone()
                } else {
                    Vec::new()
                },
            });
        }
        let known: Vec<String> = cb.record_groups.iter().map(|g| g.rectype.clone()).collect();
        let top = cb.top_record_type().unwrap_or("H").to_string();
        let id = cb.record_id_variable().expect("checked when parsed");
        let (codes, numeric) = Hier::codes(cb);
        let row = match record_type {
            Some(t) => codes
                .iter()
                .find(|(c, _)| c.eq_ignore_ascii_case(Hier::canon(t.as_bytes(), numeric)))
                .map(|&(_, k)| known[k].clone())
                .ok_or_else(|| {
                    cb_err(format!(
                        "record type {t:?} is not one the codebook lists ({})",
                        known.join(", ")
                    ))
                })?,
            None => known
                .iter()
                .find(|k| k.as_str() == "P")
                .or_else(|| known.iter().find(|k| **k != top))
                .unwrap_or(&top)
                .clone(),
        };
        let on = |v: &DdiVariable, t: &str| {
            v.record_types.is_empty() || v.record_types.iter().any(|r| r == t)
        };
        let mut slots = Vec::new();
        for (i, v) in cb.variables.iter().enumerate() {
            if on(v, &row) {
                slots.push(slot(i, v, false));
            } else if row != top && on(v, &top) {
                slots.push(slot(i, v, true));
            }
        }
        let names = known;
        let index = |t: &str| names.iter().position(|n| n == t).expect("listed");
        Ok(Layout {
            slots,
            charset: cb.charset,
            lenient: cb.lenient,
            lines: Vec::new(),
            hier: Some(Hier {
                id_name: id.name.clone(),
                id_start: id.start - 1,
                id_end: id.end,
                row: index(&row),
                parent: (row != top).then(|| index(&top)),
                names,
                codes,
                numeric,
                skip_unlisted: cb.skip_unlisted,
            }),
        })
    }

    /// The record type that becomes a row (hierarchical files).
    pub(crate) fn row_type(&self) -> Option<String> {
        self.hier.as_ref().map(|h| h.row_name().to_string())
    }

    /// Where a chunk may end: after the last complete line, or — when rows
    /// need their parent record — just before the last parent record.
    pub(crate) fn cut(&self, buf: &[u8]) -> Option<usize> {
        let last_nl = memchr::memrchr(b'\n', buf)?;
        if self.lines.len() > 1 {
            // After a whole number of records of several lines (a chunk
            // starts at a record's first line).
            let n = self.lines.len();
            let whole = memchr::memchr_iter(b'\n', buf).count() / n * n;
            return memchr::memchr_iter(b'\n', buf)
                .nth(whole.checked_sub(1)?)
                .map(|p| p + 1);
        }
        let Some(h) = &self.hier else {
            return Some(last_nl + 1);
        };
        if h.parent.is_none() {
            return Some(last_nl + 1);
        }
        // Line starts from the last complete line backwards.
        let mut start = last_nl + 1;
        loop {
            if start > 0 && start + h.id_end <= buf.len() {
                let line_end =
                    memchr::memchr(b'\n', &buf[start..]).map_or(buf.len(), |p| start + p);
                if start + h.id_end <= line_end && h.kind(&buf[start..line_end]) == Kind::Parent {
                    return Some(start);
                }
            }
            if start == 0 {
                return None;
            }
            start = memchr::memrchr(b'\n', &buf[..start - 1]).map_or(0, |p| p + 1);
        }
    }
}

/// What went wrong in a record, before the file name is attached.
#[derive(Debug)]
pub(crate) enum FieldError {
    Short {
        slot: usize,
        len: usize,
    },
    ShortId {
        len: usize,
    },
    Value {
        slot: usize,
        expected: &'static str,
        found: String,
    },
    RecordType {
        found: String,
    },
    Orphan,
    /// The file ends after `read` lines of a record of several.
    Partial {
        read: usize,
    },
}

/// A [`FieldError`] at a record (line).
#[derive(Debug)]
pub(crate) struct RecordError {
    pub line: u64,
    pub kind: FieldError,
}

impl RecordError {
    pub(crate) fn into_error(self, path: &Path, layout: &Layout) -> Error {
        let path = path.to_path_buf();
        let record = self.line;
        let slot = |i: usize| &layout.slots[i];
        match self.kind {
            FieldError::Short { slot: i, len } => Error::ShortRecord {
                path,
                record,
                len,
                name: slot(i).name.clone(),
                start: slot(i).start - slot(i).offset + 1,
                end: slot(i).end - slot(i).offset,
            },
            FieldError::ShortId { len } => {
                let h = layout.hier.as_ref().expect("hierarchical");
                Error::ShortRecord {
                    path,
                    record,
                    len,
                    name: h.id_name.clone(),
                    start: h.id_start + 1,
                    end: h.id_end,
                }
            }
            FieldError::Value {
                slot: i,
                expected,
                found,
            } => Error::Field {
                path,
                record,
                name: slot(i).name.clone(),
                start: slot(i).start - slot(i).offset + 1,
                end: slot(i).end - slot(i).offset,
                expected: expected.to_string(),
                found,
            },
            FieldError::RecordType { found } => {
                let h = layout.hier.as_ref().expect("hierarchical");
                Error::RecordType {
                    path,
                    record,
                    name: h.id_name.clone(),
                    found,
                    known: h.names.join(", "),
                }
            }
            FieldError::Partial { read } => Error::PartialRecord {
                path,
                record,
                read,
                lines: layout.lines.len(),
            },
            FieldError::Orphan => {
                let h = layout.hier.as_ref().expect("hierarchical");
                Error::Orphan {
                    path,
                    record,
                    child: h.row_name().to_string(),
                    parent: h.parent_name().to_string(),
                }
            }
        }
    }
}
