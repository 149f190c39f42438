#!/usr/bin/env python3
"""Finds import cycles between the top-level modules of Rust crates.

For each crate (a directory with src/lib.rs or src/main.rs) the script reads every source
file reachable through `mod` declarations, and records an edge A -> B whenever code in
top-level module A names top-level module B through `use crate::...`, a `crate::B::` path, or
a `super::` path that climbs out to the crate root. Submodules count as their top-level module;
the crate root file itself is not a node (it declares and re-exports everything), and
test-only code (`#[cfg(test)] mod ...`) is left out, as it is not part of the built crate. Names the
root re-exports (`pub use error::Error;` in lib.rs, then `crate::Error` elsewhere) count as
the module they come from.

It prints every cycle (a strongly connected component of more than one module), with one
source line for each edge inside it, and exits 1 if there is any cycle that the allow-list
does not cover.

Usage:
  python3 scripts/module_cycles.py [--allow FILE] [--graph] CRATE_DIR...
  python3 scripts/module_cycles.py --self-test

--allow FILE: each non-comment line names a crate and the modules of one known cycle,
`CRATE: MODULE MODULE...`; a cycle whose modules are all within one line for its crate passes
(it is printed as allowed). A cycle that reaches any module outside every line fails.
--graph: also print every edge between modules.
"""

import argparse
import os
import re
import sys
import tempfile
import unittest

IDENT = r"[A-Za-z_][A-Za-z0-9_]*"
TEST_ONLY = re.compile(r"#\[cfg\(\s*test\s*\)\]")


