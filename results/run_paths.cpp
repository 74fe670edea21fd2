#include "results/run_paths.h"

#include <filesystem>

namespace results {

RunPaths::RunPaths(const std::string& d) {
  const std::filesystem::path p(d);
  dir = d;
  results = (p / "run.h5").string();
  log = (p / "train.log").string();
  config = (p / "config.yaml").string();
}

}  // namespace results
