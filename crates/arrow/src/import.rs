//! Parquet → dataset.

use crate::meta::{Meta, VarMeta, METADATA_KEY};
use crate::{Error, Result};
use arrow_array::cast::AsArray;
use arrow_array::types::*;
use arrow_array::{Array, ArrayRef, ArrowPrimitiveType, RecordBatch};
use arrow_schema::DataType;
use microtab_ingest::{Chunk, Codebook, ColumnarImport, ImportSummary};
use microtab_store::{Kind, Variable};
use std::collections::HashMap;
use std::path::Path;

/// How to import a Parquet file.
#[derive(Default)]
pub struct ImportOptions {
    /// A DDI codebook (IPUMS) for labels, missing codes and implied
    /// decimals, as for a CSV file (ipumspy's Parquet carries none).
    pub codebook: Option<Codebook>,
    /// No bit-packing.
    pub plain: bool,
}

/// A variable's exported metadata that still applies to its column.
struct Applied {
    vm: VarMeta,
    /// Exported as its value labels (now text).
    labelled: bool,
    /// Its missing codes as the column shows them (text columns).
    shown: Vec<String>,
}

/// Whether a column still has the type an export of `vm` gives it.
fn exported_type(vm: &VarMeta, ty: &DataType, m: &Meta) -> bool {
    use DataType as D;
    let base = match ty {
        D::Dictionary(_, v) => v.as_ref(),
        t => t,
    };
    let text = matches!(base, D::Utf8 | D::LargeUtf8 | D::Utf8View);
    if m.labels && vm.kind != Kind::String && !vm.value_labels.is_empty() {
        return text;
    }
    match vm.kind {
        Kind::String => text,
        Kind::Float => matches!(ty, D::Float32 | D::Float64),
        Kind::Int if vm.decimals == 0 => matches!(
            ty,
            D::Int8 | D::Int16 | D::Int32 | D::Int64 | D::UInt8 | D::UInt16 | D::UInt32 | D::UInt64
        ),
        Kind::Int => match ty {
            D::Float64 => m.decimals == "float",
            D::Decimal128(_, s) => m.decimals == "decimal" && *s as i64 == vm.decimals as i64,
            _ => false,
        },
    }
}

/// How one Parquet column becomes a microtab column.
#[derive(Clone, Copy, Debug)]
enum Conv {
    /// Integers, booleans, decimals (with their scale).
    Int(u32),
    /// Floating-point numbers that are exact decimals with `d` places
    /// (a microtab export's implied decimals, or a DDI's), back to scaled
    /// integers — refused where a value is not.
    FloatToInt(u32),
    /// Floating-point numbers.
    Float,
    /// Text (strings, dictionaries of strings, dates as ISO text).
    Text,
    /// A column of nulls only.
    Null,
}

fn conv_of(name: &str, ty: &DataType, decimals: Option<u32>) -> std::result::Result<Conv, String> {
    use DataType as D;
    Ok(match ty {
        D::Null => Conv::Null,
        D::Boolean
        | D::Int8
        | D::Int16
        | D::Int32
        | D::Int64
        | D::UInt8
        | D::UInt16
        | D::UInt32
        | D::UInt64 => Conv::Int(0),
        D::Decimal32(_, s) | D::Decimal64(_, s) | D::Decimal128(_, s) | D::Decimal256(_, s) => {
            if !(0..=18).contains(s) {
                return Err(format!(
                    "column {name}: a decimal with scale {s}; microtab keeps 0 to 18 decimals (cast it to double first)"
                ));
            }
            Conv::Int(*s as u32)
        }
        D::Float16 | D::Float32 | D::Float64 => match decimals {
            Some(d) if d > 0 => Conv::FloatToInt(d),
            _ => Conv::Float,
        },
        D::Utf8 | D::LargeUtf8 | D::Utf8View | D::Date32 | D::Date64 => Conv::Text,
        D::Dictionary(_, v) if matches!(**v, D::Utf8 | D::LargeUtf8 | D::Utf8View) => Conv::Text,
        D::Dictionary(_, v) => conv_of(name, v, decimals)?,
        other => {
            return Err(format!(
                "column {name} has type {other}, which microtab cannot store (numbers, text, decimals, booleans and dates are imported); cast it to one of those first"
            ))
        }
    })
}

