#!/usr/bin/python3
"""Opens URL in a WebKitGTK web view with a persistent profile and Safari's OPFS features
on, waits until the page sets its title to "EDGEPATCH-RESULT <json>", prints
{"webkitgtk": "<version>", "page": <json>} and exits (1 on load failure, web process crash
or timeout). Run under a display (xvfb-run).

    xvfb-run -a /usr/bin/python3 bench/browser/webkitgtk_run.py URL PROFILE_DIR [TIMEOUT_S]

Only for bench/browser/update-bench.mjs while tests/e2e/engines.mjs (the shared WebDriver
launcher) is absent: the page runs the benchmark by itself, so no automation channel is
needed. MiniBrowser cannot be used: under automation its profile is ephemeral, without OPFS.
Needs Debian's gir1.2-webkit2-4.1 and python3-gi.
"""
import json
import os
import sys

import gi

gi.require_version("Gtk", "3.0")
gi.require_version("WebKit2", "4.1")
from gi.repository import GLib, Gtk, WebKit2  # noqa: E402

MARKER = "EDGEPATCH-RESULT "
# Safari's set (and estimate()); off by default in WebKitGTK (../shared/TOOLCHAIN.md).
FEATURES = {"StorageAPI", "StorageAPIEstimate", "FileSystem", "AccessHandle", "FileSystemWritableStream"}


def main():
    url, profile = sys.argv[1], sys.argv[2]
    timeout = int(sys.argv[3]) if len(sys.argv) > 3 else 600
    data = WebKit2.WebsiteDataManager(base_data_directory=os.path.join(profile, "data"), base_cache_directory=os.path.join(profile, "cache"))
    context = WebKit2.WebContext.new_with_website_data_manager(data)
    view = WebKit2.WebView(web_context=context)
    settings = view.get_settings()
    enabled = set()
    features = WebKit2.Settings.get_all_features()
    for i in range(features.get_length()):
        f = features.get(i)
        if f.get_identifier() in FEATURES:
            settings.set_feature_enabled(f, True)
            enabled.add(f.get_identifier())
    missing = FEATURES - enabled
    if missing:
        print(f"webkitgtk_run: features not found: {', '.join(sorted(missing))}", file=sys.stderr)
    settings.set_enable_write_console_messages_to_stdout(False)
    outcome = {"code": 1}

    def finish(code, text):
        outcome["code"] = code
        (print(text) if code == 0 else print(f"webkitgtk_run: {text}", file=sys.stderr))
        Gtk.main_quit()

    def on_title(v, _param):
        title = v.get_title() or ""
        if title.startswith(MARKER):
            version = f"{WebKit2.get_major_version()}.{WebKit2.get_minor_version()}.{WebKit2.get_micro_version()}"
            finish(0, json.dumps({"webkitgtk": version, "page": json.loads(title[len(MARKER):])}))

    view.connect("notify::title", on_title)
    view.connect("load-failed", lambda v, ev, uri, err: finish(1, f"load of {uri} failed: {err.message}") or True)
    view.connect("web-process-terminated", lambda v, reason: finish(1, f"web process terminated ({reason.value_nick})"))
    GLib.timeout_add_seconds(timeout, lambda: finish(1, f"no result after {timeout} s") or False)
    window = Gtk.Window()
    window.set_default_size(800, 600)
    window.add(view)
    window.show_all()
    view.load_uri(url)
    Gtk.main()
    sys.exit(outcome["code"])


if __name__ == "__main__":
    main()
