//! SIMD and x87 state of a case: YMM0-15, MXCSR and the x87 unit (registers in physical order,
//! control, status and abridged tag words), its XSAVE-area image for ptrace, random initial
//! states biased to floating-point specials, and the field-by-field comparison.
//!
//! The XSAVE legacy area is the FXSAVE layout: FCW at 0, FSW at 2, the abridged tag byte at 4
//! (bit i = physical register Ri valid), FOP at 6, FIP at 8, FDP at 16, MXCSR at 24, ST0..ST7
//! at 32 in *stack* order (slot i holds ST(i) = R((TOP + i) mod 8)), XMM0..15 at 160; the
//! XSAVE header's XSTATE_BV at 512; the upper halves of YMM0..15 at the offset CPUID leaf 0Dh
//! sub-leaf 2 reports (576 on every CPU so far).

use super::gen::Rng;

/// Byte offsets in the XSAVE (FXSAVE) area.
pub mod xs {
    pub const FCW: usize = 0;
    pub const FSW: usize = 2;
    pub const FTW: usize = 4;
    pub const FOP: usize = 6;
    pub const FIP: usize = 8;
    pub const FDP: usize = 16;
    pub const MXCSR: usize = 24;
    pub const ST: usize = 32;
    pub const XMM: usize = 160;
    pub const XSTATE_BV: usize = 512;
    /// Size of the legacy area plus the header: the smallest valid XSAVE image.
    pub const MIN_LEN: usize = 576;
}

/// x87 status-word bits.
pub mod fsw {
    pub const IE: u16 = 1;
    pub const SF: u16 = 1 << 6;
    pub const ES: u16 = 1 << 7;
    pub const C0: u16 = 1 << 8;
    pub const C1: u16 = 1 << 9;
    pub const C2: u16 = 1 << 10;
    pub const TOP_SHIFT: u16 = 11;
    pub const C3: u16 = 1 << 14;
    pub const B: u16 = 1 << 15;
    /// The six exception flags.
    pub const EXC: u16 = 0x3f;
    pub const CC: u16 = C0 | C1 | C2 | C3;
}

/// The SIMD/x87 register state a SIMD case starts from and ends with.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SimdState {
    /// YMM0..15 as four little-endian 64-bit lanes (XMM is the low two).
    pub ymm: [[u64; 4]; 16],
    pub mxcsr: u32,
    pub fcw: u16,
    /// Status word, TOP in bits 11..13.
    pub fsw: u16,
    /// Abridged tag word: bit i = physical register Ri valid.
    pub ftw: u8,
    /// R0..R7 (physical order), 80-bit little-endian: mantissa then sign/exponent.
    pub st: [[u8; 10]; 8],
    /// Last x87 opcode and instruction/data pointers (zero in generated initial states; read
    /// back but not compared: FXSAVE/FNSAVE/FNSTENV write them to memory, which is compared).
    pub fop: u16,
    pub fip: u64,
    pub fdp: u64,
}

impl Default for SimdState {
    /// The state after FNINIT with MXCSR at its reset value and all vector registers zero.
    fn default() -> Self {
        SimdState {
            ymm: [[0; 4]; 16],
            mxcsr: 0x1f80,
            fcw: 0x037f,
            fsw: 0,
            ftw: 0,
            st: [[0; 10]; 8],
            fop: 0,
            fip: 0,
            fdp: 0,
        }
    }
}

fn get<const N: usize>(b: &[u8], at: usize) -> [u8; N] {
    let mut a = [0u8; N];
    a.copy_from_slice(&b[at..at + N]);
    a
}

impl SimdState {
    /// TOP of the x87 stack.
    pub fn top(&self) -> usize {
        ((self.fsw >> fsw::TOP_SHIFT) & 7) as usize
    }

    /// Physical register index of ST(i).
    pub fn phys(&self, i: usize) -> usize {
        (self.top() + i) & 7
    }

