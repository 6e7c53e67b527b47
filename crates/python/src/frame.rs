//! Frames: many variables of one dataset read from one generation.
//!
//! A [`Snapshot`] is a dataset opened once: the manifest read at that
//! moment and nothing else. Every read made through it — a frame's
//! columns, their dictionaries, the filter's mask, the metadata Python
//! shows — names the files of that manifest, so a frame is one generation
//! or fails with the store's "was changed by another process" error
//! (`ChangedError`), never a mix: column files carry their generation in
//! their names and are checked against the manifest's checksums, and a
//! replaced generation's files are deleted after the new manifest is
//! published. A frame opens all its columns (and reads its dictionaries)
//! before it decodes anything, so once opened the generation is held (the
//! mappings keep deleted files readable) for the whole frame.
//!
//! Values cross to numpy as [`Buffer`]s (no copy), in one of two sets of
//! types: the stored ones (`u8`, `u16` … as imported, compact and, for a
//! plain column, a straight copy of the mapping's stripes) or wide ones
//! (`i64` for integers, `f64` for floats and implied decimals) that no
//! arithmetic wraps, converted while decoding, on every core.

use std::sync::Arc;

use arrow_array::cast::AsArray;
use arrow_array::types::{
    Float32Type, Float64Type, Int16Type, Int32Type, Int64Type, Int8Type, UInt16Type, UInt32Type,
    UInt8Type,
};
use arrow_array::{Array, ArrayRef, RecordBatch, RecordBatchOptions, RecordBatchReader};
use arrow_schema::{ArrowError, DataType, Field, Schema, SchemaRef};
use microtab_store::{Column, ColumnData, Dataset, Kind, PhysType};
use pyo3::prelude::*;
use pyo3::types::PyBytes;
use rayon::prelude::*;

use crate::errors::{engine_error, store_error, MicrotabError};

/// Rows decoded by one task: 16 stripes (a multiple of 64, so that each
/// task's rows start at a word of a selection bitmap).
const SPAN: usize = microtab_store::STRIPE_ROWS * 16;
const _: () = assert!(SPAN.is_multiple_of(64));

/// Bytes made by Rust and handed to numpy through the buffer protocol
/// (`np.frombuffer(buf, dtype)`) without a copy; writable, since nothing
/// on the Rust side keeps using them.
#[pyclass(frozen)]
pub struct Buffer {
    /// The first byte of `owner`'s elements; Rust holds no reference into
    /// them, so Python writing through the view is sound.
    ptr: *mut u8,
    len: usize,
    /// The vector that owns the bytes (freed when the buffer is dropped,
    /// which numpy delays while it views them).
    _owner: Box<dyn std::any::Any + Send + Sync>,
}

// SAFETY: the bytes are owned by the Buffer alone (the boxed vector, never
// borrowed by Rust after `new`); Python serialises access to the object.
unsafe impl Send for Buffer {}
// SAFETY: as above; the pointer and length never change.
unsafe impl Sync for Buffer {}

impl Buffer {
    /// Takes a vector of plain numbers (moving a `Vec` never moves its
    /// heap elements, so `ptr` stays valid).
    pub fn new<T: Copy + Send + Sync + 'static>(mut data: Vec<T>) -> Buffer {
        let len = std::mem::size_of_val(data.as_slice());
        let ptr = data.as_mut_ptr() as *mut u8;
        Buffer {
            ptr,
            len,
            _owner: Box::new(data),
        }
    }
}

#[pymethods]
impl Buffer {
    unsafe fn __getbuffer__(
        slf: Bound<'_, Self>,
        view: *mut pyo3::ffi::Py_buffer,
        flags: std::ffi::c_int,
    ) -> PyResult<()> {
        use pyo3::ffi;
        if view.is_null() {
            return Err(pyo3::exceptions::PyBufferError::new_err("view is null"));
        }
        let (ptr, len) = (slf.get().ptr, slf.get().len);
        // SAFETY: `view` is a valid Py_buffer to fill (checked non-null);
        // the data lives as long as `obj`, which the view holds a
        // reference to. Rust never reads or writes it after handing it
        // over, so Python may write it (pandas frames stay writable).
        unsafe {
            (*view).buf = ptr as *mut std::ffi::c_void;
            (*view).len = len as isize;
            (*view).readonly = 0;
            (*view).itemsize = 1;
            (*view).format = if (flags & ffi::PyBUF_FORMAT) == ffi::PyBUF_FORMAT {
                std::ffi::CString::new("B").expect("no NUL").into_raw()
            } else {
                std::ptr::null_mut()
            };
            (*view).ndim = 1;
            (*view).shape = if (flags & ffi::PyBUF_ND) == ffi::PyBUF_ND {
                &mut (*view).len
            } else {
                std::ptr::null_mut()
            };
            (*view).strides = if (flags & ffi::PyBUF_STRIDES) == ffi::PyBUF_STRIDES {
                &mut (*view).itemsize
            } else {
                std::ptr::null_mut()
            };
            (*view).suboffsets = std::ptr::null_mut();
            (*view).internal = std::ptr::null_mut();
            (*view).obj = slf.into_any().into_ptr();
        }
        Ok(())
    }

