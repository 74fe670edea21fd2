#!/usr/bin/env python3
"""The PyTorch operator (torch.ops.scale_invariant, docs/pytorch-operator.md) against FlexAttention
with the same score_mod, torch.compile'd, on the CPU, in one process with repetitions interleaved:

    logit = a_t * q.k / sqrt(D) + m_t,   a_t = sqrt(1 + 2 ln(1 + t/tau)),   m_t = -2 ln(1 + t/tau)

t = i - j, tau = 10, causal, B = 1 (the operator's si+nope; q, k not rotated by either). Checks
that both give the same output first (max |difference| printed). Prints a Markdown table: minimum
and median ms of each, and Flex's time over the operator's (above 1: the operator is faster).
Forward+backward is timed for the operator only where Flex has no CPU backward (torch 2.11).

    PYTHONPATH=<the package> python bench/operator_vs_flex.py [--threads 2] [--seq-lens 1024,4096]
"""
import argparse
import os
import platform
import statistics
import time

# Inductor compiles in this process: a pool of compile workers left running beside the timings
# slows both kernels (as bench/attention_vs_torch.sh does).
os.environ.setdefault("TORCHINDUCTOR_COMPILE_THREADS", "1")

import torch  # noqa: E402
from torch.nn.attention.flex_attention import create_block_mask, flex_attention

import flex_score_mods  # noqa: E402  (beside this script)

import scale_invariant_attention as sia  # noqa: E402


def cpu_name():
    try:
        with open("/proc/cpuinfo") as f:
            return next(line.split(":", 1)[1].strip() for line in f if line.startswith("model name"))
    except (OSError, StopIteration):
        return platform.processor() or "unknown CPU"


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--seq-lens", default="1024,4096")
    parser.add_argument("--heads", type=int, default=4)
    parser.add_argument("--head-dims", default="64,128")
    parser.add_argument("--tau", type=float, default=10.0)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    scale_invariant = flex_score_mods.scale_invariant(args.tau)
    causal = flex_score_mods.causal

    # A compile per shape (dynamic=False): a dynamic-shape recompile would time a slower kernel.
    for name in ("recompile_limit", "cache_size_limit"):
        if hasattr(torch._dynamo.config, name):
            setattr(torch._dynamo.config, name, 64)
    flex = torch.compile(flex_attention, dynamic=False)
    print(f"# {cpu_name()}, {args.threads} threads, torch {torch.__version__}, B = 1, H = {args.heads}, "
          f"float32, causal, tau = {args.tau}; min / median of {args.repeats} interleaved repetitions\n")
    print("| T | D | pass | operator ms (min / median) | Flex ms (min / median) | Flex / operator (min) | max abs diff |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    for D in (int(d) for d in args.head_dims.split(",")):
        for T in (int(t) for t in args.seq_lens.split(",")):
            torch.manual_seed(0)
            q, k, v = (torch.randn(1, args.heads, T, D) for _ in range(3))
            mask = create_block_mask(causal, None, None, T, T, device="cpu")

            def ours():
                with torch.no_grad():
                    return sia.attention(q, k, v, "si+nope", tau=args.tau)

            def theirs():
                with torch.no_grad():
                    return flex(q, k, v, score_mod=scale_invariant, block_mask=mask)

            diff = (ours() - theirs()).abs().max().item()  # also the compile and warm-up
            times = {ours: [], theirs: []}
            for _ in range(args.repeats):
                for f in (ours, theirs):
                    start = time.perf_counter()
                    f()
                    times[f].append((time.perf_counter() - start) * 1e3)
            a, b = times[ours], times[theirs]
            print(f"| {T} | {D} | fwd | {min(a):.1f} / {statistics.median(a):.1f} | "
                  f"{min(b):.1f} / {statistics.median(b):.1f} | {min(b) / min(a):.2f}x | {diff:.1e} |")

            qg, kg, vg = (x.clone().requires_grad_() for x in (q, k, v))
            grad = torch.randn_like(q)
            step = lambda: sia.attention(qg, kg, vg, "si+nope", tau=args.tau).backward(grad)  # noqa: E731
            step()
            c = []
            for _ in range(args.repeats):
                start = time.perf_counter()
                step()
                c.append((time.perf_counter() - start) * 1e3)
            print(f"| {T} | {D} | fwd+bwd | {min(c):.1f} / {statistics.median(c):.1f} | see below | – | – |")

    # Last: a failed compile makes dynamo run flex_attention eagerly from then on (its frame is
    # skipped), which would have timed the eager kernel for every later shape.
    q = torch.randn(1, 1, 128, 16, requires_grad=True)
    try:
        flex(q, q, q, score_mod=scale_invariant,
             block_mask=create_block_mask(causal, None, None, 128, 128, device="cpu")).sum().backward()
        print("\nFlex forward+backward runs on this torch's CPU backend (not timed here).")
    except Exception as error:  # torch 2.11: no FlexAttention backward on the CPU
        print(f"\nFlex forward+backward on the CPU: {type(error).__name__}: {str(error).splitlines()[0][:120]}")


if __name__ == "__main__":
    main()
