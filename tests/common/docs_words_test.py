#!/usr/bin/env python3
"""Docs and comments describe the system, not the history of the work on it (label unit).

1. README.md, every Markdown file under docs/ and every source, build and script file (*.cc, *.h, *.cu, *.py, *.sh,
   *.toml, *.cmake, CMakeLists.txt, scripts/, ...) must not name tracker numbers ("issue 14", "#14"), work sessions
   ("the sixth session"), helpers or leads of the work, work branches (branch `psperf`) or machines that were lent:
   they name the feature, the date and the commit instead. A "session" of ZeroMQ, CurveZMQ, ZAP or SLURM is
   legitimate, and so are "round robin", "rounding" and a helper function.
2. Every relative link in README.md and docs/**/*.md resolves to an existing file, and a link's #anchor to a heading
   of the Markdown file it names.

It first checks its own patterns on sample lines (those that must be flagged, those that must not), then scans the
tree: the files git tracks or would track (not ignored) when ROOT is a git checkout, else every file under ROOT outside build folders.

  tests/common/docs_words_test.py [--root ROOT] [FILE...]     # FILE...: scan only these (paths relative to ROOT)
Exit 0 when nothing is found, 1 with one line per finding.
"""
import argparse
import os
import re
import subprocess
import sys

ORDINALS = r"(?:first|second|third|fourth|fifth|sixth|seventh|eighth|ninth|tenth|eleventh|twelfth)"
# Work-branch names that are not also ordinary words (from `git log --all`: merges of work branches).
WORK_BRANCHES = r"(?:psperf|pyfast|cudalazy|mergetest|pytrace|pymetrics)"

# (name, pattern) flagged in every scanned file.
PATTERNS = [
    ("tracker number", r"\bissues? #?\d+\b"),
    ("tracker number", r"(?<![\w&#/$])#\d{1,4}(?![\w])"),
    ("tracker reference", r"\b(?:the|this|that) issue's\b"),
    ("work session", r"\b" + ORDINALS + r" session\b"),
    ("work session", r"\b(?:this|that|the same|the next|the previous|the last|an earlier|a later) session's\b"),
    ("work session", r"\bhelper sessions?\b"),
    ("helper of the work", r"\b(?:other|another) helpers?\b"),
    ("helper of the work", r"\bhelpers? (?:were|was) (?:building|testing|compiling|running)\b"),
    ("lead of the work", r"\bthe lead(?:'s)?\b(?! time)"),
    ("work branch", r"\bwork branch(?:es)?\b"),
    ("work branch", r"\bbranch(?:es)? [`'\"][\w-]+"),
    ("work branch", r"\b" + WORK_BRANCHES + r"\b"),
    ("work tree", r"(?<![\w-])wt-(?:docs|stall|pymetrics|main)\b"),
    ("lent machine", r"\blent\b"),
    ("lent machine", r"\btask was (?:not )?lent\b"),
    ("device call", r"\bGPU calls? \d+\b"),
    ("device call", r"\b(?:fourth|fifth|sixth|seventh|eighth|ninth|tenth) call\b"),
    ("round of work", r"\bround \d+ of (?:the )?work\b"),
]
# Flagged in Markdown only (in code, `round 0` is a loop's iteration).
MARKDOWN_PATTERNS = [
    ("round of work", r"\bround \d+\b"),
    ("work branch", r"\b(?:on|of|from|in) (?:this|that) branch\b"),
]
# "session" alone is flagged unless the line is about a legitimate session.
SESSION = re.compile(r"\bsessions?\b", re.I)
LEGIT_SESSION = re.compile(r"zeromq|zmq|curve|\bzap\b|slurm|salloc|srun|sbatch|\bssh\b|tmux|\btls\b|\blogin\b|"
                           r"interactive|terminal|interpreter|\bgdb\b|"
                           r"worker/session|workersession|worker session", re.I)

COMPILED = [(n, re.compile(p, re.I)) for n, p in PATTERNS]
COMPILED_MD = [(n, re.compile(p, re.I)) for n, p in MARKDOWN_PATTERNS]

