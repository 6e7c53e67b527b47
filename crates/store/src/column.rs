//! Column files: a 4096-byte header, then a raw little-endian array or
//! bit-packed blocks (see [`crate::pack`]), then (format version 3) one
//! checksum per stripe of [`STRIPE_ROWS`] rows, then (version 4, integer
//! columns) a zone map: each stripe's smallest and largest value and
//! whether it holds nulls, so a scan skips stripes no row of which can
//! pass a filter ([`Zone`]).
//!
//! Every read of values goes through [`Column::decode`] (or the helpers
//! built on it), which checks the checksum of each stripe it is handed
//! before the values are used: a flipped bit in a column file is an error,
//! never a wrong number. Opening a column checks the header's own checksum,
//! the header against the manifest, the file size and the stripe table.
//!
//! One file on purpose (~970 lines before its tests): the header layout, the
//! writer that produces it and the reader that checks it are the on-disk
//! format of a column, and change together (docs/FORMAT.md).

use crate::pack::{self, Packing, BLOCK};
use crate::{Error, NativeType, PhysType, Result, Variable};
use microtab_io::{BlockWriter, IoConfig, MappedFile};
use std::hash::Hasher;
use std::path::{Path, PathBuf};
use twox_hash::XxHash3_64 as Xxh3;

/// Size of the fixed header; the payload starts at this offset, so
/// `numpy.memmap(path, dtype, offset=4096)` reads an unpacked column.
pub const HEADER_SIZE: usize = 4096;
const MAGIC: &[u8; 8] = b"MTABCOL\0";
/// Rows per checksummed stripe: every stripe's stored bytes have their own
/// XXH3-64, so a scan checks each morsel it reads on its own (format
/// version 3). A multiple of [`BLOCK`].
pub const STRIPE_ROWS: usize = 32 * BLOCK;
/// Offset of the header's own checksum (XXH3-64 of the bytes before it).
const HEADER_SUM_AT: usize = HEADER_SIZE - 8;

/// The decoded fixed header of a column file.
#[derive(Debug, Clone, PartialEq)]
pub struct ColumnHeader {
    /// Format version of the file (1, 2 or 3).
    pub version: u32,
    /// Value type.
    pub ty: PhysType,
    /// Number of values.
    pub rows: u64,
    /// xxh3-64 of the payload.
    pub checksum: u64,
    /// How the payload is packed (`None`: a plain array).
    pub packing: Option<Packing>,
    /// XXH3-64 of the stripe checksum table that follows the payload
    /// (version 3; 0 before).
    pub stripe_table: u64,
    /// Whether a zone map follows the stripe table (version 4, integer
    /// types).
    pub zones: bool,
    /// XXH3-64 of the zone map (0 without one).
    pub zone_table: u64,
    /// The values that occur (integer columns of at most 16 bits whose
    /// values span at most [`VALUE_SET_SPAN`]; `None` otherwise and in
    /// files written before it).
    pub values: Option<ValueSet>,
}

/// Offset in the header of a value set's bitmap.
const VALUES_AT: usize = 96;

/// Most values a header's value set spans: its bitmap fills the header's
/// bytes from [`VALUES_AT`] to the header's own checksum.
pub const VALUE_SET_SPAN: u32 = ((HEADER_SUM_AT - VALUES_AT) / 8 * 64) as u32;

/// The stored values that occur in a column, other than the type's null
/// code, one bit each over `lo .. lo + span` (format version 4, in the
/// header; written for integer columns of at most 16 bits): a grouping
/// lists its categories from it without reading the values. The header's
/// checksum covers it; `verify` checks it against the values.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ValueSet {
    /// The smallest value (bit 0; it occurs).
    pub lo: i64,
    /// Values spanned, `hi - lo + 1` (the largest, `lo + span - 1`,
    /// occurs).
    pub span: u32,
    /// Bit `v - lo` of word `(v - lo) / 64` is set when `v` occurs.
    pub bits: Vec<u64>,
}

impl ValueSet {
    /// Whether stored value `v` occurs.
    pub fn contains(&self, v: i64) -> bool {
        let o = v.wrapping_sub(self.lo) as u64;
        o < self.span as u64 && self.bits[(o >> 6) as usize] >> (o & 63) & 1 == 1
    }

    /// The set of the values marked in `seen`, one byte a value of a type of
    /// at most 16 bits from its smallest value `base` (the null code's
    /// byte left out), when they span at most [`VALUE_SET_SPAN`].
    fn from_seen(seen: &[u8], base: i64, null: i64) -> Option<ValueSet> {
        let skip = (null - base) as usize;
        let occurs = |i: usize| i != skip && seen[i] != 0;
        let first = (0..seen.len()).find(|&i| occurs(i))?;
        let last = (first..seen.len()).rev().find(|&i| occurs(i))?;
        let span = last - first + 1;
        if span > VALUE_SET_SPAN as usize {
            return None;
        }
        let mut bits = vec![0u64; span.div_ceil(64)];
        for i in first..=last {
            if occurs(i) {
                let o = i - first;
                bits[o >> 6] |= 1 << (o & 63);
            }
        }
        Some(ValueSet {
            lo: base + first as i64,
            span: span as u32,
            bits,
        })
    }
}

/// The smallest value of an integer type of at most 16 bits (the first
/// byte of a writer's record of the values seen), or `None` for other
/// types.
fn seen_base(ty: PhysType) -> Option<i64> {
    match ty {
        PhysType::U8 | PhysType::U16 => Some(0),
        PhysType::I8 => Some(i8::MIN as i64),
        PhysType::I16 => Some(i16::MIN as i64),
        _ => None,
    }
}

/// Marks in `seen` (one byte a value from the type's smallest) the values
/// of `plain`, little-endian values of `ty`.
fn mark_seen(ty: PhysType, plain: &[u8], seen: &mut [u8]) {
    match ty {
        PhysType::U8 => plain.iter().for_each(|&x| seen[x as usize] = 1),
        PhysType::I8 => plain
            .iter()
            .for_each(|&x| seen[(x as i8 as i16 + 128) as usize] = 1),
        PhysType::U16 => plain
            .chunks_exact(2)
            .for_each(|c| seen[u16::from_le_bytes([c[0], c[1]]) as usize] = 1),
        PhysType::I16 => plain
            .chunks_exact(2)
            .for_each(|c| seen[(i16::from_le_bytes([c[0], c[1]]) as i32 + 32768) as usize] = 1),
        _ => {}
    }
}

/// The values of one stripe of an integer column, as its zone map records
/// them: a filter that no value in `lo..=hi` passes skips the stripe.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Zone {
    /// Smallest stored value other than the null code (`i64::MAX` when the
    /// stripe holds only nulls).
    pub lo: i64,
    /// Largest stored value other than the null code (`i64::MIN` when the
    /// stripe holds only nulls).
    pub hi: i64,
    /// Whether the stripe holds the null code.
    pub nulls: bool,
}

/// Bytes of one zone map entry: `lo` (i64 LE), `hi` (i64 LE), flags (u64
/// LE, bit 0: nulls).
pub const ZONE_BYTES: usize = 24;

impl Zone {
    fn encode(&self) -> [u8; ZONE_BYTES] {
        let mut b = [0u8; ZONE_BYTES];
        b[0..8].copy_from_slice(&self.lo.to_le_bytes());
        b[8..16].copy_from_slice(&self.hi.to_le_bytes());
        b[16..24].copy_from_slice(&(self.nulls as u64).to_le_bytes());
        b
    }

    fn decode(b: &[u8]) -> Option<Zone> {
        let at = |o: usize| i64::from_le_bytes(b[o..o + 8].try_into().expect("8 bytes"));
        let z = Zone {
            lo: at(0),
            hi: at(8),
            nulls: match at(16) {
                0 => false,
                1 => true,
                _ => return None,
            },
        };
        // Either a range or the marker of a stripe of nulls only.
        (z.lo <= z.hi || (z.lo == i64::MAX && z.hi == i64::MIN && z.nulls)).then_some(z)
    }
}

/// Whether columns of `ty` carry a zone map (integer and text-code columns).
fn zoned(ty: PhysType) -> bool {
    !matches!(ty, PhysType::F32 | PhysType::F64)
}

/// The zone of a stripe's values (an integer column's).
fn zone_of(ty: PhysType, v: ColumnData<'_>) -> Zone {
    let bytes: &[u8] = match v {
        ColumnData::F32(_) | ColumnData::F64(_) => &[],
        v => v.bytes(),
    };
    let (lo, hi, nulls) = pack::range_of(ty, bytes);
    Zone { lo, hi, nulls }
}

/// Builds a column's zone map as its values are appended.
struct ZoneBuilder {
    /// Rows of the current stripe seen so far.
    filled: usize,
    cur: Zone,
    table: Vec<u8>,
}

impl ZoneBuilder {
    const EMPTY: Zone = Zone {
        lo: i64::MAX,
        hi: i64::MIN,
        nulls: false,
    };

    fn update(&mut self, ty: PhysType, mut bytes: &[u8]) {
        let w = ty.width();
        while !bytes.is_empty() {
            let take = ((STRIPE_ROWS - self.filled) * w).min(bytes.len());
            let (lo, hi, nulls) = pack::range_of(ty, &bytes[..take]);
            self.cur.lo = self.cur.lo.min(lo);
            self.cur.hi = self.cur.hi.max(hi);
            self.cur.nulls |= nulls;
            self.filled += take / w;
            bytes = &bytes[take..];
            if self.filled == STRIPE_ROWS {
                self.table.extend_from_slice(&self.cur.encode());
                self.cur = Self::EMPTY;
                self.filled = 0;
            }
        }
    }

