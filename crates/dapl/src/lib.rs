//! # dapl — the DAT (uDAPL 2.0) object model as a safe Rust API
//!
//! Interface Adapters, Protection Zones, memory regions (LMR/RMR), Endpoints, Event
//! Dispatchers, Shared Receive Queues, Service Points, Connection Requests and CNOs, with the
//! rules of the DAT 2.0 man pages: return codes (with the numbers of `dat_error.h`), endpoint
//! states, flush rules, completion flags and ordering.
//!
//! Below the DAT layer sits a software RNIC engine (queue pairs and a memory table that checks
//! every remote access) and, below that, links that carry messages between engines. The IA
//! name selects the link: `"loopback"` (in-process), `"tcp:<ipv4>"` (iWARP over kernel TCP,
//! between processes and hosts; the wire codec is the `iwarp` crate) or `"shm"` (processes of
//! one host, through shared memory). See [`InterfaceAdapter::open`].
//!
//! ## Quick start
//! Two endpoints of one IA connected over the loopback link; one message sent and received.
//! Every object is freed when its last handle is dropped (here, when the IA goes at the end).
//!
//! ```
//! use std::time::Duration;
//! use dapl::*;
//!
//! let timeout = Some(Duration::from_secs(5));
//! let (ia, _async_evd) = InterfaceAdapter::open("loopback", 16)?;
//! let pz = ia.pz_create()?;
//! // Each endpoint's completions and connection events go to EVDs (event queues).
//! let a_dto = ia.evd_create(16, None, EvdFlags::DTO)?;
//! let b_dto = ia.evd_create(16, None, EvdFlags::DTO)?;
//! let a_conn = ia.evd_create(4, None, EvdFlags::CONNECTION)?;
//! let b_conn = ia.evd_create(4, None, EvdFlags::CONNECTION)?;
//! let a = ia.endpoint(&pz).dto_evd(&a_dto).connect_evd(&a_conn).build()?;
//! let b = ia.endpoint(&pz).dto_evd(&b_dto).connect_evd(&b_conn).build()?;
//!
//! // b listens on connection qualifier 4791 (a TCP port on the tcp link) and accepts a.
//! let cr_evd = ia.evd_create(4, None, EvdFlags::CR)?;
//! let _psp = ia.psp_create(4791, &cr_evd, PspFlags::Consumer)?;
//! a.connect(ia.query()?.ia_address.ip(), 4791, timeout, b"hello")?;
//! let (request, _) = cr_evd.wait(timeout, 1)?.expect("a connection request");
//! let request = request.as_cr_arrival().expect("a CR arrival").cr.clone();
//! assert_eq!(request.private_data(), b"hello");
//! request.accept(Some(&b), b"")?;
//! for conn in [&a_conn, &b_conn] {
//!     let (ev, _) = conn.wait(timeout, 1)?.expect("a connection event");
//!     assert_eq!(ev.as_connection().unwrap().kind, ConnectionEventKind::Established);
//! }
//!
//! // Registered memory: b posts a receive buffer, a sends from its own.
//! let a_mem = pz.lmr_allocate(4096, MemPriv::LOCAL_READ | MemPriv::LOCAL_WRITE)?;
//! let b_mem = pz.lmr_allocate(4096, MemPriv::LOCAL_READ | MemPriv::LOCAL_WRITE)?;
//! b.post_recv(&[b_mem.slice(0..4096)?], 1, CompletionFlags::empty())?;
//! a_mem.write(0, b"one message")?;
//! a.post_send(&[a_mem.slice(0..11)?], 2, CompletionFlags::empty())?;
//! let (sent, _) = a_dto.wait(timeout, 1)?.expect("the send's completion");
//! assert_eq!(sent.as_dto().unwrap().status, DtoStatus::Success);
//! let (received, _) = b_dto.wait(timeout, 1)?.expect("the receive's completion");
//! let received = received.as_dto().unwrap().clone();
//! assert_eq!((received.cookie, received.transferred_length), (Cookie(1), 11));
//! assert_eq!(b_mem.to_vec(0, 11)?, b"one message");
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! Memory a peer may write is never handed out as a Rust slice: [`Lmr::write`],
//! [`Lmr::read`] and [`Lmr::to_vec`] copy with atomic accesses. Errors are [`DatError`]s,
//! with the DAT return type and subtype and a reason naming the operation and the object.
//!
//! ## Where next
//! - The examples in `crates/dapl/examples`, one per capability, each checking what it
//!   moved: `send_recv`, `rdma_write_read`, `srq`, `write_immediate` (any link:
//!   `cargo run -p dapl --example srq -- tcp`), `two_process_tcp` (a client and the server
//!   process it starts), `async_echo` (feature `tokio`), `loopback_tour`, `rping` (against
//!   rdma-core's rping).
//! - [`evd`]: waiting, thresholds, the epoll-able wait fd, CNOs; [`ep`]: connecting and
//!   posting; [`srq`]; [`lmr`] and [`rmr`]: memory and what a peer may do with it.
//!
//! ## Features
//! - `tokio`: `dapl::async_evd::AsyncEvd`, awaiting an EVD's events from async code (on
//!   the EVD's wait fd with tokio's reactor), cancel safe. Off by default; without it nothing
//!   of tokio is built.
#![deny(unsafe_code)]
#![warn(missing_docs)]

