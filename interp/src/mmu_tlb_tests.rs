//! Tests of the software TLB: flushes, INVLPG and the occupancy bitmaps, against a brute-force
//! model of a direct-mapped TLB (random operation sequences from a fixed seed).

use super::*;
// The crate's fixed-seed xorshift64* test generator.
use crate::ops::mov::tests::Rng;

fn t(phys: u64, global: bool, page_bits: u8) -> Translation {
    Translation {
        phys_page: phys,
        page_bits,
        global,
        user_page: true,
        cacheable: true,
    }
}

const KINDS: [Access; 3] = [Access::Read, Access::Write, Access::Exec];

/// (tag, phys, meta) of a filled slot.
type Slot = Option<(u64, u64, u8)>;

impl Tlb {
    /// Every slot of the table for `a` in the user (`user`) or supervisor set.
    fn dump(&self, user: bool, a: Access) -> Vec<Slot> {
        let set = if user == self.user {
            &self.cur
        } else {
            &self.other
        };
        let tb = &set.tables[index(a)];
        (0..TLB_ENTRIES)
            .map(|s| {
                let e = tb.entries[s];
                (e.tag != u64::MAX).then_some((e.tag, e.phys(self.host_base), tb.meta[s]))
            })
            .collect()
    }

    /// Filled entries in all six tables.
    fn filled(&self) -> usize {
        [&self.cur, &self.other]
            .iter()
            .flat_map(|set| set.tables.iter())
            .map(|tb| {
                tb.occ
                    .iter()
                    .map(|w| w.count_ones() as usize)
                    .sum::<usize>()
            })
            .sum()
    }

    /// Assert the bitmap invariants of every table by a full scan.
    fn check_bitmaps(&self) {
        for set in [&self.cur, &self.other] {
            for tb in set.tables.iter() {
                for s in 0..TLB_ENTRIES {
                    let (w, b) = bit(s);
                    let filled = tb.entries[s].tag != u64::MAX;
                    assert_eq!(tb.occ[w] & b != 0, filled, "occupancy of slot {s}");
                    let large = filled && tb.meta[s] & META_SIZE != 0;
                    assert_eq!(tb.large[w] & b != 0, large, "large bit of slot {s}");
                    let global = filled && tb.meta[s] & META_GLOBAL != 0;
                    assert_eq!(tb.global[w] & b != 0, global, "global bit of slot {s}");
                    if !filled {
                        assert_eq!(tb.entries[s], EMPTY, "cleared slot {s}");
                    }
                }
                let bits: u32 = tb.occ.iter().map(|w| w.count_ones()).sum();
                assert_eq!(tb.filled, bits, "filled count");
            }
        }
    }
}

/// The reference: a direct-mapped TLB whose flushes scan every slot.
struct Model {
    /// [user set?][access][slot].
    tables: [[Vec<Slot>; 3]; 2],
    user: bool,
}

impl Model {
    fn new() -> Model {
        let empty = || vec![None; TLB_ENTRIES];
        Model {
            tables: [[empty(), empty(), empty()], [empty(), empty(), empty()]],
            user: false,
        }
    }

    fn insert(&mut self, lin: u64, a: Access, tr: &Translation) {
        let vpn = lin >> PAGE_SHIFT;
        let meta = (tr.page_bits - 12) | if tr.global { META_GLOBAL } else { 0 };
        let slot = vpn as usize % TLB_ENTRIES;
        let e = Some((vpn, tr.phys_page, meta));
        let set = &mut self.tables[self.user as usize];
        set[index(a)][slot] = e;
        // A write entry is always a copy of the read entry in its slot.
        match a {
            Access::Write => set[0][slot] = e,
            Access::Read if set[1][slot] != e => set[1][slot] = None,
            _ => {}
        }
    }

