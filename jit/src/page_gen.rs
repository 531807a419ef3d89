//! Page generations: a one-compare form of the page check that compiled code makes on the
//! way into a function or a page from elsewhere.
//!
//! The full check (`base::check_page`, `lift::page_ok`) reads the execute TLB entry of the
//! page (tag and host field) and the page's code word: nine host instructions on every
//! chained jump from another page and on every call into a function taken in from another
//! page. What it establishes cannot change while two epochs stay the same: the current
//! TLB set's execute epoch ([`Tlb::exec_epoch`]: it moves on with any change of that set's
//! execute table that could change a hit, a fill into an empty slot aside) and the RAM's
//! code epoch ([`GuestRam::code_epoch`]: it moves on with any page's code word) — and the
//! RAM's host address, which the entries' host fields include. So the engine numbers the
//! epochs it sees ([`Gens`]: a *generation*, a small number that stands for one set of
//! epochs and no other, for the life of the engine); the frame carries the
//! current one ([`crate::frame::Frame::gen`], brought up to date wherever the frame's TLB
//! pointers are, [`crate::frame::Frame::sync_tlb`]); and the compiler, which sees the TLB
//! and the code words as they are when it compiles ([`PageCert`]), gives each page check
//! whose conditions hold then the generation it found them under. The code compares that
//! number with the frame's first: equal, the conditions still hold (the same epochs), and
//! the full check is skipped; different, the full check decides, as before.
//!
//! Nothing the guest sees depends on this: a check passes through the generation only when
//! the full check would pass too.

use lockstep_interp::decode::Block;
use lockstep_interp::mem::{GuestRam, PAGE_SIZE};
use lockstep_interp::mmu::Tlb;

/// The epochs a generation stands for: the current TLB set's execute epoch, the RAM's code
/// epoch, and the RAM's host address (the host fields of TLB entries include it).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct Epochs {
    exec: u64,
    code: u64,
    ram: u64,
}

impl Epochs {
    /// The epochs of `tlb` (its current set) and `ram` now.
    #[inline]
    pub fn of(tlb: &Tlb, ram: &GuestRam) -> Epochs {
        Epochs {
            exec: tlb.exec_epoch(),
            code: ram.code_epoch(),
            ram: ram.bytes().as_ptr() as u64,
        }
    }
}

/// How many recent [`Epochs`] keep their generation: a system-mode guest goes back and forth
/// between its user and supervisor TLB sets (each with its own execute epoch), and the
/// generations code was compiled under hold again on the way back.
const RECENT: usize = 4;

/// The generations handed out so far, the most recent first.
#[derive(Debug)]
pub struct Gens {
    recent: [Option<(Epochs, u32)>; RECENT],
    next: u32,
}

impl Default for Gens {
    fn default() -> Self {
        Gens::new()
    }
}

impl Gens {
    /// No generation yet; the first is 1 (0 stands for none: no compiled check compares
    /// with it).
    pub fn new() -> Gens {
        Gens {
            recent: [None; RECENT],
            next: 1,
        }
    }

    /// The generation of `now`: the one it had, if it is among the recent ones, else a new
    /// one (0 once the numbers that fit a compare's 32-bit immediate have all been used: no
    /// check passes through a generation after that).
    #[inline]
    pub fn sync(&mut self, now: Epochs) -> u32 {
        match self.recent[0] {
            Some((e, g)) if e == now => g,
            _ => self.sync_slow(now),
        }
    }

    #[cold]
    fn sync_slow(&mut self, now: Epochs) -> u32 {
        let found = self
            .recent
            .iter()
            .position(|r| r.is_some_and(|(e, _)| e == now));
        let (i, g) = match found {
            Some(i) => (i, self.recent[i].map_or(0, |(_, g)| g)),
            None => {
                let g = self.next;
                if g == 0 || g > i32::MAX as u32 {
                    return 0;
                }
                self.next = g + 1;
                (RECENT - 1, g)
            }
        };
        self.recent[..=i].rotate_right(1);
        self.recent[0] = Some((now, g));
        g
    }
}

/// The page checks a compile may give a generation: the execute TLB entries (virtual page,
/// host field) and the code words (physical page, word) found as the checks expect them when
/// the compile started, under generation `gen`.
#[derive(Clone, Debug, Default)]
pub struct PageCert {
    gen: u32,
    pages: Vec<(u64, u64)>,
    words: Vec<(u64, u32)>,
}

impl PageCert {
    /// What holds now for the pages of `blocks` (decoded from `ram`, whose host base is
    /// `ram_base`), under generation `gen` (that of [`Epochs::of`] `tlb` and `ram` now).
    pub fn new<'a>(
        gen: u32,
        tlb: &Tlb,
        ram: &GuestRam,
        ram_base: u64,
        blocks: impl IntoIterator<Item = &'a Block>,
    ) -> PageCert {
        let mut cert = PageCert {
            gen,
            ..PageCert::default()
        };
        if gen == 0 {
            return cert;
        }
        let pages = ram.size() / PAGE_SIZE;
        for b in blocks {
            let (_, vpn, host) = crate::chain::exec_tlb_expect(b, ram_base);
            if tlb.exec_host(vpn) == Some(host) && !cert.pages.contains(&(vpn, host)) {
                cert.pages.push((vpn, host));
            }
            for (page, word) in b.code_words() {
                if page < pages
                    && ram.code_word(page) == word
                    && !cert.words.contains(&(page, word))
                {
                    cert.words.push((page, word));
                }
            }
        }
        cert
    }

    /// The generation a check of the execute TLB entry for `vpn` (host field `host`) and of
    /// the code `words` may compare with first, when all of them held at the compile.
    pub fn gen_for(
        &self,
        vpn: u64,
        host: u64,
        mut words: impl Iterator<Item = (u64, u32)>,
    ) -> Option<i32> {
        (self.gen != 0
            && self.pages.contains(&(vpn, host))
            && words.all(|w| self.words.contains(&w)))
        .then_some(self.gen as i32)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn epochs(exec: u64, code: u64) -> Epochs {
        Epochs { exec, code, ram: 0 }
    }

    #[test]
    fn a_generation_stands_for_one_set_of_epochs() {
        let mut g = Gens::new();
        let a = g.sync(epochs(1, 1));
        assert_eq!(a, 1);
        assert_eq!(g.sync(epochs(1, 1)), a);
        // Either epoch moving gives a new number.
        let b = g.sync(epochs(1, 2));
        let c = g.sync(epochs(2, 2));
        assert!(b != a && c != a && c != b);
        // Back to recent epochs: their number again (a round trip through the other set).
        assert_eq!(g.sync(epochs(1, 1)), a);
        assert_eq!(g.sync(epochs(2, 2)), c);
        // Epochs pushed out of the recent ones get a new number, never an old one.
        for k in 10..20 {
            g.sync(epochs(k, 0));
        }
        let again = g.sync(epochs(1, 1));
        assert!(again > c);
    }

    #[test]
    fn generations_stop_before_they_leave_an_immediate() {
        let mut g = Gens::new();
        g.next = i32::MAX as u32;
        assert_eq!(g.sync(epochs(1, 1)), i32::MAX as u32);
        assert_eq!(g.sync(epochs(2, 1)), 0);
        assert_eq!(g.sync(epochs(3, 1)), 0);
        // The last one handed out still stands for its epochs.
        assert_eq!(g.sync(epochs(1, 1)), i32::MAX as u32);
    }
}
