//! The synthetic CPU model that CPUID reports: fixed constants, identical on every host (the host's
//! own CPUID is never consulted). docs/cpuid.md lists every leaf and bit and why it is set.

use crate::mmu::MAX_PHYS_BITS;
use crate::ops::xsave;
use crate::state::{ctl, CpuState};

/// The four output registers of one CPUID query.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct CpuidResult {
    pub eax: u32,
    pub ebx: u32,
    pub ecx: u32,
    pub edx: u32,
}

const fn r(eax: u32, ebx: u32, ecx: u32, edx: u32) -> CpuidResult {
    CpuidResult { eax, ebx, ecx, edx }
}

/// Highest basic leaf (leaf 0 EAX).
pub const MAX_BASIC_LEAF: u32 = 0x1f;
/// Highest extended leaf (leaf 0x8000_0000 EAX).
pub const MAX_EXT_LEAF: u32 = 0x8000_0008;
/// Vendor string (leaf 0: EBX, EDX, ECX).
pub const VENDOR: &[u8; 12] = b"GenuineIntel";
/// Processor brand string (leaves 0x8000_0002..4), NUL-padded to 48 bytes.
pub const BRAND: &str = "Lockstep Virtual CPU";
/// Family 6, model 0x5E (extended model 5, model 0xE), stepping 3: a Skylake client signature.
pub const SIGNATURE: u32 = 0x0005_06e3;
/// TSC frequency: 1 GHz, so that one retired instruction is one nanosecond of TSC.
pub const TSC_HZ: u64 = 1_000_000_000;
/// Core crystal clock (leaf 0x15 ECX). Linux also takes the local APIC timer rate from it.
pub const CRYSTAL_HZ: u32 = 25_000_000;
/// Cache line size in bytes.
pub const LINE: u32 = 64;

/// Feature bits, named after the SDM.
pub mod bits {
    // Leaf 1 EDX.
    pub const FPU: u32 = 1 << 0;
    pub const DE: u32 = 1 << 2;
    pub const PSE: u32 = 1 << 3;
    pub const TSC: u32 = 1 << 4;
    pub const MSR: u32 = 1 << 5;
    pub const PAE: u32 = 1 << 6;
    pub const CX8: u32 = 1 << 8;
    pub const APIC: u32 = 1 << 9;
    pub const SEP: u32 = 1 << 11;
    pub const MTRR: u32 = 1 << 12;
    pub const PGE: u32 = 1 << 13;
    pub const CMOV: u32 = 1 << 15;
    pub const PAT: u32 = 1 << 16;
    pub const CLFSH: u32 = 1 << 19;
    pub const MMX: u32 = 1 << 23;
    pub const FXSR: u32 = 1 << 24;
    pub const SSE: u32 = 1 << 25;
    pub const SSE2: u32 = 1 << 26;
    pub const HTT: u32 = 1 << 28;
    // Leaf 1 ECX.
    pub const SSE3: u32 = 1 << 0;
    pub const SSSE3: u32 = 1 << 9;
    pub const FMA: u32 = 1 << 12;
    pub const CX16: u32 = 1 << 13;
    pub const SSE4_1: u32 = 1 << 19;
    pub const SSE4_2: u32 = 1 << 20;
    pub const X2APIC: u32 = 1 << 21;
    pub const MOVBE: u32 = 1 << 22;
    pub const POPCNT: u32 = 1 << 23;
    pub const AES: u32 = 1 << 25;
    pub const XSAVE: u32 = 1 << 26;
    pub const OSXSAVE: u32 = 1 << 27;
    pub const AVX: u32 = 1 << 28;
    pub const F16C: u32 = 1 << 29;
    pub const RDRAND: u32 = 1 << 30;
    pub const HYPERVISOR: u32 = 1 << 31;
    pub const TSC_DEADLINE: u32 = 1 << 24;
    // Leaf 7 subleaf 0 EBX (more below).
    pub const FSGSBASE: u32 = 1 << 0;
    pub const SMEP: u32 = 1 << 7;
    pub const SMAP: u32 = 1 << 20;
    // Leaf 6 EAX.
    pub const ARAT: u32 = 1 << 2;
    // Leaf 7 subleaf 0 EBX.
    pub const BMI1: u32 = 1 << 3;
    pub const AVX2: u32 = 1 << 5;
    pub const BMI2: u32 = 1 << 8;
    pub const ERMS: u32 = 1 << 9;
    pub const RDSEED: u32 = 1 << 18;
    pub const ADX: u32 = 1 << 19;
    pub const CLFLUSHOPT: u32 = 1 << 23;
    // Leaf 7 subleaf 0 EDX.
    pub const ARCH_CAPABILITIES: u32 = 1 << 29;
    // Leaf 0xD subleaf 1 EAX.
    pub const XSAVEOPT: u32 = 1 << 0;
    pub const XSAVEC: u32 = 1 << 1;
    pub const XGETBV_ECX1: u32 = 1 << 2;
    pub const XSAVES: u32 = 1 << 3;
    // Leaf 0x8000_0001 ECX.
    pub const LAHF_SAHF: u32 = 1 << 0;
    pub const LZCNT: u32 = 1 << 5;
    // Leaf 0x8000_0001 EDX.
    pub const SYSCALL: u32 = 1 << 11;
    pub const NX: u32 = 1 << 20;
    pub const PAGE1GB: u32 = 1 << 26;
    pub const RDTSCP: u32 = 1 << 27;
    pub const LM: u32 = 1 << 29;
    // Leaf 0x8000_0007 EDX.
    pub const INVARIANT_TSC: u32 = 1 << 8;
}

