//! Pacing a busy-polling thread: when it gives up its CPU between empty polls.
//!
//! [`Evd::wait`](crate::Evd::wait) polls the link for a while before it sleeps, and a
//! consumer that busy-polls [`Evd::dequeue`](crate::Evd::dequeue) (as `datperf` does) faces
//! the same choice between empty polls: [`Spin::after_empty_poll`] makes it, with a [`Pacer`]
//! per thread. So do the tcp and shm links' progress threads while they spin after handling a
//! connection (docs/architecture.md, "The tcp link", "The shm link").
//! `Evd::wait` yielded after every empty poll until 2026-12-07; pacing its spin put
//! `datperf --link shm -t send -k lat --event` at 0.54 us per half round trip against 1.32
//! (medians of eight runs alternating the two builds), and left the one-CPU runs (`taskset -c
//! 0`, shm and tcp, latency and rate) where they were. The figures below are from datperf's
//! polling loop, which uses the same pacer.

use std::cell::Cell;
use std::time::{Duration, Instant};

/// When a polling thread gives up its CPU between empty polls. A `sched_yield` that finds
/// nobody else waiting for the CPU returns at once (0.2-0.9 us here, depending on what system
/// calls cost in the machine's state), and one that lets another thread run takes 1 us and
/// more: yielding after every empty poll costs a lone poller about half a yield per wait (an
/// answer that lands during the yield waits for it), and yielding rarely costs a poller that
/// shares its CPU with the thread that must answer a long spin before the answer can be sent
/// (on one CPU, 21 us instead of 5 us per tcp half round trip). So a thread yields after every
/// empty poll while its yields let others run, and only every [`Pacer::SPIN_YIELD_EVERY`]-th
/// empty poll (still timed) once [`Pacer::QUICK_TO_SPIN`] yields in a row were quick; one slow
/// yield brings the yield after every poll back. Per thread, across waits (a wait is one half
/// round trip).
///
/// A yield under [`Pacer::QUICK`] is quick; a longer one is quick if the thread's context
/// switches did not change across it (`getrusage(RUSAGE_THREAD)`, read only then): in a
/// machine state where a lone yield took 0.8-1.2 us (2026-12-07), judging by the time alone
/// called one in a few slow, the thread never had 64 quick ones in a row, and the shm
/// ping-pong yielded after every empty poll in most runs (0.80-0.98 us per half round trip
/// instead of 0.34). A bound relative to the thread's fastest yields (twice the fastest) did
/// not do: on one CPU a yield to a peer that yields straight back takes little more than a
/// lone one, and the one-CPU ping-pongs got slower (`taskset -c 0`: tcp 10.2 -> 14.5 us, shm
/// 2.4 -> 5.0 us).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Pacer {
    /// Quick yields in a row.
    quick: u32,
    /// This thread's context switches when last read (after a yield of `QUICK` or more).
    switches: Option<u64>,
    /// Long yields still to count as slow without reading the switches.
    unread: u32,
}

impl Default for Pacer {
    /// [`Pacer::new`].
    fn default() -> Pacer {
        Pacer::new()
    }
}

impl Pacer {
    /// A yield shorter than this let nobody else run.
    pub const QUICK: Duration = Duration::from_micros(1);
    /// Quick yields in a row after which the thread polls without yielding in between.
    pub const QUICK_TO_SPIN: u32 = 64;
    /// After a long yield with a context switch in it, this many more long yields count as
    /// slow unread: a thread that shares its CPU switches at every yield, and a read each
    /// (a system call) made the one-CPU shm ping-pong 20% slower (2.39 -> 2.88 us).
    pub const UNREAD_AFTER_SWITCH: u32 = 63;
    /// While spinning, a yield (timed) every this many empty polls: a progress thread that
    /// needs this CPU waits at most this many polls (every 64th put the tcp ping-pong's 99th
    /// percentile at 1.45x raw TCP's instead of 1.33x; crates/datperf/README.md).
    pub const SPIN_YIELD_EVERY: u32 = 16;

    /// While spinning, at least this long between two yields of a wait: on the shm link an
    /// empty poll takes 50-100 ns, so every 16th poll was a yield (0.2-0.3 us) per microsecond
    /// of the wait, in a round trip of 0.3 us; the tcp link's polls (a system call each) take
    /// this long for 16 anyway.
    pub const SPIN_YIELD_GAP: Duration = Duration::from_micros(5);