    fn finish(mut self) -> Vec<u8> {
        if self.filled > 0 {
            self.table.extend_from_slice(&self.cur.encode());
        }
        self.table
    }
}

impl ColumnHeader {
    fn encode(&self) -> Vec<u8> {
        let mut h = vec![0u8; HEADER_SIZE];
        h[0..8].copy_from_slice(MAGIC);
        h[8..12].copy_from_slice(&self.version.to_le_bytes());
        h[12..16].copy_from_slice(&self.ty.code().to_le_bytes());
        h[16..24].copy_from_slice(&self.rows.to_le_bytes());
        h[24..32].copy_from_slice(&self.checksum.to_le_bytes());
        if let Some(p) = self.packing {
            h[32..36].copy_from_slice(&1u32.to_le_bytes());
            h[36..40].copy_from_slice(&p.bits.to_le_bytes());
            h[40..48].copy_from_slice(&p.base.to_le_bytes());
            h[48..52].copy_from_slice(&(p.nulls as u32).to_le_bytes());
        }
        h[52..56].copy_from_slice(&(STRIPE_ROWS as u32).to_le_bytes());
        h[56..64].copy_from_slice(&self.stripe_table.to_le_bytes());
        h[64..72].copy_from_slice(&self.zone_table.to_le_bytes());
        h[72..76].copy_from_slice(&(self.zones as u32).to_le_bytes());
        if let Some(v) = &self.values {
            h[76..80].copy_from_slice(&v.span.to_le_bytes());
            h[80..88].copy_from_slice(&v.lo.to_le_bytes());
            for (i, w) in v.bits.iter().enumerate() {
                h[VALUES_AT + 8 * i..VALUES_AT + 8 * i + 8].copy_from_slice(&w.to_le_bytes());
            }
        }
        let sum = crate::xxh3(&h[..HEADER_SUM_AT]);
        h[HEADER_SUM_AT..].copy_from_slice(&sum.to_le_bytes());
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
        if version >= 3 {
            if u64_at(HEADER_SUM_AT) != crate::xxh3(&b[..HEADER_SUM_AT]) {
                return Err(corrupt(
                    "the header's checksum does not match its bytes (the file is damaged)",
                ));
            }
            if u32_at(52) as usize != STRIPE_ROWS {
                return Err(corrupt("unsupported stripe size"));
            }
        }
        let ty = PhysType::from_code(u32_at(12)).ok_or_else(|| corrupt("unknown type code"))?;
        let packing = match u32_at(32) {
            0 => None,
            1 if u32_at(36) < 8 * ty.width() as u32 && pack::packable(ty) => Some(Packing {
                bits: u32_at(36),
                base: u64_at(40) as i64,
                nulls: u32_at(48) & 1 == 1,
            }),
            _ => return Err(corrupt("unknown column encoding")),
        };
        Ok(ColumnHeader {
            version,
            ty,
            rows: u64_at(16),
            checksum: u64_at(24),
            packing,
            stripe_table: if version >= 3 { u64_at(56) } else { 0 },
            zones: match if version >= 4 { u32_at(72) } else { 0 } {
                0 => false,
                1 if ty != PhysType::F32 && ty != PhysType::F64 => true,
                _ => return Err(corrupt("unknown zone map flag")),
            },
            zone_table: if version >= 4 { u64_at(64) } else { 0 },
            values: match if version >= 4 { u32_at(76) } else { 0 } {
                0 => None,
                span => Some(
                    decode_values(b, ty, span)
                        .ok_or_else(|| corrupt("the header's value set is malformed"))?,
                ),
            },
        })
    }

    /// Stored payload bytes.
    pub fn stored_len(&self) -> u64 {
        match self.packing {
            Some(p) => p.stored_len(self.rows as usize) as u64,
            None => self.rows * self.ty.width() as u64,
        }
    }

    /// Stored bytes of a whole stripe.
    pub fn stripe_bytes(&self) -> usize {
        stripe_bytes(self.ty, self.packing)
    }

    /// Bytes of the zone map at the end of the file (0 without one).
    pub fn zone_len(&self) -> u64 {
        if self.zones {
            self.rows.div_ceil(STRIPE_ROWS as u64) * ZONE_BYTES as u64
        } else {
            0
        }
    }

    /// Number of entries in the stripe checksum table (version 3).
    pub fn stripes(&self) -> usize {
        if self.version < 3 || self.stripe_bytes() == 0 {
            0
        } else {
            (self.stored_len() as usize).div_ceil(self.stripe_bytes())
        }
    }
}

/// A header's value set spanning `span` values, `None` when it is not
/// one the writer could have written (a type it is not written for, a
/// longer span, bits past the span, or an end that does not occur).
fn decode_values(b: &[u8], ty: PhysType, span: u32) -> Option<ValueSet> {
    seen_base(ty)?;
    if span > VALUE_SET_SPAN {
        return None;
    }
    let words = (span as usize).div_ceil(64);
    let bits: Vec<u64> = (0..words)
        .map(|i| {
            u64::from_le_bytes(
                b[VALUES_AT + 8 * i..VALUES_AT + 8 * i + 8]
                    .try_into()
                    .unwrap(),
            )
        })
        .collect();
    let v = ValueSet {
        lo: i64::from_le_bytes(b[80..88].try_into().unwrap()),
        span,
        bits,
    };
    let tail = span as usize % 64;
    let clean = tail == 0 || v.bits[words - 1] >> tail == 0;
    let last = v.lo.checked_add(span as i64 - 1)?;
    (clean && v.contains(v.lo) && v.contains(last)).then_some(v)
}

/// Stored bytes of a whole stripe of a column of `ty` packed as `packing`.
fn stripe_bytes(ty: PhysType, packing: Option<Packing>) -> usize {
    match packing {
        Some(p) => STRIPE_ROWS / BLOCK * p.block_bytes(),
        None => STRIPE_ROWS * ty.width(),
    }
}

/// The checksums of a column's stored bytes as they are written: one of
/// the whole payload and one per stripe.
struct Digest {
    whole: Xxh3,
    stripe: Xxh3,
    /// Stored bytes of a whole stripe.
    stripe_bytes: usize,
    /// Bytes of the current stripe hashed so far.
    filled: usize,
    sums: Vec<u64>,
}

impl Digest {
    fn new(stripe_bytes: usize) -> Self {
        Digest {
            whole: Xxh3::new(),
            stripe: Xxh3::new(),
            stripe_bytes,
            filled: 0,
            sums: Vec::new(),
        }
    }

    fn update(&mut self, mut b: &[u8]) {
        self.whole.write(b);
        // A 0-bit packing stores nothing (and has no stripes).
        while !b.is_empty() && self.stripe_bytes > 0 {
            let take = (self.stripe_bytes - self.filled).min(b.len());
            self.stripe.write(&b[..take]);
            self.filled += take;
            b = &b[take..];
            if self.filled == self.stripe_bytes {
                self.sums.push(self.stripe.finish());
                self.stripe = Xxh3::new();
                self.filled = 0;
            }
        }
    }

    /// The payload's checksum and the stripe table's bytes.
    fn finish(mut self) -> (u64, Vec<u8>) {
        if self.filled > 0 {
            self.sums.push(self.stripe.finish());
        }
        let table = self.sums.iter().flat_map(|s| s.to_le_bytes()).collect();
        (self.whole.finish(), table)
    }
}

/// Streams values into a new column file.
///
/// Integer columns are bit-packed as they are written (unless the dataset
/// writer was told to store plain arrays): the writer keeps the range seen
/// so far, packs whole blocks with the narrowest packing that holds it, and
/// when a later value falls outside that packing, re-packs what it has
/// written (read back from the page cache) with a wider one. A column whose
/// range needs every bit of its type is turned into a plain array.
pub struct ColumnWriter {
    w: BlockWriter,
    ty: PhysType,
    rows: u64,
    digest: Digest,
    rel: String,
    final_path: PathBuf,
    cfg: IoConfig,
    /// Set while the file holds packed blocks (or nothing yet).
    packer: Option<Packer>,
    /// Files written so far (for unique names of re-packed files).
    generation: u32,
    /// The first file's path: re-packed files are named after it.
    base_path: PathBuf,
    /// Files are opened for each write only.
    transient: bool,
    /// The zone map so far (integer columns).
    zones: Option<ZoneBuilder>,
    /// The values seen so far, one byte a value of the type from its
    /// smallest (integer columns of at most 16 bits): the header's
    /// [`ValueSet`].
    seen: Option<Vec<u8>>,
}

/// The packing state of a [`ColumnWriter`].
struct Packer {
    /// Range of the values appended so far (null codes apart).
    lo: i64,
    hi: i64,
    nulls: bool,
    /// Packing of the blocks in the file (`None` before the first).
    cur: Option<Packing>,
    /// Rows in the file: whole blocks.
    packed_rows: usize,
    /// Plain bytes of the rows appended after those (less than a block
    /// between appends), in u64 storage for alignment.
    pending: Vec<u64>,
    pending_rows: usize,
    /// Packed bytes on their way to the file.
    out: Vec<u64>,
}

/// Rows unpacked and re-packed at a time when a file is rewritten.
const STRETCH: usize = 64 * BLOCK;

