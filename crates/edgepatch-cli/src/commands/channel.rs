//! `edgepatch channel set`: a channel on an update server pointed at a build.

use serde_json::json;

use crate::cli_error::CliError;
use crate::{server_client, Cli};

/// Point a channel on an update server at a build.
pub(crate) fn set(cli: &Cli, server: &str, game: &str, channel: &str, build: &str, allow_insecure_http: bool) -> Result<(), CliError> {
    let server = server_client::Server::new(server, allow_insecure_http)?;
    let answer = server_client::set_channel(&server, game, channel, build)?;
    if cli.json {
        println!("{}", json!({ "ok": true, "command": "channel set", "answer": answer }));
    } else {
        let seq = answer.get("sequence").map(|s| format!(" (position {s})")).unwrap_or_default();
        println!("channel {game}/{channel} -> {build}{seq}");
    }
    Ok(())
}
