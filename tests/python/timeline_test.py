"""Python workers on the timeline and in the phase columns: a 2 x 1 job of the equivalence test's workers with
`--trace 3-5` writes a trace per Python worker (its step, data/forward/backward spans and the library's pushPull
spans) that `pshard report` merges with the server's and the coordinator's; the epoch line's phases add up."""
import json
import os
import sys

import equivalence_test as eq
import support


def main():
    out = support.fresh_dir("timeline-out")
    status, output, run_dir = support.launch(eq.CONFIG, 2, 1, [os.path.abspath(eq.__file__), "worker", out], 240,
                                             "timeline", extra=["--trace", "3-5"])
    support.expect(status == 0, "the job failed (status %d)" % status, output)
    for r in range(2):
        support.expect(os.path.exists(os.path.join(run_dir, "trace", "worker-%d.json" % r)),
                       "worker %d wrote no trace file" % r, output)
    status, report_out = support.run([support.PSHARD_BIN, "report", run_dir], 120)
    support.expect(status == 0, "pshard report failed (status %d)" % status, report_out)
    with open(os.path.join(run_dir, "report", "trace.json")) as f:
        trace = json.load(f)
    events = trace["traceEvents"] if isinstance(trace, dict) else trace
    names = {}
    for e in events:
        if e.get("ph") == "M" and e.get("name") == "process_name":
            names[e["pid"]] = e["args"]["name"]
    spans = {}
    for e in events:
        if e.get("ph") == "X":
            spans.setdefault(names.get(e["pid"], "?"), []).append(e)
    for r in range(2):
        mine = spans.get("worker %d" % r, [])
        got = {e["name"] for e in mine}
        for want in ("step 3", "step 5", "data", "forward", "backward", "comm_wait + load weights"):
            support.expect(want in got, "worker %d's trace lacks '%s' (has %s)" % (r, want, sorted(got)[:20]), output)
        support.expect(any(n.startswith("pushPull ") for n in got), "worker %d's trace has no pushPull span" % r)
        support.expect("step 2" not in got and "step 6" not in got, "worker %d traced outside 3-5" % r)
        # On one clock: each traced step's phases lie inside its step span.
        for step in (3, 4, 5):
            outer = [e for e in mine if e["name"] == "step %d" % step][0]
            for e in mine:
                if e["cat"] == "phase" and e["args"].get("step") == step:
                    support.expect(outer["ts"] <= e["ts"] + 1 and e["ts"] + e["dur"] <= outer["ts"] + outer["dur"] + 1,
                                   "worker %d: %s of step %d is outside its step span" % (r, e["name"], step))
    support.expect(any(n.startswith("server") for n in spans), "no server process in the merged trace: %s"
                   % sorted(spans))
    with open(os.path.join(run_dir, "metrics.jsonl")) as f:
        epochs = [json.loads(l) for l in f if '"event":"epoch"' in l]
    support.expect(len(epochs) == 1, "expected one epoch line, got %d" % len(epochs))
    e = epochs[0]
    support.expect(e["forward_s"] > 0 and e["backward_s"] > 0, "no forward/backward time measured: %s" % e)
    for w in e["workers"]:  # each worker's phases add up to its own epoch_s (the line's is the slowest worker's)
        total = sum(w[k] for k in ("data_s", "forward_s", "backward_s", "comm_wait_s", "other_s"))
        support.expect(abs(total - w["epoch_s"]) <= 0.01 * w["epoch_s"] + 1e-6,
                       "worker %d: the phases (%.4f s) do not add up to its epoch_s (%.4f s)"
                       % (w["rank"], total, w["epoch_s"]))
    print("timeline: both Python workers traced steps 3-5 (%d spans), phases add up to %.3f s"
          % (sum(len(v) for v in spans.values()), e["epoch_s"]))


if __name__ == "__main__":
    main()
    support.passed()
