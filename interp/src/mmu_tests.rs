//! Unit tests of the page walks (32-bit, PAE, 4-level) and the TLB.

use super::*;
use crate::state::{ctl, flags, CpuState};

const P: u64 = PTE_P;
const RW: u64 = PTE_RW;
const US: u64 = PTE_US;
const PWU: u64 = P | RW | US;

fn ram() -> GuestRam {
    GuestRam::new(32 << 20).expect("test RAM")
}

fn w64(ram: &mut GuestRam, a: u64, v: u64) {
    ram.write_u64(a, v).expect("in RAM");
}

fn r64(ram: &GuestRam, a: u64) -> u64 {
    ram.read_u64(a).expect("in RAM")
}

fn w32(ram: &mut GuestRam, a: u64, v: u32) {
    ram.write_phys(a, &v.to_le_bytes()).expect("in RAM");
}

fn r32(ram: &GuestRam, a: u64) -> u32 {
    let mut b = [0u8; 4];
    ram.read_phys(a, &mut b).expect("in RAM");
    u32::from_le_bytes(b)
}

fn tr(ram: &mut GuestRam, st: &CpuState, lin: u64, a: Access, p: Priv) -> Result<u64, Fault> {
    walk(ram, st, None, lin, a, p).map(|t| t.phys_page | (lin & 0xfff))
}

fn pf_code(r: Result<u64, Fault>) -> u32 {
    match r {
        Err(Fault::PageFault { code, .. }) => code,
        other => panic!("expected #PF, got {other:?}"),
    }
}

// ----- 4-level -----

const PML4: u64 = 0x1000;
const PDPT: u64 = 0x2000;
const PD: u64 = 0x3000;
const PT: u64 = 0x4000;

/// 4-level tables: 0x40_5000 -> 0x80_0000 (4 KiB), 0x60_0000 -> 0x120_0000 (2 MiB),
/// 0x4000_0000 -> 0x4000_0000 (1 GiB). All user, writable.
fn long_tables() -> (GuestRam, CpuState) {
    let mut m = ram();
    w64(&mut m, PML4, PDPT | PWU);
    w64(&mut m, PDPT, PD | PWU);
    w64(&mut m, PDPT + 8, 0x4000_0000 | PWU | PTE_PS);
    w64(&mut m, PD + 2 * 8, PT | PWU);
    w64(&mut m, PD + 3 * 8, 0x120_0000 | PWU | PTE_PS);
    w64(&mut m, PT + 5 * 8, 0x80_0000 | PWU);
    (m, CpuState::long_mode_flat(PML4, 0))
}

#[test]
fn long_mode_4k_2m_1g() {
    let (mut m, st) = long_tables();
    let t = walk(&mut m, &st, None, 0x40_5123, Access::Read, Priv::User).unwrap();
    assert_eq!((t.phys_page, t.page_bits), (0x80_0000, 12));
    let t = walk(&mut m, &st, None, 0x61_2345, Access::Write, Priv::User).unwrap();
    assert_eq!((t.phys_page, t.page_bits), (0x121_2000, 21));
    let t = walk(&mut m, &st, None, 0x7fed_cba9, Access::Exec, Priv::User).unwrap();
    assert_eq!((t.phys_page, t.page_bits), (0x7fed_c000, 30));
    assert!(t.user_page && !t.global && t.cacheable);
    // Not present: PML4E 1, PTE 6.
    assert_eq!(
        pf_code(tr(&mut m, &st, 1 << 39, Access::Read, Priv::User)),
        pf::USER
    );
    assert_eq!(
        pf_code(tr(&mut m, &st, 0x40_6000, Access::Write, Priv::Supervisor)),
        pf::WRITE
    );
    match tr(&mut m, &st, 0x40_6010, Access::Read, Priv::Supervisor) {
        Err(Fault::PageFault { addr, .. }) => assert_eq!(addr, 0x40_6010),
        other => panic!("{other:?}"),
    }
}

