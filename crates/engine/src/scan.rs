//! The scan drivers: morsels of rows read (inline preads, a mapping, or
//! streamed segments) and counted in parallel into private accumulators,
//! merged at the end.

use crate::acc::{mark_filter, rejected, Acc};
use crate::core::{ScanOptions, MORSEL, STEP};
use crate::physical::{filter_evals, FilterEval, Plan, Sieve};
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
    /// How each filter is evaluated when the inline scan probes a morsel
    /// ([`Probe`]); `None` without filters. Made when first asked for
    /// ([`Pick::evals`]), as is `few`: a scan that reads no morsel of a
    /// pick (the zone maps settle them), or reads none inline, makes
    /// neither.
    evals: std::sync::OnceLock<Option<Vec<FilterEval>>>,
    /// The pick's number among its [`Morsels`] (a worker's [`Probe`]
    /// keeps each pick's order of filters).
    id: usize,
    /// The plan without filters and the distinct columns it reads, when
    /// the pick has no sieve (whose plan it would be), to count the few
    /// rows a probe found passing ([`Pick::few`]).
    few: std::sync::OnceLock<Option<Box<Unfiltered<'a>>>>,
    /// The number of distinct columns.
    columns: usize,
}

/// A plan without filters and the distinct columns it reads.
type Unfiltered<'a> = (Plan<'a>, Vec<bool>);

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
    fn of(plan: PlanRef<'p, 'a>, columns: usize, id: usize) -> Self {
        let p = plan.get();
        let sieve = Sieve::of(p, columns);
        Pick {
            reads: p.reads(columns),
            evals: std::sync::OnceLock::new(),
            id,
            few: std::sync::OnceLock::new(),
            columns,
            sieve,
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
            .map(|_| Pick::of(PlanRef::Made(Box::new(plan.without_filters())), columns, 1));
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
                .enumerate()
                .map(|(i, m)| {
                    let p = plan.keeping_filters(|i| i >= 32 || m >> i & 1 == 0);
                    (m, Pick::of(PlanRef::Made(Box::new(p)), columns, 2 + i))
                })
                .collect(),
            false => Vec::new(),
        };
        Morsels {
            plan,
            full: Pick::of(PlanRef::Query(plan), columns, 0),
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

impl<'a> Pick<'_, 'a> {
    /// The plan without filters and the distinct columns it reads, which
    /// count the few rows a probe found passing ([`Probed::Few`]); `None`
    /// without filters, or for sums over rows the filters leave out
    /// (Taylor sums, folds).
    fn few(&self) -> Option<(&Plan<'a>, &[bool])> {
        if let Some(sv) = &self.sieve {
            // A sieve's plan is this plan without filters already.
            return Some((&sv.plan, &sv.reads));
        }
        let p = self.plan.get();
        let f = self.few.get_or_init(|| {
            (!p.filters.is_empty() && p.taylor.is_none() && p.fold.is_none()).then(|| {
                let u = p.without_filters();
                let reads = u.reads(self.columns);
                Box::new((u, reads))
            })
        });
        f.as_deref().map(|(u, reads)| (u, &reads[..]))
    }

    /// How each filter is evaluated by a probe; `None` without filters.
    fn evals(&self) -> Option<&[FilterEval]> {
        let p = self.plan.get();
        self.evals
            .get_or_init(|| (!p.filters.is_empty()).then(|| filter_evals(&p.filters)))
            .as_deref()
    }

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
///
/// A morsel under filters is probed first ([`Probe`]): its filter
/// columns are read one at a time, the filter that passed fewest rows
/// first, and the morsel's other columns only once some row passes them
/// all.
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
        let mut probe = Probe::default();
        let mut gathered: Vec<Vec<u64>> = cols.iter().map(|_| Vec::new()).collect();
        'scan: loop {
            let k = next.fetch_add(1, Ordering::Relaxed);
            if k >= nm {
                break;
            }
            let Some(pk) = morsels.pick(k) else {
                continue;
            };
            let s = k * chunk;
            let n = chunk.min(rows - s);
            let rr = counted(s, s + n, &range);
            let mut morsel = Loader {
                slots: bufs.iter_mut().zip(unpacked.iter_mut()).map(Some).collect(),
                raw: vec![None; cols.len()],
                unpack: (0..cols.len()).map(|_| None).collect(),
                views: vec![UNREAD; cols.len()],
                readers: &readers,
                cols,
                s,
                n,
            };
            let probed = match probe.run(pk, &mut morsel, rr.clone()) {
                Ok(Probed::Empty) => continue,
                Ok(p) => p,
                Err(e) => {
                    fail(&failed, e);
                    break 'scan;
                }
            };
            if let (Probed::Few, Some((fp, freads))) = (probed, pk.few()) {
                // The few passing rows of the columns the plan without
                // filters reads, unpacked one by one.
                let rows = &probe.rows;
                let mut d = vec![UNREAD; cols.len()];
                for ((c, g), read) in gathered.iter_mut().enumerate().zip(freads) {
                    if !*read {
                        continue;
                    }
                    match morsel.raw(c) {
                        Ok(b) => d[c] = cols[c].gather_unchecked(b, rows, g),
                        Err(e) => {
                            fail(&failed, e);
                            break 'scan;
                        }
                    }
                }
                acc.morsel(fp, &d, 0..rows.len(), s);
                // (No fold here to stop the scan: a fold's plan has no
                // `few`.)
                probe.after(true);
                continue;
            }
            for (c, _) in pk.reads.iter().enumerate().filter(|(_, &read)| read) {
                if let Err(e) = morsel.load(c) {
                    fail(&failed, e);
                    break 'scan;
                }
            }
            let data = &morsel.views;
            let served = match (probed, &pk.sieve) {
                (Probed::Passed, Some(sv)) => {
                    // A pick with a sieve has `few`: its probe's `sel`
                    // holds every filter unless it ended `Few`.
                    debug_assert!(pk.few().is_some());
                    acc.morsel_selected(pk.plan.get(), sv, &probe.sel, data, rr, s)
                }
                _ => {
                    pk.count(&mut acc, data, rr, s);
                    false
                }
            };
            if probed != Probed::Skipped {
                probe.after(served);
            }
            if acc.stopped() {
                break 'scan;
            }
        }
        Ok(acc)
    });
    finish_scan(accs, failed)
}

