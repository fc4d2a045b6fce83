use super::Error;

#[test]
fn counts_in_messages_agree_with_their_nouns() {
    let panicked = |count| Error::Panicked { first: "boom".into(), count }.to_string();
    assert_eq!(panicked(1), "1 panic during the skein job; first: boom");
    assert_eq!(panicked(3), "3 panics during the skein job; first: boom");
    let deadlock = |blocked| Error::Deadlock { blocked, main_finished: true }.to_string();
    assert!(deadlock(1).starts_with("skein deadlock: 1 fiber blocked forever"));
    assert!(deadlock(2).starts_with("skein deadlock: 2 fibers blocked forever"));
}
