//! Signed statements (docs/UPDATE_PROTOCOL.md, "Signed statements"): the byte strings
//! servers sign and clients verify, the key ids that name signing keys, the name rule, key
//! rotations and ed25519 verification.
//!
//! Every client (CLI, browser library, @edgepatch/js) and every server (the Worker, the
//! CLI's static sites) builds statements here, through the wasm bindings where it is not
//! Rust, so there is one encoding.

use ed25519_dalek::{Signature, VerifyingKey};
use thiserror::Error;

/// First bytes of every statement.
pub const STATEMENT_MAGIC: [u8; 8] = *b"EPSTMT1\0";
/// Statement kind byte of an update statement.
pub const KIND_UPDATE: u8 = 1;
/// Statement kind byte of a channel statement.
pub const KIND_CHANNEL: u8 = 2;
/// Statement kind byte of a key rotation statement.
pub const KIND_ROTATION: u8 = 3;
/// Most rotations a client reads from a `v1/public-key` document: a longer list is refused.
pub const MAX_ROTATIONS: usize = 32;
/// Longest game, build or channel name in a statement (the protocol's names are 1-64 bytes).
pub const MAX_NAME_LEN: usize = 64;

/// Characters of a bad name that its error repeats.
pub const MAX_ECHOED_NAME_CHARS: usize = 80;

/// Identifies a signing key: the first 8 bytes of BLAKE3 of its 32-byte ed25519 public key.
pub type KeyId = [u8; 8];

/// What was wrong with a name, key or signature.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[non_exhaustive]
pub enum TrustError {
    /// A game, build or channel name that breaks the name rule ([`check_name`]).
    #[error("invalid {what} name {name:?}: 1-{MAX_NAME_LEN} bytes of [A-Za-z0-9._-], not starting with '.'")]
    InvalidName {
        /// Which name (game, build, channel).
        what: &'static str,
        /// The name as given, cut to its first [`MAX_ECHOED_NAME_CHARS`] characters: a
        /// caller's input is not reflected whole into an error message.
        name: String,
    },
    /// 32 bytes that are not an ed25519 public key (or a weak one).
    #[error("not a valid ed25519 public key")]
    InvalidPublicKey,
    /// The signature does not verify under the key named.
    #[error("signature does not verify under key {key_id}")]
    BadSignature {
        /// The key's id (16 hex digits).
        key_id: String,
    },
    /// A key rotation that does not lead from a trusted key to the key asked for.
    #[error("key rotation refused: {why}")]
    Rotation {
        /// What is wrong with it.
        why: String,
    },
    /// A malformed argument: `what`, and why.
    #[error("invalid {what}: {why}")]
    Invalid {
        /// The argument.
        what: &'static str,
        /// What is wrong with it.
        why: String,
    },
}

/// The protocol's name rule for games, builds and channels: 1-64 bytes of
/// `[A-Za-z0-9._-]`, not starting with `.`. The empty build `_` passes it.
pub fn check_name(what: &'static str, name: &str) -> Result<(), TrustError> {
    let ok = !name.is_empty()
        && name.len() <= MAX_NAME_LEN
        && !name.starts_with('.')
        && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'.' || b == b'_' || b == b'-');
    if ok {
        Ok(())
    } else {
        Err(TrustError::InvalidName { what, name: name.chars().take(MAX_ECHOED_NAME_CHARS).collect() })
    }
}

/// The [`KeyId`] of an ed25519 public key.
pub fn key_id(public_key: &[u8; 32]) -> KeyId {
    let h = blake3::hash(public_key);
    let mut id = [0u8; 8];
    id.copy_from_slice(&h.as_bytes()[..8]);
    id
}

/// The [`KeyId`] of an ed25519 public key, as 16 lowercase hex digits.
pub fn key_id_hex(public_key: &[u8; 32]) -> String {
    hex(&key_id(public_key))
}

/// Lowercase hex of `bytes`.
pub fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Parses exactly `N` bytes of hex (either case).
pub fn parse_hex<const N: usize>(what: &'static str, s: &str) -> Result<[u8; N], TrustError> {
    let bad = || TrustError::Invalid { what, why: format!("expected {} hex digits, got {:?}", 2 * N, s.chars().take(80).collect::<String>()) };
    if s.len() != 2 * N || !s.is_ascii() {
        return Err(bad());
    }
    let mut out = [0u8; N];
    for (i, o) in out.iter_mut().enumerate() {
        *o = u8::from_str_radix(&s[2 * i..2 * i + 2], 16).map_err(|_| bad())?;
    }
    Ok(out)
}

