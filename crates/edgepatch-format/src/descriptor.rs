//! The update descriptor (docs/UPDATE_PROTOCOL.md, "Documents"): the JSON a server answers
//! for `v1/games/{game}/updates/{from}/{to}`, saying where the pair's manifest and patch are
//! and carrying the signature over its update statement. The one definition: the Worker
//! writes it, `edgepatch site add` writes it, the CLI and the browser library read it (the
//! TypeScript type is generated from this one, src/typescript.rs).
//!
//! The descriptor itself is not trusted: [`UpdateDescriptor::check`] refuses one that is
//! malformed or is for another update than the one asked for, and
//! [`CheckedDescriptor::verify`] checks its signature over the update statement rebuilt
//! from what was asked for.

use serde::{Deserialize, Serialize};

use crate::document_rules::{check_name_field, malformed, DocumentError, Signed};
use crate::statement::{self, KeyId};
use crate::Capabilities;

/// An update descriptor as it is written (field names in camelCase).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(test, derive(ts_rs::TS))]
#[cfg_attr(test, ts(optional_fields))]
#[serde(rename_all = "camelCase")]
pub struct UpdateDescriptor {
    /// The game.
    pub game: String,
    /// The old build (`_`: an install).
    pub from: String,
    /// The new build.
    pub to: String,
    /// The patch manifest, relative to the descriptor's own URL (absolute URLs allowed).
    pub manifest_url: String,
    /// The manifest's size in bytes (signed).
    #[cfg_attr(test, ts(type = "number"))]
    pub manifest_size: u64,
    /// The manifest's BLAKE3, 64 hex digits (signed).
    pub manifest_blake3: String,
    /// The patch, relative to the descriptor's own URL (absolute URLs allowed).
    pub patch_url: String,
    /// Unsigned: only the manifest (bound by the signed statement) says how big the patch is.
    #[cfg_attr(test, ts(type = "number"))]
    pub patch_size: u64,
    /// The patch's BLAKE3, 64 hex digits, when the server says (the manifest binds it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub patch_blake3: Option<String>,
    /// Unsigned: the reader capabilities the patch needs (docs/FORMAT.md §5, hex), when the
    /// server says. A forged value can only make the client refuse the update.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reader_needs: Option<String>,
    /// The signing key's id (16 hex digits), on a signing server.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub key_id: Option<String>,
    /// The base64 ed25519 signature over the update statement, on a signing server.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub signature: Option<String>,
}

/// A descriptor whose fields are well-formed and are of the update asked for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CheckedDescriptor {
    /// The game, and the builds asked for.
    pub game: String,
    /// The old build (`_`: an install).
    pub from: String,
    /// The new build.
    pub to: String,
    /// The manifest's signed size.
    pub manifest_size: u64,
    /// The manifest's signed BLAKE3.
    pub manifest_blake3: [u8; 32],
    /// The patch's size as the descriptor says (unsigned).
    pub patch_size: u64,
    /// What the patch needs, when the descriptor says.
    pub reader_needs: Option<Capabilities>,
    /// `keyId` and `signature`.
    pub signed: Signed,
}