    /// A thread starts out yielding after every empty poll.
    pub const fn new() -> Pacer {
        Pacer {
            quick: 0,
            switches: None,
            unread: 0,
        }
    }

    /// Whether to yield after the `spins`-th empty poll of a wait; `since_yield`: the time
    /// since the wait's last yield (or its start), read only when spinning decides by it.
    pub fn yields_after(&self, spins: u32, since_yield: impl FnOnce() -> Duration) -> bool {
        self.quick < Self::QUICK_TO_SPIN
            || (spins % Self::SPIN_YIELD_EVERY == 0 && since_yield() >= Self::SPIN_YIELD_GAP)
    }

    /// A yield took `took`; `switches` reads this thread's context switches (called only for
    /// a yield of [`Pacer::QUICK`] or more; `None`: unknown, the yield counts as slow). A
    /// switch since the last read counts against the yield (one from a preemption between two
    /// reads too: the thread then yields after every poll for a while, the cautious side), and
    /// the next [`Pacer::UNREAD_AFTER_SWITCH`] long yields are slow without a read.
    pub fn yielded(&mut self, took: Duration, switches: impl FnOnce() -> Option<u64>) {
        let quick = took < Self::QUICK
            || if self.unread > 0 {
                self.unread -= 1;
                self.switches = None;
                false
            } else {
                let now = switches();
                let same = now.is_some() && now == self.switches;
                if now.is_some() && self.switches.is_some() && !same {
                    self.unread = Self::UNREAD_AFTER_SWITCH;
                }
                self.switches = now;
                same
            };
        self.quick = if quick {
            self.quick.saturating_add(1)
        } else {
            0
        };
    }
}

/// This thread's context switches, voluntary and involuntary (`getrusage(RUSAGE_THREAD)`,
/// nix's safe wrapper: rustix 0.38 has no `getrusage`).
pub fn thread_switches() -> Option<u64> {
    let u = nix::sys::resource::getrusage(nix::sys::resource::UsageWho::RUSAGE_THREAD).ok()?;
    Some(
        (u.voluntary_context_switches() as u64)
            .wrapping_add(u.involuntary_context_switches() as u64),
    )
}

thread_local! {
    /// This thread's pacer, across its waits (a wait is typically one half round trip).
    static PACER: Cell<Pacer> = const { Cell::new(Pacer::new()) };
}

/// One wait's spin: its empty polls so far and the end of its last yield, for this thread's
/// [`Pacer`].
#[derive(Clone, Copy, Debug)]
pub struct Spin {
    spins: u32,
    last_yield: Instant,
}

impl Spin {
    /// The spin of a wait that began at `start` (the caller's clock read, not another one).
    pub fn new(start: Instant) -> Spin {
        Spin {
            spins: 0,
            last_yield: start,
        }
    }

    /// The empty polls so far (wrapping).
    pub fn spins(&self) -> u32 {
        self.spins
    }

