//! The long-lived Cranelift JIT module: one function per guest block, defined when the block
//! gets hot and finalised in batches; the whole module is dropped when the cache flushes.
//!
//! Blocks use Cranelift's `tail` calling convention so that one block can jump to the next
//! with `return_call_indirect` (chaining); Rust enters them through `enter`, a small function
//! of the C convention compiled into each module that calls a block and returns its exit
//! word.

use crate::base;
use crate::chain::LinkTable;
use crate::frame::Frame;
use crate::lift::{self, HelperSigs, LowerStats, HELPER_EXEC, HELPER_FOLD, HELPER_RAISE};
use crate::page_gen::PageCert;
use cranelift_codegen::control::ControlPlane;
use cranelift_codegen::ir::{types, AbiParam, InstBuilder, Signature};
use cranelift_codegen::isa::{CallConv, OwnedTargetIsa};
use cranelift_codegen::settings::{self, Configurable};
use cranelift_codegen::Context;
use cranelift_frontend::{FunctionBuilder, FunctionBuilderContext};
use cranelift_jit::{JITBuilder, JITModule};
use cranelift_module::{default_libcall_names, FuncId, Linkage, Module, ModuleReloc};
use lockstep_interp::decode::Block;
use lockstep_interp::CpuState;

/// A compiled block's entry address: a `tail`-convention function
/// `(state, frame, entered) -> exit word` (see [`crate::frame::ret`]); call it through
/// [`Compiler::enter`].
pub type BlockFn = *const u8;

/// The C-convention entry: `enter(state, frame, block, check, rip) -> exit word`, `check` being
/// the block's check word (`chain::block_check`: the dispatcher has just made its entry check)
/// and `rip` the RIP entered (the function's first block's, or a member entry's).
pub type EnterFn = unsafe extern "C" fn(*mut CpuState, *mut Frame, BlockFn, u64, u64) -> u64;

/// A block defined in the module (callable once finalised).
pub struct Compiled {
    pub id: FuncId,
    /// The Cranelift IR, when asked for (verify mode); keeping it changes no code.
    pub ir: Option<String>,
    pub stats: LowerStats,
    /// Region members the function may also be entered at (`lift::Lowered::member_entries`).
    pub member_entries: Vec<usize>,
    /// The budget an entry at each of `member_entries` needs (`lift::Lowered::member_entry_lens`).
    pub member_entry_lens: Vec<u64>,
    /// The budget an entry into the function needs: a region's (`lift::Lowered::entry_len`)
    /// or a baseline trace's (`base::BaseCode::len`); `None`: its first block's length.
    pub entry_len: Option<u64>,
    pub code_bytes: usize,
    /// Compiled by the baseline tier (`crate::base`).
    pub baseline: bool,
}

