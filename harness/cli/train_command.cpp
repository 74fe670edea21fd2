#include "harness/cli/commands.h"
#include "harness/util/errors.h"

namespace harness::cli {

int train_command(const Args&) { throw InputError("train: not wired yet"); }

}  // namespace harness::cli
