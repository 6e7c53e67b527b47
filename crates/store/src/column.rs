//! Column files: a 4096-byte header, then a raw little-endian array or
//! bit-packed blocks (see [`crate::pack`]).

use crate::pack::{self, Packing, BLOCK};
use crate::{Error, Kind, NativeType, PhysType, Result, Variable};
use microtab_io::{BlockWriter, IoConfig, MappedFile};
use std::path::{Path, PathBuf};
use xxhash_rust::xxh3::Xxh3;

/// Size of the fixed header; the payload starts at this offset, so
/// `numpy.memmap(path, dtype, offset=4096)` reads an unpacked column.
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
    /// How the payload is packed (`None`: a plain array).
    pub packing: Option<Packing>,
}

impl ColumnHeader {
    fn encode(&self) -> Vec<u8> {
        let mut h = vec![0u8; HEADER_SIZE];
        h[0..8].copy_from_slice(MAGIC);
        h[8..12].copy_from_slice(&crate::FORMAT_VERSION.to_le_bytes());
        h[12..16].copy_from_slice(&self.ty.code().to_le_bytes());
        h[16..24].copy_from_slice(&self.rows.to_le_bytes());
        h[24..32].copy_from_slice(&self.checksum.to_le_bytes());
        if let Some(p) = self.packing {
            h[32..36].copy_from_slice(&1u32.to_le_bytes());
            h[36..40].copy_from_slice(&p.bits.to_le_bytes());
            h[40..48].copy_from_slice(&p.base.to_le_bytes());
        }
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
        let version = u32_at(8);
        if version == 0 || version > crate::FORMAT_VERSION {
            return Err(corrupt("unsupported column format version"));
        }
        let ty = PhysType::from_code(u32_at(12)).ok_or_else(|| corrupt("unknown type code"))?;
        let packing = match u32_at(32) {
            0 => None,
            1 if u32_at(36) < 8 * ty.width() as u32 && ty.width() <= 4 && !ty.is_float() => {
                Some(Packing {
                    bits: u32_at(36),
                    base: u64_at(40) as i64,
                })
            }
            _ => return Err(corrupt("unknown column encoding")),
        };
        Ok(ColumnHeader {
            ty,
            rows: u64_at(16),
            checksum: u64_at(24),
            packing,
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
    pack: bool,
    cfg: IoConfig,
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
        pack: bool,
    ) -> Result<Self> {
        let mut w = BlockWriter::create(path, cfg)?;
        if pack && !ty.is_float() {
            // Most integer columns are packed at `finish`: these plain
            // values are then read back from the page cache and deleted.
            w.defer_writeback();
        }
        w.write_all(&[0u8; HEADER_SIZE])?;
        Ok(ColumnWriter {
            w,
            ty,
            rows: 0,
            hash: Xxh3::new(),
            rel,
            final_path,
            pack,
            cfg: cfg.clone(),
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
    /// file name, size, type, packing and checksum.
    ///
    /// An integer or string column whose range (`var.min ..= var.max`, plus
    /// the null code when `var.nulls > 0`) needs fewer bits than its type
    /// is rewritten bit-packed (see [`crate::pack`]) unless the dataset
    /// writer was told to store plain arrays.
    pub fn finish(mut self, mut var: Variable) -> Result<Variable> {
        let packing = match (var.kind, var.min, var.max) {
            (Kind::Int | Kind::String, Some(lo), Some(hi)) if self.pack && self.rows > 0 => {
                Packing::choose(self.ty, lo.as_i64(), hi.as_i64(), var.nulls > 0)
            }
            _ => None,
        };
        if let Some(p) = packing {
            return self.finish_packed(var, p);
        }
        let checksum = self.hash.digest();
        let header = ColumnHeader {
            ty: self.ty,
            rows: self.rows,
            checksum,
            packing: None,
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
        var.packing = None;
        var.checksum = format!("xxh3:{checksum:016x}");
        Ok(var)
    }

    /// Reads the plain values back (from the page cache: they were just
    /// written) in stretches of 64 blocks, packs them into a second file,
    /// publishes that one and deletes the first.
    fn finish_packed(self, mut var: Variable, p: Packing) -> Result<Variable> {
        use std::os::unix::fs::FileExt;
        let (ty, rows, w) = (self.ty, self.rows as usize, self.ty.width());
        let plain_path = self.w.path().to_path_buf();
        self.w.close()?;
        let io = |path: &Path, e: std::io::Error| {
            Error::Io(microtab_io::Error {
                path: path.to_path_buf(),
                error: e,
            })
        };
        let src = std::fs::File::open(&plain_path).map_err(|e| io(&plain_path, e))?;
        let packed_path = PathBuf::from(format!("{}.packed", plain_path.display()));
        let mut out = BlockWriter::create(&packed_path, &self.cfg)?;
        out.write_all(&[0u8; HEADER_SIZE])?;
        const STRETCH: usize = 64 * BLOCK;
        // u64 storage keeps both buffers aligned for every value type.
        let mut plain = vec![0u64; STRETCH * w / 8];
        let mut packed = vec![0u64; (STRETCH / BLOCK * p.block_bytes()).div_ceil(8)];
        let base = p.base.to_le_bytes();
        let null = var.null_code.filter(|_| var.nulls > 0);
        let mut hash = Xxh3::new();
        let mut start = 0;
        while start < rows {
            let n = STRETCH.min(rows - start);
            let blocks = n.div_ceil(BLOCK);
            // SAFETY: the bytes of u64 buffers.
            let pb = unsafe {
                std::slice::from_raw_parts_mut(plain.as_mut_ptr() as *mut u8, plain.len() * 8)
            };
            let kb = unsafe {
                std::slice::from_raw_parts_mut(packed.as_mut_ptr() as *mut u8, packed.len() * 8)
            };
            src.read_exact_at(&mut pb[..n * w], (HEADER_SIZE + start * w) as u64)
                .map_err(|e| io(&plain_path, e))?;
            for v in pb[n * w..blocks * BLOCK * w].chunks_exact_mut(w) {
                v.copy_from_slice(&base[..w]);
            }
            let kb = &mut kb[..blocks * p.block_bytes()];
            pack::pack(ty, p, null, &pb[..blocks * BLOCK * w], kb);
            hash.update(kb);
            out.write_all(kb)?;
            start += n;
        }
        drop(src);
        let _ = std::fs::remove_file(&plain_path);
        let checksum = hash.digest();
        let header = ColumnHeader {
            ty,
            rows: rows as u64,
            checksum,
            packing: Some(p),
        };
        out.write_at(0, &header.encode())?;
        out.finish()?;
        std::fs::rename(&packed_path, &self.final_path).map_err(|e| io(&self.final_path, e))?;
        var.ty = ty;
        var.file = self.rel;
        var.bytes = p.stored_len(rows) as u64;
        var.packing = Some(p);
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
    /// All values of a packed column, unpacked on first use of [`Column::data`].
    unpacked: std::sync::OnceLock<Vec<u64>>,
}

impl Column {
    pub(crate) fn open(path: &Path, var: &Variable, rows: u64) -> Result<Self> {
        let map = MappedFile::open(path)?;
        let mut head = vec![0u8; HEADER_SIZE];
        let n = map.read_at(0, &mut head)?;
        let header = ColumnHeader::decode(path, &head[..n])?;
        let stored = match header.packing {
            Some(p) => p.stored_len(header.rows as usize) as u64,
            None => header.rows * header.ty.width() as u64,
        };
        let expect = HEADER_SIZE as u64 + stored;
        if header.packing != var.packing {
            return Err(Error::Corrupt {
                path: path.to_path_buf(),
                reason: format!(
                    "header says packing {:?}, manifest says {:?}",
                    header.packing, var.packing
                ),
            });
        }
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
            unpacked: std::sync::OnceLock::new(),
        })
    }

    /// How the values are packed (`None`: a plain array).
    pub fn packing(&self) -> Option<Packing> {
        self.header.packing
    }

    /// The stored bytes of rows `start .. start + n` (`start` a multiple of
    /// [`BLOCK`] for packed columns): offset from the payload start, length.
    pub fn stored_span(&self, start: usize, n: usize) -> (usize, usize) {
        match self.header.packing {
            Some(p) => {
                debug_assert!(start.is_multiple_of(BLOCK));
                (
                    start / BLOCK * p.block_bytes(),
                    n.div_ceil(BLOCK) * p.block_bytes(),
                )
            }
            None => {
                let w = self.header.ty.width();
                (start * w, n * w)
            }
        }
    }

    /// The values of `n` rows from their stored bytes (`stored`: as read
    /// from [`stored_span`](Self::stored_span)): a view of `stored` itself
    /// for a plain column, else unpacked into `buf`.
    pub fn decode<'a>(&self, stored: &'a [u8], n: usize, buf: &'a mut Vec<u64>) -> ColumnData<'a> {
        let ty = self.header.ty;
        let w = ty.width();
        match self.header.packing {
            None => ColumnData::view(ty, &stored[..n * w]),
            Some(p) => {
                let len = n.div_ceil(BLOCK) * BLOCK * w;
                if buf.len() * 8 < len {
                    buf.resize(len.div_ceil(8), 0);
                }
                // SAFETY: the bytes of a u64 buffer.
                let out =
                    unsafe { std::slice::from_raw_parts_mut(buf.as_mut_ptr() as *mut u8, len) };
                pack::unpack(ty, p, self.null_code(), stored, out);
                ColumnData::view(ty, &out[..n * w])
            }
        }
    }

    /// The values of rows `start .. start + n` (`start` a multiple of
    /// [`BLOCK`]): a view of the mapping for a plain column, else unpacked
    /// from it into `buf`.
    pub fn rows_view<'a>(
        &'a self,
        start: usize,
        n: usize,
        buf: &'a mut Vec<u64>,
    ) -> ColumnData<'a> {
        let (off, len) = self.stored_span(start, n);
        self.decode(&self.payload()[off..off + len], n, buf)
    }

    fn null_code(&self) -> Option<i64> {
        self.var.null_code.filter(|_| self.var.nulls > 0)
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
        let (off, n) = self.stored_span(start, len);
        self.map.advise_sequential(HEADER_SIZE + off, n);
    }

    /// Drops rows `start..start+len` from this process's mapping once
    /// counted (see [`microtab_io::MappedFile::release`]).
    pub fn release(&self, start: usize, len: usize) {
        let (off, n) = self.stored_span(start, len);
        self.map.release(HEADER_SIZE + off, n);
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

    /// Typed view of all the values: the mapping itself for a plain
    /// column; a packed column is unpacked into memory on first use (scans
    /// use [`rows_view`](Self::rows_view) or [`decode`](Self::decode) a
    /// stretch at a time instead).
    pub fn data(&self) -> ColumnData<'_> {
        let ty = self.header.ty;
        match self.header.packing {
            None => ColumnData::view(ty, self.payload()),
            Some(_) => {
                let rows = self.rows();
                let all = self.unpacked.get_or_init(|| {
                    let mut buf = Vec::new();
                    self.decode(self.payload(), rows, &mut buf);
                    buf
                });
                // SAFETY: the bytes of a u64 buffer.
                let bytes = unsafe {
                    std::slice::from_raw_parts(all.as_ptr() as *const u8, rows * ty.width())
                };
                ColumnData::view(ty, bytes)
            }
        }
    }

    /// Where the stored values start in the file and how many bytes hold
    /// how many rows (for readers that stream the file themselves).
    pub fn source(&self) -> microtab_io::ColumnSource {
        let (unit_rows, width) = match self.header.packing {
            Some(p) => (BLOCK, p.block_bytes()),
            None => (1, self.header.ty.width()),
        };
        microtab_io::ColumnSource {
            path: self.path(),
            offset: HEADER_SIZE as u64,
            width,
            unit_rows,
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
