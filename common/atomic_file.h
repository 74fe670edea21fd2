// The one way a text file is written: to a per-process temporary file beside it, fsynced, then
// renamed over it (and the folder fsynced), so readers see the old file or the new one, never a
// part, and a full disk or an I/O error leaves the old file and no temporary behind.
#pragma once

#include <string>

namespace harness {

// Creates the parent folder if needed. Throws std::runtime_error "cannot write <path>: <cause>"
// (the cause as strerror says it: "No space left on device", "Disk quota exceeded", ...).
void write_file_atomically(const std::string& path, const std::string& text);

}  // namespace harness
