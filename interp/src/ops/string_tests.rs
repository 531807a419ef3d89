//! Tests of the string-instruction family (included from string.rs).

use super::{compare_flags, copy_backward, copy_forward};
use crate::cpu::{Exit, ExitReason};
use crate::fault::Fault;
use crate::state::{flags, reg, sreg};
use crate::testkit::{TestMachine, CODE_BASE, DATA_BASE};

pub(super) const UD2: [u8; 2] = [0x0f, 0x0b];
pub(super) const BIG: u64 = 1 << 40;
pub(super) const REP: u8 = 0xf3;
pub(super) const REPNE: u8 = 0xf2;
pub(super) const A32: u8 = 0x67;

// Base opcodes of the byte forms; the word/dword/qword forms are +1 (with 66h / REX.W).
pub(super) const MOVS: u8 = 0xa4;
pub(super) const CMPS: u8 = 0xa6;
pub(super) const STOS: u8 = 0xaa;
pub(super) const LODS: u8 = 0xac;
pub(super) const SCAS: u8 = 0xae;

/// Encode a string instruction of element size `size` after `prefixes`.
pub(super) fn enc(op: u8, size: u8, prefixes: &[u8]) -> Vec<u8> {
    let mut v = Vec::new();
    if size == 2 {
        v.push(0x66);
    }
    v.extend_from_slice(prefixes);
    match size {
        1 => v.push(op),
        8 => v.extend_from_slice(&[0x48, op + 1]),
        _ => v.push(op + 1),
    }
    v
}

pub(super) fn with_ud2(insn: &[u8]) -> Vec<u8> {
    let mut v = insn.to_vec();
    v.extend_from_slice(&UD2);
    v
}

/// Run `insn` followed by UD2 to completion; expect the stop at UD2.
pub(super) fn exec(m: &mut TestMachine, insn: &[u8]) -> Exit {
    let e = m.run_code(&with_ud2(insn), BIG);
    assert_eq!(e.reason, ExitReason::Exception(Fault::ud("UD2")), "{e:?}");
    assert_eq!(m.cpu.state.rip, CODE_BASE + insn.len() as u64);
    e
}

pub(super) fn set(m: &mut TestMachine, rsi: u64, rdi: u64, rcx: u64) {
    m.cpu.state.gpr[reg::RSI] = rsi;
    m.cpu.state.gpr[reg::RDI] = rdi;
    m.cpu.state.gpr[reg::RCX] = rcx;
}

pub(super) fn set_df(m: &mut TestMachine, on: bool) {
    if on {
        m.cpu.state.rflags |= flags::DF;
    } else {
        m.cpu.state.rflags &= !flags::DF;
    }
}

pub(super) fn pattern(len: usize, seed: u8) -> Vec<u8> {
    (0..len)
        .map(|i| (i as u8).wrapping_mul(7).wrapping_add(seed) ^ (i >> 8) as u8)
        .collect()
}

pub(super) fn mem(m: &TestMachine, addr: u64, len: usize) -> Vec<u8> {
    m.ram.bytes()[addr as usize..addr as usize + len].to_vec()
}

pub(super) fn le(bytes: &[u8]) -> u64 {
    let mut b = [0u8; 8];
    b[..bytes.len()].copy_from_slice(bytes);
    u64::from_le_bytes(b)
}

// ----- single (non-REP) forms -----

#[test]
fn movs_single_all_sizes_both_directions() {
    for size in [1u8, 2, 4, 8] {
        for back in [false, true] {
            let mut m = TestMachine::new();
            let src = DATA_BASE + 0x40;
            let dst = DATA_BASE + 0x1000 + 0x20;
            m.load(DATA_BASE, &pattern(0x2000, 3));
            let before = mem(&m, DATA_BASE, 0x2000);
            set(&mut m, src, dst, 77);
            set_df(&mut m, back);
            let e = exec(&mut m, &enc(MOVS, size, &[]));
            assert_eq!(e.retired, 1);
            let s = size as usize;
            let mut expect = before.clone();
            expect.copy_within(0x40..0x40 + s, 0x1020);
            assert_eq!(mem(&m, DATA_BASE, 0x2000), expect, "size {size}");
            let d = if back {
                (size as u64).wrapping_neg()
            } else {
                size as u64
            };
            assert_eq!(m.gpr(reg::RSI), src.wrapping_add(d));
            assert_eq!(m.gpr(reg::RDI), dst.wrapping_add(d));
            assert_eq!(m.gpr(reg::RCX), 77, "no REP: RCX untouched");
        }
    }
}

