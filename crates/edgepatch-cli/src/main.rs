//! `edgepatch`: the command line over edgepatch-core. Thin glue: argument
//! parsing, file adapters (build_files.rs), progress bars and summaries.

mod bounded_diff;
#[cfg(unix)]
mod build_dir;
#[cfg(windows)]
#[path = "build_dir_windows.rs"]
mod build_dir;
mod build_files;
mod cli_error;
mod large_file_writer;
mod platform;
mod portable_names;
mod server_client;
mod staged_output;
mod static_site;
mod timing;
mod trusted_keys;
mod unchanged_copies;

use std::fs::File;
use std::io::{self, BufReader};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Instant;

use clap::{Args, Parser, Subcommand};
use indicatif::{ProgressBar, ProgressStyle};
use serde_json::json;

use edgepatch_core::{apply_patch, diff_builds, DiffOptions};

use build_files::{read_build, OldBuildFiles};
use cli_error::{CliError, IoResultExt, Refusal, ResultExt};
use staged_output::StagedOutput;

#[derive(Parser)]
#[command(name = "edgepatch", version, about = "Block-hashed, zstd-compressed patches for game builds", after_help = EXIT_CODES_HELP)]
struct Cli {
    /// Print a machine-readable JSON summary instead of text.
    #[arg(long, global = true)]
    json: bool,
    /// Never show a progress bar.
    #[arg(long, global = true)]
    quiet: bool,
    #[command(subcommand)]
    command: Command,
}

