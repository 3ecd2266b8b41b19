# libfabric transport tests (tcp;ofi_rxm on 127.0.0.1; threads and forked processes, hence label multiproc).
# `ctest -R Ofi` selects them.
if(TARGET conflux_ofi)
  conflux_add_test(test_ofi
    SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_ofi_units.cc
            ${CMAKE_CURRENT_LIST_DIR}/test_ofi_transport.cc
            ${CMAKE_CURRENT_LIST_DIR}/test_ofi_rma.cc
            ${CMAKE_CURRENT_LIST_DIR}/test_ofi_failures.cc
            ${CMAKE_CURRENT_LIST_DIR}/test_ofi_comm_net.cc
    LIBS conflux_ofi conflux_test_common
    LABELS multiproc
    TIMEOUT 120)
endif()