    /// Write this state into an XSAVE image (`buf` at least `ymm_hi + 256` bytes) and mark
    /// the x87, SSE and AVX components present in XSTATE_BV. Other bytes stay as they are.
    pub fn write_xsave(&self, buf: &mut [u8], ymm_hi: usize) {
        buf[xs::FCW..xs::FCW + 2].copy_from_slice(&self.fcw.to_le_bytes());
        buf[xs::FSW..xs::FSW + 2].copy_from_slice(&self.fsw.to_le_bytes());
        buf[xs::FTW] = self.ftw;
        buf[xs::FTW + 1] = 0;
        buf[xs::FOP..xs::FOP + 2].copy_from_slice(&self.fop.to_le_bytes());
        buf[xs::FIP..xs::FIP + 8].copy_from_slice(&self.fip.to_le_bytes());
        buf[xs::FDP..xs::FDP + 8].copy_from_slice(&self.fdp.to_le_bytes());
        buf[xs::MXCSR..xs::MXCSR + 4].copy_from_slice(&self.mxcsr.to_le_bytes());
        for i in 0..8 {
            let slot = &mut buf[xs::ST + 16 * i..xs::ST + 16 * i + 16];
            slot[..10].copy_from_slice(&self.st[self.phys(i)]);
            slot[10..].fill(0);
        }
        for (r, y) in self.ymm.iter().enumerate() {
            for (l, v) in y.iter().enumerate() {
                let at = if l < 2 {
                    xs::XMM + 16 * r + 8 * l
                } else {
                    ymm_hi + 16 * r + 8 * (l - 2)
                };
                buf[at..at + 8].copy_from_slice(&v.to_le_bytes());
            }
        }
        let bv = u64::from_le_bytes(get(buf, xs::XSTATE_BV)) | 7;
        buf[xs::XSTATE_BV..xs::XSTATE_BV + 8].copy_from_slice(&bv.to_le_bytes());
    }

    /// Read the state from an XSAVE image as the kernel's ptrace interface returns it
    /// (components in their initial configuration are filled in with their initial values).
    pub fn read_xsave(buf: &[u8], ymm_hi: usize) -> SimdState {
        let mut s = SimdState {
            fcw: u16::from_le_bytes(get(buf, xs::FCW)),
            fsw: u16::from_le_bytes(get(buf, xs::FSW)),
            ftw: buf[xs::FTW],
            fop: u16::from_le_bytes(get(buf, xs::FOP)),
            fip: u64::from_le_bytes(get(buf, xs::FIP)),
            fdp: u64::from_le_bytes(get(buf, xs::FDP)),
            mxcsr: u32::from_le_bytes(get(buf, xs::MXCSR)),
            ..SimdState::default()
        };
        for i in 0..8 {
            let p = s.phys(i);
            s.st[p] = get(buf, xs::ST + 16 * i);
        }
        for (r, y) in s.ymm.iter_mut().enumerate() {
            for (l, v) in y.iter_mut().enumerate() {
                let at = if l < 2 {
                    xs::XMM + 16 * r + 8 * l
                } else {
                    ymm_hi + 16 * r + 8 * (l - 2)
                };
                *v = u64::from_le_bytes(get(buf, at));
            }
        }
        s
    }
}

// ----- random initial states -----

/// Single-precision values worth hitting: zeros, infinities, NaNs (quiet, signalling, the
/// default NaN), denormals, the normal range ends, conversion and rounding boundaries.
const F32_SPECIAL: [u32; 28] = [
    0x0000_0000,
    0x8000_0000,
    0x7f80_0000,
    0xff80_0000,
    0x7fc0_0000,
    0xffc0_0000,
    0x7f80_0001,
    0xffa0_0000,
    0x7fd5_5555,
    0x0000_0001,
    0x807f_ffff,
    0x0040_0000,
    0x0080_0000,
    0x8080_0000,
    0x7f7f_ffff,
    0xff7f_ffff,
    0x3f80_0000,
    0xbf80_0000,
    0x3f00_0000,
    0x3fc0_0000,
    0x4020_0000,
    0x4f00_0000,
    0xcf00_0000,
    0x5f00_0000,
    0x4b00_0000,
    0x3eaa_aaab,
    0x4b7f_ffff,
    0xc6fe_0000,
];

