// Blockwise causal attention on the CPU (FlashAttention-2 style), forward and backward.
//
// Layout of one call:
//   1. Tables of the score-mod, built once (O(H·T)): per-query factor row[i] = scale·row_factor(i),
//      and, indexed by e = (T−1) − t so that a tile row reads them with ascending addresses, the
//      distance multiplier mult[e] and the per-head bias bias[h][e] (ALiBi included). Entries with
//      t < 0 (above the diagonal) hold mult 0 and bias −inf: the causal mask costs nothing extra.
//   2. Operands padded once (D and T to 64 bytes, zeros), K and V also transposed, so that tiles
//      are read in place, never packed.
//   3. Forward: tasks (b, h, query block), a head's blocks in a row so that the threads share its
//      K and V in the cache; key blocks from the diagonal down to 0 with an online softmax.
//   4. Backward: tasks (b, h, set of key blocks); for each key block, all query blocks at or below
//      the diagonal: dV, dK accumulate in the task, dQ in a per-task (T × D) buffer (one per task
//      set, summed when a head is split over several threads).
// This file does 1, 2 and the autograd function; the tiles and workers of 3 and 4 are
// fused_cpu_kernels.cpp.
#include "attention/fused_cpu.h"

#include "attention/fused_cpu_kernels.h"

#include <ATen/ATen.h>
#include <ATen/Parallel.h>  // at::get_num_threads (how many tasks the backward splits a head into)
#include <torch/csrc/autograd/custom_function.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <stdexcept>
#include <string>
#include <vector>

