//! SHA-256 digests: a script's checksum and the `lib/` directory digest (CONTRACT.md §3).

use std::fmt;

use sha2::{Digest, Sha256};

/// A SHA-256 digest, shown and stored as 64 lowercase hex characters.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Sha256Digest([u8; 32]);

/// Why a string is not a SHA-256 hex digest.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("not a SHA-256 digest ({reason}): expected 64 lowercase hex characters")]
pub struct DigestError {
    /// What is wrong with the input.
    pub reason: String,
}

impl Sha256Digest {
    /// The digest of `bytes`: a script's checksum is exactly this over the
    /// script's own bytes.
    pub fn of(bytes: &[u8]) -> Self {
        Sha256Digest(Sha256::digest(bytes).into())
    }

    /// Parses 64 lowercase hex characters.
    pub fn parse_hex(input: &str) -> Result<Self, DigestError> {
        if input.len() != 64 {
            return Err(DigestError {
                reason: format!("{} characters", input.chars().count()),
            });
        }
        let mut out = [0u8; 32];
        for (i, pair) in input.as_bytes().chunks_exact(2).enumerate() {
            let hi = hex_value(pair[0]).ok_or_else(|| bad_char(pair[0], 2 * i))?;
            let lo = hex_value(pair[1]).ok_or_else(|| bad_char(pair[1], 2 * i + 1))?;
            out[i] = (hi << 4) | lo;
        }
        Ok(Sha256Digest(out))
    }

    /// The raw 32 bytes.
    pub fn as_bytes(&self) -> &[u8; 32] {
        &self.0
    }
}

fn hex_value(c: u8) -> Option<u8> {
    match c {
        b'0'..=b'9' => Some(c - b'0'),
        b'a'..=b'f' => Some(c - b'a' + 10),
        _ => None,
    }
}

fn bad_char(c: u8, position: usize) -> DigestError {
    DigestError {
        reason: format!("byte {:?} at position {position}", c as char),
    }
}

impl Sha256Digest {
    /// The 64 lowercase hex characters, without allocating.
    fn hex(&self) -> [u8; 64] {
        const DIGITS: &[u8; 16] = b"0123456789abcdef";
        let mut out = [0u8; 64];
        for (pair, byte) in out.chunks_exact_mut(2).zip(self.0) {
            pair[0] = DIGITS[usize::from(byte >> 4)];
            pair[1] = DIGITS[usize::from(byte & 0x0f)];
        }
        out
    }
}

impl fmt::Display for Sha256Digest {
    // One write of the whole text: a `write!` per byte was most of the
    // cost of encoding an entry, which a run does several times per script.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let hex = self.hex();
        f.write_str(std::str::from_utf8(&hex).map_err(|_| fmt::Error)?)
    }
}

text_form!(Sha256Digest, DigestError, Sha256Digest::parse_hex);

/// The `lib/` directory digest, algorithm `lib-sha256-v1`.
///
/// Files are fed in byte-wise order of their `/`-separated path relative to
/// `lib/`. For each file the hash absorbs the path bytes, a NUL, the content
/// length as a big-endian `u64`, then the content. Length-prefixing makes the
/// encoding unambiguous: no two different directories produce the same byte
/// stream. An absent or empty `lib/` digests the empty stream. The algorithm
/// is part of the ledger format; changing it needs a new name.
#[derive(Debug, Default)]
pub struct LibDigest {
    files: Vec<(String, Vec<u8>)>,
}

impl LibDigest {
    /// The name recorded alongside the digest in documentation and tooling.
    pub const ALGORITHM: &'static str = "lib-sha256-v1";

    /// An empty directory.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds one file by its path relative to `lib/`, with `/` separators.
    pub fn add_file(&mut self, relative_path: String, content: Vec<u8>) {
        self.files.push((relative_path, content));
    }

    /// The digest over every file added, in sorted path order.
    pub fn finish(mut self) -> Sha256Digest {
        self.files
            .sort_by(|a, b| a.0.as_bytes().cmp(b.0.as_bytes()));
        let mut hasher = Sha256::new();
        for (path, content) in &self.files {
            hasher.update(path.as_bytes());
            hasher.update([0u8]);
            hasher.update((content.len() as u64).to_be_bytes());
            hasher.update(content);
        }
        Sha256Digest(hasher.finalize().into())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn digest_of_known_input_matches_the_sha256_test_vector() {
        assert_eq!(
            Sha256Digest::of(b"abc").to_string(),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
    }

    #[test]
    fn hex_round_trips() {
        let digest = Sha256Digest::of(b"script");
        assert_eq!(
            Sha256Digest::parse_hex(&digest.to_string()).unwrap(),
            digest
        );
    }

    #[test]
    fn rejects_uppercase_short_and_non_hex() {
        let upper = Sha256Digest::of(b"x").to_string().to_uppercase();
        assert!(Sha256Digest::parse_hex(&upper).is_err());
        assert!(Sha256Digest::parse_hex("abc").is_err());
        assert!(Sha256Digest::parse_hex(&"g".repeat(64)).is_err());
        assert!(Sha256Digest::parse_hex(&"é".repeat(32)).is_err());
    }

    #[test]
    fn lib_digest_does_not_depend_on_insertion_order() {
        let mut a = LibDigest::new();
        a.add_file("a.sh".into(), b"one".to_vec());
        a.add_file("sub/b.sh".into(), b"two".to_vec());
        let mut b = LibDigest::new();
        b.add_file("sub/b.sh".into(), b"two".to_vec());
        b.add_file("a.sh".into(), b"one".to_vec());
        assert_eq!(a.finish(), b.finish());
    }

    #[test]
    fn lib_digest_distinguishes_moving_bytes_between_path_and_content() {
        let mut a = LibDigest::new();
        a.add_file("ab".into(), b"c".to_vec());
        let mut b = LibDigest::new();
        b.add_file("a".into(), b"bc".to_vec());
        assert_ne!(a.finish(), b.finish());
    }

    #[test]
    fn empty_lib_digests_the_empty_stream() {
        assert_eq!(LibDigest::new().finish(), Sha256Digest::of(b""));
    }
}
