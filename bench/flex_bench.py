#!/usr/bin/env python3
"""Times PyTorch FlexAttention (torch.compile'd) with the scale-invariant score_mod, the baseline the
fused CUDA kernels are compared with by scripts/gpu-check.sh.

Same problem as tests/cuda/gpu_check.cpp's timings: causal, B=1, H=6, D=128, scale 1/sqrt(D),

    logit = a_t * scale * q.k + m_t,   a_t = sqrt(1 + 2 ln(1 + t/tau)),   m_t = -2 ln(1 + t/tau),

t = i - j, tau = 10. Writes CSV rows "T,dtype,fwd_ms,fwd_bwd_ms" (nan where a configuration failed or
the time budget ran out). Exit code 0 unless FlexAttention itself is unavailable (2).
"""
import argparse
import math
import sys
import time


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--csv", help="write results here")
    parser.add_argument("--seq-lens", default="1024,4096,16384")
    parser.add_argument("--heads", type=int, default=6)
    parser.add_argument("--head-dim", type=int, default=128)
    parser.add_argument("--tau", type=float, default=10.0)
    parser.add_argument("--budget-s", type=float, default=300.0,
                        help="start no new configuration after this many seconds (compiles are slow)")
    args = parser.parse_args()

    try:
        import torch
        import torch._dynamo
        from torch.nn.attention.flex_attention import create_block_mask, flex_attention
    except ImportError as error:  # torch < 2.5 has no FlexAttention
        print(f"flex_bench: FlexAttention unavailable ({error}); needs torch >= 2.5", file=sys.stderr)
        return 2
    if not torch.cuda.is_available():
        print("flex_bench: torch sees no CUDA device", file=sys.stderr)
        return 2

    inv_tau = 1.0 / args.tau

    def scale_invariant(score, batch, head, q_idx, kv_idx):
        # score is already scale * q.k. t < 0 only above the diagonal, which the block mask drops.
        t = (q_idx - kv_idx).clamp(min=0).to(torch.float32)
        log_term = torch.log1p(t * inv_tau)
        return score * torch.sqrt(1.0 + 2.0 * log_term) - 2.0 * log_term

    def causal(batch, head, q_idx, kv_idx):
        return q_idx >= kv_idx

    # 3 lengths x 2 dtypes x (no_grad, grad) can exceed dynamo's default of 8 recompiles, after
    # which it would silently time eager flex_attention (which materialises the T x T scores).
    for name in ("recompile_limit", "cache_size_limit"):
        if hasattr(torch._dynamo.config, name):
            setattr(torch._dynamo.config, name, max(64, getattr(torch._dynamo.config, name)))
    flex = torch.compile(flex_attention)

    def time_ms(body, warmup, iterations):
        for _ in range(warmup):
            body()
        torch.cuda.synchronize()
        start = time.perf_counter()
        for _ in range(iterations):
            body()
        torch.cuda.synchronize()
        return (time.perf_counter() - start) * 1000.0 / iterations

    started = time.perf_counter()
    rows = []
    for seq_len in (int(value) for value in args.seq_lens.split(",")):
        block_mask = create_block_mask(causal, None, None, seq_len, seq_len, device="cuda")
        for dtype_name, dtype in (("fp32", torch.float32), ("bf16", torch.bfloat16)):
            forward_ms = forward_backward_ms = math.nan
            if time.perf_counter() - started > args.budget_s:
                print(f"flex_bench: time budget spent, skipping T={seq_len} {dtype_name}", file=sys.stderr)
                rows.append((seq_len, dtype_name, forward_ms, forward_backward_ms))
                continue
            try:
                shape = (1, args.heads, seq_len, args.head_dim)
                q, k, v = (torch.randn(shape, device="cuda", dtype=dtype, requires_grad=True) for _ in range(3))
                d_o = torch.randn(shape, device="cuda", dtype=dtype)
                iterations = 3 if seq_len >= 16384 else 10

                def forward():
                    with torch.no_grad():
                        flex(q, k, v, score_mod=scale_invariant, block_mask=block_mask)

                def forward_backward():
                    flex(q, k, v, score_mod=scale_invariant, block_mask=block_mask).backward(d_o)

                forward_ms = time_ms(forward, 2, iterations)
                forward_backward_ms = time_ms(forward_backward, 2, iterations)
                print(f"flex T={seq_len} {dtype_name}: fwd {forward_ms:.3f} ms, fwd+bwd {forward_backward_ms:.3f} ms")
            except Exception as error:  # e.g. out of shared memory for fp32 tiles: report, go on
                print(f"flex_bench: T={seq_len} {dtype_name} failed: {type(error).__name__}: {error}"[:500],
                      file=sys.stderr)
            rows.append((seq_len, dtype_name, forward_ms, forward_backward_ms))
            write_csv(args.csv, rows)  # after every row: a run killed at its time limit keeps them
            sys.stdout.flush()

    write_csv(args.csv, rows)
    return 0


def write_csv(path, rows):
    if not path:
        return
    with open(path, "w") as csv:
        csv.write("T,dtype,fwd_ms,fwd_bwd_ms\n")
        for seq_len, dtype_name, forward_ms, forward_backward_ms in rows:
            csv.write(f"{seq_len},{dtype_name},{forward_ms},{forward_backward_ms}\n")


if __name__ == "__main__":
    sys.exit(main())