use bits::*;

/// Leaf 1 EDX.
pub const LEAF1_EDX: u32 = FPU
    | DE
    | PSE
    | TSC
    | MSR
    | PAE
    | CX8
    | APIC
    | SEP
    | MTRR
    | PGE
    | CMOV
    | PAT
    | CLFSH
    | MMX
    | FXSR
    | SSE
    | SSE2;
/// Leaf 1 ECX (OSXSAVE is added from CR4, see [`query`]).
pub const LEAF1_ECX: u32 = SSE3
    | SSSE3
    | FMA
    | CX16
    | SSE4_1
    | SSE4_2
    | MOVBE
    | POPCNT
    | TSC_DEADLINE
    | XSAVE
    | AVX
    | F16C
    | RDRAND;
/// Leaf 7 subleaf 0 EBX.
pub const LEAF7_EBX: u32 = FSGSBASE | BMI1 | AVX2 | SMEP | BMI2 | ERMS | RDSEED | ADX | SMAP;
/// Leaf 7 subleaf 0 EDX: the IA32_ARCH_CAPABILITIES MSR, which says which speculative-execution
/// weaknesses the processor does not have (all of them: see `ops::msr::ARCH_CAPABILITIES_VALUE`).
pub const LEAF7_EDX: u32 = ARCH_CAPABILITIES;
/// Leaf 0xD subleaf 1 EAX: XSAVEOPT, XSAVEC and XGETBV with ECX = 1; no XSAVES.
pub const LEAFD1_EAX: u32 = XSAVEOPT | XSAVEC | XGETBV_ECX1;

/// The parts of the vCPU's current state that CPUID reports: CR4.OSXSAVE (leaf 1 ECX bit 27)
/// and XCR0 (leaf 0xD subleaf 0 EBX, the XSAVE area size for the enabled components).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct OsState {
    pub osxsave: bool,
    pub xcr0: u64,
}

impl OsState {
    /// After reset: CR4.OSXSAVE clear, XCR0 = x87.
    pub const RESET: OsState = OsState {
        osxsave: false,
        xcr0: 1,
    };

    /// Taken from a vCPU's state.
    pub fn of(st: &CpuState) -> Self {
        OsState {
            osxsave: st.cr4 & ctl::CR4_OSXSAVE != 0,
            xcr0: st.xcr0,
        }
    }
}

