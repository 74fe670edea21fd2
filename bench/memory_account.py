#!/usr/bin/env python3
"""A process's memory by where it comes from (#60 item 3), sampled from /proc/PID/smaps.

    bench/memory_account.py [--interval 0.05] [--label NAME] [--json FILE] -- COMMAND ...

Runs COMMAND, reads /proc/PID/smaps every INTERVAL seconds (the process's whole tree is not
followed: the command itself, e.g. `harness train` or `python peer.py`), and keeps the sample
with the largest total Rss (the peak, to the interval's resolution; /usr/bin/time's
'Maximum resident set size' is the exact peak and is printed beside it). Each mapping goes to one
group:

  CUDA libraries       file-backed mappings of libcu*, libnv*, libnccl, libcudnn, libtorch_cuda,
                       libc10_cuda, libtorch_nvshmem, libcufile … (their Rss: code and data pages
                       touched, Private_Dirty: relocated data)
  torch CPU libraries  libtorch_cpu, libc10, libtorch, libgomp, MKL, libtorch_python …
  other libraries      every other file-backed mapping (libstdc++, HDF5, Gloo's, Python's …)
  heap + anonymous     [heap] and anonymous mappings (tensors, the allocator's caches, the
                       corpus once read, the interpreter's objects)
  stack, other         [stack], [vdso], …

Prints a table (MiB: Rss, Private_Dirty, Private_Clean, Shared) and, with --json, the numbers.
The process's exit status is passed on.
"""
import argparse
import json
import os
import re
import subprocess
import sys
import time

CUDA = re.compile(r"/(libcu|libnv|libnccl|libcudnn|libtorch_cuda|libc10_cuda|libtorch_nvshmem|libcufile|"
                  r"libcusparse|libcublas|libcurand|libcufft|libcupti|libcudart|libnvrtc|libnvJitLink|libcusolver)[^/]*$")
TORCH = re.compile(r"/(libtorch|libc10|libgomp|libmkl|libiomp|libshm|libtorch_python|_C\.)[^/]*$")
GROUPS = ["CUDA libraries", "torch CPU libraries", "other libraries", "heap + anonymous", "stack, other"]
FIELDS = ["Rss", "Private_Dirty", "Private_Clean", "Shared_Clean", "Shared_Dirty"]


def group_of(name):
    if name.startswith("/") and not name.startswith("/dev/") and not name.startswith("/memfd"):
        if CUDA.search(name):
            return 0
        if TORCH.search(name):
            return 1
        return 2
    if name in ("", "[heap]") or name.startswith("[anon") or name.startswith("/dev/zero") or name.startswith("/memfd"):
        return 3
    return 4


def sample(pid):
    totals = [{f: 0 for f in FIELDS} for _ in GROUPS]
    libs = {}
    cuda_files = set()
    try:
        with open(f"/proc/{pid}/smaps") as f:
            g = 4
            name = ""
            for line in f:
                head = line.split(None, 1)[0]
                if "-" in head and not head.endswith(":"):  # a mapping's header line
                    parts = line.split(None, 5)
                    name = parts[5].strip() if len(parts) > 5 else ""
                    g = group_of(name)
                    if g == 0:
                        cuda_files.add(os.path.basename(name))
                    if g in (0, 1, 2):
                        libs.setdefault(os.path.basename(name), [g, 0, 0])
                    continue
                key = head.rstrip(":")
                if key in FIELDS:
                    kb = int(line.split()[1])
                    totals[g][key] += kb
                    if g in (0, 1, 2) and key in ("Rss", "Private_Dirty"):
                        libs[os.path.basename(name)][1 if key == "Rss" else 2] += kb
    except (FileNotFoundError, ProcessLookupError, PermissionError):
        return None
    return totals, libs, sorted(cuda_files)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--interval", type=float, default=0.05)
    ap.add_argument("--label", default="")
    ap.add_argument("--json")
    ap.add_argument("command", nargs=argparse.REMAINDER)
    a = ap.parse_args()
    cmd = a.command[1:] if a.command and a.command[0] == "--" else a.command
    if not cmd:
        ap.error("no command")
    timefile = f"/tmp/memory_account.{os.getpid()}.time"
    proc = subprocess.Popen(["/usr/bin/time", "-v", "-o", timefile] + cmd,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    # /usr/bin/time forks the command: follow its child.
    child = None
    best = None
    while proc.poll() is None:
        if child is None:
            try:
                with open(f"/proc/{proc.pid}/task/{proc.pid}/children") as f:
                    kids = f.read().split()
                child = int(kids[0]) if kids else None
            except FileNotFoundError:
                pass
        if child is not None:
            s = sample(child)
            if s and (best is None or sum(g["Rss"] for g in s[0]) > sum(g["Rss"] for g in best[0])):
                best = s
        time.sleep(a.interval)
    peak_kib = 0
    try:
        for line in open(timefile):
            if "Maximum resident set size" in line:
                peak_kib = int(line.split(":")[1])
        os.unlink(timefile)
    except FileNotFoundError:
        pass
    if best is None:
        print(f"memory_account: no sample of {' '.join(cmd)} (ran too briefly?)", file=sys.stderr)
        return proc.returncode or 1
    totals, libs, cuda_files = best
    mib = lambda kb: kb / 1024.0
    label = a.label or " ".join(cmd)[:80]
    print(f"#### {label}\n")
    print(f"Peak RSS (/usr/bin/time): {mib(peak_kib):.0f} MiB; the largest sample: "
          f"{mib(sum(g['Rss'] for g in totals)):.0f} MiB Rss, "
          f"{mib(sum(g['Private_Dirty'] for g in totals)):.0f} MiB private dirty. "
          f"{len(cuda_files)} CUDA libraries mapped.\n")
    print("| group | Rss MiB | private dirty MiB | private clean MiB | shared MiB |")
    print("|---|---|---|---|---|")
    for name, t in zip(GROUPS, totals):
        print(f"| {name} | {mib(t['Rss']):.1f} | {mib(t['Private_Dirty']):.1f} | {mib(t['Private_Clean']):.1f} | "
              f"{mib(t['Shared_Clean'] + t['Shared_Dirty']):.1f} |")
    top = sorted(libs.items(), key=lambda kv: -kv[1][1])[:8]
    print("\nLargest libraries by Rss (MiB, private dirty in brackets): " +
          ", ".join(f"{n} {mib(v[1]):.0f} ({mib(v[2]):.0f})" for n, v in top) + "\n")
    print(f"MEMORY label=\"{label}\" peak_rss_mib={mib(peak_kib):.1f} "
          + " ".join(f"{k}_rss_mib={mib(t['Rss']):.1f} {k}_dirty_mib={mib(t['Private_Dirty']):.1f}"
                     for k, t in zip(["cuda", "torchcpu", "otherlib", "anon", "misc"], totals))
          + f" cuda_libs={len(cuda_files)}\n")
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"label": label, "peak_rss_kib": peak_kib, "groups": dict(zip(GROUPS, totals)),
                       "cuda_libraries": cuda_files, "libs": libs}, f, indent=1)
    return proc.returncode


if __name__ == "__main__":
    sys.exit(main())
