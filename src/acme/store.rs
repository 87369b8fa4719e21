//! The state directory: the ACME account and each name's certificate with
//! its key, written atomically (a temporary file renamed into place) with
//! mode 0600, so a crash or a full disk never leaves a half-written file
//! where weir would read it.
//!
//! Layout: `accounts/<directory-hash>.json` (the account for one CA; its
//! private key is inside) and `certificates/<name>.pem` (the chain, leaf
//! first, then the key: one file, so the pair is replaced in one rename).

use std::io::Write;
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use instant_acme::AccountCredentials;
use rustls::sign::CertifiedKey;
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};

/// A certificate on disk, ready to serve.
pub(crate) struct Stored {
    pub(crate) key: Arc<CertifiedKey>,
    pub(crate) not_before: SystemTime,
    pub(crate) not_after: SystemTime,
    /// The leaf, for the CA's renewal information and the renewal jitter.
    pub(crate) leaf: CertificateDer<'static>,
    /// Chain then key, as stored (and shared with a fleet).
    pub(crate) pem: String,
}

impl Stored {
    /// A seed for the renewal jitter that is the same for this certificate
    /// every time it is loaded.
    pub(crate) fn seed(&self) -> u64 {
        self.leaf
            .as_ref()
            .iter()
            .fold(0xcbf2_9ce4_8422_2325, |h, b| {
                (h ^ u64::from(*b)).wrapping_mul(0x0100_0000_01b3)
            })
    }

    pub(crate) fn not_after_unix(&self) -> i64 {
        self.not_after
            .duration_since(SystemTime::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs() as i64)
    }
}

#[derive(Debug, thiserror::Error)]
pub(crate) enum StoreError {
    #[error("{}: {source}", path.display())]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{}: {why}", path.display())]
    Invalid { path: PathBuf, why: String },
}

pub(crate) struct Store {
    dir: PathBuf,
}

impl Store {
    pub(crate) fn new(dir: &Path) -> Self {
        Store {
            dir: dir.to_path_buf(),
        }
    }

    fn account_path(&self, directory: &str) -> PathBuf {
        self.dir
            .join("accounts")
            .join(format!("{}.json", account_id(directory)))
    }

    fn certificate_path(&self, name: &str) -> PathBuf {
        self.dir.join("certificates").join(format!("{name}.pem"))
    }

    pub(crate) fn load_account(
        &self,
        directory: &str,
    ) -> Result<Option<AccountCredentials>, StoreError> {
        let path = self.account_path(directory);
        let Some(bytes) = read_if_present(&path)? else {
            return Ok(None);
        };
        serde_json::from_slice(&bytes)
            .map(Some)
            .map_err(|e| StoreError::Invalid {
                path,
                why: e.to_string(),
            })
    }

    pub(crate) fn save_account(
        &self,
        directory: &str,
        credentials: &AccountCredentials,
    ) -> Result<(), StoreError> {
        let path = self.account_path(directory);
        let json = serde_json::to_vec_pretty(credentials).map_err(|e| StoreError::Invalid {
            path: path.clone(),
            why: e.to_string(),
        })?;
        write_atomically(&path, &json)
    }

    /// Forget an account the CA no longer knows; the next order makes a new one.
    pub(crate) fn remove_account(&self, directory: &str) -> Result<(), StoreError> {
        let path = self.account_path(directory);
        match std::fs::remove_file(&path) {
            Ok(()) => Ok(()),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
            Err(source) => Err(StoreError::Io { path, source }),
        }
    }

    /// The stored certificate for `name`, if there is one that covers the
    /// name and pairs with its key (expired or not: the caller decides).
    pub(crate) fn load_certificate(&self, name: &str) -> Result<Option<Stored>, StoreError> {
        let path = self.certificate_path(name);
        let Some(pem) = read_if_present(&path)? else {
            return Ok(None);
        };
        parse(&pem, name)
            .map(Some)
            .map_err(|why| StoreError::Invalid { path, why })
    }

    /// Write a newly issued chain and key for `name`, and return them
    /// parsed; nothing is written if they do not parse or pair.
    pub(crate) fn save_certificate(
        &self,
        name: &str,
        chain_pem: &str,
        key_pem: &str,
    ) -> Result<Stored, StoreError> {
        let path = self.certificate_path(name);
        let mut pem = chain_pem.trim_end().to_string();
        pem.push('\n');
        pem.push_str(key_pem);
        let stored = parse(pem.as_bytes(), name).map_err(|why| StoreError::Invalid {
            path: path.clone(),
            why,
        })?;
        self.save_parsed(name, &stored)?;
        Ok(stored)
    }

    /// Write a certificate already parsed (one the fleet shared).
    pub(crate) fn save_parsed(&self, name: &str, stored: &Stored) -> Result<(), StoreError> {
        write_atomically(&self.certificate_path(name), stored.pem.as_bytes())
    }
}

