//! `edgepatch update`: an old build updated from an update server, every byte checked.

use std::time::Instant;

use serde_json::json;

use crate::cli_error::CliError;
use crate::progress::Progress;
use crate::{server_client, trusted_keys, Cli, UpdateArgs};

/// Update OLD_DIR into OUT_DIR from an update server, every byte checked against what was signed.
pub(crate) fn run(cli: &Cli, args: &UpdateArgs) -> Result<(), CliError> {
    let UpdateArgs { server, game, from, to, channel, public_key, trust_on_first_use, allow_insecure_http, old_dir, out_dir } = args;
    let started = Instant::now();
    if *trust_on_first_use && *allow_insecure_http {
        return Err(CliError::usage("--trust-on-first-use cannot be used with --allow-insecure-http: over plain http anyone on the network chooses the key that would be pinned; pass the server's key with --public-key (or EDGEPATCH_PUBLIC_KEY)"));
    }
    let server = server_client::Server::new(server, *allow_insecure_http)?;
    let keys = trusted_keys::given_keys(public_key)?;
    let target = match (to, channel) {
        (Some(b), _) => server_client::UpdateTarget::Build(b),
        (None, Some(c)) => server_client::UpdateTarget::Channel(c),
        (None, None) => return Err(CliError::usage("update needs --to BUILD or --channel NAME")),
    };
    let opts = server_client::UpdateOptions { game, from, to: target, keys, trust_on_first_use: *trust_on_first_use };
    let bar = Progress::new(cli, 0, "update");
    let s = server_client::update(&server, old_dir, out_dir, opts, &mut |done, total| {
        bar.set_length(total);
        bar.set_position(done)
    })?;
    bar.finish();
    let secs = started.elapsed().as_secs_f64();
    if cli.json {
        println!(
            "{}",
            json!({ "ok": true, "command": "update", "to": s.to, "channel": channel, "entries": s.apply.entries, "files": s.apply.files,
            "bytes_written": s.apply.bytes_written, "patch_bytes": s.patch_bytes, "manifest_bytes": s.manifest_bytes,
            "signature_verified": true, "key_id": s.key_id, "key_source": s.key_source, "channel_sequence": s.channel_sequence, "seconds": secs })
        );
    } else {
        let via = match (channel, s.channel_sequence) {
            (Some(c), Some(n)) => format!(" (channel {c}, position {n})"),
            _ => String::new(),
        };
        println!("updated {game} {from} -> {}{via}: {} entries, {} bytes written from a {}-byte patch; signed by key {} (accepted keys: {}), every file checked against the signed manifest; {secs:.2}s",
            s.to, s.apply.entries, s.apply.bytes_written, s.patch_bytes, s.key_id, s.key_source);
    }
    Ok(())
}
