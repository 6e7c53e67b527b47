//! A morsel's cell index per row (the dimensions and filters through
//! their mappers, and the split), and the weight and analysis values
//! loaded beside it with their exclusions marked in the index: what the
//! index kernels sum, and what the extra sums (replicates, Taylor,
//! distributions) read after them.

use super::morsel::Morsel;
use crate::core::MORSEL;
use crate::kernels::{apply_col, apply_two, dispatch, load_ints, load_values};
use crate::plan::Mapper;

/// A morsel's rows as the index kernels see them (buffers reused from
/// morsel to morsel).
pub(crate) struct Rows {
    /// Each row's cell (`≥ cells`: not counted).
    pub(crate) idx: Vec<u32>,
    /// Weights as `f64` ([`load_f64`](Self::load_f64)).
    pub(crate) wbuf: Vec<f64>,
    /// Analysis values as `f64`.
    pub(crate) xbuf: Vec<f64>,
    /// Weights as integers ([`load_int`](Self::load_int)).
    pub(crate) wint: Vec<i64>,
    /// Analysis values as integers.
    pub(crate) xint: Vec<i64>,
    /// When kept (the Taylor domains' counts): the cells as they were
    /// once the weight was loaded, before the analysis variable's
    /// missing values were marked.
    pub(crate) pre: Option<Vec<u32>>,
}

impl Default for Rows {
    fn default() -> Self {
        Rows {
            idx: Vec::with_capacity(MORSEL),
            wbuf: Vec::with_capacity(MORSEL),
            xbuf: Vec::with_capacity(MORSEL),
            wint: Vec::new(),
            xint: Vec::new(),
            pre: None,
        }
    }
}

/// Loads a role's values (`$role`: its column and exclusion, `$slot`) into
/// `$out` with `$load`, marking excluded rows in `$idx`.
macro_rules! load {
    ($role:expr, $slot:expr, $data:expr, $r:expr, $load:ident, $idx:expr, $out:expr) => {
        if let (Some((_, ex)), Some(k)) = ($role, $slot) {
            dispatch!($data[k], $r.clone(), |v| $load(v, ex, $idx, $out));
        }
    };
}

impl Rows {
    /// The cells of rows `r`: the dimensions and filters through their
    /// mappers, then the split.
    pub(crate) fn index(&mut self, m: &Morsel<'_, '_>) -> &mut Self {
        let (p, data, r) = (m.p, m.data, m.r.clone());
        let s = &p.slots;
        let dims = p.dims.iter().zip(&s.dims);
        let cols: Vec<(&Mapper, usize)> = dims
            .chain(p.filters.iter().zip(&s.filters))
            .map(|((_, mapper), &k)| (mapper, k))
            .collect();
        // The first two code columns in one pass over the index, which
        // it overwrites (no zeroing): `means PERWT --by RACE,PUMA` 5-10%
        // faster (docs/BENCHMARKS.md).
        let two = match cols[..] {
            [(ma, ka), (mb, kb), ..] => {
                self.idx.resize(r.len(), 0);
                apply_two((data[ka], ma), (data[kb], mb), r.clone(), &mut self.idx)
            }
            _ => false,
        };
        if !two {
            self.idx.clear();
            self.idx.resize(r.len(), 0);
        }
        for &(mapper, k) in &cols[if two { 2 } else { 0 }..] {
            apply_col(data[k], r.clone(), mapper, &mut self.idx);
        }
        if let (Some(sp), Some(k)) = (&p.split, s.split) {
            sp.apply(data[k], r, &mut self.idx, p.cells as u32);
        }
        self
    }

    /// Keeps the cells as they are now in [`pre`](Self::pre), when kept.
    fn keep_pre(&mut self) {
        if let Some(pre) = self.pre.as_mut() {
            pre.clear();
            pre.extend_from_slice(&self.idx);
        }
    }

    /// Loads the weight as `f64` into [`wbuf`](Self::wbuf).
    fn load_weight(&mut self, m: &Morsel<'_, '_>) {
        let (p, data, r) = (m.p, m.data, &m.r);
        load!(
            p.weight.as_ref(),
            p.slots.weight,
            data,
            r,
            load_values,
            &mut self.idx,
            &mut self.wbuf
        );
    }

    /// Loads the weight (when `weight`) and the analysis variable as
    /// `f64` into [`wbuf`](Self::wbuf) and [`xbuf`](Self::xbuf).
    pub(crate) fn load_f64(&mut self, m: &Morsel<'_, '_>, weight: bool) {
        if weight {
            self.load_weight(m);
        }
        self.keep_pre();
        let (p, data, r) = (m.p, m.data, &m.r);
        load!(
            p.measure.as_ref(),
            p.slots.measure,
            data,
            r,
            load_values,
            &mut self.idx,
            &mut self.xbuf
        );
    }

    /// Loads the weight and the analysis variable as integers into
    /// [`wint`](Self::wint) and [`xint`](Self::xint).
    pub(crate) fn load_int(&mut self, m: &Morsel<'_, '_>) {
        let (p, data, r) = (m.p, m.data, &m.r);
        load!(
            p.weight.as_ref(),
            p.slots.weight,
            data,
            r,
            load_ints,
            &mut self.idx,
            &mut self.wint
        );
        self.keep_pre();
        load!(
            p.measure.as_ref(),
            p.slots.measure,
            data,
            r,
            load_ints,
            &mut self.idx,
            &mut self.xint
        );
    }
}
