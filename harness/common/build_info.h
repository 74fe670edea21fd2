// Provenance recorded with every run.
#pragma once

#include <string>

namespace harness {

std::string git_revision();      // of the source tree this binary was built from (fixed at build
                                 // time, "-dirty" for uncommitted changes); "unknown" outside git
std::string libtorch_version();  // "1.13.1"
// The BLAS's own description when it is OpenBLAS ("OpenBLAS 0.3.21 ... SkylakeX ..."): its kernels
// set the rounding of every matmul. "unknown" for other BLAS libraries.
std::string blas_config();

}  // namespace harness
