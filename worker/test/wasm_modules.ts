// Made-up wasm modules for the tests of the transform phase (transform.ts), the same as the
// core's tests make (crates/edgepatch-core/tests/wasm_modules/mod.rs, `versions`): `() -> ()`
// functions that call each other; version 2 inserts functions near the start, so every later
// function index, and every call to it, shifts (what a recompile that adds code does).

function uleb(v: bigint, out: number[]): void {
  for (;;) {
    const b = Number(v & 0x7fn);
    v >>= 7n;
    if (v === 0n) return void out.push(b);
    out.push(b | 0x80);
  }
}

function sleb(v: bigint, out: number[]): void {
  for (;;) {
    const b = Number(BigInt.asUintN(8, v) & 0x7fn);
    v >>= 7n;
    if ((v === 0n && (b & 0x40) === 0) || (v === -1n && (b & 0x40) !== 0)) return void out.push(b);
    out.push(b | 0x80);
  }
}

function section(id: number, contents: number[], out: number[]): void {
  out.push(id);
  uleb(BigInt(contents.length), out);
  for (const b of contents) out.push(b);
}

const M = (1n << 64n) - 1n;

/** splitmix64, as the core's tests. */
function mix(z: bigint): bigint {
  z = (z + 0x9e3779b97f4a7c15n) & M;
  z = ((z ^ (z >> 30n)) * 0xbf58476d1ce4e5b9n) & M;
  z = ((z ^ (z >> 27n)) * 0x94d049bb133111ebn) & M;
  return z ^ (z >> 31n);
}

function moduleOf(ids: bigint[], all: bigint): Uint8Array {
  const position = new Map(ids.map((id, i) => [id, i]));
  const out = [0x00, 0x61, 0x73, 0x6d, 1, 0, 0, 0];
  section(1, [1, 0x60, 0, 0], out);
  const funcs: number[] = [];
  uleb(BigInt(ids.length), funcs);
  for (let i = 0; i < ids.length; i++) funcs.push(0);
  section(3, funcs, out);
  const code: number[] = [];
  uleb(BigInt(ids.length), code);
  for (const id of ids) {
    const body = [0];
    for (let k = 0n; k < 10n; k++) {
      const r = mix(id * 64n + k);
      body.push(0x41);
      sleb(r % 5000n, body);
      body.push(0x1a);
      const callee = position.get(mix(r) % all);
      if (callee !== undefined) {
        body.push(0x10);
        uleb(BigInt(callee), body);
      }
    }
    body.push(0x0b);
    uleb(BigInt(body.length), code);
    for (const b of body) code.push(b);
  }
  section(10, code, out);
  return Uint8Array.from(out);
}

/** Version 1 and 2 of a module of `n` functions: version 2 inserts `inserted` near the start. */
export function moduleVersions(n: number, inserted: number): [Uint8Array, Uint8Array] {
  const all = BigInt(n + inserted);
  const v1 = Array.from({ length: n }, (_, i) => BigInt(i));
  const head = Math.min(3, n);
  const v2 = [...v1.slice(0, head), ...Array.from({ length: inserted }, (_, i) => BigInt(n + i)), ...v1.slice(head)];
  return [moduleOf(v1, all), moduleOf(v2, all)];
}
