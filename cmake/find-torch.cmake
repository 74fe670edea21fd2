# Finds LibTorch: unless Torch_DIR is given, that of HARNESS_PYTHON's torch, by default the pip
# torch of the project's virtual environment, .venv/ (scripts/install-python.sh makes it), so that
# `cmake -S . -B build` needs no flag. Included from the top-level CMakeLists.txt after project().

set(HARNESS_PYTHON "${PROJECT_SOURCE_DIR}/.venv/bin/python" CACHE FILEPATH
    "Python whose torch provides LibTorch when Torch_DIR is not set")
if(NOT Torch_DIR AND EXISTS "${HARNESS_PYTHON}")
  execute_process(COMMAND "${HARNESS_PYTHON}" -c "import torch.utils; print(torch.utils.cmake_prefix_path)"
                  OUTPUT_VARIABLE _torch_prefix OUTPUT_STRIP_TRAILING_WHITESPACE
                  RESULT_VARIABLE _torch_status ERROR_QUIET)
  if(_torch_status EQUAL 0 AND IS_DIRECTORY "${_torch_prefix}/Torch")
    set(Torch_DIR "${_torch_prefix}/Torch" CACHE PATH "LibTorch's CMake config folder" FORCE)
  endif()
endif()

# torch's CMake config, when it has CUDA, replaces CMAKE_CUDA_ARCHITECTURES by OFF and appends
# its own -gencode list (every architecture of its wheel, sm_50 among them, which nvcc 13 refuses)
# to CMAKE_CUDA_FLAGS. Our kernels include no torch header: they keep our architectures and flags.
# TORCH_CUDA_ARCH_LIST, in torch's form (8.0;9.0), only silences its GPU probe.
set(_harness_cuda_architectures "${CMAKE_CUDA_ARCHITECTURES}")
set(_harness_cuda_flags "${CMAKE_CUDA_FLAGS}")
if(HARNESS_HAVE_CUDA AND NOT DEFINED TORCH_CUDA_ARCH_LIST)
  set(TORCH_CUDA_ARCH_LIST "")
  foreach(arch IN LISTS CMAKE_CUDA_ARCHITECTURES)
    string(REGEX REPLACE "^([0-9]+)([0-9])[a-z]?(-real|-virtual)?$" "\\1.\\2" arch "${arch}")
    list(APPEND TORCH_CUDA_ARCH_LIST "${arch}")
  endforeach()
endif()
if(HARNESS_HAVE_CUDA)
  # CUDA LibTorch configs before torch 2.8 want NVTX: as CUDA::nvToolsExt, which CUDA 13 no longer
  # ships (NVTX 3 is header-only: CUDA::nvtx3), or as CUDA's nvtx3 headers with USE_SYSTEM_NVTX.
  # Later ones need neither; a CPU LibTorch ignores both.
  find_package(CUDAToolkit QUIET)
  if(TARGET CUDA::nvtx3 AND NOT TARGET CUDA::nvToolsExt)
    add_library(CUDA::nvToolsExt INTERFACE IMPORTED)
    target_link_libraries(CUDA::nvToolsExt INTERFACE CUDA::nvtx3)
    target_compile_definitions(CUDA::nvToolsExt INTERFACE TORCH_CUDA_USE_NVTX3)
  endif()
  if(NOT DEFINED USE_SYSTEM_NVTX)
    set(USE_SYSTEM_NVTX ON)
  endif()
endif()
unset(CMAKE_CUDA_ARCHITECTURES)  # else torch's config warns that it ignores it
find_package(Torch REQUIRED)
set(CMAKE_CUDA_ARCHITECTURES "${_harness_cuda_architectures}")
set(CMAKE_CUDA_FLAGS "${_harness_cuda_flags}")
message(STATUS "harness: LibTorch ${Torch_VERSION} at ${Torch_DIR}")

# The folder of LibTorch's own libraries (libtorch_cpu.so, and the libgomp.so.1 a pip wheel ships).
get_filename_component(HARNESS_TORCH_LIB_DIR "${TORCH_LIBRARY}" DIRECTORY)

# A pip torch's libraries export parts of the C++ standard library that they link statically
# (the newer parts of their GCC's libstdc++: std::filesystem, std::chrono::tzdb, string streams).
# The system's libstdc++ comes last in a binary's list of libraries, so those copies were found
# first, for our code too, and crashed (std::filesystem::remove_all jumped to address 0). Listed
# first, the system's libstdc++ wins for every symbol it has.
add_link_options("LINKER:--push-state,--no-as-needed,-lstdc++,--pop-state")

# nccl.h for c10d's NCCL headers: the pip package torch loads NCCL from, else the toolkit's.
include(${CMAKE_CURRENT_LIST_DIR}/find-nccl.cmake)
