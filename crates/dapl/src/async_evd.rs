//! Awaiting an EVD's events from async Rust (feature `tokio`).
//!
//! [`AsyncEvd`] wraps an [`Evd`] and registers its wait fd ([`Evd::wait_fd`]) with tokio's
//! reactor ([`AsyncFd`]); [`AsyncEvd::next_event`] returns the next event, waiting without a
//! thread for one to arrive. Any number of `AsyncEvd`s, on any number of EVDs, can be awaited
//! from one task (`tokio::select!`, a `JoinSet`, or one after the other).
//!
//! ```no_run
//! # async fn demo(evd: dapl::Evd) -> dapl::Result<()> {
//! use dapl::async_evd::AsyncEvd;
//! let events = AsyncEvd::new(&evd)?; // inside a tokio runtime with IO enabled
//! loop {
//!     let event = events.next_event().await?;
//!     println!("{event:?}");
//! }
//! # }
//! ```
//!
//! # How it waits, and why it loses no wake-up
//! The wait fd is an eventfd that the EVD writes when its count of signalled events goes from
//! zero to one, and reads (back to zero) when the last of them is dequeued: readable exactly
//! while a signalled event is queued. Tokio watches it edge-triggered: it reports the
//! write, once, and then considers the fd ready until the wrapper clears that readiness.
//! [`AsyncEvd::next_event`] therefore:
//! 1. dequeues first, and returns the event if there is one: an event queued while nobody
//!    waited (or a second one behind the event that made the edge) is returned without a new
//!    edge, since a write happens only at zero-to-one;
//! 2. when the EVD is empty (so the fd was read back to zero, under the EVD's lock), awaits
//!    readiness; when ready, clears it and goes back to 1. A signalled event queued between
//!    the empty dequeue and the clear had its edge swallowed by the clear, but the dequeue of
//!    step 1 finds it. One queued after that dequeue found the EVD empty again makes a new
//!    edge (the count leaves zero once more), after the clear: it ends the next wait.
//!
//! So the wrapper drains the EVD before it ever waits, and never waits on readiness it has not
//! first tested by a dequeue. It does not spin either: each round clears the readiness it
//! consumed, and only a new write makes the fd ready again.
//!
//! Unsignalled events (`CompletionFlags::UNSIGNALLED`, receives that `SOLICITED_WAIT` does
//! not wake for) do not write the fd, as they do not wake [`Evd::wait`]: `next_event` returns
//! them when it next dequeues, at the latest behind the next signalled event.
//!
//! Freeing: `next_event` on a freed EVD (`Evd::free`, or its IA closed) fails as `dequeue`
//! does, and a task already asleep in `next_event` when the EVD is freed wakes with that
//! error (freeing makes the wait fd readable for good, as a closed socket is).
//!
//! # Cancel safety
//! An event is dequeued and returned in the same poll, with no await point in between: a
//! `next_event` future dropped at its await (a `select!` branch that lost, a timeout) has
//! taken nothing, and the event stays queued for the next call.
//!
//! # Progress
//! Before the task sleeps, the wrapper tells the IA's link that this thread stops polling
//! (as [`Evd::wait`] does before it sleeps): the tcp and shm links otherwise leave inbound data
//! to a consumer that polled an empty receive EVD for a few milliseconds, and the event would
//! come that much later.

use std::future::{poll_fn, Future};
use std::os::fd::OwnedFd;
use std::pin::pin;
use std::task::{Context, Poll};

use ::tokio::io::unix::AsyncFd;

use crate::error::{err, ErrorType, Object, Result, Subtype};
use crate::evd::Evd;
use crate::event::Event;

/// An [`Evd`] whose events can be awaited (`DAT_EVD` with its wait fd on tokio's reactor).
///
/// It holds a handle to the EVD and its own duplicate of the wait fd, so several `AsyncEvd`s
/// may wrap one EVD (each task then has its own registration). Dropping it deregisters the fd
/// and keeps queued events queued.
#[derive(Debug)]
pub struct AsyncEvd {
    evd: Evd,
    fd: AsyncFd<OwnedFd>,
}

