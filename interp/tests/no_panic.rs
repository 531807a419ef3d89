//! Stable-toolchain run of the `decode_exec` fuzz body: random and corpus inputs must never panic
//! the host, and every run must stop within its budget.

use lockstep_interp::testkit::fuzz_decode_exec;
use std::path::Path;

struct XorShift(u64);
impl XorShift {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
}

/// Bytes that make x86 decoding interesting: prefixes, escapes, ModRM/SIB variety.
const INTERESTING: &[u8] = &[
    0x66, 0x67, 0xf2, 0xf3, 0xf0, 0x2e, 0x3e, 0x64, 0x65, 0x40, 0x41, 0x48, 0x49, 0x4c, 0x4d, 0x0f,
    0x38, 0x3a, 0xc4, 0xc5, 0x8b, 0x89, 0x01, 0x29, 0x31, 0x39, 0x85, 0xf7, 0xd3, 0xc1, 0xff, 0xe8,
    0xeb, 0x74, 0xa4, 0xa5, 0xaa, 0xab, 0xc3, 0x90, 0x04, 0x05, 0x44, 0x24, 0x80, 0x81, 0x83, 0xc0,
    0xcc, 0x00, 0xff,
];

#[test]
fn random_code_never_panics_and_respects_budget() {
    let mut rng = XorShift(0x9e37_79b9_7f4a_7c15);
    for case in 0..4000 {
        let len = 136 + (rng.next() % 96) as usize;
        let mut data = vec![0u8; len];
        for (i, b) in data.iter_mut().enumerate() {
            let r = rng.next();
            *b = if i >= 136 && r.is_multiple_of(3) {
                INTERESTING[(r >> 8) as usize % INTERESTING.len()]
            } else {
                (r >> 16) as u8
            };
        }
        let exit = fuzz_decode_exec(&data);
        assert!(
            exit.retired <= 2_000,
            "case {case}: retired {} > budget",
            exit.retired
        );
    }
}

#[test]
fn corpus_seeds_never_panic() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../fuzz/corpus/seeds");
    let mut n = 0;
    for entry in std::fs::read_dir(&dir).expect("fuzz/corpus/seeds exists") {
        let data = std::fs::read(entry.unwrap().path()).unwrap();
        let exit = fuzz_decode_exec(&data);
        assert!(exit.retired <= 2_000);
        n += 1;
    }
    assert!(n >= 5, "expected at least 5 corpus seeds, found {n}");
}

/// 0F-map opcodes with VEX forms (moves, arithmetic, logic, shuffles, converts, compares,
/// masked moves' neighbours), to reach the AVX/AVX2/FMA handlers rather than #UD.
const VEX_0F: &[u8] = &[
    0x10, 0x11, 0x12, 0x13, 0x14, 0x15, 0x16, 0x17, 0x28, 0x29, 0x2a, 0x2c, 0x2d, 0x2e, 0x2f, 0x50,
    0x51, 0x52, 0x53, 0x54, 0x55, 0x56, 0x57, 0x58, 0x59, 0x5a, 0x5b, 0x5c, 0x5d, 0x5e, 0x5f, 0x60,
    0x67, 0x6e, 0x6f, 0x70, 0x71, 0x72, 0x73, 0x74, 0x77, 0x7c, 0x7e, 0x7f, 0xae, 0xc2, 0xc4, 0xc5,
    0xc6, 0xd0, 0xd4, 0xd7, 0xdb, 0xe0, 0xe6, 0xe7, 0xef, 0xf0, 0xf4, 0xf7, 0xfe,
];

/// One random VEX instruction: C5 (two-byte) or C4 (three-byte, maps 0F/0F38/0F3A, sometimes
/// an invalid map), an opcode biased to real VEX forms, a ModRM biased to registers, and a few
/// displacement/immediate bytes.
fn vex_insn(rng: &mut XorShift, out: &mut Vec<u8>) {
    let r = rng.next();
    let opcode = if r.is_multiple_of(4) {
        (r >> 8) as u8
    } else {
        VEX_0F[(r >> 8) as usize % VEX_0F.len()]
    };
    if r & (1 << 20) == 0 {
        out.extend_from_slice(&[0xc5, (r >> 24) as u8, opcode]);
    } else {
        let map = match (r >> 40) % 8 {
            0..=2 => 1,
            3..=4 => 2,
            5..=6 => 3,
            _ => (r >> 43) as u8 & 0x1f,
        };
        let b1 = ((r >> 48) as u8 & 0xe0) | map;
        let opcode = if map == 2 { (r >> 56) as u8 } else { opcode };
        out.extend_from_slice(&[0xc4, b1, (r >> 32) as u8, opcode]);
    }
    let m = rng.next();
    let modrm = if m.is_multiple_of(3) {
        m as u8 // any, memory forms included
    } else {
        0xc0 | (m as u8 & 0x3f)
    };
    out.push(modrm);
    for i in 0..(m >> 8) % 5 {
        out.push((m >> (16 + 8 * i)) as u8);
    }
}

