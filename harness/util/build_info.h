// Provenance recorded with every run.
#pragma once

#include <string>

namespace harness {

std::string git_revision();      // of the source tree this binary was built from; "unknown"
std::string libtorch_version();  // "1.13.1"

}  // namespace harness
