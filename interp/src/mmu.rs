//! Paging: the page walks (32-bit, PAE, 4-level; accessed/dirty bits, U/S, R/W, NX, WP, SMEP,
//! SMAP, global pages); the software TLB is in mmu_tlb.rs. What is modelled: docs/paging.md.

use crate::fault::{pf, Fault};
use crate::mem::GuestRam;
use crate::state::{ctl, flags, CpuState};

#[path = "mmu_legacy.rs"]
mod legacy;
pub use legacy::load_pdptes;

#[path = "mmu_tlb.rs"]
mod tlb;
pub use tlb::{Tlb, WriteEntry, TLB_ENTRIES, TLB_ENTRY_BYTES};

#[cfg(test)]
#[path = "mmu_tests.rs"]
mod tests;

/// Physical address width advertised in CPUID 0x8000_0008 (bits).
pub const MAX_PHYS_BITS: u32 = 40;
const PHYS_MASK: u64 = ((1u64 << MAX_PHYS_BITS) - 1) & !0xfff;
/// Bits 51:MAXPHYADDR of a 4-level paging entry (reserved).
const RSVD_HI_LONG: u64 = 0x000f_ffff_ffff_f000 & !((1u64 << MAX_PHYS_BITS) - 1);

/// CR4.PSE (4 MiB pages with 32-bit paging).
pub const CR4_PSE: u64 = 1 << 4;

/// Kind of memory access, for permission checks and page-fault error codes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Access {
    Read,
    Write,
    Exec,
}

/// Who makes an access, for the permission checks (SDM 4.6).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Priv {
    /// An explicit access at CPL 3.
    User,
    /// An explicit access at CPL 0-2 (SMAP honours RFLAGS.AC).
    Supervisor,
    /// An implicit supervisor access (descriptor tables, TSS, IDT, interrupt frames) at any
    /// CPL: supervisor checks, and SMAP ignores RFLAGS.AC.
    Implicit,
}

/// A successful translation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Translation {
    /// Physical address of the 4 KiB page holding the linear address.
    pub phys_page: u64,
    /// log2 of the size of the page that maps it: 12, 21 (2 MiB), 22 (4 MiB) or 30 (1 GiB).
    pub page_bits: u8,
    /// Global translation (G bit in the leaf entry with CR4.PGE set).
    pub global: bool,
    /// Every level allows user accesses (U/S = 1).
    pub user_page: bool,
    /// The permission outcome does not depend on RFLAGS.AC, so the TLB may cache it (false
    /// for supervisor accesses to user pages with CR4.SMAP set).
    pub cacheable: bool,
}

const PTE_P: u64 = 1 << 0;
const PTE_RW: u64 = 1 << 1;
const PTE_US: u64 = 1 << 2;
const PTE_A: u64 = 1 << 5;
const PTE_D: u64 = 1 << 6;
const PTE_PS: u64 = 1 << 7;
const PTE_G: u64 = 1 << 8;
const PTE_NX: u64 = 1 << 63;

/// True if `lin` is canonical for 48-bit linear addresses.
#[inline]
pub fn is_canonical(lin: u64) -> bool {
    ((lin as i64) << 16 >> 16) as u64 == lin
}

/// The paging mode selected by CR0.PG, CR4.PAE and EFER.LMA.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    Off,
    Bits32,
    Pae,
    Level4,
}

/// Current paging mode.
pub fn mode(st: &CpuState) -> Mode {
    if st.cr0 & ctl::CR0_PG == 0 {
        Mode::Off
    } else if st.efer & ctl::EFER_LMA != 0 {
        Mode::Level4
    } else if st.cr4 & ctl::CR4_PAE != 0 {
        Mode::Pae
    } else {
        Mode::Bits32
    }
}

