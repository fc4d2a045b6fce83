use super::tests::Rng;
use super::*;
use crate::sync::proto;
use std::cell::RefCell;

/// A fiber segment (running) or a parked fiber.
struct Fib {
    steps: u32,
    main: bool,
    /// `main` only: how many more times it calls `wait_quiescent`.
    phases: u32,
}

enum Kind {
    /// A delegated closure: spawns fibers on its trustee, maybe issues a request of its
    /// own; the completion on the client maybe spawns a fiber.
    Work { spawns: u32, nested: bool, then_spawn: bool },
    /// The detector's wake-up post from worker 0 of a rank to another worker of it: the
    /// first `count` waiters there, for the verdict of `detection`.
    Wake { count: u64, detection: u64 },
}

struct Msg {
    client: usize,
    trustee: usize,
    kind: Kind,
}

/// What a run of the simulation must show; the outcome of one seed.
pub(super) struct Setup {
    pub(super) seed: u64,
    pub(super) ranks: usize,
    pub(super) workers: usize,
    /// The detector's broken variant (wave 2 before the all-reduce).
    pub(super) early: bool,
    /// A fiber parks for good: the end must be reported as a deadlock.
    pub(super) park_forever: bool,
    /// The broken wake-up the tests must catch: a rank wakes every waiter it finds when it
    /// acts on a verdict, not only those the verdict's post counted (`Detector::waiters`).
    pub(super) wake_all: bool,
    /// Every poll holds a post back that would be wasted (`Post::UnlessWasted`, as the worker
    /// loop over the rings); else every poll posts (`Post::Yes`).
    pub(super) hold: bool,
}

struct World {
    rng: Rng,
    w: usize,
    counters: Vec<Arc<Vec<WorkerCounters>>>,
    running: Vec<Vec<Fib>>,
    /// Parked in `wait_quiescent`, in the order they parked, each with its place in the
    /// order of every park of the run (`parks`).
    waiting: Vec<Vec<(u64, Fib)>>,
    parks: u64,
    /// Per detection acted on, `parks` when the first rank acted on it: a waiter that
    /// parked later was not waiting in that quiescence, and must not be woken by it.
    first_acted: std::collections::HashMap<u64, u64>,
    /// The first waiter woken by a verdict it did not wait in.
    early_wake: Option<String>,
    requests: Vec<Msg>,
    responses: Vec<Msg>,
    /// The truth: tasks created and not finished, tasks ever created, gauges.
    live: u64,
    created: u64,
    parked: u64,
    waiters: u64,
    main_done: bool,
    /// The lanes' truth: what every served closure added (`skein::quiescent_add`).
    lanes: [u64; crate::QUIESCENT_LANES],
    /// Tasks the work may still create in this phase (main's wake-up renews it).
    budget: u64,
    /// How often a detector's read is preceded by worker steps (percent).
    interleave: usize,
    park_forever: bool,
    /// Max over ranks of `Detector::round` (updated after each poll), when the job last
    /// went quiet; `None` while it is not.
    quiet_at: Option<u64>,
    rounds: Vec<u64>,
}

const BUDGET: u64 = 60;

impl World {
    fn ctr(&self, gid: usize) -> &WorkerCounters {
        &self.counters[gid / self.w][gid % self.w]
    }

    fn gids(&self) -> usize {
        self.running.len()
    }

    fn create_fiber(&mut self, gid: usize, f: Fib) {
        proto::bump(&self.ctr(gid).created, 1);
        self.live += 1;
        self.created += 1;
        self.running[gid].push(f);
    }

    fn issue(&mut self, client: usize, trustee: usize, kind: Kind) {
        proto::bump(&self.ctr(client).issued[trustee], 1);
        self.live += 1;
        self.created += 1;
        self.requests.push(Msg { client, trustee, kind });
    }

    fn finish(&mut self, gid: usize) {
        proto::bump(&self.ctr(gid).finished, 1);
        self.live -= 1;
        if self.live == 0 {
            self.quiet_at = Some(self.rounds.iter().copied().max().unwrap_or(0));
        }
    }

    fn set(&self, c: &crate::sync::proto::AtomicU64, delta: i64) {
        proto::set(c, c.load(Ordering::Relaxed).wrapping_add_signed(delta));
    }

