// PMIx put/commit/fence/get of rank 0's unique id (pmix_exchange.h). Without PMIx in the build the
// exchange reports "unavailable" and the environment rendezvous goes on to its other modes.
#include "core/bootstrap/pmix_exchange.h"

#include <string>

#include "core/error.h"
#include "core/log.h"

#if CONFLUX_HAVE_PMIX
#include <pmix.h>
#endif

namespace conflux::bootstrap {

#if CONFLUX_HAVE_PMIX

namespace {

[[noreturn]] void fail(const char* call, pmix_status_t rc) {
  throw Error(rc == PMIX_ERR_TIMEOUT ? Code::Timeout : Code::SystemError,
              std::string("bootstrap: ") + call + " failed: " + PMIx_Error_string(rc));
}

// PMIx_Init at construction, PMIx_Finalize at destruction (PMIx counts them: an MPI library's own
// initialisation in the same process is not disturbed).
class PmixSession {
 public:
  PmixSession() { ok_ = PMIx_Init(&me_, nullptr, 0) == PMIX_SUCCESS; }
  ~PmixSession() {
    if (ok_) PMIx_Finalize(nullptr, 0);
  }
  PmixSession(const PmixSession&) = delete;
  PmixSession& operator=(const PmixSession&) = delete;
  bool ok() const { return ok_; }
  const pmix_proc_t& me() const { return me_; }

 private:
  pmix_proc_t me_{};
  bool ok_ = false;
};

}  // namespace

bool pmixBuiltIn() { return true; }

std::optional<std::string> pmixShareFromRankZero(const std::string& value, int expectedRank, unsigned exchange,
                                                 std::chrono::milliseconds timeout) {
  PmixSession session;
  if (!session.ok()) {
    CFX_INFO(kBootstrap, "bootstrap: PMIx variables are set but PMIx_Init failed: no PMIx server here");
    return std::nullopt;
  }
  if (session.me().rank != static_cast<pmix_rank_t>(expectedRank)) {
    CFX_WARN(kBootstrap, "bootstrap: PMIx says this is rank %u, the launcher's variables rank %d: not using PMIx",
             static_cast<unsigned>(session.me().rank), expectedRank);
    return std::nullopt;
  }
  const std::string key = "conflux.uid." + std::to_string(exchange);
  if (session.me().rank == 0) {
    pmix_value_t v;
    PMIX_VALUE_CONSTRUCT(&v);
    v.type = PMIX_STRING;
    v.data.string = const_cast<char*>(value.c_str());  // PMIx_Put copies it
    if (pmix_status_t rc = PMIx_Put(PMIX_GLOBAL, key.c_str(), &v); rc != PMIX_SUCCESS) fail("PMIx_Put", rc);
    if (pmix_status_t rc = PMIx_Commit(); rc != PMIX_SUCCESS) fail("PMIx_Commit", rc);
  }
  // Every rank of the namespace, with data collected, within the timeout (seconds; at least 1).
  pmix_proc_t all;
  PMIX_PROC_LOAD(&all, session.me().nspace, PMIX_RANK_WILDCARD);
  pmix_info_t info[2];
  bool collect = true;
  int seconds = static_cast<int>((timeout.count() + 999) / 1000);
  if (seconds < 1) seconds = 1;
  PMIX_INFO_LOAD(&info[0], PMIX_COLLECT_DATA, &collect, PMIX_BOOL);
  PMIX_INFO_LOAD(&info[1], PMIX_TIMEOUT, &seconds, PMIX_INT);
  pmix_status_t rc = PMIx_Fence(&all, 1, info, 2);
  PMIX_INFO_DESTRUCT(&info[0]);
  PMIX_INFO_DESTRUCT(&info[1]);
  if (rc != PMIX_SUCCESS) fail("PMIx_Fence", rc);
  if (session.me().rank == 0) return value;
  pmix_proc_t root;
  PMIX_PROC_LOAD(&root, session.me().nspace, 0);
  pmix_value_t* got = nullptr;
  rc = PMIx_Get(&root, key.c_str(), nullptr, 0, &got);
  if (rc != PMIX_SUCCESS) fail("PMIx_Get", rc);
  std::string out = got->type == PMIX_STRING && got->data.string != nullptr ? got->data.string : "";
  PMIX_VALUE_RELEASE(got);
  if (out.empty()) throw Error(Code::SystemError, "bootstrap: PMIx_Get of " + key + " gave no string");
  return out;
}

#else

bool pmixBuiltIn() { return false; }

std::optional<std::string> pmixShareFromRankZero(const std::string&, int, unsigned, std::chrono::milliseconds) {
  return std::nullopt;
}

#endif

}  // namespace conflux::bootstrap