/// Double-precision counterparts of [`F32_SPECIAL`].
const F64_SPECIAL: [u64; 26] = [
    0,
    0x8000_0000_0000_0000,
    0x7ff0_0000_0000_0000,
    0xfff0_0000_0000_0000,
    0x7ff8_0000_0000_0000,
    0xfff8_0000_0000_0000,
    0x7ff0_0000_0000_0001,
    0xfff4_0000_0000_0000,
    0x0000_0000_0000_0001,
    0x800f_ffff_ffff_ffff,
    0x0010_0000_0000_0000,
    0x8010_0000_0000_0000,
    0x7fef_ffff_ffff_ffff,
    0x3ff0_0000_0000_0000,
    0xbff0_0000_0000_0000,
    0x3fe0_0000_0000_0000,
    0x3ff8_0000_0000_0000,
    0x4004_0000_0000_0000,
    0x41e0_0000_0000_0000,
    0xc1e0_0000_0000_0000,
    0x43e0_0000_0000_0000,
    0xc3e0_0000_0000_0000,
    0x4330_0000_0000_0000,
    0x3fd5_5555_5555_5555,
    0x36a0_0000_0000_0000,
    0x47ef_ffff_e000_0000,
];

impl Rng {
    /// A single-precision bit pattern: a special value or a moderate normal number.
    pub fn f32_bits(&mut self) -> u32 {
        if self.chance(45) {
            self.pick(&F32_SPECIAL)
        } else {
            let sign = (self.u64() as u32 & 1) << 31;
            let exp = (127 + self.below(60) as u32).wrapping_sub(30) & 0xff;
            let man = self.u64() as u32 & 0x7f_ffff;
            let man = if self.chance(30) {
                man & 0x7f_0000
            } else {
                man
            };
            sign | (exp << 23) | man
        }
    }

    /// A double-precision bit pattern: a special value or a moderate normal number.
    pub fn f64_bits(&mut self) -> u64 {
        if self.chance(45) {
            self.pick(&F64_SPECIAL)
        } else {
            let sign = (self.u64() & 1) << 63;
            let exp = (1023 + self.below(120)).wrapping_sub(60) & 0x7ff;
            let man = self.u64() & 0xf_ffff_ffff_ffff;
            let man = if self.chance(30) {
                man & 0xf_f000_0000_0000
            } else {
                man
            };
            sign | (exp << 52) | man
        }
    }

    /// 128 bits of a vector register in one of several styles: random bits, float lanes,
    /// double lanes, integer edge lanes or small integers (shuffle controls, string lengths).
    pub fn vec128(&mut self) -> [u64; 2] {
        let mut v = [0u64; 2];
        match self.below(10) {
            0..=2 => {
                v = [self.u64(), self.u64()];
            }
            3..=5 => {
                for q in v.iter_mut() {
                    *q = self.f32_bits() as u64 | (self.f32_bits() as u64) << 32;
                }
            }
            6 | 7 => {
                for q in v.iter_mut() {
                    *q = self.f64_bits();
                }
            }
            8 => {
                for q in v.iter_mut() {
                    for w in 0..4 {
                        let x: u16 =
                            self.pick(&[0, 1, 0x7f, 0x80, 0xff, 0x7fff, 0x8000, 0xffff, 0x00ff]);
                        *q |= (x as u64) << (16 * w);
                    }
                }
            }
            _ => {
                for q in v.iter_mut() {
                    for b in 0..8 {
                        *q |= self.below(20) << (8 * b);
                    }
                }
            }
        }
        v
    }

