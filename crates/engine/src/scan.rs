//! The scan drivers: morsels of rows read (inline preads, a mapping, or
//! streamed segments) and counted in parallel into private accumulators,
//! merged at the end.

use crate::acc::Acc;
use crate::core::{ScanOptions, MORSEL, STEP};
use crate::physical::{Plan, Sieve};
use crate::plan::Fate;
use crate::Result;
use microtab_io::{ReadPath, SegmentStream};
use microtab_store::{Column, ColumnData};
use std::ops::Range;
use std::sync::atomic::{AtomicUsize, Ordering};

/// Workers take morsels in file order from a shared counter, so all of them
/// consume the front of the kernel's read-ahead window together.
pub(crate) fn scan_mapped(
    morsels: &Morsels,
    cols: &[&Column],
    rows: usize,
    range: Range<usize>,
    opts: &ScanOptions,
) -> Result<Acc> {
    let plan = morsels.plan;
    let nm = range.end.div_ceil(MORSEL);
    let next = AtomicUsize::new(range.start / MORSEL);
    let failed: std::sync::Mutex<Option<microtab_store::Error>> = std::sync::Mutex::new(None);
    let accs = rayon::broadcast(|_| {
        let mut acc = Acc::new(plan)?;
        let mut unpacked: Vec<Vec<u64>> = cols.iter().map(|_| Vec::new()).collect();
        'scan: loop {
            let first = next.fetch_add(STEP, Ordering::Relaxed);
            if first >= nm {
                break;
            }
            if first + opts.readahead < nm {
                for c in cols {
                    c.prefetch((first + opts.readahead) * MORSEL, STEP * MORSEL);
                }
            }
            for m in first..(first + STEP).min(nm) {
                let Some(pk) = morsels.pick(m) else {
                    continue;
                };
                let s = m * MORSEL;
                let e = (s + MORSEL).min(rows);
                // Views of the mapping, or unpacked from it (checked).
                let views = cols
                    .iter()
                    .zip(unpacked.iter_mut())
                    .zip(&pk.reads)
                    .map(|((c, b), &r)| {
                        if r {
                            c.rows_view(s, e - s, b)
                        } else {
                            Ok(UNREAD)
                        }
                    })
                    .collect::<std::result::Result<Vec<ColumnData<'_>>, _>>();
                match views {
                    Ok(views) => pk.count(&mut acc, &views, counted(s, e, &range), s),
                    Err(err) => {
                        fail(&failed, err);
                        break 'scan;
                    }
                }
                if acc.stopped() {
                    break 'scan;
                }
            }
            // Keep resident memory bounded by the stretch being counted.
            for c in cols {
                c.release(first * MORSEL, STEP * MORSEL);
            }
        }
        Ok(acc)
    });
    finish_scan(accs, failed)
}

/// How each morsel is counted: by the query's plan, by the plan without
/// its filters (morsels whose every row passes them), by the plan without
/// the filters the zone maps settle for the morsel (a `SERIAL` range
/// inside which another filter must still be tested), or not at all
/// (morsels no row of which passes), as the filter columns' zone maps say.
pub(crate) struct Morsels<'p, 'a> {
    plan: &'p Plan<'a>,
    /// The query's plan, the columns it reads and its sieve.
    full: Pick<'p, 'a>,
    /// The plan without filters, when some morsel passes whole.
    pass: Option<Pick<'p, 'a>>,
    /// The plans without the filters settled for a morsel, by the
    /// settled filters' mask.
    partial: Vec<(u32, Pick<'p, 'a>)>,
    fates: Option<(&'p [Fate], &'p [u32])>,
}

/// A plan that counts morsels, the distinct columns it reads, and the
/// index kernels' sieve of its filters.
struct Pick<'p, 'a> {
    plan: PlanRef<'p, 'a>,
    reads: Vec<bool>,
    sieve: Option<Sieve<'a>>,
}