use microtab_ingest::iso_date;

struct Ctx<'a> {
    path: &'a Path,
    name: &'a str,
    /// 0-based record number of the batch's first record.
    first: u64,
}

impl Ctx<'_> {
    fn bad(&self, row: usize, what: String) -> Error {
        Error::Input {
            path: self.path.to_path_buf(),
            reason: format!(
                "record {}, column {}: {what}",
                self.first + row as u64 + 1,
                self.name
            ),
        }
    }
}

fn ints<T: ArrowPrimitiveType>(a: &ArrayRef, cx: &Ctx) -> Result<Vec<Option<i64>>>
where
    T::Native: TryInto<i64> + std::fmt::Display,
{
    let a = a.as_primitive::<T>();
    let mut out = Vec::with_capacity(a.len());
    for i in 0..a.len() {
        out.push(if a.is_null(i) {
            None
        } else {
            let v = a.value(i);
            Some(v.try_into().map_err(|_| {
                cx.bad(
                    i,
                    format!("{v} does not fit a 64-bit integer, which microtab stores exactly"),
                )
            })?)
        });
    }
    Ok(out)
}

fn floats(a: &ArrayRef) -> Vec<f64> {
    let n = a.len();
    let get = |i: usize, x: f64| if a.is_null(i) { f64::NAN } else { x };
    match a.data_type() {
        DataType::Float16 => {
            let p = a.as_primitive::<Float16Type>();
            (0..n).map(|i| get(i, p.value(i).to_f64())).collect()
        }
        DataType::Float32 => {
            let p = a.as_primitive::<Float32Type>();
            (0..n).map(|i| get(i, p.value(i) as f64)).collect()
        }
        _ => {
            let p = a.as_primitive::<Float64Type>();
            (0..n).map(|i| get(i, p.value(i))).collect()
        }
    }
}

/// One column of one batch as a chunk.
fn chunk(a: &ArrayRef, conv: Conv, cx: &Ctx) -> Result<Chunk> {
    use DataType as D;
    if let D::Dictionary(_, _) = a.data_type() {
        // Expand a dictionary of numbers (text dictionaries are handled
        // below without expanding).
        if !matches!(conv, Conv::Text) {
            let plain = arrow_select_take(a, cx)?;
            return chunk(&plain, conv, cx);
        }
    }
    Ok(match conv {
        Conv::Null => Chunk::Int {
            vals: vec![None; a.len()],
            decimals: 0,
        },
        Conv::Int(d) => Chunk::Int {
            decimals: d,
            vals: match a.data_type() {
                D::Boolean => {
                    let b = a.as_boolean();
                    (0..b.len())
                        .map(|i| (!b.is_null(i)).then(|| b.value(i) as i64))
                        .collect()
                }
                D::Int8 => ints::<Int8Type>(a, cx)?,
                D::Int16 => ints::<Int16Type>(a, cx)?,
                D::Int32 => ints::<Int32Type>(a, cx)?,
                D::Int64 => ints::<Int64Type>(a, cx)?,
                D::UInt8 => ints::<UInt8Type>(a, cx)?,
                D::UInt16 => ints::<UInt16Type>(a, cx)?,
                D::UInt32 => ints::<UInt32Type>(a, cx)?,
                D::UInt64 => ints::<UInt64Type>(a, cx)?,
                D::Decimal32(..) => ints::<Decimal32Type>(a, cx)?,
                D::Decimal64(..) => ints::<Decimal64Type>(a, cx)?,
                D::Decimal128(..) => ints::<Decimal128Type>(a, cx)?,
                D::Decimal256(..) => {
                    let p = a.as_primitive::<Decimal256Type>();
                    (0..p.len())
                        .map(|i| {
                            if p.is_null(i) {
                                return Ok(None);
                            }
                            let v = p.value(i);
                            v.to_i128()
                                .and_then(|x| i64::try_from(x).ok())
                                .map(Some)
                                .ok_or_else(|| {
                                    cx.bad(i, format!("{v} does not fit a 64-bit integer"))
                                })
                        })
                        .collect::<Result<_>>()?
                }
                other => unreachable!("integer conversion of {other}"),
            },
        },
        Conv::Float => Chunk::Float(floats(a)),
        Conv::FloatToInt(d) => {
            let scale = 10f64.powi(d as i32);
            let mut vals = Vec::with_capacity(a.len());
            for (i, x) in floats(a).into_iter().enumerate() {
                if x.is_nan() {
                    vals.push(None);
                    continue;
                }
                let m = (x * scale).round();
                // Exact only if the scaled integer divides back to the
                // very same double (what the export wrote).
                if !(m.abs() < 9.0e15 && m / scale == x) {
                    return Err(Error::NotDecimal {
                        path: cx.path.to_path_buf(),
                        record: cx.first + i as u64 + 1,
                        column: cx.name.to_string(),
                        value: x,
                        decimals: d,
                    });
                }
                vals.push(Some(m as i64));
            }
            Chunk::Int { vals, decimals: d }
        }
        Conv::Text => text(a, cx)?,
    })
}

