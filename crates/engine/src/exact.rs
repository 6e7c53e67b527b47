//! Exact sums of floating-point numbers, for results that must not depend
//! on how rows were split (partial results, [`crate::Partial`]).
//!
//! An [`ExactSum`] is a fixed-point number wide enough for any sum of
//! finite `f64` values and `i128` integers: 32-bit digits ("chunks") at
//! bit positions from 2⁻¹⁰⁸⁸ upwards, each kept in an `i64` so that up to
//! 2²⁹ additions need no carry (the design of Neal's "small
//! superaccumulator", arXiv:1505.05571). Only the chunks a sum touches are
//! stored (a window that grows as needed), so a sum of values of similar
//! magnitude costs a few words. Adding is exact; so the sum of any
//! multiset of values is one number whatever the order or grouping, and
//! its normalized form (unique: every chunk but the top in `[0, 2³²)`, the
//! top in `[−2³¹, 2³¹)`, no zero chunk at either end) is identical bit for
//! bit. [`ExactSum::to_f64`] rounds it once, to nearest.
//!
//! Products are added exactly too: a row's w·x and w·x² are the integer
//! products of the values' 53-bit mantissas (at most 159 bits), added at
//! the sum of their exponents ([`SupCell`]) — exact for every finite value,
//! subnormals and products beyond the `f64` range included. ([`two_prod`],
//! Dekker's split, serves the double-double arithmetic of
//! [`exact_moments`].)

use serde::{Deserialize, Serialize};

/// Bit position of 2⁰ (a multiple of 32 at least 1074, so the smallest
/// subnormal lies at position 14).
const BIAS: i32 = 1088;
/// Additions after which the chunks are normalized (carries propagated).
const CARRY_EVERY: u32 = 1 << 29;

/// An exact sum (see the module documentation).
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(try_from = "Repr", into = "Repr")]
pub struct ExactSum {
    /// Index of the lowest chunk stored.
    lo: i32,
    /// Chunks `lo..lo + len`, least significant first.
    chunks: Vec<i64>,
    /// Additions since the last normalization.
    pending: u32,
}

/// The serialized form: the normalized chunks.
#[derive(Serialize, Deserialize)]
struct Repr {
    lo: i32,
    chunks: Vec<i64>,
}

impl From<ExactSum> for Repr {
    fn from(mut s: ExactSum) -> Repr {
        s.normalize();
        Repr {
            lo: s.lo,
            chunks: s.chunks,
        }
    }
}

impl TryFrom<Repr> for ExactSum {
    type Error = String;
    fn try_from(r: Repr) -> Result<Self, String> {
        let n = r.chunks.len();
        let ok = r.chunks.iter().enumerate().all(|(i, &c)| {
            if i + 1 < n {
                (0..1 << 32).contains(&c)
            } else {
                (-(1 << 31)..1 << 31).contains(&c)
            }
        }) && (-80..=160).contains(&r.lo)
            && r.lo + n as i32 <= 160;
        if !ok {
            return Err(
                "an exact sum's chunks are out of range (the partial result is damaged)".into(),
            );
        }
        let mut s = ExactSum {
            lo: r.lo,
            chunks: r.chunks,
            pending: 0,
        };
        s.normalize();
        Ok(s)
    }
}

impl PartialEq for ExactSum {
    fn eq(&self, o: &Self) -> bool {
        let (mut a, mut b) = (self.clone(), o.clone());
        a.normalize();
        b.normalize();
        a.lo == b.lo && a.chunks == b.chunks
    }
}

impl ExactSum {
    /// Makes chunks `a..b` present.
    #[inline]
    fn reserve(&mut self, a: i32, b: i32) {
        if a >= self.lo && b <= self.lo + self.chunks.len() as i32 {
            return;
        }
        self.grow(a, b);
    }

