//! Patched exits: a baseline function's direct exit jumps straight to its target's fast entry
//! (a `jmp rel32` rewritten in place) once the exit's link holds a baseline function, instead
//! of loading the link, checking the budget against the link's length and jumping through
//! it, and the target then comparing `entered` with its check word.
//!
//! Each direct exit of a baseline function starts with a 5-byte `jmp` to the code right after
//! it (the jump through the link: `base::emit::Emit::exit_const`), and each baseline function
//! has two fast entries (`base::fast_entries`): both make the link jump's budget check with
//! the function's own length (R9 holds the count the exit just stored), then the *checked*
//! one makes the entry check and the *trusted* one none. When the compiler finds an exit's
//! link filled with such a function ([`Patches::scan`]), it points the exit's jump at the
//! trusted entry if the exit passes the target's check word as `entered` (same page, same
//! code word: the entry would skip its check today), else at the checked one. When the link
//! is emptied (`LinkTable::unlink`: a new function for the RIP) or holds another function,
//! the jump goes back to the code after it. Links fill while compiled code runs (the fill
//! stub), so the full scan runs from the dispatcher ([`Patches::due`]); a finalisation brings
//! no filled link (its functions have not run), and an unlink only empties links, so after
//! one only the patched sites are looked at.
//! So a patched jump goes where the link jump would go, with the same budget check, hop
//! count and entry check: nothing the guest can see changes.
//!
//! The code pages are made writable for the rewrite and read-and-execute again right after
//! (`mprotect`), only while the dispatcher runs (no compiled code is running); the pages of
//! finalised functions are never shared with code still being written (`code_memory`).
//! A chained jump through a link was ~11 host instructions with an indirect jump, a patched
//! one ~5 with two direct ones; heap has 15.2 M of its 27.9 M chained jumps patched (docs/jit.md,
//! "Patched exits").

use crate::chain::LinkTable;
use cranelift_module::FuncId;
use std::collections::BTreeMap;

/// What a baseline function brings (`base::BaseCode`): its fast entries' offsets (checked,
/// trusted), its check word, its length, and its exits' patch sites (offset, link, entered).
pub struct BaseExits {
    pub fast: (usize, usize),
    pub check: u64,
    pub len: u64,
    pub sites: Vec<(usize, u64, u64)>,
}

/// A finalised baseline function's fast entries.
#[derive(Clone, Copy)]
struct Fast {
    checked: u64,
    trusted: u64,
    check: u64,
    len: u64,
}

/// A direct exit's patchable jump.
struct Site {
    /// Address of the `jmp rel32`.
    at: u64,
    link: u64,
    entered: u64,
    /// The function whose fast entry the jump goes to now (`None`: the code after it).
    to: Option<u64>,
}

/// The patch sites and fast entries of a module's baseline functions.
#[derive(Default)]
pub struct Patches {
    /// Compiled, not yet finalised.
    waiting: Vec<(FuncId, BaseExits)>,
    /// Finalised functions with fast entries, by entry address (what links hold).
    fast: BTreeMap<u64, Fast>,
    sites: Vec<Site>,
    /// Dispatches until the next scan from the dispatcher ([`Patches::due`]).
    countdown: u64,
    /// Jumps pointed at a fast entry so far (statistics).
    pub patched: u64,
}

impl Patches {
    /// Note a baseline function just defined (as `id`).
    pub fn add(&mut self, id: FuncId, exits: BaseExits) {
        self.waiting.push((id, exits));
    }

    /// The waiting functions were finalised; `addr` gives each one's entry address.
    pub fn finalized(&mut self, addr: impl Fn(FuncId) -> u64) {
        for (id, x) in std::mem::take(&mut self.waiting) {
            let base = addr(id);
            let fast = Fast {
                checked: base + x.fast.0 as u64,
                trusted: base + x.fast.1 as u64,
                check: x.check,
                len: x.len,
            };
            self.fast.insert(base, fast);
            for (off, link, entered) in x.sites {
                self.sites.push(Site {
                    at: base + off as u64,
                    link,
                    entered,
                    to: None,
                });
            }
        }
    }