pub struct Compiler {
    module: Option<JITModule>,
    ctx: Context,
    fctx: FunctionBuilderContext,
    sig: Signature,
    helper_sigs: [Signature; 3],
    /// Address of the chain table compiled code probes (see `crate::chain`).
    chain_table: u64,
    /// Chained jumps count themselves (`JitConfig::count_chains`; the hop stubs and the
    /// baseline tier's inline jumps).
    count_chains: bool,
    enter: EnterFn,
    /// The helper entry points compiled code calls (`preserve_all` adapters or the helpers).
    helpers: HelperAddrs,
    /// Host-side diagnostics, read once: append each function's IR (`LOCKSTEP_JIT_DUMP_IR`)
    /// or machine-code listing (`LOCKSTEP_JIT_DUMP_ASM`) to these files.
    dump_ir: Option<std::ffi::OsString>,
    dump_asm: Option<std::ffi::OsString>,
    /// `LOCKSTEP_JIT_COMPILE_LOG`, read once: append one line per compiled function (IR
    /// instructions, IR blocks, microseconds, code bytes, kind 0 plain/1 loop/2 baseline,
    /// function name, guest RIP) to this file.
    compile_log: Option<std::ffi::OsString>,
    next: u64,
    /// Functions defined in the current module.
    pub in_module: usize,
    opt_level: &'static str,
    /// The ISA that compiles regions with a loop, when their optimisation level differs
    /// from the module's (see [`Compiler::with_opt_levels`]).
    loop_isa: Option<OwnedTargetIsa>,
    /// The direct exits' links (see `crate::chain::Link`), freed with the module.
    links: LinkTable,
    /// `LOCKSTEP_JIT_LINKS=0` (read once): direct exits take the hop stub with their set,
    /// without links (for measurements).
    use_links: bool,
    /// `LOCKSTEP_JIT_DYN_LINKS=0` (read once): indirect exits without links.
    use_dyn_links: bool,
    /// Compile single blocks outside loops with the baseline tier when it covers them
    /// (`crate::base`).
    use_base: bool,
    /// Runs after which a baseline function asks to be compiled again by Cranelift (0:
    /// never), and the counters its entry counts them on (freed with the module).
    promote_after: u32,
    /// Blocks shorter than this are never promoted.
    promote_min: usize,
    /// `JitConfig::shared_exit_tails_min` (`lift::LowerTarget::shared_tails_min`).
    pub shared_tails_min: usize,
    counters: base::RunCounters,
    /// Baseline exits jump straight to their targets' fast entries once their links are
    /// filled (`crate::patch`, `JitConfig::patch_exits`).
    use_patch: bool,
    patches: crate::patch::Patches,
}

/// What the baseline tier is given of a compile it may take ([`Compiler::compile`]).
#[derive(Clone, Copy)]
pub struct BaseRequest<'a> {
    /// The blocks it compiles after the single block it takes (a trace: `base::compile`).
    pub trace: &'a [&'a Block],
    /// Its function counts its runs for a promotion to Cranelift (not a floating-point loop's,
    /// see `JitConfig::fp_loops_base`).
    pub promote: bool,
    /// ... even when its first block is shorter than `promote_min` instructions (a block of
    /// a function that calls itself, whose promotion compiles its recursive region).
    pub promote_short: bool,
}

/// A module whose code goes to [`crate::code_memory::CodeMemory`] (functions packed across
/// finalised batches; `LOCKSTEP_JIT_SYSTEM_MEMORY=1`: cranelift-jit's own provider, to
/// compare).
fn make_module(opt_level: &str) -> JITModule {
    let mut builder = JITBuilder::with_isa(make_isa(opt_level), default_libcall_names());
    if std::env::var_os("LOCKSTEP_JIT_SYSTEM_MEMORY").is_none() {
        builder.memory_provider(Box::new(crate::code_memory::CodeMemory::new()));
    }
    JITModule::new(builder)
}

/// Host-side diagnostics: append `text` and a newline to the file at `path` (created if
/// missing); a file that cannot be opened is skipped.
fn append_dump(path: &std::ffi::OsStr, text: &str) {
    use std::io::Write;
    if let Ok(mut f) = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
    {
        let _ = writeln!(f, "{text}");
    }
}

/// The host ISA with our flags and Cranelift's `opt_level`.
fn make_isa(opt_level: &str) -> OwnedTargetIsa {
    let mut flags = settings::builder();
    let set = |f: &mut settings::Builder, k: &str, v: &str| {
        f.set(k, v)
            .unwrap_or_else(|e| panic!("cranelift flag {k}={v}: {e}"))
    };
    set(&mut flags, "opt_level", opt_level);
    set(&mut flags, "preserve_frame_pointers", "true");
    set(&mut flags, "use_colocated_libcalls", "false");
    set(&mut flags, "is_pic", "false");
    // The IR verifier runs in debug and test builds, not in release.
    let verify = if cfg!(debug_assertions) {
        "true"
    } else {
        "false"
    };
    set(&mut flags, "enable_verifier", verify);
    if let Ok(extra) = std::env::var("LOCKSTEP_JIT_FLAGS") {
        for kv in extra.split(',').filter(|s| !s.is_empty()) {
            let (k, v) = kv.split_once('=').unwrap_or((kv, "true"));
            set(&mut flags, k, v);
        }
    }
    if let Ok(ra) = std::env::var("LOCKSTEP_JIT_RA") {
        set(&mut flags, "regalloc_algorithm", &ra);
    }
    if let (Ok(ra), "none") = (std::env::var("LOCKSTEP_JIT_RA_PLAIN"), opt_level) {
        set(&mut flags, "regalloc_algorithm", &ra);
    }
    cranelift_native::builder()
        .unwrap_or_else(|e| panic!("host not supported by Cranelift: {e}"))
        .finish(settings::Flags::new(flags))
        .unwrap_or_else(|e| panic!("Cranelift ISA: {e}"))
}