#[test]
fn stos_single_all_sizes() {
    for size in [1u8, 2, 4, 8] {
        let mut m = TestMachine::new();
        m.cpu.state.gpr[reg::RAX] = 0x1122_3344_5566_7788;
        m.load(DATA_BASE, &[0xee; 16]);
        set(&mut m, 0, DATA_BASE + 4, 0);
        set_df(&mut m, true);
        exec(&mut m, &enc(STOS, size, &[]));
        let got = mem(&m, DATA_BASE, 16);
        let s = size as usize;
        assert_eq!(
            le(&got[4..4 + s]),
            0x1122_3344_5566_7788 & crate::operand::mask(size)
        );
        assert!(got[..4].iter().chain(&got[4 + s..]).all(|&b| b == 0xee));
        assert_eq!(m.gpr(reg::RDI), DATA_BASE + 4 - size as u64);
    }
}

#[test]
fn lods_single_all_sizes_write_the_accumulator() {
    let cases = [
        (1u8, 0xffff_ffff_ffff_ff88u64),
        (2, 0xffff_ffff_ffff_7788),
        (4, 0x0000_0000_5566_7788), // 32-bit write zero-extends
        (8, 0x1122_3344_5566_7788),
    ];
    for (size, expect) in cases {
        let mut m = TestMachine::new();
        m.cpu.state.gpr[reg::RAX] = u64::MAX;
        m.load(DATA_BASE, &0x1122_3344_5566_7788u64.to_le_bytes());
        set(&mut m, DATA_BASE, 0, 0);
        exec(&mut m, &enc(LODS, size, &[]));
        assert_eq!(m.gpr(reg::RAX), expect, "size {size}");
        assert_eq!(m.gpr(reg::RSI), DATA_BASE + size as u64);
    }
}

#[test]
fn cmps_and_scas_single_set_sub_flags() {
    let mut m = TestMachine::new();
    m.load(DATA_BASE, &[5]);
    m.load(DATA_BASE + 0x10, &[7]);
    set(&mut m, DATA_BASE, DATA_BASE + 0x10, 0);
    exec(&mut m, &enc(CMPS, 1, &[]));
    // 5 - 7 = 0xfe: CF, SF, AF set; PF: 0xfe has 7 ones -> odd -> clear.
    assert_eq!(
        m.cpu.state.rflags & flags::STATUS,
        flags::CF | flags::SF | flags::AF
    );
    assert_eq!(m.gpr(reg::RSI), DATA_BASE + 1);
    assert_eq!(m.gpr(reg::RDI), DATA_BASE + 0x11);

    let mut m = TestMachine::new();
    m.load(DATA_BASE, &0x8000_0000u32.to_le_bytes());
    m.cpu.state.gpr[reg::RAX] = 0xffff_ffff_0000_0001;
    set(&mut m, 0, DATA_BASE, 0);
    exec(&mut m, &enc(SCAS, 4, &[]));
    // 1 - 0x80000000 = 0x80000001: CF, SF, OF.
    assert_eq!(
        m.cpu.state.rflags & flags::STATUS,
        flags::CF | flags::SF | flags::OF
    );
    assert_eq!(
        m.gpr(reg::RAX),
        0xffff_ffff_0000_0001,
        "SCAS does not write RAX"
    );
    assert_eq!(m.gpr(reg::RDI), DATA_BASE + 4);
}

#[test]
fn lock_prefix_is_ud() {
    let mut m = TestMachine::new();
    set(&mut m, DATA_BASE, DATA_BASE + 0x100, 1);
    let e = m.run_code(&[0xf0, 0xa4], 10);
    assert!(matches!(
        e.reason,
        ExitReason::Exception(Fault::InvalidOpcode { .. })
    ));
    assert_eq!(m.gpr(reg::RSI), DATA_BASE);
}

// ----- REP forms -----