    fn retain(&mut self, tables: &[usize], keep: impl Fn(u64, u64, u8) -> bool) {
        for set in self.tables.iter_mut() {
            for &i in tables {
                for e in set[i].iter_mut() {
                    if let Some((tag, phys, meta)) = *e {
                        if !keep(tag, phys, meta) {
                            *e = None;
                        }
                    }
                }
            }
        }
    }

    fn invalidate_page(&mut self, lin: u64) {
        let vpn = lin >> PAGE_SHIFT;
        self.retain(&[0, 1, 2], |tag, _, meta| {
            let size = (meta & META_SIZE) as u32;
            tag != vpn && (size == 0 || (tag ^ vpn) >> size != 0)
        });
    }

    fn check(&self, tlb: &Tlb) {
        tlb.check_bitmaps();
        for user in [false, true] {
            for a in KINDS {
                let want = &self.tables[user as usize][index(a)];
                assert!(tlb.dump(user, a) == *want, "user {user} {a:?} differs");
            }
        }
        let n: usize = self.tables.iter().flatten().flatten().flatten().count();
        assert_eq!(tlb.filled(), n);
        for set in &self.tables {
            for (w, r) in set[1].iter().zip(&set[0]) {
                assert!(
                    w.is_none() || w == r,
                    "a write entry beside another read entry"
                );
            }
        }
    }
}

#[test]
fn fill_everything_then_flush_non_global_keeps_exactly_the_global_entries() {
    let mut tlb = Tlb::default();
    let n = TLB_ENTRIES as u64;
    for user in [false, true] {
        tlb.set_user(user);
        for a in KINDS {
            for v in 0..n {
                // A different linear page per set and for execute (same slot v; a write entry
                // is a copy of the read one), every third global.
                let vpn = v + n * (1 + (a == Access::Exec) as u64 + 3 * user as u64);
                tlb.insert_translation(vpn << 12, a, &t((vpn + 7) << 12, v % 3 == 0, 12));
            }
        }
    }
    assert_eq!(tlb.filled(), 6 * TLB_ENTRIES);
    tlb.check_bitmaps();
    tlb.flush_non_global();
    tlb.check_bitmaps();
    let globals = (0..n).filter(|v| v % 3 == 0).count();
    assert_eq!(tlb.filled(), 6 * globals);
    for user in [false, true] {
        tlb.set_user(user);
        for a in KINDS {
            for v in 0..n {
                let vpn = v + n * (1 + (a == Access::Exec) as u64 + 3 * user as u64);
                let want = (v % 3 == 0).then_some((vpn + 7) << 12);
                assert_eq!(tlb.lookup(vpn << 12, a), want, "{a:?} user {user} slot {v}");
            }
        }
    }
    tlb.flush();
    tlb.check_bitmaps();
    assert_eq!(tlb.filled(), 0);
    for user in [false, true] {
        tlb.set_user(user);
        for a in KINDS {
            assert!(tlb.dump(user, a).iter().all(Option::is_none));
        }
    }
}

#[test]
fn invalidate_page_drops_exactly_that_page() {
    let mut tlb = Tlb::default();
    let n = TLB_ENTRIES as u64;
    // Same slot, different pages in different tables: only the matching tag goes. (The
    // write fill replaces the read entry in its slot.)
    tlb.insert_translation(5 << 12, Access::Read, &t(0x1000, true, 12));
    tlb.insert_translation((5 + n) << 12, Access::Write, &t(0x2000, false, 12));
    tlb.insert_translation(5 << 12, Access::Exec, &t(0x3000, false, 12));
    tlb.insert_translation(6 << 12, Access::Read, &t(0x4000, false, 12));
    tlb.set_user(true);
    tlb.insert_translation(5 << 12, Access::Read, &t(0x5000, false, 12));
    tlb.set_user(false);
    tlb.invalidate_page((5 << 12) | 0xabc);
    tlb.check_bitmaps();
    assert_eq!(tlb.filled(), 3);
    assert_eq!(tlb.lookup(5 << 12, Access::Read), None);
    assert_eq!(tlb.lookup(5 << 12, Access::Exec), None);
    assert_eq!(tlb.lookup((5 + n) << 12, Access::Write), Some(0x2000));
    assert_eq!(tlb.lookup((5 + n) << 12, Access::Read), Some(0x2000));
    assert_eq!(tlb.lookup(6 << 12, Access::Read), Some(0x4000));
    tlb.set_user(true);
    assert_eq!(tlb.lookup(5 << 12, Access::Read), None);
}

