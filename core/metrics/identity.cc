// Who this process is, for the metrics' identity labels and its HTTP port.
#include "core/bootstrap/launcher_env.h"
#include "core/error.h"
#include "core/host_id.h"
#include "core/metrics/service.h"

namespace conflux::metrics {

Identity identityFromLauncher(int rank, int localRank) {
  // The launcher's view first: a first communicator that is a sub-communicator would otherwise give
  // the ranks of one node the same port.
  Identity who{rank, localRank, hostName(), jobIdFromEnvironment()};
  try {
    if (auto launcher = bootstrap::detectLauncher(bootstrap::defaultEnvLookup())) {
      who.rank = launcher->rank;
      if (launcher->localRank >= 0) who.localRank = launcher->localRank;
    }
  } catch (const Error&) {
    // A malformed launcher environment: a communicator's init from it reports that; the arguments serve.
  }
  return who;
}

}  // namespace conflux::metrics
