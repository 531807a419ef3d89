//! The baseline tier's SSE and AVX instructions: moves, logic, integer and floating-point
//! arithmetic, compares and conversions, run on the host itself with their XMM/YMM operands
//! renamed to host XMM0–XMM3 (loaded from and stored back to `CpuState`), GPR operands to
//! RAX/RDX and the memory operand to `[R9 + R8]`, as `insn` does for integer instructions.
//!
//! Why the host's result is the guest's: every form listed here is fully specified by the
//! architecture (IEEE 754 with x86's NaN, denormal and rounding rules; no approximations such
//! as RCPSS/RSQRTSS, whose tables differ between vendors), and the interpreter's semantics are
//! tested against the host CPU for each of them, under every MXCSR
//! (`lockstep_interp::ops::{sse_fp_native, simd_int_native, avx_native}`).
//!
//! The checks the interpreter makes come first, once per block on the main path: SSE usable
//! (CR0.EM and CR0.TS clear, CR4.OSFXSR set) or, for VEX, AVX usable (CR4.OSXSAVE, XCR0
//! enabling SSE and AVX state, CR0.TS clear); otherwise the block leaves before the
//! instruction and the interpreter raises the #UD or #NM. A legacy-encoded instruction whose
//! 16-byte memory operand must be aligned (all but MOVUPS/MOVUPD/MOVDQU/LDDQU), and the VEX
//! aligned moves, leave for the interpreter (#GP) when the address is not.
//!
//! MXCSR: the floating-point forms run only under the guest's default environment (every
//! exception masked, round to nearest, no DAZ or FTZ; the sticky flags may be anything),
//! checked at the block's first one, which then loads the host's MXCSR with that environment
//! and no flags raised. Every exit from there on (chained, deferring) ORs the flags the host
//! raised into the guest's MXCSR. Host MXCSR control stays the default, which is what the rest
//! of the host code assumes. Another guest environment leaves for the interpreter.
//!
//! Instructions a host without the extension cannot run (SSE3 and later, AVX, AVX2, FMA:
//! `iced_x86::Instruction::cpuid_features`) are left to Cranelift's tier.

use super::emit::Emit;
use crate::lift::sse_int::vec_off;
use iced_x86::code_asm::*;
use iced_x86::{Code, CpuidFeature, EncodingKind, Instruction, Mnemonic, OpKind, Register};
use lockstep_interp::operand::gpr_ref;
use lockstep_interp::ops::avx_common::XCR0_SSE_AVX;
use lockstep_interp::state::{ctl, CpuState};
use std::sync::OnceLock;

const OFF_MXCSR: i32 = core::mem::offset_of!(CpuState, mxcsr) as i32;
const OFF_FCW: i32 = (core::mem::offset_of!(CpuState, x87)
    + core::mem::offset_of!(lockstep_interp::state::X87State, fcw)) as i32;
const OFF_XCR0: i32 = core::mem::offset_of!(CpuState, xcr0) as i32;

/// MXCSR's default environment: every exception masked, round to nearest, no DAZ/FTZ.
const MXCSR_DEFAULT: u32 = 0x1f80;
/// MXCSR's sticky exception flags (bits 5:0).
const MXCSR_FLAGS: u32 = 0x3f;

/// What the tier knows of a covered SIMD instruction.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Form {
    /// Depends on MXCSR or raises its flags (floating-point arithmetic, compares,
    /// conversions).
    pub fp: bool,
    /// Sets the status flags (COMIS/UCOMIS: ZF, PF, CF from the compare, OF, SF, AF cleared)
    /// and writes no operand.
    pub flags: bool,
}

