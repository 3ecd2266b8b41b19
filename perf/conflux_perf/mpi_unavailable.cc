// conflux-perf: stand-ins for the MPI backend in builds without MPI (CONFLUX_HAVE_MPI off). The
// launcher checks mpiAvailable() first, so the others are never reached; they fail loudly if they are.
#include <cstdio>
#include <cstdlib>
#include <stdexcept>

#include "backend.h"

namespace cfxperf {

bool mpiAvailable() { return false; }
const char* mpiexecPath() { return ""; }
void mpiInit(int*, char***) { throw std::runtime_error("this conflux-perf was built without MPI"); }
void mpiFinalize() {}
void mpiAbort(int code) { std::_Exit(code); }
int mpiRank() { return 0; }
int mpiSize() { return 1; }
cfxResult_t confluxCommFromMpi(cfxComm_t*) { return cfxInvalidUsage; }
std::unique_ptr<Backend> makeMpiBackend() { throw std::runtime_error("this conflux-perf was built without MPI"); }

}  // namespace cfxperf
