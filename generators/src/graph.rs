//! Graph types shared by every Skein crate.
//!
//! Vertex ids are `u64` globally ([`VertexId`]). Weights are IEEE-754 binary32 (`f32`),
//! as in the Graph500 SSSP kernel.

/// A global vertex id.
pub type VertexId = u64;

/// Edges as generated or loaded, in input order, as parallel arrays (struct of arrays).
///
/// Edge `k` is `(src[k], dst[k])` with weight `weights[k]` when the list is weighted.
/// Self-loops and repeated edges are kept exactly as given: an edge list is raw input,
/// and [`Csr`] construction decides what a traversal keeps.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct EdgeList {
    /// Number of vertices; every endpoint is `< num_vertices`.
    pub num_vertices: u64,
    /// First endpoint of each edge.
    pub src: Vec<VertexId>,
    /// Second endpoint of each edge.
    pub dst: Vec<VertexId>,
    /// Edge weights (`None` for an unweighted graph; kernels then use weight 1.0).
    pub weights: Option<Vec<f32>>,
}

impl EdgeList {
    /// Number of edges (self-loops and repeats included).
    pub fn len(&self) -> usize {
        self.src.len()
    }

    /// True when the list has no edges.
    pub fn is_empty(&self) -> bool {
        self.src.is_empty()
    }

    /// Weight of edge `k` (1.0 when unweighted).
    pub fn weight(&self, k: usize) -> f32 {
        self.weights.as_ref().map_or(1.0, |w| w[k])
    }
}

/// Compressed sparse row adjacency of an undirected graph.
///
/// Every input edge `{u, v}` with `u != v` is stored twice, as the arcs `u -> v` and
/// `v -> u`, each with the edge's weight. Self-loops are dropped (they never shorten a
/// path nor reach a new vertex); repeated edges are all kept with their own weights,
/// as the Graph500 reference does. So `num_arcs() == 2 * (input edges - self-loops)`.
///
/// Arcs of vertex `v` are `offsets[v] .. offsets[v + 1]` in `targets` and `weights`.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Csr {
    num_vertices: u64,
    offsets: Vec<u64>,
    targets: Vec<VertexId>,
    weights: Vec<f32>,
    weighted: bool,
}

/// Why [`Csr::from_parts`] refused its arrays.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum CsrError {
    /// `offsets` must have `num_vertices + 1` entries.
    #[error("offsets has {got} entries, expected num_vertices + 1 = {expected}")]
    OffsetsLength {
        /// Entries found.
        got: usize,
        /// Entries expected.
        expected: u64,
    },
    /// Offsets must start at 0, never decrease and end at `targets.len()`.
    #[error("offsets are not a valid prefix sum (at vertex {vertex})")]
    Offsets {
        /// First vertex where the rule fails.
        vertex: u64,
    },
    /// `weights` and `targets` must have the same length.
    #[error("{weights} weights for {targets} arcs")]
    WeightsLength {
        /// Number of weights.
        weights: usize,
        /// Number of arcs.
        targets: usize,
    },
    /// An arc target is not a vertex of the graph.
    #[error("arc {arc} points to vertex {target}, but the graph has {num_vertices} vertices")]
    Target {
        /// Index of the arc.
        arc: usize,
        /// Its target.
        target: u64,
        /// Vertex count.
        num_vertices: u64,
    },
    /// An edge list endpoint is not a vertex of the graph.
    #[error("edge {edge} has endpoint {vertex}, but the graph has {num_vertices} vertices")]
    Endpoint {
        /// Index of the edge.
        edge: usize,
        /// The offending endpoint.
        vertex: u64,
        /// Vertex count.
        num_vertices: u64,
    },
    /// The CSR would not fit in the available memory.
    #[error(transparent)]
    Memory(#[from] crate::memory::MemoryError),
    /// An edge list's arrays have different lengths.
    #[error(
        "edge list arrays differ in length: {src} sources, {dst} targets, weights {weights:?}"
    )]
    EdgeArrays {
        /// Length of `src`.
        src: usize,
        /// Length of `dst`.
        dst: usize,
        /// Length of `weights`, if any.
        weights: Option<usize>,
    },
}