/// Leaf 0xD: processor extended state enumeration (x87, SSE, AVX; standard and compacted
/// forms share one layout).
fn xstate_leaf(subleaf: u32, os: OsState) -> CpuidResult {
    match subleaf {
        // Supported XCR0 bits (EDX:EAX), size for the current XCR0, size for all components.
        0 => r(
            xsave::XCR0_SUPPORTED as u32,
            xsave::area_size(os.xcr0),
            xsave::MAX_SIZE as u32,
            0,
        ),
        // EBX: size of the area for XCR0 | IA32_XSS in the compacted format. There is no
        // IA32_XSS (no XSAVES) and no component needs 64-byte alignment, so it equals the
        // standard size for XCR0 (Linux sizes its XSAVEC buffers from it).
        1 => r(LEAFD1_EAX, xsave::area_size(os.xcr0), 0, 0),
        // AVX: 256 bytes at offset 576; user state, no 64-byte alignment in compacted form.
        2 => r(256, xsave::AVX_OFFSET as u32, 0, 0),
        _ => r(0, 0, 0, 0),
    }
}
/// Leaf 0x8000_0001 ECX.
pub const EXT1_ECX: u32 = LAHF_SAHF | LZCNT;
/// Leaf 0x8000_0001 EDX.
pub const EXT1_EDX: u32 = SYSCALL | NX | PAGE1GB | RDTSCP | LM;

/// One level of the cache hierarchy, as leaf 4 describes it.
struct Cache {
    /// 1 data, 2 instruction, 3 unified.
    kind: u32,
    level: u32,
    ways: u32,
    sets: u32,
    /// Leaf 4 EDX: bit 1 inclusive, bit 2 complex indexing.
    edx: u32,
}

/// L1d 32 KiB 8-way, L1i 32 KiB 8-way, L2 1 MiB 16-way, L3 8 MiB 16-way, 64-byte lines.
const CACHES: [Cache; 4] = [
    Cache {
        kind: 1,
        level: 1,
        ways: 8,
        sets: 64,
        edx: 0,
    },
    Cache {
        kind: 2,
        level: 1,
        ways: 8,
        sets: 64,
        edx: 0,
    },
    Cache {
        kind: 3,
        level: 2,
        ways: 16,
        sets: 1024,
        edx: 0,
    },
    Cache {
        kind: 3,
        level: 3,
        ways: 16,
        sets: 8192,
        edx: 1 << 2,
    },
];

/// Leaf 4, subleaf `i`: deterministic cache parameters; subleaf 4 and above is the null entry.
fn cache_leaf(i: u32) -> CpuidResult {
    let Some(c) = CACHES.get(i as usize) else {
        return r(0, 0, 0, 0);
    };
    // EAX: type, level, self-initialising (bit 8); 25:14 = logical processors sharing the
    // cache - 1 (L1/L2: one core's threads, L3: the package), 31:26 = cores per package - 1.
    let sharing = if c.level == 3 {
        THREADS_PER_CORE * CORES_PER_PACKAGE
    } else {
        THREADS_PER_CORE
    };
    let eax = c.kind
        | (c.level << 5)
        | (1 << 8)
        | ((sharing - 1) << 14)
        | ((CORES_PER_PACKAGE - 1) << 26);
    // EBX: ways-1 (31:22), partitions-1 (21:12) = 0, line size-1 (11:0).
    let ebx = ((c.ways - 1) << 22) | (LINE - 1);
    r(eax, ebx, c.sets - 1, c.edx)
}

/// Logical processors (threads) per core. The SMP issue raises [`CORES_PER_PACKAGE`] to the
/// vCPU count; leaves 4, 0xB and 0x1F follow these two constants.
pub const THREADS_PER_CORE: u32 = 1;
/// Cores per package.
pub const CORES_PER_PACKAGE: u32 = 1;

/// Bits needed to number `n` items (x2APIC ID shift width): ceil(log2(n)).
const fn id_bits(n: u32) -> u32 {
    if n <= 1 {
        0
    } else {
        32 - (n - 1).leading_zeros()
    }
}

/// Leaves 0xB and 0x1F: the SMT level (type 1), the core level (type 2), then the invalid
/// level that ends the enumeration. EAX = x2APIC ID shift to the next level, EBX = logical
/// processors at this level, ECX = level type << 8 | level number, EDX = x2APIC ID.
fn topology_leaf(subleaf: u32, apic_id: u32) -> CpuidResult {
    let per_package = THREADS_PER_CORE * CORES_PER_PACKAGE;
    match subleaf {
        0 => r(
            id_bits(THREADS_PER_CORE),
            THREADS_PER_CORE,
            (1 << 8) | subleaf,
            apic_id,
        ),
        1 => r(
            id_bits(per_package),
            per_package,
            (2 << 8) | subleaf,
            apic_id,
        ),
        // Invalid level: EAX = EBX = 0, ECX echoes the level number, EDX the x2APIC ID.
        _ => r(0, 0, subleaf & 0xff, apic_id),
    }
}

