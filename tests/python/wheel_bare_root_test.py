#!/usr/bin/python3
"""The wheel on a bare system: a minimal Debian root made by debootstrap (minbase with python3 and python3-venv only:
none of pshard's libraries, no compiler, no numpy, no torch), the wheel installed there with pip into a virtual
environment as a normal user, and run there:

- the root holds none of the libraries the wheel bundles (ldconfig knows no libzmq, Cap'n Proto, oneDNN, OpenBLAS,
  toml++), so whatever runs, runs from the wheel;
- `pshard --version`, a job of 2 servers and pshard's own 2 workers (linear regression on synthetic data), and a
  `-- python3` job of 1 server + 2 workers running a script that imports `pshard` and trains through the C API with
  ctypes alone: each ends with a summary, the script's loss falls and its libzmq is the wheel's.

Root only (debootstrap, chroot, mounts); exits 77 (skipped) otherwise. The root is made once per machine and kept in
PSHARD_BARE_ROOT_CACHE (default /var/cache/pshard/bare-root-<release>; debootstrap is installed and fetches Debian's
packages the first time, about a minute); each run works in an overlay on top of it, so the cached root stays bare.
Prints the wheel's size and each step's time.
"""
import json
import os
import re
import shutil
import subprocess
import sys
import time

import support
from wheel_bundle_test import CONFIG, SCRIPT, run

BUILD = os.path.dirname(os.path.dirname(os.path.abspath(support.PSHARD_BIN)))
USER_ID = 4242  # the normal user in the root


def release():
    """This machine's Debian release (bookworm, ...): the bare root is of the same release."""
    for line in open("/etc/os-release"):
        if line.startswith("VERSION_CODENAME="):
            return line.split("=", 1)[1].strip().strip('"')
    return "bookworm"


def bare_root(codename):
    """The cached minimal root, made now when this machine has none."""
    cache = os.environ.get("PSHARD_BARE_ROOT_CACHE", "/var/cache/pshard/bare-root-" + codename)
    stamp = os.path.join(cache, ".pshard-bare-root")
    if os.path.exists(stamp):
        return cache, 0.0
    started = time.monotonic()
    if not shutil.which("debootstrap"):
        env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
        cmd = ["apt-get", "install", "-y", "-q", "--no-install-recommends", "-o", "DPkg::Lock::Timeout=120",
               "debootstrap"]
        if subprocess.run(cmd, env=env, capture_output=True, timeout=600).returncode != 0:
            subprocess.run(["apt-get", "update", "-q"], capture_output=True, timeout=300)
            run(cmd, 600, "apt-get install debootstrap", env)
    partial = cache + ".partial"
    shutil.rmtree(partial, ignore_errors=True)
    os.makedirs(os.path.dirname(cache), exist_ok=True)
    run(["debootstrap", "--variant=minbase", "--include=python3,python3-venv", codename, partial,
         "http://deb.debian.org/debian"], 1200, "debootstrap of a minimal %s root" % codename)
    open(os.path.join(partial, ".pshard-bare-root"), "w").write("debootstrap --variant=minbase "
                                                                "--include=python3,python3-venv %s\n" % codename)
    shutil.rmtree(cache, ignore_errors=True)
    os.rename(partial, cache)
    return cache, time.monotonic() - started


class Overlay:
    """The cached root under a writable overlay, with /proc and /dev/shm; all unmounted and removed on exit."""

    def __init__(self, lower, work):
        self.work = work
        self.root = os.path.join(work, "root")
        for d in ("upper", "ovl-work", "root"):
            os.makedirs(os.path.join(work, d))
        self.mounts = []
        self._mount(["-t", "overlay", "overlay", "-o", "lowerdir=%s,upperdir=%s,workdir=%s" % (
            lower, os.path.join(work, "upper"), os.path.join(work, "ovl-work"))], self.root)
        # The root's own /dev (debootstrap made its device nodes) with a fresh /dev/shm: nothing of this machine's
        # /dev is mounted into it, so nothing mounted there can reach the machine's own.
        self._mount(["-t", "proc", "proc"], os.path.join(self.root, "proc"))
        self._mount(["-t", "tmpfs", "-o", "mode=1777", "shm"], os.path.join(self.root, "dev", "shm"))

    def _mount(self, args, target):
        os.makedirs(target, exist_ok=True)
        run(["mount"] + args + [target], 60, "mount " + target)
        self.mounts.append(target)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        for target in reversed(self.mounts):
            subprocess.run(["umount", "-l", target], capture_output=True, timeout=60)
        shutil.rmtree(self.work, ignore_errors=True)

    def as_user(self, command, timeout, what):
        """`command` (a shell line) run in the root as the normal user, with a bare environment."""
        return run(["chroot", "--userspec=%d:%d" % (USER_ID, USER_ID), self.root, "/usr/bin/env", "-i",
                    "HOME=/home/pshard", "PATH=/home/pshard/venv/bin:/usr/bin:/bin", "OMP_NUM_THREADS=1",
                    "/bin/sh", "-c", "cd /home/pshard && " + command], timeout, what).stdout