    #[cold]
    #[inline(never)]
    fn grow(&mut self, a: i32, b: i32) {
        if self.chunks.is_empty() {
            self.lo = a;
            self.chunks.resize((b - a) as usize, 0);
            return;
        }
        if a < self.lo {
            let k = (self.lo - a) as usize;
            self.chunks.splice(0..0, std::iter::repeat_n(0, k));
            self.lo = a;
        }
        let hi = self.lo + self.chunks.len() as i32;
        if b > hi {
            self.chunks.resize(self.chunks.len() + (b - hi) as usize, 0);
        }
    }

    #[inline]
    fn counted(&mut self) {
        self.pending += 1;
        if self.pending >= CARRY_EVERY {
            self.normalize();
        }
    }

    /// Adds a finite `x` exactly (NaN and infinities are never added: the
    /// scan leaves them out as missing).
    #[inline]
    pub fn add_f64(&mut self, x: f64) {
        debug_assert!(x.is_finite(), "not finite");
        let (m, e, neg) = decompose(x);
        if m != 0 {
            self.add_scaled_uncounted([m], e, neg);
            self.counted();
        }
    }

    /// Counts one row's (at most 4) uncounted additions.
    #[inline]
    pub(crate) fn carry_after(&mut self) {
        self.pending += 4;
        if self.pending >= CARRY_EVERY {
            self.normalize();
        }
    }

    /// Adds `±v · 2^exp` exactly, `v` given as little-endian 64-bit limbs,
    /// without counting towards the next carry propagation (see
    /// [`carry_after`](Self::carry_after)): the sums of exact products of
    /// mantissas ([`SupCell`]).
    #[inline]
    pub(crate) fn add_scaled_uncounted<const K: usize>(
        &mut self,
        v: [u64; K],
        exp: i32,
        neg: bool,
    ) {
        let p = exp + BIAS;
        let (c, s) = (p >> 5, (p & 31) as u32);
        let n = 2 * K + 1;
        self.reserve(c, c + n as i32);
        let base = (c - self.lo) as usize;
        let m = -(neg as i64);
        let sign = |v: u64| ((v as i64) ^ m) - m;
        if let Some(t) = self.chunks.get_mut(base..base + n) {
            // v · 2^s in 32-bit pieces.
            let mut carry = 0u64;
            for (k, &limb) in v.iter().enumerate() {
                let lo = (limb << s) | carry;
                carry = (limb >> 1) >> (63 - s);
                t[2 * k] += sign(lo & 0xffff_ffff);
                t[2 * k + 1] += sign(lo >> 32);
            }
            t[2 * K] += sign(carry);
        }
    }

    /// Adds an integer exactly.
    pub fn add_i128(&mut self, v: i128) {
        if v == 0 {
            return;
        }
        let c = BIAS >> 5;
        self.reserve(c, c + 4);
        let base = (c - self.lo) as usize;
        let u = v as u128;
        let pieces = [
            (u & 0xffff_ffff) as i64,
            ((u >> 32) & 0xffff_ffff) as i64,
            ((u >> 64) & 0xffff_ffff) as i64,
            (v >> 96) as i64,
        ];
        for (d, p) in self.chunks[base..base + 4].iter_mut().zip(pieces) {
            *d += p;
        }
        self.counted();
    }

    /// Adds another exact sum.
    pub fn add(&mut self, o: &ExactSum) {
        if o.chunks.is_empty() {
            return;
        }
        let mut o = o.clone();
        o.normalize();
        self.normalize();
        if o.chunks.is_empty() {
            return;
        }
        self.reserve(o.lo, o.lo + o.chunks.len() as i32);
        let base = (o.lo - self.lo) as usize;
        for (d, s) in self.chunks[base..].iter_mut().zip(&o.chunks) {
            *d += s;
        }
        self.normalize();
    }

    /// Multiplies by `f` (at most 10,000) exactly: used to bring sums with
    /// different implied decimals to one scale.
    pub fn mul_small(&mut self, f: u32) {
        assert!(f <= 10_000);
        self.normalize();
        for d in &mut self.chunks {
            *d *= f as i64;
        }
        self.normalize();
    }

    /// Whether the sum is zero.
    pub fn is_zero(&self) -> bool {
        self.chunks.iter().all(|&c| c == 0)
    }