namespace attention {
namespace {

using torch::Tensor;
using namespace fused_cpu_detail;

// ---- tables ---------------------------------------------------------------------------------------

struct Tables {
  Tensor row;   // (T)
  Tensor mult;  // (Tt)
  Tensor bias;  // (Hb, Tt)
  // FIRE's bias, which sees the query position (score_mod.h: TableIndex::kFire), or undefined:
  Tensor fire;       // (H, G + 2) its table
  Tensor fire_psi;   // (H, T) ψ_h(t) by distance
  Tensor fire_norm;  // (H, T) ψ_h(max(L_h, i)) + ε by query row
};

// FIRE's per-distance and per-row tables, in float64 from the table's values (score_mod.h).
void build_fire_tables(Tables& tab, const Tensor& table, int64_t T, at::ScalarType dtype) {
  const Tensor f = table.to(at::kDouble).contiguous();
  const int64_t H = f.size(0), G = f.size(1) - 2;
  Tensor psi = at::empty({H, T}, f.options()), norm = at::empty({H, T}, f.options());
  double* pp = psi.data_ptr<double>();
  double* np = norm.data_ptr<double>();
  for (int64_t h = 0; h < H; ++h) {
    const FireRow<double> r{f.data_ptr<double>() + h * (G + 2), int(G)};
    for (int64_t x = 0; x < T; ++x) {
      pp[h * T + x] = r.psi(double(x));
      np[h * T + x] = r.norm(int(x));
    }
  }
  tab.fire = f.to(dtype);
  tab.fire_psi = psi.to(dtype);
  tab.fire_norm = norm.to(dtype);
}

// Built in float64 from score_mod.h, stored in the kernel's dtype. alibi: (H) or undefined;
// bias_table: (H, T' >= T) or undefined (a learned distance bias), or FIRE's (H, G + 2).
Tables build_tables(const ScoreMod& mod_in, int64_t T, int64_t H, int64_t pad,
                    const Tensor& alibi, const Tensor& bias_table, at::ScalarType dtype) {
  ScoreMod mod = mod_in;
  mod.head_scale = nullptr;   // travels as a tensor
  mod.alibi_slope = nullptr;  // added below from `alibi`
  mod.bias_table = nullptr;   // added below from `bias_table`
  const int64_t Tt = T + pad;
  const bool fire = mod_in.table_index == TableIndex::kFire && bias_table.defined();
  const double inf = std::numeric_limits<double>::infinity();
  auto f64 = at::TensorOptions().dtype(at::kDouble);
  Tensor row = at::empty({T}, f64), mult = at::empty({Tt}, f64);
  const int64_t Hb = alibi.defined() || (bias_table.defined() && !fire) ? H : 1;
  Tensor bias = at::empty({Hb, Tt}, f64);
  double* rp = row.data_ptr<double>();
  double* mp = mult.data_ptr<double>();
  double* bp = bias.data_ptr<double>();
  std::vector<double> slopes(Hb, 0.0);
  if (alibi.defined()) {
    Tensor a = alibi.to(at::kDouble).contiguous();
    std::copy(a.data_ptr<double>(), a.data_ptr<double>() + H, slopes.begin());
  }
  Tensor learned;  // (H, T) float64
  if (bias_table.defined() && !fire) learned = bias_table.narrow(1, 0, T).to(at::kDouble).contiguous();
  const double* lp = learned.defined() ? learned.data_ptr<double>() : nullptr;
  for (int64_t i = 0; i < T; ++i) rp[i] = double(mod.scale) * row_factor<double>(mod, int(i));
  for (int64_t e = 0; e < Tt; ++e) {
    const int64_t t = (T - 1) - e;
    mp[e] = t >= 0 ? distance_factor<double>(mod, int(t)) : 0.0;
    const double b = t >= 0 ? distance_bias<double>(mod, int(t), 0) : -inf;
    for (int64_t h = 0; h < Hb; ++h) {
      const double l = t >= 0 && lp ? lp[h * T + t] : 0.0;
      bp[h * Tt + e] = t >= 0 ? b + l - slopes[h] * double(t) : -inf;
    }
  }
  Tables tab{row.to(dtype), mult.to(dtype), bias.to(dtype)};
  if (fire) build_fire_tables(tab, bias_table, T, dtype);
  return tab;
}

struct Geometry {
  int64_t Bq, Bk, Dp, lanes;  // lanes: elements per 64 bytes (the padding unit)
};

// A key tile no longer than the context: at T = 64 a 128-key tile would double the padded Kᵀ
// and V copies (and their zero work) for nothing.
Geometry geometry(const FusedCpuConfig& cfg, int64_t T, int64_t D, at::ScalarType dtype) {
  const int64_t lanes = kPadBytes / int64_t(at::elementSize(dtype));
  const int64_t block_k = std::min(std::max<int64_t>(1, cfg.block_k), T);
  return {std::max<int64_t>(1, cfg.block_q), round_up(block_k, lanes), round_up(D, lanes), lanes};
}

// x (B, H, T, D) → (B, H, rows, Dp), zero padded, contiguous (x itself when nothing to pad).
Tensor padded(const Tensor& x, int64_t rows, int64_t Dp) {
  if (x.size(2) == rows && x.size(3) == Dp) return x.contiguous();
  return at::constant_pad_nd(x, {0, Dp - x.size(3), 0, rows - x.size(2)}, 0).contiguous();
}
// x (B, H, T, D) → (B, H, nkb, Dp, Bk): per key block, transposed, zero padded.
Tensor blocked_transposed(const Tensor& x, int64_t nkb, int64_t Bk, int64_t Dp) {
  return padded(x, nkb * Bk, Dp)
      .view({x.size(0), x.size(1), nkb, Bk, Dp})
      .transpose(3, 4)
      .contiguous();
}

// The padded operands of one call (only those the pass needs are defined).
struct Operands {
  Tensor q, k, kt, v, vt;
};

template <class T>
Problem<T> make_problem(const Operands& ops, int64_t B, int64_t H, int64_t n_ctx, int64_t D,
                        const Tensor& head, const Tables& tab, const Geometry& g) {
  auto ptr = [](const Tensor& t) { return t.defined() ? t.data_ptr<T>() : nullptr; };
  Problem<T> P;
  P.q = ptr(ops.q);
  P.k = ptr(ops.k);
  P.kt = ptr(ops.kt);
  P.v = ptr(ops.v);
  P.vt = ptr(ops.vt);
  P.B = B;
  P.H = H;
  P.n_ctx = n_ctx;
  P.D = D;
  P.Dp = g.Dp;
  P.nkb = (n_ctx + g.Bk - 1) / g.Bk;
  P.Tp = P.nkb * g.Bk;
  P.Bq = g.Bq;
  P.Bk = g.Bk;
  P.row = tab.row.data_ptr<T>();
  P.head = head.data_ptr<T>();
  P.mult = tab.mult.data_ptr<T>();
  P.bias = tab.bias.data_ptr<T>();
  P.bias_stride = tab.bias.size(0) > 1 ? tab.bias.size(1) : 0;
  P.fire = tab.fire.defined() ? tab.fire.data_ptr<T>() : nullptr;
  P.fire_len = tab.fire.defined() ? tab.fire.size(1) : 0;
  P.fire_psi = tab.fire.defined() ? tab.fire_psi.data_ptr<T>() : nullptr;
  P.fire_norm = tab.fire.defined() ? tab.fire_norm.data_ptr<T>() : nullptr;
  return P;
}

// (out, lse) from (B, H, T, D) inputs.
std::pair<Tensor, Tensor> forward_impl(const Tensor& q, const Tensor& k, const Tensor& v,
                                       const Tensor& head, const Tables& tab, const Geometry& g) {
  const int64_t B = q.size(0), H = q.size(1), T = q.size(2), D = q.size(3);
  const int64_t nkb = (T + g.Bk - 1) / g.Bk;
  Operands ops;
  ops.q = padded(q, T, g.Dp);
  ops.kt = blocked_transposed(k, nkb, g.Bk, g.Dp);
  ops.v = padded(v, nkb * g.Bk, g.Dp);
  Tensor out = at::empty({B, H, T, D}, q.options()), lse = at::empty({B, H, T}, q.options());
  AT_DISPATCH_FLOATING_TYPES(q.scalar_type(), "fused_attention_cpu_forward", [&] {
    run_forward<scalar_t>(make_problem<scalar_t>(ops, B, H, T, D, head, tab, g),
                          {out.data_ptr<scalar_t>(), lse.data_ptr<scalar_t>()});
  });
  return {out, lse};
}

struct BackwardResult {
  Tensor dq, dk, dv, dhead, dbias;  // dbias: (H, Tt) d loss / d bias table, summed over b, i
                                    // (FIRE: (H, G + 2), its table's gradient)
};

BackwardResult backward_impl(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& head,
                             const Tables& tab, const Geometry& g, const Tensor& out,
                             const Tensor& lse, const Tensor& dout, const Tensor& dlse,
                             bool head_grad, bool bias_grad) {
  const int64_t B = q.size(0), H = q.size(1), T = q.size(2), D = q.size(3);
  const int64_t nk = (T + g.Bk - 1) / g.Bk;
  // Split a head's key blocks over C tasks when there are fewer than 2 (b, h) per thread, so that
  // the workers stay balanced; each split head costs a (T, D) dQ partial sum.
  const int64_t C =
      std::min(nk, std::max<int64_t>(1, (2 * at::get_num_threads() + B * H - 1) / (B * H)));
  Tensor delta = (dout * out).sum(-1);  // (B, H, T)
  if (dlse.defined()) delta = delta - dlse;
  delta = delta.contiguous();
  Operands ops;
  ops.q = padded(q, T, g.Dp);
  ops.k = padded(k, nk * g.Bk, g.Dp);
  ops.kt = blocked_transposed(k, nk, g.Bk, g.Dp);
  ops.vt = blocked_transposed(v, nk, g.Bk, g.Dp);
  const Tensor dout_p = padded(dout, T, g.Dp);
  Tensor dq_parts = at::empty({C, B, H, T, D}, q.options());
  Tensor dk = at::empty({B, H, T, D}, q.options()), dv = at::empty({B, H, T, D}, q.options());
  std::vector<double> dhead(size_t(B * H * C), 0.0);
  const int64_t Tt = tab.fire.defined() ? tab.fire.size(1) : tab.mult.size(0);
  Tensor dbias_parts = bias_grad ? at::empty({B, H, C, Tt}, q.options()) : Tensor();
  AT_DISPATCH_FLOATING_TYPES(q.scalar_type(), "fused_attention_cpu_backward", [&] {
    const auto P = make_problem<scalar_t>(ops, B, H, T, D, head, tab, g);
    BackwardIO<scalar_t> G{dout_p.data_ptr<scalar_t>(),    lse.data_ptr<scalar_t>(),
                           delta.data_ptr<scalar_t>(),     dq_parts.data_ptr<scalar_t>(),
                           dk.data_ptr<scalar_t>(),        dv.data_ptr<scalar_t>(),
                           head_grad ? dhead.data() : nullptr,
                           bias_grad ? dbias_parts.data_ptr<scalar_t>() : nullptr, Tt, C};
    if (head_grad || bias_grad)
      run_backward<scalar_t, true>(P, G);
    else
      run_backward<scalar_t, false>(P, G);
  });
  BackwardResult r;
  r.dq = C == 1 ? dq_parts[0] : dq_parts.sum(0);
  r.dk = dk;
  r.dv = dv;
  if (head_grad) {
    std::vector<double> per_head(size_t(H), 0.0);
    for (int64_t w = 0; w < B * H * C; ++w) per_head[size_t((w / C) % H)] += dhead[size_t(w)];
    r.dhead = at::tensor(per_head, at::TensorOptions().dtype(at::kDouble)).to(q.scalar_type());
  }
  if (bias_grad) r.dbias = dbias_parts.to(at::kDouble).sum(at::IntArrayRef{0, 2});  // (H, Tt)
  return r;
}

// d loss/d bias_table (H, columns) from the kernel's per-entry sums (H, Tt): the kernel's table is
// indexed by e = (T − 1) − t, so its first T entries reversed are by distance; zero for t >= T.
// FIRE's are its table's own entries.
Tensor table_gradient(const Tensor& dbias, bool fire, int64_t T, int64_t columns, at::ScalarType dtype) {
  if (fire) return dbias.to(dtype);
  return at::constant_pad_nd(dbias.narrow(1, 0, T).flip(1), {0, columns - T}, 0).to(dtype);
}

struct FusedAttentionFunction : public torch::autograd::Function<FusedAttentionFunction> {
  // bias_table: (H, T' >= T), or an empty tensor when the method has none; only its shape is
  // read here (its values are in tab.bias).
  static torch::autograd::variable_list forward(torch::autograd::AutogradContext* ctx,
                                                const Tensor& q, const Tensor& k,
                                                const Tensor& v, const Tensor& head,
                                                const Tensor& bias_table, const Tables& tab,
                                                const Geometry& g) {
    auto [out, lse] = forward_impl(q, k, v, head, tab, g);
    ctx->save_for_backward({q, k, v, head, out, lse});
    ctx->saved_data["bias_table_columns"] = bias_table.numel() > 0 ? bias_table.size(1) : int64_t(0);
    ctx->saved_data["bias_table_dtype"] = int64_t(bias_table.scalar_type());
    ctx->saved_data["row"] = tab.row;
    ctx->saved_data["mult"] = tab.mult;
    ctx->saved_data["bias"] = tab.bias;
    if (tab.fire.defined()) ctx->saved_data["fire"] = std::vector<Tensor>{tab.fire, tab.fire_psi, tab.fire_norm};
    ctx->saved_data["geometry"] = std::vector<int64_t>{g.Bq, g.Bk, g.Dp, g.lanes};
    return {out, lse};
  }

  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grads) {
    const auto saved = ctx->get_saved_variables();
    const Tensor &q = saved[0], &k = saved[1], &v = saved[2], &head = saved[3];
    const Tensor &out = saved[4], &lse = saved[5];
    Tables tab{ctx->saved_data["row"].toTensor(), ctx->saved_data["mult"].toTensor(),
               ctx->saved_data["bias"].toTensor()};
    if (ctx->saved_data.count("fire")) {
      const auto fire = ctx->saved_data["fire"].toTensorVector();
      tab.fire = fire[0], tab.fire_psi = fire[1], tab.fire_norm = fire[2];
    }
    const auto gv = ctx->saved_data["geometry"].toIntVector();
    const Geometry g{gv[0], gv[1], gv[2], gv[3]};
    const int64_t columns = ctx->saved_data["bias_table_columns"].toInt();
    Tensor dout = grads[0].defined() ? grads[0].contiguous() : at::zeros_like(out);
    const bool head_grad = ctx->needs_input_grad(3);
    const bool bias_grad = ctx->needs_input_grad(4) && columns > 0;
    const auto r = backward_impl(q, k, v, head, tab, g, out, lse, dout, grads[1], head_grad, bias_grad);
    const Tensor dtable =
        bias_grad ? table_gradient(r.dbias, tab.fire.defined(), q.size(2), columns,
                                   at::ScalarType(ctx->saved_data["bias_table_dtype"].toInt()))
                  : Tensor();
    return {r.dq, r.dk, r.dv, r.dhead, dtable, Tensor(), Tensor()};
  }
};

[[noreturn]] void bad(const std::string& what) {
  throw std::invalid_argument("fused_attention_cpu: " + what);
}

// One call's checked, laid-out inputs: contiguous q, k, v, the head scale in the kernel dtype (the
// learned tensor, differentiable, or constants), the learned bias table (tensor or mod's constants,
// else undefined), the score-mod tables and the tile geometry. empty: a zero-sized problem.
struct Call {
  Tensor q, k, v, head, bias_table;
  Tables tab;
  Geometry g;
  bool empty = false;
};

Call prepare(const Tensor& q_in, const Tensor& k_in, const Tensor& v_in, const ScoreMod& mod,
             const Tensor& head_scale, const Tensor& alibi_slopes, const Tensor& bias_table_in,
             const FusedCpuConfig& config) {
  if (q_in.dim() != 4) bad("q must be (B, H, T, D), got " + std::to_string(q_in.dim()) + "-D");
  if (k_in.sizes() != q_in.sizes() || v_in.sizes() != q_in.sizes())
    bad("q, k and v must have the same (B, H, T, D) shape");
  if (!q_in.device().is_cpu() || !k_in.device().is_cpu() || !v_in.device().is_cpu())
    bad("tensors must be on the CPU (this is the CPU kernel)");
  const auto dtype = q_in.scalar_type();
  if (dtype != at::kFloat && dtype != at::kDouble) bad("dtype must be float32 or float64");
  if (k_in.scalar_type() != dtype || v_in.scalar_type() != dtype)
    bad("q, k and v must share one dtype");
  const int64_t B = q_in.size(0), H = q_in.size(1), T = q_in.size(2), D = q_in.size(3);
  if (T > (int64_t(1) << 30)) bad("T too large");
  if (head_scale.defined() && (head_scale.dim() != 1 || head_scale.size(0) != H))
    bad("head_scale must be (H) = (" + std::to_string(H) + ")");
  if (alibi_slopes.defined() && (alibi_slopes.dim() != 1 || alibi_slopes.size(0) != H))
    bad("alibi_slopes must be (H) = (" + std::to_string(H) + ")");
  Call c;
  // The learned bias table: the tensor (differentiable), else mod's constants, else none.
  c.bias_table = bias_table_in;
  if (!c.bias_table.defined() && mod.bias_table)
    c.bias_table = at::from_blob(const_cast<float*>(mod.bias_table), {H, mod.bias_table_len}, at::kFloat).clone();
  const bool fire = mod.table_index == TableIndex::kFire;
  if (c.bias_table.defined() && fire && (c.bias_table.dim() != 2 || c.bias_table.size(0) != H || c.bias_table.size(1) < 4))
    bad("FIRE's bias_table must be (H, G + 2 >= 4) with H = " + std::to_string(H));
  if (c.bias_table.defined() && !fire &&
      (c.bias_table.dim() != 2 || c.bias_table.size(0) != H || c.bias_table.size(1) < T))
    bad("bias_table must be (H, T' >= T) = (" + std::to_string(H) + ", >= " + std::to_string(T) + ")");
  c.empty = B == 0 || H == 0 || T == 0 || D == 0;
  if (c.empty) return c;

  c.g = geometry(config, T, D, dtype);
  if (head_scale.defined())
    c.head = head_scale.to(dtype);
  else if (mod.head_scale)
    c.head = at::from_blob(const_cast<float*>(mod.head_scale), {H}, at::kFloat).to(dtype);
  else
    c.head = at::ones({H}, q_in.options());
  Tensor alibi = alibi_slopes;
  if (!alibi.defined() && mod.alibi_slope)
    alibi = at::from_blob(const_cast<float*>(mod.alibi_slope), {H}, at::kFloat).clone();
  {
    at::NoGradGuard no_grad;
    c.tab = build_tables(mod, T, H, c.g.Bq + c.g.Bk, alibi.defined() ? alibi.detach() : alibi,
                         c.bias_table.defined() ? c.bias_table.detach() : c.bias_table, dtype);
  }
  c.q = q_in.contiguous();
  c.k = k_in.contiguous();
  c.v = v_in.contiguous();
  return c;
}

}  // namespace

