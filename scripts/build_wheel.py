#!/usr/bin/python3
"""Packs a built pshard into a Python wheel: the `pshard` package (python/pshard), libpshard_c.so next to it, and the
`pshard` executable, which the wheel's `pshard` command runs. Installed with `pip install --no-index FILE.whl` into a
virtual environment as a normal user, `pshard launch ... -- python3 train.py` then works with no PYTHONPATH and no
source tree.

The executable and the library link the system's ZeroMQ, Cap'n Proto, oneDNN, OpenBLAS, zlib and OpenMP libraries:
the wheel does not carry them (docs/INSTALL.md lists the packages). The wheel's tag is the machine's
(py3-none-linux_<arch>): it runs where those libraries are.

  scripts/build_wheel.py --build build --out dist      # dist/pshard-0.1.0-py3-none-linux_x86_64.whl
"""
import argparse
import base64
import hashlib
import os
import platform
import re
import stat
import subprocess
import sys
import zipfile

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)

CLI = '''"""The `pshard` command of an installed wheel: runs the executable shipped inside the package."""
import os
import sys


def main():
    exe = os.path.join(os.path.dirname(os.path.abspath(__file__)), "bin", "pshard")
    os.execv(exe, [exe] + sys.argv[1:])
'''


def package_version():
    text = open(os.path.join(REPO, "python", "pshard", "__init__.py")).read()
    m = re.search(r'^__version__ = "([^"]+)"', text, re.M)
    if not m:
        sys.exit("build_wheel: python/pshard/__init__.py has no __version__")
    return m.group(1)


def executable_version(exe):
    out = subprocess.run([exe, "--version"], capture_output=True, text=True, check=True).stdout.split()
    return out[-1] if out else ""


def record_line(name, data):
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return "%s,sha256=%s,%d" % (name, digest, len(data))


def add(zf, records, name, data, executable=False):
    info = zipfile.ZipInfo(name, date_time=(2026, 1, 1, 0, 0, 0))
    info.compress_type = zipfile.ZIP_DEFLATED
    info.external_attr = ((0o755 if executable else 0o644) | stat.S_IFREG) << 16
    zf.writestr(info, data)
    records.append(record_line(name, data))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build", default=os.path.join(REPO, "build"), help="the CMake build folder")
    ap.add_argument("--out", default=os.path.join(REPO, "dist"), help="where the wheel goes")
    args = ap.parse_args()
    exe = os.path.join(args.build, "bin", "pshard")
    lib = os.path.join(args.build, "lib", "libpshard_c.so")
    for path in (exe, lib):
        if not os.path.isfile(path):
            sys.exit("build_wheel: %s is missing: build the pshard and pshard_c targets first" % path)
    version = package_version()
    if executable_version(exe) != version:
        sys.exit("build_wheel: %s --version says %s but the Python package is %s: bump both together"
                 % (exe, executable_version(exe), version))
    arch = platform.machine()
    tag = "py3-none-linux_" + arch
    dist_info = "pshard-%s.dist-info" % version
    os.makedirs(args.out, exist_ok=True)
    wheel = os.path.join(args.out, "pshard-%s-%s.whl" % (version, tag))
    records = []
    with zipfile.ZipFile(wheel + ".part", "w") as zf:
        pkg = os.path.join(REPO, "python", "pshard")
        for name in sorted(os.listdir(pkg)):
            if name.endswith(".py"):
                add(zf, records, "pshard/" + name, open(os.path.join(pkg, name), "rb").read())
        add(zf, records, "pshard/_cli.py", CLI.encode())
        add(zf, records, "pshard/libpshard_c.so", open(lib, "rb").read())
        add(zf, records, "pshard/bin/pshard", open(exe, "rb").read(), executable=True)
        metadata = ("Metadata-Version: 2.1\nName: pshard\nVersion: %s\nSummary: pshard, a parameter-server system "
                    "for distributed training: the Python package (pshard.torch), its C library and the pshard "
                    "command\nRequires-Python: >=3.7\n" % version)
        add(zf, records, dist_info + "/METADATA", metadata.encode())
        add(zf, records, dist_info + "/WHEEL",
            ("Wheel-Version: 1.0\nGenerator: pshard scripts/build_wheel.py\nRoot-Is-Purelib: false\nTag: %s\n"
             % tag).encode())
        add(zf, records, dist_info + "/entry_points.txt", b"[console_scripts]\npshard = pshard._cli:main\n")
        add(zf, records, dist_info + "/top_level.txt", b"pshard\n")
        records.append(dist_info + "/RECORD,,")
        info = zipfile.ZipInfo(dist_info + "/RECORD", date_time=(2026, 1, 1, 0, 0, 0))
        info.external_attr = (0o644 | stat.S_IFREG) << 16
        zf.writestr(info, "\n".join(records) + "\n")
    os.replace(wheel + ".part", wheel)
    print(wheel)


if __name__ == "__main__":
    main()
