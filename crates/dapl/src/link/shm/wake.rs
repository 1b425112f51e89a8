//! The shm link's wake-up protocol: every decision about who must ring a doorbell, taken over
//! a ring's control words ([`ring`](super::ring): `TAIL`, `HEAD`, `WAITING`, `POLLING`) and the
//! IA's polling window (`hot_until` of the link). No data moves here and nothing sleeps or
//! rings: callers do that with the answers.
//!
//! Everything is generic over the atomic word ([`Word`]): the ring and the link run it on the
//! std atomics of the mapping and of the IA, and the loom models at the end of this file run
//! the same functions on loom's atomics (`RUSTFLAGS="--cfg loom"`, see `scripts/test.sh`).
//!
//! Each place where one side stores and then looks at what the other side stored (the pattern
//! in which both could miss each other) has a SeqCst fence between the store and the look,
//! paired with a fence on the other side:
//! - [`needs_bell`] after a publish and [`stop_polling`]: a producer skips the doorbell only
//!   while the ring is marked polled; a consumer that clears the mark looks at the tail once
//!   more.
//! - [`look_or_wait`] and [`consume`]: a producer that found no room marks itself waiting and
//!   looks at the head once more; a consumer that moved the head takes the flag and rings.
//! - [`poll_window`], [`still_open`] and [`close_window`] / [`expire_window`]: whoever marks a
//!   ring polled looks at the IA's window after writing it and stops the rings itself if the
//!   window was closed meanwhile; whoever closes the IA's window stops the rings after it. So a
//!   ring's mark never outlives the IA's window, and the producer reads no clock.
//! - [`begin_idle`] and [`poll_window`]'s look: the progress thread that goes to sleep with no
//!   window open marks it and looks at the IA's window once more; a consumer that opened the
//!   window from closed then finds the mark ([`kick_idle`]) and wakes the thread, so that it
//!   looks at the rings when the window ends.
//!
//! Where one of the two is a Release store or an Acquire load (a publish, a head) the C++
//! model needs the fences. Where both sides' accesses are SeqCst (the IA's window) it orders
//! them without, but loom models SeqCst accesses as AcqRel (only its fences are SeqCst): the
//! fences are what the models check, at the cost of one fence per poll.

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

// ---------------------------------------------------------------------------------------------
// One ring: the producer's doorbell (POLLING) and the consumer's (WAITING).

/// The producer publishes what it wrote up to `tail` (Release: a consumer that sees the tail
/// sees the records).
pub(crate) fn publish<W: Word>(tail_word: &W, tail: u64) {
    tail_word.store(tail, Ordering::Release);
}

/// After a publish: true if the consumer must be woken (its doorbell rung), false while the
/// ring is marked polled (`polling` not 0). Fenced against [`stop_polling`]: of a publish and
/// a consumer that stops polling, one sees the other. No clock: a mark never outlives the
/// IA's window, whose closer or the progress thread at its end clears it ([`poll_window`]),
/// so the producer need not compare it with the time (a clock read was about 40 ns of every
/// message here).
pub(crate) fn needs_bell<W: Word>(polling: &W) -> bool {
    W::fence(Ordering::SeqCst);
    polling.load(Ordering::SeqCst) == 0
}

/// True if the tail says the ring holds records not consumed yet (Acquire: the records before
/// the tail it read are seen by the caller's look at them).
pub(crate) fn pending<W: Word>(tail: &W, head: &W) -> bool {
    tail.load(Ordering::Acquire) != head.load(Ordering::Relaxed)
}

/// The consumer polls the ring: its producer need not ring until [`stop_polling`]. Written
/// only when the mark is clear (no shared-line write per poll). Only under the IA's window
/// ([`poll_window`]): whoever closes or expires the window clears every ring's mark.
pub(crate) fn mark_polled<W: Word>(polling: &W) {
    if polling.load(Ordering::Relaxed) == 0 {
        polling.store(1, Ordering::SeqCst);
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
    W::fence(Ordering::SeqCst);
    enough(head.load(Ordering::SeqCst))
}

/// The consumer moves its head to `head` (Release: the producer that sees it may reuse the
/// bytes) and takes the producer's waiting flag: true if the producer waits (ring its
/// doorbell). Fenced against [`look_or_wait`].
pub(crate) fn consume<W: Word>(head_word: &W, waiting: &W, head: u64) -> bool {
    head_word.store(head, Ordering::Release);
    W::fence(Ordering::SeqCst);
    // A load first: the flag is almost never set, and the swap would be a locked write.
    waiting.load(Ordering::SeqCst) != 0 && waiting.swap(0, Ordering::SeqCst) != 0
}

// ---------------------------------------------------------------------------------------------
// The IA's window (`hot_until`): until when a consumer of the IA polls its rings (0: none).

/// A consumer of the IA polls: opens the IA's window until `until_ns`, then `mark` marks the
/// rings polled ([`mark_polled`]; it may do more meanwhile), then [`still_open`]: if the window
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
    // ring again) before the rings' marks just written: producers would skip the doorbell
    // with nobody left to look.
    if !still_open(hot) {
        stop();
    }
    r
}

