conflux_add_test(test_core
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_config.cc
  LIBS conflux_core
  LABELS unit)

conflux_add_test(test_cpu_budget
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_cpu_budget.cc
  LIBS conflux_core
  LABELS unit)

conflux_add_test(test_copy_bytes
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_copy_bytes.cc
  LIBS conflux_core
  LABELS unit)
