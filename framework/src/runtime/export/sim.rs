//! A seeded simulation of reference counting across ranks (module docs, "Model checking and
//! simulation"): one owner rank and two or three importer ranks of one or two workers, in one
//! thread, over the real [`ExportTable`], [`Owner`] and [`Proxy`] and the real `issued`
//! counters. Handles move between ranks inside messages delivered in any order; requests are
//! queued per (client, owner) pair and served in order, at random moments; holders clone,
//! issue, export and drop at random. After every step the weight equation of invariant 5 is
//! checked, and every event checks what must hold at that moment.

use super::tests::Fake;
use super::*;
use crate::runtime::proxy::{Proxy, Release};
use crate::runtime::run_state::WorkerCounters;
use std::ptr::NonNull;

/// The owner's global worker id: worker 0 of rank 0.
const OWNER: usize = 0;
/// The run id the proxies count on (no real run has it).
const RUN: u32 = 0;
/// Small weights, so that grants and weight 1 happen within a few exports.
const W0_SIM: u64 = 64;
const HALVE_FROM: u64 = 16;
const GRANT_BELOW: u64 = 8;

/// Splitmix64: the simulation's seeded source of choices.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Uniform in `0..n` (`n > 0`).
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}

/// Who holds a local count on a proxy.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Holder {
    /// A handle on this worker of the rank.
    Worker(usize),
    /// An outstanding `Grant` request (it holds a count until its answer is applied).
    Grant,
}

struct SimProxy {
    ptr: NonNull<Proxy>,
    holders: Vec<Holder>,
    id: u64,
    /// Ranks the handle went through from the owner: 1 for a proxy made from an owner's
    /// export, one more per export from a proxy.
    hops: usize,
}

impl SimProxy {
    fn get(&self) -> &Proxy {
        // SAFETY: the simulation frees a proxy only when its last holder goes.
        unsafe { self.ptr.as_ref() }
    }
}

#[derive(Debug)]
enum Msg {
    /// A handle travelling to `to`.
    Handle { to: usize, slot: u32, gen: u32, weight: u64, hops: usize },
    /// A proxy's last drop on rank `from`.
    Release { from: usize, rel: Release },
    /// A grant request from proxy `proxy` of rank `from`.
    GrantAsk { from: usize, proxy: u64, slot: u32, gen: u32 },
    /// Its answer.
    GrantAnswer { to: usize, proxy: u64, weight: u64 },
    /// Weight of a handle received on the owner rank, posted to the trustee.
    OwnerReturn(OwnerReturn),
}

struct Sim {
    rng: Rng,
    ranks: usize,
    per_rank: usize,
    prop: Fake,
    table: Arc<ExportTable<Fake>>,
    owner: Owner<Fake>,
    /// Handles the program holds on the owner rank (each a local count).
    owner_handles: usize,
    /// Per importer rank (index = rank), its proxies.
    proxies: Vec<Vec<SimProxy>>,
    /// Per rank, its workers' counters (`issued` indexed by global id).
    counters: Vec<Vec<WorkerCounters>>,
    /// Per global client, the targets of its requests to the owner, in order.
    requests: Vec<VecDeque<(u32, u32)>>,
    /// Per global client, requests the owner has served.
    served: Vec<u64>,
    msgs: Vec<Msg>,
    next_proxy: u64,
    steps: usize,
    /// The broken variant: releases are scheduled without their snapshot of `issued`.
    no_snapshot: bool,
}

impl Sim {
    fn new(seed: u64, ranks: usize, per_rank: usize) -> Sim {
        let n = ranks * per_rank;
        let prop = Fake::new(OWNER);
        let (table, owner) = ExportTable::with_w0(OWNER, W0_SIM);
        Sim {
            rng: Rng(seed),
            ranks,
            per_rank,
            prop,
            table,
            owner,
            owner_handles: 1,
            proxies: (0..ranks).map(|_| Vec::new()).collect(),
            counters: (0..ranks)
                .map(|_| (0..per_rank).map(|_| WorkerCounters::new(n)).collect())
                .collect(),
            requests: (0..n).map(|_| VecDeque::new()).collect(),
            served: vec![0; n],
            msgs: Vec::new(),
            next_proxy: 0,
            steps: 0,
            no_snapshot: false,
        }
    }

    fn released(&self) -> bool {
        self.prop.released() > 0
    }

    /// Any weight outside `returned`, anywhere: proxies, messages, pending returns.
    fn weight_outstanding(&self) -> bool {
        self.proxies.iter().any(|r| !r.is_empty())
            || self.msgs.iter().any(|m| !matches!(m, Msg::GrantAsk { .. }))
            || self.owner.pending() > 0
    }

