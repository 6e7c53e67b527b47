//! Bit-packed integer columns.
//!
//! A packed column stores every value as `bits` bits: the value minus the
//! column's `base` (at most its minimum), and — when `nulls` is set — all ones for
//! the type's null code (system-missing). Values are packed in blocks of
//! [`BLOCK`] rows with a *vertical* layout (as in Lemire and Boytsov's
//! SIMD-BP128): a block of a column whose type is `W` bits wide is `W`
//! values deep in `L = 1024 / W` lanes. Value `k·L + j` of the block lives
//! in lane `j` at bits `k·bits ..` of that lane's bit stream, and word `m`
//! of lane `j` is word `m·L + j` of the block (words are the column type's
//! width, little-endian). Unpacking value row `k` of a block is then one
//! shift, one or and one mask over `L` neighbouring words — straight-line
//! vector code — and a block is always `128 × bits` bytes, so row `r` of
//! the column starts in block `r / 1024` at byte `(r / 1024) · 128 · bits`.
//!
//! The last block is padded with the base value. The layout is documented in
//! `docs/FORMAT.md`.

use crate::PhysType;
use serde::{Deserialize, Serialize};

/// Rows per packed block.
pub const BLOCK: usize = 1024;

/// How a column's values are packed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Packing {
    /// Bits per value (0 when every value is the base).
    pub bits: u32,
    /// The value stored as 0 (at most the column's minimum), in stored units.
    pub base: i64,
    /// All ones stands for the type's null code.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub nulls: bool,
}

/// Whether columns of `ty` can be packed: the integer types up to 32 bits.
pub fn packable(ty: PhysType) -> bool {
    matches!(
        ty,
        PhysType::U8 | PhysType::I8 | PhysType::U16 | PhysType::I16 | PhysType::U32 | PhysType::I32
    )
}

impl Packing {
    /// The packing for a column of `ty` holding `min..=max` (plus its null
    /// code when `nulls`), if it saves space: integer types up to 32 bits
    /// whose range needs fewer bits than the type has.
    pub fn choose(ty: PhysType, min: i64, max: i64, nulls: bool) -> Option<Packing> {
        if !packable(ty) || max < min {
            return None;
        }
        // Values 0..=span-1 (and all ones for null when the column has nulls).
        let span = (max - min) as u64 + nulls as u64;
        let bits = 64 - span.leading_zeros();
        (bits < 8 * ty.width() as u32).then_some(Packing {
            bits,
            base: min,
            nulls,
        })
    }

    /// The same bits with the base moved down by half the codes the range
    /// `min..=max` leaves unused (not below the type's minimum), so that a
    /// writer that has seen only part of a column can take smaller values
    /// later without re-packing (PERWT's first stretch had 359…6150, the
    /// whole column 350…6150).
    pub fn centred(self, ty: PhysType, min: i64, max: i64) -> Packing {
        let top = (1i64 << self.bits) - 1 - self.nulls as i64;
        let spare = (top - (max - min)).max(0);
        Packing {
            base: (min - spare / 2).max(ty.int_range().0),
            ..self
        }
    }

    /// Whether values `min..=max` (none when `max < min`), and the null
    /// code when `nulls`, can be stored with this packing.
    pub fn holds(self, min: i64, max: i64, nulls: bool) -> bool {
        let top = (1i64 << self.bits) - 1 - self.nulls as i64;
        (!nulls || self.nulls) && (max < min || (min >= self.base && max - self.base <= top))
    }

    /// Bytes of one packed block.
    pub fn block_bytes(self) -> usize {
        128 * self.bits as usize
    }

    /// Bytes holding `rows` values (whole blocks).
    pub fn stored_len(self, rows: usize) -> usize {
        rows.div_ceil(BLOCK) * self.block_bytes()
    }
}

/// Lane words: the unsigned integer as wide as the column type.
trait Lane: Copy + Eq + Default {
    const BITS: usize;
    fn from_i64(v: i64) -> Self;
    fn shr(self, s: usize) -> Self;
    fn shl(self, s: usize) -> Self;
    fn or(self, o: Self) -> Self;
    fn and(self, o: Self) -> Self;
    fn add(self, o: Self) -> Self;
    fn sub(self, o: Self) -> Self;
    fn mask(bits: usize) -> Self;
}

