//! CRC-32C (Castagnoli, reflected polynomial `0x82f63b78`) computed one bit at a time: the
//! tests' own oracle, written independently of the library's table-driven slice-by-8 so that
//! the two can check each other. One copy, shared by the journal's unit tests (through a
//! `#[path]` module) and the file-journal integration tests, which need it to forge records.

/// The CRC-32C of `data`, bit by bit.
pub fn crc32c(data: &[u8]) -> u32 {
    let mut crc = !0u32;
    for &b in data {
        crc ^= u32::from(b);
        for _ in 0..8 {
            crc = if crc & 1 != 0 {
                (crc >> 1) ^ 0x82f6_3b78
            } else {
                crc >> 1
            };
        }
    }
    !crc
}
