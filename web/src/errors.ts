// Typed errors of the browser library. They cross the worker boundary as
// `SerializedError` and are rebuilt on the page, so `instanceof` and `code`
// work the same on both sides.

export type ErrorCode =
  | "network" // the connection failed (after retries); the update can be resumed
  | "http" // the server answered with an error status
  | "protocol" // a document or response broke docs/UPDATE_PROTOCOL.md
  | "integrity" // a size or BLAKE3 did not match: the data is not what was promised (or what was signed)
  | "signature" // no accepted key, an unknown key id, or a signature that does not verify
  | "rollback" // a channel document older than one already seen (lower sequence, or same sequence, other build)
  | "frozen" // a channel document past its expiry: the server may be withholding newer ones
  | "patch" // the patch could not be applied (the core's message says why)
  | "storage" // OPFS failed (a lock held elsewhere, a missing file, a write refused)
  | "quota" // not enough storage for the update: `needed` and `available` say how much (bytes)
  | "state" // the update does not fit what is installed (e.g. `from` is not current)
  | "busy" // another update of the same game is running (this tab or another)
  | "aborted"; // the caller aborted

export interface SerializedError {
  code: ErrorCode;
  message: string;
  /** The update can be continued later (its progress is persisted). */
  resumable: boolean;
  status?: number;
  url?: string;
  /** The one file the error is about (a path in the build, "/"-separated), when there is one. */
  path?: string;
  /** QuotaError: bytes the update needs, and bytes the browser reported free. */
  needed?: number;
  available?: number;
}

/** What an error may carry besides its code and message. */
export interface ErrorExtra {
  resumable?: boolean;
  status?: number;
  url?: string;
  path?: string;
}

export class EdgepatchError extends Error {
  readonly code: ErrorCode;
  /** The update can be continued by calling it again (its progress is persisted). */
  resumable: boolean;
  readonly status?: number;
  readonly url?: string;
  /**
   * The one file the error is about, as a path in the build ("/"-separated), when there is
   * one: e.g. a file of the installed build that is not what the patch was made for, or a
   * file whose size or BLAKE3 is not the manifest's. The message names it too.
   */
  readonly path?: string;
  constructor(code: ErrorCode, message: string, extra: ErrorExtra = {}) {
    super(message);
    this.name = ERROR_NAMES[code];
    this.code = code;
    this.resumable = extra.resumable ?? false;
    if (extra.status !== undefined) this.status = extra.status;
    if (extra.url !== undefined) this.url = extra.url;
    if (extra.path !== undefined) this.path = extra.path;
  }
  toJSON(): SerializedError {
    const out: SerializedError = { code: this.code, message: this.message, resumable: this.resumable };
    if (this.status !== undefined) out.status = this.status;
    if (this.url !== undefined) out.url = this.url;
    if (this.path !== undefined) out.path = this.path;
    return out;
  }
}

export class NetworkError extends EdgepatchError {
  constructor(message: string, extra: { resumable?: boolean; url?: string } = {}) { super("network", message, extra); }
}
export class HttpError extends EdgepatchError {
  constructor(message: string, extra: { status: number; url: string; resumable?: boolean }) { super("http", message, extra); }
}
export class ProtocolError extends EdgepatchError {
  constructor(message: string, extra: { url?: string; path?: string } = {}) { super("protocol", message, extra); }
}
export class IntegrityError extends EdgepatchError {
  constructor(message: string, extra: { url?: string; path?: string } = {}) { super("integrity", message, extra); }
}
/** A signature is missing or does not verify under an accepted key, or no key is configured. */
export class SignatureError extends EdgepatchError {
  constructor(message: string, extra: { url?: string } = {}) { super("signature", message, extra); }
}
/** A channel document older than the newest one this browser already acted on (replayed). */
export class RollbackError extends EdgepatchError {
  constructor(message: string, extra: { url?: string } = {}) { super("rollback", message, extra); }
}
/** A channel document whose `expires` has passed: newer ones may be withheld. */
export class FrozenError extends EdgepatchError {
  constructor(message: string, extra: { url?: string } = {}) { super("frozen", message, extra); }
}
export class PatchError extends EdgepatchError {
  constructor(message: string, extra: { path?: string } = {}) { super("patch", message, extra); }
}
export class StorageError extends EdgepatchError {
  constructor(message: string, extra: { resumable?: boolean; path?: string } = {}) { super("storage", message, extra); }
}
export class StateError extends EdgepatchError {
  constructor(message: string, extra: { path?: string } = {}) { super("state", message, extra); }
}
export class BusyError extends EdgepatchError {
  constructor(message: string) { super("busy", message); }
}
/** Not enough storage: `needed` bytes for the update, `available` free (navigator.storage.estimate()). */
export class QuotaError extends EdgepatchError {
  readonly needed: number;
  readonly available: number;
  constructor(message: string, extra: { needed: number; available: number }) {
    super("quota", message);
    this.needed = extra.needed;
    this.available = extra.available;
  }
  override toJSON(): SerializedError {
    return { ...super.toJSON(), needed: this.needed, available: this.available };
  }
}
export class AbortedError extends EdgepatchError {
  constructor(message = "update aborted", extra: { resumable?: boolean } = {}) { super("aborted", message, extra); }
}

const ERROR_NAMES: Record<ErrorCode, string> = {
  network: "NetworkError",
  http: "HttpError",
  protocol: "ProtocolError",
  integrity: "IntegrityError",
  signature: "SignatureError",
  rollback: "RollbackError",
  frozen: "FrozenError",
  patch: "PatchError",
  storage: "StorageError",
  quota: "QuotaError",
  state: "StateError",
  busy: "BusyError",
  aborted: "AbortedError",
};

/** Rebuilds a typed error from its serialized form (the page side of the worker boundary). */
export function deserializeError(e: SerializedError): EdgepatchError {
  const extra = { resumable: e.resumable, ...(e.status !== undefined ? { status: e.status } : {}), ...(e.url !== undefined ? { url: e.url } : {}), ...(e.path !== undefined ? { path: e.path } : {}) };
  const path = e.path !== undefined ? { path: e.path } : {};
  switch (e.code) {
    case "network": return new NetworkError(e.message, extra);
    case "http": return new HttpError(e.message, { status: e.status ?? 0, url: e.url ?? "", resumable: e.resumable });
    case "protocol": return new ProtocolError(e.message, extra);
    case "integrity": return new IntegrityError(e.message, extra);
    case "signature": return new SignatureError(e.message, extra);
    case "rollback": return new RollbackError(e.message, extra);
    case "frozen": return new FrozenError(e.message, extra);
    case "patch": return new PatchError(e.message, path);
    case "storage": return new StorageError(e.message, extra);
    case "quota": return new QuotaError(e.message, { needed: e.needed ?? 0, available: e.available ?? 0 });
    case "state": return new StateError(e.message, path);
    case "busy": return new BusyError(e.message);
    case "aborted": return new AbortedError(e.message, extra);
    default: return new EdgepatchError("protocol", `unknown error code ${String((e as SerializedError).code)}: ${e.message}`);
  }
}

/** The message of anything thrown (DOMException, Error, string). */
export function messageOf(e: unknown): string {
  if (e instanceof Error) return e.message || e.name;
  if (typeof e === "object" && e !== null && "message" in e) return String((e as { message: unknown }).message);
  return String(e);
}
