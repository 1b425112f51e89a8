//! The shm link (in progress): processes on one host connected through shared-memory rings.

#[allow(dead_code)] // the link that uses it is being built
pub(crate) mod ring;
