//! The software RNIC engine's shared parts. The queue-pair logic lives with the endpoint
//! ([`crate::ep`]); this module holds the memory table every remote access goes through.

pub(crate) mod memtable;
