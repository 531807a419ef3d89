//! ACPI tables the machine hands to kernels: RSDP, RSDT/XSDT, FADT (PM1 ports for S5 power-off, reset register), FACS, DSDT with `_S5`, MADT.
//!
//! The tables describe exactly the devices the machine has (docs/devices.md): the ACPI PM
//! block at [`PM_BASE`], the i8042 reset, one local APIC per vCPU at 0xfee00000 and the I/O
//! APIC at 0xfec00000, with the ISA overrides a PC has (IRQ0 → GSI 2, SCI on GSI 9 level).

use super::e820::ACPI_BASE;

/// ACPI PM I/O block: PM1a event (status+enable, 4 bytes), PM1a control (2 bytes), PM timer
/// (4 bytes), at the addresses QEMU's PIIX4 uses.
pub const PM_BASE: u16 = 0x600;
pub const PM1A_EVT: u16 = PM_BASE;
pub const PM1A_CNT: u16 = PM_BASE + 4;
pub const PM_TMR: u16 = PM_BASE + 8;
/// SCI interrupt (ISA IRQ 9, level-triggered, active high).
pub const SCI_IRQ: u16 = 9;
/// Sleep type the DSDT's `_S5` object gives for soft-off; the PM1 control register powers
/// the machine off when SLP_EN is written with this SLP_TYP.
pub const S5_SLP_TYP: u8 = crate::devices::acpi_pm::S5_SLP_TYP;
/// Reset register: the PIIX reset control port (0xCF9), "hard reset" value.
pub const RESET_PORT: u16 = 0xcf9;
pub const RESET_VALUE: u8 = 0x06;
pub const LAPIC_BASE: u32 = 0xfee0_0000;
pub const IOAPIC_BASE: u32 = 0xfec0_0000;

const OEM_ID: &[u8; 6] = b"LCKSTP";
const OEM_TABLE: &[u8; 8] = b"LOCKSTEP";

/// The built tables: bytes to copy to [`ACPI_BASE`] and the RSDP's physical address.
pub struct AcpiTables {
    pub base: u64,
    pub bytes: Vec<u8>,
    pub rsdp: u64,
}

fn checksum(b: &[u8]) -> u8 {
    0u8.wrapping_sub(b.iter().fold(0u8, |a, &x| a.wrapping_add(x)))
}

/// A table under construction: header filled in by [`finish`].
fn header(sig: &[u8; 4], revision: u8) -> Vec<u8> {
    let mut t = Vec::with_capacity(64);
    t.extend_from_slice(sig);
    t.extend_from_slice(&0u32.to_le_bytes()); // length, patched
    t.push(revision);
    t.push(0); // checksum, patched
    t.extend_from_slice(OEM_ID);
    t.extend_from_slice(OEM_TABLE);
    t.extend_from_slice(&1u32.to_le_bytes()); // OEM revision
    t.extend_from_slice(b"LKSP"); // creator ID
    t.extend_from_slice(&1u32.to_le_bytes()); // creator revision
    t
}

fn finish(mut t: Vec<u8>) -> Vec<u8> {
    let len = t.len() as u32;
    t[4..8].copy_from_slice(&len.to_le_bytes());
    t[9] = 0;
    t[9] = checksum(&t);
    t
}

/// Generic Address Structure for an I/O port register.
fn gas_io(port: u16, bits: u8, access: u8) -> [u8; 12] {
    let mut g = [0u8; 12];
    g[0] = 1; // system I/O space
    g[1] = bits;
    g[2] = 0;
    g[3] = access;
    g[4..12].copy_from_slice(&(port as u64).to_le_bytes());
    g
}

fn put_u32(t: &mut [u8], off: usize, v: u32) {
    t[off..off + 4].copy_from_slice(&v.to_le_bytes());
}

fn put_u64(t: &mut [u8], off: usize, v: u64) {
    t[off..off + 8].copy_from_slice(&v.to_le_bytes());
}