    /// Called after each empty poll: yields the CPU (`sched_yield`) if this thread's [`Pacer`]
    /// says so, and times the yield for it.
    pub fn after_empty_poll(&mut self) {
        self.spins = self.spins.wrapping_add(1);
        let mut pacer = PACER.get();
        if pacer.yields_after(self.spins, || self.last_yield.elapsed()) {
            let t = Instant::now();
            std::thread::yield_now();
            self.last_yield = Instant::now();
            pacer.yielded(self.last_yield - t, thread_switches);
            PACER.set(pacer);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// For yields the pacer must not read the switch count of.
    fn unread() -> Option<u64> {
        panic!("the switch count read for a quick yield")
    }

    #[test]
    fn a_poller_yields_after_every_empty_poll_until_its_yields_are_quick() {
        let quick = Duration::from_nanos(300);
        let slow = Duration::from_micros(3);
        // The wait's last yield long enough ago (the gap is tested below).
        let long = || Pacer::SPIN_YIELD_GAP;
        let mut p = Pacer::new();
        for spins in 1..=Pacer::QUICK_TO_SPIN {
            assert!(p.yields_after(spins, long), "poll {spins}");
            p.yielded(quick, unread);
        }
        // Alone on its CPU: a yield only every SPIN_YIELD_EVERY empty polls.
        let every = Pacer::SPIN_YIELD_EVERY;
        assert!((1..every).all(|spins| !p.yields_after(spins, long)));
        assert!(p.yields_after(every, long) && p.yields_after(3 * every, long));
        p.yielded(quick, unread);
        assert!(!p.yields_after(1, long));
        // One yield that let another thread run: after every empty poll again.
        p.yielded(slow, || Some(1));
        assert!(p.yields_after(1, long) && p.yields_after(2, long));
        p.yielded(quick, unread);
        assert!(
            p.yields_after(3, long),
            "one quick yield does not end the sharing"
        );
    }

    #[test]
    fn a_spinning_poller_yields_at_most_once_per_gap() {
        let mut p = Pacer::new();
        for _ in 0..Pacer::QUICK_TO_SPIN {
            p.yielded(Duration::from_nanos(300), unread);
        }
        let every = Pacer::SPIN_YIELD_EVERY;
        let soon = || Pacer::SPIN_YIELD_GAP / 5;
        assert!(!p.yields_after(every, soon), "a yield 1 us ago: not yet");
        assert!(p.yields_after(every, || Pacer::SPIN_YIELD_GAP));
        // Sharing its CPU, a poller yields after every poll whatever the gap.
        p.yielded(Duration::from_micros(3), || None);
        assert!(p.yields_after(1, soon));
    }

    #[test]
    fn a_long_yield_without_a_context_switch_is_quick() {
        // Slow system calls (a lone yield of 1.2 us): the switch count decides.
        let long = Duration::from_nanos(1200);
        let mut p = Pacer::new();
        // The first long yield has no count to compare with: slow.
        p.yielded(long, || Some(5));
        assert!(p.yields_after(1, || Pacer::SPIN_YIELD_GAP));
        for _ in 0..Pacer::QUICK_TO_SPIN {
            p.yielded(long, || Some(5));
        }
        assert!(!p.yields_after(1, || Pacer::SPIN_YIELD_GAP), "spinning");
        // One that let another thread run (the count moved): after every poll again, and
        // the next long ones are slow unread.
        p.yielded(long, || Some(6));
        assert!(p.yields_after(1, || Duration::ZERO));
        for _ in 0..Pacer::UNREAD_AFTER_SWITCH {
            p.yielded(long, unread);
            assert!(p.yields_after(1, || Duration::ZERO));
        }
        // Then read again: the first read has nothing to compare with, the next decide.
        p.yielded(long, || Some(9));
        for _ in 0..Pacer::QUICK_TO_SPIN {
            p.yielded(long, || Some(9));
        }
        assert!(
            !p.yields_after(1, || Pacer::SPIN_YIELD_GAP),
            "spinning again"
        );
        // Unknown counts are slow (and read again at the next long yield).
        p.yielded(long, || None);
        assert!(p.yields_after(1, || Duration::ZERO));
        p.yielded(long, || Some(9));
        p.yielded(long, || Some(9));
        assert!(
            p.yields_after(1, || Duration::ZERO),
            "one quick yield in a row"
        );
        // A quick yield does not read the count.
        p.yielded(Duration::from_nanos(300), || {
            panic!("read for a quick yield")
        });
    }

    #[test]
    fn a_spin_counts_its_empty_polls_and_keeps_its_start_until_a_yield() {
        let start = Instant::now() - Duration::from_secs(1);
        let mut spin = Spin::new(start);
        assert_eq!(spin.spins(), 0);
        // A fresh thread's pacer yields after every empty poll, so the first moves the time
        // of the last yield past the start.
        std::thread::spawn(move || {
            spin.after_empty_poll();
            assert_eq!(spin.spins(), 1);
            assert!(spin.last_yield > start + Duration::from_millis(500));
            for _ in 0..9 {
                spin.after_empty_poll();
            }
            assert_eq!(spin.spins(), 10);
        })
        .join()
        .unwrap();
    }

    #[test]
    fn thread_switches_counts_a_sleep() {
        let before = thread_switches().expect("getrusage");
        std::thread::sleep(Duration::from_millis(2));
        assert!(thread_switches().expect("getrusage") > before);
    }
}
