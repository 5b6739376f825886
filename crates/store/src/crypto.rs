//! Envelope encryption of blobs at rest (AES-256-GCM): each organization has a data key,
//! stored wrapped (encrypted) by the master key from configuration; state versions and
//! plan files are sealed with their organization's data key. Sealed blobs start with
//! `TPE1`; anything else is a blob written before encryption and is read as is.

use std::collections::HashMap;
use std::sync::Mutex;

use aes_gcm::aead::{Aead, KeyInit, Payload};
use aes_gcm::{Aes256Gcm, Nonce};
use rand::RngCore;
use terraplane_domain::OrgId;

use crate::error::{Result, StoreError};

const MAGIC: &[u8; 4] = b"TPE1";

/// 32 bytes of key material.
#[derive(Clone)]
pub struct KeyBytes([u8; 32]);

impl KeyBytes {
    pub fn from_slice(b: &[u8]) -> Option<Self> {
        <[u8; 32]>::try_from(b).ok().map(Self)
    }

    pub(crate) fn expose(&self) -> &[u8] {
        &self.0
    }

    pub fn random() -> Self {
        let mut k = [0u8; 32];
        rand::thread_rng().fill_bytes(&mut k);
        Self(k)
    }
}

impl std::fmt::Debug for KeyBytes {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("KeyBytes([redacted])")
    }
}

fn seal_with(key: &KeyBytes, plaintext: &[u8], aad: &[u8]) -> Result<Vec<u8>> {
    let cipher = Aes256Gcm::new_from_slice(&key.0).map_err(|_| StoreError::Invalid("bad key size".into()))?;
    let mut nonce = [0u8; 12];
    rand::thread_rng().fill_bytes(&mut nonce);
    let ct = cipher
        .encrypt(&Nonce::from(nonce), Payload { msg: plaintext, aad })
        .map_err(|_| StoreError::Invalid("encryption failed".into()))?;
    let mut out = Vec::with_capacity(4 + 12 + ct.len());
    out.extend_from_slice(MAGIC);
    out.extend_from_slice(&nonce);
    out.extend_from_slice(&ct);
    Ok(out)
}

fn open_with(key: &KeyBytes, sealed: &[u8], aad: &[u8]) -> Result<Vec<u8>> {
    if sealed.len() < 16 || &sealed[..4] != MAGIC {
        return Err(StoreError::Invalid("not a sealed blob".into()));
    }
    let cipher = Aes256Gcm::new_from_slice(&key.0).map_err(|_| StoreError::Invalid("bad key size".into()))?;
    let nonce: [u8; 12] = sealed[4..16]
        .try_into()
        .map_err(|_| StoreError::Invalid("not a sealed blob".into()))?;
    cipher
        .decrypt(
            &Nonce::from(nonce),
            Payload {
                msg: &sealed[16..],
                aad,
            },
        )
        .map_err(|_| StoreError::Invalid("cannot decrypt: wrong key or corrupted data".into()))
}

pub fn is_sealed(b: &[u8]) -> bool {
    b.len() >= 16 && &b[..4] == MAGIC
}

/// The master key (and earlier ones, still accepted while a rotation is under way) and
/// the unwrapped data keys in use.
pub struct Keyring {
    master: KeyBytes,
    previous: Vec<KeyBytes>,
    cache: Mutex<HashMap<OrgId, KeyBytes>>,
}

/// A short public name of a master key: which key wrapped a row, without revealing it.
pub fn key_id(k: &KeyBytes) -> String {
    use sha2::Digest;
    hex::encode(sha2::Sha256::digest(
        [b"terraplane-master-key:".as_slice(), &k.0].concat(),
    ))[..16]
        .to_owned()
}

impl Keyring {
    pub fn new(master: KeyBytes) -> Self {
        Self {
            master,
            previous: Vec::new(),
            cache: Mutex::new(HashMap::new()),
        }
    }

