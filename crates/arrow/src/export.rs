//! Dataset → Arrow record batches → Parquet.

use crate::meta::{Meta, VarMeta, METADATA_KEY};
use crate::{Error, Result};
use arrow_array::types::{
    Float32Type, Float64Type, Int16Type, Int32Type, Int64Type, Int8Type, UInt16Type, UInt32Type,
    UInt8Type,
};
use arrow_array::{
    ArrayRef, ArrowPrimitiveType, Decimal128Array, DictionaryArray, PrimitiveArray, RecordBatch,
    RecordBatchReader, StringArray,
};
use arrow_buffer::{NullBuffer, ScalarBuffer};
use arrow_schema::{ArrowError, DataType, Field, Schema, SchemaRef};
use microtab_store::codec::display_int;
use microtab_store::{match_column, Column, Dataset, Kind, NativeType, Variable, STRIPE_ROWS};
use rayon::prelude::*;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// What to export and how.
#[derive(Debug, Clone)]
pub struct ExportOptions {
    /// The variables, in this order (`None`: all, in the dataset's order).
    pub columns: Option<Vec<String>>,
    /// Only the records that pass this filter (the query grammar's).
    pub filter: Option<String>,
    /// Variables with value labels as dictionary arrays of their labels
    /// (a value without a label keeps its text) instead of their codes.
    pub labels: bool,
    /// User-missing codes kept as values (IPUMS style) instead of nulls.
    /// Off by default: a reader that does not know the codes would
    /// otherwise average `9999999` into an income.
    pub keep_missing_codes: bool,
    /// Implied decimals as exact `Decimal128` instead of doubles.
    pub exact_decimals: bool,
    /// Records per batch (a Parquet row group); rounded up to a multiple
    /// of the store's stripe.
    pub batch_rows: usize,
    /// Only the records the front end chose besides the filter (a
    /// boolean mask: [`Term::rows`](microtab_engine::Term::rows)).
    pub selection: Option<microtab_engine::Term>,
}

/// The records' filter as the file's metadata names it: its text, and
/// the selection's.
fn shown_filter(opts: &ExportOptions) -> Option<String> {
    let text = opts.filter.clone().filter(|f| !f.trim().is_empty());
    let sel = opts.selection.as_ref().map(|t| t.text.clone());
    match (text, sel) {
        (Some(f), Some(s)) => Some(format!("{f} and {s}")),
        (f, s) => f.or(s),
    }
}

impl Default for ExportOptions {
    fn default() -> Self {
        ExportOptions {
            columns: None,
            filter: None,
            labels: false,
            keep_missing_codes: false,
            exact_decimals: false,
            batch_rows: 1 << 20,
            selection: None,
        }
    }
}

/// How one variable becomes an Arrow array.
enum Plan {
    /// Integers without decimals: the stored type.
    Ints,
    /// Integers with implied decimals as doubles.
    Scaled(f64),
    /// Integers with implied decimals as `Decimal128(precision, scale)`.
    Decimal(u8, i8),
    /// Floats as stored.
    Floats,
    /// Text: dictionary positions into the variable's dictionary.
    Text(ArrayRef),
    /// Labelled values: stored code → position in `cats`.
    Labels {
        cats: ArrayRef,
        index: HashMap<i64, i32>,
    },
}

struct Col {
    var: Variable,
    col: Column,
    plan: Plan,
    /// Stored values that are missing (the null code, and the
    /// user-missing codes unless kept).
    missing_i: Vec<i64>,
    missing_f: Vec<f64>,
}

/// A dataset's records as Arrow record batches: an iterator and a
/// [`RecordBatchReader`] (hand it to `FFI_ArrowArrayStream` for Python,
/// or to a Parquet writer).
pub struct Batches {
    cols: Vec<Col>,
    schema: SchemaRef,
    selection: Option<Vec<u64>>,
    rows: usize,
    pos: usize,
    batch_rows: usize,
    selected: u64,
    meta: Meta,
    /// Why the dataset's design is not in the metadata, when it has one.
    design_note: Option<String>,
}

