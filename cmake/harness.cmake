# Shared build helpers.

# One precompiled <torch/torch.h>, reused by every target that includes torch: one torch TU costs
# ~15 s and ~1 GB to compile, the PCH pays that once.
add_library(torch_pch STATIC ${CMAKE_CURRENT_LIST_DIR}/torch_pch.cpp)
target_link_libraries(torch_pch PUBLIC torch)
target_precompile_headers(torch_pch PRIVATE <torch/torch.h>)

function(harness_use_torch_pch target)
  target_precompile_headers(${target} REUSE_FROM torch_pch)
endfunction()

function(harness_warnings target)
  target_compile_options(${target} PRIVATE $<$<COMPILE_LANGUAGE:CXX>:-Wall -Wextra -Wno-unused-parameter -Wno-psabi>)
endfunction()

# A stage library: every .cpp below the folder except cuda/ and spm_module/ (built on their own)
# and the files named after EXCLUDE (relative to the folder); public include root = repository root.
function(harness_stage_library name dir)
  cmake_parse_arguments(arg "" "" "EXCLUDE" ${ARGN})
  file(GLOB_RECURSE sources CONFIGURE_DEPENDS ${dir}/*.cpp)
  list(FILTER sources EXCLUDE REGEX "/(cuda|spm_module)/")
  foreach(file IN LISTS arg_EXCLUDE)
    list(REMOVE_ITEM sources ${dir}/${file})
  endforeach()
  add_library(${name} STATIC ${sources})
  target_include_directories(${name} PUBLIC ${PROJECT_SOURCE_DIR})
  harness_use_torch_pch(${name})
  harness_warnings(${name})
endfunction()
