//! Will it fit? Memory checks made before a graph's arrays are allocated.
//!
//! A tiny input can declare a huge graph (a 17-byte edge list whose largest id is 2^32,
//! a `# vertices` directive, a binary header, a Matrix Market or DIMACS size line, a
//! Kronecker SCALE). Allocating for such a graph would abort the process (`memory
//! allocation of ... bytes failed`) or panic (`capacity overflow`), so every graph
//! source computes what it is about to need, in `u128` so that no count can overflow,
//! and asks [`check_fits`] first. The answer is a [`MemoryError`] whose message reads
//! `WHAT needs N GiB, only M GiB available`.
//!
//! What is available is `MemAvailable` from `/proc/meminfo` ([`available_memory`]),
//! unless the environment variable [`SKEIN_MEMORY_LIMIT`](MEMORY_LIMIT_ENV) sets it:
//! a byte count, optionally with a binary suffix (`K`, `M`, `G`, `T`, also written
//! `KiB`, `MB`, ...: `1073741824`, `1G`, `512MiB`). The variable replaces what the
//! machine reports (it may be larger or smaller), which lets tests and users make the
//! check independent of the machine. Either figure is lowered to what the process's
//! address-space limit (`ulimit -v`, `RLIMIT_AS`) leaves ([`address_space_left`]). Where
//! none is known (no `/proc`), only needs beyond the address space are refused.
//!
//! The byte counts follow the arrays this crate allocates: [`edge_list_bytes`] for an
//! [`EdgeList`](crate::EdgeList), [`Csr::build_bytes`](crate::Csr::build_bytes) for
//! the CSR construction (its arrays and its per-vertex cursors), and [`graph_bytes`](crate::build::graph_bytes)
//! for both, which is what the file readers check against a file's declared counts.

use std::fmt;

/// The environment variable that overrides the available memory (see the
/// [module docs](self)).
pub const MEMORY_LIMIT_ENV: &str = "SKEIN_MEMORY_LIMIT";

/// Why something will not fit in memory.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum MemoryError {
    /// More memory is needed than is available (or than the address space holds).
    #[error("{what} needs {}, only {} available", Bytes(*need), Bytes(u128::from(*available)))]
    TooLarge {
        /// What needs the memory, e.g. `a graph of 4294967297 vertices and 2 edges`.
        what: String,
        /// Bytes needed.
        need: u128,
        /// Bytes available.
        available: u64,
    },
    /// [`MEMORY_LIMIT_ENV`] holds something that is not a byte count.
    #[error(
        "the environment variable {MEMORY_LIMIT_ENV} is `{value}`: expected a byte count \
         such as 1073741824, 512M or 2G"
    )]
    BadLimit {
        /// The variable's value.
        value: String,
    },
}

/// A byte count printed in GiB (or a smaller unit when under 0.1 GiB), one decimal: never
/// `0.0 GiB`.
///
/// ```
/// use skein_generators::memory::Bytes;
/// assert_eq!(Bytes(3 << 29).to_string(), "1.5 GiB");
/// assert_eq!(Bytes(5 << 20).to_string(), "5.0 MiB");
/// ```
#[derive(Debug, Clone, Copy)]
pub struct Bytes(pub u128);

impl fmt::Display for Bytes {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let b = self.0;
        let units = [(30, "GiB"), (20, "MiB"), (10, "KiB")];
        for (shift, unit) in units {
            if b >= 1u128 << shift || shift == 30 && b >= (1u128 << 30) / 10 {
                return write!(f, "{:.1} {unit}", b as f64 / (1u128 << shift) as f64);
            }
        }
        write!(f, "{b} bytes")
    }
}

/// Bytes available for new allocations: the value of [`MEMORY_LIMIT_ENV`] when set,
/// else `MemAvailable` from `/proc/meminfo`; `None` where neither is known, or when the
/// variable is malformed ([`check_fits`] reports that as [`MemoryError::BadLimit`]). Either
/// is lowered to what the process's address-space limit leaves ([`address_space_left`],
/// `ulimit -v`), where one is set.
pub fn available_memory() -> Option<u64> {
    memory_limit().ok().flatten()
}

