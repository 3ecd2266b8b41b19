// Finding the process's metrics owner among the loaded objects (process_hub.h explains why).
#include "core/metrics/process_hub.h"

#include <dlfcn.h>
#include <link.h>

#include <string>
#include <vector>

namespace conflux::metrics::hub {

const cfx_metrics_hub_v1* findOwner() {
  // Names first, handles after: dlopen must not run inside dl_iterate_phdr's callback (the loader's
  // lock is held there).
  std::vector<std::string> names;
  dl_iterate_phdr(
      [](dl_phdr_info* info, size_t, void* out) {
        static_cast<std::vector<std::string>*>(out)->emplace_back(info->dlpi_name != nullptr ? info->dlpi_name : "");
        return 0;
      },
      &names);
  using HubFn = const cfx_metrics_hub_v1* (*)();
  for (size_t i = 0; i < names.size(); ++i) {
    // The first entry is the program: its handle searches the global scope (the program and the
    // libraries it was linked with). RTLD_NOLOAD: an object is never loaded here, only looked at.
    void* handle = i == 0 ? dlopen(nullptr, RTLD_LAZY) : dlopen(names[i].c_str(), RTLD_LAZY | RTLD_NOLOAD);
    if (handle == nullptr) continue;
    const auto fn = reinterpret_cast<HubFn>(dlsym(handle, CONFLUX_METRICS_HUB_SYMBOL));
    const cfx_metrics_hub_v1* found = fn != nullptr ? fn() : nullptr;
    dlclose(handle);  // drops the reference dlopen took; the object stays (it was loaded before)
    if (found != nullptr && found->size >= sizeof(cfx_metrics_hub_v1)) return found;
  }
  return local();
}

void pinThisCopy() {
  Dl_info info{};
  if (dladdr(reinterpret_cast<void*>(&pinThisCopy), &info) == 0 || info.dli_fname == nullptr) return;
  // The handle is never closed: with RTLD_NODELETE the object outlives every dlclose.
  (void)dlopen(info.dli_fname, RTLD_LAZY | RTLD_NOLOAD | RTLD_NODELETE);
}

}  // namespace conflux::metrics::hub
