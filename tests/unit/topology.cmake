# Topology model, topology files, discovery, NIC assignment on fixtures, transport selection.
# `ctest -R Topo` selects them.
if(TARGET conflux_topology)
  conflux_add_test(test_topology
    SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_topology_model.cc
            ${CMAKE_CURRENT_LIST_DIR}/test_topology_json.cc
            ${CMAKE_CURRENT_LIST_DIR}/test_topology_assignment.cc
            ${CMAKE_CURRENT_LIST_DIR}/test_topology_discovery.cc
    LIBS conflux_topology
    LABELS unit
    TIMEOUT 60)
  target_compile_definitions(test_topology PRIVATE
    CONFLUX_TOPO_FIXTURES="${PROJECT_SOURCE_DIR}/tests/fixtures/topology")
endif()
