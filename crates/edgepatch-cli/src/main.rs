//! `edgepatch`: the command line over edgepatch-core. This file is the glue: argument
//! parsing and dispatch. Each subcommand is in commands/ (its work, progress bar and
//! summary), the file adapters in build_files.rs.

mod bounded_diff;
#[cfg(unix)]
mod build_dir;
#[cfg(windows)]
#[path = "build_dir_windows.rs"]
mod build_dir;
mod build_files;
mod cli_error;
mod commands;
mod install_repair;
mod large_file_writer;
mod platform;
mod portable_names;
mod progress;
mod server_client;
mod staged_output;
mod static_site;
mod timing;
mod trusted_keys;
mod unchanged_copies;

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Args, Parser, Subcommand};

use cli_error::CliError;
use commands::{apply, channel, diff, heal, inspect, key, keygen, manifest, publish, sign, site, update, verify};
use edgepatch_core::Capabilities;

#[derive(Parser)]
#[command(name = "edgepatch", version, about = "Block-hashed, zstd-compressed patches for game builds", after_help = EXIT_CODES_HELP)]
struct Cli {
    /// Print a machine-readable JSON summary instead of text.
    #[arg(long, global = true)]
    json: bool,
    /// No progress output (a bar on a terminal, lines elsewhere).
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
    Apply {
        old: PathBuf,
        patch: PathBuf,
        out: PathBuf,
        /// PATCH is one you made (or got over a channel you trust): rebuild its gzip/zlib/Brotli files
        /// from preflate's side infos, which a hostile patch could make run without end. A patch
        /// that needs them is refused without this; `update` trusts what a signed manifest vouches for.
        /// PATCH's checksum is checked first, so a damaged copy is refused before any of it is used.
        #[arg(long)]
        trust_patch: bool,
    },
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
    /// Check an installed build DIR (as `update` from `_` left it) against the signed
    /// manifest of its install and repair only its damaged entries (wrong content, size or
    /// mode, missing) from the update server, under the same trust rules as `update`.
    Heal(HealArgs),
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
    /// What the patch's readers understand (docs/FORMAT.md §5): a list of capability names,
    /// or `current`, `v0.1`, `baseline`, `current,-lzma-segments`. No feature outside it is
    /// used, so an older client can apply the patch.
    #[arg(long, default_value = "current", value_parser = parse_reader)]
    reader: Capabilities,
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

// `heal`'s arguments.
#[derive(Args)]
struct HealArgs {
    #[arg(long)]
    server: String,
    #[arg(long)]
    game: String,
    /// The build DIR is an install of.
    #[arg(long)]
    build: String,
    /// base64 ed25519 public key the install must be signed with (as `update`'s; default:
    /// EDGEPATCH_PUBLIC_KEY, else the keys pinned for the server).
    #[arg(long)]
    public_key: Vec<String>,
    /// Allow plain http to a server that is not this machine.
    #[arg(long)]
    allow_insecure_http: bool,
    /// Only report what is damaged (exit 4, code `damaged`, when anything is); fetch no patch.
    #[arg(long)]
    dry_run: bool,
    dir: PathBuf,
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
    /// Pairs the site already has, signed and checked, are kept; adding a published build
    /// again with the same content makes only what is missing.
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
        /// What the site's clients understand (docs/FORMAT.md §5; a static site cannot ask
        /// them): patches use nothing outside it. Default: every reader of release 0.1.
        #[arg(long, default_value = "v0.1", value_parser = parse_reader)]
        reader: Capabilities,
        /// Store the game's `.gz` and `.br` files decoded: clients keep, and their Service
        /// Worker answers those URLs with, the decoded content, and patches are made between
        /// decoded builds (as small as for the uncompressed build). Set on a game's first
        /// build; later builds of the game follow it.
        #[arg(long)]
        store_decoded: bool,
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

/// A `--reader` list (docs/FORMAT.md §5).
fn parse_reader(list: &str) -> Result<Capabilities, String> {
    Capabilities::parse_list(list).map_err(|e| e.to_string())
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

fn run(cli: &Cli) -> Result<(), CliError> {
    match &cli.command {
        Command::Diff(args) => diff::run(cli, args),
        Command::Apply { old, patch, out, trust_patch } => apply::run(cli, old, patch, out, *trust_patch),
        Command::Sign { dir, signature, block_size } => sign::run(cli, dir, signature, *block_size),
        Command::Verify { dir, signature } => verify::run(cli, dir, signature),
        Command::Manifest { patch, manifest, old, new, from, to } => manifest::run(cli, patch, manifest, old, new, from, to),
        Command::Site { command } => site::run(cli, command),
        Command::Channel { command: ChannelCommand::Set { server, game, channel, build, allow_insecure_http } } => {
            channel::set(cli, server, game, channel, build, *allow_insecure_http)
        }
        Command::Keygen { keyfile } => keygen::run(cli, keyfile),
        Command::Publish(args) => publish::run(cli, args),
        Command::Key { command: KeyCommand::Rotate { old_key, new_key, rotations } } => key::rotate(old_key, new_key, rotations.as_deref()),
        Command::Update(args) => update::run(cli, args),
        Command::Heal(args) => heal::run(cli, args),
        Command::Inspect { patch } => inspect::run(cli, patch),
    }
}
