//! `dapl::async_evd::AsyncEvd` (feature `tokio`): awaiting EVDs from async code. Its correctness
//! rests on three rules (module docs of `dapl::async_evd`): drain the EVD before waiting (the wait
//! fd is edge-triggered for tokio and written only when the signalled count leaves zero),
//! clear readiness only before a dequeue, and dequeue only in a poll that returns the event.
//!
//! Run: `cargo test -p dapl --features tokio --test async_evd`

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use dapl::async_evd::AsyncEvd;
use dapl::*;
use dapl_testkit::kit::*;
use tokio::io::unix::AsyncFd;
use tokio::time::timeout;

/// Long enough for anything that must happen; tests that expect nothing wait `QUIET`.
const DEADLINE: Duration = Duration::from_secs(10);
const QUIET: Duration = Duration::from_millis(200);

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
}

fn software_evd(ia: &InterfaceAdapter, qlen: usize) -> Evd {
    ia.evd_create(qlen, None, EvdFlags::SOFTWARE).unwrap()
}

fn software_value(ev: Event) -> u64 {
    match ev {
        Event::Software(v) => v,
        other => panic!("expected a software event, got {other:?}"),
    }
}

/// Two events queued behind one write of the wait fd. A waiter that takes one event per edge
/// (await readiness, clear it, dequeue once) gets the first and then waits forever with the
/// second still queued; `AsyncEvd` returns both.
#[test]
fn a_second_event_behind_the_same_edge_is_returned_without_a_new_one() {
    let (ia, _) = InterfaceAdapter::open("loopback", 8).unwrap();
    runtime().block_on(async {
        // The hazard is real: one edge for two events.
        let evd = software_evd(&ia, 8);
        #[allow(deprecated)] // `register` is its `unsafe` successor; an `OwnedFd` is sound
        let naive = AsyncFd::new(evd.wait_fd().unwrap().try_clone_to_owned().unwrap()).unwrap();
        evd.post_se(1).unwrap();
        evd.post_se(2).unwrap();
        let naive_next = || async {
            let mut guard = naive.readable().await.unwrap();
            guard.clear_ready();
            evd.dequeue().unwrap()
        };
        let first = timeout(DEADLINE, naive_next())
            .await
            .expect("the first edge");
        assert_eq!(first.map(software_value), Some(1));
        assert!(
            timeout(QUIET, naive_next()).await.is_err(),
            "no second edge: a waiter that does not drain waits here"
        );
        assert_eq!(
            evd.query().unwrap().count,
            1,
            "the second event is still queued"
        );

        // AsyncEvd: both queued before any wait.
        let evd = software_evd(&ia, 8);
        let events = AsyncEvd::new(&evd).unwrap();
        evd.post_se(1).unwrap();
        evd.post_se(2).unwrap();
        for want in [1, 2] {
            let ev = timeout(DEADLINE, events.next_event())
                .await
                .expect("in time");
            assert_eq!(software_value(ev.unwrap()), want);
        }

        // And both arriving from another thread while the task already waits.
        let poster = evd.clone();
        let t = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(50));
            poster.post_se(3).unwrap();
            poster.post_se(4).unwrap();
        });
        for want in [3, 4] {
            let ev = timeout(DEADLINE, events.next_event())
                .await
                .expect("in time");
            assert_eq!(software_value(ev.unwrap()), want);
        }
        t.join().unwrap();
        assert!(
            timeout(QUIET, events.next_event()).await.is_err(),
            "nothing more"
        );
    });
    ia.close(CloseFlags::Abrupt).unwrap();
}

/// `poll_next_event`, the poll form (for a hand-written future or stream), keeps the same
/// rules: two events behind one edge, and two arriving while the task waits.
#[test]
fn poll_next_event_drains_as_next_event_does() {
    let (ia, _) = InterfaceAdapter::open("loopback", 8).unwrap();
    let evd = software_evd(&ia, 8);
    runtime().block_on(async {
        let events = AsyncEvd::new(&evd).unwrap();
        let next = || std::future::poll_fn(|cx| events.poll_next_event(cx));
        evd.post_se(1).unwrap();
        evd.post_se(2).unwrap();
        let poster = evd.clone();
        let t = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(50));
            poster.post_se(3).unwrap();
            poster.post_se(4).unwrap();
        });
        for want in 1..=4 {
            let ev = timeout(DEADLINE, next()).await.expect("in time");
            assert_eq!(software_value(ev.unwrap()), want);
        }
        t.join().unwrap();
        assert!(timeout(QUIET, next()).await.is_err(), "nothing more");
    });
    ia.close(CloseFlags::Abrupt).unwrap();
}

