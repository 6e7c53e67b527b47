//! The reader → parsers → writer pipeline shared by every text format.
//!
//! A format supplies two things: where a buffer may be cut so that every
//! chunk starts at a record boundary (`cut`), and how to turn one chunk into
//! typed column buffers (`parse`). Everything else — reading (and, through
//! [`crate::core::source`], decompressing) the input in large blocks, parsing
//! chunks on all cores, and appending them in file order to the column
//! sinks — is here, once.

use crate::core::column::{FieldNote, Parsed};
use crate::core::sink::Sink;
use crate::core::source::{count_lines, fill, Input};
use crate::error::Result;
use crate::note::Note;
use microtab_store::DatasetWriter;
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::atomic::Ordering;
use std::sync::mpsc::{sync_channel, Receiver};
use std::sync::{Arc, Mutex};

/// Progress callback: `(bytes of the input file processed, its size)`.
/// For gzip input both count compressed bytes.
pub type Progress = Arc<dyn Fn(u64, u64) + Send + Sync>;

/// What an import produced.
#[derive(Debug, Clone)]
pub struct ImportSummary {
    /// The published dataset.
    pub path: PathBuf,
    /// Records imported.
    pub rows: u64,
    /// Variables imported.
    pub variables: usize,
    /// Size of the input file on disk (compressed size for gzip input).
    pub bytes_in: u64,
    /// Bytes of text parsed (the decompressed size for gzip input).
    pub bytes_text: u64,
    /// Column payload bytes written.
    pub bytes_out: u64,
    /// Records sampled to choose column types (CSV).
    pub sampled: Option<u64>,
    /// What the user should know about how the input was read (a detected
    /// delimiter, columns read as text and why, numbers with leading zeros,
    /// an empty file …), one sentence each.
    pub notes: Vec<Note>,
}

/// What the pipeline read.
pub(crate) struct RunOut {
    /// Records.
    pub rows: u64,
    /// Bytes of text parsed.
    pub text: u64,
    /// Per column: numbers written with leading zeros.
    pub leading_zeros: Vec<Option<FieldNote>>,
    /// Per column: missing tokens read as missing in a text column.
    pub na_text: Vec<Option<FieldNote>>,
    /// Records skipped (see [`Parsed::skipped`]).
    pub skipped: Option<FieldNote>,
}

/// Where the reader stage starts: the opened input and any bytes already
/// read from it (for a header or a type-inference sample), which must start
/// at a record boundary.
pub(crate) struct Feed {
    pub input: Input,
    /// Bytes already read, not yet parsed.
    pub pending: Vec<u8>,
    /// Physical line number (1-based) of `pending[0]`.
    pub line: u64,
    /// Whether the input has already been read to its end.
    pub eof: bool,
}

/// Sizes of the stages.
pub(crate) struct Stages {
    /// Bytes of text per parse task.
    pub chunk_size: usize,
    /// Parser threads.
    pub threads: usize,
    /// Called as chunks are written.
    pub progress: Option<Progress>,
}

/// A chunk's text: read into a buffer, or a range of the mapped input.
enum Text {
    Owned(Vec<u8>),
    Mapped(usize, usize),
}

struct Job {
    seq: u64,
    /// Input position (bytes on disk) when the chunk was read.
    pos: u64,
    line: u64,
    data: Result<Text>,
}

struct Done {
    seq: u64,
    pos: u64,
    text: u64,
    /// The mapped range, released once written.
    range: Option<(usize, usize)>,
    parsed: Result<Parsed>,
}

