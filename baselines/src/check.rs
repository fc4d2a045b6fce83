//! Input checks shared by every engine.

use rayon::prelude::*;
use skein_generators::{Csr, VertexId};

use crate::options::Options;
use crate::{BaselineError, Result};

/// Not empty, has arcs, vertex ids fit `u32` with `u32::MAX` left free as a sentinel.
pub(crate) fn graph(csr: &Csr) -> Result<()> {
    let vertices = csr.num_vertices();
    if vertices == 0 {
        return Err(BaselineError::EmptyGraph);
    }
    if vertices >= u64::from(u32::MAX) {
        return Err(BaselineError::TooManyVertices { vertices });
    }
    if csr.num_arcs() == 0 {
        return Err(BaselineError::NoEdges { vertices });
    }
    Ok(())
}

pub(crate) fn root(csr: &Csr, root: VertexId) -> Result<()> {
    if root >= csr.num_vertices() {
        return Err(BaselineError::RootOutOfRange { root, vertices: csr.num_vertices() });
    }
    Ok(())
}

/// Every weight finite and `>= 0` (`-0.0` included: it adds like `+0.0`); returns the
/// largest.
pub(crate) fn weights(csr: &Csr) -> Result<f32> {
    let bad = csr.weights().par_iter().position_first(|w| !(w.is_finite() && *w >= 0.0));
    let Some(arc) = bad else {
        return Ok(csr.weights().par_iter().copied().reduce(|| 0.0, f32::max));
    };
    let offsets = csr.offsets();
    // The source is the vertex whose arc range holds `arc`.
    let source = offsets.partition_point(|&o| o <= arc as u64) - 1;
    Err(BaselineError::BadWeight {
        source_vertex: source as VertexId,
        target: csr.targets()[arc],
        weight: csr.weights()[arc],
    })
}

pub(crate) fn options(options: &Options) -> Result<()> {
    if let Some(delta) = options.delta {
        if !(delta.is_finite() && delta > 0.0) {
            return Err(BaselineError::BadOption {
                name: "delta",
                value: delta.to_string(),
                expected: "a finite number > 0",
            });
        }
    }
    if options.beta == 0 {
        return Err(BaselineError::BadOption {
            name: "beta",
            value: "0".into(),
            expected: "an integer > 0",
        });
    }
    Ok(())
}
