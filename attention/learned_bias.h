// A learned bias as data: the table that every kernel reads (score_mod.h's bias_table: (H, T)
// b_h(t), or FIRE's (H, G + 2) grid), built from the transform's learned parameters by torch ops on their device (one
// table form per registry row, learned_bias.cpp: no copy to the host, so no wait for a GPU), and
// differentiated by autograd. The row's float64 closed forms (transforms.h: learned_bias,
// learned_bias_grad) are what the forms are tested against. The kernels return d loss/d table;
// autograd carries it from here to the parameters, so a new learned transform touches no kernel.
#pragma once

#include "attention/method.h"

#include <torch/types.h>

#include <vector>

namespace attention {

// params: the module's learned parameters in the row's `learned` order, (H) or (H, per_head) each,
// raised to their floors (the gradient passes the floor straight through). Returns the (H, E)
// table (E = learned_table_length(spec, T)) on the parameters' device, float32 (float64 for float64 parameters), differentiable w.r.t.
// each of them; undefined when the method has no learned bias.
torch::Tensor learned_bias_table(const Method& method, const std::vector<torch::Tensor>& params, int64_t T);

// The two directions as plain functions, for a caller that keeps the graph itself (the PyTorch
// operator): the table as above, and from d loss/d table (H, T) the gradient of each parameter,
// shaped like it. Parameters whose sizes do not match the row: std::invalid_argument.
torch::Tensor learned_bias_table_forward(const Method& method, const std::vector<torch::Tensor>& params, int64_t T);
std::vector<torch::Tensor> learned_bias_table_backward(const Method& method, const std::vector<torch::Tensor>& params,
                                                       const torch::Tensor& dtable);

// The same as a ScoreMod the statistics and the materialised decode path read: mod with its
// bias_table pointing at `storage`, a float copy of table (H, E); mod itself when undefined.
ScoreMod with_bias_table(ScoreMod mod, const torch::Tensor& table, std::vector<float>& storage);

}  // namespace attention
