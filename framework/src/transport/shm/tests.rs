//! The shared-memory transport's settings (its rings run in the multi-rank suites,
//! `tests/rack.rs`, under `mpirun`).

use super::*;

#[test]
fn default_rings_shrink_with_many_workers_and_a_setting_wins() {
    let c = Config {
        ring_bytes: None,
        max_envelope_bytes: 1 << 30,
        batch_bytes: 4032,
        threads: 1,
        cores: 2,
    };
    assert_eq!(c.ring_bytes(16), 256 << 10, "16 ranks of 1 worker");
    assert_eq!(c.ring_bytes(16 * 8), 256 << 10, "2 ranks of 8 workers: 128 rings");
    assert_eq!(c.ring_bytes(512), 128 << 10);
    assert_eq!(c.ring_bytes(256 * 16), 16 << 10, "16 ranks of 16 workers");
    assert_eq!(c.ring_bytes(1 << 20), 16 << 10, "never below the smallest default");
    let set = Config {
        ring_bytes: Some(4 << 10),
        max_envelope_bytes: 1 << 30,
        batch_bytes: 4032,
        threads: 0,
        cores: 2,
    };
    assert_eq!(set.ring_bytes(16), 4 << 10);
}

#[test]
fn memory_file_names_are_per_job_run_and_rank() {
    let a = path_of(0xabc, 1, 0);
    assert_eq!(a.to_str().unwrap(), "/dev/shm/skein-0000000000000abc-1-0");
    assert_ne!(a, path_of(0xabc, 2, 0));
    assert_ne!(a, path_of(0xabc, 1, 1));
}

#[test]
fn nodes_are_listed_by_their_first_rank_and_the_split_is_checked() {
    assert_eq!(describe_nodes(&[7, 7, 9, 9]), "[0, 1], [2, 3]");
    assert_eq!(describe_nodes(&[5, 9, 5]), "[0, 2], [1]");
    assert_eq!(describe_nodes(&[1]), "[0]");
    assert_eq!(other_node(&[3, 3, 4]), Some(2));
    assert_eq!(other_node(&[3, 3]), None);
    assert_eq!(parse_ranks_per_node(" 2 "), Ok(2));
    for bad in ["0", "-1", "two", ""] {
        let e = parse_ranks_per_node(bad).unwrap_err();
        assert!(e.starts_with("SKEIN_RANKS_PER_NODE=") && e.contains("1 or more"), "{e}");
    }
}
