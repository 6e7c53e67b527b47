//! The writer side: appends parsed chunks to column files in the narrowest
//! type seen so far, re-encoding a column into a wider type when needed.

use crate::core::column::{pow10, rescale, scaled_floats, ColBuf, NULL_I64};
use crate::error::Result;
use microtab_store::match_column;
use microtab_store::{
    ColumnData, ColumnWriter, DatasetWriter, Kind, NativeType, Number, PhysType, Variable,
    HEADER_SIZE,
};

/// Values per block when re-encoding a column.
const BLOCK: usize = 1 << 16;

enum State {
    Int {
        decimals: u32,
        min: i64,
        max: i64,
    },
    Float {
        min: f64,
        max: f64,
        f32_exact: bool,
    },
    Str {
        map: ahash::AHashMap<String, u32>,
        dict: Vec<String>,
        /// The codes of the keys of keyed batches seen.
        by_key: ahash::AHashMap<u64, u32>,
    },
}

/// The code of `s` in a text column's dictionary, added when new.
fn intern(map: &mut ahash::AHashMap<String, u32>, dict: &mut Vec<String>, s: String) -> u32 {
    if let Some(&c) = map.get(&s) {
        return c;
    }
    let c = dict.len() as u32;
    dict.push(s.clone());
    map.insert(s, c);
    c
}

/// One output column being written.
pub(crate) struct Sink {
    name: String,
    state: State,
    writer: Option<ColumnWriter>,
    nulls: u64,
    /// System-missing values appended to the current writer's file.
    file_nulls: u64,
    rows: u64,
    scratch: Vec<u8>,
}

/// Writes `vals` (with [`NULL_I64`] for nulls) as integers of `w`'s type.
fn append_ints(w: &mut ColumnWriter, vals: &[i64], scratch: &mut Vec<u8>) -> Result<()> {
    fn go<T: NativeType>(
        w: &mut ColumnWriter,
        vals: &[i64],
        scratch: &mut Vec<u8>,
        conv: impl Fn(i64) -> T,
    ) -> Result<()> {
        let null = w.ty().null_code();
        let need = std::mem::size_of_val(vals) / 8 * std::mem::size_of::<T>();
        scratch.clear();
        scratch.reserve(need);
        let mut out: Vec<T> = Vec::with_capacity(vals.len());
        out.extend(
            vals.iter()
                .map(|&v| conv(if v == NULL_I64 { null } else { v })),
        );
        w.append(&out)?;
        Ok(())
    }
    match w.ty() {
        PhysType::U8 => go(w, vals, scratch, |v| v as u8),
        PhysType::I8 => go(w, vals, scratch, |v| v as i8),
        PhysType::U16 => go(w, vals, scratch, |v| v as u16),
        PhysType::I16 => go(w, vals, scratch, |v| v as i16),
        PhysType::U32 => go(w, vals, scratch, |v| v as u32),
        PhysType::I32 => go(w, vals, scratch, |v| v as i32),
        PhysType::I64 => go(w, vals, scratch, |v| v),
        PhysType::F32 | PhysType::F64 => unreachable!("integer sink with float type"),
    }
}

/// Like [`append_ints`], narrowing `vals` in place instead of into a new
/// buffer: value `i` is written at byte `i × width`, never ahead of the
/// `i × 8` it is read from. The hot path of every import (one allocation
/// and page-faulting of a fresh buffer per chunk and column saved).
fn append_ints_in_place(w: &mut ColumnWriter, vals: &mut [i64]) -> Result<()> {
    fn go<T: NativeType>(
        w: &mut ColumnWriter,
        vals: &mut [i64],
        conv: impl Fn(i64) -> T,
    ) -> Result<()> {
        let null = w.ty().null_code();
        let n = vals.len();
        let base = vals.as_mut_ptr();
        for i in 0..n {
            // SAFETY: i < n; reading element i (offset 8i) happens before
            // writing T at offset i·size_of::<T>() <= 8i, so no unread value
            // is overwritten; T's alignment divides 8, so the write is aligned.
            unsafe {
                let v = base.add(i).read();
                let t = conv(if v == NULL_I64 { null } else { v });
                (base as *mut T).add(i).write(t);
            }
        }
        // SAFETY: the first n T values were just written.
        let out = unsafe { std::slice::from_raw_parts(base as *const T, n) };
        w.append(out)?;
        Ok(())
    }
    match w.ty() {
        PhysType::U8 => go(w, vals, |v| v as u8),
        PhysType::I8 => go(w, vals, |v| v as i8),
        PhysType::U16 => go(w, vals, |v| v as u16),
        PhysType::I16 => go(w, vals, |v| v as i16),
        PhysType::U32 => go(w, vals, |v| v as u32),
        PhysType::I32 => go(w, vals, |v| v as i32),
        PhysType::I64 => go(w, vals, |v| v),
        PhysType::F32 | PhysType::F64 => unreachable!("integer sink with float type"),
    }
}

