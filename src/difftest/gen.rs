//! The case generator: draws 1..K forms from the table, reserves the registers the case needs
//! (a memory base, RSP, and per need RSI/RDI/RCX, RBP or a small-offset register), picks
//! edge-biased register values, and builds each form's instructions with iced.
//!
//! Invariants that keep native and interpreted runs comparable: generated instructions never
//! write a reserved register (checked with iced's instruction info, implicit writes included),
//! memory operands address the data area (a few percent on purpose just outside it, where both
//! sides fault alike), and control flow only goes forward inside the sequence.

use super::forms::{need, Form, Kind, Op, Str, DF, STATUS};
use super::layout::{CODE_ADDR, DATA_ADDR, DATA_LEN};
use super::outcome::is_transcendental;
use super::seq::HIGH8;
pub use super::seq::{encode_groups, sized, GenCase, Group, Item, Span};
use super::simd::SimdState;
use iced_x86::{
    Code, Encoder, IcedError, Instruction, InstructionInfoFactory, MemoryOperand, Mnemonic,
    OpAccess, OpKind, Register,
};
use rand_chacha::ChaCha20Rng;
use rand_core::{RngCore, SeedableRng};

const RCX: usize = 1;
const RBX: usize = 3;
const RSP: usize = 4;
const RBP: usize = 5;
const RSI: usize = 6;
pub(super) const RDI: usize = 7;
pub(super) const DATA_END: u64 = DATA_ADDR + DATA_LEN as u64;

/// The generator's random source (ChaCha20, seeded from the run seed's "difftest" domain).
pub struct Rng(ChaCha20Rng);

impl Rng {
    pub fn new(seed: [u8; 32]) -> Self {
        Rng(ChaCha20Rng::from_seed(seed))
    }
    pub fn u64(&mut self) -> u64 {
        self.0.next_u64()
    }
    /// Uniform in `0..n` (n > 0).
    pub fn below(&mut self, n: u64) -> u64 {
        self.u64() % n.max(1)
    }
    /// True with probability `pct` percent.
    pub fn chance(&mut self, pct: u64) -> bool {
        self.below(100) < pct
    }
    pub fn pick<T: Copy>(&mut self, s: &[T]) -> T {
        s[self.below(s.len() as u64) as usize]
    }
    /// A register value biased towards edge cases.
    pub fn edge(&mut self) -> u64 {
        match self.below(16) {
            0 => 0,
            1 => 1,
            2 => u64::MAX,
            3 => self.pick(&[
                0x80,
                0x7f,
                0xff,
                0x100,
                0x8000,
                0x7fff,
                0xffff,
                0x8000_0000,
                0x7fff_ffff,
                0xffff_ffff,
                0x1_0000_0000,
                1 << 63,
                (1 << 63) - 1,
                0xff00,
            ]),
            4 => self.below(70),
            5 => self.below(70).wrapping_neg(),
            6 => self.u64() as i8 as u64,
            7 => self.u64() as i16 as u64,
            8 => self.u64() as u32 as u64,
            9 => 1 << self.below(64),
            10 => !(1u64 << self.below(64)),
            _ => self.u64(),
        }
    }
}

/// An operand value while building one instruction.
#[derive(Clone, Copy, Debug)]
pub(super) enum V {
    R(Register),
    M(MemoryOperand),
    I(i64),
}

