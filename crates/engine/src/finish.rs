//! Finishing a scan: the workers' merged accumulator reshaped into a
//! [`Cube`] (categories no counted row has dropped, sums scaled to
//! displayed units).

use crate::acc::{Acc, CellSums, Scanned};
use crate::core::Moments;
use crate::cube::Cube;
use crate::exact::exact_moments;
use crate::layout::Layout;
use crate::partial::{rep_partial, sum_decimals};

/// Drops categories that no counted row has and scales sums to displayed units.
pub(crate) fn compact(s: Scanned<'_, '_>) -> crate::Result<Cube> {
    let Scanned {
        plans,
        mut acc,
        plan,
        weight,
        measure,
    } = s;
    use crate::core::alloc::zeroed;
    let n = plan.cells;
    let dense = acc.take_counts(n);
    let layout = Layout::new(&plans, &dense);
    let total = layout.total;
    let wscale = weight.map(|c| c.var().scale()).unwrap_or(1.0);
    let xscale = measure.map(|c| c.var().scale()).unwrap_or(1.0);
    let (wdec, xdec) = (sum_decimals(weight), sum_decimals(measure));
    let what = || format!("the result table of {total} cells");
    let mut weighted: Option<Vec<f64>> = weight.map(|_| zeroed(total, what)).transpose()?;
    let mut moments: Option<Vec<Moments>> = measure.map(|_| zeroed(total, what)).transpose()?;
    if weight.is_some() || measure.is_some() {
        layout.each_kept(&dense, |c, dst| {
            let (w, m) = cell_sums(
                &acc,
                c,
                dense[c],
                (weight.is_some(), measure.is_some()),
                (wscale, xscale),
                (wdec, xdec),
            );
            if let (Some(ws), Some(w)) = (weighted.as_mut(), w) {
                ws[dst] = w;
            }
            if let (Some(ms), Some(m)) = (moments.as_mut(), m) {
                ms[dst] = m;
            }
        });
    }
    let replicates =
        rep_partial(&acc, plan, &layout, &dense, measure).map(|r| r.cells(measure.is_some()));
    let counted = |c: usize| dense[c] > 0;
    let taylor = match (acc.taylor.take(), &plan.taylor) {
        (Some(t), Some(tp)) => Some(t.finish(tp, &layout, counted, (wscale, xscale))),
        _ => None,
    };
    let distribution = match (acc.dist.take(), measure) {
        (Some(d), Some(x)) => Some(d.finish(&layout, counted, wscale, x.var())),
        _ => None,
    };
    // The planned cells' counts become the cube's.
    let mut counts = dense;
    if !layout.is_identity() {
        layout.compact_in_place(&mut counts);
        if counts.len() < counts.capacity() / 2 {
            // Few kept cells of many planned: the cube keeps no more
            // memory than its cells.
            counts.shrink_to_fit();
        }
    }
    Ok(Cube {
        dims: layout.dims(plans),
        counts,
        weighted,
        moments,
        replicates,
        taylor,
        distribution,
    })
}

/// Cell `c`'s weight sum and moments (as `(weighted, measured)` asks) in
/// displayed units, from the kernel's sums.
fn cell_sums(
    acc: &Acc,
    c: usize,
    count: u64,
    (weighted, measured): (bool, bool),
    (wscale, xscale): (f64, f64),
    (wdec, xdec): (u32, u32),
) -> (Option<f64>, Option<Moments>) {
    match &acc.sums {
        CellSums::ExactFloats(_, s) => {
            // Exact sums (extreme float magnitudes): rounded once.
            let s = &s.sup[c];
            let (w, mean, m2) = exact_moments(&s.w, &s.wx, &s.wxx, wdec, xdec);
            let m = Moments {
                n: count,
                w,
                mean,
                m2,
            };
            (weighted.then_some(w), measured.then_some(m))
        }
        CellSums::Exact(e) => {
            // Exact means keep Σw in their exact cells only.
            let e = e.cell(c);
            (
                weighted.then(|| e.w as f64 / wscale),
                measured.then(|| e.moments().scaled(wscale, xscale)),
            )
        }
        CellSums::Moments(t, m) => (
            weighted.then(|| t.wsum(c) / wscale),
            measured.then(|| m.moments[c].scaled(wscale, xscale)),
        ),
        CellSums::Tally(t) => (weighted.then(|| t.wsum(c) / wscale), None),
    }
}
