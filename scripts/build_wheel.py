#!/usr/bin/python3
"""Packs a built pshard into a self-contained Python wheel: the `pshard` package (python/pshard), libpshard_c.so
next to it, the `pshard` executable, which the wheel's `pshard` command runs, and every shared library those two
need beyond the base system, in pshard/lib/. Installed with `pip install --no-index FILE.whl` into a virtual
environment as a normal user, `pshard launch ... -- python3 train.py` then works with no PYTHONPATH, no source tree
and no ZeroMQ, Cap'n Proto, oneDNN, OpenBLAS... installed on the node (docs/INSTALL.md).

What is bundled: every library that `ldd` finds for the executable and libpshard_c.so, recursively, except the base
system (glibc's libraries, libstdc++, libgcc_s) and CUDA's (the CUDA runtime is linked statically into the build;
cuBLAS, cuDNN and NVML are opened at run time). Each copy is stripped (strip --strip-unneeded), renamed after its content
(libzmq.so.5 becomes libzmq-1a2b3c4d.so.5, so that a process that already loaded another libzmq.so.5 keeps both
apart), and the executable, libpshard_c.so and the copies name each other's new names and find them through an
$ORIGIN-relative RUNPATH (patchelf). Each copy's licence, /usr/share/doc/PACKAGE/copyright of the Debian package it
comes from (dpkg -S), goes to pshard/lib/licenses/PACKAGE.copyright; pshard/lib/BUNDLED.txt lists, one line a copy,
its name, the library it replaces, where it came from, its package and version, and its licence file.

The wheel's tag, py3-none-manylinux_2_X_<arch>, states the glibc it needs: X is the highest GLIBC_2.X symbol version
that any packed ELF file refers to (objdump -T), so the wheel installs on glibc 2.X and newer; build on an older
distribution for an older glibc.

  scripts/build_wheel.py --build build --out dist      # dist/pshard-0.1.0-py3-none-manylinux_2_34_x86_64.whl
"""
import argparse
import base64
import hashlib
import os
import platform
import re
import shutil
import stat
import subprocess
import sys
import tempfile
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

# Libraries every node has and that are never bundled: glibc's, the C++ runtime, and the kernel's vDSO.
BASE_SYSTEM = re.compile(r"^(linux-vdso|linux-gate|ld-linux[\w.-]*|libc|libm|libdl|libpthread|librt|libresolv|libutil|"
                         r"libnsl|libanl|libmvec|libBrokenLocale|libstdc\+\+|libgcc_s)\.so")
# CUDA's libraries come from the node's driver and toolkit (or pip's nvidia-* packages), as before.
CUDA = re.compile(r"^lib(cuda|cudart|cublas|cublasLt|cudnn\w*|nvidia-ml|nvrtc\w*|nvJitLink|cufft|curand|cusparse|"
                  r"cusolver|nccl|nvToolsExt)\.so")


def package_version():
    text = open(os.path.join(REPO, "python", "pshard", "__init__.py")).read()
    m = re.search(r'^__version__ = "([^"]+)"', text, re.M)
    if not m:
        sys.exit("build_wheel: python/pshard/__init__.py has no __version__")
    return m.group(1)


def executable_version(exe):
    out = subprocess.run([exe, "--version"], capture_output=True, text=True, check=True).stdout.split()
    return out[-1] if out else ""