fn put_str16(out: &mut Vec<u8>, s: &str) {
    out.extend_from_slice(&(s.len() as u16).to_le_bytes());
    out.extend_from_slice(s.as_bytes());
}

fn header(kind: u8, key_id: &KeyId) -> Vec<u8> {
    let mut out = Vec::with_capacity(128);
    out.extend_from_slice(&STATEMENT_MAGIC);
    out.push(kind);
    out.extend_from_slice(key_id);
    out
}

/// The bytes a server signs to vouch that `manifest` (by size and BLAKE3) is the
/// update of `game` from build `from` (`_`: an install) to build `to`.
pub fn update_statement(key_id: &KeyId, game: &str, from: &str, to: &str, manifest_size: u64, manifest_blake3: &[u8; 32]) -> Result<Vec<u8>, TrustError> {
    check_name("game", game)?;
    check_name("build", from)?;
    check_name("build", to)?;
    let mut out = header(KIND_UPDATE, key_id);
    put_str16(&mut out, game);
    put_str16(&mut out, from);
    put_str16(&mut out, to);
    out.extend_from_slice(&manifest_size.to_le_bytes());
    out.extend_from_slice(manifest_blake3);
    Ok(out)
}

/// The bytes a server signs to say that `channel` of `game` points at `build`,
/// as its `sequence`-th position, until `expires` (Unix seconds).
pub fn channel_statement(key_id: &KeyId, game: &str, channel: &str, build: &str, sequence: u64, expires: u64) -> Result<Vec<u8>, TrustError> {
    check_name("game", game)?;
    check_name("channel", channel)?;
    check_name("build", build)?;
    let mut out = header(KIND_CHANNEL, key_id);
    put_str16(&mut out, game);
    put_str16(&mut out, channel);
    put_str16(&mut out, build);
    out.extend_from_slice(&sequence.to_le_bytes());
    out.extend_from_slice(&expires.to_le_bytes());
    Ok(out)
}

/// The bytes the old key (`old_key_id`, the signer) signs to vouch that `new_public_key`
/// succeeds it. Refuses a new key that is not a usable ed25519 key, or that is the old one.
pub fn rotation_statement(old_key_id: &KeyId, new_public_key: &[u8; 32]) -> Result<Vec<u8>, TrustError> {
    check_public_key(new_public_key)?;
    if &key_id(new_public_key) == old_key_id {
        return Err(TrustError::Rotation { why: format!("the new key {} is the old key", hex(old_key_id)) });
    }
    let mut out = header(KIND_ROTATION, old_key_id);
    out.extend_from_slice(new_public_key);
    Ok(out)
}

/// One entry of a `v1/public-key` document's `rotations`: the key `from` hands over to
/// `public_key`, with `from`'s signature over [`rotation_statement`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rotation {
    /// Key id of the old key, the signer.
    pub from: KeyId,
    /// The new key.
    pub public_key: [u8; 32],
    /// ed25519 signature by the old key over the rotation statement.
    pub signature: [u8; 64],
}

