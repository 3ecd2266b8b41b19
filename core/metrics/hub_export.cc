// The symbol through which other copies of Conflux in the process find this copy's metrics service
// (core/metrics/process_hub.h). Compiled into each shared object itself, not taken from the static
// core library: the shared objects link their static libraries with --exclude-libs, which would hide it.
#include "core/metrics/process_hub.h"

extern "C" __attribute__((visibility("default"))) const cfx_metrics_hub_v1* conflux_metrics_hub_v1() {
#if CONFLUX_HAVE_METRICS
  return conflux::metrics::hub::local();
#else
  return nullptr;  // a copy without metrics must not become the owner: it would serve nothing
#endif
}
