//! The counting kernels: cell indexes from code columns through lookup
//! tables, weights and analysis values loaded with their exclusions, and
//! the fused one-pass loops for byte-coded survey variables.
//!
//! Every kernel is checked against a scalar reference in
//! `tests/kernels.rs` (random data, nulls, every packed width, filters,
//! weights).

use crate::core::{LANES, PACK_SHIFT};
use crate::plan::{Exclusion, Mapper, TRASH};
use microtab_store::ColumnData;

/// Generic access to column values.
pub(crate) trait Val: Copy + Send + Sync {
    /// The values of an integer type of at most 32 bits (`None`: `i64`
    /// and floats), whose range tests then run in 32-bit lanes.
    const NARROW: Option<(i64, i64)> = None;
    fn i(self) -> i64;
    fn f(self) -> f64;
}
macro_rules! val_narrow {
    ($($t:ty),*) => {$(
        impl Val for $t {
            const NARROW: Option<(i64, i64)> = Some((<$t>::MIN as i64, <$t>::MAX as i64));
            #[inline(always)]
            fn i(self) -> i64 { self as i64 }
            #[inline(always)]
            fn f(self) -> f64 { self as f64 }
        }
    )*};
}
val_narrow!(u8, i8, u16, i16, u32, i32);
macro_rules! val_int {
    ($($t:ty),*) => {$(
        impl Val for $t {
            #[inline(always)]
            fn i(self) -> i64 { self as i64 }
            #[inline(always)]
            fn f(self) -> f64 { self as f64 }
        }
    )*};
}
val_int!(i64);
/// Floats as their bits (an exact key) or as `f64`.
macro_rules! val_float {
    ($($t:ty),*) => {$(
        impl Val for $t {
            #[inline(always)]
            fn i(self) -> i64 { self.to_bits() as i64 }
            #[inline(always)]
            fn f(self) -> f64 { self as f64 }
        }
    )*};
}
val_float!(f32, f64);

/// Runs `$body` with `$v` bound to rows `$range` of a column of any type.
macro_rules! dispatch {
    ($data:expr, $range:expr, |$v:ident| $body:expr) => {
        microtab_store::match_column!($data, |x| {
            let $v = &x[$range];
            $body
        })
    };
}

pub(crate) use dispatch;

/// Runs `$body` with `$x` bound to rows `$range` of an integer column of
/// at most 32 bits; `$other` for any other type.
macro_rules! int_slice {
    ($data:expr, $range:expr, |$x:ident| $body:expr, $other:expr) => {
        $crate::kernels::int_slice!(@of U8 I8 U16 I16 U32 I32; $data, $range, |$x| $body, $other)
    };
    (@of $($t:ident)*; $data:expr, $range:expr, |$x:ident| $body:expr, $other:expr) => {
        match $data {
            $(ColumnData::$t(v) => {
                let $x = &v[$range];
                $body
            })*
            _ => $other,
        }
    };
}

pub(crate) use int_slice;

#[inline(always)]
pub(crate) fn combine(idx: u32, e: u32) -> u32 {
    (idx + (e & !TRASH)) | (e & TRASH)
}

/// Applies a mapper to rows `r` of a column, with tight loops for the
/// common `u8`/`u16` code columns.
pub(crate) fn apply_col(
    data: ColumnData<'_>,
    r: std::ops::Range<usize>,
    m: &Mapper,
    idx: &mut [u32],
) {
    match (data, m) {
        (ColumnData::U8(v), Mapper::Byte(t)) => {
            // Eight rows a word (see `cells8`).
            let v = &v[r];
            let n = v.len().min(idx.len());
            let (v, idx) = (&v[..n], &mut idx[..n]);
            let mut xs = idx.chunks_exact_mut(8);
            let mut vs = v.chunks_exact(8);
            for (x, c) in (&mut xs).zip(&mut vs) {
                let w = u64::from_le_bytes(c.try_into().expect("8 bytes"));
                for (j, x) in x.iter_mut().enumerate() {
                    *x = combine(*x, t[(w >> (8 * j)) as u8 as usize]);
                }
            }
            for (x, &c) in xs.into_remainder().iter_mut().zip(vs.remainder()) {
                *x = combine(*x, t[c as usize]);
            }
        }
        (ColumnData::U16(v), Mapper::Word(t)) => {
            for (x, &c) in idx.iter_mut().zip(&v[r]) {
                *x = combine(*x, t[c as usize]);
            }
        }
        (d, m) => dispatch!(d, r, |v| apply(v, m, idx)),
    }
}

