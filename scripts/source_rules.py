#!/usr/bin/env python3
"""Checks two rules of the source tree.

lines: no source file over 800 lines. Scanned: crates/*/src, crates/*/tests, worker/src,
  web/src, packages/*/src and packages/*/lib (the JS package keeps its code in lib/), files
  ending .rs, .ts, .tsx, .mts, .cts, .js, .mjs, .cjs. Never scanned: generated or fetched
  directories (node_modules, pkg, target, dist, .wrangler) and hidden ones.

io: the library crates do not read the environment or print: no `std::env`, `env::var`,
  `print!`, `println!`, `eprint!`, `eprintln!` or `dbg!` in the src/ of any crate under
  crates/ except edgepatch-cli and edgepatch-testkit (a binary, and test support). What a
  library needs from its caller comes as options, what it reports goes to a callback the
  caller passes. Comments and string literals are not read; test-only code is: an item after
  `#[cfg(test)]` (a `mod tests { ... }`, a function), and the files of a `#[cfg(test)] mod
  NAME;`.

Each violation prints as `path:line: rule: detail`; the exit status is 1 if there is any that
the allow-list does not cover.

Usage:
  python3 scripts/source_rules.py [--allow FILE] [--root DIR]
  python3 scripts/source_rules.py --self-test

--allow FILE: each non-comment line is `PATH: RULE` (RULE `lines` or `io`, PATH relative to the
root): that file may break that rule (it is printed as allowed). Default:
scripts/source_rules.allow if it exists.
--root DIR: the repository (default: the parent of this script's directory).
"""

import argparse
import glob
import os
import re
import sys
import tempfile
import unittest

MAX_LINES = 800
SOURCE_EXTENSIONS = (".rs", ".ts", ".tsx", ".mts", ".cts", ".js", ".mjs", ".cjs")
LINE_ROOTS = ["crates/*/src", "crates/*/tests", "worker/src", "web/src", "packages/*/src", "packages/*/lib"]
SKIPPED_DIRS = {"node_modules", "pkg", "target", "dist", ".wrangler"}
# Crates under crates/ that may read the environment and print.
NOT_LIBRARIES = {"edgepatch-cli", "edgepatch-testkit"}
IO_PATTERNS = [
    (re.compile(r"\bstd\s*::\s*env\b"), "std::env"),
    (re.compile(r"\bstd\s*::\s*\{[^}]*\benv\b"), "std::env"),
    (re.compile(r"\benv\s*::\s*var(_os)?\b"), "env::var"),
    (re.compile(r"(?<![\w:])(e?print(ln)?)\s*!"), None),
    (re.compile(r"(?<![\w:])dbg\s*!"), "dbg!"),
]
TEST_ONLY = re.compile(r"#\s*\[\s*cfg\s*\(\s*test\s*\)\s*\]")


# One Rust lexer for both checks: comments and literals blanked, offsets and newlines kept.
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from module_cycles import strip_comments_and_strings  # noqa: E402


def test_only_spans(code):
    """(start, end) offsets of the items after `#[cfg(test)]` in stripped code, and the names
    of the out-of-line modules declared test-only (`#[cfg(test)] mod NAME;`)."""
    spans, modules = [], []
    for m in TEST_ONLY.finditer(code):
        # The item runs to its first `;` or to the brace matching its first `{`.
        brace, semi = code.find("{", m.end()), code.find(";", m.end())
        if brace < 0 and semi < 0:
            continue
        if semi >= 0 and (brace < 0 or semi < brace):
            decl = re.match(r"(\s*#\s*\[[^\]]*\])*\s*(pub(\([^)]*\))?\s+)?mod\s+(\w+)\s*;", code[m.end():semi + 1])
            if decl:
                modules.append(decl.group(4))
            spans.append((m.start(), semi + 1))
            continue
        depth, j = 0, brace
        while j < len(code):
            if code[j] == "{":
                depth += 1
            elif code[j] == "}":
                depth -= 1
                if depth == 0:
                    break
            j += 1
        spans.append((m.start(), j + 1))
    return spans, modules


