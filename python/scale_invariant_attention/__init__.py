"""Scale-invariant attention (arXiv 2505.17083) and the harness's other attention methods as a
PyTorch operator: ``torch.ops.scale_invariant.attention``, with this module's autograd formula and
fake implementations, so that it trains and runs under ``torch.compile``.

    import torch, scale_invariant_attention as sia
    q, k, v = (torch.randn(2, 4, 256, 64, requires_grad=True) for _ in range(3))   # (B, H, T, D)
    out = sia.attention(q, k, v, "si+p-rope", train_context=256, tau=256 / 400, p_rope_base=256 / 4)
    out.sum().backward()

The methods are the harness's registry (``presets()``); q, k, v are not rotated (a rotary method
rotates them for context T = q.shape[2]). docs/pytorch-operator.md has the whole interface.
"""
import glob
import os

import torch

__all__ = ["attention", "attention_with_lse", "presets", "parameter_names"]


def _load_library():
    # SCALE_INVARIANT_ATTENTION_LIBRARY: a build's own operator library (tests of a build tree);
    # otherwise the one pip built into this package.
    path = os.environ.get("SCALE_INVARIANT_ATTENTION_LIBRARY")
    if not path:
        found = sorted(glob.glob(os.path.join(os.path.dirname(__file__), "_C*.so")))
        if not found:
            raise ImportError("scale_invariant_attention: the operator library (_C*.so) is not built; "
                              "from the repository: pip install --no-build-isolation .")
        path = found[0]
    torch.ops.load_library(path)


_load_library()
_ops = torch.ops.scale_invariant


def presets():
    """The methods' names, as the harness's registry lists them (``harness attention list``)."""
    return list(_ops.presets())


def parameter_names():
    """The registry's numeric parameters a method may read, keyword arguments of ``attention``."""
    return list(_ops.parameter_names())


def _arguments(method, train_context, head_scale, learned, parameters):
    names = sorted(parameters)
    values = [float(parameters[n]) for n in names]
    return (method, int(train_context or 0), names, values, head_scale, list(learned))


def attention(q, k, v, method="si+p-rope", *, train_context=None, head_scale=None, learned=(), **parameters):
    """Causal attention of one layer: q, k, v (B, H, T, D) → (B, H, T, D).

    method: a preset (``presets()``); train_context: the training context L (None: T), which
    methods such as NTK, YaRN, LogN and InfoScale read; parameters: ``tau``, ``rope_base``,
    ``p_rope_base`` (absolute values; default the paper's, which assume L = 4096 — at other L the
    paper's ratios are tau = L/400, p_rope_base = L/4). head_scale: (H) the learned per-head
    multiplier of the logn methods (None: its initial value 1/ln L); learned: a learned bias's
    parameters (kerple: r1 (H), r2 (H); t5: (H, 32)), their initial values when empty.
    Differentiable in q, k, v, head_scale and the learned parameters. CPU: float32 or float64;
    CUDA (when built with it): float32 or bfloat16, D in {64, 128}.
    """
    return _ops.attention(q, k, v, *_arguments(method, train_context, head_scale, learned, parameters))


def attention_with_lse(q, k, v, method="si+p-rope", *, train_context=None, head_scale=None, learned=(),
                       **parameters):
    """As ``attention``, also returning LSE_i = log sum_{j<=i} exp(logit_ij), (B, H, T)."""
    return _ops.attention_with_lse(q, k, v, *_arguments(method, train_context, head_scale, learned, parameters))


# ---- what torch.compile and autograd need -------------------------------------------------------

def _lse_dtype(q):
    # The CUDA kernels keep LSE in float32 whatever q's dtype; the CPU kernel in q's.
    return torch.float32 if q.dtype in (torch.bfloat16, torch.float16) else q.dtype


@torch.library.register_fake("scale_invariant::attention_with_lse")
def _attention_with_lse_fake(q, k, v, method, train_context, names, values, head_scale, learned):
    return q.new_empty(q.shape), q.new_empty(q.shape[:3], dtype=_lse_dtype(q))


@torch.library.register_fake("scale_invariant::attention_backward")
def _attention_backward_fake(grad_out, grad_lse, q, k, v, out, lse, method, train_context, names, values,
                             head_scale, learned):
    dhead = head_scale.new_empty(head_scale.shape) if head_scale is not None else q.new_empty(0)
    return (q.new_empty(q.shape), k.new_empty(k.shape), v.new_empty(v.shape), dhead,
            [p.new_empty(p.shape) for p in learned])


def _setup_context(ctx, inputs, output):
    q, k, v, method, train_context, names, values, head_scale, learned = inputs
    out, lse = output
    ctx.save_for_backward(q, k, v, out, lse, head_scale, *learned)
    ctx.method = (method, train_context, names, values)
    ctx.has_head_scale = head_scale is not None


def _backward(ctx, grad_out, grad_lse):
    q, k, v, out, lse, head_scale, *learned = ctx.saved_tensors
    if grad_out is None:
        grad_out = torch.zeros_like(out)
    dq, dk, dv, dhead, dlearned = _ops.attention_backward(grad_out, grad_lse, q, k, v, out, lse, *ctx.method,
                                                          head_scale, learned)
    # One gradient per input, in the inputs' pytree structure: None for a non-tensor (a non-empty
    # list of names or values is one leaf), [] for an empty list (a node with no leaves: what a call
    # with no numeric parameter passes), a list for the list of tensors.
    names, values = ctx.method[2], ctx.method[3]
    return (dq, dk, dv, None, None, _no_gradient(names), _no_gradient(values),
            dhead if ctx.has_head_scale else None, list(dlearned))


def _no_gradient(argument):
    return [] if isinstance(argument, list) and not argument else None


torch.library.register_autograd("scale_invariant::attention_with_lse", _backward, setup_context=_setup_context)
