//! Graph kernels on Skein's delegation runtime (work in progress: see issue 5).
