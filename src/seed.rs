//! The run seed and its per-domain ChaCha streams ("sched", "tso", "rng", "auxv", …).
//!
//! Each domain gets its own ChaCha20 stream (the seed is the key, the domain label picks the
//! stream), so adding a domain never changes the draws of an existing one.

use rand_chacha::ChaCha20Rng;
use rand_core::{RngCore, SeedableRng};
use std::fmt;
use std::str::FromStr;

/// A 256-bit run seed.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Seed(pub [u8; 32]);

impl Seed {
    /// The independent random stream of `domain`.
    pub fn stream(&self, domain: &str) -> ChaCha20Rng {
        let mut rng = ChaCha20Rng::from_seed(self.0);
        rng.set_stream(label_id(domain));
        rng
    }

    /// 32 bytes drawn from `domain`'s stream (to seed a component's own generator).
    pub fn derive(&self, domain: &str) -> [u8; 32] {
        let mut out = [0u8; 32];
        self.stream(domain).fill_bytes(&mut out);
        out
    }
}

/// FNV-1a of the label: a fixed, host-independent stream number.
fn label_id(label: &str) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in label.bytes() {
        h ^= b as u64;
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    h
}

impl FromStr for Seed {
    type Err = String;
    /// Up to 64 hex digits (an optional `0x` prefix); shorter seeds are zero-extended on the left.
    fn from_str(s: &str) -> Result<Self, String> {
        let h = s.strip_prefix("0x").unwrap_or(s);
        if h.is_empty() || h.len() > 64 || !h.bytes().all(|b| b.is_ascii_hexdigit()) {
            return Err(format!("seed must be 1 to 64 hex digits, got {s:?}"));
        }
        let padded = format!("{h:0>64}");
        let mut out = [0u8; 32];
        for (i, o) in out.iter_mut().enumerate() {
            *o = u8::from_str_radix(&padded[2 * i..2 * i + 2], 16).map_err(|e| e.to_string())?;
        }
        Ok(Seed(out))
    }
}

impl fmt::Display for Seed {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for b in self.0 {
            write!(f, "{b:02x}")?;
        }
        Ok(())
    }
}

impl fmt::Debug for Seed {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Seed({self})")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parse_pads_and_round_trips() {
        let s: Seed = "1f".parse().unwrap();
        assert_eq!(s.0[31], 0x1f);
        assert_eq!(s.0[..31], [0; 31]);
        assert_eq!(s.to_string().parse::<Seed>().unwrap(), s);
        assert!("xyz".parse::<Seed>().is_err());
        assert!("".parse::<Seed>().is_err());
        assert!("1".repeat(65).parse::<Seed>().is_err());
    }

    #[test]
    fn domains_are_independent_and_fixed() {
        let s: Seed = "42".parse().unwrap();
        assert_ne!(s.derive("rng"), s.derive("auxv"));
        assert_eq!(s.derive("rng"), s.derive("rng"));
        let t: Seed = "43".parse().unwrap();
        assert_ne!(s.derive("rng"), t.derive("rng"));
    }
}
