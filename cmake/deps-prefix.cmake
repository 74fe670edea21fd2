# Dependencies unpacked from Debian packages into HARNESS_DEPS_PREFIX (a folder with usr/ inside,
# made by `scripts/gpu-build.sh`, which also fixes the .pc files' prefix) instead of installed in /:
# searched before the system's, and put into every binary's RPATH.
# Included from the top-level CMakeLists.txt, after project(), before the find_package calls.

set(_deps_usr "${HARNESS_DEPS_PREFIX}/usr")
if(NOT IS_DIRECTORY "${_deps_usr}/include")
  message(FATAL_ERROR "HARNESS_DEPS_PREFIX=${HARNESS_DEPS_PREFIX} has no usr/include: "
                      "unpack the dependencies first (scripts/gpu-build.sh --unpack-only ${HARNESS_DEPS_PREFIX})")
endif()
if(CMAKE_LIBRARY_ARCHITECTURE)
  set(_deps_libdir "${_deps_usr}/lib/${CMAKE_LIBRARY_ARCHITECTURE}")
else()
  set(_deps_libdir "${_deps_usr}/lib/x86_64-linux-gnu")  # the packages are Debian's amd64 ones
endif()

# Config packages (yaml-cpp, spdlog, fmt, Boost, GTest, benchmark) live in <libdir>/cmake, which
# find_package searches under each CMAKE_PREFIX_PATH entry; find_path (gloo/algorithm.h) searches
# its include/. Prepended: they win over any copy in /usr.
list(PREPEND CMAKE_PREFIX_PATH "${_deps_usr}")
# Debian's HDF5 has no CMake config: FindHDF5 searches HDF5_ROOT (and nothing else once it is set).
set(HDF5_ROOT "${_deps_libdir}/hdf5/serial")
# sentencepiece: pkg-config, with the .pc files' prefix rewritten at unpacking.
set(_deps_pc "${_deps_libdir}/pkgconfig:${_deps_usr}/share/pkgconfig")
if(DEFINED ENV{PKG_CONFIG_PATH} AND NOT "$ENV{PKG_CONFIG_PATH}" STREQUAL "")
  string(APPEND _deps_pc ":$ENV{PKG_CONFIG_PATH}")
endif()
set(ENV{PKG_CONFIG_PATH} "${_deps_pc}")
# pkg-config itself: the system's (from PATH, not from the prefix, whose pkgconf needs its library);
# else the prefix's wrapper that gives it that library (scripts/gpu-build.sh writes it).
if(NOT PKG_CONFIG_EXECUTABLE AND NOT DEFINED ENV{PKG_CONFIG})
  find_program(PKG_CONFIG_EXECUTABLE NAMES pkg-config pkgconf NO_CMAKE_PATH NO_CMAKE_ENVIRONMENT_PATH)
  if(NOT PKG_CONFIG_EXECUTABLE AND EXISTS "${HARNESS_DEPS_PREFIX}/bin/pkg-config")
    set(PKG_CONFIG_EXECUTABLE "${HARNESS_DEPS_PREFIX}/bin/pkg-config" CACHE FILEPATH "pkg-config" FORCE)
  endif()
endif()

# The packages' own dependencies (libhdf5's libsz, libcurl, ...) are found at run time through the
# binaries' RPATH: DT_RPATH rather than RUNPATH, since only DT_RPATH also serves the dependencies
# of dependencies. No LD_LIBRARY_PATH is needed to run build/harness or the tests.
list(APPEND CMAKE_BUILD_RPATH "${_deps_libdir}" "${_deps_libdir}/hdf5/serial")
add_link_options(LINKER:--disable-new-dtags)

message(STATUS "harness: dependencies from ${HARNESS_DEPS_PREFIX} (HDF5_ROOT ${HDF5_ROOT})")