/// A morsel's columns, read and decoded when first asked for.
struct Loader<'b, 'r> {
    /// Per distinct column, its read and unpacking buffers until read.
    slots: Vec<Option<(&'b mut Vec<u64>, &'b mut Vec<u64>)>>,
    /// Per distinct column, its stored bytes once read and checked.
    raw: Vec<Option<&'b [u8]>>,
    /// Per distinct column read, its unpacking buffer until decoded.
    unpack: Vec<Option<&'b mut Vec<u64>>>,
    /// Per distinct column, its values once decoded ([`UNREAD`] before).
    views: Vec<ColumnData<'b>>,
    readers: &'r [microtab_io::RowReader],
    cols: &'r [&'r Column],
    /// The morsel's first row and its number of rows.
    s: usize,
    n: usize,
}

impl<'b> Loader<'b, '_> {
    /// The stored bytes of column `c` of the morsel, read (one `pread`)
    /// and checked against their stripe checksums on first use.
    fn raw(&mut self, c: usize) -> std::result::Result<&'b [u8], microtab_store::Error> {
        if let Some(b) = self.raw[c] {
            return Ok(b);
        }
        let (b, u) = self.slots[c].take().expect("a column is read once");
        let (r, s, n) = (&self.readers[c], self.s, self.n);
        let bytes: &'b mut [u8] = bytemuck_u64(b);
        let len = r.source().span(s, n).1;
        r.read_rows(s, &mut bytes[..len])?;
        let bytes: &'b [u8] = bytes;
        self.cols[c].check(s, bytes, n)?;
        self.raw[c] = Some(bytes);
        self.unpack[c] = Some(u);
        Ok(bytes)
    }

    /// Reads, checks and decodes column `c` of the morsel, unless it was
    /// already.
    fn load(&mut self, c: usize) -> std::result::Result<(), microtab_store::Error> {
        let bytes = self.raw(c)?;
        if let Some(u) = self.unpack[c].take() {
            self.views[c] = self.cols[c].decode_unchecked(bytes, self.n, u);
        }
        Ok(())
    }
}

