//! How a morsel's filters reach the fused kernels: evaluated into a
//! selection byte column, and the passing rows gathered when few pass; and
//! the fused kernels' code columns with their tables.

use crate::kernels::{apply_col, dispatch, mark_ranges, FusedTab, SELECTION_TABLE};
use crate::physical::{FilterEval, Form, Fused, Plan};
use crate::plan::Mapper;
use microtab_store::ColumnData;

/// A fused kernel's leading column and its table.
#[derive(Clone, Copy)]
pub(crate) enum LeadCol<'a> {
    Byte(&'a [u8], &'a [u32; 256]),
    Word(&'a [u16], &'a [u32; 65536]),
}

/// The code columns of a fused kernel, after the leading one, with their
/// tables.
pub(crate) type Codes<'a> = (LeadCol<'a>, Vec<&'a [u8]>, Vec<&'a [u32; 256]>);

/// The code columns of the fused kernels over rows `r`, with their
/// tables: the dimensions, then the filters as `form` says; at most one
/// `u16` column, which leads (cells are sums of table entries, so the
/// order does not matter), else the first. `None` when a column is not a
/// code column or two are `u16` (the plan's [`Fused::fits`] says so
/// beforehand).
pub(crate) fn code_columns<'a>(
    p: &Plan,
    f: &'a Fused,
    data: &[ColumnData<'a>],
    r: std::ops::Range<usize>,
    form: Form,
    sel: &'a [u8],
) -> Option<Codes<'a>> {
    let filters: &[usize] = if form == Form::Columns {
        &p.slots.filters
    } else {
        &[]
    };
    let mut word = None;
    let mut cols: Vec<&[u8]> = Vec::with_capacity(p.dims.len() + filters.len() + 1);
    let mut tabs: Vec<&[u32; 256]> = Vec::with_capacity(cols.capacity());
    for (&k, t) in p.slots.dims.iter().chain(filters).zip(&f.tabs) {
        match (t, data[k]) {
            (FusedTab::Byte(t), ColumnData::U8(v)) => {
                cols.push(&v[r.clone()]);
                tabs.push(t);
            }
            (FusedTab::Word(t), ColumnData::U16(v)) if word.is_none() => {
                word = Some(LeadCol::Word(&v[r.clone()], t));
            }
            _ => return None,
        }
    }
    if form == Form::Selection {
        cols.push(sel);
        tabs.push(&SELECTION_TABLE);
    }
    let lead = match word {
        Some(w) => w,
        None if !cols.is_empty() => LeadCol::Byte(cols.remove(0), tabs.remove(0)),
        None => return None,
    };
    Some((lead, cols, tabs))
}

/// Runs `$body` with the code columns and their tables as arrays
/// `$c: [&[u8]; N]`, `$t: [&[u32; 256]; N]`, for each `N` listed (the
/// kernels are compiled per number of columns); false for other numbers.
macro_rules! as_arrays {
    ($cols:ident, $tabs:ident, [$($n:literal),*], |$c:ident, $t:ident| $body:block) => {
        match $cols.len() {
            $($n => {
                let $c: [&[u8]; $n] = $cols.try_into().unwrap();
                let $t: [&[u32; 256]; $n] = $tabs.try_into().unwrap();
                $body
            })*
            _ => return false,
        }
    };
}
pub(crate) use as_arrays;

/// Calls a fused kernel with the leading column of either type.
macro_rules! with_lead {
    ($lead:expr, |$l:ident| $body:expr) => {
        match $lead {
            LeadCol::Byte(c, t) => {
                let $l = (c, t);
                $body
            }
            LeadCol::Word(c, t) => {
                let $l = (c, t);
                $body
            }
        }
    };
}
pub(crate) use with_lead;

/// A morsel's rows that pass the filters, and copies of the kernel's
/// columns at those rows (reused from morsel to morsel).
#[derive(Default)]
pub(crate) struct Gather {
    rows: Vec<u32>,
    bufs: Vec<Vec<u64>>,
}

/// What [`gather`] made of a morsel.
pub(crate) enum Gathered<'b> {
    /// The plan has no selection: the kernel reads the filter columns.
    Unfiltered,
    /// A filter column does not fit the selection (the index kernel
    /// counts the morsel).
    No,
    /// Most rows pass: the selection column goes to the kernel.
    Selection,
    /// No row passes.
    Empty,
    /// The passing rows' columns (by slot; those the kernel does not read
    /// left empty) and their number.
    Rows(Vec<ColumnData<'b>>, usize),
}