    /// The property was just freed: nothing may still reach it.
    fn check_free(&self) {
        assert_eq!(self.prop.released(), 1, "step {}: freed other than once", self.steps);
        assert_eq!(self.owner_handles, 0, "step {}: freed with a local handle", self.steps);
        assert!(
            !self.weight_outstanding(),
            "step {}: freed while weight is outstanding: {} proxies, messages {:?}, {} pending",
            self.steps,
            self.proxies.iter().map(Vec::len).sum::<usize>(),
            self.msgs,
            self.owner.pending()
        );
        assert!(
            self.requests.iter().all(VecDeque::is_empty),
            "step {}: freed with a request unserved",
            self.steps
        );
    }

    /// Invariant 5 for every live slot, and weight ≥ 1 everywhere.
    fn check_weights(&self) {
        let mut held: std::collections::HashMap<(u32, u32), u128> = Default::default();
        let mut add = |slot, gen, w: u64, what: &str| {
            assert!(w >= 1, "step {}: {what} holds weight 0", self.steps);
            *held.entry((slot, gen)).or_default() += u128::from(w);
        };
        for r in &self.proxies {
            for p in r {
                let (slot, gen) = p.get().target();
                add(slot, gen, p.get().weight(), "a proxy");
            }
        }
        for m in &self.msgs {
            match m {
                Msg::Handle { slot, gen, weight, .. } => add(*slot, *gen, *weight, "a handle"),
                Msg::Release { rel, .. } => add(rel.slot, rel.gen, rel.weight, "a release"),
                Msg::GrantAnswer { proxy, weight, .. } => {
                    let p = self.find_proxy(*proxy).expect("the grant's count keeps it");
                    let (slot, gen) = p.get().target();
                    add(slot, gen, *weight, "a grant answer");
                }
                Msg::OwnerReturn(r) => add(r.slot, r.gen, r.weight, "an owner return"),
                Msg::GrantAsk { .. } => {}
            }
        }
        for pr in &self.owner.pending {
            add(pr.slot, pr.gen, pr.weight, "a pending release");
        }
        let next = self.table.free.lock().unwrap().next as u32;
        for slot in 0..next {
            let e = self.table.entry(slot).unwrap();
            let s = e.state.load(Ordering::Relaxed);
            let gen = s as u32;
            let out = held.remove(&(slot, gen)).unwrap_or(0);
            if s & LIVE == 0 {
                assert_eq!(out, 0, "step {}: weight of free slot {slot}", self.steps);
                continue;
            }
            let (budget, returned) = self.owner.weights(slot, gen).unwrap();
            assert_eq!(
                budget,
                returned + out,
                "step {}: slot {slot}: budget != returned + outstanding",
                self.steps
            );
            assert!(out >= 1, "step {}: live slot {slot} with nothing outstanding", self.steps);
        }
        assert!(held.is_empty(), "step {}: weight of no live slot: {held:?}", self.steps);
    }

    fn find_proxy(&self, id: u64) -> Option<&SimProxy> {
        self.proxies.iter().flatten().find(|p| p.id == id)
    }

    fn locate(&self, id: u64) -> (usize, usize) {
        for (r, ps) in self.proxies.iter().enumerate() {
            if let Some(i) = ps.iter().position(|p| p.id == id) {
                return (r, i);
            }
        }
        panic!("proxy {id} is gone while a grant holds it");
    }

    /// Removes holder `h` of proxy `i` of rank `r` (the drop of its count).
    fn drop_holder(&mut self, r: usize, i: usize, h: usize) {
        self.proxies[r][i].holders.swap_remove(h);
        let ptr = self.proxies[r][i].ptr;
        // SAFETY: the holder's count, given up here; `ptr` is not used after the last one.
        let rel = unsafe { Proxy::drop_handle(ptr, &self.counters[r]) };
        assert_eq!(rel.is_some(), self.proxies[r][i].holders.is_empty());
        if let Some(rel) = rel {
            self.proxies[r].swap_remove(i);
            self.msgs.push(Msg::Release { from: r, rel });
        }
    }

    /// A handle leaves proxy `i` of rank `r` for rank `to`.
    fn export_from_proxy(&mut self, r: usize, i: usize, to: usize) {
        let p = &self.proxies[r][i];
        let (id, hops) = (p.id, p.hops + 1);
        let (out, grant) = match p.get().export_with(HALVE_FROM, GRANT_BELOW) {
            Ok(out) => (Some(out), out.grant),
            Err(needs) => (None, needs.grant),
        };
        if let Some(g) = grant {
            // The `Grant` request holds a count until its completion.
            crate::runtime::free::clone_ref(&self.proxies[r][i].get().head);
            self.proxies[r][i].holders.push(Holder::Grant);
            self.msgs.push(Msg::GrantAsk { from: r, proxy: id, slot: g.slot, gen: g.gen });
        }
        if let Some(out) = out {
            let (slot, gen, weight) = (out.slot, out.gen, out.weight);
            self.msgs.push(Msg::Handle { to, slot, gen, weight, hops });
        }
    }