    unsafe fn __releasebuffer__(&self, view: *mut pyo3::ffi::Py_buffer) {
        // SAFETY: `format` is null or the CString made in __getbuffer__.
        unsafe {
            if !(*view).format.is_null() {
                drop(std::ffi::CString::from_raw((*view).format));
            }
        }
    }
}

/// The records a filter keeps, with where each task's first kept record
/// goes in the output.
struct Keep {
    bits: Vec<u64>,
    /// `starts[k]`: output position of span `k`'s first kept record;
    /// one more entry, the number kept.
    starts: Vec<usize>,
}

impl Keep {
    fn new(mut bits: Vec<u64>, rows: usize) -> Keep {
        bits.resize(rows.div_ceil(64), 0);
        if !rows.is_multiple_of(64) {
            // Bits past the last record are not records.
            if let Some(w) = bits.last_mut() {
                *w &= (1u64 << (rows % 64)) - 1;
            }
        }
        let words = SPAN / 64;
        let mut starts = Vec::with_capacity(rows.div_ceil(SPAN) + 1);
        let mut at = 0usize;
        for chunk in bits.chunks(words) {
            starts.push(at);
            at += chunk.iter().map(|w| w.count_ones() as usize).sum::<usize>();
        }
        starts.push(at);
        Keep { bits, starts }
    }

    fn kept(&self) -> usize {
        *self.starts.last().expect("one entry at least")
    }
}

/// One column decoded: values, their numpy type name, the missing mask
/// (1 = missing) and how many are missing.
pub struct Decoded {
    pub values: Buffer,
    pub ty: &'static str,
    pub mask: Buffer,
    pub missing: usize,
}

/// Decodes `col` (the records `keep` keeps, or all) on every core into
/// `O`: integer-typed stored values go through `from_i`, float ones
/// through `from_f`; `miss_i`/`miss_f` say which are missing.
fn decode<O, MI, MF, FI, FF>(
    col: &Column,
    keep: Option<&Keep>,
    miss_i: MI,
    miss_f: MF,
    from_i: FI,
    from_f: FF,
) -> microtab_store::Result<(Vec<O>, Vec<u8>, usize)>
where
    O: Copy + Default + Send + Sync,
    MI: Fn(i64) -> bool + Sync,
    MF: Fn(f64) -> bool + Sync,
    FI: Fn(i64) -> O + Sync,
    FF: Fn(f64) -> O + Sync,
{
    let rows = col.rows();
    let n_out = keep.map_or(rows, Keep::kept);
    let mut vals = vec![O::default(); n_out];
    let mut mask = vec![0u8; n_out];
    // Each span's own part of the output (uneven under a filter).
    let mut parts = Vec::with_capacity(rows.div_ceil(SPAN));
    let (mut v_rest, mut m_rest) = (&mut vals[..], &mut mask[..]);
    for k in 0..rows.div_ceil(SPAN) {
        let len = match keep {
            Some(kp) => kp.starts[k + 1] - kp.starts[k],
            None => (rows - k * SPAN).min(SPAN),
        };
        let (v, vr) = std::mem::take(&mut v_rest).split_at_mut(len);
        let (m, mr) = std::mem::take(&mut m_rest).split_at_mut(len);
        (v_rest, m_rest) = (vr, mr);
        parts.push((k, v, m));
    }
    let missing = parts
        .into_par_iter()
        .map(|(k, dst, m)| -> microtab_store::Result<usize> {
            if dst.is_empty() {
                // Nothing kept here: not even read.
                return Ok(0);
            }
            let start = k * SPAN;
            let n = (rows - start).min(SPAN);
            let mut buf = Vec::new();
            let view = col.rows_view(start, n, &mut buf)?;
            let bits = keep.map(|kp| &kp.bits[start / 64..]);
            macro_rules! run {
                ($v:expr, $to:ty, $miss:expr, $from:expr) => {{
                    let (mut c, mut j) = (0usize, 0usize);
                    match bits {
                        None => {
                            for ((d, mi), &x) in dst.iter_mut().zip(m.iter_mut()).zip($v.iter()) {
                                let y = x as $to;
                                let is = $miss(y);
                                *mi = is as u8;
                                c += is as usize;
                                *d = $from(y);
                            }
                        }
                        Some(b) => {
                            for (i, &x) in $v.iter().enumerate() {
                                if b[i / 64] >> (i % 64) & 1 == 1 {
                                    let y = x as $to;
                                    let is = $miss(y);
                                    m[j] = is as u8;
                                    c += is as usize;
                                    dst[j] = $from(y);
                                    j += 1;
                                }
                            }
                        }
                    }
                    c
                }};
            }
            Ok(match view {
                ColumnData::U8(v) => run!(v, i64, miss_i, from_i),
                ColumnData::I8(v) => run!(v, i64, miss_i, from_i),
                ColumnData::U16(v) => run!(v, i64, miss_i, from_i),
                ColumnData::I16(v) => run!(v, i64, miss_i, from_i),
                ColumnData::U32(v) => run!(v, i64, miss_i, from_i),
                ColumnData::I32(v) => run!(v, i64, miss_i, from_i),
                ColumnData::I64(v) => run!(v, i64, miss_i, from_i),
                ColumnData::F32(v) => run!(v, f64, miss_f, from_f),
                ColumnData::F64(v) => run!(v, f64, miss_f, from_f),
            })
        })
        .try_reduce(|| 0, |a, b| Ok(a + b))?;
    Ok((vals, mask, missing))
}

