#include "harness/train/evaluate.h"

#include "harness/train/attention_datasets.h"
#include "common/mean_se.h"
#include "harness/config/run_config.h"

#include <torch/torch.h>

#include <algorithm>

namespace harness::train {

int64_t statistics_queries(int64_t configured, int64_t requested) {
  if (requested > 0) return requested;
  return configured > 0 ? configured : config::kDefaultAttentionQueries;
}

namespace {

// Data parallel: every rank's sums (loss by position and by window, the score moments, the batch
// count, the attention statistics) summed over the ranks, in place.
void reduce_over_ranks(models::Collectives& group, torch::Tensor& loss_by_position, std::vector<double>& score_moments,
                       int64_t& batches, torch::Tensor& loss_by_window,
                       const std::vector<std::shared_ptr<attention::AttentionStatsRecorder>>& recorders, int64_t T,
                       int64_t heads) {
  std::vector<torch::Tensor> sums{loss_by_position,
                                  torch::tensor(score_moments, torch::kDouble),
                                  torch::tensor({double(batches)}, torch::kDouble), loss_by_window};
  for (const auto& recorder : recorders)
    sums.push_back(torch::tensor(recorder->flat_sums(T, heads), torch::kDouble));
  group.all_reduce_sum(sums);
  loss_by_position = sums[0];
  const auto moments = sums[1].contiguous();
  score_moments.assign(moments.data_ptr<double>(), moments.data_ptr<double>() + moments.numel());
  batches = int64_t(sums[2].item<double>());
  loss_by_window = sums[3];
  for (size_t i = 0; i < recorders.size(); ++i) {
    const auto flat = sums[4 + i].contiguous();
    recorders[i]->set_flat_sums(std::vector<double>(flat.data_ptr<double>(), flat.data_ptr<double>() + flat.numel()));
  }
}

// Mean of (T,) per-position losses over `buckets` equal-width buckets: bucket b holds positions
// [b·T/buckets, (b+1)·T/buckets).
std::vector<double> bucket_means(const torch::Tensor& loss_by_position, int64_t buckets) {
  const int64_t T = loss_by_position.size(0);
  const auto bucket_of = (torch::arange(T, torch::kLong) * buckets).div(T, "floor");  // (T,)
  const auto per_bucket = torch::zeros({buckets}, torch::kDouble).index_add_(0, bucket_of, loss_by_position);
  const auto counts = torch::zeros({buckets}, torch::kDouble).index_add_(0, bucket_of, torch::ones({T}, torch::kDouble));
  const auto mean = (per_bucket / counts).contiguous();
  return {mean.data_ptr<double>(), mean.data_ptr<double>() + buckets};
}

}  // namespace

EvalResult evaluate(models::GPT& model, const data::EvalWindows& windows, int64_t batch_size,
                    int64_t position_buckets, torch::Device device, int64_t attention_queries,
                    bool raw_scores, models::Collectives* group) {
  TORCH_CHECK(!(group && raw_scores), "evaluate: raw-score statistics are not reduced over ranks");
  torch::NoGradGuard no_grad;
  const bool was_training = model->is_training();
  model->eval();
  // One recorder per layer, filled through the probes of every batch's forward pass.
  const size_t layers = model->block_list.size();
  std::vector<std::shared_ptr<attention::AttentionStatsRecorder>> recorders;
  for (size_t l = 0; attention_queries > 0 && l < layers; ++l)
    recorders.push_back(std::make_shared<attention::AttentionStatsRecorder>(attention_queries, raw_scores));
  std::vector<attention::AttentionProbe> probes(layers);
  for (size_t l = 0; l < layers; ++l) {
    probes[l].score_std = true;
    probes[l].stats = recorders.empty() ? nullptr : recorders[l].get();
  }

  const int64_t T = windows.context;
  const int64_t N = windows.tokens.size(0);
  const int64_t buckets = std::min(position_buckets, T);
  // Summed over windows, on the device: read once at the end, not after every batch.
  auto loss_by_position = torch::zeros({T}, torch::TensorOptions().dtype(torch::kDouble).device(device));
  // Summed nats of each window: a rank fills its own rows, the others stay 0 for the reduction.
  auto loss_by_window = torch::zeros({N}, torch::TensorOptions().dtype(torch::kDouble).device(device));
  int64_t batches = 0;
  // Data parallel: rank r of W takes batches [r·nb/W, (r+1)·nb/W) of the single process's nb,
  // so the summed per-batch statistics are the single process's.
  const int64_t nb = (N + batch_size - 1) / batch_size;
  const int64_t W = group ? group->world_size() : 1, rank = group ? group->rank() : 0;
  for (int64_t start = rank * nb / W * batch_size; start < std::min(N, (rank + 1) * nb / W * batch_size);
       start += batch_size) {
    const auto chunk = windows.tokens.slice(0, start, std::min(N, start + batch_size)).to(device);
    const auto inputs = chunk.slice(1, 0, T);       // (B, T)
    const auto targets = chunk.slice(1, 1, T + 1);  // (B, T)
    const auto nll = model->position_losses(inputs, targets, &probes);  // (B, T)
    const auto nll64 = nll.to(torch::kDouble);
    loss_by_position += nll64.sum(0);
    loss_by_window.slice(0, start, start + chunk.size(0)) += nll64.sum(1);
    ++batches;
  }
  loss_by_position = loss_by_position.to(torch::kCPU);
  loss_by_window = loss_by_window.to(torch::kCPU);
  // The raw scores' std per layer, pooled over every sampled score of every batch.
  std::vector<double> score_moments;  // (layers, 3): count, sum, sum of squares
  for (const auto& p : probes) score_moments.insert(score_moments.end(), {p.score_count, p.score_sum, p.score_sum_sq});
  if (group)
    reduce_over_ranks(*group, loss_by_position, score_moments, batches, loss_by_window, recorders, T,
                      model->options().heads);
  if (was_training) model->train();

  EvalResult r;
  r.context = T;
  loss_by_position /= double(N);
  r.loss = loss_by_position.mean().item<double>();
  const auto per_window = (loss_by_window / double(T)).contiguous();
  r.window_loss.assign(per_window.data_ptr<double>(), per_window.data_ptr<double>() + N);
  r.loss_se = harness::mean_se(r.window_loss).se;
  r.window_fingerprint = data::window_fingerprint(windows);
  r.window_document = data::window_documents(windows);
  r.position_loss = bucket_means(loss_by_position, buckets);
  for (size_t l = 0; l < layers; ++l) {
    attention::AttentionProbe pooled;
    pooled.score_count = score_moments[3 * l];
    pooled.score_sum = score_moments[3 * l + 1];
    pooled.score_sum_sq = score_moments[3 * l + 2];
    r.score_std.push_back(pooled.pooled_score_std());
  }
  r.attention = attention_datasets(recorders, raw_scores);
  return r;
}

int64_t eval_batch_windows(int64_t batch_size, int64_t max_batch_tokens, int64_t context) {
  if (max_batch_tokens <= 0) return batch_size;
  return std::max<int64_t>(1, std::min(batch_size, max_batch_tokens / std::max<int64_t>(context, 1)));
}

}  // namespace harness::train
