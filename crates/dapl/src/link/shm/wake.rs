//! The shm link's wake-up protocol: every decision about who must ring a doorbell, taken over
//! a ring's control words ([`ring`](super::ring): `TAIL`, `HEAD`, `WAITING`, `POLLING`) and the
//! IA's polling window (`hot_until` of the link). No data moves here and nothing sleeps or
//! rings: callers do that with the answers.
//!
//! Everything is generic over the atomic word ([`Word`]), so that a model checker can run
//! these same functions on its own atomics; the ring and the link run them on the std atomics
//! of the mapping and of the IA.
//!
//! Each place where one side stores and then looks at what the other side stored (the pattern
//! in which both could miss each other) is paired with the other side's:
//! - [`needs_bell`] after a publish and [`stop_polling`] (a SeqCst fence each): a producer
//!   skips the doorbell only while the consumer polls; a consumer that stops polling looks at
//!   the tail once more.
//! - [`look_or_wait`] and [`consume`] (SeqCst flag): a producer that found no room marks
//!   itself waiting and looks at the head once more; a consumer that moved the head takes the
//!   flag and rings.
//! - [`poll_window`], [`still_open`] and [`close_window`] / [`expire_window`] (SeqCst
//!   accesses): whoever writes a ring's window looks at the IA's window after writing it and
//!   stops the rings itself if the window was closed meanwhile; whoever closes the IA's window
//!   stops the rings after it.

use std::sync::atomic::{AtomicU64, Ordering};

/// An atomic 64-bit word: a control word of the ring (std's, in the mapping) or loom's.
pub(crate) trait Word {
    fn load(&self, order: Ordering) -> u64;
    fn store(&self, val: u64, order: Ordering);
    fn swap(&self, val: u64, order: Ordering) -> u64;
    /// A fence of the same kind of atomics as the word.
    fn fence(order: Ordering);
}

impl Word for AtomicU64 {
    fn load(&self, order: Ordering) -> u64 {
        AtomicU64::load(self, order)
    }
    fn store(&self, val: u64, order: Ordering) {
        AtomicU64::store(self, val, order)
    }
    fn swap(&self, val: u64, order: Ordering) -> u64 {
        AtomicU64::swap(self, val, order)
    }
    fn fence(order: Ordering) {
        std::sync::atomic::fence(order)
    }
}

/// How far a polling consumer's window must have moved before it writes the word again.
pub(crate) const POLL_REFRESH_NS: u64 = 1_000_000;

// ---------------------------------------------------------------------------------------------
// One ring: the producer's doorbell (POLLING) and the consumer's (WAITING).

/// The producer publishes what it wrote up to `tail` (Release: a consumer that sees the tail
/// sees the records).
pub(crate) fn publish<W: Word>(tail_word: &W, tail: u64) {
    tail_word.store(tail, Ordering::Release);
}

/// The consumer's look at the producer's tail (Acquire: the records before it are seen).
pub(crate) fn published<W: Word>(tail: &W) -> u64 {
    tail.load(Ordering::Acquire)
}

/// After a publish: true if the consumer must be woken (its doorbell rung), false while its
/// window (`polling`) lies ahead of `now_ns`. Fenced against [`stop_polling`]: of a publish and
/// a consumer that stops polling, one sees the other.
pub(crate) fn needs_bell<W: Word>(polling: &W, now_ns: u64) -> bool {
    W::fence(Ordering::SeqCst);
    polling.load(Ordering::SeqCst) <= now_ns
}

/// True if the ring holds records not consumed yet: two loads, no lock (a poll that finds
/// nothing costs no more).
pub(crate) fn pending<W: Word>(tail: &W, head: &W) -> bool {
    tail.load(Ordering::Relaxed) != head.load(Ordering::Relaxed)
}

/// The consumer polls the ring until `until_ns`: its producer need not ring before then.
/// Written only when it moves on by a good part of the window (no shared-line write per poll).
pub(crate) fn poll_until<W: Word>(polling: &W, until_ns: u64) {
    if polling.load(Ordering::Relaxed) + POLL_REFRESH_NS < until_ns {
        polling.store(until_ns, Ordering::SeqCst);
    }
}

/// The consumer stops polling the ring: its producer rings again. True if records arrived
/// that no doorbell announced (the caller has them handled). Fenced against [`needs_bell`].
pub(crate) fn stop_polling<W: Word>(polling: &W, tail: &W, head: &W) -> bool {
    polling.store(0, Ordering::SeqCst);
    W::fence(Ordering::SeqCst);
    pending(tail, head)
}

/// The producer's look at the consumer's head: `enough(head)` says whether what it waits for
/// (room, or a record consumed) is there. If not, the producer is marked waiting (the consumer
/// rings when it moves on: [`consume`]) and looks once more. Errors of `enough` (an impossible
/// head) are passed on.
pub(crate) fn look_or_wait<W: Word, E>(
    head: &W,
    waiting: &W,
    mut enough: impl FnMut(u64) -> Result<bool, E>,
) -> Result<bool, E> {
    if enough(head.load(Ordering::Acquire))? {
        return Ok(true);
    }
    waiting.store(1, Ordering::SeqCst);
    // The consumer may have moved on between the look and the flag: look again.
    enough(head.load(Ordering::SeqCst))
}