/// After marking rings polled: true if the IA's window is still open (its closer stops
/// those rings after closing it); false if it was closed, and the writer must stop the rings
/// itself. Fenced against [`close_window`] and [`expire_window`].
pub(crate) fn still_open<W: Word>(hot: &W) -> bool {
    W::fence(Ordering::SeqCst);
    hot.load(Ordering::SeqCst) != 0
}

/// A consumer goes to sleep: closes the IA's window. True if it was open: the caller then
/// stops every ring ([`stop_polling`]).
pub(crate) fn close_window<W: Word>(hot: &W) -> bool {
    let was = hot.swap(0, Ordering::SeqCst);
    W::fence(Ordering::SeqCst);
    was != 0
}

/// The progress thread found the IA's window at `seen` (0: closed): if it ran out by `now_ns`
/// (its consumer stopped without saying so), closes it and returns true: the caller then stops
/// every ring and handles what no doorbell announced.
pub(crate) fn expire_window<W: Word>(hot: &W, seen: u64, now_ns: u64) -> bool {
    if seen == 0 || seen > now_ns {
        return false;
    }
    hot.store(0, Ordering::SeqCst);
    W::fence(Ordering::SeqCst);
    true
}

/// The progress thread is about to sleep with no window open (its idle timeout): marks `idle`,
/// then looks at the IA's window once more. False if a consumer opened one meanwhile: the
/// thread then waits for that window's end instead. Fenced against [`poll_window`]'s look
/// ([`still_open`]): of a consumer opening the window and the thread going to sleep idle, the
/// consumer finds the mark ([`kick_idle`]) or the thread finds the window.
pub(crate) fn begin_idle<W: Word>(idle: &W, hot: &W) -> bool {
    idle.store(1, Ordering::SeqCst);
    W::fence(Ordering::SeqCst);
    if hot.load(Ordering::SeqCst) != 0 {
        idle.store(0, Ordering::SeqCst);
        return false;
    }
    true
}

/// After [`poll_window`] opened the IA's window from closed: true if the progress thread sleeps
/// idle ([`begin_idle`]) and must be woken, so that it looks at the rings when this window
/// ends (its consumer may stop polling without a word, leaving records no doorbell announced).
pub(crate) fn kick_idle<W: Word>(idle: &W) -> bool {
    idle.load(Ordering::SeqCst) != 0
}

#[cfg(test)]
mod tests {
    use super::*;

    const NOW: u64 = 10_000_000;

    #[test]
    fn a_producer_skips_the_bell_only_while_the_ring_is_marked_polled() {
        let (tail, head, polling) = (AtomicU64::new(0), AtomicU64::new(0), AtomicU64::new(0));
        publish(&tail, 64);
        assert!(needs_bell(&polling), "nobody polls");
        mark_polled(&polling);
        assert!(!needs_bell(&polling), "polled");
        assert!(
            stop_polling(&polling, &tail, &head),
            "the record no bell announced"
        );
        assert!(needs_bell(&polling), "stopped");
        head.store(64, Ordering::Relaxed);
        mark_polled(&polling);
        assert!(!stop_polling(&polling, &tail, &head), "nothing unannounced");
        assert!(needs_bell(&polling));
    }