#[test]
fn rep_movs_matches_model_for_many_alignments() {
    // Forward, then DF = 1 (from elements that straddle, end at, or start at page boundaries,
    // and runs that cross several pages going down: the bulk path copies one page at a time).
    let forward = [
        (0x0, 0x3000, 5000u64),
        (0xff3, 0x3007, 3001),
        (0x1ffd, 0x4ffe, 1234),
        (0x10, 0x3010, 1),
        (0x0ff8, 0x3ff9, 2),
    ];
    let backward = [
        (0x6000, 0x7800, 5000u64),
        (0x5ffd, 0x6ffe, 3001),
        (0x5fff, 0x7003, 1234),
        (0x5ff8, 0x7ff8, 2),
        (0x5010, 0x7010, 1),
    ];
    for (back, cases) in [(false, forward), (true, backward)] {
        for size in [1u8, 2, 4, 8] {
            for (src_off, dst_off, count) in cases {
                let count = count / size as u64 + 1;
                let (m, expect) =
                    rep_movs_case(0x8000, size, (src_off, dst_off, count), size, back);
                assert_eq!(
                    mem(&m, DATA_BASE, 0x8000),
                    expect,
                    "size {size} src {src_off:#x} dst {dst_off:#x} back {back}"
                );
                let bytes = count * size as u64;
                let moved = |base: u64| {
                    if back {
                        base - bytes
                    } else {
                        base + bytes
                    }
                };
                assert_eq!(m.gpr(reg::RSI), moved(DATA_BASE + src_off));
                assert_eq!(m.gpr(reg::RDI), moved(DATA_BASE + dst_off));
                assert_eq!(m.gpr(reg::RCX), 0);
            }
        }
    }
}

/// REP MOVS of `count` `size`-byte elements from window offset `src` to `dst` (DF = `back`)
/// on a patterned window of `len` bytes; checks the retired count and returns the machine and
/// the element model's bytes.
fn rep_movs_case(
    len: usize,
    seed: u8,
    (src, dst, count): (u64, u64, u64),
    size: u8,
    back: bool,
) -> (TestMachine, Vec<u8>) {
    let mut m = TestMachine::new();
    let init = pattern(len, seed);
    m.load(DATA_BASE, &init);
    set(&mut m, DATA_BASE + src, DATA_BASE + dst, count);
    set_df(&mut m, back);
    let e = exec(&mut m, &enc(MOVS, size, &[REP]));
    assert_eq!(e.retired, count);
    let mut expect = init;
    model_movs(&mut expect, src, dst, count, size as usize, !back);
    (m, expect)
}

/// Element-by-element MOVS on a byte window (offsets relative to the window).
fn model_movs(buf: &mut [u8], src: u64, dst: u64, count: u64, e: usize, forward: bool) {
    let (mut s, mut d) = (src as i64, dst as i64);
    let step = if forward { e as i64 } else { -(e as i64) };
    for _ in 0..count {
        let tmp = buf[s as usize..s as usize + e].to_vec();
        buf[d as usize..d as usize + e].copy_from_slice(&tmp);
        s += step;
        d += step;
    }
}

#[test]
fn overlapping_rep_movs_equals_element_by_element_copy() {
    let dists: [i64; 18] = [
        -4100, -17, -8, -3, -1, 0, 1, 2, 3, 4, 5, 7, 8, 9, 16, 100, 4095, 4100,
    ];
    for size in [1u8, 2, 4, 8] {
        for &dist in &dists {
            for back in [false, true] {
                let count = 6000 / size as u64;
                let src: u64 = if back { 0xc000 } else { 0x2ff1 };
                let dst = (src as i64 + dist) as u64;
                let (m, expect) = rep_movs_case(0x10000, 11, (src, dst, count), size, back);
                assert!(
                    mem(&m, DATA_BASE, 0x10000) == expect,
                    "size {size} dist {dist} back {back}"
                );
            }
        }
    }
}

#[test]
fn copy_forward_cases() {
    // d ahead of s by less than an element: element-wise, not byte-wise.
    let mut a: Vec<u8> = (0..16).collect();
    copy_forward(&mut a, 0, 2, 8, 4);
    let mut b: Vec<u8> = (0..16).collect();
    model_movs(&mut b, 0, 2, 2, 4, true);
    assert_eq!(a, b);
    assert_eq!(&a[..10], &[0, 1, 0, 1, 2, 3, 2, 3, 6, 7]);
    // Byte replication.
    let mut a: Vec<u8> = (0..16).collect();
    copy_forward(&mut a, 3, 4, 10, 1);
    assert_eq!(&a[..15], &[0, 1, 2, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 14]);
}

