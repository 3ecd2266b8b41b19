// PMIx put/commit/fence/get of rank 0's unique id (pmix_exchange.h). Without PMIx in the build the
// exchange reports "unavailable" and the environment rendezvous goes on to its other modes.
#include "core/bootstrap/pmix_exchange.h"

#include <algorithm>
#include <string>

#include "core/error.h"
#include "core/log.h"

#if CONFLUX_HAVE_PMIX
#include <dlfcn.h>
#include <pmix.h>

#include <cstdlib>
#include <cstring>
#endif

namespace conflux::bootstrap {

#if CONFLUX_HAVE_PMIX

namespace {

// PMIx is opened at run time (dlopen), not linked: libconflux then loads on machines without PMIx (a
// PyTorch wheel, a container without Slurm), and a launcher's PMIx is used where there is one. Only the
// header's types and constants come from the build; the functions are looked up here.
struct PmixApi {
  decltype(&PMIx_Init) init = nullptr;
  decltype(&PMIx_Finalize) finalize = nullptr;
  decltype(&PMIx_Put) put = nullptr;
  decltype(&PMIx_Commit) commit = nullptr;
  decltype(&PMIx_Fence) fence = nullptr;
  decltype(&PMIx_Get) get = nullptr;
  decltype(&PMIx_Error_string) errorString = nullptr;
  decltype(&PMIx_Value_destruct) valueDestruct = nullptr;
};

template <class F>
bool lookUp(void* lib, const char* name, F& fn) {
  fn = reinterpret_cast<F>(dlsym(lib, name));
  return fn != nullptr;
}

// A PMIx the process already has (an MPI library's), then the one the build found (its directory is not
// on the loader's path on Debian), then the loader's: one PMIx client per process.
const PmixApi* openPmix() {
  static const PmixApi* api = []() -> const PmixApi* {
    struct Candidate {
      const char* name;
      int mode;
    };
    const Candidate candidates[] = {{"libpmix.so.2", RTLD_NOW | RTLD_NOLOAD},
                                    {CONFLUX_PMIX_LIBDIR "/libpmix.so.2", RTLD_NOW | RTLD_LOCAL},
                                    {"libpmix.so.2", RTLD_NOW | RTLD_LOCAL},
                                    {"libpmix.so", RTLD_NOW | RTLD_LOCAL}};
    for (const Candidate& c : candidates) {
      const char* name = c.name;
      void* lib = dlopen(name, c.mode);
      if (lib == nullptr) continue;
      auto* a = new PmixApi;  // kept for the process: PMIx is not unloaded
      if (lookUp(lib, "PMIx_Init", a->init) && lookUp(lib, "PMIx_Finalize", a->finalize) &&
          lookUp(lib, "PMIx_Put", a->put) && lookUp(lib, "PMIx_Commit", a->commit) &&
          lookUp(lib, "PMIx_Fence", a->fence) && lookUp(lib, "PMIx_Get", a->get) &&
          lookUp(lib, "PMIx_Error_string", a->errorString) && lookUp(lib, "PMIx_Value_destruct", a->valueDestruct)) {
        CFX_INFO(kBootstrap, "bootstrap: PMIx from %s", name);
        return a;
      }
      delete a;
      dlclose(lib);
    }
    CFX_INFO(kBootstrap, "bootstrap: PMIx variables are set but no PMIx library could be opened");
    return nullptr;
  }();
  return api;
}

[[noreturn]] void fail(const PmixApi& api, const char* call, pmix_status_t rc) {
  throw Error(rc == PMIX_ERR_TIMEOUT ? Code::Timeout : Code::SystemError,
              std::string("bootstrap: ") + call + " failed: " + api.errorString(rc));
}

// Copies at most `max` characters of `text` into the zeroed `out` (which has room for max + 1).
void copyName(char* out, const char* text, size_t max) { std::memcpy(out, text, strnlen(text, max)); }

pmix_proc_t procOf(const char* nspace, pmix_rank_t rank) {
  pmix_proc_t p;
  std::memset(&p, 0, sizeof p);
  copyName(p.nspace, nspace, PMIX_MAX_NSLEN);
  p.rank = rank;
  return p;
}

pmix_info_t infoOf(const char* key, pmix_data_type_t type) {
  pmix_info_t i;
  std::memset(&i, 0, sizeof i);
  copyName(i.key, key, PMIX_MAX_KEYLEN);
  i.value.type = type;
  return i;
}

// PMIx_Init for one exchange, PMIx_Finalize after it. PMIx counts them: inside an MPI program (whose own
// initialisation holds PMIx open) this is a nested pair, and MPI's finalize still ends the client, which
// the launcher requires (mpirun reports a process that exits without it). Without MPI, each exchange is a
// full init and finalize; Slurm.srun_pmix makes two communicators per process to keep that tested.
class PmixSession {
 public:
  explicit PmixSession(const PmixApi& api) : api_(api) { ok = api_.init(&me, nullptr, 0) == PMIX_SUCCESS; }
  ~PmixSession() {
    if (ok) api_.finalize(nullptr, 0);
  }
  PmixSession(const PmixSession&) = delete;
  PmixSession& operator=(const PmixSession&) = delete;
  pmix_proc_t me{};
  bool ok = false;