    /// Propagates carries and trims, giving the unique normalized form.
    pub fn normalize(&mut self) {
        self.pending = 0;
        let n = self.chunks.len();
        if n == 0 {
            return;
        }
        for i in 0..n - 1 {
            let c = self.chunks[i] >> 32;
            self.chunks[i] -= c << 32;
            self.chunks[i + 1] += c;
        }
        // The top chunk keeps the sign; split it while it is too wide.
        loop {
            let t = *self.chunks.last().expect("non-empty");
            if (-(1i64 << 31)..1i64 << 31).contains(&t) {
                break;
            }
            let c = t >> 32;
            *self.chunks.last_mut().expect("non-empty") = t - (c << 32);
            self.chunks.push(c);
        }
        // Drop redundant sign chunks.
        while self.chunks.len() >= 2 {
            let n = self.chunks.len();
            let (u, t) = (self.chunks[n - 2], self.chunks[n - 1]);
            if t == 0 && u < 1 << 31 {
                self.chunks.pop();
            } else if t == -1 && u >= 1 << 31 {
                self.chunks.pop();
                *self.chunks.last_mut().expect("non-empty") = u - (1 << 32);
            } else {
                break;
            }
        }
        if self.chunks.len() == 1 && self.chunks[0] == 0 {
            self.chunks.clear();
        }
        // Drop zero chunks at the bottom.
        let z = self.chunks.iter().take_while(|&&c| c == 0).count();
        if z > 0 {
            self.chunks.drain(..z);
            self.lo += z as i32;
        }
        if self.chunks.is_empty() {
            self.lo = 0;
        }
    }

    /// The sum rounded once to the nearest `f64` (ties to even; beyond the
    /// `f64` range, ±infinity).
    pub fn to_f64(&self) -> f64 {
        let mut s = self.clone();
        s.normalize();
        if s.chunks.is_empty() {
            return 0.0;
        }
        let neg = *s.chunks.last().expect("non-empty") < 0;
        if neg {
            for d in &mut s.chunks {
                *d = -*d;
            }
            s.normalize();
        }
        let h = s.chunks.len() - 1;
        // The top four chunks (at least 97 significant bits), and a sticky
        // bit for anything below them: rounding the 128-bit integer then
        // rounds the whole sum correctly.
        let mut acc: u128 = 0;
        for k in 0..4 {
            if let Some(i) = h.checked_sub(k) {
                acc |= (s.chunks[i] as u128) << (32 * (3 - k));
            }
        }
        if h >= 4 && s.chunks[..h - 3].iter().any(|&c| c != 0) {
            acc |= 1;
        }
        let exp = 32 * (s.lo + h as i32 - 3) - BIAS;
        let v = ldexp(acc as f64, exp);
        if neg {
            -v
        } else {
            v
        }
    }

    /// The sum as a double-double `(hi, lo)`: `hi` the rounded sum, `lo`
    /// the rounded rest.
    pub fn to_dd(&self) -> (f64, f64) {
        let hi = self.to_f64();
        if !hi.is_finite() {
            return (hi, 0.0);
        }
        let mut r = self.clone();
        r.add_f64(-hi);
        (hi, r.to_f64())
    }

    /// The index of the top chunk (`None` for zero): the sum's magnitude is
    /// about `2^(32·top − 1088)`.
    fn top(&self) -> Option<i32> {
        let mut s = self.clone();
        s.normalize();
        (!s.chunks.is_empty()).then(|| s.lo + s.chunks.len() as i32 - 1)
    }

    /// The sum times `2^(32·k)` (exact).
    fn shifted(&self, k: i32) -> ExactSum {
        let mut s = self.clone();
        s.normalize();
        if !s.chunks.is_empty() {
            s.lo += k;
        }
        s
    }

