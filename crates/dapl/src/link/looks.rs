//! How often each thread has looked for completions (`dequeue`, `wait`, `cno_wait`: every
//! link's `Progress::flush` counts one), as a number that also names the thread: two posts
//! that read the same value came from one thread with no look between them, so the second
//! continues its poster's run. A ping-pong's every post begins a run (it follows the look that
//! found the answer); a stream's posts continue one. The tcp link holds such runs back as
//! bursts and writes only a run's first post straight from its poster (`send_inline`).

use std::sync::atomic::{AtomicU64, Ordering};

/// `looks()` counts in its low `LOOKS_BITS` bits under a number of the thread's own.
pub(crate) const LOOKS_BITS: u32 = 40;
/// The count's bits of `looks()`.
pub(crate) const LOOKS_MASK: u64 = (1 << LOOKS_BITS) - 1;

static NEXT_THREAD: AtomicU64 = AtomicU64::new(1);

thread_local! {
    static LOOKS: std::cell::Cell<u64> =
        std::cell::Cell::new(NEXT_THREAD.fetch_add(1, Ordering::Relaxed) << LOOKS_BITS);
}

/// This thread's looks for completions, under its own number.
pub(crate) fn looks() -> u64 {
    LOOKS.with(|l| l.get())
}

/// This thread looks for completions.
pub(crate) fn note_look() {
    LOOKS.with(|l| l.set(l.get().wrapping_add(1)));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_look_changes_the_mark_and_threads_never_share_one() {
        let before = looks();
        assert_eq!(looks(), before, "no look, the same mark");
        note_look();
        assert_ne!(looks(), before);
        let other = std::thread::spawn(looks).join().unwrap();
        assert_ne!(other >> LOOKS_BITS, looks() >> LOOKS_BITS);
    }
}