    /// One holder of a handle on an importer rank acts.
    fn importer_step(&mut self, late: bool) {
        let r = 1 + self.rng.below(self.ranks - 1);
        if self.proxies[r].is_empty() {
            return;
        }
        let i = self.rng.below(self.proxies[r].len());
        let workers: Vec<usize> = (0..self.proxies[r][i].holders.len())
            .filter(|&h| self.proxies[r][i].holders[h] != Holder::Grant)
            .collect();
        if workers.is_empty() {
            return;
        }
        let h = workers[self.rng.below(workers.len())];
        let Holder::Worker(w) = self.proxies[r][i].holders[h] else { unreachable!() };
        let gid = r * self.per_rank + w;
        // Late in a run, holders mostly drop, so that the run ends.
        match if late { [0, 3, 3, 3][self.rng.below(4)] } else { self.rng.below(5) } {
            0 => {
                // A request, queued and counted as the runtime does.
                crate::sync::bump(&self.counters[r][w].issued[OWNER], 1);
                let target = self.proxies[r][i].get().target();
                self.requests[gid].push_back(target);
            }
            1 => {
                // Clone, and move the clone to a worker of the rank.
                crate::runtime::free::clone_ref(&self.proxies[r][i].get().head);
                let to = self.rng.below(self.per_rank);
                self.proxies[r][i].holders.push(Holder::Worker(to));
            }
            2 => {
                // To another rank, the owner's included.
                let mut to = self.rng.below(self.ranks - 1);
                if to >= r {
                    to += 1;
                }
                self.export_from_proxy(r, i, to);
            }
            _ => self.drop_holder(r, i, h),
        }
    }

    /// The program on the owner rank acts on one of its handles.
    fn owner_step(&mut self, late: bool) {
        if self.owner_handles == 0 {
            return;
        }
        match if late { 2 } else { [0, 0, 1, 2][self.rng.below(4)] } {
            0 => {
                let to = 1 + self.rng.below(self.ranks - 1);
                let e = self.table.export(self.prop).expect("export");
                assert_eq!(e.weight, W0_SIM);
                let (slot, gen, weight) = (e.slot, e.gen, e.weight);
                self.msgs.push(Msg::Handle { to, slot, gen, weight, hops: 1 });
            }
            1 => {
                crate::runtime::free::clone_ref(&self.prop.get().head);
                self.owner_handles += 1;
            }
            _ => {
                self.owner_handles -= 1;
                // SAFETY: the program's handle.
                if unsafe { self.prop.drop_ref() } {
                    self.prop.release_last();
                    self.check_free();
                }
            }
        }
    }

    /// A message arrives.
    fn deliver(&mut self) {
        if self.msgs.is_empty() {
            return;
        }
        let m = self.msgs.swap_remove(self.rng.below(self.msgs.len()));
        match m {
            Msg::Handle { to: 0, slot, gen, weight, .. } => {
                assert!(!self.released(), "a handle arrived at a freed property");
                // SAFETY: the message held `weight` of the slot.
                let (p, ret) = unsafe { self.table.receive_on_owner(slot, gen, weight) }
                    .expect("a handle's slot is live");
                assert_eq!(p.0, self.prop.0);
                self.owner_handles += 1;
                self.msgs.push(Msg::OwnerReturn(ret));
            }
            Msg::Handle { to, slot, gen, weight, hops } => {
                let n = self.ranks * self.per_rank;
                let ptr = Proxy::receive(OWNER, slot, gen, weight, RUN, n).expect("receive");
                let w = self.rng.below(self.per_rank);
                self.next_proxy += 1;
                let id = self.next_proxy;
                let holders = vec![Holder::Worker(w)];
                self.proxies[to].push(SimProxy { ptr, holders, id, hops });
            }
            Msg::Release { from, mut rel } => {
                if self.no_snapshot {
                    rel.issued = Box::new([]);
                }
                self.owner.schedule_release(rel, from * self.per_rank).expect("a good release");
            }
            Msg::GrantAsk { from, proxy, slot, gen } => {
                let weight = self.owner.grant(slot, gen).expect("a grant's slot is live");
                self.msgs.push(Msg::GrantAnswer { to: from, proxy, weight });
            }
            Msg::GrantAnswer { to, proxy, weight } => {
                let (r, i) = self.locate(proxy);
                assert_eq!(r, to);
                self.proxies[r][i].get().apply_grant(weight);
                let h = self.proxies[r][i].holders.iter().position(|&h| h == Holder::Grant);
                self.drop_holder(r, i, h.expect("the grant's holder"));
            }
            Msg::OwnerReturn(ret) => {
                let was = self.released();
                self.owner.apply_return(ret.slot, ret.gen, ret.weight).expect("a good return");
                if !was && self.released() {
                    self.check_free();
                }
            }
        }
    }