    /// Wakes the first `count` waiters of worker `gid` for the verdict of `detection`.
    fn wake(&mut self, gid: usize, count: u64, detection: u64) {
        let k = usize::try_from(count).unwrap_or(usize::MAX).min(self.waiting[gid].len());
        let woken: Vec<(u64, Fib)> = self.waiting[gid].drain(..k).collect();
        for (parked, mut f) in woken {
            if parked >= self.first_acted[&detection] && self.early_wake.is_none() {
                self.early_wake = Some(format!(
                    "worker {gid}: a waiter that parked after some rank acted on detection                      {detection} was woken by it"
                ));
            }
            if f.main {
                self.budget = BUDGET;
                f.steps = 1 + self.rng.below(6) as u32;
            }
            // `Worker::wake_parked`, then the waiter count (`wake_quiesce_waiters`).
            self.create_fiber(gid, f);
            self.set(&self.ctr(gid).parked, -1);
            self.set(&self.ctr(gid).quiesce_waiters, -1);
            self.parked -= 1;
            self.waiters -= 1;
        }
    }

    fn take_budget(&mut self) -> bool {
        let ok = self.budget > 0;
        self.budget = self.budget.saturating_sub(1);
        ok
    }

    /// One step of fiber `i` on worker `gid`.
    fn fiber_step(&mut self, gid: usize, i: usize) {
        let roll = self.rng.below(100);
        if self.running[gid][i].steps > 0 && self.take_budget() {
            self.running[gid][i].steps -= 1;
            match roll {
                0..=44 => {
                    let t = self.rng.below(self.gids());
                    let kind = Kind::Work {
                        spawns: self.rng.below(3) as u32,
                        nested: self.rng.below(100) < 20,
                        then_spawn: self.rng.below(100) < 20,
                    };
                    self.issue(gid, t, kind);
                }
                45..=69 => {
                    let steps = self.rng.below(5) as u32;
                    self.create_fiber(gid, Fib { steps, main: false, phases: 0 });
                }
                70..=77 if !self.running[gid][i].main => self.wait_quiescent(gid, i),
                78..=80 if self.park_forever && !self.running[gid][i].main => {
                    // Parks on something nobody will ever set.
                    self.park_forever = false;
                    self.running[gid].swap_remove(i);
                    self.set(&self.ctr(gid).parked, 1);
                    self.parked += 1;
                    self.finish(gid);
                }
                _ => {} // local computation
            }
            return;
        }
        let f = &mut self.running[gid][i];
        if f.main && f.phases > 0 {
            f.phases -= 1;
            self.wait_quiescent(gid, i);
        } else {
            if f.main {
                self.main_done = true;
            }
            self.running[gid].swap_remove(i);
            self.finish(gid);
        }
    }

    /// `Worker::wait_quiescent`: a waiter, parked (its segment finishes).
    fn wait_quiescent(&mut self, gid: usize, i: usize) {
        let f = self.running[gid].swap_remove(i);
        self.waiting[gid].push((self.parks, f));
        self.parks += 1;
        self.set(&self.ctr(gid).quiesce_waiters, 1);
        self.set(&self.ctr(gid).parked, 1);
        self.waiters += 1;
        self.parked += 1;
        self.finish(gid);
    }

    fn serve(&mut self, j: usize) {
        let m = self.requests.swap_remove(j);
        match m.kind {
            Kind::Work { spawns, nested, .. } => {
                // The closure counts what it applied (`Worker::add_to_lanes`: plain load and
                // Release store by its trustee), a lane picked at random.
                let (lane, v) = (self.rng.below(crate::QUIESCENT_LANES), self.rng.below(1000));
                let c = &self.ctr(m.trustee).lanes[lane];
                proto::set(c, c.load(Ordering::Relaxed) + v as u64);
                self.lanes[lane] += v as u64;
                // And sets one of its minimum lanes (`Worker::lower_min`), half the time.
                if self.rng.below(2) == 0 {
                    let (k, v) = (self.rng.below(crate::QUIESCENT_MINS), self.rng.below(1000));
                    proto::set(&self.ctr(m.trustee).mins[k], v as u64);
                }
                for _ in 0..spawns {
                    if self.take_budget() {
                        let steps = self.rng.below(4) as u32;
                        self.create_fiber(m.trustee, Fib { steps, main: false, phases: 0 });
                    }
                }
                if nested && self.take_budget() {
                    let t = self.rng.below(self.gids());
                    let kind = Kind::Work { spawns: 1, nested: false, then_spawn: false };
                    self.issue(m.trustee, t, kind);
                }
            }
            Kind::Wake { count, detection } => self.wake(m.trustee, count, detection),
        }
        // The response is sent after the closure returned (T2).
        self.responses.push(m);
    }

    fn complete(&mut self, j: usize) {
        let m = self.responses.swap_remove(j);
        if let Kind::Work { then_spawn: true, .. } = m.kind {
            if self.take_budget() {
                self.create_fiber(m.client, Fib { steps: 1, main: false, phases: 0 });
            }
        }
        self.finish(m.client);
    }