#[test]
fn long_mode_reserved_bits() {
    let (mut m, mut st) = long_tables();
    let rsvd = pf::PRESENT | pf::RSVD;
    // Bit 40 (above MAXPHYADDR) in a PTE.
    w64(&mut m, PT + 5 * 8, 0x80_0000 | PWU | 1 << 40);
    assert_eq!(
        pf_code(tr(&mut m, &st, 0x40_5000, Access::Read, Priv::Supervisor)),
        rsvd
    );
    // Bits 62:52 are ignored.
    w64(&mut m, PT + 5 * 8, 0x80_0000 | PWU | 0x7ff << 52);
    assert!(tr(&mut m, &st, 0x40_5000, Access::Read, Priv::Supervisor).is_ok());
    // XD without EFER.NXE.
    w64(&mut m, PT + 5 * 8, 0x80_0000 | PWU | PTE_NX);
    assert!(tr(&mut m, &st, 0x40_5000, Access::Read, Priv::Supervisor).is_ok());
    st.efer &= !ctl::EFER_NXE;
    assert_eq!(
        pf_code(tr(&mut m, &st, 0x40_5000, Access::Write, Priv::User)),
        rsvd | pf::WRITE | pf::USER
    );
    st.efer |= ctl::EFER_NXE;
    // 2 MiB page with bit 13 set; bit 12 (PAT) is fine.
    w64(&mut m, PD + 3 * 8, 0x120_0000 | PWU | PTE_PS | 1 << 13);
    assert_eq!(
        pf_code(tr(&mut m, &st, 0x60_0000, Access::Read, Priv::Supervisor)),
        rsvd
    );
    w64(&mut m, PD + 3 * 8, 0x120_0000 | PWU | PTE_PS | 1 << 12);
    assert_eq!(
        tr(&mut m, &st, 0x60_0000, Access::Read, Priv::Supervisor),
        Ok(0x120_0000)
    );
    // 1 GiB page with bit 29 set.
    w64(&mut m, PDPT + 8, 0x4000_0000 | PWU | PTE_PS | 1 << 29);
    assert_eq!(
        pf_code(tr(&mut m, &st, 0x4000_0000, Access::Read, Priv::Supervisor)),
        rsvd
    );
    // PS in a PML4E.
    w64(&mut m, PML4, PDPT | PWU | PTE_PS);
    assert_eq!(
        pf_code(tr(&mut m, &st, 0x40_5000, Access::Exec, Priv::Supervisor)),
        rsvd | pf::FETCH
    );
    // A non-present entry's other bits are not checked.
    w64(&mut m, PML4, PDPT | RW | PTE_PS | 1 << 45);
    assert_eq!(
        pf_code(tr(&mut m, &st, 0x40_5000, Access::Read, Priv::Supervisor)),
        0
    );
}

#[test]
fn long_mode_nx_and_fetch_code() {
    let (mut m, mut st) = long_tables();
    w64(&mut m, PD + 2 * 8, PT | PWU | PTE_NX);
    assert!(tr(&mut m, &st, 0x40_5000, Access::Read, Priv::User).is_ok());
    assert_eq!(
        pf_code(tr(&mut m, &st, 0x40_5000, Access::Exec, Priv::User)),
        pf::PRESENT | pf::USER | pf::FETCH
    );
    assert_eq!(
        pf_code(tr(&mut m, &st, 0x40_5000, Access::Exec, Priv::Supervisor)),
        pf::PRESENT | pf::FETCH
    );
    // Without NXE (and without SMEP) a fetch fault has no I/D bit.
    st.efer &= !ctl::EFER_NXE;
    w64(&mut m, PD + 2 * 8, PT | PWU);
    assert_eq!(
        pf_code(tr(&mut m, &st, 0x40_6000, Access::Exec, Priv::User)),
        pf::USER
    );
}

#[test]
fn write_protect_and_user_supervisor() {
    let (mut m, mut st) = long_tables();
    // Read-only at the PDE level, supervisor at the PTE level.
    w64(&mut m, PD + 2 * 8, PT | P | US);
    w64(&mut m, PT + 5 * 8, 0x80_0000 | P | RW);
    assert_eq!(
        pf_code(tr(&mut m, &st, 0x40_5000, Access::Write, Priv::Supervisor)),
        pf::PRESENT | pf::WRITE
    );
    assert_eq!(
        pf_code(tr(&mut m, &st, 0x40_5000, Access::Read, Priv::User)),
        pf::PRESENT | pf::USER
    );
    st.cr0 &= !ctl::CR0_WP;
    assert_eq!(
        tr(&mut m, &st, 0x40_5008, Access::Write, Priv::Supervisor),
        Ok(0x80_0008)
    );
    assert_eq!(r64(&m, PT + 5 * 8), 0x80_0000 | P | RW | PTE_A | PTE_D);
    // User write to a read-only user page faults whatever WP says.
    w64(&mut m, PT + 5 * 8, 0x80_0000 | P | RW | US);
    assert_eq!(
        pf_code(tr(&mut m, &st, 0x40_5000, Access::Write, Priv::User)),
        pf::PRESENT | pf::WRITE | pf::USER
    );
}