#[test]
fn invalidate_page_of_a_large_page_spares_its_neighbours() {
    let mut tlb = Tlb::default();
    // Pieces of the 2 MiB page at 0x20_0000 in far-apart slots, and of the next one.
    for vpn in [0x200u64, 0x3ff, 0x2ff] {
        tlb.insert_translation(vpn << 12, Access::Read, &t(vpn << 12, false, 21));
    }
    tlb.insert_translation(0x400 << 12, Access::Read, &t(0x400 << 12, false, 21));
    // A 4 KiB entry replacing a large one clears that slot's large bit.
    tlb.insert_translation(0x2ff << 12, Access::Read, &t(0x9000, false, 12));
    tlb.check_bitmaps();
    tlb.invalidate_page(0x2a_b000);
    tlb.check_bitmaps();
    assert_eq!(tlb.lookup(0x200 << 12, Access::Read), None);
    assert_eq!(tlb.lookup(0x3ff << 12, Access::Read), None);
    assert_eq!(tlb.lookup(0x2ff << 12, Access::Read), Some(0x9000));
    assert_eq!(tlb.lookup(0x400 << 12, Access::Read), Some(0x400 << 12));
}

#[test]
fn flush_writes_to_drops_only_write_entries_of_that_frame() {
    let mut tlb = Tlb::default();
    tlb.insert(0x1000, Access::Write, 0x8000);
    tlb.insert(0x2000, Access::Write, 0x8000);
    tlb.insert(0x3000, Access::Write, 0x9000);
    tlb.insert(0x1000, Access::Read, 0x8000);
    // Each write fill filled its read slot too.
    assert_eq!(tlb.filled(), 6);
    tlb.flush_writes_to(0x8000);
    tlb.check_bitmaps();
    assert_eq!(tlb.filled(), 4);
    assert_eq!(tlb.lookup(0x3000, Access::Write), Some(0x9000));
    assert_eq!(tlb.lookup(0x1000, Access::Read), Some(0x8000));
    assert_eq!(tlb.lookup(0x2000, Access::Read), Some(0x8000));
    tlb.drop_write_entries();
    tlb.check_bitmaps();
    assert_eq!(tlb.filled(), 3);
    assert_eq!(tlb.lookup(0x1000, Access::Read), Some(0x8000));
}

/// The `host` field of the entry for `lin` in the current set's table for `a`, as the JIT
/// reads it.
fn raw_host(tlb: &Tlb, lin: u64, a: Access) -> u64 {
    let slot = ((lin >> PAGE_SHIFT) as usize) & (TLB_ENTRIES - 1);
    // SAFETY: the table has TLB_ENTRIES entries of two u64 words; `slot` is below that.
    unsafe { *tlb.raw_table(a).add(slot * 2 + 1) }
}

#[test]
fn entries_follow_the_host_base_and_keep_their_physical_pages() {
    let mut tlb = Tlb::default();
    tlb.set_host_base(0x7000_0000_0000);
    tlb.insert(0x1000, Access::Read, 0x8000);
    tlb.insert(0x5000, Access::Write, 0x9000);
    assert_eq!(
        raw_host(&tlb, 0x1000, Access::Read),
        0x7000_0000_0000 + 0x8000 - 0x1000
    );
    // A new base moves every filled entry; lookups and flushes by frame see the same pages.
    tlb.set_host_base(0x5555_0000_0000);
    assert_eq!(
        raw_host(&tlb, 0x1000, Access::Read),
        0x5555_0000_0000 + 0x7000
    );
    assert_eq!(
        raw_host(&tlb, 0x5000, Access::Write),
        0x5555_0000_0000 + 0x4000
    );
    assert_eq!(tlb.lookup(0x1abc, Access::Read), Some(0x8000));
    assert_eq!(tlb.lookup(0x5000, Access::Write), Some(0x9000));
    tlb.flush_writes_to(0x9000);
    assert_eq!(tlb.lookup(0x5000, Access::Write), None);
    assert_eq!(tlb.lookup(0x1000, Access::Read), Some(0x8000));
}