/// A variable's values as users see them: implied decimals applied (as
/// `f64`), floats as stored, text as dictionary codes; missing codes, the
/// null code and NaN marked in the mask. `wide`: integers as `i64` and
/// floats as `f64` (no arithmetic on them wraps); otherwise in their
/// stored type.
fn decode_column(col: &Column, keep: Option<&Keep>, wide: bool) -> microtab_store::Result<Decoded> {
    let var = col.var();
    let float = var.kind == Kind::Float;
    let scaled = var.kind == Kind::Int && var.decimals > 0;
    let null = var.null_code.filter(|_| var.nulls > 0 && !float);
    let codes_i: Vec<i64> = var.missing_codes.iter().map(|&c| c as i64).collect();
    let codes_f = var.missing_codes.clone();
    let mi = |x: i64| Some(x) == null || codes_i.contains(&x);
    let mf = |f: f64| f.is_nan() || codes_f.contains(&f);
    macro_rules! out {
        ($o:ty, $name:expr, $fi:expr, $ff:expr) => {{
            let (v, m, missing) = decode::<$o, _, _, _, _>(col, keep, mi, mf, $fi, $ff)?;
            Decoded {
                values: Buffer::new(v),
                ty: $name,
                mask: Buffer::new(m),
                missing,
            }
        }};
    }
    Ok(if scaled {
        let scale = var.scale();
        // Correctly rounded: the nearest f64 to the decimal (as a CSV
        // reader parses it) while the stored integer is below 2^53.
        out!(f64, "f64", |x| x as f64 / scale, |f| f / scale)
    } else if float {
        if wide || var.ty == PhysType::F64 {
            out!(f64, "f64", |x| x as f64, |f| f)
        } else {
            out!(f32, "f32", |x| x as f32, |f| f as f32)
        }
    } else if wide && var.kind != Kind::String {
        out!(i64, "i64", |x| x, |f| f as i64)
    } else {
        match var.ty {
            PhysType::U8 => out!(u8, "u8", |x| x as u8, |f| f as u8),
            PhysType::I8 => out!(i8, "i8", |x| x as i8, |f| f as i8),
            PhysType::U16 => out!(u16, "u16", |x| x as u16, |f| f as u16),
            PhysType::I16 => out!(i16, "i16", |x| x as i16, |f| f as i16),
            PhysType::U32 => out!(u32, "u32", |x| x as u32, |f| f as u32),
            PhysType::I32 => out!(i32, "i32", |x| x as i32, |f| f as i32),
            PhysType::I64 => out!(i64, "i64", |x| x, |f| f as i64),
            PhysType::F32 | PhysType::F64 => unreachable!("float types are handled above"),
        }
    })
}

/// One column of a frame as it crosses to Python: name, values, numpy
/// type name, mask, missing count, dictionary (text variables).
type FrameColumn = (
    String,
    Py<Buffer>,
    String,
    Py<Buffer>,
    usize,
    Option<Vec<String>>,
);

/// A dataset opened once (its manifest read now): every read through it
/// is of that generation, or fails with `ChangedError`.
#[pyclass(frozen)]
pub struct Snapshot {
    ds: Dataset,
}

