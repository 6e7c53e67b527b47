//! The operating system's calls, in one place per platform.
//!
//! Linux is the tuned path: `pread`/`pwrite`, `sync_file_range` to start
//! write-back early, `posix_fadvise`, `O_DIRECT`, `mincore`, `syncfs` and
//! `renameat2(RENAME_EXCHANGE)`. macOS and the other Unix systems have
//! `pread`/`pwrite`, `mincore` and (macOS) `renamex_np(RENAME_SWAP)`,
//! `F_NOCACHE` and `F_RDADVISE`; what they lack is a hint skipped or a
//! slower equivalent (an `fsync` per file for `syncfs`). Windows has
//! positional reads and writes (`seek_read`/`seek_write`), file locks, and
//! no atomic exchange of two directories (see [`exchange_dirs`]).
//!
//! Hints return nothing: a hint the platform lacks changes speed, never an
//! answer.

use std::fs::{File, OpenOptions};
use std::io;
use std::path::Path;

/// Reads exactly `buf.len()` bytes at `offset` without moving a shared
/// file position that another thread relies on (`pread`).
pub fn read_exact_at(file: &File, buf: &mut [u8], offset: u64) -> io::Result<()> {
    #[cfg(unix)]
    {
        use std::os::unix::fs::FileExt;
        file.read_exact_at(buf, offset)
    }
    #[cfg(windows)]
    {
        let (mut buf, mut offset) = (buf, offset);
        while !buf.is_empty() {
            match read_at(file, buf, offset) {
                Ok(0) => {
                    return Err(io::Error::new(
                        io::ErrorKind::UnexpectedEof,
                        "failed to fill whole buffer",
                    ))
                }
                Ok(n) => {
                    buf = &mut buf[n..];
                    offset += n as u64;
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }
}

/// Reads up to `buf.len()` bytes at `offset`; the count read.
pub fn read_at(file: &File, buf: &mut [u8], offset: u64) -> io::Result<usize> {
    #[cfg(unix)]
    {
        use std::os::unix::fs::FileExt;
        file.read_at(buf, offset)
    }
    #[cfg(windows)]
    {
        use std::os::windows::fs::FileExt;
        // Reading at or past the end is an error on Windows, zero bytes
        // on Unix: the same answer here.
        match file.seek_read(buf, offset) {
            Err(e) if e.raw_os_error() == Some(38) => Ok(0), // ERROR_HANDLE_EOF
            r => r,
        }
    }
}

/// Writes all of `data` at `offset` (`pwrite`).
pub fn write_all_at(file: &File, data: &[u8], offset: u64) -> io::Result<()> {
    #[cfg(unix)]
    {
        use std::os::unix::fs::FileExt;
        file.write_all_at(data, offset)
    }
    #[cfg(windows)]
    {
        use std::os::windows::fs::FileExt;
        let (mut data, mut offset) = (data, offset);
        while !data.is_empty() {
            match file.seek_write(data, offset) {
                Ok(0) => return Err(io::Error::from(io::ErrorKind::WriteZero)),
                Ok(n) => {
                    data = &data[n..];
                    offset += n as u64;
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }
}

/// Starts writing `len` bytes from `offset` to disk without waiting
/// (Linux `sync_file_range`); elsewhere the final `fsync` does it all.
pub fn start_writeback(file: &File, offset: u64, len: u64) {
    #[cfg(target_os = "linux")]
    {
        use std::os::fd::AsRawFd;
        // SAFETY: plain syscall on an open descriptor.
        unsafe {
            libc::sync_file_range(
                file.as_raw_fd(),
                offset as libc::off64_t,
                len as libc::off64_t,
                libc::SYNC_FILE_RANGE_WRITE,
            );
        }
    }
    #[cfg(not(target_os = "linux"))]
    let _ = (file, offset, len);
}

/// What a read-ahead hint says of a stretch of a file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Advice {
    /// The file will be read from start to end.
    Sequential,
    /// The stretch will be read soon: start reading it now.
    WillNeed,
    /// Reads will jump around: no read-ahead.
    Random,
}

/// Hints the kernel how `offset..offset+len` of `file` will be read
/// (`len` 0: to the end). Linux `posix_fadvise`; macOS `F_RDADVISE` for
/// [`Advice::WillNeed`]; nothing elsewhere.
pub fn advise(file: &File, offset: u64, len: u64, advice: Advice) {
    #[cfg(target_os = "linux")]
    {
        use std::os::fd::AsRawFd;
        let a = match advice {
            Advice::Sequential => libc::POSIX_FADV_SEQUENTIAL,
            Advice::WillNeed => libc::POSIX_FADV_WILLNEED,
            Advice::Random => libc::POSIX_FADV_RANDOM,
        };
        // SAFETY: plain syscall on an open descriptor.
        unsafe {
            libc::posix_fadvise(
                file.as_raw_fd(),
                offset as libc::off_t,
                len as libc::off_t,
                a,
            );
        }
    }
    #[cfg(target_os = "macos")]
    {
        use std::os::fd::AsRawFd;
        if advice == Advice::WillNeed && len > 0 {
            let ra = libc::radvisory {
                ra_offset: offset as libc::off_t,
                ra_count: len.min(i32::MAX as u64) as libc::c_int,
            };
            // SAFETY: fcntl with a valid radvisory on an open descriptor.
            unsafe {
                libc::fcntl(file.as_raw_fd(), libc::F_RDADVISE, &ra);
            }
        }
    }
    #[cfg(not(any(target_os = "linux", target_os = "macos")))]
    let _ = (file, offset, len, advice);
}

/// Evicts a file's cached pages (`posix_fadvise(DONTNEED)` after the
/// caller's `fsync`). `Unsupported` where the platform has no such call.
pub fn evict(file: &File) -> io::Result<()> {
    #[cfg(target_os = "linux")]
    {
        use std::os::fd::AsRawFd;
        // SAFETY: plain syscall on an open descriptor.
        let r = unsafe { libc::posix_fadvise(file.as_raw_fd(), 0, 0, libc::POSIX_FADV_DONTNEED) };
        if r != 0 {
            return Err(io::Error::from_raw_os_error(r));
        }
        Ok(())
    }
    #[cfg(not(target_os = "linux"))]
    {
        let _ = file;
        Err(io::Error::new(
            io::ErrorKind::Unsupported,
            "evicting one file from the page cache needs Linux",
        ))
    }
}

/// Asks `o` to open around the page cache (`O_DIRECT`) on Linux; other
/// platforms use [`no_cache`] once the file is open.
pub fn direct_flags(o: &mut OpenOptions) {
    #[cfg(target_os = "linux")]
    {
        use std::os::unix::fs::OpenOptionsExt;
        o.custom_flags(libc::O_DIRECT);
    }
    #[cfg(not(target_os = "linux"))]
    let _ = o;
}

/// Whether an open with [`direct_flags`] was refused because the file
/// system cannot read around the page cache (tmpfs): the caller opens
/// through it instead (reading whole pages, so the reads stay valid).
pub fn direct_refused(e: &io::Error) -> bool {
    #[cfg(target_os = "linux")]
    {
        e.raw_os_error() == Some(libc::EINVAL)
    }
    #[cfg(not(target_os = "linux"))]
    {
        let _ = e;
        false
    }
}

/// Reads of `file` bypass the page cache where the platform allows it
/// after opening (`F_NOCACHE` on macOS); a refusal leaves the cache in
/// use, which is still correct.
pub fn no_cache(file: &File) {
    #[cfg(target_os = "macos")]
    {
        use std::os::fd::AsRawFd;
        // SAFETY: fcntl on an open descriptor.
        unsafe {
            libc::fcntl(file.as_raw_fd(), libc::F_NOCACHE, 1);
        }
    }
    #[cfg(not(target_os = "macos"))]
    let _ = file;
}

/// Opens `file`, known by `path`, again with options `o`: a new open file
/// description of the same file however it was renamed or removed
/// meanwhile (Linux `/proc/self/fd`); by name elsewhere or without `/proc`.
pub fn reopen(file: &File, path: &Path, o: &OpenOptions) -> io::Result<File> {
    #[cfg(target_os = "linux")]
    {
        use std::os::fd::AsRawFd;
        match o.open(format!("/proc/self/fd/{}", file.as_raw_fd())) {
            Err(e) if e.kind() == io::ErrorKind::NotFound => o.open(path),
            r => r,
        }
    }
    #[cfg(not(target_os = "linux"))]
    {
        let _ = file;
        o.open(path)
    }
}

/// Fills `out` with one byte per page of the mapped `addr..addr+len`, bit
/// 0 set when the page is in memory (`mincore`). `Unsupported` where the
/// platform cannot tell.
///
/// # Safety
/// `addr..addr+len` must lie inside a live mapping of this process, and
/// `out` must hold at least one byte per page of it.
pub unsafe fn resident_pages(addr: *const u8, len: usize, out: &mut [u8]) -> io::Result<()> {
    #[cfg(unix)]
    {
        // SAFETY: the caller's promise.
        let r =
            unsafe { libc::mincore(addr as *mut libc::c_void, len, out.as_mut_ptr() as *mut _) };
        if r != 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(())
    }
    #[cfg(not(unix))]
    {
        let _ = (addr, len, out);
        Err(io::Error::new(
            io::ErrorKind::Unsupported,
            "page residency needs mincore (Unix)",
        ))
    }
}

/// Lets the kernel drop the mapped pages of `addr..addr+len` from this
/// process (`madvise(DONTNEED)`; they stay in the page cache). Nothing on
/// Windows, where the working set is trimmed by the system.
///
/// # Safety
/// `addr..addr+len` must be whole pages of a live read-only file mapping
/// of this process.
pub unsafe fn release_pages(addr: *const u8, len: usize) {
    #[cfg(unix)]
    // SAFETY: the caller's promise; on a read-only file mapping the next
    // access re-reads the unchanged file page.
    unsafe {
        libc::madvise(addr as *mut libc::c_void, len, libc::MADV_DONTNEED);
    }
    #[cfg(not(unix))]
    let _ = (addr, len);
}

/// Makes every file written under `root` durable: Linux `syncfs` (one
/// call for the whole file system), elsewhere an `fsync` of each file and
/// directory under `root`.
pub fn sync_tree(root: &Path) -> io::Result<()> {
    #[cfg(target_os = "linux")]
    {
        use std::os::fd::AsRawFd;
        let f = File::open(root)?;
        // SAFETY: plain syscall on an open descriptor.
        if unsafe { libc::syncfs(f.as_raw_fd()) } != 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(())
    }
    #[cfg(not(target_os = "linux"))]
    {
        sync_each(root)
    }
}

/// `fsync`s every file and directory under `root` (what [`sync_tree`]
/// does without `syncfs`).
#[cfg_attr(target_os = "linux", allow(dead_code))]
fn sync_each(root: &Path) -> io::Result<()> {
    for e in std::fs::read_dir(root)? {
        let e = e?;
        let t = e.file_type()?;
        if t.is_dir() {
            sync_each(&e.path())?;
        } else if t.is_file() {
            // Unix syncs a file opened for reading (a read-only file
            // too); Windows flushes only a handle that may write.
            let mut o = OpenOptions::new();
            o.read(true).write(cfg!(windows));
            o.open(e.path()).and_then(|f| f.sync_all())?;
        }
    }
    sync_dir(root)
}

/// `fsync`s a directory so that renames inside it are durable. Windows
/// cannot open a directory as a file, and commits a rename with it.
pub fn sync_dir(dir: &Path) -> io::Result<()> {
    #[cfg(unix)]
    {
        File::open(dir).and_then(|f| f.sync_all())
    }
    #[cfg(not(unix))]
    {
        let _ = dir;
        Ok(())
    }
}

/// Takes an exclusive lock on `file` without waiting (`flock` on Unix,
/// `LockFileEx` on Windows; the system releases it when the holder exits,
/// however it exits). `Ok(false)` when another holds it.
pub fn try_lock(file: &File) -> io::Result<bool> {
    match file.try_lock() {
        Ok(()) => Ok(true),
        Err(std::fs::TryLockError::WouldBlock) => Ok(false),
        Err(std::fs::TryLockError::Error(e)) => Err(e),
    }
}

/// Whether [`exchange_dirs`] is atomic on this platform.
pub const ATOMIC_EXCHANGE: bool = cfg!(any(target_os = "linux", target_os = "macos"));

/// Swaps the directories `a` and `b`: atomically on Linux
/// (`renameat2(RENAME_EXCHANGE)`) and macOS (`renamex_np(RENAME_SWAP)`),
/// so a reader sees one or the other, never neither, whenever the process
/// stops. Elsewhere (Windows) by three renames: `b` is missing for the
/// moment between the first two, a failure of the second puts `b` back,
/// and a process stopped between them leaves the old `b` at
/// `b.exchange-PID`.
pub fn exchange_dirs(a: &Path, b: &Path) -> io::Result<()> {
    #[cfg(any(target_os = "linux", target_os = "macos"))]
    {
        use std::os::unix::ffi::OsStrExt;
        let c = |p: &Path| {
            std::ffi::CString::new(p.as_os_str().as_bytes())
                .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "a NUL in a path"))
        };
        let (ca, cb) = (c(a)?, c(b)?);
        #[cfg(target_os = "linux")]
        // SAFETY: two valid NUL-terminated paths relative to the working
        // directory.
        let r = unsafe {
            libc::renameat2(
                libc::AT_FDCWD,
                ca.as_ptr(),
                libc::AT_FDCWD,
                cb.as_ptr(),
                libc::RENAME_EXCHANGE,
            )
        };
        #[cfg(target_os = "macos")]
        // SAFETY: two valid NUL-terminated paths.
        let r = unsafe { libc::renamex_np(ca.as_ptr(), cb.as_ptr(), libc::RENAME_SWAP) };
        if r != 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(())
    }
    #[cfg(not(any(target_os = "linux", target_os = "macos")))]
    {
        exchange_by_renames(a, b)
    }
}

/// [`exchange_dirs`] without an atomic exchange: `b` aside, `a` to `b`,
/// the old `b` to `a`; a failure of the second rename puts `b` back.
#[cfg_attr(any(target_os = "linux", target_os = "macos"), allow(dead_code))]
fn exchange_by_renames(a: &Path, b: &Path) -> io::Result<()> {
    if !a.is_dir() {
        return Err(io::Error::new(
            io::ErrorKind::NotFound,
            format!("{} is not a directory", a.display()),
        ));
    }
    let mut aside = b.as_os_str().to_owned();
    aside.push(format!(".exchange-{}", std::process::id()));
    let aside = std::path::PathBuf::from(aside);
    std::fs::rename(b, &aside)?;
    if let Err(e) = std::fs::rename(a, b) {
        let _ = std::fs::rename(&aside, b);
        return Err(e);
    }
    std::fs::rename(&aside, a)
}

/// The kernel's read-ahead window (bytes) for the block device holding
/// `path` (Linux: `/sys/dev/block/MAJ:MIN/queue/read_ahead_kb`, or the
/// parent disk's for a partition); `None` when it cannot be found (tmpfs,
/// overlay and network file systems, no sysfs, another system).
pub fn device_readahead(path: &Path) -> Option<u64> {
    #[cfg(target_os = "linux")]
    {
        use std::os::unix::fs::MetadataExt;
        let dev = std::fs::metadata(path).ok()?.dev();
        let (major, minor) = (libc::major(dev), libc::minor(dev));
        if major == 0 {
            return None;
        }
        let base = std::path::PathBuf::from(format!("/sys/dev/block/{major}:{minor}"));
        [
            base.join("queue/read_ahead_kb"),
            base.join("../queue/read_ahead_kb"),
        ]
        .iter()
        .find_map(|p| std::fs::read_to_string(p).ok())
        .and_then(|t| t.trim().parse::<u64>().ok())
        .map(|kb| kb * 1024)
    }
    #[cfg(not(target_os = "linux"))]
    {
        let _ = path;
        None
    }
}

/// Whether a process with this id is running (or may be: one the
/// system will not tell about counts as running). Stale files of a
/// writer that is gone are removed only when this says no.
pub fn process_alive(pid: u32) -> bool {
    #[cfg(target_os = "linux")]
    {
        Path::new(&format!("/proc/{pid}")).exists()
    }
    #[cfg(all(unix, not(target_os = "linux")))]
    {
        let Ok(pid) = libc::pid_t::try_from(pid) else {
            return false;
        };
        // SAFETY: signal 0 only checks that the process exists.
        let sent = unsafe { libc::kill(pid, 0) } == 0;
        sent || io::Error::last_os_error().raw_os_error() == Some(libc::EPERM)
    }
    #[cfg(windows)]
    {
        use windows_sys::Win32::Foundation::{CloseHandle, GetLastError, ERROR_ACCESS_DENIED};
        use windows_sys::Win32::System::Threading::{
            GetExitCodeProcess, OpenProcess, PROCESS_QUERY_LIMITED_INFORMATION,
        };
        const STILL_ACTIVE: u32 = 259;
        // SAFETY: plain calls with a handle that is closed before return.
        unsafe {
            let h = OpenProcess(PROCESS_QUERY_LIMITED_INFORMATION, 0, pid);
            if h.is_null() {
                return GetLastError() == ERROR_ACCESS_DENIED;
            }
            let mut code = 0u32;
            let ok = GetExitCodeProcess(h, &mut code) != 0;
            CloseHandle(h);
            !ok || code == STILL_ACTIVE
        }
    }
}

/// Writes every dirty page of every file system to disk (`sync`); nothing
/// on Windows.
pub fn sync_all_filesystems() {
    #[cfg(unix)]
    // SAFETY: sync has no preconditions.
    unsafe {
        libc::sync()
    };
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn positional_reads_and_writes() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("f");
        let f = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(true)
            .open(&p)
            .unwrap();
        write_all_at(&f, b"hello world", 0).unwrap();
        write_all_at(&f, b"W", 6).unwrap();
        let mut b = [0u8; 5];
        read_exact_at(&f, &mut b, 6).unwrap();
        assert_eq!(&b, b"World");
        // At the end: zero bytes, not an error; past it: a short read.
        assert_eq!(read_at(&f, &mut b, 11).unwrap(), 0);
        assert_eq!(
            read_exact_at(&f, &mut b, 8).unwrap_err().kind(),
            io::ErrorKind::UnexpectedEof
        );
    }

    #[test]
    fn exchange_swaps_two_directories() {
        check_exchange(exchange_dirs);
        // The other platforms' way, checked here too.
        check_exchange(exchange_by_renames);
    }

    fn check_exchange(exchange_dirs: fn(&Path, &Path) -> io::Result<()>) {
        let dir = tempfile::tempdir().unwrap();
        let (a, b) = (dir.path().join("a"), dir.path().join("b"));
        std::fs::create_dir(&a).unwrap();
        std::fs::create_dir(&b).unwrap();
        std::fs::write(a.join("x"), b"from a").unwrap();
        std::fs::write(b.join("y"), b"from b").unwrap();
        exchange_dirs(&a, &b).unwrap();
        assert_eq!(std::fs::read(b.join("x")).unwrap(), b"from a");
        assert_eq!(std::fs::read(a.join("y")).unwrap(), b"from b");
        assert!(!a.join("x").exists() && !b.join("y").exists());
        // A missing side is an error that changes nothing.
        assert!(exchange_dirs(&dir.path().join("none"), &b).is_err());
        assert_eq!(std::fs::read(b.join("x")).unwrap(), b"from a");
    }

    #[test]
    fn a_held_lock_is_refused_until_released() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("lock");
        let f1 = File::create(&p).unwrap();
        let f2 = OpenOptions::new().write(true).open(&p).unwrap();
        assert!(try_lock(&f1).unwrap());
        assert!(!try_lock(&f2).unwrap());
        drop(f1);
        assert!(try_lock(&f2).unwrap());
    }

    #[test]
    fn this_process_is_alive_and_a_finished_one_is_not() {
        assert!(process_alive(std::process::id()));
        let mut c = std::process::Command::new(std::env::current_exe().unwrap())
            .arg("--list")
            .stdout(std::process::Stdio::null())
            .spawn()
            .unwrap();
        let pid = c.id();
        c.wait().unwrap();
        assert!(!process_alive(pid));
    }

    #[test]
    fn sync_tree_and_dir_succeed_on_a_written_tree() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("vars")).unwrap();
        std::fs::write(dir.path().join("vars/a"), b"1").unwrap();
        sync_tree(dir.path()).unwrap();
        sync_each(dir.path()).unwrap();
        sync_dir(dir.path()).unwrap();
        assert_eq!(std::fs::read(dir.path().join("vars/a")).unwrap(), b"1");
    }
}