/// The bytes of a u64 buffer.
fn bytes_mut(b: &mut [u64]) -> &mut [u8] {
    // SAFETY: u8 has no alignment or validity requirements.
    unsafe { std::slice::from_raw_parts_mut(b.as_mut_ptr() as *mut u8, b.len() * 8) }
}

fn io_err(path: &Path, e: std::io::Error) -> Error {
    Error::Io(microtab_io::Error {
        path: path.to_path_buf(),
        error: e,
    })
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
        w.write_all(&[0u8; HEADER_SIZE])?;
        let packing = pack && pack::packable(ty);
        Ok(ColumnWriter {
            w,
            ty,
            rows: 0,
            // A packing column's digest is replaced when the first blocks
            // are packed (their stripe size is known then).
            digest: Digest::new(stripe_bytes(ty, None)),
            rel,
            final_path,
            cfg: cfg.clone(),
            packer: packing.then(|| Packer {
                lo: i64::MAX,
                hi: i64::MIN,
                nulls: false,
                cur: None,
                packed_rows: 0,
                pending: Vec::new(),
                pending_rows: 0,
                out: Vec::new(),
            }),
            generation: 0,
            base_path: path.to_path_buf(),
            transient: false,
            zones: zoned(ty).then_some(ZoneBuilder {
                filled: 0,
                cur: ZoneBuilder::EMPTY,
                table: Vec::new(),
            }),
            seen: seen_base(ty).map(|_| vec![0u8; 1 << (8 * ty.width())]),
        })
    }

    /// Opens the file for each write only (see
    /// [`microtab_io::BlockWriter::set_transient`]).
    pub fn set_transient(&mut self, transient: bool) {
        self.transient = transient;
        self.w.set_transient(transient);
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
    /// payload from byte 4096: a plain array, also when the values were
    /// being packed), for a caller that re-encodes the values into a wider
    /// type. The caller deletes the file.
    pub fn into_partial(mut self) -> Result<PathBuf> {
        if self.packer.is_some() {
            self.make_plain()?;
        }
        let path = self.w.path().to_path_buf();
        self.w.finish()?;
        Ok(path)
    }

    /// Appends values; `T` must match the column type.
    pub fn append<T: NativeType>(&mut self, values: &[T]) -> Result<()> {
        self.append_ranged(values, None)
    }

    /// [`append`](Self::append) for a caller that knows the values' range:
    /// `(min, max, whether the null code occurs)`, the minimum and maximum
    /// leaving out the type's null code (`(i64::MAX, i64::MIN, _)` when
    /// every value is null), as [`pack::range_of`] gives it. Saves a pass
    /// over the values.
    pub fn append_ranged<T: NativeType>(
        &mut self,
        values: &[T],
        range: Option<(i64, i64, bool)>,
    ) -> Result<()> {
        assert_eq!(T::PHYS, self.ty, "column type mismatch");
        let bytes = T::as_bytes(values);
        self.rows += values.len() as u64;
        self.update_zones(bytes, values.len(), range);
        if self.packer.is_none() {
            self.digest.update(bytes);
            self.w.write_all(bytes)?;
            return Ok(());
        }
        let ty = self.ty;
        let w = ty.width();
        let p = self.packer.as_mut().expect("packing");
        let (lo, hi, nulls) = range.unwrap_or_else(|| pack::range_of(ty, bytes));
        p.lo = p.lo.min(lo);
        p.hi = p.hi.max(hi);
        p.nulls |= nulls;
        let n = p.pending_rows + values.len();
        if p.pending.len() * 8 < n * w {
            p.pending.resize((n * w).div_ceil(8), 0);
        }
        bytes_mut(&mut p.pending)[p.pending_rows * w..n * w].copy_from_slice(bytes);
        p.pending_rows = n;
        let need = if p.lo > p.hi {
            // Only nulls so far: every value is the null code.
            Some(Packing {
                bits: 0,
                base: ty.null_code(),
                nulls: false,
            })
        } else {
            Packing::choose(ty, p.lo, p.hi, p.nulls).map(|n| n.centred(ty, p.lo, p.hi))
        };
        let Some(need) = need else {
            // The range needs every bit of the type.
            return self.make_plain();
        };
        match p.cur {
            Some(c) if c == need || c.holds(p.lo, p.hi, p.nulls) => {}
            // A range the packing so far cannot hold.
            Some(_) if p.packed_rows > 0 => self.repack(need)?,
            _ => {
                p.cur = Some(need);
                self.digest = Digest::new(stripe_bytes(ty, Some(need)));
            }
        }
        self.pack_pending(false)
    }

    /// Adds `bytes` (`n` values) to the zone map, from `range` when given
    /// and within one stripe.
    fn update_zones(&mut self, bytes: &[u8], n: usize, range: Option<(i64, i64, bool)>) {
        if let (Some(seen), Some(base)) = (&mut self.seen, seen_base(self.ty)) {
            match range {
                // One value (and perhaps the null code): two marks.
                Some((lo, hi, nulls)) if lo >= hi => {
                    if lo == hi {
                        seen[(lo - base) as usize] = 1;
                    }
                    if nulls {
                        seen[(self.ty.null_code() - base) as usize] = 1;
                    }
                }
                _ => mark_seen(self.ty, bytes, seen),
            }
        }
        let Some(z) = &mut self.zones else {
            return;
        };
        match range {
            // Within one stripe: its zone is the range given.
            Some((lo, hi, nulls)) if z.filled + n <= STRIPE_ROWS => {
                z.cur.lo = z.cur.lo.min(lo);
                z.cur.hi = z.cur.hi.max(hi);
                z.cur.nulls |= nulls;
                z.filled += n;
                if z.filled == STRIPE_ROWS {
                    z.table.extend_from_slice(&z.cur.encode());
                    z.cur = ZoneBuilder::EMPTY;
                    z.filled = 0;
                }
            }
            _ => z.update(self.ty, bytes),
        }
    }

    /// [`append_ranged`](Self::append_ranged) with the values' stripe
    /// checksum (`xxh3` of their bytes) computed by the caller — on another
    /// core, off the writer's path. Used when the values are exactly one
    /// whole stripe of a plain (unpacked) column at a stripe boundary;
    /// otherwise `sum` is ignored and the checksum computed here.
    pub fn append_summed<T: NativeType>(
        &mut self,
        values: &[T],
        range: Option<(i64, i64, bool)>,
        sum: u64,
    ) -> Result<()> {
        assert_eq!(T::PHYS, self.ty, "column type mismatch");
        let bytes = T::as_bytes(values);
        if self.packer.is_none()
            && self.digest.filled == 0
            && bytes.len() == self.digest.stripe_bytes
        {
            self.rows += values.len() as u64;
            self.update_zones(bytes, values.len(), range);
            self.digest.whole.write(bytes);
            self.digest.sums.push(sum);
            return Ok(self.w.write_all(bytes)?);
        }
        self.append_ranged(values, range)
    }

    /// Packs the pending rows' whole blocks (and with `all` the last
    /// partial block too, padded with the base) and writes them.
    fn pack_pending(&mut self, all: bool) -> Result<()> {
        let ty = self.ty;
        let w = ty.width();
        let p = self.packer.as_mut().expect("packing");
        let Some(cur) = p.cur else {
            return Ok(());
        };
        let blocks = if all {
            p.pending_rows.div_ceil(BLOCK)
        } else {
            p.pending_rows / BLOCK
        };
        if blocks == 0 {
            return Ok(());
        }
        let plain_len = blocks * BLOCK * w;
        if p.pending.len() * 8 < plain_len {
            p.pending.resize(plain_len.div_ceil(8), 0);
        }
        if all {
            // Pad the last block with the base (packs as 0).
            let base = cur.base.to_le_bytes();
            for v in bytes_mut(&mut p.pending)[p.pending_rows * w..plain_len].chunks_exact_mut(w) {
                v.copy_from_slice(&base[..w]);
            }
        }
        let len = blocks * cur.block_bytes();
        if p.out.len() * 8 < len {
            p.out.resize(len.div_ceil(8), 0);
        }
        let out = &mut bytes_mut(&mut p.out)[..len];
        pack::pack(ty, cur, &bytes_mut(&mut p.pending)[..plain_len], out);
        self.digest.update(out);
        self.w.write_all(out)?;
        let done = (blocks * BLOCK).min(p.pending_rows);
        p.packed_rows += blocks * BLOCK;
        let rest = p.pending_rows - done;
        bytes_mut(&mut p.pending).copy_within(done * w..(done + rest) * w, 0);
        p.pending_rows = rest;
        Ok(())
    }

    /// Replaces the file (holding `blocks` blocks packed with `cur`) with a
    /// new one beside it: the blocks read back from the page cache a
    /// stretch at a time, unpacked, and packed with `to` (or left plain
    /// when `to` is `None`).
    fn rewrite(&mut self, cur: Packing, blocks: usize, to: Option<Packing>) -> Result<()> {
        let (ty, w) = (self.ty, self.ty.width());
        self.generation += 1;
        let old_path = self.w.path().to_path_buf();
        let mut name = self.base_path.clone().into_os_string();
        name.push(format!(".r{}", self.generation));
        let mut out = BlockWriter::create(Path::new(&name), &self.cfg)?;
        out.set_transient(self.transient);
        out.write_all(&[0u8; HEADER_SIZE])?;
        let mut digest = Digest::new(stripe_bytes(ty, to));
        self.w.flush()?;
        let src = std::fs::File::open(&old_path).map_err(|e| io_err(&old_path, e))?;
        let per = STRETCH / BLOCK;
        let mut stored = vec![0u64; (per * cur.block_bytes()).div_ceil(8)];
        let mut plain = vec![0u64; (STRETCH * w).div_ceil(8)];
        let mut repacked = vec![0u64; to.map_or(0, |t| (per * t.block_bytes()).div_ceil(8))];
        let mut b = 0;
        while b < blocks {
            let k = per.min(blocks - b);
            let sb = &mut bytes_mut(&mut stored)[..k * cur.block_bytes()];
            microtab_io::sys::read_exact_at(&src, sb, (HEADER_SIZE + b * cur.block_bytes()) as u64)
                .map_err(|e| io_err(&old_path, e))?;
            let pb = &mut bytes_mut(&mut plain)[..k * BLOCK * w];
            pack::unpack(ty, cur, sb, pb);
            let bytes: &[u8] = match to {
                None => pb,
                Some(t) => {
                    let o = &mut bytes_mut(&mut repacked)[..k * t.block_bytes()];
                    pack::pack(ty, t, pb, o);
                    o
                }
            };
            digest.update(bytes);
            out.write_all(bytes)?;
            b += k;
        }
        drop(src);
        std::mem::replace(&mut self.w, out).close()?;
        let _ = std::fs::remove_file(&old_path);
        self.digest = digest;
        Ok(())
    }

    /// Rewrites the packed blocks written so far with packing `new`.
    fn repack(&mut self, new: Packing) -> Result<()> {
        let p = self.packer.as_ref().expect("packing");
        let (cur, blocks) = (p.cur.expect("blocks were packed"), p.packed_rows / BLOCK);
        self.rewrite(cur, blocks, Some(new))?;
        self.packer.as_mut().expect("packing").cur = Some(new);
        Ok(())
    }

    /// Turns the column into a plain array: unpacks what was packed,
    /// appends the pending rows, and writes plainly from now on.
    fn make_plain(&mut self) -> Result<()> {
        let mut p = self.packer.take().expect("packing");
        if let Some(cur) = p.cur.filter(|_| p.packed_rows > 0) {
            self.rewrite(cur, p.packed_rows / BLOCK, None)?;
        }
        if p.cur.is_none() || p.packed_rows == 0 {
            // Nothing was packed: the stripes are plain from the start.
            self.digest = Digest::new(stripe_bytes(self.ty, None));
        }
        let rest = &bytes_mut(&mut p.pending)[..p.pending_rows * self.ty.width()];
        self.digest.update(rest);
        Ok(self.w.write_all(rest)?)
    }

    /// Writes the header, `fsync`s, and returns `var` completed with the
    /// file name, size, type, packing and checksum.
    pub fn finish(mut self, mut var: Variable) -> Result<Variable> {
        let mut packing = None;
        if self.packer.is_some() {
            if self.rows == 0 {
                self.make_plain()?;
            } else {
                self.pack_pending(true)?;
                packing = self.packer.as_ref().and_then(|p| p.cur);
            }
        }
        let (checksum, table) = self.digest.finish();
        self.w.write_all(&table)?;
        let zones = self.zones.take().map(ZoneBuilder::finish);
        if let Some(z) = &zones {
            self.w.write_all(z)?;
        }
        let values = match (&self.seen, seen_base(self.ty)) {
            (Some(seen), Some(base)) => ValueSet::from_seen(seen, base, self.ty.null_code()),
            _ => None,
        };
        let header = ColumnHeader {
            version: crate::FORMAT_VERSION,
            ty: self.ty,
            rows: self.rows,
            checksum,
            packing,
            stripe_table: crate::xxh3(&table),
            zones: zones.is_some(),
            zone_table: zones.as_deref().map_or(0, crate::xxh3),
            values,
        };
        self.w.write_at(0, &header.encode())?;
        let tmp = self.w.path().to_path_buf();
        // Made durable with the dataset's other files when it is committed.
        self.w.finish_deferred()?;
        std::fs::rename(&tmp, &self.final_path).map_err(|e| io_err(&self.final_path, e))?;
        if let (Some(z), None, None) = (&zones, var.min, var.max) {
            // A writer that did not say the range gets the true one, so the
            // manifest agrees with the zone map its queries are checked by.
            let z: Vec<Zone> = z
                .chunks_exact(ZONE_BYTES)
                .filter_map(Zone::decode)
                .collect();
            if let (Some((lo, hi)), _) = zone_union(&z, self.ty, var.null_code.is_some()) {
                var.min = Some(crate::Number::Int(lo));
                var.max = Some(crate::Number::Int(hi));
            }
        }
        var.ty = self.ty;
        var.file = self.rel;
        var.bytes = match packing {
            Some(p) => p.stored_len(self.rows as usize) as u64,
            None => self.rows * self.ty.width() as u64,
        };
        var.packing = packing;
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

/// Matches a [`ColumnData`] once for each element type, so that code
/// written once over a slice serves all nine.
///
/// - `match_column!(d, |v| body)`: `body` with `v` bound to the slice, for
///   every type;
/// - `match_column!(d, |v| ints => a, floats => b)`: `a` for the integer
///   types, `b` for `f32` and `f64`;
/// - `match_column!(d, |v: T| ...)`: either form, with the element type
///   also named `T` in the bodies.
#[macro_export]
macro_rules! match_column {
    ($d:expr, |$v:ident| ints => $int:expr, floats => $float:expr $(,)?) => {
        $crate::match_column!($d, |$v: _Elem| ints => $int, floats => $float)
    };
    ($d:expr, |$v:ident: $t:ident| ints => $int:expr, floats => $float:expr $(,)?) => {
        match $d {
            $crate::ColumnData::U8($v) => $crate::match_column!(@as $t = u8, $int),
            $crate::ColumnData::I8($v) => $crate::match_column!(@as $t = i8, $int),
            $crate::ColumnData::U16($v) => $crate::match_column!(@as $t = u16, $int),
            $crate::ColumnData::I16($v) => $crate::match_column!(@as $t = i16, $int),
            $crate::ColumnData::U32($v) => $crate::match_column!(@as $t = u32, $int),
            $crate::ColumnData::I32($v) => $crate::match_column!(@as $t = i32, $int),
            $crate::ColumnData::I64($v) => $crate::match_column!(@as $t = i64, $int),
            $crate::ColumnData::F32($v) => $crate::match_column!(@as $t = f32, $float),
            $crate::ColumnData::F64($v) => $crate::match_column!(@as $t = f64, $float),
        }
    };
    ($d:expr, |$v:ident: $t:ident| $body:expr) => {
        $crate::match_column!($d, |$v: $t| ints => $body, floats => $body)
    };
    ($d:expr, |$v:ident| $body:expr) => {
        $crate::match_column!($d, |$v| ints => $body, floats => $body)
    };
    (@as $t:ident = $ty:ty, $e:expr) => {{
        #[allow(dead_code)]
        type $t = $ty;
        $e
    }};
}

/// A slice as a typed view.
macro_rules! view_of {
    ($($t:ty => $v:ident),*) => {$(
        impl<'a> From<&'a [$t]> for ColumnData<'a> {
            fn from(values: &'a [$t]) -> Self {
                ColumnData::$v(values)
            }
        }
    )*};
}
view_of!(u8 => U8, i8 => I8, u16 => U16, i16 => I16, u32 => U32, i32 => I32, i64 => I64, f32 => F32, f64 => F64);

/// Widens `lo..=hi` to the float `values` that are not NaN, and counts
/// the NaNs (system-missing) in `nulls`.
pub fn fold_floats<T: Copy + Into<f64>>(values: &[T], lo: &mut f64, hi: &mut f64, nulls: &mut u64) {
    for &x in values {
        let x: f64 = x.into();
        if x.is_nan() {
            *nulls += 1;
        } else {
            *lo = lo.min(x);
            *hi = hi.max(x);
        }
    }
}

/// Value `$i` of a [`ColumnData`] cast to `$t`.
macro_rules! widen {
    ($d:expr, $i:expr, $t:ty) => {
        match_column!($d, |v| v[$i] as $t)
    };
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

    /// The values' little-endian bytes.
    pub fn bytes(&self) -> &'a [u8] {
        use crate::NativeType;
        match_column!(*self, |v| NativeType::as_bytes(v))
    }

    /// Number of values.
    pub fn len(&self) -> usize {
        match_column!(self, |v| v.len())
    }

    /// True when there are no values.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Value `i` widened to `f64` (slow path; for small jobs and tests).
    pub fn get_f64(&self, i: usize) -> f64 {
        widen!(self, i, f64)
    }

    /// Value `i` as an `i64` (floats truncated; slow path).
    pub fn get_i64(&self, i: usize) -> i64 {
        widen!(self, i, i64)
    }
}