#[test]
fn smep_and_smap() {
    let (mut m, mut st) = long_tables();
    assert!(tr(&mut m, &st, 0x40_5000, Access::Exec, Priv::Supervisor).is_ok());
    st.cr4 |= ctl::CR4_SMEP;
    assert_eq!(
        pf_code(tr(&mut m, &st, 0x40_5000, Access::Exec, Priv::Supervisor)),
        pf::PRESENT | pf::FETCH
    );
    assert!(tr(&mut m, &st, 0x40_5000, Access::Exec, Priv::User).is_ok());
    // SMAP: supervisor data accesses to user pages need AC=1 and an explicit access.
    st.cr4 |= ctl::CR4_SMAP;
    assert_eq!(
        pf_code(tr(&mut m, &st, 0x40_5000, Access::Read, Priv::Supervisor)),
        pf::PRESENT
    );
    assert_eq!(
        pf_code(tr(&mut m, &st, 0x40_5000, Access::Write, Priv::Supervisor)),
        pf::PRESENT | pf::WRITE
    );
    st.rflags |= flags::AC;
    let t = walk(
        &mut m,
        &st,
        None,
        0x40_5000,
        Access::Write,
        Priv::Supervisor,
    )
    .unwrap();
    assert!(!t.cacheable, "the outcome depends on AC");
    assert_eq!(
        pf_code(tr(&mut m, &st, 0x40_5000, Access::Read, Priv::Implicit)),
        pf::PRESENT
    );
    assert!(
        walk(&mut m, &st, None, 0x40_5000, Access::Read, Priv::User)
            .unwrap()
            .cacheable
    );
    // Supervisor pages are unaffected.
    w64(&mut m, PT + 5 * 8, 0x80_0000 | P | RW);
    st.rflags &= !flags::AC;
    assert!(
        walk(&mut m, &st, None, 0x40_5000, Access::Read, Priv::Implicit)
            .unwrap()
            .cacheable
    );
}

#[test]
fn accessed_and_dirty_bits() {
    let (mut m, st) = long_tables();
    tr(&mut m, &st, 0x40_5000, Access::Read, Priv::User).unwrap();
    for a in [PML4, PDPT, PD + 16] {
        assert_eq!(r64(&m, a) & (PTE_A | PTE_D), PTE_A, "{a:#x}");
    }
    assert_eq!(r64(&m, PT + 40), 0x80_0000 | PWU | PTE_A);
    tr(&mut m, &st, 0x40_5000, Access::Write, Priv::User).unwrap();
    assert_eq!(r64(&m, PT + 40), 0x80_0000 | PWU | PTE_A | PTE_D);
    assert_eq!(r64(&m, PD + 16), PT | PWU | PTE_A, "D only in the leaf");
    // Large page leaf gets D.
    tr(&mut m, &st, 0x60_0000, Access::Write, Priv::User).unwrap();
    assert_eq!(r64(&m, PD + 24), 0x120_0000 | PWU | PTE_PS | PTE_A | PTE_D);

    // A fault further down: upper levels used get A, the faulting entry and leaf do not.
    let (mut m, st) = long_tables();
    pf_code(tr(&mut m, &st, 0x40_6000, Access::Read, Priv::User));
    assert_eq!(r64(&m, PML4) & PTE_A, PTE_A);
    assert_eq!(r64(&m, PD + 16) & PTE_A, PTE_A);
    assert_eq!(r64(&m, PT + 48), 0);
    // Permission fault: the leaf keeps A and D clear.
    w64(&mut m, PT + 5 * 8, 0x80_0000 | P | US);
    pf_code(tr(&mut m, &st, 0x40_5000, Access::Write, Priv::User));
    assert_eq!(r64(&m, PT + 40), 0x80_0000 | P | US);
    // Reserved-bit fault in the PDE: the PML4E and PDPTE got A, the PDE did not.
    let (mut m, st) = long_tables();
    w64(&mut m, PD + 2 * 8, PT | PWU | 1 << 41);
    pf_code(tr(&mut m, &st, 0x40_5000, Access::Read, Priv::User));
    assert_eq!(r64(&m, PDPT) & PTE_A, PTE_A);
    assert_eq!(r64(&m, PD + 16) & PTE_A, 0);
}

