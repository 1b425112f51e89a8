//! The test kit of dapl-rs: what the integration tests of `crates/dapl` share.
//!
//! - [`links`]: the one list of links ([`for_each_link!`](crate::for_each_link), [`LINKS`]),
//!   what differs between them ([`caps`], [`completes_at_peer`]: tests decide by
//!   `LinkCaps`, never by a link's name), and the macros that generate tests:
//!   [`per_link!`](crate::per_link) (one test per link),
//!   [`per_link_with!`](crate::per_link_with) (one per link, run only where a capability
//!   holds) and [`once!`](crate::once) (link-independent checks, run on the first link);
//! - [`side`]: [`Side`] (an IA, PZ, EVDs and one endpoint) and [`Pair`] (two connected sides);
//! - [`connect`](mod@connect): qualifiers, listening, connection events and [`connect()`], the
//!   one connect/accept sequence;
//! - [`wait`]: [`T`], [`eventually`] and [`expect_err`];
//! - [`netns`]: [`Netns`], two network namespaces as two hosts;
//! - [`limits`]: [`raise_fd_limit`], [`rss_kib`];
//! - [`child`]: [`self_as_child`], this test binary run again as a peer process;
//! - [`bytes`]: [`message_bytes`], contents that tell messages and positions apart.
//!
//! A test file takes everything with `use dapl_testkit::kit::*;` (macros included).

pub mod bytes;
pub mod child;
pub mod connect;
pub mod limits;
pub mod links;
pub mod netns;
pub mod side;
pub mod wait;

pub use crate::{for_each_link, once, per_link, per_link_with};
pub use bytes::message_bytes;
pub use child::self_as_child;
pub use connect::{connect, expect_conn, expect_cr, listen, listen_on, qual, End};
pub use limits::{raise_fd_limit, rss_kib};
pub use links::{caps, completes_at_peer, LINKS};
pub use netns::Netns;
pub use side::{Pair, Side};
pub use wait::{eventually, expect_err, T};