/// The exit codes, as `edgepatch --help` lists them (docs/CLI.md has the JSON codes of each).
const EXIT_CODES_HELP: &str = "\
Exit codes (docs/CLI.md, \"Exit codes and JSON errors\"; with --json an error prints
{\"ok\": false, \"code\", \"error\", \"exitCode\", \"path\" when a file is involved}):
  0  success
  1  any other failure (code: error, invalid)
  2  usage: the command line is wrong (code: usage)
  3  bad input: a patch, manifest, signature, key file or build the tool refuses
     (magic, version, truncated, corrupt, limit, path, link, bad_input, not_portable)
  4  verification failed (digest, unvouched, damaged, signature, untrusted_key, rollback, expired)
  5  wrong old build: not the build the patch was made from (old_build)
  6  I/O: reading or writing a local file failed (io, output)
  7  network or server: unreachable, an HTTP error, an answer that breaks the protocol
     (network, http, bad_response)";

/// `diff --bounded`'s old data per segment (MiB) unless `--old-budget` says otherwise.
const DEFAULT_OLD_BUDGET_MIB: u64 = 32;

#[derive(Subcommand)]
enum Command {
    /// Make PATCH that turns OLD into NEW (both files, or both directories).
    Diff(DiffArgs),
    /// Apply PATCH to OLD, creating OUT (OLD is never modified).
    Apply { old: PathBuf, patch: PathBuf, out: PathBuf },
    /// Describe a patch without applying it.
    Inspect { patch: PathBuf },
    /// Write the SIGNATURE of DIR (a directory or a file): hashes per file and per block.
    Sign {
        dir: PathBuf,
        signature: PathBuf,
        /// Block size in bytes.
        #[arg(long, default_value_t = edgepatch_core::signature::DEFAULT_BLOCK_SIZE)]
        block_size: u32,
    },
    /// Write the binary MANIFEST of a tree PATCH (entries, hashes, sources, segment offsets).
    Manifest {
        patch: PathBuf,
        manifest: PathBuf,
        /// The old build the patch applies to (the patch keeps its unchanged entries without naming them).
        #[arg(long, value_name = "DIR")]
        old: PathBuf,
        /// The new build the patch produces: its files' BLAKE3s go into the manifest
        /// (the patch holds one digest for all of them, which they must match).
        #[arg(long, value_name = "DIR")]
        new: PathBuf,
        /// Name of the build the patch applies to.
        #[arg(long, default_value = "old")]
        from: String,
        /// Name of the build the patch produces.
        #[arg(long, default_value = "new")]
        to: String,
    },
    /// Check DIR against SIGNATURE; names damaged, missing and unexpected files and blocks.
    Verify { dir: PathBuf, signature: PathBuf },
    /// Upload build DIR to an update server (token from EDGEPATCH_TOKEN).
    Publish(PublishArgs),
    /// Channels on an update server (token from EDGEPATCH_TOKEN).
    Channel {
        #[command(subcommand)]
        command: ChannelCommand,
    },
    /// A static update site any CDN or bucket can serve (docs/STATIC_SITE.md).
    Site {
        #[command(subcommand)]
        command: SiteCommand,
    },
    /// Make a new ed25519 signing key: KEYFILE gets the 32-byte seed as base64 (keep it
    /// secret: e.g. `wrangler secret put MANIFEST_SIGNING_KEY < KEYFILE`); prints the
    /// public key and key id that clients pin.
    Keygen { keyfile: PathBuf },
    /// Turn OLD_DIR (build FROM, or `_` for none) into OUT_DIR = build TO, or the build CHANNEL
    /// points at now, from an update server.
    Update(UpdateArgs),
    /// Signing key tasks for servers that keep their own `v1/public-key` (the Worker).
    Key {
        #[command(subcommand)]
        command: KeyCommand,
    },
}

// `diff`'s arguments (a struct, so that its function takes one).
#[derive(Args)]
struct DiffArgs {
    old: PathBuf,
    new: PathBuf,
    patch: PathBuf,
    /// zstd compression level, 1..=22.
    #[arg(long, default_value_t = 19)]
    level: i32,
    /// Worker threads (default: all cores).
    #[arg(long)]
    threads: Option<usize>,
    /// Refuse NEW when a path cannot be written as it is on every common file system
    /// (names differing only in case or Unicode normalization, Windows device names or
    /// characters, components over 255 bytes); without it they are warnings.
    #[arg(long)]
    strict_portable: bool,
    /// Diff in memory that does not grow with the builds (the Worker's generator: 4 MiB
    /// segments against planned old data, --old-budget each); automatic when OLD's
    /// files exceed 1 GiB. Patches are a few percent larger on compiled code.
    #[arg(long)]
    bounded: bool,
    /// With --bounded: MiB of old data planned per 4 MiB segment (8..=256). More finds
    /// more of what the in-memory diff finds; memory grows by about 5x this.
    #[arg(long, default_value_t = DEFAULT_OLD_BUDGET_MIB, value_parser = clap::value_parser!(u64).range(8..=256))]
    old_budget: u64,
    /// With --bounded: search text segments' windows as the Worker does (cheaper; about
    /// 10% larger text windows) rather than as the in-memory diff does, and try LZMA as
    /// the Worker does (in ops streams, and in split wasm parts of at most 4 MiB with their
    /// window): the Worker's patch, byte for byte, at its level.
    #[arg(long)]
    worker_text_windows: bool,
    /// Store every changed wasm module as it is (no wasm-aware transform): for
    /// measurement. By default a module is stored in normalized form where that makes
    /// the patch smaller (docs/FORMAT.md §2.8); with --bounded, wherever something in
    /// it is renumbered (modules up to 64 MiB, read whole).
    #[arg(long)]
    no_wasm_transform: bool,
}

// `publish`'s arguments.
#[derive(Args)]
struct PublishArgs {
    /// Base URL of the server, e.g. http://127.0.0.1:8787
    #[arg(long)]
    server: String,
    #[arg(long)]
    game: String,
    #[arg(long)]
    build: String,
    /// Also make this channel point at the build.
    #[arg(long)]
    channel: Option<String>,
    /// Larger tars upload in parts of this many bytes (at least 5 MiB).
    #[arg(long, default_value_t = server_client::DEFAULT_PART_BYTES)]
    part_size: u64,
    /// Allow plain http to a server that is not this machine.
    #[arg(long)]
    allow_insecure_http: bool,
    dir: PathBuf,
}

// `update`'s arguments.
#[derive(Args)]
#[command(group(clap::ArgGroup::new("target").required(true).args(["to", "channel"])))]
struct UpdateArgs {
    #[arg(long)]
    server: String,
    #[arg(long)]
    game: String,
    #[arg(long)]
    from: String,
    /// The build to update to.
    #[arg(long)]
    to: Option<String>,
    /// Update to the build this channel points at now (instead of --to).
    #[arg(long)]
    channel: Option<String>,
    /// base64 ed25519 public key the update must be signed with (repeatable, or comma
    /// separated: any of them). Default: EDGEPATCH_PUBLIC_KEY, else the keys pinned for
    /// the server in the config directory's known_keys. A key the server rotated to is
    /// accepted through a rotation signed by one of these.
    #[arg(long)]
    public_key: Vec<String>,
    /// With no key given or pinned for the server: pin the key it presents now (check it
    /// out of band). Not with --allow-insecure-http.
    #[arg(long)]
    trust_on_first_use: bool,
    /// Allow plain http to a server that is not this machine.
    #[arg(long)]
    allow_insecure_http: bool,
    old_dir: PathBuf,
    out_dir: PathBuf,
}

#[derive(Subcommand)]
enum KeyCommand {
    /// Print the key rotation from OLD_KEY to NEW_KEY, signed by OLD_KEY, as a JSON array of
    /// rotations (oldest first): the ones in --rotations, then the new one
    /// (docs/UPDATE_PROTOCOL.md, "v1/public-key"; the Worker's KEY_ROTATIONS).
    Rotate {
        /// The signing key clients trust now (a key file from `edgepatch keygen`).
        #[arg(long)]
        old_key: PathBuf,
        /// The signing key to move to.
        #[arg(long)]
        new_key: PathBuf,
        /// A JSON array of the earlier rotations, to append to.
        #[arg(long, value_name = "FILE")]
        rotations: Option<PathBuf>,
    },
}

#[derive(Subcommand)]
enum ChannelCommand {
    /// Point CHANNEL at BUILD (a new signed position; the server pre-generates the updates it releases).
    Set {
        #[arg(long)]
        server: String,
        #[arg(long)]
        game: String,
        #[arg(long)]
        channel: String,
        #[arg(long)]
        build: String,
        /// Allow plain http to a server that is not this machine.
        #[arg(long)]
        allow_insecure_http: bool,
    },
}

#[derive(Subcommand)]
enum SiteCommand {
    /// Publish build DIR: patches from nothing and from the game's last --history builds,
    /// manifests and signed descriptors under SITE/public; optionally move a channel to it.
    Add {
        #[command(flatten)]
        signing: SiteSigning,
        #[arg(long)]
        game: String,
        #[arg(long)]
        build: String,
        /// Also point this channel at the build.
        #[arg(long)]
        channel: Option<String>,
        /// Patches are made from this many of the game's previous builds (newest first).
        #[arg(long, default_value_t = 8)]
        history: usize,
        /// zstd level, 1..=22.
        #[arg(long, default_value_t = 19)]
        level: i32,
        dir: PathBuf,
    },
    /// Point CHANNEL at an existing build (signed, sequence + 1).
    Channel {
        #[command(flatten)]
        signing: SiteSigning,
        #[arg(long)]
        game: String,
        #[arg(long)]
        channel: String,
        #[arg(long)]
        build: String,
    },
    /// Re-sign every channel document with a fresh expiry (run from a scheduled job).
    Refresh {
        #[command(flatten)]
        signing: SiteSigning,
    },
    /// Move the site from its signing key (--key) to NEW_KEY: publishes a rotation signed by
    /// the old key in v1/public-key, then re-signs every descriptor and channel with the new
    /// key. Clients that trust the old key follow it.
    RotateKey {
        #[command(flatten)]
        signing: SiteSigning,
        /// The new signing key file (from `edgepatch keygen`).
        #[arg(long)]
        new_key: PathBuf,
    },
}

/// The site and signing key every `site` command writes with.
#[derive(Args)]
struct SiteSigning {
    /// The site's directory.
    #[arg(long)]
    site: PathBuf,
    /// Signing key file from `edgepatch keygen`.
    #[arg(long)]
    key: PathBuf,
    /// Channel documents expire after this many days (re-sign with `site refresh`).
    #[arg(long, default_value_t = 7)]
    ttl_days: u64,
}

impl SiteSigning {
    fn open(&self) -> Result<(static_site::SiteKey, static_site::Site), CliError> {
        Ok((static_site::SiteKey::load(&self.key)?, static_site::Site::open(&self.site)?))
    }

    fn ttl_secs(&self) -> u64 {
        self.ttl_days * 86_400
    }
}

fn run_site(cli: &Cli, command: &SiteCommand) -> Result<(), CliError> {
    match command {
        SiteCommand::Add { signing, game, build, channel, history, level, dir } => site_add(
            cli,
            signing,
            &static_site::AddOptions { game, build, channel: channel.as_deref(), history: *history, level: *level, ttl_secs: signing.ttl_secs() },
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
    let pairs = s.add(&key, dir, o)?;
    let secs = started.elapsed().as_secs_f64();
    if cli.json {
        let list: Vec<_> = pairs
            .iter()
            .map(|p| {
                json!({ "from": p.from, "patch_bytes": p.patch_bytes, "manifest_bytes": p.manifest_bytes, "segments": p.segments, "new_bytes": p.new_bytes,
                        "descriptor": p.descriptor_path, "manifest": p.manifest_path, "patch": p.patch_path })
            })
            .collect();
        println!(
            "{}",
            json!({ "ok": true, "command": "site add", "game": game, "build": build, "channel": channel, "key_id": key.key_id_hex(), "pairs": list, "seconds": secs })
        );
    } else {
        for p in &pairs {
            println!("site: {game} {} -> {build}: patch {} bytes", p.from, p.patch_bytes);
        }
        let via = channel.as_ref().map(|c| format!(", channel {c} -> {build}")).unwrap_or_default();
        println!(
            "site: published {game}/{build} ({} patches{via}), signed by key {}; upload {}; {secs:.2}s",
            pairs.len(),
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

fn main() -> ExitCode {
    // Process-wide settings, before any thread starts.
    build_files::tune_allocator();
    staged_output::read_umask();
    build_files::raise_open_files_limit();
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => {
            // Help and version go to stdout with exit 0; a usage error exits 2 (clap's own
            // message on stderr), with the JSON error first under --json.
            if e.use_stderr() && std::env::args_os().any(|a| a == "--json") {
                let text = e.to_string();
                let usage = CliError::usage(text.lines().next().unwrap_or_default().trim_start_matches("error: "));
                println!("{}", usage.to_json());
            }
            e.exit()
        }
    };
    match run(&cli) {
        Ok(()) => ExitCode::from(cli_error::EXIT_OK),
        Err(e) => {
            if cli.json {
                println!("{}", e.to_json());
            }
            eprintln!("edgepatch: error: {e}");
            ExitCode::from(e.exit_code())
        }
    }
}

fn progress_bar(cli: &Cli, total: u64, what: &str) -> ProgressBar {
    if cli.quiet || cli.json || !console_is_terminal() {
        return ProgressBar::hidden();
    }
    let bar = ProgressBar::new(total);
    bar.set_style(
        ProgressStyle::with_template("{msg:8} [{bar:40}] {bytes}/{total_bytes} {bytes_per_sec} eta {eta}").expect("static template").progress_chars("=> "),
    );
    bar.set_message(what.to_string());
    bar
}

fn console_is_terminal() -> bool {
    use std::io::IsTerminal;
    io::stderr().is_terminal()
}

fn run(cli: &Cli) -> Result<(), CliError> {
    match &cli.command {
        Command::Diff(args) => diff(cli, args),
        Command::Apply { old, patch, out } => apply(cli, old, patch, out),
        Command::Sign { dir, signature, block_size } => sign(cli, dir, signature, *block_size),
        Command::Verify { dir, signature } => verify(cli, dir, signature),
        Command::Manifest { patch, manifest, old, new, from, to } => write_manifest(cli, patch, manifest, old, new, from, to),
        Command::Site { command } => run_site(cli, command),
        Command::Channel { command: ChannelCommand::Set { server, game, channel, build, allow_insecure_http } } => {
            channel_set(cli, server, game, channel, build, *allow_insecure_http)
        }
        Command::Keygen { keyfile } => keygen(cli, keyfile),
        Command::Publish(args) => publish(cli, args),
        Command::Key { command: KeyCommand::Rotate { old_key, new_key, rotations } } => key_rotate(old_key, new_key, rotations.as_deref()),
        Command::Update(args) => update(cli, args),
        Command::Inspect { patch } => inspect(cli, patch),
    }
}

/// Make PATCH from OLD and NEW: in memory, or in bounded memory (`--bounded`, or OLD over 1 GiB).
fn diff(cli: &Cli, args: &DiffArgs) -> Result<(), CliError> {
    let DiffArgs { old, new, patch, level, threads, strict_portable, bounded, old_budget, worker_text_windows, no_wasm_transform } = args;
    let started = Instant::now();
    let automatic = !*bounded && bounded_diff::wanted(old).context("old")?;
    let stats = if *bounded || automatic {
        if automatic {
            eprintln!("edgepatch: old build over 1 GiB: diffing in bounded memory (as --bounded)");
        }
        let paths = build_files::list_paths(new).context("new")?;
        check_portable(paths.iter().map(String::as_str), *strict_portable)?;
        let bar = progress_bar(cli, 0, "diff (patch bytes)");
        let opts = bounded_diff::BoundedOptions {
            level: *level,
            wasm_transform: !*no_wasm_transform,
            old_budget: *old_budget << 20,
            deep_text_windows: !*worker_text_windows,
            // As the in-memory diff: at level 19 or above. The Worker tries LZMA at
            // its level, in window segments only up to what its isolate affords.
            lzma_windows: if *worker_text_windows {
                edgepatch_core::generate::ISOLATE_LZMA_WINDOW_LIMIT
            } else if *level >= 19 {
                edgepatch_core::patch_format::MAX_LZMA_DICTIONARY
            } else {
                0
            },
            lzma_streams: *worker_text_windows || *level >= 19,
            threads: threads.unwrap_or_else(|| std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1)),
            trace: timing::from_env(),
        };
        let stats = bounded_diff::diff_bounded(old, new, patch, &opts, &|n| bar.set_position(n))?;
        bar.finish_and_clear();
        stats
    } else {
        let old_build = read_build(old).context("old")?;
        let new_build = read_build(new).context("new")?;
        for (path, target) in new_build.links_leaving_build() {
            eprintln!("edgepatch: warning: new: link {path} -> {target} points outside the build (kept as a link; what it points at is not in the patch)");
        }
        check_portable(new_build.entries.iter().map(|e| e.path.as_str()), *strict_portable)?;
        let threads = threads.unwrap_or_else(|| std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1));
        let opts = DiffOptions { level: *level, threads, wasm_transform: !*no_wasm_transform, trace: timing::from_env(), ..DiffOptions::default() };
        let bar = progress_bar(cli, new_build.total_file_bytes(), "diff");
        let (bytes, stats) = diff_builds(&old_build, &new_build, &opts, &|done, _total| bar.set_position(done))?;
        bar.finish_and_clear();
        write_atomically(patch, &bytes)?;
        stats
    };
    let secs = started.elapsed().as_secs_f64();
    let pct = 100.0 * stats.patch_bytes as f64 / stats.new_bytes.max(1) as f64;
    if cli.json {
        println!(
            "{}",
            json!({ "ok": true, "command": "diff", "patch_bytes": stats.patch_bytes, "new_bytes": stats.new_bytes,
                "patch_percent_of_new": pct, "files": stats.new_files, "unchanged": stats.unchanged, "renamed": stats.renamed,
                "delta_files": stats.delta_files, "removed": stats.removed, "delta_bytes": stats.delta_bytes,
                "segments": stats.segments, "wasm_transformed": stats.wasm_transformed, "seconds": secs })
        );
    } else {
        println!(
            "patch {} bytes = {pct:.3}% of {} new bytes (saved {:.1}%); {} file{}: {} unchanged, {} renamed, {} diffed, {} removed; {secs:.2}s",
            stats.patch_bytes,
            stats.new_bytes,
            100.0 - pct,
            stats.new_files,
            if stats.new_files == 1 { "" } else { "s" },
            stats.unchanged,
            stats.renamed,
            stats.delta_files,
            stats.removed
        );
    }
    Ok(())
}

/// Apply PATCH to OLD into OUT, which appears only once every file verified.
fn apply(cli: &Cli, old: &Path, patch: &Path, out: &Path) -> Result<(), CliError> {
    let started = Instant::now();
    let patch_file = File::open(patch).at_path(patch)?;
    let patch_len = patch_file.metadata().map(|m| m.len()).unwrap_or(0);
    let mut old_files = OldBuildFiles::new(old);
    let mut staged = StagedOutput::new(out, old_files.root(), old_files.descriptors_needed()).map_err(|e| CliError::from(e).at(out))?;
    let bar = progress_bar(cli, patch_len, "apply");
    let summary =
        apply_patch(patch_file, &mut old_files, &mut staged, &mut |p| bar.set_position(p.patch_bytes_read)).map_err(|e| apply_failed(e, old, patch, out))?;
    staged.commit().at_path(out)?;
    bar.finish_and_clear();
    let secs = started.elapsed().as_secs_f64();
    if cli.json {
        println!(
            "{}",
            json!({ "ok": true, "command": "apply", "entries": summary.entries, "files": summary.files,
            "bytes_written": summary.bytes_written, "patch_bytes": summary.patch_bytes, "seconds": secs })
        );
    } else {
        println!("applied: {} entries, {} files, {} bytes written, all verified; {secs:.2}s", summary.entries, summary.files, summary.bytes_written);
    }
    Ok(())
}

/// Write DIR's signature.
fn sign(cli: &Cli, dir: &Path, signature: &Path, block_size: u32) -> Result<(), CliError> {
    if !(edgepatch_core::signature::MIN_BLOCK_SIZE..=edgepatch_core::signature::MAX_BLOCK_SIZE).contains(&block_size) {
        return Err(CliError::usage(format!("block size {block_size} is not in 512..=16777216")));
    }
    let sig = build_files::sign_path(dir, block_size)?;
    let bytes = sig.encode();
    write_atomically(signature, &bytes)?;
    if cli.json {
        println!("{}", json!({ "ok": true, "command": "sign", "entries": sig.entries.len(), "signature_bytes": bytes.len(), "block_size": block_size }));
    } else {
        println!("signed {} entries, signature {} bytes", sig.entries.len(), bytes.len());
    }
    Ok(())
}

/// Check DIR against SIGNATURE: the damage found is printed, then refused.
fn verify(cli: &Cli, dir: &Path, signature: &Path) -> Result<(), CliError> {
    let bytes = std::fs::read(signature).at_path(signature)?;
    let sig = edgepatch_core::signature::Signature::decode(&bytes).map_err(|e| CliError::core_at(signature, e))?;
    let problems = build_files::verify_path(dir, &sig)?;
    if cli.json {
        let list: Vec<_> = problems.iter().map(|(p, d)| json!({ "path": p, "problem": format!("{d:?}") })).collect();
        println!("{}", json!({ "ok": problems.is_empty(), "command": "verify", "entries": sig.entries.len(), "problems": list }));
    } else if problems.is_empty() {
        println!("verified: {} entries match the signature", sig.entries.len());
    } else {
        for (path, damage) in &problems {
            println!("{}: {}", if path.is_empty() { "(the file)" } else { path }, describe_damage(damage, sig.block_size));
        }
    }
    if problems.is_empty() {
        Ok(())
    } else {
        Err(CliError::refused(Refusal::Damaged, format!("{} entries do not match the signature", problems.len())).at(dir))
    }
}

/// Write a tree patch's manifest, its files' hashes taken from NEW.
fn write_manifest(cli: &Cli, patch: &Path, manifest: &Path, old: &Path, new: &Path, from: &str, to: &str) -> Result<(), CliError> {
    let bytes = std::fs::read(patch).at_path(patch)?;
    let info = edgepatch_core::inspect::inspect_patch(bytes.as_slice()).map_err(|e| CliError::core_at(patch, e))?;
    if info.tree.single_file {
        return Err(CliError::bad_input("manifests describe trees; this patch is for a single file").at(patch));
    }
    let listing = build_files::old_listing(old)?;
    let tree = info.resolve_modes(listing, platform::MODES_KNOWN).map_err(|e| CliError::core_at(old, e))?;
    let mut hashes = vec![[0u8; 32]; tree.entries.len()];
    for (i, e) in tree.entries.iter().enumerate() {
        if let edgepatch_core::patch_format::TreeEntryKind::File { .. } = e.kind {
            let path = new.join(&e.path);
            let mut hasher = edgepatch_core::blake3::Hasher::new();
            hasher.update_reader(std::fs::File::open(&path).at_path(&path)?).at_path(&path)?;
            hashes[i] = *hasher.finalize().as_bytes();
        }
    }
    let m = edgepatch_core::inspect::patch_manifest(&tree, &info.layout, |i| hashes[i], *blake3_of(&bytes).as_bytes(), from, to).map_err(|_| {
        CliError::refused(Refusal::Digest, format!("{}: not the build this patch produces (its files do not match the patch's files digest)", new.display()))
            .at(new)
    })?;
    let encoded = m.encode()?;
    write_atomically(manifest, &encoded)?;
    if cli.json {
        println!("{}", json!({ "ok": true, "command": "manifest", "entries": m.entries.len(), "segments": m.segments.len(), "manifest_bytes": encoded.len() }));
    } else {
        println!("manifest: {} entries, {} segments, {} bytes", m.entries.len(), m.segments.len(), encoded.len());
    }
    Ok(())
}

/// Point a channel on an update server at a build.
fn channel_set(cli: &Cli, server: &str, game: &str, channel: &str, build: &str, allow_insecure_http: bool) -> Result<(), CliError> {
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

/// Write a new signing key to KEYFILE and print its public key.
fn keygen(cli: &Cli, keyfile: &Path) -> Result<(), CliError> {
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

/// Upload a build directory to an update server.
fn publish(cli: &Cli, args: &PublishArgs) -> Result<(), CliError> {
    let PublishArgs { server, game, build, channel, part_size, allow_insecure_http, dir } = args;
    let started = Instant::now();
    let server = server_client::Server::new(server, *allow_insecure_http)?;
    let opts = server_client::PublishOptions { game, build, channel: channel.as_deref(), part_bytes: *part_size };
    let record = server_client::publish(&server, dir, &opts)?;
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

/// Print the rotations from --rotations and the new one, from OLD_KEY to NEW_KEY.
fn key_rotate(old_key: &Path, new_key: &Path, rotations: Option<&Path>) -> Result<(), CliError> {
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

/// Update OLD_DIR into OUT_DIR from an update server, every byte checked against what was signed.
fn update(cli: &Cli, args: &UpdateArgs) -> Result<(), CliError> {
    let UpdateArgs { server, game, from, to, channel, public_key, trust_on_first_use, allow_insecure_http, old_dir, out_dir } = args;
    let started = Instant::now();
    if *trust_on_first_use && *allow_insecure_http {
        return Err(CliError::usage("--trust-on-first-use cannot be used with --allow-insecure-http: over plain http anyone on the network chooses the key that would be pinned; pass the server's key with --public-key (or EDGEPATCH_PUBLIC_KEY)"));
    }
    let server = server_client::Server::new(server, *allow_insecure_http)?;
    let env_key = std::env::var("EDGEPATCH_PUBLIC_KEY").ok();
    let keys = match trusted_keys::parse_key_list(public_key.iter().map(String::as_str), "--public-key")? {
        Some(k) => Some(k),
        None => trusted_keys::parse_key_list(env_key.as_deref(), "EDGEPATCH_PUBLIC_KEY")?,
    };
    let target = match (to, channel) {
        (Some(b), _) => server_client::UpdateTarget::Build(b),
        (None, Some(c)) => server_client::UpdateTarget::Channel(c),
        (None, None) => return Err(CliError::usage("update needs --to BUILD or --channel NAME")),
    };
    let opts = server_client::UpdateOptions { game, from, to: target, keys, trust_on_first_use: *trust_on_first_use };
    let bar = progress_bar(cli, 0, "update");
    let s = server_client::update(&server, old_dir, out_dir, opts, &mut |done, total| {
        bar.set_length(total);
        bar.set_position(done)
    })?;
    bar.finish_and_clear();
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

/// Describe a patch without applying it.
fn inspect(cli: &Cli, patch: &Path) -> Result<(), CliError> {
    let f = File::open(patch).at_path(patch)?;
    let info = edgepatch_core::inspect::inspect_patch(BufReader::new(f)).map_err(|e| CliError::core_at(patch, e))?;
    print_patch_info(cli, &info);
    Ok(())
}

/// An apply's error, naming the file it is about: the old build (OLD), the output (OUT) or
/// the patch.
fn apply_failed(e: edgepatch_core::Error, old: &Path, patch: &Path, out: &Path) -> CliError {
    use edgepatch_core::error::ErrorKind as K;
    let kind = e.kind();
    let e = platform::apply_error(e, old);
    match kind {
        K::Output => e.at(out),
        K::OldBuild | K::Digest | K::Unvouched | K::Invalid => e,
        _ => e.at(patch),
    }
}

fn blake3_of(bytes: &[u8]) -> edgepatch_core::blake3::Hash {
    edgepatch_core::blake3::hash(bytes)
}

/// Creates `path` (refusing to replace one) readable by its owner only.
fn write_secret(path: &Path, text: &str) -> Result<(), CliError> {
    let mut opts = std::fs::OpenOptions::new();
    opts.write(true).create_new(true);
    platform::owner_only(&mut opts);
    let mut f = opts.open(path).at_path(path)?;
    io::Write::write_all(&mut f, text.as_bytes()).and_then(|_| f.sync_all()).at_path(path)
}

/// Reports the new build's paths that are not portable (portable_names.rs): warnings, or
/// with `strict` errors and a refusal.
fn check_portable<'a>(paths: impl Iterator<Item = &'a str>, strict: bool) -> Result<(), CliError> {
    let problems = portable_names::portability_problems(paths.filter(|p| !p.is_empty()));
    for p in &problems {
        eprintln!("edgepatch: {}: new: {p}", if strict { "error" } else { "warning" });
    }
    if strict && !problems.is_empty() {
        return Err(CliError::refused(
            Refusal::NotPortable,
            format!("new: {} path(s) are not portable (see above); rename them or drop --strict-portable", problems.len()),
        ));
    }
    Ok(())
}

/// Writes via a temporary file and rename, so PATCH appears whole or not at all.
fn write_atomically(path: &Path, bytes: &[u8]) -> Result<(), CliError> {
    let name = path.file_name().ok_or_else(|| CliError::usage("patch path has no file name"))?;
    let tmp = path.with_file_name(format!(".{}.edgepatch-tmp-{}", name.to_string_lossy(), std::process::id()));
    std::fs::write(&tmp, bytes).and_then(|_| std::fs::rename(&tmp, path)).map_err(|e| {
        let _ = std::fs::remove_file(&tmp);
        CliError::io(path, e)
    })
}

/// The names of an ops segment's streams stored as raw LZMA (docs/FORMAT.md §2.3).
fn lzma_streams(s: &edgepatch_core::patch_format::SegmentHeader) -> Vec<&'static str> {
    ["control", "diff", "extra"].into_iter().zip(s.lzma).filter(|(_, p)| p.is_some()).map(|(n, _)| n).collect()
}

fn print_patch_info(cli: &Cli, info: &edgepatch_core::inspect::PatchInfo) {
    use edgepatch_core::patch_format::{FileSource, Segment, SegmentHeader, TreeEntryKind, WindowCodec};
    let (mut files, mut copies, mut deltas, mut links, mut dirs) = (0, 0, 0, 0, 0);
    for e in &info.tree.named {
        match &e.kind {
            TreeEntryKind::File { source: FileSource::Copy { .. }, .. } => {
                files += 1;
                copies += 1
            }
            TreeEntryKind::File { .. } => {
                files += 1;
                deltas += 1
            }
            TreeEntryKind::Symlink { .. } => links += 1,
            TreeEntryKind::Directory => dirs += 1,
        }
    }
    let ops_sum = |f: fn(&SegmentHeader) -> u64| info.layout.segments.iter().map(|s| if let Segment::Ops(h) = s { f(h) } else { 0 }).sum::<u64>();
    let (ctrl, diff, extra) = (ops_sum(|s| s.ctrl_comp), ops_sum(|s| s.diff_comp), ops_sum(|s| s.extra_comp));
    let window: u64 = info.layout.segments.iter().map(|s| if let Segment::Window(w) = s { w.comp_len } else { 0 }).sum();
    let lzma_windows = info.layout.segments.iter().filter(|s| matches!(s, Segment::Window(w) if w.codec != WindowCodec::Zstd)).count();
    let lzma_ops = info.layout.segments.iter().filter(|s| matches!(s, Segment::Ops(h) if h.lzma.iter().any(Option::is_some))).count();
    if cli.json {
        let segments: Vec<_> = info
            .layout
            .segments
            .iter()
            .map(|s| match s {
                Segment::Ops(s) => json!({ "kind": "ops", "new_bytes": s.new_len, "control": [s.ctrl_raw, s.ctrl_comp],
                "diff": [s.diff_raw, s.diff_comp], "extra": [s.extra_raw, s.extra_comp],
                "lzma": lzma_streams(s) }),
                Segment::Window(w) => json!({ "kind": "window", "new_bytes": w.new_len, "window_bytes": w.window_len(),
                "spans": w.spans.len(), "compressed": w.comp_len, "codec": if w.codec == WindowCodec::Zstd { "zstd" } else { "lzma" } }),
            })
            .collect();
        println!(
            "{}",
            json!({ "ok": true, "format_version": info.version, "single_file": info.tree.single_file, "patch_bytes": info.layout.patch_bytes,
            "kept": info.tree.kept(), "files": files, "copied": copies, "delta_files": deltas, "symlinks": links, "directories": dirs,
            "old_files": info.tree.old_table.len(), "reference_files": info.tree.old_table.iter().filter(|f| f.1).count(), "delta_bytes": info.tree.delta_bytes(),
            "wasm_transformed": info.tree.transforms.len(), "wasm_side_info_bytes": info.tree.transforms.iter().map(|t| t.side_info.len()).sum::<usize>(),
            "window_reach": info.tree.window_back(), "window_reach_declared": info.tree.window_reach.is_some(),
            "compressed": { "control": ctrl, "diff": diff, "extra": extra, "window": window }, "segments": segments })
        );
    } else {
        println!("edgepatch patch, format version {}, {} bytes, checksum OK", info.version, info.layout.patch_bytes);
        if !info.tree.single_file {
            println!("tree: {} entries of the old build kept as they are (not named)", info.tree.kept());
        }
        println!(
            "{}: {files} files ({copies} copied from old, {deltas} from the delta stream), {links} symlinks, {dirs} directories",
            if info.tree.single_file { "single file" } else { "named" }
        );
        println!(
            "reads {} old files, {} of them as reference data for the delta",
            info.tree.old_table.len(),
            info.tree.old_table.iter().filter(|f| f.1).count()
        );
        println!(
            "delta stream: {} bytes in {} segments; compressed control {ctrl}, diff {diff}, extra {extra}, window segments {window} bytes",
            info.tree.delta_bytes(),
            info.layout.segments.len()
        );
        if lzma_windows + lzma_ops > 0 {
            println!("LZMA segments (docs/FORMAT.md §2.3, §2.6): {lzma_windows} window segments, {lzma_ops} ops segments with LZMA streams");
        }
        // What an applier keeps of the produced delta bytes (docs/FORMAT.md §2.6).
        match info.tree.window_reach {
            Some(reach) => println!("window segments reach back {reach} bytes (declared; an applier keeps that much of the delta stream)"),
            None => println!("window segments reach back at most {} bytes (the base reach)", info.tree.window_back()),
        }
        if !info.tree.transforms.is_empty() {
            println!(
                "wasm modules stored normalized: {}, {} of them in the field-split layout, {} with DWARF addresses rewritten (side info {} bytes before compression; docs/FORMAT.md §2.8)",
                info.tree.transforms.len(),
                info.tree.transforms.iter().filter(|t| edgepatch_core::wasm_transform::side_info_has_code_layout(&t.side_info)).count(),
                info.tree.transforms.iter().filter(|t| edgepatch_core::wasm_transform::side_info_has_dwarf_addresses(&t.side_info)).count(),
                info.tree.transforms.iter().map(|t| t.side_info.len()).sum::<usize>()
            );
        }
    }
}

fn describe_damage(d: &edgepatch_core::signature::Damage, block_size: u32) -> String {
    use edgepatch_core::signature::Damage;
    match d {
        Damage::Missing => "missing".into(),
        Damage::WrongKind => "wrong kind (file, symlink or directory)".into(),
        Damage::WrongMode => "wrong executable bit".into(),
        Damage::WrongSize { expected, actual } => format!("size {actual}, expected {expected}"),
        Damage::DamagedBlocks(blocks) => {
            let shown: Vec<String> = blocks.iter().take(20).map(|b| b.to_string()).collect();
            format!("content damaged in {} block(s) of {block_size} bytes: {}{}", blocks.len(), shown.join(", "), if blocks.len() > 20 { ", ..." } else { "" })
        }
        Damage::WrongTarget => "symlink points elsewhere".into(),
        Damage::Unexpected => "not in the signature".into(),
    }
}
