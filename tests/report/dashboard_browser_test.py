"""The live dashboard in a real browser (headless Chromium, Debian's chromium-headless-shell, installed here when
missing; a user other than root without Chromium skips the test):

- `pshard launch --dashboard` of a 2 server + 2 worker LeNet job prints the page's URL with its token; a request
  without the token, or with another one, is refused (403) with the reason.
- While the job runs, the page as Chromium ran it (its DOM after the script's polls) says "running" and shows the
  figures metrics.jsonl holds at that moment: the epochs done, the accuracy of the last of them, worker 0's loss at
  the step it shows.
- After the job, `pshard dashboard RUN_DIR` shows the finished run: the summary's steps, test accuracy and samples/s,
  every epoch, no failure; a screenshot of it is saved (PSHARD_DASHBOARD_SHOT, default dashboard.png here).
Exits 1 naming what differed."""
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request

SRC = os.environ.get("PSHARD_SOURCE_DIR", os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
BIN = os.environ.get("PSHARD_BIN", os.path.join(SRC, "build", "bin", "pshard"))
SHOT = os.environ.get("PSHARD_DASHBOARD_SHOT", os.path.abspath("dashboard.png"))


def fail(why):
    print("FAILED: " + why, flush=True)
    sys.exit(1)


def browser():
    """Headless Chromium, installed from Debian's packages when this machine has none (by root; others skip)."""
    for name in ("chromium-headless-shell", "chromium"):
        path = shutil.which(name)
        if path:
            return path
    if os.geteuid() != 0:  # as the SLURM and bare-root tests do: only root may install what the test needs
        print("SKIPPED: no Chromium on this machine, and installing chromium-headless-shell needs root", flush=True)
        sys.exit(77)
    print("installing chromium-headless-shell (apt-get)", flush=True)
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
    cmd = ["apt-get", "install", "-y", "-q", "--no-install-recommends", "-o", "DPkg::Lock::Timeout=120",
           "chromium-headless-shell"]
    if subprocess.run(cmd, env=env, stdout=subprocess.DEVNULL, timeout=900).returncode != 0:
        subprocess.run(["apt-get", "update", "-q"], stdout=subprocess.DEVNULL, timeout=300)
        if subprocess.run(cmd, env=env, stdout=subprocess.DEVNULL, timeout=900).returncode != 0:
            fail("cannot install chromium-headless-shell (apt-get install failed)")
    return shutil.which("chromium-headless-shell") or fail("chromium-headless-shell is not on PATH after installing")


def page_dom(chromium, url, screenshot=None):
    """The page's DOM after its script ran about three polls (virtual time: the fetches are waited for)."""
    with tempfile.TemporaryDirectory(prefix="pshard-chromium-") as profile:
        args = [chromium, "--headless", "--no-sandbox", "--disable-gpu", "--user-data-dir=" + profile,
                "--virtual-time-budget=3000"]
        if screenshot:
            args += ["--window-size=1280,1500", "--screenshot=" + screenshot]
        else:
            args += ["--dump-dom"]
        r = subprocess.run(args + [url], capture_output=True, text=True, timeout=120)
        if r.returncode != 0:
            fail("chromium exited %d: %s" % (r.returncode, r.stderr[-2000:]))
        return r.stdout


def figures(dom):
    """{element id: data-value} of the page's figures and status."""
    found = {}
    for m in re.finditer(r'<(?:div|span)[^>]*\bid="((?:fig-[a-z-]+)|status)"[^>]*>', dom):
        for attr in ("value", "step"):
            v = re.search(r'data-%s="([^"]*)"' % attr, m.group(0))
            found[m.group(1) + ("" if attr == "value" else ".step")] = v.group(1) if v else None
    if "fig-step" not in found:
        fail("the page has no figures; its DOM begins: " + dom[:500])
    return found


def metrics(run_dir):
    path = os.path.join(run_dir, "metrics.jsonl")
    if not os.path.exists(path):
        return []
    with open(path) as f:
        return [json.loads(line) for line in f.read().split("\n") if line.strip() and line.endswith("}")]


def status_of(url):
    try:
        with urllib.request.urlopen(url, timeout=10) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()


def close(a, b):
    return abs(float(a) - float(b)) <= 1e-9 * max(1.0, abs(float(b)))


def check_refused(url):
    base, token = url.split("?token=")
    for target in (base, base + "metrics?from=0", base + "?token=" + "0" * len(token)):
        code, body = status_of(target)
        if code != 403 or "needs the token" not in body:
            fail("%s answered %d %r, not 403 naming the token" % (target, code, body))


def check_running(chromium, url, run_dir):
    """Once the first epoch line is written: the page, loaded now, shows what metrics.jsonl holds."""
    deadline = time.time() + 120
    while not any(e["event"] == "epoch" for e in metrics(run_dir)):
        if time.time() > deadline:
            fail("no epoch line in 120 s")
        time.sleep(0.2)
    before = metrics(run_dir)
    fig = figures(page_dom(chromium, url))
    after = metrics(run_dir)
    if any(e["event"] == "summary" for e in after):
        fail("the job ended before the page was read: make it longer")
    if fig["status"] != "running":
        fail("the running job's page says %r" % fig["status"])
    epochs_before = sum(e["event"] == "epoch" for e in before)
    epochs_after = [e for e in after if e["event"] == "epoch"]
    shown = int(fig["fig-epochs"])
    if not epochs_before <= shown <= len(epochs_after):
        fail("the page shows %d epochs; metrics.jsonl had %d before and %d after" % (shown, epochs_before,
                                                                                   len(epochs_after)))
    if not close(fig["fig-test-acc"], epochs_after[shown - 1]["test_acc"]):
        fail("the page's test accuracy %s is not epoch %d's %s" % (fig["fig-test-acc"], shown,
                                                                   epochs_after[shown - 1]["test_acc"]))
    at = [e for e in after if e["event"] == "step" and e["rank"] == 0 and str(e["step"]) == fig["fig-loss.step"]]
    if not at or not close(fig["fig-loss"], at[0]["loss"]):
        fail("the page's loss %s at step %s is not worker 0's logged loss there (%s)" %
             (fig["fig-loss"], fig["fig-loss.step"], at[0]["loss"] if at else "no step line"))
    if int(fig["fig-loss.step"]) >= int(fig["fig-step"]):
        fail("the page's loss is of step %s, not before its step count %s" % (fig["fig-loss.step"], fig["fig-step"]))
    print("while running: the page shows %d epochs, step %s, loss %s, test accuracy %s, as metrics.jsonl has them" %
          (shown, fig["fig-step"], fig["fig-loss"], fig["fig-test-acc"]), flush=True)


def check_finished(chromium, run_dir):
    """`pshard dashboard RUN_DIR` of the finished run: the summary's figures."""
    p = subprocess.Popen([BIN, "dashboard", run_dir], stdout=subprocess.PIPE, text=True)
    try:
        line = p.stdout.readline()
        m = re.search(r"(http://\S+\?token=[0-9a-f]+)", line)
        if not m:
            fail("pshard dashboard printed no URL: %r" % line)
        url = m.group(1)
        check_refused(url)
        dom = page_dom(chromium, url)
        fig = figures(dom)
        summary = [e for e in metrics(run_dir) if e["event"] == "summary"][0]
        epochs = [e for e in metrics(run_dir) if e["event"] == "epoch"]
        want = {"status": "finished", "fig-step": summary["steps"], "fig-epochs": len(epochs),
                "fig-test-acc": summary["test_acc"], "fig-samples": summary["samples_per_s"], "fig-eta": "0",
                "fig-progress": "1"}
        for key, value in want.items():
            if isinstance(value, str) and fig[key] != value or not isinstance(value, str) and not close(fig[key], value):
                fail("the finished run's page shows %s = %r, metrics.jsonl says %r" % (key, fig[key], value))
        if 'class="event bad"' in dom:
            fail("the finished run's page lists a failure: " + re.findall(r'<tr class="event bad">.*?</tr>', dom)[0])
        page_dom(chromium, url, screenshot=SHOT)
        if not os.path.exists(SHOT) or os.path.getsize(SHOT) < 10000:
            fail("no screenshot at " + SHOT)
        print("finished: the page shows %s steps, %s epochs, test accuracy %s, %s samples/s; screenshot %s" %
              (fig["fig-step"], fig["fig-epochs"], fig["fig-test-acc"], fig["fig-samples"], SHOT), flush=True)
    finally:
        p.send_signal(signal.SIGINT)
        if p.wait(timeout=30) != 0:
            fail("pshard dashboard exited %d on Ctrl-C" % p.returncode)


def main():
    chromium = browser()
    with tempfile.TemporaryDirectory(prefix="pshard-dashboard-") as tmp:
        run_dir = os.path.join(tmp, "run")
        cmd = [BIN, "launch", "--servers", "2", "--workers", "2", "--config",
               os.path.join(SRC, "configs", "fmnist_lenet_sync.toml"), "--run-dir", run_dir, "--dashboard",
               "--set", "train.epochs=3", "--set", "data.train_size=12800", "--set", "train.log_every=5",
               "--set", "train.threads=1", "--timeout", "240"]
        job = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        err = []  # the launch's stderr, read all along so that it never blocks on a full pipe
        reader = threading.Thread(target=lambda: err.extend(job.stderr), daemon=True)
        reader.start()
        try:
            url = None
            deadline = time.time() + 60
            while url is None and time.time() < deadline and job.poll() is None:
                m = re.search(r"\[launch\] dashboard: (http://\S+)", "".join(err))
                url = m.group(1) if m else None
                time.sleep(0.05)
            if not url:
                fail("pshard launch --dashboard printed no URL: " + "".join(err)[-2000:])
            print("dashboard at " + url.split("?")[0], flush=True)
            check_refused(url)
            check_running(chromium, url, run_dir)
            job.wait(timeout=240)
            reader.join(timeout=10)
            rest = "".join(err)
            if job.returncode != 0:
                fail("the job failed (exit %d): %s" % (job.returncode, rest[-3000:]))
            if "pshard dashboard " + run_dir not in rest:
                fail("the launch did not say how to see the run after it: " + rest[-1000:])
        finally:
            if job.poll() is None:
                job.kill()
                job.wait()
        check_finished(chromium, run_dir)
    print("PASSED", flush=True)


if __name__ == "__main__":
    main()
