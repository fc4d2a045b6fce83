//! Result vectors filled by every trustee at once.
//!
//! A search ends with each partition's distances (or levels) and parents held by its
//! trustee, while the result wants them as two vectors indexed by global id, which are
//! the partitions' ranges in order (a [`crate::Partitioning`] gives contiguous blocks).
//! Copying them over on the main fiber, one partition after the other, into vectors
//! that grew as they went cost about 14 ms at SCALE 20: a third of a BFS. Here the
//! vectors are allocated zeroed at their full length (untouched pages, not yet
//! mapped) and each trustee writes its own range in parallel, so the pages are also
//! mapped by the threads that fill them.
//!
//! # Invariants (the module's unsafe code relies on them)
//!
//! 1. The ranges handed out are inside both vectors and pairwise disjoint ([`fill`]
//!    checks this before it hands any out), so no element is reachable by two writers.
//!    Without a parents vector ([`fill_values_into`]) a range's parents pointer is null
//!    and becomes an empty slice, never a pointer into anything.
//! 2. The vectors are not read, moved out of, resized or freed while a writer may
//!    still run: [`fill`] joins every writer's fiber, also when one of them panics,
//!    before it touches the vectors again or resumes a panic.
//! 3. Each [`RawRange`] becomes a slice once, inside its writer.

use skein::Trust;
use std::ops::Range;
use std::panic::{catch_unwind, resume_unwind, AssertUnwindSafe};

/// Per-vertex values and parents (global ids), indexed by global id, with the
/// partitions' work counters summed.
#[derive(Debug)]
pub struct Filled<V> {
    /// Value per vertex (empty when each rank's slice stayed on its rank).
    pub values: Vec<V>,
    /// Parent per vertex (zeros for a kernel without parents).
    pub parents: Vec<u64>,
    /// Requests sent, summed over partitions ([`crate::parts::Part::counters`]).
    pub messages: u64,
    /// Arcs, summed over partitions.
    pub arcs: u64,
}

/// Fills one partition's ranges of the values and the parents; returns its
/// `(messages, arcs)` counters.
pub(crate) type Writer<P, V> = fn(&mut P, &mut [V], &mut [u64]) -> (u64, u64);

/// One writer's range of both vectors, as raw parts that may travel to its trustee.
struct RawRange<V> {
    values: *mut V,
    /// Null when the fill has no parents vector ([`fill_values_into`]).
    parents: *mut u64,
    len: usize,
}

// SAFETY: a RawRange is the exclusive right to write one range (invariant 1), used by
// exactly one writer (invariant 3) while the vectors stay put (invariant 2); `V: Send`
// values may be written from another thread.
unsafe impl<V: Send> Send for RawRange<V> {}

/// Runs `write(part, values, parents)` on the trustee of every partition of `parts` (all on
/// this rank) at once, with `values` and `parents` the partition's range of two new vectors
/// of length `n`, and returns the vectors with the counters `write` returned, summed.
/// Elements outside every range are left at their defaults.
///
/// # Panics
/// As [`fill_into`].
pub(crate) fn fill<P, V>(
    parts: &[(Trust<P>, Range<usize>)],
    n: usize,
    write: Writer<P, V>,
) -> Filled<V>
where
    P: Send + 'static,
    V: Copy + Default + Send + 'static,
{
    fill_into(parts, n, (Vec::new(), Vec::new()), write)
}

/// [`fill`] into the vectors `reuse` (an earlier result's): kept when both have length
/// `n`, so that a search of the same graph writes pages already mapped (no page faults);
/// otherwise replaced by new zeroed vectors. Elements outside every range keep what they
/// held.
///
/// # Panics
/// If the ranges are not ascending, disjoint and inside `0..n`, if a partition's trustee is
/// on another rank, or (after every writer has finished) if a writer panicked.
pub(crate) fn fill_into<P, V>(
    parts: &[(Trust<P>, Range<usize>)],
    n: usize,
    reuse: (Vec<V>, Vec<u64>),
    write: Writer<P, V>,
) -> Filled<V>
where
    P: Send + 'static,
    V: Copy + Default + Send + 'static,
{
    fill_parts(parts, n, reuse, true, write)
}