def main():
    if os.geteuid() != 0:
        print("skipped: needs root (debootstrap, chroot, mounts)")
        sys.exit(77)
    started = time.monotonic()
    work = support.fresh_dir("wheel-bare-root")
    wheel = run(["/usr/bin/python3", os.path.join(support.SOURCE_DIR, "scripts", "build_wheel.py"), "--build", BUILD,
                 "--out", os.path.join(work, "dist")], 240, "build_wheel.py").stdout.strip().splitlines()[-1]
    codename = release()
    lower, made_s = bare_root(codename)
    with Overlay(lower, os.path.join(work, "overlay")) as root:
        # Nothing of pshard's libraries in the bare system.
        known = run(["chroot", root.root, "/sbin/ldconfig", "-p"], 60, "ldconfig -p in the root").stdout
        for lib in ("libzmq", "libcapnp", "libdnnl", "libopenblas", "libtomlplusplus"):
            assert lib not in known, "the bare root has %s: %s" % (lib, [ln for ln in known.split("\n") if lib in ln])
        run(["chroot", root.root, "/usr/sbin/useradd", "-m", "-u", str(USER_ID), "pshard"], 60, "useradd")
        home = os.path.join(root.root, "home", "pshard")
        shutil.copy(wheel, home)
        shutil.copy(os.path.join(support.SOURCE_DIR, "configs", "linreg_sgd.toml"), home)
        open(os.path.join(home, "job.toml"), "w").write(CONFIG)
        open(os.path.join(home, "train.py"), "w").write(SCRIPT)
        os.makedirs(os.path.join(home, "py"))
        run(["chown", "-R", "%d:%d" % (USER_ID, USER_ID), home], 60, "chown")

        t = time.monotonic()
        root.as_user("python3 -m venv venv && pip install --no-index --no-cache-dir --disable-pip-version-check " +
                     os.path.basename(wheel), 300, "pip install of the wheel in the bare root")
        install_s = time.monotonic() - t
        version = root.as_user("pshard --version", 60, "pshard --version").split()[-1]
        t = time.monotonic()
        root.as_user("pshard launch --servers 2 --workers 2 --timeout 120 --config linreg_sgd.toml --set "
                     "train.epochs=2 --set data.train_size=1024 --set data.test_size=256 --run-dir own",
                     180, "a job of pshard's own workers in the bare root")
        own_s = time.monotonic() - t
        summary = [json.loads(ln) for ln in open(os.path.join(home, "own", "metrics.jsonl"))][-1]
        assert summary["event"] == "summary" and summary["workers"] == 2 and summary["servers"] == 2 \
            and summary["epochs"] == 2, summary
        t = time.monotonic()
        root.as_user("pshard launch --servers 1 --workers 2 --timeout 120 --config job.toml --run-dir py-run -- "
                     "python3 train.py /home/pshard/py", 180, "a -- python3 job in the bare root")
        py_s = time.monotonic() - t
        pkg = root.as_user("python3 -c 'import os, pshard; print(os.path.dirname(pshard.__file__))'", 60,
                           "import pshard").strip()
        for rank in (0, 1):
            r = json.load(open(os.path.join(home, "py", "rank-%d.json" % rank)))
            assert r["package"] == pkg, r
            assert r["libzmq"] and all(re.match(re.escape(pkg) + "/lib/", p) for p in r["libzmq"]), r
            assert r["losses"][-1] < r["losses"][0] / 2, r
    print("wheel %s (%.1f MiB) in a bare %s root (debootstrap minbase + python3-venv%s) as a normal user: pip install "
          "%.1f s, pshard --version %s, 2 servers + 2 own workers %.1f s, -- python3 job %.1f s; %.1f s in all"
          % (os.path.basename(wheel), os.path.getsize(wheel) / 2.0 ** 20, codename,
             ", made now in %.0f s" % made_s if made_s else ", cached", install_s, version, own_s, py_s,
             time.monotonic() - started))
    support.passed()


if __name__ == "__main__":
    main()