def io_violations(text):
    """(line, detail) of each environment read or print outside test-only code, and the
    out-of-line test-only modules the file declares."""
    code = strip_comments_and_strings(text)
    spans, modules = test_only_spans(code)
    by_line = {}
    for pattern, name in IO_PATTERNS:
        for m in pattern.finditer(code):
            if any(a <= m.start() < b for a, b in spans):
                continue
            line = code.count("\n", 0, m.start()) + 1
            by_line.setdefault(line, set()).add(name or m.group(1) + "!")
    return [(line, ", ".join(sorted(names))) for line, names in sorted(by_line.items())], modules


def source_files(root, pattern):
    """Source files under the directories matching `pattern`, relative to root, sorted."""
    files = []
    for top in sorted(glob.glob(os.path.join(root, pattern))):
        for dirpath, dirnames, filenames in os.walk(top):
            dirnames[:] = sorted(d for d in dirnames if d not in SKIPPED_DIRS and not d.startswith("."))
            for f in sorted(filenames):
                if f.endswith(SOURCE_EXTENSIONS) and not f.endswith(".d.ts"):
                    files.append(os.path.relpath(os.path.join(dirpath, f), root).replace(os.sep, "/"))
    return files


def check_lines(root):
    found = []
    for pattern in LINE_ROOTS:
        for path in source_files(root, pattern):
            with open(os.path.join(root, path), encoding="utf-8", errors="replace") as f:
                n = sum(1 for _ in f)
            if n > MAX_LINES:
                found.append((path, n, "lines", f"{n} lines (at most {MAX_LINES})"))
    return found


def check_io(root):
    found, test_modules = [], set()
    for crate in sorted(glob.glob(os.path.join(root, "crates", "*"))):
        if os.path.basename(crate) in NOT_LIBRARIES or not os.path.isfile(os.path.join(crate, "Cargo.toml")):
            continue
        for path in source_files(root, os.path.relpath(os.path.join(crate, "src"), root)):
            if not path.endswith(".rs"):
                continue
            with open(os.path.join(root, path), encoding="utf-8", errors="replace") as f:
                violations, modules = io_violations(f.read())
            # `mod NAME;` in lib.rs, main.rs or mod.rs is a sibling (NAME.rs or NAME/mod.rs);
            # in a/b.rs it is under a/b/.
            here = path[:-len(".rs")]
            base = os.path.dirname(path) if os.path.basename(here) in ("lib", "main", "mod") else here
            test_modules.update(f"{base}/{name}" for name in modules)
            found.extend((path, line, "io", detail) for line, detail in violations)
    # The files of a test-only module, and of the modules it declares, are test-only too.
    return [v for v in found if not any(v[0] == m + ".rs" or v[0].startswith(m + "/") for m in test_modules)]


def read_allow(path):
    allowed = set()
    with open(path, encoding="utf-8") as f:
        for raw in f:
            line = raw.split("#", 1)[0].strip()
            if not line:
                continue
            file, sep, rule = line.rpartition(":")
            if not sep or rule.strip() not in ("lines", "io"):
                raise SystemExit(f"{path}: {raw.rstrip()!r}: expected `PATH: lines` or `PATH: io`")
            allowed.add((file.strip(), rule.strip()))
    return allowed


def check(root, allowed):
    """Prints every violation; returns how many the allow-list does not cover."""
    violations = sorted(check_lines(root)) + sorted(check_io(root))
    failures = 0
    for path, line, rule, detail in violations:
        if (path, rule) in allowed:
            print(f"{path}:{line}: {rule}: {detail} (allowed)")
        else:
            print(f"{path}:{line}: {rule}: {detail}")
            failures += 1
    if failures:
        print(f"source rules: {failures} violation{'s' if failures != 1 else ''}")
    else:
        print("source rules: no violation")
    return failures


