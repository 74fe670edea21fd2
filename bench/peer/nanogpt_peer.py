#!/usr/bin/env python3
"""nanoGPT-style Python peer of `harness train` (bench/train_vs_peer.sh).

The same model and optimiser step as the C++ harness, written the straightforward PyTorch way,
on the project's pinned torch (.venv/, scripts/install-python.sh):

    build/harness config show --config bench/peer/bench.yaml > /tmp/resolved.yaml
    .venv/bin/python bench/peer/nanogpt_peer.py --config /tmp/resolved.yaml --threads 2

Give it the harness's resolved config (`harness config show`, as bench/train_vs_peer.sh does):
the peer's own DEFAULTS below are a copy of the harness's at the time of writing and can drift.
It refuses keys or values it does not implement rather than ignoring them.

Model (models/gpt.{h,cpp}): byte embedding (V = 256) N(0, 1) → RMSNorm → [block] × layers →
RMSNorm → untied head. Every RMSNorm is parameter-free, x·rsqrt(mean(x²) + 1e-6). Block:
x += o(attn(QKNorm(q(n(x))), QKNorm(k(n(x))), v(n(x)))); x += proj(relu(fc(n(x)))²). No biases.
q/k/v/fc init U(±√3·0.5/√fan_in); o, proj and head zero.

Attention (attention/method.{h,cpp}, score_mod.h), si+p-rope only:
  * respread p-RoPE, half-split pairs (x[k], x[k + D/2]): n_rot = floor(p·D/2) pairs rotate with
    frequencies (1/base)^(k/(n_rot − 1)), the rest are left alone; cos/sin built in float64;
  * the scale-invariant logits, materialised nanoGPT-style as a (B, H, T, T) tensor:
    logit = a_t · (q·k / √D) + m_t, a_t = √(1 + 2·ln(1 + t/τ)), m_t = −2·ln(1 + t/τ), t = i − j,
    causal mask (−inf above the diagonal), softmax, @ v.

Optimiser (models/optimizers.{h,cpp}, muon.{h,cpp}): Muon for the 2-D weights in the blocks
(lerp-form Nesterov momentum, 5 quintic Newton–Schulz steps in float32 on the transposed-if-tall
matrix, lr · max(1, rows/cols)^0.5) + Adam (bias-corrected, eps 1e-10) for the embedding and the
head, each with its own lr (optim.*); constant-cooldown schedule (last 40 % linear to 0). Every
step also computes the global gradient norm in float64 and calls loss.item(), as the harness does.

Data (harness/data): all *.txt of the corpus directory, control characters stripped, split into
train / validation documents by the same FNV-1a-64 name hash (val_fraction 0.1), bytes packed
with a 0 separator before each document, non-overlapping windows of L + 1 in a shuffled order
(the order itself differs from the harness's mt19937-based shuffle).

bench/peer/check_equivalence.py checks all of this against the harness: from the same checkpoint
and the same batches, two steps give the same loss (to 1e-7), gradient norm and weights (3e-7).

Output: one machine-readable line at the end,
    PEER_RESULT tokens_per_s=… timed_steps=… warmup_steps=… seconds=… final_loss=… threads=…
where tokens/s = (steps − warmup) · B · L / (time of those steps), each step timed from fetching
its batch to the end of the optimiser step (as harness/train/trainer.cpp times a step).
"""

import argparse
import math
import os
import sys
import time

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F


# ---- config --------------------------------------------------------------------------------------

DEFAULTS = {
    "data.corpus": "sotu", "data.data_dir": "data", "data.val_fraction": 0.1,
    "model.layers": 2, "model.d_model": 128, "model.heads": 4, "model.head_dim": 0,
    "model.mlp_ratio": 4.0,
    "attention.method": "si+p-rope", "attention.tau": 10.0, "attention.p_rope_base": 1024.0,
    "attention.p_rope_fraction": 0.5, "attention.score_scale": 0.0,
    "train.context": 64, "train.batch_size": 32, "train.steps": 300, "train.seed": 0,
    "train.grad_clip": 0.0,
    "optim.lr_hidden": 0.02, "optim.lr_embed": 0.3, "optim.lr_head": 0.008,
    "optim.beta1": 0.9, "optim.beta2": 0.95, "optim.momentum": 0.95,
    "schedule.cooldown_fraction": 0.4,
}