/// Four brand-string bytes starting at `at`, little-endian, NUL-padded.
fn brand_word(at: usize) -> u32 {
    let b = BRAND.as_bytes();
    let byte = |i: usize| b.get(at + i).copied().unwrap_or(0) as u32;
    byte(0) | byte(1) << 8 | byte(2) << 16 | byte(3) << 24
}

fn brand_leaf(n: usize) -> CpuidResult {
    let base = n * 16;
    r(
        brand_word(base),
        brand_word(base + 4),
        brand_word(base + 8),
        brand_word(base + 12),
    )
}

fn vendor_word(i: usize) -> u32 {
    u32::from_le_bytes([
        VENDOR[i * 4],
        VENDOR[i * 4 + 1],
        VENDOR[i * 4 + 2],
        VENDOR[i * 4 + 3],
    ])
}

/// CPUID for `leaf` (EAX) and `subleaf` (ECX) on the vCPU whose (x2)APIC ID is `apic_id` and
/// whose CR4.OSXSAVE/XCR0 are `os`.
///
/// Leaves above the highest basic leaf, and extended leaves above the highest extended leaf,
/// return the highest basic leaf's data, as Intel processors do (SDM, CPUID: "If a value
/// entered for CPUID.EAX is higher than the maximum input value for basic or extended function
/// for that processor then the data for the highest basic information leaf is returned").
/// Leaves at or below the maxima that the model does not implement return zeros (reserved).
pub fn query(leaf: u32, subleaf: u32, apic_id: u32, os: OsState) -> CpuidResult {
    let in_basic = leaf <= MAX_BASIC_LEAF;
    let in_ext = (0x8000_0000..=MAX_EXT_LEAF).contains(&leaf);
    if !in_basic && !in_ext {
        return query(MAX_BASIC_LEAF, subleaf, apic_id, os);
    }
    match leaf {
        0 => r(
            MAX_BASIC_LEAF,
            vendor_word(0),
            vendor_word(2),
            vendor_word(1),
        ),
        1 => {
            // EBX: brand index 0, CLFLUSH line size in 8-byte units, logical processor count 1,
            // initial APIC ID.
            let ebx = ((LINE / 8) << 8) | (1 << 16) | ((apic_id & 0xff) << 24);
            let ecx = LEAF1_ECX | if os.osxsave { OSXSAVE } else { 0 };
            r(SIGNATURE, ebx, ecx, LEAF1_EDX)
        }
        // One iteration (AL = 1); descriptor 0xFF: "no descriptors, use leaf 4".
        2 => r(0x0000_ff01, 0, 0, 0),
        4 => cache_leaf(subleaf),
        6 => r(ARAT, 0, 0, 0),
        7 => match subleaf {
            // EAX: highest subleaf = 0.
            0 => r(0, LEAF7_EBX, 0, LEAF7_EDX),
            _ => r(0, 0, 0, 0),
        },
        0xb | 0x1f => topology_leaf(subleaf, apic_id),
        0xd => xstate_leaf(subleaf, os),
        // TSC / crystal ratio: TSC = crystal * EBX / EAX = 25 MHz * 40 = 1 GHz.
        0x15 => r(1, (TSC_HZ / CRYSTAL_HZ as u64) as u32, CRYSTAL_HZ, 0),
        // Base, maximum and bus (reference) frequency in MHz.
        0x16 => r(
            (TSC_HZ / 1_000_000) as u32,
            (TSC_HZ / 1_000_000) as u32,
            100,
            0,
        ),
        0x8000_0000 => r(MAX_EXT_LEAF, 0, 0, 0),
        0x8000_0001 => r(0, 0, EXT1_ECX, EXT1_EDX),
        0x8000_0002 => brand_leaf(0),
        0x8000_0003 => brand_leaf(1),
        0x8000_0004 => brand_leaf(2),
        // L2: size in KiB (31:16), associativity code 8 = 16-way (15:12), line size (7:0).
        0x8000_0006 => r(0, 0, (1024 << 16) | (0x8 << 12) | LINE, 0),
        0x8000_0007 => r(0, 0, 0, INVARIANT_TSC),
        // Physical address bits (7:0), linear address bits (15:8).
        0x8000_0008 => r(MAX_PHYS_BITS | (48 << 8), 0, 0, 0),
        _ => r(0, 0, 0, 0),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Most tests look at the state-independent leaves: CR4.OSXSAVE set and XCR0 = 7, as the
    /// user-mode harness runs.
    fn query(leaf: u32, subleaf: u32, apic_id: u32) -> CpuidResult {
        super::query(
            leaf,
            subleaf,
            apic_id,
            OsState {
                osxsave: true,
                xcr0: 7,
            },
        )
    }

    fn bytes_of(words: [u32; 3]) -> Vec<u8> {
        words.iter().flat_map(|v| v.to_le_bytes()).collect()
    }

    #[test]
    fn vendor_and_max_leaves() {
        let l0 = query(0, 0, 0);
        assert_eq!(l0.eax, 0x1f);
        assert_eq!(bytes_of([l0.ebx, l0.edx, l0.ecx]), b"GenuineIntel");
        assert_eq!(query(0x8000_0000, 0, 0).eax, 0x8000_0008);
    }

    #[test]
    fn leaf1_signature_and_features() {
        let l1 = query(1, 0, 0);
        let family = (l1.eax >> 8) & 0xf;
        let model = ((l1.eax >> 4) & 0xf) | (((l1.eax >> 16) & 0xf) << 4);
        assert_eq!((family, model, l1.eax & 0xf), (6, 0x5e, 3));
        for b in [
            FPU, TSC, MSR, PAE, CX8, APIC, SEP, MTRR, PGE, CMOV, PAT, CLFSH, FXSR, SSE, SSE2,
        ] {
            assert_ne!(l1.edx & b, 0, "edx bit {b:#x}");
        }
        assert_eq!(l1.edx & HTT, 0);
        for b in [
            SSE3, SSSE3, SSE4_1, SSE4_2, CX16, MOVBE, POPCNT, RDRAND, AVX, FMA, F16C, XSAVE,
            OSXSAVE,
        ] {
            assert_ne!(l1.ecx & b, 0, "ecx bit {b:#x}");
        }
        for b in [AES, X2APIC, HYPERVISOR] {
            assert_eq!(l1.ecx & b, 0, "ecx bit {b:#x} must be clear");
        }
        assert_eq!(l1.ebx, 0x0001_0800);
        assert_eq!(query(1, 0, 5).ebx >> 24, 5);
    }

    #[test]
    fn leaf7_and_extended_features() {
        let l7 = query(7, 0, 0);
        assert_eq!(l7.eax, 0);
        assert_eq!(
            l7.ebx,
            FSGSBASE | BMI1 | AVX2 | SMEP | BMI2 | ERMS | RDSEED | ADX | SMAP
        );
        assert_eq!(l7.ebx & CLFLUSHOPT, 0);
        assert_eq!(l7.edx, ARCH_CAPABILITIES);
        assert_eq!(query(7, 1, 0), CpuidResult::default());
        let e1 = query(0x8000_0001, 0, 0);
        assert_eq!(e1.ecx, 0x21);
        assert_eq!(
            e1.edx,
            (1 << 11) | (1 << 20) | (1 << 26) | (1 << 27) | (1 << 29)
        );
        assert_eq!(query(0x8000_0008, 0, 0).eax, 0x3028);
        assert_eq!(query(0x8000_0007, 0, 0).edx, 1 << 8);
    }

    #[test]
    fn brand_string() {
        let mut s = Vec::new();
        for leaf in 0x8000_0002..=0x8000_0004u32 {
            let q = query(leaf, 0, 0);
            for v in [q.eax, q.ebx, q.ecx, q.edx] {
                s.extend_from_slice(&v.to_le_bytes());
            }
        }
        assert_eq!(s.len(), 48);
        assert_eq!(&s[..20], b"Lockstep Virtual CPU");
        assert!(s[20..].iter().all(|&b| b == 0));
    }

    #[test]
    fn cache_hierarchy_sizes() {
        let size = |q: CpuidResult| {
            ((q.ebx >> 22) + 1)
                * (((q.ebx >> 12) & 0x3ff) + 1)
                * ((q.ebx & 0xfff) + 1)
                * (q.ecx + 1)
        };
        let expect = [
            (1, 1, 32 << 10),
            (2, 1, 32 << 10),
            (3, 2, 1 << 20),
            (3, 3, 8 << 20),
        ];
        for (i, (kind, level, bytes)) in expect.into_iter().enumerate() {
            let q = query(4, i as u32, 0);
            assert_eq!(q.eax & 0x1f, kind);
            assert_eq!((q.eax >> 5) & 7, level);
            assert_eq!((q.eax >> 14) & 0xfff, 0, "one thread shares each cache");
            assert_eq!(size(q), bytes);
            assert_eq!((q.ebx & 0xfff) + 1, 64);
        }
        assert_eq!(query(4, 4, 0), CpuidResult::default());
        // Leaf 2 points at leaf 4.
        assert_eq!(query(2, 0, 0).eax, 0xff01);
    }

    #[test]
    fn topology_and_state_leaves() {
        for leaf in [0xb, 0x1f] {
            let s0 = query(leaf, 0, 3);
            assert_eq!((s0.eax, s0.ebx, s0.ecx, s0.edx), (0, 1, 0x100, 3));
            let s1 = query(leaf, 1, 3);
            assert_eq!((s1.eax, s1.ebx, s1.ecx, s1.edx), (0, 1, 0x201, 3));
            let s2 = query(leaf, 2, 3);
            assert_eq!((s2.eax, s2.ebx, s2.ecx & 0xff00, s2.edx), (0, 0, 0, 3));
        }
    }

    #[test]
    fn topology_id_widths() {
        assert_eq!(
            [id_bits(1), id_bits(2), id_bits(3), id_bits(4), id_bits(5)],
            [0, 1, 2, 2, 3]
        );
    }

    #[test]
    fn tsc_leaves_give_one_ghz() {
        let t = query(0x15, 0, 0);
        assert_eq!(t.ecx as u64 * t.ebx as u64 / t.eax as u64, 1_000_000_000);
        assert_eq!(query(0x16, 0, 0).eax, 1000);
    }

    #[test]
    fn out_of_range_leaves_return_highest_basic_leaf() {
        for leaf in [0x20, 0x4000_0000, 0x7fff_ffff, 0x8000_0009, 0xffff_ffff] {
            for sub in 0..3 {
                assert_eq!(query(leaf, sub, 2), query(0x1f, sub, 2), "leaf {leaf:#x}");
            }
        }
        // Unimplemented leaves inside the range are reserved zeros.
        for leaf in [3, 5, 8, 0xa, 0x14, 0x8000_0005] {
            assert_eq!(query(leaf, 0, 0), CpuidResult::default(), "leaf {leaf:#x}");
        }
    }

    #[test]
    fn xsave_leaf_and_osxsave_follow_state() {
        assert_eq!(query(0xd, 0, 0), r(7, 832, 832, 0));
        // EBX: the compacted size for XCR0 (no IA32_XSS), as Linux sizes its buffers from it.
        assert_eq!(query(0xd, 1, 0), r(0b111, 832, 0, 0));
        assert_eq!(query(0xd, 2, 0), r(256, 576, 0, 0));
        for sub in [3, 4, 5, 63] {
            assert_eq!(query(0xd, sub, 0), CpuidResult::default());
        }
        let sse_only = OsState {
            osxsave: true,
            xcr0: 3,
        };
        assert_eq!(super::query(0xd, 0, 0, sse_only), r(7, 576, 832, 0));
        let reset = super::query(1, 0, 0, OsState::RESET);
        assert_eq!(reset.ecx & OSXSAVE, 0);
        assert_ne!(reset.ecx & XSAVE, 0);
        let mut st = CpuState::power_on();
        assert_eq!(OsState::of(&st), OsState::RESET);
        st.cr4 |= ctl::CR4_OSXSAVE;
        st.xcr0 = 7;
        assert_eq!(
            OsState::of(&st),
            OsState {
                osxsave: true,
                xcr0: 7
            }
        );
        // Nothing beyond x86-64-v3: no AVX-512, PKU/OSPKE, XSAVES.
        let l7 = query(7, 0, 0);
        assert_eq!(l7.ebx & (1 << 16), 0, "AVX512F");
        assert_eq!(l7.ecx & (3 << 3), 0, "PKU/OSPKE");
        assert_eq!(query(0xd, 1, 0).eax & XSAVES, 0);
    }
}
