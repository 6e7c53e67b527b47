//! Column files: a 4096-byte header, then a raw little-endian array.

use crate::{Error, NativeType, PhysType, Result, Variable};
use microtab_io::{BlockWriter, IoConfig, MappedFile};
use std::path::{Path, PathBuf};
use xxhash_rust::xxh3::Xxh3;

/// Size of the fixed header; the payload starts at this offset, so
/// `numpy.memmap(path, dtype, offset=4096)` reads a column.
pub const HEADER_SIZE: usize = 4096;
const MAGIC: &[u8; 8] = b"MTABCOL\0";

/// The decoded fixed header of a column file.
#[derive(Debug, Clone, PartialEq)]
pub struct ColumnHeader {
    /// Value type.
    pub ty: PhysType,
    /// Number of values.
    pub rows: u64,
    /// xxh3-64 of the payload.
    pub checksum: u64,
}

impl ColumnHeader {
    fn encode(&self) -> Vec<u8> {
        let mut h = vec![0u8; HEADER_SIZE];
        h[0..8].copy_from_slice(MAGIC);
        h[8..12].copy_from_slice(&crate::FORMAT_VERSION.to_le_bytes());
        h[12..16].copy_from_slice(&self.ty.code().to_le_bytes());
        h[16..24].copy_from_slice(&self.rows.to_le_bytes());
        h[24..32].copy_from_slice(&self.checksum.to_le_bytes());
        h
    }

    fn decode(path: &Path, b: &[u8]) -> Result<Self> {
        let corrupt = |reason: &str| Error::Corrupt {
            path: path.to_path_buf(),
            reason: reason.to_string(),
        };
        if b.len() < HEADER_SIZE || &b[0..8] != MAGIC {
            return Err(corrupt("not a microtab column file (bad magic)"));
        }
        let u32_at = |o: usize| u32::from_le_bytes(b[o..o + 4].try_into().unwrap());
        let u64_at = |o: usize| u64::from_le_bytes(b[o..o + 8].try_into().unwrap());
        if u32_at(8) != crate::FORMAT_VERSION {
            return Err(corrupt("unsupported column format version"));
        }
        let ty = PhysType::from_code(u32_at(12)).ok_or_else(|| corrupt("unknown type code"))?;
        Ok(ColumnHeader {
            ty,
            rows: u64_at(16),
            checksum: u64_at(24),
        })
    }
}

/// Streams values into a new column file.
pub struct ColumnWriter {
    w: BlockWriter,
    ty: PhysType,
    rows: u64,
    hash: Xxh3,
    rel: String,
    final_path: PathBuf,
}

impl ColumnWriter {
    /// Creates `path` (`rel` is the same path relative to the dataset, as
    /// recorded in the manifest).
    pub(crate) fn create(
        path: &Path,
        final_path: PathBuf,
        rel: String,
        ty: PhysType,
        cfg: &IoConfig,
    ) -> Result<Self> {
        let mut w = BlockWriter::create(path, cfg)?;
        w.write_all(&[0u8; HEADER_SIZE])?;
        Ok(ColumnWriter {
            w,
            ty,
            rows: 0,
            hash: Xxh3::new(),
            rel,
            final_path,
        })
    }

    /// The column's type.
    pub fn ty(&self) -> PhysType {
        self.ty
    }

    /// Values written so far.
    pub fn rows(&self) -> u64 {
        self.rows
    }

    /// Stops writing and returns the partial file (header not yet valid;
    /// payload from byte 4096), for a caller that re-encodes the values into
    /// a wider type. The caller deletes the file.
    pub fn into_partial(self) -> Result<PathBuf> {
        let path = self.w.path().to_path_buf();
        self.w.finish()?;
        Ok(path)
    }

    /// Appends values; `T` must match the column type.
    pub fn append<T: NativeType>(&mut self, values: &[T]) -> Result<()> {
        assert_eq!(T::PHYS, self.ty, "column type mismatch");
        let bytes = T::as_bytes(values);
        self.hash.update(bytes);
        self.w.write_all(bytes)?;
        self.rows += values.len() as u64;
        Ok(())
    }

