// Undoes what loading libfabric does to a process's signal handlers on systems whose libfabric carries
// the PSM provider (Debian's does): its libinfinipath, loaded with libfabric, installs handlers for
// SIGILL, SIGABRT, SIGBUS, SIGSEGV and SIGTERM at load time, which write "<prog>.<pid>.btr" files into
// the working directory and exit from inside the handler. A SIGTERM from a job launcher (torchrun and
// multiprocessing end ranks that way) then runs the interpreter's finalisation inside a signal handler
// and crashes, and the program's own handlers set before the library loaded are gone.
//
// This file is compiled into each shared library that pulls in libfabric (libconflux, the NCCL net
// plugin): at load, after the libraries it depends on, it resets to the default every such handler
// that points into libinfinipath. IPATH_NO_BACKTRACE=1 in the environment keeps libinfinipath from
// installing them at all (conflux_torch sets it before it loads libconflux).
#include <dlfcn.h>
#include <signal.h>

#include <cstring>
#include <initializer_list>

namespace {

bool handledByInfinipath(int sig) {
  struct sigaction current {};
  if (sigaction(sig, nullptr, &current) != 0) return false;
  const void* fn = (current.sa_flags & SA_SIGINFO) != 0 ? reinterpret_cast<const void*>(current.sa_sigaction)
                                                         : reinterpret_cast<const void*>(current.sa_handler);
  if (fn == reinterpret_cast<const void*>(SIG_DFL) || fn == reinterpret_cast<const void*>(SIG_IGN)) return false;
  Dl_info info{};
  return dladdr(fn, &info) != 0 && info.dli_fname != nullptr && std::strstr(info.dli_fname, "libinfinipath") != nullptr;
}

__attribute__((constructor)) void resetInfinipathHandlers() {
  for (int sig : {SIGILL, SIGABRT, SIGBUS, SIGSEGV, SIGTERM}) {
    if (handledByInfinipath(sig)) signal(sig, SIG_DFL);
  }
}

}  // namespace
