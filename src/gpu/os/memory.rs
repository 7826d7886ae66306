//! This process's memory as the C library and the kernel count it: the page size, glibc's
//! heap counters (`mallinfo2`) and its trim of free pages (`malloc_trim`).

/// The kernel's page size in bytes (`sysconf(_SC_PAGESIZE)`), 1 if it will not say.
pub fn page_size() -> u64 {
    // SAFETY: a plain query with no pointer.
    let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    page.max(1) as u64
}

/// Hands glibc's free heap pages back to the kernel (a no-op on another C library).
pub fn trim_heap() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: malloc_trim only releases free memory of glibc's own heap.
    unsafe {
        libc::malloc_trim(0);
    }
}

/// Bytes this process's heap holds allocated: glibc's `mallinfo2`'s arena and mmapped bytes
/// in use, looked up at run time (glibc 2.33 and later have it; `None` without it, or on
/// another C library).
pub fn heap_in_use() -> Option<u64> {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    {
        type Mallinfo2 = unsafe extern "C" fn() -> libc::mallinfo2;
        // Looked up once per process, not at every sample.
        static MALLINFO2: std::sync::OnceLock<Option<Mallinfo2>> = std::sync::OnceLock::new();
        let mallinfo2 = (*MALLINFO2.get_or_init(|| {
            // SAFETY: dlsym with RTLD_DEFAULT and a NUL-terminated name only looks the symbol
            // up; the pointer, when not null, is glibc's mallinfo2, whose signature this is.
            let f = unsafe { libc::dlsym(libc::RTLD_DEFAULT, c"mallinfo2".as_ptr()) };
            (!f.is_null())
                .then(|| unsafe { std::mem::transmute::<*mut libc::c_void, Mallinfo2>(f) })
        }))?;
        // SAFETY: a query of the allocator's counters.
        let info = unsafe { mallinfo2() };
        Some((info.uordblks + info.hblkhd) as u64)
    }
    #[cfg(not(all(target_os = "linux", target_env = "gnu")))]
    None
}