fn num_text(n: crate::Number) -> String {
    match n {
        crate::Number::Int(i) => i.to_string(),
        crate::Number::Float(f) => f.to_string(),
    }
}

/// The range of the non-null values and whether there are nulls, from a
/// zone map. A column without a null code (`has_null_code` false: it has no
/// nulls) holds its type's null code, which the zone map flags, as an
/// ordinary value.
fn zone_union(zones: &[Zone], ty: PhysType, has_null_code: bool) -> (Option<(i64, i64)>, bool) {
    let (mut lo, mut hi, mut nulls) = (i64::MAX, i64::MIN, false);
    for z in zones {
        nulls |= z.nulls;
        if z.lo <= z.hi {
            lo = lo.min(z.lo);
            hi = hi.max(z.hi);
        }
    }
    if nulls && !has_null_code {
        let c = ty.null_code();
        (lo, hi, nulls) = (lo.min(c), hi.max(c), false);
    }
    ((lo <= hi).then_some((lo, hi)), nulls)
}

/// Checks the manifest's range and nulls of `var` against the column's
/// zone map, which is written from the values and covered by the file's
/// own checksums: exact sums, recode tables, null handling and weight
/// checks are chosen from those claims. The range must hold the zone map's
/// and not reach the null code (`verify`, `strict`: be the zone map's, for
/// numbers); queries (`strict` false) refuse a claim of no nulls where
/// there are some, `verify` also a claim of nulls where there are none.
fn check_range(path: &Path, var: &Variable, zones: &[Zone], strict: bool) -> Result<()> {
    let (range, nulls) = zone_union(zones, var.ty, var.null_code.is_some());
    let said = match (var.min, var.max) {
        (Some(crate::Number::Int(a)), Some(crate::Number::Int(b))) => Some((a, b)),
        (None, None) => None,
        _ => {
            return Err(Error::Corrupt {
                path: path.to_path_buf(),
                reason: format!(
                    "the manifest gives variable {} a range that is not of whole numbers, as its values are",
                    var.name
                ),
            })
        }
    };
    // A narrower claim would put values outside the tables sized by it; a
    // claimed range that reaches the null code would make the nulls values.
    // A wider one is safe and is what text columns may state (a dictionary
    // can hold values no record has: Parquet dictionaries); `verify` wants
    // the exact range of numbers.
    let within = match (range, said) {
        (None, _) => true,
        (Some(_), None) => false,
        (Some((l, h)), Some((a, b))) => a <= l && h <= b,
    };
    let reaches_null = matches!((said, var.null_code), (Some((a, b)), Some(c)) if a <= c && c <= b);
    let covered =
        within && !reaches_null && (!strict || var.kind == crate::Kind::String || range == said);
    let nulls_ok = if strict {
        nulls == (var.nulls > 0)
    } else {
        !nulls || var.nulls > 0
    };
    if covered && nulls_ok {
        return Ok(());
    }
    let shown = |r: Option<(i64, i64)>| r.map_or("none".into(), |(a, b)| format!("{a} to {b}"));
    Err(Error::Corrupt {
        path: path.to_path_buf(),
        reason: format!(
            "the manifest says variable {} has stored values {} and {} nulls; its zone map shows {}{} (the manifest was edited or the file belongs to another dataset)",
            var.name,
            shown(said),
            var.nulls,
            shown(range),
            if nulls { " and nulls" } else { " and no nulls" },
        ),
    })
}

