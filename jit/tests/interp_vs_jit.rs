//! Stable twin of the `interp_vs_jit` fuzz target: the seed corpus in
//! `fuzz/corpus/interp_vs_jit/` plus N generated inputs (loops built from a table of
//! instruction encodings — register and memory ALU, MMIO through RSI, stack, calls, indirect
//! branches, self-modifying stores, REP strings — with random bytes mixed in) through
//! `lockstep_jit::fuzzing::interp_vs_jit`; any difference between the engines fails.
//!
//! `LOCKSTEP_FUZZ_CASES=N` (default 1500) generated inputs; the run stops early after 25 s.
//! `LOCKSTEP_FUZZ_WRITE=dir` writes the generated inputs there (how the seed corpus was made).

use lockstep_jit::fuzzing::interp_vs_jit;
use rand_chacha::ChaCha8Rng;
use rand_core::{RngCore, SeedableRng};
use std::path::Path;
use std::time::{Duration, Instant};

/// Instruction encodings (64-bit mode) the generator strings together.
const SNIPPETS: &[&[u8]] = &[
    &[0x48, 0x01, 0xd8],                   // add rax, rbx
    &[0x48, 0x29, 0xc8],                   // sub rax, rcx
    &[0x48, 0x31, 0xd0],                   // xor rax, rdx
    &[0x48, 0x21, 0xc2],                   // and rdx, rax
    &[0x48, 0x09, 0xc7],                   // or rdi, rax
    &[0x48, 0x85, 0xc0],                   // test rax, rax
    &[0x48, 0x39, 0xd8],                   // cmp rax, rbx
    &[0x83, 0xc0, 0x7f],                   // add eax, 0x7f
    &[0x66, 0x01, 0xd8],                   // add ax, bx
    &[0x00, 0xe0],                         // add al, ah
    &[0x48, 0x8b, 0x03],                   // mov rax, [rbx]
    &[0x48, 0x89, 0x0b],                   // mov [rbx], rcx
    &[0x48, 0x8b, 0x06],                   // mov rax, [rsi]   (MMIO when RSI points there)
    &[0x89, 0x06],                         // mov [rsi], eax
    &[0x48, 0x03, 0x06],                   // add rax, [rsi]
    &[0x48, 0x01, 0x03],                   // add [rbx], rax   (trampoline RMW)
    &[0x48, 0x83, 0x06, 0x01],             // add qword [rsi], 1
    &[0x0f, 0xb6, 0x03],                   // movzx eax, byte [rbx]
    &[0x48, 0x63, 0xc3],                   // movsxd rax, ebx
    &[0x48, 0x8d, 0x44, 0x8b, 0x08],       // lea rax, [rbx+rcx*4+8]
    &[0x48, 0x83, 0xc3, 0x08],             // add rbx, 8
    &[0x48, 0xff, 0xc0],                   // inc rax
    &[0x48, 0xff, 0xca],                   // dec rdx
    &[0x50],                               // push rax
    &[0x5b],                               // pop rbx
    &[0x53, 0x58],                         // push rbx; pop rax
    &[0x48, 0xd3, 0xe0],                   // shl rax, cl
    &[0x48, 0xc1, 0xc8, 0x0d],             // ror rax, 13
    &[0x48, 0x0f, 0xaf, 0xc3],             // imul rax, rbx
    &[0x48, 0xf7, 0xe3],                   // mul rbx
    &[0x48, 0xf7, 0xf3],                   // div rbx
    &[0x0f, 0x94, 0xc0],                   // sete al
    &[0x48, 0x0f, 0x4c, 0xc3],             // cmovl rax, rbx
    &[0x48, 0x13, 0xc3],                   // adc rax, rbx
    &[0x48, 0x19, 0xd8],                   // sbb rax, rbx
    &[0xf3, 0xa4],                         // rep movsb
    &[0xf3, 0x48, 0xab],                   // rep stosq
    &[0xfc],                               // cld
    &[0x66, 0x0f, 0x6f, 0x03],             // movdqa xmm0, [rbx]
    &[0x66, 0x0f, 0xef, 0xc1],             // pxor xmm0, xmm1
    &[0x88, 0x05, 0xf0, 0xff, 0xff, 0xff], // mov [rip-16], al (self-modifying)
    &[0xe8, 0x00, 0x00, 0x00, 0x00, 0x58], // call next; pop rax
    &[0x0f, 0xa2],                         // cpuid
    &[0x0f, 0xc7, 0xf0],                   // rdrand eax
    &[0x48, 0x8b, 0x04, 0x24],             // mov rax, [rsp]
    &[0x64, 0x48, 0x8b, 0x03],             // mov rax, fs:[rbx]
    &[0x90],                               // nop
];