    /// Point every site at what its link holds now: a baseline function's fast entry (of the
    /// same length as the link says), or the code after the jump. Sites are rewritten page
    /// by page, each page writable only for its writes. With `only_patched`, only the
    /// patched sites are looked at (after an unlink, which only empties links).
    pub fn scan(&mut self, links: &LinkTable, only_patched: bool) -> Result<(), String> {
        let mut writes: Vec<(u64, i32)> = Vec::new();
        for s in &mut self.sites {
            if only_patched && s.to.is_none() {
                continue;
            }
            let Some(l) = links.at(s.link) else {
                continue;
            };
            // (Cheap outs first: a link still empty — the fill stub with length 0 — or still
            // holding what the jump goes to.)
            if (s.to.is_none() && l.len == 0) || s.to == Some(l.func) {
                continue;
            }
            let target = self
                .fast
                .get(&l.func)
                .filter(|f| f.len == l.len)
                .and_then(|f| {
                    let entry = if s.entered == f.check {
                        f.trusted
                    } else {
                        f.checked
                    };
                    let rel = i32::try_from(entry as i64 - (s.at as i64 + 5)).ok()?;
                    Some((l.func, rel))
                });
            // (`s.to` is not the link's function here: the cheap outs took that case.)
            match (s.to, target) {
                (_, Some((func, rel))) => {
                    writes.push((s.at, rel));
                    s.to = Some(func);
                    self.patched += 1;
                }
                (Some(_), None) => {
                    writes.push((s.at, 0));
                    s.to = None;
                }
                (None, None) => {}
            }
        }
        write_jumps(&mut writes)
    }

    /// Whether the dispatcher should scan now: one every `4 × sites` dispatches (at least
    /// 64) finds the exits whose links filled since the last; the scans' cost stays below
    /// a quarter of a site's check per dispatch. (A scan after every finalisation made
    /// fpmath's 606 compiles quadratic: +3.3% host instructions.)
    pub fn due(&mut self) -> bool {
        if self.sites.is_empty() {
            return false;
        }
        if self.countdown > 0 {
            self.countdown -= 1;
            return false;
        }
        self.countdown = (self.sites.len() as u64 * 4).max(64);
        true
    }

    /// Forget everything (the module's code is gone).
    pub fn clear(&mut self) {
        self.waiting.clear();
        self.fast.clear();
        self.sites.clear();
    }
}

const PAGE: u64 = 4096;

/// Write each `rel32` into the `jmp` at its address (the four bytes after the opcode),
/// making the pages they are in writable (not executable) for the writes and then
/// read-and-execute again.
fn write_jumps(writes: &mut [(u64, i32)]) -> Result<(), String> {
    writes.sort_unstable_by_key(|w| w.0);
    let mut i = 0;
    while i < writes.len() {
        // A run of writes whose pages touch: one range of pages.
        let lo = (writes[i].0 + 1) & !(PAGE - 1);
        let mut hi = (writes[i].0 + 5).next_multiple_of(PAGE);
        let mut j = i + 1;
        while j < writes.len() && (writes[j].0 + 1) & !(PAGE - 1) <= hi {
            hi = hi.max((writes[j].0 + 5).next_multiple_of(PAGE));
            j += 1;
        }
        protect(lo, hi - lo, libc::PROT_READ | libc::PROT_WRITE)?;
        for &(at, rel) in &writes[i..j] {
            // SAFETY: `at` is the `jmp rel32` of an exit of a finalised function of the live
            // module (`Patches::finalized`; the sites are dropped with the module), whose
            // pages were just made writable; no compiled code runs while the dispatcher
            // patches, and nothing holds a reference into code memory.
            unsafe { std::ptr::write_unaligned((at + 1) as *mut i32, rel) };
        }
        protect(lo, hi - lo, libc::PROT_READ | libc::PROT_EXEC)?;
        i = j;
    }
    Ok(())
}

fn protect(addr: u64, len: u64, prot: libc::c_int) -> Result<(), String> {
    // SAFETY: the range is page aligned and lies in code memory of the live module (see
    // `write_jumps`); changing its protection affects no Rust reference.
    let r = unsafe { libc::mprotect(addr as *mut libc::c_void, len as usize, prot) };
    if r != 0 {
        return Err(format!(
            "patching exits: mprotect({addr:#x}, {len:#x}): {}",
            std::io::Error::last_os_error()
        ));
    }
    Ok(())
}