    /// The sum as an `i128` when it is an integer that fits.
    pub fn to_i128(&self) -> Option<i128> {
        let mut s = self.clone();
        s.normalize();
        if s.chunks.is_empty() {
            return Some(0);
        }
        let c0 = BIAS >> 5;
        if s.lo < c0 || s.lo + s.chunks.len() as i32 > c0 + 4 {
            return None;
        }
        let mut v: i128 = 0;
        for (i, &d) in s.chunks.iter().enumerate().rev() {
            let shift = 32 * (s.lo - c0 + i as i32) as u32;
            v = v.checked_add((d as i128).checked_shl(shift)?)?;
        }
        Some(v)
    }
}

/// A cell's exact sums of w, w·x and w·x² in stored units
/// ([`Plan::exact_floats`](crate::physical::Plan::exact_floats)).
#[derive(Debug, Clone, Default)]
pub(crate) struct SupCell {
    pub(crate) w: ExactSum,
    pub(crate) wx: ExactSum,
    pub(crate) wxx: ExactSum,
}

impl SupCell {
    /// Adds one row's weight `w` and value `x`: the products of their
    /// mantissas are exact integers (w·x < 2^106, w·x² < 2^159), added at
    /// the sum of the exponents — exact for every finite value, subnormals
    /// and products beyond the `f64` range included.
    #[inline]
    pub(crate) fn add(&mut self, w: f64, x: Option<f64>) {
        let (mw, ew, sw) = decompose(w);
        if mw != 0 {
            self.w.add_scaled_uncounted([mw], ew, sw);
            self.w.carry_after();
        }
        let Some(x) = x else {
            return;
        };
        let (mx, ex, sx) = decompose(x);
        if mw == 0 || mx == 0 {
            return;
        }
        let p = mw as u128 * mx as u128;
        self.wx
            .add_scaled_uncounted([p as u64, (p >> 64) as u64], ew + ex, sw ^ sx);
        self.wx.carry_after();
        // p · mx in three limbs: (p_lo + p_hi · 2^64) · mx.
        let lo = (p as u64) as u128 * mx as u128;
        let hi = ((p >> 64) as u64) as u128 * mx as u128;
        let mid = (lo >> 64) + (hi as u64) as u128;
        let limbs = [lo as u64, mid as u64, ((mid >> 64) + (hi >> 64)) as u64];
        self.wxx.add_scaled_uncounted(limbs, ew + 2 * ex, sw);
        self.wxx.carry_after();
    }

    pub(crate) fn merge(&mut self, o: &SupCell) {
        self.w.add(&o.w);
        self.wx.add(&o.wx);
        self.wxx.add(&o.wxx);
    }
}

/// `x · 2^e`, exact unless the result overflows or is subnormal.
fn ldexp(mut x: f64, mut e: i32) -> f64 {
    let p = |k: i32| f64::from_bits(((k + 1023) as u64) << 52);
    while e > 1000 {
        x *= p(1000);
        e -= 1000;
    }
    while e < -1000 {
        x *= p(-1000);
        e += 1000;
    }
    x * p(e)
}

/// A finite `x` as `(m, e, negative)` with `|x| = m · 2^e`, `m < 2^53`.
#[inline]
pub(crate) fn decompose(x: f64) -> (u64, i32, bool) {
    let bits = x.to_bits();
    let e = ((bits >> 52) & 0x7ff) as i32;
    let m = (bits & ((1u64 << 52) - 1)) | (((e != 0) as u64) << 52);
    (m, e.max(1) - 1075, bits >> 63 != 0)
}

/// Splits `a` into two halves of 26 significant bits (Veltkamp).
#[inline]
fn split(a: f64) -> (f64, f64) {
    let c = 134_217_729.0 * a;
    let hi = c - (c - a);
    (hi, a - hi)
}

/// `a·b` as the rounded product and its exact error: `a·b = p + e`
/// (Dekker; exact unless the product overflows or underflows).
#[inline]
pub fn two_prod(a: f64, b: f64) -> (f64, f64) {
    let p = a * b;
    let (ah, al) = split(a);
    let (bh, bl) = split(b);
    let e = ((ah * bh - p) + ah * bl + al * bh) + al * bl;
    (p, e)
}

