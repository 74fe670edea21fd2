#include "harness/tasks/needle/passkey_eval.h"

#include <torch/torch.h>

#include <cmath>
#include <stdexcept>

namespace harness::needle {

PasskeyScores score_passkeys(models::GPT& model, const std::vector<PasskeyExample>& examples, int64_t batch,
                             torch::Device device) {
  torch::NoGradGuard no_grad;
  PasskeyScores out;
  if (examples.empty()) return out;
  const int64_t N = int64_t(examples.front().tokens.size());
  for (size_t first = 0; first < examples.size(); first += size_t(batch)) {
    const size_t last = std::min(examples.size(), first + size_t(batch));
    auto tokens = torch::empty({int64_t(last - first), N}, torch::kLong);  // (B, N)
    for (size_t e = first; e < last; ++e) {
      if (int64_t(examples[e].tokens.size()) != N)
        throw std::invalid_argument("score_passkeys: examples of one length only");
      for (int64_t i = 0; i < N; ++i) tokens[int64_t(e - first)][i] = int64_t(examples[e].tokens[size_t(i)]);
    }
    const auto logits = model->forward(tokens.to(device).slice(1, 0, N - 1)).to(torch::kCPU);  // (B, N − 1, V)
    for (size_t e = first; e < last; ++e) {
      // Target i is token i + 1: the key's K tokens N − K … N − 1 are targets N − K − 1 … N − 2
      // (K per example: a subword tokenizer may write keys in different numbers of tokens).
      const int64_t K = examples[e].answer_tokens, b = int64_t(e - first);
      const auto rows = logits[b].slice(0, N - K - 1, N - 1).to(torch::kFloat64);  // (K, V)
      const auto targets = tokens[b].slice(0, N - K, N);                           // (K,)
      const auto log_p = torch::log_softmax(rows, -1).gather(-1, targets.unsqueeze(-1));  // (K, 1)
      out.exact.push_back((rows.argmax(-1) == targets).all().item<bool>() ? 1.0 : 0.0);
      out.log_prob.push_back(log_p.sum().item<double>());
    }
  }
  return out;
}

namespace {

std::pair<double, double> mean_se(const std::vector<double>& x) {
  double m = 0;
  for (const double v : x) m += v / double(x.size());
  double ss = 0;
  for (const double v : x) ss += (v - m) * (v - m);
  return {m, x.size() > 1 ? std::sqrt(ss / double(x.size() - 1) / double(x.size())) : std::nan("")};
}

}  // namespace

results::DatasetGroup passkey_group(const PasskeyScores& scores, int64_t distance, int64_t example_tokens,
                                    uint64_t seed) {
  const auto E = int64_t(scores.exact.size());
  const auto [acc, acc_se] = mean_se(scores.exact);
  const auto [lp, lp_se] = mean_se(scores.log_prob);
  results::DatasetGroup g;
  g.arrays["exact"] = {{E}, scores.exact, "1 = every key token the argmax (greedy decoding writes the key)"};
  g.arrays["log_prob"] = {{E}, scores.log_prob, "nats: log-probability of the key's tokens, teacher-forced"};
  g.arrays["accuracy"] = {{1}, {acc}, "fraction of examples with an exact match"};
  g.arrays["accuracy_se"] = {{1}, {acc_se}, "standard error of accuracy over examples"};
  g.arrays["mean_log_prob"] = {{1}, {lp}, "nats, mean of log_prob over examples"};
  g.arrays["mean_log_prob_se"] = {{1}, {lp_se}, "standard error of mean_log_prob over examples"};
  g.attributes["kind"] = "passkey";
  g.attributes["distance"] = distance;
  g.attributes["example_tokens"] = example_tokens;
  g.attributes["examples"] = E;
  g.attributes["seed"] = int64_t(seed);
  g.attributes["scoring"] = "teacher-forced";
  return g;
}

}  // namespace harness::needle
