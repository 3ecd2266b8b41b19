// Finding the process's metrics owner among the loaded objects (process_hub.h explains why).
#include "core/metrics/process_hub.h"

#include <dlfcn.h>
#include <link.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

namespace conflux::metrics::hub {
namespace {

/// A loaded object: its name (as the loader has it; "" for the program) and the address of its first
/// mapped byte (what dladdr reports as dli_fbase for an address inside it).
struct Loaded {
  std::string name;
  uintptr_t start = 0;
};

std::vector<Loaded> loadedObjects() {
  std::vector<Loaded> out;
  // Names first, handles after: dlopen must not run inside dl_iterate_phdr's callback (the loader's
  // lock is held there), and nothing may unwind through it.
  dl_iterate_phdr(
      [](dl_phdr_info* info, size_t, void* p) {
        try {
          uintptr_t first = UINTPTR_MAX;
          for (int i = 0; i < info->dlpi_phnum; ++i) {
            if (info->dlpi_phdr[i].p_type == PT_LOAD) first = std::min<uintptr_t>(first, info->dlpi_phdr[i].p_vaddr);
          }
          const auto page = static_cast<uintptr_t>(::getpagesize());
          const uintptr_t start = first == UINTPTR_MAX ? 0 : info->dlpi_addr + (first & ~(page - 1));
          static_cast<std::vector<Loaded>*>(p)->push_back({info->dlpi_name != nullptr ? info->dlpi_name : "", start});
          return 0;
        } catch (...) {
          return 1;  // out of memory: stop here; the objects seen so far are in load order still
        }
      },
      &out);
  return out;
}

uintptr_t objectStart(const void* address) {
  Dl_info info{};
  return dladdr(address, &info) != 0 ? reinterpret_cast<uintptr_t>(info.dli_fbase) : 0;
}

}  // namespace

const cfx_metrics_hub_v1* findOwner() {
  using HubFn = const cfx_metrics_hub_v1* (*)();
  const std::vector<Loaded> objects = loadedObjects();
  for (size_t i = 0; i < objects.size(); ++i) {
    // RTLD_NOLOAD: nothing is loaded here, only looked at. The program's handle (i == 0) searches the
    // global scope; a library's, its dependencies too.
    void* handle = i == 0 ? dlopen(nullptr, RTLD_LAZY) : dlopen(objects[i].name.c_str(), RTLD_LAZY | RTLD_NOLOAD);
    if (handle == nullptr) continue;
    const auto fn = reinterpret_cast<HubFn>(dlsym(handle, CONFLUX_METRICS_HUB_SYMBOL));
    // Only the object's own symbol counts. The global scope grows when a library is loaded RTLD_GLOBAL,
    // so counting whatever the program's handle finds would let copies that look at different moments
    // choose different owners.
    const cfx_metrics_hub_v1* found =
        fn != nullptr && objectStart(reinterpret_cast<const void*>(fn)) == objects[i].start ? fn() : nullptr;
    if (found != nullptr && found->size >= kHubV1Bytes) {
      // The owner's reference is kept: it stays loaded until it pins itself when it starts.
      if (i == 0 || found == local()) dlclose(handle);
      return found;
    }
    dlclose(handle);  // drops the reference dlopen took; the object stays (it was loaded before)
  }
  return local();
}

bool pinThisCopy() {
  Dl_info info{};
  if (dladdr(reinterpret_cast<void*>(&pinThisCopy), &info) == 0 || info.dli_fname == nullptr) return false;
  const std::vector<Loaded> objects = loadedObjects();
  if (!objects.empty() && reinterpret_cast<uintptr_t>(info.dli_fbase) == objects[0].start) {
    return true;  // the program itself: never unloaded
  }
  // The handle is never closed: with RTLD_NODELETE the object outlives every dlclose.
  return dlopen(info.dli_fname, RTLD_LAZY | RTLD_NOLOAD | RTLD_NODELETE) != nullptr;
}

}  // namespace conflux::metrics::hub
