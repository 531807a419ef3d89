//! Machine code from the emitter's instruction list, without iced's `BlockEncoder`: every
//! instruction but the branches to labels is encoded once, position-independent, and the
//! branches are sized in one pass (short where the distance in the all-near layout fits a
//! byte, which it then still does: the layout only shrinks) and encoded at their final place.
//!
//! `CodeAssembler::assemble` encodes each instruction twice (once to size it, once at its
//! address) and boxes each one; in libm's run that was about half of the baseline tier's
//! compile time. A list this pass does not handle (a RIP-relative operand, a branch that is
//! not a JMP/Jcc/CALL to a label) goes to iced's assembler as before.

use super::encode;
use iced_x86::code_asm::CodeAssembler;
use iced_x86::{Code, Encoder, IcedError, Instruction, OpKind};

/// How one instruction is placed: bytes already encoded, or a branch (in its near form;
/// `has_short`: it has a short form, CALL has none) to instruction `to`.
enum Piece {
    Bytes {
        start: usize,
        len: usize,
    },
    Branch {
        near: Instruction,
        has_short: bool,
        to: usize,
        short: bool,
    },
}

impl Piece {
    fn len(&self) -> usize {
        match *self {
            Piece::Bytes { len, .. } => len,
            Piece::Branch { short: true, .. } => SHORT_LEN,
            Piece::Branch { near, .. } => near_len(&near),
        }
    }
}

/// The code of `a`'s instructions at address 0 (what `a.assemble(0)` makes, except that
/// branch sizes may differ).
///
/// `report`: label ids whose offsets in the code to return (in order; `None` for all of them
/// when the list went to iced's assembler, which does not say). A branch carrying one of
/// them keeps its near form (a JMP's rel32 can then be rewritten in place: the patchable
/// exits of `Emit::exit_const`).
pub fn assemble(
    a: &mut CodeAssembler,
    report: &[u64],
) -> Result<(Vec<u8>, Vec<Option<usize>>), IcedError> {
    let instrs = shorten_immediates(drop_dead_stores(forward_reloads(a.instructions())));
    match fast(&instrs, report)? {
        Some(done) => Ok(done),
        None => Ok((a.assemble(0)?, vec![None; report.len()])),
    }
}

/// `instrs` without the reloads of a value just stored: a 64-bit load from the memory operand
/// the instruction before stored a 64-bit register to (the same base register, no index, the
/// same displacement) becomes a register move, or nothing when it loads the register it
/// stored. Each guest instruction in the tier loads its operands from `CpuState` and stores
/// its result there, so the next one often reloads what was just stored. Only where no label
/// sits on the load (no other path reaches it), so the register still holds the value.
fn forward_reloads(instrs: &[Instruction]) -> Vec<Instruction> {
    let mut out: Vec<Instruction> = Vec::with_capacity(instrs.len());
    for ins in instrs {
        if let Some(prev) = out.last() {
            if ins.ip() == 0 && ins.code() == Code::Mov_r64_rm64 && stored_slot(prev, ins) {
                let (dst, src) = (ins.op0_register(), prev.op1_register());
                if dst != src {
                    out.push(Instruction::with2(Code::Mov_r64_rm64, dst, src).unwrap_or(*ins));
                }
                continue;
            }
        }
        out.push(*ins);
    }
    out
}

