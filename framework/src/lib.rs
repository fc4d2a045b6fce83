//! Skein's delegation runtime (work in progress: see issue 3).