def strip_comments_and_strings(text):
    """Replaces comments, string and char literals with spaces, keeping newlines and offsets."""
    out = []
    i = 0
    n = len(text)

    def blank(s):
        return "".join(c if c == "\n" else " " for c in s)

    while i < n:
        c = text[i]
        if text.startswith("//", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
            out.append(blank(text[i:j]))
            i = j
        elif text.startswith("/*", i):
            depth = 0
            j = i
            while j < n:
                if text.startswith("/*", j):
                    depth += 1
                    j += 2
                elif text.startswith("*/", j):
                    depth -= 1
                    j += 2
                    if depth == 0:
                        break
                else:
                    j += 1
            out.append(blank(text[i:j]))
            i = j
        elif c in "rb" and re.match(r'b?r#*"', text[i:i + 300]) and (i == 0 or not re.match(r"\w", text[i - 1])):
            m = re.match(r'b?r(#*)"', text[i:])
            hashes = m.group(1)
            end = text.find('"' + hashes, i + len(m.group(0)))
            end = n if end < 0 else end + 1 + len(hashes)
            out.append(blank(text[i:end]))
            i = end
        elif c == '"':
            j = i + 1
            while j < n and text[j] != '"':
                j += 2 if text[j] == "\\" else 1
            out.append(blank(text[i:j + 1]))
            i = j + 1
        elif c == "'":
            # A char literal ('a', '\n', '\u{1F600}'), otherwise a lifetime or label.
            m = re.match(r"'(\\(u\{[0-9a-fA-F]+\}|x[0-9a-fA-F]{2}|.)|[^\\'])'", text[i:i + 16])
            if m:
                out.append(blank(m.group(0)))
                i += len(m.group(0))
            else:
                out.append(c)
                i += 1
        else:
            out.append(c)
            i += 1
    return "".join(out)


def split_top(s, sep=","):
    """Splits s on sep at brace depth 0."""
    parts, depth, cur = [], 0, []
    for c in s:
        if c == "{":
            depth += 1
        elif c == "}":
            depth -= 1
        if c == sep and depth == 0:
            parts.append("".join(cur))
            cur = []
        else:
            cur.append(c)
    parts.append("".join(cur))
    return [p.strip() for p in parts if p.strip()]


def expand_use_tree(tree):
    """Expands a use tree (`crate::{a::b, c as d}`) into lists of path segments."""
    tree = re.sub(r"\s+", "", tree)
    if tree.startswith("::"):
        tree = tree[2:]
    brace = tree.find("{")
    if brace < 0:
        return [[seg for seg in tree.split("::") if seg]]
    prefix = tree[:brace]
    inner = tree[brace + 1:tree.rfind("}")]
    head = [seg for seg in prefix.split("::") if seg]
    paths = []
    for part in split_top(inner):
        for sub in expand_use_tree(part):
            paths.append(head + sub)
    if not paths:
        paths.append(head)
    return paths


def use_statements(code):
    """Yields (start offset, use tree text) for every `use` item in stripped code."""
    for m in re.finditer(r"\buse\s+([^;]*);", code):
        tree = m.group(1)
        # Drop `as alias` before squeezing whitespace (expand_use_tree removes spaces).
        tree = re.sub(r"\s+as\s+" + IDENT, "", tree)
        yield m.start(), m.end(), tree


def inline_mod_ranges(code):
    """Returns (start, end, name) for each inline `mod name { ... }` block."""
    ranges = []
    for m in re.finditer(r"\bmod\s+(" + IDENT + r")\s*\{", code):
        depth = 0
        j = m.end() - 1
        while j < len(code):
            if code[j] == "{":
                depth += 1
            elif code[j] == "}":
                depth -= 1
                if depth == 0:
                    break
            j += 1
        ranges.append((m.start(), j, m.group(1)))
    return ranges


def line_of(text, offset):
    return text.count("\n", 0, offset) + 1


class Crate:
    def __init__(self, crate_dir):
        self.dir = crate_dir
        src = os.path.join(crate_dir, "src")
        root = os.path.join(src, "lib.rs")
        if not os.path.exists(root):
            root = os.path.join(src, "main.rs")
        self.root = root
        self.files = {}  # path -> module path (list of names)
        self.top_modules = set()
        self.reexports = {}  # name re-exported by the root -> top-level module
        self.edges = {}  # (a, b) -> (file, line number, source line)
        if os.path.exists(root):
            self._collect(root, [], os.path.dirname(root), is_mod_rs=True)
            self._read_reexports()
            for path, modpath in self.files.items():
                if modpath:
                    self._scan(path, modpath)

    def _collect(self, path, modpath, dir_for_children, is_mod_rs):
        if path in self.files:
            return
        self.files[path] = modpath
        if len(modpath) == 1:
            self.top_modules.add(modpath[0])
        with open(path, encoding="utf-8") as f:
            code = strip_comments_and_strings(f.read())
        inline = inline_mod_ranges(code)
        for m in re.finditer(r"((?:#\[[^\]]*\]\s*)*)(?:pub(?:\([^)]*\))?\s+)?mod\s+(" + IDENT + r")\s*;", code):
            attrs, name = m.group(1), m.group(2)
            if TEST_ONLY.search(attrs):
                continue
            prefix = [r[2] for r in inline if r[0] < m.start() < r[1]]
            base = dir_for_children if is_mod_rs else os.path.join(
                os.path.dirname(path), os.path.splitext(os.path.basename(path))[0])
            base = os.path.join(base, *prefix)
            pm = re.search(r'#\[path\s*=\s*"([^"]*)"\]', attrs)
            candidates = [os.path.join(os.path.dirname(path), pm.group(1))] if pm else [
                os.path.join(base, name + ".rs"), os.path.join(base, name, "mod.rs")]
            for cand in candidates:
                if os.path.exists(cand):
                    child_is_mod_rs = os.path.basename(cand) == "mod.rs"
                    self._collect(cand, modpath + prefix + [name], os.path.dirname(cand), child_is_mod_rs)
                    break
        if not modpath:
            for m in re.finditer(r"\bmod\s+(" + IDENT + r")\s*\{", code):
                self.top_modules.add(m.group(1))

    def _read_reexports(self):
        with open(self.root, encoding="utf-8") as f:
            code = strip_comments_and_strings(f.read())
        for m in re.finditer(r"\bpub(?:\([^)]*\))?\s+use\s+([^;]*);", code):
            raw = m.group(1)
            aliases = dict((b, a) for a, b in re.findall(r"(" + IDENT + r")\s+as\s+(" + IDENT + r")", raw))
            for path in expand_use_tree(re.sub(r"\s+as\s+" + IDENT, "", raw)):
                segs = [s for s in path if s not in ("crate", "self")]
                if segs and segs[0] in self.top_modules and len(segs) > 1:
                    name = segs[-1]
                    self.reexports[name] = segs[0]
                    for alias, orig in aliases.items():
                        if orig == name:
                            self.reexports[alias] = segs[0]

    def _resolve(self, base, segs):
        """Returns the top-level module a path names, or None."""
        if not segs:
            return None
        cur = list(base)
        rest = list(segs)
        if rest[0] in ("crate", "$crate"):
            cur, rest = [], rest[1:]
        elif rest[0] in ("super", "self"):
            while rest and rest[0] in ("super", "self"):
                if rest[0] == "super":
                    cur = cur[:-1]
                rest = rest[1:]
        else:
            return None  # an external crate, a prelude name or a local name
        full = cur + rest
        if not full:
            return None
        if full[0] in self.top_modules:
            return full[0]
        if not cur and len(full) == 1 and full[0] in self.reexports:
            return self.reexports[full[0]]
        return None

    def _scan(self, path, modpath):
        with open(path, encoding="utf-8") as f:
            text = f.read()
        lines = text.splitlines()
        code = strip_comments_and_strings(text)
        inline = inline_mod_ranges(code)
        src = modpath[0]

        def base_at(offset):
            return modpath + [r[2] for r in inline if r[0] < offset < r[1]]

        def add(dst, offset):
            if dst and dst != src and (src, dst) not in self.edges:
                ln = line_of(code, offset)
                self.edges[(src, dst)] = (path, ln, lines[ln - 1].strip())

        # Test-only modules (`#[cfg(test)] mod tests { ... }`) are not part of the build.
        code = list(code)
        for m in re.finditer(r"#\[cfg\(\s*test\s*\)\]\s*(?:#\[[^\]]*\]\s*)*(?:pub(?:\([^)]*\))?\s+)?mod\s+" + IDENT + r"\s*\{", "".join(code)):
            for start, end, _ in inline:
                if start >= m.start() and start < m.end():
                    for k in range(m.start(), end + 1):
                        if code[k] != "\n":
                            code[k] = " "
        code = "".join(code)
        masked = list(code)
        for start, end, tree in use_statements(code):
            for segs in expand_use_tree(tree):
                add(self._resolve(base_at(start), segs), start)
            for k in range(start, end):
                if masked[k] != "\n":
                    masked[k] = " "
        masked = "".join(masked)
        chain = r"(?<![\w:])(\$?crate|super|self)((?:\s*::\s*(?:super|" + IDENT + r"))+)"
        for m in re.finditer(chain, masked):
            segs = [m.group(1)] + [s.strip() for s in m.group(2).split("::") if s.strip()]
            add(self._resolve(base_at(m.start()), segs), m.start())


def cycles(nodes, edges):
    """Tarjan's strongly connected components of more than one node, each sorted."""
    graph = {n: sorted(b for (a, b) in edges if a == n) for n in nodes}
    index, low, stack, on_stack, result = {}, {}, [], set(), []
    counter = [0]

    def strongconnect(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on_stack.add(v)
        for w in graph.get(v, []):
            if w not in index:
                strongconnect(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                result.append(sorted(comp))

    sys.setrecursionlimit(10000)
    for v in sorted(nodes):
        if v not in index:
            strongconnect(v)
    return sorted(result)


def read_allow(path):
    """Reads `CRATE: MODULE MODULE...` lines (a line without `CRATE:` holds for every crate)."""
    allowed = []
    with open(path, encoding="utf-8") as f:
        for line in f:
            line = line.split("#", 1)[0].strip()
            if not line:
                continue
            crate, _, modules = line.rpartition(":")
            allowed.append((crate.strip() or None, set(modules.split())))
    return allowed


def check(crate_dirs, allowed=(), show_graph=False, out=sys.stdout):
    """Prints the cycles of each crate; returns the number of cycles no allow-list line covers."""
    failures = 0
    for crate_dir in crate_dirs:
        crate = Crate(crate_dir)
        if not crate.files:
            continue
        name = os.path.basename(os.path.normpath(crate_dir))
        if show_graph:
            for (a, b), (path, ln, src) in sorted(crate.edges.items()):
                print(f"{name}: {a} -> {b}    {os.path.relpath(path)}:{ln}: {src}", file=out)
        found = cycles(crate.top_modules, crate.edges)
        for comp in found:
            ok = any(crate_name in (None, name) and set(comp) <= allow for crate_name, allow in allowed)
            verdict = "allowed cycle" if ok else "CYCLE"
            failures += 0 if ok else 1
            print(f"{name}: {verdict} between modules: {' '.join(comp)}", file=out)
            members = set(comp)
            for (a, b), (path, ln, src) in sorted(crate.edges.items()):
                if a in members and b in members:
                    print(f"    {a} -> {b}    {os.path.relpath(path)}:{ln}: {src}", file=out)
        if not found:
            print(f"{name}: no import cycle between its {len(crate.top_modules)} modules", file=out)
    return failures


class SelfTest(unittest.TestCase):
    def write_tree(self, files):
        root = tempfile.mkdtemp()
        for rel, body in files.items():
            path = os.path.join(root, rel)
            os.makedirs(os.path.dirname(path), exist_ok=True)
            with open(path, "w", encoding="utf-8") as f:
                f.write(body)
        return root

    def run_check(self, root, allowed=()):
        import io
        out = io.StringIO()
        return check([root], allowed, out=out), out.getvalue()

    def test_planted_cycle_is_found(self):
        root = self.write_tree({
            "src/lib.rs": "pub mod a;\nmod b;\npub mod c;\npub use c::Thing;\n",
            # a -> b through a grouped use, b -> c through an expression path in a submodule,
            # c -> a through a root re-export named via super.
            "src/a.rs": "use crate::{b::helper, c};\npub fn f() { helper() }\n",
            "src/b/mod.rs": "mod inner;\npub fn helper() {}\n",
            "src/b/inner.rs": "pub fn g() -> u8 { crate::c::K }\n",
            "src/c.rs": "pub const K: u8 = 1;\npub struct Thing;\nuse super::a::f;\n"
                        "#[cfg(test)]\nmod tests {\n    use crate::b::helper as test_only;\n}\n",
        })
        failures, out = self.run_check(root)
        self.assertEqual(failures, 1, out)
        self.assertIn("CYCLE between modules: a b c", out)
        self.assertIn("b -> c", out)
        self.assertIn("crate::c::K", out)
        self.assertIn("use super::a::f;", out)
        self.assertNotIn("test_only", out)
        name = os.path.basename(root)
        failures, out = self.run_check(root, [(name, {"a", "b", "c", "d"})])
        self.assertEqual(failures, 0, out)
        self.assertIn("allowed cycle", out)
        failures, out = self.run_check(root, [(None, {"a", "b"})])
        self.assertEqual(failures, 1, out)
        failures, out = self.run_check(root, [("another-crate", {"a", "b", "c"})])
        self.assertEqual(failures, 1, out)

    def test_reexported_name_counts_as_its_module(self):
        root = self.write_tree({
            "src/lib.rs": "mod error;\nmod x;\npub use error::{Error, Result as R};\n",
            "src/error.rs": "pub struct Error;\npub type Result = ();\nfn f() { crate::x::g() }\n",
            "src/x.rs": "use crate::R;\npub fn g() {}\n",
        })
        failures, out = self.run_check(root)
        self.assertEqual(failures, 1, out)
        self.assertIn("error x", out)

    def test_acyclic_tree_passes(self):
        root = self.write_tree({
            "src/lib.rs": "pub mod a;\npub mod b;\npub mod c;\n",
            "src/a.rs": "use crate::b::f;\n// use crate::c::x; (a comment)\nconst S: &str = \"crate::c::y\";\n"
                        "#[cfg(test)]\nmod tests {\n    use super::*;\n    use super::super::b::f;\n}\n",
            "src/b.rs": "use crate::c;\npub fn f() -> char { let _ = '\"'; c::x() }\n",
            "src/c.rs": "pub fn x() -> char { 'c' }\nmod inner { use super::x; }\n"
                        "#[cfg(test)]\nmod tests {\n    use crate::a::*;\n}\n#[cfg(test)]\nmod more;\n",
            "src/c/more.rs": "use crate::b::f;\n",
        })
        failures, out = self.run_check(root)
        self.assertEqual(failures, 0, out)
        self.assertIn("no import cycle", out)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("crates", nargs="*", help="crate directories (each with src/lib.rs or src/main.rs)")
    parser.add_argument("--allow", help="a file naming the known cycles, one per line")
    parser.add_argument("--graph", action="store_true", help="print every edge between modules")
    parser.add_argument("--self-test", action="store_true", help="run the script's own tests")
    args = parser.parse_args()
    if args.self_test:
        result = unittest.TextTestRunner(verbosity=1).run(
            unittest.defaultTestLoader.loadTestsFromTestCase(SelfTest))
        return 0 if result.wasSuccessful() else 1
    if not args.crates:
        parser.error("name at least one crate directory")
    allowed = read_allow(args.allow) if args.allow else []
    failures = check(args.crates, allowed, args.graph)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