    /// An 80-bit extended-precision value, biased to the classes the x87 treats specially:
    /// zeros, infinities, quiet/signalling NaNs and the real indefinite, denormals,
    /// pseudo-denormals (J = 1, exponent 0), unnormals and pseudo-NaN/infinities (J = 0),
    /// integers and halves (rounding, FIST/FBSTP ranges), and moderate normals.
    pub fn f80(&mut self) -> [u8; 10] {
        const J: u64 = 1 << 63;
        let sign = (self.u64() & 1) << 15;
        let (exp, man): (u64, u64) = match self.below(20) {
            0 => (0, 0),
            1 => (0x7fff, J),
            2 => (0x7fff, J | 1 << 62 | (self.u64() & 0xff)),
            3 => (0x7fff, J | (self.u64() & 0x3fff_ffff_ffff_ffff).max(1)),
            4 => (0x7fff, J | 1 << 62),
            5 => (0, self.u64() & !J),
            6 => (0, J | (self.u64() & !J)),
            7 => (1 + self.below(0x7ffe), self.u64() & !J),
            8 => (0x7fff, self.u64() & !J),
            9 | 10 => {
                let n = self.below(1 << 20).max(1);
                let lz = n.leading_zeros() as u64;
                (0x3fff + 63 - lz, n << lz)
            }
            11 => (
                0x3fff + 62 + self.below(3),
                J | (self.u64() >> self.below(64)),
            ),
            12 => (0x3ffe + self.below(3), J | 1 << 62),
            // Ends of the extended range and of the double and single ranges (FST m64/m32).
            13 => (
                self.pick(&[
                    1, 2, 0x7ffe, 0x7ffd, 0x3c01, 0x3c00, 0x43fe, 0x43ff, 0x3f81, 0x407e,
                ]),
                J | self.u64(),
            ),
            14 => (0x3fff + 56 + self.below(8), J | (self.u64() & !0xff)),
            _ => (0x3fff - 40 + self.below(80), J | self.u64()),
        };
        let mut b = [0u8; 10];
        b[..8].copy_from_slice(&man.to_le_bytes());
        b[8..].copy_from_slice(&((exp as u16 & 0x7fff) | sign as u16).to_le_bytes());
        b
    }

    /// A control word: mostly all exceptions masked and 64-bit precision, random rounding.
    /// Always in the form the hardware keeps (bit 6 set, bits 7 and 13..15 clear: FLDCW and
    /// FXRSTOR force them so; Linux may hand back either the raw or the loaded value, so a
    /// non-canonical initial value would make the native side unstable).
    pub fn fcw(&mut self) -> u16 {
        if self.chance(2) {
            return (self.u64() as u16 & 0x1f3f) | 0x40;
        }
        let masks = if self.chance(80) {
            0x3f
        } else {
            self.u64() as u16 & 0x3f
        };
        let pc: u16 = self.pick(&[3, 3, 3, 3, 3, 3, 3, 2, 2, 0, 0, 1]);
        let rc = self.below(4) as u16;
        masks | 0x40 | pc << 8 | rc << 10
    }

    /// An MXCSR value: random rounding, DAZ/FTZ sometimes, exceptions mostly masked, some
    /// sticky flags; reserved bits 16..31 clear.
    pub fn mxcsr(&mut self) -> u32 {
        let flags = if self.chance(70) {
            0
        } else {
            self.u64() as u32 & 0x3f
        };
        let daz = if self.chance(30) { 1 << 6 } else { 0 };
        let masks = if self.chance(85) {
            0x3f
        } else {
            self.u64() as u32 & 0x3f
        };
        let rc = if self.chance(50) {
            0
        } else {
            self.below(4) as u32
        };
        let ftz = if self.chance(30) { 1 << 15 } else { 0 };
        flags | daz | masks << 7 | rc << 13 | ftz
    }

