//! Writing new weight columns (calibrated weights, replicate weights) into
//! a new generation of a dataset: each column's values are computed on
//! every core, a block of records at a time, while the columns before it
//! are written by writer threads (copying into the page cache is the
//! slowest part: two writers measured 1.6× one on 2 cores).

use microtab_store::{fold_floats, ColumnWriter, DatasetWriter, Kind, PhysType, Variable};
use rayon::prelude::*;
use std::sync::{mpsc, Mutex};

/// Records per block of work (a fixed size, so that every sum made block
/// by block comes out the same whatever the number of threads).
pub(crate) const BLOCK: usize = 1 << 20;

/// Threads writing finished columns.
const WRITERS: usize = 2;

/// Writes one finished column.
fn write_one(
    cw: ColumnWriter,
    name: &str,
    vals: &[f64],
) -> Result<Variable, microtab_store::Error> {
    let mut cw = cw;
    cw.append(vals)?;
    let (mut lo, mut hi, mut nulls) = (f64::INFINITY, f64::NEG_INFINITY, 0);
    fold_floats(vals, &mut lo, &mut hi, &mut nulls);
    let mut var = Variable::new(name, Kind::Float, PhysType::F64);
    var.nulls = nulls;
    if lo <= hi {
        var.min = Some(microtab_store::Number::Float(lo + 0.0));
        var.max = Some(microtab_store::Number::Float(hi + 0.0));
    }
    cw.finish(var)
}

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
    let slots: Vec<Mutex<Option<ColumnWriter>>> =
        writers.into_iter().map(|c| Mutex::new(Some(c))).collect();
    let done: Vec<Mutex<Option<Variable>>> = names.iter().map(|_| Mutex::new(None)).collect();
    // Finished columns go to the writers; their buffers come back.
    let (tx, rx) = mpsc::sync_channel::<(usize, Vec<f64>)>(WRITERS);
    let rx = Mutex::new(rx);
    let (back_tx, back_rx) = mpsc::channel::<Vec<f64>>();
    let failed_write: Mutex<Option<microtab_store::Error>> = Mutex::new(None);
    let result = std::thread::scope(|s| {
        for _ in 0..WRITERS {
            let (rx, back_tx, slots, done, failed_write) =
                (&rx, back_tx.clone(), &slots, &done, &failed_write);
            s.spawn(move || loop {
                let next = rx.lock().expect("lock").recv();
                let Ok((col, vals)) = next else { break };
                let cw = slots[col]
                    .lock()
                    .expect("lock")
                    .take()
                    .expect("one column once");
                match write_one(cw, &names[col], &vals) {
                    Ok(v) => *done[col].lock().expect("lock") = Some(v),
                    Err(e) => {
                        failed_write.lock().expect("lock").get_or_insert(e);
                        break;
                    }
                }
                let _ = back_tx.send(vals);
            });
        }
        drop(back_tx);
        let mut failed = None;
        for col in 0..names.len() {
            if failed_write.lock().expect("lock").is_some() {
                break;
            }
            let mut vals = back_rx.try_recv().unwrap_or_else(|_| vec![0.0f64; rows]);
            let r = vals
                .par_chunks_mut(BLOCK)
                .enumerate()
                .try_for_each(|(b, out)| fill(col, b * BLOCK, out));
            if let Err(e) = r {
                failed = Some(e);
                break;
            }
            if tx.send((col, vals)).is_err() {
                break;
            }
        }
        drop(tx);
        failed
    });
    if let Some(e) = result {
        return Err(e);
    }
    if let Some(e) = failed_write.into_inner().expect("lock") {
        return Err(E::from(e));
    }
    let vars: Vec<Variable> = done
        .into_iter()
        .map(|d| d.into_inner().expect("lock").expect("every column written"))
        .collect();
    for v in &vars {
        w.set_variable(v.clone());
    }
    Ok(vars)
}
