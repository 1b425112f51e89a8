//! Which CPU each side of a measurement's timed loop runs on.
//!
//! The two sides of a ping-pong both spin. Left to the scheduler, a fresh pair (each
//! measurement round connects anew, and the server side is woken by the connection) often
//! starts on one CPU and stays there for the whole round although another CPU is idle: then
//! every half round trip waits for a yield, and an 8-byte shm ping-pong measured 1.7 us
//! instead of 0.3-0.8 (a round in three or four, here, on two CPUs). So on a machine that
//! gives the process two CPUs or more, each side's timed loop runs on a CPU of its own, the
//! client's on the first the process may use and the server's on the second, and the same
//! for every baseline (raw TCP, the shm floors), so a ratio compares like with like.
//! `--no-pin` leaves placement to the scheduler. Only the timed loop is pinned: the library's
//! own threads (started when an IA opens) keep the process's mask.

use std::sync::OnceLock;

use nix::sched::{sched_getaffinity, sched_setaffinity, CpuSet};
use nix::unistd::Pid;

/// A side of a measurement.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Side {
    /// The client: the side that times.
    Client = 0,
    /// The server: the side that answers.
    Server = 1,
}

/// The client's and the server's CPU, once chosen; None: placement is the scheduler's.
static CPUS: OnceLock<Option<[usize; 2]>> = OnceLock::new();

/// Chooses the CPUs (the first two of the calling thread's mask, if it has two and `enabled`).
/// Called once, first thing; later calls change nothing.
pub fn init(enabled: bool) {
    CPUS.get_or_init(|| if enabled { first_two() } else { None });
}

/// The two CPUs, if pinning is on.
pub fn cpus() -> Option<[usize; 2]> {
    CPUS.get().copied().flatten()
}

fn first_two() -> Option<[usize; 2]> {
    let set = sched_getaffinity(Pid::from_raw(0)).ok()?;
    let mut allowed = (0..CpuSet::count()).filter(|&c| set.is_set(c).unwrap_or(false));
    Some([allowed.next()?, allowed.next()?])
}

/// Keeps the current thread on one CPU; its mask is restored on drop.
#[must_use = "the thread is pinned only while this lives"]
pub struct Pinned(CpuSet);

/// Pins the current thread to `side`'s CPU, if pinning is on (and the kernel lets it).
pub fn pin(side: Side) -> Option<Pinned> {
    let cpu = cpus()?[side as usize];
    let old = sched_getaffinity(Pid::from_raw(0)).ok()?;
    let mut set = CpuSet::new();
    set.set(cpu).ok()?;
    sched_setaffinity(Pid::from_raw(0), &set).ok()?;
    Some(Pinned(old))
}

impl Drop for Pinned {
    fn drop(&mut self) {
        let _ = sched_setaffinity(Pid::from_raw(0), &self.0);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pinned_thread_runs_on_its_sides_cpu_and_gets_its_mask_back() {
        init(true);
        let Some([client, server]) = cpus() else {
            return; // one CPU: nothing to pin
        };
        assert_ne!(client, server);
        let before = sched_getaffinity(Pid::from_raw(0)).unwrap();
        std::thread::scope(|s| {
            s.spawn(|| {
                let _p = pin(Side::Server).expect("pinned");
                assert_eq!(nix::sched::sched_getcpu().unwrap(), server);
            });
        });
        {
            let _p = pin(Side::Client).expect("pinned");
            assert_eq!(nix::sched::sched_getcpu().unwrap(), client);
            let now = sched_getaffinity(Pid::from_raw(0)).unwrap();
            assert!(now.is_set(client).unwrap() && !now.is_set(server).unwrap());
        }
        assert_eq!(sched_getaffinity(Pid::from_raw(0)).unwrap(), before);
    }
}