impl Batches {
    /// The records the batches hold (after the filter).
    pub fn selected_rows(&self) -> u64 {
        self.selected
    }

    /// The metadata document stored under [`METADATA_KEY`].
    pub fn meta(&self) -> &Meta {
        &self.meta
    }
}

fn input(ds: &Dataset, reason: String) -> Error {
    Error::Request {
        path: ds.dir().to_path_buf(),
        reason,
    }
}

/// The digits of `|x|`.
fn digits(x: i64) -> u8 {
    let mut n = x.unsigned_abs();
    let mut d = 1;
    while n >= 10 {
        n /= 10;
        d += 1;
    }
    d
}

/// Every distinct stored value of an integer column.
fn distinct(col: &Column) -> Result<Vec<i64>> {
    let rows = col.rows();
    let step = STRIPE_ROWS * 16;
    let parts: Vec<std::collections::BTreeSet<i64>> = (0..rows.div_ceil(step))
        .into_par_iter()
        .map(|k| {
            let start = k * step;
            let n = step.min(rows - start);
            let mut buf = Vec::new();
            let v = col.rows_view(start, n, &mut buf)?;
            let mut s = std::collections::BTreeSet::new();
            let mut last = None;
            for i in 0..v.len() {
                let x = v.get_i64(i);
                if last != Some(x) {
                    s.insert(x);
                    last = Some(x);
                }
            }
            Ok(s)
        })
        .collect::<Result<_>>()?;
    let mut all = std::collections::BTreeSet::new();
    for p in parts {
        all.extend(p);
    }
    Ok(all.into_iter().collect())
}