/// Create an instruction from dynamic operands.
pub(super) fn make(code: Code, ops: &[V]) -> Result<Instruction, IcedError> {
    fn imm(v: i64) -> Result<i32, IcedError> {
        // Out-of-range values never reach here (see Build::imm); clamp defensively.
        if let Ok(x) = i32::try_from(v) {
            Ok(x)
        } else if let Ok(x) = u32::try_from(v) {
            Ok(x as i32)
        } else {
            Ok(v as i32)
        }
    }
    use V::*;
    match *ops {
        [] => Ok(Instruction::with(code)),
        [R(a)] => Instruction::with1(code, a),
        [M(a)] => Instruction::with1(code, a),
        [I(a)] => Instruction::with1(code, imm(a)?),
        [R(a), R(b)] => Instruction::with2(code, a, b),
        [R(a), M(b)] => Instruction::with2(code, a, b),
        [M(a), R(b)] => Instruction::with2(code, a, b),
        [R(a), I(b)] if code == Code::Mov_r64_imm64 => Instruction::with2(code, a, b as u64),
        [R(a), I(b)] => Instruction::with2(code, a, imm(b)?),
        [M(a), I(b)] => Instruction::with2(code, a, imm(b)?),
        [I(a), I(b)] => Instruction::with2(code, imm(a)? as u32, imm(b)? as u32),
        [R(a), R(b), R(c)] => Instruction::with3(code, a, b, c),
        [R(a), R(b), M(c)] => Instruction::with3(code, a, b, c),
        [R(a), M(b), R(c)] => Instruction::with3(code, a, b, c),
        [R(a), R(b), I(c)] => Instruction::with3(code, a, b, imm(c)?),
        [R(a), M(b), I(c)] => Instruction::with3(code, a, b, imm(c)?),
        [M(a), R(b), R(c)] => Instruction::with3(code, a, b, c),
        [M(a), R(b), I(c)] => Instruction::with3(code, a, b, imm(c)?),
        [R(a), R(b), R(c), R(d)] => Instruction::with4(code, a, b, c, d),
        [R(a), R(b), M(c), R(d)] => Instruction::with4(code, a, b, c, d),
        [R(a), R(b), R(c), I(d)] => Instruction::with4(code, a, b, c, imm(d)?),
        [R(a), R(b), M(c), I(d)] => Instruction::with4(code, a, b, c, imm(d)?),
        // Not produced by the table: an instruction without operands fails to encode later.
        _ => Ok(Instruction::with(Code::INVALID)),
    }
}

fn is_write(a: OpAccess) -> bool {
    matches!(
        a,
        OpAccess::Write | OpAccess::CondWrite | OpAccess::ReadWrite | OpAccess::ReadCondWrite
    )
}

/// Per-case building state handed to the form builders.
pub(super) struct Build<'a> {
    pub(super) rng: &'a mut Rng,
    pub(super) iif: &'a mut InstructionInfoFactory,
    pub(super) gpr: [u64; 16],
    /// Registers no instruction may write (bit per register), RSP included.
    pub(super) reserved: u16,
    pub(super) base: usize,
    /// The base register does not point into the data area (deliberately faulting case).
    pub(super) base_wild: bool,
    small: Option<usize>,
    /// RBP currently points into the stack area.
    rbp_valid: bool,
    /// The case's initial SIMD/x87 state (SIMD cases); builders may adjust registers in it.
    pub(super) simd: Option<SimdState>,
}