/// A memory-mapped column of a published dataset.
pub struct Column {
    map: MappedFile,
    header: ColumnHeader,
    var: Variable,
    /// The stripe checksums (format version 3; empty before).
    stripes: Vec<u64>,
    /// The zone map (format version 4, integer columns).
    zones: Option<Vec<Zone>>,
    /// Whether reads check stripe checksums (the default).
    checked: bool,
    /// All values of a packed column, unpacked on first use of [`Column::data`].
    unpacked: std::sync::OnceLock<Result<Vec<u64>>>,
    /// Whether every stripe was found intact by [`Column::data`] (a column
    /// of format version 1 or 2: whether its payload matches its checksum).
    whole_ok: std::sync::OnceLock<Result<()>>,
}

impl Column {
    pub(crate) fn open(path: &Path, var: &Variable, rows: u64, checked: bool) -> Result<Self> {
        let corrupt = |reason: String| Error::Corrupt {
            path: path.to_path_buf(),
            reason,
        };
        let map = MappedFile::open(path)?;
        let mut head = vec![0u8; HEADER_SIZE];
        let n = map.read_at(0, &mut head)?;
        if n < HEADER_SIZE {
            return Err(corrupt(format!(
                "the file is {} bytes long, shorter than its {HEADER_SIZE}-byte header (truncated?)",
                map.len()
            )));
        }
        let header = ColumnHeader::decode(path, &head[..n])?;
        if header.packing != var.packing {
            return Err(corrupt(format!(
                "header says packing {:?}, manifest says {:?}",
                header.packing, var.packing
            )));
        }
        let stored = header.stored_len();
        let table_len = header.stripes() as u64 * 8;
        let expect = HEADER_SIZE as u64 + stored + table_len + header.zone_len();
        if header.ty != var.ty || header.rows != rows || map.len() as u64 != expect {
            return Err(corrupt(format!(
                "header says {} x {}, manifest says {} x {}; expected {expect} bytes, the file has {} (truncated or damaged)",
                header.rows,
                header.ty.name(),
                rows,
                var.ty.name(),
                map.len()
            )));
        }
        if format!("xxh3:{:016x}", header.checksum) != var.checksum {
            return Err(corrupt(format!(
                "header checksum xxh3:{:016x} differs from the manifest's {} (the file belongs to another dataset or generation, or is damaged)",
                header.checksum, var.checksum
            )));
        }
        let mut stripes = Vec::new();
        if table_len > 0 {
            let mut table = vec![0u8; table_len as usize];
            let got = map.read_at(HEADER_SIZE as u64 + stored, &mut table)?;
            if got != table.len() || crate::xxh3(&table) != header.stripe_table {
                return Err(corrupt(
                    "the stripe checksum table does not match the header (the file is damaged)"
                        .into(),
                ));
            }
            stripes = table
                .chunks_exact(8)
                .map(|c| u64::from_le_bytes(c.try_into().expect("8 bytes")))
                .collect();
        }
        let mut zones = None;
        if header.zones {
            let mut table = vec![0u8; header.zone_len() as usize];
            let got = map.read_at(HEADER_SIZE as u64 + stored + table_len, &mut table)?;
            let bad =
                || corrupt("the zone map does not match the header (the file is damaged)".into());
            if got != table.len() || crate::xxh3(&table) != header.zone_table {
                return Err(bad());
            }
            zones = Some(
                table
                    .chunks_exact(ZONE_BYTES)
                    .map(Zone::decode)
                    .collect::<Option<Vec<Zone>>>()
                    .ok_or_else(bad)?,
            );
        }
        if let Some(z) = &zones {
            check_range(path, var, z, false)?;
        }
        if let Some(v) = &header.values {
            // Its ends are the zone map's (both written from the values).
            let (lo, hi) = zones
                .iter()
                .flatten()
                .filter(|z| z.lo <= z.hi)
                .fold((i64::MAX, i64::MIN), |(a, b), z| (a.min(z.lo), b.max(z.hi)));
            if v.lo != lo || v.lo + v.span as i64 - 1 != hi {
                return Err(corrupt(
                    "the header's value set does not match the zone map (the file is damaged)"
                        .into(),
                ));
            }
        }
        Ok(Column {
            map,
            header,
            var: var.clone(),
            stripes,
            zones,
            checked,
            unpacked: std::sync::OnceLock::new(),
            whole_ok: std::sync::OnceLock::new(),
        })
    }

    /// The smallest and largest non-null stored value and the number of
    /// nulls, counted from the values themselves (read unchecked: called
    /// after [`verify`](Self::verify) has hashed them).
    fn true_range(&self) -> Result<(Option<(crate::Number, crate::Number)>, u64)> {
        let (mut nulls, mut flo, mut fhi) = (0u64, f64::INFINITY, f64::NEG_INFINITY);
        let (mut ilo, mut ihi) = (i64::MAX, i64::MIN);
        // Without a null code (a column without nulls) every stored value
        // is a value.
        let null = self.var.null_code.unwrap_or(i64::MIN);
        let has_null = self.var.null_code.is_some();
        let mut buf = Vec::new();
        let rows = self.rows();
        let mut s = 0;
        while s < rows {
            let n = STRIPE_ROWS.min(rows - s);
            macro_rules! ints {
                ($v:expr, $t:ty) => {{
                    let nc = null as $t;
                    for &x in $v {
                        if has_null && x == nc {
                            nulls += 1;
                        } else {
                            ilo = ilo.min(x as i64);
                            ihi = ihi.max(x as i64);
                        }
                    }
                }};
            }
            // Unchecked: `verify` hashed the whole file before this pass.
            let (off, len) = self.stored_span(s, n);
            match_column!(
                self.decode_unchecked(&self.payload()[off..off + len], n, &mut buf),
                |v: T| ints => ints!(v, T),
                floats => fold_floats(v, &mut flo, &mut fhi, &mut nulls),
            );
            s += n;
        }
        let range = if self.header.ty.is_float() {
            (flo <= fhi).then_some((crate::Number::Float(flo), crate::Number::Float(fhi)))
        } else {
            (ilo <= ihi).then_some((crate::Number::Int(ilo), crate::Number::Int(ihi)))
        };
        Ok((range, nulls))
    }

    /// The zone map: one [`Zone`] per stripe of [`STRIPE_ROWS`] rows
    /// (`None` for float columns and files before format version 4).
    pub fn zones(&self) -> Option<&[Zone]> {
        self.zones.as_deref()
    }

