#!/usr/bin/python3
"""The wheel carries its libraries: scripts/build_wheel.py bundles every shared library of the `pshard` executable
and libpshard_c.so beyond glibc, libstdc++, libgcc_s and CUDA into pshard/lib/, and the installed wheel runs with the
system's copies of those libraries gone. Root only (a private mount namespace); exits 77 (skipped) otherwise.

- The tag is py3-none-manylinux_2_X_<arch>, X the highest GLIBC_2.X symbol version of the installed ELF files
  (objdump -T); every bundled library has its licence file, and ldd of the installed executable and library finds
  nothing outside the wheel but the base system and CUDA.
- In `unshare --mount`, with an empty file bind-mounted over each system library the wheel bundles: the build's own
  executable cannot start (the masks bite), while from the virtual environment `pshard --version`, a job of 1 server
  and pshard's own 2 workers (linear regression), and a `-- python3` job of a script that trains through the C API
  with ctypes alone (no numpy, no torch) and finds its libzmq mapped from the wheel, all succeed. The interpreter's
  own libraries (libz, for /usr/bin/python3) stay unmasked in the Python job only.
"""
import json
import os
import re
import subprocess
import sys
import time

import support

BUILD = os.path.dirname(os.path.dirname(os.path.abspath(support.PSHARD_BIN)))

SCRIPT = r'''
import ctypes, json, os, sys
import pshard
from pshard import _lib
here = os.path.dirname(os.path.abspath(pshard.__file__))
lib, check = _lib.lib(), _lib.check
pshard.init()
c = pshard.client()
n = 4
check(lib.pshard_add_tensor(c, b"w", 1, (ctypes.c_int64 * 1)(n), _lib.FLOAT32), "add_tensor")
check(lib.pshard_start(c, b"linear", 8, 5), "start")
w = (ctypes.c_float * n)()
g = (ctypes.c_float * n)()
req = ctypes.c_uint64()
init = ctypes.c_int()
check(lib.pshard_initialiser(c, ctypes.byref(init)), "initialiser")
if init.value:
    check(lib.pshard_init_tensor(c, 0, w, ctypes.byref(req)), "init")
    check(lib.pshard_wait(c, req.value, -1), "init wait")
target = [1.0, 2.0, -1.0, 0.5]
losses = []
for t in range(5):  # minimises |w - target|^2 / 2: the gradient is w - target
    for i in range(n):
        g[i] = w[i] - target[i]
    losses.append(sum(x * x for x in g) / 2)
    check(lib.pshard_push_pull(c, 0, g, w, t, ctypes.byref(req)), "push_pull")
    check(lib.pshard_wait(c, req.value, -1), "push_pull wait")
zmq = sorted({l.split()[-1] for l in open("/proc/self/maps") if "/libzmq" in l})
json.dump({"losses": losses, "package": here, "libzmq": zmq},
          open(os.path.join(sys.argv[1], "rank-%d.json" % pshard.rank()), "w"))
'''

CONFIG = '''
[run]
name = "wheel-bundle"
[train]
batch_size = 8
[optimizer]
name = "sgd"
lr = 0.5
[cluster]
mode = "sync"
'''


def run(cmd, timeout, what, env=None, expect_ok=True):
    r = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=timeout)
    if expect_ok and r.returncode != 0:
        sys.exit("%s failed (exit %d):\n%s\n%s" % (what, r.returncode, r.stdout[-4000:], r.stderr[-4000:]))
    return r


def masked(masks, empty, argv):
    """ARGV run in a private mount namespace where each path of MASKS is an empty file."""
    script = 'for f in "$@"; do [ "$f" = -- ] && break; mount --bind "$0" "$f" || exit 99; shift; done; shift; ' \
             'exec "$@"'
    return ["unshare", "--mount", "--propagation", "private", "/bin/sh", "-c", script, empty] + list(masks) + \
        ["--"] + list(argv)


def glibc_needed(files):
    best = 0
    for f in files:
        out = run(["objdump", "-T", f], 60, "objdump -T " + f).stdout
        best = max([best] + [int(x) for x in re.findall(r"GLIBC_2\.(\d+)", out)])
    return best


