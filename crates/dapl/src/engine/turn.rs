//! One thread at a time drains a QP's transmit side ([`Qp::pump`](super::qp::Qp)), and no
//! request to drain is lost: a thread that asks while another drains leaves its request for
//! that one, which drains again before it lets go. Never blocks.
//!
//! The state is one counter: requests made since the draining thread last looked, 0 when
//! nobody drains. Asking is one `fetch_add`; the thread that moved it from 0 drains, then
//! tries to put back 0 where it last saw `n`: a compare-exchange that fails if someone asked
//! meanwhile, and then it drains again. Two atomic read-modify-writes per uncontended turn
//! (the flag pair this replaces took five). Whatever a requester did before asking (queued a
//! work request, cleared a stall) is seen by the drain that answers it: its `fetch_add`
//! releases, and the drainer's compare-exchange that read it acquires.
//!
//! Generic over the counter so that the loom model below runs the same code on loom's atomics
//! (`RUSTFLAGS="--cfg loom"`, scripts/test.sh).

use std::sync::atomic::{AtomicUsize, Ordering};

/// The counter's two operations (std's atomic, or loom's).
pub(crate) trait Counter {
    fn fetch_add(&self, val: usize, order: Ordering) -> usize;
    fn load(&self, order: Ordering) -> usize;
    fn compare_exchange(
        &self,
        current: usize,
        new: usize,
        success: Ordering,
        failure: Ordering,
    ) -> Result<usize, usize>;
}

/// `Counter` for an atomic type with std's method names (std's here, loom's in the model).
macro_rules! counter_for {
    ($t:ty) => {
        impl Counter for $t {
            fn fetch_add(&self, val: usize, order: Ordering) -> usize {
                <$t>::fetch_add(self, val, order)
            }
            fn load(&self, order: Ordering) -> usize {
                <$t>::load(self, order)
            }
            fn compare_exchange(
                &self,
                current: usize,
                new: usize,
                success: Ordering,
                failure: Ordering,
            ) -> Result<usize, usize> {
                <$t>::compare_exchange(self, current, new, success, failure)
            }
        }
    };
}

counter_for!(AtomicUsize);

/// Turns at draining: see the module doc.
#[derive(Default)]
pub(crate) struct Turns<C = AtomicUsize>(C);

impl<C: Counter> Turns<C> {
    /// A counter at 0 (nobody drains).
    #[cfg(all(test, loom))]
    fn with(counter: C) -> Turns<C> {
        Turns(counter)
    }

    /// Asks for a drain: runs `drain` in this thread (again, as long as others asked
    /// meanwhile) if nobody drains now; otherwise returns at once, the draining thread then
    /// runs it once more after this call.
    pub(crate) fn run(&self, drain: impl FnMut()) {
        if self.0.fetch_add(1, Ordering::AcqRel) != 0 {
            return; // the draining thread sees this request when it tries to let go
        }
        self.run_taken(drain);
    }

    /// Takes the turn if nobody drains now (one compare-exchange): then the caller drains
    /// with [`run_taken`](Self::run_taken). A poster that holds the QP's lock already takes a
    /// free turn this way and its drain goes on under that lock, rather than letting go of it
    /// and taking it again.
    pub(crate) fn try_take(&self) -> bool {
        self.0
            .compare_exchange(0, 1, Ordering::AcqRel, Ordering::Relaxed)
            .is_ok()
    }

    /// Nobody drains now, nor has asked to (a load, no read-modify-write): a drain holds the
    /// turn from before its first look at the work until after its last. Only a snapshot: a
    /// thread may ask right after; where every drain looks at the work under a lock the caller
    /// holds, such a drain finds what the caller did under that lock.
    pub(crate) fn idle(&self) -> bool {
        self.0.load(Ordering::Acquire) == 0
    }

