// The development secrets of .dev.vars.example (signing key id e3e10630bc82e42f, token
// dev-token-not-secret) are public: a Worker whose ENVIRONMENT is not "development" refuses to
// serve with either, on every route and in its queue and cron work, with a clear 500 and a log
// line; with real secrets it serves. The tests themselves run as "development" (vitest.config.ts)
// with that same signing key.
import { createExecutionContext, createScheduledController, env, waitOnExecutionContext } from "cloudflare:test";
import { afterEach, describe, expect, it, vi } from "vitest";
import worker from "../src/index";
import { TEST_SIGNING_KEY, TEST_TOKEN } from "./keys";

const BASE = "https://edgepatch.test";
const DEV_TOKEN = "dev-token-not-secret";
const REAL_KEY = "AQIDBAUGBwgJCgsMDQ4PEBESExQVFhcYGRobHB0eHyA=";

/** Every kind of route: anyone, released, owner, unknown, and a CORS preflight. */
const REQUESTS: [method: string, path: string][] = [
  ["GET", "/v1/health"],
  ["GET", "/v1/public-key"],
  ["GET", "/v1/games/prod/channels/stable"],
  ["GET", "/v1/games/prod/updates/_/v1"],
  ["GET", `/v1/games/prod/manifests/_/v1/${"0".repeat(64)}`],
  ["GET", `/v1/games/prod/patches/_/v1/${"0".repeat(64)}`],
  ["GET", "/v1/games/prod/builds"],
  ["PUT", "/v1/games/prod/builds/v1"],
  ["PUT", "/v1/games/prod/channels/stable"],
  ["POST", "/v1/maintenance/uploads"],
  ["GET", "/v1/nothing"],
  ["OPTIONS", "/v1/games/prod/updates/_/v1"],
];

async function call(overrides: Record<string, string | undefined>, method: string, path: string, token: string): Promise<Response> {
  const ctx = createExecutionContext();
  const headers: Record<string, string> = { Authorization: `Bearer ${token}`, "CF-Connecting-IP": "198.51.100.77" };
  if (method === "OPTIONS") Object.assign(headers, { Origin: "https://game.example", "Access-Control-Request-Method": "GET" });
  const body = method === "PUT" ? "{}" : undefined;
  const res = await worker.fetch(new Request(`${BASE}${path}`, { method, headers, body }), { ...env, ...overrides }, ctx);
  await waitOnExecutionContext(ctx);
  return res;
}

afterEach(() => {
  vi.restoreAllMocks();
});

