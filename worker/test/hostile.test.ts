// The shared hostile vectors (fixtures/hostile/vectors.json) in workerd, through the same wasm
// module the Worker generates with: every patch is refused by the applier and every manifest
// by the reader, with a one-line JS Error, no trap, and the module still usable afterwards.
import { env } from "cloudflare:test";
import { describe, expect, it } from "vitest";
import { initWasm, ManifestReader, PatchApplier } from "../src/wasm";

interface Vector {
  name: string;
  input: "patch" | "manifest";
  kind: string;
  base64: string;
}

const vectors: Vector[] = JSON.parse(env.HOSTILE_VECTORS);
const bytesOf = (b64: string) => Uint8Array.from(atob(b64), (c) => c.charCodeAt(0));

/** The empty old tree every hostile patch is made against, and a sink that keeps nothing. */
const emptyOld = { fileSize: () => 0, readAt: () => new Uint8Array(0), listing: () => [] };
const nullSink = { createDirectory() {}, createSymlink() {}, beginFile() {}, writeFile() {}, finishFile() {} };

function applyError(bytes: Uint8Array): unknown {
  try {
    const a = new PatchApplier(emptyOld, nullSink);
    for (let at = 0; at < bytes.length; at += 4096) a.push(bytes.subarray(at, at + 4096));
    a.finish();
  } catch (e) {
    return e;
  }
  return null;
}

describe("hostile vectors (fixtures/hostile) in workerd", () => {
  it("has the committed vectors", () => {
    expect(vectors.length).toBeGreaterThanOrEqual(20);
    expect(new Set(vectors.map((v) => v.input))).toEqual(new Set(["patch", "manifest"]));
  });

  it.each(vectors.map((v) => [v.name, v] as const))("%s is refused with a one-line error", (_name, v) => {
    initWasm();
    const bytes = bytesOf(v.base64);
    let err: unknown = null;
    if (v.input === "patch") {
      err = applyError(bytes);
    } else {
      try {
        new ManifestReader(bytes);
      } catch (e) {
        err = e;
      }
    }
    expect(err, `${v.name} (${v.kind}) was accepted`).toBeInstanceOf(Error);
    const message = (err as Error).message;
    expect(message.length).toBeGreaterThan(0);
    expect(message).not.toContain("\n");
    expect(message).not.toMatch(/unreachable|RuntimeError/);
  });
});
