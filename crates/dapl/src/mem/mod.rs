//! Registered memory: the regions (the only raw-pointer code of `dapl`: bounds-checked copies,
//! gathered sends and scattered receives straight from and into them) and the memory table
//! every access is checked against (STag -> region, PZ, rights, bounds).
//!
//! This layer knows nothing of endpoints, links or the DAT objects; the engine, the links and
//! the DAT layer all use it.

pub(crate) mod published;
pub(crate) mod region;
pub(crate) mod table;

pub(crate) use region::RegionMemory;
pub(crate) use table::{
    seg_span, EntryKind, EntryOwner, InvalidateFault, LocalFault, MemTable, RemoteFault, Seg,
};
