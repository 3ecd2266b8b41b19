# Smoke tests of the microbenchmarks and the plot script (label: unit). Included from perf/micro.
# Each benchmark binary runs a few cases with a tiny --benchmark_min_time; a case that reports an error
# fails the test. The timings are not checked: benchmarks are not tests.

find_program(CONFLUX_SYSTEM_PYTHON NAMES python3 PATHS /usr/bin NO_DEFAULT_PATH)
if(CONFLUX_SYSTEM_PYTHON)
  # Exit code 77 (matplotlib missing) marks the test skipped.
  add_test(NAME PerfMicro.PlotSelfTest
    COMMAND ${CONFLUX_SYSTEM_PYTHON} ${PROJECT_SOURCE_DIR}/perf/plot.py --selftest)
  set_tests_properties(PerfMicro.PlotSelfTest PROPERTIES LABELS unit TIMEOUT 60 SKIP_RETURN_CODE 77)
endif()

function(conflux_add_bench_smoke_tests)
  set(cases
    "bench_reduce|^(reduce/[a-z0-9]+/float32/sum/nsrc:2/64KiB|copy/.*/64KiB)$"
    "bench_shm|^(shm/(stream/64KiB|pingpong/8B|barrier/ranks:2)/spin:2000|sched/handoff/processes:2)"
    "bench_plan|^(plan/build/allreduce/ring/ranks:8/.*|exec/ranks:1/copy_rounds:16|exec/ranks:2/sendrecv_rounds:1|api/ranks:1/allreduce/count:1|api/ranks:2/allreduce/count:1)(/real_time)?$")
  foreach(c ${cases})
    string(FIND "${c}" "|" bar)
    string(SUBSTRING "${c}" 0 ${bar} bin)
    math(EXPR start "${bar} + 1")
    string(SUBSTRING "${c}" ${start} -1 filter)
    add_test(NAME PerfMicro.Smoke.${bin}
      COMMAND $<TARGET_FILE:${bin}> --benchmark_min_time=0.01 "--benchmark_filter=${filter}")
    set_tests_properties(PerfMicro.Smoke.${bin} PROPERTIES LABELS unit TIMEOUT 60
      FAIL_REGULAR_EXPRESSION "ERROR OCCURRED;Failed to match any benchmarks")
  endforeach()
endfunction()
