#!/usr/bin/python3
"""docs/METRICS.md's event headings and field tables are what `pshard report --events` prints from the events'
declaration (common/metrics/event_schema.cc), event for event and row for row. The prose between a heading and
its table is the manual's own. With --update, rewrites METRICS.md's headings and tables from the declaration."""
import argparse
import difflib
import re
import subprocess
import sys

HEADING = re.compile(r'^### `event: "(\w+)"`')


def blocks(lines):
    """{event: (heading line index, first and one-past-last line index of its table)} in order."""
    out = {}
    i = 0
    while i < len(lines):
        m = HEADING.match(lines[i])
        if not m:
            i += 1
            continue
        j = i + 1
        while j < len(lines) and not lines[j].startswith('|') and not lines[j].startswith('#'):
            j += 1
        k = j
        while k < len(lines) and lines[k].startswith('|'):
            k += 1
        out[m.group(1)] = (i, j, k)
        i = k
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('--pshard', required=True)
    ap.add_argument('--doc', required=True)
    ap.add_argument('--update', action='store_true')
    a = ap.parse_args()
    printed = subprocess.run([a.pshard, 'report', '--events'], check=True, capture_output=True,
                             text=True).stdout.split('\n')
    doc = open(a.doc, encoding='utf-8').read().split('\n')
    want, have = blocks(printed), blocks(doc)
    if list(want) != list(have):
        print('events in %s: %s; declared: %s' % (a.doc, list(have), list(want)))
        return 1
    if a.update:
        for name in reversed(list(want)):
            wi, wj, wk = want[name]
            hi, hj, hk = have[name]
            doc[hj:hk] = printed[wj:wk]
            doc[hi] = printed[wi]
        open(a.doc, 'w', encoding='utf-8').write('\n'.join(doc))
        return 0
    failed = 0
    for name, (wi, wj, wk) in want.items():
        hi, hj, hk = have[name]
        expected = [printed[wi]] + printed[wj:wk]
        actual = [doc[hi]] + doc[hj:hk]
        if expected != actual:
            failed = 1
            print('event "%s" differs from its declaration (run this script with --update):' % name)
            sys.stdout.writelines(difflib.unified_diff([l + '\n' for l in actual], [l + '\n' for l in expected],
                                                       a.doc, 'pshard report --events'))
    return failed


if __name__ == '__main__':
    sys.exit(main())