#[test]
fn global_pages_need_pge() {
    let (mut m, mut st) = long_tables();
    w64(&mut m, PT + 5 * 8, 0x80_0000 | PWU | PTE_G);
    let t = walk(&mut m, &st, None, 0x40_5000, Access::Read, Priv::User).unwrap();
    assert!(!t.global);
    st.cr4 |= ctl::CR4_PGE;
    let t = walk(&mut m, &st, None, 0x40_5000, Access::Read, Priv::User).unwrap();
    assert!(t.global);
    // G in a non-leaf entry means nothing.
    w64(&mut m, PT + 5 * 8, 0x80_0000 | PWU);
    w64(&mut m, PD + 2 * 8, PT | PWU | PTE_G);
    let t = walk(&mut m, &st, None, 0x40_5000, Access::Read, Priv::User).unwrap();
    assert!(!t.global);
}

// ----- 32-bit paging -----

fn bits32_state(cr3: u64) -> CpuState {
    let mut st = CpuState::power_on();
    st.cr0 = ctl::CR0_PE | ctl::CR0_PG | ctl::CR0_WP;
    st.cr3 = cr3;
    st
}

#[test]
fn bits32_4k_and_4m_pages() {
    let mut m = ram();
    let mut st = bits32_state(0x1000);
    // PDE 1 -> PT at 0x2000, PTE 3 -> 0x50_0000; PDE 2 has PS set with frame 0xc0_0000.
    w32(&mut m, 0x1004, 0x2000 | PWU as u32);
    w32(&mut m, 0x2000 + 12, 0x50_0000 | PWU as u32);
    w32(&mut m, 0x1008, 0xc0_0000 | (PWU | PTE_PS) as u32);
    assert_eq!(
        tr(&mut m, &st, 0x40_3abc, Access::Write, Priv::User),
        Ok(0x50_0abc)
    );
    assert_eq!(r32(&m, 0x1004), 0x2000 | (PWU | PTE_A) as u32);
    assert_eq!(r32(&m, 0x200c), 0x50_0000 | (PWU | PTE_A | PTE_D) as u32);
    assert_eq!(r32(&m, 0x2010), 0, "the neighbour entry is untouched");
    // Without CR4.PSE the PS bit is ignored: the PDE points to a page table at 0xc0_0000.
    w32(&mut m, 0xc0_0000 + 4 * 0x12, 0x70_0000 | PWU as u32);
    assert_eq!(
        tr(&mut m, &st, 0x81_2345, Access::Read, Priv::User),
        Ok(0x70_0345)
    );
    st.cr4 |= CR4_PSE;
    let t = walk(&mut m, &st, None, 0x81_2345, Access::Read, Priv::User).unwrap();
    assert_eq!((t.phys_page, t.page_bits), (0xc1_2000, 22));
    tr(&mut m, &st, 0x80_0000, Access::Write, Priv::User).unwrap();
    assert_eq!(
        r32(&m, 0x1008) as u64,
        0xc0_0000 | PWU | PTE_PS | PTE_A | PTE_D
    );
    // Bits 21:13 are reserved (no PSE-36); bit 12 (PAT) is not.
    w32(&mut m, 0x1008, 0xc0_0000 | (PWU | PTE_PS) as u32 | 1 << 13);
    assert_eq!(
        pf_code(tr(&mut m, &st, 0x80_0000, Access::Read, Priv::User)),
        pf::PRESENT | pf::RSVD | pf::USER
    );
    w32(&mut m, 0x1008, 0xc0_0000 | (PWU | PTE_PS) as u32 | 1 << 12);
    assert!(tr(&mut m, &st, 0x80_0000, Access::Read, Priv::User).is_ok());
    // Upper linear bits are ignored.
    assert_eq!(
        tr(&mut m, &st, 0x1_0040_3000, Access::Read, Priv::User),
        Ok(0x50_0000)
    );
}

