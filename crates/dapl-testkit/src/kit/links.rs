//! The links the conformance tests run over, what differs between them, and the macros that
//! generate a test per link.
//!
//! The list of links is [`for_each_link!`](crate::for_each_link): one line per link. Every
//! other list is generated from it: [`LINKS`], and the tests of [`per_link!`](crate::per_link)
//! and [`per_link_with!`](crate::per_link_with). Tests decide what to expect by a link's
//! [`LinkCaps`] ([`caps`]), never by its name.

use std::collections::HashMap;
use std::sync::{Mutex, OnceLock};

use dapl::{CloseFlags, InterfaceAdapter, LinkCaps};

/// Calls `m!(ident, "ia name", args...)` once per link, in order: the one list of links.
/// Adding a link is adding a line here; [`LINKS`] and the per-link tests follow.
///
/// `m` is a macro name or path (`$crate::...` works); the link's identifier names its test
/// function, the string is the IA name `InterfaceAdapter::open` takes.
///
/// ```
/// macro_rules! push_name {
///     ($link:ident, $ia:literal, $names:ident) => {
///         $names.push($ia);
///     };
/// }
/// let mut names = Vec::new();
/// // push_name!(loopback, "loopback", names); push_name!(tcp, "tcp", names); ...
/// dapl_testkit::for_each_link!(push_name!(names));
/// assert_eq!(names, dapl_testkit::kit::LINKS);
/// ```
#[macro_export]
macro_rules! for_each_link {
    ($($m:ident)::+ ! ($($args:tt)*)) => {
        $($m)::+!(loopback, "loopback", $($args)*);
        $($m)::+!(tcp, "tcp", $($args)*);
        $($m)::+!(shm, "shm", $($args)*);
    };
}

/// Counts the links of [`for_each_link!`](crate::for_each_link) (for [`LINKS`]).
macro_rules! count_link {
    ($link:ident, $name:literal, $n:ident) => {
        $n += 1;
    };
}

/// Stores a link's name at the next index (for [`LINKS`]).
macro_rules! put_link {
    ($link:ident, $name:literal, $names:ident, $i:ident) => {
        $names[$i] = $name;
        $i += 1;
    };
}

const LINK_COUNT: usize = {
    let mut n = 0;
    for_each_link!(count_link!(n));
    n
};

/// The IA names of the links, in the order of [`for_each_link!`](crate::for_each_link) (generated
/// from it). The first is the one [`once!`](crate::once) runs on.
#[allow(unused_assignments)] // the last link's `i += 1`
pub const LINKS: &[&str] = &{
    let mut names = [""; LINK_COUNT];
    let mut i = 0;
    for_each_link!(put_link!(names, i));
    names
};

/// What differs on `link` (`ProviderAttr::link_caps`), read once per link from a freshly
/// opened IA: tests decide by these, never by the link's name.
pub fn caps(link: &str) -> LinkCaps {
    static CAPS: OnceLock<Mutex<HashMap<String, LinkCaps>>> = OnceLock::new();
    let mut m = CAPS
        .get_or_init(Mutex::default)
        .lock()
        .unwrap_or_else(|p| p.into_inner());
    *m.entry(link.to_string()).or_insert_with(|| {
        let (ia, _) = InterfaceAdapter::open(link, 4).expect("ia_open");
        let caps = ia.provider_attr().unwrap().link_caps;
        ia.close(CloseFlags::Abrupt).unwrap();
        caps
    })
}

/// True if a Send or RDMA Write completes only once the peer has placed it (loopback). Over
/// tcp it completes when TCP has taken its last byte (RFC 5040 local completion; Linux siw
/// does the same), so a peer without a receive buffer does not hold the sender's queue, and
/// an RDMA Write the peer refuses has already completed successfully when the peer's
/// Terminate breaks the connection.
pub fn completes_at_peer(link: &str) -> bool {
    caps(link).completes_at_peer
}

