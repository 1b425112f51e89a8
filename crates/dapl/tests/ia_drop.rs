//! Dropping the last handle of an IA closes it abruptly: an early return with `?` leaks no
//! IA, no link thread and no registered memory. (A file of its own: it counts the process's
//! tcp threads.)

use dapl::*;
use dapl_testkit::kit::*;

/// The tcp links' progress threads running in this process.
fn tcp_threads() -> usize {
    std::fs::read_dir("/proc/self/task")
        .unwrap()
        .filter_map(|t| std::fs::read_to_string(t.ok()?.path().join("comm")).ok())
        .filter(|name| name.starts_with("dapl-tcp"))
        .count()
}

/// Connects two tcp IAs, registers memory, leaves a receive outstanding, then fails half way
/// as code using `?` does, keeping only an LMR and a PZ handle.
fn work_that_fails(kept: &mut Vec<(Lmr, Pz)>) -> std::result::Result<(), String> {
    let p = Pair::new("tcp");
    let lmr =
        p.a.pz
            .register(vec![5u8; 4096], MemPriv::ALL)
            .map_err(|e| e.to_string())?;
    p.a.ep
        .post_recv(&[lmr.slice(..64).unwrap()], 1, CompletionFlags::empty())
        .map_err(|e| e.to_string())?;
    kept.push((lmr, p.a.pz.clone()));
    Err("something went wrong".into())
}

#[test]
fn dropping_the_last_ia_handle_closes_the_ia_its_objects_and_its_thread() {
    let before = tcp_threads();
    let mut kept = Vec::new();
    assert!(work_that_fails(&mut kept).is_err());
    eventually("the two IAs' progress threads end", || {
        tcp_threads() == before
    });
    let (lmr, pz) = &kept[0];
    let e = lmr.read(0, &mut [0u8; 4]).unwrap_err();
    assert_eq!(e.kind(), ErrorType::InvalidHandle, "{e}");
    assert_eq!(pz.query().unwrap_err().kind(), ErrorType::InvalidHandle);
    // The memory was deregistered with the IA: the buffer comes back.
    assert_eq!(lmr.deregister().unwrap(), vec![5u8; 4096]);
}

#[test]
fn any_handle_keeps_the_ia_open_and_objects_alone_do_not() {
    let (ia, _async_evd) = InterfaceAdapter::open("loopback", 8).unwrap();
    let pz = ia.pz_create().unwrap();
    let again = pz.query().unwrap();
    drop(ia);
    // A handle made from the PZ is a handle like the first.
    let lmr = again
        .pz_create()
        .unwrap()
        .query()
        .unwrap()
        .pz_create()
        .unwrap();
    assert_eq!(again.query().unwrap().adapter_name, "loopback");
    drop(again);
    assert_eq!(pz.query().unwrap_err().kind(), ErrorType::InvalidHandle);
    assert_eq!(lmr.free().unwrap_err().kind(), ErrorType::InvalidHandle);
}