/// The query's own plan, or one made from it.
enum PlanRef<'p, 'a> {
    Query(&'p Plan<'a>),
    Made(Box<Plan<'a>>),
}

impl<'a> PlanRef<'_, 'a> {
    fn get(&self) -> &Plan<'a> {
        match self {
            PlanRef::Query(p) => p,
            PlanRef::Made(p) => p,
        }
    }
}

impl<'p, 'a> Pick<'p, 'a> {
    fn of(plan: PlanRef<'p, 'a>, columns: usize) -> Self {
        let p = plan.get();
        Pick {
            reads: p.reads(columns),
            sieve: Sieve::of(p, columns),
            plan,
        }
    }
}

/// Most plans made for the filters zone maps settle (one per set of
/// settled filters).
const MAX_PARTIAL_PLANS: usize = 8;

impl<'p, 'a> Morsels<'p, 'a> {
    pub(crate) fn new(
        plan: &'p Plan<'a>,
        fates: Option<(&'p [Fate], &'p [u32])>,
        columns: usize,
    ) -> Self {
        let pass = fates
            .filter(|(f, _)| f.contains(&Fate::Pass))
            .map(|_| Pick::of(PlanRef::Made(Box::new(plan.without_filters())), columns));
        let mut masks: Vec<u32> = fates.map_or(Vec::new(), |(f, s)| {
            (f.iter().zip(s))
                .filter(|(&f, &s)| f == Fate::Scan && s != 0)
                .map(|(_, &s)| s)
                .collect()
        });
        masks.sort_unstable();
        masks.dedup();
        let partial = match masks.len() <= MAX_PARTIAL_PLANS {
            true => masks
                .into_iter()
                .map(|m| {
                    let p = plan.keeping_filters(|i| i >= 32 || m >> i & 1 == 0);
                    (m, Pick::of(PlanRef::Made(Box::new(p)), columns))
                })
                .collect(),
            false => Vec::new(),
        };
        Morsels {
            plan,
            full: Pick::of(PlanRef::Query(plan), columns),
            pass,
            partial,
            fates,
        }
    }

    /// The plan counting morsel `m` (`None`: the morsel is skipped).
    #[inline]
    fn pick(&self, m: usize) -> Option<&Pick<'p, 'a>> {
        match self.fates.map(|(f, s)| (f[m], s[m])) {
            Some((Fate::Skip, _)) => None,
            Some((Fate::Pass, _)) => self.pass.as_ref().or(Some(&self.full)),
            Some((Fate::Scan, s)) if s != 0 => Some(
                self.partial
                    .iter()
                    .find(|(k, _)| *k == s)
                    .map_or(&self.full, |(_, p)| p),
            ),
            _ => Some(&self.full),
        }
    }
}