impl UpdateDescriptor {
    /// Checks the fields of the descriptor answered for the update of `game` from `from` to
    /// `to`: names by the protocol's rule and equal to the ones asked for, `manifestBlake3`
    /// (and `patchBlake3`, when given) 64 hex digits, `readerNeeds` a set of capabilities,
    /// `keyId` 16 hex digits, `signature` the base64 of 64 bytes. Whether the descriptor
    /// must be signed is [`CheckedDescriptor::verify`]'s question.
    pub fn check(&self, game: &str, from: &str, to: &str) -> Result<CheckedDescriptor, DocumentError> {
        check_name_field("game", "game", &self.game)?;
        check_name_field("build", "from", &self.from)?;
        check_name_field("build", "to", &self.to)?;
        if self.game != game || self.from != from || self.to != to {
            return Err(DocumentError::Malformed(format!("the descriptor is for {} {} -> {}, not {game} {from} -> {to}", self.game, self.from, self.to)));
        }
        if self.to == "_" {
            return Err(malformed("to", "is the reserved empty build"));
        }
        let manifest_blake3 =
            statement::parse_hex::<32>("manifestBlake3", &self.manifest_blake3).map_err(|_| malformed("manifestBlake3", "is not 64 hex digits"))?;
        if let Some(p) = &self.patch_blake3 {
            statement::parse_hex::<32>("patchBlake3", p).map_err(|_| malformed("patchBlake3", "is not 64 hex digits"))?;
        }
        for (field, url) in [("manifestUrl", &self.manifest_url), ("patchUrl", &self.patch_url)] {
            if url.is_empty() {
                return Err(malformed(field, "is empty"));
            }
        }
        let reader_needs = self
            .reader_needs
            .as_deref()
            .map(|h| Capabilities::from_hex(h).map_err(|_| malformed("readerNeeds", "is not a set of reader capabilities (1 to 16 hex digits)")))
            .transpose()?;
        Ok(CheckedDescriptor {
            game: self.game.clone(),
            from: self.from.clone(),
            to: self.to.clone(),
            manifest_size: self.manifest_size,
            manifest_blake3,
            patch_size: self.patch_size,
            reader_needs,
            signed: Signed::parse(self.key_id.as_deref(), self.signature.as_deref())?,
        })
    }
}

impl CheckedDescriptor {
    /// The update statement this descriptor's signature must cover, for the key `key_id`:
    /// rebuilt from the game and builds asked for and the manifest's size and BLAKE3.
    pub fn statement(&self, key_id: &KeyId) -> Result<Vec<u8>, statement::TrustError> {
        statement::update_statement(key_id, &self.game, &self.from, &self.to, self.manifest_size, &self.manifest_blake3)
    }

    /// Checks the signature over the update statement under the accepted key `keyId` names
    /// (`keys`: the accepted ed25519 public keys); returns that key. Refused: a descriptor
    /// without `keyId` or `signature`, a key not accepted, a signature that does not verify.
    pub fn verify(&self, keys: &[[u8; 32]]) -> Result<[u8; 32], DocumentError> {
        self.signed.verify(keys, |id| self.statement(id))
    }

