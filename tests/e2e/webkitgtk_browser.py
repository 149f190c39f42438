#!/usr/bin/python3
"""A minimal WebKitGTK browser that tests/e2e/engines.mjs drives as its "webkit" engine.

Why our own browser: MiniBrowser under automation (WebKitWebDriver) always uses an
ephemeral profile, and an ephemeral profile has no OPFS; no package drives a WebKitGTK view
with a persistent profile. This one opens one web view on a persistent profile with Safari's
OPFS features on, and speaks newline-delimited JSON:

  stdin  (commands)  {"id": N, "cmd": "goto", "url": U} | {"id": N, "cmd": "reload"}
                     | {"id": N, "cmd": "evaluate", "fn": "<function source>", "arg": "<JSON>"}
                     | {"id": N, "cmd": "close"}
  stdout (answers)   {"id": N, "ok": true, "value": "<JSON>" | null}
                     | {"id": N, "error": {"message", "name", "js": true|false}}
  stdout (events)    {"event": "ready", "webkitgtk": "2.50.6"}
                     | {"event": "console", "type": "error" | "warning", "text": T}
                     | {"event": "pageerror", "message": M}
                     | {"event": "crashed", "reason": R}

The protocol goes to a private copy of the original stdout; file descriptor 1 is pointed at
stderr before WebKit starts its processes (they inherit it), so nothing WebKit prints can
be mistaken for an answer. EOF on stdin closes the browser (the driving process is gone).

    /usr/bin/python3 webkitgtk_browser.py --profile DIR [--origin-quota-bytes N]

--origin-quota-bytes: the most an origin may store (OPFS writes beyond it fail with
QuotaExceededError); navigator.storage.estimate() reports less, growing with usage.
EDGEPATCH_WEBKIT_DEBUG=1: a trace of commands and loads, and every console message, on stderr.
On close (or EOF) WebKit's web and network processes are ended before this one exits.

Needs a display (engines.mjs starts an Xvfb) and Debian's gir1.2-webkit2-4.1 and python3-gi
(Debian's python3: the GObject bindings are not in other Pythons).
"""
import argparse
import json
import os
import signal
import sys
import time

import gi

gi.require_version("Gtk", "3.0")
gi.require_version("WebKit2", "4.1")
from gi.repository import GLib, Gtk, WebKit2  # noqa: E402

# Safari's OPFS set plus estimate(); off by default in WebKitGTK (docs/TOOLCHAIN.md).
FEATURES = ("StorageAPI", "StorageAPIEstimate", "FileSystem", "AccessHandle", "FileSystemWritableStream")
HANDLER = "edgepatchDriver"
DEBUG = bool(os.environ.get("EDGEPATCH_WEBKIT_DEBUG"))

# Injected at document start into every frame, in the page's own world (a hook in an isolated
# world would not see the page's console calls). Messages go through the script message
# handler, on the same connection as the answers to evaluate(), so an error logged before an
# evaluate() returns is reported before its answer. Dedicated and service workers are not
# hooked (user scripts run in frames only), as puppeteer's page "console" does not see them.
HOOK = r"""
(() => {
  const handler = window.webkit && window.webkit.messageHandlers && window.webkit.messageHandlers.%s;
  if (!handler) return;
  const post = (m) => { try { handler.postMessage(JSON.stringify(m)); } catch (_) {} };
  const show = (a) => {
    if (typeof a === "string") return a;
    if (a instanceof Error) return String(a);
    try { const j = JSON.stringify(a); return j === undefined ? String(a) : j; } catch (_) { return String(a); }
  };
  for (const [level, type] of [["error", "error"], ["warn", "warning"]]) {
    const original = console[level];
    console[level] = function (...args) {
      post({ event: "console", type, text: args.map(show).join(" ") });
      return original.apply(this, args);
    };
  }
  // Bubbling listener: resource load failures (which do not bubble) are not page errors.
  window.addEventListener("error", (e) => {
    post({ event: "pageerror", message: e.error && e.error.message !== undefined ? String(e.error.message) : String(e.message) });
  });
  // A blocked load is reported by WebKit's console only (not through console.error), and
  // Chromium reports one as a console error: say so the same way.
  document.addEventListener("securitypolicyviolation", (e) => {
    post({ event: "console", type: "error", text: `Refused to load ${e.blockedURI || "a resource"}: it violates the Content Security Policy directive "${e.violatedDirective}"` });
  });
  window.addEventListener("unhandledrejection", (e) => {
    const r = e.reason;
    post({ event: "pageerror", message: r && r.message !== undefined ? String(r.message) : String(r) });
  });
})();
""" % HANDLER