/// Where compiled code calls the raise and flag-fold helpers: raise through a `preserve_all`
/// adapter compiled into the module (see [`make_adapters`]), or directly.
#[derive(Clone, Copy)]
pub struct HelperAddrs {
    pub raise: u64,
    pub fold: u64,
    /// Raise goes through its adapter.
    pub adapted: bool,
    /// The module's hop stub (`lift::hop`), which chained exits tail-call.
    pub hop: u64,
    /// The module's stub for direct exits with a link (`lift::hop::hop_link_code`).
    pub hop_link: u64,
    /// The module's stub for indirect exits with a link (`lift::hop::hop_dyn_code`).
    pub hop_dyn: u64,
}

/// Calls from compiled code to the raise helper go through an adapter of Cranelift's
/// `preserve_all` convention (`LOCKSTEP_JIT_PRESERVE=0`: directly, as a C call). A C call
/// clobbers every caller-saved register, so values live across one (the TLB and RAM
/// pointers, guest registers held in SSA values, a loop's state) had to sit in the five
/// callee-saved registers or be spilled, even though the call is on a cold path; an adapter
/// saves and restores what the helper clobbers only when it runs.
fn use_adapters() -> bool {
    std::env::var("LOCKSTEP_JIT_PRESERVE").map_or(true, |v| v != "0")
}

