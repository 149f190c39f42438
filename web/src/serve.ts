// The page side of the Service Worker that runs installed games (service-worker.ts).
//
//   await registerGameServiceWorker("/edgepatch-sw.js", { scope: "/play/" });
//   frame.src = "/play/mygame/index.html";     // served from the installed build of "mygame"
//
// The script must be served from the scope's directory or above it, or with a
// `Service-Worker-Allowed` header naming the scope; the apply-only wasm
// (`edgepatch_wasm_bg.wasm`) must be beside it.

import { StorageError, messageOf } from "./errors.js";

/**
 * Registers the game Service Worker at `swUrl` for `scope` and resolves once it is active
 * (pages opened under the scope from then on are served by it). A browser without Service
 * Workers (or a page not in a secure context) is a StorageError naming why.
 */
export async function registerGameServiceWorker(swUrl: string | URL, { scope }: { scope: string }): Promise<ServiceWorkerRegistration> {
  if (!("serviceWorker" in navigator)) throw new StorageError("this browser (or this page, outside a secure context) has no Service Workers: the game cannot be served from its installed build");
  let reg: ServiceWorkerRegistration;
  try {
    reg = await navigator.serviceWorker.register(String(swUrl), { scope });
  } catch (e) {
    throw new StorageError(`registering the game Service Worker ${String(swUrl)} for ${scope} failed: ${messageOf(e)} (a scope above the script's directory needs a Service-Worker-Allowed header)`);
  }
  const worker = reg.active ?? reg.waiting ?? reg.installing;
  if (worker && worker.state !== "activated") {
    await new Promise<void>((resolve, reject) => {
      worker.addEventListener("statechange", () => {
        if (worker.state === "activated") resolve();
        if (worker.state === "redundant") reject(new StorageError(`the game Service Worker ${String(swUrl)} failed to install`));
      });
    });
  }
  return reg;
}
