#!/usr/bin/env python3
"""Triage one libFuzzer artifact (scripts/fuzz.sh, docs/fuzzing.md): reruns it and prints one line,

  ours: <kind>: <where>               a finding in the project's code (the run fails)
  upstream: <library>: <kind>: <where> a crash, hang or huge allocation inside a system library
                                      (libhdf5, yaml-cpp, LibTorch) reached with memory it owns
  unreproduced: <kind>                the rerun passed (a timeout on a loaded machine, ...)

<where> is the first stack frame below the sanitizers, libFuzzer, libc and the C++ library.
A memory error inside a library on memory our code allocated counts as ours.

  scripts/fuzz_triage.py build-fuzz/fuzz_run_file build-fuzz/fuzz-findings/fuzz_run_file/crash-…
"""
import os
import re
import subprocess
import sys

RUNTIME = re.compile(
    r"__sanitizer|__asan|__ubsan|__interceptor|__lsan|fuzzer::|__libc_|_start\b|^main$|^malloc$|^calloc$|"
    r"^realloc$|^free$|^memcpy$|^memmove$|^memset$|^strlen$|^operator new|^operator delete|^abort$|^raise$|"
    r"__pthread_kill|^__GI_|__memcpy|__memmove|__memset|__strlen|^std::terminate|__cxa_|__gnu_cxx::|"
    r"^std::|finding\(|^\(anonymous namespace\)::finding")
LIBRARIES = {"libhdf5": "libhdf5", "libyaml-cpp": "yaml-cpp", "libtorch": "LibTorch", "libc10": "LibTorch"}
FRAME = re.compile(r"^\s*#\d+ 0x[0-9a-f]+\s+(?:in (?P<func>.+?) )?(?P<loc>[/(].*)$")


def frames(lines):
    out = []
    for line in lines:
        m = FRAME.match(line)
        if not m:
            if out:
                break
            continue
        out.append((m.group("func") or "", m.group("loc")))
    return out


def first_own(stack):
    """The first frame that is not the runtime's, as (library or None, text)."""
    for func, loc in stack:
        name = re.sub(r"\(.*", "", func).strip() or func
        if RUNTIME.search(name) or RUNTIME.search(func):
            continue
        if "/usr/include/" in loc or "libstdc++" in loc or "libc.so" in loc or "libFuzzer" in loc:
            continue
        for key, library in LIBRARIES.items():
            if key in loc:
                if not name:  # a static function: the first named frame of the library
                    name = next((re.sub(r"\(.*", "", f).strip() for f, l in stack[stack.index((func, loc)):]
                                 if key in l and f), "?")
                return library, f"{name} ({os.path.basename(loc.strip('()').split('+')[0])})"
        short = re.sub(r"^\(|\)$", "", loc)
        short = short.replace(os.getcwd() + "/", "")
        return None, f"{name} {short}"
    return None, "no frame"


def main():
    binary, artifact = sys.argv[1], sys.argv[2]
    env = dict(os.environ, ASAN_OPTIONS="detect_leaks=0:symbolize=1", UBSAN_OPTIONS="print_stacktrace=1")
    try:
        run = subprocess.run([binary, "-timeout=10", "-rss_limit_mb=4096", "-malloc_limit_mb=2048", artifact],
                             capture_output=True, text=True, errors="replace", env=env, timeout=300)
        text, code = run.stdout + run.stderr, run.returncode
    except subprocess.TimeoutExpired:
        print(f"ours: hang (> 300 s): {artifact}")
        return
    name = os.path.basename(artifact)
    if code == 0:
        print(f"unreproduced: {name.split('-')[0]}: {name}")
        return
    lines = text.splitlines()
    harness = next((l for l in lines if re.match(r"fuzz_(config|run_file|checkpoint|shard): ", l)), None)
    if harness:
        print(f"ours: {harness}: {name}")
        return
    error = next((i for i, l in enumerate(lines) if "ERROR:" in l or "runtime error:" in l), None)
    if error is None:
        print(f"ours: exit {code}, no sanitizer report: {name}")
        return
    kind = re.sub(r"^.*?(ERROR: (AddressSanitizer|libFuzzer|UndefinedBehaviorSanitizer): |runtime error: )", "",
                  lines[error]).split(" on ")[0].split(" (pc")[0].strip()
    library, where = first_own(frames(lines[error + 1:]))
    if library:
        # A memory error on memory our code allocated is ours, wherever it was written.
        alloc = next((i for i, l in enumerate(lines) if "allocated by thread" in l or "freed by thread" in l), None)
        if alloc is not None:
            owner, owner_where = first_own(frames(lines[alloc + 1:]))
            if owner is None and owner_where != "no frame":
                print(f"ours: {kind}: in {library} on memory from {owner_where}: {name}")
                return
        print(f"upstream: {library}: {kind}: {where}: {name}")
    else:
        print(f"ours: {kind}: {where}: {name}")


if __name__ == "__main__":
    main()
