// conflux-perf net: parsing and validating its flags.
#include "net_options.h"

#include <algorithm>

#include "core/cli_numbers.h"
#include "options.h"

namespace cfxperf {

using conflux::cli::parseInt;
using conflux::cli::parseSize;

std::string netUsageText() {
  return "usage: conflux-perf net [--raw] [--plugin PATH]... [flags]\n"
         "Latency and bandwidth between two ranks of each target, measured by the same loops in one run,\n"
         "interleaved per size; every figure is the median of --repeats batches.\n"
         "targets (in this order; the first is the baseline of the +lat and ratio columns):\n"
         "  --raw                 conflux::ofi::Transport (the default when no target is named)\n"
         "  --plugin PATH         an ncclNet plugin library, through its exported ABI only\n"
         "  --version 8..11       plugin ABI version (default: the newest the library exports)\n"
         "  --device N            plugin device (default 0)\n"
         "  --merge LIST          one more target: the last --plugin on the virtual device (makeVDevice,\n"
         "                        ABI v9+) of the physical devices in LIST, e.g. 0,1 (2 to 4 devices)\n"
         "sizes and loops:\n"
         "  -b,--minbytes <size>  smallest message (K/M/G suffixes; default 8)\n"
         "  -e,--maxbytes <size>  largest message (default 16M)\n"
         "  -f,--stepfactor <n>   size multiplier (default 2)\n"
         "  -n,--iters <n>        iterations per batch (default: by size)\n"
         "  --repeats <n>         batches per row, median reported (default 5)\n"
         "  --window <n>          messages in flight for bandwidth (default 16, capped by each target)\n"
         "  --dir uni|bidir|both  bandwidth directions (default both)\n"
         "ranks:\n"
         "  --ranks 2             fork two local ranks (default without a launcher's environment)\n"
         "  --pin                 rank r runs on core r % cores\n"
         "Across machines or namespaces, start one process per side with a launcher's environment\n"
         "(CONFLUX_RANK/CONFLUX_NRANKS/... as for cfxCommInitFromEnv) and leave out --ranks.\n";
}

namespace {

/// "0,1" -> {0, 1}: 2 to 4 distinct indices.
bool parseDeviceList(const std::string& v, std::vector<int>* out) {
  size_t at = 0;
  while (at <= v.size()) {
    const size_t comma = std::min(v.find(',', at), v.size());
    int d = 0;
    if (!parseInt(v.substr(at, comma - at), 0, 1 << 20, &d)) return false;
    for (int seen : *out) {
      if (seen == d) return false;
    }
    out->push_back(d);
    at = comma + 1;
  }
  return out->size() >= 2 && out->size() <= 4;
}

}  // namespace

NetParse parseNetOptions(int argc, char** argv, NetOptions* o, std::string* error) {
  auto bad = [&](const std::string& flag, const std::string& want) {
    *error = flag + ": expected " + want;
    return NetParse::Error;
  };
  for (int i = 2; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "-h" || a == "--help") return NetParse::Help;
    if (a == "--raw") {
      o->targets.push_back({true, ""});
      continue;
    }
    if (a == "--pin") {
      o->pin = true;
      continue;
    }
    if (i + 1 >= argc) {
      *error = a == "--plugin" || a[0] == '-' ? a + ": missing value" : "unexpected argument '" + a + "'";
      return NetParse::Error;
    }
    const std::string v = argv[++i];
    if (a == "--plugin") {
      if (v.empty()) return bad(a, "a plugin library path");
      o->targets.push_back({false, v});
    } else if (a == "--merge") {
      if (o->targets.empty() || o->targets.back().raw) return bad(a, "a --plugin before it");
      NetTargetSpec merged{false, o->targets.back().plugin, {}};
      if (!parseDeviceList(v, &merged.merge)) return bad(a, "2 to 4 distinct device indices, such as 0,1");
      o->targets.push_back(merged);
    } else if (a == "--version") {
      if (!parseInt(v, 8, 11, &o->version)) return bad(a, "an ABI version from 8 to 11");
    } else if (a == "--device") {
      if (!parseInt(v, 0, 1 << 20, &o->device)) return bad(a, "a device index >= 0");
    } else if (a == "-b" || a == "--minbytes") {
      if (!parseSize(v, &o->minBytes)) return bad(a, "a size such as 8, 64K, 32M or 1G");
    } else if (a == "-e" || a == "--maxbytes") {
      if (!parseSize(v, &o->maxBytes)) return bad(a, "a size such as 8, 64K, 32M or 1G");
    } else if (a == "-f" || a == "--stepfactor") {
      int f = 0;
      if (!parseInt(v, 2, 1 << 20, &f)) return bad(a, "a factor >= 2");
      o->stepFactor = size_t(f);
    } else if (a == "-n" || a == "--iters") {
      if (!parseInt(v, 1, 1 << 24, &o->iters)) return bad(a, "iterations >= 1");
    } else if (a == "--repeats") {
      if (!parseInt(v, 1, 1000, &o->repeats)) return bad(a, "a count from 1 to 1000");
    } else if (a == "--window") {
      if (!parseInt(v, 1, 1024, &o->window)) return bad(a, "a window from 1 to 1024");
    } else if (a == "--dir") {
      if (v != "uni" && v != "bidir" && v != "both") return bad(a, "uni, bidir or both");
      o->uni = v != "bidir";
      o->bidir = v != "uni";
    } else if (a == "--ranks") {
      if (!parseInt(v, 2, 2, &o->ranks)) return bad(a, "2 (the benchmark runs between two ranks)");
    } else {
      *error = "unknown flag '" + a + "' (conflux-perf net -h lists them)";
      return NetParse::Error;
    }
  }
  if (o->maxBytes < o->minBytes) {
    *error = "-e (--maxbytes) must be at least -b (--minbytes)";
    return NetParse::Error;
  }
  if (o->maxBytes > (size_t{1} << 30)) {
    *error = "-e (--maxbytes): at most 1G (plugins may refuse larger messages)";
    return NetParse::Error;
  }
  if (o->targets.empty()) o->targets.push_back({true, ""});
  return NetParse::Ok;
}

}  // namespace cfxperf
