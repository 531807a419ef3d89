//! The shape of a region (see docs/jit.md "Regions"): a block's static successors, the
//! return sites among a set of blocks, which of them form loops through the entry, the
//! registers each may find dirty on entry, the flag-setting instruction each may replay, and
//! which jumps between them check the budget.

use lockstep_interp::decode::Block;
use std::sync::Arc;

/// Guest RIP of a block's first instruction.
pub fn start(b: &Block) -> u64 {
    b.insns.first().map_or(u64::MAX, |d| d.ins.ip())
}

/// Static successors of a block: the targets of its last instruction when that is a direct
/// branch or call, and the next instruction when execution can fall through to it.
pub fn successors(b: &Block) -> Vec<u64> {
    use iced_x86::FlowControl as F;
    let Some(d) = b.insns.last() else {
        return Vec::new();
    };
    let ins = &d.ins;
    let direct = ins.is_jmp_short_or_near() || ins.is_jcc_short_or_near() || ins.is_call_near();
    match ins.flow_control() {
        F::ConditionalBranch if direct => vec![ins.near_branch_target(), ins.next_ip()],
        // After a call: the callee, and the return site (a RET may come back to it).
        F::Call if direct => vec![ins.near_branch_target(), ins.next_ip()],
        F::IndirectCall => vec![ins.next_ip()],
        F::UnconditionalBranch if direct => vec![ins.near_branch_target()],
        F::Next => vec![ins.next_ip()],
        _ => Vec::new(),
    }
}

/// The return sites of `blocks`: the instruction after each block-ending near CALL.
pub fn return_sites<'a>(blocks: impl IntoIterator<Item = &'a Block>) -> Vec<u64> {
    blocks
        .into_iter()
        .filter_map(|b| b.insns.last())
        .filter(|d| d.ins.is_call_near() || d.ins.is_call_near_indirect())
        .map(|d| d.ins.next_ip())
        .collect()
}

/// Does the block end with an indirect near CALL of 64-bit code (`call r/m64`)?
pub fn ends_in_indirect_call(b: &Block) -> bool {
    b.insns
        .last()
        .is_some_and(|d| d.ins.code() == iced_x86::Code::Call_rm64)
}

/// The members (indices into `blocks`, entry first) that an indirect near CALL of the region
/// may jump to inside the function: when a block ends in one ([`ends_in_indirect_call`]),
/// every block but the entry that no block's static successors name and that is no return
/// site — the blocks the region search took in as a call's observed target
/// (`JitConfig::inline_calls`); none otherwise. (A member reached only through a switch jump
/// qualifies too: a call whose run-time target is its start may go there as well.)
pub fn indirect_call_targets(blocks: &[&Block]) -> Vec<usize> {
    if !blocks.iter().any(|b| ends_in_indirect_call(b)) {
        return Vec::new();
    }
    let named: Vec<u64> = blocks.iter().flat_map(|b| successors(b)).collect();
    let sites = return_sites(blocks.iter().copied());
    (1..blocks.len())
        .filter(|&i| {
            let s = start(blocks[i]);
            !named.contains(&s) && !sites.contains(&s)
        })
        .collect()
}

/// For each block of `blocks`: is it part of a called function taken in for an indirect
/// call ([`indirect_call_targets`]) — reached from one through static successors?
pub fn in_inlined_callee(blocks: &[&Block]) -> Vec<bool> {
    let starts: Vec<u64> = blocks.iter().map(|b| start(b)).collect();
    let mut inside = vec![false; blocks.len()];
    let mut queue = indirect_call_targets(blocks);
    for &i in &queue {
        inside[i] = true;
    }
    while let Some(i) = queue.pop() {
        for t in successors(blocks[i]) {
            if let Some(j) = starts.iter().position(|&s| s == t) {
                if !inside[j] && j != 0 {
                    inside[j] = true;
                    queue.push(j);
                }
            }
        }
    }
    inside
}

