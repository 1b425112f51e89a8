//! Counted handles: how dropping the consumer's last handle to an object frees it.
//!
//! Each object kind that is freed on drop keeps its state in an `Arc<XInner>` that the engine,
//! the links, the registry and queued events hold freely. The consumer's handles are different:
//! a [`Handle`] made for the consumer is *counted* in the object's handle count, and when that
//! count falls to zero the object is freed as its `free` would free it (or, where DAT would
//! refuse the free because the object is in use, as soon as it no longer is; see each kind's
//! [`Owned::last_handle_dropped`]).
//!
//! References the library keeps for itself (an endpoint's EVDs, an event waiting in an EVD's
//! queue, the IA's registry) are *internal* handles: not counted, so they never keep an object
//! the consumer let go of, and no cycle through them (endpoint -> EVD -> queued event ->
//! endpoint) outlives the consumer's handles. An event becomes the consumer's when it is
//! dequeued: its handles are counted then ([`Handle::counted`]). A handle counted again after
//! its object was freed names a freed object, as a handle kept past `free` does.
//!
//! The count is separate from the `Arc`'s strong count because the library's own references
//! must not hold an object alive on the consumer's behalf, and must not free it either: the
//! free runs in the thread that dropped the last counted handle, never in the link's thread.

use std::ops::Deref;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

/// An object kind whose consumer handles are counted.
pub(crate) trait Owned: Send + Sync + 'static {
    /// The number of counted handles alive.
    fn handle_count(&self) -> &AtomicUsize;

    /// The consumer's last handle went: free the object (idempotent: a freed object's handles
    /// can be counted again from an old event, and dropped again).
    fn last_handle_dropped(self: &Arc<Self>);
}

/// A handle to an object of kind `T`: counted (the consumer's) or internal (the library's).
/// Cloning keeps the kind.
pub(crate) struct Handle<T: Owned> {
    inner: Arc<T>,
    counted: bool,
}

impl<T: Owned> Handle<T> {
    /// A counted handle (one the consumer gets).
    pub(crate) fn new(inner: Arc<T>) -> Self {
        // SeqCst with the other half of each deferred free (e.g. an EVD's user count): of two
        // threads that each bring one count to zero, at least one sees the other's zero.
        inner.handle_count().fetch_add(1, Ordering::SeqCst);
        Handle {
            inner,
            counted: true,
        }
    }

    /// An internal handle: held by the library, never keeps the object from being freed.
    pub(crate) fn internal(inner: Arc<T>) -> Self {
        Handle {
            inner,
            counted: false,
        }
    }

    /// This handle as one for the consumer (counted): counted in place, the same `Arc` (an
    /// event's handles become the consumer's on every dequeue: no clone and drop of the `Arc`
    /// for it).
    pub(crate) fn counted(mut self) -> Self {
        if !self.counted {
            // SeqCst: as in `new`.
            self.inner.handle_count().fetch_add(1, Ordering::SeqCst);
            self.counted = true;
        }
        self
    }

    /// An internal handle to the same object.
    pub(crate) fn to_internal(&self) -> Self {
        Handle::internal(self.inner.clone())
    }

    /// The object's state.
    pub(crate) fn arc(&self) -> &Arc<T> {
        &self.inner
    }
}

impl<T: Owned> Clone for Handle<T> {
    fn clone(&self) -> Self {
        if self.counted {
            Handle::new(self.inner.clone())
        } else {
            Handle::internal(self.inner.clone())
        }
    }
}

impl<T: Owned> Drop for Handle<T> {
    fn drop(&mut self) {
        if self.counted && self.inner.handle_count().fetch_sub(1, Ordering::SeqCst) == 1 {
            self.inner.last_handle_dropped();
        }
    }
}

impl<T: Owned> Deref for Handle<T> {
    type Target = Arc<T>;

    fn deref(&self) -> &Arc<T> {
        &self.inner
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicUsize;

    #[derive(Default)]
    struct Probe {
        handles: AtomicUsize,
        freed: AtomicUsize,
    }

    impl Owned for Probe {
        fn handle_count(&self) -> &AtomicUsize {
            &self.handles
        }
        fn last_handle_dropped(self: &Arc<Self>) {
            self.freed.fetch_add(1, Ordering::SeqCst);
        }
    }

    #[test]
    fn the_last_counted_handle_frees_and_internal_handles_do_not_count() {
        let p = Arc::new(Probe::default());
        let a = Handle::new(p.clone());
        let b = a.clone();
        let i = a.to_internal();
        let i2 = i.clone();
        drop(a);
        assert_eq!(p.freed.load(Ordering::SeqCst), 0);
        drop(b);
        assert_eq!(
            p.freed.load(Ordering::SeqCst),
            1,
            "internal handles kept it"
        );
        drop(i2);
        // An internal handle counted again (an event dequeued after the free) and dropped
        // frees again: kinds make that a no-op.
        let c = i.counted();
        assert_eq!(p.handles.load(Ordering::SeqCst), 1);
        drop(c);
        assert_eq!(p.freed.load(Ordering::SeqCst), 2);
        assert_eq!(p.handles.load(Ordering::SeqCst), 0);
    }
}
