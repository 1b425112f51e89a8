//! The errors a user meets first when listening say what happened and what to do, with the DAT
//! code that fits: a qualifier another program holds is `DAT_CONN_QUAL_IN_USE`, a TCP port
//! this process may not bind is `DAT_PRIVILEGES_VIOLATION` (not "in use", as it once said).

use std::net::{Ipv4Addr, TcpListener};

use dapl::*;
use dapl_testkit::kit::*;

#[test]
fn tcp_qualifier_whose_port_another_program_holds_is_conn_qual_in_use_and_says_what_to_do() {
    // Another program (here a plain socket) holds the TCP port.
    let other = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).unwrap();
    let port = other.local_addr().unwrap().port();
    let (ia, _async) = InterfaceAdapter::open("tcp:127.0.0.1", 8).unwrap();
    let cr = ia.evd_create(8, None, EvdFlags::CR).unwrap();
    let e = expect_err(
        ia.psp_create(u64::from(port), &cr, PspFlags::Consumer),
        ErrorType::ConnQualInUse,
    );
    let text = e.to_string();
    assert!(text.contains(&format!("qualifier {port} is in use")), "{e}");
    assert!(text.contains("choose another qualifier"), "{e}");
    drop(other);
    // Once the program lets go, the qualifier is free.
    ia.psp_create(u64::from(port), &cr, PspFlags::Consumer)
        .unwrap();
}

/// The host's first unprivileged TCP port (`net.ipv4.ip_unprivileged_port_start`).
fn first_unprivileged_port() -> u32 {
    std::fs::read_to_string("/proc/sys/net/ipv4/ip_unprivileged_port_start")
        .ok()
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(1024)
}

#[test]
fn tcp_qualifier_below_the_unprivileged_ports_is_privileges_violation_naming_the_sysctl() {
    let first = first_unprivileged_port();
    if first <= 1 {
        eprintln!(
            "SKIP: this host lets anyone bind every port (ip_unprivileged_port_start {first})"
        );
        return;
    }
    // Unprivileged, as a user's program is: when the tests run as root, this thread (only:
    // the raw system call changes the calling thread's credentials, and libtest runs each
    // test on a thread of its own) becomes `nobody`, losing CAP_NET_BIND_SERVICE.
    if rustix::process::geteuid().is_root() {
        // SAFETY: 65534 is a valid uid number (`nobody`); nothing else is assumed.
        let nobody = unsafe { rustix::process::Uid::from_raw(65534) };
        rustix::thread::set_thread_res_uid(nobody, nobody, nobody).unwrap();
    }
    let (ia, _async) = InterfaceAdapter::open("tcp:127.0.0.1", 8).unwrap();
    let cr = ia.evd_create(8, None, EvdFlags::CR).unwrap();
    // Port 1 (tcpmux): below every host's first unprivileged port.
    let e = expect_err(
        ia.psp_create(1, &cr, PspFlags::Consumer),
        ErrorType::PrivilegesViolation,
    );
    let text = e.to_string();
    assert!(text.contains("DAT_PRIVILEGES_VIOLATION"), "{e}");
    assert!(text.contains("ip_unprivileged_port_start"), "{e}");
    assert!(
        text.contains(&format!(
            "choose a connection qualifier of {first} or above"
        )),
        "{e}"
    );
    assert!(!text.contains("in use"), "{e}");
}
