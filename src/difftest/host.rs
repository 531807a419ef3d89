//! What this host CPU is (vendor, family/model/stepping) and which optional instruction sets it has.
//!
//! The differential harness compares "undefined" flags only on the host the policy in
//! `docs/undefined-flags.md` was measured on, and skips forms whose CPUID feature is missing.

use std::fmt;

/// The host the undefined-flags policy was measured on (see `docs/undefined-flags.md`).
pub const POLICY_VENDOR: &str = "GenuineIntel";
pub const POLICY_FAMILY: u32 = 6;
pub const POLICY_MODEL: u32 = 0xa7;

/// Optional instruction-set extensions some forms need.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Feature {
    /// Present on every x86-64 CPU (incl. x87, MMX, SSE, SSE2, FXSR, CMOV, CLFLUSH, PAUSE).
    Base,
    Bmi1,
    Bmi2,
    Adx,
    Movbe,
    Lzcnt,
    Popcnt,
    Cx16,
    /// LAHF/SAHF in 64-bit mode (CPUID 8000_0001h ECX bit 0).
    LahfSahf,
    Sse3,
    Ssse3,
    Sse41,
    Sse42,
    /// AVX with OS support (CPUID.1:ECX.AVX, OSXSAVE, XCR0 bits 1 and 2).
    Avx,
    Avx2,
    Fma,
    F16c,
    Xsave,
    Xsaveopt,
    Clflushopt,
}

impl Feature {
    pub const ALL: [Feature; 20] = [
        Feature::Base,
        Feature::Bmi1,
        Feature::Bmi2,
        Feature::Adx,
        Feature::Movbe,
        Feature::Lzcnt,
        Feature::Popcnt,
        Feature::Cx16,
        Feature::LahfSahf,
        Feature::Sse3,
        Feature::Ssse3,
        Feature::Sse41,
        Feature::Sse42,
        Feature::Avx,
        Feature::Avx2,
        Feature::Fma,
        Feature::F16c,
        Feature::Xsave,
        Feature::Xsaveopt,
        Feature::Clflushopt,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Feature::Base => "base",
            Feature::Bmi1 => "BMI1",
            Feature::Bmi2 => "BMI2",
            Feature::Adx => "ADX",
            Feature::Movbe => "MOVBE",
            Feature::Lzcnt => "LZCNT",
            Feature::Popcnt => "POPCNT",
            Feature::Cx16 => "CMPXCHG16B",
            Feature::LahfSahf => "LAHF/SAHF (64-bit)",
            Feature::Sse3 => "SSE3",
            Feature::Ssse3 => "SSSE3",
            Feature::Sse41 => "SSE4.1",
            Feature::Sse42 => "SSE4.2",
            Feature::Avx => "AVX",
            Feature::Avx2 => "AVX2",
            Feature::Fma => "FMA",
            Feature::F16c => "F16C",
            Feature::Xsave => "XSAVE",
            Feature::Xsaveopt => "XSAVEOPT",
            Feature::Clflushopt => "CLFLUSHOPT",
        }
    }
}

/// Identity and features of the host CPU, read with CPUID.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HostInfo {
    pub vendor: String,
    pub family: u32,
    pub model: u32,
    pub stepping: u32,
    pub brand: String,
    /// One bit per [`Feature`] (by discriminant) the host has.
    feats: u64,
    /// XCR0 as XGETBV reports it (0 without OSXSAVE).
    pub xcr0: u64,
}

/// XCR0 (XGETBV with ECX = 0). Only call when CPUID reports OSXSAVE.
fn xgetbv0() -> u64 {
    let (lo, hi): (u32, u32);
    // SAFETY: XGETBV(0) is valid when CR4.OSXSAVE is set (checked by the caller via CPUID.1:ECX
    // bit 27); it only writes EAX and EDX.
    unsafe {
        core::arch::asm!("xgetbv", in("ecx") 0u32, out("eax") lo, out("edx") hi,
            options(nomem, nostack, preserves_flags));
    }
    ((hi as u64) << 32) | lo as u64
}

fn cpuid(leaf: u32, sub: u32) -> [u32; 4] {
    // SAFETY: CPUID is available on every x86-64 CPU and has no side effects beyond its outputs.
    #[allow(unused_unsafe)]
    let r = unsafe { core::arch::x86_64::__cpuid_count(leaf, sub) };
    [r.eax, r.ebx, r.ecx, r.edx]
}