/// Declare and define in `module` a one-block function `name` of signature `sig` whose body
/// `body` emits, given the builder and the function's parameters (not finalised).
fn define_small(
    module: &mut JITModule,
    ctx: &mut Context,
    fctx: &mut FunctionBuilderContext,
    name: &str,
    sig: Signature,
    body: impl FnOnce(&mut FunctionBuilder<'_>, &[cranelift_codegen::ir::Value]),
) -> FuncId {
    let frontend = module.isa().frontend_config();
    let id = module
        .declare_function(name, Linkage::Local, &sig)
        .unwrap_or_else(|e| panic!("declare {name}: {e}"));
    ctx.clear();
    ctx.func.signature = sig;
    let mut b = FunctionBuilder::new(&mut ctx.func, fctx);
    let blk = b.create_block();
    b.append_block_params_for_function_params(blk);
    b.switch_to_block(blk);
    b.seal_block(blk);
    let p = b.block_params(blk).to_vec();
    body(&mut b, &p);
    b.finalize(frontend);
    let dump = std::env::var_os("LOCKSTEP_JIT_DUMP_ASM");
    ctx.set_disasm(dump.is_some());
    module
        .define_function(id, ctx)
        .unwrap_or_else(|e| panic!("define {name}: {e}"));
    if let (Some(path), Some(text)) = (dump, ctx.compiled_code().and_then(|c| c.vcode.clone())) {
        append_dump(&path, &format!("; {name}\n{text}"));
    }
    module.clear_context(ctx);
    id
}

/// Define and finalise in `module` a `preserve_all` adapter for the raise helper, with the
/// helper's parameters (the frame first), that calls the helper (C convention; it returns
/// nothing). The fold helper, called only where the flags are stored, stays direct.
fn make_adapters(
    module: &mut JITModule,
    ctx: &mut Context,
    fctx: &mut FunctionBuilderContext,
) -> HelperAddrs {
    let cc = module.isa().default_call_conv();
    let c_sigs = lift::helper_signatures(cc);
    let target = crate::helpers::raise as *const () as u64;
    let c_sig = c_sigs[HELPER_RAISE].clone();
    let sig = lift::adapter_signature(&c_sig);
    let id = define_small(module, ctx, fctx, "adapter_raise", sig, |b, p| {
        let csig = b.import_signature(c_sig);
        let f = b.ins().iconst(types::I64, target as i64);
        b.ins().call_indirect(csig, f, p);
        b.ins().return_(&[]);
    });
    module.finalize_definitions().expect("finalise adapters");
    HelperAddrs {
        raise: module.get_finalized_function(id) as u64,
        fold: crate::helpers::fold_flags as *const () as u64,
        adapted: true,
        hop: 0,
        hop_link: 0,
        hop_dyn: 0,
    }
}

/// The helpers themselves (C convention).
fn direct_helpers() -> HelperAddrs {
    HelperAddrs {
        raise: crate::helpers::raise as *const () as u64,
        fold: crate::helpers::fold_flags as *const () as u64,
        adapted: false,
        hop: 0,
        hop_link: 0,
        hop_dyn: 0,
    }
}

/// Define and finalise the hop stubs (`lift::hop`, machine code) in `module`, and hand their
/// addresses to `helpers` and to `links` (the fill stub is what an empty link holds,
/// `chain::LinkTable::set_fill`; `links` must hold none yet).
fn make_hop(module: &mut JITModule, count: bool, helpers: &mut HelperAddrs, links: &mut LinkTable) {
    let mut ids = Vec::new();
    for (name, code) in [
        ("hop", lift::hop::hop_code(count)),
        ("hop_link", lift::hop::hop_link_code(count)),
        ("hop_dyn", lift::hop::hop_dyn_code(count)),
        ("hop_fill", lift::hop::hop_fill_code(count)),
    ] {
        let code = code.expect("the hop stubs assemble");
        let id = module
            .declare_function(name, Linkage::Local, &lift::hop::hop_signature())
            .expect("declare hop");
        module
            .define_function_bytes(id, 16, &code, &[])
            .expect("define hop");
        ids.push(id);
    }
    module.finalize_definitions().expect("finalise hop");
    let addr = |id| module.get_finalized_function(id) as u64;
    (helpers.hop, helpers.hop_link, helpers.hop_dyn) = (addr(ids[0]), addr(ids[1]), addr(ids[2]));
    links.set_fill(addr(ids[3]));
}

/// Define and finalise `enter` in `module`.
fn make_enter(
    module: &mut JITModule,
    ctx: &mut Context,
    fctx: &mut FunctionBuilderContext,
) -> EnterFn {
    let cc = module.isa().default_call_conv();
    let mut sig = Signature::new(cc);
    for _ in 0..5 {
        sig.params.push(AbiParam::new(types::I64));
    }
    sig.returns.push(AbiParam::new(types::I64));
    let id = define_small(module, ctx, fctx, "enter", sig, |b, p| {
        let bsig = b.import_signature(lift::block_signature(CallConv::Tail));
        // The dispatcher has just made the entry check: `entered` is the block's check word;
        // `rip` the RIP entered.
        let call = b.ins().call_indirect(bsig, p[2], &[p[0], p[1], p[3], p[4]]);
        let r = b.inst_results(call)[0];
        b.ins().return_(&[r]);
    });
    module.finalize_definitions().expect("finalise enter");
    let f = module.get_finalized_function(id);
    // SAFETY: `enter` was just compiled with exactly this C-convention signature.
    unsafe { core::mem::transmute::<*const u8, EnterFn>(f) }
}

impl Compiler {
    /// A compiler with Cranelift's `opt_level` ("none", "speed", "speed_and_size") for
    /// regions without a loop and `loop_opt_level` for regions with one: optimisation pays off
    /// where code runs many times in a row, and costs compile time everywhere else
    /// (docs/jit.md, "Compilation"). Compiled blocks chain through the table at `chain_table`
    /// (it must outlive the compiler).
    pub fn with_opt_levels(
        opt_level: &'static str,
        loop_opt_level: &'static str,
        chain_table: u64,
        count_chains: bool,
    ) -> Self {
        let loop_isa = (loop_opt_level != opt_level).then(|| make_isa(loop_opt_level));
        let mut module = make_module(opt_level);
        let cc = module.isa().default_call_conv();
        let mut ctx = module.make_context();
        let mut fctx = FunctionBuilderContext::new();
        let enter = make_enter(&mut module, &mut ctx, &mut fctx);
        let adapters = use_adapters();
        let mut helpers = if adapters {
            make_adapters(&mut module, &mut ctx, &mut fctx)
        } else {
            direct_helpers()
        };
        let mut links = LinkTable::default();
        make_hop(&mut module, count_chains, &mut helpers, &mut links);
        let mut helper_sigs = lift::helper_signatures(cc);
        if adapters {
            let s = &mut helper_sigs[HELPER_RAISE];
            *s = lift::adapter_signature(s);
        }
        Compiler {
            sig: lift::block_signature(CallConv::Tail),
            helper_sigs,
            helpers,
            dump_ir: std::env::var_os("LOCKSTEP_JIT_DUMP_IR"),
            dump_asm: std::env::var_os("LOCKSTEP_JIT_DUMP_ASM"),
            compile_log: std::env::var_os("LOCKSTEP_JIT_COMPILE_LOG"),
            module: Some(module),
            ctx,
            fctx,
            chain_table,
            count_chains,
            enter,
            next: 0,
            in_module: 0,
            opt_level,
            loop_isa,
            links,
            use_links: std::env::var("LOCKSTEP_JIT_LINKS").map_or(true, |v| v != "0"),
            use_dyn_links: std::env::var("LOCKSTEP_JIT_DYN_LINKS").map_or(true, |v| v != "0"),
            use_base: false,
            promote_after: 0,
            promote_min: 0,
            shared_tails_min: lift::SHARED_TAILS_MIN,
            counters: base::RunCounters::default(),
            use_patch: true,
            patches: crate::patch::Patches::default(),
        }
    }

    /// Compile single blocks outside loops with the baseline tier when it covers them; such a
    /// function of at least `promote_min` instructions leaves with `ret::PROMOTE` at its
    /// `promote_after`-th run (0: never).
    pub fn set_baseline(&mut self, on: bool, promote_after: u32, promote_min: usize) {
        self.use_base = on;
        self.promote_after = promote_after;
        self.promote_min = promote_min;
    }

    /// Whether baseline functions get patchable exits and fast entries (`crate::patch`).
    pub fn set_patch_exits(&mut self, on: bool) {
        self.use_patch = on;
    }

    /// The C-convention entry of this module (valid until [`Compiler::reset`]).
    pub fn enter(&self) -> EnterFn {
        self.enter
    }

    fn module(&mut self) -> &mut JITModule {
        self.module.as_mut().expect("module present")
    }

    /// Lift and define the region `blocks` (entry first; not yet callable: see
    /// [`Compiler::finalize`]). `native: false` sends every instruction through the trampoline.
    /// `looped`: the region contains a loop (compiled at the loop optimisation level).
    /// `base`: `Some` when the baseline tier may take it (not for a baseline function's
    /// promotion), see [`BaseRequest`]. `switch_order`: [`lift::LowerTarget::switch_order`].
    #[allow(clippy::too_many_arguments)]
    pub fn compile(
        &mut self,
        blocks: &[&Block],
        keep_ir: bool,
        native: bool,
        looped: bool,
        base: Option<BaseRequest>,
        ram_base: u64,
        switch_order: Vec<u64>,
        cert: &PageCert,
    ) -> Result<Compiled, String> {
        let allow_base = base.is_some();
        let (trace, promotable, short) = base.map_or((&[][..], false, false), |b| {
            (b.trace, b.promote, b.promote_short)
        });
        // A baseline function of at least `promote_min` instructions counts its runs (and
        // needs a counter for it: without one left, Cranelift takes the block).
        let promote = (self.promote_after > 0
            && promotable
            && (short
                || blocks
                    .first()
                    .is_some_and(|b| b.insns.len() >= self.promote_min)))
        .then_some(self.promote_after);
        let to_base = self.use_base
            && allow_base
            && native
            && !looped
            && blocks.len() == 1
            && (promote.is_none() || self.counters.available())
            && base::covers(blocks[0]);
        // The name shows in profiles (cranelift-jit writes `/tmp/perf-<pid>.map` for `perf
        // report`): the tier, a serial number and the entry's guest RIP.
        let kind = match (to_base, looped) {
            (true, _) => "base",
            (false, true) => "loop",
            (false, false) => "blk",
        };
        let rip = blocks.first().map_or(0, |b| b.key().rip);
        let name = format!("{kind}{}_{rip:x}", self.next);
        self.next += 1;
        let sig = self.sig.clone();
        let id = self
            .module()
            .declare_function(&name, Linkage::Local, &sig)
            .map_err(|e| e.to_string())?;
        if to_base {
            let counter = promote.and_then(|n| self.counters.take(n));
            return match self.compile_base(id, blocks[0], trace, keep_ir, ram_base, counter, cert) {
                // A trace the tier refuses (nothing was defined): the block on its own.
                Err(_) if !trace.is_empty() => {
                    self.compile_base(id, blocks[0], &[], keep_ir, ram_base, counter, cert)
                }
                r => r,
            };
        }
        self.ctx.clear();
        self.ctx.func.signature = sig;
        let hs = self.helper_sigs.clone();
        let frontend = self.module().isa().frontend_config();
        let bsig = self.sig.clone();
        let table = self.chain_table;
        let addrs = self.helpers;
        // Lifting folds constant offsets itself only where Cranelift will not.
        let level = match &self.loop_isa {
            Some(isa) if looped => isa.flags().opt_level(),
            _ => self.module().isa().flags().opt_level(),
        };
        let fold = level == cranelift_codegen::settings::OptLevel::None;
        let links = self.next_links();
        let builder = FunctionBuilder::new(&mut self.ctx.func, &mut self.fctx);
        let lowered = lift::lower_region(
            builder,
            blocks,
            native,
            lift::LowerTarget {
                frontend,
                chain_table: table,
                links,
                dyn_links: self.use_dyn_links,
                ram_base,
                fold_offsets: fold,
                switch_order,
                cert: cert.clone(),
                shared_tails_min: self.shared_tails_min,
            },
            |b| HelperSigs {
                exec: b.import_signature(hs[HELPER_EXEC].clone()),
                raise: b.import_signature(hs[HELPER_RAISE].clone()),
                fold: b.import_signature(hs[HELPER_FOLD].clone()),
                block: b.import_signature(bsig.clone()),
                hop: b.import_signature(lift::hop::hop_signature()),
                addrs,
            },
        );
        // The links the exits were given, before the function can run.
        self.links.hand_out(&lowered.links, table);
        let ir = keep_ir.then(|| self.ctx.func.display().to_string());
        // Host-side diagnostics only (never reaches the guest), and only when asked for: the
        // size of the IR and the time Cranelift takes for it.
        let log_start = self.compile_log.as_ref().map(|_| {
            let dfg = &self.ctx.func.dfg;
            (dfg.num_insts(), dfg.num_blocks(), std::time::Instant::now())
        });
        self.ctx.set_disasm(self.dump_asm.is_some());
        if let Some(path) = &self.dump_ir {
            // Host-side diagnostics: the IR of every compiled function.
            let rip = blocks.first().map_or(0, |b| b.key().rip);
            let mut text = format!("; {name} rip={rip:#x}\n");
            for b in blocks {
                crate::verify::guest_listing(&mut text, b, ";   ");
            }
            text.push_str(&self.ctx.func.display().to_string());
            append_dump(path, &text);
        }
        let module = self.module.as_mut().expect("module present");
        match &self.loop_isa {
            Some(isa) if looped => {
                // Compile with the loop ISA, then hand the machine code to the module.
                let (align, relocs_raw, bytes) = {
                    let code = self
                        .ctx
                        .compile(&**isa, &mut ControlPlane::default())
                        .map_err(|e| format!("{:?}", e.inner))?;
                    let align = (code.buffer.alignment as u64)
                        .max(isa.function_alignment().minimum as u64)
                        .max(isa.symbol_alignment());
                    (
                        align,
                        code.buffer.relocs().to_vec(),
                        code.code_buffer().to_vec(),
                    )
                };
                let relocs: Vec<ModuleReloc> = relocs_raw
                    .iter()
                    .map(|r| ModuleReloc::from_mach_reloc(r, &self.ctx.func, id))
                    .collect();
                module
                    .define_function_bytes(id, align, &bytes, &relocs)
                    .map_err(|e| format!("{e:?}"))?;
            }
            _ => module
                .define_function(id, &mut self.ctx)
                .map_err(|e| format!("{e:?}"))?,
        }
        let vcode = self.ctx.compiled_code().and_then(|c| c.vcode.clone());
        if let (Some(path), Some(text)) = (&self.dump_asm, vcode) {
            // Host-side diagnostics: the machine code (Cranelift's VCode listing).
            let rip = blocks.first().map_or(0, |b| b.key().rip);
            let n = blocks.len();
            append_dump(
                path,
                &format!("; {name} rip={rip:#x}: {n} guest blocks\n{text}"),
            );
        }
        let code_bytes = self
            .ctx
            .compiled_code()
            .map_or(0, |c| c.code_info().total_size as usize);
        if let (Some(path), Some((n, b, t0))) = (&self.compile_log, log_start) {
            let us = t0.elapsed().as_micros();
            let rip = blocks.first().map_or(0, |b| b.key().rip);
            append_dump(
                path,
                &format!("{n} {b} {us} {code_bytes} {} {name} {rip:#x}", looped as u8),
            );
        }
        module.clear_context(&mut self.ctx);
        self.in_module += 1;
        Ok(Compiled {
            id,
            ir,
            stats: lowered.stats,
            member_entries: lowered.member_entries,
            member_entry_lens: lowered.member_entry_lens,
            entry_len: lowered.entry_len,
            code_bytes,
            baseline: false,
        })
    }

    /// The links a function compiled now takes from (none when links are off).
    fn next_links(&self) -> (u64, usize) {
        if self.use_links {
            self.links.next()
        } else {
            (0, 0)
        }
    }

    /// Define `block` as function `id` compiled by the baseline tier (see `crate::base`), its
    /// entry counting runs down on `counter` when there is one; `cert`: the page checks it
    /// may make through a generation (`crate::page_gen`).
    #[allow(clippy::too_many_arguments)]
    fn compile_base(
        &mut self,
        id: FuncId,
        block: &Block,
        trace: &[&Block],
        keep_ir: bool,
        ram_base: u64,
        counter: Option<u64>,
        cert: &PageCert,
    ) -> Result<Compiled, String> {
        let t0 = self.compile_log.as_ref().map(|_| std::time::Instant::now());
        let target = base::BaseTarget {
            chain_table: self.chain_table,
            links: self.next_links(),
            dyn_links: self.use_dyn_links,
            ram_base,
            hop: self.helpers.hop,
            fold: self.helpers.fold,
            counter,
            count_chains: self.count_chains,
            patch: self.use_patch && self.use_links,
            cert: cert.clone(),
        };
        let mut code = base::compile(block, trace, &target)?;
        // The links the exits were given, before the function can run.
        self.links.hand_out(&code.links, self.chain_table);
        self.module()
            .define_function_bytes(id, 16, &code.bytes, &[])
            .map_err(|e| format!("{e:?}"))?;
        if let Some(fast) = code.fast {
            let exits = crate::patch::BaseExits {
                fast,
                check: code.check,
                len: code.len,
                sites: std::mem::take(&mut code.sites),
            };
            self.patches.add(id, exits);
        }
        let listing = (keep_ir || self.dump_ir.is_some()).then(|| {
            let mut text = format!("; baseline rip={:#x}\n", block.key().rip);
            for b in core::iter::once(block).chain(trace.iter().copied()) {
                crate::verify::guest_listing(&mut text, b, ";   ");
            }
            text.push_str(&base::disassemble(&code.bytes));
            text
        });
        if let (Some(path), Some(text)) = (&self.dump_ir, &listing) {
            append_dump(path, text);
        }
        if let (Some(path), Some(t0)) = (&self.compile_log, t0) {
            // Baseline functions have no IR: instructions and blocks 0, loop column 2.
            let us = t0.elapsed().as_micros();
            let (len, rip) = (code.bytes.len(), block.key().rip);
            append_dump(path, &format!("0 0 {us} {len} 2 base {rip:#x}"));
        }
        self.in_module += 1;
        Ok(Compiled {
            id,
            ir: listing.filter(|_| keep_ir),
            stats: LowerStats {
                native: (block.insns.len() + trace.iter().map(|b| b.insns.len()).sum::<usize>())
                    as u32,
                blocks: 1 + trace.len() as u32,
                ..LowerStats::default()
            },
            member_entries: Vec::new(),
            member_entry_lens: Vec::new(),
            entry_len: Some(code.len),
            code_bytes: code.bytes.len(),
            baseline: true,
        })
    }

    /// Empty the links to `rips` (sorted): functions for them were just made callable (see
    /// `crate::chain::LinkTable::unlink`).
    /// Exits patched to them go back through their links (`crate::patch`).
    pub fn unlink(&mut self, rips: &[u64]) -> Result<(), String> {
        self.links.unlink(rips);
        self.patches.scan(&self.links, true)
    }

    /// Make every defined function callable (the baseline functions' patch sites and fast
    /// entries noted: `crate::patch`).
    pub fn finalize(&mut self) -> Result<(), String> {
        self.module()
            .finalize_definitions()
            .map_err(|e| e.to_string())?;
        let module = self.module.as_ref().expect("module present");
        self.patches
            .finalized(|id| module.get_finalized_function(id) as u64);
        Ok(())
    }

    /// The dispatcher's periodic scan ([`crate::patch::Patches::due`]): `Ok(true)` when it
    /// scanned.
    pub fn scan_exits_if_due(&mut self) -> Result<bool, String> {
        if !self.patches.due() {
            return Ok(false);
        }
        self.patches.scan(&self.links, false).map(|_| true)
    }

    /// Exit jumps patched so far (statistics).
    pub fn patched_exits(&self) -> u64 {
        self.patches.patched
    }

    /// The entry address of a finalised block function (call it through [`Compiler::enter`]).
    pub fn get(&self, id: FuncId) -> BlockFn {
        self.module
            .as_ref()
            .expect("module present")
            .get_finalized_function(id)
    }

    /// Drop every compiled function and start a new module. No pointer obtained from
    /// [`Compiler::get`] may be used afterwards.
    pub fn reset(&mut self) {
        if let Some(m) = self.module.take() {
            // SAFETY: the caller (the translation cache) forgets every function pointer
            // before resetting, and no compiled code is running (we are in the dispatcher).
            unsafe { m.free_memory() };
        }
        let mut module = make_module(self.opt_level);
        self.enter = make_enter(&mut module, &mut self.ctx, &mut self.fctx);
        if self.helpers.adapted {
            self.helpers = make_adapters(&mut module, &mut self.ctx, &mut self.fctx);
        }
        self.links.clear();
        self.patches.clear();
        make_hop(
            &mut module,
            self.count_chains,
            &mut self.helpers,
            &mut self.links,
        );
        self.counters.clear();
        self.module = Some(module);
        self.in_module = 0;
    }
}

impl Drop for Compiler {
    /// A `JITModule` does not unmap its code when dropped: free it, or every engine would
    /// leak its code memory (many engines per process: tests, fuzzing, library users).
    fn drop(&mut self) {
        if let Some(m) = self.module.take() {
            // SAFETY: the compiler is being dropped, so no compiled function can be running
            // (compiled code only runs inside `Jit::dispatch`, which borrows the engine) and
            // no pointer from `Compiler::get` or `Compiler::enter` is used afterwards (the
            // engine owning them is being dropped with it).
            unsafe { m.free_memory() };
        }
    }
}
