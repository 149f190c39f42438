//! `edgepatch key rotate`: a key rotation signed by the old key, appended to the earlier ones.

use std::path::Path;

use serde_json::json;

use crate::cli_error::{CliError, IoResultExt};
use crate::{server_client, static_site};

/// Print the rotations from --rotations and the new one, from OLD_KEY to NEW_KEY.
pub(crate) fn rotate(old_key: &Path, new_key: &Path, rotations: Option<&Path>) -> Result<(), CliError> {
    let (old, new) = (static_site::SiteKey::load(old_key)?, static_site::SiteKey::load(new_key)?);
    let mut list = match rotations {
        Some(path) => {
            let text = std::fs::read_to_string(path).at_path(path)?;
            let v: serde_json::Value = serde_json::from_str(&text).map_err(|e| CliError::bad_input(format!("{}: not JSON: {e}", path.display())).at(path))?;
            server_client::parse_rotations(&json!({ "rotations": v })).map_err(|e| CliError::bad_input(format!("{}: {e}", path.display())).at(path))?;
            v.as_array().cloned().unwrap_or_default()
        }
        None => Vec::new(),
    };
    if let Some(last) = list.last().and_then(|r| r["keyId"].as_str()) {
        if last != old.key_id_hex() {
            return Err(CliError::bad_input(format!(
                "the last rotation in --rotations is to key {last}, not to --old-key's key {}: rotations are listed oldest first, each from the key the one before it rotated to",
                old.key_id_hex()
            )));
        }
    }
    if list.len() >= edgepatch_core::trust::MAX_ROTATIONS {
        return Err(CliError::bad_input(format!("already {} rotations: clients follow at most {}", list.len(), edgepatch_core::trust::MAX_ROTATIONS)));
    }
    list.push(static_site::rotation_json(&old, &new)?);
    println!("{}", serde_json::Value::Array(list));
    Ok(())
}