/// Plans the export of `ds`: the variables, their Arrow types and the
/// records the filter keeps.
pub fn batches(ds: &Dataset, opts: &ExportOptions) -> Result<Batches> {
    let vars: Vec<Variable> = match &opts.columns {
        None => ds.manifest().variables.clone(),
        Some(names) if names.is_empty() => {
            return Err(input(ds, "no variables to export were named".into()));
        }
        Some(names) => {
            let mut v: Vec<Variable> = Vec::new();
            for n in names {
                let var = ds.variable(n)?.clone();
                if v.iter().any(|x| x.name == var.name) {
                    return Err(input(ds, format!("variable {} is named twice", var.name)));
                }
                v.push(var);
            }
            v
        }
    };
    let mut terms = match &opts.filter {
        Some(f) if !f.trim().is_empty() => microtab_engine::parse_filter(f)?,
        _ => Vec::new(),
    };
    terms.extend(opts.selection.clone());
    let (selection, selected) = if terms.is_empty() {
        (None, ds.rows())
    } else {
        let (bits, n) = microtab_engine::subset::selection(ds, &terms)?;
        (Some(bits), n)
    };
    let mut fields = Vec::new();
    let mut cols = Vec::new();
    let mut metas = Vec::new();
    for var in vars {
        let col = ds.column(&var.name)?;
        let dict = if var.kind == Kind::String {
            ds.dictionary(&var)?
        } else {
            Vec::new()
        };
        metas.push(VarMeta::of(&var, &dict));
        let mut missing_i: Vec<i64> = var
            .null_code
            .filter(|_| var.nulls > 0)
            .into_iter()
            .collect();
        let mut missing_f = Vec::new();
        if !opts.keep_missing_codes {
            missing_i.extend(var.missing_codes.iter().map(|&c| c as i64));
            missing_f.extend(var.missing_codes.iter().copied());
        }
        // Floats keep their values (labels of floats stay in the metadata).
        let labelled = opts.labels && !var.value_labels.is_empty() && var.kind != Kind::Float;
        let (plan, ty) = if labelled {
            // Categories in code order: every labelled value and every
            // value present (a value without a label keeps its text), one
            // category per distinct label. Keys are the stored integers
            // (dictionary positions for text), exact at any size.
            let mut keyed: Vec<(i64, String)> = Vec::new();
            if var.kind == Kind::String {
                for (i, s) in dict.iter().enumerate() {
                    keyed.push((i as i64, s.clone()));
                }
            } else {
                for x in distinct(&col)? {
                    if !missing_i.contains(&x) {
                        keyed.push((x, display_int(var.decimals, x)));
                    }
                }
                let present: std::collections::HashSet<String> =
                    keyed.iter().map(|(_, t)| t.clone()).collect();
                for k in var.value_labels.keys() {
                    if present.contains(k) {
                        continue;
                    }
                    // A labelled value not in the data: its stored code,
                    // exact (parsed as a decimal, not through a double).
                    let code = microtab_store::codec::parse_exact(k.trim()).and_then(|(m, d)| {
                        microtab_store::codec::rescale_exact(m, d, var.decimals)
                    });
                    if let Some(c) = code {
                        if !missing_i.contains(&c) && display_int(var.decimals, c) == *k {
                            keyed.push((c, k.clone()));
                        }
                    }
                }
            }
            keyed.sort_by_key(|a| a.0);
            let mut cats: Vec<String> = Vec::new();
            let mut pos: HashMap<String, i32> = HashMap::new();
            let mut index = HashMap::new();
            for (code, text) in keyed {
                let shown = var.value_labels.get(&text).cloned().unwrap_or(text);
                let p = *pos.entry(shown.clone()).or_insert_with(|| {
                    cats.push(shown);
                    cats.len() as i32 - 1
                });
                index.insert(code, p);
            }
            let cats: ArrayRef = Arc::new(StringArray::from(cats));
            (
                Plan::Labels { cats, index },
                DataType::Dictionary(Box::new(DataType::Int32), Box::new(DataType::Utf8)),
            )
        } else {
            match var.kind {
                Kind::String => (
                    Plan::Text(Arc::new(StringArray::from(dict.clone()))),
                    DataType::Dictionary(Box::new(DataType::Int32), Box::new(DataType::Utf8)),
                ),
                Kind::Float => (
                    Plan::Floats,
                    if var.ty == microtab_store::PhysType::F32 {
                        DataType::Float32
                    } else {
                        DataType::Float64
                    },
                ),
                Kind::Int if var.decimals == 0 => (Plan::Ints, arrow_type(var.ty)),
                Kind::Int if opts.exact_decimals => {
                    let d = var.decimals as u8;
                    if d > 38 {
                        return Err(input(ds, format!("{}: {d} decimals", var.name)));
                    }
                    let lo = var.min.map(|m| m.as_f64() as i64).unwrap_or(0);
                    let hi = var.max.map(|m| m.as_f64() as i64).unwrap_or(0);
                    let keep = if opts.keep_missing_codes {
                        var.missing_codes.iter().map(|&c| digits(c as i64)).max()
                    } else {
                        None
                    };
                    let p = digits(lo)
                        .max(digits(hi))
                        .max(keep.unwrap_or(1))
                        .max(d + 1)
                        .min(38);
                    (Plan::Decimal(p, d as i8), DataType::Decimal128(p, d as i8))
                }
                Kind::Int => (Plan::Scaled(var.scale()), DataType::Float64),
            }
        };
        let mut md = HashMap::new();
        if let Some(l) = &var.label {
            md.insert("label".to_string(), l.clone());
        }
        fields.push(Field::new(&var.name, ty, true).with_metadata(md));
        cols.push(Col {
            var,
            col,
            plan,
            missing_i,
            missing_f,
        });
    }
    let names: Vec<String> = cols.iter().map(|c| c.var.name.clone()).collect();
    let (design, design_note) = microtab_engine::subset::carried_design(ds, &names, selected);
    let meta = Meta {
        format: "microtab".into(),
        version: 1,
        source_rows: ds.rows(),
        rows: selected,
        filter: shown_filter(opts),
        missing: if opts.keep_missing_codes {
            "codes"
        } else {
            "null"
        }
        .into(),
        decimals: if opts.exact_decimals {
            "decimal"
        } else {
            "float"
        }
        .into(),
        labels: opts.labels,
        variables: metas,
        design,
    };
    let json = serde_json::to_string(&meta).expect("metadata serializes");
    let schema = Arc::new(Schema::new_with_metadata(
        fields,
        HashMap::from([(METADATA_KEY.to_string(), json)]),
    ));
    let batch_rows = opts.batch_rows.max(1).div_ceil(STRIPE_ROWS) * STRIPE_ROWS;
    Ok(Batches {
        cols,
        schema,
        selection,
        rows: ds.rows() as usize,
        pos: 0,
        batch_rows,
        selected,
        meta,
        design_note,
    })
}