    /// Which stored values in `lo..=hi` occur, one bit each (bit `v - lo`
    /// of word `(v - lo) / 64`), from the header's value set and the zone
    /// map, without reading the values. The type's null code counts as a
    /// value that occurs when a stripe holds it. `None` when the file has
    /// no value set (a type wider than 16 bits, values spanning more than
    /// [`VALUE_SET_SPAN`], or a file written before value sets).
    pub fn occurring(&self, lo: i64, hi: i64) -> Option<Vec<u64>> {
        let (set, zones) = (self.header.values.as_ref()?, self.zones.as_ref()?);
        if hi < lo {
            return Some(Vec::new());
        }
        let mut bits = vec![0u64; ((hi - lo) as u64 >> 6) as usize + 1];
        let mut mark = |v: i64| {
            let o = (v - lo) as u64;
            bits[(o >> 6) as usize] |= 1 << (o & 63);
        };
        let (a, b) = (lo.max(set.lo), hi.min(set.lo + set.span as i64 - 1));
        for v in a..=b {
            if set.contains(v) {
                mark(v);
            }
        }
        let null = self.header.ty.null_code();
        if (lo..=hi).contains(&null) && zones.iter().any(|z| z.nulls) {
            mark(null);
        }
        Some(bits)
    }

    /// The decoded header.
    pub fn header(&self) -> &ColumnHeader {
        &self.header
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

    /// Checks the stored bytes of rows `start .. start + n` against their
    /// stripe checksums. `start` must be a multiple of [`STRIPE_ROWS`] and
    /// the range must end on a stripe boundary or at the last row, so that
    /// every stripe it touches is checked whole. Columns of format versions
    /// 1 and 2 have no stripe checksums: their whole payload is checked
    /// against its checksum on the first call instead.
    pub fn check(&self, start: usize, stored: &[u8], n: usize) -> Result<()> {
        if !self.checked || n == 0 {
            return Ok(());
        }
        if self.header.version < 3 {
            // No stripe checksums: the whole payload is checked once, on
            // the first read (a dataset imported before version 3 pays a
            // second pass over each column it reads; re-importing it
            // removes that cost).
            return self
                .whole_ok
                .get_or_init(|| self.verify())
                .as_ref()
                .map_err(Error::duplicate)
                .copied();
        }
        if self.stripes.is_empty() {
            // A 0-bit packing: nothing stored beyond the (checked) header.
            return Ok(());
        }
        let rows = self.rows();
        if !start.is_multiple_of(STRIPE_ROWS)
            || !(start + n == rows || n.is_multiple_of(STRIPE_ROWS))
            || start + n > rows
        {
            return Err(Error::Corrupt {
                path: self.path(),
                reason: format!(
                    "internal error: rows {start}..{} do not cover whole checksummed stripes of {STRIPE_ROWS} rows",
                    start + n
                ),
            });
        }
        let (_, len) = self.stored_span(start, n);
        let first = start / STRIPE_ROWS;
        for (i, bytes) in stored[..len].chunks(self.header.stripe_bytes()).enumerate() {
            let k = first + i;
            if crate::xxh3(bytes) != self.stripes[k] {
                return Err(self.stripe_error(k));
            }
        }
        Ok(())
    }

    fn stripe_error(&self, k: usize) -> Error {
        let a = k * STRIPE_ROWS;
        let b = (a + STRIPE_ROWS).min(self.rows());
        Error::Corrupt {
            path: self.path(),
            reason: format!(
                "checksum mismatch in the data of rows {}-{} (stripe {} of {}) of variable {}: the file is damaged (verifying the dataset lists every damaged file)",
                a + 1,
                b,
                k + 1,
                self.stripes.len(),
                self.var.name
            ),
        }
    }

    /// The values of `n` rows starting at row `start` from their stored
    /// bytes (`stored`: as read from [`stored_span`](Self::stored_span)),
    /// after checking them against their stripe checksums (see
    /// [`check`](Self::check)): a view of `stored` itself for a plain
    /// column, else unpacked into `buf`.
    pub fn decode<'a>(
        &self,
        start: usize,
        stored: &'a [u8],
        n: usize,
        buf: &'a mut Vec<u64>,
    ) -> Result<ColumnData<'a>> {
        self.check(start, stored, n)?;
        Ok(self.decode_unchecked(stored, n, buf))
    }

    /// [`decode`](Self::decode) of stored bytes already checked (by
    /// [`check`](Self::check)).
    pub fn decode_unchecked<'a>(
        &self,
        stored: &'a [u8],
        n: usize,
        buf: &'a mut Vec<u64>,
    ) -> ColumnData<'a> {
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
                pack::unpack(ty, p, stored, out);
                ColumnData::view(ty, &out[..n * w])
            }
        }
    }

    /// The values of the rows `rows` (offsets from the first row of
    /// `stored`, stored bytes already checked as in
    /// [`decode_unchecked`](Self::decode_unchecked)), one a row, in `buf`:
    /// a few rows of a morsel without unpacking the rest.
    pub fn gather_unchecked<'a>(
        &self,
        stored: &[u8],
        rows: &[u32],
        buf: &'a mut Vec<u64>,
    ) -> ColumnData<'a> {
        let ty = self.header.ty;
        let w = ty.width();
        let len = rows.len() * w;
        if buf.len() * 8 < len {
            buf.resize(len.div_ceil(8), 0);
        }
        // SAFETY: the bytes of a u64 buffer.
        let out = unsafe { std::slice::from_raw_parts_mut(buf.as_mut_ptr() as *mut u8, len) };
        match self.header.packing {
            None => {
                for (o, &r) in out.chunks_exact_mut(w.max(1)).zip(rows) {
                    let r = r as usize;
                    o.copy_from_slice(&stored[r * w..(r + 1) * w]);
                }
            }
            Some(p) => pack::unpack_rows(ty, p, stored, rows, out),
        }
        ColumnData::view(ty, out)
    }

    /// The checked values of rows `start .. start + n` (`start` a multiple
    /// of [`STRIPE_ROWS`], the end a stripe boundary or the last row): a
    /// view of the mapping for a plain column, else unpacked from it into
    /// `buf`.
    pub fn rows_view<'a>(
        &'a self,
        start: usize,
        n: usize,
        buf: &'a mut Vec<u64>,
    ) -> Result<ColumnData<'a>> {
        let (off, len) = self.stored_span(start, n);
        self.decode(start, &self.payload()[off..off + len], n, buf)
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

    /// Raw payload bytes (without the header and the stripe table).
    pub fn payload(&self) -> &[u8] {
        let b = self.map.bytes();
        let start = HEADER_SIZE.min(b.len());
        let end = (HEADER_SIZE + self.header.stored_len() as usize).min(b.len());
        &b[start..end]
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

    /// Reads the whole payload and checks it against the header's and the
    /// manifest's checksum and (format version 3) every stripe checksum,
    /// whether or not reads of this column are checked.
    pub fn verify(&self) -> Result<()> {
        let payload = self.payload();
        if !self.stripes.is_empty() {
            for (k, bytes) in payload.chunks(self.header.stripe_bytes()).enumerate() {
                if crate::xxh3(bytes) != self.stripes[k] {
                    return Err(self.stripe_error(k));
                }
            }
        }
        if let Some(zones) = &self.zones {
            // The zone map against the values themselves: a map that
            // claimed a narrower range would skip rows a filter passes.
            let mut buf = Vec::new();
            let rows = self.rows();
            for (k, z) in zones.iter().enumerate() {
                let s = k * STRIPE_ROWS;
                let v = self.rows_view(s, STRIPE_ROWS.min(rows - s), &mut buf)?;
                if zone_of(self.header.ty, v) != *z {
                    return Err(Error::Corrupt {
                        path: self.path(),
                        reason: format!(
                            "the zone map of stripe {k} (rows {s}..) does not match its values"
                        ),
                    });
                }
            }
        }
        if let (Some(set), Some(base)) = (&self.header.values, seen_base(self.header.ty)) {
            // The value set against the values: a set missing a value
            // would drop the records that hold it from a grouping.
            let mut seen = vec![0u8; 1 << (8 * self.header.ty.width())];
            let (mut buf, rows) = (Vec::new(), self.rows());
            let mut s = 0;
            while s < rows {
                let n = STRIPE_ROWS.min(rows - s);
                mark_seen(
                    self.header.ty,
                    self.rows_view(s, n, &mut buf)?.bytes(),
                    &mut seen,
                );
                s += n;
            }
            if ValueSet::from_seen(&seen, base, self.header.ty.null_code()).as_ref() != Some(set) {
                return Err(Error::Corrupt {
                    path: self.path(),
                    reason: "the header's value set does not match the values".into(),
                });
            }
        }
        let got = crate::xxh3(payload);
        if got != self.header.checksum || format!("xxh3:{got:016x}") != self.var.checksum {
            return Err(Error::Corrupt {
                path: self.path(),
                reason: format!(
                    "checksum mismatch: the payload hashes to xxh3:{got:016x}, the manifest says {} (the file is damaged)",
                    self.var.checksum
                ),
            });
        }
        Ok(())
    }

    /// Checks what the manifest says of the values (their range and their
    /// nulls) against the values themselves, read whole: queries choose
    /// exact sums, recode tables and weight checks from it. Call it only
    /// after [`verify`](Self::verify) found the file intact: the values are
    /// not hashed again.
    pub fn verify_claims(&self) -> Result<()> {
        if let Some(z) = &self.zones {
            check_range(&self.path(), &self.var, z, true)?;
        }
        let (range, nulls) = self.true_range()?;
        let said = self.var.min.zip(self.var.max);
        // A float read back from the manifest's JSON text may differ from
        // the value written in its last bits (serde_json's fast parse).
        let near = |a: crate::Number, b: crate::Number| match (a, b) {
            (crate::Number::Float(x), crate::Number::Float(y)) => {
                x == y || (x - y).abs() <= 1e-14 * x.abs().max(y.abs())
            }
            _ => a == b,
        };
        let same = match (range, said) {
            // Text codes: checked against the zone map above (a dictionary
            // may hold values no record has).
            _ if self.var.kind == crate::Kind::String => true,
            (Some((a, b)), Some((c, d))) => near(a, c) && near(b, d),
            (r, s) => r == s,
        };
        if nulls != self.var.nulls || !same {
            let shown = |r: Option<(crate::Number, crate::Number)>| match r {
                Some((a, b)) => format!("{} to {}", num_text(a), num_text(b)),
                None => "none".to_string(),
            };
            return Err(Error::Corrupt {
                path: self.path(),
                reason: format!(
                    "the manifest says variable {} has values {} and {} nulls; its values are {} with {nulls} nulls (the manifest was edited)",
                    self.var.name,
                    shown(said),
                    self.var.nulls,
                    shown(range),
                ),
            });
        }
        Ok(())
    }

    /// Typed view of all the values, every stripe checked once (a v1/v2
    /// column: the whole payload's checksum): the mapping itself for a
    /// plain column; a packed column is unpacked into memory on first use
    /// (scans use [`rows_view`](Self::rows_view) or
    /// [`decode`](Self::decode) a stretch at a time instead).
    pub fn data(&self) -> Result<ColumnData<'_>> {
        let ty = self.header.ty;
        if self.header.version < 3 {
            self.check(0, self.payload(), self.rows())?;
        } else {
            let checked = self
                .whole_ok
                .get_or_init(|| self.check(0, self.payload(), self.rows()));
            if let Err(e) = checked {
                return Err(e.duplicate());
            }
        }
        match self.header.packing {
            None => Ok(ColumnData::view(ty, self.payload())),
            Some(_) => {
                let rows = self.rows();
                let all = self.unpacked.get_or_init(|| {
                    let mut buf = Vec::new();
                    self.decode_unchecked(self.payload(), rows, &mut buf);
                    Ok(buf)
                });
                let all = all.as_ref().map_err(Error::duplicate)?;
                // SAFETY: the bytes of a u64 buffer.
                let bytes = unsafe {
                    std::slice::from_raw_parts(all.as_ptr() as *const u8, rows * ty.width())
                };
                Ok(ColumnData::view(ty, bytes))
            }
        }
    }

    /// Where the stored values start in the file and how many bytes hold
    /// how many rows (for readers that stream the file themselves; they
    /// hand what they read to [`decode`](Self::decode)).
    pub fn source(&self) -> microtab_io::ColumnSource {
        let (unit_rows, width) = match self.header.packing {
            Some(p) => (BLOCK, p.block_bytes()),
            None => (1, self.header.ty.width()),
        };
        microtab_io::ColumnSource {
            path: self.path(),
            file: self.map.file().ok().map(std::sync::Arc::new),
            offset: HEADER_SIZE as u64,
            width,
            unit_rows,
        }
    }

    /// The values if the column is `u8`.
    pub fn as_u8(&self) -> Result<Option<&[u8]>> {
        Ok(match self.data()? {
            ColumnData::U8(v) => Some(v),
            _ => None,
        })
    }
}

