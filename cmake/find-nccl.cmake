# NCCL's header for c10d's ProcessGroupNCCL.hpp, which harness/distributed/process_group.cpp
# includes when LibTorch was built with USE_C10D_NCCL. Included by find-torch.cmake after
# find_package(Torch).
#
# A pip torch loads libnccl.so.2 from the pip package nvidia-nccl-cu<major> (libtorch_cuda.so's
# RPATH: site-packages/nvidia/nccl/lib); a CUDA toolkit has no nccl.h of its own unless NCCL was
# installed into it (this CI machine's was; the lent GPU machine's toolkit need not be). So the
# header is looked for first beside the library torch loads, in the pip package
# (site-packages/nvidia/nccl/include, or nvidia/cu<major>/include, CUDA 13's merged layout), then
# in the toolkit and the system's default paths. The folder found goes on the torch target ahead
# of the toolkit's include folder, so that folder's nccl.h is the one compiled against.
#
# HARNESS_NCCL_SEARCH_TOOLKIT=OFF leaves the toolkit and the default paths out (the CTest
# find_nccl_pip_layout configures so, with the toolkit's copy present, to prove the pip layout is
# found on its own). HARNESS_NCCL_INCLUDE_DIR names the folder outright.

option(HARNESS_NCCL_SEARCH_TOOLKIT "Look for nccl.h in the CUDA toolkit and default paths too" ON)

set(_harness_torch_definitions "")
if(TARGET torch_cuda)  # the definition comes with the torch target, from its torch_cuda
  get_target_property(_harness_torch_definitions torch_cuda INTERFACE_COMPILE_DEFINITIONS)
endif()
if("${_harness_torch_definitions}" MATCHES "USE_C10D_NCCL")
  get_filename_component(_harness_site_packages "${TORCH_INSTALL_PREFIX}/.." ABSOLUTE)
  set(_harness_nccl_pip_dirs "${_harness_site_packages}/nvidia/nccl/include")
  if(CUDA_VERSION MATCHES "^([0-9]+)")  # torch's config sets CUDA_VERSION (13.0)
    list(APPEND _harness_nccl_pip_dirs "${_harness_site_packages}/nvidia/cu${CMAKE_MATCH_1}/include")
  endif()
  find_path(HARNESS_NCCL_INCLUDE_DIR nccl.h PATHS ${_harness_nccl_pip_dirs} NO_DEFAULT_PATH
            DOC "folder of the nccl.h that c10d's ProcessGroupNCCL.hpp is compiled against")
  if(NOT HARNESS_NCCL_INCLUDE_DIR AND HARNESS_NCCL_SEARCH_TOOLKIT)
    find_package(CUDAToolkit QUIET)
    find_path(HARNESS_NCCL_INCLUDE_DIR nccl.h HINTS ${CUDAToolkit_INCLUDE_DIRS})
  endif()
  if(NOT HARNESS_NCCL_INCLUDE_DIR)
    set(_harness_nccl_also "")
    if(HARNESS_NCCL_SEARCH_TOOLKIT)
      set(_harness_nccl_also ", the CUDA toolkit and the default paths")
    endif()
    message(FATAL_ERROR
      "nccl.h not found, which LibTorch's c10d NCCL headers need (torch ${Torch_VERSION} has "
      "USE_C10D_NCCL). Looked in: ${_harness_nccl_pip_dirs}${_harness_nccl_also}. "
      "Install the pip package torch depends on (nvidia-nccl-cu13 for a CUDA 13 torch), or NCCL "
      "into the toolkit, or pass -DHARNESS_NCCL_INCLUDE_DIR=<folder of nccl.h>.")
  endif()
  # Imported targets' include folders are system folders (-isystem), searched in this order.
  set_property(TARGET torch APPEND PROPERTY INTERFACE_INCLUDE_DIRECTORIES "${HARNESS_NCCL_INCLUDE_DIR}")
  message(STATUS "harness: nccl.h from ${HARNESS_NCCL_INCLUDE_DIR}")
endif()