fn arrow_type(ty: microtab_store::PhysType) -> DataType {
    use microtab_store::PhysType as P;
    match ty {
        P::U8 => DataType::UInt8,
        P::I8 => DataType::Int8,
        P::U16 => DataType::UInt16,
        P::I16 => DataType::Int16,
        P::U32 => DataType::UInt32,
        P::I32 => DataType::Int32,
        P::I64 => DataType::Int64,
        P::F32 => DataType::Float32,
        P::F64 => DataType::Float64,
    }
}

/// The rows of one span the selection keeps, as offsets into the span.
fn picked(sel: &[u64], start: usize, n: usize) -> Vec<u32> {
    let mut out = Vec::new();
    for r in start..start + n {
        if sel[r / 64] >> (r % 64) & 1 == 1 {
            out.push((r - start) as u32);
        }
    }
    out
}

fn nulls(valid: Vec<bool>) -> Option<NullBuffer> {
    // Empty: the column has no missing values (see `copy_values`).
    if valid.iter().all(|&v| v) {
        None
    } else {
        Some(NullBuffer::from(valid))
    }
}

/// The span's values (all, or those `pick` names) as they are, for a
/// column without missing values: one copy, no validity.
fn copy_values<T: Copy>(v: &[T], pick: Option<&[u32]>) -> (Vec<T>, Vec<bool>) {
    match pick {
        None => (v.to_vec(), Vec::new()),
        Some(p) => (p.iter().map(|&i| v[i as usize]).collect(), Vec::new()),
    }
}

/// Values of the span (all, or those `pick` names) mapped through `f`,
/// with their validity.
fn map_values<T: NativeType, O>(
    v: &[T],
    pick: Option<&[u32]>,
    mut f: impl FnMut(T) -> (O, bool),
) -> (Vec<O>, Vec<bool>) {
    let n = pick.map_or(v.len(), <[u32]>::len);
    let mut out = Vec::with_capacity(n);
    let mut valid = Vec::with_capacity(n);
    let mut push = |x: T| {
        let (o, ok) = f(x);
        out.push(o);
        valid.push(ok);
    };
    match pick {
        None => v.iter().for_each(|&x| push(x)),
        Some(p) => p.iter().for_each(|&i| push(v[i as usize])),
    }
    (out, valid)
}

/// The Arrow type of each stored type.
trait ToArrow: NativeType {
    type A: ArrowPrimitiveType<Native = Self>;
}

macro_rules! to_arrow {
    ($($t:ty => $a:ty),*) => {$(
        impl ToArrow for $t {
            type A = $a;
        }
    )*};
}
to_arrow!(
    u8 => UInt8Type, i8 => Int8Type, u16 => UInt16Type, i16 => Int16Type, u32 => UInt32Type,
    i32 => Int32Type, i64 => Int64Type, f32 => Float32Type, f64 => Float64Type
);

fn prim<A: ArrowPrimitiveType>(vals: Vec<A::Native>, valid: Vec<bool>) -> ArrayRef {
    Arc::new(PrimitiveArray::<A>::new(
        ScalarBuffer::from(vals),
        nulls(valid),
    ))
}