/// The instructions whose values do not depend on MXCSR: moves, logic, integer arithmetic,
/// shuffles.
fn plain(m: Mnemonic) -> bool {
    use Mnemonic::*;
    matches!(
        m,
        Movaps
            | Movapd
            | Movups
            | Movupd
            | Movdqa
            | Movdqu
            | Movss
            | Movsd
            | Movq
            | Movd
            | Movlpd
            | Movhpd
            | Movlps
            | Movhps
            | Movhlps
            | Movlhps
            | Movddup
            | Movshdup
            | Movsldup
            | Andps
            | Andpd
            | Andnps
            | Andnpd
            | Orps
            | Orpd
            | Xorps
            | Xorpd
            | Pand
            | Pandn
            | Por
            | Pxor
            | Paddb
            | Paddw
            | Paddd
            | Paddq
            | Psubb
            | Psubw
            | Psubd
            | Psubq
            | Pcmpeqb
            | Pcmpeqw
            | Pcmpeqd
            | Pcmpeqq
            | Pcmpgtb
            | Pcmpgtw
            | Pcmpgtd
            | Pminub
            | Pmaxub
            | Pminsw
            | Pmaxsw
            | Pminud
            | Pmaxud
            | Pminsd
            | Pmaxsd
            | Pmovmskb
            | Movmskps
            | Movmskpd
            | Pshufd
            | Pshuflw
            | Pshufhw
            | Pshufb
            | Punpcklbw
            | Punpcklwd
            | Punpckldq
            | Punpcklqdq
            | Punpckhbw
            | Punpckhwd
            | Punpckhdq
            | Punpckhqdq
            | Packuswb
            | Packsswb
            | Packssdw
            | Psllw
            | Pslld
            | Psllq
            | Psrlw
            | Psrld
            | Psrlq
            | Psraw
            | Psrad
            | Pslldq
            | Psrldq
            | Pmuludq
            | Pmullw
            | Pmulld
            | Palignr
            | Shufps
            | Shufpd
            | Unpcklps
            | Unpckhps
            | Unpcklpd
            | Unpckhpd
            | Blendps
            | Blendpd
            | Pblendw
            | Extractps
            | Insertps
            | Pextrb
            | Pextrw
            | Pextrd
            | Pextrq
            | Pinsrb
            | Pinsrw
            | Pinsrd
            | Pinsrq
            | Ptest
    )
}

/// The VEX forms of [`plain`]'s instructions and the AVX/AVX2-only ones.
fn plain_vex(m: Mnemonic) -> bool {
    use Mnemonic::*;
    matches!(
        m,
        Vmovaps
            | Vmovapd
            | Vmovups
            | Vmovupd
            | Vmovdqa
            | Vmovdqu
            | Vmovss
            | Vmovsd
            | Vmovq
            | Vmovd
            | Vmovlpd
            | Vmovhpd
            | Vmovlps
            | Vmovhps
            | Vmovhlps
            | Vmovlhps
            | Vmovddup
            | Vmovshdup
            | Vmovsldup
            | Vandps
            | Vandpd
            | Vandnps
            | Vandnpd
            | Vorps
            | Vorpd
            | Vxorps
            | Vxorpd
            | Vpand
            | Vpandn
            | Vpor
            | Vpxor
            | Vpaddb
            | Vpaddw
            | Vpaddd
            | Vpaddq
            | Vpsubb
            | Vpsubw
            | Vpsubd
            | Vpsubq
            | Vpcmpeqb
            | Vpcmpeqw
            | Vpcmpeqd
            | Vpcmpeqq
            | Vpcmpgtb
            | Vpcmpgtw
            | Vpcmpgtd
            | Vpminub
            | Vpmaxub
            | Vpminsw
            | Vpmaxsw
            | Vpminud
            | Vpmaxud
            | Vpminsd
            | Vpmaxsd
            | Vpmovmskb
            | Vmovmskps
            | Vmovmskpd
            | Vpshufd
            | Vpshuflw
            | Vpshufhw
            | Vpshufb
            | Vpunpcklbw
            | Vpunpcklwd
            | Vpunpckldq
            | Vpunpcklqdq
            | Vpunpckhbw
            | Vpunpckhwd
            | Vpunpckhdq
            | Vpunpckhqdq
            | Vpackuswb
            | Vpacksswb
            | Vpackssdw
            | Vpsllw
            | Vpslld
            | Vpsllq
            | Vpsrlw
            | Vpsrld
            | Vpsrlq
            | Vpsraw
            | Vpsrad
            | Vpslldq
            | Vpsrldq
            | Vpmuludq
            | Vpmullw
            | Vpmulld
            | Vpalignr
            | Vshufps
            | Vshufpd
            | Vunpcklps
            | Vunpckhps
            | Vunpcklpd
            | Vunpckhpd
            | Vblendps
            | Vblendpd
            | Vpblendw
            | Vpbroadcastb
            | Vpbroadcastw
            | Vpbroadcastd
            | Vpbroadcastq
            | Vbroadcastss
            | Vbroadcastsd
            | Vinsertf128
            | Vextractf128
            | Vinserti128
            | Vextracti128
            | Vperm2f128
            | Vperm2i128
            | Vpermq
            | Vpermpd
            | Vpermilps
            | Vpermilpd
            | Vblendvps
            | Vblendvpd
            | Vpblendvb
            | Vextractps
            | Vinsertps
            | Vpextrb
            | Vpextrw
            | Vpextrd
            | Vpextrq
            | Vpinsrb
            | Vpinsrw
            | Vpinsrd
            | Vpinsrq
            | Vptest
    )
}

