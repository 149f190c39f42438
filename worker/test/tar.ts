// A minimal tar writer for the tests: well-formed archives of chosen entries, and the
// hostile ones (traversal, absolute paths, escaping links, hard links, bad checksums).

export type TarEntry =
  | { type: "file"; path: string; data: Uint8Array | string; mode?: number }
  | { type: "dir"; path: string }
  | { type: "symlink"; path: string; target: string }
  | { type: "hardlink"; path: string; target: string }
  | { type: "fifo"; path: string };

const enc = new TextEncoder();

function field(h: Uint8Array, offset: number, length: number, value: string): void {
  const bytes = enc.encode(value);
  if (bytes.length > length) throw new Error(`tar field too long: ${value}`);
  h.set(bytes, offset);
}

function octal(h: Uint8Array, offset: number, length: number, n: number): void {
  field(h, offset, length, n.toString(8).padStart(length - 1, "0") + "\0");
}

function header(name: string, type: string, size: number, mode: number, link = ""): Uint8Array {
  const h = new Uint8Array(512);
  field(h, 0, 100, name);
  octal(h, 100, 8, mode);
  octal(h, 108, 8, 0);
  octal(h, 116, 8, 0);
  octal(h, 124, 12, size);
  octal(h, 136, 12, 0);
  field(h, 156, 1, type);
  field(h, 157, 100, link);
  field(h, 257, 6, "ustar\0");
  field(h, 263, 2, "00");
  h.fill(0x20, 148, 156);
  let sum = 0;
  for (const b of h) sum += b;
  field(h, 148, 8, sum.toString(8).padStart(6, "0") + "\0 ");
  return h;
}

function paxHeader(records: Record<string, string>): Uint8Array[] {
  let body = "";
  for (const [k, v] of Object.entries(records)) {
    const rest = ` ${k}=${v}\n`;
    let len = rest.length + 1;
    while (String(len).length + enc.encode(rest).length !== len) len = String(len).length + enc.encode(rest).length;
    body += `${len}${rest}`;
  }
  const data = enc.encode(body);
  return [header("PaxHeader", "x", data.length, 0o644), data, new Uint8Array((512 - (data.length % 512)) % 512)];
}

export function makeTar(entries: TarEntry[], { end = true } = {}): Uint8Array {
  const blocks: Uint8Array[] = [];
  for (const e of entries) {
    // Names over 100 bytes go through a pax header, as GNU tar and Python write them.
    const name = enc.encode(e.path).length > 99 ? "longname" : e.path;
    if (name !== e.path) blocks.push(...paxHeader({ path: e.path }));
    switch (e.type) {
      case "file": {
        const data = typeof e.data === "string" ? enc.encode(e.data) : e.data;
        blocks.push(header(name, "0", data.length, e.mode ?? 0o644), data, new Uint8Array((512 - (data.length % 512)) % 512));
        break;
      }
      case "dir":
        blocks.push(header(name.endsWith("/") ? name : `${name}/`, "5", 0, 0o755));
        break;
      case "symlink":
        blocks.push(header(name, "2", 0, 0o777, e.target));
        break;
      case "hardlink":
        blocks.push(header(name, "1", 0, 0o644, e.target));
        break;
      case "fifo":
        blocks.push(header(name, "6", 0, 0o644));
        break;
    }
  }
  if (end) blocks.push(new Uint8Array(1024));
  const total = blocks.reduce((n, b) => n + b.length, 0);
  const out = new Uint8Array(total);
  let o = 0;
  for (const b of blocks) {
    out.set(b, o);
    o += b.length;
  }
  return out;
}

/** Deterministic pseudo-random bytes (xorshift), so builds have realistic, diffable content. */
export function bytes(n: number, seed: number): Uint8Array {
  const out = new Uint8Array(n);
  let x = seed >>> 0 || 1;
  for (let i = 0; i < n; i++) {
    x ^= x << 13;
    x >>>= 0;
    x ^= x >>> 17;
    x ^= x << 5;
    x >>>= 0;
    out[i] = x & 0xff;
  }
  return out;
}

/** A small game build, version `v` (1 or 2): v2 edits, adds, renames and removes files. */
export function gameBuild(v: 1 | 2): TarEntry[] {
  const engine = bytes(300_000, 7);
  const level = enc.encode(JSON.stringify({ levels: Array.from({ length: 200 }, (_, i) => ({ id: i, name: `level ${i}`, enemies: i % 7 })) }));
  if (v === 1) {
    return [
      { type: "dir", path: "assets" },
      { type: "file", path: "assets/music.bin", data: bytes(100_000, 3) },
      { type: "file", path: "assets/old.txt", data: "removed in v2\n" },
      { type: "symlink", path: "current.json", target: "data/levels.json" },
      { type: "dir", path: "data" },
      { type: "file", path: "data/levels.json", data: level },
      { type: "file", path: "game.wasm", data: engine, mode: 0o755 },
      { type: "file", path: "index.html", data: "<!doctype html><title>game v1</title>\n" },
    ];
  }
  const engine2 = engine.slice();
  for (let i = 1000; i < engine2.length; i += 4096) engine2[i] ^= 0x5a;
  const level2 = enc.encode(new TextDecoder().decode(level).replace(/"enemies":3/g, '"enemies":4'));
  return [
    { type: "dir", path: "assets" },
    { type: "file", path: "assets/music-renamed.bin", data: bytes(100_000, 3) },
    { type: "symlink", path: "current.json", target: "data/levels.json" },
    { type: "dir", path: "data" },
    { type: "file", path: "data/levels.json", data: level2 },
    { type: "file", path: "data/new.json", data: '{"new": true}\n' },
    { type: "file", path: "game.wasm", data: engine2, mode: 0o755 },
    { type: "file", path: "index.html", data: "<!doctype html><title>game v2</title>\n" },
  ];
}
