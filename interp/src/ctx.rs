//! The execution context handed to every instruction: CPU, RAM and bus, with linear-memory access
//! (TLB fast path, page walk, MMIO, self-modifying-code detection) and stack helpers.

use crate::cpu::Cpu;
use crate::fault::Fault;
use crate::mem::{Bus, GuestRam, PAGE_SIZE};
use crate::mmu::{self, Access, Priv};
use crate::state::{reg, sreg};

/// Everything one instruction can touch.
pub struct Ctx<'a> {
    pub cpu: &'a mut Cpu,
    pub ram: &'a mut GuestRam,
    pub bus: &'a mut dyn Bus,
    /// The current memory access is SS-relative (explicit operand with an RSP/RBP base, or a
    /// stack push/pop): a non-canonical address then raises #SS(0) instead of #GP(0). Set by
    /// `effective_addr` and the stack helpers, cleared by the engine before each instruction.
    pub ss_operand: bool,
}

impl<'a> Ctx<'a> {
    pub fn new(cpu: &'a mut Cpu, ram: &'a mut GuestRam, bus: &'a mut dyn Bus) -> Self {
        // The TLB's entries hold host addresses into this RAM (see `Tlb::set_host_base`).
        cpu.tlb.set_host_base(ram.bytes().as_ptr() as u64);
        Ctx {
            cpu,
            ram,
            bus,
            ss_operand: false,
        }
    }

    /// Make the TLB's current set the one for the current privilege (CPL 3 or not); called
    /// before any TLB lookup path (here and at each block lookup).
    #[inline(always)]
    pub fn sync_tlb_privilege(&mut self) {
        let user = self.cpu.state.cpl() == 3;
        self.cpu.tlb.set_user(user);
    }

    /// Translate a linear address for `access` at the current privilege, filling the TLB.
    /// Returns the physical address.
    #[inline]
    pub fn translate(&mut self, lin: u64, access: Access) -> Result<u64, Fault> {
        self.sync_tlb_privilege();
        if let Some(p) = self.cpu.tlb.lookup(lin, access) {
            return Ok(p | (lin & 0xfff));
        }
        let prv = if self.cpu.state.cpl() == 3 {
            Priv::User
        } else {
            Priv::Supervisor
        };
        self.translate_slow(lin, access, prv)
    }

    /// Translate as an implicit supervisor access, e.g. descriptor-table reads (SMAP applies
    /// whatever RFLAGS.AC says).
    pub fn translate_supervisor(&mut self, lin: u64, access: Access) -> Result<u64, Fault> {
        self.translate_slow(lin, access, Priv::Implicit)
    }

    #[inline(never)]
    fn translate_slow(&mut self, lin: u64, access: Access, prv: Priv) -> Result<u64, Fault> {
        let st = &self.cpu.state;
        if st.efer & crate::state::ctl::EFER_LMA != 0 && !mmu::is_canonical(lin) {
            return Err(if self.ss_operand {
                Fault::StackFault(0)
            } else {
                Fault::GP0
            });
        }
        self.sync_tlb_privilege();
        let cpu = &mut *self.cpu;
        let t = mmu::translate(self.ram, &cpu.state, &mut cpu.tlb, lin, access, prv)?;
        // Implicit accesses at CPL 3 are supervisor accesses: not for the user set.
        let cacheable = t.cacheable
            && !(prv == Priv::Implicit && cpu.state.cpl() == 3)
            && self.ram.contains(t.phys_page, PAGE_SIZE);
        if cacheable && !(access == Access::Write && self.ram.is_code_page(t.phys_page >> 12)) {
            if access == Access::Write {
                // `--verify` (write log on): stores that hit this entry are not logged one by
                // one (the JIT's inline ones cannot be), so the whole page's old bytes are,
                // first. Nothing otherwise.
                self.ram.log_page(t.phys_page);
            }
            cpu.tlb.insert_translation(lin, access, &t);
        }
        Ok(t.phys_page | (lin & 0xfff))
    }