/// [`fill_into`] of the values only, for a kernel without parents: no parents vector is
/// made (the result's is empty) and every writer gets an empty `parents` slice. `values`
/// is kept when it has length `n`.
///
/// # Panics
/// As [`fill_into`].
pub(crate) fn fill_values_into<P, V>(
    parts: &[(Trust<P>, Range<usize>)],
    n: usize,
    values: Vec<V>,
    write: Writer<P, V>,
) -> Filled<V>
where
    P: Send + 'static,
    V: Copy + Default + Send + 'static,
{
    fill_parts(parts, n, (values, Vec::new()), false, write)
}

/// [`fill_into`], with a parents vector when `with_parents` (otherwise none, and empty
/// `parents` slices for the writers).
fn fill_parts<P, V>(
    parts: &[(Trust<P>, Range<usize>)],
    n: usize,
    reuse: (Vec<V>, Vec<u64>),
    with_parents: bool,
    write: Writer<P, V>,
) -> Filled<V>
where
    P: Send + 'static,
    V: Copy + Default + Send + 'static,
{
    let mut end = 0;
    for (_, r) in parts {
        assert!(end <= r.start && r.start <= r.end && r.end <= n, "ranges of {n} out of order");
        end = r.end;
    }
    // Zero-valued defaults (every V used here) come from zeroed allocations: no page
    // is touched until a writer fills it.
    let (mut values, mut parents) = reuse;
    if !with_parents {
        parents = Vec::new();
        if values.len() != n {
            values = vec![V::default(); n];
        }
    } else if values.len() != n || parents.len() != n {
        values = vec![V::default(); n];
        parents = vec![0u64; n];
    }
    // Without parents the writers' `parents` are empty (a null pointer stands for none).
    let pp = if with_parents { parents.as_mut_ptr() } else { std::ptr::null_mut() };
    let vp = values.as_mut_ptr();
    let writers: Vec<_> = parts
        .iter()
        .map(|(t, r)| {
            // SAFETY: `r` lies inside both vectors (checked above), so the offsets stay
            // within their allocations.
            let raw = unsafe {
                let parents = if pp.is_null() { pp } else { pp.add(r.start) };
                RawRange { values: vp.add(r.start), parents, len: r.len() }
            };
            let t = t.clone();
            skein::spawn_local_on(t.trustee().worker(), move || {
                catch_unwind(AssertUnwindSafe(|| {
                    t.apply_local(move |s| {
                        let raw = raw;
                        // SAFETY: invariants 1-3: this range of both vectors is this
                        // writer's alone, and the vectors stay put until it is joined.
                        // A null `parents` is none: an empty slice.
                        let (v, pa) = unsafe {
                            (
                                std::slice::from_raw_parts_mut(raw.values, raw.len),
                                if raw.parents.is_null() {
                                    &mut [][..]
                                } else {
                                    std::slice::from_raw_parts_mut(raw.parents, raw.len)
                                },
                            )
                        };
                        write(s, v, pa)
                    })
                }))
            })
        })
        .collect();
    // Invariant 2: join every writer before anything else happens to the vectors.
    let results: Vec<_> = writers.into_iter().map(|h| h.join()).collect();
    let (mut messages, mut arcs) = (0, 0);
    for r in results {
        match r {
            Ok((m, a)) => {
                messages += m;
                arcs += a;
            }
            Err(panic) => resume_unwind(panic),
        }
    }
    Filled { values, parents, messages, arcs }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ranges(lens: &[usize]) -> Vec<Range<usize>> {
        let mut at = 0;
        lens.iter()
            .map(|&l| {
                at += l;
                at - l..at
            })
            .collect()
    }

    #[test]
    fn every_partition_fills_its_range() {
        for workers in 1..=3 {
            let rt = skein::Runtime::builder().workers(workers).loopback_ranks(1).build().unwrap();
            let lens: Vec<usize> = (0..workers).map(|p| 1000 + 37 * p).collect();
            let n = lens.iter().sum();
            let rs = ranges(&lens);
            let out = rt
                .run_local(move || {
                    let parts: Vec<_> = (0..workers)
                        .map(|p| (skein::trustee(p).entrust((p, rs[p].start)), rs[p].clone()))
                        .collect();
                    fill(&parts, n, |&mut (p, start), v: &mut [u32], pa| {
                        assert_eq!(skein::current_worker(), p, "written on the trustee");
                        for (i, (x, y)) in v.iter_mut().zip(pa.iter_mut()).enumerate() {
                            *x = (start + i) as u32;
                            *y = p as u64;
                        }
                        (1, v.len() as u64)
                    })
                })
                .unwrap();
            assert_eq!(out.values, (0..n as u32).collect::<Vec<_>>());
            let owners: Vec<u64> =
                lens.iter().enumerate().flat_map(|(p, &l)| vec![p as u64; l]).collect();
            assert_eq!(out.parents, owners);
            assert_eq!((out.messages, out.arcs), (workers as u64, n as u64));
        }
    }

    /// Two partitions (their index as state) of 5 and 7 vertices, in a run of 2 workers.
    fn five_and_seven() -> Vec<(Trust<u32>, Range<usize>)> {
        let parts = ranges(&[5, 7]).into_iter().enumerate();
        parts.map(|(p, r)| (skein::trustee(p).entrust(p as u32), r)).collect()
    }

    #[test]
    fn fill_into_overwrites_vectors_of_the_right_length_only() {
        let rt = skein::Runtime::builder().workers(2).loopback_ranks(1).build().unwrap();
        let (kept, replaced) = rt
            .run_local(|| {
                let parts = five_and_seven();
                let write: Writer<u32, u32> = |p, v, pa| {
                    v.fill(*p + 1);
                    pa.fill(u64::from(*p));
                    (0, 0)
                };
                let (v, pa) = (vec![9u32; 12], vec![9u64; 12]);
                let at = (v.as_ptr() as usize, pa.as_ptr() as usize);
                let kept = fill_into(&parts, 12, (v, pa), write);
                let same = at == (kept.values.as_ptr() as usize, kept.parents.as_ptr() as usize);
                let replaced = fill_into(&parts, 12, (vec![9u32; 3], vec![9u64; 3]), write);
                ((same, kept.values, kept.parents), (replaced.values, replaced.parents))
            })
            .unwrap();
        let want_v: Vec<u32> = [vec![1; 5], vec![2; 7]].concat();
        let want_p: Vec<u64> = [vec![0; 5], vec![1; 7]].concat();
        assert!(kept.0, "the vectors were reused");
        assert_eq!((&kept.1, &kept.2), (&want_v, &want_p));
        assert_eq!((&replaced.0, &replaced.1), (&want_v, &want_p));
    }

    #[test]
    fn fill_values_into_makes_no_parents_and_reuses_the_values() {
        let rt = skein::Runtime::builder().workers(2).loopback_ranks(1).build().unwrap();
        let (same, out, fresh) = rt
            .run_local(|| {
                let parts = five_and_seven();
                let write: Writer<u32, u32> = |p, v, pa| {
                    assert!(pa.is_empty(), "no parents");
                    v.fill(*p + 1);
                    (1, 0)
                };
                let v = vec![9u32; 12];
                let at = v.as_ptr() as usize;
                let out = fill_values_into(&parts, 12, v, write);
                let fresh = fill_values_into(&parts, 12, Vec::new(), write);
                (at == out.values.as_ptr() as usize, out, fresh)
            })
            .unwrap();
        let want: Vec<u32> = [vec![1; 5], vec![2; 7]].concat();
        assert!(same, "the values were reused");
        assert_eq!((&out.values, out.parents.len(), out.messages), (&want, 0, 2));
        assert_eq!((&fresh.values, fresh.parents.len()), (&want, 0));
    }

    #[test]
    fn a_panicking_writer_fails_the_run_after_the_others_finish() {
        let rt = skein::Runtime::builder().workers(2).loopback_ranks(1).build().unwrap();
        let r = rt.run(|| {
            let parts: Vec<_> = ranges(&[10, 10])
                .into_iter()
                .enumerate()
                .map(|(p, r)| (skein::trustee(p).entrust(p), r))
                .collect();
            fill(&parts, 20, |p, v: &mut [u32], _| {
                if *p == 0 {
                    panic!("writer 0 fails");
                }
                v.fill(7);
                (0, 0)
            })
            .values
            .len()
        });
        assert!(r.is_err(), "the panic reaches the run");
    }

    #[test]
    #[should_panic(expected = "ranges")]
    fn overlapping_ranges_are_refused() {
        let rt = skein::Runtime::builder().workers(2).loopback_ranks(1).build().unwrap();
        let r = rt.run(|| {
            let parts: Vec<_> = [0..6, 5..10]
                .into_iter()
                .enumerate()
                .map(|(p, r)| (skein::trustee(p).entrust(()), r))
                .collect();
            fill(&parts, 10, |_, _: &mut [u32], _| (0, 0)).values.len()
        });
        if let Err(e) = r {
            panic!("{e}");
        }
    }
}
