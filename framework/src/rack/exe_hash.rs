//! The fingerprint of an executable file, compared between ranks by the bootstrap.
//!
//! SipHash-1-3 with fixed keys (`DefaultHasher::new()`) over the file's bytes, plus its length.
//! Not cryptographic: it tells builds apart, it does not defend against an adversary (who could
//! run any code on the rack anyway).

use std::collections::hash_map::DefaultHasher;
use std::hash::Hasher;
use std::io::Read;
use std::path::Path;

/// Length and hash of a file's content.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Fingerprint {
    pub(super) len: u64,
    pub(super) hash: u64,
}

/// The fingerprint of the running executable (`/proc/self/exe` on Linux).
pub(super) fn own_executable() -> Result<Fingerprint, String> {
    #[cfg(target_os = "linux")]
    let path = std::path::PathBuf::from("/proc/self/exe");
    #[cfg(not(target_os = "linux"))]
    let path = std::env::current_exe().map_err(|e| format!("cannot find own executable: {e}"))?;
    of_file(&path)
}

/// The fingerprint of the file at `path`, read in blocks of 1 MiB.
pub(super) fn of_file(path: &Path) -> Result<Fingerprint, String> {
    let mut f = std::fs::File::open(path)
        .map_err(|e| format!("cannot open executable {}: {e}", path.display()))?;
    let mut hasher = DefaultHasher::new();
    let mut buf = vec![0u8; 1 << 20];
    let mut len = 0u64;
    loop {
        let n = match f.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(format!("cannot read executable {}: {e}", path.display())),
        };
        hasher.write(&buf[..n]);
        len += n as u64;
    }
    Ok(Fingerprint { len, hash: hasher.finish() })
}

#[cfg(test)]
mod tests;