macro_rules! lane {
    ($u:ty) => {
        impl Lane for $u {
            const BITS: usize = <$u>::BITS as usize;
            #[inline(always)]
            fn from_i64(v: i64) -> Self {
                v as $u
            }
            #[inline(always)]
            fn shr(self, s: usize) -> Self {
                self >> s
            }
            #[inline(always)]
            fn shl(self, s: usize) -> Self {
                self << s
            }
            #[inline(always)]
            fn or(self, o: Self) -> Self {
                self | o
            }
            #[inline(always)]
            fn and(self, o: Self) -> Self {
                self & o
            }
            #[inline(always)]
            fn add(self, o: Self) -> Self {
                self.wrapping_add(o)
            }
            #[inline(always)]
            fn sub(self, o: Self) -> Self {
                self.wrapping_sub(o)
            }
            #[inline(always)]
            fn mask(bits: usize) -> Self {
                ((1 as $u) << bits).wrapping_sub(1)
            }
        }
    };
}
lane!(u8);
lane!(u16);
lane!(u32);

/// Unpacks whole blocks of `words` into `out` (`out.len()` a multiple of
/// [`BLOCK`]); `null` is the null code when the column has nulls.
#[inline(always)]
fn unpack_lanes<U: Lane, const NULL: bool>(
    words: &[U],
    bits: usize,
    base: U,
    null: U,
    out: &mut [U],
) {
    let l = BLOCK / U::BITS;
    if bits == 0 {
        out.fill(base);
        return;
    }
    let mask = U::mask(bits);
    for (blk, o) in words
        .chunks_exact(l * bits)
        .zip(out.chunks_exact_mut(BLOCK))
    {
        for k in 0..U::BITS {
            let bit = k * bits;
            let (m, s) = (bit / U::BITS, bit % U::BITS);
            let o = &mut o[k * l..(k + 1) * l];
            let lo = &blk[m * l..(m + 1) * l];
            let fin = |p: U| {
                if NULL && p == mask {
                    null
                } else {
                    p.add(base)
                }
            };
            if s + bits <= U::BITS {
                for (o, &lo) in o.iter_mut().zip(lo) {
                    *o = fin(lo.shr(s).and(mask));
                }
            } else {
                let hi = &blk[(m + 1) * l..(m + 2) * l];
                let r = U::BITS - s;
                for ((o, &lo), &hi) in o.iter_mut().zip(lo).zip(hi) {
                    *o = fin(lo.shr(s).or(hi.shl(r)).and(mask));
                }
            }
        }
    }
}

/// Unpacks the values of rows `rows` (offsets from the first row of
/// `words`' first block) into `out`, one a row.
#[inline(always)]
fn unpack_rows_lanes<U: Lane, const NULL: bool>(
    words: &[U],
    bits: usize,
    base: U,
    null: U,
    rows: &[u32],
    out: &mut [U],
) {
    if bits == 0 {
        out.fill(base);
        return;
    }
    let l = BLOCK / U::BITS;
    let mask = U::mask(bits);
    for (o, &i) in out.iter_mut().zip(rows) {
        let i = i as usize;
        let (r, blk) = (i % BLOCK, &words[i / BLOCK * l * bits..]);
        // Row `k·L + j` of a block: lane j, bits `k·bits ..` of it.
        let bit = r / l * bits;
        let (m, s, j) = (bit / U::BITS, bit % U::BITS, r % l);
        let mut p = blk[m * l + j].shr(s);
        if s + bits > U::BITS {
            p = p.or(blk[(m + 1) * l + j].shl(U::BITS - s));
        }
        let p = p.and(mask);
        *o = if NULL && p == mask { null } else { p.add(base) };
    }
}