/// Why a test gated by [`per_link_with!`](crate::per_link_with) does not run on `link`: the
/// first requirement `(LinkCaps field, wanted value, the link's value)` that does not hold.
/// `None`: all hold, the test runs.
#[doc(hidden)]
pub fn unmet_requirement(link: &str, reqs: &[(&str, bool, bool)]) -> Option<String> {
    reqs.iter()
        .find(|(_, want, have)| want != have)
        .map(|(field, want, have)| {
            format!(
                "link {link:?} has LinkCaps::{field} = {have}, the test needs {want}: skipped, \
                 not run (cargo counts it as passed)"
            )
        })
}

/// Instantiates a test body once per link of [`for_each_link!`](crate::for_each_link), as the
/// module `name` with one `#[test]` function per link (`name::loopback`, `name::tcp`, ...); the
/// body gets the link's IA name.
///
/// ```no_run
/// use dapl::*;
/// use dapl_testkit::kit::*;
///
/// // The tests send_write_read_roundtrip::loopback, send_write_read_roundtrip::tcp, ...
/// per_link!(send_write_read_roundtrip, |link| {
///     let p = Pair::new(link);
///     p.a.ep.disconnect(CloseFlags::Graceful).unwrap();
///     p.close();
/// });
/// # fn main() {}
/// ```
#[macro_export]
macro_rules! per_link {
    ($name:ident, $body:expr $(,)?) => {
        mod $name {
            #[allow(unused_imports)]
            use super::*;
            $crate::for_each_link!($crate::__kit_link_test!([] $body));
        }
    };
}

/// Like [`per_link!`](crate::per_link), for rules that hold only on links with certain
/// [`LinkCaps`](dapl::LinkCaps): a test is generated for every link, but on a link whose
/// capability does not have the value the test needs, the body is not run and the test
/// prints to stderr that it was skipped and why (seen with `--nocapture`). **Cargo counts such
/// a skipped test as passed** (`test ... ok`); it cannot report "skipped".
///
/// Requirements: a `bool` field of `LinkCaps`, `!field` for one that must be false, or several
/// joined by `&&`.
///
/// ```no_run
/// use dapl_testkit::kit::*;
///
/// per_link_with!(rnr_waits_forever, sends_wait_for_a_receive, |link| { /* ... */ });
/// per_link_with!(!rnr_waits_forever, send_past_the_grace_breaks, |link| { /* ... */ });
/// per_link_with!(completes_at_peer && rnr_waits_forever, full_queue, |link| { /* ... */ });
/// # fn main() {}
/// ```
#[macro_export]
macro_rules! per_link_with {
    ($($req:tt)+) => {
        $crate::__kit_per_link_with!(@req [] $($req)+);
    };
}

/// Parses the requirements of [`per_link_with!`](crate::per_link_with) into
/// `[(wanted cap) ...]`, then generates the tests.
#[doc(hidden)]
#[macro_export]
macro_rules! __kit_per_link_with {
    (@req [$($acc:tt)*] ! $cap:ident && $($rest:tt)+) => {
        $crate::__kit_per_link_with!(@req [$($acc)* (false $cap)] $($rest)+);
    };
    (@req [$($acc:tt)*] $cap:ident && $($rest:tt)+) => {
        $crate::__kit_per_link_with!(@req [$($acc)* (true $cap)] $($rest)+);
    };
    (@req [$($acc:tt)*] ! $cap:ident, $name:ident, $body:expr $(,)?) => {
        $crate::__kit_per_link_with!(@gen [$($acc)* (false $cap)] $name, $body);
    };
    (@req [$($acc:tt)*] $cap:ident, $name:ident, $body:expr $(,)?) => {
        $crate::__kit_per_link_with!(@gen [$($acc)* (true $cap)] $name, $body);
    };
    (@gen [$($reqs:tt)+] $name:ident, $body:expr) => {
        mod $name {
            #[allow(unused_imports)]
            use super::*;
            $crate::for_each_link!($crate::__kit_link_test!([$($reqs)+] $body));
        }
    };
}