/// `instrs` without the stores of a guest register (`mov [rdi + disp], r64` or an immediate)
/// that a later store to the same qword replaces before anything can read it: no label, no
/// branch, call or return, no access through RDI that may overlap it, no write to RDI in
/// between (a deferring exit's `jne`, for one, keeps the store). `mov eax, edx; and eax,
/// 0xfff` stores RAX twice.
fn drop_dead_stores(mut instrs: Vec<Instruction>) -> Vec<Instruction> {
    use iced_x86::{FlowControl, Register};
    let mut dead = vec![false; instrs.len()];
    // Stores not yet read or replaced: (displacement, index in `instrs`).
    let mut pending: Vec<(u64, usize)> = Vec::new();
    for (k, ins) in instrs.iter().enumerate() {
        if ins.ip() != 0 {
            pending.clear();
            continue;
        }
        let store = matches!(ins.code(), Code::Mov_rm64_r64 | Code::Mov_rm64_imm32)
            && ins.memory_base() == Register::RDI
            && ins.memory_index() == Register::None
            && ins.segment_prefix() == Register::None;
        if store {
            let d = ins.memory_displacement64();
            if let Some(i) = pending.iter().position(|&(pd, _)| pd == d) {
                dead[pending.swap_remove(i).1] = true;
            }
            pending.push((d, k));
            continue;
        }
        if pending.is_empty() {
            continue;
        }
        // (RDI in a register operand, written or not, and string instructions, whose implicit
        // operands are RDI: the tier's code keeps RDI for the whole function.)
        let rdi = |r: Register| r.full_register() == Register::RDI;
        if ins.flow_control() != FlowControl::Next
            || rdi(ins.op0_register())
            || rdi(ins.op1_register())
            || rdi(ins.op2_register())
            || ins.is_string_instruction()
        {
            pending.clear();
            continue;
        }
        let (base, index) = (ins.memory_base(), ins.memory_index());
        if base != Register::RDI && index != Register::RDI {
            continue;
        }
        let size = ins.memory_size().size() as u64;
        if index != Register::None || base != Register::RDI || size == 0 {
            pending.clear();
            continue;
        }
        let lo = ins.memory_displacement64();
        let hi = lo.wrapping_add(size);
        pending.retain(|&(d, _)| d.wrapping_add(8) <= lo || hi <= d);
    }
    let mut dead = dead.into_iter();
    instrs.retain(|_| !dead.next().unwrap_or(false));
    instrs
}

/// `instrs` with each `mov r64, imm64` (10 bytes) in its shortest form: `mov r32, imm32` (5
/// or 6 bytes, zero-extending) when the value fits 32 bits unsigned, `mov r64, imm32` (7
/// bytes, sign-extending) when it fits 32 bits signed. Neither touches the flags. Most of
/// the tier's constants are guest addresses, page numbers and host addresses of links below
/// 4 GiB: in heap's hot code, half of its `mov r64, imm64`.
fn shorten_immediates(mut instrs: Vec<Instruction>) -> Vec<Instruction> {
    for ins in instrs.iter_mut() {
        if ins.code() != Code::Mov_r64_imm64 {
            continue;
        }
        let (r, v) = (ins.op0_register(), ins.immediate64());
        let short = if v <= u32::MAX as u64 {
            Instruction::with2(Code::Mov_r32_imm32, r.full_register32(), v as u32)
        } else if v as i64 == v as i32 as i64 {
            Instruction::with2(Code::Mov_rm64_imm32, r, v as i64 as i32)
        } else {
            continue;
        };
        if let Ok(mut short) = short {
            short.set_ip(ins.ip());
            *ins = short;
        }
    }
    instrs
}

/// Whether `store` is `mov [base + disp], r64` and `load` reads the same qword (`mov r64,
/// [base + disp]`, same segment, no index on either).
fn stored_slot(store: &Instruction, load: &Instruction) -> bool {
    use iced_x86::Register;
    store.code() == Code::Mov_rm64_r64
        && store.op0_kind() == OpKind::Memory
        && load.op1_kind() == OpKind::Memory
        && store.memory_index() == Register::None
        && load.memory_index() == Register::None
        && store.memory_base() == load.memory_base()
        && store.memory_base() != Register::RIP
        && store.memory_base() != Register::None
        && store.memory_displacement64() == load.memory_displacement64()
        && store.segment_prefix() == load.segment_prefix()
}