std::tuple<Tensor, Tensor> fused_attention_cpu_with_lse(const Tensor& q_in, const Tensor& k_in,
                                                        const Tensor& v_in, const ScoreMod& mod,
                                                        const Tensor& head_scale,
                                                        const Tensor& alibi_slopes,
                                                        const Tensor& bias_table_in,
                                                        const FusedCpuConfig& config) {
  const Call c = prepare(q_in, k_in, v_in, mod, head_scale, alibi_slopes, bias_table_in, config);
  if (c.empty) return {at::zeros_like(q_in), at::zeros({q_in.size(0), q_in.size(1), q_in.size(2)}, q_in.options())};
  const bool needs_graph =
      at::GradMode::is_enabled() &&
      (q_in.requires_grad() || k_in.requires_grad() || v_in.requires_grad() || c.head.requires_grad() ||
       (c.bias_table.defined() && c.bias_table.requires_grad()));
  if (!needs_graph) {
    at::NoGradGuard no_grad;
    auto [out, lse] = forward_impl(c.q, c.k, c.v, c.head.contiguous(), c.tab, c.g);
    return {out, lse};
  }
  const Tensor table = c.bias_table.defined() ? c.bias_table : at::empty({0}, c.q.options());
  auto outs = FusedAttentionFunction::apply(c.q, c.k, c.v, c.head.contiguous(), table, c.tab, c.g);
  return {outs[0], outs[1]};
}