/// Copies rows `rows` of rows `r` of `d` into `buf`.
fn gather_col<'b>(
    d: ColumnData<'_>,
    r: std::ops::Range<usize>,
    rows: &[u32],
    buf: &'b mut Vec<u64>,
) -> ColumnData<'b> {
    fn typed<'b, T: Copy>(v: &[T], rows: &[u32], buf: &'b mut Vec<u64>) -> &'b [T] {
        let n = rows.len();
        buf.clear();
        buf.reserve((n * std::mem::size_of::<T>()).div_ceil(8));
        let ptr = buf.as_mut_ptr().cast::<T>();
        for (k, &i) in rows.iter().enumerate() {
            // SAFETY: the capacity holds n values of T (alignment ≤ 8, as
            // for every ColumnData type); k < n.
            unsafe { ptr.add(k).write(v[i as usize]) };
        }
        // SAFETY: the n values were written above; `buf` stays borrowed
        // (and unchanged) for the returned slice's lifetime.
        unsafe { std::slice::from_raw_parts(ptr, n) }
    }
    match d {
        ColumnData::U8(v) => ColumnData::U8(typed(&v[r], rows, buf)),
        ColumnData::I8(v) => ColumnData::I8(typed(&v[r], rows, buf)),
        ColumnData::U16(v) => ColumnData::U16(typed(&v[r], rows, buf)),
        ColumnData::I16(v) => ColumnData::I16(typed(&v[r], rows, buf)),
        ColumnData::U32(v) => ColumnData::U32(typed(&v[r], rows, buf)),
        ColumnData::I32(v) => ColumnData::I32(typed(&v[r], rows, buf)),
        ColumnData::I64(v) => ColumnData::I64(typed(&v[r], rows, buf)),
        ColumnData::F32(v) => ColumnData::F32(typed(&v[r], rows, buf)),
        ColumnData::F64(v) => ColumnData::F64(typed(&v[r], rows, buf)),
    }
}

/// For each mask of eight rows, the positions of its set bits, lowest
/// first (the rest 0).
static COMPACT: [[u8; 8]; 256] = {
    let mut t = [[0u8; 8]; 256];
    let mut m = 0;
    while m < 256 {
        let (mut k, mut b) = (0, 0);
        while b < 8 {
            if m >> b & 1 == 1 {
                t[m][k] = b as u8;
                k += 1;
            }
            b += 1;
        }
        m += 1;
    }
    t
};

/// Rows of `sel` (one byte 0 or 1 per row) that are 1.
pub(crate) fn rejected(sel: &[u8]) -> usize {
    // Add the bytes eight at a time in u64 words (at most 255 words, so no
    // byte lane overflows), then across lanes.
    let (words, tail) = sel.as_chunks::<8>();
    let mut rejected = tail.iter().map(|&b| b as usize).sum::<usize>();
    for chunk in words.chunks(255) {
        let acc: u64 = chunk.iter().map(|w| u64::from_ne_bytes(*w)).sum();
        let pairs = (acc & 0x00ff_00ff_00ff_00ff) + ((acc >> 8) & 0x00ff_00ff_00ff_00ff);
        rejected += (pairs.wrapping_mul(0x0001_0001_0001_0001) >> 48) as usize;
    }
    rejected
}

/// Evaluates the filters of rows `r` ([`Fused::selection`]) and, unless
/// most rows pass, gathers the passing rows of the columns the fused
/// kernel reads (dimensions, weight, analysis variable), so it counts only
/// them (a selective filter then costs little more than its own column).
pub(crate) fn gather<'b>(
    p: &Plan,
    f: &Fused,
    data: &[ColumnData<'_>],
    r: std::ops::Range<usize>,
    sel: &mut Vec<u8>,
    g: &'b mut Gather,
    max_pass_eighths: usize,
) -> Gathered<'b> {
    let Some(kinds) = &f.selection else {
        return Gathered::Unfiltered;
    };
    let s = &p.slots;
    let read = |k: usize| s.dims.contains(&k) || s.weight == Some(k) || s.measure == Some(k);
    match gather_rows(p, kinds, data, r, sel, g, max_pass_eighths, read) {
        Gathered::Selection if f.gather_only => Gathered::Unfiltered,
        other => other,
    }
}

