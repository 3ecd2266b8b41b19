# Unit tests of the CPU reduce kernels (every ISA path this machine supports) and of the half types.
conflux_add_test(test_kernels
  SOURCES
    ${CMAKE_CURRENT_LIST_DIR}/test_reduce_kernels.cc
    ${CMAKE_CURRENT_LIST_DIR}/test_half_conversion.cc
    ${CMAKE_CURRENT_LIST_DIR}/test_kernel_semantics.cc
  LIBS conflux_kernels
  LABELS unit)