#[cfg(test)]
mod tests {
    use crate::{Dataset, DatasetWriter, Kind, Packing, PhysType, Variable};

    /// Writes `chunks` as one u16 column X in that many appends (and a u8
    /// column Y from `chunks8`), publishes the dataset and returns it.
    fn write(
        dir: &std::path::Path,
        pack: bool,
        chunks: &[Vec<u16>],
        chunks8: &[Vec<u8>],
    ) -> Dataset {
        let t = dir.join(format!("d{pack}.mtab"));
        let mut w = DatasetWriter::create(&t, false).unwrap();
        w.set_packing(pack);
        let mut c = w.column_writer("X", PhysType::U16).unwrap();
        for ch in chunks {
            c.append(ch).unwrap();
        }
        let rows = c.rows();
        w.add_variable(
            c.finish(Variable::new("X", Kind::Int, PhysType::U16))
                .unwrap(),
        );
        let mut c = w.column_writer("Y", PhysType::U8).unwrap();
        for ch in chunks8 {
            c.append(ch).unwrap();
        }
        w.add_variable(
            c.finish(Variable::new("Y", Kind::Int, PhysType::U8))
                .unwrap(),
        );
        w.commit(rows).unwrap();
        Dataset::open(&t).unwrap()
    }

    /// The values of column `name` (verified first), stored as `T`.
    fn values<T: crate::NativeType>(ds: &Dataset, name: &str) -> Vec<T> {
        let c = ds.column(name).unwrap();
        c.verify().unwrap();
        let all: Box<dyn std::any::Any> =
            crate::match_column!(c.data().unwrap(), |v| Box::new(v.to_vec()));
        *all.downcast::<Vec<T>>().expect("stored as another type")
    }

    /// The range grows over the appends (re-packing what was written),
    /// nulls (the u16 null code 65535) arrive late, appends are smaller and
    /// larger than a block: the column reads back exactly, with the packing
    /// the final range needs, computed by hand.
    #[test]
    fn growing_range_repacks_and_reads_back() {
        let dir = tempfile::tempdir().unwrap();
        let a: Vec<u16> = (0..700).map(|i| 100 + (i % 3) as u16).collect(); // 100..=102
        let b: Vec<u16> = (0..5000).map(|i| 100 + (i % 50) as u16).collect(); // ..=149
        let c: Vec<u16> = (0..3000)
            .map(|i| {
                if i % 7 == 0 {
                    65535
                } else {
                    90 + (i % 400) as u16
                }
            })
            .collect();
        let d: Vec<u16> = vec![95; 10];
        let y: Vec<Vec<u8>> = vec![vec![255; 700], vec![1; 8010]]; // nulls first, then 1
        let ds = write(
            dir.path(),
            true,
            &[a.clone(), b.clone(), c.clone(), d.clone()],
            &y,
        );
        let all: Vec<u16> = [a, b, c, d].concat();
        assert_eq!(values::<u16>(&ds, "X"), all);
        // 90..=489 and the null code: 400 values + all ones → 9 bits; the
        // base at most 90, and 489 within the 511 − 1 codes above it.
        let v = ds.variable("X").unwrap();
        let p = v.packing.unwrap();
        assert_eq!((p.bits, p.nulls), (9, true));
        assert!(p.base <= 90 && 489 - p.base <= 510, "{p:?}");
        assert_eq!(v.bytes, 9 * 128 * 9); // 8710 rows: 9 blocks of 128 × 9 bytes
                                          // Y: only nulls at first (0 bits, base 255), then 1s: one bit and the null.
        assert_eq!(
            values::<u8>(&ds, "Y"),
            [vec![255u8; 700], vec![1; 8010]].concat()
        );
        assert_eq!(
            ds.variable("Y").unwrap().packing,
            Some(Packing {
                bits: 1,
                base: 1,
                nulls: true
            })
        );
    }

    /// A range that grows to the full width turns the column into a plain
    /// array; `set_packing(false)` writes plain arrays from the start.
    #[test]
    fn full_range_and_plain_writer_store_plain_arrays() {
        let dir = tempfile::tempdir().unwrap();
        let a: Vec<u16> = (0..3000).map(|i| (i % 10) as u16).collect();
        let b: Vec<u16> = vec![0, 65534, 7];
        let y = vec![(0..3003).map(|i| (i % 256) as u8).collect::<Vec<u8>>()];
        for pack in [true, false] {
            let ds = write(dir.path(), pack, &[a.clone(), b.clone()], &y);
            assert_eq!(values::<u16>(&ds, "X"), [a.clone(), b.clone()].concat());
            assert_eq!(values::<u8>(&ds, "Y"), y[0]);
            for name in ["X", "Y"] {
                assert_eq!(ds.variable(name).unwrap().packing, None, "{name}");
            }
        }
    }