/// Is `ins` an indirect near JMP that looks like a `switch`: through a register, or through
/// memory with an index register (a jump table)? A jump through a fixed slot (a PLT stub's
/// `jmp [rip+x]`, a function pointer in a global) is not: it leaves the page.
pub fn is_switch_jump(ins: &iced_x86::Instruction) -> bool {
    use iced_x86::{OpKind, Register};
    ins.flow_control() == iced_x86::FlowControl::IndirectBranch
        && match ins.op0_kind() {
            OpKind::Register => true,
            OpKind::Memory => ins.memory_index() != Register::None,
            _ => false,
        }
}

/// Does the block end with a `switch` jump ([`is_switch_jump`])? Inside a region, its
/// run-time target may be any block of the region.
pub fn ends_in_switch_jump(b: &Block) -> bool {
    b.insns.last().is_some_and(|d| is_switch_jump(&d.ins))
}

/// Does the block branch (or call) back to its own start?
pub fn loops_to_itself(b: &Block) -> bool {
    successors(b).contains(&start(b))
}

/// Is `blocks` (entry first) lowered as a region: several blocks (jumps between them stay
/// inside the function, registers in SSA values), or one block that branches back to its
/// own start?
pub fn is_region(blocks: &[&Block]) -> bool {
    blocks.len() > 1 || blocks.first().is_some_and(|b| loops_to_itself(b))
}

/// Does `blocks` (entry first) contain a loop through the entry? Such a region is compiled
/// at the loop optimisation level: keeping registers in SSA values across iterations pays
/// for the larger compile.
pub fn is_loop(blocks: &[&Block]) -> bool {
    blocks.first().is_some_and(|b| loops_to_itself(b)) || reaches_entry(blocks).iter().any(|&r| r)
}

/// For each block of `blocks` (entry first): can the entry be reached from it again through
/// the others? A direct call's return site counts only through the callee's own return,
/// which is not followed here: recursion alone does not make a loop.
fn reaches_entry(blocks: &[&Block]) -> Vec<bool> {
    // A RET of a function taken in for an indirect call goes back to that call's return site.
    let callee = in_inlined_callee(blocks);
    let call_sites: Vec<u64> = blocks
        .iter()
        .filter(|b| ends_in_indirect_call(b))
        .filter_map(|b| b.insns.last().map(|d| d.ins.next_ip()))
        .collect();
    let succ: Vec<Vec<u64>> = blocks
        .iter()
        .zip(&callee)
        .map(|(b, &in_callee)| {
            if ends_in_switch_jump(b) {
                return blocks.iter().map(|o| start(o)).collect();
            }
            let mut s = successors(b);
            if let Some(d) = b.insns.last().filter(|d| d.ins.is_call_near()) {
                s.retain(|&t| t != d.ins.next_ip());
            }
            let ret = b.insns.last().is_some_and(|d| {
                matches!(
                    d.ins.code(),
                    iced_x86::Code::Retnq | iced_x86::Code::Retnq_imm16
                )
            });
            if in_callee && ret {
                s.extend(call_sites.iter().copied());
            }
            s
        })
        .collect();
    let Some(first) = blocks.first() else {
        return Vec::new();
    };
    let entry = start(first);
    let mut reach = vec![false; blocks.len()];
    let mut changed = true;
    while changed {
        changed = false;
        for i in 0..blocks.len() {
            if reach[i] {
                continue;
            }
            let hit = succ[i].iter().any(|&t| {
                t == entry || (0..blocks.len()).any(|j| reach[j] && start(blocks[j]) == t)
            });
            if hit {
                reach[i] = true;
                changed = true;
            }
        }
    }
    reach
}

/// The blocks of `blocks` (entry first) from which the entry can be reached again through
/// the others — the loops through the entry, where keeping registers in SSA values across
/// iterations pays for the larger compile; just the entry when there is no such loop.
pub fn loop_of(blocks: Vec<Arc<Block>>) -> Vec<Arc<Block>> {
    let refs: Vec<&Block> = blocks.iter().map(|b| &**b).collect();
    let reach = reaches_entry(&refs);
    if !reach.first().copied().unwrap_or(false) {
        return blocks.into_iter().take(1).collect();
    }
    blocks
        .into_iter()
        .zip(reach)
        .enumerate()
        .filter(|(i, (_, r))| *i == 0 || *r)
        .map(|(_, (b, _))| b)
        .collect()
}