/// What a morsel's probe found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Probed {
    /// Not probed (no filters, or probes paused): the morsel is counted
    /// as it is.
    Skipped,
    /// No row passes: nothing more is read.
    Empty,
    /// Some rows pass: [`Probe::sel`] holds them, unless the last filters
    /// were evaluated at few rows (for a pick without [`Pick::few`]: the
    /// kernel evaluates the filters again over every row then).
    Passed,
    /// Few rows pass, [`Probe::rows`], counted by [`Pick::few`].
    Few,
}

/// A worker's probes of its morsels' filters, before their other columns
/// are read: a morsel no row of which passes then costs only the filter
/// columns read until one rejects every row (the zone maps find such
/// morsels only when a whole stripe's values are out of range). Once few
/// rows pass (one in [`FEW`] or fewer), the other filters are evaluated
/// at those rows only, their values unpacked one by one.
#[derive(Default)]
struct Probe {
    /// The probed morsel's selection (one byte a counted row, 0: the row
    /// passes every filter).
    sel: Vec<u8>,
    /// The probed morsel's passing rows (offsets into the morsel), once
    /// few pass.
    rows: Vec<u32>,
    /// The selection of those rows under one filter.
    few_sel: Vec<u8>,
    /// Their values of one filter's column.
    few_vals: Vec<u64>,
    /// The mapper entries of a filter evaluated through its mapper.
    tmp: Vec<u32>,
    /// Per [`Pick::id`], the order its filters are probed in: by the
    /// rows each passed alone in the first morsel probed, fewest first.
    order: Vec<Option<Vec<usize>>>,
    /// Morsels left to count without a probe, and the next such pause.
    /// A probe that found passing rows is paid again when the kernel
    /// evaluates the filters itself: each such probe doubles the pause
    /// (to [`MAX_PROBE_PAUSE`]), and a morsel found empty ends it.
    pause: usize,
    next_pause: usize,
}

/// The rows `sel` passes (one byte a row, 0: passes), as `start` plus
/// their offset into `sel`: eight rows at a time, words of eight rejected
/// rows skipped at once.
fn passing_rows(sel: &[u8], start: usize, out: &mut Vec<u32>) {
    const ONES: u64 = 0x0101_0101_0101_0101;
    out.clear();
    let (words, tail) = sel.as_chunks::<8>();
    for (wi, w) in words.iter().enumerate() {
        let x = u64::from_le_bytes(*w);
        if x == ONES {
            continue;
        }
        // Bit 0 of each passing row's byte.
        let mut m = !x & ONES;
        while m != 0 {
            let b = m.trailing_zeros() as usize / 8;
            out.push((start + wi * 8 + b) as u32);
            m &= m - 1;
        }
    }
    let t = words.len() * 8;
    out.extend(
        (tail.iter().enumerate())
            .filter(|(_, &s)| s == 0)
            .map(|(k, _)| (start + t + k) as u32),
    );
}

/// Most morsels counted without a probe after probes that found passing
/// rows the kernel evaluated again.
const MAX_PROBE_PAUSE: usize = 16;

/// Once at most one row in `FEW` passes the filters probed so far, the
/// others are evaluated at those rows only, and [`Pick::few`] counts
/// them from values unpacked one by one.
const FEW: usize = 16;