/// The floating-point instructions (legacy and VEX): they depend on MXCSR and raise its flags.
pub fn fp(m: Mnemonic) -> bool {
    use Mnemonic::*;
    matches!(
        m,
        Addss
            | Addsd
            | Addps
            | Addpd
            | Subss
            | Subsd
            | Subps
            | Subpd
            | Mulss
            | Mulsd
            | Mulps
            | Mulpd
            | Divss
            | Divsd
            | Divps
            | Divpd
            | Sqrtss
            | Sqrtsd
            | Sqrtps
            | Sqrtpd
            | Minss
            | Minsd
            | Minps
            | Minpd
            | Maxss
            | Maxsd
            | Maxps
            | Maxpd
            | Cmpss
            | Cmpsd
            | Cmpps
            | Cmppd
            | Cvtsi2ss
            | Cvtsi2sd
            | Cvttss2si
            | Cvttsd2si
            | Cvtss2si
            | Cvtsd2si
            | Cvtss2sd
            | Cvtsd2ss
            | Cvtdq2pd
            | Cvtdq2ps
            | Cvttps2dq
            | Cvtps2dq
            | Cvtpd2dq
            | Cvttpd2dq
            | Cvtps2pd
            | Cvtpd2ps
            | Roundss
            | Roundsd
            | Roundps
            | Roundpd
            | Haddps
            | Haddpd
            | Addsubpd
            | Vaddss
            | Vaddsd
            | Vaddps
            | Vaddpd
            | Vsubss
            | Vsubsd
            | Vsubps
            | Vsubpd
            | Vmulss
            | Vmulsd
            | Vmulps
            | Vmulpd
            | Vdivss
            | Vdivsd
            | Vdivps
            | Vdivpd
            | Vsqrtss
            | Vsqrtsd
            | Vsqrtps
            | Vsqrtpd
            | Vminss
            | Vminsd
            | Vminps
            | Vminpd
            | Vmaxss
            | Vmaxsd
            | Vmaxps
            | Vmaxpd
            | Vcmpss
            | Vcmpsd
            | Vcmpps
            | Vcmppd
            | Vcvtsi2ss
            | Vcvtsi2sd
            | Vcvttss2si
            | Vcvttsd2si
            | Vcvtss2si
            | Vcvtsd2si
            | Vcvtss2sd
            | Vcvtsd2ss
            | Vcvtdq2pd
            | Vcvtdq2ps
            | Vcvttps2dq
            | Vcvtps2dq
            | Vcvtpd2dq
            | Vcvttpd2dq
            | Vcvtps2pd
            | Vcvtpd2ps
            | Vroundss
            | Vroundsd
            | Vroundps
            | Vroundpd
            | Vhaddps
            | Vhaddpd
            | Vaddsubpd
            | Vfmadd132ss
            | Vfmadd213ss
            | Vfmadd231ss
            | Vfmadd132sd
            | Vfmadd213sd
            | Vfmadd231sd
            | Vfmadd132ps
            | Vfmadd213ps
            | Vfmadd231ps
            | Vfmadd132pd
            | Vfmadd213pd
            | Vfmadd231pd
            | Vfmsub132ss
            | Vfmsub213ss
            | Vfmsub231ss
            | Vfmsub132sd
            | Vfmsub213sd
            | Vfmsub231sd
            | Vfmsub132ps
            | Vfmsub213ps
            | Vfmsub231ps
            | Vfmsub132pd
            | Vfmsub213pd
            | Vfmsub231pd
            | Vfnmadd132ss
            | Vfnmadd213ss
            | Vfnmadd231ss
            | Vfnmadd132sd
            | Vfnmadd213sd
            | Vfnmadd231sd
            | Vfnmadd132ps
            | Vfnmadd213ps
            | Vfnmadd231ps
            | Vfnmadd132pd
            | Vfnmadd213pd
            | Vfnmadd231pd
            | Vfnmsub132ss
            | Vfnmsub213ss
            | Vfnmsub231ss
            | Vfnmsub132sd
            | Vfnmsub213sd
            | Vfnmsub231sd
            | Vfnmsub132ps
            | Vfnmsub213ps
            | Vfnmsub231ps
            | Vfnmsub132pd
            | Vfnmsub213pd
            | Vfnmsub231pd
    ) || fp_compare(m)
}