/// Does one of `blocks` make a direct near call to a block of `blocks` from which that call
/// is reached again (through branches, fall-throughs, calls and return sites)? Then the
/// blocks hold a function that calls itself: as one region, its calls and returns stay
/// jumps inside the function (`JitConfig::recursive_regions`).
pub fn self_recursive(blocks: &[&Block]) -> bool {
    if blocks.iter().any(|b| {
        b.insns
            .last()
            .is_some_and(|d| d.ins.is_call_near_indirect())
    }) {
        // A call through a pointer (a comparator, a callback) leaves the function and
        // enters it again on return, through the prologue of a large function.
        return false;
    }
    let starts: Vec<u64> = blocks.iter().map(|b| start(b)).collect();
    // The calls into the blocks themselves, (calling block, callee block). Most searches
    // hold none: then no successor lists, which cost a scan of `starts` per edge (1.3% of
    // fpmath's run, at every compile).
    let calls: Vec<(usize, usize)> = blocks
        .iter()
        .enumerate()
        .filter_map(|(call, b)| {
            let d = b.insns.last().filter(|d| d.ins.is_call_near())?;
            let target = d.ins.near_branch_target();
            Some((call, starts.iter().position(|&s| s == target)?))
        })
        .collect();
    if calls.is_empty() {
        return false;
    }
    let succ: Vec<Vec<usize>> = blocks
        .iter()
        .map(|b| {
            successors(b)
                .into_iter()
                .filter_map(|t| starts.iter().position(|&s| s == t))
                .collect()
        })
        .collect();
    calls.into_iter().any(|(call, callee)| {
        // Depth first from the callee: is the calling block among what it reaches?
        let mut seen = vec![false; blocks.len()];
        let mut queue = vec![callee];
        seen[callee] = true;
        while let Some(i) = queue.pop() {
            if i == call {
                return true;
            }
            for &j in &succ[i] {
                if !seen[j] {
                    seen[j] = true;
                    queue.push(j);
                }
            }
        }
        false
    })
}

/// For each block of `blocks` (entry first): the registers of `keep` that may differ from
/// memory when the block is entered through a jump inside the region, given the registers
/// each block writes (`written`). A block's stores of `keep` registers wait for an exit, so
/// what one block writes stays dirty in every block it reaches. The successors `succ` are
/// [`generous_successors`], so the sets may be larger than needed, never smaller. The
/// function entry brings nothing dirty.
pub fn dirty_on_entry(succ: &[Vec<usize>], written: &[u32], keep: u32) -> Vec<u32> {
    let mut dirty = vec![0u32; succ.len()];
    let mut changed = true;
    while changed {
        changed = false;
        for i in 0..succ.len() {
            let out = (dirty[i] | written[i]) & keep;
            for &j in &succ[i] {
                if dirty[j] | out != dirty[j] {
                    dirty[j] |= out;
                    changed = true;
                }
            }
        }
    }
    dirty
}

/// For each block of `blocks`: the blocks a jump inside the region may go to from it, taken
/// generously (every instruction's next address and direct target that starts a block, every
/// return site after a RET or indirect call, every block after an indirect jump).
pub fn generous_successors(blocks: &[&Block]) -> Vec<Vec<usize>> {
    use iced_x86::{FlowControl as F, OpKind};
    let starts: Vec<u64> = blocks.iter().map(|b| start(b)).collect();
    let sites = return_sites(blocks.iter().copied());
    let called: Vec<u64> = indirect_call_targets(blocks)
        .into_iter()
        .map(|i| starts[i])
        .collect();
    blocks
        .iter()
        .map(|b| {
            let mut targets = Vec::new();
            for d in b.insns.iter() {
                let ins = &d.ins;
                targets.push(ins.next_ip());
                if matches!(
                    ins.op0_kind(),
                    OpKind::NearBranch16 | OpKind::NearBranch32 | OpKind::NearBranch64
                ) {
                    targets.push(ins.near_branch_target());
                }
                match ins.flow_control() {
                    F::Return => targets.extend(sites.iter().copied()),
                    F::IndirectCall => {
                        targets.extend(sites.iter().copied());
                        targets.extend(called.iter().copied());
                    }
                    F::IndirectBranch => targets.extend(starts.iter().copied()),
                    _ => {}
                }
            }
            (0..blocks.len())
                .filter(|&j| targets.contains(&starts[j]))
                .collect()
        })
        .collect()
}