def main():
    if os.geteuid() != 0 or subprocess.run(["unshare", "--mount", "--propagation", "private", "true"],
                                           capture_output=True).returncode != 0:
        print("skipped: needs root and unshare --mount (a private mount namespace)")
        sys.exit(77)
    started = time.monotonic()
    work = support.fresh_dir("wheel-bundle")
    built = run(["/usr/bin/python3", os.path.join(support.SOURCE_DIR, "scripts", "build_wheel.py"), "--build", BUILD,
                 "--out", os.path.join(work, "dist")], 240, "build_wheel.py")
    wheel = built.stdout.strip().splitlines()[-1]
    build_s = time.monotonic() - started
    m = re.match(r"pshard-[^-]+-py3-none-manylinux_2_(\d+)_(\w+)\.whl$", os.path.basename(wheel))
    assert m, "the wheel's name has no manylinux_2_X tag: %s" % wheel
    venv = os.path.join(work, "venv")
    run(["/usr/bin/python3", "-m", "venv", venv], 120, "venv")
    env = {k: v for k, v in os.environ.items()
           if k not in ("PYTHONPATH", "PSHARD_LIBRARY", "PSHARD_BIN", "PSHARD_SOURCE_DIR", "LD_LIBRARY_PATH")}
    env["PATH"] = os.path.join(venv, "bin") + os.pathsep + env.get("PATH", "")
    env["OMP_NUM_THREADS"] = "1"
    py = os.path.join(venv, "bin", "python3")
    run([os.path.join(venv, "bin", "pip"), "install", "--no-index", "--no-cache-dir", "--disable-pip-version-check",
         wheel], 120, "pip install", env)
    pkg = run([py, "-c", "import os, pshard; print(os.path.dirname(pshard.__file__))"], 60, "import pshard",
              env).stdout.strip()
    assert pkg.startswith(venv), pkg
    exe = os.path.join(pkg, "bin", "pshard")
    capi = os.path.join(pkg, "libpshard_c.so")
    libdir = os.path.join(pkg, "lib")

    # What the wheel holds: each bundled library, its licence, and nothing needed from outside but the base system.
    bundled = []
    for line in open(os.path.join(libdir, "BUNDLED.txt")):
        if line.startswith("#") or not line.strip():
            continue
        name, soname, source, package, _, licence = line.split()
        assert os.path.isfile(os.path.join(libdir, name)), name
        licence = os.path.join(libdir, licence)
        assert os.path.isfile(licence) and os.path.getsize(licence) > 0, "%s has no licence file %s" % (soname,
                                                                                                       licence)
        bundled.append((name, soname, source))
    on_disk = sorted(f for f in os.listdir(libdir) if ".so" in f)
    assert on_disk == sorted(b[0] for b in bundled), (on_disk, bundled)
    for soname in ("libzmq.so.5", "libcapnp-0.9.2.so", "libdnnl.so.2", "libopenblas.so.0", "libtomlplusplus.so.3"):
        assert soname in [b[1] for b in bundled], "%s is not bundled: %s" % (soname, bundled)
    base = re.compile(r"^(linux-vdso|ld-linux|libc|libm|libdl|libpthread|librt|libresolv|libstdc\+\+|libgcc_s)\.so|"
                      r"^lib(cuda|cudart)")
    for elf in (exe, capi):
        for line in run(["ldd", elf], 60, "ldd " + elf, env).stdout.splitlines():
            parts = line.split()
            if "=>" in parts and not base.match(parts[0]):
                assert os.path.normpath(parts[2]).startswith(libdir + "/"), \
                    "%s finds %s outside the wheel" % (elf, line.strip())
    files = [exe, capi] + [os.path.join(libdir, b[0]) for b in bundled]
    x = glibc_needed(files)
    assert int(m.group(1)) == x, "the tag says glibc 2.%s, the files need 2.%d" % (m.group(1), x)

    # Masks: an empty file over each system library the wheel bundles.
    empty = os.path.join(work, "empty")
    open(empty, "w").close()
    masks = sorted({os.path.realpath(b[2]) for b in bundled})
    interpreter = set()
    for line in run(["ldd", os.path.realpath(py)], 60, "ldd python3").stdout.splitlines():
        parts = line.split()
        if "=>" in parts and parts[2].startswith("/"):
            interpreter.add(os.path.realpath(parts[2]))
    control = run(masked(masks, empty, [support.PSHARD_BIN, "--version"]), 60, "control", env, expect_ok=False)
    assert control.returncode != 0 and "shared lib" in control.stderr, \
        "the build's pshard started with its libraries masked: %s %s" % (control.stdout, control.stderr)

    version = run(masked(masks, empty, [exe, "--version"]), 60, "masked pshard --version", env).stdout.split()[-1]
    own = os.path.join(work, "own")
    job_started = time.monotonic()
    run(masked(masks, empty, [exe, "launch", "--servers", "1", "--workers", "2", "--timeout", "120", "--config",
                              os.path.join(support.SOURCE_DIR, "configs", "linreg_sgd.toml"), "--set",
                              "train.epochs=2", "--set", "data.train_size=1024", "--set", "data.test_size=256",
                              "--run-dir", own]), 180, "masked job of pshard's own workers", env)
    own_s = time.monotonic() - job_started
    summary = [json.loads(l) for l in open(os.path.join(own, "metrics.jsonl"))][-1]
    assert summary["event"] == "summary" and summary["workers"] == 2 and summary["epochs"] == 2, summary

    cfg = os.path.join(work, "job.toml")
    open(cfg, "w").write(CONFIG)
    script = os.path.join(work, "train.py")
    open(script, "w").write(SCRIPT)
    out = os.path.join(work, "py")
    os.makedirs(out)
    job_started = time.monotonic()
    run(masked([p for p in masks if p not in interpreter], empty,
               [os.path.join(venv, "bin", "pshard"), "launch", "--servers", "1", "--workers", "2", "--timeout", "120",
                "--config", cfg, "--run-dir", os.path.join(work, "py-run"), "--", py, script, out]),
        180, "masked -- python3 job", env)
    py_s = time.monotonic() - job_started
    for rank in (0, 1):
        r = json.load(open(os.path.join(out, "rank-%d.json" % rank)))
        assert r["package"] == pkg, r
        assert r["libzmq"] and all(p.startswith(libdir + "/") for p in r["libzmq"]), r
        assert r["losses"][-1] < r["losses"][0] / 2, r
    print("wheel %s (%.1f MiB, %d libraries bundled, glibc >= 2.%d): built in %.1f s; masked: pshard --version %s, "
          "own-worker job %.1f s, -- python3 job %.1f s; %.1f s in all"
          % (os.path.basename(wheel), os.path.getsize(wheel) / 2.0 ** 20, len(bundled), x, build_s, version, own_s,
             py_s, time.monotonic() - started))
    support.passed()


if __name__ == "__main__":
    main()