/// (U)COMISS/SD: the floating-point flag-setting compares.
fn fp_compare(m: Mnemonic) -> bool {
    use Mnemonic::*;
    matches!(
        m,
        Comiss | Comisd | Ucomiss | Ucomisd | Vcomiss | Vcomisd | Vucomiss | Vucomisd
    )
}

/// The instructions that set the status flags (every one defined: ZF, PF, CF from the
/// compare, OF, SF, AF cleared; (V)PTEST: ZF and CF, the rest cleared) and write no operand.
fn compare(m: Mnemonic) -> bool {
    fp_compare(m) || matches!(m, Mnemonic::Ptest | Mnemonic::Vptest)
}

/// The form of `ins` if it is one of this module's instructions, encoded as the tier takes
/// it (legacy or VEX, XMM/YMM and plain GPR registers, a memory operand without VSIB,
/// immediates) and runnable on this host. VZEROUPPER is written out.
pub fn form(ins: &Instruction) -> Option<Form> {
    let m = ins.mnemonic();
    let vex = match ins.encoding() {
        EncodingKind::Legacy => false,
        EncodingKind::VEX => true,
        _ => return None,
    };
    // (`fp` lists both encodings' mnemonics; an encoding has only its own.)
    let listed = if vex {
        plain_vex(m) || fp(m) || m == Mnemonic::Vzeroupper
    } else {
        plain(m) || fp(m)
    };
    if !listed || !enabled() || !host_runs(ins) {
        return None;
    }
    let operands_ok = (0..ins.op_count()).all(|i| match ins.op_kind(i) {
        OpKind::Register => {
            let r = ins.op_register(i);
            r.is_xmm() || r.is_ymm() || gpr_ref(r).is_some_and(|g| !g.high && g.size >= 4)
        }
        OpKind::Memory => {
            let ok = |r: Register| r == Register::None || r == Register::RIP || r.is_gpr64();
            ok(ins.memory_base()) && ok(ins.memory_index())
        }
        OpKind::Immediate8 => true,
        _ => false,
    });
    // At most one GPR that is not the destination (RDX's family), and vector registers
    // among the first four operands (host XMM0–XMM3).
    let gprs = (1..ins.op_count())
        .filter(|&i| ins.op_kind(i) == OpKind::Register && ins.op_register(i).is_gpr())
        .count();
    (operands_ok && gprs <= 1 && ins.op_count() <= 4).then_some(Form {
        fp: fp(m),
        flags: compare(m),
    })
}