#[test]
fn vex_code_never_panics_and_respects_budget() {
    let mut rng = XorShift(0xc4c5_0f38_0f3a_0001);
    let mut reached_second = 0;
    for case in 0..4000 {
        // State bytes: GPRs mostly pointing into the test machine's data area so that memory
        // forms reach their semantics; the format is the fuzz target's (136 + code).
        let mut data = Vec::with_capacity(256);
        for i in 0..17u64 {
            let r = rng.next();
            let v = if i < 16 && !r.is_multiple_of(4) {
                0x40_0000 + (r >> 32) % 0x1_0000
            } else {
                r
            };
            data.extend_from_slice(&v.to_le_bytes());
        }
        for _ in 0..1 + rng.next() % 8 {
            vex_insn(&mut rng, &mut data);
        }
        let exit = fuzz_decode_exec(&data);
        assert!(
            exit.retired <= 2_000,
            "case {case}: retired {}",
            exit.retired
        );
        reached_second += (exit.retired >= 2) as u32;
    }
    // Some sequences must run past their first instruction (the VEX handlers are reached).
    assert!(
        reached_second > 200,
        "only {reached_second} cases retired 2 instructions"
    );
}

/// System instructions (one- and two-byte units) to reach descriptor loads, far transfers,
/// control registers, MSRs, I/O, interrupts and IRET from random code.
const SYSTEM_UNITS: &[&[u8]] = &[
    &[0x0f, 0x01],
    &[0x0f, 0x00],
    &[0x0f, 0x20],
    &[0x0f, 0x22],
    &[0x0f, 0x21],
    &[0x0f, 0x23],
    &[0x0f, 0x30],
    &[0x0f, 0x32],
    &[0x0f, 0x05],
    &[0x0f, 0x07],
    &[0x0f, 0x34],
    &[0x0f, 0x35],
    &[0x0f, 0x06],
    &[0x0f, 0xa2],
    &[0x0f, 0x02],
    &[0x0f, 0x03],
    &[0x0f, 0xae],
    &[0x0f, 0xc7],
    &[0x48, 0xcf],
    &[0xcd],
    &[0xcf],
    &[0xea],
    &[0x9a],
    &[0xca],
    &[0xcb],
    &[0x8e],
    &[0x17],
    &[0xe4],
    &[0xee],
    &[0x6c],
    &[0x6f],
    &[0xfa],
    &[0xfb],
    &[0x9c],
    &[0x9d],
    &[0xf4],
    &[0xc4],
    &[0xc5],
    &[0xd9],
    &[0xdd],
    &[0x0f, 0x10],
];

/// The system-state fuzz body (`fuzz_sys_exec`) over a fixed set of seeds: random modes,
/// control registers, descriptor tables, selectors and page tables, random code biased to
/// system instructions. No panic, every case within its budget and with bounded buffers.
#[test]
fn random_system_state_never_panics() {
    use lockstep_interp::testkit_sysfuzz::{fuzz_sys_exec, SYS_FUZZ_BUDGET};
    let mut rng = XorShift(0x5eed_0005_0005_5eed);
    let mut shutdowns = 0;
    let mut retired = 0;
    // LOCKSTEP_SYS_FUZZ_CASES widens the run for exploration (the default stays fast).
    let cases: u64 = std::env::var("LOCKSTEP_SYS_FUZZ_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1500);
    let seed: u64 = std::env::var("LOCKSTEP_SYS_FUZZ_SEED")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(0x5eed_0005_0005_5eed);
    rng.0 = seed | 1;
    for case in 0..cases {
        let setup_len = 200 + (rng.next() % 600) as usize;
        let mut data = (setup_len as u16).to_le_bytes().to_vec();
        data.extend((0..setup_len).map(|_| (rng.next() >> 24) as u8));
        let code_len = 16 + (rng.next() % 200) as usize;
        while data.len() < 2 + setup_len + code_len {
            let r = rng.next();
            match r % 4 {
                0 => data.extend_from_slice(SYSTEM_UNITS[(r >> 8) as usize % SYSTEM_UNITS.len()]),
                1 => data.push(INTERESTING[(r >> 8) as usize % INTERESTING.len()]),
                _ => data.push((r >> 16) as u8),
            }
        }
        let out = fuzz_sys_exec(&data);
        assert!(
            out.retired <= SYS_FUZZ_BUDGET,
            "case {case}: retired {} > budget",
            out.retired
        );
        assert!(
            out.buffered <= 4 << 20,
            "case {case}: {} bytes buffered",
            out.buffered
        );
        shutdowns += out.shutdown.is_some() as u32;
        retired += out.retired;
    }
    // The cases do reach deep code and the shutdown path, not only instant faults.
    eprintln!("{cases} cases: {retired} instructions retired, {shutdowns} shutdowns");
    assert!(retired > cases * 20, "retired only {retired}");
    assert!(shutdowns > 10, "only {shutdowns} shutdowns");
}
