# find_package(iox) for C and C++ programs: the imported targets iox::iox (the shared
# library) and iox::iox_static, with the headers iox.h (C) and iox.hpp (C++17).
# Installed by scripts/install-c.sh as PREFIX/lib/cmake/iox/ioxConfig.cmake.
get_filename_component(_iox_prefix "${CMAKE_CURRENT_LIST_DIR}/../../.." ABSOLUTE)
if(NOT TARGET iox::iox)
  add_library(iox::iox SHARED IMPORTED)
  set_target_properties(iox::iox PROPERTIES
    IMPORTED_LOCATION "${_iox_prefix}/lib/libiox_ffi.so"
    INTERFACE_INCLUDE_DIRECTORIES "${_iox_prefix}/include/iox")
  add_library(iox::iox_static STATIC IMPORTED)
  set_target_properties(iox::iox_static PROPERTIES
    IMPORTED_LOCATION "${_iox_prefix}/lib/libiox_ffi.a"
    INTERFACE_INCLUDE_DIRECTORIES "${_iox_prefix}/include/iox"
    INTERFACE_LINK_LIBRARIES "pthread;dl;m;rt")
endif()
set(iox_FOUND TRUE)
unset(_iox_prefix)
