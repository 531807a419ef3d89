//! Legacy paging (EFER.LMA = 0): 32-bit paging (4 KiB pages, 4 MiB pages with CR4.PSE) and
//! PAE paging (PDPTE registers, 4 KiB and 2 MiB pages, XD with EFER.NXE).

use super::{Translation, Walker, CR4_PSE, MAX_PHYS_BITS, PHYS_MASK, PTE_NX, PTE_P, PTE_PS};
use crate::fault::Fault;
use crate::mem::GuestRam;
use crate::state::CpuState;

/// Reserved bits of a PAE PDPTE: 63:MAXPHYADDR (XD included), 8:5 and 2:1.
const PDPTE_RSVD: u64 = !((1u64 << MAX_PHYS_BITS) - 1) | 0x1e0 | 0x6;
/// Bits 62:MAXPHYADDR of a PAE PDE/PTE (reserved; bit 63 is XD).
const RSVD_HI_PAE: u64 = !((1u64 << MAX_PHYS_BITS) - 1) & !PTE_NX;
/// Bits 21:13 of a 4 MiB PDE: reserved, as PSE-36 is not advertised.
const RSVD_4M: u64 = 0x003f_e000;

/// Load the four PAE PDPTE registers from the page-directory-pointer table at CR3[31:5], as
/// MOV to CR0/CR3/CR4 does when PAE paging is (or becomes) active. A present entry with a
/// reserved bit set gives #GP(0) (the MOV then faults and changes nothing). Entries outside
/// RAM read as all ones.
pub fn load_pdptes(ram: &GuestRam, st: &CpuState) -> Result<[u64; 4], Fault> {
    let base = st.cr3 & 0xffff_ffe0;
    let mut out = [0u64; 4];
    for (i, o) in out.iter_mut().enumerate() {
        let e = ram.read_u64(base + 8 * i as u64).unwrap_or(u64::MAX);
        if e & PTE_P != 0 && e & PDPTE_RSVD != 0 {
            return Err(Fault::GP0);
        }
        *o = e;
    }
    Ok(out)
}

/// 32-bit paging: PDE (4 MiB page if PS and CR4.PSE), PTE. No reserved bits except in 4 MiB
/// PDEs; no execute-disable.
pub(super) fn walk32(w: &mut Walker) -> Result<Translation, Fault> {
    let lin = w.lin & 0xffff_ffff;
    let pde_addr = (w.st.cr3 & 0xffff_f000) | ((lin >> 22) << 2);
    let pde = w.read(pde_addr, false);
    if pde & PTE_P == 0 {
        return Err(w.not_present());
    }
    if pde & PTE_PS != 0 && w.st.cr4 & CR4_PSE != 0 {
        if pde & RSVD_4M != 0 {
            return Err(w.reserved());
        }
        w.accumulate(pde, false);
        return w.finish(pde_addr, pde, false, pde & 0xffc0_0000, 22);
    }
    w.accumulate(pde, false);
    w.pass(pde_addr, pde, false);
    let pte_addr = (pde & 0xffff_f000) | (((lin >> 12) & 0x3ff) << 2);
    let pte = w.read(pte_addr, false);
    if pte & PTE_P == 0 {
        return Err(w.not_present());
    }
    w.accumulate(pte, false);
    w.finish(pte_addr, pte, false, pte & 0xffff_f000, 12)
}

/// PAE paging with the PDPTE registers `pdptes` (already checked for reserved bits when they
/// were loaded; they carry no access rights and no accessed bit): PDE (2 MiB page if PS), PTE.
pub(super) fn walk_pae(w: &mut Walker, pdptes: &[u64; 4]) -> Result<Translation, Fault> {
    let lin = w.lin & 0xffff_ffff;
    let pdpte = pdptes[(lin >> 30) as usize & 3];
    if pdpte & PTE_P == 0 {
        return Err(w.not_present());
    }
    let nxe = w.nxe();
    let rsvd = |pte: u64| pte & RSVD_HI_PAE != 0 || (!nxe && pte & PTE_NX != 0);
    let pde_addr = (pdpte & PHYS_MASK) | (((lin >> 21) & 0x1ff) << 3);
    let pde = w.read(pde_addr, true);
    if pde & PTE_P == 0 {
        return Err(w.not_present());
    }
    let large = pde & PTE_PS != 0;
    if rsvd(pde) || (large && pde & 0x001f_e000 != 0) {
        return Err(w.reserved());
    }
    w.accumulate(pde, nxe);
    if large {
        return w.finish(pde_addr, pde, true, pde & PHYS_MASK, 21);
    }
    w.pass(pde_addr, pde, true);
    let pte_addr = (pde & PHYS_MASK) | (((lin >> 12) & 0x1ff) << 3);
    let pte = w.read(pte_addr, true);
    if pte & PTE_P == 0 {
        return Err(w.not_present());
    }
    if rsvd(pte) {
        return Err(w.reserved());
    }
    w.accumulate(pte, nxe);
    w.finish(pte_addr, pte, true, pte & PHYS_MASK, 12)
}