/// A branch to a label: its instruction with the near form's code, or `None` for anything
/// else. (Jcc, JMP and CALL with a 64-bit near target; a label is an instruction's IP.)
fn label_branch(ins: &Instruction) -> Option<Instruction> {
    if ins.op_count() != 1 || ins.op0_kind() != OpKind::NearBranch64 {
        return None;
    }
    let mut near = *ins;
    near.as_near_branch();
    (near.is_jcc_near() || near.is_jmp_near() || near.is_call_near()).then_some(near)
}

/// Bytes of a short JMP or Jcc (rel8).
const SHORT_LEN: usize = 2;

/// Bytes of a branch's near form (JMP and CALL rel32 5, Jcc rel32 6).
fn near_len(near: &Instruction) -> usize {
    match near.code() {
        Code::Call_rel32_64 | Code::Jmp_rel32_64 => 5,
        _ => 6,
    }
}

/// The code and the offsets of the labels of `report`, or `None` when the list needs iced's
/// assembler.
#[allow(clippy::type_complexity)]
fn fast(
    instrs: &[Instruction],
    report: &[u64],
) -> Result<Option<(Vec<u8>, Vec<Option<usize>>)>, IcedError> {
    // Labels: an instruction's IP is the id of the label set on it (ids count from 1; the
    // emitter's own instructions have IP 0). Ids are dense, so a table indexes them.
    let most = instrs.len() * 4 + 64;
    let mut at = Vec::new();
    for (k, ins) in instrs.iter().enumerate() {
        let id = ins.ip() as usize;
        if id == 0 {
            continue;
        }
        if id > most {
            return Ok(None);
        }
        if at.len() <= id {
            at.resize(id + 1, usize::MAX);
        }
        if at[id] != usize::MAX {
            // Two instructions with one IP: not the assembler's labels.
            return Ok(None);
        }
        at[id] = k;
    }
    let mut enc = None;
    let mut bytes = Vec::with_capacity(instrs.len() * 5);
    let mut pieces = Vec::with_capacity(instrs.len());
    for ins in instrs {
        if ins.op_count() >= 1 && ins.op0_kind() == OpKind::NearBranch64 {
            let to = at
                .get(ins.near_branch64() as usize)
                .copied()
                .filter(|&t| t != usize::MAX);
            match (label_branch(ins), to) {
                (Some(near), Some(to)) => pieces.push(Piece::Branch {
                    near,
                    has_short: near.code() != Code::Call_rel32_64,
                    to,
                    short: false,
                }),
                _ => return Ok(None),
            }
            continue;
        }
        if ins.is_ip_rel_memory_operand() {
            return Ok(None);
        }
        let start = bytes.len();
        if !encode::encode(ins, &mut bytes) {
            // iced's encoder appends to the buffer it is given.
            let e = enc.get_or_insert_with(|| Encoder::new(64));
            e.set_buffer(std::mem::take(&mut bytes));
            let r = e.encode(ins, 0);
            bytes = e.take_buffer();
            r?;
        }
        pieces.push(Piece::Bytes {
            start,
            len: bytes.len() - start,
        });
    }
    // The all-near layout, then short branches where that layout's distance fits.
    let layout = |pieces: &[Piece]| -> Vec<usize> {
        let mut off = Vec::with_capacity(pieces.len() + 1);
        let mut o = 0;
        for p in pieces {
            off.push(o);
            o += p.len();
        }
        off.push(o);
        off
    };
    let long = layout(&pieces);
    for (k, p) in pieces.iter_mut().enumerate() {
        if let Piece::Branch {
            has_short: true,
            to,
            short,
            ..
        } = p
        {
            let end = (long[k] + SHORT_LEN) as i64;
            let kept_near = instrs[k].ip() != 0 && report.contains(&instrs[k].ip());
            *short = !kept_near && i8::try_from(long[*to] as i64 - end).is_ok();
        }
    }
    let off = layout(&pieces);
    let mut code = Vec::with_capacity(off[pieces.len()]);
    for (k, p) in pieces.iter().enumerate() {
        match *p {
            Piece::Bytes { start, len } => code.extend_from_slice(&bytes[start..start + len]),
            Piece::Branch {
                near, to, short, ..
            } => {
                let end = off[k + 1] as i64;
                let rel = off[to] as i64 - end;
                let cc = near.condition_code() as u8; // 0: none, 1..=16: O..G
                match (near.code(), short) {
                    (Code::Call_rel32_64, _) => code.push(0xE8),
                    (Code::Jmp_rel32_64, false) => code.push(0xE9),
                    (Code::Jmp_rel32_64, true) => code.push(0xEB),
                    (_, false) => code.extend_from_slice(&[0x0F, 0x80 + cc - 1]),
                    (_, true) => code.push(0x70 + cc - 1),
                }
                if short {
                    code.push(rel as i8 as u8);
                } else {
                    code.extend_from_slice(&(rel as i32).to_le_bytes());
                }
                debug_assert_eq!(code.len(), off[k + 1]);
            }
        }
    }
    let offsets = report
        .iter()
        .map(|&id| {
            let k = *at.get(id as usize)?;
            (k != usize::MAX).then(|| off[k])
        })
        .collect();
    Ok(Some((code, offsets)))
}

