#include "models/optimizers.h"

#include <ATen/record_function.h>
#include <torch/torch.h>

#include <cmath>
#include <stdexcept>

namespace models {

namespace {

std::string join(const std::vector<std::string>& names) {
  std::string s;
  for (size_t i = 0; i < names.size(); ++i) s += (i ? ", " : "") + names[i];
  return s;
}

bool starts_with(const std::string& s, const std::string& prefix) {
  return s.compare(0, prefix.size(), prefix) == 0;
}

// Drops the gradients (PyTorch's zero_grad(set_to_none=True)): the next backward hands its
// buffers over instead of adding into zeros, two passes fewer per parameter, same values. A
// parameter that gets no gradient in a step is then skipped by the optimisers (no momentum or
// decay update), as in PyTorch; every GPT parameter gets one every step.
void zero_grads(const std::vector<torch::Tensor>& params) {
  for (auto p : params) p.mutable_grad() = torch::Tensor();
}

int64_t read_int(torch::serialize::InputArchive& archive, const std::string& key) {
  torch::Tensor t;
  archive.read(key, t, /*is_buffer=*/true);
  return t.item<int64_t>();
}

void write_int(torch::serialize::OutputArchive& archive, const std::string& key, int64_t v) {
  archive.write(key, torch::tensor(v, torch::kLong), /*is_buffer=*/true);
}

void read_into(torch::serialize::InputArchive& archive, const std::string& key,
               torch::Tensor& dst) {
  torch::Tensor t;
  archive.read(key, t, /*is_buffer=*/true);
  if (!t.sizes().equals(dst.sizes()))
    throw std::runtime_error("optimiser checkpoint: '" + key + "' has shape " +
                             c10::str(t.sizes()) + ", expected " + c10::str(dst.sizes()));
  dst.copy_(t);
}

}  // namespace

// Defaults: see the experiment in optimizers.h.
OptimOptions default_optim_options(const std::string& name) {
  OptimOptions o;
  o.name = name;
  if (name == "adamw") o.lr_hidden = 0.003;
  validate(o);
  return o;
}

std::vector<std::string> optimizer_names() { return {"muon", "adamw"}; }

void validate(const OptimOptions& o) {
  const auto names = optimizer_names();
  bool known = false;
  for (const auto& n : names) known = known || n == o.name;
  if (!known)
    throw std::invalid_argument("unknown optimizer '" + o.name + "' (valid: " + join(names) +
                                ")");
  auto nonneg = [](double v, const char* what) {
    if (!(v >= 0) || !std::isfinite(v))
      throw std::invalid_argument(std::string("OptimOptions.") + what +
                                  " must be finite and >= 0, got " + std::to_string(v));
  };
  nonneg(o.lr_hidden, "lr_hidden");
  nonneg(o.lr_embed, "lr_embed");
  nonneg(o.lr_head, "lr_head");
  nonneg(o.lr_scalar, "lr_scalar");
  nonneg(o.weight_decay, "weight_decay");
  auto unit = [](double v, const char* what) {
    if (!(v >= 0 && v < 1))
      throw std::invalid_argument(std::string("OptimOptions.") + what + " must be in [0, 1), got " +
                                  std::to_string(v));
  };
  unit(o.beta1, "beta1");
  unit(o.beta2, "beta2");
  unit(o.momentum, "momentum");
  if (!(o.eps > 0)) throw std::invalid_argument("OptimOptions.eps must be > 0");
}

const char* param_group_name(ParamGroup g) {
  switch (g) {
    case ParamGroup::kHidden: return "hidden";
    case ParamGroup::kEmbed: return "embed";
    case ParamGroup::kHead: return "head";
    case ParamGroup::kScalar: return "scalar";
  }
  return "?";
}

ParamGroup classify_parameter(const std::string& name, const torch::Tensor& param) {
  if (starts_with(name, "embed.")) return ParamGroup::kEmbed;
  if (starts_with(name, "head.")) return ParamGroup::kHead;
  // The attention method's own parameters (learned LogN scales, KERPLE's r1 and r2, any
  // registry row's) live in the attention core module (models/gpt.h) and are never Muon's.
  if (name.find(".attn.core.") != std::string::npos) return ParamGroup::kScalar;
  if (param.dim() == 2 && starts_with(name, "blocks.")) return ParamGroup::kHidden;
  return ParamGroup::kScalar;
}

// ---------------------------------------------------------------------------------------------

Adam::Adam(std::vector<torch::Tensor> params, AdamOptions options)
    : params_(std::move(params)), options_(options) {
  for (const auto& p : params_) {
    exp_avg_.push_back(torch::zeros_like(p, torch::MemoryFormat::Contiguous));
    exp_avg_sq_.push_back(torch::zeros_like(p, torch::MemoryFormat::Contiguous));
  }
}

void Adam::step(double lr_factor) {
  torch::NoGradGuard ng;
  RECORD_USER_SCOPE("optim.adam");  // for the step breakdown (bench/step_breakdown_bench.cpp)
  ++steps_;
  const double lr = options_.lr * lr_factor;
  const double b1 = options_.beta1, b2 = options_.beta2;
  const double bc1 = 1.0 - std::pow(b1, static_cast<double>(steps_));
  const double bc2 = 1.0 - std::pow(b2, static_cast<double>(steps_));
  for (size_t i = 0; i < params_.size(); ++i) {
    auto& p = params_[i];
    const auto& g = p.grad();
    if (!g.defined()) continue;
    auto& m = exp_avg_[i];
    auto& v = exp_avg_sq_[i];
    m.mul_(b1).add_(g, 1.0 - b1);
    v.mul_(b2).addcmul_(g, g, 1.0 - b2);
    auto denom = (v.sqrt() / std::sqrt(bc2)).add_(options_.eps);
    if (options_.weight_decay != 0) p.mul_(1.0 - lr * options_.weight_decay);
    p.addcdiv_(m, denom, -lr / bc1);
  }
}

void Adam::zero_grad() { zero_grads(params_); }

void Adam::save(torch::serialize::OutputArchive& archive, const std::string& prefix) const {
  write_int(archive, prefix + "_steps", steps_);
  write_int(archive, prefix + "_count", static_cast<int64_t>(params_.size()));
  for (size_t i = 0; i < params_.size(); ++i) {
    archive.write(prefix + "_" + std::to_string(i) + "_exp_avg", exp_avg_[i], true);
    archive.write(prefix + "_" + std::to_string(i) + "_exp_avg_sq", exp_avg_sq_[i], true);
  }
}

void Adam::load(torch::serialize::InputArchive& archive, const std::string& prefix) {
  torch::NoGradGuard ng;
  const auto count = read_int(archive, prefix + "_count");
  if (count != static_cast<int64_t>(params_.size()))
    throw std::runtime_error("Adam::load: checkpoint group '" + prefix + "' has " +
                             std::to_string(count) + " parameters, this one " +
                             std::to_string(params_.size()));
  steps_ = read_int(archive, prefix + "_steps");
  for (size_t i = 0; i < params_.size(); ++i) {
    read_into(archive, prefix + "_" + std::to_string(i) + "_exp_avg", exp_avg_[i]);
    read_into(archive, prefix + "_" + std::to_string(i) + "_exp_avg_sq", exp_avg_sq_[i]);
  }
}

// ---------------------------------------------------------------------------------------------

Optimizers::Optimizers(GPT& model, OptimOptions options) : options_(std::move(options)) {
  validate(options_);
  for (const auto& item : model->named_parameters()) {
    if (!item.value().requires_grad()) continue;
    const auto g = static_cast<int>(classify_parameter(item.key(), item.value()));
    groups_[g].push_back(item.value());
    names_[g].push_back(item.key());
  }
  const bool muon = options_.name == "muon";
  for (int g = 0; g < kNumParamGroups; ++g) {
    const auto group = static_cast<ParamGroup>(g);
    if (group == ParamGroup::kHidden && muon) {
      MuonOptions mo;
      mo.lr = options_.lr_hidden;
      mo.momentum = options_.momentum;
      mo.weight_decay = options_.weight_decay;
      muon_ = std::make_unique<Muon>(groups_[g], mo);
      continue;
    }
    AdamOptions ao;
    ao.lr = base_lr(group);
    ao.beta1 = options_.beta1;
    ao.beta2 = options_.beta2;
    ao.eps = options_.eps;
    ao.weight_decay = group == ParamGroup::kHidden ? options_.weight_decay : 0.0;
    adam_[g] = std::make_unique<Adam>(groups_[g], ao);
  }
}

double Optimizers::base_lr(ParamGroup g) const {
  switch (g) {
    case ParamGroup::kHidden: return options_.lr_hidden;
    case ParamGroup::kEmbed: return options_.lr_embed;
    case ParamGroup::kHead: return options_.lr_head;
    case ParamGroup::kScalar: return options_.lr_scalar;
  }
  return 0.0;
}

const std::vector<torch::Tensor>& Optimizers::group(ParamGroup g) const {
  return groups_[static_cast<int>(g)];
}

const std::vector<std::string>& Optimizers::group_names(ParamGroup g) const {
  return names_[static_cast<int>(g)];
}

void Optimizers::step() {
  if (muon_) muon_->step(lr_factor_, group_);
  for (auto& a : adam_)
    if (a) a->step(lr_factor_);
  ++steps_;
}

void Optimizers::zero_grad() {
  for (const auto& g : groups_) zero_grads(g);
}

void Optimizers::set_lr_factor(double f) {
  if (!(f >= 0) || !std::isfinite(f))
    throw std::invalid_argument("Optimizers::set_lr_factor: factor must be finite and >= 0, got " +
                                std::to_string(f));
  lr_factor_ = f;
}

void Optimizers::save(torch::serialize::OutputArchive& archive) const {
  archive.write("optim_name", c10::IValue(options_.name));
  archive.write("optim_lr_factor", torch::tensor(lr_factor_, torch::kDouble), true);
  write_int(archive, "optim_steps", steps_);
  for (int g = 0; g < kNumParamGroups; ++g) {
    const std::string prefix = std::string("optim_") + param_group_name(static_cast<ParamGroup>(g));
    if (g == static_cast<int>(ParamGroup::kHidden) && muon_)
      muon_->save(archive, prefix);
    else
      adam_[g]->save(archive, prefix);
  }
}

void Optimizers::load(torch::serialize::InputArchive& archive) {
  c10::IValue name;
  archive.read("optim_name", name);
  if (name.toStringRef() != options_.name)
    throw std::runtime_error("Optimizers::load: checkpoint was written by optimizer '" +
                             name.toStringRef() + "', this run uses '" + options_.name + "'");
  torch::Tensor f;
  archive.read("optim_lr_factor", f, true);
  lr_factor_ = f.item<double>();
  steps_ = read_int(archive, "optim_steps");
  for (int g = 0; g < kNumParamGroups; ++g) {
    const std::string prefix = std::string("optim_") + param_group_name(static_cast<ParamGroup>(g));
    if (g == static_cast<int>(ParamGroup::kHidden) && muon_)
      muon_->load(archive, prefix);
    else
      adam_[g]->load(archive, prefix);
  }
}

// ---------------------------------------------------------------------------------------------

torch::Tensor clip_grad_norm(GPT& model, double max_norm) {
  torch::NoGradGuard ng;
  RECORD_USER_SCOPE("optim.clip_grad_norm");  // for the step breakdown
  std::vector<torch::Tensor> grads;
  for (const auto& p : model->parameters())
    if (p.grad().defined()) grads.push_back(p.grad());
  if (grads.empty()) return torch::zeros({}, torch::kDouble);
  // A float64 norm per gradient (one kernel each), the norm of those, and the clip as a factor on
  // the device (min(1, max_norm / (norm + 1e-6)), as torch.nn.utils.clip_grad_norm_): nothing is
  // read back, so that a GPU step queues without waiting for the device.
  std::vector<torch::Tensor> norms;
  norms.reserve(grads.size());
  for (const auto& g : grads) norms.push_back(at::linalg_vector_norm(g, 2, c10::nullopt, false, torch::kDouble));
  const auto norm = at::linalg_vector_norm(torch::stack(norms), 2);
  if (max_norm > 0) {
    const auto factor = (max_norm / (norm + 1e-6)).clamp_max(1.0).to(grads.front().scalar_type());
    at::_foreach_mul_(grads, factor);
  }
  return norm;
}

}  // namespace models