/// On a freed EVD, `next_event` fails as `dequeue` does (its fd may still be readable: it must
/// not spin on it), and no new `AsyncEvd` can be made.
#[test]
fn a_freed_evd_fails_next_event() {
    let (ia, _) = InterfaceAdapter::open("loopback", 8).unwrap();
    let evd = software_evd(&ia, 8);
    runtime().block_on(async {
        let events = AsyncEvd::new(&evd).unwrap();
        evd.post_se(1).unwrap(); // the fd is readable, and stays so after the free
        evd.free().unwrap();
        let r = timeout(DEADLINE, events.next_event())
            .await
            .expect("at once");
        expect_err(r, ErrorType::InvalidHandle);
        expect_err(AsyncEvd::new(&evd), ErrorType::InvalidHandle);
    });
    ia.close(CloseFlags::Abrupt).unwrap();
}

/// A task asleep in `next_event` when its EVD is freed, or its IA closed, wakes and gets the
/// error (freeing writes the wait fd, as a closed socket becomes readable).
#[test]
fn a_task_asleep_in_next_event_wakes_when_its_evd_is_freed_or_its_ia_closed() {
    for close_ia in [false, true] {
        let (ia, _) = InterfaceAdapter::open("loopback", 8).unwrap();
        let evd = software_evd(&ia, 8);
        let freer = {
            let (ia, evd) = (ia.clone(), evd.clone());
            std::thread::spawn(move || {
                std::thread::sleep(QUIET);
                match close_ia {
                    true => ia.close(CloseFlags::Abrupt).unwrap(),
                    false => evd.free().unwrap(),
                }
            })
        };
        runtime().block_on(async {
            let events = AsyncEvd::new(&evd).unwrap();
            let r = timeout(DEADLINE, events.next_event())
                .await
                .expect("woken by the free");
            expect_err(r, ErrorType::InvalidHandle);
        });
        freer.join().unwrap();
        if !close_ia {
            ia.close(CloseFlags::Abrupt).unwrap();
        }
    }
}

/// Unsignalled events write no fd (as they wake no `Evd::wait`): they are returned by the next
/// dequeue, here behind the signalled event that wakes the task.
#[test]
fn an_unsignalled_completion_comes_with_the_next_signalled_one() {
    let link = LINKS[0];
    let attr = EpAttr {
        request_completion_flags: CompletionFlags::UNSIGNALLED,
        ..EpAttr::default()
    };
    let p = Pair::with_attrs(link, Some(&attr), None);
    let src = p.a.lmr(64);
    let dst = p.b.lmr(64);
    for i in 0..2u64 {
        p.b.ep
            .post_recv(&[dst.triplet(i * 8, 8)], i, CompletionFlags::empty())
            .unwrap();
    }
    runtime().block_on(async {
        let events = AsyncEvd::new(&p.a.req_evd).unwrap();
        // `biased`: the wait starts (on an empty EVD) before the unsignalled send is posted.
        tokio::select! {
            biased;
            ev = events.next_event() => panic!("an unsignalled completion woke the task: {ev:?}"),
            _ = async {
                p.a.ep
                    .post_send(&[src.triplet(0, 8)], 10, CompletionFlags::UNSIGNALLED)
                    .unwrap();
                tokio::time::sleep(QUIET).await;
            } => {}
        }
        assert_eq!(p.a.req_evd.query().unwrap().count, 1, "queued all the same");
        p.a.ep
            .post_send(&[src.triplet(8, 8)], 11, CompletionFlags::empty())
            .unwrap();
        for want in [10, 11] {
            let ev = timeout(DEADLINE, events.next_event())
                .await
                .expect("in time");
            let d = ev.unwrap().as_dto().expect("a DTO completion").clone();
            assert_eq!((d.cookie, d.status), (Cookie(want), DtoStatus::Success));
        }
    });
    p.close();
}

/// Cancel safety: `select!` against a short timer drops `next_event` futures over and over,
/// pending or with their fd already ready, while another thread posts events in bursts. Every
/// event is seen once, in order.
#[test]
fn dropped_next_event_futures_lose_no_event() {
    const N: u64 = 20_000;
    let (ia, _) = InterfaceAdapter::open("loopback", 8).unwrap();
    let evd = software_evd(&ia, 64);
    let poster = evd.clone();
    let producer = std::thread::spawn(move || {
        let mut v = 1;
        let mut x = 0x2545_f491_4f6c_dd1d_u64; // xorshift: burst sizes and pauses
        while v <= N {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            for _ in 0..x % 16 {
                if v > N {
                    break;
                }
                match poster.post_se(v) {
                    Ok(()) => v += 1,
                    Err(e) if e.kind() == ErrorType::QueueFull => std::thread::yield_now(),
                    Err(e) => panic!("post_se: {e}"),
                }
            }
            match x % 8 {
                0 => std::thread::sleep(Duration::from_micros(x % 3000)),
                1..=3 => std::thread::yield_now(),
                _ => {}
            }
        }
    });
    let dropped = runtime().block_on(async {
        let events = AsyncEvd::new(&evd).unwrap();
        let mut next = 1;
        let mut dropped = 0u64;
        let started = tokio::time::Instant::now();
        while next <= N {
            assert!(
                started.elapsed() < Duration::from_secs(60),
                "stuck at {next}"
            );
            tokio::select! {
                ev = events.next_event() => {
                    assert_eq!(software_value(ev.unwrap()), next, "each event once, in order");
                    next += 1;
                }
                _ = tokio::time::sleep(Duration::from_millis(1)) => dropped += 1,
            }
            if next % 64 == 0 {
                // Let some events pile up, so that both branches are often ready at once.
                std::thread::sleep(Duration::from_micros(300));
            }
        }
        dropped
    });
    producer.join().unwrap();
    assert!(dropped > 0, "the timer never won: no future was dropped");
    assert_eq!(evd.query().unwrap().count, 0);
    eprintln!("{N} events, {dropped} next_event futures dropped");
    ia.close(CloseFlags::Abrupt).unwrap();
}

