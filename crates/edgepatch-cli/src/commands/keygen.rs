//! `edgepatch keygen`: a new signing key file, its public key printed.

use std::io;
use std::path::Path;

use serde_json::json;

use crate::cli_error::{CliError, IoResultExt};
use crate::{platform, trusted_keys, Cli};

/// Write a new signing key to KEYFILE and print its public key.
pub(crate) fn run(cli: &Cli, keyfile: &Path) -> Result<(), CliError> {
    let (seed, key) = trusted_keys::generate_key()?;
    write_secret(keyfile, &(seed + "\n"))?;
    let public_key = trusted_keys::encode_public_key(&key);
    if cli.json {
        println!("{}", json!({ "ok": true, "command": "keygen", "keyfile": keyfile, "public_key": public_key, "key_id": key.key_id }));
    } else {
        println!("signing key written to {} (secret; mode 0600)\npublic key: {public_key}\nkey id:     {}", keyfile.display(), key.key_id);
    }
    Ok(())
}

/// Creates `path` (refusing to replace one) readable by its owner only.
fn write_secret(path: &Path, text: &str) -> Result<(), CliError> {
    let mut opts = std::fs::OpenOptions::new();
    opts.write(true).create_new(true);
    platform::owner_only(&mut opts);
    let mut f = opts.open(path).at_path(path)?;
    io::Write::write_all(&mut f, text.as_bytes()).and_then(|_| f.sync_all()).at_path(path)
}