impl Build<'_> {
    pub(super) fn writable(&mut self) -> usize {
        loop {
            let i = self.rng.below(16) as usize;
            if self.reserved & (1 << i) == 0 {
                return i;
            }
        }
    }

    pub(super) fn reg(&mut self, size: u8, prefer_write: bool) -> Register {
        let i = if prefer_write || self.rng.chance(60) {
            self.writable()
        } else {
            self.rng.below(16) as usize
        };
        if size == 1 && i < 4 && self.rng.chance(35) {
            HIGH8[i]
        } else {
            sized(i, size)
        }
    }

    pub(super) fn imm(&mut self, bits: u8) -> i64 {
        let r = &mut *self.rng;
        match bits {
            8 => {
                if r.chance(50) {
                    r.pick(&[
                        0, 1, 2, 3, 4, 5, 7, 8, 9, 15, 16, 17, 31, 32, 33, 63, 64, 65, 127, -128,
                        -1, -2, -127,
                    ])
                } else {
                    r.u64() as i8 as i64
                }
            }
            16 => {
                if r.chance(40) {
                    r.pick(&[
                        0, 1, -1, 2, 0x7fff, -0x8000, 0xff, 0x100, 0x80, -0x81, 8, 16, 31,
                    ])
                } else {
                    r.u64() as i16 as i64
                }
            }
            32 => {
                if r.chance(40) {
                    r.pick(&[
                        0,
                        1,
                        -1,
                        2,
                        0x7fff_ffff,
                        -0x8000_0000,
                        0xff,
                        0xffff,
                        0x80,
                        0x8000,
                        -0x80,
                        31,
                        63,
                    ])
                } else if r.chance(30) {
                    (r.below(512) as i64) - 256
                } else {
                    r.u64() as i32 as i64
                }
            }
            _ => r.edge() as i64,
        }
    }

    /// A data-area address for an access of `sz` bytes.
    pub(super) fn target(&mut self, sz: u64) -> u64 {
        let r = self.rng.below(100);
        if r < 3 {
            // Straddling or just outside the ends of the data area: both sides fault alike.
            return match self.rng.below(3) {
                0 => DATA_END - sz / 2,
                1 => DATA_END + self.rng.below(64),
                _ => DATA_ADDR - 1 - self.rng.below(sz.max(2) - 1),
            };
        }
        // Vector operands (most need alignment) straddle a page less often: 5 % instead of 10 %.
        let straddle = if sz >= 16 { 8 } else { 13 };
        if r < straddle && sz > 1 {
            // Straddling a page boundary inside the area.
            let page = DATA_ADDR + (1 + self.rng.below(3)) * 0x1000;
            return page - 1 - self.rng.below(sz - 1);
        }
        let mut t = DATA_ADDR + self.rng.below(DATA_LEN as u64 - sz);
        let align_pct = if sz >= 16 { 94 } else { 60 };
        // Vector and state-save operands need 16/32/64-byte alignment (FXSAVE 16, XSAVE 64).
        let align = match sz {
            512 => 16,
            s if s > 64 => 64,
            s if s.is_power_of_two() => s,
            _ => 1,
        };
        if self.rng.chance(align_pct) {
            t &= !(align - 1);
        }
        t
    }

    fn displ_size(&mut self, disp: i64, addr32: bool) -> u32 {
        if disp == 0 && self.rng.chance(50) {
            0
        } else if self.rng.chance(85) {
            1 // disp8 when it fits, else the full size
        } else if addr32 {
            4
        } else {
            8
        }
    }

    /// A memory operand of `size` bytes addressing the data area.
    pub(super) fn mem(&mut self, size: u16) -> MemoryOperand {
        let sz = size.max(1) as u64;
        let target = self.target(sz);
        let a = self.rng.below(100);
        if a < 10 {
            return MemoryOperand::with_base_displ(Register::RIP, target as i64);
        }
        if a < 13 {
            return MemoryOperand::with_displ(target, 4);
        }
        if a < 21 {
            let mut disp = self.rng.below(97) as i64 - 32;
            if sz >= 16 && self.rng.chance(85) {
                // Vector operands: mostly aligned to 16/32 (RSP itself may be misaligned).
                let (rsp, align) = (self.gpr[RSP], if sz >= 32 { 32 } else { 16 });
                disp = (rsp.wrapping_add(disp as u64) & !(align - 1)).wrapping_sub(rsp) as i64;
            }
            let ds = self.displ_size(disp, false);
            return MemoryOperand::with_base_displ_size(Register::RSP, disp, ds);
        }
        let addr32 = self.rng.chance(8);
        let w = if addr32 { 4 } else { 8 };
        let bv = self.gpr[self.base];
        if let Some(s) = self.small.filter(|_| self.rng.chance(35)) {
            let scale = self.rng.pick(&[1u32, 2, 4, 8]);
            let disp = if self.base_wild {
                self.rng.below(512) as i64 - 256
            } else {
                (target
                    .wrapping_sub(bv)
                    .wrapping_sub(self.gpr[s].wrapping_mul(scale as u64))) as i64
            };
            let disp = if addr32 { disp as i32 as i64 } else { disp };
            let ds = self.displ_size(disp, addr32);
            return MemoryOperand::with_base_index_scale_displ_size(
                sized(self.base, w),
                sized(s, w),
                scale,
                disp,
                ds,
            );
        }
        let disp = if self.base_wild {
            self.rng.below(512) as i64 - 256
        } else {
            target.wrapping_sub(bv) as i64
        };
        let disp = if addr32 { disp as i32 as i64 } else { disp };
        let ds = self.displ_size(disp, addr32);
        MemoryOperand::with_base_displ_size(sized(self.base, w), disp, ds)
    }

    /// An address that is only computed (LEA, NOP r/m): any registers, scale and displacement.
    fn addr_any(&mut self) -> MemoryOperand {
        let addr32 = self.rng.chance(20);
        let w = if addr32 { 4 } else { 8 };
        let disp = self.imm(32);
        let r = self.rng.below(100);
        if r < 8 && !addr32 {
            let t = CODE_ADDR.wrapping_add(self.rng.below(0x1_0000));
            return MemoryOperand::with_base_displ(Register::RIP, t as i64);
        }
        let base = if r < 20 {
            Register::None
        } else {
            sized(self.rng.below(16) as usize, w)
        };
        let index = if self.rng.chance(40) {
            Register::None
        } else {
            let mut i = self.rng.below(16) as usize;
            if i == RSP {
                i = RBX;
            }
            sized(i, w)
        };
        let scale = self.rng.pick(&[1u32, 2, 4, 8]);
        if base == Register::None && index == Register::None {
            return MemoryOperand::with_displ(disp as i32 as u32 as u64, 4);
        }
        let ds = if base == Register::None {
            4
        } else {
            self.displ_size(disp, addr32)
        };
        MemoryOperand::with_base_index_scale_displ_size(base, index, scale, disp, ds)
    }

    /// Does `ins` leave every reserved register alone (except those in `own`), and never
    /// name RSP as an explicit destination?
    pub(super) fn writes_ok(&mut self, ins: &Instruction, own: u16) -> bool {
        let info = self.iif.info(ins);
        for i in 0..ins.op_count() {
            if ins.op_kind(i) == OpKind::Register
                && ins.op_register(i).full_register() == Register::RSP
                && is_write(info.op_access(i))
            {
                return false;
            }
        }
        for u in info.used_registers() {
            let f = u.register().full_register();
            if !f.is_gpr64() || !is_write(u.access()) {
                continue;
            }
            let idx = f.number();
            if idx != RSP && self.reserved & !own & (1 << idx) != 0 {
                return false;
            }
        }
        true
    }

    pub(super) fn encodable(ins: &Instruction) -> bool {
        Encoder::new(64).encode(ins, CODE_ADDR).is_ok()
    }

    /// Build a single instruction of a plain form, retrying operand choices that cannot be
    /// encoded (AH..BH with REX) or that would write a reserved register.
    pub(super) fn plain(&mut self, form: &Form, ops: &[Op], own: u16) -> Option<Instruction> {
        for _ in 0..48 {
            let mut vals = Vec::with_capacity(ops.len());
            for (i, op) in ops.iter().enumerate() {
                vals.push(match *op {
                    Op::R(s) => V::R(self.reg(s, i == 0)),
                    Op::M(s) => V::M(self.mem(s as u16)),
                    Op::Mem(s) => V::M(self.mem(s)),
                    Op::Xmm => V::R(Register::XMM0 + self.rng.below(16) as u32),
                    Op::Ymm => V::R(Register::YMM0 + self.rng.below(16) as u32),
                    Op::Mm => V::R(Register::MM0 + self.rng.below(8) as u32),
                    Op::Sti => V::R(Register::ST0 + self.rng.below(8) as u32),
                    Op::Addr => V::M(self.addr_any()),
                    Op::Moffs(s) => V::M(MemoryOperand::with_displ(self.target(s as u64), 8)),
                    Op::Imm(b) => V::I(self.imm(b)),
                    Op::One => V::I(1),
                    Op::Fixed(r) => V::R(r),
                    Op::Small(s) => V::R(sized(self.small?, s)),
                });
            }
            let Ok(mut ins) = make(form.code, &vals) else {
                continue;
            };
            if form.lock {
                ins.set_has_lock_prefix(true);
            }
            if self.writes_ok(&ins, own) && Self::encodable(&ins) {
                return Some(ins);
            }
        }
        None
    }

    fn skip(&mut self) -> Item {
        Item::Fixed(Instruction::with(if self.rng.chance(70) {
            Code::Cmc
        } else {
            Code::Nopd
        }))
    }

    fn lea_to_end(&mut self) -> Option<(usize, Item)> {
        let r = self.writable();
        let lea = Instruction::with2(
            Code::Lea_r64_m,
            sized(r, 8),
            MemoryOperand::with_base_displ(Register::RIP, CODE_ADDR as i64),
        )
        .ok()?;
        Some((r, Item::RipToEnd(lea)))
    }

    /// The instructions of one form, or None if it cannot be built in this case.
    fn form(&mut self, form: &Form) -> Option<Vec<Item>> {
        let fixed = |i: Instruction| Item::Fixed(i);
        match &form.kind {
            Kind::Plain(ops) => Some(vec![fixed(self.plain(form, ops, 0)?)]),
            Kind::Div(ops) => {
                let mut items = Vec::new();
                if self.rng.chance(75) {
                    let size = match ops[0] {
                        Op::R(s) | Op::M(s) => s,
                        _ => 8,
                    };
                    let signed = form.code.mnemonic() == Mnemonic::Idiv;
                    let setup = match (signed, size) {
                        (false, 1) => {
                            Instruction::with2(Code::Xor_r8_rm8, Register::AH, Register::AH).ok()?
                        }
                        (false, _) => {
                            Instruction::with2(Code::Xor_r32_rm32, Register::EDX, Register::EDX)
                                .ok()?
                        }
                        (true, 1) => Instruction::with(Code::Cbw),
                        (true, 2) => Instruction::with(Code::Cwd),
                        (true, 4) => Instruction::with(Code::Cdq),
                        (true, _) => Instruction::with(Code::Cqo),
                    };
                    items.push(fixed(setup));
                }
                items.push(fixed(self.plain(form, ops, 0)?));
                Some(items)
            }
            Kind::Branch => {
                let ins = Instruction::with_branch(form.code, CODE_ADDR).ok()?;
                if !self.writes_ok(&ins, 0) {
                    return None;
                }
                Some(vec![Item::BranchToEnd(ins), self.skip()])
            }
            Kind::Indirect { mem } => {
                let (r, lea) = self.lea_to_end()?;
                let r64 = sized(r, 8);
                let mut items = vec![lea];
                if *mem {
                    let m = self.mem(8);
                    items.push(fixed(Instruction::with2(Code::Mov_rm64_r64, m, r64).ok()?));
                    items.push(fixed(Instruction::with1(form.code, m).ok()?));
                } else {
                    items.push(fixed(Instruction::with1(form.code, r64).ok()?));
                }
                items.push(self.skip());
                Some(items)
            }
            Kind::Ret { imm } => {
                let (r, lea) = self.lea_to_end()?;
                let push = Instruction::with1(Code::Push_r64, sized(r, 8)).ok()?;
                let ret = if *imm {
                    let n = if self.rng.chance(80) {
                        self.rng.pick(&[0u32, 8, 16, 24, 2, 0x40])
                    } else {
                        self.rng.below(0x1_0000) as u32
                    };
                    Instruction::with1(form.code, n).ok()?
                } else {
                    Instruction::with(form.code)
                };
                Some(vec![lea, fixed(push), fixed(ret), self.skip()])
            }
            Kind::Popf => {
                let flip = self.rng.u64() & (STATUS | DF);
                let top = MemoryOperand::with_base(Register::RSP);
                let (push, xor) = if form.code == Code::Popfw {
                    (Code::Pushfw, Code::Xor_rm16_imm16)
                } else {
                    (Code::Pushfq, Code::Xor_rm64_imm32)
                };
                Some(vec![
                    fixed(Instruction::with(push)),
                    fixed(Instruction::with2(xor, top, flip as u32).ok()?),
                    fixed(Instruction::with(form.code)),
                ])
            }
            Kind::Enter => {
                let frame = if self.rng.chance(85) {
                    self.rng.pick(&[0u32, 8, 16, 0x20, 3]) + (self.rng.below(0x100) as u32 & 0x1f8)
                } else {
                    self.rng.below(0x1_0000) as u32
                };
                let level = if self.rng.chance(80) {
                    self.rng.pick(&[0u32, 1, 2, 3, 4])
                } else {
                    let any = self.rng.below(256) as u32;
                    self.rng.pick(&[31u32, 32, 33, 255, any])
                };
                if level % 32 >= 2 && !self.rbp_valid {
                    return None;
                }
                let ins = Instruction::with2(form.code, frame, level).ok()?;
                if !self.writes_ok(&ins, 1 << RBP) {
                    return None;
                }
                if form.code == Code::Enterq_imm16_imm8 {
                    self.rbp_valid = true;
                }
                Some(vec![fixed(ins)])
            }
            Kind::Leave => {
                if !self.rbp_valid {
                    return None;
                }
                self.rbp_valid = false;
                Some(vec![fixed(Instruction::with(form.code))])
            }
            Kind::String(s, size, rep) => {
                let a = if self.rng.chance(15) { 32 } else { 64 };
                let seg = Register::None;
                let ins = match (s, size) {
                    (Str::Movs, 1) => Instruction::with_movsb(a, seg, *rep),
                    (Str::Movs, 2) => Instruction::with_movsw(a, seg, *rep),
                    (Str::Movs, 4) => Instruction::with_movsd(a, seg, *rep),
                    (Str::Movs, _) => Instruction::with_movsq(a, seg, *rep),
                    (Str::Stos, 1) => Instruction::with_stosb(a, *rep),
                    (Str::Stos, 2) => Instruction::with_stosw(a, *rep),
                    (Str::Stos, 4) => Instruction::with_stosd(a, *rep),
                    (Str::Stos, _) => Instruction::with_stosq(a, *rep),
                    (Str::Lods, 1) => Instruction::with_lodsb(a, seg, *rep),
                    (Str::Lods, 2) => Instruction::with_lodsw(a, seg, *rep),
                    (Str::Lods, 4) => Instruction::with_lodsd(a, seg, *rep),
                    (Str::Lods, _) => Instruction::with_lodsq(a, seg, *rep),
                    (Str::Cmps, 1) => Instruction::with_cmpsb(a, seg, *rep),
                    (Str::Cmps, 2) => Instruction::with_cmpsw(a, seg, *rep),
                    (Str::Cmps, 4) => Instruction::with_cmpsd(a, seg, *rep),
                    (Str::Cmps, _) => Instruction::with_cmpsq(a, seg, *rep),
                    (Str::Scas, 1) => Instruction::with_scasb(a, *rep),
                    (Str::Scas, 2) => Instruction::with_scasw(a, *rep),
                    (Str::Scas, 4) => Instruction::with_scasd(a, *rep),
                    (Str::Scas, _) => Instruction::with_scasq(a, *rep),
                }
                .ok()?;
                let own = (1 << RSI) | (1 << RDI) | (1 << RCX);
                if !self.writes_ok(&ins, own) {
                    return None;
                }
                Some(vec![fixed(ins)])
            }
            Kind::Gather { .. }
            | Kind::MaskMov(_)
            | Kind::Xsave { .. }
            | Kind::AfterSave { .. }
            | Kind::LoadCtl { .. }
            | Kind::X87Domain { .. }
            | Kind::Xgetbv => self.simd_form(form),
        }
    }
}