fn fadt(dsdt: u64, facs: u64) -> Vec<u8> {
    let mut t = header(b"FACP", 6);
    t.resize(276, 0);
    put_u32(&mut t, 36, facs as u32);
    put_u32(&mut t, 40, dsdt as u32);
    t[45] = 0; // preferred PM profile: unspecified
    t[46..48].copy_from_slice(&SCI_IRQ.to_le_bytes());
    // SMI_CMD = 0: the machine is always in ACPI mode (PM1 control reads SCI_EN = 1).
    put_u32(&mut t, 56, PM1A_EVT as u32);
    put_u32(&mut t, 64, PM1A_CNT as u32);
    put_u32(&mut t, 76, PM_TMR as u32);
    t[88] = 4; // PM1_EVT_LEN
    t[89] = 2; // PM1_CNT_LEN
    t[91] = 4; // PM_TMR_LEN
    t[96..98].copy_from_slice(&101u16.to_le_bytes()); // C2 not supported
    t[98..100].copy_from_slice(&1001u16.to_le_bytes()); // C3 not supported
    t[108] = 0x32; // CMOS century register
                   // IAPC_BOOT_ARCH: legacy devices, VGA not present, MSI not supported. The 8042 flag is
                   // clear: the machine's i8042 serves only the reset line and has no keyboard or mouse
                   // behind it, and a kernel that probes those ports waits on command timeouts (Linux's
                   // atkbd/psmouse probes stall shutdown by many seconds of virtual time).
    t[109..111].copy_from_slice(&0b1101u16.to_le_bytes());
    // Flags: WBINVD, PROC_C1, PWR_BUTTON and SLP_BUTTON absent (control method / none),
    // RESET_REG_SUP. TMR_VAL_EXT stays clear: the PM timer is 24 bits wide.
    let flags: u32 = 1 | (1 << 2) | (1 << 4) | (1 << 5) | (1 << 10);
    put_u32(&mut t, 112, flags);
    t[116..128].copy_from_slice(&gas_io(RESET_PORT, 8, 1));
    t[128] = RESET_VALUE;
    t[131] = 0; // FADT minor version
    put_u64(&mut t, 132, facs);
    put_u64(&mut t, 140, dsdt);
    t[148..160].copy_from_slice(&gas_io(PM1A_EVT, 32, 2));
    t[172..184].copy_from_slice(&gas_io(PM1A_CNT, 16, 2));
    t[208..220].copy_from_slice(&gas_io(PM_TMR, 32, 3));
    finish(t)
}

fn facs() -> Vec<u8> {
    let mut t = vec![0u8; 64];
    t[0..4].copy_from_slice(b"FACS");
    put_u32(&mut t, 4, 64);
    t[32] = 2; // version
    t
}

/// DSDT: only `Name (_S5, Package () { 5, 0, 0, 0 })` — soft-off is the one sleep state the
/// machine implements.
fn dsdt() -> Vec<u8> {
    let mut t = header(b"DSDT", 2);
    t.extend_from_slice(&[
        0x08, b'_', b'S', b'5', b'_', // NameOp "_S5_"
        0x12, 0x07, 0x04, // PackageOp, PkgLength 7, 4 elements
        0x0a, S5_SLP_TYP, // BytePrefix 5 (SLP_TYPa)
        0x00, 0x00, 0x00, // Zero, Zero, Zero
    ]);
    finish(t)
}

fn madt(cpus: u8) -> Vec<u8> {
    let mut t = header(b"APIC", 4);
    t.extend_from_slice(&LAPIC_BASE.to_le_bytes());
    t.extend_from_slice(&1u32.to_le_bytes()); // PCAT_COMPAT: 8259s present
    for id in 0..cpus {
        t.extend_from_slice(&[0, 8, id, id]);
        t.extend_from_slice(&1u32.to_le_bytes()); // enabled
    }
    // I/O APIC: ID = number of CPUs (distinct from every LAPIC ID), GSI base 0.
    t.extend_from_slice(&[1, 12, cpus, 0]);
    t.extend_from_slice(&IOAPIC_BASE.to_le_bytes());
    t.extend_from_slice(&0u32.to_le_bytes());
    // ISA IRQ 0 (PIT) is wired to GSI 2; flags 0 = bus default (edge, high).
    t.extend_from_slice(&[2, 10, 0, 0]);
    t.extend_from_slice(&2u32.to_le_bytes());
    t.extend_from_slice(&0u16.to_le_bytes());
    // SCI: GSI 9, level-triggered (0b11 << 2), active high (0b01).
    t.extend_from_slice(&[2, 10, 0, SCI_IRQ as u8]);
    t.extend_from_slice(&(SCI_IRQ as u32).to_le_bytes());
    t.extend_from_slice(&0x000du16.to_le_bytes());
    // LINT1 of every processor is NMI.
    t.extend_from_slice(&[4, 6, 0xff]);
    t.extend_from_slice(&0u16.to_le_bytes());
    t.push(1);
    finish(t)
}

fn align(v: &mut Vec<u8>, a: usize) {
    while !v.len().is_multiple_of(a) {
        v.push(0);
    }
}