/// `LOCKSTEP_JIT_BASE_SIMD=0` leaves these instructions to Cranelift (host-side tuning for
/// measurements, as `LOCKSTEP_JIT_BASE`).
fn enabled() -> bool {
    static ON: OnceLock<bool> = OnceLock::new();
    *ON.get_or_init(|| std::env::var("LOCKSTEP_JIT_BASE_SIMD").map_or(true, |v| v != "0"))
}

/// The extensions this host has, of those the listed instructions need.
fn host_runs(ins: &Instruction) -> bool {
    static HOST: OnceLock<[bool; 6]> = OnceLock::new();
    let h = HOST.get_or_init(|| {
        [
            std::arch::is_x86_feature_detected!("sse3"),
            std::arch::is_x86_feature_detected!("ssse3"),
            std::arch::is_x86_feature_detected!("sse4.1"),
            std::arch::is_x86_feature_detected!("avx"),
            std::arch::is_x86_feature_detected!("avx2"),
            std::arch::is_x86_feature_detected!("fma"),
        ]
    });
    ins.cpuid_features().iter().all(|f| match f {
        CpuidFeature::SSE | CpuidFeature::SSE2 => true,
        CpuidFeature::SSE3 => h[0],
        CpuidFeature::SSSE3 => h[1],
        CpuidFeature::SSE4_1 => h[2],
        CpuidFeature::AVX => h[3],
        CpuidFeature::AVX2 => h[4],
        CpuidFeature::FMA => h[5],
        _ => false,
    })
}

/// Must the memory operand be aligned to its size (16 or 32 bytes), else #GP?
fn aligned(ins: &Instruction) -> bool {
    use Mnemonic::*;
    let m = ins.mnemonic();
    let size = ins.memory_size().size();
    match ins.encoding() {
        EncodingKind::VEX => matches!(m, Vmovaps | Vmovapd | Vmovdqa),
        _ => size == 16 && !matches!(m, Movups | Movupd | Movdqu | Lddqu),
    }
}

/// Host vector register `i` (0–3) in the family of `r`.
fn host_vec(i: u32, r: Register) -> Register {
    use Register::*;
    let all = if r.is_ymm() {
        [YMM0, YMM1, YMM2, YMM3]
    } else {
        [XMM0, XMM1, XMM2, XMM3]
    };
    all[i as usize & 3]
}

fn xmm(i: u32) -> AsmRegisterXmm {
    [xmm0, xmm1, xmm2, xmm3][i as usize & 3]
}

fn ymm(i: u32) -> AsmRegisterYmm {
    [ymm0, ymm1, ymm2, ymm3][i as usize & 3]
}