/// Does the case read XINUSE (XSAVE/XSAVEOPT/XSAVEC, XGETBV) after a form that may clear it
/// (VZEROALL, VZEROUPPER, XRSTOR) with another form in between? The host tracks XINUSE per
/// instruction, the model derives it from values (docs/floating-point.md, "XINUSE (deliberate
/// difference)"): they differ when an instruction leaves a cleared component at its initial
/// values (`vzeroall; vpaddw ymm9, ymm14, ymm8; xsave`: XSTATE_BV[1] is 1 on the host, 0 in
/// the model). Such cases are not drawn; a reader right after the clearer still is.
fn xinuse_hazard(forms: &[Form], picks: &[usize]) -> bool {
    use iced_x86::Mnemonic as M;
    let Some(clear) = picks.iter().position(|&p| {
        matches!(
            forms[p].code.mnemonic(),
            M::Vzeroall | M::Vzeroupper | M::Xrstor | M::Xrstor64
        )
    }) else {
        return false;
    };
    picks.iter().skip(clear + 2).any(|&p| {
        matches!(
            forms[p].code.mnemonic(),
            M::Xsave
                | M::Xsave64
                | M::Xsaveopt
                | M::Xsaveopt64
                | M::Xsavec
                | M::Xsavec64
                | M::Xgetbv
        )
    })
}

