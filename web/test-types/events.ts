// The events' types as a user's code sees them: `e` in a listener is typed by the updater's
// event map, so `e.detail` of a "progress" event is an UpdateProgress (no cast). A field
// UpdateProgress does not have is an error, which keeps the test from passing on `any`.
import { type EdgepatchError, GameUpdater, type UpdateProgress } from "@edgepatch/web";

declare const updater: GameUpdater;

updater.addEventListener("progress", (e) => e.detail.bytesWritten);

updater.addEventListener("progress", (e) => {
  const p: UpdateProgress = e.detail;
  const share: number = e.detail.bytesWritten / e.detail.bytesTotal;
  const rate: number = e.detail.writeBytesPerSecond;
  const eta: number | null = e.detail.etaSeconds;
  // @ts-expect-error: UpdateProgress has no such field.
  const wrong: number = e.detail.bytesWrittenSoFar;
  void [p, share, rate, eta, wrong];
});

// `this` is the updater; a listener object works too; removal takes the same types.
updater.addEventListener("progress", function (e) {
  const g: GameUpdater = this;
  void [g, e.detail.phase];
});
const listener = { handleEvent: (e: CustomEvent<UpdateProgress>) => void e.detail.filesDone };
updater.addEventListener("progress", listener);
updater.removeEventListener("progress", listener);

// @ts-expect-error: a progress listener cannot expect another detail.
updater.addEventListener("progress", (e: CustomEvent<{ other: string }>) => e.detail.other);

// Any other event type still takes a plain listener.
updater.addEventListener("custom", (e) => void e.type);

// Errors: a stable code, and the file an error is about.
async function run(signal: AbortSignal): Promise<void> {
  try {
    await updater.updateToLatest("stable", { signal, onProgress: (p) => void p.bytesTotal });
  } catch (err) {
    const e = err as EdgepatchError;
    const code: "aborted" | string = e.code;
    const path: string | undefined = e.path;
    void [code, path];
  }
}
void run;