MUST_FLAG = [
    ("x.md", "measured in the sixth session (2026-11-26)"),
    ("x.md", "## GPU (issue 12): measured on an H100"),
    ("x.cc", "// see issue 14"),
    ("x.py", "# fixes #14"),
    ("x.md", "Issue 18's targets against this table"),
    ("x.md", "the issue's stretch goal"),
    ("x.md", "on the GPU machine lent to this task"),
    ("x.md", "this task was not lent a machine"),
    ("x.md", "branch `psperf`, 2026-11-26"),
    ("x.sh", "# measured on psperf"),
    ("x.md", "Other helpers were building and testing"),
    ("x.md", "a helper session measured it"),
    ("x.md", "the lead's idle re-measurement decides"),
    ("x.md", "in round 3 of the work"),
    ("x.md", "Round 2 found two defects"),
    ("x.md", "Measured in a sixth call (main at 9d5e167)"),
    ("x.md", "GPU call 6 (H100)"),
    ("x.cc", "// kept on the work branch until merged"),
    ("x.md", "not touched on this branch"),
    ("x.md", "re-measured in this session"),
    ("x.md", "this session's main, idle 2-core VM"),
    ("x.h", "// copied from /work/wt-docs"),
]
MUST_PASS = [
    ("worker/x.cc", '#include "worker/session/job_events.h"'),
    ("x.md", "a CurveZMQ session authenticates every peer"),
    ("x.md", "the ZAP handler of the session"),
    ("x.md", "inside a SLURM session started with salloc"),
    ("x.md", "workers over the GPUs, round robin"),
    ("x.md", "the same rounding as a separate division"),
    ("x.cc", "EXPECT_EQ(h[0], 3.0f);  // the fill of round 0, downloaded in round 1"),
    ("x.cc", "// Helpers shared by the libFuzzer targets"),
    ("x.h", "// Test helper: a fresh temporary directory"),
    ("x.py", 'colors = ["#444444", "#bbbb00"]'),
    ("x.md", "issues the pushes; each push is issued once"),
    ("x.md", "the slowest worker's lead"),
    ("x.md", "rounds 1.29, 1.08, 1.38 with --rounds 3"),
    ("x.md", "run 3 of the benchmark"),
    ("x.sh", 'echo "$#" args; set -- "$1"'),
    ("x.md", "see [PROTOCOL.md](PROTOCOL.md#encodings)"),
    ("x.cc", "// the branch taken when the slice is inline"),
]

SOURCE_EXT = (".cc", ".h", ".hpp", ".c", ".cu", ".cuh", ".py", ".sh", ".toml", ".cmake", ".capnp", ".sbatch", ".pbs",
              ".md")
SKIP_DIRS = {".git", "__pycache__", "runs", "out", ".gpubundle"}


def findings_in_line(path, line):
    """(name, matched text) for each forbidden word in one line of the file at path."""
    found = []
    patterns = COMPILED + (COMPILED_MD if path.endswith(".md") else [])
    for name, rx in patterns:
        m = rx.search(line)
        if m:
            found.append((name, m.group(0)))
    m = SESSION.search(line)
    if m and not LEGIT_SESSION.search(line):
        found.append(("work session", m.group(0)))
    return found


def self_check():
    errors = []
    for path, line in MUST_FLAG:
        if not findings_in_line(path, line):
            errors.append(f"self-check: not flagged: {line!r}")
    for path, line in MUST_PASS:
        f = findings_in_line(path, line)
        if f:
            errors.append(f"self-check: wrongly flagged ({f[0][0]}: {f[0][1]!r}): {line!r}")
    return errors


def scanned(rel):
    """Whether the words check reads this file (relative path, '/' separators)."""
    if rel == "tests/common/docs_words_test.py":
        return False
    if rel.startswith("tests/fuzz/corpus/"):
        return False  # fuzz inputs, not prose
    name = rel.rsplit("/", 1)[-1]
    if rel.endswith(".md"):
        return rel == "README.md" or rel.startswith("docs/") or "/" in rel
    if name == "CMakeLists.txt" or rel.startswith("scripts/") or rel.startswith(".ci/"):
        return True
    return rel.endswith(SOURCE_EXT)