    /// The owner's trustee serves the next request of a client.
    fn serve(&mut self) {
        let waiting: Vec<usize> =
            (0..self.requests.len()).filter(|&c| !self.requests[c].is_empty()).collect();
        if waiting.is_empty() {
            return;
        }
        let c = waiting[self.rng.below(waiting.len())];
        let (slot, gen) = self.requests[c].pop_front().unwrap();
        assert!(!self.released(), "step {}: a request served after the free", self.steps);
        let p = self.owner.lookup(slot, gen).unwrap_or_else(|e| {
            panic!("step {}: a request served after its export slot was recycled: {e}", self.steps)
        });
        assert_eq!(p.0, self.prop.0);
        self.served[c] += 1;
    }

    fn process(&mut self) {
        let was = self.released();
        let served = self.served.clone();
        let done = self.owner.process(|c| served[c]);
        assert!(done.errors.is_empty(), "{:?}", done.errors);
        if !was && self.released() {
            self.check_free();
        }
    }

    fn step(&mut self, late: bool) {
        self.steps += 1;
        match self.rng.below(10) {
            0..=2 => self.importer_step(late),
            3 => self.owner_step(late),
            4..=6 => self.deliver(),
            7 | 8 => self.serve(),
            _ => self.process(),
        }
        assert!(self.prop.released() <= 1, "step {}: freed twice", self.steps);
        if !self.released() {
            self.check_weights();
        }
    }

    fn done(&self) -> bool {
        self.released()
            && !self.weight_outstanding()
            && self.msgs.is_empty()
            && self.requests.iter().all(VecDeque::is_empty)
    }
}

/// What a seed did, for the test's check that the cases of interest happened.
#[derive(Debug, Default, Clone, Copy)]
struct Seen {
    grants: usize,
    needs_grant: usize,
    three_hops: bool,
    waited: bool,
    steps: usize,
}

fn run(seed: u64, no_snapshot: bool) -> Seen {
    let mut rng = Rng(seed);
    let ranks = 3 + rng.below(2);
    let per_rank = 1 + rng.below(2);
    let mut sim = Sim::new(rng.next(), ranks, per_rank);
    sim.no_snapshot = no_snapshot;
    let mut seen = Seen::default();
    let busy = 200 + rng.below(400);
    let mut steps = 0;
    while !sim.done() {
        steps += 1;
        assert!(steps < 200_000, "seed {seed}: the run did not end");
        let pending_before = sim.owner.pending();
        sim.step(steps > busy);
        // Hard case 2: a release that had to wait for its requests.
        if sim.owner.pending() > 0 && pending_before > 0 {
            let served = sim.served.clone();
            if sim.owner.pending.iter().any(|pr| pr.targets.iter().any(|&(c, n)| served[c] < n)) {
                seen.waited = true;
            }
        }
        seen.grants = seen
            .grants
            .max(sim.msgs.iter().filter(|m| matches!(m, Msg::GrantAnswer { .. })).count());
        if sim.proxies.iter().flatten().any(|p| p.get().weight() == 1) {
            seen.needs_grant += 1;
        }
        if sim.proxies.iter().flatten().any(|p| p.hops >= 3) {
            seen.three_hops = true;
        }
    }
    assert_eq!(sim.prop.released(), 1, "seed {seed}: freed other than once");
    seen.steps = steps;
    assert_eq!(sim.owner.end_of_run(), 0, "seed {seed}: a slot outlived every handle");
    seen
}

#[test]
fn sim_handles_move_between_ranks_and_are_freed_exactly_once() {
    let mut total = Seen::default();
    for seed in 0..1000 {
        let s = run(seed, false);
        total.steps += s.steps;
        total.grants += s.grants;
        total.needs_grant += s.needs_grant;
        total.three_hops |= s.three_hops;
        total.waited |= s.waited;
    }
    // The interesting cases happen (the checks are not vacuous).
    assert!(total.grants > 0 && total.needs_grant > 0, "{total:?}");
    assert!(total.three_hops && total.waited, "{total:?}");
    assert!(total.steps > 1000 * 200, "{total:?}");
    eprintln!("{total:?}");
}

/// The broken variant: a release applied without its snapshot of `issued` lets the owner
/// free the property while requests issued before the drop are still queued (hard case 2).
#[test]
#[should_panic(expected = "served after")]
fn sim_release_without_snapshot_frees_before_the_requests() {
    for seed in 0..300 {
        run(seed, true);
    }
}
