interface ImportMetaEnv {
  readonly VITE_EDGEPATCH_BASE_URL?: string;
  readonly VITE_EDGEPATCH_GAME?: string;
  readonly VITE_EDGEPATCH_CHANNEL?: string;
  readonly VITE_EDGEPATCH_PUBLIC_KEY?: string;
  /** Set by vite.config.js: the package ships a Service Worker, copied to the site's root. */
  readonly EDGEPATCH_SERVICE_WORKER: boolean;
}
