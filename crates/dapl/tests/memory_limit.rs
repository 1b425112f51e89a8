//! Out of memory: queues whose length the consumer chooses (EVDs up to 2^20 events, SRQs,
//! endpoints' work queues) are allocated up front, so a length the process has no memory for
//! is `DAT_INSUFFICIENT_RESOURCES` with the reason, never an abort, and the IA goes on. Its own
//! test binary: it lowers the process's address-space limit.

use dapl::*;
use rustix::process::{getrlimit, setrlimit, Resource, Rlimit};

/// This process's address space in bytes (`VmSize`).
fn vm_size() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .unwrap()
        .lines()
        .find_map(|l| l.strip_prefix("VmSize:"))
        .and_then(|v| v.split_whitespace().next()?.parse::<u64>().ok())
        .unwrap()
        * 1024
}

#[test]
fn a_queue_the_process_has_no_memory_for_is_insufficient_resources_not_an_abort() {
    let (ia, _async) = InterfaceAdapter::open("loopback", 8).unwrap();
    let pz = ia.pz_create().unwrap();
    let small = ia.evd_create(16, None, EvdFlags::DTO).unwrap();
    let qlen = 1 << 20;
    let need = (std::mem::size_of::<Event>() * qlen) as u64;
    // Room for everything but half of the big queue.
    let as_old = getrlimit(Resource::As);
    setrlimit(
        Resource::As,
        Rlimit {
            current: Some(vm_size() + need / 2),
            maximum: as_old.maximum,
        },
    )
    .unwrap();
    let big = ia.evd_create(qlen, None, EvdFlags::DTO);
    let grown = small.resize(qlen);
    let srq = ia.srq_create(
        &pz,
        &SrqAttr {
            max_recv_dtos: 1 << 16,
            ..SrqAttr::default()
        },
    );
    setrlimit(Resource::As, as_old).unwrap();
    let e = big.map(|_| ()).unwrap_err();
    assert_eq!(e.kind(), ErrorType::InsufficientResources, "{e}");
    assert!(e.to_string().contains("out of memory"), "{e}");
    let e = grown.unwrap_err();
    assert_eq!(e.kind(), ErrorType::InsufficientResources, "{e}");
    assert_eq!(small.query().unwrap().qlen, 16, "the EVD kept its length");
    // A queue that fits is made as before, and the IA goes on.
    drop(srq);
    ia.evd_create(qlen, None, EvdFlags::DTO).unwrap();
    small.resize(1024).unwrap();
    ia.endpoint(&pz).dto_evd(&small).build().unwrap();
    ia.close(CloseFlags::Abrupt).unwrap();
}