/// Evaluates the filters of rows `r` (`kinds` as [`Fused::selection`]
/// says) into `sel` and, unless more than `max_pass_eighths` of the rows
/// pass ([`Gathered::Selection`] then), gathers the passing rows of the
/// columns `read` names.
#[allow(clippy::too_many_arguments)]
pub(crate) fn gather_rows<'b>(
    p: &Plan,
    kinds: &[FilterEval],
    data: &[ColumnData<'_>],
    r: std::ops::Range<usize>,
    sel: &mut Vec<u8>,
    g: &'b mut Gather,
    max_pass_eighths: usize,
    read: impl Fn(usize) -> bool,
) -> Gathered<'b> {
    if !fill_selection(p, kinds, data, r.clone(), sel) {
        return Gathered::No;
    }
    gather_selected(data, r, sel, g, max_pass_eighths, read)
}

/// [`gather_rows`] of a selection already evaluated: `sel`, one byte a row
/// of `r` (0: the row passes).
pub(crate) fn gather_selected<'b>(
    data: &[ColumnData<'_>],
    r: std::ops::Range<usize>,
    sel: &[u8],
    g: &'b mut Gather,
    max_pass_eighths: usize,
    read: impl Fn(usize) -> bool,
) -> Gathered<'b> {
    let n = sel.len();
    let pass = n - rejected(sel);
    if pass == 0 {
        return Gathered::Empty;
    }
    // Gathering pays while few enough rows pass for the kernel's work
    // saved to exceed the copying (see the callers' measurements).
    if pass * 8 > n * max_pass_eighths {
        return Gathered::Selection;
    }
    // The passing row numbers, eight rows at a time: their mask's entry
    // in COMPACT written whole, the next write after the passing ones.
    // When very few pass, eight rejected rows are skipped at once (a
    // branch mispredicted when many words hold a passing row): with 1.2%
    // passing, a row-by-row loop took most of the query's time (`freq
    // EDUC --filter GQ!=1`).
    g.rows.clear();
    g.rows.reserve(n + 8);
    let spare = &mut g.rows.spare_capacity_mut()[..n + 8];
    let mut j = 0;
    let (words, tail) = sel.as_chunks::<8>();
    let sparse = pass * 32 < n;
    for (wi, w) in words.iter().enumerate() {
        let x = u64::from_le_bytes(*w);
        if sparse && x == 0x0101_0101_0101_0101 {
            continue;
        }
        // Bit k of `m`: row k passes (byte k is 0).
        let m = ((!x & 0x0101_0101_0101_0101).wrapping_mul(0x0102_0408_1020_4080) >> 56) as usize;
        let base = (wi * 8) as u32;
        for (s, &o) in spare[j..j + 8].iter_mut().zip(&COMPACT[m]) {
            s.write(base + o as u32);
        }
        j += m.count_ones() as usize;
    }
    for (k, &s) in tail.iter().enumerate() {
        spare[j].write((words.len() * 8 + k) as u32);
        j += (s == 0) as usize;
    }
    debug_assert_eq!(j, pass);
    // SAFETY: rows 0..j of the spare capacity were written above.
    unsafe { g.rows.set_len(j) };
    g.bufs.resize_with(data.len(), Vec::new);
    let rows = &g.rows[..];
    let out = data
        .iter()
        .zip(g.bufs.iter_mut())
        .enumerate()
        .map(|(k, (d, buf))| match read(k) {
            true => gather_col(*d, r.clone(), rows, buf),
            // Not read: a filter's column (the rows are already filtered).
            false => ColumnData::U8(&[]),
        })
        .collect();
    Gathered::Rows(out, pass)
}

/// Marks in `sel` the rows whose code is in none of the ranges `rg`
/// (`(lo, hi − lo)`), branch-free: the compiler vectorizes it.
#[inline(always)]
fn mark_bytes<const K: usize>(sel: &mut [u8], v: &[u8], rg: [(u8, u8); K]) {
    for (s, &x) in sel.iter_mut().zip(v) {
        let mut ok = false;
        for (lo, span) in rg {
            ok |= x.wrapping_sub(lo) <= span;
        }
        *s |= (!ok) as u8;
    }
}

