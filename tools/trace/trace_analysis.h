// What conflux-trace concludes from the flight-recorder dumps of a job's ranks (src/flight_recorder.h,
// schema "conflux.trace" v1 in docs/observability.md): per communicator, the first collective the
// ranks did not all complete, who never joined it, who was waiting for whom, where the ranks disagree
// on a call's arguments, the first error, and the ranks to suspect.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace conflux::trace {

/// One call of one rank's dump.
struct Call {
  uint64_t seq = 0;
  bool p2p = false;
  std::string collective, dtype, op, algorithm, state;
  int root = 0;
  uint64_t count = 0, bytes = 0;
  int64_t startNs = 0, endNs = 0;
  int waitRound = 0;  ///< 1-based round it last blocked in (0: never blocked)
  int waitPeer = -1;
  /// "allreduce 1024 x float32 sum" (root too where it matters): what ranks must agree on.
  std::string signature() const;
};

/// The error a dump reports.
struct DumpError {
  std::string code, message;
  int failedRank = -1;
  int64_t timeNs = 0;
};

/// One rank's dump.
struct RankDump {
  std::string file;
  std::string commId, commName, host, reason;
  int rank = 0, nranks = 0, node = 0;
  int64_t pid = 0, writtenNs = 0;
  uint64_t callsRecorded = 0;
  std::optional<DumpError> error;
  std::vector<Call> calls;  ///< oldest first
};

/// Parses one dump; throws std::runtime_error naming the file and what is wrong.
RankDump parseDump(const nlohmann::json& j, const std::string& file);
/// Every "*.json" dump in `dir` (files of another schema are skipped with a note in `skipped`).
std::vector<RankDump> loadDumps(const std::string& dir, std::vector<std::string>* skipped = nullptr);

/// A rank's place at the divergence.
struct RankAt {
  int rank = 0;
  /// "completed", "started" or "failed" (in the call), "not joined", "no dump", or "no calls recorded"
  /// (its ring holds point-to-point batches only)
  std::string state;
  uint64_t lastCompleted = 0;  ///< its last completed collective
  int waitPeer = -1, waitRound = 0;
};

/// One communicator's story.
struct CommReport {
  std::string commId, name;
  int nranks = 0;
  std::vector<int> dumped, missing;
  uint64_t lastCommon = 0;     ///< the last collective every dumped rank completed
  uint64_t divergedAt = 0;     ///< the first one some rank did not complete (0: none)
  std::string divergedCall;    ///< its signature and algorithm, as the ranks that made it recorded it
  std::vector<RankAt> ranks;   ///< every rank, at divergedAt
  /// The first call the ranks recorded differently: "call #7: rank 0 allreduce ..., rank 1 broadcast ...".
  std::string mismatch;
  /// Every rank is in the divergent call and each waits for a rank on another node: the network between
  /// those nodes is the likelier culprit than any rank ("" otherwise).
  std::string network;
  std::optional<DumpError> firstError;
  int firstErrorRank = -1;
  std::string conflict;  ///< the dumps disagree on the communicator's size ("" when they agree)
  std::string note;      ///< a caveat on the divergence (dumps taken by SIGUSR1 at different moments)
  std::vector<int> suspects;   ///< ranks the evidence points at, most likely first
  std::vector<std::string> why;  ///< one reason per suspect
};

std::vector<CommReport> analyze(const std::vector<RankDump>& dumps);

/// A few lines per communicator for people.
std::string toText(const std::vector<CommReport>& reports);
/// The same for machines.
nlohmann::json toJson(const std::vector<CommReport>& reports);
/// What conflux-trace and conflux-status print: toJson indented (`json`), else toText.
std::string render(const std::vector<CommReport>& reports, bool json);

}  // namespace conflux::trace
