//! A znode's variable part (its kind tag, owner, name and data) as one immutable block
//! behind a thin, atomically counted pointer.
//!
//! `Arc<[u8]>` would do the same job for 24 more bytes per znode: its pointer is fat (16
//! bytes in the slot, the length beside the address) and its block starts with two 8-byte
//! counters (strong and weak). Here the slot holds 8 bytes and the block starts with an
//! 8-byte header (a 4-byte count, a 4-byte length); for the usual 100-byte znode that takes
//! the block from glibc's 144-byte size class down to 128. The count is what lets a
//! snapshot's copy of a chunk share the blocks of the live one (copy-on-write of the slots,
//! never of the bytes).

use std::alloc::{alloc, dealloc, handle_alloc_error, Layout};
use std::ptr::NonNull;
use std::sync::atomic::{fence, AtomicU32, Ordering};

/// The block's header; the bytes follow it.
#[repr(C)]
struct Header {
    refs: AtomicU32,
    len: u32,
}

const HEADER: usize = std::mem::size_of::<Header>();

/// More references than this to one block means a leak of clones: abort, as `Arc` does.
const MAX_REFS: u32 = i32::MAX as u32;

/// Immutable bytes shared by reference count (a thin pointer: 8 bytes).
pub struct Blob {
    ptr: NonNull<Header>,
}

// SAFETY: the bytes are never written after `new`; the count is atomic. Sharing a `Blob`
// between threads is sharing immutable memory, as for `Arc<[u8]>`.
unsafe impl Send for Blob {}
// SAFETY: as above: `&Blob` only reads the bytes and changes the count atomically.
unsafe impl Sync for Blob {}

fn layout(len: usize) -> Layout {
    // (A block is at most 8 + u32::MAX bytes: always a valid layout on 64-bit targets.)
    Layout::from_size_align(HEADER + len, std::mem::align_of::<Header>())
        .unwrap_or_else(|_| Layout::new::<Header>())
}

impl Blob {
    /// One block holding `parts` one after another. The whole is cut at `u32::MAX` bytes
    /// (no znode comes near: a request or a snapshot record is at most 2 GiB).
    pub fn new(parts: &[&[u8]]) -> Blob {
        let total: usize = parts.iter().map(|p| p.len()).sum();
        let len = total.min(u32::MAX as usize);
        let layout = layout(len);
        // SAFETY: the layout's size is at least the header's, never zero.
        let raw = unsafe { alloc(layout) };
        let Some(ptr) = NonNull::new(raw.cast::<Header>()) else {
            handle_alloc_error(layout)
        };
        // SAFETY: `raw` is a fresh block of `HEADER + len` bytes aligned for `Header`: the
        // header is written in place, then the parts into the `len` bytes after it, never
        // past them.
        unsafe {
            ptr.as_ptr().write(Header {
                refs: AtomicU32::new(1),
                len: len as u32,
            });
            let mut at = raw.add(HEADER);
            let mut room = len;
            for part in parts {
                let n = part.len().min(room);
                std::ptr::copy_nonoverlapping(part.as_ptr(), at, n);
                at = at.add(n);
                room -= n;
            }
        }
        Blob { ptr }
    }

    fn header(&self) -> &Header {
        // SAFETY: the block lives while this reference to it does.
        unsafe { self.ptr.as_ref() }
    }

    pub fn bytes(&self) -> &[u8] {
        let len = self.header().len as usize;
        // SAFETY: `new` wrote `len` bytes after the header; they are never changed and live
        // as long as `self`.
        unsafe { std::slice::from_raw_parts(self.ptr.as_ptr().cast::<u8>().add(HEADER), len) }
    }
}

impl Clone for Blob {
    fn clone(&self) -> Blob {
        // Relaxed, as `Arc::clone`: a new reference comes from an existing one, which keeps
        // the block alive meanwhile.
        if self.header().refs.fetch_add(1, Ordering::Relaxed) >= MAX_REFS {
            std::process::abort();
        }
        Blob { ptr: self.ptr }
    }
}

impl Drop for Blob {
    fn drop(&mut self) {
        if self.header().refs.fetch_sub(1, Ordering::Release) != 1 {
            return;
        }
        // Every other reference's use of the bytes happens before the block is freed.
        fence(Ordering::Acquire);
        let layout = layout(self.header().len as usize);
        // SAFETY: the last reference: the block came from `alloc` with this layout.
        unsafe { dealloc(self.ptr.as_ptr().cast::<u8>(), layout) };
    }
}

impl std::fmt::Debug for Blob {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Blob({} bytes)", self.header().len)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parts_joined_shared_and_freed() {
        let a = Blob::new(&[b"ab", b"", b"cde"]);
        assert_eq!(a.bytes(), b"abcde");
        let b = a.clone();
        drop(a);
        assert_eq!(b.bytes(), b"abcde");
        let threads: Vec<_> = (0..4)
            .map(|_| {
                let c = b.clone();
                std::thread::spawn(move || c.bytes().len())
            })
            .collect();
        for t in threads {
            assert_eq!(t.join().ok(), Some(5));
        }
        assert_eq!(b.header().refs.load(Ordering::Relaxed), 1);
        assert_eq!(Blob::new(&[]).bytes(), b"");
        assert_eq!(std::mem::size_of::<Option<Blob>>(), 8);
    }
}