/// Walks `rotations` (oldest first) from the `trusted` keys towards the key named `target`:
/// each rotation signed by a key trusted so far (at the start or through an earlier
/// rotation) is verified and its new key becomes trusted; rotations from keys that are not
/// trusted are passed over. Returns the keys learned, in order, once `target` is trusted.
///
/// Refused: more than [`MAX_ROTATIONS`] rotations; a rotation from a trusted key whose
/// signature does not verify; and, when `target` is not reached, a rotation to `target`
/// whose signer is not trusted is named in the error.
pub fn follow_rotations(trusted: &[[u8; 32]], rotations: &[Rotation], target: &KeyId) -> Result<Vec<[u8; 32]>, TrustError> {
    if rotations.len() > MAX_ROTATIONS {
        return Err(TrustError::Rotation { why: format!("{} rotations listed, more than the {MAX_ROTATIONS} a client follows", rotations.len()) });
    }
    let mut known: Vec<[u8; 32]> = trusted.to_vec();
    let mut learned = Vec::new();
    let is_trusted = |known: &[[u8; 32]], id: &KeyId| known.iter().find(|k| &key_id(k) == id).copied();
    for r in rotations {
        let Some(signer) = is_trusted(&known, &r.from) else { continue };
        let new_id = key_id(&r.public_key);
        let statement = rotation_statement(&r.from, &r.public_key)
            .map_err(|e| TrustError::Rotation { why: format!("the key rotation {} -> {}: {e}", hex(&r.from), hex(&new_id)) })?;
        verify_ed25519(&signer, &statement, &r.signature).map_err(|_| TrustError::Rotation {
            why: format!("the key rotation {} -> {} does not verify under key {}: forged or damaged", hex(&r.from), hex(&new_id), hex(&r.from)),
        })?;
        if is_trusted(&known, &new_id).is_none() {
            known.push(r.public_key);
            learned.push(r.public_key);
        }
    }
    if is_trusted(&known, target).is_some() {
        return Ok(learned);
    }
    let why = match rotations.iter().find(|r| &key_id(&r.public_key) == target) {
        Some(r) => format!(
            "the rotation to key {} is signed by key {}, and that signer is not trusted (no chain of rotations leads to it from a trusted key)",
            hex(target),
            hex(&r.from)
        ),
        None => format!("no rotation leads from a trusted key to key {}", hex(target)),
    };
    Err(TrustError::Rotation { why })
}

/// Refuses 32 bytes that are not an ed25519 public key, or a weak (small-order) one.
pub fn check_public_key(public_key: &[u8; 32]) -> Result<(), TrustError> {
    match VerifyingKey::from_bytes(public_key) {
        Ok(k) if !k.is_weak() => Ok(()),
        _ => Err(TrustError::InvalidPublicKey),
    }
}