impl Pick<'_, '_> {
    /// Counts rows `r` of a morsel's views `data` into `acc`, through the
    /// plan's sieve when it has one.
    #[inline]
    fn count(&self, acc: &mut Acc, data: &[ColumnData<'_>], r: Range<usize>, base: usize) {
        let p = self.plan.get();
        match &self.sieve {
            Some(sv) => acc.morsel_sieved(p, sv, data, r, base),
            None => acc.morsel(p, data, r, base),
        }
    }
}

/// A view of no values, for a column the morsel's plan does not read.
const UNREAD: ColumnData<'static> = ColumnData::U8(&[]);

/// The rows of the morsel `s..e` (read whole: its stripe checksums cover
/// it whole) that the query counts, as offsets into the morsel.
#[inline]
fn counted(s: usize, e: usize, range: &Range<usize>) -> Range<usize> {
    let lo = range.start.clamp(s, e);
    let hi = range.end.clamp(lo, e);
    lo - s..hi - s
}

/// Records the first error of a scan (the others stop at their next morsel).
pub(crate) fn fail(
    slot: &std::sync::Mutex<Option<microtab_store::Error>>,
    e: microtab_store::Error,
) {
    let mut s = slot.lock().unwrap_or_else(|p| p.into_inner());
    if s.is_none() {
        *s = Some(e);
    }
}

/// The merged accumulator of a scan's workers, or its first error.
pub(crate) fn finish_scan(
    accs: Vec<Result<Acc>>,
    failed: std::sync::Mutex<Option<microtab_store::Error>>,
) -> Result<Acc> {
    if let Some(e) = failed.into_inner().unwrap_or_else(|p| p.into_inner()) {
        return Err(e.into());
    }
    // A worker whose accumulator could not be allocated counted nothing.
    let accs = accs.into_iter().collect::<Result<Vec<Acc>>>()?;
    Ok(accs
        .into_iter()
        .map(Acc::flush)
        .reduce(Acc::merge)
        .expect("one worker at least"))
}

/// Every worker reads its morsels of every column with one `pread` each
/// into its own small buffers (which stay in its L2 cache) and counts them
/// there: for columns already in the page cache this is a copy at memory
/// speed with no page faults, no read-ahead thread and no hand-off.
pub(crate) fn scan_inline(
    morsels: &Morsels,
    cols: &[&Column],
    rows: usize,
    range: Range<usize>,
) -> Result<Acc> {
    let plan = morsels.plan;
    let readers: Vec<microtab_io::RowReader> = cols
        .iter()
        .map(|c| microtab_io::RowReader::open(&c.source()))
        .collect::<std::result::Result<_, _>>()
        .map_err(microtab_store::Error::from)?;
    // One morsel per read: reading 2 or 4 at once measured the same on
    // Q1–Q5, 8 at once 2–5% slower (the buffers leave L2).
    let chunk = MORSEL;
    let nm = range.end.div_ceil(chunk);
    let next = AtomicUsize::new(range.start / chunk);
    let failed: std::sync::Mutex<Option<microtab_store::Error>> = std::sync::Mutex::new(None);
    let accs = rayon::broadcast(|_| {
        let mut acc = Acc::new(plan)?;
        // u64 storage keeps every view aligned for its value type.
        let mut bufs: Vec<Vec<u64>> = readers
            .iter()
            .map(|r| vec![0u64; r.source().span(0, chunk).1.div_ceil(8)])
            .collect();
        let mut unpacked: Vec<Vec<u64>> = cols.iter().map(|_| Vec::new()).collect();
        'scan: loop {
            let k = next.fetch_add(1, Ordering::Relaxed);
            if k >= nm {
                break;
            }
            let Some(pk) = morsels.pick(k) else {
                continue;
            };
            let reads = &pk.reads;
            let s = k * chunk;
            let n = chunk.min(rows - s);
            for ((r, b), _) in readers
                .iter()
                .zip(bufs.iter_mut())
                .zip(reads)
                .filter(|(_, &read)| read)
            {
                let bytes: &mut [u8] = bytemuck_u64(b);
                if let Err(e) = r.read_rows(s, &mut bytes[..r.source().span(s, n).1]) {
                    fail(&failed, e.into());
                    break 'scan;
                }
            }
            let data = cols
                .iter()
                .zip(&bufs)
                .zip(unpacked.iter_mut())
                .zip(reads)
                .map(|(((c, b), u), &read)| {
                    if !read {
                        return Ok(UNREAD);
                    }
                    // SAFETY: the bytes of a u64 buffer.
                    let bytes =
                        unsafe { std::slice::from_raw_parts(b.as_ptr() as *const u8, b.len() * 8) };
                    c.decode(s, bytes, n, u)
                })
                .collect::<std::result::Result<Vec<ColumnData<'_>>, _>>();
            match data {
                Ok(data) => pk.count(&mut acc, &data, counted(s, s + n, &range), s),
                Err(e) => {
                    fail(&failed, e);
                    break 'scan;
                }
            }
            if acc.stopped() {
                break 'scan;
            }
        }
        Ok(acc)
    });
    finish_scan(accs, failed)
}

