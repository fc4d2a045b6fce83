//! The baselines' tuning knobs ([`Options`]) and their defaults: the delta-stepping bucket
//! width and the direction-optimizing BFS switches.

/// Default delta-stepping bucket width, as a fraction of the graph's largest weight: for
/// Graph500 Kronecker weights (uniform in `[0, 1)`) it is the bucket width itself.
///
/// Chosen by timing 2 threads on Kronecker graphs, edgefactor 16, Graph500 roots
/// (`skein sssp --engine rayon -t 2 --delta D`). Harmonic-mean MTEPS at SCALE 20 (16
/// roots): delta 0.0003: 67, 0.0005: 80, 0.0007: 82, 0.001: 73, 0.002: 71, 0.003: 62; at
/// SCALE 22 (6 roots): 0.0002: 50, 0.0004: 51, 0.0007: 49-53, 0.001: 49, 0.002: 42,
/// 0.005: 32, 0.015: 24. Narrow buckets cost rounds (each one barrier) but with bucket
/// fusion and lazy deletion they keep a vertex from relaxing its arcs more than about
/// once; wide buckets let later, better distances redo whole adjacency scans. GAP's
/// Δ = 1–2 for integer weights 1–255 is 0.004–0.008 of the largest weight; binary32
/// weights in `[0, 1)` have no integer granularity, and narrower buckets measured faster.
/// Scaling by the largest weight keeps the number of buckets (largest distance / delta)
/// the same for a graph whose weights are the Kronecker ones times a constant, and keeps
/// every key a relaxation produces within `1 / 0.0007 + 1` buckets of the current one, the
/// window the bucket queues are sized for (see [`skein_buckets`]). See [`default_delta`].
pub const DEFAULT_RELATIVE_DELTA: f32 = 0.0007;

/// The default delta-stepping bucket width of the rayon engine for a graph whose largest
/// weight is `max_weight`: [`relative_delta`]`(`[`DEFAULT_RELATIVE_DELTA`]`, max_weight)`,
/// so 0.0007 for Graph500 weights (uniform in `[0, 1)`) and for an unweighted graph
/// (weights 1), and 70 for integer weights up to 100000. The delegation engine of
/// `skein-algorithms` applies the same rule with its own constant
/// (`skein_algorithms::default_delta`).
pub fn default_delta(max_weight: f32) -> f32 {
    relative_delta(DEFAULT_RELATIVE_DELTA, max_weight)
}

pub use skein_buckets::relative_delta;

/// Default direction-optimizing BFS switching parameter alpha (top-down to bottom-up when
/// the frontier's arcs exceed the unexplored arcs divided by alpha), as in GAP.
pub const DEFAULT_ALPHA: u64 = 15;

/// Default direction-optimizing BFS parameter beta (bottom-up back to top-down when the
/// frontier shrinks below `vertices / beta`), as in GAP.
pub const DEFAULT_BETA: u64 = 18;

/// Tuning knobs. `Options::default()` is what the benchmarks use.
#[derive(Debug, Clone, PartialEq)]
pub struct Options {
    /// Threads of the rayon engine (0: rayon's default, the number of CPUs). Ignored by
    /// [`Engine::Seq`](crate::Engine::Seq).
    pub threads: usize,
    /// Delta-stepping bucket width (`None`: [`default_delta`] of the largest weight). Must
    /// be finite and > 0 (subnormals are accepted).
    pub delta: Option<f32>,
    /// Direction-optimizing BFS alpha ([`DEFAULT_ALPHA`]); 0: never bottom-up.
    pub alpha: u64,
    /// Direction-optimizing BFS beta ([`DEFAULT_BETA`]). Must be > 0.
    pub beta: u64,
}

impl Default for Options {
    fn default() -> Options {
        Options { threads: 0, delta: None, alpha: DEFAULT_ALPHA, beta: DEFAULT_BETA }
    }
}

impl Options {
    /// The options with `threads` threads.
    pub fn with_threads(threads: usize) -> Options {
        Options { threads, ..Options::default() }
    }

    /// The bucket width for a graph whose largest weight is `max_weight`.
    pub fn delta_for(&self, max_weight: f32) -> f32 {
        self.delta.unwrap_or_else(|| default_delta(max_weight))
    }
}