/// Translate a linear address as the engines do: PAE paging uses the PDPTEs cached in `tlb`
/// (loaded by MOV to CR0/CR3/CR4 through [`load_pdptes`] and [`Tlb::set_pdptes`]); if none
/// are cached (e.g. after a restore) they are loaded from memory now and kept.
pub fn translate(
    ram: &mut GuestRam,
    st: &CpuState,
    tlb: &mut Tlb,
    lin: u64,
    access: Access,
    prv: Priv,
) -> Result<Translation, Fault> {
    if mode(st) == Mode::Pae && tlb.pdptes().is_none() {
        tlb.set_pdptes(Some(load_pdptes(ram, st)?));
    }
    let pdptes = tlb.pdptes();
    walk(ram, st, pdptes.as_ref(), lin, access, prv)
}

/// Translate a linear address with a page walk (no TLB). `pdptes` are the PDPTE registers
/// for PAE paging (`None`: read them from CR3 now; a reserved bit then gives #GP(0)).
pub fn walk(
    ram: &mut GuestRam,
    st: &CpuState,
    pdptes: Option<&[u64; 4]>,
    lin: u64,
    access: Access,
    prv: Priv,
) -> Result<Translation, Fault> {
    match mode(st) {
        Mode::Off => Ok(Translation {
            phys_page: lin & 0xffff_ffff & !0xfff,
            page_bits: 12,
            global: false,
            user_page: true,
            cacheable: true,
        }),
        Mode::Bits32 => legacy::walk32(&mut Walker::new(ram, st, lin, access, prv)),
        Mode::Pae => {
            let p = match pdptes {
                Some(p) => *p,
                None => load_pdptes(ram, st)?,
            };
            legacy::walk_pae(&mut Walker::new(ram, st, lin, access, prv), &p)
        }
        Mode::Level4 => walk_long(&mut Walker::new(ram, st, lin, access, prv)),
    }
}

/// State of one page walk: the access, the rights gathered so far, the error-code bits.
struct Walker<'a> {
    ram: &'a mut GuestRam,
    st: &'a CpuState,
    lin: u64,
    access: Access,
    prv: Priv,
    /// Error-code bits describing the access (W/R, U/S, I/D).
    code: u32,
    writable: bool,
    user: bool,
    nx: bool,
}

impl<'a> Walker<'a> {
    fn new(ram: &'a mut GuestRam, st: &'a CpuState, lin: u64, access: Access, prv: Priv) -> Self {
        let mut code = 0u32;
        if access == Access::Write {
            code |= pf::WRITE;
        }
        if prv == Priv::User {
            code |= pf::USER;
        }
        // I/D: instruction fetch with SMEP, or with PAE/4-level paging and EFER.NXE.
        let pae_nx = st.cr4 & ctl::CR4_PAE != 0 && st.efer & ctl::EFER_NXE != 0;
        if access == Access::Exec && (st.cr4 & ctl::CR4_SMEP != 0 || pae_nx) {
            code |= pf::FETCH;
        }
        Walker {
            ram,
            st,
            lin,
            access,
            prv,
            code,
            writable: true,
            user: true,
            nx: false,
        }
    }

    fn nxe(&self) -> bool {
        self.st.efer & ctl::EFER_NXE != 0
    }

    fn not_present(&self) -> Fault {
        Fault::PageFault {
            addr: self.lin,
            code: self.code,
        }
    }

    fn reserved(&self) -> Fault {
        Fault::PageFault {
            addr: self.lin,
            code: self.code | pf::PRESENT | pf::RSVD,
        }
    }

    /// Read a paging-structure entry (8 bytes, or 4 for 32-bit paging). Entries outside RAM
    /// read as all ones (open bus).
    fn read(&self, addr: u64, wide: bool) -> u64 {
        if wide {
            self.ram.read_u64(addr).unwrap_or(u64::MAX)
        } else {
            let mut b = [0u8; 4];
            match self.ram.read_phys(addr, &mut b) {
                Ok(()) => u32::from_le_bytes(b) as u64,
                Err(_) => u32::MAX as u64,
            }
        }
    }

    /// Fold an entry's R/W, U/S and (if `has_nx`) XD bits into the rights.
    fn accumulate(&mut self, pte: u64, has_nx: bool) {
        self.writable &= pte & PTE_RW != 0;
        self.user &= pte & PTE_US != 0;
        self.nx |= has_nx && pte & PTE_NX != 0;
    }

