// Reader capabilities (docs/FORMAT.md §5) in workerd: the Worker writes every patch for its
// READER_FLOOR, records in the descriptor what the patch needs, and answers a client that
// names a smaller set with 406 and both sets' names instead of a patch it cannot apply.
// A client that names nothing is taken for the floor's reader; a malformed set is a 400.
import { env, SELF } from "cloudflare:test";
import { beforeAll, describe, expect, it } from "vitest";
import { capabilityNames, initWasm, patchNeeds, readerCapabilities, readerCovers, readerFromList } from "../src/wasm";
import { settings } from "../src/settings";
import { keys } from "../src/store";
import { apply, auth, BASE, expectSameFiles, publishInParts, servedPatch, type Files } from "./generation";
import { bytes } from "./tar";
import { moduleVersions } from "./wasm_modules";

/** A game whose engine (game.wasm) gains functions near its start: the patch stores it transformed. */
function builds(): Files[] {
  const [a, b] = moduleVersions(3000, 20);
  const data = bytes(200_000, 9);
  const changed = data.slice();
  for (let i = 100; i < changed.length; i += 997) changed[i] ^= 1;
  return [
    new Map([
      ["game.wasm", a],
      ["data.bin", data],
    ]),
    new Map([
      ["game.wasm", b],
      ["data.bin", changed],
    ]),
  ];
}

const descriptorUrl = (game: string, reader?: string) => `${BASE}/v1/games/${game}/updates/v1/v2${reader === undefined ? "" : `?reader=${reader}`}`;

describe("reader capabilities", () => {
  beforeAll(() => initWasm());

  it("writes for the floor, records what the patch needs, and the patch needs exactly that", async () => {
    const [v1, v2] = builds();
    await publishInParts("caps", "v1", v1);
    await publishInParts("caps", "v2", v2);
    const res = await SELF.fetch(descriptorUrl("caps", readerCapabilities()), { headers: auth });
    expect(res.status, await res.clone().text()).toBe(200);
    const d = (await res.json()) as { readerNeeds?: string };
    const floor = settings(env).readerFloor;
    expect(d.readerNeeds, "the descriptor records what its patch needs").toBeDefined();
    expect(readerCovers(floor, d.readerNeeds!), `needs ${capabilityNames(d.readerNeeds!)} within the floor ${capabilityNames(floor)}`).toBe(true);
    expect(d.readerNeeds, "the re-emitted module is stored transformed: the pair needs more than the baseline").not.toBe("0");
    const patch = await servedPatch("caps", "v1", "v2");
    expect(patchNeeds(patch)).toBe(d.readerNeeds);
    expectSameFiles(apply(v1, patch), v2);
  });

  it("answers a reader that lacks what the patch needs with 406 naming both, and never the patch", async () => {
    const res = await SELF.fetch(descriptorUrl("caps", "0"), { headers: auth });
    expect(res.status).toBe(406);
    const body = await res.text();
    expect(body).toContain("wasm-transform");
    expect(body).toContain("baseline");
    expect(body).not.toContain("patchUrl");
    // The refusal is not cached in place of the descriptor for other readers.
    expect((await SELF.fetch(descriptorUrl("caps", readerCapabilities()), { headers: auth })).status).toBe(200);
  });

  it("serves a reader that covers the needs though it knows less than this build (yesterday's client)", async () => {
    const d = (await (await SELF.fetch(descriptorUrl("caps", readerCapabilities()), { headers: auth })).json()) as { readerNeeds: string };
    // Yesterday's client: exactly what the patch needs, nothing more (here fewer capabilities than this build's).
    const res = await SELF.fetch(descriptorUrl("caps", d.readerNeeds), { headers: auth });
    expect(res.status, await res.clone().text()).toBe(200);
    // A newer client's unknown bits are dropped: it reads everything this build writes.
    const newer = await SELF.fetch(descriptorUrl("caps", "ffffffffffff"), { headers: auth });
    expect(newer.status).toBe(200);
    await newer.arrayBuffer();
    // No reader named: taken for the floor's.
    const unnamed = await SELF.fetch(descriptorUrl("caps"), { headers: auth });
    expect(unnamed.status).toBe(200);
    await unnamed.arrayBuffer();
  });

  it("refuses a malformed reader set with 400", async () => {
    for (const bad of ["", "xyz", "12345678901234567", "-1"]) {
      const res = await SELF.fetch(descriptorUrl("caps", encodeURIComponent(bad)), { headers: auth });
      expect(res.status, bad).toBe(400);
      await res.arrayBuffer();
    }
  });

  it("answers an error, never the descriptor, when the bucket's descriptor has a malformed readerNeeds", async () => {
    const key = keys.descriptor("caps", "v1", "v2");
    const stored = await env.BUCKET.get(key);
    const good = await stored!.text();
    await env.BUCKET.put(key, JSON.stringify({ ...JSON.parse(good), readerNeeds: "not hex" }));
    try {
      // A reader not asked for above: no cached answer stands in front of the bucket.
      const res = await SELF.fetch(descriptorUrl("caps", readerFromList("current,-wasm-dwarf-addresses")), { headers: auth });
      const body = await res.text();
      expect(res.status, body).toBe(500);
      expect(body).not.toContain("patchUrl");
    } finally {
      await env.BUCKET.put(key, good);
    }
  });

  it("reads READER_FLOOR as a list of names, v0.1 by default", () => {
    expect(settings(env).readerFloor).toBe(readerFromList("v0.1"));
    expect(readerFromList("current,-lzma-segments")).not.toBe(readerFromList("current"));
    expect(() => readerFromList("lzma")).toThrow(/lzma-segments/);
  });
});