#[test]
fn random_sequences_match_a_brute_force_model() {
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    let n = TLB_ENTRIES as u64;
    for round in 0..20 {
        let mut tlb = Tlb::default();
        let mut model = Model::new();
        // Pages from a range three times the table size, so slots collide.
        let span = 3 * n;
        for step in 0..4000 {
            let lin = (rng.below(span) << 12) | rng.below(0x1000);
            match rng.below(100) {
                0..=69 => {
                    let a = KINDS[rng.below(3) as usize];
                    let page_bits = match rng.below(8) {
                        0 => 21,
                        1 if round % 2 == 0 => 22,
                        _ => 12,
                    };
                    let tr = t(rng.below(64) << 12, rng.below(4) == 0, page_bits);
                    tlb.insert_translation(lin, a, &tr);
                    model.insert(lin, a, &tr);
                }
                70..=81 => {
                    tlb.invalidate_page(lin);
                    model.invalidate_page(lin);
                }
                82..=84 => {
                    // A range of up to 16 pages: every read and write entry goes, the
                    // execute entries of pages in it (of a large page overlapping it).
                    let (lo, hi) = (lin >> PAGE_SHIFT, (lin >> PAGE_SHIFT) + rng.below(16) + 1);
                    tlb.invalidate_range(lo << PAGE_SHIFT, hi << PAGE_SHIFT);
                    model.retain(&[0, 1], |_, _, _| false);
                    model.retain(&[2], |tag, _, meta| {
                        let size = (meta & META_SIZE) as u32;
                        let first = tag >> size << size;
                        first + (1 << size) <= lo || first >= hi
                    });
                }
                85..=89 => {
                    let user = rng.below(2) == 0;
                    tlb.set_user(user);
                    model.user = user;
                }
                90..=94 => {
                    let p = rng.below(64) << 12;
                    tlb.flush_writes_to(p);
                    model.retain(&[1], |_, phys, _| phys != p);
                }
                95..=98 => {
                    tlb.flush_non_global();
                    model.retain(&[0, 1, 2], |_, _, meta| meta & META_GLOBAL != 0);
                }
                _ => {
                    tlb.flush();
                    model.retain(&[0, 1, 2], |_, _, _| false);
                }
            }
            if step % 97 == 0 {
                model.check(&tlb);
            }
        }
        model.check(&tlb);
    }
}

