//! Fixed-length binary records (the data of Stata, SPSS and SAS files)
//! decoded on every core: a reader thread reads batches of whole records,
//! decoder threads turn each into column chunks (and checks them), and the
//! calling thread appends them to the sinks in file order. At most
//! `2 × threads + 2` batches are in flight, so memory is bounded by the
//! batch size, whatever the size of the file.

use super::{Chunk, ColumnarImport};
use crate::core::column::ColBuf;
use crate::core::pipeline::Progress;
use crate::error::{Error, Result};
use std::collections::BTreeMap;
use std::io::Read;
use std::path::Path;
use std::sync::mpsc::sync_channel;
use std::sync::{Arc, Mutex};

/// A batch of whole records.
pub(crate) struct Batch {
    /// Records before it (its first is record `first + 1`).
    pub first: u64,
    /// The file offset of its first byte.
    pub at: u64,
    /// The records' bytes.
    pub bytes: Vec<u8>,
}

/// Where the records are and how they are cut.
pub(crate) struct Layout {
    /// The file offset of the first record.
    pub start: u64,
    /// Bytes per record.
    pub row_len: usize,
    /// Records (`None`: as many whole records as the input holds).
    pub records: Option<u64>,
    /// Records per batch.
    pub per_batch: usize,
}

/// Records per batch for records of `row_len` bytes that become `columns`
/// chunk columns: about 32 MB of decoded values (16 bytes each) and at
/// most 8 MB of input, at least one record.
pub(crate) fn per_batch(row_len: usize, columns: usize) -> usize {
    let by_values = (32 << 20) / (16 * columns.max(1));
    let by_bytes = (8 << 20) / row_len.max(1);
    by_values.min(by_bytes).clamp(1, 1 << 16)
}

/// Reads `lay.records` records from `r` (positioned at `lay.start`),
/// decodes each batch with `decode` on `threads` threads and appends the
/// chunks to `imp` in file order; each batch's side result is given to
/// `merge` in file order. A file that ends before the last record is an
/// [`Error::Format`] naming the record.
#[allow(clippy::too_many_arguments)]
pub(crate) fn decode_records<S: Send>(
    imp: &mut ColumnarImport,
    path: &Path,
    mut r: impl Read + Send,
    lay: &Layout,
    threads: usize,
    decode: impl Fn(&Batch) -> Result<(Vec<Chunk>, S)> + Sync,
    mut merge: impl FnMut(S),
    progress: Option<&Progress>,
) -> Result<()> {
    let threads = threads.max(1);
    let (job_tx, job_rx) = sync_channel::<Result<(u64, Batch)>>(threads);
    let (res_tx, res_rx) = sync_channel::<(u64, Result<(Vec<ColBuf>, S)>)>(threads + 2);
    let total = lay.records.unwrap_or(0) * lay.row_len as u64;
    // The writer appends to `imp` while decoders check batches: they
    // check against a copy of its columns.
    let (names, text, input) = {
        let s = imp.shape();
        (s.names.to_vec(), s.text.to_vec(), s.input.to_path_buf())
    };
    let shape = &super::Shape {
        names: &names,
        text: &text,
        input: &input,
    };
    std::thread::scope(|s| {
        s.spawn(move || {
            let mut first = 0u64;
            let mut seq = 0u64;
            loop {
                let n = match lay.records {
                    Some(all) if first >= all => return,
                    Some(all) => (lay.per_batch as u64).min(all - first) as usize,
                    None => lay.per_batch,
                };
                let at = lay.start + first * lay.row_len as u64;
                let mut bytes = vec![0u8; n * lay.row_len];
                let got = match fill(&mut r, &mut bytes) {
                    Ok(g) => g,
                    Err(e) => {
                        let _ = job_tx.send(Err(Error::Input {
                            path: path.to_path_buf(),
                            reason: format!("cannot read: {e}"),
                        }));
                        return;
                    }
                };
                let last = got < bytes.len();
                if last && (lay.records.is_some() || got % lay.row_len != 0) {
                    let rec = first + (got / lay.row_len) as u64 + 1;
                    let of = match lay.records {
                        Some(all) => format!(" of the {all} its header announces"),
                        None => String::new(),
                    };
                    let _ = job_tx.send(Err(Error::Format {
                        path: path.to_path_buf(),
                        offset: at + got as u64,
                        reason: format!(
                            "the data end inside record {rec}{of}: the file is truncated"
                        ),
                    }));
                    return;
                }
                bytes.truncate(got);
                let k = (got / lay.row_len) as u64;
                if k > 0 && job_tx.send(Ok((seq, Batch { first, at, bytes }))).is_err() {
                    return;
                }
                first += k;
                seq += 1;
                if last {
                    return;
                }
            }
        });
        let job_rx = Arc::new(Mutex::new(job_rx));
        for _ in 0..threads {
            let job_rx = Arc::clone(&job_rx);
            let res_tx = res_tx.clone();
            let decode = &decode;
            s.spawn(move || loop {
                let job = job_rx.lock().unwrap().recv();
                let (seq, out) = match job {
                    Err(_) => return,
                    // A read error ends the stream: it comes last.
                    Ok(Err(e)) => (u64::MAX, Err(e)),
                    Ok(Ok((seq, b))) => (
                        seq,
                        decode(&b)
                            .and_then(|(chunks, side)| Ok((shape.bufs(chunks, b.first)?, side))),
                    ),
                };
                if res_tx.send((seq, out)).is_err() {
                    return;
                }
            });
        }
        drop(job_rx);
        drop(res_tx);
        // The writer; the receiver is dropped before the scope joins, so
        // that on an error the decoders' sends fail and every thread ends.
        let res_rx = res_rx;
        let written = (|| {
            let mut pending = BTreeMap::new();
            let mut next = 0u64;
            for (seq, out) in res_rx.iter() {
                pending.insert(seq, out);
                while let Some(out) = pending.remove(&next) {
                    let (bufs, side) = out?;
                    imp.append_bufs(bufs)?;
                    merge(side);
                    next += 1;
                    if let (Some(p), Some(_)) = (progress, lay.records) {
                        p((imp.rows() * lay.row_len as u64).min(total), total);
                    }
                }
            }
            // Only a read error (or a batch after it) can be left.
            if let Some((_, out)) = pending.into_iter().next() {
                out?;
            }
            Ok(())
        })();
        drop(res_rx);
        written
    })
}

/// Reads into `b` until it is full or the input ends; the bytes read.
pub(crate) fn fill(r: &mut impl Read, b: &mut [u8]) -> std::io::Result<usize> {
    let mut got = 0;
    while got < b.len() {
        match r.read(&mut b[got..]) {
            Ok(0) => break,
            Ok(k) => got += k,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(got)
}