# evaluate(): the function runs in the page's world and its value is JSON-serialized there, so
# the answer is a plain string (undefined stays undefined). A JS exception becomes an answer
# carrying the exception's own name and message rather than WebKit's wrapped text.
EVALUATE = """
let value;
try {
  value = await (%s)(%s);
} catch (e) {
  const error = e instanceof Error ? { name: e.name, message: e.message } : { name: "Error", message: String(e) };
  return JSON.stringify({ error });
}
return JSON.stringify(value === undefined ? {} : { value: JSON.stringify(value) });
"""


class Browser:
    def __init__(self, out, profile, origin_quota_bytes):
        self.out = out
        self.pending_load = None  # id of the goto/reload waiting for its load to finish
        # ids of evaluate() calls not answered yet: WebKit never calls back for a function
        # whose document was replaced by a navigation, so those are answered here.
        self.pending_evaluates = set()
        data_dir = os.path.join(profile, "data")
        os.makedirs(data_dir, exist_ok=True)
        dm_props = {"base_data_directory": data_dir, "base_cache_directory": os.path.join(profile, "cache")}
        if origin_quota_bytes:
            # WebKit's quota is a ratio of the capacity of the volume holding the profile.
            st = os.statvfs(data_dir)
            dm_props["origin_storage_ratio"] = min(1.0, origin_quota_bytes / (st.f_blocks * st.f_frsize))
        data = WebKit2.WebsiteDataManager(**dm_props)
        context = WebKit2.WebContext.new_with_website_data_manager(data)
        content = WebKit2.UserContentManager()
        content.register_script_message_handler(HANDLER)
        content.connect("script-message-received::" + HANDLER, self.on_message)
        content.add_script(WebKit2.UserScript.new(HOOK, WebKit2.UserContentInjectedFrames.ALL_FRAMES, WebKit2.UserScriptInjectionTime.START, None, None))
        # The features are set before the view exists and given to it whole: a Service Worker's
        # process takes the preferences of the page that starts it as they were then, so
        # features turned on later stay off there (navigator.storage is missing in it).
        settings = WebKit2.Settings()
        missing = set(FEATURES)
        features = WebKit2.Settings.get_all_features()
        for i in range(features.get_length()):
            f = features.get(i)
            if f.get_identifier() in missing:
                settings.set_feature_enabled(f, True)
                missing.discard(f.get_identifier())
        # Every console message (workers' too) on fd 1, which is stderr here: for debugging only,
        # as its lines cannot be told apart reliably (a message may span lines).
        settings.set_enable_write_console_messages_to_stdout(DEBUG)
        self.view = WebKit2.WebView(web_context=context, user_content_manager=content, settings=settings)
        if missing:
            print(f"webkitgtk_browser: WebKit has no feature {', '.join(sorted(missing))}", file=sys.stderr)
        self.view.connect("load-changed", self.on_load_changed)
        self.view.connect("load-failed", self.on_load_failed)
        self.view.connect("web-process-terminated", self.on_terminated)
        # A dialog would wait for a person; answer it as headless browsers do (dismissed).
        self.view.connect("script-dialog", lambda _v, _d: True)
        self.window = Gtk.Window()
        self.window.set_default_size(1280, 800)
        self.window.add(self.view)
        self.window.show_all()

    def send(self, message):
        self.out.write(json.dumps(message) + "\n")
        self.out.flush()

    def answer_error(self, id_, message, name="Error", js=False):
        self.send({"id": id_, "error": {"message": message, "name": name, "js": js}})

    def on_message(self, _manager, result):
        value = result.get_js_value() if hasattr(result, "get_js_value") else result
        try:
            message = json.loads(value.to_string())
        except ValueError:
            return
        if message.get("event") in ("console", "pageerror"):
            self.send(message)

    def on_load_changed(self, _view, event):
        if DEBUG:
            print(f"webkitgtk_browser: load {event.value_nick} {self.view.get_uri()}", file=sys.stderr)
        if event == WebKit2.LoadEvent.COMMITTED:
            self.fail_evaluates("execution context was destroyed by a navigation")
        if event == WebKit2.LoadEvent.FINISHED and self.pending_load is not None:
            id_, self.pending_load = self.pending_load, None
            self.send({"id": id_, "ok": True, "value": None})

    def on_load_failed(self, _view, _event, uri, error):
        if DEBUG:
            print(f"webkitgtk_browser: load failed {uri}: {error.message}", file=sys.stderr)
        if self.pending_load is not None:
            id_, self.pending_load = self.pending_load, None
            self.answer_error(id_, f"loading {uri} failed: {error.message}")
        return True  # handled: no error page (its load would look like a page of its own)

    def fail_evaluates(self, message):
        for id_ in sorted(self.pending_evaluates):
            self.answer_error(id_, message)
        self.pending_evaluates.clear()

    def on_terminated(self, _view, reason):
        nick = reason.value_nick if hasattr(reason, "value_nick") else str(reason)
        self.send({"event": "crashed", "reason": nick})
        self.fail_evaluates(f"WebKit web process terminated ({nick})")
        if self.pending_load is not None:
            id_, self.pending_load = self.pending_load, None
            self.answer_error(id_, f"WebKit web process terminated ({nick})")

    def start_load(self, id_, start):
        if self.pending_load is not None:
            # The earlier navigation is replaced; its caller learns so instead of waiting forever.
            self.answer_error(self.pending_load, "navigation interrupted by another navigation")
        self.pending_load = id_
        start()

    def evaluate(self, id_, fn, arg):
        def late_error(message):
            if id_ in self.pending_evaluates:
                self.pending_evaluates.discard(id_)
                self.answer_error(id_, message)
            return False

        def done(view, res):
            if id_ not in self.pending_evaluates:
                return  # already answered (navigation, crash)
            try:
                text = view.call_async_javascript_function_finish(res).to_string()
            except GLib.Error as e:
                # Not a JS exception (those are caught in EVALUATE): a syntax error, or the web
                # process died. A dying process fails the call ("Unsupported result type") just
                # before web-process-terminated says why, so the answer waits a moment for that.
                GLib.timeout_add(150, late_error, e.message)
                return
            self.pending_evaluates.discard(id_)
            try:
                reply = json.loads(text)
            except ValueError as e:
                self.answer_error(id_, f"evaluate: unreadable answer ({e})")
                return
            if "error" in reply:
                self.answer_error(id_, reply["error"]["message"], reply["error"]["name"], js=True)
            else:
                self.send({"id": id_, "ok": True, "value": reply.get("value")})

        self.pending_evaluates.add(id_)
        self.view.call_async_javascript_function(EVALUATE % (fn, arg), -1, None, None, None, None, done)

    def command(self, message):
        if DEBUG:
            print(f"webkitgtk_browser: command {json.dumps(message)[:300]}", file=sys.stderr)
        id_, cmd = message.get("id"), message.get("cmd")
        if cmd == "goto":
            self.start_load(id_, lambda: self.view.load_uri(message["url"]))
        elif cmd == "reload":
            self.start_load(id_, self.view.reload)
        elif cmd == "evaluate":
            self.evaluate(id_, message["fn"], message.get("arg", "undefined"))
        elif cmd == "close":
            self.send({"id": id_, "ok": True, "value": None})
            Gtk.main_quit()
        else:
            self.answer_error(id_, f"unknown command {cmd!r}")


