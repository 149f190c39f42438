//! What the update protocol's JSON documents (docs/UPDATE_PROTOCOL.md, "Documents") share:
//! the error a client refuses one with, and the check of a document's signature (`keyId`
//! and `signature`) under the keys it accepts. The documents themselves are
//! [`crate::descriptor::UpdateDescriptor`] and [`crate::channel::ChannelDocument`].

use base64::Engine;
use thiserror::Error;

use crate::statement::{self, KeyId, TrustError};
use crate::Capabilities;

/// Why a client refuses an update descriptor or a channel document. [`DocumentError::code`]
/// gives its stable name, which the clients map to their own error kinds.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[non_exhaustive]
pub enum DocumentError {
    /// A field is missing, of the wrong type, or breaks its rule; or the document is for
    /// another game, build or channel than the one asked for.
    #[error("{0}")]
    Malformed(String),
    /// A client that accepts only signed documents got one without `keyId` or `signature`
    /// (a channel document: or without `sequence` or `expires`).
    #[error("the document is not signed ({0}), and only signed documents are accepted")]
    NotSigned(&'static str),
    /// Signed by a key that is not among the accepted ones (a client may then follow the
    /// server's key rotations and ask again).
    #[error("signed by key {key_id}, which is not an accepted key")]
    UnknownKey {
        /// The document's `keyId`.
        key_id: String,
    },
    /// The signature does not verify over the statement rebuilt from what was asked for.
    #[error("{0}")]
    BadSignature(TrustError),
    /// A channel document past its `expires` (and the allowed clock skew): the server may
    /// be withholding newer ones to keep the client on an old build.
    #[error(
        "the signed document expired at {} ({} s ago; now {}): a frozen or stale channel, which the server should re-sign; refusing to use it",
        utc(*expires),
        now.saturating_sub(*expires),
        utc(*now)
    )]
    Expired {
        /// The document's `expires` (Unix seconds).
        expires: u64,
        /// The client's clock (Unix seconds).
        now: u64,
    },
    /// A channel document older than one the client already followed: lower `sequence`, or
    /// the same `sequence` with another build.
    #[error(
        "the server offers position {sequence} ({build}), older than position {seen_sequence} ({seen_build}) already followed: a rollback (an older channel document replayed); refusing it"
    )]
    Rollback {
        /// The document's position and build.
        sequence: u64,
        /// The document's build.
        build: String,
        /// The newest position the client stored, and its build.
        seen_sequence: u64,
        /// The build of that position.
        seen_build: String,
    },
    /// The descriptor's `readerNeeds` names capabilities the client does not read.
    #[error("the patch needs format features this reader does not read ({})", needs.difference(*reads))]
    ReaderNeeds {
        /// What the patch needs.
        needs: Capabilities,
        /// What the client reads.
        reads: Capabilities,
    },
}

impl DocumentError {
    /// The stable name of the refusal: `protocol` (malformed), `signature` (not signed,
    /// unknown key, bad signature), `frozen` (expired), `rollback`, `version` (readerNeeds).
    pub fn code(&self) -> &'static str {
        match self {
            DocumentError::Malformed(_) => "protocol",
            DocumentError::NotSigned(_) | DocumentError::UnknownKey { .. } | DocumentError::BadSignature(_) => "signature",
            DocumentError::Expired { .. } => "frozen",
            DocumentError::Rollback { .. } => "rollback",
            DocumentError::ReaderNeeds { .. } => "version",
        }
    }
}

/// A malformed field: `field` and why.
pub(crate) fn malformed(field: &str, why: impl std::fmt::Display) -> DocumentError {
    DocumentError::Malformed(format!("{field} {why}"))
}

/// A name field (`game`, `build`, ...) by the protocol's name rule.
pub(crate) fn check_name_field(what: &'static str, field: &str, name: &str) -> Result<(), DocumentError> {
    statement::check_name(what, name).map_err(|e| malformed(field, format_args!("is not a valid name: {e}")))
}