/// The cells of rows `r` from two code columns through their full tables
/// (`u8` or `u16`) in one pass, written over `idx`: what [`apply_col`] of
/// each into a zeroed `idx` gives (`combine(0, e)` is `e`), without a
/// pass over `idx` per column. False (and `idx` untouched) for other
/// columns.
pub(crate) fn apply_two(
    (da, ma): (ColumnData<'_>, &Mapper),
    (db, mb): (ColumnData<'_>, &Mapper),
    r: std::ops::Range<usize>,
    idx: &mut [u32],
) -> bool {
    macro_rules! two {
        ($va:expr, $ta:expr, $vb:expr, $tb:expr) => {{
            let (va, vb) = (&$va[r.clone()], &$vb[r.clone()]);
            for ((x, &a), &b) in idx.iter_mut().zip(va).zip(vb) {
                *x = combine($ta[a as usize], $tb[b as usize]);
            }
            true
        }};
    }
    use ColumnData::{U16, U8};
    match ((da, ma), (db, mb)) {
        ((U8(va), Mapper::Byte(ta)), (U8(vb), Mapper::Byte(tb))) => {
            // Eight rows a word (see `cells8`).
            let (va, vb) = (&va[r.clone()], &vb[r]);
            let n = va.len().min(vb.len()).min(idx.len());
            let (va, vb, idx) = (&va[..n], &vb[..n], &mut idx[..n]);
            let word = |c: &[u8]| u64::from_le_bytes(c.try_into().expect("8 bytes"));
            let mut xs = idx.chunks_exact_mut(8);
            let (mut ca, mut cb) = (va.chunks_exact(8), vb.chunks_exact(8));
            for ((x, a), b) in (&mut xs).zip(&mut ca).zip(&mut cb) {
                let (a, b) = (word(a), word(b));
                for (j, x) in x.iter_mut().enumerate() {
                    *x = combine(
                        ta[(a >> (8 * j)) as u8 as usize],
                        tb[(b >> (8 * j)) as u8 as usize],
                    );
                }
            }
            let rest = xs
                .into_remainder()
                .iter_mut()
                .zip(ca.remainder())
                .zip(cb.remainder());
            for ((x, &a), &b) in rest {
                *x = combine(ta[a as usize], tb[b as usize]);
            }
            true
        }
        ((U8(va), Mapper::Byte(ta)), (U16(vb), Mapper::Word(tb))) => two!(va, ta, vb, tb),
        ((U16(va), Mapper::Word(ta)), (U8(vb), Mapper::Byte(tb))) => two!(va, ta, vb, tb),
        ((U16(va), Mapper::Word(ta)), (U16(vb), Mapper::Word(tb))) => two!(va, ta, vb, tb),
        _ => false,
    }
}

pub(crate) fn apply<T: Val>(vals: &[T], m: &Mapper, idx: &mut [u32]) {
    match m {
        Mapper::Byte(_) | Mapper::Word(_) => {
            unreachable!("specialized mappers need their column type")
        }
        Mapper::Table {
            base,
            table,
            outside,
        } => {
            let base = *base;
            let outside = *outside;
            for (x, &v) in idx.iter_mut().zip(vals) {
                let off = v.i().wrapping_sub(base) as u64 as usize;
                let e = table.get(off).copied().unwrap_or(outside);
                *x = combine(*x, e);
            }
        }
        Mapper::Hash {
            map,
            float,
            null,
            other,
        } => {
            for (x, &v) in idx.iter_mut().zip(vals) {
                let e = if *float {
                    let f = v.f();
                    if f.is_nan() {
                        *null
                    } else {
                        // -0.0 is 0 (its own key would split the category).
                        map.get(&(f + 0.0).to_bits()).copied().unwrap_or(*other)
                    }
                } else {
                    map.get(&(v.i() as u64)).copied().unwrap_or(*null)
                };
                *x = combine(*x, e);
            }
        }
        Mapper::Ranges(r) => mark_ranges(vals, r, |x, bad| *x |= (bad as u32) << 31, idx),
        Mapper::Rank {
            base,
            len,
            bits,
            prefix,
            stride,
            null,
        } => {
            for (x, &v) in idx.iter_mut().zip(vals) {
                let o = v.i().wrapping_sub(*base) as u64;
                let e = if o < *len {
                    let (w, b) = ((o >> 6) as usize, o & 63);
                    let word = bits[w];
                    if word >> b & 1 == 1 {
                        (prefix[w] + (word & ((1u64 << b) - 1)).count_ones()) * stride
                    } else {
                        TRASH
                    }
                } else {
                    *null
                };
                *x = combine(*x, e);
            }
        }
        Mapper::Eval {
            pred,
            missing,
            null_code,
            float,
        } => {
            for (x, &v) in idx.iter_mut().zip(vals) {
                let f = v.f();
                let bad = (*float && f.is_nan())
                    || (!*float && Some(v.i()) == *null_code)
                    || missing.contains(&f)
                    || !(if *float {
                        pred.test(f)
                    } else {
                        pred.test_int(v.i())
                    });
                if bad {
                    *x |= TRASH;
                }
            }
        }
    }
}

/// Calls `mark(slot, fails)` for each value and its slot: whether the
/// value is outside every range of `r` (branch-free; one subtraction and
/// compare per range).
#[inline]
pub(crate) fn mark_ranges<T: Val, S>(
    vals: &[T],
    r: &[(i64, i64)],
    mark: impl Fn(&mut S, bool),
    slots: &mut [S],
) {
    let vals = &vals[..slots.len()];
    if let Some((tmin, tmax)) = T::NARROW {
        // Each range clipped to the type's values: then `v − lo` and
        // `hi − lo` differ from the exact ones by multiples of 2^32 only
        // when `v < lo`, and the wrapped `v − lo` is then above `hi − lo`
        // (in 32-bit lanes the compiler vectorizes: an INCTOT range over
        // 14.1 M rows, 0.57 ns a row in 64 bits).
        let r32: Vec<(u32, u32)> = r
            .iter()
            .map(|&(lo, hi)| (lo.max(tmin), hi.min(tmax)))
            .filter(|(lo, hi)| lo <= hi)
            .map(|(lo, hi)| (lo as u32, hi.wrapping_sub(lo) as u32))
            .collect();
        let out = |v: u32, (lo, span): (u32, u32)| v.wrapping_sub(lo) > span;
        match r32[..] {
            [] => slots.iter_mut().for_each(|s| mark(s, true)),
            [a] => {
                for (s, &v) in slots.iter_mut().zip(vals) {
                    mark(s, out(v.i() as u32, a));
                }
            }
            [a, b] => {
                for (s, &v) in slots.iter_mut().zip(vals) {
                    let v = v.i() as u32;
                    mark(s, out(v, a) & out(v, b));
                }
            }
            _ => {
                for (s, &v) in slots.iter_mut().zip(vals) {
                    let v = v.i() as u32;
                    mark(s, r32.iter().all(|&x| out(v, x)));
                }
            }
        }
        return;
    }
    let out =
        |v: i64, (lo, hi): (i64, i64)| (v.wrapping_sub(lo) as u64) > (hi.wrapping_sub(lo) as u64);
    match r {
        [] => slots.iter_mut().for_each(|s| mark(s, true)),
        [a] => {
            for (s, &v) in slots.iter_mut().zip(vals) {
                mark(s, out(v.i(), *a));
            }
        }
        [a, b] => {
            for (s, &v) in slots.iter_mut().zip(vals) {
                let v = v.i();
                mark(s, out(v, *a) & out(v, *b));
            }
        }
        _ => {
            for (s, &v) in slots.iter_mut().zip(vals) {
                let v = v.i();
                mark(s, r.iter().all(|&x| out(v, x)));
            }
        }
    }
}

/// Loads a weight or analysis value per row into `out` (stored units),
/// excluding rows where it is missing.
pub(crate) fn load_values<T: Val>(vals: &[T], ex: &Exclusion, idx: &mut [u32], out: &mut Vec<f64>) {
    out.clear();
    out.extend(vals.iter().map(|v| v.f()));
    let has_missing = !ex.missing.is_empty();
    for (x, &v) in idx.iter_mut().zip(out.iter()) {
        let bad = v.is_nan()
            || ex.null_code.is_some_and(|n| v == n as f64)
            || (has_missing && ex.missing.contains(&v));
        if bad {
            *x |= TRASH;
        }
    }
}

/// Loads integer values (weights or analysis values) per row, excluding
/// rows where the value is system- or user-missing (branch-free for up to
/// two excluded codes, the usual case).
pub(crate) fn load_ints<T: Val>(vals: &[T], ex: &Exclusion, idx: &mut [u32], out: &mut Vec<i64>) {
    let n = idx.len();
    out.clear();
    out.resize(n, 0);
    let vals = &vals[..n];
    let mut codes: Vec<i64> = ex.missing.iter().map(|&m| m as i64).collect();
    codes.extend(ex.null_code);
    // One pass: convert and mark excluded rows.
    macro_rules! pass {
        (|$v:ident| $bad:expr) => {
            for ((o, x), &raw) in out.iter_mut().zip(idx.iter_mut()).zip(vals) {
                let $v = raw.i();
                *o = $v;
                *x |= (($bad) as u32) << 31;
            }
        };
    }
    match codes[..] {
        [] => pass!(|v| {
            let _ = v;
            false
        }),
        [a] => pass!(|v| v == a),
        [a, b] => pass!(|v| (v == a) | (v == b)),
        _ => pass!(|v| codes.contains(&v)),
    }
}

/// The fused kernel: `N` byte columns through their tables, then count (and
/// weigh) into lane-split cells. `INT` selects exact integer weight sums.
#[allow(clippy::too_many_arguments)]
#[inline(never)]
pub(crate) fn fused_kernel<const N: usize, L: Lead, T: Val, const INT: bool>(
    (lead, ltab): (&[L::Code], L),
    cols: [&[u8]; N],
    tabs: [&[u32; 256]; N],
    w: Option<&[T]>,
    trash: u32,
    counts: &mut [u64],
    wsum_int: &mut [i64],
    wsum: &mut [f64],
) {
    let n = lead.len();
    let cols = cols.map(|c| &c[..n]);
    let n8 = n & !7;
    let cell = |i: usize| {
        let mut c = ltab.at(lead[i]);
        for k in 0..N {
            c += tabs[k][cols[k][i] as usize];
        }
        c.min(trash) as usize * LANES + (i & (LANES - 1))
    };
    match w {
        None => {
            for b in (0..n8).step_by(8) {
                let c = cells8(lead, ltab, &cols, &tabs, b);
                for (j, &c) in c.iter().enumerate() {
                    counts[c.min(trash) as usize * LANES + (j & (LANES - 1))] += 1;
                }
            }
            for i in n8..n {
                counts[cell(i)] += 1;
            }
        }
        Some(w) => {
            let w = &w[..n];
            let mut add = |c: usize, wi: T| {
                counts[c] += 1;
                if INT {
                    wsum_int[c] += wi.i();
                } else {
                    wsum[c] += wi.f();
                }
            };
            for b in (0..n8).step_by(8) {
                let c = cells8(lead, ltab, &cols, &tabs, b);
                for (j, &c) in c.iter().enumerate() {
                    add(c.min(trash) as usize * LANES + (j & (LANES - 1)), w[b + j]);
                }
            }
            for (i, &wi) in w.iter().enumerate().skip(n8) {
                add(cell(i), wi);
            }
        }
    }
}

/// The tables' sums (the cells before `min(trash)`) of rows `b..b + 8`,
/// the byte columns read eight rows a word: loading each row's byte on
/// its own made the fused kernels three times slower with three code
/// columns than with two on AMD Zen 1 (5.9 against 2.0 ns a row, a
/// stand-alone copy of the kernel), and a word a column costs 2.2.
/// `b + 8` must not pass the columns' ends. Rows `b..b + 8` fall in lanes
/// `j & (LANES - 1)` (`b` is a multiple of 8 and `LANES` divides 8).
#[inline(always)]
fn cells8<const N: usize, L: Lead>(
    lead: &[L::Code],
    ltab: L,
    cols: &[&[u8]; N],
    tabs: &[&[u32; 256]; N],
    b: usize,
) -> [u32; 8] {
    const { assert!(8 % LANES == 0) };
    let l = ltab.at8(&lead[b..b + 8]);
    let ws = cols.map(|c| u64::from_le_bytes(c[b..b + 8].try_into().expect("8 bytes")));
    std::array::from_fn(|j| {
        let mut c = l[j];
        for k in 0..N {
            c += tabs[k][(ws[k] >> (8 * j)) as u8 as usize];
        }
        c
    })
}

/// The fused kernel for integer weights ≥ 0 whose morsel sum stays below
/// 2^40: the record count and Σw of a cell lane share one word in
/// `packed`, so a row costs one read-modify-write instead of two; the
/// caller folds `packed` into the counts after each morsel.
///
/// The update of a row's cell is written out in each fused kernel on
/// purpose: a shared `#[inline(always)]` helper for the whole row (tables
/// and update) measured Q1 22% slower (5.2 → 6.3 ms), from code
/// generation alone; [`cells8`], which only sums the tables, did not.
#[inline(never)]
pub(crate) fn fused_kernel_packed<const N: usize, L: Lead, T: Val>(
    (lead, ltab): (&[L::Code], L),
    cols: [&[u8]; N],
    tabs: [&[u32; 256]; N],
    w: &[T],
    trash: u32,
    packed: &mut [u64],
) {
    let n = lead.len();
    let cols = cols.map(|c| &c[..n]);
    let w = &w[..n];
    assert!(packed.len() >= (trash as usize + 1) * LANES);
    let mut add = |c: u32, lane: usize, wi: T| {
        let k = c.min(trash) as usize * LANES + lane;
        debug_assert!(k < packed.len());
        // SAFETY: c ≤ trash and `packed` holds (trash + 1) · LANES cells.
        let p = unsafe { packed.get_unchecked_mut(k) };
        *p = p.wrapping_add((1u64 << PACK_SHIFT) | wi.i() as u64);
    };
    let n8 = n & !7;
    for b in (0..n8).step_by(8) {
        let c = cells8(lead, ltab, &cols, &tabs, b);
        for (j, &c) in c.iter().enumerate() {
            add(c, j & (LANES - 1), w[b + j]);
        }
    }
    for i in n8..n {
        let mut c = ltab.at(lead[i]);
        for k in 0..N {
            c += tabs[k][cols[k][i] as usize];
        }
        add(c, i & (LANES - 1), w[i]);
    }
}

/// A morsel cell of the fused means kernel: 32 bytes, so a cell's lanes
/// are one 128-byte stride. The record count and Σw share one word (the
/// weights are ≥ 0 and a morsel's Σw < 2^40).
#[derive(Debug, Clone, Copy, Default)]
#[repr(C, align(32))]
pub(crate) struct PackedCell {
    pub(crate) nw: u64,
    pub(crate) wx: i64,
    pub(crate) wxx: i128,
}

/// The fused means kernel: `N` byte columns through their tables, the
/// weight and the analysis value loaded, excluded and summed per cell lane
/// in one branch-free pass (no index or value arrays). Every row's |w·x²|
/// fits in an i64 ([`means_fuse`] checks), so only the morsel's sum of
/// squares needs 128 bits.
#[inline(never)]
#[allow(clippy::too_many_arguments)]
pub(crate) fn fused_means<const N: usize, L: Lead, W: Val, X: Val>(
    (lead, ltab): (&[L::Code], L),
    cols: [&[u8]; N],
    tabs: [&[u32; 256]; N],
    w: Option<&[W]>,
    x: &[X],
    xcodes: [i64; 2],
    trash: u32,
    cells: &mut [PackedCell],
) {
    let n = x.len();
    let lead = &lead[..n];
    let cols = cols.map(|c| &c[..n]);
    assert!(cells.len() >= (trash as usize + 1) * LANES);
    let [xa, xb] = xcodes;
    let mut row = |c: u32, lane: usize, wv: i64, xv: i64| {
        // Branch-free: excluded values (INCTOT's N/A code) and filtered
        // rows (the TRASH bit) are common, and a branch on them mispredicts
        // (the `min` stays a cmov: see .cargo/config.toml).
        let bad = ((xv == xa) as u32) | ((xv == xb) as u32);
        let mask = 0u32.wrapping_sub(bad);
        let c = (c.min(trash) & !mask) | (trash & mask);
        let k = c as usize * LANES + lane;
        debug_assert!(k < cells.len());
        // SAFETY: c ≤ trash and `cells` holds (trash + 1) · LANES cells.
        let m = unsafe { cells.get_unchecked_mut(k) };
        let wx = wv.wrapping_mul(xv);
        m.nw = m.nw.wrapping_add((1u64 << PACK_SHIFT) | wv as u64);
        m.wx = m.wx.wrapping_add(wx);
        m.wxx = m.wxx.wrapping_add(wx.wrapping_mul(xv) as i128);
    };
    let cell = |i: usize| {
        let mut c = ltab.at(lead[i]);
        for k in 0..N {
            c += tabs[k][cols[k][i] as usize];
        }
        c
    };
    let n8 = n & !7;
    match w {
        Some(w) => {
            let w = &w[..n];
            for b in (0..n8).step_by(8) {
                let c = cells8(lead, ltab, &cols, &tabs, b);
                for (j, &c) in c.iter().enumerate() {
                    row(c, j & (LANES - 1), w[b + j].i(), x[b + j].i());
                }
            }
            for i in n8..n {
                row(cell(i), i & (LANES - 1), w[i].i(), x[i].i());
            }
        }
        None => {
            for b in (0..n8).step_by(8) {
                let c = cells8(lead, ltab, &cols, &tabs, b);
                for (j, &c) in c.iter().enumerate() {
                    row(c, j & (LANES - 1), 1, x[b + j].i());
                }
            }
            for (i, &xv) in x.iter().enumerate().skip(n8) {
                row(cell(i), i & (LANES - 1), 1, xv.i());
            }
        }
    }
}

#[inline]
pub(crate) fn accumulate_counts(idx: &[u32], trash: u32, counts: &mut [u64]) {
    let mut chunks = idx.chunks_exact(LANES);
    for ch in &mut chunks {
        for (l, &i) in ch.iter().enumerate() {
            counts[i.min(trash) as usize * LANES + l] += 1;
        }
    }
    for &i in chunks.remainder() {
        counts[i.min(trash) as usize * LANES] += 1;
    }
}

/// A weight sum: `i64` for integer weights (exact, including implied
/// decimals), `f64` for float weights.
pub(crate) trait WeightSum: Copy + std::ops::AddAssign {
    fn of<T: Val>(v: T) -> Self;
}
impl WeightSum for i64 {
    #[inline(always)]
    fn of<T: Val>(v: T) -> Self {
        v.i()
    }
}
impl WeightSum for f64 {
    #[inline(always)]
    fn of<T: Val>(v: T) -> Self {
        v.f()
    }
}

#[inline]
pub(crate) fn accumulate_weighted<T: Val, S: WeightSum>(
    idx: &[u32],
    w: &[T],
    trash: u32,
    counts: &mut [u64],
    wsum: &mut [S],
) {
    let mut ci = idx.chunks_exact(LANES);
    let mut cw = w.chunks_exact(LANES);
    for (ch, wh) in (&mut ci).zip(&mut cw) {
        for l in 0..LANES {
            let c = ch[l].min(trash) as usize * LANES + l;
            counts[c] += 1;
            wsum[c] += S::of(wh[l]);
        }
    }
    for (&i, &w) in ci.remainder().iter().zip(cw.remainder()) {
        let c = i.min(trash) as usize * LANES;
        counts[c] += 1;
        wsum[c] += S::of(w);
    }
}

/// A column's table in the fused kernels.
#[derive(Clone)]
pub(crate) enum FusedTab {
    /// A `u8` code column's.
    Byte(Box<[u32; 256]>),
    /// A `u16` code column's.
    Word(Box<[u32; 65536]>),
    /// Not a code column: the fused kernels do not apply.
    None,
}

/// The table of the selection column: 0 passes, anything else is trash.
pub(crate) static SELECTION_TABLE: [u32; 256] = {
    let mut t = [FUSED_TRASH; 256];
    t[0] = 0;
    t
};

/// A fused kernel's leading code column's table: a `u8` column's 256
/// entries or a `u16` column's 65,536 (OCC, IND, PUMA), looked up without
/// a bounds check. The other columns are `u8`.
pub(crate) trait Lead: Copy {
    /// The column's code type.
    type Code: Copy;
    /// The table entry of code `c`.
    fn at(self, c: Self::Code) -> u32;
    /// The table entries of eight codes `c[..8]`, read a word at a time.
    fn at8(self, c: &[Self::Code]) -> [u32; 8];
}

impl Lead for &[u32; 256] {
    type Code = u8;
    #[inline(always)]
    fn at(self, c: u8) -> u32 {
        self[c as usize]
    }
    #[inline(always)]
    fn at8(self, c: &[u8]) -> [u32; 8] {
        let w = u64::from_le_bytes(c[..8].try_into().expect("8 bytes"));
        std::array::from_fn(|j| self[(w >> (8 * j)) as u8 as usize])
    }
}

impl Lead for &[u32; 65536] {
    type Code = u16;
    #[inline(always)]
    fn at(self, c: u16) -> u32 {
        self[c as usize]
    }
    #[inline(always)]
    fn at8(self, c: &[u16]) -> [u32; 8] {
        let c = &c[..8];
        let w = |h: usize| {
            let q = &c[4 * h..4 * h + 4];
            (q[0] as u64) | (q[1] as u64) << 16 | (q[2] as u64) << 32 | (q[3] as u64) << 48
        };
        let (a, b) = (w(0), w(1));
        std::array::from_fn(|j| {
            let v = if j < 4 {
                a >> (16 * j)
            } else {
                b >> (16 * (j - 4))
            };
            self[v as u16 as usize]
        })
    }
}

/// What a fused kernel's table holds for a rejected code: any row with one
/// sums to at least this, at most four of them to below 2^32, and every
/// real cell index is below it ([`Plan::cells`] < `FUSED_TRASH` for fused
/// plans), so a row's cell is `min(Σ entries, trash)` — one add per column
/// instead of [`combine`]'s three operations.
pub(crate) const FUSED_TRASH: u32 = 1 << 28;

/// A byte mapper's table for the fused kernels (see [`FUSED_TRASH`]).
pub(crate) fn fused_table(m: &Mapper) -> FusedTab {
    let f = |e: &u32| if e & TRASH != 0 { FUSED_TRASH } else { *e };
    match m {
        Mapper::Byte(t) => FusedTab::Byte(Box::new(t.map(|e| f(&e)))),
        Mapper::Word(t) => FusedTab::Word(
            t.iter()
                .map(f)
                .collect::<Vec<u32>>()
                .into_boxed_slice()
                .try_into()
                .expect("65536 entries"),
        ),
        _ => FusedTab::None,
    }
}

/// A morsel's counted rows grouped by cell, for the replicate sums: the
/// rows of cell 0, then of cell 1, … (a counting sort; rows excluded, at
/// or beyond the trash cell, left out). Summing each replicate weight cell
/// by cell from this list keeps the sums in registers: one store per cell
/// instead of one per row. Every row number in it is below
/// [`rows`](Self::rows): only [`build`](Self::build) makes one.
#[derive(Default)]
pub(crate) struct RowOrder {
    order: Vec<u32>,
    starts: Vec<u32>,
    next: Vec<u32>,
    rows: usize,
}

impl RowOrder {
    /// Groups the rows of `idx` (cell indices, `trash` and beyond excluded).
    pub(crate) fn build(&mut self, idx: &[u32], trash: u32) {
        let cells = trash as usize;
        self.rows = idx.len();
        self.starts.clear();
        self.starts.resize(cells + 2, 0);
        for &i in idx {
            self.starts[i.min(trash) as usize + 1] += 1;
        }
        for c in 1..self.starts.len() {
            self.starts[c] += self.starts[c - 1];
        }
        self.order.clear();
        self.order.resize(self.starts[cells] as usize, 0);
        self.next.clear();
        self.next.extend_from_slice(&self.starts[..cells]);
        for (j, &i) in idx.iter().enumerate() {
            if i < trash {
                let n = &mut self.next[i as usize];
                self.order[*n as usize] = j as u32;
                *n += 1;
            }
        }
    }

    /// The rows of the morsel (every row number in the order is below it).
    pub(crate) fn rows(&self) -> usize {
        self.rows
    }

    /// The cells (the trash cell not counted).
    fn cells(&self) -> usize {
        self.starts.len().saturating_sub(2)
    }

    /// Positions in the order of cell `c`'s rows.
    fn of(&self, c: usize) -> std::ops::Range<usize> {
        self.starts[c] as usize..self.starts[c + 1] as usize
    }

    /// The counted rows, cell by cell.
    pub(crate) fn order(&self) -> &[u32] {
        &self.order
    }
}

/// Replicate sums over a morsel of `N` replicate weight columns of one
/// type, cell by cell through `o` ([`RowOrder`]): `sw[bases[k] + c] += Σ
/// w_k` and, with the analysis values in the order's order (`xs`),
/// `swx[bases[k] + c] += Σ w_k·x` — exact integers (the planner checked
/// that no sum can overflow). Each row's number is loaded once for the `N`
/// columns (measured on 80 replicate weights: the pass over the order was
/// most of the cost one column at a time).
pub(crate) fn replicate_ints<const N: usize, W: Val>(
    o: &RowOrder,
    ws: [&[W]; N],
    xs: Option<&[i64]>,
    bases: [usize; N],
    sw: &mut [i64],
    swx: &mut [i128],
) {
    assert!(ws.iter().all(|w| w.len() >= o.rows()));
    for c in 0..o.cells() {
        let at = o.of(c);
        if at.is_empty() {
            continue;
        }
        let mut s = [0i64; N];
        match xs {
            None => {
                for &j in &o.order[at] {
                    for k in 0..N {
                        // SAFETY: j < o.rows() ≤ ws[k].len() (RowOrder's
                        // invariant, and asserted above).
                        s[k] += unsafe { ws[k].get_unchecked(j as usize) }.i();
                    }
                }
            }
            Some(xs) => {
                let mut sx = [0i128; N];
                for (&j, &x) in o.order[at.clone()].iter().zip(&xs[at]) {
                    for k in 0..N {
                        // SAFETY: as above.
                        let v = unsafe { ws[k].get_unchecked(j as usize) }.i();
                        s[k] += v;
                        sx[k] += (v * x) as i128;
                    }
                }
                for k in 0..N {
                    swx[bases[k] + c] += sx[k];
                }
            }
        }
        for k in 0..N {
            sw[bases[k] + c] += s[k];
        }
    }
}

/// [`replicate_ints`] of one column in `f64` (float replicate weights or
/// analysis values).
pub(crate) fn replicate_floats<W: Val>(
    o: &RowOrder,
    w: &[W],
    xs: Option<&[f64]>,
    sw: &mut [f64],
    swx: &mut [f64],
) {
    for c in 0..o.cells() {
        let at = o.of(c);
        let (mut s, mut sx) = (0.0, 0.0);
        for (k, &j) in o.order[at.clone()].iter().enumerate() {
            let v = w[j as usize].f();
            s += v;
            if let Some(xs) = xs {
                sx += v * xs[at.start + k];
            }
        }
        sw[c] += s;
        if xs.is_some() {
            swx[c] += sx;
        }
    }
}