#[test]
fn copy_backward_cases() {
    // Every (source, destination) pair of a small window, against the element model.
    for e in [1usize, 2, 4, 8] {
        for s in 0..24usize {
            for d in 0..24usize {
                let len = 3 * e;
                if s + len > 48 || d + len > 48 {
                    continue;
                }
                let mut a: Vec<u8> = (0..48).collect();
                copy_backward(&mut a, s, d, len, e);
                let mut b: Vec<u8> = (0..48).collect();
                let hi = |x: usize| (x + len - e) as u64;
                model_movs(&mut b, hi(s), hi(d), 3, e, false);
                assert_eq!(a, b, "e {e} s {s} d {d}");
            }
        }
    }
}

#[test]
fn rep_stos_all_sizes_forward_and_back() {
    // Distinct bytes; zero; and a value whose low bytes repeat (a one-byte fill for sizes 1
    // and 2 only: the fill must look at the element's bytes, not RAX's).
    for value in [0x0102_0304_0506_0708u64, 0, 0x1234_5678_9abc_4141] {
        rep_stos_all_sizes(value);
    }
}

fn rep_stos_all_sizes(value: u64) {
    for size in [1u8, 2, 4, 8] {
        for back in [false, true] {
            let mut m = TestMachine::new();
            m.load(DATA_BASE, &[0xee; 0x6000]);
            m.cpu.state.gpr[reg::RAX] = value;
            let count = 9000 / size as u64;
            let bytes = count * size as u64;
            let (start, first) = if back {
                (0x5f00 - size as u64, 0x5f00 - bytes)
            } else {
                (0x3, 0x3)
            };
            set(&mut m, 0, DATA_BASE + start, count);
            set_df(&mut m, back);
            let e = exec(&mut m, &enc(STOS, size, &[REP]));
            assert_eq!(e.retired, count);
            let got = mem(&m, DATA_BASE, 0x6000);
            let pat = value.to_le_bytes();
            for (i, &b) in got.iter().enumerate() {
                let i = i as u64;
                let want = if i >= first && i < first + bytes {
                    pat[((i - first) % size as u64) as usize]
                } else {
                    0xee
                };
                assert_eq!(
                    b, want,
                    "value {value:#x} size {size} back {back} byte {i:#x}"
                );
            }
            let end = if back { start - bytes } else { start + bytes };
            assert_eq!(m.gpr(reg::RDI), DATA_BASE + end);
        }
    }
}

#[test]
fn rep_lods_leaves_the_last_element() {
    let mut m = TestMachine::new();
    m.load(DATA_BASE, &pattern(64, 1));
    m.cpu.state.gpr[reg::RAX] = 0xaaaa_aaaa_aaaa_aaaa;
    set(&mut m, DATA_BASE, 0, 5);
    let e = exec(&mut m, &enc(LODS, 2, &[REP]));
    assert_eq!(e.retired, 5);
    let p = pattern(64, 1);
    assert_eq!(m.gpr(reg::RAX), 0xaaaa_aaaa_aaaa_0000 | le(&p[8..10]));
    assert_eq!(m.gpr(reg::RSI), DATA_BASE + 10);
    // REPNE on LODS is a plain REP.
    set(&mut m, DATA_BASE, 0, 3);
    exec(&mut m, &enc(LODS, 1, &[REPNE]));
    assert_eq!(m.gpr(reg::RAX) & 0xff, p[2] as u64);
    assert_eq!(m.gpr(reg::RCX), 0);
}

#[test]
fn repne_movs_and_stos_act_as_rep() {
    let mut m = TestMachine::new();
    m.load(DATA_BASE, &pattern(100, 5));
    set(&mut m, DATA_BASE, DATA_BASE + 0x800, 100);
    let e = exec(&mut m, &enc(MOVS, 1, &[REPNE]));
    assert_eq!(e.retired, 100);
    assert_eq!(mem(&m, DATA_BASE + 0x800, 100), pattern(100, 5));
    m.cpu.state.gpr[reg::RAX] = 0x42;
    set(&mut m, 0, DATA_BASE + 0x900, 10);
    exec(&mut m, &enc(STOS, 1, &[REPNE]));
    assert_eq!(mem(&m, DATA_BASE + 0x900, 10), vec![0x42; 10]);
}

