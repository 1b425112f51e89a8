//! Message contents that tell messages and positions apart.

/// `len` bytes of message `k`: the byte at `i` differs between neighbouring messages and
/// positions, so a message that arrives changed, shifted or in another's place is seen.
pub fn message_bytes(k: usize, len: usize) -> Vec<u8> {
    (0..len).map(|i| (k * 31 + i * 7 + 1) as u8).collect()
}