/// [`available_memory`], with a malformed [`MEMORY_LIMIT_ENV`] as an error.
pub fn memory_limit() -> Result<Option<u64>, MemoryError> {
    let figure = match std::env::var_os(MEMORY_LIMIT_ENV) {
        Some(value) => {
            let value = value.to_string_lossy().into_owned();
            match parse_bytes(&value) {
                Some(b) => Some(b),
                None => return Err(MemoryError::BadLimit { value }),
            }
        }
        None => mem_available(),
    };
    Ok(match (figure, address_space_left()) {
        (Some(f), Some(left)) => Some(f.min(left)),
        (f, left) => f.or(left),
    })
}

/// What the process's address-space limit (`RLIMIT_AS`, set by `ulimit -v`) leaves for new
/// mappings: the limit less the address space in use now (`VmSize` of `/proc/self/status`);
/// `None` when there is no limit (or it cannot be read). An allocation past it fails even
/// with memory free, which aborts the process.
#[cfg(unix)]
pub fn address_space_left() -> Option<u64> {
    let mut lim = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
    // SAFETY: getrlimit writes one `rlimit` through the pointer, which points at ours.
    if unsafe { libc::getrlimit(libc::RLIMIT_AS, &mut lim) } != 0
        || lim.rlim_cur == libc::RLIM_INFINITY
    {
        return None;
    }
    let status = std::fs::read_to_string("/proc/self/status").ok();
    let used = status
        .as_deref()
        .and_then(|s| s.lines().find(|l| l.starts_with("VmSize:")))
        .and_then(|l| l.split_whitespace().nth(1)?.parse::<u64>().ok())
        .map_or(0, |kib| kib.saturating_mul(1024));
    Some(lim.rlim_cur.saturating_sub(used))
}

/// No address-space limit is known outside Unix.
#[cfg(not(unix))]
pub fn address_space_left() -> Option<u64> {
    None
}

/// This process's peak resident set size so far (`VmHWM` of `/proc/self/status`), in
/// bytes; `None` where the kernel does not say (not Linux).
pub fn peak_rss_bytes() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    kib.checked_mul(1024)
}

