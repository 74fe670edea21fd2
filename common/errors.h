// Error types shared by every stage, and the process exit codes they map to.
#pragma once

#include <stdexcept>
#include <string>

namespace harness {

enum ExitCode : int {
  kExitOk = 0,
  kExitFailure = 1,    // a run failed (NaN loss, I/O error, ...)
  kExitBadInput = 2,   // bad command line or config: nothing was started or written
  kExitPortInUse = 75, // data parallel: rank 0 could not listen on MASTER_PORT (taken); nothing
                       // was written, so a launcher may start the ranks again on another port
  kExitInterrupted = 130,
};

// Bad user input (config, sweep file, command line). The message is complete and user-facing:
// it names the file, line, column, key and what was expected.
class InputError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Rank 0 of a data-parallel run could not host the rendezvous store: MASTER_PORT is taken.
class PortInUse : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

}  // namespace harness
