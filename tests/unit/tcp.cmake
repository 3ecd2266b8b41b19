# The tcp network transport in one process (threads as ranks on 127.0.0.1). `ctest -R Tcp`.
conflux_add_test(test_tcp
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_tcp_network.cc
  LIBS conflux_networks
  LABELS unit
  TIMEOUT 60)