/// Build every table for a machine with `cpus` vCPUs, laid out from [`ACPI_BASE`].
pub fn build(cpus: u8) -> AcpiTables {
    let base = ACPI_BASE;
    let mut out = vec![0u8; 36]; // RSDP placeholder at offset 0
    align(&mut out, 64);
    let facs_off = out.len();
    out.extend_from_slice(&facs());
    align(&mut out, 16);
    let dsdt_off = out.len();
    out.extend_from_slice(&dsdt());
    align(&mut out, 16);
    let fadt_off = out.len();
    out.extend_from_slice(&fadt(base + dsdt_off as u64, base + facs_off as u64));
    align(&mut out, 16);
    let madt_off = out.len();
    out.extend_from_slice(&madt(cpus.max(1)));
    align(&mut out, 16);
    let tables = [fadt_off, madt_off];
    let rsdt_off = out.len();
    let mut rsdt = header(b"RSDT", 1);
    for &o in &tables {
        rsdt.extend_from_slice(&((base + o as u64) as u32).to_le_bytes());
    }
    out.extend_from_slice(&finish(rsdt));
    align(&mut out, 16);
    let xsdt_off = out.len();
    let mut xsdt = header(b"XSDT", 1);
    for &o in &tables {
        xsdt.extend_from_slice(&(base + o as u64).to_le_bytes());
    }
    out.extend_from_slice(&finish(xsdt));

    let mut rsdp = [0u8; 36];
    rsdp[0..8].copy_from_slice(b"RSD PTR ");
    rsdp[9..15].copy_from_slice(OEM_ID);
    rsdp[15] = 2; // ACPI 2.0+
    put_u32(&mut rsdp, 16, (base + rsdt_off as u64) as u32);
    put_u32(&mut rsdp, 20, 36);
    put_u64(&mut rsdp, 24, base + xsdt_off as u64);
    rsdp[8] = checksum(&rsdp[..20]);
    rsdp[32] = checksum(&rsdp);
    out[..36].copy_from_slice(&rsdp);
    AcpiTables {
        base,
        bytes: out,
        rsdp: base,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sum(b: &[u8]) -> u8 {
        b.iter().fold(0u8, |a, &x| a.wrapping_add(x))
    }

    fn table_at(t: &AcpiTables, phys: u64) -> &[u8] {
        let off = (phys - t.base) as usize;
        let len = u32::from_le_bytes(t.bytes[off + 4..off + 8].try_into().unwrap()) as usize;
        &t.bytes[off..off + len]
    }

    #[test]
    fn checksums_and_links_are_valid() {
        let t = build(1);
        assert!(t.bytes.len() as u64 <= super::super::e820::ACPI_SIZE);
        let rsdp = &t.bytes[..36];
        assert_eq!(&rsdp[..8], b"RSD PTR ");
        assert_eq!(sum(&rsdp[..20]), 0);
        assert_eq!(sum(rsdp), 0);
        let xsdt_addr = u64::from_le_bytes(rsdp[24..32].try_into().unwrap());
        let xsdt = table_at(&t, xsdt_addr);
        assert_eq!(&xsdt[..4], b"XSDT");
        assert_eq!(sum(xsdt), 0);
        let mut sigs = Vec::new();
        for e in xsdt[36..].chunks(8) {
            let a = u64::from_le_bytes(e.try_into().unwrap());
            let tb = table_at(&t, a);
            assert_eq!(sum(tb), 0, "{:?}", &tb[..4]);
            sigs.push(tb[..4].to_vec());
            if &tb[..4] == b"FACP" {
                assert_eq!(tb.len(), 276);
                let dsdt = u64::from_le_bytes(tb[140..148].try_into().unwrap());
                let d = table_at(&t, dsdt);
                assert_eq!(&d[..4], b"DSDT");
                assert_eq!(sum(d), 0);
                assert!(d.windows(4).any(|w| w == b"_S5_"));
                let facs = u64::from_le_bytes(tb[132..140].try_into().unwrap());
                assert_eq!(facs % 64, 0);
            }
        }
        assert_eq!(sigs, vec![b"FACP".to_vec(), b"APIC".to_vec()]);
    }

    #[test]
    fn madt_lists_each_cpu() {
        let t = build(4);
        let xsdt_addr = u64::from_le_bytes(t.bytes[24..32].try_into().unwrap());
        let xsdt = table_at(&t, xsdt_addr);
        let madt_addr = u64::from_le_bytes(xsdt[44..52].try_into().unwrap());
        let m = table_at(&t, madt_addr);
        let mut off = 44;
        let mut lapics = 0;
        while off < m.len() {
            let (ty, len) = (m[off], m[off + 1] as usize);
            assert!(len >= 2);
            if ty == 0 {
                assert_eq!(m[off + 3], lapics);
                lapics += 1;
            }
            off += len;
        }
        assert_eq!(off, m.len());
        assert_eq!(lapics, 4);
    }
}
