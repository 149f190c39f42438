// The owner's bearer token, compared in constant time.
import { HttpError } from "./http";

const encoder = new TextEncoder();

async function sha256(s: string): Promise<ArrayBuffer> {
  return crypto.subtle.digest("SHA-256", encoder.encode(s));
}

/** Whether the request carries `Authorization: Bearer <token>` with the configured token. */
export async function carriesToken(request: Request, configured: string | undefined): Promise<boolean> {
  if (!configured) return false;
  const m = /^Bearer\s+(.+)$/i.exec(request.headers.get("Authorization") ?? "");
  if (!m) return false;
  // Hash both sides so the comparison is over equal lengths and takes the same time
  // whatever the given token is (workerd's timingSafeEqual needs equal lengths).
  const [given, expected] = await Promise.all([sha256(m[1].trim()), sha256(configured)]);
  return crypto.subtle.timingSafeEqual(given, expected);
}

/** The refusal of a request that needs the owner's token and did not carry it. */
export function tokenRequired(request: Request, configured: string | undefined, what: string): HttpError {
  if (!configured) return new HttpError(503, `${what} is disabled: the EDGEPATCH_TOKEN secret is not set`);
  const given = /^Bearer\s+/i.test(request.headers.get("Authorization") ?? "");
  return new HttpError(401, given ? "wrong token" : `missing bearer token: ${what} needs the owner's token (Authorization: Bearer <EDGEPATCH_TOKEN>)`, {
    "WWW-Authenticate": 'Bearer realm="edgepatch"',
  });
}