    /// Earlier master keys: what they wrapped still opens (until `rotate` re-wraps it).
    pub fn with_previous(mut self, previous: Vec<KeyBytes>) -> Self {
        self.previous = previous;
        self
    }

    pub fn master_key_id(&self) -> String {
        key_id(&self.master)
    }

    /// Opens something wrapped by the master key or by a previous one.
    fn open_any(&self, sealed: &[u8], aad: &[u8]) -> Result<Vec<u8>> {
        let mut last = None;
        for k in std::iter::once(&self.master).chain(&self.previous) {
            match open_with(k, sealed, aad) {
                Ok(p) => return Ok(p),
                Err(e) => last = Some(e),
            }
        }
        Err(last.unwrap_or_else(|| StoreError::Invalid("no master key".into())))
    }

    /// Seals instance-wide secrets (the OIDC signing keys) with the master key.
    pub(crate) fn seal_instance(&self, plaintext: &[u8], purpose: &str) -> Result<Vec<u8>> {
        seal_with(&self.master, plaintext, purpose.as_bytes())
    }

    pub(crate) fn open_instance(&self, sealed: &[u8], purpose: &str) -> Result<Vec<u8>> {
        self.open_any(sealed, purpose.as_bytes())
    }

    pub(crate) fn cached(&self, org: OrgId) -> Option<KeyBytes> {
        self.cache.lock().ok()?.get(&org).cloned()
    }

    pub(crate) fn remember(&self, org: OrgId, key: KeyBytes) {
        if let Ok(mut c) = self.cache.lock() {
            c.insert(org, key);
        }
    }

    pub(crate) fn wrap(&self, org: OrgId, data_key: &KeyBytes) -> Result<Vec<u8>> {
        seal_with(&self.master, &data_key.0, org.to_string().as_bytes())
    }

    pub(crate) fn unwrap(&self, org: OrgId, wrapped: &[u8]) -> Result<KeyBytes> {
        let raw = self.open_any(wrapped, org.to_string().as_bytes())?;
        KeyBytes::from_slice(&raw).ok_or_else(|| StoreError::Invalid("wrapped data key has the wrong size".into()))
    }
}

/// Seals `plaintext` for `org` (the organization id is authenticated data, so a blob
/// copied into another organization's rows does not decrypt).
pub(crate) fn seal(data_key: &KeyBytes, org: OrgId, plaintext: &[u8]) -> Result<Vec<u8>> {
    seal_with(data_key, plaintext, org.to_string().as_bytes())
}

pub(crate) fn open(data_key: &KeyBytes, org: OrgId, sealed: &[u8]) -> Result<Vec<u8>> {
    open_with(data_key, sealed, org.to_string().as_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seals_and_opens_bound_to_the_organization() {
        let k = KeyBytes::random();
        let (a, b) = (OrgId::new(), OrgId::new());
        let s = seal(&k, a, b"state with a password").unwrap();
        assert!(is_sealed(&s));
        assert!(!s.windows(8).any(|w| w == b"password"));
        assert_eq!(open(&k, a, &s).unwrap(), b"state with a password");
        assert!(open(&k, b, &s).is_err(), "bound to its organization");
        assert!(open(&KeyBytes::random(), a, &s).is_err(), "wrong key");
        let ring = Keyring::new(KeyBytes::random());
        let wrapped = ring.wrap(a, &k).unwrap();
        assert_eq!(ring.unwrap(a, &wrapped).unwrap().0, k.0);
        assert!(Keyring::new(KeyBytes::random()).unwrap(a, &wrapped).is_err());
        let newer = Keyring::new(KeyBytes::random()).with_previous(vec![ring.master.clone()]);
        assert_eq!(
            newer.unwrap(a, &wrapped).unwrap().0,
            k.0,
            "a previous master key still opens"
        );
        assert_ne!(newer.master_key_id(), ring.master_key_id());
    }
}
