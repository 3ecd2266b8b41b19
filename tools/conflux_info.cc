// conflux-info: prints the library version, the CPU kernel path and every CONFLUX_* variable with its
// current value, default and documentation (`conflux-info --env`; `--markdown` for docs/environment.md).
#include <cstdio>
#include <cstring>
#include <string>

#include "conflux/conflux.h"
#include "core/config.h"
#include "kernels/cpu/reduce.h"

int main(int argc, char** argv) {
  bool markdown = argc > 1 && std::strcmp(argv[1], "--markdown") == 0;
  if (markdown) {
    printf("| variable | default | meaning |\n|---|---|---|\n");
    for (const auto& v : conflux::config::all()) {
      printf("| `%s` | `%s` | %s |\n", v.name, *v.defaultValue ? v.defaultValue : "(unset)", v.doc);
    }
    return 0;
  }
  int version = 0;
  cfxGetVersion(&version);
  printf("conflux %d.%d.%d, CPU kernels: %s\n\n", version / 10000, version / 100 % 100, version % 100,
         conflux::cpu::isaName());
  printf("%s", conflux::config::describeAll().c_str());
  return 0;
}
