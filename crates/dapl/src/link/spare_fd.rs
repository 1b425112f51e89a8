//! A descriptor held in reserve for a listener that runs out of them.
//!
//! A listening socket with a connection waiting stays readable; when `accept` fails with
//! `EMFILE`/`ENFILE` the connection stays in the backlog, the progress thread is woken for it
//! again at once (it spins), and the peer waits until its own timeout. With one descriptor in
//! reserve the listener instead frees it, accepts each waiting connection and closes it at once
//! (the peer sees a reset and fails its connect now), and takes the reserve back. libuv and
//! libevent users know this as the EMFILE trick.
//!
//! The reserve is opened when the link starts (a thread started later might find none left)
//! and taken back right after each use; if another thread took that descriptor first, the
//! listener has no reserve until one is free again, and wakes for its queue until then.

use std::os::fd::OwnedFd;

use rustix::fs::{open, Mode, OFlags};

/// One descriptor (`/dev/null`, close-on-exec) kept for [`SpareFd::shed`].
pub(crate) struct SpareFd(Option<OwnedFd>);

impl SpareFd {
    pub(crate) fn new() -> Self {
        let mut s = SpareFd(None);
        s.refill();
        s
    }

    fn refill(&mut self) {
        if self.0.is_none() {
            self.0 = open("/dev/null", OFlags::RDONLY | OFlags::CLOEXEC, Mode::empty()).ok();
        }
    }

    /// Out of descriptors with connections waiting: frees the reserve, runs `refuse` (which
    /// accepts and closes until the backlog is empty or accepting fails), and takes the reserve
    /// back. Without a reserve to free nobody can be refused: it only tries to take one back.
    pub(crate) fn shed(&mut self, refuse: impl FnOnce()) {
        if self.0.take().is_some() {
            refuse();
        }
        self.refill();
    }
}
