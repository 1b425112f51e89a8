//! One process-wide timer thread for deadlines that need no precision (connect timeouts, dial
//! retries). A timer whose work became moot may be [`cancel`]led, which drops its closure at
//! once; a callback must still check for itself whether it is relevant (callers pass attempt
//! numbers and weak references), since it may already be running when it is cancelled, and
//! most timers are never cancelled.
//!
//! Pending timers are ordered by (deadline, id) in a `BTreeMap`, with a map from id to deadline
//! beside it: arming, cancelling and firing are O(log n) under the one lock, so a connection
//! storm that arms and cancels a connect timeout per connection stays O(n log n).

use std::collections::{BTreeMap, HashMap};
use std::sync::{Condvar, Mutex, OnceLock};
use std::time::Instant;

type Callback = Box<dyn FnOnce() + Send>;

#[derive(Default)]
struct Pending {
    /// The timers in the order they fire.
    by_deadline: BTreeMap<(Instant, u64), Callback>,
    /// Each pending timer's deadline, by id (for [`cancel`]).
    deadline_of: HashMap<u64, Instant>,
    /// The last id given out.
    last_id: u64,
}

struct Timers {
    pending: Mutex<Pending>,
    cond: Condvar,
}

fn timers() -> &'static Timers {
    static T: OnceLock<&'static Timers> = OnceLock::new();
    T.get_or_init(|| {
        let t: &'static Timers = Box::leak(Box::new(Timers {
            pending: Mutex::new(Pending::default()),
            cond: Condvar::new(),
        }));
        std::thread::Builder::new()
            .name("dapl-timer".into())
            .spawn(move || run(t))
            .expect("spawn the timer thread");
        t
    })
}

fn run(t: &'static Timers) {
    let mut g = t.pending.lock().unwrap_or_else(|p| p.into_inner());
    loop {
        let now = Instant::now();
        match g.by_deadline.first_key_value().map(|(&(at, _), _)| at) {
            Some(at) if at <= now => {
                let ((_, id), f) = g.by_deadline.pop_first().expect("a first entry");
                g.deadline_of.remove(&id);
                drop(g);
                f();
                g = t.pending.lock().unwrap_or_else(|p| p.into_inner());
            }
            Some(at) => {
                g = t
                    .cond
                    .wait_timeout(g, at - now)
                    .unwrap_or_else(|p| p.into_inner())
                    .0;
            }
            None => g = t.cond.wait(g).unwrap_or_else(|p| p.into_inner()),
        }
    }
}

/// Runs `f` at `at` (in the timer thread). Returns the timer's id, for [`cancel`].
pub(crate) fn at(at: Instant, f: impl FnOnce() + Send + 'static) -> u64 {
    let t = timers();
    let mut g = t.pending.lock().unwrap_or_else(|p| p.into_inner());
    g.last_id += 1;
    let id = g.last_id;
    g.by_deadline.insert((at, id), Box::new(f));
    g.deadline_of.insert(id, at);
    // The thread sleeps until the first deadline: wake it only if this one is earlier.
    if g.by_deadline
        .first_key_value()
        .is_some_and(|(k, _)| *k == (at, id))
    {
        t.cond.notify_one();
    }
    id
}

/// Drops timer `id` if it has not run yet, with whatever its closure holds (a timer whose
/// work became moot, such as a connect timeout once the attempt ended, would otherwise keep
/// its memory until it fires). Does nothing if it ran or is running.
pub(crate) fn cancel(id: u64) {
    let t = timers();
    let dropped = {
        let mut g = t.pending.lock().unwrap_or_else(|p| p.into_inner());
        g.deadline_of
            .remove(&id)
            .and_then(|at| g.by_deadline.remove(&(at, id)))
    };
    // The closure is dropped outside the lock (it may hold anything).
    drop(dropped);
}

#[cfg(test)]
mod tests {
    use std::sync::mpsc;
    use std::time::Duration;

    #[test]
    fn timers_fire_in_deadline_order() {
        let (tx, rx) = mpsc::channel();
        let now = std::time::Instant::now();
        for (i, ms) in [(1, 60u64), (0, 20), (2, 100)] {
            let tx = tx.clone();
            super::at(now + Duration::from_millis(ms), move || tx.send(i).unwrap());
        }
        let got: Vec<i32> = (0..3)
            .map(|_| rx.recv_timeout(Duration::from_secs(5)).unwrap())
            .collect();
        assert_eq!(got, [0, 1, 2]);
        assert!(now.elapsed() >= Duration::from_millis(100));
    }

    #[test]
    fn cancelling_one_timer_leaves_the_others_and_a_fired_one_is_a_no_op() {
        let (tx, rx) = mpsc::channel();
        let now = std::time::Instant::now();
        let ids: Vec<u64> = [(0, 20u64), (1, 40), (2, 60), (3, 40)]
            .into_iter()
            .map(|(i, ms)| {
                let tx = tx.clone();
                super::at(now + Duration::from_millis(ms), move || tx.send(i).unwrap())
            })
            .collect();
        super::cancel(ids[1]);
        let got: Vec<i32> = (0..3)
            .map(|_| rx.recv_timeout(Duration::from_secs(5)).unwrap())
            .collect();
        assert_eq!(got, [0, 3, 2], "by deadline, the cancelled one left out");
        // Ids are never reused: cancelling a timer that ran, or twice, finds nothing.
        super::cancel(ids[0]);
        super::cancel(ids[1]);
        let late = super::at(now, move || tx.send(4).unwrap());
        assert!(late > ids[3]);
        assert_eq!(rx.recv_timeout(Duration::from_secs(5)).unwrap(), 4);
        assert!(
            rx.recv_timeout(Duration::from_millis(100)).is_err(),
            "nothing else ran"
        );
    }

    #[test]
    fn a_cancelled_timer_never_runs_and_drops_what_it_holds_at_once() {
        let (tx, rx) = mpsc::channel();
        let held = std::sync::Arc::new(());
        let h2 = held.clone();
        let now = std::time::Instant::now();
        let id = super::at(now + Duration::from_millis(50), move || {
            let _ = &h2;
            tx.send(1).unwrap();
        });
        super::cancel(id);
        assert_eq!(std::sync::Arc::strong_count(&held), 1, "dropped on cancel");
        assert!(
            rx.recv_timeout(Duration::from_millis(200)).is_err(),
            "never ran"
        );
    }
}