/// The instruction whose status flags a jump at the end of `b` leaves, when a target can
/// recompute them by replaying it: the last instruction of `b` that changes a status flag,
/// if `replayable` accepts it (`lift::insn::is_replayable`: a CMP or TEST, or an ALU
/// operation into a register, of registers and immediates) and no later instruction of `b`
/// writes a register it uses — so at the end of `b` its registers still hold the values it
/// compared or produced.
pub fn flags_tail(
    b: &Block,
    replayable: impl Fn(&iced_x86::Instruction) -> bool,
) -> Option<iced_x86::Instruction> {
    use iced_x86::{InstructionInfoFactory, OpAccess};
    let status = crate::lift::flags::ICED_STATUS;
    let mut fac = InstructionInfoFactory::new();
    let mut later_writes = Vec::new();
    for d in b.insns.iter().rev() {
        let info = fac.info(&d.ins);
        if d.ins.rflags_modified() & status != 0 {
            if !replayable(&d.ins) {
                return None;
            }
            let clobbered = info
                .used_registers()
                .iter()
                .any(|u| later_writes.contains(&u.register().full_register()));
            return (!clobbered).then_some(d.ins);
        }
        for u in info.used_registers() {
            if !matches!(
                u.access(),
                OpAccess::Read | OpAccess::CondRead | OpAccess::None | OpAccess::NoMemAccess
            ) {
                later_writes.push(u.register().full_register());
            }
        }
    }
    None
}

/// For each block: the flag-setting instruction it can start by replaying, when every block
/// that may jump to it inside the region ([`generous_successors`] `succ`) ends with the
/// same one (`tails`, from [`flags_tail`]; compared by `same`); `None` for a block no other
/// block jumps to. The function entry's jump to
/// the first block does not count here (it hands over the frame's record; see
/// `lift::lower_region`, which gives that jump its own copy of the block).
pub fn replays(
    succ: &[Vec<usize>],
    tails: &[Option<iced_x86::Instruction>],
    same: impl Fn(&iced_x86::Instruction, &iced_x86::Instruction) -> bool,
) -> Vec<Option<iced_x86::Instruction>> {
    (0..succ.len())
        .map(|t| {
            let mut from = (0..succ.len()).filter(|&s| succ[s].contains(&t));
            let first = tails[from.next()?]?;
            from.all(|s| tails[s].is_some_and(|x| same(&x, &first)))
                .then_some(first)
        })
        .collect()
}

/// Where a region function checks the instruction budget (see [`budget_checks`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BudgetChecks {
    /// `span[i]`: the most instructions a run entered at member `i` can retire before it
    /// meets a checked jump or leaves the function (its own and those of the members it may
    /// go on to without a check). A jump to `i` that checks, and an entry into the function
    /// at `i`, check that the budget covers `span[i]`.
    pub span: Vec<u64>,
    /// `free[i]`: the members a direct jump at the end of member `i` may go to without a
    /// check (the budget checked on the way to `i` covers them).
    pub free: Vec<Vec<usize>>,
}