/// The bytes of a `u64` buffer.
pub(crate) fn bytemuck_u64(b: &mut [u64]) -> &mut [u8] {
    // SAFETY: u8 has no alignment or validity requirements.
    unsafe { std::slice::from_raw_parts_mut(b.as_mut_ptr() as *mut u8, b.len() * 8) }
}

/// An I/O thread reads segments of every column (large `pread`s, or
/// `O_DIRECT`) `readahead` segments ahead; workers count whole segments.
pub(crate) fn scan_streamed(
    morsels: &Morsels,
    cols: &[&Column],
    rows: usize,
    read_path: ReadPath,
    opts: &ScanOptions,
) -> Result<Acc> {
    let plan = morsels.plan;
    let sources: Vec<_> = cols.iter().map(|c| c.source()).collect();
    // Segments hold `segment_bytes` of the widest column as stored.
    // A whole number of morsels (= checksummed stripes).
    let seg_rows = (opts.segment_bytes
        / sources
            .iter()
            .map(|s| s.width.div_ceil(s.unit_rows).max(1))
            .max()
            .unwrap_or(1))
    .max(MORSEL)
    .next_multiple_of(MORSEL);
    let stream = SegmentStream::start(
        &sources,
        rows,
        seg_rows,
        read_path,
        opts.block_size,
        opts.readahead_segments,
    )
    .map_err(microtab_store::Error::from)?;
    let failed: std::sync::Mutex<Option<microtab_store::Error>> = std::sync::Mutex::new(None);
    let accs = rayon::broadcast(|_| {
        let mut acc = Acc::new(plan)?;
        let mut unpacked: Vec<Vec<u64>> = cols.iter().map(|_| Vec::new()).collect();
        'scan: while let Some(seg) = stream.next() {
            let seg = match seg {
                Ok(s) => s,
                Err(e) => {
                    fail(&failed, e.into());
                    break;
                }
            };
            let mut s = 0;
            while s < seg.rows {
                let e = (s + MORSEL).min(seg.rows);
                let Some(pk) = morsels.pick((seg.start + s) / MORSEL) else {
                    s = e;
                    continue;
                };
                let reads = &pk.reads;
                let data = cols
                    .iter()
                    .zip(&seg.bufs)
                    .zip(unpacked.iter_mut())
                    .zip(reads)
                    .map(|(((c, b), u), &read)| {
                        if !read {
                            return Ok(UNREAD);
                        }
                        let (off, len) = c.stored_span(s, e - s);
                        c.decode(seg.start + s, &b.bytes()[off..off + len], e - s, u)
                    })
                    .collect::<std::result::Result<Vec<ColumnData<'_>>, _>>();
                match data {
                    Ok(data) => pk.count(&mut acc, &data, 0..e - s, seg.start + s),
                    Err(err) => {
                        fail(&failed, err);
                        stream.recycle(seg);
                        break 'scan;
                    }
                }
                if acc.stopped() {
                    stream.recycle(seg);
                    break 'scan;
                }
                s = e;
            }
            stream.recycle(seg);
        }
        Ok(acc)
    });
    stream.finish();
    finish_scan(accs, failed)
}

/// The cold path of `auto`: inline with a large kernel read-ahead (8 MiB
/// here: the workers' own in-order morsel reads keep the device busy and
/// beat a read-ahead thread per column, cold Q1–Q5 10–27% faster), streamed
/// segments with the common 128 KiB (there Q3 38 vs 42 ms, Q4 43 vs 65 ms).
/// Measured in docs/IO.md; `microtab tune` races both.
pub(crate) fn cold_path(cols: &[&Column]) -> ReadPath {
    if cols
        .iter()
        .all(|c| microtab_io::auto_cold_path(&c.path()) == ReadPath::Inline)
    {
        ReadPath::Inline
    } else {
        ReadPath::Pread
    }
}