/// [`mark_bytes`] for `u16` codes.
#[inline(always)]
fn mark_words<const K: usize>(sel: &mut [u8], v: &[u16], rg: [(u16, u16); K]) {
    for (s, &x) in sel.iter_mut().zip(v) {
        let mut ok = false;
        for (lo, span) in rg {
            ok |= x.wrapping_sub(lo) <= span;
        }
        *s |= (!ok) as u8;
    }
}

/// Marks in `sel` (one byte per row of `r`; 0 passes) the rows the
/// filters reject, as `kinds` ([`Fused::selection`]) says; false when a
/// filter's column does not fit (the index kernel counts the morsel then).
fn fill_selection(
    p: &Plan,
    kinds: &[FilterEval],
    data: &[ColumnData<'_>],
    r: std::ops::Range<usize>,
    sel: &mut Vec<u8>,
) -> bool {
    sel.clear();
    sel.resize(r.len(), 0);
    for ((k, (_, m)), &slot) in kinds.iter().zip(&p.filters).zip(&p.slots.filters) {
        if !mark_fast(k, m, data[slot], r.clone(), sel) {
            return false;
        }
    }
    true
}

/// Marks in `sel` (one byte per row of `r`, 0: passes) the rows filter
/// `m` (evaluated as `k` says) rejects in `d`, through its passing codes
/// or a byte, `u16` or ranges mapper; false (and `sel` untouched) for
/// other mappers.
fn mark_fast(
    k: &FilterEval,
    m: &Mapper,
    d: ColumnData<'_>,
    r: std::ops::Range<usize>,
    sel: &mut [u8],
) -> bool {
    match (k, m, d) {
        (FilterEval::Bytes(rg), _, ColumnData::U8(v)) => {
            let v = &v[r];
            match rg[..] {
                [] => sel.fill(1),
                [a] => mark_bytes(sel, v, [a]),
                [a, b] => mark_bytes(sel, v, [a, b]),
                [a, b, c] => mark_bytes(sel, v, [a, b, c]),
                [a, b, c, d] => mark_bytes(sel, v, [a, b, c, d]),
                _ => return false,
            }
        }
        (FilterEval::Words(rg), _, ColumnData::U16(v)) => {
            let v = &v[r];
            match rg[..] {
                [] => sel.fill(1),
                [a] => mark_words(sel, v, [a]),
                [a, b] => mark_words(sel, v, [a, b]),
                [a, b, c] => mark_words(sel, v, [a, b, c]),
                [a, b, c, d] => mark_words(sel, v, [a, b, c, d]),
                _ => return false,
            }
        }
        (FilterEval::WordBits(bits), _, ColumnData::U16(v)) => {
            for (s, &x) in sel.iter_mut().zip(&v[r]) {
                *s |= (!(bits[(x >> 6) as usize] >> (x & 63)) & 1) as u8;
            }
        }
        (FilterEval::Mapper, Mapper::Byte(t), ColumnData::U8(v)) => {
            for (s, &x) in sel.iter_mut().zip(&v[r]) {
                *s |= (t[x as usize] != 0) as u8;
            }
        }
        (FilterEval::Mapper, Mapper::Word(t), ColumnData::U16(v)) => {
            for (s, &x) in sel.iter_mut().zip(&v[r]) {
                *s |= (t[x as usize] != 0) as u8;
            }
        }
        (FilterEval::Mapper, Mapper::Ranges(rg), d) => {
            dispatch!(d, r, |v| mark_ranges(
                v,
                rg,
                |s: &mut u8, bad| *s |= bad as u8,
                sel
            ))
        }
        _ => return false,
    }
    true
}

/// Marks in `sel` (one byte per row of `r`, 0: passes) the rows filter
/// `m` rejects in `d`, evaluated as `k` says, or through the mapper's
/// entries per row (`tmp`: a buffer for them) for any filter
/// [`mark_fast`] does not take: a filter's mapper gives 0 to the values
/// that pass and [`TRASH`](crate::plan::TRASH) to the others.
pub(crate) fn mark_filter(
    k: &FilterEval,
    m: &Mapper,
    d: ColumnData<'_>,
    r: std::ops::Range<usize>,
    sel: &mut [u8],
    tmp: &mut Vec<u32>,
) {
    if mark_fast(k, m, d, r.clone(), sel) {
        return;
    }
    tmp.clear();
    tmp.resize(r.len(), 0);
    apply_col(d, r, m, tmp);
    for (s, &e) in sel.iter_mut().zip(tmp.iter()) {
        *s |= (e != 0) as u8;
    }
}