    /// A random SIMD/x87 state (see the module documentation).
    pub fn simd_state(&mut self) -> SimdState {
        let mut s = SimdState::default();
        for y in s.ymm.iter_mut() {
            let lo = self.vec128();
            let hi = if self.chance(15) {
                [0, 0]
            } else {
                self.vec128()
            };
            *y = [lo[0], lo[1], hi[0], hi[1]];
        }
        s.mxcsr = self.mxcsr();
        for r in s.st.iter_mut() {
            *r = self.f80();
        }
        let top = self.below(8) as u16;
        let depth = match self.below(10) {
            0 => 0,
            1 => 8,
            _ => 1 + self.below(7) as usize,
        };
        s.ftw = if self.chance(10) {
            self.u64() as u8
        } else {
            (0..depth).fold(0u8, |t, i| t | 1 << ((top as usize + i) & 7))
        };
        s.fcw = self.fcw();
        let mut sw = top << fsw::TOP_SHIFT;
        sw |= self.u64() as u16 & fsw::CC;
        if self.chance(20) {
            sw |= self.u64() as u16 & (fsw::EXC | fsw::SF);
        }
        // ES and B summarise the unmasked pending exceptions; keep them consistent (a stray
        // ES without an unmasked flag makes Linux ignore the #MF and re-run the instruction).
        if sw & !s.fcw & fsw::EXC != 0 {
            sw |= fsw::ES | fsw::B;
        }
        s.fsw = sw;
        s
    }
}

// ----- comparison -----

/// Render 80-bit bytes as `sign/exp:mantissa` hex.
pub fn f80_hex(b: &[u8; 10]) -> String {
    let man = u64::from_le_bytes(get(b, 0));
    let se = u16::from_le_bytes(get(b, 8));
    format!("{se:04x}:{man:016x}")
}

/// A YMM register as `hi128_lo128` hex (most significant lane first).
pub fn ymm_hex(y: &[u64; 4]) -> String {
    format!("{:016x}{:016x}_{:016x}{:016x}", y[3], y[2], y[1], y[0])
}

/// MXCSR fields spelled out.
pub fn mxcsr_text(m: u32) -> String {
    let rc = ["RN", "RD", "RU", "RZ"][((m >> 13) & 3) as usize];
    format!(
        "{m:#06x} (flags {:02x} masks {:02x} {rc}{}{})",
        m & 0x3f,
        (m >> 7) & 0x3f,
        if m & 0x40 != 0 { " DAZ" } else { "" },
        if m & 0x8000 != 0 { " FTZ" } else { "" }
    )
}

/// FSW fields spelled out.
pub fn fsw_text(w: u16) -> String {
    format!(
        "{w:#06x} (TOP {} C3..C0 {}{}{}{} flags {:02x}{}{}{})",
        (w >> fsw::TOP_SHIFT) & 7,
        (w >> 14) & 1,
        (w >> 10) & 1,
        (w >> 9) & 1,
        (w >> 8) & 1,
        w & fsw::EXC,
        if w & fsw::SF != 0 { " SF" } else { "" },
        if w & fsw::ES != 0 { " ES" } else { "" },
        if w & fsw::B != 0 { " B" } else { "" }
    )
}

