//! `edgepatch publish`: a build uploaded to an update server.

use std::time::Instant;

use serde_json::json;

use crate::cli_error::CliError;
use crate::progress::Progress;
use crate::{server_client, Cli, PublishArgs};

/// Upload a build directory to an update server.
pub(crate) fn run(cli: &Cli, args: &PublishArgs) -> Result<(), CliError> {
    let PublishArgs { server, game, build, channel, part_size, allow_insecure_http, dir } = args;
    let started = Instant::now();
    let server = server_client::Server::new(server, *allow_insecure_http)?;
    let opts = server_client::PublishOptions { game, build, channel: channel.as_deref(), part_bytes: *part_size };
    let progress = Progress::new(cli, 0, "publish");
    let record = server_client::publish(&server, dir, &opts, &progress)?;
    progress.finish();
    let secs = started.elapsed().as_secs_f64();
    if cli.json {
        println!("{}", json!({ "ok": true, "command": "publish", "build": record, "seconds": secs }));
    } else {
        println!(
            "published {game}/{build}: {} files, {} bytes of tar, signature {}; {secs:.2}s",
            record["files"],
            record["tarBytes"],
            record["signatureBlake3"].as_str().unwrap_or("?")
        );
    }
    Ok(())
}