def output(argv):
    r = subprocess.run(argv, capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit("build_wheel: %s failed (exit %d): %s" % (" ".join(argv), r.returncode, r.stderr.strip()))
    return r.stdout


def needed_libraries(elf):
    """{soname: path} of every shared library ELF needs, recursively, as the dynamic loader resolves them (ldd)."""
    found = {}
    for line in output(["ldd", elf]).splitlines():
        m = re.match(r"\s*(\S+) => (.*?)(?: \(0x[0-9a-f]+\))?$", line)
        if not m:
            continue  # the vDSO and the loader itself: "name (address)"
        soname, path = m.groups()
        if path == "not found":
            sys.exit("build_wheel: %s needs %s, which this machine does not have" % (elf, soname))
        found[soname] = path
    return found


def is_bundled(soname, path):
    return not (BASE_SYSTEM.match(soname) or CUDA.match(soname) or path.startswith("/usr/local/cuda"))


def bundled_name(soname, data):
    """libzmq.so.5 -> libzmq-<first 8 hex digits of the file's SHA-256>.so.5."""
    stem, dot_so, rest = soname.partition(".so")
    return "%s-%s%s%s" % (stem, hashlib.sha256(data).hexdigest()[:8], dot_so, rest)


def debian_package(path):
    """(package, version) that installed PATH (dpkg -S), trying the path as given and resolved, with and without
    the /usr of a merged-/usr system."""
    candidates = []
    for p in (path, os.path.realpath(path)):
        candidates += [p, p[len("/usr"):] if p.startswith("/usr/") else "/usr" + p]
    for p in candidates:
        r = subprocess.run(["dpkg", "-S", p], capture_output=True, text=True)
        if r.returncode == 0 and r.stdout.strip():
            package = r.stdout.split(":", 1)[0].strip()
            version = output(["dpkg-query", "-W", "-f=${Version}", package]).strip()
            return package, version
    sys.exit("build_wheel: no Debian package owns %s (dpkg -S): its licence cannot go into the wheel" % path)


def highest_symbol_version(elfs, prefix):
    """The highest PREFIX.N.M... symbol version (e.g. GLIBC_2.34) that any of ELFS refers to (objdump -T), as a
    tuple of ints; () when none does."""
    best = ()
    pattern = re.compile(re.escape(prefix) + r"_([0-9.]+)\b")
    for elf in elfs:
        for m in pattern.finditer(output(["objdump", "-T", elf])):
            version = tuple(int(v) for v in m.group(1).strip(".").split("."))
            best = max(best, version)
    return best


def patch(path, replacements, rpath, soname=None):
    """Points PATH's NEEDED entries at the bundled copies' names, sets its RUNPATH (and SONAME) with patchelf: one
    change a call (patchelf 0.14 mixes up the strings of several changes made in one call)."""
    if soname:
        output(["patchelf", "--set-soname", soname, path])
    argv = ["patchelf"]
    for old in output(["patchelf", "--print-needed", path]).split():
        if old in replacements:
            argv += ["--replace-needed", old, replacements[old]]
    if len(argv) > 1:
        output(argv + [path])
    output(["patchelf", "--set-rpath", rpath, path])


def bundle(exe, lib, work):
    """Copies the libraries that EXE and LIB need into WORK/lib and patches all of them; returns the patched
    executable, library, [(bundled name, soname, source path, package, version)] and {package: copyright path}."""
    if not shutil.which("patchelf"):
        sys.exit("build_wheel: patchelf is missing: install it (scripts/install-deps.sh, or apt-get install patchelf)")
    libs = {}
    for elf in (exe, lib):
        libs.update(needed_libraries(elf))
    libs = {soname: path for soname, path in libs.items() if is_bundled(soname, path)}
    os.makedirs(os.path.join(work, "lib"))
    os.makedirs(os.path.join(work, "bin"))
    names = {}
    copies = []
    licences = {}
    for soname, path in sorted(libs.items()):
        copy = os.path.join(work, "lib", soname)
        shutil.copyfile(path, copy)
        os.chmod(copy, 0o755)
        if shutil.which("strip"):
            output(["strip", "--strip-unneeded", copy])
        names[soname] = bundled_name(soname, open(path, "rb").read())
        package, version = debian_package(path)
        copyright_file = os.path.join("/usr/share/doc", package, "copyright")
        if not os.path.isfile(copyright_file):
            sys.exit("build_wheel: %s (package %s) has no %s" % (soname, package, copyright_file))
        licences[package] = copyright_file
        copies.append((names[soname], soname, path, package, version))
    for soname in libs:
        old = os.path.join(work, "lib", soname)
        patch(old, names, "$ORIGIN", soname=names[soname])
        os.rename(old, os.path.join(work, "lib", names[soname]))
    # The build's own RUNPATH entries stay (CUDA's library folder), except folders of libraries now bundled.
    source_dirs = {os.path.dirname(p) for p in libs.values()} | {os.path.dirname(os.path.realpath(p))
                                                                  for p in libs.values()}

    def kept_rpath(elf):
        text = output(["patchelf", "--print-rpath", elf]).strip()
        return [d for d in text.split(":") if d and d not in source_dirs]

    patched_exe = os.path.join(work, "bin", "pshard")
    patched_lib = os.path.join(work, "libpshard_c.so")
    shutil.copyfile(exe, patched_exe)
    shutil.copyfile(lib, patched_lib)
    os.chmod(patched_exe, 0o755)
    os.chmod(patched_lib, 0o755)
    patch(patched_exe, names, ":".join(["$ORIGIN/../lib"] + kept_rpath(exe)))
    patch(patched_lib, names, ":".join(["$ORIGIN/lib"] + kept_rpath(lib)))
    return patched_exe, patched_lib, copies, licences


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
    work = tempfile.mkdtemp(prefix="pshard-wheel-")
    try:
        wheel = pack(exe, lib, version, args.out, work)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print(wheel)


def pack(exe, lib, version, out, work):
    exe, lib, copies, licences = bundle(exe, lib, work)
    bundled = [os.path.join(work, "lib", c[0]) for c in copies]
    glibc = highest_symbol_version([exe, lib] + bundled, "GLIBC")
    glibcxx = highest_symbol_version([exe, lib] + bundled, "GLIBCXX")
    if len(glibc) < 2 or glibc[0] != 2:
        sys.exit("build_wheel: no GLIBC_2.X symbol version found in the packed files (objdump -T)")
    arch = platform.machine()
    tag = "py3-none-manylinux_2_%d_%s" % (glibc[1], arch)
    dist_info = "pshard-%s.dist-info" % version
    os.makedirs(out, exist_ok=True)
    wheel = os.path.join(out, "pshard-%s-%s.whl" % (version, tag))
    records = []
    with zipfile.ZipFile(wheel + ".part", "w") as zf:
        pkg = os.path.join(REPO, "python", "pshard")
        for name in sorted(os.listdir(pkg)):
            if name.endswith(".py"):
                add(zf, records, "pshard/" + name, open(os.path.join(pkg, name), "rb").read())
        add(zf, records, "pshard/_cli.py", CLI.encode())
        add(zf, records, "pshard/libpshard_c.so", open(lib, "rb").read())
        add(zf, records, "pshard/bin/pshard", open(exe, "rb").read(), executable=True)
        listing = ["# bundled name, library it replaces, copied from, Debian package, version, licence file"]
        for name, soname, source, package, pkg_version in copies:
            add(zf, records, "pshard/lib/" + name, open(os.path.join(work, "lib", name), "rb").read())
            listing.append("%s %s %s %s %s licenses/%s.copyright" % (name, soname, source, package, pkg_version,
                                                                      package))
        for package, path in sorted(licences.items()):
            add(zf, records, "pshard/lib/licenses/%s.copyright" % package, open(path, "rb").read())
        add(zf, records, "pshard/lib/BUNDLED.txt", ("\n".join(listing) + "\n").encode())
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
    size = os.path.getsize(wheel)
    print("build_wheel: %d libraries bundled (%s); needs glibc >= 2.%d and libstdc++ with GLIBCXX_%s; %.1f MiB"
          % (len(copies), " ".join(c[1] for c in copies), glibc[1], ".".join(map(str, glibcxx)) or "-",
             size / 2.0 ** 20), file=sys.stderr)
    return wheel


if __name__ == "__main__":
    main()
