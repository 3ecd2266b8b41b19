conflux_add_test(test_core
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_config.cc
  LIBS conflux_core
  LABELS unit)