/// One test function of [`per_link!`](crate::per_link) / [`per_link_with!`](crate::per_link_with):
/// `(link ident, "ia name", [(wanted cap) ...] body)`.
#[doc(hidden)]
#[macro_export]
macro_rules! __kit_link_test {
    ($link:ident, $ia:literal, [] $body:expr) => {
        #[test]
        fn $link() {
            let f: fn(&str) = $body;
            f($ia);
        }
    };
    ($link:ident, $ia:literal, [$(($want:tt $cap:ident))+] $body:expr) => {
        #[test]
        fn $link() {
            let caps = $crate::kit::caps($ia);
            let unmet = $crate::kit::links::unmet_requirement(
                $ia,
                &[$((stringify!($cap), $want, caps.$cap)),+],
            );
            if let Some(why) = unmet {
                eprintln!("{}::{}: {why}", module_path!(), stringify!($link));
                return;
            }
            let f: fn(&str) = $body;
            f($ia);
        }
    };
}

/// For checks that do not depend on the link (arguments and states of objects that are never
/// connected): one `#[test] fn name()` that runs the body on the first link of
/// [`for_each_link!`](crate::for_each_link) ([`LINKS`]`[0]`) only.
///
/// ```no_run
/// use dapl::*;
/// use dapl_testkit::kit::*;
///
/// // The test lmr_allocate_zero_is_length_error, on LINKS[0] only.
/// once!(lmr_allocate_zero_is_length_error, |link| {
///     let s = Side::new(link, None);
///     assert!(s.pz.lmr_allocate(0, MemPriv::ALL).is_err());
///     s.close();
/// });
/// # fn main() {}
/// ```
#[macro_export]
macro_rules! once {
    ($name:ident, $body:expr $(,)?) => {
        #[test]
        fn $name() {
            let f: fn(&str) = $body;
            f($crate::kit::LINKS[0]);
        }
    };
}

#[cfg(test)]
mod tests {
    use super::*;

    macro_rules! collect_link {
        ($link:ident, $name:literal, $v:ident) => {
            $v.push((stringify!($link), $name));
        };
    }

    #[test]
    #[allow(clippy::vec_init_then_push)] // one push per link, by the macro
    fn links_are_the_list_of_for_each_link_in_order() {
        let mut v = Vec::new();
        for_each_link!(collect_link!(v));
        let names: Vec<&str> = v.iter().map(|(_, name)| *name).collect();
        assert_eq!(LINKS, names.as_slice());
        assert!(!LINKS.is_empty());
        for (i, name) in LINKS.iter().enumerate() {
            assert!(!LINKS[..i].contains(name), "{name} listed twice");
        }
        for (ident, _) in &v {
            assert!(!ident.is_empty());
        }
    }

    #[test]
    fn every_link_opens_and_reports_its_caps() {
        for link in LINKS {
            let c = caps(link);
            assert!(c.max_iov >= 1, "{link}: {c:?}");
            assert_eq!(completes_at_peer(link), c.completes_at_peer);
        }
    }

    #[test]
    fn unmet_requirement_names_the_first_field_that_differs() {
        assert_eq!(unmet_requirement("x", &[]), None);
        assert_eq!(
            unmet_requirement("x", &[("a", true, true), ("b", false, false)]),
            None
        );
        let why = unmet_requirement("x", &[("a", true, true), ("b", false, true)]).unwrap();
        assert!(
            why.contains("LinkCaps::b = true, the test needs false"),
            "{why}"
        );
        assert!(why.contains("cargo counts it as passed"), "{why}");
    }

    // The macros, used as a test file uses them.
    crate::per_link!(per_link_gets_a_listed_link, |link| {
        assert!(LINKS.contains(&link));
    });

    crate::per_link_with!(
        completes_at_peer,
        per_link_with_runs_only_where_the_cap_holds,
        |link| assert!(caps(link).completes_at_peer)
    );

    crate::per_link_with!(
        !completes_at_peer && !rnr_waits_forever,
        per_link_with_negated_and_joined,
        |link| {
            let c = caps(link);
            assert!(!c.completes_at_peer && !c.rnr_waits_forever);
        }
    );

    crate::once!(once_runs_on_the_first_link, |link| {
        assert_eq!(link, LINKS[0]);
    });
}
