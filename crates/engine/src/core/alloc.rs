//! Fallible allocation of the buffers a query sizes by its data (cubes of
//! cells, per-worker accumulators, gathered rows): Rust's `vec![…]` aborts
//! the process when the allocator says no, which kills the user's Python
//! interpreter or Jupyter kernel with it. These return
//! [`Error::OutOfMemory`] instead, naming what the buffer was for.

use super::error::{Error, Result};

/// Types whose all-zero bytes are a valid value, their zero: a buffer of
/// them is allocated zeroed (untouched pages, as `vec![0; n]` does)
/// rather than written.
///
/// # Safety
/// Every field of an implementing type is an integer, a float or an array
/// of them (all-zero bytes are a valid value), and it has no padding
/// invariant.
pub(crate) unsafe trait Zeroable: Copy {}

// SAFETY: integers and floats: all-zero bytes are 0 and 0.0.
unsafe impl Zeroable for u8 {}
unsafe impl Zeroable for u16 {}
unsafe impl Zeroable for u32 {}
unsafe impl Zeroable for u64 {}
unsafe impl Zeroable for i64 {}
unsafe impl Zeroable for i128 {}
unsafe impl Zeroable for f64 {}
unsafe impl<T: Zeroable, const N: usize> Zeroable for [T; N] {}

/// The error for a buffer of `bytes` bytes for `what` that could not be
/// had.
pub(crate) fn out_of_memory(bytes: u128, what: impl Into<String>) -> Error {
    Error::OutOfMemory {
        bytes: bytes.min(u64::MAX as u128) as u64,
        what: what.into(),
    }
}

fn bytes_of<T>(n: usize) -> u128 {
    n as u128 * std::mem::size_of::<T>() as u128
}

/// `n` zeros, or [`Error::OutOfMemory`] naming `what`.
pub(crate) fn zeroed<T: Zeroable>(n: usize, what: impl FnOnce() -> String) -> Result<Vec<T>> {
    if n == 0 || std::mem::size_of::<T>() == 0 {
        return Ok(Vec::new());
    }
    let Ok(layout) = std::alloc::Layout::array::<T>(n) else {
        return Err(out_of_memory(bytes_of::<T>(n), what()));
    };
    // SAFETY: a non-zero-sized layout; the zeroed bytes are valid `T`s
    // (`Zeroable`), and the pointer, allocated by the global allocator with
    // `T`'s array layout of `n`, is handed to a `Vec` of capacity `n`.
    unsafe {
        let p = fallibly(|| std::alloc::alloc_zeroed(layout)) as *mut T;
        if p.is_null() {
            return Err(out_of_memory(bytes_of::<T>(n), what()));
        }
        huge_pages(p as *mut u8, layout.size());
        Ok(Vec::from_raw_parts(p, n, n))
    }
}

/// An empty vector with room for `n` values (its memory reserved, none
/// of it written), or [`Error::OutOfMemory`] naming `what`.
pub(crate) fn reserved<T>(n: usize, what: impl FnOnce() -> String) -> Result<Vec<T>> {
    let mut out = Vec::new();
    fallibly(|| out.try_reserve_exact(n)).map_err(|_| out_of_memory(bytes_of::<T>(n), what()))?;
    huge_pages(out.as_mut_ptr() as *mut u8, n * std::mem::size_of::<T>());
    Ok(out)
}

/// Buffers from this size up are asked to be backed by huge pages.
const HUGE_FROM: usize = 8 << 20;

/// Asks the kernel to back the whole 2 MiB pages of a large buffer just
/// allocated (and, fresh from the system, not yet touched) by huge pages:
/// a wide table's cells are reached at random, row by row, and with 4 KiB
/// pages nearly every row missed the TLB and each page faulted once.
/// Advice only: nothing changes where the system keeps huge pages off.
#[allow(unused_variables)]
fn huge_pages(p: *mut u8, len: usize) {
    #[cfg(target_os = "linux")]
    if len >= HUGE_FROM {
        const HUGE: usize = 2 << 20;
        let start = (p as usize).next_multiple_of(HUGE);
        let end = (p as usize + len) / HUGE * HUGE;
        if end > start {
            // SAFETY: the range lies within the allocation; the advice
            // does not change its contents.
            unsafe {
                libc::madvise(start as *mut libc::c_void, end - start, libc::MADV_HUGEPAGE);
            }
        }
    }
}

/// Whether `v` could be given room for `n` more values (false, rather
/// than the process ending, when the system refuses the memory).
pub(crate) fn try_grow<T>(v: &mut Vec<T>, n: usize) -> bool {
    fallibly(|| v.try_reserve(n)).is_ok()
}

