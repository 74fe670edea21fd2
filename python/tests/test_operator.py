"""The PyTorch operator against a float64 PyTorch reference written here from the papers' formulas
(not from the harness's code), plus gradcheck, opcheck, torch.compile and the docs' example.

Run: PYTHONPATH=<where pip put the package> python -m pytest python/tests (ctest does it after
`pip install --no-build-isolation --target ...`)."""
import math
import pathlib
import re
import subprocess
import sys

import pytest
import torch
import torch.nn.functional as F

import scale_invariant_attention as sia

REPO = pathlib.Path(__file__).resolve().parents[2]
torch.manual_seed(0)

# ---- the reference --------------------------------------------------------------------------------
# Each preset: (positional encoding, logit transform), as the papers define them.
PRESETS = {
    "rope": ("rope", "none"), "p-rope": ("p-rope", "none"), "nope": ("nope", "none"),
    "rope+ntk": ("ntk", "none"), "yarn": ("yarn", "none"),
    "logn+rope": ("rope", "logn"), "logn+p-rope": ("p-rope", "logn"), "logn+ntk": ("ntk", "logn"),
    "alibi": ("alibi", "none"),
    "si+p-rope": ("p-rope", "si"), "si+rope": ("rope", "si"), "si+nope": ("nope", "si"),
    "kerple": ("nope", "kerple"), "kerple+p-rope": ("p-rope", "kerple"), "t5": ("nope", "t5"),
    "fire": ("nope", "fire"), "fire+p-rope": ("p-rope", "fire"),
}
DEFAULTS = {"tau": 10.0, "rope_base": 10000.0, "p_rope_base": 1024.0}