#[cfg(test)]
mod tests {
    use super::fast;
    use iced_x86::code_asm::*;

    /// The same instructions as iced's assembler, with every branch reaching its label: short
    /// ones, near ones (over 200 bytes of code), backward, forward, every condition and a CALL.
    #[test]
    fn branches_reach_their_labels_as_with_iceds_assembler() {
        let build = || -> Result<CodeAssembler, IcedError> {
            let mut a = CodeAssembler::new(64)?;
            let mut top = a.create_label();
            let mut far = a.create_label();
            let mut near = a.create_label();
            let mut sub = a.create_label();
            a.set_label(&mut top)?;
            a.mov(rax, qword_ptr(rdi + 0x18))?;
            a.cmp(rax, 7)?;
            a.je(near)?;
            a.jne(far)?;
            a.call(sub)?;
            a.set_label(&mut near)?;
            a.add(rax, 1)?;
            for k in 0..40 {
                a.mov(qword_ptr(rdi + 8 * k), rax)?;
            }
            a.jb(top)?;
            // Every condition, short and near, backward and forward.
            for target in [top, near, far] {
                a.jo(target)?;
                a.jno(target)?;
                a.jb(target)?;
                a.jae(target)?;
                a.je(target)?;
                a.jne(target)?;
                a.jbe(target)?;
                a.ja(target)?;
                a.js(target)?;
                a.jns(target)?;
                a.jp(target)?;
                a.jnp(target)?;
                a.jl(target)?;
                a.jge(target)?;
                a.jle(target)?;
                a.jg(target)?;
            }
            a.set_label(&mut far)?;
            a.mov(rax, 0x1234_5678_9abc_def0u64)?;
            a.jmp(top)?;
            a.set_label(&mut sub)?;
            a.ret()?;
            Ok(a)
        };
        let mut a = build().unwrap();
        let ours = fast(a.instructions(), &[]).unwrap().expect("handled").0;
        let iced = build().unwrap().assemble(0).unwrap();
        assert_eq!(
            super::super::disassemble(&ours),
            super::super::disassemble(&iced)
        );
        assert_eq!(ours, iced);
        let _ = a.assemble(0).unwrap();
    }

    /// Two instructions with the same nonzero IP (not a label the assembler set) are left to
    /// iced's assembler, which reports them.
    #[test]
    fn duplicate_ips_go_to_iced() {
        let mut a = CodeAssembler::new(64).unwrap();
        let mut i = iced_x86::Instruction::with1(iced_x86::Code::Push_r64, iced_x86::Register::RAX)
            .unwrap();
        i.set_ip(3);
        a.add_instruction(i).unwrap();
        a.add_instruction(i).unwrap();
        a.ret().unwrap();
        assert!(fast(a.instructions(), &[]).unwrap().is_none());
    }