    /// The zone map holds each stripe's smallest and largest value other
    /// than the null code, and whether the null code occurs, computed here
    /// by a plain loop over the values; appends of odd sizes cross stripe
    /// boundaries, one stripe holds only nulls, the range grows (re-packing)
    /// and, in the plain writer, the file is never packed. A flipped byte
    /// in the zone map is refused when the column is opened.
    #[test]
    fn zone_map_per_stripe() {
        let dir = tempfile::tempdir().unwrap();
        let s = crate::STRIPE_ROWS;
        let rows = 3 * s + 1234;
        let vals: Vec<u16> = (0..rows)
            .map(|i| match i / s {
                0 => 500 + (i % 97) as u16,
                1 => 65535, // nulls only
                2 if i % 11 == 0 => 65535,
                2 => 7 + (i % 3000) as u16,
                _ => 40_000 + (i % 5) as u16,
            })
            .collect();
        let y: Vec<u8> = (0..rows).map(|i| (i / 1000 % 250) as u8).collect();
        for pack in [true, false] {
            let cuts = [0, 1, 1000, s - 1, s + 5, 2 * s, 2 * s + 77, rows];
            let chunks: Vec<Vec<u16>> =
                cuts.windows(2).map(|w| vals[w[0]..w[1]].to_vec()).collect();
            let ds = write(dir.path(), pack, &chunks, std::slice::from_ref(&y));
            assert_eq!(values::<u16>(&ds, "X"), vals);
            let want: Vec<crate::Zone> = vals
                .chunks(s)
                .map(|c| {
                    let ok: Vec<i64> = c
                        .iter()
                        .filter(|&&v| v != 65535)
                        .map(|&v| v as i64)
                        .collect();
                    crate::Zone {
                        lo: ok.iter().copied().min().unwrap_or(i64::MAX),
                        hi: ok.iter().copied().max().unwrap_or(i64::MIN),
                        nulls: ok.len() < c.len(),
                    }
                })
                .collect();
            assert_eq!(ds.column("X").unwrap().zones().unwrap(), &want[..]);
            assert_eq!(
                want[1],
                crate::Zone {
                    lo: i64::MAX,
                    hi: i64::MIN,
                    nulls: true
                }
            );
            assert_eq!(
                want[3],
                crate::Zone {
                    lo: 40_000,
                    hi: 40_004,
                    nulls: false
                }
            );
            let yz = ds.column("Y").unwrap().zones().unwrap().to_vec();
            assert_eq!(yz.len(), 4);
            assert_eq!(
                yz[0],
                crate::Zone {
                    lo: 0,
                    hi: 32,
                    nulls: false
                }
            );
            // Damage the last byte of the zone map (the file's last byte).
            let path = ds.column("X").unwrap().path();
            drop(ds);
            let mut b = std::fs::read(&path).unwrap();
            *b.last_mut().unwrap() ^= 1;
            std::fs::write(&path, &b).unwrap();
            let t = dir.path().join(format!("d{pack}.mtab"));
            let e = Dataset::open(&t)
                .unwrap()
                .column("X")
                .err()
                .expect("damaged zone map opened");
            assert!(e.to_string().contains("zone map"), "{e}");
            // A forged zone map (stripe 0 claims 501.., its checksums
            // made to match) opens, but `verify` compares it with the values.
            *b.last_mut().unwrap() ^= 1;
            let at = b.len() - 4 * crate::ZONE_BYTES;
            b[at..at + 8].copy_from_slice(&501i64.to_le_bytes());
            let zsum = crate::xxh3(&b[at..]);
            b[64..72].copy_from_slice(&zsum.to_le_bytes());
            let hsum = crate::xxh3(&b[..super::HEADER_SUM_AT]);
            b[super::HEADER_SUM_AT..crate::HEADER_SIZE].copy_from_slice(&hsum.to_le_bytes());
            std::fs::write(&path, &b).unwrap();
            let ds = Dataset::open(&t).unwrap();
            let c = ds.column("X").unwrap();
            assert_eq!(c.zones().unwrap()[0].lo, 501);
            let e = c.verify().expect_err("forged zone map verified");
            assert!(e.to_string().contains("zone map of stripe 0"), "{e}");
        }
    }

    /// The header's value set holds the values that occur other than the
    /// null code, as a set built here from the values; `occurring` gives
    /// them over any range, with the null code where a stripe holds it.
    /// Appends with and without a given range (one value, only nulls),
    /// packed and plain; a u8, a u16 and an i16 column; no set when the
    /// values span too much or are all null.
    #[test]
    fn value_set_in_header() {
        use std::collections::BTreeSet;
        let dir = tempfile::tempdir().unwrap();
        let want = |v: &[Vec<u16>]| -> BTreeSet<i64> {
            v.concat()
                .iter()
                .filter(|&&x| x != 65535)
                .map(|&x| x as i64)
                .collect()
        };
        let x = vec![
            (0..5000)
                .map(|i| 100 + (i % 3) as u16)
                .collect::<Vec<u16>>(),
            vec![65535; 7],
            vec![5000, 100, 4000],
        ];
        let y = vec![(0..5000).map(|i| (i % 10) as u8).collect(), vec![255u8; 10]];
        for pack in [true, false] {
            let ds = write(dir.path(), pack, &x, &y);
            let c = ds.column("X").unwrap();
            c.verify().unwrap();
            let set = c.header().values.clone().expect("a value set");
            let w = want(&x);
            assert_eq!((set.lo, set.span), (100, 4901));
            for v in 0..=65535i64 {
                assert_eq!(set.contains(v), w.contains(&v), "{v}");
            }
            // Over 90..=65535: the values and the null code (it occurs).
            let bits = c.occurring(90, 65535).unwrap();
            let got: BTreeSet<i64> = (90..=65535i64)
                .filter(|v| bits[((v - 90) >> 6) as usize] >> ((v - 90) & 63) & 1 == 1)
                .collect();
            let mut w_null = w.clone();
            w_null.insert(65535);
            assert_eq!(got, w_null);
            let bits = c.occurring(101, 4000).unwrap();
            let got: Vec<i64> = (101..=4000i64)
                .filter(|v| bits[((v - 101) >> 6) as usize] >> ((v - 101) & 63) & 1 == 1)
                .collect();
            assert_eq!(got, [101, 102, 4000]);
            let c = ds.column("Y").unwrap();
            let set = c.header().values.clone().expect("a value set");
            assert_eq!((set.lo, set.span), (0, 10));
            assert!((0..10).all(|v| set.contains(v)) && !set.contains(255));
            let bits = c.occurring(0, 255).unwrap();
            assert_eq!(bits[3] >> 63, 1, "the null code 255 occurs");
        }
        // Too wide a span, and only nulls: no set (a scan finds them).
        let wide = tempfile::tempdir().unwrap();
        let ds = write(wide.path(), true, &[vec![0, 40_000]], &[vec![255, 255]]);
        assert_eq!(ds.column("X").unwrap().header().values, None);
        assert_eq!(ds.column("X").unwrap().occurring(0, 40_000), None);
        assert_eq!(ds.column("Y").unwrap().header().values, None);
        // An i16 column, appends given their range: one value, only nulls.
        let t = dir.path().join("i16.mtab");
        let mut w = DatasetWriter::create(&t, false).unwrap();
        let mut c = w.column_writer("Z", PhysType::I16).unwrap();
        c.append_ranged(&[7i16; 300], Some((7, 7, false))).unwrap();
        c.append_ranged(&[i16::MIN; 3], Some((i64::MAX, i64::MIN, true)))
            .unwrap();
        c.append(&[-300i16, -5, 7, i16::MIN]).unwrap();
        w.add_variable(
            c.finish(Variable::new("Z", Kind::Int, PhysType::I16))
                .unwrap(),
        );
        w.commit(307).unwrap();
        let ds = Dataset::open(&t).unwrap();
        let c = ds.column("Z").unwrap();
        c.verify().unwrap();
        let set = c.header().values.clone().unwrap();
        assert_eq!((set.lo, set.span), (-300, 308));
        let got: Vec<i64> = (-400..400).filter(|&v| set.contains(v)).collect();
        assert_eq!(got, [-300, -5, 7]);
    }

    /// A value set damaged with its header's checksum made to match: an
    /// end that moved is refused when the column is opened (the zone map
    /// disagrees), a value dropped inside is found by `verify`.
    #[test]
    fn forged_value_set() {
        let dir = tempfile::tempdir().unwrap();
        let x = vec![vec![100u16, 101, 102, 65535, 300]];
        let ds = write(dir.path(), false, &x, &[vec![1u8; 5]]);
        let path = ds.column("X").unwrap().path();
        drop(ds);
        let good = std::fs::read(&path).unwrap();
        let t = dir.path().join("dfalse.mtab");
        let forge = |edit: &dyn Fn(&mut Vec<u8>)| {
            let mut b = good.clone();
            edit(&mut b);
            let hsum = crate::xxh3(&b[..super::HEADER_SUM_AT]);
            b[super::HEADER_SUM_AT..crate::HEADER_SIZE].copy_from_slice(&hsum.to_le_bytes());
            std::fs::write(&path, &b).unwrap();
            Dataset::open(&t).unwrap()
        };
        // The set's lo moved to 99 (its bits unchanged).
        let ds = forge(&|b| b[80..88].copy_from_slice(&99i64.to_le_bytes()));
        let e = ds.column("X").err().expect("forged value set opened");
        assert!(e.to_string().contains("value set"), "{e}");
        // 101 dropped (bit 1 of the first word): opens, `verify` refuses.
        let ds = forge(&|b| b[super::VALUES_AT] &= !2);
        let c = ds.column("X").unwrap();
        assert!(!c.header().values.as_ref().unwrap().contains(101));
        let e = c.verify().expect_err("forged value set verified");
        assert!(e.to_string().contains("value set"), "{e}");
        // Bits past the span: malformed.
        let ds = forge(&|b| b[super::VALUES_AT + 25] |= 2);
        let e = ds.column("X").err().expect("malformed value set opened");
        assert!(e.to_string().contains("value set"), "{e}");
    }

    /// `into_partial` hands back a plain array even while packing.
    #[test]
    fn partial_file_is_plain() {
        let dir = tempfile::tempdir().unwrap();
        let t = dir.path().join("p.mtab");
        let mut w = DatasetWriter::create(&t, false).unwrap();
        let mut c = w.column_writer("X", PhysType::U16).unwrap();
        let vals: Vec<u16> = (0..2500).map(|i| 1000 + (i % 13) as u16).collect();
        c.append(&vals).unwrap();
        let path = c.into_partial().unwrap();
        let bytes = std::fs::read(&path).unwrap();
        let got: Vec<u16> = bytes[crate::HEADER_SIZE..]
            .chunks(2)
            .map(|b| u16::from_le_bytes([b[0], b[1]]))
            .collect();
        assert_eq!(got, vals);
    }
}
