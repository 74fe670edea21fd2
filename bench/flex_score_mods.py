"""The scale-invariant score_mod and the causal mask for FlexAttention, shared by the CPU benchmarks
(flex_vs_sdpa.py, operator_vs_flex.py). FlexAttention's score is already scale * q.k:

    logit = a_t * score + m_t,   a_t = sqrt(1 + 2 ln(1 + t/tau)),   m_t = -2 ln(1 + t/tau),   t = i - j
"""
import torch


def scale_invariant(tau):
    inv_tau = 1.0 / tau

    def score_mod(score, batch, head, q_idx, kv_idx):
        # t < 0 only above the diagonal, which the block mask drops.
        log_t = torch.log1p((q_idx - kv_idx).clamp(min=0).to(torch.float32) * inv_tau)
        return score * torch.sqrt(1.0 + 2.0 * log_t) - 2.0 * log_t

    return score_mod


def causal(batch, head, q_idx, kv_idx):
    return q_idx >= kv_idx
