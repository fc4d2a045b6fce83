//! The graph as every partition sees it while a kernel runs: the partitioning, the tag
//! encoding of vertices, and each partition's arcs in the layouts the kernels read
//! ([`crate::adjacency`]), each copied on first use. Trustees only read it.

use std::sync::{Arc, OnceLock};

use skein_generators::Csr;

use crate::adjacency::{self, Arc32, PartArcs, Tag, Tags, NO_TAG};
use crate::partition::Partitioning;

/// The graph as every partition sees it: the partitioning, the tag encoding and each
/// partition's arcs in the layouts the kernels read (each copied on first use).
///
/// Trustees only read it; each one touches the arcs of its own vertices, and an SSSP
/// trustee also the arcs into its partition that a [`crate::sssp::Scan`] names.
#[derive(Debug)]
pub(crate) struct GraphView {
    pub(crate) graph: Arc<Csr>,
    pub(crate) parts: Partitioning,
    pub(crate) tags: Tags,
    weighted: OnceLock<Vec<PartArcs<Arc32>>>,
    bare: OnceLock<Vec<PartArcs<Tag>>>,
}

impl GraphView {
    /// Partitions `graph` over `parts` parts; fails when the tags cannot encode it.
    pub(crate) fn new(graph: Arc<Csr>, parts: usize) -> Result<GraphView, String> {
        let parts = Partitioning::new(graph.num_vertices(), parts);
        let tags = Tags::new(&parts)?;
        Ok(GraphView { graph, parts, tags, weighted: OnceLock::new(), bare: OnceLock::new() })
    }

    /// Each partition's arcs with weights (SSSP), copied on the first call.
    pub(crate) fn weighted(&self) -> &[PartArcs<Arc32>] {
        self.weighted.get_or_init(|| adjacency::build(&self.graph, &self.parts, self.tags))
    }

    /// Each partition's arcs without weights (BFS), copied on the first call.
    pub(crate) fn bare(&self) -> &[PartArcs<Tag>] {
        self.bare.get_or_init(|| adjacency::build(&self.graph, &self.parts, self.tags))
    }

    /// The global id of `tag`, or `NO_PARENT` for [`NO_TAG`].
    pub(crate) fn global(&self, tag: Tag) -> u64 {
        if tag == NO_TAG {
            skein_generators::NO_PARENT
        } else {
            self.parts.global(self.tags.part(tag), self.tags.local(tag))
        }
    }

    /// Writes the global id of each of `tags` ([`GraphView::global`]) into `out`.
    pub(crate) fn write_globals(&self, tags: &[Tag], out: &mut [u64]) {
        assert_eq!(tags.len(), out.len());
        for (o, &t) in out.iter_mut().zip(tags) {
            *o = self.global(t);
        }
    }

    /// The tag of global vertex `v`.
    pub(crate) fn tag(&self, v: u64) -> Tag {
        let (p, l) = self.parts.locate(v);
        self.tags.tag(p, l)
    }
}