#[test]
fn bits32_protection() {
    let mut m = ram();
    let mut st = bits32_state(0x1000);
    w32(&mut m, 0x1000, 0x2000 | P as u32 | US as u32);
    w32(&mut m, 0x2000, 0x3000 | PWU as u32);
    w32(&mut m, 0x2004, 0x4000 | (P | RW) as u32);
    assert_eq!(
        pf_code(tr(&mut m, &st, 0x0000, Access::Write, Priv::User)),
        pf::PRESENT | pf::WRITE | pf::USER
    );
    assert_eq!(
        pf_code(tr(&mut m, &st, 0x0000, Access::Write, Priv::Supervisor)),
        pf::PRESENT | pf::WRITE
    );
    assert_eq!(
        pf_code(tr(&mut m, &st, 0x1000, Access::Read, Priv::User)),
        pf::PRESENT | pf::USER
    );
    // Not present; a fetch has no I/D bit without SMEP (no NX in 32-bit paging).
    assert_eq!(
        pf_code(tr(&mut m, &st, 0x2000, Access::Exec, Priv::User)),
        pf::USER
    );
    st.cr4 |= ctl::CR4_SMEP;
    assert_eq!(
        pf_code(tr(&mut m, &st, 0x0000, Access::Exec, Priv::Supervisor)),
        pf::PRESENT | pf::FETCH
    );
    st.cr0 &= !ctl::CR0_WP;
    assert_eq!(
        tr(&mut m, &st, 0x0004, Access::Write, Priv::Supervisor),
        Ok(0x3004)
    );
}

// ----- PAE -----

fn pae_state(cr3: u64) -> CpuState {
    let mut st = bits32_state(cr3);
    st.cr4 |= ctl::CR4_PAE;
    st.efer = ctl::EFER_NXE;
    st
}

/// PDPT at 0x1020 (32-byte aligned, not page aligned): PDPTE 1 -> PD 0x3000; PDE 2 -> PT
/// 0x4000, PTE 5 -> 0x80_0000; PDE 3: 2 MiB page at 0x120_0000.
fn pae_tables() -> (GuestRam, CpuState) {
    let mut m = ram();
    w64(&mut m, 0x1028, 0x3000 | P);
    w64(&mut m, 0x3000 + 16, 0x4000 | PWU);
    w64(&mut m, 0x3000 + 24, 0x120_0000 | PWU | PTE_PS);
    w64(&mut m, 0x4000 + 40, 0x80_0000 | PWU);
    (m, pae_state(0x1020))
}

#[test]
fn pae_pdpte_load_checks_reserved_bits() {
    let (mut m, st) = pae_tables();
    assert_eq!(load_pdptes(&m, &st), Ok([0, 0x3000 | P, 0, 0]));
    for bad in [1u64 << 1, 1 << 2, 1 << 5, 1 << 8, 1 << 40, PTE_NX] {
        w64(&mut m, 0x1030, 0x5000 | P | bad);
        assert_eq!(load_pdptes(&m, &st), Err(Fault::GP0), "{bad:#x}");
    }
    // Not present: the other bits are free.
    w64(&mut m, 0x1030, 0x5000 | PTE_NX | 1 << 5);
    assert!(load_pdptes(&m, &st).is_ok());
}

#[test]
fn pae_4k_2m_nx_and_reserved() {
    let (mut m, mut st) = pae_tables();
    let pd = load_pdptes(&m, &st).unwrap();
    let go = |m: &mut GuestRam, st: &CpuState, lin, a, p| {
        walk(m, st, Some(&pd), lin, a, p).map(|t| t.phys_page | (lin & 0xfff))
    };
    let base = 0x4000_0000u64;
    assert_eq!(
        go(&mut m, &st, base + 0x40_5123, Access::Write, Priv::User),
        Ok(0x80_0123)
    );
    assert_eq!(r64(&m, 0x3010), 0x4000 | PWU | PTE_A, "PDE: A only");
    assert_eq!(r64(&m, 0x4028), 0x80_0000 | PWU | PTE_A | PTE_D);
    assert_eq!(r64(&m, 0x1028), 0x3000 | P, "PDPTEs get no accessed bit");
    let t = walk(
        &mut m,
        &st,
        Some(&pd),
        base + 0x61_2345,
        Access::Read,
        Priv::User,
    )
    .unwrap();
    assert_eq!((t.phys_page, t.page_bits), (0x121_2000, 21));
    // PDPTE 0 not present.
    assert_eq!(
        pf_code(go(&mut m, &st, 0x1000, Access::Read, Priv::Supervisor)),
        0
    );
    // NX.
    w64(&mut m, 0x4028, 0x80_0000 | PWU | PTE_NX);
    assert_eq!(
        pf_code(go(&mut m, &st, base + 0x40_5000, Access::Exec, Priv::User)),
        pf::PRESENT | pf::USER | pf::FETCH
    );
    st.efer = 0;
    assert_eq!(
        pf_code(go(&mut m, &st, base + 0x40_5000, Access::Read, Priv::User)),
        pf::PRESENT | pf::USER | pf::RSVD
    );
    // Bits 62:MAXPHYADDR are reserved in PAE entries (unlike 4-level bits 62:52).
    w64(&mut m, 0x4028, 0x80_0000 | PWU | 1 << 55);
    assert_eq!(
        pf_code(go(
            &mut m,
            &st,
            base + 0x40_5000,
            Access::Read,
            Priv::Supervisor
        )),
        pf::PRESENT | pf::RSVD
    );
    w64(&mut m, 0x3018, 0x120_0000 | PWU | PTE_PS | 1 << 20);
    assert_eq!(
        pf_code(go(
            &mut m,
            &st,
            base + 0x60_0000,
            Access::Read,
            Priv::Supervisor
        )),
        pf::PRESENT | pf::RSVD
    );
}

