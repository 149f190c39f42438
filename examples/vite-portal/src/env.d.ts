interface ImportMetaEnv {
  readonly VITE_EDGEPATCH_BASE_URL?: string;
  readonly VITE_EDGEPATCH_GAME?: string;
  readonly VITE_EDGEPATCH_CHANNEL?: string;
  readonly VITE_EDGEPATCH_PUBLIC_KEY?: string;
}
