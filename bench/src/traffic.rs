//! The traffic of the echo benchmarks, shared by the Skein side ([`crate::echo`]) and the
//! MPI baselines: the settings of a measurement, the window quota of a sender, random
//! destinations, and payload stamps that catch a torn or misdelivered payload.

use skein_generators::splitmix::SplitMix64;

/// The settings an echo measurement needs, shared by the Skein side and the MPI baselines.
#[derive(Debug, Clone, Copy)]
pub(crate) struct EchoSetup {
    pub(crate) size: usize,
    pub(crate) seconds: f64,
    pub(crate) requests: Option<u64>,
    pub(crate) remote_only: bool,
    pub(crate) seed: u64,
}

/// How many requests a sender may issue now: at most `per_pass`, no more than the `window`
/// minus the `outstanding` ones allows, and no more than its `budget` (if any) minus the
/// `sent` ones allows.
pub(crate) fn quota(
    budget: Option<u64>,
    sent: u64,
    outstanding: usize,
    window: usize,
    per_pass: usize,
) -> usize {
    let by_window = window.saturating_sub(outstanding).min(per_pass);
    match budget {
        Some(b) => by_window.min(usize::try_from(b.saturating_sub(sent)).unwrap_or(usize::MAX)),
        None => by_window,
    }
}

/// A destination in `0..n`, or in `0..n` without `me` when `remote_only` (n ≥ 2), drawn from
/// `rng` (deterministic per seed, worker and fiber).
#[inline]
pub(crate) fn dest(rng: &mut SplitMix64, n: usize, me: usize, remote_only: bool) -> usize {
    if remote_only {
        let d = rng.below(n as u64 - 1) as usize;
        d + usize::from(d >= me)
    } else {
        rng.below(n as u64) as usize
    }
}

/// Writes `tag` at both ends of a payload (one place when it is 8 bytes).
#[inline]
pub(crate) fn stamp(p: &mut [u8], tag: u64) {
    let n = p.len();
    p[..8].copy_from_slice(&tag.to_le_bytes());
    p[n - 8..].copy_from_slice(&tag.to_le_bytes());
}

/// The tag of a payload written by [`stamp`], or `None` when its two copies differ.
#[inline]
pub(crate) fn read_stamp(p: &[u8]) -> Option<u64> {
    let n = p.len();
    let a = u64::from_le_bytes(p[..8].try_into().ok()?);
    let b = u64::from_le_bytes(p[n - 8..].try_into().ok()?);
    (a == b).then_some(a)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn remote_destinations_never_pick_the_sender_and_cover_the_others() {
        for n in [2usize, 3, 7] {
            for me in 0..n {
                let mut rng = SplitMix64::new(1, me as u64);
                let mut seen = vec![0u32; n];
                for _ in 0..1000 {
                    seen[dest(&mut rng, n, me, true)] += 1;
                }
                assert_eq!(seen[me], 0, "n={n} me={me}: {seen:?}");
                assert!((0..n).filter(|&d| d != me).all(|d| seen[d] > 0), "{seen:?}");
                let mut all = vec![0u32; n];
                for _ in 0..1000 {
                    all[dest(&mut rng, n, me, false)] += 1;
                }
                assert!(all.iter().all(|&c| c > 0), "n={n} me={me}: {all:?}");
            }
        }
    }

    #[test]
    fn quota_keeps_to_the_window_and_the_budget() {
        assert_eq!(quota(None, 0, 0, 1000, 256), 256);
        assert_eq!(quota(None, 0, 900, 1000, 256), 100);
        assert_eq!(quota(None, 0, 1200, 1000, 256), 0);
        // The budget caps a pass: 20000 requests, 19990 sent, 10 left.
        assert_eq!(quota(Some(20_000), 19_990, 0, 1000, 256), 10);
        assert_eq!(quota(Some(20_000), 20_000, 0, 1000, 256), 0);
        assert_eq!(quota(Some(5), 0, 0, 1000, 256), 5);
    }

    #[test]
    fn stamps_round_trip_and_catch_torn_payloads() {
        let mut p = [0u8; 32];
        stamp(&mut p, 0xDEAD_BEEF_0042);
        assert_eq!(read_stamp(&p), Some(0xDEAD_BEEF_0042));
        p[31] ^= 1;
        assert_eq!(read_stamp(&p), None);
        let mut p8 = [0u8; 8];
        stamp(&mut p8, 7);
        assert_eq!(read_stamp(&p8), Some(7));
    }
}