/// `n` copies of `v`, or [`Error::OutOfMemory`] naming `what`.
pub(crate) fn filled<T: Clone>(n: usize, v: T, what: impl FnOnce() -> String) -> Result<Vec<T>> {
    let mut out = Vec::new();
    fallibly(|| out.try_reserve_exact(n)).map_err(|_| out_of_memory(bytes_of::<T>(n), what()))?;
    out.resize(n, v);
    Ok(out)
}

/// A global allocator for microtab's executables: the system's, except
/// that an allocation the system refuses ends the process with exit
/// status 1 and a one-line message, instead of Rust's abort (SIGABRT, exit
/// 134, a backtrace). The buffers sized by the data are allocated
/// fallibly ([`Error::OutOfMemory`]); this catches the small ones that
/// follow them at the edge of a memory limit. Not for a library loaded
/// into another process (the Python extension): exiting would end it.
pub struct ExitOnOutOfMemory;

impl ExitOnOutOfMemory {
    #[cold]
    fn exit(size: usize) -> ! {
        // No allocation here: the message is assembled on the stack.
        let mut buf = [0u8; 200];
        let mut n = 0;
        let mut put = |b: &[u8]| {
            let k = b.len().min(buf.len() - n);
            buf[n..n + k].copy_from_slice(&b[..k]);
            n += k;
        };
        put(b"error: out of memory: ");
        let mut digits = [0u8; 20];
        let mut d = digits.len();
        let mut v = size;
        loop {
            d -= 1;
            digits[d] = b'0' + (v % 10) as u8;
            v /= 10;
            if v == 0 {
                break;
            }
        }
        put(&digits[d..]);
        put(b" more bytes could not be allocated (a memory limit such as ulimit -v, or the machine's memory); the command was stopped and wrote nothing more\n");
        // SAFETY: writing a stack buffer to standard error, then ending the
        // process without running anything that could allocate.
        #[cfg(unix)]
        unsafe {
            libc::write(2, buf.as_ptr() as *const libc::c_void, n);
            libc::_exit(1)
        }
        #[cfg(not(unix))]
        {
            use std::io::Write;
            let _ = std::io::stderr().write_all(&buf[..n]);
            std::process::exit(1)
        }
    }
}

// SAFETY: every call is passed to the system allocator unchanged; only a
// null (refused) result is turned into the end of the process.
unsafe impl std::alloc::GlobalAlloc for ExitOnOutOfMemory {
    #[inline]
    unsafe fn alloc(&self, layout: std::alloc::Layout) -> *mut u8 {
        let p = std::alloc::System.alloc(layout);
        if p.is_null() && !FALLIBLE.with(|f| f.get()) {
            Self::exit(layout.size());
        }
        p
    }

    #[inline]
    unsafe fn alloc_zeroed(&self, layout: std::alloc::Layout) -> *mut u8 {
        let p = std::alloc::System.alloc_zeroed(layout);
        if p.is_null() && !FALLIBLE.with(|f| f.get()) {
            Self::exit(layout.size());
        }
        p
    }

    #[inline]
    unsafe fn dealloc(&self, ptr: *mut u8, layout: std::alloc::Layout) {
        std::alloc::System.dealloc(ptr, layout)
    }

    #[inline]
    unsafe fn realloc(&self, ptr: *mut u8, layout: std::alloc::Layout, new: usize) -> *mut u8 {
        let p = std::alloc::System.realloc(ptr, layout, new);
        if p.is_null() && !FALLIBLE.with(|f| f.get()) {
            Self::exit(new);
        }
        p
    }
}

std::thread_local! {
    /// Set while this thread allocates fallibly (its caller handles a
    /// refusal): [`ExitOnOutOfMemory`] then returns the null.
    static FALLIBLE: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Runs `f` (a fallible allocation) with [`FALLIBLE`] set.
fn fallibly<R>(f: impl FnOnce() -> R) -> R {
    let was = FALLIBLE.with(|c| c.replace(true));
    let r = f();
    FALLIBLE.with(|c| c.set(was));
    r
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_buffer_beyond_the_address_space_is_an_error() {
        // 2^61 u64s: more bytes than any allocator can give.
        let e = zeroed::<u64>(1 << 61, || "a test table".into()).unwrap_err();
        let m = e.to_string();
        assert!(
            m.contains("a test table") && m.contains("could not be allocated"),
            "{m}"
        );
        assert!(filled(1usize << 60, 1.5f64, || "x".into()).is_err());
        let z: Vec<[f64; 5]> = zeroed(1000, || "z".into()).unwrap();
        assert!(z.len() == 1000 && z.iter().all(|c| c.iter().all(|&x| x == 0.0)));
    }
}
