//! A secret from the config (a token, a key, a password): kept out of
//! every `Debug` print, named in logs and metrics only by a digest. A leaf
//! the other config files share.

/// A secret read from a file or the environment; never printed.
#[derive(Clone, PartialEq, Eq)]
pub struct Secret(pub(crate) String);

impl std::fmt::Debug for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Secret(..)")
    }
}

impl Secret {
    /// The first `bytes` bytes of the secret's SHA-256, in hex: a stable
    /// name for it that reveals nothing (the same on every instance).
    pub(crate) fn digest_hex(&self, bytes: usize) -> String {
        let digest = aws_lc_rs::digest::digest(&aws_lc_rs::digest::SHA256, self.0.as_bytes());
        let head = digest.as_ref().get(..bytes).unwrap_or(digest.as_ref());
        head.iter().map(|b| format!("{b:02x}")).collect()
    }
}
