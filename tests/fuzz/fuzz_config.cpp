// libFuzzer target: the input is YAML text, loaded as a run config
// (config::load_run_config_text) and as a sweep (sweeps::load_sweep_text), both every time.
//
// Expected: the load succeeds, or throws harness::InputError whose message starts with the place
// (file:line:column, or the file) — the only error type these loaders document. A finding is any
// crash or sanitizer report, any other exception type escaping, an InputError that does not name
// its file (raw yaml-cpp/std text reaching the user), or a hang (-timeout).
//
// The sweep's source is tests/data/sweeps/fuzz-input.yaml, so a relative `base:` finds the test
// fixtures there (base.yaml, bad_base.yaml); nothing is written anywhere. docs/fuzzing.md.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <string>
#include <typeinfo>

#include "common/errors.h"
#include "harness/config/schema.h"
#include "sweeps/sweep_file.h"

namespace {

const std::string kSourceDir = HARNESS_SOURCE_DIR "/tests/data/sweeps";
const std::string kSource = kSourceDir + "/fuzz-input.yaml";

[[noreturn]] void finding(const char* loader, const std::string& what) {
  std::fprintf(stderr, "fuzz_config: %s: %s\n", loader, what.c_str());
  std::abort();
}

// An InputError must say where: the sweep/config file, or (for `base:`) the base file's path,
// which is absolute or below the sweep's folder.
void check_message(const char* loader, const std::string& message) {
  if (message.rfind(kSourceDir, 0) == 0) return;
  if (!message.empty() && message[0] == '/') return;  // an absolute `base:` path
  finding(loader, "an InputError that does not name its file: " + message);
}

template <class F>
void load(const char* loader, F&& f) {
  try {
    f();
  } catch (const harness::InputError& e) {
    check_message(loader, e.what());
  } catch (const std::exception& e) {
    finding(loader, std::string("uncaught ") + typeid(e).name() + ": " + e.what());
  } catch (...) {
    finding(loader, "uncaught exception of a non-std type");
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  load("load_run_config_text", [&] { harness::config::load_run_config_text(text, kSource, "fuzz-input"); });
  load("load_sweep_text", [&] { harness::sweeps::load_sweep_text(text, kSource); });
  return 0;
}