/// The signing fields of a document, well-formed: `keyId` 16 hex digits, `signature` the
/// base64 of 64 bytes. Either may be absent (whether they must be is the caller's rule).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Signed {
    /// The signing key's id.
    pub key_id: Option<KeyId>,
    /// The ed25519 signature over the document's statement.
    pub signature: Option<[u8; 64]>,
}

/// The `N` bytes the base64 field `field` holds.
pub(crate) fn base64_bytes<const N: usize>(field: &str, text: &str) -> Result<[u8; N], DocumentError> {
    let bytes = base64::engine::general_purpose::STANDARD.decode(text).map_err(|e| malformed(field, format_args!("is not base64: {e}")))?;
    <[u8; N]>::try_from(bytes.as_slice()).map_err(|_| malformed(field, format_args!("has {} bytes, not {N}", bytes.len())))
}

impl Signed {
    /// Reads `keyId` and `signature` as a document carries them.
    pub(crate) fn parse(key_id: Option<&str>, signature: Option<&str>) -> Result<Signed, DocumentError> {
        let key_id = key_id.map(|k| statement::parse_hex::<8>("key id", k).map_err(|_| malformed("keyId", "is not 16 hex digits"))).transpose()?;
        let signature = signature.map(|s| base64_bytes::<64>("signature", s)).transpose()?;
        Ok(Signed { key_id, signature })
    }

    /// The key id, as 16 lowercase hex digits.
    pub fn key_id_hex(&self) -> Option<String> {
        self.key_id.map(|k| statement::hex(&k))
    }

    /// Checks the signature over `statement(key id)` under the accepted key the document
    /// names; returns that key. `unsigned` says what is missing when the document has no
    /// `keyId` or `signature`.
    pub(crate) fn verify(&self, keys: &[[u8; 32]], statement: impl FnOnce(&KeyId) -> Result<Vec<u8>, TrustError>) -> Result<[u8; 32], DocumentError> {
        let (Some(id), Some(sig)) = (self.key_id, self.signature) else { return Err(DocumentError::NotSigned("no keyId or signature")) };
        let key = *keys.iter().find(|k| statement::key_id(k) == id).ok_or_else(|| DocumentError::UnknownKey { key_id: statement::hex(&id) })?;
        let message = statement(&id).map_err(|e| DocumentError::Malformed(e.to_string()))?;
        statement::verify_ed25519(&key, &message, &sig).map_err(DocumentError::BadSignature)?;
        Ok(key)
    }
}

/// Unix seconds as `YYYY-MM-DDTHH:MM:SSZ` (UTC, proleptic Gregorian).
pub(crate) fn utc(secs: u64) -> String {
    let (days, rem) = (secs / 86_400, secs % 86_400);
    // Days since 1970-01-01 to a civil date (Howard Hinnant's days_from_civil, inverted).
    let z = days as i64 + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!("{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}Z", rem / 3600, rem / 60 % 60, rem % 60)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn utc_dates() {
        assert_eq!(utc(0), "1970-01-01T00:00:00Z");
        assert_eq!(utc(951_782_400), "2000-02-29T00:00:00Z");
        assert_eq!(utc(1_795_000_000), "2026-11-18T11:06:40Z");
    }
    #[test]
    fn signing_fields_are_well_formed_or_refused() {
        assert!(Signed::parse(Some("0123456789abcdef"), None).is_ok());
        assert_eq!(Signed::parse(Some("0123"), None).unwrap_err().code(), "protocol");
        assert!(Signed::parse(None, Some("not base64!")).unwrap_err().to_string().contains("not base64"));
        assert!(Signed::parse(None, Some("AAAA")).unwrap_err().to_string().contains("3 bytes, not 64"));
        let none = Signed::parse(None, None).unwrap();
        assert_eq!(none.verify(&[], |_| Ok(Vec::new())), Err(DocumentError::NotSigned("no keyId or signature")));
    }
}
