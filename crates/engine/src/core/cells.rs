//! The sums a cell keeps: the moments of the analysis variable (in
//! `f64`), and the exact integer sums the exact kernels fill.

/// Weighted moments of the analysis variable in one cell.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Moments {
    /// Records.
    pub n: u64,
    /// Sum of weights (records when unweighted).
    pub w: f64,
    /// Weighted mean.
    pub mean: f64,
    /// Sum of weighted squared deviations from the mean.
    pub m2: f64,
}

// SAFETY: an integer and floats; all-zero bytes are `Moments::default()`.
unsafe impl crate::core::alloc::Zeroable for Moments {}

impl Moments {
    /// Combines two partial results (Chan et al.).
    pub fn merge(&mut self, o: &Moments) {
        if o.w == 0.0 && o.n == 0 {
            return;
        }
        if self.w == 0.0 && self.n == 0 {
            *self = *o;
            return;
        }
        let w = self.w + o.w;
        let delta = o.mean - self.mean;
        if w != 0.0 {
            // The share o.w / w first: products of weights and values at
            // extreme magnitudes (1e±300) would overflow or underflow.
            let share = o.w / w;
            self.mean += delta * share;
            self.m2 += o.m2 + delta * delta * (self.w * share);
        }
        self.w = w;
        self.n += o.n;
    }

    /// From stored units to displayed ones (dividing by the weight's and
    /// the analysis variable's `10^decimals`).
    pub(crate) fn scaled(&self, wscale: f64, xscale: f64) -> Moments {
        Moments {
            n: self.n,
            w: self.w / wscale,
            mean: self.mean / xscale,
            m2: self.m2 / (xscale * xscale) / wscale,
        }
    }

    /// Frequency-weight standard deviation `sqrt(m2 / (w - 1))`; `None`
    /// when `w ≤ 1`, or when `m2` is beyond the `f64` range (weights and
    /// values of extreme magnitude).
    pub fn sd(&self) -> Option<f64> {
        (self.w > 1.0 && self.m2.is_finite()).then(|| (self.m2 / (self.w - 1.0)).max(0.0).sqrt())
    }
}

/// A cell's integer sums: records, weights, weighted values (`Wx`: `i64`
/// within a morsel, `i128` beyond) and weighted squares.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct IntSums<Wx> {
    pub(crate) n: u64,
    pub(crate) w: i64,
    pub(crate) wx: Wx,
    pub(crate) wxx: i128,
}

/// One morsel's sums for a cell lane (see `Plan::morsel_sums`).
pub(crate) type MorselCell = IntSums<i64>;

/// Exact sums for integer (and implied-decimal) analysis variables and
/// weights: the result does not depend on how rows were split among
/// workers, so it is identical from run to run.
pub(crate) type ExactCell = IntSums<i128>;

// SAFETY: integers only; all-zero bytes are the empty cell (`Default`).
unsafe impl crate::core::alloc::Zeroable for ExactCell {}

impl ExactCell {
    pub(crate) fn add(&mut self, o: &ExactCell) {
        self.n += o.n;
        self.w = self.w.wrapping_add(o.w);
        self.wx = self.wx.wrapping_add(o.wx);
        self.wxx = self.wxx.wrapping_add(o.wxx);
    }

    /// Moments in stored units.
    pub(crate) fn moments(&self) -> Moments {
        if self.w == 0 {
            return Moments {
                n: self.n,
                ..Moments::default()
            };
        }
        let w = self.w as f64;
        // m2 = Σw(x−m)² = (W·Σwx² − (Σwx)²) / W, exact up to the division.
        let m2 = match (self.w as i128)
            .checked_mul(self.wxx)
            .and_then(|a| self.wx.checked_mul(self.wx).and_then(|b| a.checked_sub(b)))
        {
            Some(num) => num as f64 / w,
            None => self.wxx as f64 - (self.wx as f64) * (self.wx as f64) / w,
        };
        Moments {
            n: self.n,
            w,
            mean: self.wx as f64 / w,
            m2,
        }
    }
}