def frequencies(positional, D, T, L, p):
    """Angular frequency of each of the D/2 rotated pairs (half-split pairs, 0 = not rotated)."""
    k = torch.arange(D // 2, dtype=torch.float64)
    rope = lambda base: base ** (-2.0 * k / D)  # noqa: E731
    if positional == "rope":
        return rope(p["rope_base"])
    if positional == "ntk":  # NTK-aware base beyond L
        return rope(p["rope_base"] * (T / L) ** (D / (D - 2)) if T > L else p["rope_base"])
    if positional == "yarn":  # NTK-by-parts (arXiv 2309.00071 §3.2, alpha = 1, beta = 32)
        f = rope(p["rope_base"])
        if T <= L:
            return f
        s, r = T / L, L / (2 * math.pi / f)
        gamma = ((r - 1.0) / (32.0 - 1.0)).clamp(0, 1)
        return (1 - gamma) * f / s + gamma * f
    if positional == "p-rope":  # modded-nanogpt's: half the pairs, log-uniform from 1 to 1/base
        n = D // 4
        f = torch.zeros(D // 2, dtype=torch.float64)
        f[:n] = (1.0 / p["p_rope_base"]) ** (torch.arange(n, dtype=torch.float64) / (n - 1))
        return f
    return None


def rotate(x, freq):
    if freq is None:
        return x
    angle = torch.arange(x.shape[2], dtype=torch.float64)[:, None] * freq[None, :]
    cos, sin = angle.cos(), angle.sin()
    x1, x2 = x.chunk(2, dim=-1)
    return torch.cat([x1 * cos - x2 * sin, x1 * sin + x2 * cos], dim=-1)


def alibi_slopes(H):
    assert H & (H - 1) == 0, "the tests use a power-of-2 number of heads"
    return torch.tensor([2.0 ** (-8.0 * (h + 1) / H) for h in range(H)], dtype=torch.float64)


def t5_bucket(t):
    exact = 16
    log_bucket = (torch.log(t.clamp(min=1).double() / exact) / math.log(128 / exact) * 16).long()
    return torch.where(t < exact, t, (exact + log_bucket).clamp(max=31))


def fire_bias(learned, L, T):
    """FIRE (arXiv 2310.04418): f_h(x), x = ln(1 + c_h·t) / (ln(1 + c_h·max(L_h, i)) + eps), f_h a
    1 -> 32 -> 1 ReLU MLP per head, as the kernels read it: f_h on 128 points of [0, 1], linear
    between them. learned: w1, b1, w2 (H, 32), b2, c, L_h / L (H)."""
    w1, b1, w2, b2, c, thr = (x.double() for x in learned)
    H, G = w1.shape[0], 128
    grid = torch.linspace(0, 1, G, dtype=torch.float64)
    f = (torch.relu(w1[:, None, :] * grid[None, :, None] + b1[:, None, :]) * w2[:, None, :]).sum(-1) + b2[:, None]
    i = torch.arange(T, dtype=torch.float64)[:, None]
    t = (i - torch.arange(T, dtype=torch.float64)[None, :]).clamp(min=0)
    c, Lh = c[:, None, None], (thr * L)[:, None, None]
    eps = float(torch.tensor(1e-6, dtype=torch.float32))  # the kernels' float constant
    x = torch.log1p(c * t) / (torch.log1p(c * torch.maximum(i, Lh)) + eps)  # (H, T, T)
    u = x * (G - 1)
    cell = u.detach().floor().clamp(0, G - 2)
    w, index = u - cell, cell.long().view(H, -1)
    f0, f1 = f.gather(1, index).view(H, T, T), f.gather(1, index + 1).view(H, T, T)
    return f0 + w * (f1 - f0)


def reference(q, k, v, method, L, p, head_scale=None, learned=()):
    """(out, lse) in float64."""
    positional, transform = PRESETS[method]
    q, k, v = (x.double() for x in (q, k, v))
    B, H, T, D = q.shape
    p = {**DEFAULTS, **p}
    freq = frequencies(positional, D, T, L, p)
    scale = 1 / math.sqrt(D) * ((0.1 * math.log(T / L) + 1) ** 2 if positional == "yarn" and T > L else 1.0)
    # The operator's scalar constants are float32 in every kernel, float64 ones included
    # (attention/score_mod.h): the score scale and 1/τ.
    scale, inv_tau = float(torch.tensor(scale, dtype=torch.float32)), float(torch.tensor(1 / p["tau"], dtype=torch.float32))
    s = scale * rotate(q, freq) @ rotate(k, freq).transpose(-1, -2)  # (B, H, T, T)
    i = torch.arange(T, dtype=torch.float64)[:, None]
    t = (i - torch.arange(T, dtype=torch.float64)[None, :]).clamp(min=0)  # distance, 0 above the diagonal (masked)
    if transform == "si":
        lg = torch.log1p(t * inv_tau)
        s = torch.sqrt(1 + 2 * lg) * s - 2 * lg
    elif transform == "logn":
        hs = head_scale.double() if head_scale is not None else torch.full((H,), 1 / math.log(L), dtype=torch.float64)
        s = hs[:, None, None] * torch.log(i + 1.0) * s
    elif transform == "kerple":
        r1, r2 = (x.double() for x in learned)
        s = s - r1[:, None, None] * torch.log1p(r2[:, None, None] * t)
    elif transform == "t5":
        s = s + learned[0].double()[:, t5_bucket(t.long())]
    elif transform == "fire":
        s = s + fire_bias(learned, L, T)
    if positional == "alibi":
        s = s - alibi_slopes(H)[:, None, None] * t
    s = s.masked_fill(torch.ones(T, T, dtype=torch.bool).triu(1), -math.inf)
    return torch.softmax(s, -1) @ v, torch.logsumexp(s, -1)


def inputs(method, B=2, H=4, T=40, D=16, dtype=torch.float64, grad=True):
    q, k, v = (torch.randn(B, H, T, D, dtype=dtype) for _ in range(3))
    transform = PRESETS[method][1]
    extra = {}
    if transform == "logn":
        extra["head_scale"] = torch.rand(H, dtype=dtype) + 0.2
    elif transform == "kerple":
        extra["learned"] = [torch.rand(H, dtype=dtype) + 0.1, torch.rand(H, dtype=dtype) + 0.1]
    elif transform == "t5":
        extra["learned"] = [torch.randn(H, 32, dtype=dtype)]
    elif transform == "fire":  # c above its floor 0.001, L_h / L between 0.2 and 0.7
        extra["learned"] = [torch.randn(H, 32, dtype=dtype), torch.randn(H, 32, dtype=dtype) * 0.5,
                            torch.randn(H, 32, dtype=dtype) * 0.3, torch.randn(H, dtype=dtype),
                            torch.rand(H, dtype=dtype) * 0.5 + 0.05, torch.rand(H, dtype=dtype) * 0.5 + 0.2]
    tensors = [q, k, v] + ([extra["head_scale"]] if "head_scale" in extra else []) + list(extra.get("learned", []))
    for x in tensors:
        x.requires_grad_(grad)
    return (q, k, v), extra, tensors


PARAMETERS = {"tau": 0.7, "p_rope_base": 6.0, "rope_base": 500.0}  # of the order of L/400, L/4 at small L


def test_the_reference_covers_every_preset():
    assert sorted(sia.presets()) == sorted(PRESETS)
    assert sorted(sia.parameter_names()) == sorted(DEFAULTS)


# ---- forward and gradients against the reference ------------------------------------------------------

@pytest.mark.parametrize("method", sorted(PRESETS))
@pytest.mark.parametrize("T", [16, 40])  # L = 16: at L and beyond it (NTK, YaRN rescale)
def test_forward_and_gradients_equal_the_float64_reference(method, T):
    (q, k, v), extra, tensors = inputs(method, T=T)
    out, lse = sia.attention_with_lse(q, k, v, method, train_context=16, **extra, **PARAMETERS)
    ref_out, ref_lse = reference(q, k, v, method, 16, PARAMETERS, extra.get("head_scale"), extra.get("learned", ()))
    torch.testing.assert_close(out, ref_out, rtol=1e-9, atol=1e-10)
    torch.testing.assert_close(lse, ref_lse, rtol=1e-9, atol=1e-10)
    w_out, w_lse = torch.randn_like(out), torch.randn_like(lse)  # a loss that reads both outputs
    grads = torch.autograd.grad((out * w_out).sum() + (lse * w_lse).sum(), tensors)
    ref_grads = torch.autograd.grad((ref_out * w_out).sum() + (ref_lse * w_lse).sum(), tensors)
    for g, r in zip(grads, ref_grads):
        torch.testing.assert_close(g, r, rtol=1e-8, atol=1e-9)


def initial_learned(method, H):
    """The harness's initial values (attention/transforms.cpp): KERPLE's r1, r2 at the per-head
    quantiles of the uniform laws KERPLE's code draws from, U(0, 2) and U(0, 1); T5's biases 0; FIRE's
    hinge basis w1 = 1, b1 = -(k + 1/2)/32 with w2 = b2 = 0, c = 0.1, L_h = L/4."""
    u = (torch.arange(H, dtype=torch.float64) + 0.5) / H
    k = torch.arange(32, dtype=torch.float64)
    fire = [torch.ones(H, 32, dtype=torch.float64), (-(k + 0.5) / 32).expand(H, 32), torch.zeros(H, 32, dtype=torch.float64),
            torch.zeros(H, dtype=torch.float64), torch.full((H,), 0.1, dtype=torch.float64),
            torch.full((H,), 0.25, dtype=torch.float64)]
    return {"kerple": [2 * u, u], "t5": [torch.zeros(H, 32, dtype=torch.float64)], "fire": fire}.get(PRESETS[method][1], [])


@pytest.mark.parametrize("method", ["logn+rope", "logn+ntk", "kerple", "kerple+p-rope", "t5", "fire"])
def test_omitted_learned_parameters_are_their_initial_values_forward_and_backward(method):
    (q, k, v), _, _ = inputs(method, T=40)
    out = sia.attention(q, k, v, method, train_context=16, **PARAMETERS)
    ref, _ = reference(q, k, v, method, 16, PARAMETERS, None, initial_learned(method, q.shape[1]))
    torch.testing.assert_close(out, ref, rtol=1e-9, atol=1e-10)
    w = torch.randn_like(out)
    grads = torch.autograd.grad((out * w).sum(), [q, k, v])
    ref_grads = torch.autograd.grad((ref * w).sum(), [q, k, v])
    for g, r in zip(grads, ref_grads):
        torch.testing.assert_close(g, r, rtol=1e-8, atol=1e-9)


@pytest.mark.parametrize("method", ["si+p-rope", "alibi", "logn+ntk", "kerple"])
def test_float32_is_within_float32_rounding_of_the_reference(method):
    (q, k, v), extra, _ = inputs(method, T=64, D=32, dtype=torch.float32, grad=False)
    out = sia.attention(q, k, v, method, train_context=32, **extra, **PARAMETERS)
    assert out.dtype == torch.float32
    ref, _ = reference(q, k, v, method, 32, PARAMETERS, extra.get("head_scale"), extra.get("learned", ()))
    torch.testing.assert_close(out.double(), ref, rtol=1e-4, atol=2e-5)


@pytest.mark.parametrize("method", sorted(PRESETS))
def test_a_call_with_defaults_only_backpropagates(method):
    """As a newcomer calls it: no numeric parameter, no train_context, no head_scale or learned
    parameters; then backward. The gradients against the reference at the defaults (L = T)."""
    (q, k, v), _, _ = inputs(method, T=24)
    out = sia.attention(q, k, v, method)
    ref, _ = reference(q, k, v, method, 24, {}, None, initial_learned(method, q.shape[1]))
    torch.testing.assert_close(out, ref, rtol=1e-9, atol=1e-10)
    w = torch.randn_like(out)
    (out * w).sum().backward()
    ref_grads = torch.autograd.grad((ref * w).sum(), [q, k, v])
    for g, r in zip((q.grad, k.grad, v.grad), ref_grads):
        torch.testing.assert_close(g, r, rtol=1e-8, atol=1e-9)


def test_defaults_are_the_papers():
    (q, k, v), _, _ = inputs("si+p-rope", T=24, grad=False)
    ref, _ = reference(q, k, v, "si+p-rope", 24, {})
    torch.testing.assert_close(sia.attention(q, k, v), ref)  # τ = 10, p-RoPE base 1024, L = T


@pytest.mark.parametrize("method", sorted(PRESETS))
def test_gradcheck(method):
    (q, k, v), extra, tensors = inputs(method, B=1, H=2, T=9, D=8)
    n = 3 + ("head_scale" in extra)

    def f(*xs):
        kw = dict(extra)
        if "head_scale" in kw:
            kw["head_scale"] = xs[3]
        if "learned" in kw:
            kw["learned"] = list(xs[n:])
        return sia.attention_with_lse(xs[0], xs[1], xs[2], method, train_context=4, **kw, **PARAMETERS)

    assert torch.autograd.gradcheck(f, tuple(tensors), eps=1e-6, atol=1e-6)


# ---- torch.library and torch.compile ---------------------------------------------------------------

@pytest.mark.parametrize("method", ["si+p-rope", "logn+rope", "kerple+p-rope"])
def test_opcheck(method):
    (q, k, v), extra, _ = inputs(method, B=1, H=2, T=12, D=8)
    args = (q, k, v, method, 8, ["tau"], [0.5], extra.get("head_scale"), list(extra.get("learned", [])))
    torch.library.opcheck(torch.ops.scale_invariant.attention_with_lse.default, args)


class Block(torch.nn.Module):
    """A plain GPT attention block (no harness code) calling the operator."""

    def __init__(self, dim=32, heads=4):
        super().__init__()
        self.heads = heads
        self.qkv = torch.nn.Linear(dim, 3 * dim, bias=False)
        self.proj = torch.nn.Linear(dim, dim, bias=False)

    def forward(self, x):  # (B, T, C)
        B, T, C = x.shape
        q, k, v = self.qkv(x).view(B, T, 3, self.heads, C // self.heads).permute(2, 0, 3, 1, 4)
        y = sia.attention(F.rms_norm(q, (C // self.heads,)), F.rms_norm(k, (C // self.heads,)), v,
                          "si+p-rope", train_context=T, tau=T / 400, p_rope_base=T / 4)
        return x + self.proj(y.transpose(1, 2).reshape(B, T, C))


def test_torch_compile_matches_eager_forward_and_backward():
    block = Block()
    compiled = torch.compile(block, fullgraph=True)
    x = torch.randn(2, 48, 32, requires_grad=True)
    eager_out = block(x)
    eager_grads = torch.autograd.grad(eager_out.square().sum(), [x, *block.parameters()])
    out = compiled(x)
    grads = torch.autograd.grad(out.square().sum(), [x, *block.parameters()])
    torch.testing.assert_close(out, eager_out, rtol=1e-5, atol=1e-5)
    for g, e in zip(grads, eager_grads):
        torch.testing.assert_close(g, e, rtol=1e-4, atol=1e-5)


# ---- errors, the docs' example, CUDA ------------------------------------------------------------------

@pytest.mark.parametrize("kwargs, message", [
    (dict(method="si+prope"), r"unknown method 'si\+prope'; valid methods: rope, p-rope"),
    (dict(taux=1.0), r"unknown parameter 'taux'; valid: tau, rope_base, p_rope_base"),
    (dict(tau=-1.0), r"tau must be > 0"),
    (dict(method="alibi", head_scale=torch.ones(2)), r"'alibi' has no learned head scale"),
    (dict(method="logn+rope", head_scale=torch.ones(3)), r"head_scale must be \(H\) = \(2\)"),
    (dict(method="kerple", learned=[torch.ones(2)]), r"kerple-log learns 2 parameters, got 1"),
])
def test_bad_arguments_raise_value_errors_that_say_what_is_allowed(kwargs, message):
    q = torch.randn(1, 2, 8, 8)
    with pytest.raises(ValueError, match=message):
        sia.attention(q, q, q, **kwargs)


@pytest.mark.parametrize("parameters", ["as written", "none"])
def test_the_docs_example_runs(parameters):
    """The example trains (backward) and evaluates; also with its numeric parameters left out."""
    text = (REPO / "docs" / "pytorch-operator.md").read_text()
    example = re.search(r"```python\n(.*?)```", text, re.S).group(1)
    if parameters == "none":
        example, n = re.subn(r'sia\.attention\(q, k, v, "si\+p-rope", [^\n]*\)', 'sia.attention(q, k, v, "si+p-rope")', example)
        assert n == 1, "the example's operator call changed: update this test"
    exec(compile(example, "docs/pytorch-operator.md", "exec"), {})


@pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device")
@pytest.mark.parametrize("method", ["si+p-rope", "alibi", "logn+rope", "kerple"])
def test_cuda_equals_the_reference(method):
    (q, k, v), extra, tensors = inputs(method, T=130, D=64, dtype=torch.float32)
    cuda = lambda x: x.detach().cuda().requires_grad_()  # noqa: E731
    qc, kc, vc = (cuda(x) for x in (q, k, v))
    extra_c = {key: (cuda(x) if key == "head_scale" else [cuda(y) for y in x]) for key, x in extra.items()}
    out = sia.attention(qc, kc, vc, method, train_context=64, **extra_c, **PARAMETERS)
    ref, _ = reference(q, k, v, method, 64, PARAMETERS, extra.get("head_scale"), extra.get("learned", ()))
    torch.testing.assert_close(out.double().cpu(), ref, rtol=1e-3, atol=1e-4)
    w = torch.randn_like(ref)
    grads = torch.autograd.grad((out * w.float().cuda()).sum(), [qc, kc, vc])
    ref_grads = torch.autograd.grad((ref * w).sum(), [q, k, v])
    for g, r in zip(grads, ref_grads):
        torch.testing.assert_close(g.double().cpu(), r, rtol=1e-3, atol=1e-3)


def test_the_docs_one_line_check_runs():
    """The `python -c` line of docs/pytorch-operator.md's install section, as a user runs it."""
    text = (REPO / "docs" / "pytorch-operator.md").read_text()
    command = re.search(r'python -c "(.*?)"\n', text).group(1)
    result = subprocess.run([sys.executable, "-c", command], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "torch.Size([1, 2, 64, 32])"