describe("a production Worker with development secrets", () => {
  const cases: { name: string; overrides: Record<string, string | undefined>; token: string; answer: string; log: RegExp }[] = [
    {
      name: "the development signing key",
      overrides: { ENVIRONMENT: "production", MANIFEST_SIGNING_KEY: TEST_SIGNING_KEY },
      token: TEST_TOKEN,
      answer: "server misconfigured: the development signing key (key id e3e10630bc82e42f) of .dev.vars.example is configured in production",
      log: /server misconfigured: the development signing key \(key id e3e10630bc82e42f\) of \.dev\.vars\.example is configured in production \(ENVIRONMENT=production\): set real secrets/,
    },
    {
      name: "the development token",
      overrides: { ENVIRONMENT: "production", MANIFEST_SIGNING_KEY: REAL_KEY, EDGEPATCH_TOKEN: DEV_TOKEN },
      token: DEV_TOKEN,
      answer: "server misconfigured: the development token of .dev.vars.example is configured in production",
      log: /server misconfigured: the development token of \.dev\.vars\.example is configured in production/,
    },
    {
      name: "both, and ENVIRONMENT unset (a deployment that does not say is production)",
      overrides: { ENVIRONMENT: undefined, MANIFEST_SIGNING_KEY: TEST_SIGNING_KEY, EDGEPATCH_TOKEN: DEV_TOKEN },
      token: DEV_TOKEN,
      answer: "server misconfigured: the development signing key (key id e3e10630bc82e42f) and token of .dev.vars.example are configured in production",
      log: /the development signing key \(key id e3e10630bc82e42f\) and token/,
    },
    {
      name: "the development signing key in staging",
      overrides: { ENVIRONMENT: "staging", MANIFEST_SIGNING_KEY: TEST_SIGNING_KEY },
      token: TEST_TOKEN,
      answer: "server misconfigured: the development signing key (key id e3e10630bc82e42f) of .dev.vars.example is configured in staging",
      log: /configured in staging/,
    },
  ];
  for (const c of cases) {
    it(`refuses every route with ${c.name}`, async () => {
      const logged = vi.spyOn(console, "error").mockImplementation(() => {});
      for (const [method, path] of REQUESTS) {
        for (const token of [c.token, "someone-else"]) {
          const res = await call(c.overrides, method, path, token);
          expect(res.status, `${method} ${path}`).toBe(500);
          expect(res.headers.get("Access-Control-Allow-Origin")).toBe("*");
          expect(await res.json()).toEqual({ error: c.answer, status: 500 });
        }
      }
      const lines = logged.mock.calls.map((l) => l.map(String).join(" "));
      expect(lines.length).toBe(REQUESTS.length * 2);
      for (const l of lines) expect(l).toMatch(c.log);
    });

    it(`does no queue or cron work with ${c.name}`, async () => {
      const logged = vi.spyOn(console, "error").mockImplementation(() => {});
      const prod = { ...env, ...c.overrides } as typeof env;
      await expect(worker.scheduled(createScheduledController({ scheduledTime: Date.now(), cron: "23 4 * * *" }), prod)).rejects.toThrow(/development/);
      const batch = { queue: "edgepatch-pregenerate", messages: [], retryAll() {}, ackAll() {} } as unknown as MessageBatch<unknown>;
      await expect(worker.queue(batch, prod)).rejects.toThrow(/development/);
      expect(logged.mock.calls.filter((l) => c.log.test(l.map(String).join(" "))).length).toBe(2);
    });
  }

  it("rejects an ENVIRONMENT it does not know", async () => {
    vi.spyOn(console, "error").mockImplementation(() => {});
    const res = await call({ ENVIRONMENT: "prod" }, "GET", "/v1/health", TEST_TOKEN);
    expect(res.status).toBe(500);
    expect(await res.json()).toEqual({ error: "server misconfigured", status: 500 });
  });
});

describe("a production Worker with real secrets", () => {
  it("serves", async () => {
    for (const environment of ["production", "staging", undefined]) {
      const overrides = { ENVIRONMENT: environment, MANIFEST_SIGNING_KEY: REAL_KEY, EDGEPATCH_TOKEN: "a-real-owner-token" };
      const health = await call(overrides, "GET", "/v1/health", "a-real-owner-token");
      expect(health.status).toBe(200);
      const key = (await (await call(overrides, "GET", "/v1/public-key", "x")).json()) as { keyId: string };
      expect(key.keyId).not.toBe("e3e10630bc82e42f");
      expect((await call(overrides, "GET", "/v1/games/prod/builds", "a-real-owner-token")).status).toBe(200);
      expect((await call(overrides, "GET", "/v1/games/prod/builds", DEV_TOKEN)).status).toBe(401);
      expect((await call(overrides, "OPTIONS", "/v1/health", "x")).status).toBe(204);
    }
  });

  it("and a development Worker (wrangler dev, these tests) serves with the development secrets", async () => {
    const overrides = { ENVIRONMENT: "development", MANIFEST_SIGNING_KEY: TEST_SIGNING_KEY, EDGEPATCH_TOKEN: DEV_TOKEN };
    const key = (await (await call(overrides, "GET", "/v1/public-key", "x")).json()) as { keyId: string };
    expect(key.keyId).toBe("e3e10630bc82e42f");
    expect((await call(overrides, "GET", "/v1/games/prod/builds", DEV_TOKEN)).status).toBe(200);
  });
});