/// Checks an ed25519 signature (RFC 8032, strict: non-canonical encodings and
/// small-order keys are refused).
pub fn verify_ed25519(public_key: &[u8; 32], message: &[u8], signature: &[u8; 64]) -> Result<(), TrustError> {
    let key = VerifyingKey::from_bytes(public_key).map_err(|_| TrustError::InvalidPublicKey)?;
    if key.is_weak() {
        return Err(TrustError::InvalidPublicKey);
    }
    key.verify_strict(message, &Signature::from_bytes(signature)).map_err(|_| TrustError::BadSignature { key_id: key_id_hex(public_key) })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_bad_name_is_not_echoed_whole() {
        let long = "a/".repeat(5000);
        let err = check_name("game", &long).unwrap_err().to_string();
        assert!(err.len() < 300, "{err}");
        assert!(err.contains(&long[..MAX_ECHOED_NAME_CHARS]));
        let short = check_name("build", "../x").unwrap_err().to_string();
        assert!(short.contains("\"../x\""), "{short}");
        assert!(check_name("channel", "stable-1.2_x").is_ok());
    }
    #[test]
    fn statements_have_fixed_layout_and_refuse_bad_names() {
        let pk = [7u8; 32];
        let id = key_id(&pk);
        let s = update_statement(&id, "demo", "_", "v2", 1234, &[9u8; 32]).unwrap();
        assert_eq!(&s[..8], b"EPSTMT1\0");
        assert_eq!(s[8], KIND_UPDATE);
        assert_eq!(&s[9..17], &id);
        assert_eq!(s.len(), 17 + 2 + 4 + 2 + 1 + 2 + 2 + 8 + 32);
        let c = channel_statement(&id, "demo", "stable", "v2", 7, 1_800_000_000).unwrap();
        assert_eq!(c[8], KIND_CHANNEL);
        assert_ne!(&s[..], &c[..]);
        assert!(update_statement(&id, "de/mo", "_", "v2", 1, &[0; 32]).is_err());
        assert!(update_statement(&id, ".x", "_", "v2", 1, &[0; 32]).is_err());
        assert!(channel_statement(&id, "demo", "", "v2", 1, 1).is_err());
        assert!(check_name("build", &"a".repeat(65)).is_err());
    }
    fn signing(seed: u8) -> (ed25519_dalek::SigningKey, [u8; 32]) {
        let sk = ed25519_dalek::SigningKey::from_bytes(&[seed; 32]);
        let pk = sk.verifying_key().to_bytes();
        (sk, pk)
    }
    fn rotation(old: &ed25519_dalek::SigningKey, new_pk: &[u8; 32]) -> Rotation {
        use ed25519_dalek::Signer;
        let from = key_id(&old.verifying_key().to_bytes());
        let signature = old.sign(&rotation_statement(&from, new_pk).unwrap()).to_bytes();
        Rotation { from, public_key: *new_pk, signature }
    }
    #[test]
    fn rotation_statement_has_fixed_layout() {
        let (_, old) = signing(3);
        let (_, new) = signing(4);
        let s = rotation_statement(&key_id(&old), &new).unwrap();
        assert_eq!(&s[..8], b"EPSTMT1\0");
        assert_eq!(s[8], KIND_ROTATION);
        assert_eq!(&s[9..17], &key_id(&old));
        assert_eq!(&s[17..], &new);
        assert_eq!(s.len(), 8 + 1 + 8 + 32);
        // Not a key, a small-order key, or the old key itself: refused.
        assert_eq!(rotation_statement(&key_id(&old), &[0u8; 32]), Err(TrustError::InvalidPublicKey));
        let mut identity = [0u8; 32];
        identity[0] = 1;
        assert_eq!(rotation_statement(&key_id(&old), &identity), Err(TrustError::InvalidPublicKey));
        assert!(matches!(rotation_statement(&key_id(&old), &old), Err(TrustError::Rotation { .. })));
    }
    #[test]
    fn rotations_are_followed_only_from_a_trusted_key() {
        let (a, pa) = signing(3);
        let (b, pb) = signing(4);
        let (_, pc) = signing(5);
        let (evil, pevil) = signing(6);
        let chain = [rotation(&a, &pb), rotation(&b, &pc)];
        // A -> B -> C, from A: both learned; from B: only C (A -> B passed over).
        assert_eq!(follow_rotations(&[pa], &chain, &key_id(&pc)).unwrap(), vec![pb, pc]);
        assert_eq!(follow_rotations(&[pb], &chain, &key_id(&pc)).unwrap(), vec![pc]);
        assert_eq!(follow_rotations(&[pa], &chain[..1], &key_id(&pb)).unwrap(), vec![pb]);
        // A rotation to the attacker's key, signed by the attacker: its signer is not trusted.
        let forged = [rotation(&evil, &pc)];
        let err = follow_rotations(&[pa], &forged, &key_id(&pc)).unwrap_err().to_string();
        assert!(err.contains("signer is not trusted") && err.contains(&key_id_hex(&pevil)), "{err}");
        // Claiming the trusted key as signer without its signature: does not verify.
        let mut claimed = rotation(&evil, &pc);
        claimed.from = key_id(&pa);
        let err = follow_rotations(&[pa], &[claimed], &key_id(&pc)).unwrap_err().to_string();
        assert!(err.contains("does not verify"), "{err}");
        // A chain that never reaches the target, and an over-long list.
        let err = follow_rotations(&[pa], &chain[..1], &key_id(&pc)).unwrap_err().to_string();
        assert!(err.contains("no rotation leads"), "{err}");
        let long = vec![rotation(&a, &pb); MAX_ROTATIONS + 1];
        assert!(follow_rotations(&[pa], &long, &key_id(&pb)).is_err());
    }
    #[test]
    fn verify_accepts_only_the_signed_message_under_its_key() {
        use ed25519_dalek::{Signer, SigningKey};
        let sk = SigningKey::from_bytes(&[3u8; 32]);
        let pk = sk.verifying_key().to_bytes();
        let msg = update_statement(&key_id(&pk), "demo", "v1", "v2", 10, &[1; 32]).unwrap();
        let sig = sk.sign(&msg).to_bytes();
        verify_ed25519(&pk, &msg, &sig).unwrap();
        let other = update_statement(&key_id(&pk), "other", "v1", "v2", 10, &[1; 32]).unwrap();
        assert!(matches!(verify_ed25519(&pk, &other, &sig), Err(TrustError::BadSignature { .. })));
        let pk2 = SigningKey::from_bytes(&[4u8; 32]).verifying_key().to_bytes();
        assert!(verify_ed25519(&pk2, &msg, &sig).is_err());
        assert_eq!(parse_hex::<8>("key id", &key_id_hex(&pk)).unwrap(), key_id(&pk));
        assert!(parse_hex::<8>("key id", "zz").is_err());
    }
}