# Keys the peer implements only at one value (the harness's defaults); anything else would make
# the two runs differ, so it is refused rather than ignored.
FIXED = {
    "data.tokenizer": ("byte",), "data.vocab_size": ("256",),
    "attention.positional": ("", "p-rope"), "attention.transform": ("", "scale-invariant"),
    "attention.p_rope_variant": ("respread",), "train.grad_accum": ("1",),
    "optim.name": ("muon",), "optim.weight_decay": ("0", "0.0"),
    "schedule.kind": ("constant-cooldown",), "schedule.warmup_steps": ("0",),
    "run.device": ("cpu",), "task": ("lm",),
    "train.micro_batch_size": ("0",), "train.precision": ("fp32",),
    "train.activation_checkpointing": ("false",),
}
# Keys that do not change the training step: validation, output, threads (--threads), kernel.
IGNORED = ("name", "eval.", "run.", "attention.kernel", "attention.rope_base", "optim.lr_scalar")


def parse_yaml_subset(path):
    """The run-config subset of YAML the shipped configs use: `section:` then `  key: value`,
    comments, scalars and [a, b] lists; also the flat `section.key: value` lines of `harness
    config show` (the resolved config, which bench/train_vs_peer.sh passes). Returns
    {"section.key": str}."""
    out, section = {}, None
    with open(path, encoding="utf-8") as f:
        for raw in f:
            if "# not read by this run" in raw:
                continue  # `config show` lists keys the run ignores (needle.* of an lm run)
            line = raw.split("#", 1)[0].rstrip()
            if not line.strip():
                continue
            indent = len(line) - len(line.lstrip())
            key, _, value = line.strip().partition(":")
            value = value.strip().strip("'\"")
            if indent == 0:
                section = key if value == "" else None
                if value != "":
                    out[key] = value
            elif section is not None:
                out[f"{section}.{key}"] = value
    return out


def resolve(value, L):
    """'L/400', '4L', '0.25*L', '16' → float (the config layer's relative values)."""
    s = str(value).replace(" ", "")
    if "L" not in s:
        return float(s)
    if s == "L":
        return float(L)
    if s.startswith("L/"):
        return L / float(s[2:])
    if s.endswith("*L"):
        return float(s[:-2]) * L
    if s.endswith("L"):
        return float(s[:-1]) * L
    raise ValueError(f"cannot resolve {value!r} against L = {L}")


def load_config(args):
    raw = parse_yaml_subset(args.config) if args.config else {}
    for kv in args.set or []:
        k, _, v = kv.partition("=")
        raw[k] = v
    c = dict(DEFAULTS)
    L = int(raw.get("train.context", c["train.context"]))
    for k, v in raw.items():
        if k in FIXED and str(v).strip() not in FIXED[k]:
            sys.exit(f"nanogpt_peer.py: {k}: {v!r} is not implemented by the peer (only "
                     f"{' or '.join(repr(x) for x in FIXED[k] if x)})")
        if k not in c:
            if not k.startswith(IGNORED) and k not in FIXED:
                sys.exit(f"nanogpt_peer.py: key {k!r} is not implemented by the peer")
            continue  # keys that do not change the training step (eval.*, run.*, name, …)
        d = c[k]
        if k == "attention.p_rope_fraction" and str(v).strip() == "auto":
            c[k] = 0.5  # the respread variant's default
        elif isinstance(d, bool) or isinstance(d, str):
            c[k] = v
        elif isinstance(d, int):
            c[k] = int(v)
        else:
            c[k] = resolve(v, L)
    if c["attention.method"] != "si+p-rope":
        sys.exit(f"nanogpt_peer.py: only attention.method si+p-rope is implemented, got "
                 f"{c['attention.method']!r}")
    if c["model.head_dim"] == 0:
        c["model.head_dim"] = c["model.d_model"] // c["model.heads"]
    return c