impl HostInfo {
    /// Read the host's CPUID.
    pub fn detect() -> Self {
        let l0 = cpuid(0, 0);
        let mut v = Vec::with_capacity(12);
        for r in [l0[1], l0[3], l0[2]] {
            v.extend_from_slice(&r.to_le_bytes());
        }
        let vendor = String::from_utf8_lossy(&v).into_owned();
        let max = l0[0];
        let l1 = cpuid(1, 0);
        let base_family = (l1[0] >> 8) & 0xf;
        let base_model = (l1[0] >> 4) & 0xf;
        let family = if base_family == 0xf {
            base_family + ((l1[0] >> 20) & 0xff)
        } else {
            base_family
        };
        let model = if base_family == 6 || base_family == 0xf {
            (((l1[0] >> 16) & 0xf) << 4) | base_model
        } else {
            base_model
        };
        let stepping = l1[0] & 0xf;
        let l7 = if max >= 7 { cpuid(7, 0) } else { [0; 4] };
        let ext_max = cpuid(0x8000_0000, 0)[0];
        let e1 = if ext_max >= 0x8000_0001 {
            cpuid(0x8000_0001, 0)
        } else {
            [0; 4]
        };
        let mut brand = Vec::new();
        if ext_max >= 0x8000_0004 {
            for leaf in 0x8000_0002..=0x8000_0004u32 {
                for r in cpuid(leaf, 0) {
                    brand.extend_from_slice(&r.to_le_bytes());
                }
            }
        }
        let osxsave = l1[2] & (1 << 27) != 0;
        let xcr0 = if osxsave { xgetbv0() } else { 0 };
        let avx_os = osxsave && xcr0 & 6 == 6;
        let avx = avx_os && l1[2] & (1 << 28) != 0;
        let ld = if max >= 0xd { cpuid(0xd, 1) } else { [0; 4] };
        let mut feats = 1u64 << Feature::Base as u8;
        for (f, on) in [
            (Feature::Bmi1, l7[1] & (1 << 3) != 0),
            (Feature::Bmi2, l7[1] & (1 << 8) != 0),
            (Feature::Adx, l7[1] & (1 << 19) != 0),
            (Feature::Movbe, l1[2] & (1 << 22) != 0),
            (Feature::Popcnt, l1[2] & (1 << 23) != 0),
            (Feature::Cx16, l1[2] & (1 << 13) != 0),
            (Feature::Lzcnt, e1[2] & (1 << 5) != 0),
            (Feature::LahfSahf, e1[2] & 1 != 0),
            (Feature::Sse3, l1[2] & 1 != 0),
            (Feature::Ssse3, l1[2] & (1 << 9) != 0),
            (Feature::Sse41, l1[2] & (1 << 19) != 0),
            (Feature::Sse42, l1[2] & (1 << 20) != 0),
            (Feature::Avx, avx),
            (Feature::Avx2, avx && l7[1] & (1 << 5) != 0),
            (Feature::Fma, avx && l1[2] & (1 << 12) != 0),
            (Feature::F16c, avx && l1[2] & (1 << 29) != 0),
            (Feature::Xsave, osxsave && l1[2] & (1 << 26) != 0),
            (Feature::Xsaveopt, osxsave && ld[0] & 1 != 0),
            (Feature::Clflushopt, l7[1] & (1 << 23) != 0),
        ] {
            if on {
                feats |= 1 << f as u8;
            }
        }
        let brand = String::from_utf8_lossy(&brand)
            .trim_matches(char::from(0))
            .trim()
            .to_string();
        HostInfo {
            vendor,
            family,
            model,
            stepping,
            brand,
            feats,
            xcr0,
        }
    }

    /// Does the host implement `f`?
    pub fn has(&self, f: Feature) -> bool {
        self.feats & (1 << f as u8) != 0
    }

    /// The same host without `f` (tests of the skip logic).
    #[doc(hidden)]
    pub fn without(mut self, f: Feature) -> Self {
        self.feats &= !(1 << f as u8);
        self
    }

    /// "SSE3 yes, SSSE3 yes, ..." for the SIMD extensions the harness checks.
    pub fn simd_line(&self) -> String {
        let list: Vec<String> = Feature::ALL[9..]
            .iter()
            .map(|&f| format!("{} {}", f.name(), if self.has(f) { "yes" } else { "NO" }))
            .collect();
        format!("{}; XCR0 {:#x}", list.join(", "), self.xcr0)
    }

    /// An Intel CPU (the vendor the interpreter models)?
    pub fn is_intel(&self) -> bool {
        self.vendor == POLICY_VENDOR
    }

    /// Is this the host the undefined-flags policy was measured on?
    pub fn is_policy_host(&self) -> bool {
        self.vendor == POLICY_VENDOR && self.family == POLICY_FAMILY && self.model == POLICY_MODEL
    }
}

impl fmt::Display for HostInfo {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} family {} model {:#x} stepping {} ({})",
            self.vendor, self.family, self.model, self.stepping, self.brand
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn detect_reads_a_known_vendor_and_base_features() {
        let h = HostInfo::detect();
        assert!(
            h.vendor == "GenuineIntel" || h.vendor == "AuthenticAMD" || !h.vendor.is_empty(),
            "{h}"
        );
        assert!(h.has(Feature::Base));
        // CPUID and std's detection must agree.
        assert_eq!(h.has(Feature::Bmi2), std::is_x86_feature_detected!("bmi2"));
        assert_eq!(
            h.has(Feature::Popcnt),
            std::is_x86_feature_detected!("popcnt")
        );
        assert_eq!(h.has(Feature::Adx), std::is_x86_feature_detected!("adx"));
        assert_eq!(h.has(Feature::Avx), std::is_x86_feature_detected!("avx"));
        assert_eq!(h.has(Feature::Avx2), std::is_x86_feature_detected!("avx2"));
        assert_eq!(h.has(Feature::Fma), std::is_x86_feature_detected!("fma"));
        assert_eq!(h.has(Feature::F16c), std::is_x86_feature_detected!("f16c"));
        assert_eq!(
            h.has(Feature::Sse42),
            std::is_x86_feature_detected!("sse4.2")
        );
        assert_eq!(
            h.has(Feature::Ssse3),
            std::is_x86_feature_detected!("ssse3")
        );
        assert!(h.simd_line().contains("AVX2"));
    }
}
