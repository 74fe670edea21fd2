# Shared build helpers.

# One precompiled <torch/torch.h>, reused by every target that includes torch: one torch TU costs
# ~15 s and ~1 GB to compile, the PCH pays that once.
add_library(torch_pch STATIC ${CMAKE_CURRENT_LIST_DIR}/torch_pch.cpp)
target_link_libraries(torch_pch PUBLIC torch)
target_precompile_headers(torch_pch PRIVATE <torch/torch.h>)

# Whether `file` needs LibTorch: it, or a project header it includes (transitively), includes
# <torch/…>, <ATen/…> or <c10/…>. Remembered per file for the whole configure.
function(harness_needs_torch file out)
  get_property(known GLOBAL PROPERTY "harness_needs_torch:${file}" SET)
  if(NOT known)
    set_property(GLOBAL PROPERTY "harness_needs_torch:${file}" FALSE)  # while visiting (cycles)
    file(STRINGS "${file}" includes REGEX "^[ \t]*#[ \t]*include[ \t]*[<\"]")
    get_filename_component(dir "${file}" DIRECTORY)
    set(needs FALSE)
    foreach(line IN LISTS includes)
      if(line MATCHES "<(torch|ATen|c10)/")
        set(needs TRUE)
      elseif(line MATCHES "\"([^\"]+)\"")
        foreach(base IN ITEMS ${dir} ${PROJECT_SOURCE_DIR})
          if(EXISTS ${base}/${CMAKE_MATCH_1})
            get_filename_component(header ${base}/${CMAKE_MATCH_1} ABSOLUTE)
            harness_needs_torch(${header} needs)
            break()
          endif()
        endforeach()
      endif()
      if(needs)
        break()
      endif()
    endforeach()
    set_property(GLOBAL PROPERTY "harness_needs_torch:${file}" ${needs})
  endif()
  get_property(needs GLOBAL PROPERTY "harness_needs_torch:${file}")
  set(${out} ${needs} PARENT_SCOPE)
endfunction()

# The torch PCH for the target's sources that need LibTorch. The others skip it: loading the
# 570 MB PCH costs ~9.5 s per translation unit (GCC 12, measured on an empty file), more than
# a file without torch takes to compile (a third of the TUs).
# Call it from the directory that creates the target (source properties are per directory).
function(harness_use_torch_pch target)
  target_precompile_headers(${target} REUSE_FROM torch_pch)
  get_target_property(sources ${target} SOURCES)
  foreach(source IN LISTS sources)
    if(source MATCHES "\\.cpp$")
      get_filename_component(path ${source} ABSOLUTE)
      harness_needs_torch(${path} needs)
      if(NOT needs)
        set_source_files_properties(${source} PROPERTIES SKIP_PRECOMPILE_HEADERS ON)
      endif()
    endif()
  endforeach()
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

# LibTorch's at::parallel_for is header-only for its OpenMP backend: in a TU built without -fopenmp
# it silently runs serially. SOURCES get the flag (and skip the shared PCH, built without it) plus
# OPTIONS; the target links the OpenMP runtime LibTorch uses. A pip torch ships its own
# libgomp.so.1 (the soname of GCC's, so loaded once): link that one, so that no second copy is
# named in the RPATH. Call it from the directory that creates the target.
find_package(OpenMP COMPONENTS CXX)
function(harness_openmp_sources target)
  cmake_parse_arguments(arg "" "" "SOURCES;OPTIONS" ${ARGN})
  if(NOT OpenMP_CXX_FOUND)
    message(WARNING "${target}: no OpenMP; its parallel loops will run single-threaded")
    return()
  endif()
  set_source_files_properties(${arg_SOURCES} PROPERTIES
    COMPILE_OPTIONS "${OpenMP_CXX_FLAGS};${arg_OPTIONS}" SKIP_PRECOMPILE_HEADERS ON)
  if(EXISTS "${HARNESS_TORCH_LIB_DIR}/libgomp.so.1")
    target_link_libraries(${target} PRIVATE "${HARNESS_TORCH_LIB_DIR}/libgomp.so.1")
  else()
    target_link_libraries(${target} PRIVATE ${OpenMP_CXX_LIBRARIES})
  endif()
endfunction()
