//! One process-wide timer thread for deadlines that need no precision (connect timeouts). A
//! callback must check for itself whether it is still relevant (callers pass attempt numbers and
//! weak references), so nothing is ever cancelled.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::sync::{Condvar, Mutex, OnceLock};
use std::time::Instant;

type Callback = Box<dyn FnOnce() + Send>;

struct Entry(Instant, u64, Callback);

impl PartialEq for Entry {
    fn eq(&self, o: &Self) -> bool {
        (self.0, self.1) == (o.0, o.1)
    }
}
impl Eq for Entry {}
impl PartialOrd for Entry {
    fn partial_cmp(&self, o: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(o))
    }
}
impl Ord for Entry {
    fn cmp(&self, o: &Self) -> std::cmp::Ordering {
        (self.0, self.1).cmp(&(o.0, o.1))
    }
}

struct Timers {
    heap: Mutex<(BinaryHeap<Reverse<Entry>>, u64)>,
    cond: Condvar,
}

fn timers() -> &'static Timers {
    static T: OnceLock<&'static Timers> = OnceLock::new();
    T.get_or_init(|| {
        let t: &'static Timers = Box::leak(Box::new(Timers {
            heap: Mutex::new((BinaryHeap::new(), 0)),
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
    let mut g = t.heap.lock().unwrap_or_else(|p| p.into_inner());
    loop {
        let now = Instant::now();
        match g.0.peek() {
            Some(Reverse(e)) if e.0 <= now => {
                let Reverse(Entry(_, _, f)) = g.0.pop().expect("peeked");
                drop(g);
                f();
                g = t.heap.lock().unwrap_or_else(|p| p.into_inner());
            }
            Some(Reverse(e)) => {
                let d = e.0 - now;
                g = t
                    .cond
                    .wait_timeout(g, d)
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
    let mut g = t.heap.lock().unwrap_or_else(|p| p.into_inner());
    g.1 += 1;
    let seq = g.1;
    g.0.push(Reverse(Entry(at, seq, Box::new(f))));
    t.cond.notify_one();
    seq
}

/// Drops timer `id` if it has not run yet, with whatever its closure holds (a timer whose
/// work became moot, such as a connect timeout once the attempt ended, would otherwise keep
/// its memory until it fires).
pub(crate) fn cancel(id: u64) {
    let t = timers();
    let dropped: Vec<Reverse<Entry>> = {
        let mut g = t.heap.lock().unwrap_or_else(|p| p.into_inner());
        let mut out = Vec::new();
        let kept: Vec<Reverse<Entry>> = std::mem::take(&mut g.0)
            .into_vec()
            .into_iter()
            .filter_map(|e| {
                if e.0 .1 == id {
                    out.push(e);
                    None
                } else {
                    Some(e)
                }
            })
            .collect();
        g.0 = BinaryHeap::from(kept);
        out
    };
    // The closures are dropped outside the lock (they may hold anything).
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