#[test]
fn pae_walk_uses_cached_pdptes() {
    let (mut m, st) = pae_tables();
    let mut tlb = Tlb::default();
    tlb.set_pdptes(Some(load_pdptes(&m, &st).unwrap()));
    // The guest rewrites the PDPT without reloading CR3: the registers keep the old value.
    w64(&mut m, 0x1028, 0);
    let t = translate(&mut m, &st, &mut tlb, 0x4040_5000, Access::Read, Priv::User).unwrap();
    assert_eq!(t.phys_page, 0x80_0000);
    assert!(walk(&mut m, &st, None, 0x4040_5000, Access::Read, Priv::User).is_err());
    // No cached registers: loaded (and kept) at the walk.
    tlb.set_pdptes(None);
    assert!(translate(&mut m, &st, &mut tlb, 0x4040_5000, Access::Read, Priv::User).is_err());
    assert_eq!(tlb.pdptes(), Some([0; 4]));
}

// ----- TLB -----

fn t4k(phys: u64, global: bool) -> Translation {
    Translation {
        phys_page: phys,
        page_bits: 12,
        global,
        user_page: true,
        cacheable: true,
    }
}

#[test]
fn tlb_global_entries_survive_cr3_flush() {
    let mut tlb = Tlb::default();
    tlb.insert_translation(0x1000, Access::Read, &t4k(0x5000, true));
    tlb.insert_translation(0x2000, Access::Read, &t4k(0x6000, false));
    tlb.insert_translation(0x2000, Access::Exec, &t4k(0x6000, false));
    tlb.flush_non_global();
    assert_eq!(tlb.lookup(0x1234, Access::Read), Some(0x5000));
    assert_eq!(tlb.lookup(0x2000, Access::Read), None);
    assert_eq!(tlb.lookup(0x2000, Access::Exec), None);
    // INVLPG drops global entries too.
    tlb.invalidate_page(0x1fff);
    assert_eq!(tlb.lookup(0x1000, Access::Read), None);
    tlb.insert_translation(0x1000, Access::Write, &t4k(0x5000, true));
    tlb.flush();
    assert_eq!(tlb.lookup(0x1000, Access::Write), None);
}

#[test]
fn tlb_invlpg_of_a_large_page_drops_all_its_pieces() {
    let mut tlb = Tlb::default();
    let big = |p| Translation {
        page_bits: 21,
        ..t4k(p, false)
    };
    tlb.insert_translation(0x20_0000, Access::Read, &big(0x120_0000));
    tlb.insert_translation(0x3f_f000, Access::Read, &big(0x13f_f000));
    tlb.insert_translation(0x40_0000, Access::Read, &big(0x140_0000));
    tlb.insert_translation(0x20_1000, Access::Write, &t4k(0x9000, false));
    tlb.invalidate_page(0x2a_b000);
    assert_eq!(tlb.lookup(0x20_0000, Access::Read), None);
    assert_eq!(tlb.lookup(0x3f_f000, Access::Read), None);
    assert_eq!(tlb.lookup(0x40_0000, Access::Read), Some(0x140_0000));
    assert_eq!(tlb.lookup(0x20_1000, Access::Write), Some(0x9000));
}

