#[test]
fn outside_mpirun_is_rank_0_of_1() {
    // The unit tests never run under mpirun (the multi-rank tests are in tests/rack.rs).
    assert!(super::init().is_ok());
    assert_eq!((super::rank(), super::ranks()), (0, 1));
    assert_eq!(super::job_token(), None);
    assert!(super::require_one_rank().is_ok());
}

#[test]
fn worker_mark_is_per_thread() {
    assert!(!super::is_worker_thread());
    std::thread::spawn(|| {
        super::mark_worker_thread();
        assert!(super::is_worker_thread());
    })
    .join()
    .unwrap();
    assert!(!super::is_worker_thread());
}
