# Plans, the algorithm registry and the plan simulator (labels: unit).
conflux_add_test(test_plan
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_plan.cc
  LIBS conflux_algorithms
  LABELS unit)
conflux_add_test(test_simulator
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_simulator_negative.cc
  LIBS conflux_simulator
  LABELS unit)
conflux_add_test(test_simulator_sweep
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_simulator_sweep.cc
  LIBS conflux_simulator
  LABELS unit)
target_compile_options(test_simulator_sweep PRIVATE -O2)
conflux_add_test(test_simulator_hier
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_simulator_hier.cc
  LIBS conflux_simulator
  LABELS unit)
target_compile_options(test_simulator_hier PRIVATE -O2)
conflux_add_test(test_simulator_radix
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_simulator_radix.cc
  LIBS conflux_simulator
  LABELS unit)
target_compile_options(test_simulator_radix PRIVATE -O2)
conflux_add_test(test_cost_model
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_cost_model.cc
  LIBS conflux_algorithms
  LABELS unit)
# The executor in one process, threads as ranks (executor_cluster.h): over the fake message transport
# (fake_transport.h), and over the fake local group (fake_local_group.h) within and across nodes.
# Which receive buffers the communicator treats as still in cache (src/recent_buffers.h).
conflux_add_test(test_recent_buffers
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_recent_buffers.cc
  LIBS conflux_runtime
  LABELS unit)
# The flight recorder's ring and dump (src/flight_recorder.h), and conflux-trace's analysis of dumps.
if(TARGET conflux_trace_analysis)
  conflux_add_test(test_flight_recorder
    SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_flight_recorder.cc
    LIBS conflux_runtime conflux_trace_analysis
    LABELS unit)
endif()
# A communicator's metrics (src/comm_metrics.h) and their exposition (core/metrics).
conflux_add_test(test_comm_metrics
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_comm_metrics.cc
  LIBS conflux_runtime
  LABELS unit)
conflux_add_test(test_backoff
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_backoff.cc
  LIBS conflux_runtime
  LABELS unit)
conflux_add_test(test_eager
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_eager.cc
  LIBS conflux_runtime
  LABELS unit)
conflux_add_test(test_executor_fake
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_executor_fake.cc
  LIBS conflux_runtime
  LABELS unit
  TIMEOUT 300)
conflux_add_test(test_executor_local_group
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_executor_local_group.cc
  LIBS conflux_runtime
  LABELS unit
  TIMEOUT 300)
# The dataflow graph of a plan (op_graph.cc): what each operation waits for.
conflux_add_test(test_op_graph
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_op_graph.cc
  LIBS conflux_algorithms
  LABELS unit)
# The lock-step clock of a group's plans (round_alignment.cc) and the hierarchical segments it lets overlap.
conflux_add_test(test_round_alignment
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_round_alignment.cc
  LIBS conflux_algorithms
  LABELS unit)
