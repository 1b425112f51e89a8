//! The `cabi_handles` fuzz harness (`daplrs::fuzzing`, run by `crates/dapl-cabi/fuzz`) as an
//! ordinary test: pseudo-random inputs, and hand-written ones that show it reaches the paths it
//! is for (a handle used after its free, one of the wrong kind, one of an earlier input, values
//! near a live handle, iovs outside every LMR, DTOs that complete over the loopback
//! connection, each way of closing). Every input checks the harness's invariants itself
//! (`src/fuzzing/mod.rs`); a broken one panics.
//!
//! The tests take turns (`SERIAL`): handle slots are process-wide and reused after a
//! quarantine, so a stale handle of one test's earlier input could name another test's live
//! object. Each runs on a thread of its own, with a time limit: an input must never hang.

use std::sync::mpsc;
use std::sync::Mutex;
use std::time::Duration;

use daplrs::fuzzing::{cabi_handles, op, sel, Stats};

static SERIAL: Mutex<()> = Mutex::new(());

/// No test may take this long (a hang in a vtable call, or in the IA's close).
const LIMIT: Duration = Duration::from_secs(120);

/// Runs `f` on a thread of its own (its own harness: IA name and loopback address), within
/// `LIMIT`, after the other tests.
fn run<R: Send + 'static>(f: impl FnOnce() -> R + Send + 'static) -> R {
    let _turn = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    let (tx, rx) = mpsc::channel();
    let t = std::thread::spawn(move || {
        let r = f();
        let _ = tx.send(());
        r
    });
    match rx.recv_timeout(LIMIT) {
        Ok(()) | Err(mpsc::RecvTimeoutError::Disconnected) => match t.join() {
            Ok(r) => r,
            Err(p) => std::panic::resume_unwind(p),
        },
        Err(mpsc::RecvTimeoutError::Timeout) => panic!("an input ran for more than {LIMIT:?}"),
    }
}

/// xorshift64*: deterministic inputs without a dependency.
fn rng(seed: &mut u64) -> u64 {
    *seed ^= *seed >> 12;
    *seed ^= *seed << 25;
    *seed ^= *seed >> 27;
    seed.wrapping_mul(0x2545_f491_4f6c_dd1d)
}

/// Adds one input's statistics to a total.
fn add(total: &mut Stats, s: Stats) {
    total.ops += s.ops;
    total.calls += s.calls;
    total.successes += s.successes;
    total.used_after_free += s.used_after_free;
    total.invalid_handle += s.invalid_handle;
    total.frees += s.frees;
    total.creates += s.creates;
    total.posts_refused += s.posts_refused;
    total.posts_accepted += s.posts_accepted;
    for (k, v) in s.bad_handle_calls {
        *total.bad_handle_calls.entry(k).or_default() += v;
    }
    for (k, v) in s.events {
        *total.events.entry(k).or_default() += v;
    }
    for (k, [c, ok]) in s.per_function {
        let e = total.per_function.entry(k).or_default();
        e[0] += c;
        e[1] += ok;
    }
}

/// An input: the mode byte, then operations (each its selector, a "no NULL" byte, then its
/// argument bytes).
fn input(mode: u8, ops: &[(&str, &[u8])]) -> Vec<u8> {
    let mut v = vec![mode];
    for (name, args) in ops {
        v.push(op(name));
        v.push(0);
        v.extend_from_slice(args);
    }
    v
}

const DTO_EVENT: u32 = 0x00001;
const CONNECTION_REQUEST_EVENT: u32 = 0x02001;