    /// Number of worker events available now.
    fn events(&self) -> usize {
        self.running.iter().map(Vec::len).sum::<usize>()
            + self.requests.len()
            + self.responses.len()
    }

    /// Runs one random worker event, if any.
    fn worker_event(&mut self) {
        let n = self.events();
        if n == 0 {
            return;
        }
        let mut k = self.rng.below(n);
        for gid in 0..self.gids() {
            if k < self.running[gid].len() {
                return self.fiber_step(gid, k);
            }
            k -= self.running[gid].len();
        }
        if k < self.requests.len() {
            return self.serve(k);
        }
        self.complete(k - self.requests.len())
    }

    /// Before each of a detector's counter reads: maybe some worker events.
    fn maybe_interleave(&mut self) {
        while self.rng.below(100) < self.interleave {
            self.worker_event();
        }
    }
}

/// A rank's counters as its detector reads them, one worker at a time, with worker events
/// of any rank slipped in between the reads.
struct Reader<'a> {
    world: &'a RefCell<World>,
    counters: Arc<Vec<WorkerCounters>>,
    rank: usize,
}

impl Reader<'_> {
    fn each<T>(&self, read: impl Fn(&WorkerCounters) -> T) -> Vec<T> {
        (0..self.counters.len())
            .map(|i| {
                self.world.borrow_mut().maybe_interleave();
                read(&self.counters[i])
            })
            .collect()
    }
}

impl RankCounters for Reader<'_> {
    fn finished(&self) -> u64 {
        self.each(worker_finished).into_iter().fold(0, u64::wrapping_add)
    }

    fn created(&self) -> u64 {
        self.each(worker_created).into_iter().fold(0, u64::wrapping_add)
    }

    fn gauges(&self) -> Gauges {
        let g = self.each(worker_gauges);
        Gauges {
            parked: g.iter().map(|g| g.parked).sum(),
            quiesce_waiters: g.iter().map(|g| g.quiesce_waiters).sum(),
            totals: g.iter().fold(crate::QuiescentTotals::default(), |a, g| a.combine(g.totals)),
            main_done: self.rank == 0 && self.world.borrow().main_done,
            aborted: false,
        }
    }

    fn waiters_each(&self, out: &mut Vec<u64>) {
        out.clear();
        out.extend(self.each(|c| c.quiesce_waiters.load(Ordering::Acquire)));
    }
}

/// What a correct run showed.
#[derive(Debug)]
pub(super) struct Outcome {
    pub(super) detections: u64,
    pub(super) wakes: u64,
    pub(super) tasks: u64,
    pub(super) deadlock: Option<(u64, bool)>,
    /// Posts held back (`Setup::hold`).
    pub(super) held: u64,
}