/// `a + b` as the rounded sum and its exact error (Knuth).
#[inline]
fn two_sum(a: f64, b: f64) -> (f64, f64) {
    let s = a + b;
    let bb = s - a;
    (s, (a - (s - bb)) + (b - bb))
}

/// A double-double number.
type Dd = (f64, f64);

fn dd_mul(a: Dd, b: Dd) -> Dd {
    let (p, e) = two_prod(a.0, b.0);
    two_sum(p, e + (a.0 * b.1 + a.1 * b.0))
}

fn dd_sub(a: Dd, b: Dd) -> Dd {
    let (s, e) = two_sum(a.0, -b.0);
    two_sum(s, e + (a.1 - b.1))
}

fn dd_div(a: Dd, b: Dd) -> Dd {
    let q1 = a.0 / b.0;
    let r = dd_sub(a, dd_mul((q1, 0.0), b));
    let q2 = r.0 / b.0;
    two_sum(q1, q2)
}

/// Σw, the mean and the sum of squared deviations `(Σw, Σwx/Σw, Σwx² −
/// (Σwx)²/Σw)` from exact sums in stored units, divided by `10^wdec`,
/// `10^xdec` and `10^(wdec + 2·xdec)` into displayed units, each rounded
/// once at the end. The sums are first brought near 1 by exact powers of
/// two (so sums beyond the `f64` range, or below it, still give their
/// mean), then combined in double-double arithmetic (so the results depend
/// only on the sums, and the subtraction does not cancel the digits away).
pub(crate) fn exact_moments(
    w: &ExactSum,
    wx: &ExactSum,
    wxx: &ExactSum,
    wdec: u32,
    xdec: u32,
) -> (f64, f64, f64) {
    let p10 = |d: u32| (10f64.powi(d as i32), 0.0);
    let round = |v: Dd, k: i32| ldexp(v.0, k) + ldexp(v.1, k);
    let (Some(tw), tx) = (w.top(), wx.top()) else {
        return (0.0, 0.0, 0.0);
    };
    // W·2^(32a) and Σwx·2^(32b) near 1; Σwx²·2^(32(2b − a)) scales with
    // (Σwx)²/Σw.
    let a = BIAS / 32 - tw;
    let b = tx.map_or(a, |t| BIAS / 32 - t);
    let wsum = if wdec == 0 {
        w.to_f64()
    } else {
        round(dd_div(w.shifted(a).to_dd(), p10(wdec)), -32 * a)
    };
    let (w, s1, s2) = (
        w.shifted(a).to_dd(),
        wx.shifted(b).to_dd(),
        wxx.shifted(2 * b - a).to_dd(),
    );
    let mean = dd_div(s1, w);
    let m2 = dd_sub(s2, dd_mul(s1, mean));
    (
        wsum,
        round(dd_div(mean, p10(xdec)), 32 * (a - b)),
        round(dd_div(m2, p10(wdec + 2 * xdec)), 32 * (a - 2 * b)),
    )
}

