# Compiler flags shared by every Conflux target, through the interface target conflux_flags.
add_library(conflux_flags INTERFACE)
target_compile_options(conflux_flags INTERFACE
  $<$<COMPILE_LANGUAGE:CXX,C>:-Wall -Wextra -Wpedantic -Wshadow -Wno-missing-field-initializers>
  $<$<COMPILE_LANGUAGE:CXX>:-Wnon-virtual-dtor>)
if(CONFLUX_WARNINGS_AS_ERRORS)
  target_compile_options(conflux_flags INTERFACE $<$<COMPILE_LANGUAGE:CXX,C>:-Werror>)
endif()
if(CONFLUX_SANITIZE)
  target_compile_options(conflux_flags INTERFACE -fsanitize=${CONFLUX_SANITIZE} -fno-omit-frame-pointer
                         -fno-sanitize-recover=all)
  target_link_options(conflux_flags INTERFACE -fsanitize=${CONFLUX_SANITIZE})
endif()
# libFuzzer (preset `fuzz`, clang only): every library gets the fuzzer's coverage instrumentation; the
# targets in tests/fuzz link libFuzzer's main.
option(CONFLUX_FUZZ "Build the libFuzzer targets of tests/fuzz (clang)" OFF)
if(CONFLUX_FUZZ)
  if(NOT CMAKE_CXX_COMPILER_ID MATCHES "Clang")
    message(FATAL_ERROR "CONFLUX_FUZZ needs clang (libFuzzer); this build uses ${CMAKE_CXX_COMPILER_ID}: "
                        "use the preset `fuzz` or -DCMAKE_CXX_COMPILER=clang++")
  endif()
  target_compile_options(conflux_flags INTERFACE -fsanitize=fuzzer-no-link)
endif()