// Several connections, their receives in two EVDs shared by two endpoints each, awaited from
// one task of a multi-thread runtime with `select!`; the peers send from their own threads.
per_link!(
    events_of_several_endpoints_are_awaited_from_one_task,
    |link| {
        const EPS: usize = 4;
        const MSGS: u64 = 300;
        let (ia, _) = InterfaceAdapter::open(link, 8).unwrap();
        let pz = ia.pz_create().unwrap();
        let attr = EpAttr {
            max_recv_dtos: MSGS as usize,
            ..EpAttr::default()
        };
        let recv_evds = [0, 1].map(|_| {
            ia.evd_create(EPS * MSGS as usize, None, EvdFlags::DTO)
                .unwrap()
        });
        let req_evd = ia.evd_create(64, None, EvdFlags::DTO).unwrap();
        let conn_evd = ia.evd_create(64, None, EvdFlags::CONNECTION).unwrap();
        let mem = pz
            .lmr_allocate(EPS * MSGS as usize * 8, MemPriv::ALL)
            .unwrap();
        let mut servers = Vec::new();
        let mut clients = Vec::new();
        for i in 0..EPS {
            let ep = ia
                .endpoint(&pz)
                .recv_evd(&recv_evds[i % 2])
                .request_evd(&req_evd)
                .connect_evd(&conn_evd)
                .attr(attr.clone())
                .build()
                .unwrap();
            // Every receive posted up front: the test is about the events, not about flow control.
            for m in 0..MSGS {
                let slot = (i as u64 * MSGS + m) * 8;
                ep.post_recv(&[mem.triplet(slot, 8)], slot, CompletionFlags::empty())
                    .unwrap();
            }
            let client = Side::new(link, None);
            let end = End {
                ep: &ep,
                conn_evd: &conn_evd,
            };
            connect(client.end(), &ia, end, b"", b"");
            servers.push(ep);
            clients.push(client);
        }
        let done = Arc::new(AtomicBool::new(false));
        let senders: Vec<_> = clients
            .into_iter()
            .enumerate()
            .map(|(i, c)| {
                let done = done.clone();
                std::thread::spawn(move || {
                    let src = c.lmr(MSGS as usize * 8);
                    for m in 0..MSGS {
                        src.write(m as usize * 8, &((i as u64) << 32 | m).to_le_bytes())
                            .unwrap();
                        c.ep.post_send(&[src.triplet(m * 8, 8)], m, CompletionFlags::empty())
                            .unwrap();
                        let d = c.req_done();
                        assert_eq!(d.status, DtoStatus::Success);
                    }
                    // The connection stays up until the receiver has counted everything.
                    while !done.load(Ordering::Acquire) {
                        std::thread::sleep(Duration::from_millis(5));
                    }
                    c.close();
                })
            })
            .collect();
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap();
        let per_ep = rt.block_on(async {
            let a = AsyncEvd::new(&recv_evds[0]).unwrap();
            let b = AsyncEvd::new(&recv_evds[1]).unwrap();
            let mut per_ep: HashMap<u64, u64> = HashMap::new();
            let mut total = 0;
            while total < EPS as u64 * MSGS {
                let ev = timeout(DEADLINE, async {
                    tokio::select! {
                        ev = a.next_event() => ev,
                        ev = b.next_event() => ev,
                    }
                })
                .await
                .unwrap_or_else(|_| panic!("stuck after {total} receives"))
                .unwrap();
                let d = ev.as_dto().expect("a receive").clone();
                assert_eq!(d.status, DtoStatus::Success);
                assert_eq!(d.transferred_length, 8);
                let i = servers
                    .iter()
                    .position(|s| *s == d.ep)
                    .expect("one of ours") as u64;
                let m = per_ep.entry(i).or_default();
                // Each endpoint's receives complete in order, each with what its peer sent.
                assert_eq!(d.cookie, Cookie((i * MSGS + *m) * 8));
                let got = mem.to_vec(d.cookie.0 as usize, 8).unwrap();
                assert_eq!(got, (i << 32 | *m).to_le_bytes());
                *m += 1;
                total += 1;
            }
            per_ep
        });
        done.store(true, Ordering::Release);
        for s in senders {
            s.join().unwrap();
        }
        assert_eq!(per_ep.len(), EPS);
        assert!(per_ep.values().all(|&n| n == MSGS));
        ia.close(CloseFlags::Abrupt).unwrap();
    }
);
