// The process's metrics service: the live sources (every communicator, the NCCL net plugin's transport,
// the tuner) and the two ways their samples leave the process, both off by default:
//   CONFLUX_METRICS_ADDR=HOST:PORT  GET /metrics (text exposition format 0.0.4) and GET /status (the
//                                   sources' status JSON) on HOST:(PORT + local rank), HOST only;
//   CONFLUX_METRICS_FILE=PATH       the exposition written to PATH (%r: rank, %h: host) every
//                                   CONFLUX_METRICS_INTERVAL_MS and when a source leaves (a communicator
//                                   is destroyed), to a temporary file renamed into place, for
//                                   node_exporter's textfile collector.
// Sources are read only when someone asks (a scrape, the file's interval): the data path writes its own
// counters and never calls in here. docs/observability.md lists every metric.
#pragma once

#include <string>

#include "core/metrics/sink.h"

namespace conflux::metrics {

/// Something that has metrics: called at every scrape, from the service's threads.
class Source {
 public:
  virtual ~Source() = default;
  /// Adds this source's samples.
  virtual void collect(Sink& sink) const = 0;
  /// This source's part of GET /status: one JSON value (an object), or "" for none.
  virtual std::string status() const { return {}; }
};

/// Who this process is: labels on every sample (job_id, rank, local_rank, host).
struct Identity {
  int rank = -1;       ///< -1: unknown (the label is then left out)
  int localRank = -1;  ///< also the offset of this process's HTTP port
  std::string host;
  std::string jobId;   ///< "" : jobIdFromEnvironment()
};

/// This process's identity: the launcher's rank and local rank where its environment has them (Open
/// MPI, PMIx, PMI, Slurm, torchrun), else `rank` and `localRank`; this host's name; the job id from
/// jobIdFromEnvironment(). A malformed launcher environment keeps the arguments.
Identity identityFromLauncher(int rank = -1, int localRank = -1);

/// The job id from the launcher's environment: CONFLUX_JOB_ID, else SLURM_JOB_ID, TORCHELASTIC_RUN_ID
/// (torchrun; not its default "none"), PMIX_NAMESPACE or OMPI_MCA_ess_base_jobid; "" when none is set.
std::string jobIdFromEnvironment();

/// Whether CONFLUX_METRICS_ADDR or CONFLUX_METRICS_FILE asks for metrics (and this build has them;
/// where it has not, a warning says so once).
bool requested();

/// Starts the service on the first call (identity from its arguments; later calls keep the first, but
/// fill in a rank or local rank it did not know, in the labels only):
/// binds the HTTP server and starts the file writer as configured. Returns whether metrics are on. A
/// server that cannot bind (the port is taken) is a warning, not an error: the job runs without it.
/// Throws Error(InvalidArgument) naming the variable for a malformed CONFLUX_METRICS_ADDR.
bool start(const Identity& identity);

/// The HTTP address the service listens on ("" when it serves none), e.g. "127.0.0.1:9401".
std::string httpAddress();

/// Adds a source, which must stay valid until removeSource (the registry keeps the pointer).
void addSource(const Source* source);
/// Removes a source; with the file output on, it writes the file first, with the source's final values
/// (a failure to write is a warning: it runs in destructors).
void removeSource(const Source* source) noexcept;

/// The exposition of build_info and every source, as GET /metrics answers it.
std::string exposition();
/// GET /status's body: {"schema":"conflux.status","version":1,...,"sources":[...]}.
std::string statusJson();
/// Writes the file output now (no-op without CONFLUX_METRICS_FILE); false when writing failed.
bool writeFileNow();

/// CONFLUX_METRICS_ADDR's HOST:PORT ("127.0.0.1:9400", "[::1]:9400"): host as written (brackets kept).
struct HttpAddress {
  std::string host;
  int port = 0;
};
/// Parses a CONFLUX_METRICS_ADDR value; throws Error(InvalidArgument) naming the variable and saying why.
HttpAddress parseHttpAddress(const std::string& text);

/// Expands %r (rank; "pid<PID>" when the rank is unknown, < 0), %h (host) and %% in a
/// CONFLUX_METRICS_FILE path.
std::string expandPath(const std::string& pattern, int rank, const std::string& host);

}  // namespace conflux::metrics
