//! The guest process: its vCPU, RAM and address space, and checked access to guest memory
//! for system calls (through the page tables with user permissions, faulting pages in).

use super::memory::{page_down, AddressSpace, OutOfMemory};
use lockstep_interp::fault::Fault;
use lockstep_interp::mem::{GuestRam, NullBus, PAGE_SIZE};
use lockstep_interp::mmu::Access;
use lockstep_interp::state::StateHasher;
use lockstep_interp::{Cpu, Ctx};

/// Errors of guest-memory access from a system call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MemFault {
    /// A bad user pointer: the system call returns -EFAULT.
    Fault,
    /// Guest physical memory is exhausted: the process is killed.
    Oom,
}

impl From<OutOfMemory> for MemFault {
    fn from(_: OutOfMemory) -> Self {
        MemFault::Oom
    }
}

/// A single-threaded guest process.
pub struct Guest {
    pub cpu: Cpu,
    pub ram: GuestRam,
    pub mm: AddressSpace,
}

impl Guest {
    /// Run `f` on a context over this guest; not-present page faults inside mappings are
    /// served (the page is populated) and `f` is retried. `f` must not have side effects
    /// before its last fallible step (Ctx's accessors translate before they copy).
    fn with_ctx<R>(
        &mut self,
        mut f: impl FnMut(&mut Ctx) -> Result<R, Fault>,
    ) -> Result<R, MemFault> {
        // Each retry populates one more page; a call touches at most a few pages.
        for _ in 0..8 {
            let mut bus = NullBus;
            let r = {
                let mut ctx = Ctx::new(&mut self.cpu, &mut self.ram, &mut bus);
                f(&mut ctx)
            };
            match r {
                Ok(v) => return Ok(v),
                Err(Fault::PageFault { addr, code }) => {
                    if !self.mm.fault_in(&mut self.ram, addr, code)? {
                        return Err(MemFault::Fault);
                    }
                }
                Err(_) => return Err(MemFault::Fault),
            }
        }
        Err(MemFault::Fault)
    }

    /// Check that `[va, va+len)` is accessible for `access` (populating pages), without
    /// touching any byte.
    pub fn probe(&mut self, va: u64, len: u64, access: Access) -> Result<(), MemFault> {
        if len == 0 {
            return Ok(());
        }
        let last = va.checked_add(len - 1).ok_or(MemFault::Fault)?;
        let mut page = page_down(va);
        loop {
            let at = page.max(va);
            self.with_ctx(|c| c.translate(at, access))?;
            if page >= page_down(last) {
                return Ok(());
            }
            page += PAGE_SIZE;
        }
    }

    /// Read `len` bytes at `va`.
    pub fn read_mem(&mut self, va: u64, len: usize) -> Result<Vec<u8>, MemFault> {
        self.probe(va, len as u64, Access::Read)?;
        let mut out = vec![0u8; len];
        self.read_into(va, &mut out)?;
        Ok(out)
    }

    /// Read into `out` from `va`, page-sized pieces at a time.
    pub fn read_into(&mut self, va: u64, out: &mut [u8]) -> Result<(), MemFault> {
        let mut done = 0usize;
        while done < out.len() {
            let a = va.wrapping_add(done as u64);
            let n = ((PAGE_SIZE - (a & 0xfff)) as usize).min(out.len() - done);
            let piece = &mut out[done..done + n];
            self.with_ctx(|c| c.read_bytes(a, piece))?;
            done += n;
        }
        Ok(())
    }

    /// Write `data` at `va`. The whole range is checked first, so a bad pointer writes nothing.
    pub fn write_mem(&mut self, va: u64, data: &[u8]) -> Result<(), MemFault> {
        self.probe(va, data.len() as u64, Access::Write)?;
        let mut done = 0usize;
        while done < data.len() {
            let a = va.wrapping_add(done as u64);
            let n = ((PAGE_SIZE - (a & 0xfff)) as usize).min(data.len() - done);
            let piece = &data[done..done + n];
            self.with_ctx(|c| c.write_bytes(a, piece))?;
            done += n;
        }
        // The interpreter is between blocks: a syscall write into code pages has already
        // retired the affected blocks through the page versions.
        self.cpu.smc = false;
        Ok(())
    }

    pub fn read_u64(&mut self, va: u64) -> Result<u64, MemFault> {
        let b = self.read_mem(va, 8)?;
        let mut a = [0u8; 8];
        a.copy_from_slice(&b);
        Ok(u64::from_le_bytes(a))
    }

    pub fn write_u64(&mut self, va: u64, v: u64) -> Result<(), MemFault> {
        self.write_mem(va, &v.to_le_bytes())
    }

    pub fn read_u32(&mut self, va: u64) -> Result<u32, MemFault> {
        let b = self.read_mem(va, 4)?;
        Ok(u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
    }

    /// Read a NUL-terminated string of at most `max` bytes (without the NUL). `None` inside
    /// the result means the string was longer than `max`.
    pub fn read_cstr(&mut self, va: u64, max: usize) -> Result<Option<Vec<u8>>, MemFault> {
        let mut out = Vec::new();
        let mut a = va;
        while out.len() <= max {
            let n = (PAGE_SIZE - (a & 0xfff)) as usize;
            let mut buf = vec![0u8; n];
            self.probe(a, n as u64, Access::Read)?;
            self.read_into(a, &mut buf)?;
            if let Some(z) = buf.iter().position(|&b| b == 0) {
                out.extend_from_slice(&buf[..z]);
                return Ok((out.len() <= max).then_some(out));
            }
            out.extend_from_slice(&buf);
            a = a.checked_add(n as u64).ok_or(MemFault::Fault)?;
        }
        Ok(None)
    }

    /// The run's state hash: the CPU's state hash, then every populated user page (address
    /// and the page's digest, `state::block_digest`) in ascending address order, all through
    /// 64-bit FNV-1a.
    pub fn state_hash(&self) -> u64 {
        let mut h = StateHasher::default();
        h.u64(self.cpu.state_hash());
        let bytes = self.ram.bytes();
        for (va, frame) in self.mm.pages() {
            h.u64(va);
            h.block(&bytes[frame as usize..(frame + PAGE_SIZE) as usize]);
        }
        h.finish()
    }
}
