//! The shm ring consumer against what a buggy or hostile peer could leave in a ring (the
//! stable run of the `shm_ring` fuzz target): random tails, heads and record bytes, and valid
//! records with one field broken. It never accepts a record outside the mapping and never
//! panics (`dapl::fuzz_api::shm_ring_consume` asserts both).

use dapl::fuzz_api::shm_ring_consume;

/// xorshift64*: deterministic inputs without a dependency.
fn rng(seed: &mut u64) -> u64 {
    *seed ^= *seed >> 12;
    *seed ^= *seed << 25;
    *seed ^= *seed >> 27;
    seed.wrapping_mul(0x2545_f491_4f6c_dd1d)
}

fn record(len: u32, kind: u8, payload_len: u32) -> [u8; 64] {
    let mut r = [0u8; 64];
    r[0..4].copy_from_slice(&len.to_le_bytes());
    r[4] = kind;
    r[8..12].copy_from_slice(&payload_len.to_le_bytes());
    r
}

fn ring(tail: u64, head: u64, data: &[u8]) -> Vec<u8> {
    let mut v = tail.to_le_bytes().to_vec();
    v.extend_from_slice(&head.to_le_bytes());
    v.extend_from_slice(data);
    v
}

#[test]
fn well_formed_records_are_read_and_broken_ones_refused_inside_the_ring() {
    // Three good records.
    let mut data = Vec::new();
    for k in 1..=3u8 {
        data.extend_from_slice(&record(64, k, 8));
    }
    assert_eq!(shm_ring_consume(&ring(192, 0, &data)), 3);
    // One field broken at a time: never more than the good prefix.
    let bad: [[u8; 64]; 5] = [
        record(100, 1, 8),     // unaligned length
        record(0, 1, 0),       // zero length
        record(64, 99, 0),     // unknown kind
        record(64, 1, 1000),   // payload longer than the record
        record(1 << 20, 1, 8), // past the end of the ring
    ];
    for b in bad {
        let mut d = record(64, 1, 8).to_vec();
        d.extend_from_slice(&b);
        assert_eq!(shm_ring_consume(&ring(128, 0, &d)), 1);
    }
    // The tail is not what finds records (their first words are; the word after the last
    // is 0): an impossible one changes nothing.
    assert_eq!(shm_ring_consume(&ring(1 << 40, 0, &data)), 3);
    assert_eq!(shm_ring_consume(&ring(0, 0, &data)), 3);
    // Good records all around the ring (a peer sending without end): a ring's worth at a
    // time.
    let all: Vec<u8> = (0..4096 / 64).flat_map(|_| record(64, 1, 8)).collect();
    assert_eq!(shm_ring_consume(&ring(0, 0, &all)), 4096 / 64);
    // Pads all around it: a pad at the start of the data area is refused, so no loop.
    let pads: Vec<u8> = (0..4096 / 64).flat_map(|_| record(64, 0, 0)).collect();
    assert_eq!(shm_ring_consume(&ring(0, 0, &pads)), 0);
}

/// A 64-byte record of `kind` with `flags` and `stag`.
fn flagged(kind: u8, flags: u8, stag: u32) -> [u8; 64] {
    let mut r = record(64, kind, 8);
    r[5] = flags;
    r[12..16].copy_from_slice(&stag.to_le_bytes());
    r
}

// A record the consumer does not understand breaks the connection rather than being half
// understood: a flag its kind does not have (an older consumer would have taken a Send with
// Invalidate for a plain Send), or a Send naming an STag without the INVALIDATE flag (32).
#[test]
fn records_with_flags_their_kind_does_not_have_are_refused() {
    const LAST: u8 = 1;
    const SOLICITED: u8 = 2;
    const INVALIDATE: u8 = 32;
    let good = [
        flagged(1, LAST | SOLICITED | INVALIDATE, 0x1234_5601), // Send with SE and Invalidate
        flagged(1, LAST, 0),                                    // Send
        flagged(2, 0, 0x99),                                    // Write: the STag is its sink
        flagged(6, 4 | 8, 0),                                   // Close, broken, read refused
    ];
    let mut data = Vec::new();
    for g in good {
        data.extend_from_slice(&g);
    }
    assert_eq!(shm_ring_consume(&ring(256, 0, &data)), 4);
    let bad = [
        flagged(1, LAST, 0x1234_5601), // a Send naming an STag without INVALIDATE
        flagged(2, INVALIDATE, 0x99),  // INVALIDATE on a Write
        flagged(3, INVALIDATE, 7),     // on Immediate Data
        flagged(1, LAST | 64, 0),      // an unknown flag
        flagged(4, LAST, 0),           // LAST on a Read Request
        flagged(6, INVALIDATE | 4, 0), // INVALIDATE on a Close
    ];
    for b in bad {
        let mut d = flagged(1, LAST, 0).to_vec();
        d.extend_from_slice(&b);
        assert_eq!(shm_ring_consume(&ring(128, 0, &d)), 1, "{:?}", &b[..16]);
    }
}

#[test]
fn random_ring_contents_never_take_the_consumer_outside_the_ring() {
    let mut seed = 0x9e37_79b9_7f4a_7c15u64;
    for i in 0..20_000 {
        let len = (rng(&mut seed) % 600) as usize;
        let mut bytes: Vec<u8> = (0..len).map(|_| rng(&mut seed) as u8).collect();
        if i % 2 == 0 && bytes.len() >= 16 {
            // Plausible control words: a tail within a ring of a small head.
            let head = rng(&mut seed) % 4096 / 64 * 64;
            let tail = head + rng(&mut seed) % 4200;
            bytes[..8].copy_from_slice(&tail.to_le_bytes());
            bytes[8..16].copy_from_slice(&head.to_le_bytes());
        }
        shm_ring_consume(&bytes);
    }
}