#[pymethods]
impl Snapshot {
    /// Opens the dataset at `path` (reads and checks its manifest).
    #[new]
    fn new(py: Python<'_>, path: &str) -> PyResult<Snapshot> {
        let path = path.to_string();
        let ds =
            py.detach(move || Dataset::open(std::path::Path::new(&path)).map_err(store_error))?;
        Ok(Snapshot { ds })
    }

    /// The manifest this snapshot read, as JSON.
    fn info(&self) -> PyResult<String> {
        serde_json::to_string(self.ds.manifest()).map_err(|e| MicrotabError::new_err(e.to_string()))
    }

    /// The analysis layer's description of this generation (`microtab info
    /// --format json`: variables with values as shown, design, settings).
    fn describe(&self, py: Python<'_>, name: &str) -> PyResult<String> {
        py.detach(|| crate::settings::describe(&self.ds, name))
    }

    /// The manifest's generation.
    #[getter]
    fn generation(&self) -> u64 {
        self.ds.manifest().generation
    }

    /// A text variable's dictionary (code `i` is entry `i`).
    fn dictionary(&self, py: Python<'_>, name: &str) -> PyResult<Vec<String>> {
        py.detach(|| {
            let var = self.ds.variable(name).map_err(store_error)?;
            self.ds.dictionary(var).map_err(store_error)
        })
    }

    /// A column's stored values decoded (bit-packed columns unpacked),
    /// every stripe checked: (bytes, numpy dtype name).
    fn column<'py>(&self, py: Python<'py>, name: &str) -> PyResult<(Bound<'py, PyBytes>, String)> {
        let (bytes, ty) = py.detach(|| -> PyResult<(Vec<u8>, String)> {
            let col = self.ds.column(name).map_err(store_error)?;
            let ty = col.var().ty;
            let rows = col.rows();
            let w = ty.width();
            let mut out = vec![0u8; rows * w];
            // Stretches of stripes decoded (and checked) on every core,
            // each into its own part of the output.
            out.par_chunks_mut(SPAN * w)
                .enumerate()
                .try_for_each(|(k, dst)| -> PyResult<()> {
                    let mut buf = Vec::new();
                    let view = col
                        .rows_view(k * SPAN, dst.len() / w, &mut buf)
                        .map_err(store_error)?;
                    dst.copy_from_slice(view.bytes());
                    Ok(())
                })?;
            Ok((out, ty.name().to_string()))
        })?;
        Ok((PyBytes::new(py, &bytes), ty))
    }

    /// The records that pass a filter: a bitmap (little-endian u64 words,
    /// bit `r % 64` of word `r / 64` for record `r`) and how many pass.
    fn select<'py>(&self, py: Python<'py>, filter: &str) -> PyResult<(Bound<'py, PyBytes>, u64)> {
        let (bits, n) = py.detach(|| -> PyResult<(Vec<u64>, u64)> {
            let terms = microtab_engine::parse_filter(filter).map_err(engine_error)?;
            microtab_engine::subset::selection(&self.ds, &terms).map_err(engine_error)
        })?;
        let bytes: Vec<u8> = bits.iter().flat_map(|w| w.to_le_bytes()).collect();
        Ok((PyBytes::new(py, &bytes), n))
    }

    /// The variables `names` of the records that pass `filter` (all when
    /// `None`) and are chosen by `mask` (a bitmap's bytes, bit `r % 8` of
    /// byte `r / 8` for record `r`; a row range is a mask whose stripes
    /// outside it are not read), decoded on every core (`wide`:
    /// `i64`/`f64`, else the stored types): one entry per variable and the
    /// number of records. All of one generation: the columns are opened
    /// and the dictionaries read before anything is decoded, the filter
    /// is of the same snapshot.
    #[pyo3(signature = (names, filter=None, wide=true, mask=None))]
    fn frame(
        &self,
        py: Python<'_>,
        names: Vec<String>,
        filter: Option<String>,
        wide: bool,
        mask: Option<Vec<u8>>,
    ) -> PyResult<(Vec<FrameColumn>, usize)> {
        type Out = (String, Decoded, Option<Vec<String>>);
        let (cols, n) = py.detach(|| -> PyResult<(Vec<Out>, usize)> {
            let ds = &self.ds;
            let cols = names
                .iter()
                .map(|n| ds.column(n))
                .collect::<microtab_store::Result<Vec<Column>>>()
                .map_err(store_error)?;
            let dicts = cols
                .iter()
                .map(|c| {
                    (c.var().kind == Kind::String)
                        .then(|| ds.dictionary(c.var()))
                        .transpose()
                })
                .collect::<microtab_store::Result<Vec<_>>>()
                .map_err(store_error)?;
            let rows = ds.rows() as usize;
            let mut terms = match filter.as_deref().map(str::trim) {
                Some(f) if !f.is_empty() => {
                    microtab_engine::parse_filter(f).map_err(engine_error)?
                }
                _ => Vec::new(),
            };
            terms.extend(
                mask.as_deref()
                    .map(|m| crate::common::selection_term(m, rows as u64))
                    .transpose()?,
            );
            let keep = if terms.is_empty() {
                None
            } else {
                let (bits, _) =
                    microtab_engine::subset::selection(ds, &terms).map_err(engine_error)?;
                Some(Keep::new(bits, rows))
            };
            let n = keep.as_ref().map_or(rows, Keep::kept);
            let decoded = cols
                .par_iter()
                .map(|c| decode_column(c, keep.as_ref(), wide))
                .collect::<microtab_store::Result<Vec<Decoded>>>()
                .map_err(store_error)?;
            let out = cols
                .iter()
                .zip(decoded)
                .zip(dicts)
                .map(|((c, d), dict)| (c.var().name.clone(), d, dict))
                .collect();
            Ok((out, n))
        })?;
        let cols = cols
            .into_iter()
            .map(|(name, d, dict)| -> PyResult<FrameColumn> {
                Ok((
                    name,
                    Py::new(py, d.values)?,
                    d.ty.to_string(),
                    Py::new(py, d.mask)?,
                    d.missing,
                    dict,
                ))
            })
            .collect::<PyResult<Vec<_>>>()?;
        Ok((cols, n))
    }
}