impl AsyncEvd {
    /// Registers `evd`'s wait fd with the current tokio runtime's reactor.
    ///
    /// `DAT_INSUFFICIENT_RESOURCES` if the fd cannot be made or registered; an error of
    /// [`Evd::wait_fd`] if the EVD was freed.
    ///
    /// # Panics
    /// Outside a tokio runtime, or in one built without IO (`enable_io`), as
    /// [`AsyncFd::new`] does.
    pub fn new(evd: &Evd) -> Result<AsyncEvd> {
        const OP: &str = "evd_async";
        let object = Object::new("evd", evd.id());
        let own = evd.wait_fd()?.try_clone_to_owned().or_else(|e| {
            err(
                ErrorType::InsufficientResources,
                Subtype::ResourceDevice,
                OP,
                object,
                format!("cannot duplicate the wait fd: {e}"),
            )
        })?;
        // `AsyncFd::new` is deprecated from tokio 1.53 (its replacement, `register`, is
        // `unsafe`): it cannot know that an arbitrary `AsRawFd` keeps its fd open and the same.
        // An `OwnedFd` does, for as long as the `AsyncFd` owns it, which is what `register`'s
        // contract asks; so the safe form is kept (and this crate stays free of `unsafe`).
        #[allow(deprecated)]
        let fd = AsyncFd::new(own).or_else(|e| {
            err(
                ErrorType::InsufficientResources,
                Subtype::ResourceDevice,
                OP,
                object,
                format!("cannot register the wait fd with tokio: {e}"),
            )
        })?;
        Ok(AsyncEvd {
            evd: evd.clone(),
            fd,
        })
    }

    /// The EVD (for `query`, `post_se`, and the other operations).
    pub fn evd(&self) -> &Evd {
        &self.evd
    }

    /// The next event: at once if one is queued, else when one arrives
    /// (`dat_evd_dequeue`, waiting as `dat_evd_wait` with a threshold of 1 would).
    ///
    /// Cancel safe: dropped before it completes, it has dequeued nothing (module docs). Any
    /// number of tasks may await one `AsyncEvd`; each event goes to one of them. Errors are
    /// [`Evd::dequeue`]'s (the EVD was freed, also by its IA's close), or
    /// `DAT_INTERNAL_ERROR` if the tokio runtime is shutting down.
    pub async fn next_event(&self) -> Result<Event> {
        loop {
            if let Some(ev) = self.evd.dequeue()? {
                return Ok(ev);
            }
            // Empty: the fd was read back to zero under the EVD's lock, so the next signalled
            // event writes it again (module docs, step 2).
            let mut readable = pin!(self.fd.readable());
            let ready = poll_fn(|cx| {
                let r = readable.as_mut().poll(cx);
                if r.is_pending() {
                    self.going_to_sleep();
                }
                r
            })
            .await;
            match ready {
                // Cleared before the next dequeue: an event that came since the last one is
                // found by it; a later one makes a new edge.
                Ok(mut guard) => guard.clear_ready(),
                Err(e) => return self.reactor_error(e),
            }
        }
    }

    /// The poll form of [`next_event`](Self::next_event), for a hand-written `Future` or
    /// `Stream` (`futures::stream::poll_fn(|cx| evd.poll_next_event(cx).map(Some))`).
    ///
    /// `Poll::Pending` has registered `cx`'s waker. Unlike `next_event`, only the waker of the
    /// last call is kept: poll one `AsyncEvd` from one task at a time. As cancel safe as
    /// `next_event`: an event is dequeued only by a call that returns it.
    pub fn poll_next_event(&self, cx: &mut Context<'_>) -> Poll<Result<Event>> {
        loop {
            match self.evd.dequeue() {
                Ok(Some(ev)) => return Poll::Ready(Ok(ev)),
                Ok(None) => {}
                Err(e) => return Poll::Ready(Err(e)),
            }
            match self.fd.poll_read_ready(cx) {
                Poll::Ready(Ok(mut guard)) => guard.clear_ready(),
                Poll::Ready(Err(e)) => return Poll::Ready(self.reactor_error(e)),
                Poll::Pending => {
                    self.going_to_sleep();
                    return Poll::Pending;
                }
            }
        }
    }

    /// This thread is about to stop polling the EVD: hands the link back to its own thread
    /// now, not at the end of its polling window (`Progress::idle`, as `Evd::wait` before it
    /// sleeps). Only undoes what this thread's polls (the dequeue just before) did.
    fn going_to_sleep(&self) {
        if let Some(ia) = self.evd.0.ia.upgrade() {
            ia.progress.idle();
        }
    }

    fn reactor_error<T>(&self, e: std::io::Error) -> Result<T> {
        err(
            ErrorType::InternalError,
            Subtype::NoSubtype,
            "evd_async",
            Object::new("evd", self.evd.id()),
            format!("tokio's reactor: {e}"),
        )
    }
}