#[test]
fn tlb_sets_per_privilege() {
    let mut tlb = Tlb::default();
    tlb.insert_translation(0x1000, Access::Read, &t4k(0x5000, false));
    let e0 = tlb.exec_epoch();
    tlb.set_user(true);
    assert_ne!(tlb.exec_epoch(), e0);
    assert_eq!(tlb.lookup(0x1000, Access::Read), None);
    tlb.insert_translation(0x1000, Access::Read, &t4k(0x7000, false));
    tlb.set_user(false);
    assert_eq!(tlb.lookup(0x1000, Access::Read), Some(0x5000));
    // Flushes and INVLPG reach both sets.
    tlb.invalidate_page(0x1000);
    tlb.set_user(true);
    assert_eq!(tlb.lookup(0x1000, Access::Read), None);
}

// ----- through Ctx and the interpreter -----

use crate::cpu::ExitReason;
use crate::ctx::Ctx;
use crate::state::sreg;
use crate::testkit_sys::SysMachine;

#[test]
fn tlb_hit_from_cpl0_does_not_leak_to_cpl3() {
    let mut sm = SysMachine::new(32);
    let (m, _) = long_tables();
    let mut tables = vec![0u8; 0x5000];
    m.read_phys(0, &mut tables).unwrap();
    sm.load(0, &tables);
    sm.start_long(PML4, 0);
    // A supervisor-only page.
    sm.ram.write_u64(PT + 5 * 8, 0x80_0000 | P | RW).unwrap();
    sm.ram.write_u64(0x80_0000, 0x1122).unwrap();
    let mut ctx = Ctx::new(&mut sm.cpu, &mut sm.ram, &mut sm.bus);
    assert_eq!(ctx.read(0x40_5000, 8), Ok(0x1122));
    assert_eq!(ctx.cpu.tlb.lookup(0x40_5000, Access::Read), Some(0x80_0000));
    ctx.cpu.state.seg[sreg::CS].selector |= 3;
    ctx.sync_tlb_privilege();
    assert_eq!(
        ctx.read(0x40_5000, 8),
        Err(Fault::PageFault {
            addr: 0x40_5000,
            code: pf::PRESENT | pf::USER
        })
    );
    // Back at CPL 0 the supervisor entry is still there.
    ctx.cpu.state.seg[sreg::CS].selector &= !3;
    ctx.sync_tlb_privilege();
    assert_eq!(ctx.cpu.tlb.lookup(0x40_5000, Access::Read), Some(0x80_0000));
}

#[test]
fn smap_supervisor_access_with_ac_is_not_cached() {
    let mut sm = SysMachine::new(32);
    let (m, _) = long_tables();
    let mut tables = vec![0u8; 0x5000];
    m.read_phys(0, &mut tables).unwrap();
    sm.load(0, &tables);
    sm.start_long(PML4, 0);
    sm.cpu.state.cr4 |= ctl::CR4_SMAP;
    sm.cpu.state.rflags |= flags::AC;
    let mut ctx = Ctx::new(&mut sm.cpu, &mut sm.ram, &mut sm.bus);
    assert_eq!(ctx.read(0x40_5000, 4), Ok(0));
    ctx.cpu.state.rflags &= !flags::AC;
    assert_eq!(
        ctx.read(0x40_5000, 4),
        Err(Fault::PageFault {
            addr: 0x40_5000,
            code: pf::PRESENT
        })
    );
}

