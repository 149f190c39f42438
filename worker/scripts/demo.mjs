#!/usr/bin/env node
// worker/scripts/demo.mjs OLD_DIR NEW_DIR — the Worker part of the README's main command:
// starts `wrangler dev` (fresh local R2/DO/cache state, development secrets from
// .dev.vars.example), publishes the two builds with `edgepatch publish`, turns a copy of
// the old one into the new one with `edgepatch update` (the Worker generates the patch when
// the channel moves, or on the first request, signs its update statement and caches it), checks the result byte-exact against NEW_DIR,
// prints what it saved, and stops the Worker.
import { execFileSync } from "node:child_process";
import { mkdtempSync, readFileSync, readdirSync, rmSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, relative } from "node:path";
import { REPO, devVars, startWrangler } from "./wrangler-dev.mjs";

const [oldDir, newDir] = process.argv.slice(2);
if (!oldDir || !newDir) {
  console.error("usage: worker/scripts/demo.mjs OLD_DIR NEW_DIR");
  process.exit(2);
}
const bin = process.env.EDGEPATCH_BIN || join(REPO, "target/release/edgepatch");
const { token, publicKey } = devVars();
const port = Number(process.env.EDGEPATCH_DEMO_WORKER_PORT || 8792);
const work = mkdtempSync(join(tmpdir(), "edgepatch-worker-demo-"));
const worker = await startWrangler({ port });
const run = (args, env = {}) => execFileSync(bin, args, { env: { ...process.env, ...env }, encoding: "utf8", stdio: ["ignore", "pipe", "inherit"] });

function files(dir, base = dir, out = new Map()) {
  for (const e of readdirSync(dir, { withFileTypes: true })) {
    const p = join(dir, e.name);
    if (e.isDirectory()) files(p, base, out);
    else if (e.isFile()) out.set(relative(base, p), readFileSync(p));
  }
  return out;
}

try {
  console.log(`== Worker on ${worker.url} (wrangler dev, local R2/DO/cache)`);
  for (const [build, dir] of [["v1", oldDir], ["v2", newDir]]) {
    process.stdout.write(run(["publish", "--server", worker.url, "--game", "demo", "--build", build, "--channel", "stable", dir], { EDGEPATCH_TOKEN: token }));
  }
  const out = join(work, "updated");
  console.log("== edgepatch update v1 -> v2 through the Worker (pre-generated when the channel moved, signature checked)");
  process.stdout.write(run(["update", "--server", worker.url, "--game", "demo", "--from", "v1", "--to", "v2", "--public-key", publicKey, oldDir, out]));
  const [want, got] = [files(newDir), files(out)];
  const same = want.size === got.size && [...want].every(([p, d]) => got.has(p) && Buffer.compare(d, got.get(p)) === 0);
  if (!same) throw new Error("the updated build differs from v2");
  const descriptor = await (await fetch(`${worker.url}/v1/games/demo/updates/v1/v2`)).json();
  const total = [...want.values()].reduce((n, d) => n + d.length, 0);
  console.log(`== byte-exact; downloaded a ${descriptor.patchSize.toLocaleString("en")}-byte patch instead of ${total.toLocaleString("en")} bytes of files: saved ${(100 * (1 - descriptor.patchSize / total)).toFixed(1)}%`);
} finally {
  worker.stop();
  rmSync(work, { recursive: true, force: true });
}