/// Draws cases from the enabled forms.
pub struct Generator {
    forms: Vec<Form>,
    /// Forms a case may contain anywhere.
    enabled: Vec<usize>,
    /// Forms allowed before the last position: all but the x87 transcendentals (their results
    /// may be judged approximate, which only works when nothing consumes them).
    chainable: Vec<usize>,
    /// Chainable forms without undefined flags (the only ones allowed before the last position
    /// when undefined flags are masked: a later instruction could consume them).
    defined: Vec<usize>,
    compare_undefined: bool,
    len: usize,
    rng: Rng,
    iif: InstructionInfoFactory,
}

impl Generator {
    /// `enabled`: indices into `forms`; `len`: at most this many forms per case.
    pub fn new(
        forms: Vec<Form>,
        enabled: Vec<usize>,
        compare_undefined: bool,
        len: usize,
        seed: [u8; 32],
    ) -> Self {
        let chainable: Vec<usize> = enabled
            .iter()
            .copied()
            .filter(|&i| !is_transcendental(forms[i].code.mnemonic()))
            .collect();
        let defined = chainable
            .iter()
            .copied()
            .filter(|&i| forms[i].undef_flags == 0 && forms[i].undef_fsw == 0)
            .collect();
        Generator {
            forms,
            enabled,
            chainable,
            defined,
            compare_undefined,
            len: len.max(1),
            rng: Rng::new(seed),
            iif: InstructionInfoFactory::new(),
        }
    }