/// Which jumps between the members of a region check the budget: only those that close a
/// cycle (the back edges of a depth-first search from the entries `starts`, over the direct
/// jumps `succ[i]` at the end of each member), and every jump from a member that may retire
/// more than its `len[i]` instructions (`multi[i]`: a REP string, which checks the budget
/// itself). The other jumps form no cycle, so a run between two checks is a path through
/// them, at most [`BudgetChecks::span`] instructions long. Every other jump (a run-time
/// target, a direct one not in `succ`) checks.
pub fn budget_checks(
    succ: &[Vec<usize>],
    len: &[u64],
    multi: &[bool],
    starts: &[usize],
) -> BudgetChecks {
    let n = succ.len();
    const NEW: u8 = 0;
    const OPEN: u8 = 1;
    const DONE: u8 = 2;
    let mut state = vec![NEW; n];
    let mut free: Vec<Vec<usize>> = vec![Vec::new(); n];
    // Members in the order their search finishes: the target of a jump that is not a back
    // edge finishes before its source.
    let mut finished = Vec::with_capacity(n);
    for s in starts.iter().copied().chain(0..n) {
        if state[s] != NEW {
            continue;
        }
        state[s] = OPEN;
        let mut stack = vec![(s, 0usize)];
        while let Some((u, next)) = stack.last_mut() {
            let u = *u;
            let Some(&v) = succ[u].get(*next) else {
                state[u] = DONE;
                finished.push(u);
                stack.pop();
                continue;
            };
            *next += 1;
            let back = state[v] == OPEN;
            if !back && !multi[u] && !free[u].contains(&v) {
                free[u].push(v);
            }
            if state[v] == NEW {
                state[v] = OPEN;
                stack.push((v, 0));
            }
        }
    }
    let mut span = vec![0u64; n];
    for &u in &finished {
        let after = free[u].iter().map(|&v| span[v]).max().unwrap_or(0);
        span[u] = len[u].saturating_add(after);
    }
    BudgetChecks { span, free }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_loop_checks_its_back_edge_only() {
        // 0 -> 1 -> 2 -> 0 (the back edge), 2 -> 3 (out of the loop), 1 -> 1 (a self loop).
        let succ = vec![vec![1], vec![2, 1], vec![0, 3], vec![]];
        let len = [3, 4, 5, 6];
        let c = budget_checks(&succ, &len, &[false; 4], &[0]);
        assert_eq!(c.free, vec![vec![1], vec![2], vec![3], vec![]]);
        assert_eq!(c.span, vec![3 + 4 + 5 + 6, 4 + 5 + 6, 5 + 6, 6]);
        // A member that may retire more than its length (a REP string) checks every jump.
        let c = budget_checks(&succ, &len, &[false, true, false, false], &[0]);
        assert_eq!(c.free[1], Vec::<usize>::new());
        assert_eq!(c.span[0], 3 + 4);
    }

    #[test]
    fn entered_elsewhere_the_search_starts_there() {
        // Entered at 2 (a peeled copy, say) as well as 0: 2 -> 0 is no back edge then.
        let succ = vec![vec![1], vec![0], vec![0]];
        let c = budget_checks(&succ, &[1, 1, 1], &[false; 3], &[2, 0]);
        assert_eq!(c.free, vec![vec![1], vec![], vec![0]]);
        assert_eq!(c.span, vec![2, 1, 3]);
    }

    /// On random graphs: the free jumps form no cycle, and each span covers the member and
    /// every path of free jumps from it.
    #[test]
    fn free_jumps_form_no_cycle_and_spans_cover_their_paths() {
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        let mut rnd = |m: u64| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x % m
        };
        for _ in 0..500 {
            let n = 1 + rnd(12) as usize;
            let succ: Vec<Vec<usize>> = (0..n)
                .map(|_| (0..rnd(4)).map(|_| rnd(n as u64) as usize).collect())
                .collect();
            let len: Vec<u64> = (0..n).map(|_| 1 + rnd(20)).collect();
            let multi: Vec<bool> = (0..n).map(|_| rnd(8) == 0).collect();
            let starts = [rnd(n as u64) as usize];
            let c = budget_checks(&succ, &len, &multi, &starts);
            for u in 0..n {
                assert!(c.span[u] >= len[u]);
                for &v in &c.free[u] {
                    assert!(succ[u].contains(&v) && !multi[u]);
                    assert!(c.span[u] >= len[u] + c.span[v], "{succ:?} {c:?}");
                }
            }
            // Kahn's algorithm removes every member: no cycle of free jumps.
            let mut indeg = vec![0; n];
            for f in &c.free {
                for &v in f {
                    indeg[v] += 1;
                }
            }
            let mut ready: Vec<usize> = (0..n).filter(|&v| indeg[v] == 0).collect();
            let mut seen = 0;
            while let Some(u) = ready.pop() {
                seen += 1;
                for &v in &c.free[u] {
                    indeg[v] -= 1;
                    if indeg[v] == 0 {
                        ready.push(v);
                    }
                }
            }
            assert_eq!(seen, n, "{succ:?} {c:?}");
        }
    }
}
