//! A scratch folder for the integration tests, removed when dropped.
#![allow(dead_code)]

use std::fs;
use std::path::{Path, PathBuf};

/// A scratch folder of one test, unique to the test binary, the process and `name`,
/// removed when dropped.
pub(crate) struct Scratch(PathBuf);

impl Scratch {
    pub(crate) fn new(name: &str) -> Scratch {
        let dir = std::env::temp_dir().join(format!(
            "skein-{}-test-{}-{name}",
            env!("CARGO_CRATE_NAME"),
            std::process::id()
        ));
        let _ = fs::remove_dir_all(&dir);
        fs::create_dir_all(&dir).unwrap();
        Scratch(dir)
    }

    /// The folder itself.
    pub(crate) fn dir(&self) -> &Path {
        &self.0
    }

    pub(crate) fn path(&self, file: &str) -> PathBuf {
        self.0.join(file)
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(&self.0);
    }
}