fn append_floats(w: &mut ColumnWriter, vals: &[f64]) -> Result<()> {
    match w.ty() {
        PhysType::F64 => w.append(vals)?,
        PhysType::F32 => {
            let v: Vec<f32> = vals.iter().map(|&x| x as f32).collect();
            w.append(&v)?
        }
        _ => unreachable!("float sink with integer type"),
    }
    Ok(())
}

/// Calls `f` with blocks of a partial column file's values as `i64`
/// (nulls as [`NULL_I64`]) or, for float files, as `f64`.
///
/// `nulls` says whether system-missing values were written to the file:
/// only then does the type's null code mean missing. Without nulls it is
/// an ordinary value (255 in a `u8` column that held 0..=255), which must
/// survive a re-encoding into a wider type.
// The float arm casts both float types to f64, f64 included.
#[allow(clippy::unnecessary_cast)]
fn read_partial(
    path: &std::path::Path,
    ty: PhysType,
    rows: u64,
    nulls: bool,
    mut f: impl FnMut(Block<'_>) -> Result<()>,
) -> Result<()> {
    let map = microtab_io::MappedFile::open(path)?;
    let payload = &map.bytes()[HEADER_SIZE..HEADER_SIZE + rows as usize * ty.width()];
    let data = ColumnData::view(ty, payload);
    let null = nulls.then(|| ty.null_code());
    let mut ibuf: Vec<i64> = Vec::with_capacity(BLOCK);
    let mut fbuf: Vec<f64> = Vec::with_capacity(BLOCK);
    macro_rules! ints {
        ($v:expr) => {
            for c in $v.chunks(BLOCK) {
                ibuf.clear();
                ibuf.extend(c.iter().map(|&x| {
                    let x = x as i64;
                    if Some(x) == null {
                        NULL_I64
                    } else {
                        x
                    }
                }));
                f(Block::Int(&ibuf))?;
            }
        };
    }
    match_column!(data, |v| ints => ints!(v), floats => {
        for c in v.chunks(BLOCK) {
            fbuf.clear();
            fbuf.extend(c.iter().map(|&x| x as f64));
            f(Block::Float(&fbuf))?;
        }
    });
    drop(map);
    let _ = std::fs::remove_file(path);
    Ok(())
}

enum Block<'a> {
    Int(&'a [i64]),
    Float(&'a [f64]),
}

impl Sink {
    pub fn new(name: &str, text: bool) -> Self {
        Sink {
            name: name.to_string(),
            state: if text {
                State::Str {
                    map: ahash::AHashMap::new(),
                    by_key: ahash::AHashMap::new(),
                    dict: Vec::new(),
                }
            } else {
                State::Int {
                    decimals: 0,
                    min: i64::MAX,
                    max: i64::MIN,
                }
            },
            writer: None,
            nulls: 0,
            file_nulls: 0,
            rows: 0,
            scratch: Vec::new(),
        }
    }

    fn ensure_writer(&mut self, ds: &mut DatasetWriter, ty: PhysType) -> Result<()> {
        match &self.writer {
            Some(w) if w.ty() == ty => Ok(()),
            Some(_) => self.reencode(ds, ty, 1, false),
            None => {
                self.writer = Some(ds.column_writer(&self.name, ty)?);
                Ok(())
            }
        }
    }

    /// Rewrites the column written so far as `ty`, multiplying integers by
    /// `mul` (decimal rescale) or converting them to floats (`to_float`,
    /// dividing by `10^decimals`).
    fn reencode(
        &mut self,
        ds: &mut DatasetWriter,
        ty: PhysType,
        mul: i64,
        to_float: bool,
    ) -> Result<()> {
        let old = self.writer.take().expect("writer exists");
        let (old_ty, rows) = (old.ty(), old.rows());
        let path = old.into_partial()?;
        let mut w = ds.column_writer(&self.name, ty)?;
        let decimals = match &self.state {
            State::Int { decimals, .. } => *decimals,
            _ => 0,
        };
        let scratch = &mut self.scratch;
        let mut tmp: Vec<i64> = Vec::new();
        let mut ftmp: Vec<f64> = Vec::new();
        read_partial(&path, old_ty, rows, self.file_nulls > 0, |b| match b {
            Block::Int(v) if to_float => {
                ftmp.clear();
                ftmp.extend(scaled_floats(v, decimals));
                append_floats(&mut w, &ftmp)
            }
            Block::Int(v) if mul != 1 => {
                tmp.clear();
                tmp.extend(v.iter().map(|&x| if x == NULL_I64 { x } else { x * mul }));
                append_ints(&mut w, &tmp, scratch)
            }
            Block::Int(v) => append_ints(&mut w, v, scratch),
            Block::Float(v) => append_floats(&mut w, v),
        })?;
        self.writer = Some(w);
        Ok(())
    }

    /// Appends one chunk's column.
    pub fn append(&mut self, ds: &mut DatasetWriter, col: ColBuf) -> Result<()> {
        match col {
            ColBuf::Int {
                mut vals,
                decimals,
                nulls,
                mut min,
                mut max,
            } => {
                if let State::Float { .. } = self.state {
                    let scale = pow10(decimals) as f64;
                    let f: Vec<f64> = scaled_floats(&vals, decimals).collect();
                    let (lo, hi) = if nulls as usize == vals.len() {
                        (f64::INFINITY, f64::NEG_INFINITY)
                    } else {
                        (min as f64 / scale, max as f64 / scale)
                    };
                    return self.append(
                        ds,
                        ColBuf::Float {
                            vals: f,
                            nulls,
                            min: lo,
                            max: hi,
                        },
                    );
                }
                let State::Int {
                    decimals: sd,
                    min: smin,
                    max: smax,
                } = &mut self.state
                else {
                    unreachable!("numeric chunk for a text column")
                };
                // Bring both sides to the same number of decimals; when
                // one side would overflow, the column becomes floats.
                let overflow = if decimals > *sd {
                    let k = pow10(decimals - *sd);
                    let fits = self.rows == self.nulls
                        || (smin.checked_mul(k).is_some() && smax.checked_mul(k).is_some());
                    if fits {
                        if self.rows > self.nulls {
                            *smin *= k;
                            *smax *= k;
                        }
                        *sd = decimals;
                        if self.writer.is_some() {
                            let (lo, hi) = if self.rows == self.nulls {
                                (0, 0)
                            } else {
                                (*smin, *smax)
                            };
                            let need = PhysType::narrowest_int(lo, hi, self.nulls > 0);
                            self.reencode(ds, need, k, false)?;
                        }
                    }
                    !fits
                } else if decimals < *sd {
                    rescale(&mut vals, &mut min, &mut max, pow10(*sd - decimals)).is_none()
                } else {
                    false
                };
                if overflow {
                    self.int_sink_to_float(ds)?;
                    let chunk = ColBuf::Int {
                        vals,
                        decimals,
                        nulls,
                        min,
                        max,
                    };
                    return self.append(ds, chunk);
                }
                let State::Int {
                    min: smin,
                    max: smax,
                    ..
                } = &mut self.state
                else {
                    unreachable!()
                };
                if (nulls as usize) < vals.len() {
                    *smin = (*smin).min(min);
                    *smax = (*smax).max(max);
                }
                self.nulls += nulls;
                let (lo, hi) = if *smin > *smax {
                    (0, 0)
                } else {
                    (*smin, *smax)
                };
                let need = PhysType::narrowest_int(lo, hi, self.nulls > 0);
                let ty = match &self.writer {
                    Some(w) if fits(w.ty(), lo, hi, self.nulls > 0) => w.ty(),
                    _ => need,
                };
                self.ensure_writer(ds, ty)?;
                let n = vals.len() as u64;
                append_ints_in_place(self.writer.as_mut().unwrap(), &mut vals)?;
                self.rows += n;
                self.file_nulls += nulls;
            }
            ColBuf::Float {
                vals,
                nulls,
                min,
                max,
            } => {
                if let State::Int { .. } = self.state {
                    self.int_sink_to_float(ds)?;
                }
                let State::Float {
                    min: smin,
                    max: smax,
                    f32_exact,
                } = &mut self.state
                else {
                    unreachable!("numeric chunk for a text column")
                };
                *smin = smin.min(min);
                *smax = smax.max(max);
                if *f32_exact {
                    *f32_exact = vals.iter().all(|&x| x.is_nan() || (x as f32) as f64 == x);
                }
                self.nulls += nulls;
                self.ensure_writer(ds, PhysType::F64)?;
                append_floats(self.writer.as_mut().unwrap(), &vals)?;
                self.rows += vals.len() as u64;
                self.file_nulls += nulls;
            }
            ColBuf::Str { codes, dict, nulls } => {
                let State::Str {
                    map, dict: gdict, ..
                } = &mut self.state
                else {
                    unreachable!("text chunk for a numeric column")
                };
                let remap: Vec<u32> = dict.into_iter().map(|s| intern(map, gdict, s)).collect();
                self.append_codes(ds, &codes, &remap, nulls)?;
            }
            ColBuf::Keyed {
                codes,
                keys,
                show,
                nulls,
            } => {
                let State::Str {
                    map,
                    dict: gdict,
                    by_key,
                } = &mut self.state
                else {
                    unreachable!("text chunk for a numeric column")
                };
                let remap: Vec<u32> = keys
                    .into_iter()
                    .map(|k| match by_key.get(&k) {
                        Some(&c) => c,
                        None => {
                            let c = intern(map, gdict, show(k));
                            by_key.insert(k, c);
                            c
                        }
                    })
                    .collect();
                self.append_codes(ds, &codes, &remap, nulls)?;
            }
        }
        Ok(())
    }

    /// Appends a text batch's `codes` (`u32::MAX` missing) as the column's
    /// codes `remap` gives.
    fn append_codes(
        &mut self,
        ds: &mut DatasetWriter,
        codes: &[u32],
        remap: &[u32],
        nulls: u64,
    ) -> Result<()> {
        let State::Str { dict: gdict, .. } = &self.state else {
            unreachable!("text chunk for a numeric column")
        };
        self.nulls += nulls;
        let n = gdict.len() as i64;
        let mut vals: Vec<i64> = codes
            .iter()
            .map(|&c| {
                if c == u32::MAX {
                    NULL_I64
                } else {
                    remap[c as usize] as i64
                }
            })
            .collect();
        let need = PhysType::narrowest_int(0, (n - 1).max(0), self.nulls > 0);
        let ty = match &self.writer {
            Some(w) if fits(w.ty(), 0, (n - 1).max(0), self.nulls > 0) => w.ty(),
            _ => unsigned(need),
        };
        self.ensure_writer(ds, ty)?;
        append_ints_in_place(self.writer.as_mut().unwrap(), &mut vals)?;
        self.rows += vals.len() as u64;
        self.file_nulls += nulls;
        Ok(())
    }

    /// Turns an integer sink (and its file) into a float one.
    fn int_sink_to_float(&mut self, ds: &mut DatasetWriter) -> Result<()> {
        let State::Int { decimals, min, max } = self.state else {
            return Ok(());
        };
        let scale = pow10(decimals) as f64;
        if self.writer.is_some() {
            self.reencode(ds, PhysType::F64, 1, true)?;
        }
        let (min, max) = if self.rows == self.nulls {
            (f64::INFINITY, f64::NEG_INFINITY)
        } else {
            (min as f64 / scale, max as f64 / scale)
        };
        self.state = State::Float {
            min,
            max,
            f32_exact: false,
        };
        Ok(())
    }

    /// Finishes the column file and describes it; also returns a string
    /// column's sorted dictionary (code `i` is entry `i`; empty for numbers).
    pub fn finish(mut self, ds: &mut DatasetWriter) -> Result<(Variable, Vec<String>)> {
        if self.writer.is_none() {
            // A file with no rows still gets a (empty) column.
            let ty = match self.state {
                State::Float { .. } => PhysType::F64,
                _ => PhysType::U8,
            };
            self.writer = Some(ds.column_writer(&self.name, ty)?);
        }
        let has_nulls = self.nulls > 0;
        let mut var;
        let mut entries = Vec::new();
        match std::mem::replace(
            &mut self.state,
            State::Int {
                decimals: 0,
                min: 0,
                max: 0,
            },
        ) {
            State::Int { decimals, min, max } => {
                let ty = self.writer.as_ref().unwrap().ty();
                var = Variable::new(&self.name, Kind::Int, ty);
                var.decimals = decimals;
                if min <= max {
                    var.min = Some(Number::Int(min));
                    var.max = Some(Number::Int(max));
                }
                if has_nulls {
                    var.null_code = Some(ty.null_code());
                }
            }
            State::Float {
                min,
                max,
                f32_exact,
            } => {
                if f32_exact && self.rows > 0 {
                    self.reencode(ds, PhysType::F32, 1, false)?;
                }
                let ty = self.writer.as_ref().unwrap().ty();
                var = Variable::new(&self.name, Kind::Float, ty);
                if min <= max {
                    var.min = Some(Number::Float(min));
                    var.max = Some(Number::Float(max));
                }
            }
            State::Str { dict, .. } => {
                // Sort the dictionary so codes order like the strings.
                let mut order: Vec<u32> = (0..dict.len() as u32).collect();
                order.sort_by(|&a, &b| dict[a as usize].cmp(&dict[b as usize]));
                let mut rank = vec![0i64; dict.len()];
                for (new, &old) in order.iter().enumerate() {
                    rank[old as usize] = new as i64;
                }
                let sorted: Vec<String> = order.iter().map(|&i| dict[i as usize].clone()).collect();
                if !dict.is_empty() && order.iter().enumerate().any(|(i, &o)| i as u32 != o) {
                    let old = self.writer.take().unwrap();
                    let (ty, rows) = (old.ty(), old.rows());
                    let path = old.into_partial()?;
                    let mut w = ds.column_writer(&self.name, ty)?;
                    let scratch = &mut self.scratch;
                    let mut tmp = Vec::new();
                    read_partial(&path, ty, rows, self.file_nulls > 0, |b| {
                        let Block::Int(v) = b else { unreachable!() };
                        tmp.clear();
                        tmp.extend(
                            v.iter()
                                .map(|&c| if c == NULL_I64 { c } else { rank[c as usize] }),
                        );
                        append_ints(&mut w, &tmp, scratch)
                    })?;
                    self.writer = Some(w);
                }
                let ty = self.writer.as_ref().unwrap().ty();
                var = Variable::new(&self.name, Kind::String, ty);
                if !sorted.is_empty() {
                    var.min = Some(Number::Int(0));
                    var.max = Some(Number::Int(sorted.len() as i64 - 1));
                }
                if has_nulls {
                    var.null_code = Some(ty.null_code());
                }
                let (rel, sum) = ds.write_dictionary(&self.name, &sorted)?;
                var.dictionary = Some(rel);
                var.dictionary_checksum = Some(sum);
                entries = sorted;
            }
        }
        var.nulls = self.nulls;
        let w = self.writer.take().unwrap();
        let dict = var.dictionary.take();
        let mut var = w.finish(var)?;
        var.dictionary = dict;
        Ok((var, entries))
    }
}

fn unsigned(t: PhysType) -> PhysType {
    match t {
        PhysType::I8 => PhysType::U8,
        PhysType::I16 => PhysType::U16,
        PhysType::I32 => PhysType::U32,
        t => t,
    }
}

/// Whether `ty` holds `lo..=hi` (plus its null code when `nulls`).
fn fits(ty: PhysType, lo: i64, hi: i64, nulls: bool) -> bool {
    if ty.is_float() {
        return false;
    }
    let (a, b) = ty.int_range();
    let (a, b) = if !nulls {
        (a, b)
    } else if a == 0 {
        (a, b - 1)
    } else {
        (a + 1, b)
    };
    lo >= a && hi <= b
}
