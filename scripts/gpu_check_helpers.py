"""scripts/gpu-check.sh's Python steps, with only torch and the standard library (the lent GPU
machine's Python has pip torch, perhaps no numpy, h5py or pytest):

    gpu_check_helpers.py shards DIR [--docs N]     synthetic GPT-2 token shards for `harness train`
    gpu_check_helpers.py run-h5 RUN.h5 STEPS       a finished run's record (h5py if installed)
    gpu_check_helpers.py operator-test [--dry-run] the operator's CUDA test case(s), with pytest
                                                   if installed, else a minimal stand-in for it
    gpu_check_helpers.py results OURS.csv FLEX.csv our kernel's timings beside FlexAttention's

Exit code 0 passed, 1 failed, 77 skipped (operator-test without a CUDA device)."""
import argparse
import array
import csv
import importlib.util
import math
import os
import pathlib
import subprocess
import sys
import types

REPO = pathlib.Path(__file__).resolve().parents[1]
DOC_TOKENS = 70000  # each 16L = 65536-token validation window fits in one document


def shards(out, docs):
    """Zipf-like ids below 50256 in documents of 70,000 tokens, each opened by <|endoftext|> as the
    FineWeb shards are (modded-nanogpt's format: a 256-int32 header, then uint16 tokens). Speed
    does not depend on the values; the loss falls only to this distribution's entropy."""
    import torch
    os.makedirs(out, exist_ok=True)
    generator = torch.Generator().manual_seed(0)
    weights = 1.0 / torch.arange(1, 50257, dtype=torch.float64) ** 1.1
    for name, count in (("synthetic_train_000001.bin", docs), ("synthetic_val_000000.bin", max(1, docs // 16))):
        tokens = torch.multinomial(weights, count * DOC_TOKENS, replacement=True, generator=generator)
        tokens[::DOC_TOKENS] = 50256
        header = array.array("i", [20240520, 1, tokens.numel()] + [0] * 253)
        with open(os.path.join(out, name), "wb") as f:
            header.tofile(f)
            array.array("H", tokens.tolist()).tofile(f)
    print(f"shards: {out} ({docs} + {max(1, docs // 16)} documents of {DOC_TOKENS} tokens)")
    return 0


def run_h5(path, steps):
    try:
        import h5py
    except ImportError:
        print(f"run.h5: h5py not installed; {path} kept for reading elsewhere")
        return 0 if os.path.getsize(path) > 0 else 1
    f = h5py.File(path, "r")
    state = f["status"].attrs["state"]
    state = state.decode() if isinstance(state, bytes) else state
    got = [int(s) for s in f["train/step"][:]]
    tokens, seconds = f["train/tokens"][:], f["train/seconds"][:]
    print(f"run.h5: state {state}, steps {got[0]}..{got[-1]} ({len(got)} rows), "
          f"{tokens[-1] / seconds[-1]:.0f} tokens/s over the run")
    for T in sorted(f["eval"], key=int):
        print(f"  validation at {T}: loss {f[f'eval/{T}/loss'][-1]:.4f}")
    ok = state == "done" and got == list(range(1, steps + 1)) and len(f["eval"]) == 3
    return 0 if ok else 1


def pytest_stand_in():
    """Enough of pytest for test_operator.py to import and its parametrised tests to be called."""
    module = types.ModuleType("pytest")

    class Mark:
        def __getattr__(self, name):
            def decorator_factory(*args, **kwargs):
                def decorate(fn):
                    if name == "parametrize":
                        names = [n.strip() for n in args[0].split(",")]
                        values = [v if len(names) > 1 else (v,) for v in args[1]]
                        fn.__dict__.setdefault("params", []).insert(0, (names, values))
                    elif name == "skipif" and args and args[0]:
                        fn.skip_reason = kwargs.get("reason", "skipped")
                    return fn
                return decorate
            return decorator_factory

    module.mark = Mark()
    module.fixture = lambda *a, **k: (a[0] if a and callable(a[0]) else (lambda fn: fn))
    module.raises = module.approx = None
    return module


def calls(fn):
    """Every keyword combination of a function's parametrize decorators."""
    combos = [{}]
    for names, values in getattr(fn, "params", []):
        combos = [dict(c, **dict(zip(names, v))) for c in combos for v in values]
    return combos


def operator_test(dry_run):
    import torch
    if dry_run:  # here: the test module imports under the stand-in, and which cases would run
        sys.modules["pytest"] = pytest_stand_in()
        try:
            import scale_invariant_attention  # noqa: F401
        except ImportError:
            sys.modules["scale_invariant_attention"] = types.ModuleType("scale_invariant_attention")
        spec = importlib.util.spec_from_file_location("test_operator", REPO / "python" / "tests" / "test_operator.py")
        tests = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(tests)
        cases = [f"{n}{c}" for n in dir(tests) if n.startswith("test_") and "cuda" in n for c in calls(getattr(tests, n))]
        print(f"operator-test --dry-run: {len(cases)} case(s): {cases}")
        return 0 if cases else 1
    if not torch.cuda.is_available():
        print("operator-test: SKIPPED (no CUDA device)")
        return 77
    test_file = REPO / "python" / "tests" / "test_operator.py"
    try:
        import pytest  # noqa: F401
        return subprocess.call([sys.executable, "-m", "pytest", "-q", "-x", "-k", "cuda", str(test_file)])
    except ImportError:
        sys.modules["pytest"] = pytest_stand_in()
    spec = importlib.util.spec_from_file_location("test_operator", test_file)
    tests = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(tests)
    failures = ran = 0
    for name in sorted(n for n in dir(tests) if n.startswith("test_") and "cuda" in n):
        fn = getattr(tests, name)
        for kwargs in calls(fn):
            label = f"{name}[{', '.join(map(str, kwargs.values()))}]"
            if getattr(fn, "skip_reason", None):
                print(f"SKIP {label}: {fn.skip_reason}")
                continue
            ran += 1
            try:
                fn(**kwargs)
                print(f"ok   {label}")
            except Exception as error:  # a failing case is reported, the others still run
                failures += 1
                print(f"FAIL {label}: {type(error).__name__}: {str(error)[:400]}")
    print(f"operator-test (pytest stand-in): {ran - failures} of {ran} passed")
    return 1 if failures or not ran else 0


def results(ours_path, flex_path):
    def load(path):
        if not os.path.exists(path):
            return {}
        with open(path) as f:
            return {(row["T"], row["dtype"]): row for row in csv.DictReader(f)}

    ours, flex = load(ours_path), load(flex_path)

    def cell(table, key, column):
        try:
            value = float(table[key][column])
        except (KeyError, ValueError):
            return "n/a"
        return "n/a" if math.isnan(value) else f"{value:.3f}"

    print("causal attention, B=1, H=6, D=128, scale-invariant logits (tau=10); times in ms")
    print("%-7s %-6s %10s %10s %14s %14s" % ("T", "dtype", "ours fwd", "flex fwd", "ours fwd+bwd", "flex fwd+bwd"))
    for seq_len in ("1024", "4096", "16384"):
        for dtype in ("fp32", "bf16"):
            key = (seq_len, dtype)
            print("%-7s %-6s %10s %10s %14s %14s" % (seq_len, dtype, cell(ours, key, "fwd_ms"), cell(flex, key, "fwd_ms"),
                                                     cell(ours, key, "fwd_bwd_ms"), cell(flex, key, "fwd_bwd_ms")))
    return 0


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("shards")
    p.add_argument("dir")
    p.add_argument("--docs", type=int, default=64)
    p = sub.add_parser("run-h5")
    p.add_argument("path")
    p.add_argument("steps", type=int)
    p = sub.add_parser("operator-test")
    p.add_argument("--dry-run", action="store_true")
    p = sub.add_parser("results")
    p.add_argument("ours")
    p.add_argument("flex")
    a = parser.parse_args()
    if a.command == "shards":
        return shards(a.dir, a.docs)
    if a.command == "run-h5":
        return run_h5(a.path, a.steps)
    if a.command == "operator-test":
        return operator_test(a.dry_run)
    return results(a.ours, a.flex)


if __name__ == "__main__":
    sys.exit(main())
