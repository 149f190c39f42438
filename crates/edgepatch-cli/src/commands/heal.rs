//! `edgepatch heal`: an installed build checked against its signed install manifest, and only
//! its damaged entries replaced (install_repair.rs).

use std::time::Instant;

use serde_json::json;

use edgepatch_core::manifest::ManifestView;

use crate::cli_error::{CliError, Refusal, ResultExt};
use crate::install_repair::{self, Damaged};
use crate::progress::Progress;
use crate::{server_client, trusted_keys, Cli, HealArgs};

/// Check DIR against the signed manifest of `_` -> BUILD; report, or repair what is damaged.
pub(crate) fn run(cli: &Cli, args: &HealArgs) -> Result<(), CliError> {
    let HealArgs { server, game, build, public_key, allow_insecure_http, dry_run, dir } = args;
    let started = Instant::now();
    if !dir.is_dir() {
        return Err(CliError::bad_input(format!("{}: not a directory (heal takes the installed build's directory)", dir.display())).at(dir));
    }
    let server = server_client::Server::new(server, *allow_insecure_http)?;
    let mut keys = server_client::resolve_keys(&server, trusted_keys::given_keys(public_key)?, false)?;
    let v = server_client::verified_update(&server, &mut keys, game, "_", build)?;
    let view = ManifestView::open(&v.manifest).context("manifest")?;
    let entries = view.len();
    let progress = Progress::new(cli, install_repair::file_bytes(&view)?, "heal (check)");
    let damaged = install_repair::find_damage(dir, &view, &|done| progress.set_position(done))?;
    let repaired = if damaged.is_empty() || *dry_run {
        false
    } else {
        progress.start_phase("heal (install patch)", v.patch_size);
        install_repair::repair(dir, &damaged, &v, &server, &mut |done, _| progress.set_position(done))?;
        true
    };
    progress.finish();
    let secs = started.elapsed().as_secs_f64();
    if cli.json {
        let list: Vec<_> = damaged.iter().map(|d| json!({ "path": d.entry.path, "problem": d.damage.to_string() })).collect();
        println!(
            "{}",
            json!({ "ok": damaged.is_empty() || repaired, "command": "heal", "game": game, "build": build, "entries": entries,
                    "damaged": list, "repaired": if repaired { damaged.len() } else { 0 }, "patch_bytes": if repaired { v.patch_size } else { 0 },
                    "key_id": v.key_id, "key_source": keys.source, "seconds": secs })
        );
    } else {
        for Damaged { entry, damage } in &damaged {
            println!("{}: {damage}{}", entry.path, if repaired { ": repaired" } else { "" });
        }
        let verdict = match (damaged.len(), repaired) {
            (0, _) => format!("all {entries} entries match"),
            (n, true) => format!("repaired {n} of {entries} entries from a {}-byte install patch", v.patch_size),
            (n, false) => format!("{n} of {entries} entries damaged (--dry-run: nothing changed)"),
        };
        println!("heal {game} {build}: {verdict}; manifest signed by key {} (accepted keys: {}); {secs:.2}s", v.key_id, keys.source);
    }
    if damaged.is_empty() || repaired {
        Ok(())
    } else {
        Err(CliError::refused(Refusal::Damaged, format!("{} entries do not match the signed manifest of {game} {build}", damaged.len())).at(dir))
    }
}