/// `MemAvailable` from `/proc/meminfo`, in bytes.
fn mem_available() -> Option<u64> {
    let info = std::fs::read_to_string("/proc/meminfo").ok()?;
    let line = info.lines().find(|l| l.starts_with("MemAvailable:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    kib.checked_mul(1024)
}

/// Parses `123`, `4K`, `512MiB`, `2 GB`, `1t` (binary multiples) into bytes.
pub(crate) fn parse_bytes(s: &str) -> Option<u64> {
    let s = s.trim();
    let digits = s.bytes().take_while(u8::is_ascii_digit).count();
    if digits == 0 {
        return None;
    }
    let n: u64 = s[..digits].parse().ok()?;
    let unit = s[digits..].trim_start().to_ascii_lowercase();
    let shift = match unit.as_str() {
        "" | "b" => 0,
        "k" | "kb" | "kib" => 10,
        "m" | "mb" | "mib" => 20,
        "g" | "gb" | "gib" => 30,
        "t" | "tb" | "tib" => 40,
        _ => return None,
    };
    n.checked_mul(1u64 << shift)
}

/// Checks that `need` bytes fit in the available memory ([`memory_limit`]); `what`
/// names what needs them, for the error message (`WHAT needs N GiB, only M GiB
/// available`). Needs beyond the address space are refused even where the available
/// memory is unknown.
pub fn check_fits(need: u128, what: impl FnOnce() -> String) -> Result<(), MemoryError> {
    check_within(need, memory_limit()?, what)
}

/// [`check_fits`] against `limit` bytes (`None`: unknown).
fn check_within(
    need: u128,
    limit: Option<u64>,
    what: impl FnOnce() -> String,
) -> Result<(), MemoryError> {
    let addressable = isize::MAX as u64;
    let available = limit.map_or(addressable, |l| l.min(addressable));
    if need > u128::from(available) {
        return Err(MemoryError::TooLarge { what: what(), need, available });
    }
    Ok(())
}

/// Bytes of an [`EdgeList`](crate::EdgeList) of `num_edges` edges: two `u64` endpoints
/// per edge, and an `f32` weight when `weighted`.
pub fn edge_list_bytes(num_edges: u64, weighted: bool) -> u128 {
    u128::from(num_edges) * if weighted { 20 } else { 16 }
}

/// `a graph of N vertices and M edges`, for [`check_fits`] messages.
pub(crate) fn describe_graph(num_vertices: u64, num_edges: Option<u64>) -> String {
    let n = count(num_vertices, "vertex", "vertices");
    match num_edges {
        Some(m) => format!("a graph of {n} and {}", count(m, "edge", "edges")),
        None => format!("a graph of {n}"),
    }
}

/// `1 edge`, `2 edges`.
pub(crate) fn count(n: u64, one: &str, many: &str) -> String {
    format!("{n} {}", if n == 1 { one } else { many })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    #[cfg(target_os = "linux")]
    fn peak_rss_grows_with_touched_memory() {
        let before = peak_rss_bytes().expect("VmHWM on Linux");
        assert!(before > 0);
        // Touch 64 MiB more than the peak so far: the peak must pass it.
        let big = vec![1u8; (before as usize) + (64 << 20)];
        std::hint::black_box(&big);
        let after = peak_rss_bytes().unwrap();
        assert!(after >= big.len() as u64, "{after} < {}", big.len());
    }

    #[test]
    fn byte_counts_parse() {
        assert_eq!(parse_bytes("0"), Some(0));
        assert_eq!(parse_bytes("1073741824"), Some(1 << 30));
        assert_eq!(parse_bytes("4K"), Some(4096));
        assert_eq!(parse_bytes("512MiB"), Some(512 << 20));
        assert_eq!(parse_bytes(" 2 gb "), Some(2 << 30));
        assert_eq!(parse_bytes("1t"), Some(1 << 40));
        for bad in ["", "G", "-1", "1.5G", "1X", "99999999999999999999", "20000000T"] {
            assert_eq!(parse_bytes(bad), None, "{bad}");
        }
    }

    #[test]
    fn sizes_print_in_gib() {
        assert_eq!(Bytes(1 << 30).to_string(), "1.0 GiB");
        assert_eq!(Bytes(64 << 30).to_string(), "64.0 GiB");
        assert_eq!(Bytes(3 << 29).to_string(), "1.5 GiB");
        assert_eq!(Bytes(200 << 20).to_string(), "0.2 GiB");
        assert_eq!(Bytes(5 << 20).to_string(), "5.0 MiB");
        assert_eq!(Bytes(2048).to_string(), "2.0 KiB");
        assert_eq!(Bytes(10).to_string(), "10 bytes");
        // 2^64 - 1 vertices: far beyond u64 bytes, still printed.
        assert_eq!(Bytes(u128::from(u64::MAX) * 8).to_string(), "137438953472.0 GiB");
    }

    #[test]
    fn counts_never_overflow() {
        let n = u64::MAX;
        assert!(crate::build::graph_bytes(n, n, true) > u128::from(u64::MAX));
        let what = || describe_graph(n, Some(1));
        let e =
            check_within(crate::build::graph_bytes(n, 1, false), Some(1 << 30), what).unwrap_err();
        let MemoryError::TooLarge { need, .. } = e else { panic!("{e:?}") };
        assert!(need > u128::from(n) * 16, "{need}");
        let shown = format!("{:.1} GiB", need as f64 / (1u64 << 30) as f64);
        assert_eq!(
            e.to_string(),
            format!(
                "a graph of 18446744073709551615 vertices and 1 edge needs {shown}, \
                 only 1.0 GiB available"
            )
        );
    }

    #[test]
    fn limits_are_checked() {
        let what = || "this".to_owned();
        assert_eq!(check_within(1 << 30, Some(1 << 30), what), Ok(()));
        let e = check_within(3 << 30, Some(1 << 30), what).unwrap_err();
        assert_eq!(e.to_string(), "this needs 3.0 GiB, only 1.0 GiB available");
        assert!(check_within((1 << 30) + 1, Some(1 << 30), what).is_err());
        // Unknown availability: only the address space bounds the need.
        assert_eq!(check_within(1 << 50, None, what), Ok(()));
        assert!(check_within(1 << 63, None, what).is_err());
        assert!(check_within(1 << 63, Some(u64::MAX), what).is_err());
    }
}