/// Emit `ins` (one [`form`] accepts); `dead`: its flags are overwritten before anything
/// reads them (`insn::dead_flags`).
pub fn emit(e: &mut Emit, ins: &Instruction, f: Form, dead: bool) -> Result<(), IcedError> {
    let vex = ins.encoding() == EncodingKind::VEX;
    usable(e, vex)?;
    if f.fp {
        default_mxcsr(e)?;
    }
    if ins.mnemonic() == Mnemonic::Vzeroupper {
        e.a.vpxor(xmm0, xmm0, xmm0)?;
        for r in 0..16 {
            let off = vec_off(Register::XMM0) + 32 * r + 16;
            e.a.vmovdqu(xmmword_ptr(rdi + off), xmm0)?;
        }
        return Ok(());
    }
    let mut h = *ins;
    let writes0 = !f.flags;
    for op in 0..ins.op_count() {
        if ins.op_kind(op) == OpKind::Memory {
            let write = op == 0 && writes0;
            let size = ins.memory_size().size() as u32;
            super::insn::access(e, ins, write, size)?;
            if aligned(ins) {
                e.a.test(r8d, size - 1)?;
                let defer = e.defer_label()?;
                e.a.jne(defer)?;
            }
            super::insn::memory_at_r9(&mut h, 0);
        }
    }
    if f.flags {
        // Every status flag replaced: an earlier capture is dropped unmerged.
        e.replace_pending();
    }
    let mut dest = None;
    let mut wide = false;
    let only_written = writes0 && only_writes_first(ins);
    for op in 0..ins.op_count() {
        if ins.op_kind(op) != OpKind::Register {
            continue;
        }
        let r = ins.op_register(op);
        if let Some(g) = gpr_ref(r) {
            let host = if op == 0 { rax } else { rdx };
            if op > 0 {
                e.load_reg(host, g.index)?;
            } else if writes0 {
                dest = Some(Dest::Gpr(g.index, g.size));
            }
            let renamed = match (op, g.size) {
                (0, 4) => Register::EAX,
                (0, _) => Register::RAX,
                (_, 4) => Register::EDX,
                (_, _) => Register::RDX,
            };
            h.set_op_register(op, renamed);
            continue;
        }
        // A vector register: loaded, also as a destination the instruction reads or only
        // partly writes (legacy forms keep its upper bits, scalar forms its upper lanes);
        // not as one it only writes (a legacy write leaves the upper YMM half in memory,
        // which the 128-bit store back keeps; a VEX one zeroes it in the host register,
        // which the 256-bit store writes back).
        let off = vec_off(r);
        wide |= r.is_ymm();
        if op > 0 || !only_written {
            match (vex, r.is_ymm()) {
                (false, _) => e.a.movdqu(xmm(op), xmmword_ptr(rdi + off))?,
                (true, false) => e.a.vmovdqu(xmm(op), xmmword_ptr(rdi + off))?,
                (true, true) => e.a.vmovdqu(ymm(op), ymmword_ptr(rdi + off))?,
            }
        }
        h.set_op_register(op, host_vec(op, r));
        if op == 0 && writes0 {
            dest = Some(Dest::Vec(off));
        }
    }
    e.host_insn(h)?;
    if f.flags {
        if dead {
            e.host = super::emit::HostFlags::Stale;
        } else {
            let status = super::emit::STATUS;
            e.capture(status, status)?;
        }
    }
    match dest {
        Some(Dest::Gpr(g, size)) => {
            // A 4-byte destination was zero-extended by the host instruction.
            e.store_reg(g, rax, size.max(4))?;
            e.reg_written(g);
        }
        // A VEX instruction zeroes the destination's bits above its width: all 256 go back.
        Some(Dest::Vec(off)) if vex => e.a.vmovdqu(ymmword_ptr(rdi + off), ymm0)?,
        Some(Dest::Vec(off)) => e.a.movdqu(xmmword_ptr(rdi + off), xmm0)?,
        None => {}
    }
    if wide {
        // No dirty upper YMM state left to the host's legacy-SSE code.
        e.a.vzeroupper()?;
    }
    Ok(())
}

/// Does `ins` only write its first operand, a vector register (neither read it nor merge
/// into it), by iced's operand access? Not when another operand is the same register: iced
/// calls `pxor xmm1, xmm1` a pure write (its result does not depend on the value), but
/// renamed, the two operands are two host registers, both of which must hold the value.
fn only_writes_first(ins: &Instruction) -> bool {
    let first = ins.op0_register();
    let same = (1..ins.op_count())
        .any(|k| ins.op_kind(k) == OpKind::Register && ins.op_register(k) == first);
    !same
        && ins.op0_kind() == OpKind::Register
        && iced_x86::InstructionInfoFactory::new()
            .info(ins)
            .op0_access()
            == iced_x86::OpAccess::Write
}

enum Dest {
    Gpr(usize, u8),
    Vec(i32),
}

/// The block's availability check for legacy SSE (`vex` false) or VEX instructions, on the
/// main path once: otherwise the block leaves before the instruction.
fn usable(e: &mut Emit, vex: bool) -> Result<(), IcedError> {
    if (vex && e.avx_ok) || (!vex && e.sse_ok) {
        return Ok(());
    }
    e.host = super::emit::HostFlags::Stale;
    let defer = e.defer_label()?;
    e.a.mov(rax, qword_ptr(rdi + crate::frame::OFF_CR0))?;
    let bad0 = if vex {
        ctl::CR0_TS
    } else {
        ctl::CR0_EM | ctl::CR0_TS
    };
    e.a.test(eax, bad0 as u32)?;
    e.a.jne(defer)?;
    e.a.mov(rax, qword_ptr(rdi + crate::frame::OFF_CR4))?;
    let need4 = if vex {
        ctl::CR4_OSXSAVE
    } else {
        ctl::CR4_OSFXSR
    };
    e.a.test(eax, need4 as u32)?;
    e.a.je(defer)?;
    if vex {
        e.a.mov(rax, qword_ptr(rdi + OFF_XCR0))?;
        e.a.and(eax, XCR0_SSE_AVX as u32)?;
        e.a.cmp(eax, XCR0_SSE_AVX as u32)?;
        e.a.jne(defer)?;
        e.avx_ok = true;
    } else {
        e.sse_ok = true;
    }
    Ok(())
}

