// SIGINT/SIGTERM become a flag the training loop polls between steps, so a run checkpoints and
// exits cleanly instead of dying mid-write.
#pragma once

namespace harness {

void install_interrupt_handlers();
bool interrupt_requested();
int interrupt_signal();  // the signal received, 0 if none

}  // namespace harness
