// Process-wide settings for training processes, applied at the top of main().
#pragma once

namespace harness {

// OpenMP threads that spin while waiting make multi-threaded runs 6-8x slower whenever the cores
// are shared (parallel sweep jobs, a busy laptop): 11.8 s vs 1.9 s for the same 3 steps at load
// 10 on 2 cores. libgomp reads OMP_WAIT_POLICY when it loads, before main(), so this sets it to
// PASSIVE and re-executes the program once (execv /proc/self/exe). A value the user set is left
// alone. Returns when nothing needs to change (or exec failed: then it runs as it is).
void prefer_passive_openmp_waits(char** argv);

// A training step allocates and frees the same few-MiB activations every step. glibc's defaults
// hand them back to the kernel (munmap, heap trimming) and fault them in again: 18% of a step in
// the kernel at L = 64 (perf), against 2% for the same step from Python, whose heap stays larger.
// This keeps blocks up to 32 MiB in the heap and trims it only past 1 GiB free. Peak RSS is
// unchanged (the working set is the same; bench/train_vs_peer.sh).
void keep_freed_memory_for_reuse();

}  // namespace harness
