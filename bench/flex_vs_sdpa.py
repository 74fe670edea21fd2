"""FlexAttention (torch.compile'd on the CPU) with the scale-invariant score_mod against PyTorch's
plain causal SDPA, in one process, repetitions interleaved: the Python side of
bench/attention_vs_torch.sh (bench_torch_peers times our fused kernel against the same SDPA in C++).

    logit = a_t * q.k / sqrt(D) + m_t,   a_t = sqrt(1 + 2 ln(1 + t/tau)),   m_t = -2 ln(1 + t/tau)

t = i - j, tau = 10, causal, B = 1. Prints one TSV line per case, `case T D pass kernel min_ms
median_ms` (min_ms `nan` with the reason on stderr where a kernel cannot run: the pinned torch
may have no CPU backward for Flex).
"""
import argparse
import math
import sys
import time

import torch
import torch.nn.functional as F
from torch.nn.attention.flex_attention import create_block_mask, flex_attention

import flex_score_mods  # beside this script


def step_of(attend, H, T, D, backward):
    torch.manual_seed(0)
    q, k, v = (torch.randn(1, H, T, D, requires_grad=backward) for _ in range(3))
    grad = torch.randn(1, H, T, D)

    def step():
        if not backward:
            with torch.no_grad():
                attend(q, k, v)
            return
        for x in (q, k, v):
            x.grad = None
        attend(q, k, v).backward(grad)

    return step


def time_ms(step):
    t0 = time.perf_counter()
    step()
    return (time.perf_counter() - t0) * 1e3


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--contexts", default="4096,16384")
    parser.add_argument("--head-dims", default="64,128")
    parser.add_argument("--heads", type=int, default=4)
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--tau", type=float, default=10.0)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    scale_invariant = flex_score_mods.scale_invariant(args.tau)
    causal = flex_score_mods.causal

    flex = torch.compile(flex_attention, dynamic=False)
    for D in (int(x) for x in args.head_dims.split(",")):
        for T in (int(x) for x in args.contexts.split(",")):
            mask = create_block_mask(causal, 1, 1, T, T, device="cpu")
            kernels = {
                "sdpa (Python)": lambda q, k, v: F.scaled_dot_product_attention(q, k, v, is_causal=True),
                "flex si": lambda q, k, v: flex(q, k, v, score_mod=scale_invariant, block_mask=mask),
            }
            for backward in (False, True):
                steps, times = {}, {}
                for name, attend in kernels.items():
                    step = step_of(attend, args.heads, T, D, backward)
                    try:
                        step()  # warm-up (Flex: compiles)
                        steps[name], times[name] = step, []
                    except Exception as error:  # noqa: BLE001 (reported, not hidden)
                        first = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
                        print(f"flex_vs_sdpa: {name} T={T} D={D} {'fwd+bwd' if backward else 'fwd'}: "
                              f"{type(error).__name__}: {first}", file=sys.stderr)
                for _ in range(args.reps):
                    for name, step in steps.items():
                        times[name].append(time_ms(step))
                pass_name = "fwd+bwd" if backward else "fwd"
                for name in kernels:
                    t = sorted(times.get(name, []))
                    low, mid = (t[0], t[len(t) // 2]) if t else (math.nan, math.nan)
                    print(f"case\t{T}\t{D}\t{pass_name}\t{name}\t{low:.2f}\t{mid:.2f}", flush=True)


if __name__ == "__main__":
    main()
