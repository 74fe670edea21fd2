# torch 2.x ships fmt 12 in its include folder, which the torch target puts on every include path
# it reaches; spdlog and our code build against the system's fmt (libfmt.so, another version), and
# one program must see one fmt. A folder holding only a link to the system's fmt headers goes
# before every other include folder (LibTorch's own headers then see that fmt too).
get_target_property(_fmt_includes fmt::fmt INTERFACE_INCLUDE_DIRECTORIES)
foreach(dir IN LISTS _fmt_includes)
  if(EXISTS "${dir}/fmt/format.h")
    set(_fmt_first "${CMAKE_BINARY_DIR}/fmt-first")
    file(MAKE_DIRECTORY "${_fmt_first}")
    file(CREATE_LINK "${dir}/fmt" "${_fmt_first}/fmt" SYMBOLIC)
    include_directories(BEFORE SYSTEM "${_fmt_first}")
    break()
  endif()
endforeach()