std::tuple<Tensor, Tensor> fused_attention_cpu_forward(const Tensor& q, const Tensor& k,
                                                       const Tensor& v, const ScoreMod& mod,
                                                       const Tensor& head_scale,
                                                       const Tensor& alibi_slopes,
                                                       const Tensor& bias_table,
                                                       const FusedCpuConfig& config) {
  at::NoGradGuard no_grad;
  const Call c = prepare(q, k, v, mod, head_scale, alibi_slopes, bias_table, config);
  if (c.empty) return {at::zeros_like(q), at::zeros({q.size(0), q.size(1), q.size(2)}, q.options())};
  auto [out, lse] = forward_impl(c.q, c.k, c.v, c.head.contiguous(), c.tab, c.g);
  return {out, lse};
}

FusedCpuGradients fused_attention_cpu_backward(const Tensor& q, const Tensor& k, const Tensor& v,
                                               const Tensor& out, const Tensor& lse,
                                               const Tensor& dout, const Tensor& dlse,
                                               const ScoreMod& mod, const Tensor& head_scale,
                                               const Tensor& alibi_slopes, const Tensor& bias_table,
                                               const FusedCpuConfig& config) {
  at::NoGradGuard no_grad;
  const Call c = prepare(q, k, v, mod, head_scale, alibi_slopes, bias_table, config);
  FusedCpuGradients g;
  const bool head_grad = head_scale.defined(), bias_grad = bias_table.defined();
  if (c.empty) {
    g.dq = at::zeros_like(q);
    g.dk = at::zeros_like(k);
    g.dv = at::zeros_like(v);
    if (head_grad) g.dhead_scale = at::zeros_like(head_scale);
    if (bias_grad) g.dbias_table = at::zeros_like(bias_table);
    return g;
  }
  const auto r = backward_impl(c.q, c.k, c.v, c.head.contiguous(), c.tab, c.g, out.contiguous(),
                               lse.contiguous(), dout.contiguous(), dlse, head_grad, bias_grad);
  g.dq = r.dq;
  g.dk = r.dk;
  g.dv = r.dv;
  if (head_grad) g.dhead_scale = r.dhead.to(head_scale.scalar_type());
  if (bias_grad)
    g.dbias_table = table_gradient(r.dbias, c.tab.fire.defined(), q.size(2), bias_table.size(1), bias_table.scalar_type());
  return g;
}