#[test]
fn pseudo_random_inputs_keep_every_invariant_and_reach_every_kind_of_handle() {
    let total = run(|| {
        let mut total = Stats::default();
        let mut seed = 0x5eed_cab1_0000_0001_u64;
        for _ in 0..400 {
            let len = (rng(&mut seed) % 700) as usize;
            // Small bytes are more often live handles, counts that fit and valid segments.
            let data: Vec<u8> = (0..len)
                .map(|_| {
                    let r = rng(&mut seed);
                    if r & 3 == 0 {
                        (r >> 8) as u8
                    } else {
                        (r >> 8) as u8 & 0x3f
                    }
                })
                .collect();
            add(&mut total, cabi_handles(&data));
        }
        total
    });
    eprintln!("{total:#?}");
    for how in ["Live", "WrongKind", "Stale", "Null", "Raw", "Near", "Small"] {
        if how == "Live" {
            continue;
        }
        assert!(
            total.bad_handle_calls.get(how).is_some_and(|&n| n > 0),
            "no call with a bad handle chosen as {how}"
        );
    }
    assert!(total.used_after_free > 0, "no handle used after its free");
    assert!(
        total.invalid_handle > 1000,
        "few DAT_INVALID_HANDLE returns"
    );
    assert!(
        total.frees > 0 && total.creates > 0,
        "no free or create from the input"
    );
    assert!(total.posts_accepted > 0, "no post accepted");
    assert!(total.posts_refused > 0, "no post refused");
    assert!(
        total.events.contains_key(&DTO_EVENT),
        "no DTO completion dequeued"
    );
    assert!(
        total.events.contains_key(&CONNECTION_REQUEST_EVENT),
        "no connection request dequeued"
    );
    // Every vtable function the harness calls was called, most with some success.
    let never: Vec<&&str> = total
        .per_function
        .iter()
        .filter(|(_, [c, _])| *c == 0)
        .map(|(k, _)| k)
        .collect();
    assert!(never.is_empty(), "never called: {never:?}");
    assert!(
        total.per_function.len() >= 75,
        "only {} functions called",
        total.per_function.len()
    );
}

#[test]
fn a_pz_used_after_its_free_is_invalid_handle() {
    let s = run(|| {
        cabi_handles(&input(
            0,
            &[
                ("pz_create", &[sel::live(0)]),
                // The setup made two PZs: the new one is the third.
                ("pz_free", &[sel::live(2)]),
                ("pz_query", &[sel::stale(0), 1]),
                ("pz_free", &[sel::stale(0)]),
                (
                    "lmr_create",
                    &[sel::live(0), sel::stale(0), 0, 0, 0, 0, 2, 0, 16, 0, 0],
                ),
            ],
        ))
    });
    assert_eq!(s.creates, 1);
    assert_eq!(s.frees, 1);
    assert_eq!(s.used_after_free, 3);
    assert_eq!(s.bad_handle_calls.get("Stale"), Some(&3));
    assert_eq!(s.per_function["pz_query"], [1, 0]);
}

#[test]
fn a_handle_of_the_wrong_kind_is_invalid_handle() {
    let s = run(|| {
        cabi_handles(&input(
            0,
            &[
                // An EP's slot given a PZ, an EVD, ...: the i-th live object of another kind.
                // (An empty iov, a cookie, DEFAULT flags.)
                (
                    "ep_post_send",
                    &[sel::wrong_kind(0), 0, 1, 2, 3, 4, 5, 6, 7, 8, 0],
                ),
                ("evd_dequeue", &[sel::wrong_kind(5)]),
                ("pz_free", &[sel::wrong_kind(9)]),
                ("lmr_free", &[sel::wrong_kind(1)]),
                ("cr_query", &[sel::wrong_kind(2), 1]),
                (
                    "ep_create",
                    &[
                        sel::live(0),
                        sel::wrong_kind(3),
                        sel::NULL,
                        sel::NULL,
                        sel::NULL,
                    ],
                ),
            ],
        ))
    });
    assert_eq!(s.bad_handle_calls.get("WrongKind"), Some(&6));
    assert!(s.invalid_handle >= 6);
}

#[test]
fn handles_of_an_earlier_input_stay_invalid() {
    let s = run(|| {
        cabi_handles(&input(3, &[]));
        // This input frees nothing before these calls (mode 4: no connection, so no accepted
        // request either): stale handles come from the earlier input (its IA closed, every
        // object with it).
        cabi_handles(&input(
            4,
            &[
                ("get_handle_type", &[sel::stale(0)]),
                ("ia_query", &[sel::stale(1), 1, 1]),
                ("ep_free", &[sel::stale(2)]),
                ("evd_free", &[sel::stale(3)]),
                (
                    "set_consumer_context",
                    &[sel::stale(4), 1, 2, 3, 4, 5, 6, 7, 8],
                ),
            ],
        ))
    });
    assert_eq!(s.bad_handle_calls.get("Stale"), Some(&5));
    assert_eq!(s.used_after_free, 0, "nothing of this input was freed");
}

#[test]
fn values_near_a_live_handle_and_small_integers_are_invalid_handle() {
    let s = run(|| {
        let mut ops: Vec<(&str, Vec<u8>)> = Vec::new();
        for variant in 0..8u8 {
            for (name, more) in [
                ("get_handle_type", &[][..]),
                ("ep_reset", &[][..]),
                ("evd_enable", &[][..]),
            ] {
                let mut a = vec![(variant << 3) | 7];
                a.extend_from_slice(more);
                ops.push((name, a));
            }
        }
        let ops: Vec<(&str, &[u8])> = ops.iter().map(|(n, a)| (*n, &a[..])).collect();
        cabi_handles(&input(1, &ops))
    });
    let bad = s.bad_handle_calls.get("Near").copied().unwrap_or(0)
        + s.bad_handle_calls.get("Small").copied().unwrap_or(0)
        + s.bad_handle_calls.get("Raw").copied().unwrap_or(0);
    // A slot's first stub is the live handle itself when its generation is a multiple of 8.
    assert!(bad >= 21, "{s:#?}");
}