#[test]
fn repe_cmpsb_stops_at_first_difference() {
    let mut m = TestMachine::new();
    let a = pattern(3000, 9);
    let mut b = a.clone();
    b[2100] ^= 0x40;
    m.load(DATA_BASE, &a);
    m.load(DATA_BASE + 0x4000, &b);
    set(&mut m, DATA_BASE, DATA_BASE + 0x4000, 3000);
    let e = exec(&mut m, &enc(CMPS, 1, &[REP]));
    assert_eq!(e.retired, 2101);
    assert_eq!(m.gpr(reg::RCX), 3000 - 2101);
    assert_eq!(m.gpr(reg::RSI), DATA_BASE + 2101);
    assert_eq!(m.gpr(reg::RDI), DATA_BASE + 0x4000 + 2101);
    let f = compare_flags(a[2100] as u64, b[2100] as u64, 1);
    assert_eq!(m.cpu.state.rflags & flags::STATUS, f);
    assert_eq!(f & flags::ZF, 0);

    // Equal all the way: runs out of count with ZF = 1.
    let mut m = TestMachine::new();
    m.load(DATA_BASE, &a);
    m.load(DATA_BASE + 0x4000, &a);
    set(&mut m, DATA_BASE, DATA_BASE + 0x4000, 375);
    let e = exec(&mut m, &enc(CMPS, 8, &[REP]));
    assert_eq!(e.retired, 375);
    assert_eq!(m.gpr(reg::RCX), 0);
    assert_ne!(m.cpu.state.rflags & flags::ZF, 0);
}

#[test]
fn repne_scasb_finds_the_terminator_and_repe_scas_skips() {
    let mut m = TestMachine::new();
    m.load(DATA_BASE, b"hello, world\0tail");
    m.cpu.state.gpr[reg::RAX] = 0xffff_ff00; // AL = 0
    set(&mut m, 0, DATA_BASE, u64::MAX);
    let e = exec(&mut m, &enc(SCAS, 1, &[REPNE]));
    assert_eq!(e.retired, 13);
    assert_eq!(m.gpr(reg::RCX), u64::MAX - 13);
    assert_eq!(m.gpr(reg::RDI), DATA_BASE + 13);
    assert_ne!(m.cpu.state.rflags & flags::ZF, 0);

    // REPE SCASW over a run of equal words, DF = 1.
    let mut m = TestMachine::new();
    let mut buf = [0x34u8, 0x12].repeat(40);
    buf[0] = 0x35; // word 0 differs
    m.load(DATA_BASE, &buf);
    m.cpu.state.gpr[reg::RAX] = 0x1234;
    set(&mut m, 0, DATA_BASE + 78, 100);
    set_df(&mut m, true);
    let e = exec(&mut m, &enc(SCAS, 2, &[REP]));
    assert_eq!(e.retired, 40);
    assert_eq!(m.gpr(reg::RCX), 60);
    assert_eq!(m.gpr(reg::RDI), DATA_BASE - 2);
    assert_eq!(
        m.cpu.state.rflags & flags::STATUS,
        compare_flags(0x1234, 0x1235, 2)
    );
}

#[test]
fn zero_count_retires_one_and_changes_nothing() {
    for op in [MOVS, STOS, LODS, CMPS, SCAS] {
        let mut m = TestMachine::new();
        m.cpu.state.rflags |= flags::STATUS;
        set(&mut m, DATA_BASE, DATA_BASE + 0x100, 0);
        let before = m.cpu.state.clone();
        let e = exec(&mut m, &enc(op, 4, &[REP]));
        assert_eq!(e.retired, 1);
        let mut after = m.cpu.state.clone();
        after.rip = before.rip;
        assert_eq!(after, before, "op {op:#x}");
    }
}

// ----- address size and segments -----