/// A dictionary array's keys as positions in its dictionary (`None`
/// where null), each checked to fall inside it: arrow's own
/// `normalized_keys` asserts a non-empty dictionary (a column of nulls only
/// has an empty one) and clamps a damaged key to the last entry.
fn dict_keys(a: &ArrayRef, cx: &Ctx) -> Result<Vec<Option<u32>>> {
    let d = a.as_any_dictionary();
    let keys = d.keys();
    let nv = d.values().len() as u64;
    fn each<T: ArrowPrimitiveType>(keys: &dyn Array) -> Vec<Option<i128>>
    where
        T::Native: Into<i128>,
    {
        keys.as_primitive::<T>()
            .iter()
            .map(|k| k.map(Into::into))
            .collect()
    }
    let raw = match keys.data_type() {
        DataType::Int8 => each::<Int8Type>(keys),
        DataType::Int16 => each::<Int16Type>(keys),
        DataType::Int32 => each::<Int32Type>(keys),
        DataType::Int64 => each::<Int64Type>(keys),
        DataType::UInt8 => each::<UInt8Type>(keys),
        DataType::UInt16 => each::<UInt16Type>(keys),
        DataType::UInt32 => each::<UInt32Type>(keys),
        DataType::UInt64 => each::<UInt64Type>(keys),
        other => {
            return Err(cx.bad(
                0,
                format!("a dictionary with {other} keys, which Arrow does not define"),
            ))
        }
    };
    raw.into_iter()
        .enumerate()
        .map(|(i, k)| match k {
            None => Ok(None),
            Some(k) if k >= 0 && (k as u64) < nv => Ok(Some(k as u32)),
            Some(k) => Err(cx.bad(
                i,
                format!("dictionary key {k} is outside its dictionary of {nv} values (the file is damaged)"),
            )),
        })
        .collect()
}

/// Expands a dictionary array into its values.
fn arrow_select_take(a: &ArrayRef, cx: &Ctx) -> Result<ArrayRef> {
    let d = a.as_any_dictionary();
    let idx = arrow_array::UInt32Array::from(dict_keys(a, cx)?);
    Ok(arrow_select::take::take(d.values().as_ref(), &idx, None)?)
}