    /// Writes the header, `fsync`s, and returns `var` completed with the
    /// file name, size, type and checksum.
    pub fn finish(mut self, mut var: Variable) -> Result<Variable> {
        let checksum = self.hash.digest();
        let header = ColumnHeader {
            ty: self.ty,
            rows: self.rows,
            checksum,
        };
        self.w.write_at(0, &header.encode())?;
        let tmp = self.w.path().to_path_buf();
        self.w.finish()?;
        std::fs::rename(&tmp, &self.final_path).map_err(|e| {
            Error::Io(microtab_io::Error {
                path: self.final_path.clone(),
                error: e,
            })
        })?;
        var.ty = self.ty;
        var.file = self.rel;
        var.bytes = self.rows * self.ty.width() as u64;
        var.checksum = format!("xxh3:{checksum:016x}");
        Ok(var)
    }
}

/// A typed view of a column's values.
#[derive(Debug, Clone, Copy)]
#[allow(missing_docs)]
pub enum ColumnData<'a> {
    U8(&'a [u8]),
    I8(&'a [i8]),
    U16(&'a [u16]),
    I16(&'a [i16]),
    U32(&'a [u32]),
    I32(&'a [i32]),
    I64(&'a [i64]),
    F32(&'a [f32]),
    F64(&'a [f64]),
}

impl<'a> ColumnData<'a> {
    /// Views little-endian `bytes` as values of type `ty`.
    ///
    /// # Panics
    /// If `bytes` is not aligned for `ty` or its length is not a multiple of
    /// the width (column payloads and read buffers are page aligned).
    pub fn view(ty: PhysType, bytes: &'a [u8]) -> ColumnData<'a> {
        let w = ty.width();
        assert!(bytes.len().is_multiple_of(w), "partial value");
        assert!(
            (bytes.as_ptr() as usize).is_multiple_of(w),
            "unaligned column bytes"
        );
        let n = bytes.len() / w;
        let ptr = bytes.as_ptr();
        // SAFETY: alignment and length checked above; every bit pattern is a
        // valid value of these number types.
        unsafe {
            match ty {
                PhysType::U8 => ColumnData::U8(std::slice::from_raw_parts(ptr, n)),
                PhysType::I8 => ColumnData::I8(std::slice::from_raw_parts(ptr as *const i8, n)),
                PhysType::U16 => ColumnData::U16(std::slice::from_raw_parts(ptr as *const u16, n)),
                PhysType::I16 => ColumnData::I16(std::slice::from_raw_parts(ptr as *const i16, n)),
                PhysType::U32 => ColumnData::U32(std::slice::from_raw_parts(ptr as *const u32, n)),
                PhysType::I32 => ColumnData::I32(std::slice::from_raw_parts(ptr as *const i32, n)),
                PhysType::I64 => ColumnData::I64(std::slice::from_raw_parts(ptr as *const i64, n)),
                PhysType::F32 => ColumnData::F32(std::slice::from_raw_parts(ptr as *const f32, n)),
                PhysType::F64 => ColumnData::F64(std::slice::from_raw_parts(ptr as *const f64, n)),
            }
        }
    }

    /// Number of values.
    pub fn len(&self) -> usize {
        match self {
            ColumnData::U8(v) => v.len(),
            ColumnData::I8(v) => v.len(),
            ColumnData::U16(v) => v.len(),
            ColumnData::I16(v) => v.len(),
            ColumnData::U32(v) => v.len(),
            ColumnData::I32(v) => v.len(),
            ColumnData::I64(v) => v.len(),
            ColumnData::F32(v) => v.len(),
            ColumnData::F64(v) => v.len(),
        }
    }

    /// True when there are no values.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Value `i` widened to `f64` (slow path; for small jobs and tests).
    pub fn get_f64(&self, i: usize) -> f64 {
        match self {
            ColumnData::U8(v) => v[i] as f64,
            ColumnData::I8(v) => v[i] as f64,
            ColumnData::U16(v) => v[i] as f64,
            ColumnData::I16(v) => v[i] as f64,
            ColumnData::U32(v) => v[i] as f64,
            ColumnData::I32(v) => v[i] as f64,
            ColumnData::I64(v) => v[i] as f64,
            ColumnData::F32(v) => v[i] as f64,
            ColumnData::F64(v) => v[i],
        }
    }
}

/// A memory-mapped column of a published dataset.
pub struct Column {
    map: MappedFile,
    header: ColumnHeader,
    var: Variable,
}

impl Column {
    pub(crate) fn open(path: &Path, var: &Variable, rows: u64) -> Result<Self> {
        let map = MappedFile::open(path)?;
        let mut head = vec![0u8; HEADER_SIZE];
        let n = map.read_at(0, &mut head)?;
        let header = ColumnHeader::decode(path, &head[..n])?;
        let expect = HEADER_SIZE as u64 + header.rows * header.ty.width() as u64;
        if header.ty != var.ty || header.rows != rows || map.len() as u64 != expect {
            return Err(Error::Corrupt {
                path: path.to_path_buf(),
                reason: format!(
                    "header says {} x {}, manifest says {} x {}, file has {} bytes",
                    header.rows,
                    header.ty.name(),
                    rows,
                    var.ty.name(),
                    map.bytes().len()
                ),
            });
        }
        Ok(Column {
            map,
            header,
            var: var.clone(),
        })
    }

    /// The manifest entry.
    pub fn var(&self) -> &Variable {
        &self.var
    }

    /// The file's path.
    pub fn path(&self) -> PathBuf {
        self.map.path().to_path_buf()
    }

    /// Number of values.
    pub fn rows(&self) -> usize {
        self.header.rows as usize
    }

    /// Raw payload bytes.
    pub fn payload(&self) -> &[u8] {
        &self.map.bytes()[HEADER_SIZE.min(self.map.bytes().len())..]
    }

    /// Asks the kernel to start reading rows `start..start+len` now.
    pub fn prefetch(&self, start: usize, len: usize) {
        let w = self.header.ty.width();
        self.map.advise_sequential(HEADER_SIZE + start * w, len * w);
    }

    /// Drops rows `start..start+len` from this process's mapping once
    /// counted (see [`microtab_io::MappedFile::release`]).
    pub fn release(&self, start: usize, len: usize) {
        let w = self.header.ty.width();
        self.map.release(HEADER_SIZE + start * w, len * w);
    }

    /// Fraction of the column's pages found in the page cache (sampled).
    pub fn resident_fraction(&self) -> f64 {
        self.map
            .resident_fraction(HEADER_SIZE, self.payload().len())
    }

    /// Recomputes the payload checksum and compares it with the header's.
    pub fn verify(&self) -> Result<()> {
        let got = xxhash_rust::xxh3::xxh3_64(self.payload());
        if got != self.header.checksum || format!("xxh3:{got:016x}") != self.var.checksum {
            return Err(Error::Corrupt {
                path: self.path(),
                reason: "checksum mismatch".into(),
            });
        }
        Ok(())
    }

    /// Typed view of the values.
    pub fn data(&self) -> ColumnData<'_> {
        ColumnData::view(self.header.ty, self.payload())
    }

    /// Where the values start in the file and how wide they are (for
    /// readers that stream the file themselves).
    pub fn source(&self) -> microtab_io::ColumnSource {
        microtab_io::ColumnSource {
            path: self.path(),
            offset: HEADER_SIZE as u64,
            width: self.header.ty.width(),
        }
    }

    /// The values if the column is `u8`.
    pub fn as_u8(&self) -> Option<&[u8]> {
        match self.data() {
            ColumnData::U8(v) => Some(v),
            _ => None,
        }
    }
}