    /// A RIP-relative operand is left to iced's assembler.
    #[test]
    fn rip_relative_operands_go_to_iced() {
        let mut a = CodeAssembler::new(64).unwrap();
        let mut l = a.create_label();
        a.mov(rax, qword_ptr(l)).unwrap();
        a.set_label(&mut l).unwrap();
        a.ret().unwrap();
        assert!(fast(a.instructions(), &[]).unwrap().is_none());
    }

    /// A guest register's store that a later store to the same qword replaces is dropped
    /// when nothing between can read it; one followed by a branch (a deferring exit), a
    /// label, an overlapping read through RDI, an indexed access through RDI, a write to RDI
    /// or a string instruction stays. Checked to fail with any of those ignored.
    #[test]
    fn stores_replaced_before_any_read_are_dropped() {
        let listing = |a: &CodeAssembler| -> Vec<String> {
            super::drop_dead_stores(a.instructions().to_vec())
                .iter()
                .map(|i| format!("{i}"))
                .collect()
        };
        let mut a = CodeAssembler::new(64).unwrap();
        let mut l = a.create_label();
        let mut m = a.create_label();
        // Dropped: nothing reads [rdi] between (other slots, guest memory, the frame).
        a.mov(qword_ptr(rdi), rax).unwrap();
        a.and(eax, 0xfff).unwrap();
        a.mov(rdx, qword_ptr(rdi + 8)).unwrap();
        a.mov(qword_ptr(r9 + r8), rdx).unwrap();
        a.mov(qword_ptr(rdi), rax).unwrap();
        // Kept: a branch, then a label, between.
        a.mov(qword_ptr(rdi + 0x10), rax).unwrap();
        a.jne(l).unwrap();
        a.mov(qword_ptr(rdi + 0x10), rax).unwrap();
        a.set_label(&mut l).unwrap();
        a.mov(qword_ptr(rdi + 0x10), rdx).unwrap();
        // Kept: an overlapping narrower read, an indexed read, a write to RDI, a push.
        a.mov(qword_ptr(rdi + 0x18), rax).unwrap();
        a.movzx(ecx, byte_ptr(rdi + 0x1c)).unwrap();
        a.mov(qword_ptr(rdi + 0x18), rax).unwrap();
        a.mov(rcx, qword_ptr(rdi + rcx * 8)).unwrap();
        a.mov(qword_ptr(rdi + 0x18), rax).unwrap();
        a.mov(rdi, rsi).unwrap();
        a.mov(qword_ptr(rdi + 0x18), rax).unwrap();
        a.stosq().unwrap();
        a.mov(qword_ptr(rdi + 0x18), rax).unwrap();
        // Dropped: a read of the neighbouring slot does not overlap.
        a.mov(edx, dword_ptr(rdi + 0x20)).unwrap();
        a.mov(qword_ptr(rdi + 0x18), 0).unwrap();
        a.set_label(&mut m).unwrap();
        a.ret().unwrap();
        assert_eq!(
            listing(&a),
            [
                "and eax,0FFFh",
                "mov rdx,[rdi+8]",
                "mov [r9+r8],rdx",
                "mov [rdi],rax",
                "mov [rdi+10h],rax",
                "jne short 1",
                "mov [rdi+10h],rax",
                "mov [rdi+10h],rdx",
                "mov [rdi+18h],rax",
                "movzx ecx,byte ptr [rdi+1Ch]",
                "mov [rdi+18h],rax",
                "mov rcx,[rdi+rcx*8]",
                "mov [rdi+18h],rax",
                "mov rdi,rsi",
                "mov [rdi+18h],rax",
                "stosq [rdi]",
                "mov edx,[rdi+20h]",
                "mov qword ptr [rdi+18h],0",
                "ret",
            ]
        );
    }

