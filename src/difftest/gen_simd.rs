//! Builders for the SIMD/x87 forms that need more than random operands: AVX2 gathers (VSIB
//! operands whose index and mask registers are prepared in the case's initial state),
//! MASKMOVQ/MASKMOVDQU through RDI, XSAVE/XRSTOR with EDX:EAX set, XGETBV with ECX set and
//! EAX masked, state loads after their saves, and LDMXCSR/FLDCW after a store of a sensible
//! value.

use super::forms::{Form, Kind, Op};
use super::gen::{make, Build, Item, RDI, V};
use super::layout::DATA_ADDR;
use iced_x86::{Code, Instruction, MemoryOperand, Register};

const RAX: usize = 0;
const RDX: usize = 2;

/// `m` moved by `off` bytes (same registers; the displacement widened to 32 bits).
fn mem_plus(m: MemoryOperand, off: i64) -> MemoryOperand {
    let mut m = m;
    m.displacement = m.displacement.wrapping_add(off);
    if m.base != Register::RIP && m.base != Register::None {
        let addr32 = m.base.is_gpr32();
        m.displ_size = if addr32 { 4 } else { 8 };
    }
    m
}

impl Build<'_> {
    fn fixed(ins: Instruction) -> Item {
        Item::Fixed(ins)
    }

    /// Three distinct vector registers (rarely not distinct: gathers then raise #UD).
    fn three_regs(&mut self) -> [usize; 3] {
        loop {
            let r = [
                self.rng.below(16) as usize,
                self.rng.below(16) as usize,
                self.rng.below(16) as usize,
            ];
            let distinct = r[0] != r[1] && r[0] != r[2] && r[1] != r[2];
            if distinct || self.rng.chance(3) {
                return r;
            }
        }
    }

    fn gather(
        &mut self,
        form: &Form,
        ymm: bool,
        ymm_index: bool,
        index_q: bool,
        elem_q: bool,
    ) -> Option<Vec<Item>> {
        let [dst, index, mask] = self.three_regs();
        let vreg = |y: bool, i: usize| {
            if y {
                Register::YMM0 + i as u32
            } else {
                Register::XMM0 + i as u32
            }
        };
        let scale = self.rng.pick(&[1u32, 2, 4, 8]);
        let bv = self.gpr[self.base];
        let center = DATA_ADDR + 0x1000 + self.rng.below(0x2000);
        let disp = if self.base_wild {
            self.rng.below(512) as i64 - 256
        } else {
            center.wrapping_sub(bv) as i64
        };
        let m = MemoryOperand::with_base_index_scale_displ_size(
            super::seq::sized(self.base, 8),
            vreg(ymm_index, index),
            scale,
            disp,
            if disp == 0 { 0 } else { 1 },
        );
        // Index lanes within ±2 KiB of the centre (one in twenty far outside: #PF), mask lanes
        // mostly enabled (sign bit of each element).
        let span = (0x800 / scale) as i64;
        let st = self.simd.as_mut()?;
        let lanes_q = if ymm_index { 4 } else { 2 };
        for q in 0..lanes_q {
            let mut v = 0u64;
            for half in 0..(if index_q { 1 } else { 2 }) {
                let x = if self.rng.chance(5) {
                    self.rng
                        .pick(&[0x4000i64, -0x4000, 0x10_0000, -0x7fff_ffff])
                } else {
                    self.rng.below(2 * span as u64) as i64 - span
                };
                v |= if index_q {
                    x as u64
                } else {
                    (x as u32 as u64) << (32 * half)
                };
            }
            st.ymm[index][q] = v;
        }
        let elems = if elem_q { 4 } else { 8 };
        for e in 0..elems {
            let enabled = self.rng.chance(80);
            let (q, bit) = if elem_q {
                (e, 63)
            } else {
                (e / 2, 31 + 32 * (e % 2))
            };
            let w = &mut st.ymm[mask][q];
            *w = (*w & !(1u64 << bit)) | (enabled as u64) << bit;
        }
        let ins = Instruction::with3(form.code, vreg(ymm, dst), m, vreg(ymm, mask)).ok()?;
        (self.writes_ok(&ins, 0) && Self::encodable(&ins)).then(|| vec![Self::fixed(ins)])
    }

    fn maskmov(&mut self, form: &Form, reg: Op) -> Option<Vec<Item>> {
        let r = |b: &mut Self| match reg {
            Op::Mm => Register::MM0 + b.rng.below(8) as u32,
            _ => Register::XMM0 + b.rng.below(16) as u32,
        };
        let (a, b) = (r(self), r(self));
        let ins = match form.code {
            Code::Maskmovq_rDI_mm_mm => Instruction::with_maskmovq(64, a, b, Register::None),
            Code::Maskmovdqu_rDI_xmm_xmm => Instruction::with_maskmovdqu(64, a, b, Register::None),
            _ => Instruction::with_vmaskmovdqu(64, a, b, Register::None),
        }
        .ok()?;
        if self.reserved & (1 << RDI) == 0 {
            return None;
        }
        Some(vec![Self::fixed(ins)])
    }

    /// `mov eax, rfbm ; xor edx, edx` with RFBM a random subset of x87 | SSE | AVX.
    fn rfbm_setup(&mut self) -> Option<Vec<Item>> {
        if self.reserved & ((1 << RAX) | (1 << RDX)) != 0 {
            return None;
        }
        let rfbm = if self.rng.chance(60) {
            7
        } else {
            self.rng.below(8) as u32
        };
        Some(vec![
            Self::fixed(Instruction::with2(Code::Mov_r32_imm32, Register::EAX, rfbm).ok()?),
            Self::fixed(Instruction::with2(Code::Xor_r32_rm32, Register::EDX, Register::EDX).ok()?),
        ])
    }

    fn xsave(&mut self, form: &Form, restore: bool, save: Code) -> Option<Vec<Item>> {
        let mut items = self.rfbm_setup()?;
        let m = self.mem(super::forms_simd::XSAVE_LEN);
        if restore && self.rng.chance(75) {
            items.push(Self::fixed(Instruction::with1(save, m).ok()?));
            // XSAVE only writes the XSTATE_BV bits of the components it saves and leaves the
            // rest of the header (XCOMP_BV, reserved bytes 520..575) as it was: clear the other
            // XSTATE_BV bits and the rest so that XRSTOR accepts the image.
            let bv = mem_plus(m, 512);
            items.push(Self::fixed(
                Instruction::with2(Code::And_rm64_imm8, bv, 7).ok()?,
            ));
            for k in 0..7 {
                let q = mem_plus(m, 520 + 8 * k);
                items.push(Self::fixed(
                    Instruction::with2(Code::Mov_rm64_imm32, q, 0).ok()?,
                ));
            }
        }
        let ins = Instruction::with1(form.code, m).ok()?;
        let own = (1 << RAX) | (1 << RDX);
        for it in &items {
            if let Item::Fixed(i) = it {
                if !Self::encodable(i) || !self.writes_ok(i, own) {
                    return None;
                }
            }
        }
        if !Self::encodable(&ins) {
            return None;
        }
        items.push(Self::fixed(ins));
        Some(items)
    }

    fn after_save(&mut self, form: &Form, save: Code, size: u16) -> Option<Vec<Item>> {
        let m = self.mem(size);
        let mut items = Vec::new();
        if self.rng.chance(75) {
            items.push(Self::fixed(Instruction::with1(save, m).ok()?));
        }
        items.push(Self::fixed(Instruction::with1(form.code, m).ok()?));
        for it in &items {
            if let Item::Fixed(i) = it {
                if !Self::encodable(i) {
                    return None;
                }
            }
        }
        Some(items)
    }

    fn load_ctl(&mut self, form: &Form, mxcsr: bool) -> Option<Vec<Item>> {
        let m = self.mem(if mxcsr { 4 } else { 2 });
        let mut items = Vec::new();
        if self.rng.chance(80) {
            let store = if mxcsr {
                let v = self.rng.mxcsr();
                Instruction::with2(Code::Mov_rm32_imm32, m, v)
            } else {
                let v = self.rng.fcw() as u32;
                Instruction::with2(Code::Mov_rm16_imm16, m, v)
            }
            .ok()?;
            items.push(Self::fixed(store));
        }
        let ins = make(form.code, &[V::M(m)]).ok()?;
        items.push(Self::fixed(ins));
        for it in &items {
            if let Item::Fixed(i) = it {
                if !Self::encodable(i) {
                    return None;
                }
            }
        }
        Some(items)
    }

    /// An in-range argument: `fld qword [m]` of a double in [-max, max] stored just before.
    fn x87_domain(&mut self, form: &Form, max: u64) -> Option<Vec<Item>> {
        let maxf = f64::from_bits(max);
        let x = match self.rng.below(10) {
            0 => self
                .rng
                .pick(&[0.0, -0.0, maxf, -maxf, 0.5, -0.5, f64::MIN_POSITIVE]),
            1..=3 => {
                // Small magnitudes: max * 2^-k with a random mantissa.
                let k = 1 + self.rng.below(70) as i32;
                let m = 1.0 + (self.rng.u64() >> 12) as f64 / (1u64 << 52) as f64;
                maxf * m * 0.5 * 2f64.powi(-k)
            }
            _ => (self.rng.u64() >> 11) as f64 / (1u64 << 53) as f64 * maxf,
        };
        let x = if self.rng.chance(50) { -x } else { x };
        let bits = x.to_bits();
        let m = self.mem(8);
        let lo = Instruction::with2(Code::Mov_rm32_imm32, m, bits as u32).ok()?;
        let hi =
            Instruction::with2(Code::Mov_rm32_imm32, mem_plus(m, 4), (bits >> 32) as u32).ok()?;
        let fld = Instruction::with1(Code::Fld_m64fp, m).ok()?;
        let ins = Instruction::with(form.code);
        let items = [lo, hi, fld, ins];
        if !items.iter().all(Self::encodable) {
            return None;
        }
        Some(items.into_iter().map(Self::fixed).collect())
    }

    /// `mov ecx, sel ; xgetbv ; and eax, 7` (see [`Kind::Xgetbv`]). Selector 1 (XCR0 & XINUSE)
    /// agrees as long as the model's value-derived XINUSE matches the host's per-instruction
    /// tracking, which it does for the random initial states (docs/floating-point.md).
    fn xgetbv(&mut self, form: &Form) -> Option<Vec<Item>> {
        const RCX: usize = 1;
        if self.reserved & ((1 << RAX) | (1 << RCX) | (1 << RDX)) != 0 {
            return None;
        }
        let sel = match self.rng.below(10) {
            0..=5 => 0,
            6..=8 => 1,
            _ => self.rng.pick(&[2u32, 3, 0x10, 0x8000_0000, 0xffff_ffff]),
        };
        let items = [
            Instruction::with2(Code::Mov_r32_imm32, Register::ECX, sel).ok()?,
            Instruction::with(form.code),
            Instruction::with2(Code::And_EAX_imm32, Register::EAX, 7).ok()?,
        ];
        let own = (1 << RAX) | (1 << RCX) | (1 << RDX);
        if !items
            .iter()
            .all(|i| Self::encodable(i) && self.writes_ok(i, own))
        {
            return None;
        }
        Some(items.into_iter().map(Self::fixed).collect())
    }

    /// The instructions of a SIMD form with its own builder.
    pub(super) fn simd_form(&mut self, form: &Form) -> Option<Vec<Item>> {
        match form.kind {
            Kind::Gather {
                ymm,
                ymm_index,
                index_q,
                elem_q,
            } => self.gather(form, ymm, ymm_index, index_q, elem_q),
            Kind::MaskMov(reg) => self.maskmov(form, reg),
            Kind::Xsave { restore, save } => self.xsave(form, restore, save),
            Kind::AfterSave { save, size } => self.after_save(form, save, size),
            Kind::LoadCtl { mxcsr } => self.load_ctl(form, mxcsr),
            Kind::X87Domain { max } => self.x87_domain(form, max),
            Kind::Xgetbv => self.xgetbv(form),
            _ => None,
        }
    }
}
