//! A fault-injection library for the end-to-end tests, loaded into a server with
//! `LD_PRELOAD`: while the file named by `ZOORAFT_FAULT_EIO_FILE` exists, `fsync` and
//! `fdatasync` fail with `EIO` (the disk lost the data it was asked to make durable);
//! otherwise they are the C library's own. The tests create and remove the file to turn
//! the fault on and off in a running process (`tests/tests/disk/disk_faults.rs`).
//!
//! Test-only: never shipped or loaded by the server itself.

use std::ffi::{c_int, CStr, CString};
use std::sync::OnceLock;

type SyncFn = unsafe extern "C" fn(c_int) -> c_int;

/// The trigger file, read once from the environment.
fn trigger() -> Option<&'static CStr> {
    static TRIGGER: OnceLock<Option<CString>> = OnceLock::new();
    TRIGGER
        .get_or_init(|| {
            std::env::var_os("ZOORAFT_FAULT_EIO_FILE").and_then(|p| {
                use std::os::unix::ffi::OsStrExt;
                CString::new(p.as_bytes()).ok()
            })
        })
        .as_deref()
}

fn armed() -> bool {
    // SAFETY: access(2) on a NUL-terminated path; it only reads the string.
    trigger().is_some_and(|p| unsafe { libc::access(p.as_ptr(), libc::F_OK) } == 0)
}

/// The next definition of `name` after this library (the C library's).
fn real(name: &CStr) -> Option<SyncFn> {
    // SAFETY: dlsym with RTLD_NEXT and a NUL-terminated name; a non-null result is the
    // address of a function with the C signature `int f(int)` (fsync, fdatasync).
    unsafe {
        let f = libc::dlsym(libc::RTLD_NEXT, name.as_ptr());
        (!f.is_null()).then(|| std::mem::transmute::<*mut libc::c_void, SyncFn>(f))
    }
}

fn fail_or(name: &CStr, fd: c_int) -> c_int {
    if armed() {
        // SAFETY: errno is this thread's own.
        unsafe { *libc::__errno_location() = libc::EIO };
        return -1;
    }
    match real(name) {
        // SAFETY: the C library's function, called with the caller's descriptor.
        Some(f) => unsafe { f(fd) },
        None => {
            // SAFETY: as above.
            unsafe { *libc::__errno_location() = libc::ENOSYS };
            -1
        }
    }
}

/// `fsync(2)`, failing with EIO while armed.
#[no_mangle]
pub extern "C" fn fsync(fd: c_int) -> c_int {
    fail_or(c"fsync", fd)
}

/// `fdatasync(2)`, failing with EIO while armed.
#[no_mangle]
pub extern "C" fn fdatasync(fd: c_int) -> c_int {
    fail_or(c"fdatasync", fd)
}
