// Starts `wrangler dev` (worker/scripts/dev.sh) on a loopback port with fresh local state,
// for the cross-component test (tests/worker-cli) and the load benchmark (bench/load).
import { spawn } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

export const REPO = join(dirname(fileURLToPath(import.meta.url)), "..", "..");

/** The development secrets every local run uses (.dev.vars.example), and the documented public key. */
export function devVars() {
  const text = readFileSync(join(REPO, ".dev.vars.example"), "utf8");
  const get = (k) => new RegExp(`^${k}=(.*)$`, "m").exec(text)?.[1]?.trim();
  return { token: get("EDGEPATCH_TOKEN"), publicKey: /public key[^\n]*\n#\s*([A-Za-z0-9+/=]{44})/.exec(text)?.[1] };
}

/**
 * Starts the Worker locally on 127.0.0.1:`port` and resolves once /v1/health answers;
 * `args` go to wrangler (e.g. ["--inspector-port", "9301"]). `state`: a directory for the local
 * state that outlives this server (kept by stop(); bench/fanout.mjs restarts on the same builds),
 * instead of a fresh temporary one.
 * Returns { url, pid, stop(), log() }; pid is the process group's leader, and stop() ends that group.
 */
export async function startWrangler({ port = 8791, timeoutMs = 90_000, args = [], state: keep = null } = {}) {
  const state = keep ?? mkdtempSync(join(tmpdir(), "edgepatch-wrangler-"));
  let output = "";
  const child = spawn(join(REPO, "worker/scripts/dev.sh"), ["--persist-to", state, "--log-level", "warn", ...args], {
    cwd: REPO,
    env: { ...process.env, EDGEPATCH_PORT: String(port), CI: "true" },
    detached: true,
    stdio: ["ignore", "pipe", "pipe"],
  });
  child.stdout.on("data", (d) => (output += d));
  child.stderr.on("data", (d) => (output += d));
  let exited = false;
  child.on("exit", () => (exited = true));
  const url = `http://127.0.0.1:${port}`;
  const stop = () => {
    if (!exited) {
      try {
        process.kill(-child.pid, "SIGTERM");
      } catch {}
    }
    if (keep === null) rmSync(state, { recursive: true, force: true });
  };
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    if (exited) throw new Error(`wrangler dev exited:\n${output}`);
    try {
      const res = await fetch(`${url}/v1/health`);
      if (res.ok) return { url, pid: child.pid, stop, log: () => output };
    } catch {}
    await new Promise((r) => setTimeout(r, 250));
  }
  stop();
  throw new Error(`wrangler dev did not answer on ${url} within ${timeoutMs} ms:\n${output}`);
}