    pub fn forms(&self) -> &[Form] {
        &self.forms
    }

    /// Stop drawing form `i` (e.g. the interpreter does not implement it).
    pub fn disable(&mut self, i: usize) {
        self.enabled.retain(|&x| x != i);
        self.chainable.retain(|&x| x != i);
        self.defined.retain(|&x| x != i);
    }

    /// Forms still drawn.
    pub fn enabled(&self) -> &[usize] {
        &self.enabled
    }

    /// The next case (never empty); None once every form has been disabled.
    pub fn next_case(&mut self) -> Option<GenCase> {
        if self.enabled.is_empty() {
            return None;
        }
        loop {
            if let Some(c) = self.try_case() {
                return Some(c);
            }
        }
    }

    fn try_case(&mut self) -> Option<GenCase> {
        let rng = &mut self.rng;
        let n = 1 + rng.below(self.len as u64) as usize;
        let mut picks = Vec::with_capacity(n);
        for pos in 0..n {
            let last = pos + 1 == n;
            let pool = if last {
                &self.enabled
            } else if self.compare_undefined {
                &self.chainable
            } else {
                &self.defined
            };
            if !pool.is_empty() {
                picks.push(rng.pick(pool));
            }
        }
        if xinuse_hazard(&self.forms, &picks) {
            return None;
        }
        let needs = picks.iter().fold(0, |a, &p| a | self.forms[p].needs);

        let mut reserved: u16 = 1 << RSP;
        if needs & need::STR != 0 {
            reserved |= (1 << RSI) | (1 << RDI) | (1 << RCX);
        }
        if needs & need::RDI != 0 {
            reserved |= 1 << RDI;
        }
        if needs & need::RBP != 0 {
            reserved |= 1 << RBP;
        }
        let bases: Vec<usize> = [RBX, RBP, 12, 13, 14, 15]
            .into_iter()
            .filter(|&r| reserved & (1 << r) == 0)
            .collect();
        let base = rng.pick(&bases);
        reserved |= 1 << base;
        let small = if needs & need::SMALL != 0 || rng.chance(40) {
            let c: Vec<usize> = [RBX, RBP, 8, 9, 10, 11, 12, 13, 14, 15]
                .into_iter()
                .filter(|&r| reserved & (1 << r) == 0)
                .collect();
            let s = rng.pick(&c);
            reserved |= 1 << s;
            Some(s)
        } else {
            None
        };

        let mut gpr = [0u64; 16];
        for g in gpr.iter_mut() {
            *g = rng.edge();
        }
        gpr[RSP] = (DATA_ADDR + 0x3400 + rng.below(0x800)) & !7;
        if rng.chance(10) {
            gpr[RSP] += rng.below(8);
        }
        let wild = rng.below(100);
        let base_wild = wild < 3;
        gpr[base] = match wild {
            0 => DATA_END + rng.below(0x100),
            1 => DATA_ADDR - 0x100 + rng.below(0x80),
            2 => 0x8000_0000_0000_0000 | DATA_ADDR,
            _ => DATA_ADDR + 0x1000 + rng.below(0x2000),
        };
        if let Some(s) = small {
            gpr[s] = if rng.chance(50) {
                rng.below(64)
            } else {
                (rng.below(2048) as i64 - 1024) as u64
            };
        }
        if needs & need::STR != 0 {
            gpr[RSI] = DATA_ADDR + 0x400 + rng.below(0x3000);
            gpr[RDI] = DATA_ADDR + 0x400 + rng.below(0x3000);
            gpr[RCX] = if rng.chance(70) {
                rng.pick(&[0, 1, 2, 3, 4, 5, 8])
            } else {
                rng.below(40)
            };
        }
        if needs & need::RBP != 0 {
            gpr[RBP] = gpr[RSP].wrapping_add(rng.below(0x200)) & !7;
        }
        if needs & need::RDI != 0 && needs & need::STR == 0 {
            // MASKMOV* stores 8/16 bytes at [RDI]; now and then across a page or the end.
            gpr[RDI] = match rng.below(20) {
                0 => DATA_END - 4,
                1 => DATA_ADDR + 0x1000 - 3,
                _ => DATA_ADDR + 0x400 + rng.below(0x3000),
            };
        }
        let flags = (rng.u64() & STATUS) | if rng.chance(25) { DF } else { 0 };
        let mem_seed = rng.u64();
        let simd = if picks.iter().any(|&p| self.forms[p].isa.is_simd()) {
            Some(rng.simd_state())
        } else {
            None
        };

        let mut b = Build {
            rng: &mut self.rng,
            iif: &mut self.iif,
            gpr,
            reserved,
            base,
            base_wild,
            small,
            rbp_valid: true,
            simd,
        };
        let mut groups = Vec::with_capacity(picks.len());
        for &p in &picks {
            if let Some(items) = b.form(&self.forms[p]) {
                groups.push(Group { form: p, items });
            }
        }
        if groups.is_empty() {
            return None;
        }
        let (ignore_flags, ignore_fsw) = if self.compare_undefined {
            (0, 0)
        } else {
            groups.iter().fold((0, 0), |(a, w), g| {
                let f = &self.forms[g.form];
                (a | f.undef_flags, w | f.undef_fsw)
            })
        };
        let gc = GenCase {
            groups,
            gpr,
            flags,
            mem_seed,
            ignore_flags,
            simd: b.simd.take().map(Box::new),
            ignore_fsw,
        };
        // Reject the rare case whose code would not fit.
        gc.to_case().ok()?;
        Some(gc)
    }
}

#[cfg(test)]
#[path = "gen_tests.rs"]
mod tests;
