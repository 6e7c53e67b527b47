//! The page cache, for cold measurements: emptying it (or evicting one
//! file when not root) and asking how much of a file it holds. Used by
//! `microtab tune` and the iobench experiments, and by the engine's
//! choice of read path (through [`MappedFile::resident_fraction`](crate::MappedFile::resident_fraction)).

use std::fs::{File, OpenOptions};
use std::io;
use std::path::Path;

/// Whether this process may empty the whole page cache (root).
pub fn can_drop_caches() -> bool {
    OpenOptions::new()
        .write(true)
        .open("/proc/sys/vm/drop_caches")
        .is_ok()
}

/// `sync; echo 3 > /proc/sys/vm/drop_caches`: empties the page cache
/// (root only).
pub fn drop_caches() -> io::Result<()> {
    crate::sys::sync_all_filesystems();
    std::fs::write("/proc/sys/vm/drop_caches", b"3")
}

/// Evicts one file's pages from the page cache (`fsync`, then
/// `posix_fadvise(DONTNEED)`): what a process that is not root can do.
pub fn evict(path: &Path) -> io::Result<()> {
    // Dirty pages cannot be dropped: write them out first (fsync works on
    // a descriptor opened for reading, so read-only files can be evicted).
    let f = File::open(path)?;
    f.sync_all()?;
    crate::sys::evict(&f)
}

/// Fraction (0..=1) of `path`'s pages that are in the page cache
/// (`mincore` over a mapping of the whole file).
pub fn resident_fraction(path: &Path) -> io::Result<f64> {
    let file = File::open(path)?;
    if file.metadata()?.len() == 0 {
        return Ok(1.0);
    }
    // SAFETY: the mapping is only passed to mincore, never read.
    let map = unsafe { memmap2::Mmap::map(&file)? };
    let pages = map.len().div_ceil(4096);
    let mut vec = vec![0u8; pages];
    // SAFETY: the range is our mapping; `vec` has one byte per page.
    unsafe { crate::sys::resident_pages(map.as_ptr(), map.len(), &mut vec)? };
    Ok(vec.iter().filter(|&&b| b & 1 == 1).count() as f64 / pages as f64)
}
