//! Finishing a scan: the workers' merged accumulator reshaped into a
//! [`Cube`] (categories no counted row has dropped, sums scaled to
//! displayed units).

use crate::acc::Acc;
use crate::core::Moments;
use crate::cube::Cube;
use crate::exact::exact_moments;
use crate::layout::Layout;
use crate::partial::{rep_partial, sum_decimals};
use crate::physical::Plan;
use crate::plan::DimPlan;
use microtab_store::Column;

/// Drops categories that no counted row has and scales sums to displayed units.
pub(crate) fn compact(
    plans: Vec<DimPlan>,
    mut acc: Acc,
    plan: &Plan,
    weight: Option<&Column>,
    measure: Option<&Column>,
) -> crate::Result<Cube> {
    use crate::core::alloc::zeroed;
    let n = plan.cells;
    let layout = Layout::new(&plans, n, |c| acc.count(plan, c));
    let total = layout.total;
    let wscale = weight.map(|c| c.var().scale()).unwrap_or(1.0);
    let xscale = measure.map(|c| c.var().scale()).unwrap_or(1.0);
    let (wdec, xdec) = (sum_decimals(weight), sum_decimals(measure));
    let what = || format!("the result table of {total} cells");
    let mut counts: Vec<u64> = zeroed(total, what)?;
    let mut weighted: Option<Vec<f64>> = weight.map(|_| zeroed(total, what)).transpose()?;
    let mut moments: Option<Vec<Moments>> = measure.map(|_| zeroed(total, what)).transpose()?;
    for c in 0..n {
        let count = acc.count(plan, c);
        if count == 0 {
            continue;
        }
        let dst = layout.dst(c);
        counts[dst] = count;
        if plan.exact_floats {
            // Exact sums (extreme float magnitudes): rounded once.
            let s = &acc.sup[c];
            let (w, mean, m2) = exact_moments(&s.w, &s.wx, &s.wxx, wdec, xdec);
            if let Some(ws) = weighted.as_mut() {
                ws[dst] = w;
            }
            if let Some(m) = moments.as_mut() {
                m[dst] = Moments {
                    n: count,
                    w,
                    mean,
                    m2,
                };
            }
            continue;
        }
        if let Some(w) = weighted.as_mut() {
            // Exact means keep Σw in their exact cells only.
            w[dst] = if plan.exact {
                acc.exact_cell(c).w as f64
            } else {
                acc.wsum(c)
            } / wscale;
        }
        if let Some(m) = moments.as_mut() {
            let a = if plan.exact {
                acc.exact_cell(c).moments()
            } else {
                acc.moments[c]
            };
            m[dst] = a.scaled(wscale, xscale);
        }
    }
    let replicates = rep_partial(&acc, plan, &layout, measure).map(|r| r.cells(measure.is_some()));
    let taylor = match (acc.taylor.take(), &plan.taylor) {
        (Some(t), Some(tp)) => {
            Some(t.finish(tp, &layout, |c| acc.count(plan, c) > 0, (wscale, xscale)))
        }
        _ => None,
    };
    let distribution = match (acc.dist.take(), measure) {
        (Some(d), Some(x)) => Some(d.finish(&layout, |c| acc.count(plan, c) > 0, wscale, x.var())),
        _ => None,
    };
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