impl Col {
    // The macros cast every stored integer type to i64, i64 included.
    #[allow(clippy::unnecessary_cast)]
    fn array(&self, start: usize, n: usize, pick: Option<&[u32]>) -> Result<ArrayRef> {
        let mut buf = Vec::new();
        let view = self.col.rows_view(start, n, &mut buf)?;
        let mi = &self.missing_i;
        let mf = &self.missing_f;
        // No missing values at all: the values are copied as they are.
        let complete = mi.is_empty() && mf.is_empty() && self.var.nulls == 0;
        // The values as stored, valid where `$ok` holds of `$x`.
        macro_rules! as_stored {
            ($v:expr, $T:ty, |$x:ident| $ok:expr) => {{
                let (vals, valid) = if complete {
                    copy_values($v, pick)
                } else {
                    map_values($v, pick, |$x: $T| ($x, $ok))
                };
                prim::<<$T as ToArrow>::A>(vals, valid)
            }};
        }
        macro_rules! each_int {
            ($view:expr, |$v:ident| $body:expr) => {
                match_column!($view, |$v| ints => $body, floats => {
                    unreachable!("integer plan over a float column")
                })
            };
        }
        Ok(match &self.plan {
            Plan::Ints => match_column!(view, |v: T| ints => {
                as_stored!(v, T, |x| !mi.contains(&(x as i64)))
            }, floats => unreachable!("integer plan")),
            Plan::Scaled(scale) => each_int!(view, |v| {
                let (vals, valid) = map_values(v, pick, |x| {
                    let x = x as i64;
                    (x as f64 / scale, !mi.contains(&x))
                });
                prim::<Float64Type>(vals, valid)
            }),
            Plan::Decimal(p, s) => each_int!(view, |v| {
                let (vals, valid) = map_values(v, pick, |x| {
                    let x = x as i64;
                    (x as i128, !mi.contains(&x))
                });
                let a = Decimal128Array::new(ScalarBuffer::from(vals), nulls(valid))
                    .with_precision_and_scale(*p, *s)?;
                Arc::new(a) as ArrayRef
            }),
            Plan::Floats => match_column!(view, |v: T| ints => {
                unreachable!("float plan over an integer column")
            }, floats => as_stored!(v, T, |x| !(x.is_nan() || mf.contains(&(x as f64))))),
            Plan::Text(dict) => each_int!(view, |v| {
                let (keys, valid) = map_values(v, pick, |x| {
                    let x = x as i64;
                    (x as i32, !mi.contains(&x))
                });
                let keys = PrimitiveArray::<Int32Type>::new(ScalarBuffer::from(keys), nulls(valid));
                Arc::new(DictionaryArray::<Int32Type>::try_new(keys, dict.clone())?) as ArrayRef
            }),
            Plan::Labels { cats, index } => each_int!(view, |v| {
                let (keys, valid) = map_values(v, pick, |x| {
                    let x = x as i64;
                    match index.get(&x) {
                        Some(&k) if !mi.contains(&x) => (k, true),
                        _ => (0, false),
                    }
                });
                let keys = PrimitiveArray::<Int32Type>::new(ScalarBuffer::from(keys), nulls(valid));
                Arc::new(DictionaryArray::<Int32Type>::try_new(keys, cats.clone())?) as ArrayRef
            }),
        })
    }
}

impl Iterator for Batches {
    type Item = std::result::Result<RecordBatch, ArrowError>;

    fn next(&mut self) -> Option<Self::Item> {
        self.next_batch().map(|r| {
            r.map_err(|e| match e {
                Error::Arrow(a) => a,
                e => ArrowError::ExternalError(Box::new(e)),
            })
        })
    }
}

impl Batches {
    /// The next batch, with microtab's own error (a damaged column is a
    /// [`microtab_store::Error::Corrupt`]).
    pub fn next_batch(&mut self) -> Option<Result<RecordBatch>> {
        if self.pos >= self.rows {
            return None;
        }
        // A span of whole stripes; under a filter it grows until it holds
        // a batch's worth of selected records (at most 16 batches long),
        // so that row groups are not tiny.
        let start = self.pos;
        let mut end = (start + self.batch_rows).min(self.rows);
        if let Some(sel) = &self.selection {
            let count =
                |a: usize, b: usize| (a..b).filter(|&r| sel[r / 64] >> (r % 64) & 1 == 1).count();
            let mut have = count(start, end);
            while have < self.batch_rows && end < self.rows && end - start < 16 * self.batch_rows {
                let next = (end + STRIPE_ROWS * 16).min(self.rows);
                have += count(end, next);
                end = next;
            }
        }
        self.pos = end;
        let n = end - start;
        let pick = self.selection.as_ref().map(|s| picked(s, start, n));
        let arrays: Result<Vec<ArrayRef>> = self
            .cols
            .par_iter()
            .map(|c| c.array(start, n, pick.as_deref()))
            .collect();
        let arrays = match arrays {
            Ok(a) => a,
            Err(e) => return Some(Err(e)),
        };
        let rows = pick.as_ref().map_or(n, Vec::len);
        let opts = arrow_array::RecordBatchOptions::new().with_row_count(Some(rows));
        Some(
            RecordBatch::try_new_with_options(self.schema.clone(), arrays, &opts)
                .map_err(Error::from),
        )
    }
}