#[test]
fn version_moves_with_every_change_and_copy_from_restores_in_place() {
    let mut a = Tlb::default();
    let v = a.version();
    // No new version: a write translation, and dropping write entries, while write entries
    // are step-local (`--verify` drops them itself), beside the same read translation; a set
    // switch to the set already current.
    a.set_step_local_writes(true);
    assert_ne!(a.version(), v);
    a.insert_translation(0x5000, Access::Read, &t(0x9000, false, 12));
    let v1 = a.version();
    a.insert_translation(0x5000, Access::Write, &t(0x9000, false, 12));
    assert_eq!(a.lookup(0x5000, Access::Write), Some(0x9000));
    a.drop_write_entries();
    assert_eq!(a.lookup(0x5000, Access::Write), None);
    a.set_user(a.is_user());
    assert_eq!(a.version(), v1);
    a.set_step_local_writes(false);
    let snap = a.clone();
    let table = a.raw_table(Access::Read);
    let mut seen = vec![a.version()];
    let mut step = |a: &mut Tlb, f: &dyn Fn(&mut Tlb)| {
        f(a);
        assert!(!seen.contains(&a.version()), "version did not move");
        seen.push(a.version());
    };
    step(&mut a, &|a| a.insert(0x7000, Access::Read, 0x3000));
    step(&mut a, &|a| {
        a.insert_translation(0x20_0000, Access::Exec, &t(0x40_0000, true, 21))
    });
    step(&mut a, &|a| a.set_user(!a.is_user()));
    step(&mut a, &|a| a.set_user(!a.is_user()));
    step(&mut a, &|a| a.invalidate_page(0x7000));
    step(&mut a, &|a| a.flush_writes_to(0x3000));
    step(&mut a, &|a| a.insert(0x9000, Access::Write, 0x2000));
    step(&mut a, &|a| a.drop_write_entries());
    step(&mut a, &|a| a.flush_non_global());
    step(&mut a, &|a| a.set_pdptes(Some([1, 2, 3, 4])));
    step(&mut a, &|a| a.flush());
    // Put it back: same contents and version, the same table addresses.
    a.insert(0x8000, Access::Read, 0x1000);
    a.copy_from(&snap);
    assert_eq!(a.version(), snap.version());
    assert_eq!(a.raw_table(Access::Read), table);
    for user in [false, true] {
        for k in KINDS {
            assert_eq!(a.dump(user, k), snap.dump(user, k));
        }
    }
    assert_eq!(a.lookup(0x8000, Access::Read), None);
    assert_eq!(a.pdptes(), snap.pdptes());
}

/// `copy_from` visits only filled slots: over random pairs of TLBs (each with its own fills
/// and flushes), the copy equals the source slot for slot, bitmaps included, and goes on
/// behaving like it.
#[test]
fn copy_from_random_tlbs_gives_the_source_slot_for_slot() {
    let mut rng = Rng(0x2545_f491_4f6c_dd1d);
    let n = TLB_ENTRIES as u64;
    let fill = |tlb: &mut Tlb, rng: &mut Rng, steps: usize| {
        for _ in 0..steps {
            let lin = (rng.below(3 * n) << 12) | rng.below(0x1000);
            match rng.below(20) {
                0 => tlb.flush_non_global(),
                1 => tlb.invalidate_page(lin),
                2 => tlb.set_user(rng.below(2) == 0),
                _ => {
                    let a = KINDS[rng.below(3) as usize];
                    let bits = if rng.below(8) == 0 { 21 } else { 12 };
                    tlb.insert_translation(
                        lin,
                        a,
                        &t(rng.below(64) << 12, rng.below(4) == 0, bits),
                    );
                }
            }
        }
    };
    for round in 0..12 {
        let (mut src, mut dst) = (Tlb::default(), Tlb::default());
        fill(&mut src, &mut rng, 300 + 400 * round);
        fill(&mut dst, &mut rng, 3000 - 200 * round);
        dst.copy_from(&src);
        dst.check_bitmaps();
        for user in [false, true] {
            for k in KINDS {
                assert_eq!(dst.dump(user, k), src.dump(user, k), "round {round}");
            }
        }
        assert_eq!(dst.filled(), src.filled());
        // The same operations afterwards keep them equal.
        let mut r2 = Rng(rng.0);
        fill(&mut src, &mut rng, 500);
        fill(&mut dst, &mut r2, 500);
        for user in [false, true] {
            for k in KINDS {
                assert_eq!(dst.dump(user, k), src.dump(user, k), "round {round}, after");
            }
        }
    }
}