#[test]
fn protected_mode_program_with_32bit_paging() {
    let mut sm = SysMachine::new(8);
    // PD at 0x1000: PDE 0 = 4 MiB identity page; PDE 0x200 (lin 0x8000_0000) -> PT 0x2000,
    // PTE 0 -> physical 0x20_0000.
    sm.load(0x1000, &(0x83u32 | 0x20).to_le_bytes()); // P, RW, PS, A
    sm.load(0x1000 + 0x200 * 4, &0x2003u32.to_le_bytes());
    sm.load(0x2000, &0x20_0003u32.to_le_bytes());
    // mov dword [0x80000010], 0x12345678 ; mov eax, [0x80000010] ; hlt
    let code = [
        0xc7, 0x05, 0x10, 0x00, 0x00, 0x80, 0x78, 0x56, 0x34, 0x12, 0xa1, 0x10, 0x00, 0x00, 0x80,
        0xf4,
    ];
    sm.load(0x10_0000, &code);
    sm.start_protected_flat(0x10_0000);
    sm.cpu.state.cr0 |= ctl::CR0_PG;
    sm.cpu.state.cr3 = 0x1000;
    sm.cpu.state.cr4 |= CR4_PSE;
    let e = sm.run(10);
    assert_eq!(e.reason, ExitReason::Halt);
    assert_eq!(sm.cpu.state.gpr[0], 0x1234_5678);
    assert_eq!(r32(&sm.ram, 0x20_0010), 0x1234_5678);
    assert_eq!(
        r32(&sm.ram, 0x2000),
        0x20_0003 | 0x60,
        "PTE accessed and dirty"
    );
    assert_eq!(r32(&sm.ram, 0x1800), 0x2003 | 0x20, "PDE accessed only");
    assert_eq!(r32(&sm.ram, 0x1000), 0xa3, "code page: accessed, not dirty");
}

#[test]
fn protected_mode_program_with_pae_paging_faults_exactly() {
    let mut sm = SysMachine::new(8);
    // PDPT at 0x1000; PDPTE 0 -> PD 0x2000; PDE 0: 2 MiB identity page (supervisor);
    // PDE 1 -> PT 0x3000 with PTE 0 read-only.
    sm.ram.write_u64(0x1000, 0x2001).unwrap();
    sm.ram.write_u64(0x2000, 0x83).unwrap();
    sm.ram.write_u64(0x2008, 0x3003).unwrap();
    sm.ram.write_u64(0x3000, 0x40_0001).unwrap();
    // mov eax, [0x200010] ; mov [0x200010], eax ; hlt
    let code = [
        0xa1, 0x10, 0x00, 0x20, 0x00, 0xa3, 0x10, 0x00, 0x20, 0x00, 0xf4,
    ];
    sm.load(0x10_0000, &code);
    sm.start_protected_flat(0x10_0000);
    sm.cpu.state.cr0 |= ctl::CR0_PG | ctl::CR0_WP;
    sm.cpu.state.cr3 = 0x1000;
    sm.cpu.state.cr4 |= ctl::CR4_PAE;
    sm.ram.write_u64(0x40_0010, 0x55).unwrap();
    let e = sm.run(10);
    assert_eq!(e.retired, 1);
    assert_eq!(
        e.reason,
        ExitReason::Exception(Fault::PageFault {
            addr: 0x20_0010,
            code: pf::PRESENT | pf::WRITE
        })
    );
    assert_eq!(sm.cpu.state.rip, 0x10_0005);
    assert_eq!(sm.cpu.state.gpr[0], 0x55);
    assert!(
        sm.cpu.tlb.pdptes().is_some(),
        "loaded lazily at the first walk"
    );
}

#[test]
fn long_mode_program_with_large_pages() {
    let mut sm = SysMachine::new(32);
    // PML4E 0 -> PDPT 0x2000; PDPTE 0 -> PD 0x3000 (PDE 0: 2 MiB identity, code);
    // PDPTE 1: 1 GiB page at physical 0 (so lin 0x4000_0000 + x -> x).
    sm.ram.write_u64(0x1000, 0x2003).unwrap();
    sm.ram.write_u64(0x2000, 0x3003).unwrap();
    sm.ram.write_u64(0x2008, 0x83).unwrap();
    sm.ram.write_u64(0x3000, 0x83).unwrap();
    // mov rax, 0x40100000 ; mov qword [rax], 7 ; mov rbx, [rax] ; hlt
    let code = [
        0x48, 0xc7, 0xc0, 0x00, 0x00, 0x10, 0x40, 0x48, 0xc7, 0x00, 0x07, 0x00, 0x00, 0x00, 0x48,
        0x8b, 0x18, 0xf4,
    ];
    sm.load(0x8000, &code);
    sm.start_long(0x1000, 0x8000);
    let e = sm.run(10);
    assert_eq!(e.reason, ExitReason::Halt);
    assert_eq!(sm.cpu.state.gpr[3], 7);
    assert_eq!(r64(&sm.ram, 0x10_0000), 7);
    assert_eq!(r64(&sm.ram, 0x2008), 0x83 | PTE_A | PTE_D);
    assert_eq!(r64(&sm.ram, 0x3000), 0x83 | PTE_A);
}