impl RecordBatchReader for Batches {
    fn schema(&self) -> SchemaRef {
        self.schema.clone()
    }
}

/// Parquet compression of an export.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Compression {
    /// Snappy (DuckDB's and pyarrow's default).
    #[default]
    Snappy,
    /// Zstandard (level 3; Polars' default).
    Zstd,
    /// LZ4 (raw).
    Lz4,
    /// Gzip.
    Gzip,
    /// None.
    None,
}

impl std::str::FromStr for Compression {
    type Err = String;

    fn from_str(s: &str) -> std::result::Result<Self, String> {
        Ok(match s.to_ascii_lowercase().as_str() {
            "snappy" => Compression::Snappy,
            "zstd" => Compression::Zstd,
            "lz4" => Compression::Lz4,
            "gzip" => Compression::Gzip,
            "none" | "uncompressed" => Compression::None,
            _ => {
                return Err(format!(
                    "unknown compression '{s}': expected snappy, zstd, lz4, gzip or none"
                ))
            }
        })
    }
}

/// What an export wrote.
#[derive(Debug, Clone)]
pub struct ExportSummary {
    /// The file.
    pub path: PathBuf,
    /// Records written.
    pub rows: u64,
    /// Variables written.
    pub variables: usize,
    /// Size of the file.
    pub bytes: u64,
    /// Whether the dataset's survey design went into the metadata, and
    /// why not when it did not.
    pub design_note: Option<String>,
}