    /// Drains in this thread, which holds the turn ([`try_take`](Self::try_take), or `run`'s
    /// increment from 0), again as long as others asked meanwhile, then lets go.
    pub(crate) fn run_taken(&self, mut drain: impl FnMut()) {
        let mut seen = 1;
        loop {
            drain();
            match self
                .0
                .compare_exchange(seen, 0, Ordering::AcqRel, Ordering::Acquire)
            {
                Ok(_) => return,
                Err(now) => seen = now,
            }
        }
    }
}

/// The loom model: every interleaving of threads asking for drains.
#[cfg(all(test, loom))]
mod loom_models {
    use super::*;
    use loom::sync::atomic::AtomicUsize as LoomUsize;
    use loom::sync::Arc;
    use loom::thread;

    counter_for!(LoomUsize);

    /// What the drains work on: items queued (each a relaxed store of its own flag, as a work
    /// request is queued before its poster asks), taken by a drain, and a flag that two
    /// drains at once would find set.
    struct Queue {
        turns: Turns<LoomUsize>,
        queued: [LoomUsize; 3],
        taken: [LoomUsize; 3],
        draining: LoomUsize,
    }

    impl Queue {
        fn new() -> Arc<Queue> {
            Arc::new(Queue {
                turns: Turns::with(LoomUsize::new(0)),
                queued: [LoomUsize::new(0), LoomUsize::new(0), LoomUsize::new(0)],
                taken: [LoomUsize::new(0), LoomUsize::new(0), LoomUsize::new(0)],
                draining: LoomUsize::new(0),
            })
        }

        /// Every item was taken by a drain.
        fn all_taken(&self) {
            for (i, t) in self.taken.iter().enumerate() {
                assert_eq!(t.load(Ordering::Relaxed), 1, "item {i} was never drained");
            }
        }

        fn drain(&self) {
            assert_eq!(
                self.draining.fetch_add(1, Ordering::Relaxed),
                0,
                "two drains at once"
            );
            for (q, t) in self.queued.iter().zip(&self.taken) {
                if q.load(Ordering::Relaxed) == 1 && t.load(Ordering::Relaxed) == 0 {
                    t.store(1, Ordering::Relaxed);
                }
            }
            self.draining.fetch_sub(1, Ordering::Relaxed);
        }

        fn post(&self, i: usize) {
            self.queued[i].store(1, Ordering::Relaxed);
            self.turns.run(|| self.drain());
        }

        /// A poster that queues its item and takes a free turn (`try_take`) rather than
        /// asking, as `Qp::post_send` does under the QP's lock; else it asks as `post` does.
        fn post_taking(&self, i: usize) {
            self.queued[i].store(1, Ordering::Relaxed);
            if self.turns.try_take() {
                self.turns.run_taken(|| self.drain());
            } else {
                self.turns.run(|| self.drain());
            }
        }
    }

    /// Three threads each queue an item and ask for a drain: once all have returned, every
    /// item was taken, and never by two drains at once. (Fails with Relaxed orderings: a
    /// drain then may not see the item whose request made it drain again.)
    #[test]
    fn loom_no_request_to_drain_is_lost_and_drains_never_overlap() {
        loom::model(|| {
            let q = Queue::new();
            let others: Vec<_> = (1..3)
                .map(|i| {
                    let q = q.clone();
                    thread::spawn(move || q.post(i))
                })
                .collect();
            q.post(0);
            for t in others {
                t.join().unwrap();
            }
            q.all_taken();
        });
    }

    /// As above with two posters taking a free turn (`try_take`) and one asking.
    #[test]
    fn loom_posters_that_take_a_free_turn_lose_no_request() {
        loom::model(|| {
            let q = Queue::new();
            let others: Vec<_> = (1..3)
                .map(|i| {
                    let q = q.clone();
                    thread::spawn(move || if i == 1 { q.post_taking(i) } else { q.post(i) })
                })
                .collect();
            q.post_taking(0);
            for t in others {
                t.join().unwrap();
            }
            q.all_taken();
        });
    }
}
