// Publishing: a tar stream is parsed as it arrives, every entry checked and signed by the
// core's Signer, the bytes streamed into R2. Only a complete, valid build is committed;
// anything else is refused with a 4xx and leaves nothing stored.
import { HttpError, InternalError } from "./http";
import { blake3Hex, initWasm, Signer } from "./wasm";
import { TarError, TarParser } from "./tar";
import { encodeIndex, keys, R2PartWriter, type BuildRecord, type TarIndex } from "./store";

/** The signature, index and counts of one tar stream. */
export interface SignedBuild {
  signature: Uint8Array;
  index: TarIndex;
  tarBytes: number;
  files: number;
  directories: number;
  symlinks: number;
  fileBytes: number;
}

function badUpload(e: unknown): Error {
  if (e instanceof HttpError || e instanceof InternalError) return e;
  const message = e instanceof Error ? e.message : String(e);
  return new HttpError(400, `bad build upload: ${message}`);
}

/**
 * Reads a tar stream to its end, signing it; `sink` (if any) gets every byte, in order.
 * Throws HttpError 400 for a malformed tar or a refused entry, 413 past `maxBytes`.
 */
export async function signTarStream(
  stream: ReadableStream<Uint8Array>,
  maxBytes: number,
  sink?: (bytes: Uint8Array) => Promise<void>,
  source: "request" | "storage" = "request",
): Promise<SignedBuild> {
  initWasm();
  const signer = new Signer();
  const index: TarIndex = new Map();
  let current: string | null = null;
  const counts = { files: 0, directories: 0, symlinks: 0, fileBytes: 0 };
  const parser = new TarParser({
    directory(path) {
      signer.directory(path);
      counts.directories++;
    },
    symlink(path, target) {
      signer.symlink(path, target);
      counts.symlinks++;
    },
    beginFile(path, executable, size, dataOffset) {
      signer.beginFile(path, executable, size);
      index.set(path, { offset: dataOffset, size, blake3: "" });
      current = path;
      counts.files++;
      counts.fileBytes += size;
    },
    data(bytes) {
      signer.update(bytes);
    },
    endFile() {
      index.get(current!)!.blake3 = signer.finishFile();
    },
  });
  const reader = stream.getReader();
  let total = 0;
  try {
    for (;;) {
      let chunk: ReadableStreamReadResult<Uint8Array>;
      try {
        chunk = await reader.read();
      } catch (e) {
        // A request body that breaks off is the client's; a stored object that does, ours.
        if (source === "storage") throw new InternalError("reading the assembled upload failed", e);
        throw e;
      }
      const { done, value } = chunk;
      if (done) break;
      total += value.length;
      if (total > maxBytes) throw new HttpError(413, `build upload larger than the limit of ${maxBytes} bytes`);
      parser.push(value);
      if (sink) {
        try {
          await sink(value);
        } catch (e) {
          // Storage failed, not the upload: the details go to the log, not to the client.
          throw new InternalError("storing the build failed", e);
        }
      }
    }
    parser.finish();
    const signature = signer.finish();
    return { signature, index, tarBytes: total, ...counts };
  } catch (e) {
    reader.cancel().catch(() => {});
    throw badUpload(e);
  } finally {
    signer.free();
  }
}

export interface Limits {
  maxBuildBytes: number;
  maxRequestBytes: number;
}

/** Single-request publish: the body is parsed, signed and stored in one pass. */
export async function ingestBody(bucket: R2Bucket, game: string, build: string, upload: string, request: Request, limits: Limits): Promise<SignedBuild> {
  const declared = request.headers.get("Content-Length");
  const limit = Math.min(limits.maxBuildBytes, limits.maxRequestBytes);
  if (declared !== null && Number(declared) > limit) {
    throw new HttpError(413, `build upload of ${declared} bytes is larger than the limit of ${limit} bytes (large builds upload in parts: POST .../uploads)`);
  }
  if (request.body === null) throw new HttpError(400, "bad build upload: empty body (send the build as a tar stream)");
  const writer = new R2PartWriter(bucket, keys.buildData(game, build, upload), { httpMetadata: { contentType: "application/x-tar" } });
  try {
    const signed = await signTarStream(request.body, limit, (bytes) => writer.write(bytes));
    await writer.finish();
    return signed;
  } catch (e) {
    await writer.abort();
    throw e;
  }
}

/** Stores what a signed upload needs beside its tar, and returns the build's record. */
export async function storeSigned(bucket: R2Bucket, game: string, build: string, upload: string, signed: SignedBuild): Promise<BuildRecord> {
  const signatureBlake3 = blake3Hex(signed.signature);
  const index = new TextEncoder().encode(encodeIndex(signed.index));
  const indexBlake3 = blake3Hex(index);
  await Promise.all([
    bucket.put(keys.buildSignature(game, build, upload), signed.signature, { customMetadata: { blake3: signatureBlake3 } }),
    bucket.put(keys.buildIndex(game, build, upload), index, { customMetadata: { blake3: indexBlake3 } }),
  ]);
  return {
    game,
    build,
    upload,
    publishedAt: new Date().toISOString(),
    tarBytes: signed.tarBytes,
    files: signed.files,
    directories: signed.directories,
    symlinks: signed.symlinks,
    fileBytes: signed.fileBytes,
    signatureBytes: signed.signature.length,
    signatureBlake3,
    indexBlake3,
  };
}

/** Deletes everything one upload stored (after a refusal or a lost race). */
export async function deleteUpload(bucket: R2Bucket, game: string, build: string, upload: string): Promise<void> {
  await bucket.delete([keys.buildData(game, build, upload), keys.buildIndex(game, build, upload), keys.buildSignature(game, build, upload)]);
}

export { TarError };
