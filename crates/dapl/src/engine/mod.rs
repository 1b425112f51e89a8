//! The software RNIC engine. The queue-pair logic still lives with the endpoint
//! ([`crate::ep`]); the memory table is in [`crate::mem`].
