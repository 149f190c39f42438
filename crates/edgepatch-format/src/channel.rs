//! The channel document (docs/UPDATE_PROTOCOL.md, "Documents"): the JSON a server answers
//! for `v1/games/{game}/channels/{channel}`, naming the channel's current build, and the
//! rules a client applies to it before it follows it ("What a client checks", 1): the
//! signature under an accepted key, the names asked for, not expired (freeze), not older
//! than the newest position already followed (rollback). The one definition: the Worker and
//! `edgepatch site` write it, the CLI and the browser library (through the wasm bindings)
//! check it with [`accept_channel`]; the I/O (fetching, storing the newest position, following
//! key rotations) stays with each client.

use serde::{Deserialize, Serialize};

use crate::document_rules::{check_name_field, DocumentError, Signed};
use crate::statement::{self, KeyId};

/// Clock skew allowed when judging a channel document's `expires`, in seconds.
pub const CLOCK_SKEW_SECS: u64 = 300;

/// A channel document as it is written (field names in camelCase).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(test, derive(ts_rs::TS))]
#[cfg_attr(test, ts(optional_fields))]
#[serde(rename_all = "camelCase")]
pub struct ChannelDocument {
    /// The game.
    pub game: String,
    /// The channel.
    pub channel: String,
    /// The build the channel points at.
    pub build: String,
    /// Increases every time the channel moves (rollback protection); signed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(test, ts(type = "number"))]
    pub sequence: Option<u64>,
    /// Unix seconds after which the document is stale (freeze protection); signed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(test, ts(type = "number"))]
    pub expires: Option<u64>,
    /// The signing key's id (16 hex digits), on a signing server.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub key_id: Option<String>,
    /// The base64 ed25519 signature over the channel statement, on a signing server.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub signature: Option<String>,
}

/// The newest channel position a client followed (stored per server, game and channel, after
/// the update it led to was switched in).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SeenHead<'a> {
    /// Its sequence.
    pub sequence: u64,
    /// Its build.
    pub build: &'a str,
}

/// A channel document that passed the rules: the build to update to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChannelHead {
    /// The build the channel points at.
    pub build: String,
    /// Its position, to store once the update is switched in (absent only on an unsigned
    /// server's document, when unsigned documents are accepted).
    pub sequence: Option<u64>,
    /// Its expiry (Unix seconds), likewise.
    pub expires: Option<u64>,
    /// The accepted key that signed it; `None` when unsigned documents are accepted.
    pub key_id: Option<KeyId>,
}

/// A channel document whose fields are well-formed and are of the channel asked for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CheckedChannel {
    /// The game and channel asked for.
    pub game: String,
    /// The channel.
    pub channel: String,
    /// The build it points at (a real build: never `_`).
    pub build: String,
    /// Its position.
    pub sequence: Option<u64>,
    /// Its expiry (Unix seconds).
    pub expires: Option<u64>,
    /// `keyId` and `signature`.
    pub signed: Signed,
}

impl ChannelDocument {
    /// Checks the fields of the document answered for `channel` of `game`: names by the
    /// protocol's rule, `game` and `channel` the ones asked for, `build` a real build (not
    /// `_`), `keyId` 16 hex digits, `signature` the base64 of 64 bytes.
    pub fn check(&self, game: &str, channel: &str) -> Result<CheckedChannel, DocumentError> {
        check_name_field("game", "game", &self.game)?;
        check_name_field("channel", "channel", &self.channel)?;
        if self.game != game || self.channel != channel {
            return Err(DocumentError::Malformed(format!("the document is for the channel {}/{}, not {game}/{channel}", self.game, self.channel)));
        }
        check_name_field("build", "build", &self.build)?;
        if self.build == "_" {
            return Err(DocumentError::Malformed("build is \"_\", the reserved empty build".into()));
        }
        Ok(CheckedChannel {
            game: self.game.clone(),
            channel: self.channel.clone(),
            build: self.build.clone(),
            sequence: self.sequence,
            expires: self.expires,
            signed: Signed::parse(self.key_id.as_deref(), self.signature.as_deref())?,
        })
    }
}

impl CheckedChannel {
    /// Checks the signature over the channel statement (rebuilt with the game and channel
    /// asked for) under the accepted key `keyId` names; returns that key. Refused: a
    /// document without `sequence`, `expires`, `keyId` or `signature`, a key not accepted,
    /// a signature that does not verify.
    pub fn verify(&self, keys: &[[u8; 32]]) -> Result<[u8; 32], DocumentError> {
        let (Some(sequence), Some(expires)) = (self.sequence, self.expires) else { return Err(DocumentError::NotSigned("no sequence or expires")) };
        self.signed.verify(keys, |id| statement::channel_statement(id, &self.game, &self.channel, &self.build, sequence, expires))
    }