def child_processes():
    """Live (not zombie) processes whose parent is this one: WebKit's web and network processes."""
    me, found = os.getpid(), []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat") as f:
                # "pid (comm) state ppid ...": comm may hold spaces, so split after its ")".
                state, ppid = f.read().rpartition(")")[2].split()[:2]
        except OSError:
            continue
        if int(ppid) == me and state != "Z":
            found.append(int(name))
    return found


def stop_children(grace_s=3.0):
    """Ends WebKit's processes before this one exits. Left alone they linger a second or two
    after their UI process is gone, still writing to a profile the caller is about to remove."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        pids = child_processes()
        for pid in pids:
            try:
                os.kill(pid, sig)
            except ProcessLookupError:
                pass
        deadline = time.monotonic() + grace_s
        while pids and time.monotonic() < deadline:
            time.sleep(0.02)
            pids = child_processes()
        if not pids:
            return


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--profile", required=True)
    parser.add_argument("--origin-quota-bytes", type=int, default=0)
    args = parser.parse_args()

    # Answers get a private, non-inherited copy of stdout; fd 1 becomes stderr for everything
    # else (WebKit's child processes included).
    out = os.fdopen(os.dup(1), "w", encoding="utf-8")
    os.dup2(2, 1)
    sys.stdout = sys.stderr

    browser = Browser(out, args.profile, args.origin_quota_bytes)
    buffered = bytearray()

    def on_stdin(fd, _condition):
        chunk = os.read(fd, 65536)
        if not chunk:
            Gtk.main_quit()
            return False
        buffered.extend(chunk)
        while b"\n" in buffered:
            line, _, rest = bytes(buffered).partition(b"\n")
            buffered[:] = rest
            if line.strip():
                try:
                    browser.command(json.loads(line))
                except (ValueError, KeyError) as e:
                    print(f"webkitgtk_browser: bad command {line[:200]!r}: {e}", file=sys.stderr)
        return True

    GLib.unix_fd_add_full(GLib.PRIORITY_DEFAULT, 0, GLib.IOCondition.IN | GLib.IOCondition.HUP, on_stdin)
    version = f"{WebKit2.get_major_version()}.{WebKit2.get_minor_version()}.{WebKit2.get_micro_version()}"
    browser.send({"event": "ready", "webkitgtk": version})
    Gtk.main()
    stop_children()


if __name__ == "__main__":
    main()
