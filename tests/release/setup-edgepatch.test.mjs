// The release path end to end, offline: scripts/release.sh packs the static Linux CLI, a local
// HTTP server stands in for the GitHub release, and the setup-edgepatch action's install.sh
// installs it by version and as `latest`, and refuses an archive whose SHA-256 is not the one
// SHA256SUMS lists.
//   node --test tests/release/setup-edgepatch.test.mjs
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { createReadStream, existsSync, mkdtempSync, readFileSync, readdirSync, rmSync, cpSync, writeFileSync } from "node:fs";
import { createServer } from "node:http";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";

const run = promisify(execFile);
const repo = join(dirname(fileURLToPath(import.meta.url)), "../..");
const installSh = join(repo, ".github/actions/setup-edgepatch/install.sh");
const target = "x86_64-unknown-linux-musl";
const version = readFileSync(join(repo, "Cargo.toml"), "utf8").match(/\[workspace\.package\][^[]*?\nversion = "([^"]+)"/)[1];

const tmp = mkdtempSync(join(tmpdir(), "edgepatch-release-"));
const release = join(tmp, "release");
const tampered = join(tmp, "tampered");
/** Requests the server answered, by path. */
const requests = [];
let server;
let baseUrl;

before(async () => {
  // scripts/test.sh made the release already (EDGEPATCH_RELEASE_DIR); run alone, this makes one.
  const made = process.env.EDGEPATCH_RELEASE_DIR;
  if (made && existsSync(join(made, `edgepatch-${version}-${target}.tar.gz`))) cpSync(made, release, { recursive: true });
  else await run("bash", [join(repo, "scripts/release.sh"), target], { env: { ...process.env, RELEASE_DIR: release }, maxBuffer: 64 << 20 });
  // The same release with one byte of the archive changed and SHA256SUMS as it was.
  cpSync(release, tampered, { recursive: true });
  const archive = join(tampered, `edgepatch-${version}-${target}.tar.gz`);
  const bytes = readFileSync(archive);
  bytes[bytes.length >> 1] ^= 0x01;
  writeFileSync(archive, bytes);
  // /release/<file> and /tampered/<file>, as a release's download URLs serve them.
  server = createServer((req, res) => {
    requests.push(req.url);
    const [, dir, file] = req.url.split("/");
    const path = join(tmp, dir ?? "", file ?? "");
    if (!["release", "tampered"].includes(dir) || !file || file.includes("..") || !existsSync(path)) {
      res.writeHead(404).end();
      return;
    }
    res.writeHead(200, { "Content-Type": "application/octet-stream" });
    createReadStream(path).pipe(res);
  });
  await new Promise((resolve) => server.listen(0, "127.0.0.1", resolve));
  baseUrl = `http://127.0.0.1:${server.address().port}`;
});

after(() => {
  server?.close();
  rmSync(tmp, { recursive: true, force: true });
});

/** Runs install.sh as the action does; resolves to { code, stdout, stderr, dir, githubPath, githubOutput }. */
async function install(name, env) {
  const dir = join(tmp, `install-${name}`);
  const githubPath = join(tmp, `GITHUB_PATH-${name}`);
  const githubOutput = join(tmp, `GITHUB_OUTPUT-${name}`);
  writeFileSync(githubPath, "");
  writeFileSync(githubOutput, "");
  const e = { ...process.env, EDGEPATCH_INSTALL_DIR: dir, GITHUB_PATH: githubPath, GITHUB_OUTPUT: githubOutput, ...env };
  try {
    const { stdout, stderr } = await run("sh", [installSh], { env: e });
    return { code: 0, stdout, stderr, dir, githubPath, githubOutput };
  } catch (err) {
    return { code: err.code, stdout: err.stdout, stderr: err.stderr, dir, githubPath, githubOutput };
  }
}

test("release.sh packs the static Linux CLI and lists it in SHA256SUMS", () => {
  const name = `edgepatch-${version}-${target}.tar.gz`;
  // The archive, and the npm tarballs when the release packed them too; SHA256SUMS lists each.
  const files = readdirSync(release).sort();
  assert.deepEqual(files.filter((f) => !/^edgepatch-(web|js)-.*\.tgz$/.test(f)), ["SHA256SUMS", name]);
  const sums = readFileSync(join(release, "SHA256SUMS"), "utf8");
  for (const f of files.filter((f) => f !== "SHA256SUMS")) assert.match(sums, new RegExp(`^[0-9a-f]{64}  ${f.replaceAll(".", "\\.")}$`, "m"));
});

