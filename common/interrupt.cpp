#include "common/interrupt.h"

#include <atomic>
#include <csignal>

namespace harness {

namespace {
std::atomic<int> g_signal{0};
extern "C" void on_signal(int sig) { g_signal.store(sig); }
}  // namespace

void install_interrupt_handlers() {
  struct sigaction action {};
  action.sa_handler = on_signal;
  sigemptyset(&action.sa_mask);
  sigaction(SIGINT, &action, nullptr);
  sigaction(SIGTERM, &action, nullptr);
}

bool interrupt_requested() { return g_signal.load() != 0; }
int interrupt_signal() { return g_signal.load(); }

}  // namespace harness