/// The execute-lookup shortcut ([`Tlb::exec_hit_epoch`] / [`Tlb::exec_epoch_holds`]) over
/// random operation sequences: whenever it says a remembered lookup still holds, the lookup
/// gives exactly what it gave then (and it is seen holding, not merely safe).
#[test]
fn exec_shortcuts_hold_only_while_the_lookup_is_the_same() {
    let mut rng = Rng(0x2545_f491_4f6c_dd1d);
    let n = TLB_ENTRIES as u64;
    let mut epoch_held = 0u64;
    for _round in 0..10 {
        let mut tlb = Tlb::default();
        // (lin, lookup result, epoch) of remembered hits.
        let mut seen: Vec<(u64, Option<u64>, u64)> = Vec::new();
        let span = 3 * n;
        for _step in 0..3000 {
            let lin = (rng.below(span) << 12) | rng.below(0x1000);
            match rng.below(100) {
                0..=59 => {
                    let a = KINDS[rng.below(3) as usize];
                    let page_bits = if rng.below(10) == 0 { 21 } else { 12 };
                    let tr = t(rng.below(64) << 12, rng.below(3) == 0, page_bits);
                    tlb.insert_translation(lin, a, &tr);
                }
                60..=66 => tlb.invalidate_page(lin),
                67..=69 => {
                    tlb.invalidate_range(lin & !0xfff, (lin & !0xfff) + (rng.below(8) << 12))
                }
                70..=84 => tlb.set_user(rng.below(2) == 0),
                85..=94 => tlb.flush_non_global(),
                95 => tlb.flush(),
                _ => {}
            }
            // Remember a hit now and then.
            if let Some(e) = tlb.exec_hit_epoch(lin) {
                seen.push((lin, tlb.lookup(lin, Access::Exec), e));
                if seen.len() > 64 {
                    seen.remove(0);
                }
            }
            for &(l, then, epoch) in &seen {
                if tlb.exec_epoch_holds(epoch) {
                    let now = tlb.lookup(l, Access::Exec);
                    assert_eq!(now, then, "epoch held for {l:#x} but the lookup changed");
                    epoch_held += 1;
                }
            }
        }
    }
    assert!(epoch_held > 1000, "{epoch_held}");
}

/// `invalidate_range`: every read and write translation goes, execute ones only in the
/// range, and the execute epochs move only when one of those went.
#[test]
fn invalidate_range_keeps_execute_entries_outside_it() {
    let mut tlb = Tlb::default();
    tlb.insert_translation(0x40_0000, Access::Exec, &t(0x5000, false, 12));
    tlb.insert_translation(0x50_0000, Access::Read, &t(0x6000, false, 12));
    tlb.insert_translation(0x90_0000, Access::Write, &t(0x7000, false, 12));
    let epoch = tlb.exec_hit_epoch(0x40_0000).unwrap();
    tlb.invalidate_range(0x50_0000, 0x60_0000);
    assert_eq!(tlb.lookup(0x50_0000, Access::Read), None);
    // (A data entry outside the range goes too: the tables are cleared whole.)
    assert_eq!(tlb.lookup(0x90_0000, Access::Write), None);
    assert_eq!(tlb.lookup(0x40_0000, Access::Exec), Some(0x5000));
    assert!(tlb.exec_epoch_holds(epoch));
    // The end is exclusive; the next range holds the page.
    tlb.invalidate_range(0x3f_0000, 0x40_0000);
    assert!(tlb.exec_epoch_holds(epoch));
    tlb.invalidate_range(0x40_0000, 0x40_1000);
    assert_eq!(tlb.lookup(0x40_0000, Access::Exec), None);
    assert!(!tlb.exec_epoch_holds(epoch));
    // A large execute entry overlapping the range goes.
    tlb.insert_translation(0x80_0000, Access::Exec, &t(0x20_0000, false, 21));
    tlb.invalidate_range(0x9f_f000, 0xa0_1000);
    assert_eq!(tlb.lookup(0x80_0000, Access::Exec), None);
}

