//! Memory system calls: anonymous mmap, munmap, mprotect, madvise (brk is in `memory.rs`).

use super::guest::Guest;
use super::memory::{page_up, Stale, MMAP_MIN_ADDR, PROT_EXEC, PROT_READ, PROT_WRITE, TASK_SIZE};
use super::syscall::errno::*;
use super::syscall::{err, SysResult};
use lockstep_interp::mem::PAGE_SIZE;

const MAP_SHARED: u64 = 0x01;
const MAP_PRIVATE: u64 = 0x02;
const MAP_SHARED_VALIDATE: u64 = 0x03;
const MAP_TYPE: u64 = 0x0f;
const MAP_FIXED: u64 = 0x10;
const MAP_ANONYMOUS: u64 = 0x20;
const MAP_32BIT: u64 = 0x40;
const MAP_FIXED_NOREPLACE: u64 = 0x10_0000;
const PROT_GROWS: u64 = 0x0300_0000;

fn check_prot(prot: u64) -> Result<u32, i64> {
    if prot & !(7 | PROT_GROWS) != 0 {
        return Err(EINVAL);
    }
    Ok((prot & 7) as u32 & (PROT_READ | PROT_WRITE | PROT_EXEC))
}

/// mmap: anonymous mappings only (private, or shared, which is the same without fork).
/// File mappings fail: EBADF for a descriptor we do not have, ENODEV for stdio.
pub(super) fn sys_mmap(g: &mut Guest, a: [u64; 6]) -> SysResult {
    let (addr, len, prot, flags, fd, off) = (a[0], a[1], a[2], a[3], a[4], a[5]);
    if off & (PAGE_SIZE - 1) != 0 || len == 0 {
        return err(EINVAL);
    }
    let prot = match check_prot(prot) {
        Ok(p) => p,
        Err(e) => return err(e),
    };
    if !matches!(
        flags & MAP_TYPE,
        MAP_SHARED | MAP_PRIVATE | MAP_SHARED_VALIDATE
    ) {
        return err(EINVAL);
    }
    if flags & MAP_ANONYMOUS == 0 {
        return if fd <= 2 { err(ENODEV) } else { err(EBADF) };
    }
    let Some(len) = page_up(len).filter(|&l| l <= TASK_SIZE) else {
        return err(ENOMEM);
    };
    let start = if flags & (MAP_FIXED | MAP_FIXED_NOREPLACE) != 0 {
        if addr & (PAGE_SIZE - 1) != 0 {
            return err(EINVAL);
        }
        match addr.checked_add(len) {
            Some(end) if end <= TASK_SIZE => {}
            _ => return err(ENOMEM),
        }
        if addr < MMAP_MIN_ADDR {
            return err(EPERM);
        }
        if flags & MAP_FIXED == 0 && !g.mm.is_free(addr, addr + len) {
            return err(EEXIST);
        }
        addr
    } else {
        match g.mm.find_free(addr, len, flags & MAP_32BIT != 0) {
            Some(a) => a,
            None => return err(ENOMEM),
        }
    };
    g.mm.map(&mut g.ram, start, start + len, prot);
    Ok(start)
}

/// Drop the TLB's translations of the pages whose mapping a system call changed
/// (`AddressSpace::take_stale`: populated pages whose PTE was cleared or rewritten), as a
/// kernel's INVLPG would; when there were too many to list, those of the range they lie in
/// (`Tlb::invalidate_range`: every read and write translation, and the execute ones in the
/// range). Every other page keeps its translation: a growing heap (brk) or a new mapping
/// costs no TLB refills, and unmapping data keeps the execute translations (and with them
/// the execute epochs that compiled code's page checks go by).
pub(super) fn drop_stale_translations(g: &mut Guest) {
    match g.mm.take_stale() {
        Stale::Pages(pages) => pages.into_iter().for_each(|p| g.cpu.tlb.invalidate_page(p)),
        Stale::Range { start, end } => g.cpu.tlb.invalidate_range(start, end),
    }
}

/// A page-aligned range `[addr, addr+len)` within user space, or EINVAL.
fn user_range(addr: u64, len: u64) -> Result<(u64, u64), i64> {
    if addr & (PAGE_SIZE - 1) != 0 {
        return Err(EINVAL);
    }
    let end = page_up(len)
        .and_then(|l| addr.checked_add(l))
        .filter(|&e| e <= TASK_SIZE)
        .ok_or(EINVAL)?;
    Ok((addr, end))
}

pub(super) fn sys_munmap(g: &mut Guest, addr: u64, len: u64) -> SysResult {
    if len == 0 {
        return err(EINVAL);
    }
    let (s, e) = match user_range(addr, len) {
        Ok(r) => r,
        Err(x) => return err(x),
    };
    g.mm.unmap(&mut g.ram, s, e);
    Ok(0)
}

pub(super) fn sys_mprotect(g: &mut Guest, addr: u64, len: u64, prot: u64) -> SysResult {
    let prot = match check_prot(prot) {
        Ok(p) => p,
        Err(e) => return err(e),
    };
    let (s, e) = match user_range(addr, len) {
        Ok(r) => r,
        Err(x) => return err(if len > TASK_SIZE { ENOMEM } else { x }),
    };
    if s == e {
        return Ok(0);
    }
    if !g.mm.protect(&mut g.ram, s, e, prot) {
        return err(ENOMEM);
    }
    Ok(0)
}

/// madvise: MADV_DONTNEED drops the pages (they read back as zero, as on Linux for private
/// anonymous memory); every other advice is accepted and ignored.
pub(super) fn sys_madvise(g: &mut Guest, addr: u64, len: u64, advice: u64) -> SysResult {
    const MADV_DONTNEED: u64 = 4;
    let (s, e) = match user_range(addr, len) {
        Ok(r) => r,
        Err(x) => return err(x),
    };
    if s == e {
        return Ok(0);
    }
    if !g.mm.is_mapped(s, e) {
        return err(ENOMEM);
    }
    if advice == MADV_DONTNEED {
        g.mm.discard(&mut g.ram, s, e);
    }
    Ok(0)
}
