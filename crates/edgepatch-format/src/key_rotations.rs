//! The `rotations` of a server's `v1/public-key` document (docs/UPDATE_PROTOCOL.md, "Signed
//! statements"): each entry as it is written ([`KeyRotation`]), read into the
//! [`statement::Rotation`] that [`statement::follow_rotations`] walks. The one definition:
//! the Worker and `edgepatch site rotate-key` write the entries, the CLI and the browser
//! library (through the wasm bindings) read and follow them.

use serde::{Deserialize, Serialize};

use crate::document_rules::{malformed, DocumentError, Signed};
use crate::statement::{self, Rotation, MAX_ROTATIONS};

/// One key rotation as it is written: the key `from` hands over to `publicKey`, signed by
/// `from`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(test, derive(ts_rs::TS))]
#[serde(rename_all = "camelCase")]
pub struct KeyRotation {
    /// The old key's id (16 hex digits), the signer.
    pub from: String,
    /// The new key's id (16 hex digits).
    pub key_id: String,
    /// The new ed25519 public key, base64 of 32 bytes.
    pub public_key: String,
    /// The base64 ed25519 signature by the old key over the rotation statement.
    pub signature: String,
}

impl KeyRotation {
    /// The rotation, its fields well-formed: `from` 16 hex digits, `publicKey` the base64 of
    /// 32 bytes whose key id is `keyId`, `signature` the base64 of 64 bytes. Whether it is
    /// signed by a trusted key is [`statement::follow_rotations`]'s question.
    pub fn parse(&self) -> Result<Rotation, DocumentError> {
        let from = statement::parse_hex::<8>("key id", &self.from).map_err(|_| malformed("from", "is not 16 hex digits"))?;
        let public_key = crate::document_rules::base64_bytes::<32>("publicKey", &self.public_key)?;
        let key_id = statement::key_id_hex(&public_key);
        if !self.key_id.eq_ignore_ascii_case(&key_id) {
            return Err(malformed("keyId", format_args!("{} is not the key id of its publicKey ({key_id})", self.key_id)));
        }
        let signature = Signed::parse(None, Some(&self.signature))?.signature.expect("a signature was given");
        Ok(Rotation { from, public_key, signature })
    }
}

/// Reads a list of rotations (oldest first): at most [`MAX_ROTATIONS`], each well-formed
/// ([`KeyRotation::parse`]); `rotation {i}` names a bad one.
pub fn parse_rotations(list: &[KeyRotation]) -> Result<Vec<Rotation>, DocumentError> {
    if list.len() > MAX_ROTATIONS {
        return Err(DocumentError::Malformed(format!("{} rotations listed, more than the {MAX_ROTATIONS} a client follows", list.len())));
    }
    list.iter().enumerate().map(|(i, r)| r.parse().map_err(|e| DocumentError::Malformed(format!("rotation {i}: {e}")))).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use base64::Engine;
    use ed25519_dalek::{Signer, SigningKey};

    fn entry(old: &SigningKey, new: &SigningKey) -> KeyRotation {
        let b64 = |b: &[u8]| base64::engine::general_purpose::STANDARD.encode(b);
        let from = statement::key_id(&old.verifying_key().to_bytes());
        let new_pk = new.verifying_key().to_bytes();
        let sig = old.sign(&statement::rotation_statement(&from, &new_pk).unwrap()).to_bytes();
        KeyRotation { from: statement::hex(&from), key_id: statement::key_id_hex(&new_pk), public_key: b64(&new_pk), signature: b64(&sig) }
    }

    #[test]
    fn entries_are_read_and_followed_from_a_trusted_key() {
        let (a, b) = (SigningKey::from_bytes(&[3; 32]), SigningKey::from_bytes(&[4; 32]));
        let list = parse_rotations(&[entry(&a, &b)]).unwrap();
        let pb = b.verifying_key().to_bytes();
        assert_eq!(statement::follow_rotations(&[a.verifying_key().to_bytes()], &list, &statement::key_id(&pb)).unwrap(), vec![pb]);
    }

    #[test]
    fn malformed_entries_are_refused() {
        let good = entry(&SigningKey::from_bytes(&[3; 32]), &SigningKey::from_bytes(&[4; 32]));
        for (bad, want) in [
            (KeyRotation { from: "xyz".into(), ..good.clone() }, "from is not 16 hex digits"),
            (KeyRotation { key_id: "0000000000000000".into(), ..good.clone() }, "is not the key id of its publicKey"),
            (KeyRotation { public_key: "AAAA".into(), ..good.clone() }, "publicKey has 3 bytes, not 32"),
            (KeyRotation { signature: "AAAA".into(), ..good.clone() }, "signature has 3 bytes, not 64"),
        ] {
            let err = parse_rotations(&[good.clone(), bad]).unwrap_err().to_string();
            assert!(err.starts_with("rotation 1: ") && err.contains(want), "{err} lacks {want:?}");
        }
        assert!(parse_rotations(&vec![good; MAX_ROTATIONS + 1]).unwrap_err().to_string().contains("more than the 32"));
    }
}
