//! Baselines Skein is measured against (work in progress: see issue 4).
