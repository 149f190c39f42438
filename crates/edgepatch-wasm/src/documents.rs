//! The update protocol's JSON documents for JS (docs/UPDATE_PROTOCOL.md): an update
//! descriptor's and a channel document's checks, the channel rules and the walk of a server's
//! key rotations, the core's (edgepatch_core::descriptor, edgepatch_core::channel,
//! edgepatch_core::key_rotations), given the document as JSON.parse
//! read it (serde-wasm-bindgen reads it into the core's type: no JSON parser in the module).
//! The caller keeps the I/O: fetching, the newest channel position it stored, the key
//! rotations it follows. A refusal throws an `Error` whose `code` is the refusal's stable
//! name (`protocol`, `signature`, `frozen`, `rollback`).

use edgepatch_core::channel::{self, ChannelDocument, SeenHead};
use edgepatch_core::descriptor::UpdateDescriptor;
use edgepatch_core::document_rules::DocumentError;
use edgepatch_core::key_rotations::{self, KeyRotation};
use edgepatch_core::trust::{self, TrustError};
use wasm_bindgen::prelude::*;

use crate::js::{js_u64, set};

fn refusal(e: DocumentError) -> JsValue {
    coded(e.code(), &e.to_string())
}

fn coded(code: &str, message: &str) -> JsValue {
    let err = js_sys::Error::new(message);
    set(&err, "code", code);
    err.into()
}

fn parse<T: serde::de::DeserializeOwned>(what: &str, doc: JsValue) -> Result<T, JsValue> {
    serde_wasm_bindgen::from_value(doc).map_err(|e| coded("protocol", &format!("not {what}: {e}")))
}

/// The accepted ed25519 public keys, 32 bytes each, end to end.
fn keys_arg(keys: &[u8]) -> Result<Vec<[u8; 32]>, JsValue> {
    if !keys.len().is_multiple_of(32) {
        return Err(JsError::new(&format!("keys are {} bytes, not a multiple of 32", keys.len())).into());
    }
    Ok(keys.chunks_exact(32).map(|k| k.try_into().expect("32 bytes")).collect())
}

/// Checks the update descriptor `doc` answered for `game` `from` -> `to` (its fields, and
/// that it is of that update); with `keys` (accepted public keys, 32 bytes each, end to
/// end), also its signature over the update statement rebuilt from what was asked for.
#[wasm_bindgen(js_name = checkUpdateDescriptor)]
pub fn check_update_descriptor(doc: JsValue, game: &str, from: &str, to: &str, keys: Option<Vec<u8>>) -> Result<(), JsValue> {
    let checked = parse::<UpdateDescriptor>("an update descriptor", doc)?.check(game, from, to).map_err(refusal)?;
    if let Some(keys) = keys {
        checked.verify(&keys_arg(&keys)?).map_err(refusal)?;
    }
    Ok(())
}

/// Checks the fields of the channel document `doc` answered for `channel` of `game`.
#[wasm_bindgen(js_name = checkChannelDocument)]
pub fn check_channel_document(doc: JsValue, game: &str, channel: &str) -> Result<(), JsValue> {
    parse::<ChannelDocument>("a channel document", doc)?.check(game, channel).map_err(refusal)?;
    Ok(())
}

/// The channel rules (docs/UPDATE_PROTOCOL.md, "What a client checks", 1) on the channel
/// document `doc` of `channel` of `game`: signed by one of `keys` (accepted public keys,
/// 32 bytes each, end to end; undefined: unsigned documents are accepted), not expired at
/// `now` (Unix seconds), not older than the newest position followed (`seen_sequence` and
/// `seen_build`, when there is one). Throws the refusal; returns nothing.
#[wasm_bindgen(js_name = acceptChannel)]
pub fn accept_channel(
    doc: JsValue,
    game: &str,
    channel: &str,
    keys: Option<Vec<u8>>,
    seen_sequence: Option<f64>,
    seen_build: Option<String>,
    now: f64,
) -> Result<(), JsValue> {
    let doc = parse::<ChannelDocument>("a channel document", doc)?;
    let keys = keys.map(|k| keys_arg(&k)).transpose()?;
    let seen = match (seen_sequence, seen_build.as_deref()) {
        (Some(sequence), Some(build)) => Some(SeenHead { sequence: js_u64("seen sequence", sequence)?, build }),
        _ => None,
    };
    channel::accept_channel(&doc, game, channel, keys.as_deref(), seen, js_u64("now", now.floor())?).map_err(refusal)?;
    Ok(())
}

/// Walks `rotations` (a `v1/public-key` document's, oldest first) from the accepted keys
/// `trusted` (32 bytes each, end to end) towards the key `target` (16 hex digits), each step
/// signed by a key already trusted (edgepatch_core::trust::follow_rotations). Returns the
/// keys learned, 32 bytes each, end to end. Throws with code `protocol` for a malformed
/// entry, `signature` (the message says why) when a rotation from a trusted key does not
/// verify or `target` is not reached.
#[wasm_bindgen(js_name = followRotations)]
pub fn follow_rotations(trusted: &[u8], rotations: JsValue, target: &str) -> Result<Vec<u8>, JsValue> {
    let list = parse::<Vec<KeyRotation>>("a list of key rotations", rotations)?;
    let list = key_rotations::parse_rotations(&list).map_err(refusal)?;
    let target = trust::parse_hex::<8>("key id", target).map_err(|e| coded("protocol", &e.to_string()))?;
    let learned = trust::follow_rotations(&keys_arg(trusted)?, &list, &target).map_err(|e| match e {
        TrustError::Rotation { why } => coded("signature", &why),
        e => coded("signature", &e.to_string()),
    })?;
    Ok(learned.concat())
}