/// The block's first floating-point instruction: the guest's MXCSR must be the default
/// environment (else the block leaves before it), and the host's MXCSR is set to it with no
/// flag raised; from here on every exit merges the host's flags ([`merge_mxcsr`]).
pub(super) fn default_mxcsr(e: &mut Emit) -> Result<(), IcedError> {
    if e.mx {
        return Ok(());
    }
    e.host = super::emit::HostFlags::Stale;
    let defer = e.defer_label()?;
    e.a.mov(eax, dword_ptr(rdi + OFF_MXCSR))?;
    e.a.and(eax, !MXCSR_FLAGS)?;
    e.a.cmp(eax, MXCSR_DEFAULT)?;
    e.a.jne(defer)?;
    // The red zone below RSP is free (the code is a leaf there; signal frames skip it).
    e.a.mov(dword_ptr(rsp - 8), MXCSR_DEFAULT)?;
    e.a.ldmxcsr(dword_ptr(rsp - 8))?;
    e.mx = true;
    Ok(())
}

/// OR the exception flags the host raised since [`default_mxcsr`] into the guest's MXCSR
/// (clobbers EAX and the host's flags).
pub fn merge_mxcsr(a: &mut CodeAssembler) -> Result<(), IcedError> {
    a.stmxcsr(dword_ptr(rsp - 8))?;
    a.mov(eax, dword_ptr(rsp - 8))?;
    a.and(eax, MXCSR_FLAGS)?;
    a.or(dword_ptr(rdi + OFF_MXCSR), eax)
}

/// STMXCSR, VSTMXCSR and FNSTCW: a control register of `CpuState` stored to memory.
pub fn control_store(ins: &Instruction) -> bool {
    matches!(
        ins.code(),
        Code::Stmxcsr_m32 | Code::VEX_Vstmxcsr_m32 | Code::Fnstcw_m2byte
    )
}

/// Emit a [`control_store`]: the interpreter's checks (SSE or AVX usable; for FNSTCW, CR0.EM
/// and CR0.TS clear, else #NM), otherwise the block leaves before it; the guest's MXCSR with
/// the flags the host raised so far in the block ([`merge_mxcsr`]), or the x87 control word,
/// stored through the probe.
pub fn emit_control_store(e: &mut Emit, ins: &Instruction) -> Result<(), IcedError> {
    let x87 = ins.code() == Code::Fnstcw_m2byte;
    if x87 {
        e.host = super::emit::HostFlags::Stale;
        let defer = e.defer_label()?;
        e.a.mov(rax, qword_ptr(rdi + crate::frame::OFF_CR0))?;
        e.a.test(eax, (ctl::CR0_EM | ctl::CR0_TS) as u32)?;
        e.a.jne(defer)?;
    } else {
        usable(e, ins.encoding() == EncodingKind::VEX)?;
        if e.mx {
            merge_mxcsr(&mut e.a)?;
            e.host = super::emit::HostFlags::Stale;
        }
    }
    super::insn::access(e, ins, true, if x87 { 2 } else { 4 })?;
    if x87 {
        e.a.mov(ax, word_ptr(rdi + OFF_FCW))?;
        e.a.mov(word_ptr(r9 + r8), ax)
    } else {
        e.a.mov(eax, dword_ptr(rdi + OFF_MXCSR))?;
        e.a.mov(dword_ptr(r9 + r8), eax)
    }
}
