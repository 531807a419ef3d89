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