fn gen(rng: &mut ChaCha8Rng) -> Vec<u8> {
    let mut d = Vec::new();
    let r = rng.next_u32();
    d.push((r & 0x3f) as u8); // JIT settings
    d.push(if r & 0x100 != 0 { 0 } else { (r >> 16) as u8 }); // slice seed
    for _ in 0..17 {
        let mut v = rng.next_u64();
        if !rng.next_u32().is_multiple_of(4) {
            v = (v & !7) | (1 + rng.next_u64() % 3); // a mapped region
        }
        d.extend_from_slice(&v.to_le_bytes());
    }
    // mov ecx, n (loop counter)
    let n = 1 + rng.next_u32() % 60;
    d.extend_from_slice(&[0xb9]);
    d.extend_from_slice(&n.to_le_bytes());
    let body_start = d.len();
    let k = 1 + rng.next_u32() % 12;
    for _ in 0..k {
        match rng.next_u32() % 20 {
            0 => {
                // random bytes
                for _ in 0..1 + rng.next_u32() % 4 {
                    d.push(rng.next_u32() as u8);
                }
            }
            1 => {
                // forward conditional branch over the next snippet (or into it)
                d.extend_from_slice(&[
                    0x70 + (rng.next_u32() % 16) as u8,
                    (rng.next_u32() % 6) as u8,
                ]);
            }
            2 => {
                // call/ret pair: call +1; ret; ...
                d.extend_from_slice(&[0xe8, 0x01, 0, 0, 0, 0xc3]);
            }
            3 => {
                // lea rax, [rip+3]; jmp rax / call rax
                d.extend_from_slice(&[0x48, 0x8d, 0x05, 0x02, 0, 0, 0, 0xff, 0xe0]);
            }
            _ => {
                let s = SNIPPETS[(rng.next_u32() as usize) % SNIPPETS.len()];
                d.extend_from_slice(s);
            }
        }
    }
    // dec ecx; jnz body (rel32)
    d.extend_from_slice(&[0xff, 0xc9, 0x0f, 0x85]);
    let rel = body_start as i64 - (d.len() as i64 + 4);
    d.extend_from_slice(&(rel as i32).to_le_bytes());
    d.extend_from_slice(&[0x0f, 0x05]); // syscall: stop
    d
}

fn check(name: &str, data: &[u8]) {
    if let Err(e) = interp_vs_jit(data) {
        panic!("{name}: {e}\ninput ({} bytes): {:02x?}", data.len(), data);
    }
}

/// The seed corpus, or the directory `LOCKSTEP_FUZZ_CORPUS` names (e.g. a fuzzer's corpus,
/// replayed on stable); inputs slower than a second are listed with their time.
#[test]
fn seed_corpus_matches() {
    let dir = match std::env::var_os("LOCKSTEP_FUZZ_CORPUS") {
        Some(d) => Path::new(&d).to_path_buf(),
        None => Path::new(env!("CARGO_MANIFEST_DIR")).join("../fuzz/corpus/interp_vs_jit"),
    };
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.unwrap().path())
        .collect();
    files.sort();
    if std::env::var_os("LOCKSTEP_FUZZ_CORPUS").is_none() {
        assert!(files.len() >= 8, "seed corpus too small");
    }
    for f in files {
        let data = std::fs::read(&f).unwrap();
        let t0 = Instant::now();
        check(&f.display().to_string(), &data);
        let t = t0.elapsed().as_secs_f64();
        if t > 1.0 {
            eprintln!("slow input: {} ({t:.1} s)", f.display());
        }
    }
}

#[test]
fn generated_inputs_match() {
    let cases: u64 = std::env::var("LOCKSTEP_FUZZ_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1500);
    let write = std::env::var_os("LOCKSTEP_FUZZ_WRITE");
    let t0 = Instant::now();
    let mut done = 0;
    let mut compiled_exits = 0;
    for i in 0..cases {
        if t0.elapsed() > Duration::from_secs(25) {
            break;
        }
        let mut rng = ChaCha8Rng::seed_from_u64(0x1f00 + i);
        let data = gen(&mut rng);
        if let Some(dir) = &write {
            std::fs::write(Path::new(dir).join(format!("gen_{i:04}")), &data).unwrap();
        }
        let e =
            interp_vs_jit(&data).unwrap_or_else(|e| panic!("case {i}: {e}\ninput: {data:02x?}"));
        if e.retired > 50 {
            compiled_exits += 1;
        }
        done += 1;
    }
    eprintln!(
        "interp_vs_jit: {done} generated inputs in {:.1} s, {compiled_exits} ran > 50 instructions",
        t0.elapsed().as_secs_f64()
    );
    assert!(done >= cases.min(100));
    assert!(
        compiled_exits > done / 10,
        "inputs too shallow: {compiled_exits}/{done}"
    );
}
