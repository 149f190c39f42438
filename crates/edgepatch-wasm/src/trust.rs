//! The update protocol's trust rules: names, key ids, the bytes a server signs (signed
//! statements) and ed25519 verification.

use edgepatch_core::trust;
use wasm_bindgen::prelude::*;

use crate::js::{core_err, js_u64};

fn key_id_arg(key_id_hex: &str) -> Result<trust::KeyId, JsError> {
    trust::parse_hex::<8>("key id", key_id_hex).map_err(core_err)
}

/// The protocol's name rule for games, builds and channels (docs/UPDATE_PROTOCOL.md,
/// "Names"): throws an Error naming `what` and the name unless it is 1-64 bytes of
/// `[A-Za-z0-9._-]` not starting with `.` (`_`, the empty build, passes).
#[wasm_bindgen(js_name = checkName)]
pub fn check_name(what: &str, name: &str) -> Result<(), JsError> {
    let what: &'static str = match what {
        "game" => "game",
        "build" => "build",
        "channel" => "channel",
        _ => "name",
    };
    trust::check_name(what, name).map_err(core_err)
}

/// The key id of a 32-byte ed25519 public key (16 hex digits; docs/UPDATE_PROTOCOL.md).
#[wasm_bindgen(js_name = keyId)]
pub fn key_id(public_key: &[u8]) -> Result<String, JsError> {
    let pk: &[u8; 32] = public_key.try_into().map_err(|_| JsError::new(&format!("public key has {} bytes, not 32", public_key.len())))?;
    Ok(trust::key_id_hex(pk))
}

/// The bytes a server signs for an update descriptor (docs/UPDATE_PROTOCOL.md, "Signed statements").
#[wasm_bindgen(js_name = updateStatement)]
pub fn update_statement(key_id_hex: &str, game: &str, from: &str, to: &str, manifest_size: f64, manifest_blake3_hex: &str) -> Result<Vec<u8>, JsError> {
    let hash = trust::parse_hex::<32>("manifest BLAKE3", manifest_blake3_hex).map_err(core_err)?;
    trust::update_statement(&key_id_arg(key_id_hex)?, game, from, to, js_u64("manifest size", manifest_size)?, &hash).map_err(core_err)
}

/// The bytes a server signs for a channel document (docs/UPDATE_PROTOCOL.md, "Signed statements").
#[wasm_bindgen(js_name = channelStatement)]
pub fn channel_statement(key_id_hex: &str, game: &str, channel: &str, build: &str, sequence: f64, expires: f64) -> Result<Vec<u8>, JsError> {
    trust::channel_statement(&key_id_arg(key_id_hex)?, game, channel, build, js_u64("sequence", sequence)?, js_u64("expires", expires)?).map_err(core_err)
}

/// The bytes an old key signs to hand over to `new_public_key` (32 bytes): a key rotation
/// (docs/UPDATE_PROTOCOL.md, "Signed statements", kind 3). Throws for a new key that is not
/// a usable ed25519 key, or that is the old key.
#[wasm_bindgen(js_name = rotationStatement)]
pub fn rotation_statement(old_key_id_hex: &str, new_public_key: &[u8]) -> Result<Vec<u8>, JsError> {
    let pk: &[u8; 32] = new_public_key.try_into().map_err(|_| JsError::new(&format!("new public key has {} bytes, not 32", new_public_key.len())))?;
    trust::rotation_statement(&key_id_arg(old_key_id_hex)?, pk).map_err(core_err)
}

/// Checks an ed25519 signature (for engines whose WebCrypto lacks Ed25519).
/// False for a bad signature; throws only for arguments of the wrong size.
#[wasm_bindgen(js_name = verifyEd25519)]
pub fn verify_ed25519(public_key: &[u8], message: &[u8], signature: &[u8]) -> Result<bool, JsError> {
    let pk: &[u8; 32] = public_key.try_into().map_err(|_| JsError::new(&format!("public key has {} bytes, not 32", public_key.len())))?;
    let sig: &[u8; 64] = signature.try_into().map_err(|_| JsError::new(&format!("signature has {} bytes, not 64", signature.len())))?;
    Ok(trust::verify_ed25519(pk, message, sig).is_ok())
}