fn text(a: &ArrayRef, cx: &Ctx) -> Result<Chunk> {
    use DataType as D;
    Ok(match a.data_type() {
        D::Dictionary(_, _) => {
            let d = a.as_any_dictionary();
            let values = d.values();
            let dict: Vec<String> = match text(values, cx)? {
                Chunk::Text { codes, dict } => codes
                    .iter()
                    .map(|c| c.map(|c| dict[c as usize].clone()).unwrap_or_default())
                    .collect(),
                _ => unreachable!("text values"),
            };
            // A key to a null entry of the dictionary is missing too.
            let codes = dict_keys(a, cx)?
                .into_iter()
                .map(|k| k.filter(|&k| !values.is_null(k as usize)))
                .collect();
            Chunk::Text { codes, dict }
        }
        _ => {
            let mut map: HashMap<String, u32> = HashMap::new();
            let mut dict = Vec::new();
            let mut codes = Vec::with_capacity(a.len());
            let mut add = |s: Option<String>| {
                codes.push(s.map(|s| {
                    *map.entry(s).or_insert_with_key(|k| {
                        dict.push(k.clone());
                        dict.len() as u32 - 1
                    })
                }));
            };
            match a.data_type() {
                D::Utf8 => a
                    .as_string::<i32>()
                    .iter()
                    .for_each(|s| add(s.map(str::to_string))),
                D::LargeUtf8 => a
                    .as_string::<i64>()
                    .iter()
                    .for_each(|s| add(s.map(str::to_string))),
                D::Utf8View => a
                    .as_string_view()
                    .iter()
                    .for_each(|s| add(s.map(str::to_string))),
                D::Date32 => a
                    .as_primitive::<Date32Type>()
                    .iter()
                    .for_each(|d| add(d.map(|d| iso_date(d as i64)))),
                D::Date64 => a
                    .as_primitive::<Date64Type>()
                    .iter()
                    .for_each(|d| add(d.map(|ms| iso_date(ms.div_euclid(86_400_000))))),
                other => unreachable!("text conversion of {other}"),
            }
            Chunk::Text { codes, dict }
        }
    })
}

/// Puts a single user-missing code back where the export wrote nulls
/// (a variable with one missing code and no system-missing values: every
/// null was that code).
fn restore(chunk: &mut Chunk, a: &Applied) {
    let vm = &a.vm;
    match chunk {
        Chunk::Int { vals, decimals }
            if vm.missing_codes.len() == 1 && *decimals == vm.decimals =>
        {
            let c = vm.missing_codes[0] as i64;
            vals.iter_mut()
                .filter(|v| v.is_none())
                .for_each(|v| *v = Some(c));
        }
        Chunk::Float(v) if vm.missing_codes.len() == 1 => {
            let c = vm.missing_codes[0];
            v.iter_mut().filter(|x| x.is_nan()).for_each(|x| *x = c);
        }
        Chunk::Text { codes, dict } if a.shown.len() == 1 => {
            let t = &a.shown[0];
            let k = match dict.iter().position(|s| s == t) {
                Some(k) => k as u32,
                None => {
                    dict.push(t.clone());
                    dict.len() as u32 - 1
                }
            };
            codes
                .iter_mut()
                .filter(|c| c.is_none())
                .for_each(|c| *c = Some(k));
        }
        _ => {}
    }
}