/// The CA's name in file and key names: one account per CA, named by a
/// hash of the directory URL, so switching from staging to production
/// starts a new one.
pub(crate) fn account_id(directory: &str) -> String {
    let digest = aws_lc_rs::digest::digest(&aws_lc_rs::digest::SHA256, directory.as_bytes());
    digest.as_ref()[..8]
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

fn read_if_present(path: &Path) -> Result<Option<Vec<u8>>, StoreError> {
    match std::fs::read(path) {
        Ok(b) => Ok(Some(b)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(source) => Err(StoreError::Io {
            path: path.to_path_buf(),
            source,
        }),
    }
}

/// Chain + key in one PEM, checked to pair and to cover `name`.
pub(crate) fn parse(pem: &[u8], name: &str) -> Result<Stored, String> {
    let chain = CertificateDer::pem_slice_iter(pem)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| format!("unreadable certificate: {e}"))?;
    let key = PrivateKeyDer::from_pem_slice(pem).map_err(|e| format!("unreadable key: {e}"))?;
    let leaf = chain.first().cloned().ok_or("no certificate in the file")?;
    let (not_before, not_after) = validity(&leaf)?;
    let (key, names) = crate::pki::certified_key(chain, key).map_err(|e| e.to_string())?;
    if !names.iter().any(|n| n == name) {
        return Err(format!("the certificate does not cover {name}"));
    }
    Ok(Stored {
        key,
        not_before,
        not_after,
        leaf,
        pem: String::from_utf8_lossy(pem).into_owned(),
    })
}

/// The leaf's notBefore and notAfter.
fn validity(leaf: &CertificateDer<'_>) -> Result<(SystemTime, SystemTime), String> {
    let (_, cert) = x509_parser::parse_x509_certificate(leaf.as_ref())
        .map_err(|e| format!("unparsable certificate: {e}"))?;
    let at = |t: x509_parser::time::ASN1Time| {
        let secs = t.timestamp();
        if secs >= 0 {
            SystemTime::UNIX_EPOCH + Duration::from_secs(secs as u64)
        } else {
            SystemTime::UNIX_EPOCH
        }
    };
    let v = &cert.tbs_certificate.validity;
    Ok((at(v.not_before), at(v.not_after)))
}

/// Write to a temporary file in the same directory (mode 0600), flush it
/// to disk, and rename it over `path`.
fn write_atomically(path: &Path, bytes: &[u8]) -> Result<(), StoreError> {
    let io = |source| StoreError::Io {
        path: path.to_path_buf(),
        source,
    };
    let dir = path.parent().unwrap_or(Path::new("."));
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
        .map_err(io)?;
    let tmp = path.with_extension(format!("tmp-{}", std::process::id()));
    let written = (|| {
        let mut f = std::fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .mode(0o600)
            .open(&tmp)?;
        f.write_all(bytes)?;
        f.sync_all()?;
        std::fs::rename(&tmp, path)?;
        // The rename itself is durable once the directory is synced.
        std::fs::File::open(dir)?.sync_all()
    })();
    if written.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    written.map_err(io)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    fn generated(name: &str) -> (String, String) {
        let g = rcgen::generate_simple_self_signed(vec![name.to_string()]).expect("generate");
        (g.cert.pem(), g.signing_key.serialize_pem())
    }

    #[test]
    fn a_certificate_round_trips_with_mode_0600() {
        let dir = tempfile::tempdir().expect("tempdir");
        let store = Store::new(dir.path());
        assert!(store.load_certificate("a.test").expect("load").is_none());
        let (cert, key) = generated("a.test");
        let saved = store.save_certificate("a.test", &cert, &key).expect("save");
        let loaded = store
            .load_certificate("a.test")
            .expect("load")
            .expect("present");
        assert_eq!(saved.leaf, loaded.leaf);
        assert!(loaded.not_after > loaded.not_before);
        let mode = std::fs::metadata(dir.path().join("certificates/a.test.pem"))
            .expect("stat")
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600);
        let dir_mode = std::fs::metadata(dir.path().join("certificates"))
            .expect("stat")
            .permissions()
            .mode();
        assert_eq!(dir_mode & 0o777, 0o700);
    }

    #[test]
    fn a_certificate_for_another_name_or_key_is_not_saved() {
        let dir = tempfile::tempdir().expect("tempdir");
        let store = Store::new(dir.path());
        let (cert, key) = generated("b.test");
        let err = store
            .save_certificate("a.test", &cert, &key)
            .err()
            .expect("refused");
        assert!(err.to_string().contains("does not cover a.test"), "{err}");
        let (_, other_key) = generated("a.test");
        let (cert_a, _) = generated("a.test");
        assert!(
            store
                .save_certificate("a.test", &cert_a, &other_key)
                .is_err()
        );
        assert!(!dir.path().join("certificates/a.test.pem").exists());
    }

    #[test]
    fn a_corrupt_file_is_reported_not_served() {
        let dir = tempfile::tempdir().expect("tempdir");
        let store = Store::new(dir.path());
        std::fs::create_dir_all(dir.path().join("certificates")).expect("mkdir");
        std::fs::write(dir.path().join("certificates/a.test.pem"), "garbage").expect("write");
        assert!(matches!(
            store.load_certificate("a.test"),
            Err(StoreError::Invalid { .. })
        ));
    }
}