/// Runs the pipeline to the end of the input, appending every chunk to
/// `sinks` (one per output column) in file order. Returns the number of
/// rows and of text bytes parsed.
///
/// * `cut(buf)` returns the length of the longest prefix of `buf` that
///   ends at a point where a chunk may end (after a record), or `None` if
///   there is none yet (the reader then reads more). It is not called at the
///   end of the input, where the rest is one chunk.
/// * `parse(chunk, line)` parses a chunk starting on physical line `line`.
///
/// Errors come out in file order: the first bad record in the file is the
/// one reported, whichever thread found it first.
pub(crate) fn run<C, P>(
    feed: Feed,
    st: &Stages,
    mut cut: C,
    parse: P,
    sinks: &mut [Sink],
    ds: &mut DatasetWriter,
) -> Result<RunOut>
where
    C: FnMut(&[u8]) -> Option<usize> + Send,
    P: Fn(&[u8], u64) -> Result<Parsed> + Sync,
{
    let threads = st.threads.max(1);
    let chunk_size = st.chunk_size.max(4096);
    let total = feed.input.total;
    let (job_tx, job_rx) = sync_channel::<Job>(threads);
    let (res_tx, res_rx) = sync_channel::<Done>(threads + 2);

    std::thread::scope(|s| {
        // Reader: cuts the text into chunks at record boundaries.
        let map = feed.input.map.clone();
        s.spawn(move || {
            if let Some(map) = feed.input.map.clone() {
                // Mapped input: cut ranges of the mapping; nothing is copied.
                let bytes = map.bytes();
                let consumed = feed.input.consumed.load(Ordering::Relaxed) as usize;
                let mut pos = consumed - feed.pending.len();
                let mut line = feed.line;
                let mut seq = 0u64;
                while pos < bytes.len() {
                    let mut want = chunk_size;
                    let end = loop {
                        let lim = (pos + want).min(bytes.len());
                        if lim == bytes.len() {
                            break lim;
                        }
                        match cut(&bytes[pos..lim]) {
                            Some(e) if e > 0 => break pos + e,
                            _ => want *= 2,
                        }
                    };
                    let lines = count_lines(&bytes[pos..end]);
                    let job = Job {
                        seq,
                        pos: end as u64,
                        line,
                        data: Ok(Text::Mapped(pos, end)),
                    };
                    if job_tx.send(job).is_err() {
                        return;
                    }
                    seq += 1;
                    line += lines;
                    pos = end;
                }
                return;
            }
            let Feed {
                mut input,
                pending,
                mut line,
                mut eof,
            } = feed;
            let mut carry = pending;
            let mut seq = 0u64;
            let mut want = chunk_size;
            loop {
                if !eof && carry.len() < want {
                    match fill(&mut *input.reader, &mut carry, want) {
                        Ok(more) => eof = !more,
                        Err(e) => {
                            let lines = line - 1 + count_lines(&carry);
                            let err = input.read_error(e, lines);
                            let pos = input.consumed.load(Ordering::Relaxed);
                            let _ = job_tx.send(Job {
                                seq,
                                pos,
                                line,
                                data: Err(err),
                            });
                            return;
                        }
                    }
                }
                if carry.is_empty() {
                    return;
                }
                let end = if eof {
                    carry.len()
                } else {
                    match cut(&carry) {
                        Some(e) if e > 0 => e,
                        _ => {
                            // One record (group) longer than a chunk: read on.
                            want = carry.len() * 2;
                            continue;
                        }
                    }
                };
                want = chunk_size;
                let mut next = Vec::with_capacity(chunk_size + (carry.len() - end));
                next.extend_from_slice(&carry[end..]);
                carry.truncate(end);
                let data = std::mem::replace(&mut carry, next);
                let lines = count_lines(&data);
                let job = Job {
                    seq,
                    pos: input.consumed.load(Ordering::Relaxed),
                    line,
                    data: Ok(Text::Owned(data)),
                };
                if job_tx.send(job).is_err() {
                    return;
                }
                seq += 1;
                line += lines;
            }
        });
        // Parsers. Only they hold the job receiver, so when they stop (the
        // writer gave up) the reader's next send fails and it stops too.
        let job_rx = Arc::new(Mutex::new(job_rx));
        for _ in 0..threads {
            let job_rx = Arc::clone(&job_rx);
            let res_tx = res_tx.clone();
            let parse = &parse;
            let map = map.clone();
            s.spawn(move || loop {
                let job = job_rx.lock().unwrap().recv();
                let Ok(job) = job else { return };
                let (text, range, parsed) = match job.data {
                    Ok(Text::Owned(d)) => (d.len() as u64, None, parse(&d, job.line)),
                    Ok(Text::Mapped(a, b)) => {
                        let bytes = &map.as_ref().expect("mapped input").bytes()[a..b];
                        ((b - a) as u64, Some((a, b)), parse(bytes, job.line))
                    }
                    Err(e) => (0, None, Err(e)),
                };
                let done = Done {
                    seq: job.seq,
                    pos: job.pos,
                    text,
                    range,
                    parsed,
                };
                if res_tx.send(done).is_err() {
                    return;
                }
            });
        }
        drop(job_rx);
        drop(res_tx);
        let r = write_in_order(
            &res_rx,
            sinks,
            ds,
            total,
            st.progress.as_ref(),
            map.as_deref(),
        );
        drop(res_rx);
        r
    })
}

/// The writer stage: applies parsed chunks to the sinks in file order.
fn write_in_order(
    rx: &Receiver<Done>,
    sinks: &mut [Sink],
    ds: &mut DatasetWriter,
    total: u64,
    progress: Option<&Progress>,
    map: Option<&microtab_io::MappedFile>,
) -> Result<RunOut> {
    let mut pending = BTreeMap::new();
    let mut next = 0u64;
    let (mut rows, mut text) = (0u64, 0u64);
    let mut leading_zeros: Vec<Option<FieldNote>> = vec![None; sinks.len()];
    let mut na_text: Vec<Option<FieldNote>> = vec![None; sinks.len()];
    let mut skipped = None;
    for done in rx.iter() {
        pending.insert(done.seq, done);
        while let Some(done) = pending.remove(&next) {
            let parsed = done.parsed?;
            for (sink, col) in sinks.iter_mut().zip(parsed.cols) {
                sink.append(ds, col)?;
            }
            for (a, b) in leading_zeros.iter_mut().zip(parsed.leading_zeros) {
                FieldNote::merge(a, b);
            }
            for (a, b) in na_text.iter_mut().zip(parsed.na_text) {
                FieldNote::merge(a, b);
            }
            FieldNote::merge(&mut skipped, parsed.skipped);
            rows += parsed.rows;
            text += done.text;
            if let (Some(m), Some((a, b))) = (map, done.range) {
                // Written: drop the pages from our mapping so resident memory
                // stays bounded by the chunks in flight.
                m.release(a, b - a);
            }
            if let Some(p) = progress {
                p(done.pos.min(total), total);
            }
            next += 1;
        }
    }
    if let Some(p) = progress {
        p(total, total);
    }
    Ok(RunOut {
        rows,
        text,
        leading_zeros,
        na_text,
        skipped,
    })
}