impl Probe {
    /// Probes rows `r` of the morsel `m` under pick `pk`'s filters.
    fn run(
        &mut self,
        pk: &Pick,
        m: &mut Loader,
        r: Range<usize>,
    ) -> std::result::Result<Probed, microtab_store::Error> {
        let Some(evals) = pk.evals() else {
            return Ok(Probed::Skipped);
        };
        if self.pause > 0 {
            self.pause -= 1;
            return Ok(Probed::Skipped);
        }
        let p = pk.plan.get();
        let slots = &p.slots.filters;
        if self.order.len() <= pk.id {
            self.order.resize(pk.id + 1, None);
        }
        let n = r.len();
        self.sel.clear();
        self.sel.resize(n, 0);
        if self.order[pk.id].is_none() {
            // The first morsel: each filter alone, then together.
            let mut alone = vec![0u8; n];
            let mut passed = Vec::with_capacity(evals.len());
            for (i, e) in evals.iter().enumerate() {
                m.load(slots[i])?;
                alone.fill(0);
                let d = m.views[slots[i]];
                mark_filter(e, &p.filters[i].1, d, r.clone(), &mut alone, &mut self.tmp);
                passed.push((n - rejected(&alone), i));
                for (s, &a) in self.sel.iter_mut().zip(&alone) {
                    *s |= a;
                }
            }
            passed.sort_unstable();
            self.order[pk.id] = Some(passed.into_iter().map(|(_, i)| i).collect());
            return Ok(self.found(n - rejected(&self.sel)));
        }
        let order = self.order[pk.id].as_deref().unwrap_or_default();
        let mut pass = n;
        let mut few = false;
        for &i in order {
            let (c, e, mapper) = (slots[i], &evals[i], &p.filters[i].1);
            if !few && pass * FEW <= n && pk.few().is_some() {
                few = true;
                passing_rows(&self.sel, r.start, &mut self.rows);
            }
            if few {
                let vals = m.cols[c].gather_unchecked(m.raw(c)?, &self.rows, &mut self.few_vals);
                let k = self.rows.len();
                self.few_sel.clear();
                self.few_sel.resize(k, 0);
                mark_filter(e, mapper, vals, 0..k, &mut self.few_sel, &mut self.tmp);
                let mut keep = self.few_sel.iter();
                self.rows.retain(|_| keep.next() == Some(&0));
                pass = self.rows.len();
            } else {
                m.load(c)?;
                let d = m.views[c];
                mark_filter(e, mapper, d, r.clone(), &mut self.sel, &mut self.tmp);
                pass = n - rejected(&self.sel);
            }
            if pass == 0 {
                break;
            }
        }
        Ok(match self.found(pass) {
            Probed::Passed if pk.few().is_some() && (few || pass * FEW <= n) => {
                if !few {
                    passing_rows(&self.sel, r.start, &mut self.rows);
                }
                Probed::Few
            }
            found => found,
        })
    }

    fn found(&mut self, pass: usize) -> Probed {
        if pass == 0 {
            self.next_pause = 0;
            Probed::Empty
        } else {
            Probed::Passed
        }
    }

    /// After a probed morsel is counted: whether its probe's selection
    /// `served` the kernel. A probe that served ends the pauses, as one
    /// that found no row does.
    fn after(&mut self, served: bool) {
        if served {
            self.next_pause = 0;
        } else {
            self.pause = self.next_pause;
            self.next_pause = (self.next_pause * 2).clamp(1, MAX_PROBE_PAUSE);
        }
    }
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

#[cfg(test)]
mod tests {
    use super::passing_rows;

    #[test]
    fn passing_rows_by_hand() {
        // 21 rows: whole words of rejected rows, a word with passing rows
        // at both ends, and a tail of five.
        let mut sel = vec![1u8; 21];
        for k in [8, 10, 15, 17, 20] {
            sel[k] = 0;
        }
        let mut out = vec![99];
        passing_rows(&sel, 100, &mut out);
        assert_eq!(out, [108, 110, 115, 117, 120]);
        passing_rows(&[1; 16], 0, &mut out);
        assert!(out.is_empty());
        passing_rows(&[0; 3], 7, &mut out);
        assert_eq!(out, [7, 8, 9]);
        passing_rows(&[], 7, &mut out);
        assert!(out.is_empty());
    }
}