class SelfTest(unittest.TestCase):
    def tree(self, files):
        tmp = tempfile.TemporaryDirectory()
        self.addCleanup(tmp.cleanup)
        root = tmp.name
        for path, text in files.items():
            full = os.path.join(root, path)
            os.makedirs(os.path.dirname(full), exist_ok=True)
            with open(full, "w", encoding="utf-8") as f:
                f.write(text)
        return root

    def test_io_in_library_code_is_found_and_not_in_comments_strings_or_tests(self):
        root = self.tree({
            "crates/lib-a/Cargo.toml": "",
            "crates/lib-a/src/lib.rs": (
                "//! Never eprintln!(\"x\") here.\n"
                "fn f() { let s = \"println!(1)\"; }\n"
                "fn g() { eprintln!(\"timing\"); }\n"
                "fn h() { let v = std::env::var_os(\"X\"); }\n"
                "#[cfg(test)]\nmod tests {\n    fn t() { println!(\"ok\"); dbg!(1); }\n}\n"
                "#[cfg(test)]\nmod more;\n"
                "fn k() { write!(f, \"a\"); }\n"),
            "crates/lib-a/src/more.rs": "mod deeper;\nfn t() { println!(\"test only\"); }\n",
            "crates/lib-a/src/more/deeper.rs": "fn t() { println!(\"test only\"); }\n",
            "crates/lib-a/src/used.rs": "use std::{env, fs};\nfn u() { dbg!(2); }\n",
            "crates/edgepatch-cli/Cargo.toml": "",
            "crates/edgepatch-cli/src/main.rs": "fn main() { println!(\"hi\"); }\n",
        })
        got = [(p, line, d) for p, line, _, d in check_io(root)]
        self.assertEqual(sorted(got), [
            ("crates/lib-a/src/lib.rs", 3, "eprintln!"),
            ("crates/lib-a/src/lib.rs", 4, "env::var, std::env"),
            ("crates/lib-a/src/used.rs", 1, "std::env"),
            ("crates/lib-a/src/used.rs", 2, "dbg!"),
        ])

    def test_long_files_are_found_outside_generated_directories(self):
        long = "x\n" * (MAX_LINES + 1)
        root = self.tree({
            "crates/a/src/big.rs": long,
            "crates/a/src/ok.rs": "x\n" * MAX_LINES,
            "crates/a/pkg/gen.js": long,
            "worker/src/node_modules/dep.js": long,
            "web/src/types.d.ts": long,
            "web/src/app.ts": long,
            "web/src/data.json": long,
        })
        self.assertEqual([v[0] for v in check_lines(root)], ["crates/a/src/big.rs", "web/src/app.ts"])

    def test_the_allow_list_covers_a_file_and_rule(self):
        root = self.tree({"worker/src/big.ts": "x\n" * (MAX_LINES + 1), "allow": "# known\nworker/src/big.ts: lines\n"})
        self.assertEqual(check(root, read_allow(os.path.join(root, "allow"))), 0)
        self.assertEqual(check(root, set()), 1)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--allow", help="a file naming the known violations, `PATH: RULE` per line")
    parser.add_argument("--root", default=os.path.dirname(os.path.dirname(os.path.abspath(__file__))), help="the repository")
    parser.add_argument("--self-test", action="store_true", help="run the script's own tests")
    args = parser.parse_args()
    if args.self_test:
        result = unittest.TextTestRunner(verbosity=1).run(unittest.defaultTestLoader.loadTestsFromTestCase(SelfTest))
        return 0 if result.wasSuccessful() else 1
    allow = args.allow or os.path.join(args.root, "scripts", "source_rules.allow")
    allowed = read_allow(allow) if os.path.exists(allow) else set()
    return 1 if check(args.root, allowed) else 0


if __name__ == "__main__":
    sys.exit(main())