def list_files(root):
    try:
        out = subprocess.run(["git", "-C", root, "ls-files", "-z", "--cached", "--others", "--exclude-standard"], capture_output=True, check=True).stdout
        files = [f for f in out.decode().split("\0") if f]
        if files:
            return [f for f in files if os.path.isfile(os.path.join(root, f))]
    except (OSError, subprocess.CalledProcessError):
        pass
    files = []
    for d, dirs, names in os.walk(root):
        dirs[:] = [x for x in dirs if x not in SKIP_DIRS and not x.startswith("build")]
        for n in names:
            files.append(os.path.relpath(os.path.join(d, n), root).replace(os.sep, "/"))
    return files


def read_text(path):
    with open(path, "rb") as f:
        data = f.read()
    if b"\0" in data[:4096]:
        return None
    return data.decode("utf-8", errors="replace")


def check_words(root, files):
    errors = []
    for rel in files:
        if not scanned(rel):
            continue
        text = read_text(os.path.join(root, rel))
        if text is None:
            continue
        for no, line in enumerate(text.split("\n"), 1):
            for name, word in findings_in_line(rel, line):
                errors.append(f"{rel}:{no}: {name}: {word!r}: name the feature, the date and the commit instead")
    return errors


FENCE = re.compile(r"^\s*```.*?^\s*```", re.S | re.M)
INLINE_CODE = re.compile(r"`[^`\n]*`")
LINK = re.compile(r"!?\[[^\]\n]*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
HEADING = re.compile(r"^#{1,6}\s+(.*?)\s*#*\s*$", re.M)


def slugs(md_text):
    """GitHub's anchors of a Markdown file's headings."""
    seen = {}
    out = set()
    for h in HEADING.findall(FENCE.sub("", md_text)):
        h = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", h)  # a link in a heading keeps its text
        s = re.sub(r"[^\w\- ]", "", h.lower()).replace(" ", "-")
        n = seen.get(s, 0)
        seen[s] = n + 1
        out.add(s if n == 0 else f"{s}-{n}")
    return out


def check_links(root, files):
    errors = []
    docs = [f for f in files if f == "README.md" or (f.startswith("docs/") and f.endswith(".md"))]
    for rel in docs:
        text = read_text(os.path.join(root, rel))
        body = INLINE_CODE.sub("", FENCE.sub("", text))
        for target in LINK.findall(body):
            if re.match(r"^[a-z][a-z0-9+.-]*:", target, re.I):
                continue  # http:, https:, mailto:
            path, _, anchor = target.partition("#")
            dest = os.path.normpath(os.path.join(os.path.dirname(os.path.join(root, rel)), path)) if path else \
                os.path.join(root, rel)
            if not os.path.exists(dest):
                errors.append(f"{rel}: link to {target}: {os.path.relpath(dest, root)} does not exist")
                continue
            if anchor and dest.endswith(".md") and os.path.isfile(dest):
                if anchor.lower() not in slugs(read_text(dest)):
                    errors.append(f"{rel}: link to {target}: no heading with anchor #{anchor} there")
    return errors


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--root", default=os.path.normpath(os.path.join(os.path.dirname(__file__), "..", "..")))
    ap.add_argument("files", nargs="*")
    args = ap.parse_args()
    errors = self_check()
    files = args.files or list_files(args.root)
    errors += check_words(args.root, files)
    errors += check_links(args.root, files)
    for e in errors:
        print(e)
    scanned_n = sum(1 for f in files if scanned(f))
    if errors:
        print(f"docs_words_test: {len(errors)} finding(s) in {scanned_n} files")
        return 1
    print(f"docs_words_test: {scanned_n} files, no history words, every relative link resolves")
    return 0


if __name__ == "__main__":
    sys.exit(main())
