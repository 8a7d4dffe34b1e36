#!/usr/bin/python3
"""docs/PERFORMANCE.md's headline table is the newest benchmark report's: every row of the table between the
bench-report markers is a row that tools/bench_table.py renders from the newest docs/results/bench-report-*.json,
with the same figures, in the same order, and the report's rows say whether this run measured them (with the run's
commit and a load average) or carried them over (with a reason and where from).

  bench_table_test.py --root SOURCE_DIR
"""
import argparse
import json
import os
import sys


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--root", default=os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
    root = ap.parse_args().root
    sys.path.insert(0, os.path.join(root, "tools"))
    import bench_table

    errors = []
    report = bench_table.latest_report(os.path.join(root, "docs", "results"))
    if not report:
        print("FAIL: no docs/results/bench-report-*.json")
        return 1
    with open(report) as f:
        doc = json.load(f)
    with open(os.path.join(root, "docs", "PERFORMANCE.md")) as f:
        text = f.read()
    if bench_table.BEGIN not in text.splitlines() or bench_table.END not in text.splitlines():
        print("FAIL: docs/PERFORMANCE.md has no bench-report markers")
        return 1
    table = bench_table.table_lines(text)
    expected = bench_table.render_rows(doc)
    if [bench_table.split_row(x) for x in table[:1]] != [bench_table.HEADER]:
        errors.append("the table's header is not %s" % bench_table.HEADER)
    rows = table[2:]
    for line in rows:
        if line not in expected:
            errors.append("docs/PERFORMANCE.md row not in %s: %s" % (os.path.basename(report), line[:160]))
    if len(rows) != len(expected):
        errors.append("docs/PERFORMANCE.md has %d rows, %s renders %d (regenerate: tools/bench_table.py --update "
                      "docs/PERFORMANCE.md)" % (len(rows), os.path.basename(report), len(expected)))
    elif rows != expected and not errors:
        errors.append("the rows are in another order than the report's")
    for k in ("date", "commit", "machine", "kernels", "benchmarks", "rows"):
        if k not in doc:
            errors.append("%s has no '%s'" % (os.path.basename(report), k))
    for row in doc.get("rows", []):
        if row.get("status") == "measured":
            if row.get("commit") != doc.get("commit") or "load1_before" not in row:
                errors.append("measured row %s lacks the run's commit or its load" % row.get("id"))
        elif row.get("status") == "carried":
            if not row.get("reason") or not row.get("carried_from") or not row.get("when"):
                errors.append("carried row %s lacks its reason, source or date" % row.get("id"))
        else:
            errors.append("row %s: status %r is neither measured nor carried" % (row.get("id"), row.get("status")))
    for e in errors:
        print("FAIL: " + e)
    if errors:
        return 1
    print("ok: %d rows of docs/PERFORMANCE.md match %s" % (len(rows), os.path.relpath(report, root)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
