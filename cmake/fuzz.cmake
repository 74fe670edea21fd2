# HARNESS_FUZZ (default OFF): the libFuzzer build of the readers (docs/fuzzing.md, `make fuzz`).
# Included from the top-level CMakeLists.txt after project() and before any target is made, so that
# every target of the project (and the torch PCH they reuse) is compiled with the same flags:
# coverage-instrumented for libFuzzer (fuzzer-no-link), AddressSanitizer and UBSan (UB aborts).
# The fuzz executables (tests/fuzz/) link libFuzzer's driver and the sanitizers' runtimes.
# Included only when HARNESS_FUZZ is ON: the normal (GCC) build is unchanged.

if(NOT CMAKE_CXX_COMPILER_ID MATCHES "Clang" OR NOT CMAKE_C_COMPILER_ID MATCHES "Clang")
  message(FATAL_ERROR "HARNESS_FUZZ needs clang (libFuzzer): configure a fresh folder with "
                      "-DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++ (make fuzz does)")
endif()
if(HARNESS_HAVE_CUDA)
  message(FATAL_ERROR "HARNESS_FUZZ: the fuzz build has no CUDA kernels (HARNESS_CUDA is forced OFF "
                      "before the CUDA check; reconfigure a fresh folder)")
endif()

set(HARNESS_FUZZ_SANITIZERS "address,undefined")
add_compile_options(-fsanitize=fuzzer-no-link,${HARNESS_FUZZ_SANITIZERS}
                    -fno-sanitize-recover=undefined -fno-omit-frame-pointer)
# Everything linked in this build (the harness_sentencepiece module, any executable) gets the
# sanitizer runtimes; the fuzz executables add libFuzzer's driver (-fsanitize=fuzzer).
add_link_options(-fsanitize=${HARNESS_FUZZ_SANITIZERS})

# No OpenMP: clang's (libomp) is not the runtime LibTorch ships (libgomp); the parallel loops of
# the theory and attention code run single-threaded here (a warning per target says so).
set(CMAKE_DISABLE_FIND_PACKAGE_OpenMP ON)

# The test suite and the benchmarks are the normal build's; the fuzz build makes tests/fuzz/ only.
set(HARNESS_TESTS OFF)
set(HARNESS_BENCH OFF)
message(STATUS "harness: fuzz build (libFuzzer, -fsanitize=${HARNESS_FUZZ_SANITIZERS}), CUDA off, tests and benchmarks off")