/// Writes the export of `ds` as the Parquet file `out` (replaced only
/// when `force` is set): one row group per batch, the columns of each
/// encoded in parallel, written to a temporary file beside `out` and
/// renamed into place, so a failed or killed export leaves no partial
/// file.
pub fn write_parquet(
    ds: &Dataset,
    out: &Path,
    force: bool,
    opts: &ExportOptions,
    compression: Compression,
) -> Result<ExportSummary> {
    use parquet::arrow::arrow_writer::{compute_leaves, ArrowWriter};
    use parquet::basic::{Compression as C, ZstdLevel};
    use parquet::file::metadata::KeyValue;
    use parquet::file::properties::WriterProperties;

    let ext = out
        .extension()
        .map(|e| e.to_string_lossy().to_ascii_lowercase())
        .unwrap_or_default();
    if matches!(
        ext.as_str(),
        "csv" | "tsv" | "txt" | "json" | "mtab" | "dat" | "gz"
    ) {
        return Err(Error::Input {
            path: out.to_path_buf(),
            reason: format!(
                "export writes Parquet or Stata files, not .{ext} (name the file .parquet or .dta; a subset writes CSV)"
            ),
        });
    }
    let dir = match out.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    };
    if let (Ok(d), Ok(src)) = (dir.canonicalize(), ds.dir().canonicalize()) {
        if d.starts_with(&src) {
            return Err(Error::Input {
                path: out.to_path_buf(),
                reason: format!(
                    "is inside the dataset {} being exported: write it elsewhere",
                    ds.dir().display()
                ),
            });
        }
    }
    if out.is_dir() {
        return Err(Error::Input {
            path: out.to_path_buf(),
            reason: "is a directory: name a file".into(),
        });
    }
    if out.exists() && !force {
        return Err(Error::Exists {
            path: out.to_path_buf(),
        });
    }
    let batches = batches(ds, opts)?;
    let schema = batches.schema.clone();
    let variables = batches.cols.len();
    let design_note = batches.design_note.clone();
    let json = serde_json::to_string(&batches.meta).expect("metadata serializes");
    let props = WriterProperties::builder()
        .set_compression(match compression {
            Compression::Snappy => C::SNAPPY,
            Compression::Zstd => C::ZSTD(ZstdLevel::try_new(3).expect("level 3")),
            Compression::Lz4 => C::LZ4_RAW,
            Compression::Gzip => C::GZIP(Default::default()),
            Compression::None => C::UNCOMPRESSED,
        })
        .set_max_row_group_row_count(Some(usize::MAX))
        .set_created_by(format!("microtab {}", env!("CARGO_PKG_VERSION")))
        .set_key_value_metadata(Some(vec![KeyValue::new(METADATA_KEY.to_string(), json)]))
        .build();
    let tmp = tempfile_in(&dir, out)?;
    let pq = |error| Error::Parquet {
        path: out.to_path_buf(),
        error,
    };
    let io = |error| Error::Io {
        path: out.to_path_buf(),
        error,
    };
    let file = std::fs::File::create(&tmp.0).map_err(io)?;
    let writer = std::io::BufWriter::with_capacity(8 << 20, file);
    let w = ArrowWriter::try_new(writer, schema.clone(), Some(props)).map_err(pq)?;
    let (mut fw, factory) = w.into_serialized_writer().map_err(pq)?;
    let mut rows = 0u64;
    let mut batches = batches;
    let mut g = 0;
    while let Some(batch) = batches.next_batch() {
        let batch = batch?;
        if batch.num_rows() == 0 {
            continue;
        }
        rows += batch.num_rows() as u64;
        let writers = factory.create_column_writers(g).map_err(pq)?;
        let chunks: Vec<_> = writers
            .into_par_iter()
            .zip(batch.columns().par_iter().zip(schema.fields().par_iter()))
            .map(|(mut w, (arr, field))| {
                for leaf in compute_leaves(field, arr)? {
                    w.write(&leaf)?;
                }
                w.close()
            })
            .collect::<std::result::Result<_, _>>()
            .map_err(pq)?;
        let mut rg = fw.next_row_group().map_err(pq)?;
        for c in chunks {
            c.append_to_row_group(&mut rg).map_err(pq)?;
        }
        rg.close().map_err(pq)?;
        g += 1;
    }
    let inner = fw.into_inner().map_err(pq)?;
    let file = inner.into_inner().map_err(|e| io(e.into_error()))?;
    file.sync_all().map_err(io)?;
    drop(file);
    std::fs::rename(&tmp.0, out).map_err(io)?;
    std::mem::forget(tmp);
    let bytes = std::fs::metadata(out).map(|m| m.len()).unwrap_or(0);
    Ok(ExportSummary {
        path: out.to_path_buf(),
        rows,
        variables,
        bytes,
        design_note,
    })
}

/// A temporary file's path beside `out`, removed on drop unless renamed.
struct TempPath(PathBuf);

impl Drop for TempPath {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

/// The temporary file of this export beside `out`; temporary files of
/// earlier exports to `out` whose process is gone (killed) are removed.
fn tempfile_in(dir: &Path, out: &Path) -> Result<TempPath> {
    let name = out
        .file_name()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_else(|| "export".into());
    let prefix = format!(".{name}.");
    if let Ok(rd) = std::fs::read_dir(dir) {
        for e in rd.flatten() {
            let f = e.file_name().to_string_lossy().into_owned();
            let pid = f
                .strip_prefix(&prefix)
                .and_then(|r| r.strip_suffix(".tmp"))
                .and_then(|p| p.parse::<u32>().ok());
            if let Some(pid) = pid {
                if !microtab_io::sys::process_alive(pid) {
                    let _ = std::fs::remove_file(e.path());
                }
            }
        }
    }
    let p = dir.join(format!("{prefix}{}.tmp", std::process::id()));
    Ok(TempPath(p))
}
