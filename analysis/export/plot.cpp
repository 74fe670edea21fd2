#include "analysis/export/plot.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <stdexcept>

#include "analysis/export/csv_field.h"
#include "common/atomic_file.h"

namespace fs = std::filesystem;

namespace analysis {

namespace {

std::string gnuplot_program() {
  const char* env = std::getenv("HARNESS_GNUPLOT");
  return env && *env ? env : "gnuplot";
}

// Whether an SVG ends its root element, or a PNG ends with its IEND chunk: what a cut-off
// write loses first.
bool image_is_whole(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (path.size() > 4 && path.compare(path.size() - 4, 4, ".png") == 0) {
    static const std::string iend("IEND\xAE\x42\x60\x82", 8);
    return bytes.size() >= 8 && bytes.compare(bytes.size() - 8, 8, iend) == 0;
  }
  const size_t end = bytes.find_last_not_of(" \t\r\n");
  return end != std::string::npos && end + 1 >= 6 && bytes.compare(end + 1 - 6, 6, "</svg>") == 0;
}

// Runs `program script` in `dir`, stdout and stderr to <script>.log; returns the exit status.
int run_in(const std::string& dir, const std::string& program, const std::string& script,
           const std::string& log) {
  std::fflush(nullptr);  // else the child's freopen flushes the parent's pending output again
  const pid_t pid = fork();
  if (pid < 0) return -1;
  if (pid == 0) {
    if (chdir(dir.c_str()) != 0) _exit(127);
    if (!freopen(log.c_str(), "w", stdout) || !freopen(log.c_str(), "a", stderr)) _exit(127);
    execlp(program.c_str(), program.c_str(), script.c_str(), static_cast<char*>(nullptr));
    _exit(127);
  }
  int status = 0;
  while (waitpid(pid, &status, 0) < 0)
    if (errno != EINTR) return -1;
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

}  // namespace

void write_csv(const std::string& path, const Csv& csv) {
  std::string text;
  std::vector<std::string> head;
  for (const auto& h : csv.text_header) head.push_back(csv_field(h));
  for (const auto& h : csv.header) head.push_back(csv_field(h));
  text += fmt::format("{}\n", fmt::join(head, ","));
  for (size_t r = 0; r < csv.rows.size(); ++r) {
    std::vector<std::string> fields;
    if (!csv.text_header.empty())
      for (const auto& t : csv.text_rows.at(r)) fields.push_back(csv_field(t));
    for (const double v : csv.rows[r]) fields.push_back(std::isfinite(v) ? fmt::format("{:.9g}", v) : "");
    text += fmt::format("{}\n", fmt::join(fields, ","));
  }
  harness::write_file_atomically(path, text);
}

std::string gnuplot_quote(const std::string& text) {
  std::string out = "'";
  for (char c : text) out += c == '\'' ? std::string("''") : std::string(1, c);
  return out + "'";
}

bool gnuplot_available() {
  const std::string program = gnuplot_program();
  if (program.find('/') != std::string::npos) return access(program.c_str(), X_OK) == 0;
  const char* path = std::getenv("PATH");
  std::string dirs = path ? path : "/usr/bin:/bin";
  size_t start = 0;
  while (start <= dirs.size()) {
    const size_t end = dirs.find(':', start);
    const std::string d = dirs.substr(start, end == std::string::npos ? std::string::npos : end - start);
    if (!d.empty() && access((fs::path(d) / program).c_str(), X_OK) == 0) return true;
    if (end == std::string::npos) break;
    start = end + 1;
  }
  return false;
}

RenderResult render_gnuplot(const std::string& dir, const std::string& stem,
                            const std::string& body) {
  RenderResult r;
  r.script = (fs::path(dir) / (stem + ".gp")).string();
  const std::string svg = stem + ".svg", png = stem + ".png";
  // One script, two terminals: the body runs once per terminal (not `replot`, which cannot
  // redraw a multiplot of small panels).
  const std::string script = fmt::format(
      "# {0}: drawn from the CSV beside it; run `gnuplot {0}.gp` in this folder to redraw.\n"
      "set datafile separator ','\n"
      "do for [format in 'svg png'] {{\n"
      "if (format eq 'svg') {{\n"
      "  set terminal svg size 900,560 dynamic font 'Sans,12'\n"
      "  set output {1}\n"
      "}} else {{\n"
      "  set terminal pngcairo size 900,560 font 'Sans,10'\n"
      "  set output {3}\n"
      "}}\n"
      "reset\n"
      "set datafile separator ','\n"
      "set key outside right top\n"
      "set grid\n"
      "{2}\n"
      "unset multiplot\n"
      "unset output\n"
      "}}\n",
      stem, gnuplot_quote(svg), body, gnuplot_quote(png));
  harness::write_file_atomically(r.script, script);
  if (!gnuplot_available()) {
    r.notice = fmt::format("gnuplot not found ({}): wrote the CSV and {}; install gnuplot-nox to "
                           "render it", gnuplot_program(), r.script);
    return r;
  }
  const std::string log = stem + ".gp.log";
  const int status = run_in(dir, gnuplot_program(), stem + ".gp", log);
  const fs::path log_path = fs::path(dir) / log;
  if (status != 0) {
    std::ifstream in(log_path);
    std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    r.notice = fmt::format("gnuplot failed on {} (exit {}): {}", r.script, status, text);
    r.failed = true;
    return r;
  }
  std::error_code ec;
  if (fs::file_size(log_path, ec) == 0) fs::remove(log_path, ec);
  // gnuplot does not check its writes: a full disk leaves a cut-off image and exit status 0.
  for (const auto& f : {svg, png}) {
    const std::string image = (fs::path(dir) / f).string();
    if (!image_is_whole(image)) {
      r.notice = fmt::format("gnuplot left {} incomplete ({} bytes; a full disk?)", image, fs::file_size(image, ec));
      r.failed = true;
      r.images.clear();
      for (const auto& g : {svg, png}) fs::remove(fs::path(dir) / g, ec);
      return r;
    }
    r.images.push_back(image);
  }
  return r;
}

}  // namespace analysis