    /// `mov r64, imm64` takes the shortest form that gives the same 64 bits (a label stays
    /// on it); the code runs as before: the same bytes as iced's encoder for the new forms.
    #[test]
    fn immediates_take_their_shortest_form() {
        let mut a = CodeAssembler::new(64).unwrap();
        let mut l = a.create_label();
        a.mov(rax, 0x40_1e52u64).unwrap();
        a.set_label(&mut l).unwrap();
        a.mov(r11, 0xffff_ffffu64).unwrap();
        a.mov(rdx, 0x1_0000_0000u64).unwrap();
        a.mov(r8, -5i64 as u64).unwrap();
        a.mov(rcx, 0xffff_ffff_7fff_ffffu64).unwrap();
        a.jmp(l).unwrap();
        let out = super::shorten_immediates(a.instructions().to_vec());
        let listing: Vec<String> = out.iter().map(|i| format!("{i}")).collect();
        assert_eq!(
            listing,
            [
                "mov eax,401E52h",
                "mov r11d,0FFFFFFFFh",
                "mov rdx,100000000h",
                "mov r8,0FFFFFFFFFFFFFFFBh",
                "mov rcx,0FFFFFFFF7FFFFFFFh",
                "jmp short 1",
            ]
        );
        assert_eq!(out[1].ip(), 1, "the label moves with its instruction");
        let code = fast(&out, &[]).unwrap().expect("the fast path").0;
        // 5 + 6 + 10 + 7 + 10 + 2 bytes.
        assert_eq!(code.len(), 40);
    }

    /// A reload of the qword just stored becomes a register move (or nothing, into the same
    /// register); a load with a label on it, one of another slot, one after anything but the
    /// store, or a narrower one stays.
    #[test]
    fn reloads_of_a_just_stored_slot_are_forwarded() {
        let listing = |a: &CodeAssembler| -> Vec<String> {
            super::forward_reloads(a.instructions())
                .iter()
                .map(|i| format!("{i}"))
                .collect()
        };
        let mut a = CodeAssembler::new(64).unwrap();
        a.mov(qword_ptr(rdi + 0x30), rax).unwrap();
        a.mov(rax, qword_ptr(rdi + 0x30)).unwrap();
        a.mov(rcx, qword_ptr(rdi + 0x30)).unwrap();
        a.mov(qword_ptr(rdi + 0x60), rcx).unwrap();
        a.mov(r8, qword_ptr(rdi + 0x60)).unwrap();
        a.mov(qword_ptr(rdi + 8), rdx).unwrap();
        a.mov(rdx, qword_ptr(rdi + 0x10)).unwrap();
        a.mov(qword_ptr(rdi + 8), rdx).unwrap();
        a.mov(rdx, qword_ptr(rsi + 8)).unwrap();
        a.mov(qword_ptr(rdi + 8), rdx).unwrap();
        a.mov(edx, dword_ptr(rdi + 8)).unwrap();
        a.mov(qword_ptr(rdi + 8), rdx).unwrap();
        a.mov(rdx, qword_ptr(rdi + rcx + 8)).unwrap();
        a.mov(qword_ptr(rdi + 8), rdx).unwrap();
        let mut l = a.create_label();
        a.set_label(&mut l).unwrap();
        a.mov(rax, qword_ptr(rdi + 8)).unwrap();
        a.jne(l).unwrap();
        assert_eq!(
            listing(&a),
            [
                "mov [rdi+30h],rax",
                "mov rcx,rax",
                "mov [rdi+60h],rcx",
                "mov r8,rcx",
                "mov [rdi+8],rdx",
                "mov rdx,[rdi+10h]",
                "mov [rdi+8],rdx",
                "mov rdx,[rsi+8]",
                "mov [rdi+8],rdx",
                "mov edx,[rdi+8]",
                "mov [rdi+8],rdx",
                "mov rdx,[rdi+rcx+8]",
                "mov [rdi+8],rdx",
                "mov rax,[rdi+8]",
                "jne short 1",
            ]
        );
        // And the code still assembles, the branch reaching its label.
        assert!(super::assemble(&mut a, &[]).is_ok());
    }
}