/// The consumer moves its head to `head` (Release: the producer that sees it may reuse the
/// bytes) and takes the producer's waiting flag: true if the producer waits (ring its
/// doorbell). SeqCst with [`look_or_wait`]'s flag and second look.
pub(crate) fn consume<W: Word>(head_word: &W, waiting: &W, head: u64) -> bool {
    head_word.store(head, Ordering::Release);
    waiting.swap(0, Ordering::SeqCst) != 0
}

// ---------------------------------------------------------------------------------------------
// The IA's window (`hot_until`): until when a consumer of the IA polls its rings (0: none).

/// A consumer of the IA polls: opens the IA's window until `until_ns`, then `mark` writes the
/// rings' windows ([`poll_until`]; it may do more meanwhile), then [`still_open`]: if the window
/// was closed in between, `stop` stops the rings (every ring's [`stop_polling`]). Returns what
/// `mark` returned.
pub(crate) fn poll_window<W: Word, R>(
    hot: &W,
    until_ns: u64,
    mark: impl FnOnce() -> R,
    stop: impl FnOnce(),
) -> R {
    hot.store(until_ns, Ordering::SeqCst);
    let r = mark();
    // Another consumer may have gone idle meanwhile (the window closed, every ring told to
    // ring again) before the rings' windows just written: producers would skip the doorbell
    // with nobody left to look.
    if !still_open(hot) {
        stop();
    }
    r
}

/// After writing rings' windows: true if the IA's window is still open (its closer stops
/// those rings after closing it); false if it was closed, and the writer must stop the rings
/// itself. SeqCst with [`close_window`] and [`expire_window`].
pub(crate) fn still_open<W: Word>(hot: &W) -> bool {
    hot.load(Ordering::SeqCst) != 0
}

/// A consumer goes to sleep: closes the IA's window. True if it was open: the caller then
/// stops every ring ([`stop_polling`]).
pub(crate) fn close_window<W: Word>(hot: &W) -> bool {
    hot.swap(0, Ordering::SeqCst) != 0
}

/// The progress thread found the IA's window at `seen` (0: closed): if it ran out by `now_ns`
/// (its consumer stopped without saying so), closes it and returns true: the caller then stops
/// every ring and handles what no doorbell announced.
pub(crate) fn expire_window<W: Word>(hot: &W, seen: u64, now_ns: u64) -> bool {
    if seen == 0 || seen > now_ns {
        return false;
    }
    hot.store(0, Ordering::SeqCst);
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    const NOW: u64 = 10 * POLL_REFRESH_NS;

    #[test]
    fn a_producer_skips_the_bell_only_while_the_window_lies_ahead() {
        let (tail, head, polling) = (AtomicU64::new(0), AtomicU64::new(0), AtomicU64::new(0));
        publish(&tail, 64);
        assert!(needs_bell(&polling, NOW), "nobody polls");
        poll_until(&polling, NOW + 4 * POLL_REFRESH_NS);
        assert!(!needs_bell(&polling, NOW), "polled");
        assert!(needs_bell(&polling, NOW + 4 * POLL_REFRESH_NS), "ran out");
        assert!(
            stop_polling(&polling, &tail, &head),
            "the record no bell announced"
        );
        assert!(needs_bell(&polling, NOW));
        head.store(64, Ordering::Relaxed);
        assert!(!stop_polling(&polling, &tail, &head));
    }

    #[test]
    fn a_poll_moves_the_rings_window_only_by_a_good_part_of_it() {
        let polling = AtomicU64::new(0);
        poll_until(&polling, NOW);
        poll_until(&polling, NOW + POLL_REFRESH_NS / 2);
        assert_eq!(polling.load(Ordering::Relaxed), NOW);
        poll_until(&polling, NOW + 2 * POLL_REFRESH_NS);
        assert_eq!(polling.load(Ordering::Relaxed), NOW + 2 * POLL_REFRESH_NS);
    }

    #[test]
    fn a_producer_without_room_is_marked_waiting_and_told_once() {
        let (head, waiting) = (AtomicU64::new(0), AtomicU64::new(0));
        let room = |h: u64| Ok::<_, ()>(h >= 64);
        assert_eq!(look_or_wait(&head, &waiting, room), Ok(false));
        assert_eq!(waiting.load(Ordering::Relaxed), 1);
        assert!(consume(&head, &waiting, 64), "the waiting producer is rung");
        assert!(!consume(&head, &waiting, 128), "once");
        assert_eq!(look_or_wait(&head, &waiting, room), Ok(true));
        assert_eq!(
            waiting.load(Ordering::Relaxed),
            0,
            "not marked when there is room"
        );
        assert_eq!(look_or_wait(&head, &waiting, |_| Err::<bool, _>(7)), Err(7));
    }

    #[test]
    fn the_ias_window_is_closed_once_and_a_late_poll_stops_its_rings() {
        let hot = AtomicU64::new(0);
        let polling = AtomicU64::new(0);
        let mut stopped = false;
        poll_window(&hot, NOW, || poll_until(&polling, NOW), || stopped = true);
        assert!(!stopped && still_open(&hot));
        assert!(close_window(&hot), "open: the closer stops the rings");
        assert!(!close_window(&hot), "closed once");
        assert!(!still_open(&hot));
        assert!(!expire_window(&hot, 0, NOW), "closed");
        hot.store(NOW, Ordering::Relaxed);
        assert!(!expire_window(&hot, NOW, NOW - 1), "not run out yet");
        assert!(expire_window(&hot, NOW, NOW));
        assert_eq!(hot.load(Ordering::Relaxed), 0);
    }
}