    /// The freeze and rollback rules: `expires` (when present) not before `now` less
    /// [`CLOCK_SKEW_SECS`]; `sequence` (when present) not below `seen`'s, and equal only with
    /// the same build.
    pub fn check_fresh(&self, seen: Option<SeenHead<'_>>, now: u64) -> Result<(), DocumentError> {
        if let Some(expires) = self.expires {
            if expires.saturating_add(CLOCK_SKEW_SECS) < now {
                return Err(DocumentError::Expired { expires, now });
            }
        }
        if let (Some(sequence), Some(seen)) = (self.sequence, seen) {
            if sequence < seen.sequence || (sequence == seen.sequence && self.build != seen.build) {
                return Err(DocumentError::Rollback { sequence, build: self.build.clone(), seen_sequence: seen.sequence, seen_build: seen.build.to_string() });
            }
        }
        Ok(())
    }
}

/// The channel rules (docs/UPDATE_PROTOCOL.md, "What a client checks", 1), in order: the
/// document is of `game`/`channel` and well-formed; signed by one of `keys` over its channel
/// statement (`keys` `None`: the caller accepts unsigned documents, and then checks only what
/// the document carries); not expired at `now` (Unix seconds); not older than `seen`, the
/// newest position the client followed. Returns the head to update to; the caller stores its
/// position only after that update is switched in.
pub fn accept_channel(
    doc: &ChannelDocument,
    game: &str,
    channel: &str,
    keys: Option<&[[u8; 32]]>,
    seen: Option<SeenHead<'_>>,
    now: u64,
) -> Result<ChannelHead, DocumentError> {
    let checked = doc.check(game, channel)?;
    let key_id = keys.map(|keys| checked.verify(keys)).transpose()?.map(|k| statement::key_id(&k));
    checked.check_fresh(seen, now)?;
    Ok(ChannelHead { build: checked.build, sequence: checked.sequence, expires: checked.expires, key_id })
}

#[cfg(test)]
mod tests {
    use super::*;
    use base64::Engine;
    use ed25519_dalek::{Signer, SigningKey};

    const NOW: u64 = 1_800_000_000;

    fn doc(sk: &SigningKey, build: &str, sequence: u64, expires: u64) -> ChannelDocument {
        let id = statement::key_id(&sk.verifying_key().to_bytes());
        let sig = sk.sign(&statement::channel_statement(&id, "demo", "stable", build, sequence, expires).unwrap()).to_bytes();
        ChannelDocument {
            game: "demo".into(),
            channel: "stable".into(),
            build: build.into(),
            sequence: Some(sequence),
            expires: Some(expires),
            key_id: Some(statement::hex(&id)),
            signature: Some(base64::engine::general_purpose::STANDARD.encode(sig)),
        }
    }

    fn key(seed: u8) -> (SigningKey, [u8; 32]) {
        let sk = SigningKey::from_bytes(&[seed; 32]);
        let pk = sk.verifying_key().to_bytes();
        (sk, pk)
    }

    #[test]
    fn a_fresh_signed_document_is_accepted() {
        let (sk, pk) = key(3);
        let head = accept_channel(&doc(&sk, "v2", 7, NOW + 3600), "demo", "stable", Some(&[pk]), Some(SeenHead { sequence: 6, build: "v1" }), NOW).unwrap();
        assert_eq!(head, ChannelHead { build: "v2".into(), sequence: Some(7), expires: Some(NOW + 3600), key_id: Some(statement::key_id(&pk)) });
        // The same position again, same build: accepted (a re-signed document).
        assert!(accept_channel(&doc(&sk, "v2", 7, NOW + 10), "demo", "stable", Some(&[pk]), Some(SeenHead { sequence: 7, build: "v2" }), NOW).is_ok());
        // Within the clock skew.
        assert!(accept_channel(&doc(&sk, "v2", 7, NOW - CLOCK_SKEW_SECS), "demo", "stable", Some(&[pk]), None, NOW).is_ok());
    }

