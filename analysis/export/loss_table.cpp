#include "analysis/export/loss_table.h"

#include <fmt/format.h>

#include <algorithm>
#include <filesystem>
#include <set>

#include "analysis/export/csv_field.h"
#include "results/run_file.h"

namespace analysis {

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

namespace {

// The header and one line per run: the text form ("val@T", losses to 4 digits, '*' on the lowest
// per context, '-' when none) or the CSV form ("loss_T", 6 digits, empty when none).
std::vector<std::vector<std::string>> lines(const LossTable& table, bool csv) {
  std::vector<std::string> header = {csv ? "run_id" : "run"};
  for (const auto& l : table.label_names) header.push_back(l);
  header.push_back("state");
  for (const int64_t T : table.contexts) header.push_back(fmt::format(csv ? "loss_{}" : "val@{}", T));
  std::map<int64_t, double> best;
  for (const auto& row : table.rows)
    for (const auto& [T, v] : row.loss)
      if (!best.count(T) || v < best[T]) best[T] = v;
  std::vector<std::vector<std::string>> out = {header};
  for (const auto& row : table.rows) {
    std::vector<std::string> line = {row.run_id};
    for (const auto& l : row.labels) line.push_back(l);
    line.push_back(row.state);
    for (const int64_t T : table.contexts) {
      const auto v = row.loss.find(T);
      if (v == row.loss.end())
        line.push_back(csv ? "" : "-");
      else
        line.push_back(csv ? fmt::format("{:.6f}", v->second)
                           : fmt::format("{:.4f}{}", v->second, v->second == best[T] ? "*" : " "));
    }
    out.push_back(std::move(line));
  }
  return out;
}

}  // namespace

std::string format_text(const LossTable& table) {
  const auto cells = lines(table, false);
  const auto display = [](const std::string& s) {  // a UTF-8 character ('τ') is one column
    size_t n = 0;
    for (const unsigned char c : s) n += (c & 0xC0) != 0x80;
    return n;
  };
  std::vector<size_t> width(cells[0].size(), 0);
  for (const auto& line : cells)
    for (size_t c = 0; c < line.size(); ++c) width[c] = std::max(width[c], display(line[c]));
  const size_t first_loss = cells[0].size() - table.contexts.size();
  std::string out;
  for (const auto& line : cells) {
    std::string text;
    for (size_t c = 0; c < line.size(); ++c) {
      const std::string pad(width[c] - display(line[c]), ' ');
      text += c >= first_loss ? pad + line[c] : line[c] + pad;  // numbers right-aligned
      text += c + 1 < line.size() ? "  " : "";
    }
    while (!text.empty() && text.back() == ' ') text.pop_back();
    out += text + "\n";
  }
  return out + "validation loss (nats/token) after the last step; * lowest per context\n";
}

std::string format_csv(const LossTable& table) {
  std::string out;
  for (const auto& line : lines(table, true)) {
    for (size_t c = 0; c < line.size(); ++c) out += (c ? "," : "") + csv_field(line[c]);
    out += "\n";
  }
  return out;
}

}  // namespace analysis