/// The type a stored Arrow type widens to (`None`: kept).
fn wide_type(t: &DataType) -> Option<DataType> {
    match t {
        DataType::UInt8
        | DataType::Int8
        | DataType::UInt16
        | DataType::Int16
        | DataType::UInt32
        | DataType::Int32 => Some(DataType::Int64),
        DataType::Float32 => Some(DataType::Float64),
        _ => None,
    }
}

/// `a` widened to `i64`/`f64` (exactly: every `f32` is an `f64`), nulls
/// kept; other arrays (already wide, decimals, dictionaries) as they are.
fn widen(a: &ArrayRef) -> ArrayRef {
    macro_rules! to {
        ($from:ty, $to:ty, $t:ty) => {
            Arc::new(a.as_primitive::<$from>().unary::<_, $to>(|x| x as $t)) as ArrayRef
        };
    }
    match a.data_type() {
        DataType::UInt8 => to!(UInt8Type, Int64Type, i64),
        DataType::Int8 => to!(Int8Type, Int64Type, i64),
        DataType::UInt16 => to!(UInt16Type, Int64Type, i64),
        DataType::Int16 => to!(Int16Type, Int64Type, i64),
        DataType::UInt32 => to!(UInt32Type, Int64Type, i64),
        DataType::Int32 => to!(Int32Type, Int64Type, i64),
        DataType::Float32 => to!(Float32Type, Float64Type, f64),
        _ => a.clone(),
    }
}

/// A record batch stream with its narrow integer and `f32` columns
/// widened, batch by batch as the consumer reads (columns on every core).
pub struct Widened<R> {
    inner: R,
    schema: SchemaRef,
}

impl<R: RecordBatchReader> Widened<R> {
    /// Wraps `inner`.
    pub fn new(inner: R) -> Self {
        let s = inner.schema();
        let fields: Vec<Field> = s
            .fields()
            .iter()
            .map(|f| match wide_type(f.data_type()) {
                Some(t) => f.as_ref().clone().with_data_type(t),
                None => f.as_ref().clone(),
            })
            .collect();
        let schema = Arc::new(Schema::new_with_metadata(fields, s.metadata().clone()));
        Widened { inner, schema }
    }
}

impl<R: RecordBatchReader> Iterator for Widened<R> {
    type Item = Result<RecordBatch, ArrowError>;

    fn next(&mut self) -> Option<Self::Item> {
        let b = match self.inner.next()? {
            Ok(b) => b,
            Err(e) => return Some(Err(e)),
        };
        let cols: Vec<ArrayRef> = b.columns().par_iter().map(widen).collect();
        let opts = RecordBatchOptions::new().with_row_count(Some(b.num_rows()));
        Some(RecordBatch::try_new_with_options(
            self.schema.clone(),
            cols,
            &opts,
        ))
    }
}

impl<R: RecordBatchReader> RecordBatchReader for Widened<R> {
    fn schema(&self) -> SchemaRef {
        self.schema.clone()
    }
}

/// Registers the frame classes.
pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<Buffer>()?;
    m.add_class::<Snapshot>()?;
    Ok(())
}
