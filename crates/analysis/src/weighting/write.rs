//! Writing new weight columns (calibrated weights, replicate weights) into
//! a new generation of a dataset: each column's values are computed on
//! every core, a block of records at a time, while the column before it
//! is written by one writer thread.

use microtab_store::{fold_floats, DatasetWriter, Kind, PhysType, Variable};
use rayon::prelude::*;

/// Records per block of work (a fixed size, so that every sum made block
/// by block comes out the same whatever the number of threads).
pub(crate) const BLOCK: usize = 1 << 20;

/// Writes the float columns `names` through the extending writer `w`, in
/// order: `fill(col, start, out)` gives the values of records
/// `start..start + out.len()` of column `col` (an index into `names`).
/// The columns are added to the writer (replacing variables of the same
/// names) and returned as finished.
pub(crate) fn write_f64_columns<E, F>(
    w: &mut DatasetWriter,
    rows: usize,
    names: &[String],
    fill: F,
) -> Result<Vec<Variable>, E>
where
    E: From<microtab_store::Error> + Send,
    F: Fn(usize, usize, &mut [f64]) -> Result<(), E> + Sync,
{
    let writers = names
        .iter()
        .map(|n| w.column_writer(n, PhysType::F64))
        .collect::<Result<Vec<_>, _>>()?;
    let (tx, rx) = std::sync::mpsc::sync_channel::<Vec<f64>>(1);
    let vars = std::thread::scope(|s| {
        let writer = s.spawn(move || -> Result<Vec<Variable>, microtab_store::Error> {
            let mut out = Vec::with_capacity(names.len());
            for (cw, (name, vals)) in writers.into_iter().zip(names.iter().zip(rx.iter())) {
                let mut cw = cw;
                cw.append(&vals)?;
                let (mut lo, mut hi, mut nulls) = (f64::INFINITY, f64::NEG_INFINITY, 0);
                fold_floats(&vals, &mut lo, &mut hi, &mut nulls);
                let mut var = Variable::new(name, Kind::Float, PhysType::F64);
                var.nulls = nulls;
                if lo <= hi {
                    var.min = Some(microtab_store::Number::Float(lo + 0.0));
                    var.max = Some(microtab_store::Number::Float(hi + 0.0));
                }
                out.push(cw.finish(var)?);
            }
            Ok(out)
        });
        let mut failed = None;
        for col in 0..names.len() {
            let mut vals = vec![0.0f64; rows];
            let r = vals
                .par_chunks_mut(BLOCK)
                .enumerate()
                .try_for_each(|(b, out)| fill(col, b * BLOCK, out));
            if let Err(e) = r {
                failed = Some(e);
                break;
            }
            if tx.send(vals).is_err() {
                break;
            }
        }
        drop(tx);
        let written = writer.join().expect("the column writer thread");
        match failed {
            Some(e) => Err(e),
            None => written.map_err(E::from),
        }
    })?;
    for v in &vars {
        w.set_variable(v.clone());
    }
    Ok(vars)
}
