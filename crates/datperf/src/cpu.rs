//! CPU time of a timed loop: user + system time of this whole process (`getrusage`
//! `RUSAGE_SELF`, nix's safe wrapper; rustix 0.38 has no `getrusage`), read before and after.
//! Every thread counts, those that ended meanwhile too: in a self-contained run both sides of a
//! measurement and the library's progress threads (their work is part of what a transport
//! costs); in a `--client` run, the client's process only.

use std::io;
use std::time::Duration;

use nix::sys::resource::{getrusage, UsageWho};
use nix::sys::time::TimeVal;

/// Whose CPU time a figure counts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scope {
    /// Both sides: server and client run in this process (the default, self-contained run).
    Both,
    /// The client's process only (`--client`: the server's time is not reported back).
    Client,
}

impl Scope {
    /// The name `--json` carries: `both` or `client`.
    pub fn name(self) -> &'static str {
        match self {
            Scope::Both => "both",
            Scope::Client => "client",
        }
    }

    /// What the table's note says.
    pub fn describe(self) -> &'static str {
        match self {
            Scope::Both => "both sides (this one process, every thread)",
            Scope::Client => "the client process only (the server's is not counted)",
        }
    }
}

fn duration(t: TimeVal) -> Duration {
    let secs = u64::try_from(t.tv_sec()).unwrap_or(0);
    let micros = u32::try_from(t.tv_usec()).unwrap_or(0);
    Duration::from_secs(secs) + Duration::from_micros(u64::from(micros))
}

/// User + system CPU time this process has used so far, every thread counted.
pub fn process_time() -> io::Result<Duration> {
    let u = getrusage(UsageWho::RUSAGE_SELF).map_err(io::Error::from)?;
    Ok(duration(u.user_time()) + duration(u.system_time()))
}

/// The CPU time of one or more timed loops, with what they moved.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct Cpu {
    /// User + system seconds.
    pub secs: f64,
    /// Operations: messages (bandwidth, rate) or iterations (latency: request and reply),
    /// warm-up included.
    pub ops: u64,
    /// Payload bytes: `ops` times the message size.
    pub bytes: u64,
}

impl Cpu {
    /// Both loops' time over both loops' work (rounds are pooled).
    pub fn add(self, o: Cpu) -> Cpu {
        Cpu {
            secs: self.secs + o.secs,
            ops: self.ops + o.ops,
            bytes: self.bytes + o.bytes,
        }
    }

    /// The sum of many.
    pub fn sum<'a>(v: impl IntoIterator<Item = &'a Cpu>) -> Cpu {
        v.into_iter().fold(Cpu::default(), |a, b| a.add(*b))
    }

    /// Microseconds of CPU per operation (NaN without operations).
    pub fn us_per_op(&self) -> f64 {
        self.secs * 1e6 / self.ops as f64
    }

    /// Nanoseconds of CPU per payload byte, which is also seconds per GB (NaN without bytes).
    pub fn ns_per_byte(&self) -> f64 {
        self.secs * 1e9 / self.bytes as f64
    }
}

/// Runs the timed loop `f`, which makes `ops` operations of `size` bytes, and returns its
/// result with the CPU time the process used meanwhile.
pub fn metered<T, E: From<io::Error>>(
    ops: u64,
    size: u64,
    f: impl FnOnce() -> Result<T, E>,
) -> Result<(T, Cpu), E> {
    let before = process_time()?;
    let v = f()?;
    let after = process_time()?;
    Ok((
        v,
        Cpu {
            secs: after.saturating_sub(before).as_secs_f64(),
            ops,
            bytes: ops * size,
        },
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The CPU time of this thread alone.
    fn thread_time() -> Duration {
        let u = getrusage(UsageWho::RUSAGE_THREAD).unwrap();
        duration(u.user_time()) + duration(u.system_time())
    }

    /// Two threads that each burn 30 ms of their own CPU time make at least 60 ms of the
    /// process's, the one that ended before the second reading too. (Other tests of this
    /// binary run in parallel threads of the same process, so there is no upper bound.)
    #[test]
    fn counts_every_thread() {
        let burn = || {
            let start = thread_time();
            let mut x = 0u64;
            while thread_time() - start < Duration::from_millis(30) {
                x = std::hint::black_box(x.wrapping_add(1));
            }
        };
        let ((), c) = metered::<_, io::Error>(10, 8, || {
            std::thread::spawn(burn).join().unwrap();
            burn();
            Ok(())
        })
        .unwrap();
        assert!(c.secs >= 0.06, "{c:?}");
        assert_eq!((c.ops, c.bytes), (10, 80));
        assert!((c.us_per_op() - c.secs * 1e5).abs() < 1e-6);
        assert!((c.ns_per_byte() - c.secs * 1e9 / 80.0).abs() < 1e-3);
    }

    #[test]
    fn rounds_pool() {
        let a = Cpu {
            secs: 1.0,
            ops: 10,
            bytes: 100,
        };
        let b = Cpu {
            secs: 3.0,
            ops: 30,
            bytes: 300,
        };
        let s = Cpu::sum(&[a, b]);
        assert_eq!(s.us_per_op(), 1e5);
        assert_eq!(s.ns_per_byte(), 1e7);
        assert!(Cpu::default().us_per_op().is_nan());
    }
}