/// For a handle type `struct $t(pub(crate) Arc<Inner>)` (or `Handle<Inner>`) whose inner
/// object has a process-unique `id`: `Debug` as `$t(id)`, and equality as identity (two handles
/// to the same object).
///
/// `@counted $t` adds, for a `struct $t(pub(crate) Handle<Inner>)`, the conversions between
/// the consumer's (counted) and the library's (internal) handles (see `handle.rs`).
macro_rules! handle_identity {
    ($t:ident) => {
        impl std::fmt::Debug for $t {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                write!(f, concat!(stringify!($t), "({})"), self.0.id)
            }
        }
        handle_identity!(@eq $t);
    };
    (@eq $t:ident) => {
        impl PartialEq for $t {
            fn eq(&self, o: &Self) -> bool {
                self.0.id == o.0.id
            }
        }
        impl Eq for $t {}
    };
    (@counted $t:ident) => {
        impl $t {
            /// An internal handle to the same object (kept by the library; not counted).
            #[allow(dead_code)]
            pub(crate) fn internal(&self) -> Self {
                $t(self.0.to_internal())
            }

            /// This handle as the consumer's (counted).
            #[allow(dead_code)]
            pub(crate) fn into_user(self) -> Self {
                $t(self.0.counted())
            }

            /// A counted handle to the same object, for the consumer.
            #[allow(dead_code)]
            pub(crate) fn user(&self) -> Self {
                self.clone().into_user()
            }
        }
    };
}

#[cfg(feature = "tokio")]
pub mod async_evd;
mod codes;
pub mod cr;
mod engine;
pub mod ep;
pub mod error;
pub mod evd;
pub mod event;
#[cfg(feature = "fuzzing")]
#[doc(hidden)]
pub mod fuzz_api;
mod handle;
pub mod ia;
mod link;
pub mod lmr;
mod mem;
pub mod pace;
pub mod pz;
pub mod rmr;
pub mod sp;
pub mod srq;
#[cfg(feature = "testing")]
#[doc(hidden)]
pub mod testing;

pub mod types;

pub use cr::{ConnectionRequest, CrArrivalInfo, CrParam};
pub use engine::port::{CrossMemoryAttach, LinkCaps};
pub use ep::{
    BatchError, Endpoint, EndpointBuilder, EpAttr, EpParam, RecvRequest, RECV_BATCH_CHUNK,
};
pub use error::{DatError, ErrorType, Object, Result, Subtype};
pub use evd::{Cno, Evd, EvdParam};
pub use event::{
    AsyncEvent, AsyncKind, AsyncSubject, ConnectionEvent, ConnectionEventKind, CrArrival,
    DtoCompletion, Event, RmrBindCompletion,
};
pub use ia::{IaAttr, InterfaceAdapter, ProviderAttr, MAX_EPS_LIMIT};
pub use lmr::{Lmr, LmrParam};
pub use pz::Pz;
pub use rmr::{Rmr, RmrParam};
pub use sp::{PspFlags, ServicePoint, SpParam};
pub use srq::{Srq, SrqAttr, SrqParam};
pub use types::*;

#[cfg(test)]
mod handle_traits {
    use super::*;

    fn send_sync<T: Send + Sync + Clone>() {}

    #[test]
    fn every_handle_is_send_sync_and_clone() {
        send_sync::<InterfaceAdapter>();
        send_sync::<Pz>();
        send_sync::<Lmr>();
        send_sync::<Rmr>();
        send_sync::<Evd>();
        send_sync::<Cno>();
        send_sync::<Endpoint>();
        send_sync::<Srq>();
        send_sync::<ServicePoint>();
        send_sync::<ConnectionRequest>();
        send_sync::<Event>();
        send_sync::<DatError>();
    }
}
