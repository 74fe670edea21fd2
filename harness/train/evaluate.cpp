#include "harness/train/evaluate.h"

#include "harness/train/attention_datasets.h"

#include <torch/torch.h>

#include <algorithm>

namespace harness::train {

EvalResult evaluate(models::GPT& model, const data::EvalWindows& windows, int64_t batch_size,
                    int64_t position_buckets, torch::Device device, int64_t attention_queries,
                    bool raw_scores) {
  torch::NoGradGuard no_grad;
  const bool was_training = model->is_training();
  model->eval();
  model->set_record_score_std(true);
  model->record_attention_stats(attention_queries, raw_scores);

  const int64_t T = windows.context;
  const int64_t N = windows.tokens.size(0);
  const int64_t buckets = std::min(position_buckets, T);
  // Bucket b holds positions [b·T/buckets, (b+1)·T/buckets).
  const auto bucket_of = (torch::arange(T, torch::kLong) * buckets).div(T, "floor");  // (T,)

  auto loss_by_position = torch::zeros({T}, torch::kDouble);  // summed over windows
  std::vector<double> score_std_sum;
  int64_t batches = 0;
  for (int64_t start = 0; start < N; start += batch_size) {
    const auto chunk = windows.tokens.slice(0, start, std::min(N, start + batch_size)).to(device);
    const auto inputs = chunk.slice(1, 0, T);       // (B, T)
    const auto targets = chunk.slice(1, 1, T + 1);  // (B, T)
    const auto logits = model->forward(inputs);     // (B, T, V)
    const auto nll = torch::nn::functional::cross_entropy(
        logits.reshape({-1, logits.size(-1)}).to(torch::kFloat), targets.reshape({-1}),
        torch::nn::functional::CrossEntropyFuncOptions().reduction(torch::kNone));
    loss_by_position += nll.view({-1, T}).to(torch::kCPU, torch::kDouble).sum(0);
    const auto stds = model->score_std();
    score_std_sum.resize(stds.size(), 0.0);
    for (size_t l = 0; l < stds.size(); ++l) score_std_sum[l] += stds[l];
    ++batches;
  }
  model->set_record_score_std(false);
  const auto recorders = model->attention_stats();
  model->record_attention_stats(0);
  if (was_training) model->train();

  EvalResult r;
  r.context = T;
  loss_by_position /= double(N);
  r.loss = loss_by_position.mean().item<double>();
  const auto per_bucket = torch::zeros({buckets}, torch::kDouble).index_add_(0, bucket_of, loss_by_position);
  const auto counts = torch::zeros({buckets}, torch::kDouble)
                          .index_add_(0, bucket_of, torch::ones({T}, torch::kDouble));
  const auto mean_per_bucket = (per_bucket / counts).contiguous();
  r.position_loss.assign(mean_per_bucket.data_ptr<double>(), mean_per_bucket.data_ptr<double>() + buckets);
  for (double s : score_std_sum) r.score_std.push_back(s / double(std::max<int64_t>(batches, 1)));
  r.attention = attention_datasets(recorders, raw_scores);
  return r;
}

}  // namespace harness::train
