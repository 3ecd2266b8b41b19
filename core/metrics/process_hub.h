// One metrics service per process, however many copies of Conflux the process holds.
//
// libconflux.so, libnccl-net-conflux.so and libnccl-tuner-conflux.so each carry their own static copy
// of core/ (the plugins are single files that NCCL dlopens with RTLD_LOCAL, so no copy sees another's
// symbols by name). A PyTorch job with the Conflux backend for CPU tensors and NCCL with the Conflux
// net plugin for GPU tensors holds two copies; NCCL_TUNER_PLUGIN=conflux next to the net plugin holds
// two as well. Each copy would start its own HTTP server on the same port (the second cannot bind) and
// write the same file.
//
// Instead, every shared object exports one C function, conflux_metrics_hub_v1 (hub_export.cc), that
// returns its copy's hub: a table of C functions (a C ABI, so copies from different Conflux versions
// can meet). A copy that starts the service looks through the loaded objects in load order
// (dl_iterate_phdr, then dlsym on a RTLD_NOLOAD handle, which finds symbols of RTLD_LOCAL libraries
// too) and takes the first hub it finds as the owner: every copy finds the same one, so no election is
// needed. The owner serves; another copy keeps its own sources and attaches itself, and the owner
// reads them through the peer table at every scrape into its own sink (families merge by name as if
// the sources were its own).
//
// A copy that serves or attaches makes itself unloadable (RTLD_NODELETE): NCCL dlcloses plugins at
// finalisation, and the server's threads and the owner's peer list point into the copy's code.
#pragma once

#include <cstddef>
#include <cstdint>

extern "C" {

/// Appends `bytes` of `text` to the string behind `out`.
typedef void (*cfx_metrics_append_v1)(void* out, const char* text, size_t bytes);

/// Where a peer copy's sources write their samples: the owner's sink. `labels` holds `n` name/value
/// pairs as 2n strings; `kind` 0 is a counter, 1 a gauge.
struct cfx_metrics_sink_v1 {
  uint32_t size;  ///< sizeof(cfx_metrics_sink_v1) of the copy that made it; later versions append
  void* ctx;
  void (*sample)(void* ctx, int kind, const char* name, const char* help, const char* const* labels, size_t n,
                 double value);
  /// `cumulative[i]` observations at or below `bounds[i]` for `buckets` finite buckets; `count` in all.
  void (*histogram)(void* ctx, const char* name, const char* help, const char* const* labels, size_t n,
                    const double* bounds, const uint64_t* cumulative, size_t buckets, uint64_t count, double sum);
};

/// A copy that attached to the owner: its sources, read at every scrape.
struct cfx_metrics_peer_v1 {
  uint32_t size;  ///< sizeof(cfx_metrics_peer_v1) of the copy that made it; later versions append
  void* ctx;
  void (*collect)(void* ctx, const cfx_metrics_sink_v1* sink);
  /// Calls `part` once with each source's /status JSON value.
  void (*status)(void* ctx, cfx_metrics_append_v1 part, void* out);
};

/// A copy's service, as other copies reach it. Every function is safe from any thread and never throws.
struct cfx_metrics_hub_v1 {
  uint32_t size;  ///< sizeof(cfx_metrics_hub_v1) of the copy that made it; later versions append
  /// metrics::start with this identity (rank, local rank: -1 when unknown): 1 on, 0 off; -1 refused,
  /// the reason appended to `error`.
  int (*start)(int rank, int local_rank, const char* host, const char* job_id, cfx_metrics_append_v1 error,
               void* out);
  void (*attach)(const cfx_metrics_peer_v1* peer);
  /// Writes CONFLUX_METRICS_FILE now: 1 written, 0 not (no file output, or it failed: a warning).
  int (*write_file)(void);
  void (*exposition)(cfx_metrics_append_v1 append, void* out);
  void (*status_json)(cfx_metrics_append_v1 append, void* out);
  void (*http_address)(cfx_metrics_append_v1 append, void* out);
};

/// The symbol every shared object of Conflux exports (hub_export.cc); it returns null in a build
/// without metrics.
#define CONFLUX_METRICS_HUB_SYMBOL "conflux_metrics_hub_v1"

}  // extern "C"

namespace conflux::metrics::hub {

/// The sizes of the tables as version 1 defined them: a copy accepts another's table of at least this
/// size (a later version's is longer, with the same first members).
inline constexpr uint32_t kHubV1Bytes = 56, kSinkV1Bytes = 32, kPeerV1Bytes = 32;
static_assert(sizeof(void*) != 8 || (sizeof(cfx_metrics_hub_v1) == kHubV1Bytes &&
                                     sizeof(cfx_metrics_sink_v1) == kSinkV1Bytes &&
                                     sizeof(cfx_metrics_peer_v1) == kPeerV1Bytes),
              "version 1 of the metrics tables is frozen: later versions append members");

/// This copy's hub.
const cfx_metrics_hub_v1* local();
/// The process's owner: the first hub in load order, or local() when no loaded object exports one
/// (an executable that links core/ statically and loads no plugin).
const cfx_metrics_hub_v1* findOwner();
/// Keeps this copy's shared object loaded until the process ends (RTLD_NODELETE); true when it is
/// (the program itself always is), false when the loader would not.
bool pinThisCopy();

}  // namespace conflux::metrics::hub