/// `Σ / 10^dec` rounded once (nearly: through a double-double).
pub(crate) fn div_pow10(s: &ExactSum, dec: u32) -> f64 {
    if dec == 0 {
        return s.to_f64();
    }
    let q = dd_div(s.to_dd(), (10f64.powi(dec as i32), 0.0));
    q.0 + q.1
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sum(xs: &[f64]) -> ExactSum {
        let mut s = ExactSum::default();
        for &x in xs {
            s.add_f64(x);
        }
        s
    }

    #[test]
    fn cancellation_and_extremes() {
        assert_eq!(sum(&[1e300, 1.0, -1e300]).to_f64(), 1.0);
        assert_eq!(sum(&[f64::MAX, -f64::MAX, 5e-324]).to_f64(), 5e-324);
        // math.fsum([0.1, 0.2, -0.3]) (Python's exactly rounded sum).
        assert_eq!(sum(&[0.1, 0.2, -0.3]).to_f64(), 2.7755575615628914e-17);
        assert_eq!(sum(&[f64::MAX, f64::MAX]).to_f64(), f64::INFINITY);
        assert_eq!(sum(&[-3.5]).to_f64(), -3.5);
        assert!(sum(&[2.0, -2.0]).is_zero());
        assert_eq!(sum(&[]).to_f64(), 0.0);
    }

    #[test]
    fn integers_exact() {
        let mut s = ExactSum::default();
        s.add_i128(i128::MAX / 3);
        s.add_i128(-(i128::MAX / 3));
        s.add_i128(-7);
        assert_eq!(s.to_i128(), Some(-7));
        s.add_f64(0.5);
        assert_eq!(s.to_i128(), None);
        assert_eq!(s.to_f64(), -6.5);
        let mut t = ExactSum::default();
        t.add_i128(i128::MAX);
        assert_eq!(t.to_i128(), Some(i128::MAX));
        t.mul_small(10);
        assert_eq!(t.to_f64(), i128::MAX as f64 * 10.0);
    }

    /// Sums of random multiples of 2^-40 (exact in i128 scaled by 2^40):
    /// any order and grouping gives the same normalized sum, equal to the
    /// integer oracle, and rounding matches the integer's rounding.
    #[test]
    fn order_independent_against_integer_oracle() {
        let mut rng = fastrand::Rng::with_seed(7);
        for _ in 0..200 {
            let n = rng.usize(0..300);
            let ints: Vec<i64> = (0..n)
                .map(|_| rng.i64(-(1 << 52)..(1 << 52)) >> rng.u32(0..52))
                .collect();
            let xs: Vec<f64> = ints.iter().map(|&i| i as f64 * 2f64.powi(-40)).collect();
            let exact: i128 = ints.iter().map(|&i| i as i128).sum();
            let a = sum(&xs);
            let mut ys = xs.clone();
            rng.shuffle(&mut ys);
            let cut = rng.usize(0..=ys.len());
            let mut b = sum(&ys[..cut]);
            b.add(&sum(&ys[cut..]));
            assert_eq!(a, b);
            assert_eq!(a.to_f64(), exact as f64 * 2f64.powi(-40));
            let mut scaled = a.clone();
            scaled.add_f64(0.0);
            let back = serde_json::to_string(&scaled).unwrap();
            let c: ExactSum = serde_json::from_str(&back).unwrap();
            assert_eq!(c, a);
        }
    }

    #[test]
    fn products_exact() {
        let mut rng = fastrand::Rng::with_seed(3);
        for _ in 0..1000 {
            let a = (rng.i64(-(1 << 30)..(1 << 30))) as f64;
            let b = (rng.i64(-(1 << 30)..(1 << 30))) as f64 / 1024.0;
            let (p, e) = two_prod(a, b);
            let mut s = ExactSum::default();
            s.add_f64(p);
            s.add_f64(e);
            s.mul_small(1024);
            assert_eq!(s.to_i128(), Some(a as i128 * (b * 1024.0) as i128));
        }
    }

    #[test]
    fn mean_and_m2() {
        // Values 1e9 + {1,2,3}: a naive Σx² − (Σx)²/n loses every digit.
        let xs = [1e9 + 1.0, 1e9 + 2.0, 1e9 + 3.0];
        let (mut w, mut s1, mut s2) = Default::default();
        for x in xs {
            ExactSum::add_f64(&mut w, 1.0);
            ExactSum::add_f64(&mut s1, x);
            let (p, e) = two_prod(x, x);
            ExactSum::add_f64(&mut s2, p);
            ExactSum::add_f64(&mut s2, e);
        }
        let (sw, m, m2) = exact_moments(&w, &s1, &s2, 0, 0);
        assert_eq!((sw, m, m2), (3.0, 1e9 + 2.0, 2.0));
        // Stored with 2 implied decimals in x and 1 in w: the same moments.
        let (sw, m, m2) = exact_moments(&w, &s1, &s2, 1, 2);
        assert_eq!((sw, m, m2), (0.3, (1e9 + 2.0) / 100.0, 2.0 / 1e5));
        // Far beyond the f64 range and below it, by exact powers of two.
        for k in [1000, -1100] {
            let sh = |s: &ExactSum, j: i32| {
                let mut t = s.clone();
                t.normalize();
                t.lo += j;
                t
            };
            let (_, m, m2) = exact_moments(
                &sh(&w, k / 32),
                &sh(&s1, k / 32 * 2),
                &sh(&s2, k / 32 * 3),
                0,
                0,
            );
            assert_eq!(m, ldexp(1e9 + 2.0, 32 * (k / 32)));
            assert_eq!(m2, ldexp(2.0, 64 * (k / 32)));
        }
    }

    /// Rows through a cell's exact sums against an integer oracle: w = a·2^k
    /// and x = b·2^j with small integers, so Σw·x and Σw·x² scaled by a
    /// power of two are exact i128s; any order, any split.
    #[test]
    fn cell_sums_against_integer_oracle() {
        let mut rng = fastrand::Rng::with_seed(9);
        for _ in 0..100 {
            let (k, j) = (rng.i32(-30..=0), rng.i32(-15..=0));
            let rows: Vec<(i64, i64)> = (0..rng.usize(1..200))
                .map(|_| (rng.i64(-(1 << 20)..1 << 20), rng.i64(-(1 << 20)..1 << 20)))
                .collect();
            let mut cell = SupCell::default();
            let mut other = SupCell::default();
            for (n, &(a, b)) in rows.iter().enumerate() {
                let (w, x) = (a as f64 * 2f64.powi(k), b as f64 * 2f64.powi(j));
                if n % 3 == 0 { &mut other } else { &mut cell }.add(w, Some(x));
            }
            cell.merge(&other);
            let scale = |s: &ExactSum, e: i32| {
                let mut t = s.clone();
                // Multiply by 2^e (e ≥ 0 here) exactly, in steps of 2^10.
                let mut e = e;
                while e > 0 {
                    let f = e.min(10);
                    t.mul_small(1 << f);
                    e -= f;
                }
                t.to_i128().expect("an integer")
            };
            let (sw, sx, sxx) = (40 - k, 40 - k - j, 40 - k - 2 * j);
            let w: i128 = rows.iter().map(|&(a, _)| a as i128).sum();
            let wx: i128 = rows.iter().map(|&(a, b)| a as i128 * b as i128).sum();
            let wxx: i128 = rows
                .iter()
                .map(|&(a, b)| a as i128 * b as i128 * b as i128)
                .sum();
            assert_eq!(scale(&cell.w, sw), w << 40);
            assert_eq!(scale(&cell.wx, sx), wx << 40);
            assert_eq!(scale(&cell.wxx, sxx), wxx << 40);
        }
    }

    /// Products beyond the f64 range and below its smallest subnormal are
    /// still exact (a Dekker split would overflow or lose them).
    #[test]
    fn extreme_products_exact() {
        let mut c = SupCell::default();
        c.add(5e-324, Some(2f64.powi(600)));
        assert_eq!(c.wxx.to_f64(), 2f64.powi(1200 - 1074));
        assert_eq!(c.wx.to_f64(), 2f64.powi(600 - 1074));
        let mut d = SupCell::default();
        d.add(1e300, Some(1e300));
        d.add(-1e300, Some(1e300));
        d.add(2.0, Some(3.0));
        assert_eq!(d.wxx.to_f64(), 18.0);
        assert_eq!(d.wx.to_f64(), 6.0);
        assert_eq!(d.w.to_f64(), 2.0);
        let mut e = SupCell::default();
        e.add(1e-300, Some(1e-300));
        assert!(e.wxx.to_f64() == 0.0 && !e.wxx.is_zero());
        let back: ExactSum = serde_json::from_str(&serde_json::to_string(&e.wxx).unwrap()).unwrap();
        assert_eq!(back, e.wxx);
    }

    #[test]
    fn damaged_repr_refused() {
        assert!(serde_json::from_str::<ExactSum>(r#"{"lo":34,"chunks":[5000000000,1]}"#).is_err());
        assert!(serde_json::from_str::<ExactSum>(r#"{"lo":34,"chunks":[5,1]}"#).is_ok());
    }
}