#[test]
fn iovs_outside_every_lmr_are_refused_and_ones_inside_complete_over_the_connection() {
    let s = run(|| {
        let seg_in = |len: u8| [0u8, 0, 0, len, 0];
        let mut recv: Vec<u8> = vec![sel::live(1), 1];
        recv.extend_from_slice(&seg_in(64));
        recv.extend_from_slice(&[7, 0, 0, 0, 0, 0, 0, 0, 0]); // cookie, DEFAULT flags
        let mut send: Vec<u8> = vec![sel::live(0), 1];
        send.extend_from_slice(&seg_in(32));
        send.extend_from_slice(&[8, 0, 0, 0, 0, 0, 0, 0, 0]);
        // A segment with a raw context, address and length.
        let mut wild: Vec<u8> = vec![sel::live(1), 1, 7];
        wild.extend_from_slice(&[0x11; 8]); // va
        wild.extend_from_slice(&[0x40, 0, 0, 0]); // length 64
        wild.extend_from_slice(&[0x99, 0x99, 0, 0]); // lmr_context
        wild.extend_from_slice(&[9, 0, 0, 0, 0, 0, 0, 0, 0]);
        // Across the end of a live LMR.
        let mut across: Vec<u8> = vec![sel::live(1), 1, 4, 3, 200];
        across.extend_from_slice(&[10, 0, 0, 0, 0, 0, 0, 0, 0]);
        cabi_handles(&input(
            0,
            &[
                ("ep_post_recv", &recv),
                ("ep_post_recv", &wild),
                ("ep_post_recv", &across),
                ("ep_post_send", &send),
                ("drain", &[]),
            ],
        ))
    });
    assert_eq!(s.posts_accepted, 2, "{s:#?}");
    assert_eq!(s.posts_refused, 2, "{s:#?}");
    // The send's completion and the receive's.
    assert!(s.events.get(&DTO_EVENT).is_some_and(|&n| n >= 2), "{s:#?}");
}

#[test]
fn every_way_of_closing_leaves_every_handle_invalid() {
    let s = run(|| {
        let mut total = Stats::default();
        for mode in 0..8u8 {
            // 0: free each object, close GRACEFUL; 1: free each, ABRUPT; 2, 3: ABRUPT over
            // everything; bit 2: no connection in the setup.
            add(
                &mut total,
                cabi_handles(&input(mode, &[("connect_pair", &[0, 1, 0])])),
            );
        }
        total
    });
    assert_eq!(s.per_function["ia_close"], [8, 8]);
}

/// A connection request dequeued after its PSP was freed is still a handle of the IA: the
/// IA's close makes it invalid like every other. Found by the fuzz target (the handle of such a
/// CR stayed valid after `ia_close`: it was made with no IA, so the close never reached it).
#[test]
fn a_connection_request_dequeued_after_its_psp_was_freed_goes_with_its_ia() {
    let s = run(|| {
        let mut total = Stats::default();
        // Mode 4: no connection in the setup, so EP 0 is free to connect; then each way of
        // closing (3: ABRUPT over everything, 1: free each object first, 0: and GRACEFUL).
        for mode in [4 | 3, 4 | 1, 4] {
            add(
                &mut total,
                cabi_handles(&input(
                    mode,
                    &[
                        // EP 0 connects to the setup's PSP (the first qualifier of a live
                        // service point), which is then freed before its request is taken.
                        ("ep_connect", &[sel::live(0), 0, 0, 0, 0, 0]),
                        ("psp_free", &[sel::live(0)]),
                        // The setup's CR EVD is the sixth EVD (after the async EVD, two DTO
                        // EVDs and two connection EVDs).
                        ("evd_dequeue", &[sel::live(5)]),
                        ("cr_query", &[sel::live(0), 1]),
                    ],
                )),
            );
        }
        total
    });
    assert_eq!(s.events.get(&CONNECTION_REQUEST_EVENT), Some(&3), "{s:#?}");
    assert_eq!(s.per_function["cr_query"], [3, 3], "{s:#?}");
    assert_eq!(s.per_function["ia_close"], [3, 3]);
}
