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
    /// Present on every x86-64 CPU.
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
}

impl Feature {
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
    bmi1: bool,
    bmi2: bool,
    adx: bool,
    movbe: bool,
    lzcnt: bool,
    popcnt: bool,
    cx16: bool,
    lahf: bool,
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
            bmi1: l7[1] & (1 << 3) != 0,
            bmi2: l7[1] & (1 << 8) != 0,
            adx: l7[1] & (1 << 19) != 0,
            movbe: l1[2] & (1 << 22) != 0,
            popcnt: l1[2] & (1 << 23) != 0,
            cx16: l1[2] & (1 << 13) != 0,
            lzcnt: e1[2] & (1 << 5) != 0,
            lahf: e1[2] & 1 != 0,
        }
    }

    /// Does the host implement `f`?
    pub fn has(&self, f: Feature) -> bool {
        match f {
            Feature::Base => true,
            Feature::Bmi1 => self.bmi1,
            Feature::Bmi2 => self.bmi2,
            Feature::Adx => self.adx,
            Feature::Movbe => self.movbe,
            Feature::Lzcnt => self.lzcnt,
            Feature::Popcnt => self.popcnt,
            Feature::Cx16 => self.cx16,
            Feature::LahfSahf => self.lahf,
        }
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
    }
}
