#!/usr/bin/env python3
"""Every repository path the hand-written docs name exists.

Usage: doc_paths.py [REPO_ROOT]   (default: two folders above this script)

Scans DOCS for
  - words that start with one of the top folders in TOPS (`src/verbs/qp.cc`,
    tests/roce/capture.sh, bench/results/), wherever they stand: in code
    spans, in prose, in link targets;
  - relative Markdown link targets, e.g. (PERFORMANCE-NOTES.md), resolved
    against the document's own folder.
A path passes if it names a file or folder, or is the stem of a file
(`src/fabric/udp/fault_link` for fault_link.h/.cc, `tests/roce/rc_stress` for
the test program built from rc_stress.cc). A placeholder cuts the path short:
`bench/results/<UTC date-time>.json` checks bench/results/. Paths that only
exist once something has run are listed in GENERATED.

Exit status 1, with file:line and the path, if any is missing.
"""
import os
import re
import sys

DOCS = ["README.md", "docs/DESIGN.md", "docs/PERFORMANCE-NOTES.md"]
TOPS = ["src", "tests", "bench", "tools", "examples", "docs", "scripts", "include"]
# Outputs, not sources: named by the docs, absent from a fresh checkout.
GENERATED = {
    "bench/results/tmp/",  # bench/run.py --quick writes here (git-ignored)
}

# A path word: one of TOPS, a slash, then path characters. Not preceded by a
# path character, so /dev/shm/... and https://host/docs/... are not taken.
PATH = re.compile(r"(?<![\w./-])((?:%s)/[\w./<>{}*+-]*)" % "|".join(TOPS))
LINK = re.compile(r"\]\(([^)\s]+)\)")
PLACEHOLDER = re.compile(r"[<{*]")


def normalise(word):
    """The part of a path word to check, or None when nothing is left."""
    cut = PLACEHOLDER.search(word)
    if cut:
        word = word[:cut.start()]
        word = word[:word.rfind("/") + 1]  # the folder the placeholder is in
    word = word.rstrip(".,:;'")
    return word or None


def exists(root, path):
    full = os.path.join(root, path)
    if os.path.exists(full):
        return True
    folder, stem = os.path.split(full.rstrip("/"))
    if path.endswith("/") or not os.path.isdir(folder):
        return False
    return any(os.path.splitext(f)[0] == stem for f in os.listdir(folder))


def check(root):
    missing = []
    for doc in DOCS:
        path = os.path.join(root, doc)
        if not os.path.isfile(path):
            missing.append((doc, 0, doc + " (the document itself)"))
            continue
        with open(path, encoding="utf-8") as fh:
            lines = fh.read().split("\n")
        for n, line in enumerate(lines, 1):
            for m in PATH.finditer(line):
                p = normalise(m.group(1))
                if p and p not in GENERATED and not exists(root, p):
                    missing.append((doc, n, p))
            for m in LINK.finditer(line):
                target = m.group(1).split("#")[0]
                if not target or re.match(r"^[a-z]+:", target) or target.startswith("/"):
                    continue
                if PATH.match(target):
                    continue  # already checked as a path word
                rel = os.path.normpath(os.path.join(os.path.dirname(doc), target))
                if not exists(root, rel):
                    missing.append((doc, n, target + " (link)"))
    return missing


def main():
    root = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else
                           os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
    missing = check(root)
    for doc, n, p in missing:
        print("doc_paths: %s:%d names %s, which does not exist" % (doc, n, p))
    if missing:
        return 1
    print("doc_paths: ok (%s)" % ", ".join(DOCS))
    return 0


if __name__ == "__main__":
    sys.exit(main())
