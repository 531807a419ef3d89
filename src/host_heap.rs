//! The host process's own heap in transparent huge pages (Linux, glibc), and the switch
//! for huge pages under user mode's guest RAM too (`GuestRam::prefer_huge_pages`): host-side
//! only, nothing the guest can observe depends on either.
//!
//! A short run faults in thousands of fresh heap pages for the JIT's work (Cranelift's and
//! regalloc2's arenas, the translation tables, decoded blocks): `recursion` took 2,880 page
//! faults, ~2 µs each in a VM, where qemu-x86_64 takes 1,257. glibc serves those allocations
//! from its main heap (below its mmap threshold) or from fresh mappings (above it); neither
//! is in huge pages unless asked for (`transparent_hugepage/enabled` is `madvise` on most
//! distributions). [`prefer_huge_pages`] grows the main heap by [`RESERVE`] at start, marks
//! that range `MADV_HUGEPAGE` and gives it back to the allocator, which then carves later
//! allocations out of it: the same run takes ~800 faults, 5% less time (docs/jit.md,
//! "Host memory"). The heap below the reserve's first 2 MiB boundary is held by a block never
//! freed, so that allocations do not start in its 4 KiB pages.

/// How much of the heap is reserved (address space only: a 2 MiB page is backed when first
/// touched). 30 MiB, below glibc's largest mmap threshold (32 MiB on 64-bit hosts), so that
/// the allocation comes from the heap rather than from a mapping of its own.
pub const RESERVE: usize = 30 << 20;

const HUGE_PAGE: usize = 2 << 20;

/// What the held head block leaves below the first huge page: room for glibc's chunk
/// headers (the held block's rounding and the next chunk's header), so that the next chunk's
/// memory starts at or just below the boundary rather than past it.
const HEAD_SLACK: usize = 64;

/// Whether huge pages are wanted: unless `LOCKSTEP_HUGE_PAGES=0` (for measuring their
/// effect).
pub fn huge_pages_wanted() -> bool {
    std::env::var_os("LOCKSTEP_HUGE_PAGES").is_none_or(|v| v != "0")
}

/// Prepare the heap as above; call once, first thing in `main`, before other threads exist.
/// Does nothing when [`huge_pages_wanted`] says no. Without transparent huge pages (or outside
/// glibc) the advice is ignored and nothing changes but the thresholds below.
pub fn prefer_huge_pages() {
    if !huge_pages_wanted() {
        return;
    }
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: `mallopt`, `malloc`, `madvise` and `free` are called as documented: the reserve
    // block is freed exactly once (the head block below is never freed, deliberately), and
    // `madvise` only advises on whole pages inside the reserve (it does not change the
    // contents or the mapping's protection). No other thread runs yet.
    unsafe {
        // Allocations up to 32 MiB from the heap (not from mappings of their own, which would
        // be fresh 4 KiB pages each time), and up to 64 MiB of freed memory at the top of the
        // heap kept rather than returned to the system.
        libc::mallopt(libc::M_MMAP_THRESHOLD, 32 << 20);
        libc::mallopt(libc::M_TRIM_THRESHOLD, 64 << 20);
        let p = libc::malloc(RESERVE);
        if p.is_null() {
            return;
        }
        let start = (p as usize).next_multiple_of(HUGE_PAGE);
        let end = (p as usize + RESERVE) & !(HUGE_PAGE - 1);
        if end > start {
            libc::madvise(start as *mut libc::c_void, end - start, libc::MADV_HUGEPAGE);
        }
        libc::free(p);
        // The heap below `start` is outside the advised range (and at the heap's start it
        // could not be a huge page anyway: its 2 MiB page would reach below the heap's first
        // byte), yet the allocator would carve the next allocations out of it: the guest image's buffer, the TLBs, the JIT's tables — two thirds of a short
        // run's page faults went there, 4 KiB each. Hold it (never freed: address space,
        // touched only at the block's header) so that they come from the huge pages. `p` was
        // the top of the heap, so the freed block went back to the top and the next
        // allocation starts at `p` again.
        let head = start - p as usize;
        if end > start && head > HEAD_SLACK {
            // (`black_box`: an allocation nothing reads is one LLVM may remove.)
            std::hint::black_box(libc::malloc(head - HEAD_SLACK));
        }
    }
}
