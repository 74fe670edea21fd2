#include "analysis/export/loss_table.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <set>

#include "harness/common/mean_se.h"
#include "results/run_file.h"

namespace analysis {

namespace {

std::string csv_field(const std::string& s) {
  if (s.find_first_of(",\"\n") == std::string::npos) return s;
  std::string out = "\"";
  for (const char c : s) out += c == '"' ? std::string("\"\"") : std::string(1, c);
  return out + "\"";
}

bool averaged(const LossTable& table) {
  return std::any_of(table.rows.begin(), table.rows.end(), [](const auto& r) { return r.runs > 1; });
}

}  // namespace

LossTable build_loss_table(const std::vector<std::string>& label_names,
                           const std::vector<LossTableInput>& runs) {
  LossTable table;
  table.label_names = label_names;
  std::set<int64_t> contexts;
  for (const auto& input : runs) {
    LossTableRow row;
    row.run_id = input.run_id;
    row.labels = input.labels;
    row.state = "pending";
    if (std::filesystem::exists(input.run_file)) {
      try {
        const results::RunRecord record = results::read_run_file(input.run_file);
        row.state = results::to_string(record.state);
        for (const auto& [T, rows] : record.eval) {
          contexts.insert(T);
          if (record.state == results::RunState::kDone && rows.size()) row.loss[T] = rows.loss.back();
        }
      } catch (const std::exception&) {
        row.state = "unreadable";
      }
    }
    table.rows.push_back(std::move(row));
  }
  table.contexts.assign(contexts.begin(), contexts.end());
  return table;
}

LossTable average_over(const LossTable& table, const std::string& label) {
  const auto it = std::find(table.label_names.begin(), table.label_names.end(), label);
  if (it == table.label_names.end()) return table;
  const size_t drop = size_t(it - table.label_names.begin());
  LossTable out;
  out.contexts = table.contexts;
  out.label_names = table.label_names;
  out.label_names.erase(out.label_names.begin() + long(drop));
  std::vector<std::vector<const LossTableRow*>> groups;
  for (const auto& row : table.rows) {
    auto labels = row.labels;
    labels.erase(labels.begin() + long(drop));
    size_t g = 0;
    while (g < out.rows.size() && out.rows[g].labels != labels) ++g;
    if (g == out.rows.size()) {
      LossTableRow merged;
      merged.labels = labels;
      merged.runs = 0;
      merged.state = row.state;
      out.rows.push_back(merged);
      groups.emplace_back();
    }
    groups[g].push_back(&row);
    if (out.rows[g].state != row.state) out.rows[g].state = "mixed";
  }
  for (size_t g = 0; g < out.rows.size(); ++g) {
    auto& merged = out.rows[g];
    merged.runs = int(groups[g].size());
    for (const int64_t T : out.contexts) {
      std::vector<double> values;
      for (const auto* row : groups[g])
        if (const auto v = row->loss.find(T); v != row->loss.end()) values.push_back(v->second);
      if (values.empty()) continue;
      // ± standard error, as `export table` reports: one convention for every table.
      const auto m = harness::mean_se(values);
      merged.loss[T] = m.mean;
      merged.loss_se[T] = m.se;
    }
  }
  return out;
}

std::string format_text(const LossTable& table) {
  const bool mean = averaged(table);
  std::vector<std::string> header;
  if (!mean) header.push_back("run");
  for (const auto& l : table.label_names) header.push_back(l);
  header.push_back("state");
  if (mean) header.push_back("runs");
  for (const int64_t T : table.contexts) header.push_back(fmt::format("val@{}", T));

  std::map<int64_t, double> best;
  for (const auto& row : table.rows)
    for (const auto& [T, v] : row.loss)
      if (!best.count(T) || v < best[T]) best[T] = v;

  std::vector<std::vector<std::string>> cells;
  for (const auto& row : table.rows) {
    std::vector<std::string> line;
    if (!mean) line.push_back(row.run_id);
    for (const auto& l : row.labels) line.push_back(l);
    line.push_back(row.state);
    if (mean) line.push_back(std::to_string(row.runs));
    for (const int64_t T : table.contexts) {
      const auto v = row.loss.find(T);
      if (v == row.loss.end()) {
        line.push_back("-");
        continue;
      }
      std::string cell = fmt::format("{:.4f}", v->second);
      if (mean && row.runs > 1) cell += fmt::format(" ± {:.4f}", row.loss_se.at(T));
      cell += v->second == best[T] ? "*" : " ";
      line.push_back(cell);
    }
    cells.push_back(std::move(line));
  }
  std::vector<size_t> width(header.size());
  const auto display = [](const std::string& s) {  // '±' is two bytes, one column
    size_t n = 0;
    for (const unsigned char c : s) n += (c & 0xC0) != 0x80;
    return n;
  };
  for (size_t c = 0; c < header.size(); ++c) {
    width[c] = display(header[c]);
    for (const auto& line : cells) width[c] = std::max(width[c], display(line[c]));
  }
  const size_t first_loss = header.size() - table.contexts.size();
  const auto render = [&](const std::vector<std::string>& line) {
    std::string out;
    for (size_t c = 0; c < line.size(); ++c) {
      const std::string pad(width[c] - display(line[c]), ' ');
      out += c >= first_loss ? pad + line[c] : line[c] + pad;  // numbers right-aligned
      out += c + 1 < line.size() ? "  " : "";
    }
    while (!out.empty() && out.back() == ' ') out.pop_back();
    return out + "\n";
  };
  std::string out = render(header);
  for (const auto& line : cells) out += render(line);
  out += mean ? "validation loss (nats/token) after the last step, mean ± standard error over seeds; * lowest per context\n"
             : "validation loss (nats/token) after the last step; * lowest per context\n";
  return out;
}

std::string format_csv(const LossTable& table) {
  const bool mean = averaged(table);
  std::vector<std::string> header = {"run_id"};
  for (const auto& l : table.label_names) header.push_back(l);
  header.push_back("state");
  header.push_back("runs");
  for (const int64_t T : table.contexts) {
    header.push_back(fmt::format("loss_{}", T));
    if (mean) header.push_back(fmt::format("loss_se_{}", T));
  }
  std::string out;
  for (size_t c = 0; c < header.size(); ++c) out += (c ? "," : "") + csv_field(header[c]);
  out += "\n";
  for (const auto& row : table.rows) {
    std::vector<std::string> line = {row.run_id};
    for (const auto& l : row.labels) line.push_back(l);
    line.push_back(row.state);
    line.push_back(std::to_string(row.runs));
    for (const int64_t T : table.contexts) {
      const auto v = row.loss.find(T);
      line.push_back(v == row.loss.end() ? "" : fmt::format("{:.6f}", v->second));
      if (mean) {
        const auto se = row.loss_se.find(T);
        line.push_back(se == row.loss_se.end() || std::isnan(se->second) ? "" : fmt::format("{:.6f}", se->second));
      }
    }
    for (size_t c = 0; c < line.size(); ++c) out += (c ? "," : "") + csv_field(line[c]);
    out += "\n";
  }
  return out;
}

}  // namespace analysis