    /// Refuses, before anything else is fetched, an update whose patch needs capabilities
    /// `reads` lacks. `readerNeeds` is unsigned: a forged value can only make this refusal.
    pub fn check_reader(&self, reads: Capabilities) -> Result<(), DocumentError> {
        match self.reader_needs {
            Some(needs) if !needs.is_subset(reads) => Err(DocumentError::ReaderNeeds { needs, reads }),
            _ => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ed25519_dalek::{Signer, SigningKey};

    fn signed(sk: &SigningKey, game: &str) -> UpdateDescriptor {
        let pk = sk.verifying_key().to_bytes();
        let id = statement::key_id(&pk);
        let blake = [5u8; 32];
        let sig = sk.sign(&statement::update_statement(&id, game, "v1", "v2", 1234, &blake).unwrap()).to_bytes();
        use base64::Engine;
        UpdateDescriptor {
            game: "demo".into(),
            from: "v1".into(),
            to: "v2".into(),
            manifest_url: "../../manifests/v1/v2/x".into(),
            manifest_size: 1234,
            manifest_blake3: statement::hex(&blake),
            patch_url: "../../patches/v1/v2/y".into(),
            patch_size: 99,
            patch_blake3: None,
            reader_needs: Some("1f".into()),
            key_id: Some(statement::hex(&id)),
            signature: Some(base64::engine::general_purpose::STANDARD.encode(sig)),
        }
    }

    #[test]
    fn a_signed_descriptor_verifies_under_its_key_only() {
        let sk = SigningKey::from_bytes(&[3; 32]);
        let pk = sk.verifying_key().to_bytes();
        let other = SigningKey::from_bytes(&[4; 32]).verifying_key().to_bytes();
        let d = signed(&sk, "demo").check("demo", "v1", "v2").unwrap();
        assert_eq!(d.verify(&[other, pk]).unwrap(), pk);
        assert_eq!(d.reader_needs, Some(Capabilities::from_hex("1f").unwrap()));
        // Wrong key: not accepted, named by its id.
        let err = d.verify(&[other]).unwrap_err();
        assert_eq!(err, DocumentError::UnknownKey { key_id: statement::key_id_hex(&pk) });
        assert_eq!(err.code(), "signature");
        // Signed for another game, served as this one's: the rebuilt statement does not verify.
        let replayed = signed(&sk, "other").check("demo", "v1", "v2").unwrap();
        let err = replayed.verify(&[pk]).unwrap_err();
        assert!(matches!(err, DocumentError::BadSignature(_)) && err.to_string().contains("signature does not verify"), "{err}");
        // Unsigned: refused by a client that accepts only signed ones.
        let mut unsigned = signed(&sk, "demo");
        unsigned.key_id = None;
        assert!(matches!(unsigned.check("demo", "v1", "v2").unwrap().verify(&[pk]), Err(DocumentError::NotSigned(_))));
    }

    #[test]
    fn malformed_fields_are_refused() {
        let good = signed(&SigningKey::from_bytes(&[3; 32]), "demo");
        let refused = |f: &dyn Fn(&mut UpdateDescriptor), want: &str| {
            let mut d = good.clone();
            f(&mut d);
            let err = d.check("demo", "v1", "v2").unwrap_err();
            assert_eq!(err.code(), "protocol");
            assert!(err.to_string().contains(want), "{err} lacks {want:?}");
        };
        refused(&|d| d.manifest_blake3 = "zz".into(), "manifestBlake3 is not 64 hex digits");
        refused(&|d| d.manifest_blake3.push('0'), "manifestBlake3 is not 64 hex digits");
        refused(&|d| d.patch_blake3 = Some("12".into()), "patchBlake3 is not 64 hex digits");
        refused(&|d| d.key_id = Some("abc".into()), "keyId is not 16 hex digits");
        refused(&|d| d.signature = Some("AAAA".into()), "signature has 3 bytes, not 64");
        refused(&|d| d.game = "de/mo".into(), "game is not a valid name");
        refused(&|d| d.to = ".v2".into(), "to is not a valid name");
        refused(&|d| d.from = "v0".into(), "is for demo v0 -> v2, not demo v1 -> v2");
        refused(&|d| d.manifest_url = String::new(), "manifestUrl is empty");
        refused(&|d| d.reader_needs = Some("xyz".into()), "readerNeeds is not a set of reader capabilities");
        refused(&|d| d.reader_needs = Some("1".repeat(17)), "readerNeeds is not a set of reader capabilities");
        refused(&|d| d.reader_needs = Some(String::new()), "readerNeeds is not a set of reader capabilities");
    }

    #[test]
    fn json_types_are_checked_by_serde() {
        let good = serde_json::to_value(signed(&SigningKey::from_bytes(&[3; 32]), "demo")).unwrap();
        assert_eq!(good["manifestBlake3"].as_str().unwrap().len(), 64);
        assert!(good.get("patchBlake3").is_none(), "absent optional fields are not written");
        for (field, value) in [("manifestSize", serde_json::json!(-1)), ("patchSize", serde_json::json!("9")), ("game", serde_json::json!(1))] {
            let mut d = good.clone();
            d[field] = value;
            assert!(serde_json::from_value::<UpdateDescriptor>(d).is_err(), "{field}");
        }
        let mut missing = good.clone();
        missing.as_object_mut().unwrap().remove("manifestUrl");
        assert!(serde_json::from_value::<UpdateDescriptor>(missing).is_err());
        // Fields a newer server adds are passed over.
        let mut newer = good.clone();
        newer["somethingNew"] = serde_json::json!(1);
        assert!(serde_json::from_value::<UpdateDescriptor>(newer).is_ok());
    }

    #[test]
    fn reader_needs_beyond_the_reader_is_refused() {
        let mut d = signed(&SigningKey::from_bytes(&[3; 32]), "demo");
        d.reader_needs = Some("8000000000000001".into());
        let c = d.check("demo", "v1", "v2").unwrap();
        let err = c.check_reader(Capabilities::current()).unwrap_err();
        assert_eq!(err.code(), "version");
        assert!(c.check_reader(Capabilities::from_hex("ffffffffffffffff").unwrap()).is_ok());
        d.reader_needs = None;
        assert!(d.check("demo", "v1", "v2").unwrap().check_reader(Capabilities::BASELINE).is_ok());
    }
}
