use super::TrustArray;

/// A received array must have one part per worker of the run, part `t` on worker `t`;
/// otherwise it is refused (its handles given back), naming what is wrong.
#[test]
fn a_received_array_has_one_part_per_worker_in_order() {
    let rt = crate::Runtime::builder().workers(2).build().unwrap();
    let (short, swapped, fine) = rt
        .run(|| {
            let h = |t: usize| crate::trustee(t).entrust_new((), |()| vec![7u64; 2]);
            let short = TrustArray::<u64>::received(4, vec![h(0)]).err();
            let swapped = TrustArray::<u64>::received(4, vec![h(1), h(0)]).err();
            let fine = TrustArray::<u64>::received(4, vec![h(0), h(1)])
                .map(|a| (0..a.len()).map(|i| a.apply(i, (), |v, ()| *v)).sum::<u64>());
            (short, swapped, fine)
        })
        .unwrap();
    assert_eq!(
        short.as_deref(),
        Some(
            "a TrustArray of 1 part received in a run of 2 workers (one part per worker \
             expected)"
        )
    );
    assert_eq!(swapped.as_deref(), Some("part 0 of a received TrustArray is on worker 1"));
    assert_eq!(fine, Ok(28));
}