/// Unpacks the values of rows `rows` (offsets from the first row of
/// `stored`, whole blocks of a column of type `ty`) into `out`, the
/// little-endian bytes of `rows.len()` values.
///
/// # Panics
/// If a row is beyond `stored`, `out` is not `rows.len()` values long, or
/// a buffer is not aligned for `ty`.
pub fn unpack_rows(ty: PhysType, p: Packing, stored: &[u8], rows: &[u32], out: &mut [u8]) {
    assert_eq!(out.len(), rows.len() * ty.width(), "one value a row");
    let null = p.nulls.then(|| ty.null_code());
    let b = p.bits as usize;
    let blocks = stored.len() / p.block_bytes().max(1);
    assert!(
        b == 0 || rows.iter().all(|&r| (r as usize) < blocks * BLOCK),
        "rows beyond the packed data"
    );
    macro_rules! go {
        ($u:ty) => {{
            let (w, o) = (cast::<$u>(stored), cast_mut::<$u>(out));
            let base = <$u>::from_i64(p.base);
            match null {
                Some(n) => unpack_rows_lanes::<$u, true>(w, b, base, <$u>::from_i64(n), rows, o),
                None => unpack_rows_lanes::<$u, false>(w, b, base, 0, rows, o),
            }
        }};
    }
    match ty.width() {
        1 => go!(u8),
        2 => go!(u16),
        4 => go!(u32),
        _ => unreachable!("only 8-, 16- and 32-bit columns are packed"),
    }
}

/// Packs whole blocks of `vals` (`vals.len()` a multiple of [`BLOCK`]) into
/// `words` (`vals.len() / 1024 × 128 × bits` bytes).
fn pack_lanes<U: Lane>(vals: &[U], bits: usize, base: U, null: Option<U>, words: &mut [U]) {
    if bits == 0 {
        return;
    }
    let l = BLOCK / U::BITS;
    let mask = U::mask(bits);
    words.fill(U::default());
    for (v, blk) in vals
        .chunks_exact(BLOCK)
        .zip(words.chunks_exact_mut(l * bits))
    {
        for k in 0..U::BITS {
            let bit = k * bits;
            let (m, s) = (bit / U::BITS, bit % U::BITS);
            for j in 0..l {
                let x = v[k * l + j];
                let p = match null {
                    Some(n) if x == n => mask,
                    _ => x.sub(base),
                };
                blk[m * l + j] = blk[m * l + j].or(p.shl(s));
                if s + bits > U::BITS {
                    blk[(m + 1) * l + j] = blk[(m + 1) * l + j].or(p.shr(U::BITS - s));
                }
            }
        }
    }
}

/// The smallest and largest value of `plain` (little-endian values of
/// `ty`) other than the type's null code, and whether the null code occurs;
/// `(i64::MAX, i64::MIN, _)` when there are no other values.
pub fn range_of(ty: PhysType, plain: &[u8]) -> (i64, i64, bool) {
    let null = ty.null_code();
    macro_rules! go {
        ($t:ty) => {{
            let v = cast::<$t>(plain);
            let nc = null as $t;
            // The null code is the type's maximum (unsigned) or minimum
            // (signed), so plain min and max (a loop that vectorises) show
            // whether it occurs; only then a second pass leaves it out.
            let lo0 = v.iter().fold(<$t>::MAX, |a, &x| a.min(x));
            let hi0 = v.iter().fold(<$t>::MIN, |a, &x| a.max(x));
            let n = lo0 == nc || hi0 == nc;
            let (lo, hi) = if n {
                v.iter().fold((<$t>::MAX, <$t>::MIN), |(lo, hi), &x| {
                    let null = x == nc;
                    (
                        lo.min(if null { <$t>::MAX } else { x }),
                        hi.max(if null { <$t>::MIN } else { x }),
                    )
                })
            } else {
                (lo0, hi0)
            };
            if lo > hi {
                (i64::MAX, i64::MIN, n)
            } else {
                (lo as i64, hi as i64, n)
            }
        }};
    }
    match ty {
        PhysType::U8 => go!(u8),
        PhysType::I8 => go!(i8),
        PhysType::U16 => go!(u16),
        PhysType::I16 => go!(i16),
        PhysType::U32 => go!(u32),
        PhysType::I32 => go!(i32),
        PhysType::I64 => go!(i64),
        _ => unreachable!("only integer columns have a range"),
    }
}

fn cast<U>(b: &[u8]) -> &[U] {
    let w = std::mem::size_of::<U>();
    assert!(b.len().is_multiple_of(w) && (b.as_ptr() as usize).is_multiple_of(w));
    // SAFETY: length and alignment checked; every bit pattern is a valid
    // unsigned integer.
    unsafe { std::slice::from_raw_parts(b.as_ptr() as *const U, b.len() / w) }
}