# ---- data ----------------------------------------------------------------------------------------

FNV_OFFSET, FNV_PRIME, MASK64 = 14695981039346656037, 1099511628211, (1 << 64) - 1


def split_position(name):
    h = FNV_OFFSET
    for b in name.encode("utf-8"):
        h = ((h ^ b) * FNV_PRIME) & MASK64
    return (h >> 11) * 2.0 ** -53


_CONTROL = bytes(c for c in range(32) if c not in (9, 10)) + b"\x7f"


def load_train_stream(corpus_dir, val_fraction):
    """uint8 array: for every training document, a 0 byte then its bytes (harness pack_documents)."""
    names = sorted(n for n in os.listdir(corpus_dir)
                   if n.endswith(".txt") and os.path.isfile(os.path.join(corpus_dir, n)))
    if not names:
        sys.exit(f"nanogpt_peer.py: no .txt files in {corpus_dir}")
    is_val = [split_position(n) < val_fraction for n in names]
    parts = []
    for n, v in zip(names, is_val):
        if v:
            continue
        with open(os.path.join(corpus_dir, n), "rb") as f:
            parts.append(b"\x00" + f.read().translate(None, _CONTROL))
    return np.frombuffer(b"".join(parts), dtype=np.uint8)


class Batches:
    """Random non-overlapping windows of L + 1 tokens, a fresh shuffle every epoch."""

    def __init__(self, stream, L, seed):
        self.data = torch.from_numpy(stream[: (len(stream) // (L + 1)) * (L + 1)].copy())
        self.windows = self.data.view(-1, L + 1)
        self.gen = torch.Generator().manual_seed(seed)
        self.order, self.pos = torch.randperm(len(self.windows), generator=self.gen), 0

    def next(self, B):
        if self.pos + B > len(self.order):
            self.order, self.pos = torch.randperm(len(self.windows), generator=self.gen), 0
        idx = self.order[self.pos: self.pos + B]
        self.pos += B
        return self.windows[idx].long()  # (B, L + 1)


# ---- model ---------------------------------------------------------------------------------------

def rms_norm(x, eps=1e-6):
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps)


def p_rope_tables(T, D, base, fraction):
    pairs = D // 2
    n_rot = min(pairs, int(math.floor(fraction * pairs + 1e-9)))
    freq = torch.zeros(pairs, dtype=torch.float64)
    for k in range(n_rot):
        freq[k] = 1.0 if n_rot == 1 else (1.0 / base) ** (k / (n_rot - 1))
    angle = torch.arange(T, dtype=torch.float64)[:, None] * freq[None, :]  # (T, D/2)
    return angle.cos().float(), angle.sin().float()


def apply_rotary(x, cos, sin):
    half = x.size(-1) // 2
    x1, x2 = x[..., :half], x[..., half:]
    return torch.cat([x1 * cos - x2 * sin, x1 * sin + x2 * cos], dim=-1)


def si_tables(T, tau):
    """(T, T) multiplier a_t and bias m_t (−inf above the diagonal), float32."""
    i = torch.arange(T, dtype=torch.float64)
    t = i[:, None] - i[None, :]
    lg = torch.log1p(t.clamp(min=0) / tau)
    mult = torch.sqrt(1 + 2 * lg)
    bias = (-2 * lg).masked_fill(t < 0, float("-inf"))
    return mult.float(), bias.float()


class CausalSelfAttention(nn.Module):
    def __init__(self, c):
        super().__init__()
        C, self.H, self.D = c["model.d_model"], c["model.heads"], c["model.head_dim"]
        HD = self.H * self.D
        self.q = nn.Linear(C, HD, bias=False)
        self.k = nn.Linear(C, HD, bias=False)
        self.v = nn.Linear(C, HD, bias=False)
        self.o = nn.Linear(HD, C, bias=False)
        self.tau, self.base = c["attention.tau"], c["attention.p_rope_base"]
        self.fraction = c["attention.p_rope_fraction"]
        s = c["attention.score_scale"]
        self.scale = s if s > 0 else 1.0 / math.sqrt(self.D)
        self._tables = {}

    def tables(self, T):
        if T not in self._tables:
            self._tables[T] = p_rope_tables(T, self.D, self.base, self.fraction) + si_tables(T, self.tau)
        return self._tables[T]

    def forward(self, x):
        B, T, _ = x.shape
        cos, sin, mult, bias = self.tables(T)
        q = rms_norm(self.q(x).view(B, T, self.H, self.D).transpose(1, 2))  # (B, H, T, D)
        k = rms_norm(self.k(x).view(B, T, self.H, self.D).transpose(1, 2))
        v = self.v(x).view(B, T, self.H, self.D).transpose(1, 2)
        q, k = apply_rotary(q, cos, sin), apply_rotary(k, cos, sin)
        att = (q @ k.transpose(-2, -1)) * self.scale          # (B, H, T, T) raw scores s
        att = att * mult + bias                                # a_t·s + m_t, causal mask in bias
        att = F.softmax(att, dim=-1)
        y = att @ v                                            # (B, H, T, D)
        y = y.transpose(1, 2).contiguous().view(B, T, self.H * self.D)
        return self.o(y)


class MLP(nn.Module):
    def __init__(self, c):
        super().__init__()
        C = c["model.d_model"]
        M = int(round(c["model.mlp_ratio"] * C))
        self.fc = nn.Linear(C, M, bias=False)
        self.proj = nn.Linear(M, C, bias=False)

    def forward(self, x):
        return self.proj(F.relu(self.fc(x)).square())


class Block(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.attn = CausalSelfAttention(c)
        self.mlp = MLP(c)

    def forward(self, x):
        x = x + self.attn(rms_norm(x))
        return x + self.mlp(rms_norm(x))


class GPT(nn.Module):
    def __init__(self, c, vocab_size=256):
        super().__init__()
        self.embed = nn.Embedding(vocab_size, c["model.d_model"])  # N(0, 1)
        self.blocks = nn.ModuleList([Block(c) for _ in range(c["model.layers"])])
        self.head = nn.Linear(c["model.d_model"], vocab_size, bias=False)
        with torch.no_grad():
            for b in self.blocks:
                for lin in (b.attn.q, b.attn.k, b.attn.v, b.mlp.fc):
                    bound = math.sqrt(3.0) * 0.5 / math.sqrt(lin.weight.size(1))
                    lin.weight.uniform_(-bound, bound)
                b.attn.o.weight.zero_()
                b.mlp.proj.weight.zero_()
            self.head.weight.zero_()

    def forward(self, idx, targets):
        x = rms_norm(self.embed(idx))
        for b in self.blocks:
            x = b(x)
        logits = self.head(rms_norm(x))
        return F.cross_entropy(logits.view(-1, logits.size(-1)), targets.reshape(-1))


# ---- optimiser -----------------------------------------------------------------------------------

def newton_schulz5(G, steps=5):
    a, b, c = 3.4445, -4.7750, 2.0315
    X = G.float()
    tall = G.size(0) > G.size(1)
    if tall:
        X = X.t()
    X = X / (X.norm() + 1e-7)
    for _ in range(steps):
        A = X @ X.t()
        B = b * A + c * (A @ A)
        X = a * X + B @ X
    if tall:
        X = X.t()
    return X.to(G.dtype).contiguous()


class Muon(torch.optim.Optimizer):
    def __init__(self, params, lr=0.02, momentum=0.95, nesterov=True, ns_steps=5):
        super().__init__(params, dict(lr=lr, momentum=momentum, nesterov=nesterov,
                                      ns_steps=ns_steps))

    @torch.no_grad()
    def step(self):
        for group in self.param_groups:
            mom = group["momentum"]
            for p in group["params"]:
                g = p.grad
                if g is None:
                    continue
                state = self.state[p]
                if "buf" not in state:
                    state["buf"] = torch.zeros_like(p)
                buf = state["buf"]
                buf.lerp_(g, 1 - mom)
                g = g.lerp(buf, mom) if group["nesterov"] else buf.clone()
                u = newton_schulz5(g, group["ns_steps"])
                scale = max(1.0, p.size(0) / p.size(1)) ** 0.5
                p.add_(u, alpha=-group["lr"] * scale)


def lr_factor(step, total, cooldown):
    x = min(step, total) / total
    if cooldown > 0 and x >= 1 - cooldown:
        return (1 - x) / cooldown
    return 1.0


# ---- main ----------------------------------------------------------------------------------------

def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--config", help="run config YAML (the subset the shipped configs use)")
    ap.add_argument("--set", action="append", help="override a key: --set train.steps=100")
    ap.add_argument("--threads", type=int, default=0, help="torch.set_num_threads (0: all cores)")
    ap.add_argument("--warmup", type=int, default=5, help="steps excluded from tokens/s (default 5)")
    ap.add_argument("--root", default=".", help="relative data.data_dir is resolved against this")
    args = ap.parse_args()
    c = load_config(args)

    threads = args.threads if args.threads > 0 else (os.cpu_count() or 1)
    torch.set_num_threads(threads)
    torch.manual_seed(c["train.seed"])

    corpus = c["data.corpus"]
    corpus_dir = os.path.join(c["data.data_dir"], "sotu") if corpus == "sotu" else corpus
    if not os.path.isabs(corpus_dir):
        corpus_dir = os.path.join(args.root, corpus_dir)
    L, B, steps = c["train.context"], c["train.batch_size"], c["train.steps"]
    batches = Batches(load_train_stream(corpus_dir, c["data.val_fraction"]), L, c["train.seed"])

    model = GPT(c)
    hidden = [p for n, p in model.named_parameters() if n.startswith("blocks.") and p.dim() == 2]
    muon = Muon(hidden, lr=c["optim.lr_hidden"], momentum=c["optim.momentum"])
    betas, eps = (c["optim.beta1"], c["optim.beta2"]), 1e-10
    adam = torch.optim.Adam([dict(params=[model.embed.weight], lr=c["optim.lr_embed"]),
                             dict(params=[model.head.weight], lr=c["optim.lr_head"])],
                            betas=betas, eps=eps)
    groups = [(g, g["lr"]) for opt in (muon, adam) for g in opt.param_groups]
    params = list(model.parameters())
    warmup = min(args.warmup, steps - 1)
    timed, loss_v = 0.0, float("nan")
    model.train()
    for step in range(steps):
        t0 = time.perf_counter()
        f = lr_factor(step, steps, c["schedule.cooldown_fraction"])
        for g, base in groups:
            g["lr"] = base * f
        muon.zero_grad(set_to_none=True)
        adam.zero_grad(set_to_none=True)
        batch = batches.next(B)                               # (B, L + 1)
        loss = model(batch[:, :L], batch[:, 1:])
        loss.backward()
        loss_v = loss.item()
        with torch.no_grad():                                 # the harness's clip_grad_norm
            sq = sum(p.grad.double().pow(2).sum() for p in params if p.grad is not None)
            gnorm = math.sqrt(float(sq))
            if c["train.grad_clip"] > 0 and gnorm > c["train.grad_clip"]:
                for p in params:
                    p.grad.mul_(c["train.grad_clip"] / (gnorm + 1e-6))
        if not math.isfinite(loss_v) or not math.isfinite(gnorm):
            sys.exit(f"nanogpt_peer.py: non-finite loss/gradient at step {step + 1}")
        muon.step()
        adam.step()
        dt = time.perf_counter() - t0
        if step >= warmup:
            timed += dt
        if (step + 1) % 10 == 0 or step + 1 == steps:
            print(f"step {step + 1}/{steps} | {B * L / dt:.0f} tok/s | loss {loss_v:.4f}",
                  file=sys.stderr, flush=True)
    n = steps - warmup
    print(f"PEER_RESULT tokens_per_s={n * B * L / timed:.1f} timed_steps={n} warmup_steps={warmup} "
          f"seconds={timed:.3f} final_loss={loss_v:.4f} threads={threads}", flush=True)


if __name__ == "__main__":
    main()
