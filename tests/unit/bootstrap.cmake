# Bootstrap unit tests: crypto and unique ids, the rendezvous store, bootstrap collectives, launcher
# environments and host identity. Suites are named Bootstrap* so `ctest -R Bootstrap` selects them.
conflux_add_test(test_bootstrap
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_bootstrap_crypto.cc
          ${CMAKE_CURRENT_LIST_DIR}/test_bootstrap_store.cc
          ${CMAKE_CURRENT_LIST_DIR}/test_bootstrap_collectives.cc
          ${CMAKE_CURRENT_LIST_DIR}/test_bootstrap_env.cc
  LIBS conflux_core
  LABELS unit
  TIMEOUT 60)
