// The portal's build. `@edgepatch/web/vite` does what the library needs from Vite: the
// dedicated worker stays a module worker found through the library's `new Worker(new URL(...))`,
// the Service Worker is written at the site's root (its directory covers the game's scope,
// /play/), and both workers load one content-hashed wasm module, downloaded once.
import edgepatch from "@edgepatch/web/vite";
import { defineConfig } from "vite";

export default defineConfig({
  build: { target: "es2022" },
  plugins: [edgepatch()],
});