 private:
  const PmixApi& api_;
};

// Within `seconds` (at least 1): the timeout attribute that fences and gets take.
pmix_info_t timeoutInfo(int seconds) {
  pmix_info_t i = infoOf(PMIX_TIMEOUT, PMIX_INT);
  i.value.data.integer = seconds < 1 ? 1 : seconds;
  return i;
}

}  // namespace

bool pmixBuiltIn() { return true; }

std::optional<std::string> pmixShareFromRankZero(const std::string& value, int expectedRank, int expectedSize,
                                                 unsigned exchange, std::chrono::milliseconds timeout) {
  const PmixApi* api = openPmix();
  if (api == nullptr) return std::nullopt;
  const PmixSession me(*api);
  if (!me.ok) {
    CFX_INFO(kBootstrap, "bootstrap: PMIx variables are set but PMIx_Init failed: no PMIx server here");
    return std::nullopt;
  }
  if (me.me.rank != static_cast<pmix_rank_t>(expectedRank)) {
    CFX_WARN(kBootstrap, "bootstrap: PMIx says this is rank %u, the launcher's variables rank %d: not using PMIx",
             static_cast<unsigned>(me.me.rank), expectedRank);
    return std::nullopt;
  }
  const int seconds = static_cast<int>(std::max<int64_t>(1, (timeout.count() + 999) / 1000));
  // The fence joins every process of the namespace: only when they are this communicator's ranks.
  const pmix_proc_t all = procOf(me.me.nspace, PMIX_RANK_WILDCARD);
  {
    pmix_info_t wait = timeoutInfo(seconds);
    pmix_value_t* size = nullptr;
    const pmix_status_t rc = api->get(&all, PMIX_JOB_SIZE, &wait, 1, &size);
    uint32_t jobSize = 0;
    if (rc == PMIX_SUCCESS && size != nullptr && size->type == PMIX_UINT32) jobSize = size->data.uint32;
    if (size != nullptr) {
      api->valueDestruct(size);
      std::free(size);
    }
    if (jobSize != static_cast<uint32_t>(expectedSize)) {
      CFX_INFO(kBootstrap, "bootstrap: the PMIx job has %u processes, the communicator %d ranks: not using PMIx",
               jobSize, expectedSize);
      return std::nullopt;
    }
  }
  const std::string key = "conflux.uid." + std::to_string(exchange);
  if (me.me.rank == 0) {
    pmix_value_t v;
    std::memset(&v, 0, sizeof v);
    v.type = PMIX_STRING;
    v.data.string = const_cast<char*>(value.c_str());  // PMIx_Put copies it
    if (pmix_status_t rc = api->put(PMIX_GLOBAL, key.c_str(), &v); rc != PMIX_SUCCESS) fail(*api, "PMIx_Put", rc);
    if (pmix_status_t rc = api->commit(); rc != PMIX_SUCCESS) fail(*api, "PMIx_Commit", rc);
  }
  // Every rank of the namespace, with data collected, within the timeout (whole seconds, at least 1).
  pmix_info_t info[2] = {infoOf(PMIX_COLLECT_DATA, PMIX_BOOL), timeoutInfo(seconds)};
  info[0].value.data.flag = true;
  if (pmix_status_t rc = api->fence(&all, 1, info, 2); rc != PMIX_SUCCESS) fail(*api, "PMIx_Fence", rc);
  if (me.me.rank == 0) return value;
  const pmix_proc_t root = procOf(me.me.nspace, 0);
  pmix_value_t* got = nullptr;
  pmix_info_t wait = timeoutInfo(seconds);
  if (pmix_status_t rc = api->get(&root, key.c_str(), &wait, 1, &got); rc != PMIX_SUCCESS) fail(*api, "PMIx_Get", rc);
  std::string out = got != nullptr && got->type == PMIX_STRING && got->data.string != nullptr ? got->data.string : "";
  if (got != nullptr) {
    api->valueDestruct(got);
    std::free(got);
  }
  if (out.empty()) throw Error(Code::SystemError, "bootstrap: PMIx_Get of " + key + " gave no string");
  return out;
}

#else

bool pmixBuiltIn() { return false; }

std::optional<std::string> pmixShareFromRankZero(const std::string&, int, int, unsigned, std::chrono::milliseconds) {
  return std::nullopt;
}

#endif

}  // namespace conflux::bootstrap