/// Runs the simulation of `s`; `Err` names the first property that failed.
pub(super) fn run(s: &Setup) -> Result<Outcome, String> {
    let mut rng = Rng(s.seed);
    let gids = s.ranks * s.workers;
    let world = RefCell::new(World {
        counters: (0..s.ranks)
            .map(|_| Arc::new((0..s.workers).map(|_| WorkerCounters::new(gids)).collect()))
            .collect(),
        running: (0..gids).map(|_| Vec::new()).collect(),
        waiting: (0..gids).map(|_| Vec::new()).collect(),
        parks: 0,
        first_acted: std::collections::HashMap::new(),
        early_wake: None,
        requests: Vec::new(),
        responses: Vec::new(),
        w: s.workers,
        live: 0,
        created: 0,
        parked: 0,
        waiters: 0,
        main_done: false,
        lanes: [0; crate::QUIESCENT_LANES],
        budget: BUDGET,
        interleave: rng.below(60),
        park_forever: s.park_forever,
        quiet_at: None,
        rounds: vec![0; s.ranks],
        rng: Rng(rng.next()),
    });
    // `Runtime::run`: main is created on worker 0 of rank 0 before anything runs.
    let phases = 1 + rng.below(3) as u32;
    world.borrow_mut().create_fiber(0, Fib { steps: 3, main: true, phases });
    let mut detectors: Vec<_> = ThreadsAllReduce::group(s.ranks)
        .into_iter()
        .map(|a| {
            let d = Detector::new(a);
            if s.early {
                d.with_wave2_before_all_reduce()
            } else {
                d
            }
        })
        .collect();
    // How often the scheduler polls a detector rather than a worker event, and each
    // rank's relative speed.
    let poll_percent = 5 + rng.below(60);
    let speed: Vec<usize> = (0..s.ranks).map(|_| 1 + rng.below(4)).collect();
    let mut verdicts: Vec<Vec<Verdict>> = vec![Vec::new(); s.ranks];
    let mut first: Vec<Verdict> = Vec::new();
    let mut stopped: Vec<Option<Option<(u64, bool)>>> = vec![None; s.ranks];
    let mut wakes = 0;
    for step in 0.. {
        if stopped.iter().all(Option::is_some) {
            break;
        }
        if step > 1_000_000 {
            return Err(format!("no end after {step} steps: {verdicts:?}"));
        }
        if let Some(e) = world.borrow().early_wake.clone() {
            return Err(e);
        }
        let worker_turn = world.borrow().events() > 0 && rng.below(100) >= poll_percent;
        if worker_turn {
            world.borrow_mut().worker_event();
            continue;
        }
        let r = rng.below(s.ranks);
        if stopped[r].is_some() || rng.below(4) >= speed[r] {
            continue;
        }
        let reader =
            Reader { world: &world, counters: world.borrow().counters[r].clone(), rank: r };
        let post = if s.hold { Post::UnlessWasted } else { Post::Yes };
        let v = detectors[r].step(&reader, post);
        world.borrow_mut().rounds[r] = detectors[r].round();
        let Some(v) = v else { continue };
        // (c) Agreement: every rank's k-th verdict is the first rank's k-th verdict.
        let k = verdicts[r].len();
        verdicts[r].push(v);
        if k < first.len() {
            if first[k] != v {
                return Err(format!("rank {r}: verdict {v:?}, another rank had {:?}", first[k]));
            }
        } else {
            first.push(v);
            // (a) The first rank to learn a positive verdict: the job is quiescent now
            // (nobody has acted on it yet), and the sums are the whole truth.
            if v.quiescent {
                let w = world.borrow();
                let truth = Gauges {
                    parked: w.parked,
                    quiesce_waiters: w.waiters,
                    totals: crate::QuiescentTotals {
                        sums: w.lanes,
                        // The minimum lanes as every worker holds them now.
                        mins: std::array::from_fn(|i| {
                            (0..w.gids())
                                .map(|g| w.ctr(g).mins[i].load(Ordering::Relaxed))
                                .fold(u64::MAX, u64::min)
                        }),
                    },
                    main_done: w.main_done,
                    aborted: false,
                };
                if w.live != 0 || v.created != w.created || v.gauges != truth {
                    return Err(format!(
                        "positive verdict {v:?} while {} task(s) are alive, {} created, \
                         gauges {truth:?}",
                        w.live, w.created
                    ));
                }
                // (b) Promptly: at most two detections after the one running when the
                // job went quiet.
                let q = w.quiet_at.expect("quiet");
                if v.detection > q + 2 {
                    return Err(format!(
                        "quiet since round {q}, detected only by detection {}",
                        v.detection
                    ));
                }
            }
        }
        match v.action() {
            Action::Continue => {}
            Action::WakeWaiters => {
                // This rank wakes its own: on worker 0 directly, elsewhere by a post.
                wakes += 1;
                let mut w = world.borrow_mut();
                w.quiet_at = None;
                let parks = w.parks;
                w.first_acted.entry(v.detection).or_insert(parks);
                // The waiters the verdict's post counted, worker by worker (the broken
                // variant: all of them).
                let counted = detectors[r].waiters().to_vec();
                let count = |i: usize| if s.wake_all { u64::MAX } else { counted[i] };
                let base = r * s.workers;
                w.wake(base, count(0), v.detection);
                for i in 1..s.workers {
                    if !w.waiting[base + i].is_empty() && count(i) > 0 {
                        let kind = Kind::Wake { count: count(i), detection: v.detection };
                        w.issue(base, base + i, kind);
                    }
                }
                if w.live == 0 {
                    // Nothing woken on this rank (its waiters were elsewhere).
                    w.quiet_at = Some(w.rounds.iter().copied().max().unwrap_or(0));
                }
            }
            Action::Stop { deadlock } => stopped[r] = Some(deadlock),
        }
    }
    let w = world.borrow();
    let deadlock = stopped[0].expect("stopped");
    if stopped.iter().any(|s| *s != Some(deadlock)) {
        return Err(format!("ranks stopped differently: {stopped:?}"));
    }
    if verdicts.iter().any(|v| v.len() != verdicts[0].len()) {
        return Err("ranks stopped after different numbers of verdicts".into());
    }
    if w.live != 0 || w.waiters != 0 || !w.main_done {
        return Err(format!("stopped with {} task(s) alive, {} waiter(s)", w.live, w.waiters));
    }
    let held = detectors.iter().map(Detector::held_count).sum();
    Ok(Outcome { detections: first.len() as u64, wakes, tasks: w.created, deadlock, held })
}