fn cast_mut<U>(b: &mut [u8]) -> &mut [U] {
    let w = std::mem::size_of::<U>();
    assert!(b.len().is_multiple_of(w) && (b.as_ptr() as usize).is_multiple_of(w));
    // SAFETY: as in `cast`.
    unsafe { std::slice::from_raw_parts_mut(b.as_mut_ptr() as *mut U, b.len() / w) }
}

/// Unpacks `stored` (whole blocks of a column of type `ty`) into `out`,
/// the little-endian bytes of `out.len() / width / 1024` blocks of values.
///
/// # Panics
/// If the lengths do not match or a buffer is not aligned for `ty`.
pub fn unpack(ty: PhysType, p: Packing, stored: &[u8], out: &mut [u8]) {
    let null = p.nulls.then(|| ty.null_code());
    let blocks = out.len() / (BLOCK * ty.width());
    assert_eq!(out.len(), blocks * BLOCK * ty.width(), "whole blocks");
    assert!(
        stored.len() >= blocks * p.block_bytes(),
        "short packed data"
    );
    let stored = &stored[..blocks * p.block_bytes()];
    let b = p.bits as usize;
    macro_rules! go {
        ($u:ty) => {{
            let (w, o) = (cast::<$u>(stored), cast_mut::<$u>(out));
            let base = <$u>::from_i64(p.base);
            match null {
                Some(n) => unpack_lanes::<$u, true>(w, b, base, <$u>::from_i64(n), o),
                None => unpack_lanes::<$u, false>(w, b, base, 0, o),
            }
        }};
    }
    match ty.width() {
        1 => go!(u8),
        2 => go!(u16),
        4 => go!(u32),
        _ => unreachable!("only 8-, 16- and 32-bit columns are packed"),
    }
}