#[test]
fn exec_epochs_survive_what_cannot_change_a_hit() {
    let mut tlb = Tlb::default();
    tlb.insert_translation(0x40_0000, Access::Exec, &t(0x5000, false, 12));
    tlb.insert_translation(0x80_0000, Access::Exec, &t(0x6000, true, 12));
    let local = tlb.exec_hit_epoch(0x40_0000).unwrap();
    let global = tlb.exec_hit_epoch(0x80_0000).unwrap();
    assert_ne!(local, global);
    // A privilege round trip: the other set has its own epochs.
    tlb.set_user(true);
    assert!(!tlb.exec_epoch_holds(local) && !tlb.exec_epoch_holds(global));
    tlb.set_user(false);
    assert!(tlb.exec_epoch_holds(local) && tlb.exec_epoch_holds(global));
    // A fill into an empty slot, and a refill with the same entry.
    tlb.insert_translation(0x40_1000, Access::Exec, &t(0x7000, false, 12));
    tlb.insert_translation(0x40_0000, Access::Exec, &t(0x5000, false, 12));
    assert!(tlb.exec_epoch_holds(local) && tlb.exec_epoch_holds(global));
    // INVLPG of a page with no execute entry (only read), in either set.
    tlb.insert_translation(0x50_0000, Access::Read, &t(0x9000, false, 12));
    tlb.invalidate_page(0x50_0000);
    tlb.invalidate_page(0x60_0000);
    assert!(tlb.exec_epoch_holds(local) && tlb.exec_epoch_holds(global));
    assert_eq!(tlb.lookup(0x50_0000, Access::Read), None);
    // INVLPG of a page run from moves both.
    tlb.invalidate_page(0x40_1000);
    assert!(!tlb.exec_epoch_holds(local) && !tlb.exec_epoch_holds(global));
    let local = tlb.exec_hit_epoch(0x40_0000).unwrap();
    let global = tlb.exec_hit_epoch(0x80_0000).unwrap();
    // A CR3 write keeps global entries.
    tlb.flush_non_global();
    assert!(!tlb.exec_epoch_holds(local) && tlb.exec_epoch_holds(global));
    // Evicting a global entry moves the global epoch.
    let other = 0x80_0000 + ((TLB_ENTRIES as u64) << 12);
    tlb.insert_translation(other, Access::Exec, &t(0x8000, true, 12));
    assert!(!tlb.exec_epoch_holds(global));
    assert_eq!(tlb.lookup(0x80_0000, Access::Exec), None);
}

/// A write entry is always a copy of the read entry in its slot: a write fill fills the read
/// slot, a read fill of another translation drops the write entry, and `set_write_entries`
/// puts back only entries whose read copy is there.
#[test]
fn write_entries_live_only_beside_the_same_read_entry() {
    let n = TLB_ENTRIES as u64;
    let mut tlb = Tlb::default();
    tlb.insert_translation(0x5000, Access::Write, &t(0x9000, true, 12));
    assert_eq!(tlb.lookup(0x5000, Access::Read), Some(0x9000));
    assert_eq!(tlb.filled(), 2);
    // The same translation again for a read keeps the write entry; another one drops it.
    tlb.insert_translation(0x5000, Access::Read, &t(0x9000, true, 12));
    assert_eq!(tlb.lookup(0x5000, Access::Write), Some(0x9000));
    let list = tlb.write_entries(4).unwrap();
    tlb.insert_translation(0x5000, Access::Read, &t(0xa000, true, 12));
    assert_eq!(tlb.lookup(0x5000, Access::Write), None);
    tlb.insert_translation(0x5000, Access::Write, &t(0x9000, true, 12));
    tlb.insert_translation((5 + n) << 12, Access::Read, &t(0x9000, true, 12));
    assert_eq!(tlb.lookup(0x5000, Access::Write), None);
    tlb.check_bitmaps();
    // Put back beside another read entry: left out; beside its own: put back.
    tlb.set_write_entries(&list);
    assert_eq!(tlb.lookup(0x5000, Access::Write), None);
    tlb.insert_translation(0x5000, Access::Read, &t(0x9000, true, 12));
    tlb.set_write_entries(&list);
    assert_eq!(tlb.lookup(0x5000, Access::Write), Some(0x9000));
    tlb.check_bitmaps();
}