/// Every differing SIMD/x87 field as (field, native, interpreter). FSW bits in `ignore_fsw`
/// are not compared; x87 registers only where the native tag says valid (an empty register's
/// contents are only observable through FXSAVE/FSAVE, whose memory image is compared).
pub fn diff(n: &SimdState, i: &SimdState, ignore_fsw: u16) -> Vec<(String, String, String)> {
    let mut d = Vec::new();
    for r in 0..16 {
        let (a, b) = (&n.ymm[r], &i.ymm[r]);
        if a[..2] != b[..2] {
            d.push((
                format!("xmm{r}"),
                format!("{:016x}{:016x}", a[1], a[0]),
                format!("{:016x}{:016x}", b[1], b[0]),
            ));
        }
        if a[2..] != b[2..] {
            d.push((
                format!("ymm{r}[255:128]"),
                format!("{:016x}{:016x}", a[3], a[2]),
                format!("{:016x}{:016x}", b[3], b[2]),
            ));
        }
    }
    if n.mxcsr != i.mxcsr {
        d.push(("mxcsr".into(), mxcsr_text(n.mxcsr), mxcsr_text(i.mxcsr)));
    }
    if n.fcw != i.fcw {
        d.push((
            "fcw".into(),
            format!("{:#06x}", n.fcw),
            format!("{:#06x}", i.fcw),
        ));
    }
    if (n.fsw ^ i.fsw) & !ignore_fsw != 0 {
        d.push(("fsw".into(), fsw_text(n.fsw), fsw_text(i.fsw)));
    }
    if n.ftw != i.ftw {
        d.push((
            "ftw (abridged)".into(),
            format!("{:08b}", n.ftw),
            format!("{:08b}", i.ftw),
        ));
    }
    for p in 0..8 {
        if n.ftw & (1 << p) != 0 && n.st[p] != i.st[p] {
            d.push((
                format!("x87 R{p} (st{})", (p + 8 - n.top()) & 7),
                f80_hex(&n.st[p]),
                f80_hex(&i.st[p]),
            ));
        }
    }
    d
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn xsave_image_round_trips_with_stack_order_slots() {
        let mut rng = Rng::new([1; 32]);
        for _ in 0..50 {
            let s = rng.simd_state();
            let mut buf = vec![0u8; 832];
            s.write_xsave(&mut buf, 576);
            assert_eq!(SimdState::read_xsave(&buf, 576), s);
            // Slot 0 is ST(0) = R(TOP).
            assert_eq!(&buf[xs::ST..xs::ST + 10], &s.st[s.top()]);
            assert_eq!(buf[xs::XSTATE_BV] & 7, 7);
            assert_eq!(s.mxcsr & 0xffff_0000, 0);
            assert_eq!(s.fcw & 0xe0c0, 0x40);
            let es = s.fsw & !s.fcw & fsw::EXC != 0;
            assert_eq!(s.fsw & fsw::ES != 0, es, "{:#x} {:#x}", s.fsw, s.fcw);
        }
    }

    #[test]
    fn diff_reports_each_field_and_skips_empty_registers() {
        let mut rng = Rng::new([2; 32]);
        let a = rng.simd_state();
        assert!(diff(&a, &a, 0).is_empty());
        let mut b = a.clone();
        b.ymm[7][3] ^= 1;
        let d = diff(&a, &b, 0);
        assert_eq!(d.len(), 1);
        assert_eq!(d[0].0, "ymm7[255:128]");
        let mut b = a.clone();
        b.fsw ^= fsw::C2;
        assert_eq!(diff(&a, &b, 0)[0].0, "fsw");
        assert!(diff(&a, &b, fsw::C2).is_empty());
        let mut a2 = a.clone();
        a2.ftw = 0b0000_0100;
        let mut b = a2.clone();
        b.st[3][0] ^= 1; // R3 is empty: not compared
        assert!(diff(&a2, &b, 0).is_empty());
        b.st[2][9] ^= 0x80; // R2 is valid
        assert!(diff(&a2, &b, 0)[0].0.starts_with("x87 R2"));
    }

    #[test]
    fn value_generators_hit_the_special_classes() {
        let mut rng = Rng::new([3; 32]);
        let (mut pseudo_denormal, mut unnormal, mut snan, mut denormal) = (0, 0, 0, 0);
        for _ in 0..2000 {
            let v = rng.f80();
            let man = u64::from_le_bytes(get(&v, 0));
            let exp = u16::from_le_bytes(get(&v, 8)) & 0x7fff;
            let j = man >> 63 == 1;
            match (exp, j) {
                (0, true) => pseudo_denormal += 1,
                (0, false) if man != 0 => denormal += 1,
                (0x7fff, true) if man << 1 != 0 && man & (1 << 62) == 0 => snan += 1,
                (e, false) if e != 0 && e != 0x7fff => unnormal += 1,
                _ => {}
            }
        }
        assert!(pseudo_denormal > 20 && unnormal > 20 && snan > 20 && denormal > 20);
        let nans = (0..1000)
            .filter(|_| {
                let f = rng.f32_bits();
                f & 0x7f80_0000 == 0x7f80_0000 && f & 0x7f_ffff != 0
            })
            .count();
        assert!(nans > 30, "{nans}");
    }
}
