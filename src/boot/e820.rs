//! The e820 memory map the machine reports to kernels (boot_params, multiboot mmap) and the fixed physical layout it implies.

/// e820 entry types.
pub const E820_RAM: u32 = 1;
pub const E820_RESERVED: u32 = 2;
pub const E820_ACPI: u32 = 3;

/// Start of the BIOS extended data area (reserved up to 640 KiB).
pub const EBDA_START: u64 = 0x9_fc00;
/// The BIOS area: ACPI tables live in 0xE0000..0xF0000, the rest is reserved like a ROM.
pub const BIOS_START: u64 = 0xe_0000;
pub const BIOS_END: u64 = 0x10_0000;
/// Where the ACPI tables are written (inside the BIOS area, so scanners find the RSDP).
pub const ACPI_BASE: u64 = 0xe_0000;
/// Size reserved for the ACPI tables.
pub const ACPI_SIZE: u64 = 0x1_0000;

/// One e820 range.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct E820Entry {
    pub addr: u64,
    pub size: u64,
    pub kind: u32,
}

/// The map for `ram` bytes of RAM starting at physical 0: low memory below the EBDA, the EBDA
/// and BIOS area reserved (ACPI tables marked as ACPI data), everything from 1 MiB usable.
pub fn memory_map(ram: u64) -> Vec<E820Entry> {
    vec![
        E820Entry {
            addr: 0,
            size: EBDA_START,
            kind: E820_RAM,
        },
        E820Entry {
            addr: EBDA_START,
            size: 0xa_0000 - EBDA_START,
            kind: E820_RESERVED,
        },
        E820Entry {
            addr: ACPI_BASE,
            size: ACPI_SIZE,
            kind: E820_ACPI,
        },
        E820Entry {
            addr: ACPI_BASE + ACPI_SIZE,
            size: BIOS_END - (ACPI_BASE + ACPI_SIZE),
            kind: E820_RESERVED,
        },
        E820Entry {
            addr: BIOS_END,
            size: ram.saturating_sub(BIOS_END),
            kind: E820_RAM,
        },
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn map_covers_ram_without_overlap() {
        let m = memory_map(256 << 20);
        let mut end = 0;
        for e in &m {
            assert!(e.addr >= end, "{e:?} overlaps");
            end = e.addr + e.size;
        }
        assert_eq!(end, 256 << 20);
        let usable: u64 = m
            .iter()
            .filter(|e| e.kind == E820_RAM)
            .map(|e| e.size)
            .sum();
        assert_eq!(usable, EBDA_START + (256 << 20) - BIOS_END);
    }
}