#[test]
fn addr32_uses_esi_edi_ecx_and_zero_extends() {
    let mut m = TestMachine::new();
    m.load(DATA_BASE, &pattern(64, 2));
    set(
        &mut m,
        0xffff_ffff_0000_0000 | DATA_BASE,
        0xabcd_0000_0000_0000 | (DATA_BASE + 0x1000),
        0x1234_5678_0000_0010,
    );
    let e = exec(&mut m, &enc(MOVS, 4, &[A32, REP]));
    assert_eq!(e.retired, 16);
    assert_eq!(mem(&m, DATA_BASE + 0x1000, 64), pattern(64, 2));
    assert_eq!(m.gpr(reg::RSI), DATA_BASE + 64);
    assert_eq!(m.gpr(reg::RDI), DATA_BASE + 0x1000 + 64);
    assert_eq!(m.gpr(reg::RCX), 0);

    // Non-REP with 32-bit addressing: ESI wraps below zero to 0xffff_ffff... as a 32-bit value.
    let mut m = TestMachine::new();
    m.load(DATA_BASE, &[0x5a]);
    set(&mut m, 0x7777_0000_0000_0000 | DATA_BASE, 0, 0);
    set_df(&mut m, true);
    exec(&mut m, &enc(LODS, 1, &[A32]));
    assert_eq!(m.gpr(reg::RAX) & 0xff, 0x5a);
    assert_eq!(m.gpr(reg::RSI), DATA_BASE - 1);
}

#[test]
fn addr32_zero_count_rule() {
    // The measured host rule (see addr32_zero_count_matches_host).
    let junk = (0x1111_1111_0000_1000u64, 0x2222_2222_0000_2000u64);
    let cases: [(u8, bool, bool); 5] = [
        (MOVS, true, true),
        (STOS, false, true),
        (LODS, false, false),
        (CMPS, false, false),
        (SCAS, false, false),
    ];
    for (op, rsi_ext, rdi_ext) in cases {
        let mut m = TestMachine::new();
        set(&mut m, junk.0, junk.1, 0xdead_beef_0000_0000);
        exec(&mut m, &enc(op, 1, &[A32, REP]));
        assert_eq!(m.gpr(reg::RCX), 0);
        let z = |v: u64, ext: bool| if ext { v & 0xffff_ffff } else { v };
        assert_eq!(m.gpr(reg::RSI), z(junk.0, rsi_ext), "op {op:#x}");
        assert_eq!(m.gpr(reg::RDI), z(junk.1, rdi_ext), "op {op:#x}");
    }
}

#[test]
fn source_segment_override_applies_only_to_the_source() {
    let fs_base = 0x0010_0000u64;
    let mut m = TestMachine::new();
    m.cpu.state.seg[sreg::FS].base = fs_base;
    m.load(DATA_BASE + fs_base, &pattern(32, 4));
    set(&mut m, DATA_BASE, DATA_BASE + 0x2000, 32);
    // fs rep movsb: reads FS:RSI, writes ES:RDI (ES base ignored in 64-bit mode).
    exec(&mut m, &[0x64, REP, MOVS]);
    assert_eq!(mem(&m, DATA_BASE + 0x2000, 32), pattern(32, 4));
    assert_eq!(m.gpr(reg::RSI), DATA_BASE + 32);

    // fs lodsb reads through FS; fs stosb still writes ES:RDI.
    set(&mut m, DATA_BASE + 3, DATA_BASE + 0x3000, 0);
    exec(&mut m, &[0x64, LODS]);
    assert_eq!(m.gpr(reg::RAX) & 0xff, pattern(32, 4)[3] as u64);
    exec(&mut m, &[0x64, STOS]);
    assert_eq!(mem(&m, DATA_BASE + 0x3000, 1)[0], pattern(32, 4)[3]);
    assert_eq!(mem(&m, DATA_BASE + fs_base + 0x3000, 1)[0], 0);

    // GS override on CMPS compares GS:[RSI] with ES:[RDI].
    let mut m = TestMachine::new();
    m.cpu.state.seg[sreg::GS].base = fs_base;
    m.load(DATA_BASE + fs_base, &[9]);
    m.load(DATA_BASE + 0x10, &[9]);
    set(&mut m, DATA_BASE, DATA_BASE + 0x10, 0);
    exec(&mut m, &[0x65, CMPS]);
    assert_ne!(m.cpu.state.rflags & flags::ZF, 0);
}