for (const asked of [version, `v${version}`, "latest"]) {
  test(`install.sh installs version ${asked} from the release URL and puts it on PATH`, async () => {
    const r = await install(asked, { EDGEPATCH_RELEASE_URL: `${baseUrl}/release/`, EDGEPATCH_VERSION: asked, EDGEPATCH_TARGET: target });
    assert.equal(r.code, 0, r.stderr);
    assert.equal(r.stdout.trim(), r.dir);
    assert.equal(readFileSync(r.githubPath, "utf8"), `${r.dir}\n`);
    assert.equal(readFileSync(r.githubOutput, "utf8"), `version=${version}\npath=${r.dir}\n`);
    const { stdout } = await run(join(r.dir, "edgepatch"), ["--version"]);
    assert.match(stdout, new RegExp(`^edgepatch ${version.replaceAll(".", "\\.")}\\b`));
  });
}

test("install.sh picks this machine's target when none is named", async () => {
  const r = await install("default-target", { EDGEPATCH_RELEASE_URL: `${baseUrl}/release`, EDGEPATCH_VERSION: "latest", EDGEPATCH_TARGET: "" });
  if (process.arch !== "x64") return; // the release here holds only the x86_64 archive
  assert.equal(r.code, 0, r.stderr);
  await run(join(r.dir, "edgepatch"), ["--version"]);
});

test("install.sh refuses an archive whose SHA-256 differs from SHA256SUMS, and installs nothing", async () => {
  const before = requests.length;
  const r = await install("tampered", { EDGEPATCH_RELEASE_URL: `${baseUrl}/tampered`, EDGEPATCH_VERSION: version, EDGEPATCH_TARGET: target });
  assert.notEqual(r.code, 0);
  assert.match(r.stderr, /SHA-256 [0-9a-f]{64}, but SHA256SUMS says [0-9a-f]{64}; refusing to install it/);
  assert.ok(!existsSync(join(r.dir, "edgepatch")), "no binary installed");
  assert.equal(readFileSync(r.githubPath, "utf8"), "", "nothing added to PATH");
  // It did fetch the archive: the refusal is the checksum's, not a missing file's.
  assert.ok(requests.slice(before).includes(`/tampered/edgepatch-${version}-${target}.tar.gz`));
});

test("install.sh fails clearly for a version or target the release does not hold", async () => {
  const wrongVersion = await install("wrong-version", { EDGEPATCH_RELEASE_URL: `${baseUrl}/release`, EDGEPATCH_VERSION: "9.9.9", EDGEPATCH_TARGET: target });
  assert.notEqual(wrongVersion.code, 0);
  assert.match(wrongVersion.stderr, /SHA256SUMS lists no edgepatch-9\.9\.9-x86_64-unknown-linux-musl\.tar\.gz/);
  const wrongTarget = await install("wrong-target", { EDGEPATCH_RELEASE_URL: `${baseUrl}/release`, EDGEPATCH_VERSION: "latest", EDGEPATCH_TARGET: "riscv64gc-unknown-linux-musl" });
  assert.notEqual(wrongTarget.code, 0);
  assert.match(wrongTarget.stderr, /lists no archive for riscv64gc-unknown-linux-musl/);
  const noRelease = await install("no-release", { EDGEPATCH_RELEASE_URL: `${baseUrl}/missing`, EDGEPATCH_VERSION: "latest", EDGEPATCH_TARGET: target });
  assert.notEqual(noRelease.code, 0);
  assert.match(noRelease.stderr, /could not download .*\/missing\/SHA256SUMS/);
});

test("action.yml passes every input to both install scripts under the names they read", () => {
  const dir = join(repo, ".github/actions/setup-edgepatch");
  const action = readFileSync(join(dir, "action.yml"), "utf8");
  const names = [...new Set([...action.matchAll(/^\s+(EDGEPATCH_[A-Z_]+):/gm)].map((m) => m[1]))].sort();
  assert.deepEqual(names, ["EDGEPATCH_RELEASE_URL", "EDGEPATCH_REPOSITORY", "EDGEPATCH_TARGET", "EDGEPATCH_VERSION"]);
  for (const script of ["install.sh", "install.ps1"]) {
    const text = readFileSync(join(dir, script), "utf8");
    for (const n of names) assert.ok(text.includes(script.endsWith(".sh") ? n : `$env:${n}`), `${script} reads ${n}`);
  }
  for (const input of ["version", "repository", "release-url", "target"]) assert.match(action, new RegExp(`inputs\\.${input}\\b`), `input ${input} is used`);
  assert.match(action, /sh "\$GITHUB_ACTION_PATH\/install\.sh"/);
  assert.match(action, /install\.ps1/);
});
