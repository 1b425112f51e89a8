//! Links: what carries RDMAP-level messages between two QPs. A link knows how to find a
//! listener, carry connection setup (private data both ways, accept, reject) and move messages;
//! it never decides DAT policy (states, flush rules, completion flags). It plugs into the
//! engine's port ([`crate::engine::port`]) and knows nothing of the DAT layer.

pub(crate) mod loopback;
pub(crate) mod shm;
pub(crate) mod spare_fd;
pub(crate) mod tcp;
