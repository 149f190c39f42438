// Bearer-token check for publishing, in constant time.
import { HttpError } from "./http";

const encoder = new TextEncoder();

async function sha256(s: string): Promise<ArrayBuffer> {
  return crypto.subtle.digest("SHA-256", encoder.encode(s));
}

/** Throws 401 unless the request carries `Authorization: Bearer <token>` with the configured token. */
export async function requireToken(request: Request, configured: string | undefined): Promise<void> {
  if (!configured) throw new HttpError(503, "publishing is disabled: the EDGEPATCH_TOKEN secret is not set");
  const header = request.headers.get("Authorization") ?? "";
  const m = /^Bearer\s+(.+)$/i.exec(header);
  // Hash both sides so the comparison is over equal lengths and takes the same time
  // whatever the given token is (workerd's timingSafeEqual needs equal lengths).
  const [given, expected] = await Promise.all([sha256(m ? m[1].trim() : ""), sha256(configured)]);
  const equal = crypto.subtle.timingSafeEqual(given, expected);
  if (!m || !equal) {
    throw new HttpError(401, m ? "wrong token" : "missing bearer token (Authorization: Bearer <EDGEPATCH_TOKEN>)", {
      "WWW-Authenticate": 'Bearer realm="edgepatch"',
    });
  }
}
