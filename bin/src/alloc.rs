//! The process's allocator: jemalloc, whose size classes give tokio's 128-byte-aligned task cells and socket
//! registrations exactly their size (glibc's `memalign` takes about 200 bytes more for each, two per connection:
//! BENCHMARKS.md), with its unused pages handed back to the system on the shard's tick after a peak.

use std::ffi::CStr;

#[global_allocator]
static JEMALLOC: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

/// jemalloc's options, read at its start: a freed page is handed back (`MADV_DONTNEED`) when it decays or is
/// purged, not first made lazily freeable (`MADV_FREE`, whose pages stay in the resident set).
#[allow(non_upper_case_globals)]
#[export_name = "_rjem_malloc_conf"]
pub static _rjem_malloc_conf: &[u8] = b"muzzy_decay_ms:0\0";

/// Hands the calling thread's arena's unused dirty pages back to the system (jemalloc would after its decay time,
/// but only when that arena allocates again).
fn purge_own_arena() {
    let mut arena: libc::c_uint = 0;
    let mut len = std::mem::size_of::<libc::c_uint>();
    // SAFETY: `thread.arena` reads an unsigned int into `arena`, whose size `len` says.
    let read = unsafe {
        tikv_jemalloc_sys::mallctl(
            c"thread.arena".as_ptr(),
            (&mut arena as *mut libc::c_uint).cast(),
            &mut len,
            std::ptr::null_mut(),
            0,
        )
    };
    if read != 0 {
        return;
    }
    let name = format!("arena.{arena}.purge\0");
    let Ok(name) = CStr::from_bytes_with_nul(name.as_bytes()) else {
        return;
    };
    // SAFETY: `arena.<i>.purge` reads and writes nothing.
    unsafe {
        tikv_jemalloc_sys::mallctl(
            name.as_ptr(),
            std::ptr::null_mut(),
            std::ptr::null_mut(),
            std::ptr::null_mut(),
            0,
        );
    }
}

/// Tells the engine how to hand free pages back (before any shard starts).
pub fn install() {
    corelb_engine::shard::set_page_return(purge_own_arena);
}
