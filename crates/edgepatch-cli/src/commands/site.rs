//! `edgepatch site`: a static update site (add a build, move a channel, re-sign, rotate the key).

use std::path::Path;
use std::time::Instant;

use serde_json::json;

use crate::cli_error::CliError;
use crate::progress::Progress;
use crate::{static_site, Cli, SiteCommand, SiteSigning};

impl SiteSigning {
    fn open(&self) -> Result<(static_site::SiteKey, static_site::Site), CliError> {
        Ok((static_site::SiteKey::load(&self.key)?, static_site::Site::open(&self.site)?))
    }

    fn ttl_secs(&self) -> u64 {
        self.ttl_days * 86_400
    }
}
pub(crate) fn run(cli: &Cli, command: &SiteCommand) -> Result<(), CliError> {
    match command {
        SiteCommand::Add { signing, game, build, channel, history, level, reader, store_decoded, dir } => site_add(
            cli,
            signing,
            &static_site::AddOptions {
                game,
                build,
                channel: channel.as_deref(),
                history: *history,
                level: *level,
                reader: *reader,
                store_decoded: *store_decoded,
                ttl_secs: signing.ttl_secs(),
            },
            dir,
        ),
        SiteCommand::Channel { signing, game, channel, build } => site_channel(cli, signing, game, channel, build),
        SiteCommand::RotateKey { signing, new_key } => site_rotate_key(cli, signing, new_key),
        SiteCommand::Refresh { signing } => site_refresh(cli, signing),
    }
}

/// Publish build DIR on the site.
fn site_add(cli: &Cli, signing: &SiteSigning, o: &static_site::AddOptions, dir: &Path) -> Result<(), CliError> {
    let (game, build, channel) = (o.game, o.build, o.channel);
    let started = Instant::now();
    let (key, mut s) = signing.open()?;
    let progress = Progress::new(cli, 0, "site add");
    let pairs = s.add(&key, dir, o, &progress)?;
    progress.finish();
    let secs = started.elapsed().as_secs_f64();
    if cli.json {
        let list: Vec<_> = pairs
            .iter()
            .map(|p| {
                json!({ "from": p.from, "patch_bytes": p.patch_bytes, "manifest_bytes": p.manifest_bytes, "segments": p.segments, "new_bytes": p.new_bytes,
                        "descriptor": p.descriptor_path, "manifest": p.manifest_path, "patch": p.patch_path, "reused": p.reused })
            })
            .collect();
        println!(
            "{}",
            json!({ "ok": true, "command": "site add", "game": game, "build": build, "channel": channel, "key_id": key.key_id_hex(), "pairs": list, "seconds": secs })
        );
    } else {
        for p in &pairs {
            println!("site: {game} {} -> {build}: patch {} bytes{}", p.from, p.patch_bytes, if p.reused { " (already on the site, kept)" } else { "" });
        }
        let via = channel.as_ref().map(|c| format!(", channel {c} -> {build}")).unwrap_or_default();
        println!(
            "site: published {game}/{build} ({} patches, {} made, {} kept{via}), signed by key {}; upload {}; {secs:.2}s",
            pairs.len(),
            pairs.iter().filter(|p| !p.reused).count(),
            pairs.iter().filter(|p| p.reused).count(),
            key.key_id_hex(),
            signing.site.join("public").display()
        );
    }
    Ok(())
}

/// Point a site's channel at one of its builds.
fn site_channel(cli: &Cli, signing: &SiteSigning, game: &str, channel: &str, build: &str) -> Result<(), CliError> {
    let (key, mut s) = signing.open()?;
    let sequence = s.move_channel(&key, game, channel, build, signing.ttl_secs())?;
    if cli.json {
        println!("{}", json!({ "ok": true, "command": "site channel", "game": game, "channel": channel, "build": build, "sequence": sequence }));
    } else {
        println!("site: channel {game}/{channel} -> {build} (position {sequence})");
    }
    Ok(())
}

/// Move the site to a new signing key.
fn site_rotate_key(cli: &Cli, signing: &SiteSigning, new_key: &Path) -> Result<(), CliError> {
    let (old, mut s) = signing.open()?;
    let new = static_site::SiteKey::load(new_key)?;
    let r = s.rotate_key(&old, &new, signing.ttl_secs())?;
    if cli.json {
        println!(
            "{}",
            json!({ "ok": true, "command": "site rotate-key", "from": old.key_id_hex(), "key_id": new.key_id_hex(),
                    "descriptors": r.descriptors, "channels": r.channels, "rotation": r.rotation })
        );
    } else {
        println!(
            "site: rotated the signing key {} -> {} (rotation signed by the old key in v1/public-key); re-signed {} descriptors and {} channel documents; upload {}",
            old.key_id_hex(),
            new.key_id_hex(),
            r.descriptors,
            r.channels,
            signing.site.join("public").display()
        );
    }
    Ok(())
}

/// Re-sign the site's channel documents with a fresh expiry.
fn site_refresh(cli: &Cli, signing: &SiteSigning) -> Result<(), CliError> {
    let (key, mut s) = signing.open()?;
    let n = s.refresh(&key, signing.ttl_secs())?;
    let ttl_days = signing.ttl_days;
    if cli.json {
        println!("{}", json!({ "ok": true, "command": "site refresh", "channels": n }));
    } else {
        println!("site: re-signed {n} channel documents, valid {ttl_days} days");
    }
    Ok(())
}
