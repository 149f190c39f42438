// A text tree fanned out (worker/README.md, "Generation fanned out"): its patch declares the
// 8 MiB text reach (docs/FORMAT.md §2.6), so the step that starts at segment 3 reads segments 1
// and 2 as its history (`historyRanges`), and the file in segment 3 is found in the far half of
// that history. The patch the steps make applies byte-exact with the core's applier.
import { SELF } from "cloudflare:test";
import { beforeAll, describe, expect, it } from "vitest";
import { initWasm, ManifestReader } from "../src/wasm";
import { apply, auth, BASE, expectSameFiles, generations, publishInParts, servedPatch, until, type Files } from "./generation";

/** About `n` bytes of JavaScript-like lines, each naming something of its own (no line repeats). */
function jsText(n: number, seed: number): Uint8Array {
  const words = ["const", "let", "return", "function", "value", "node", "update", "=", "+", "(", ")", "{", "}", ";", "if", "null"];
  let x = seed >>> 0 || 1;
  const next = (): number => {
    x ^= x << 13;
    x >>>= 0;
    x ^= x >>> 17;
    x ^= x << 5;
    x >>>= 0;
    return x;
  };
  const lines: string[] = [];
  let size = 0;
  while (size < n) {
    let line = `${"\t".repeat(next() % 3)}n${next() % 10_000_000} =`;
    for (let k = 3 + (next() % 8); k > 0; k--) line += ` ${words[next() % words.length]}${next() % 4 === 0 ? String(next() % 1000) : ""}`;
    lines.push(line);
    size += line.length + 1;
  }
  return new TextEncoder().encode(lines.join("\n") + "\n").slice(0, n);
}

/** v2's delta stream (files in path order): a.js [0, 4 MiB), b.js [4, 8), c.js [8, 12), all
 * new text, then d.js [12, 13): b.js's first MiB lightly edited. Segment 3 (d.js) finds its
 * source 5-8 MiB back, in no old file; with 3 segments a step, it is step 1's only segment. */
function builds(): { v1: Files; v2: Files } {
  const b = jsText(4 << 20, 12);
  const d = b.slice(0, 1 << 20);
  for (let i = 777; i < d.length; i += 4096) d[i] = 0x41 + (i % 26);
  return {
    v1: new Map([
      ["a.js", jsText(1 << 20, 1)],
      ["b.js", jsText(1 << 20, 2)],
    ]),
    v2: new Map([
      ["a.js", jsText(4 << 20, 11)],
      ["b.js", b],
      ["c.js", jsText(4 << 20, 13)],
      ["d.js", d],
    ]),
  };
}

describe("a text tree fanned out", () => {
  const { v1, v2 } = builds();
  beforeAll(() => initWasm());

  it("declares the 8 MiB reach, steps read two segments of history, and the patch applies byte-exact", async () => {
    await publishInParts("fantext", "v1", v1);
    await publishInParts("fantext", "v2", v2);
    const first = await SELF.fetch(`${BASE}/v1/games/fantext/updates/v1/v2`, { headers: auth });
    expect(first.status).toBe(503);
    await first.arrayBuffer();
    const log = await until("v1 -> v2 assembled", async () => (await generations("fantext", "v1", "v2")).runs[0], 110);
    expect(log).toMatchObject({ steps: 2, segments: 4, stepFailures: 0 });
    const patch = await servedPatch("fantext", "v1", "v2", 4);
    // Header: magic (8 bytes), version (u16), flags (u16 LE); bit 2 declares a window reach.
    expect(new TextDecoder().decode(patch.subarray(0, 8))).toBe("EDGEPTCH");
    expect((patch[10] | (patch[11] << 8)) & 4).toBe(4);
    expectSameFiles(apply(v1, patch), v2);
    // Segment 3 (d.js's 1 MiB) is a few KiB: its source was found in the far history. Without
    // it (4 MiB back: c.js only) the segment is new text compressed, hundreds of KiB.
    const d = (await (await SELF.fetch(`${BASE}/v1/games/fantext/updates/v1/v2`, { headers: auth })).json()) as { manifestUrl: string };
    const url = new URL(d.manifestUrl, `${BASE}/v1/games/fantext/updates/v1/v2`);
    const manifest = new ManifestReader(new Uint8Array(await (await SELF.fetch(url, { headers: auth })).arrayBuffer()));
    const segments = manifest.segments();
    manifest.free();
    expect(segments[3].newLen).toBe(1 << 20);
    expect(segments[3].patchLen).toBeLessThan(64 << 10);
  });
});