    /// Set bits in an entry in memory if not already set.
    fn set_bits(&mut self, addr: u64, pte: u64, bits: u64, wide: bool) {
        if pte & bits == bits {
            return;
        }
        let new = pte | bits;
        let _ = if wide {
            self.ram.write_u64(addr, new)
        } else {
            self.ram.write_phys(addr, &(new as u32).to_le_bytes())
        };
    }

    /// A non-leaf entry was used: set its accessed bit (at once, so it stays set even if the
    /// walk faults further down, as Intel's page walker does).
    fn pass(&mut self, addr: u64, pte: u64, wide: bool) {
        self.set_bits(addr, pte, PTE_A, wide);
    }

    /// The leaf entry maps a page of `1 << page_bits` bytes at `frame`: check the access
    /// rights, then set A (and D for a write) in the leaf.
    fn finish(
        &mut self,
        addr: u64,
        pte: u64,
        wide: bool,
        frame: u64,
        page_bits: u32,
    ) -> Result<Translation, Fault> {
        let st = self.st;
        let smap = st.cr4 & ctl::CR4_SMAP != 0;
        let allowed = match self.prv {
            Priv::User => {
                self.user
                    && match self.access {
                        Access::Read => true,
                        Access::Write => self.writable,
                        Access::Exec => !self.nx,
                    }
            }
            Priv::Supervisor | Priv::Implicit => {
                let smap_blocks =
                    self.user && smap && (self.prv == Priv::Implicit || st.rflags & flags::AC == 0);
                match self.access {
                    Access::Read => !smap_blocks,
                    Access::Write => !smap_blocks && (self.writable || st.cr0 & ctl::CR0_WP == 0),
                    Access::Exec => {
                        let smep_blocks = self.user && st.cr4 & ctl::CR4_SMEP != 0;
                        !self.nx && !smep_blocks
                    }
                }
            }
        };
        if !allowed {
            return Err(Fault::PageFault {
                addr: self.lin,
                code: self.code | pf::PRESENT,
            });
        }
        let bits = if self.access == Access::Write {
            PTE_A | PTE_D
        } else {
            PTE_A
        };
        self.set_bits(addr, pte, bits, wide);
        let within = (1u64 << page_bits) - 1;
        Ok(Translation {
            phys_page: (frame & !within) | (self.lin & within & !0xfff),
            page_bits: page_bits as u8,
            global: pte & PTE_G != 0 && st.cr4 & ctl::CR4_PGE != 0,
            user_page: self.user,
            cacheable: !(self.prv != Priv::User && self.user && smap),
        })
    }
}

/// 4-level paging (IA-32e): PML4E, PDPTE (1 GiB pages), PDE (2 MiB pages), PTE.
fn walk_long(w: &mut Walker) -> Result<Translation, Fault> {
    let nxe = w.nxe();
    let mut table = w.st.cr3 & PHYS_MASK;
    for level in (0..4u32).rev() {
        let shift = 12 + 9 * level;
        let addr = table | (((w.lin >> shift) & 0x1ff) << 3);
        let pte = w.read(addr, true);
        if pte & PTE_P == 0 {
            return Err(w.not_present());
        }
        // Reserved: bits 51:MAXPHYADDR, XD without EFER.NXE, PS in a PML4E, and in a
        // large-page entry the address bits below the page size (bit 12 is PAT).
        let leaf = level == 0 || (level < 3 && pte & PTE_PS != 0);
        let mut rsvd = pte & RSVD_HI_LONG;
        if !nxe {
            rsvd |= pte & PTE_NX;
        }
        if level == 3 {
            rsvd |= pte & PTE_PS;
        }
        if leaf && level > 0 {
            rsvd |= pte & ((1u64 << shift) - 1) & !0x1fff;
        }
        if rsvd != 0 {
            return Err(w.reserved());
        }
        w.accumulate(pte, nxe);
        if leaf {
            return w.finish(addr, pte, true, pte & PHYS_MASK, shift);
        }
        w.pass(addr, pte, true);
        table = pte & PHYS_MASK;
    }
    unreachable!("the level-0 entry is always a leaf")
}
