# Shared-memory transport tests. They fork real processes, hence label multiproc; `ctest -R Shm` selects them.
if(TARGET conflux_shm)
  conflux_add_test(test_shm
    SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_shm_world.cc
            ${CMAKE_CURRENT_LIST_DIR}/test_shm_channel.cc
            ${CMAKE_CURRENT_LIST_DIR}/test_shm_sync.cc
            ${CMAKE_CURRENT_LIST_DIR}/test_cross_memory.cc
            ${CMAKE_CURRENT_LIST_DIR}/test_core_distance.cc
    LIBS conflux_shm conflux_test_common
    LABELS multiproc
    TIMEOUT 60)
endif()