/// Imports the Parquet file `input` as the dataset `target` (replaced only
/// when `force` is set; a failed import leaves it as it was). A file a
/// microtab export wrote gets its variables' metadata and design back.
pub fn import_parquet(
    input: &Path,
    target: &Path,
    force: bool,
    opts: &ImportOptions,
) -> Result<ImportSummary> {
    use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
    let pq = |error| Error::Parquet {
        path: input.to_path_buf(),
        error,
    };
    let file = std::fs::File::open(input).map_err(|error| Error::Io {
        path: input.to_path_buf(),
        error,
    })?;
    let builder = ParquetRecordBatchReaderBuilder::try_new(file).map_err(pq)?;
    let schema = builder.schema().clone();
    let kv_meta = builder
        .metadata()
        .file_metadata()
        .key_value_metadata()
        .and_then(|kv| kv.iter().find(|k| k.key == METADATA_KEY))
        .and_then(|k| k.value.clone());
    let meta: Option<Meta> = match schema.metadata().get(METADATA_KEY).cloned().or(kv_meta) {
        None => None,
        Some(j) => Some(serde_json::from_str(&j).map_err(|e| Error::Input {
            path: input.to_path_buf(),
            reason: format!("its '{METADATA_KEY}' metadata is not microtab's ({e})"),
        })?),
    };
    let mut notes = Vec::new();
    let meta = match meta {
        Some(m) if m.format != "microtab" || m.version != 1 => {
            notes.push(format!(
                "its microtab metadata is of an unknown version ({} {}); labels, missing codes and the design in it are not applied",
                m.format, m.version
            ));
            None
        }
        m => m,
    };
    // A variable's metadata applies only while its column still has the
    // type the export gave it (a column changed since — by pyarrow,
    // Polars … which keep the file's metadata — would otherwise get codes
    // or decimals that no longer describe it).
    let mut applicable: HashMap<String, Applied> = HashMap::new();
    if let Some(m) = &meta {
        for f in schema.fields() {
            let Some(vm) = m.variables.iter().find(|v| &v.name == f.name()) else {
                continue;
            };
            if !exported_type(vm, f.data_type(), m) {
                notes.push(format!(
                    "column {} is no longer of the type microtab exported (it is {}): the labels and missing codes the file's metadata gives it are not applied",
                    f.name(),
                    f.data_type()
                ));
                continue;
            }
            let sane = vm.kind != Kind::Int
                || vm
                    .missing_codes
                    .iter()
                    .all(|c| c.fract() == 0.0 && c.abs() < 9.2e18);
            if !sane {
                notes.push(format!(
                    "column {}: the missing codes in the file's metadata are not integers; they are not applied",
                    f.name()
                ));
                continue;
            }
            let labelled = m.labels && vm.kind != Kind::String && !vm.value_labels.is_empty();
            // The missing codes as the column shows them: text for text
            // variables and for labelled ones exported as their labels.
            let shown: Vec<String> = if labelled {
                vm.missing_codes
                    .iter()
                    .map(|&c| {
                        let t = microtab_store::codec::display_int(vm.decimals, c as i64);
                        vm.value_labels.get(&t).cloned().unwrap_or(t)
                    })
                    .collect()
            } else {
                vm.missing_text.clone()
            };
            applicable.insert(
                f.name().clone(),
                Applied {
                    vm: vm.clone(),
                    labelled,
                    shown,
                },
            );
        }
    }
    let var_meta = |name: &str| -> Option<&Applied> { applicable.get(name) };
    let mut names = Vec::new();
    let mut convs = Vec::new();
    let mut codebook_hits = 0;
    for (k, f) in schema.fields().iter().enumerate() {
        let name = if f.name().trim().is_empty() {
            format!("V{}", k + 1)
        } else {
            f.name().clone()
        };
        let dv = opts.codebook.as_ref().and_then(|cb| cb.variable(&name));
        codebook_hits += dv.is_some() as usize;
        let decimals = match var_meta(&name) {
            Some(a) if a.vm.kind == Kind::Int && !a.labelled => Some(a.vm.decimals),
            _ => dv.map(|dv| dv.decimals),
        };
        let conv = conv_of(&name, f.data_type(), decimals).map_err(|reason| Error::Input {
            path: input.to_path_buf(),
            reason,
        })?;
        if var_meta(&name).is_some_and(|a| a.labelled) {
            notes.push(format!("{name} was exported as its value labels and is imported as text (its missing codes as their labels); a file exported without labels keeps its codes"));
        }
        names.push(name);
        convs.push(conv);
    }
    if opts.codebook.is_some() && codebook_hits == 0 {
        notes.push("the codebook names none of the file's columns: no labels, missing codes or decimals were taken from it".into());
    }
    let text: Vec<bool> = convs.iter().map(|c| matches!(c, Conv::Text)).collect();
    let mut imp = ColumnarImport::create(input, target, force, &names, &text, opts.plain)?;
    let restoring = meta.as_ref().is_some_and(|m| m.missing == "null");
    let reader = builder.with_batch_size(1 << 16).build().map_err(pq)?;
    for batch in reader {
        let batch: RecordBatch = batch?;
        let first = imp.rows();
        let chunks = batch
            .columns()
            .iter()
            .zip(&names)
            .zip(&convs)
            .map(|((a, name), &conv)| {
                let cx = Ctx {
                    path: input,
                    name,
                    first,
                };
                let mut c = chunk(a, conv, &cx)?;
                if let Some(a) = var_meta(name).filter(|a| restoring && a.vm.nulls == 0) {
                    restore(&mut c, a);
                }
                Ok(c)
            })
            .collect::<Result<Vec<_>>>()?;
        imp.append(chunks)?;
    }
    // The design, when its variables all came along (a Taylor design's
    // PSU structure is kept only when every record did).
    let design = meta.as_ref().and_then(|m| m.design.clone()).filter(|d| {
        d.variables().iter().all(|n| {
            names
                .iter()
                .any(|m| m.eq_ignore_ascii_case(n) && applicable.contains_key(m))
        }) && d.taylor.as_ref().is_none_or(|t| t.rows == imp.rows())
    });
    // A Taylor design over text strata or PSUs keeps their dictionary
    // positions, which the import renumbers: it is set again instead.
    let design = match design {
        Some(d)
            if d.taylor.as_ref().is_some_and(|t| {
                t.strata.iter().chain(&t.cluster).any(|n| {
                    names
                        .iter()
                        .position(|m| m.eq_ignore_ascii_case(n))
                        .is_some_and(|i| text[i])
                })
            }) =>
        {
            notes.push("the Taylor design has text strata or PSUs, whose codes the import renumbers: it is not imported, and can be set again on the imported dataset".into());
            None
        }
        d => d,
    };
    // (ingest's own result type: its error is boxed once it leaves here)
    #[allow(clippy::result_large_err)]
    let describe = |var: &mut Variable, dict: &[String]| -> microtab_ingest::Result<()> {
        let Some(a) = var_meta(&var.name) else {
            return Ok(());
        };
        let vm = &a.vm;
        var.label = vm.label.clone().or(var.label.take());
        var.description = vm.description.clone().or(var.description.take());
        if var.kind == Kind::String {
            if !a.labelled {
                var.value_labels = vm.value_labels.clone();
            }
            for t in &a.shown {
                if let Some(p) = dict.iter().position(|s| s == t) {
                    if !var.missing_codes.contains(&(p as f64)) {
                        var.missing_codes.push(p as f64);
                    }
                }
            }
        } else if var.kind == vm.kind && var.decimals == vm.decimals {
            var.value_labels = vm.value_labels.clone();
            var.missing_codes = vm.missing_codes.clone();
        }
        Ok(())
    };
    let s = imp.finish(opts.codebook.as_ref(), describe, design, notes)?;
    Ok(s)
}

#[cfg(test)]
mod tests {
    use super::iso_date;

    #[test]
    fn dates_match_the_calendar() {
        // Hand-checked: the epoch, a leap day, the day before the epoch,
        // 2000-03-01 (after a centurial leap year's February) and a date
        // before 1900.
        assert_eq!(iso_date(0), "1970-01-01");
        assert_eq!(iso_date(18_321), "2020-02-29");
        assert_eq!(iso_date(-1), "1969-12-31");
        assert_eq!(iso_date(11_017), "2000-03-01");
        assert_eq!(iso_date(-25_567), "1900-01-01");
    }
}