impl Csr {
    /// Builds a CSR from raw arrays, checking every invariant.
    ///
    /// `weights: None` makes an unweighted graph (every arc weighs 1.0).
    pub fn from_parts(
        num_vertices: u64,
        offsets: Vec<u64>,
        targets: Vec<VertexId>,
        weights: Option<Vec<f32>>,
    ) -> Result<Csr, CsrError> {
        if offsets.len() as u64 != num_vertices + 1 {
            return Err(CsrError::OffsetsLength { got: offsets.len(), expected: num_vertices + 1 });
        }
        if offsets[0] != 0 {
            return Err(CsrError::Offsets { vertex: 0 });
        }
        if let Some(v) = offsets.windows(2).position(|w| w[0] > w[1]) {
            return Err(CsrError::Offsets { vertex: v as u64 });
        }
        if offsets[num_vertices as usize] != targets.len() as u64 {
            return Err(CsrError::Offsets { vertex: num_vertices });
        }
        if let Some(arc) = targets.iter().position(|&t| t >= num_vertices) {
            return Err(CsrError::Target { arc, target: targets[arc], num_vertices });
        }
        let weighted = weights.is_some();
        let weights = weights.unwrap_or_else(|| vec![1.0; targets.len()]);
        if weights.len() != targets.len() {
            return Err(CsrError::WeightsLength { weights: weights.len(), targets: targets.len() });
        }
        Ok(Csr { num_vertices, offsets, targets, weights, weighted })
    }

    /// Builds a CSR from arrays the caller has already checked (constructors in this crate).
    pub(crate) fn from_parts_unchecked(
        num_vertices: u64,
        offsets: Vec<u64>,
        targets: Vec<VertexId>,
        weights: Vec<f32>,
        weighted: bool,
    ) -> Csr {
        debug_assert_eq!(offsets.len() as u64, num_vertices + 1);
        debug_assert_eq!(targets.len(), weights.len());
        Csr { num_vertices, offsets, targets, weights, weighted }
    }

    /// Number of vertices.
    pub fn num_vertices(&self) -> u64 {
        self.num_vertices
    }

    /// Number of stored arcs (twice the undirected non-self-loop edges).
    pub fn num_arcs(&self) -> u64 {
        self.targets.len() as u64
    }

    /// Whether the graph came with weights (otherwise every weight is 1.0).
    pub fn is_weighted(&self) -> bool {
        self.weighted
    }

    /// Degree of `v` (arcs leaving it).
    #[inline]
    pub fn degree(&self, v: VertexId) -> u64 {
        self.offsets[v as usize + 1] - self.offsets[v as usize]
    }

    /// Neighbours of `v`.
    #[inline]
    pub fn neighbors(&self, v: VertexId) -> &[VertexId] {
        let (a, b) = self.range(v);
        &self.targets[a..b]
    }

    /// Weights of the arcs of `v`, parallel to [`Csr::neighbors`].
    #[inline]
    pub fn neighbor_weights(&self, v: VertexId) -> &[f32] {
        let (a, b) = self.range(v);
        &self.weights[a..b]
    }

    /// `(target, weight)` of every arc of `v`.
    #[inline]
    pub fn arcs(&self, v: VertexId) -> impl Iterator<Item = (VertexId, f32)> + '_ {
        self.neighbors(v).iter().copied().zip(self.neighbor_weights(v).iter().copied())
    }

    /// The offsets array (`num_vertices + 1` entries).
    pub fn offsets(&self) -> &[u64] {
        &self.offsets
    }

    /// All arc targets.
    pub fn targets(&self) -> &[VertexId] {
        &self.targets
    }

    /// All arc weights (1.0 each for an unweighted graph).
    pub fn weights(&self) -> &[f32] {
        &self.weights
    }

    /// Bytes held by the arrays (what "the CSR's size" means in memory reports).
    pub fn heap_bytes(&self) -> u64 {
        (self.offsets.len() * 8 + self.targets.len() * 8 + self.weights.len() * 4) as u64
    }

    #[inline]
    fn range(&self, v: VertexId) -> (usize, usize) {
        (self.offsets[v as usize] as usize, self.offsets[v as usize + 1] as usize)
    }
}