    #[test]
    fn rollback_is_refused() {
        let (sk, pk) = key(3);
        let seen = Some(SeenHead { sequence: 5, build: "v2" });
        let err = accept_channel(&doc(&sk, "v1", 4, NOW + 3600), "demo", "stable", Some(&[pk]), seen, NOW).unwrap_err();
        assert_eq!(err.code(), "rollback");
        assert!(err.to_string().contains("position 4 (v1), older than position 5 (v2)") && err.to_string().contains("rollback"), "{err}");
        // Same position, another build.
        let err = accept_channel(&doc(&sk, "v3", 5, NOW + 3600), "demo", "stable", Some(&[pk]), seen, NOW).unwrap_err();
        assert_eq!(err.code(), "rollback");
    }

    #[test]
    fn expired_is_refused() {
        let (sk, pk) = key(3);
        let err = accept_channel(&doc(&sk, "v2", 7, NOW - CLOCK_SKEW_SECS - 1), "demo", "stable", Some(&[pk]), None, NOW).unwrap_err();
        assert_eq!(err, DocumentError::Expired { expires: NOW - CLOCK_SKEW_SECS - 1, now: NOW });
        assert_eq!(err.code(), "frozen");
        assert!(err.to_string().contains("expired at 2027-01-15T07:54:59Z (301 s ago"), "{err}");
    }

    #[test]
    fn wrong_key_and_forged_fields_are_refused() {
        let (sk, pk) = key(3);
        let (other, other_pk) = key(4);
        let fresh = doc(&sk, "v2", 7, NOW + 3600);
        let err = accept_channel(&fresh, "demo", "stable", Some(&[other_pk]), None, NOW).unwrap_err();
        assert_eq!(err, DocumentError::UnknownKey { key_id: statement::key_id_hex(&pk) });
        assert!(err.to_string().contains("which is not an accepted key"), "{err}");
        // Signed by the other key but claiming to be the accepted key's.
        let mut forged = doc(&other, "v2", 7, NOW + 3600);
        forged.key_id = fresh.key_id.clone();
        let err = accept_channel(&forged, "demo", "stable", Some(&[pk]), None, NOW).unwrap_err();
        assert!(matches!(err, DocumentError::BadSignature(_)), "{err}");
        // A signed field changed after signing (a later expiry to dodge the freeze check).
        let mut later = fresh.clone();
        later.expires = Some(NOW + 999_999);
        assert_eq!(accept_channel(&later, "demo", "stable", Some(&[pk]), None, NOW).unwrap_err().code(), "signature");
        // Without sequence and expires, or without a signature: not signed.
        let mut bare = fresh.clone();
        bare.sequence = None;
        assert_eq!(accept_channel(&bare, "demo", "stable", Some(&[pk]), None, NOW).unwrap_err(), DocumentError::NotSigned("no sequence or expires"));
        // Accepted unsigned only when the caller says so; the freeze rule still holds.
        let unsigned = ChannelDocument { key_id: None, signature: None, ..fresh.clone() };
        assert_eq!(accept_channel(&unsigned, "demo", "stable", Some(&[pk]), None, NOW).unwrap_err().code(), "signature");
        assert_eq!(accept_channel(&unsigned, "demo", "stable", None, None, NOW).unwrap().key_id, None);
        let stale = ChannelDocument { expires: Some(1), ..unsigned };
        assert_eq!(accept_channel(&stale, "demo", "stable", None, None, NOW).unwrap_err().code(), "frozen");
    }

    #[test]
    fn malformed_documents_are_refused() {
        let (sk, pk) = key(3);
        let fresh = doc(&sk, "v2", 7, NOW + 3600);
        for (d, want) in [
            (ChannelDocument { channel: "beta".into(), ..fresh.clone() }, "for the channel demo/beta, not demo/stable"),
            (ChannelDocument { build: "../x".into(), ..fresh.clone() }, "build is not a valid name"),
            (ChannelDocument { build: "_".into(), ..fresh.clone() }, "reserved empty build"),
            (ChannelDocument { key_id: Some("zz".into()), ..fresh.clone() }, "keyId is not 16 hex digits"),
            (ChannelDocument { signature: Some("%%".into()), ..fresh.clone() }, "signature is not base64"),
        ] {
            let err = accept_channel(&d, "demo", "stable", Some(&[pk]), None, NOW).unwrap_err();
            assert_eq!(err.code(), "protocol");
            assert!(err.to_string().contains(want), "{err} lacks {want:?}");
        }
        let v = serde_json::json!({"game": "demo", "channel": "stable", "build": "v2", "sequence": -1});
        assert!(serde_json::from_value::<ChannelDocument>(v).is_err());
    }
}