    /// Read `size` bytes (1, 2, 4 or 8) at a linear address, little-endian.
    #[inline]
    pub fn read(&mut self, lin: u64, size: u8) -> Result<u64, Fault> {
        match size {
            1 => self.read_n::<1>(lin),
            2 => self.read_n::<2>(lin),
            4 => self.read_n::<4>(lin),
            8 => self.read_n::<8>(lin),
            _ => self.read_cold(lin, size.min(8)),
        }
    }

    /// Read `S` bytes (1, 2, 4 or 8) at a linear address: the TLB-hit, in-page case inline,
    /// everything else out of line.
    #[inline(always)]
    pub fn read_n<const S: u8>(&mut self, lin: u64) -> Result<u64, Fault> {
        match self.read_hit::<S>(lin, Access::Read) {
            Some(v) => Ok(v),
            None => self.read_cold(lin, S),
        }
    }

    /// `S` bytes (1, 2, 4 or 8) at `lin` when they lie in one page that hits in the
    /// `access` TLB (read, or write for a read-modify-write) and in RAM.
    #[inline(always)]
    fn read_hit<const S: u8>(&self, lin: u64, access: Access) -> Option<u64> {
        let off = lin & 0xfff;
        if off + S as u64 > PAGE_SIZE {
            return None;
        }
        let a = (self.cpu.tlb.lookup(lin, access)? | off) as usize;
        let b = self.ram.bytes().get(a..a + S as usize)?;
        Some(match S {
            1 => b[0] as u64,
            2 => u16::from_le_bytes([b[0], b[1]]) as u64,
            4 => u32::from_le_bytes([b[0], b[1], b[2], b[3]]) as u64,
            _ => u64::from_le_bytes([b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7]]),
        })
    }

    #[inline(never)]
    fn read_cold(&mut self, lin: u64, size: u8) -> Result<u64, Fault> {
        let mut buf = [0u8; 8];
        self.read_slow(lin, &mut buf[..size as usize], Access::Read)?;
        Ok(u64::from_le_bytes(buf))
    }

    /// Write `size` bytes (1, 2, 4 or 8) at a linear address.
    #[inline]
    pub fn write(&mut self, lin: u64, size: u8, val: u64) -> Result<(), Fault> {
        match size {
            1 => self.write_n::<1>(lin, val),
            2 => self.write_n::<2>(lin, val),
            4 => self.write_n::<4>(lin, val),
            8 => self.write_n::<8>(lin, val),
            _ => self.write_cold(lin, size.min(8), val),
        }
    }

    /// Write `S` bytes (1, 2, 4 or 8) at a linear address: the TLB-hit, in-page case inline
    /// (write TLB entries never point at pages holding decoded code), everything else out of
    /// line.
    #[inline(always)]
    pub fn write_n<const S: u8>(&mut self, lin: u64, val: u64) -> Result<(), Fault> {
        let off = lin & 0xfff;
        if off + S as u64 <= PAGE_SIZE {
            if let Some(p) = self.cpu.tlb.lookup(lin, Access::Write) {
                let a = (p | off) as usize;
                if let Some(b) = self.ram.bytes_mut().get_mut(a..a + S as usize) {
                    b.copy_from_slice(&val.to_le_bytes()[..S as usize]);
                    return Ok(());
                }
            }
        }
        self.write_cold(lin, S, val)
    }

    #[inline(never)]
    fn write_cold(&mut self, lin: u64, size: u8, val: u64) -> Result<(), Fault> {
        self.write_bytes(lin, &val.to_le_bytes()[..size as usize])
    }

    /// Check that `[lin, lin+len)` is writable (for read-modify-write instructions, so that the
    /// read faults with the write error code before anything changes).
    #[inline(never)]
    pub fn probe_write(&mut self, lin: u64, len: u64) -> Result<(), Fault> {
        self.translate(lin, Access::Write)?;
        let last = lin.wrapping_add(len - 1);
        if (last ^ lin) >> 12 != 0 {
            // A fault on the second page reports that page's first byte, as the hardware does.
            self.translate(last & !0xfff, Access::Write)?;
        }
        Ok(())
    }

    /// Read-for-write: the access faults as a write would, then returns the value.
    #[inline]
    pub fn read_rmw(&mut self, lin: u64, size: u8) -> Result<u64, Fault> {
        match size {
            1 => self.read_rmw_n::<1>(lin),
            2 => self.read_rmw_n::<2>(lin),
            4 => self.read_rmw_n::<4>(lin),
            8 => self.read_rmw_n::<8>(lin),
            _ => {
                self.probe_write(lin, size as u64)?;
                self.read(lin, size)
            }
        }
    }

    /// [`Ctx::read_rmw`] for `S` bytes (1, 2, 4 or 8). On a write-TLB hit inside the page the
    /// value is read through that entry — one translation for the whole read-modify-write,
    /// as compiled code does it (one write-TLB probe; a read-TLB entry for the page could
    /// only differ from it if the page tables changed without a TLB flush).
    #[inline(always)]
    pub fn read_rmw_n<const S: u8>(&mut self, lin: u64) -> Result<u64, Fault> {
        if let Some(v) = self.read_hit::<S>(lin, Access::Write) {
            return Ok(v);
        }
        self.probe_write(lin, S as u64)?;
        self.read_n::<S>(lin)
    }

    /// Read a byte range at a linear address (any length, any alignment).
    pub fn read_bytes(&mut self, lin: u64, out: &mut [u8]) -> Result<(), Fault> {
        self.read_slow(lin, out, Access::Read)
    }

    /// Fetch instruction bytes (execute permission).
    pub fn fetch_bytes(&mut self, lin: u64, out: &mut [u8]) -> Result<(), Fault> {
        self.read_slow(lin, out, Access::Exec)
    }

    fn read_slow(&mut self, lin: u64, out: &mut [u8], access: Access) -> Result<(), Fault> {
        for (a, off, len) in page_pieces(lin, out.len()) {
            let p = self.translate(a, access)?;
            self.load_phys(p, &mut out[off..off + len]);
        }
        Ok(())
    }

    /// Write a byte range at a linear address. All pages are translated (and may fault) before
    /// any byte is written.
    pub fn write_bytes(&mut self, lin: u64, data: &[u8]) -> Result<(), Fault> {
        let mut pieces: [(u64, usize, usize); 3] = [(0, 0, 0); 3];
        let mut n = 0;
        for (a, off, len) in page_pieces(lin, data.len()) {
            let p = self.translate(a, Access::Write)?;
            if n < pieces.len() {
                pieces[n] = (p, off, len);
                n += 1;
            } else {
                // Long ranges (more than three pages) are written page by page; each page was
                // checked just above, and earlier pages are already written.
                self.store_phys(p, &data[off..off + len]);
            }
        }
        for &(p, off, len) in &pieces[..n] {
            self.store_phys(p, &data[off..off + len]);
        }
        Ok(())
    }

    /// Read bytes as an implicit supervisor access (descriptor tables, TSS, IDT): U/S and SMAP
    /// checks are those of CPL 0 whatever the current privilege, and the TLB is not filled.
    pub fn read_bytes_supervisor(&mut self, lin: u64, out: &mut [u8]) -> Result<(), Fault> {
        for (a, off, len) in page_pieces(lin, out.len()) {
            let p = self.translate_supervisor(a, Access::Read)?;
            self.load_phys(p, &mut out[off..off + len]);
        }
        Ok(())
    }

    /// Write bytes as an implicit supervisor access (accessed/busy bits, interrupt frames on
    /// a privilege change). Every page is checked before any byte is written.
    pub fn write_bytes_supervisor(&mut self, lin: u64, data: &[u8]) -> Result<(), Fault> {
        let mut pieces: [(u64, usize, usize); 2] = [(0, 0, 0); 2];
        let mut n = 0;
        for (a, off, len) in page_pieces(lin, data.len()) {
            if n == pieces.len() {
                return Err(Fault::ud("supervisor write longer than two pages"));
            }
            pieces[n] = (self.translate_supervisor(a, Access::Write)?, off, len);
            n += 1;
        }
        for &(p, off, len) in &pieces[..n] {
            self.store_phys(p, &data[off..off + len]);
        }
        Ok(())
    }

    /// Read physical memory: RAM, or the bus for anything else.
    /// MMIO reads are one access of the operand's size when it is a natural size, else byte
    /// by byte; either way the engine yields after the instruction (reads can have side
    /// effects on devices).
    pub fn load_phys(&mut self, p: u64, out: &mut [u8]) {
        if self.ram.contains(p, out.len() as u64) {
            out.copy_from_slice(&self.ram.bytes()[p as usize..p as usize + out.len()]);
        } else {
            self.cpu.yield_requested = true;
            self.bus.set_now(self.cpu.retired);
            if matches!(out.len(), 1 | 2 | 4 | 8) {
                let v = self.bus.mmio_read(p, out.len() as u8).to_le_bytes();
                let n = out.len();
                out.copy_from_slice(&v[..n]);
            } else {
                for (i, o) in out.iter_mut().enumerate() {
                    *o = self.bus.mmio_read(p + i as u64, 1) as u8;
                }
            }
        }
    }

    fn store_phys(&mut self, p: u64, data: &[u8]) {
        if self.ram.contains(p, data.len() as u64) {
            if self.ram.note_write(p, data.len() as u64) {
                self.cpu.smc = true;
            }
            self.ram.bytes_mut()[p as usize..p as usize + data.len()].copy_from_slice(data);
        } else {
            // MMIO: one access of the operand's size when it is a natural size (devices
            // see 32-bit register writes as one write), else byte by byte.
            self.cpu.yield_requested = true;
            self.bus.set_now(self.cpu.retired);
            if matches!(data.len(), 1 | 2 | 4 | 8) {
                let mut b = [0u8; 8];
                b[..data.len()].copy_from_slice(data);
                self.bus
                    .mmio_write(p, data.len() as u8, u64::from_le_bytes(b));
            } else {
                for (i, &b) in data.iter().enumerate() {
                    self.bus.mmio_write(p + i as u64, 1, b as u64);
                }
            }
        }
    }

    /// Read 16 bytes (CMPXCHG16B, SSE memory operands).
    #[inline]
    pub fn read_u128(&mut self, lin: u64) -> Result<u128, Fault> {
        let off = lin & 0xfff;
        if off + 16 <= PAGE_SIZE {
            if let Some(p) = self.cpu.tlb.lookup(lin, Access::Read) {
                let a = (p | off) as usize;
                if let Some(b) = self.ram.bytes().get(a..a + 16) {
                    let mut v = [0u8; 16];
                    v.copy_from_slice(b);
                    return Ok(u128::from_le_bytes(v));
                }
            }
        }
        let mut b = [0u8; 16];
        self.read_slow(lin, &mut b, Access::Read)?;
        Ok(u128::from_le_bytes(b))
    }

    /// Write 16 bytes (the TLB-hit, in-page case inline, as for [`Ctx::write_n`]).
    #[inline]
    pub fn write_u128(&mut self, lin: u64, v: u128) -> Result<(), Fault> {
        let off = lin & 0xfff;
        if off + 16 <= PAGE_SIZE {
            if let Some(p) = self.cpu.tlb.lookup(lin, Access::Write) {
                let a = (p | off) as usize;
                if let Some(b) = self.ram.bytes_mut().get_mut(a..a + 16) {
                    b.copy_from_slice(&v.to_le_bytes());
                    return Ok(());
                }
            }
        }
        self.write_bytes(lin, &v.to_le_bytes())
    }

    // ----- stack -----

    /// Stack address size in bytes (8 in 64-bit mode, else SS.B).
    #[inline]
    pub fn stack_width(&self) -> u8 {
        let st = &self.cpu.state;
        if st.in_64bit_mode() {
            8
        } else if st.seg[sreg::SS].default_big() {
            4
        } else {
            2
        }
    }

    /// Linear address of stack offset `rsp` (wrapped at the stack width, SS base applied
    /// outside 64-bit mode).
    #[inline]
    pub fn stack_lin(&self, rsp: u64) -> u64 {
        let st = &self.cpu.state;
        match self.stack_width() {
            8 => rsp,
            4 => st.seg[sreg::SS].base.wrapping_add(rsp & 0xffff_ffff) & 0xffff_ffff,
            _ => st.seg[sreg::SS].base.wrapping_add(rsp & 0xffff) & 0xffff_ffff,
        }
    }

    #[inline]
    fn set_rsp(&mut self, v: u64) {
        let w = self.stack_width();
        let r = &mut self.cpu.state.gpr[reg::RSP];
        *r = match w {
            8 => v,
            4 => v & 0xffff_ffff,
            _ => (*r & !0xffff) | (v & 0xffff),
        };
    }

    /// Checked linear address of a `size`-byte stack access at stack offset `rsp`: outside
    /// 64-bit mode the SS limit (expand-up or expand-down), type and usability are checked
    /// (#SS(0)); 64-bit mode checks nothing here (canonical checks come with translation).
    #[inline(always)]
    pub fn stack_addr(&mut self, rsp: u64, size: u8, write: bool) -> Result<u64, Fault> {
        self.ss_operand = true;
        let st = &self.cpu.state;
        if st.in_64bit_mode() {
            return Ok(rsp);
        }
        let off = if st.seg[sreg::SS].default_big() {
            rsp & 0xffff_ffff
        } else {
            rsp & 0xffff
        };
        crate::operand::legacy_linear(st, sreg::SS, off, size as u64, write)
    }

    /// Push a `size`-byte value. RSP changes only if the write succeeds.
    pub fn push(&mut self, val: u64, size: u8) -> Result<(), Fault> {
        let new = self.cpu.state.gpr[reg::RSP].wrapping_sub(size as u64);
        let lin = self.stack_addr(new, size, true)?;
        self.write(lin, size, val)?;
        self.set_rsp(new);
        Ok(())
    }

    /// Push several `size`-byte values in order (the first at the highest address). Each is
    /// written in turn; RSP changes only after the last write succeeded.
    pub fn push_many(&mut self, vals: &[u64], size: u8) -> Result<(), Fault> {
        let mut rsp = self.cpu.state.gpr[reg::RSP];
        for &v in vals {
            rsp = rsp.wrapping_sub(size as u64);
            let lin = self.stack_addr(rsp, size, true)?;
            self.write(lin, size, v)?;
        }
        self.set_rsp(rsp);
        Ok(())
    }

    /// Pop a `size`-byte value.
    pub fn pop(&mut self, size: u8) -> Result<u64, Fault> {
        let v = self.peek_stack(0, size)?;
        let rsp = self.cpu.state.gpr[reg::RSP];
        self.set_rsp(rsp.wrapping_add(size as u64));
        Ok(v)
    }

    /// Read the stack at RSP + `offset` without changing RSP.
    pub fn peek_stack(&mut self, offset: u64, size: u8) -> Result<u64, Fault> {
        let rsp = self.cpu.state.gpr[reg::RSP].wrapping_add(offset);
        let lin = self.stack_addr(rsp, size, false)?;
        self.read(lin, size)
    }

    /// Adjust RSP by `delta` with the stack's width.
    pub fn add_rsp(&mut self, delta: u64) {
        let rsp = self.cpu.state.gpr[reg::RSP];
        self.set_rsp(rsp.wrapping_add(delta));
    }
}

/// The pieces of `[lin, lin + len)` that each lie in one page, in order: (linear address,
/// offset from `lin`, length).
fn page_pieces(lin: u64, len: usize) -> impl Iterator<Item = (u64, usize, usize)> {
    let mut done = 0usize;
    core::iter::from_fn(move || {
        (done < len).then(|| {
            let a = lin.wrapping_add(done as u64);
            let chunk = ((PAGE_SIZE - (a & 0xfff)) as usize).min(len - done);
            let piece = (a, done, chunk);
            done += chunk;
            piece
        })
    })
}