    #[test]
    fn a_poll_writes_the_rings_mark_only_when_it_is_clear() {
        let polling = AtomicU64::new(0);
        mark_polled(&polling);
        assert_eq!(polling.load(Ordering::Relaxed), 1);
        // Any mark counts: a set one is not written again (no shared-line write per poll).
        polling.store(7, Ordering::Relaxed);
        mark_polled(&polling);
        assert_eq!(polling.load(Ordering::Relaxed), 7);
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
        poll_window(&hot, NOW, || mark_polled(&polling), || stopped = true);
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

/// The loom models: the functions above on loom's atomics, every interleaving (and every
/// weak-memory outcome loom explores) of the threads that race in the link. Run by
/// `RUSTFLAGS="--cfg loom" LOOM_MAX_PREEMPTIONS=3 cargo test -p dapl --release --lib loom`.
#[cfg(all(test, loom))]
mod loom_models {
    use super::*;
    use loom::sync::atomic::AtomicUsize;
    use loom::sync::Arc;
    use loom::thread;

    impl Word for loom::sync::atomic::AtomicU64 {
        fn load(&self, order: Ordering) -> u64 {
            loom::sync::atomic::AtomicU64::load(self, order)
        }
        fn store(&self, val: u64, order: Ordering) {
            loom::sync::atomic::AtomicU64::store(self, val, order)
        }
        fn swap(&self, val: u64, order: Ordering) -> u64 {
            loom::sync::atomic::AtomicU64::swap(self, val, order)
        }
        fn fence(order: Ordering) {
            loom::sync::atomic::fence(order)
        }
    }

    type W = loom::sync::atomic::AtomicU64;

    /// A clock that stands still: the IA's windows are open (ahead of it) or closed (0).
    const NOW: u64 = 10_000_000;
    /// An IA's window of 4 ms.
    const WINDOW: u64 = 4_000_000;
    /// A record's bytes.
    const REC: u64 = 64;

    /// One ring's control words, one word of its records and the two doorbells (counts of
    /// rings).
    struct Ring {
        /// The first record's first word, 0 until it is published.
        first: W,
        /// Another word of the first record (a record is copied in and out as atomic words).
        record: W,
        tail: W,
        head: W,
        waiting: W,
        polling: W,
        /// The consumer's doorbell.
        consumer_bell: AtomicUsize,
        /// The producer's doorbell (its own, rung by the consumer).
        producer_bell: AtomicUsize,
    }

    impl Ring {
        fn new(tail: u64, head: u64, polling: u64) -> Arc<Ring> {
            Arc::new(Ring {
                first: W::new(0),
                record: W::new(0),
                tail: W::new(tail),
                head: W::new(head),
                waiting: W::new(0),
                polling: W::new(polling),
                consumer_bell: AtomicUsize::new(0),
                producer_bell: AtomicUsize::new(0),
            })
        }

        fn rings(bell: &AtomicUsize) -> bool {
            bell.load(Ordering::Relaxed) > 0
        }
    }

    /// A producer publishes a record while its consumer, polling the ring, goes to sleep: the
    /// record is seen by the poll (its first word), or the consumer's look at the tail after it
    /// stopped polling finds it, or the producer rings the doorbell; and a consumer that sees
    /// the first word or the tail sees the record's other bytes and its first word. (Fails
    /// without either fence of `needs_bell` / `stop_polling`, with the look before the
    /// publish, with a Relaxed store of the first word or of the tail, or with a Relaxed
    /// look at the tail in `pending`.)
    #[test]
    fn loom_a_published_record_is_seen_by_the_consumer_or_rung() {
        loom::model(|| {
            let r = Ring::new(0, 0, 1);
            let p = {
                let r = r.clone();
                thread::spawn(move || {
                    // `Producer::push` then `publish`: the other bytes, the first word, the
                    // tail.
                    r.record.store(42, Ordering::Relaxed);
                    r.first.store(REC, Ordering::Release);
                    publish(&r.tail, REC);
                    if needs_bell(&r.polling) {
                        r.consumer_bell.fetch_add(1, Ordering::Relaxed);
                    }
                })
            };
            // What `Consumer::peek` reads: the first word (Acquire), then the rest.
            let take = |r: &Ring| {
                assert_eq!(r.first.load(Ordering::Acquire), REC, "a record not seen");
                assert_eq!(
                    r.record.load(Ordering::Relaxed),
                    42,
                    "a record seen unwritten"
                );
                true
            };
            // The consumer polls once (`ring::pending`: the word at its head), then goes to
            // sleep.
            let polled = r.first.load(Ordering::Relaxed) != 0 && take(&r);
            let after = stop_polling(&r.polling, &r.tail, &r.head) && take(&r);
            p.join().unwrap();
            assert!(
                polled || after || Ring::rings(&r.consumer_bell),
                "a record published while its consumer went to sleep was left behind"
            );
        });
    }

    /// A producer finds the ring full while its consumer frees a record: it finds the room
    /// on its second look, or the consumer takes its waiting flag and rings it. (Fails without
    /// either fence of `look_or_wait` / `consume`.)
    #[test]
    fn loom_a_full_producer_is_woken_once_room_is_freed() {
        const CAP: u64 = 2 * REC;
        loom::model(|| {
            // Full: two records published (the tail at CAP), none consumed.
            let r = Ring::new(CAP, 0, 0);
            let c = {
                let r = r.clone();
                thread::spawn(move || {
                    if consume(&r.head, &r.waiting, REC) {
                        r.producer_bell.fetch_add(1, Ordering::Relaxed);
                    }
                })
            };
            let room = look_or_wait(&r.head, &r.waiting, |head| {
                let used = CAP - head; // the tail is at CAP
                Ok::<_, ()>(CAP - used >= REC)
            });
            c.join().unwrap();
            assert!(
                room == Ok(true) || Ring::rings(&r.producer_bell),
                "a producer waiting for room was never told of it"
            );
        });
    }

    /// The IA's window and one of its rings, as two consumer threads use them.
    struct Ia {
        hot: W,
        ring: Arc<Ring>,
    }

    impl Ia {
        /// One consumer polls the IA (its window open until `NOW` + 4 ms, the ring marked).
        fn polled() -> Arc<Ia> {
            Arc::new(Ia {
                hot: W::new(NOW + WINDOW),
                ring: Ring::new(0, 0, 1),
            })
        }

        /// `Progress::poll` of the link: the IA's window opened later on, the ring marked.
        fn poll(&self, until: u64) {
            let ring = &self.ring;
            poll_window(
                &self.hot,
                until,
                || mark_polled(&ring.polling),
                || self.stop(),
            );
        }

        /// `Progress::idle` of the link.
        fn idle(&self) {
            if close_window(&self.hot) {
                self.stop();
            }
        }

        /// The link's `end_polling`: every ring stopped, what came meanwhile handed on.
        fn stop(&self) {
            let r = &self.ring;
            if stop_polling(&r.polling, &r.tail, &r.head) {
                r.consumer_bell.fetch_add(1, Ordering::Relaxed);
            }
        }

        /// No ring is marked polled unless the IA's window is open (someone polls, and will
        /// close it).
        fn check(&self) {
            let hot = self.hot.load(Ordering::Relaxed);
            let ring = self.ring.polling.load(Ordering::Relaxed);
            assert!(
                hot != 0 || ring == 0,
                "the ring is marked polled ({ring}) with the IA's window closed: \
                 its producer skips the doorbell and nobody polls"
            );
        }
    }

    /// One thread polls (marking the ring again) while another, which had polled, goes
    /// to sleep (closing the IA's window): no ring is left marked with the IA's window closed.
    /// (The hang of dapltest over shm; fails with the look before the ring's mark is
    /// written, or without the fences of `still_open` / `close_window`.)
    #[test]
    fn loom_a_poll_racing_an_idle_leaves_no_ring_marked_polled_with_nobody_polling() {
        loom::model(|| {
            let ia = Ia::polled();
            let b = {
                let ia = ia.clone();
                thread::spawn(move || ia.idle())
            };
            ia.poll(NOW + 2 * WINDOW);
            b.join().unwrap();
            ia.check();
        });
    }

    /// The same with the progress thread ending its spin meanwhile (`Shared::spin`: its own
    /// windows written on the rings, then the look at the IA's).
    #[test]
    fn loom_a_spin_ending_meanwhile_leaves_no_ring_marked_polled_with_nobody_polling() {
        loom::model(|| {
            let ia = Ia::polled();
            let b = {
                let ia = ia.clone();
                thread::spawn(move || ia.idle())
            };
            let spin = {
                let ia = ia.clone();
                thread::spawn(move || {
                    mark_polled(&ia.ring.polling);
                    if !still_open(&ia.hot) {
                        ia.stop();
                    }
                })
            };
            ia.poll(NOW + 2 * WINDOW);
            b.join().unwrap();
            spin.join().unwrap();
            ia.check();
        });
    }

    /// A poll while the progress thread finds the IA's window run out (read before the poll
    /// reopened it: the thread closes the new window too): no ring is left marked.
    #[test]
    fn loom_a_window_running_out_during_a_poll_leaves_no_ring_marked_polled() {
        loom::model(|| {
            let ia = Ia::polled();
            let progress = {
                let ia = ia.clone();
                thread::spawn(move || {
                    let seen = ia.hot.load(Ordering::Relaxed);
                    // A clock past every window.
                    if expire_window(&ia.hot, seen, u64::MAX) {
                        ia.stop();
                    }
                })
            };
            ia.poll(NOW + 2 * WINDOW);
            progress.join().unwrap();
            ia.check();
        });
    }

    /// A consumer opens the IA's window (from closed) while the progress thread goes to sleep
    /// idle: either the thread sees the window and does not sleep idle, or the consumer sees the
    /// thread's mark and wakes it. (Fails without the fence in `begin_idle`.)
    #[test]
    fn loom_a_window_opened_during_the_idle_sleep_wakes_the_progress_thread() {
        loom::model(|| {
            let (hot, idle) = (Arc::new(W::new(0)), Arc::new(W::new(0)));
            let (h, i) = (hot.clone(), idle.clone());
            let thread = thread::spawn(move || begin_idle(&*i, &*h));
            poll_window(&*hot, NOW + 1, || (), || ());
            let kicked = kick_idle(&*idle);
            let slept_idle = thread.join().unwrap();
            assert!(
                !slept_idle || kicked,
                "the thread sleeps idle through a window nobody woke it for"
            );
        });
    }
}