/// Packs `plain` (the little-endian bytes of whole blocks of values of
/// `ty`; pad a partial last block with the base) into `out`
/// (`blocks × 128 × bits` bytes). With `p.nulls`, values equal to the
/// type's null code become all ones.
pub fn pack(ty: PhysType, p: Packing, plain: &[u8], out: &mut [u8]) {
    let null = p.nulls.then(|| ty.null_code());
    let blocks = plain.len() / (BLOCK * ty.width());
    assert_eq!(plain.len(), blocks * BLOCK * ty.width(), "whole blocks");
    assert_eq!(out.len(), blocks * p.block_bytes(), "packed size");
    let b = p.bits as usize;
    macro_rules! go {
        ($u:ty) => {
            pack_lanes::<$u>(
                cast::<$u>(plain),
                b,
                <$u>::from_i64(p.base),
                null.map(<$u>::from_i64),
                cast_mut::<$u>(out),
            )
        };
    }
    match ty.width() {
        1 => go!(u8),
        2 => go!(u16),
        4 => go!(u32),
        _ => unreachable!("only 8-, 16- and 32-bit columns are packed"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Bytes of `v` in a u64-backed (aligned) buffer.
    fn aligned(bytes: &[u8]) -> Vec<u64> {
        let mut b = vec![0u64; bytes.len().div_ceil(8)];
        let s = unsafe { std::slice::from_raw_parts_mut(b.as_mut_ptr() as *mut u8, b.len() * 8) };
        s[..bytes.len()].copy_from_slice(bytes);
        b
    }

    fn as_bytes(b: &[u64], n: usize) -> &[u8] {
        unsafe { &std::slice::from_raw_parts(b.as_ptr() as *const u8, b.len() * 8)[..n] }
    }

    #[test]
    fn choose_bits() {
        // SEX 1..2: one bit; AGE 0..95: seven; PERWT 350..6150: thirteen.
        assert_eq!(Packing::choose(PhysType::U8, 1, 2, false).unwrap().bits, 1);
        assert_eq!(Packing::choose(PhysType::U8, 0, 95, false).unwrap().bits, 7);
        assert_eq!(
            Packing::choose(PhysType::U16, 350, 6150, false)
                .unwrap()
                .bits,
            13
        );
        // A constant column: zero bits.
        assert_eq!(
            Packing::choose(PhysType::U16, 2000, 2000, false)
                .unwrap()
                .bits,
            0
        );
        // 1..2 with nulls needs 1, 2 and the null: two bits.
        assert_eq!(Packing::choose(PhysType::U8, 1, 2, true).unwrap().bits, 2);
        // INCTOT −9000..9999999: 24 bits of 32.
        assert_eq!(
            Packing::choose(PhysType::I32, -9000, 9_999_999, false)
                .unwrap()
                .bits,
            24
        );
        // Full range, floats and 64-bit types are not packed.
        assert!(Packing::choose(PhysType::U8, 0, 255, false).is_none());
        assert!(Packing::choose(PhysType::U8, 0, 254, true).is_none());
        assert!(Packing::choose(PhysType::F32, 0, 1, false).is_none());
        assert!(Packing::choose(PhysType::I64, 0, 1, false).is_none());
    }

    #[test]
    fn layout_by_hand() {
        // u8 column, 4 bits: L = 128 lanes, 8 values deep. Value k·128 + j
        // sits in lane j at bits 4k..4k+4, i.e. byte (k/2)·128 + j, low
        // nibble for even k, high nibble for odd k.
        let p = Packing {
            bits: 4,
            base: 1,
            nulls: false,
        };
        let mut vals = vec![1u8; BLOCK];
        vals[0] = 10; // k 0, lane 0 → byte 0 low nibble: 9
        vals[128] = 4; // k 1, lane 0 → byte 0 high nibble: 3
        vals[3 * 128 + 5] = 16; // k 3, lane 5 → byte 128 + 5, high nibble: 15
        let plain = aligned(&vals);
        let mut out = vec![0u8; p.block_bytes()];
        pack(PhysType::U8, p, as_bytes(&plain, BLOCK), &mut out);
        assert_eq!(out[0], 0x39);
        assert_eq!(out[128 + 5], 0xF0);
        assert_eq!(out.iter().filter(|&&b| b != 0).count(), 2);
        // u16 column, 13 bits: L = 64 lanes. Value 1·64 + 2 (k 1, lane 2)
        // starts at bit 13 of lane 2: bits 13..16 in word 2 and bits 0..10
        // of word 64 + 2.
        let p = Packing {
            bits: 13,
            base: 350,
            nulls: false,
        };
        let mut vals = vec![350u16; BLOCK];
        vals[66] = 350 + 0b1_0110_0111_0101;
        let plain =
            aligned(unsafe { std::slice::from_raw_parts(vals.as_ptr() as *const u8, 2 * BLOCK) });
        let mut out = aligned(&vec![0u8; p.block_bytes()]);
        let o =
            unsafe { std::slice::from_raw_parts_mut(out.as_mut_ptr() as *mut u8, p.block_bytes()) };
        pack(PhysType::U16, p, as_bytes(&plain, 2 * BLOCK), o);
        let words: Vec<u16> = o
            .chunks(2)
            .map(|c| u16::from_le_bytes([c[0], c[1]]))
            .collect();
        assert_eq!(words[2], 0b101 << 13);
        assert_eq!(words[64 + 2], 0b1_0110_0111_0101 >> 3);
        assert_eq!(words.iter().filter(|&&w| w != 0).count(), 2);
    }

    /// Every bit width of every packed type round-trips, nulls included.
    #[test]
    fn round_trip_all_widths() {
        let mut seed = 0x9E37_79B9_7F4A_7C15u64;
        let mut rnd = move || {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed
        };
        for ty in [
            PhysType::U8,
            PhysType::I8,
            PhysType::U16,
            PhysType::I16,
            PhysType::U32,
            PhysType::I32,
        ] {
            let (tlo, thi) = ty.int_range();
            let null = ty.null_code();
            for bits in 0..(8 * ty.width() as u32) {
                for with_null in [false, true] {
                    if with_null && bits == 0 {
                        continue;
                    }
                    let span = (1i64 << bits) - 1 - with_null as i64; // max − min
                    let min = if tlo < 0 { tlo + 1 } else { 0 };
                    let max = min + span;
                    if max > thi - 1 || span < 0 {
                        continue;
                    }
                    let p = Packing::choose(ty, min, max, with_null).unwrap();
                    assert_eq!(p.bits, bits, "{ty:?} {min}..{max} nulls {with_null}");
                    let n = 3 * BLOCK;
                    let vals: Vec<i64> = (0..n)
                        .map(|i| match i {
                            0 => min,
                            1 => max,
                            _ if with_null && rnd() % 7 == 0 => null,
                            _ => min + (rnd() % (span as u64 + 1)) as i64,
                        })
                        .collect();
                    let w = ty.width();
                    let mut plain = Vec::new();
                    for &v in &vals {
                        plain.extend_from_slice(&v.to_le_bytes()[..w]);
                    }
                    let plain = aligned(&plain);
                    let mut packed = aligned(&vec![0u8; p.stored_len(n)]);
                    let pk = unsafe {
                        std::slice::from_raw_parts_mut(
                            packed.as_mut_ptr() as *mut u8,
                            p.stored_len(n),
                        )
                    };
                    assert_eq!(p.nulls, with_null);
                    pack(ty, p, as_bytes(&plain, n * w), pk);
                    let mut out = aligned(&vec![0u8; n * w]);
                    let o = unsafe {
                        std::slice::from_raw_parts_mut(out.as_mut_ptr() as *mut u8, n * w)
                    };
                    unpack(ty, p, as_bytes(&packed, p.stored_len(n)), o);
                    assert_eq!(
                        o,
                        as_bytes(&plain, n * w),
                        "{ty:?} bits {bits} nulls {with_null}"
                    );
                    // Rows picked out of the blocks, in any order, against
                    // the values packed.
                    let rows: Vec<u32> = (0..200)
                        .map(|k| match k {
                            0 => 0,
                            1 => n as u32 - 1,
                            _ => (rnd() % n as u64) as u32,
                        })
                        .collect();
                    let mut some = aligned(&vec![0u8; rows.len() * w]);
                    let so = unsafe {
                        std::slice::from_raw_parts_mut(some.as_mut_ptr() as *mut u8, rows.len() * w)
                    };
                    unpack_rows(ty, p, as_bytes(&packed, p.stored_len(n)), &rows, so);
                    for (k, &r) in rows.iter().enumerate() {
                        let want = &vals[r as usize].to_le_bytes()[..w];
                        assert_eq!(
                            &so[k * w..(k + 1) * w],
                            want,
                            "{ty:?} bits {bits} nulls {with_null} row {r}"
                        );
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod speed {
    use super::*;

    /// `cargo test --release -p microtab-store speed -- --ignored --nocapture`
    #[test]
    #[ignore]
    fn pack_unpack_speed() {
        for (ty, bits) in [
            (PhysType::U8, 1),
            (PhysType::U8, 4),
            (PhysType::U8, 7),
            (PhysType::U16, 13),
            (PhysType::I32, 24),
        ] {
            let n = 32 * BLOCK;
            let w = ty.width();
            let p = Packing {
                bits,
                base: 0,
                nulls: false,
            };
            let plain = vec![0u64; n * w / 8];
            let mut packed = vec![0u64; p.stored_len(n).div_ceil(8)];
            let pb = unsafe { std::slice::from_raw_parts(plain.as_ptr() as *const u8, n * w) };
            let kb = unsafe {
                std::slice::from_raw_parts_mut(packed.as_mut_ptr() as *mut u8, p.stored_len(n))
            };
            let reps = 400;
            let t = std::time::Instant::now();
            for _ in 0..reps {
                pack(ty, p, std::hint::black_box(pb), kb);
            }
            let tp = t.elapsed().as_secs_f64() / (reps * n) as f64 * 1e9;
            let mut out = vec![0u64; n * w / 8];
            let ob = unsafe { std::slice::from_raw_parts_mut(out.as_mut_ptr() as *mut u8, n * w) };
            let t = std::time::Instant::now();
            for _ in 0..reps {
                unpack(ty, p, std::hint::black_box(&*kb), ob);
            }
            let tu = t.elapsed().as_secs_f64() / (reps * n) as f64 * 1e9;
            let t = std::time::Instant::now();
            for _ in 0..reps {
                unpack(
                    ty,
                    Packing { nulls: true, ..p },
                    std::hint::black_box(&*kb),
                    ob,
                );
            }
            let tn = t.elapsed().as_secs_f64() / (reps * n) as f64 * 1e9;
            println!("{ty:?} {bits:2} bits: pack {tp:.3} ns/value, unpack {tu:.3} ns/value, with nulls {tn:.3}");
        }
    }
}
