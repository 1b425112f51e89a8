//! # dapl — the DAT (uDAPL 2.0) object model as a safe Rust API
//!
//! Interface Adapters, Protection Zones, memory regions (LMR/RMR), Endpoints, Event
//! Dispatchers, Shared Receive Queues, Service Points, Connection Requests and CNOs, with the
//! rules of the DAT 2.0 man pages: return codes (with the numbers of `dat_error.h`), endpoint
//! states, flush rules, completion flags and ordering.
//!
//! Below the DAT layer sits a software RNIC engine (queue pairs and a memory table that checks
//! every remote access) and, below that, links that carry messages between engines. This crate
//! has the in-process loopback link and the tcp link (iWARP over kernel TCP); the IA name
//! selects the link (`"loopback"`, `"tcp:<ipv4>"`).
//!
//! ```
//! use dapl::*;
//! let (ia, _async_evd) = InterfaceAdapter::open("loopback", 16)?;
//! let pz = ia.pz_create()?;
//! let lmr = pz.lmr_allocate(4096, MemPriv::LOCAL_READ | MemPriv::LOCAL_WRITE)?;
//! lmr.write(0, b"hello")?;
//! assert_eq!(lmr.to_vec(0, 5)?, b"hello");
//! ia.close(CloseFlags::Abrupt)?;
//! # Ok::<(), dapl::DatError>(())
//! ```
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
pub use ep::{Endpoint, EndpointBuilder, EpAttr, EpParam};
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