Tensor fused_attention_cpu(const Tensor& q, const Tensor& k, const Tensor& v, const ScoreMod& mod,
                           const Tensor& head_scale, const Tensor& alibi_slopes,
                           const Tensor& bias_table, const FusedCpuConfig& config) {
  return std::get<0>(
      fused_attention_cpu_with_lse(q, k, v, mod, head_scale, alibi_slopes, bias_table, config));
}

const char* fused_cpu_isa() {
  switch (active_isa()) {
    case IsaKind::kAvx512: return "avx512";
    case IsaKind::kAvx2: return "avx2";
    default: return "generic";
  }
}

void set_fused_cpu_isa(const std::string& isa) {
  if (isa == "auto") {
    set_isa_override(-1);
    return;
  }
  const IsaKind best = detected_isa();
  IsaKind want;
  if (isa == "avx512")
    want = IsaKind::kAvx512;
  else if (isa == "avx2")
    want = IsaKind::kAvx2;
  else if (isa == "generic")
    want = IsaKind::kGeneric;
  else
    throw std::invalid_argument("set_fused_cpu_isa: unknown '" + isa +
                                "'; valid: auto, avx512, avx2, generic");
  if (int(want) < int(best))
    throw std::invalid_argument("set_fused_cpu_isa: '" + isa + "' is not supported by this CPU");
  set_isa_override(int(want));
}

}  // namespace attention
