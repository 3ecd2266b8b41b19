// Rendezvous from the launcher environment: store address, secret and the file rendezvous; see
// launcher_env.h for the rules.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <thread>

#include "core/bootstrap/crypto.h"
#include "core/bootstrap/launcher_env.h"
#include "core/bootstrap/pmix_exchange.h"
#include "core/bootstrap/socket.h"
#include "core/config.h"
#include "core/error.h"
#include "core/log.h"

namespace conflux::bootstrap {
namespace {

const char* lookupVar(const EnvLookup& env, const char* name) {
  const char* v = env(name);
  return v != nullptr && *v != '\0' ? v : nullptr;
}

const char* lookupVar(const EnvLookup& env, config::Var var) { return lookupVar(env, config::info(var).name); }

// CONFLUX_SECRET when set (validated), else nullopt.
std::optional<std::array<uint8_t, 32>> configuredSecret(const EnvLookup& env) {
  const char* text = lookupVar(env, config::Var::SECRET);
  if (text == nullptr) return std::nullopt;
  std::array<uint8_t, 32> secret;
  if (!fromHex(text, secret.data(), secret.size())) {
    throw Error(Code::InvalidArgument, std::string(config::info(config::Var::SECRET).name) +
                                           " must be 64 hex characters (32 bytes), got " +
                                           std::to_string(std::strlen(text)) + " characters");
  }
  return secret;
}

std::array<uint8_t, 32> derivedSecret(const LauncherInfo& li, const std::string& address) {
  const std::string size = std::to_string(li.size);
  Sha256 h;
  h.update("conflux-derived-secret");
  for (const std::string* part : {&li.jobId, &address, &size}) h.update("", 1).update(*part);  // NUL-separated
  return h.finish();
}

std::string rendezvousPath(const EnvLookup& env, const LauncherInfo& li) {
  const char* tmp = lookupVar(env, "TMPDIR");
  Digest d = sha256("conflux-rendezvous:" + li.jobId);
  return std::string(tmp ? tmp : "/tmp") + "/conflux-" + std::to_string(geteuid()) + "-" + toHex(d.data(), 8) + ".id";
}

void publish(const std::string& path, const cfxUniqueId& raw) {
  std::vector<uint8_t> r = randomBytes(8);
  std::string tmp = path + ".tmp." + toHex(r.data(), r.size());
  Fd fd(::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600));
  if (!fd.valid()) throwSystemError("bootstrap: cannot create rendezvous file " + tmp);
  const char* p = raw.internal;
  size_t left = sizeof raw.internal;
  while (left > 0) {
    ssize_t w = ::write(fd.get(), p, left);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) {
      int err = errno;
      ::unlink(tmp.c_str());
      throw Error(Code::SystemError, systemErrorMessage("bootstrap: cannot write rendezvous file " + tmp, err));
    }
    p += w;
    left -= static_cast<size_t>(w);
  }
  fd.reset();
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    int err = errno;
    ::unlink(tmp.c_str());
    throw Error(Code::SystemError, systemErrorMessage("bootstrap: cannot publish rendezvous file " + path, err));
  }
}

// Reads the published id; nullopt while it does not exist yet.
std::optional<UniqueId> readPublished(const std::string& path) {
  Fd fd(::open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC));
  if (!fd.valid()) {
    if (errno == ENOENT) return std::nullopt;
    throwSystemError("bootstrap: cannot open rendezvous file " + path);
  }
  struct stat st;
  if (::fstat(fd.get(), &st) != 0) throwSystemError("bootstrap: fstat " + path);
  if (st.st_uid != geteuid() || (st.st_mode & 077) != 0 || !S_ISREG(st.st_mode)) {
    throw Error(Code::InvalidUsage, "bootstrap: refusing rendezvous file " + path +
                                        ": not a private regular file owned by this user");
  }
  cfxUniqueId raw;
  size_t got = 0;
  while (got < sizeof raw.internal) {
    ssize_t n = ::read(fd.get(), raw.internal + got, sizeof raw.internal - got);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) throwSystemError("bootstrap: cannot read rendezvous file " + path);
    if (n == 0) break;
    got += static_cast<size_t>(n);
  }
  if (got != sizeof raw.internal) {
    throw Error(Code::InvalidArgument, "bootstrap: rendezvous file " + path + " is truncated");
  }
  return decode(raw);
}

void fileRendezvous(const EnvLookup& env, const LauncherInfo& li, std::chrono::milliseconds timeout,
                    EnvBootstrap& out) {
  const std::string path = rendezvousPath(env, li);
  out.rendezvous = "file";
  if (li.rank == 0) {
    auto secret = configuredSecret(env);
    out.server = secret ? StoreServer::start("127.0.0.1", 0, *secret) : StoreServer::startForNewJob(true);
    out.id = out.server->uniqueId();
    publish(path, encode(out.id));
    out.file = std::make_shared<RendezvousFile>(path);
    CFX_INFO(kBootstrap, "bootstrap: published store %s in %s", describe(out.id).c_str(), path.c_str());
    return;
  }
  const Deadline deadline = Clock::now() + timeout;
  auto backoff = std::chrono::milliseconds(2);
  for (;;) {
    if (auto id = readPublished(path)) {
      out.id = *id;
      return;
    }
    if (Clock::now() >= deadline) {
      throw Error(Code::Timeout, "bootstrap: timed out after " + std::to_string(timeout.count()) +
                                     " ms waiting for rank 0 to publish " + path + " (launcher: " + li.source +
                                     ")");
    }
    std::this_thread::sleep_for(std::min<Clock::duration>(backoff, deadline - Clock::now()));
    backoff = std::min(backoff * 2, std::chrono::milliseconds(50));
  }
}

// The store's address. A name that does not resolve yet is tried again until the timeout: in a
// Kubernetes Job, a pod's DNS record appears some moments after the pods start.
SockAddr resolveWithin(const std::string& host, uint16_t port, std::chrono::milliseconds timeout) {
  const Deadline deadline = Clock::now() + timeout;
  auto backoff = std::chrono::milliseconds(50);
  for (bool warned = false;; warned = true) {
    try {
      return resolveAddress(host, port);
    } catch (const Error& e) {
      if (Clock::now() >= deadline) throw;
      if (!warned) CFX_WARN(kBootstrap, "%s; trying again until the timeout (%lld ms)", e.what(), static_cast<long long>(timeout.count()));
    }
    std::this_thread::sleep_for(std::min<Clock::duration>(backoff, deadline - Clock::now()));
    backoff = std::min(backoff * 2, std::chrono::milliseconds(1000));
  }
}

void addressRendezvous(const EnvLookup& env, const LauncherInfo& li, const std::string& host, uint16_t port,
                       std::chrono::milliseconds timeout, EnvBootstrap& out) {
  SockAddr addr = resolveWithin(host, port, timeout);
  std::string address = formatAddress(addr.storage);
  auto secret = configuredSecret(env);
  if (!secret) {
    secret = derivedSecret(li, address);
    if (li.rank == 0) {
      CFX_WARN(kBootstrap,
               "bootstrap: CONFLUX_SECRET is not set; the store secret is derived from job identifiers, which "
               "other users of these hosts could guess. Set CONFLUX_SECRET to 64 hex characters on every rank.");
    }
  }
  out.id.addr = addr.storage;
  out.id.addrLen = addr.len;
  out.id.secret = *secret;
  if (li.rank == 0) {
    std::string bindHost = isLoopback(addr.storage) ? host
                           : addr.storage.ss_family == AF_INET6 ? "::"
                                                                : "0.0.0.0";
    out.server = StoreServer::start(bindHost, port, *secret);
  }
}

// Exchanges of this process (cfxCommInitFromEnv may be called more than once; ranks call it in the same
// order), naming each exchange's PMIx key.
std::atomic<unsigned> pmixExchanges{0};

// Under a PMIx launcher: rank 0 starts the store (loopback when every rank is on this node, else the
// address pickBindHost chooses) with a random secret, and PMIx carries the encoded id to the others.
// False (and nothing started) when PMIx cannot be initialised here.
bool pmixRendezvous(const EnvLookup& env, const LauncherInfo& li, std::chrono::milliseconds timeout,
                    EnvBootstrap& out) {
  std::string mine;
  if (li.rank == 0) {
    const bool allLocal = li.localSize == li.size;
    auto secret = configuredSecret(env);
    out.server = secret ? StoreServer::start(pickBindHost(allLocal), 0, *secret) : StoreServer::startForNewJob(allLocal);
    out.id = out.server->uniqueId();
    const cfxUniqueId raw = encode(out.id);
    mine = toHex(raw.internal, sizeof raw.internal);
  }
  std::optional<std::string> shared = pmixShareFromRankZero(mine, li.rank, li.size, pmixExchanges++, timeout);
  if (!shared) {
    out.server.reset();
    return false;
  }
  if (li.rank != 0) {
    cfxUniqueId raw;
    if (shared->size() != 2 * sizeof raw.internal ||
        !fromHex(*shared, reinterpret_cast<uint8_t*>(raw.internal), sizeof raw.internal)) {
      throw Error(Code::InvalidArgument, "bootstrap: rank 0's unique id from PMIx is malformed (" +
                                             std::to_string(shared->size()) + " characters)");
    }
    out.id = decode(raw);
  }
  out.rendezvous = "PMIx";
  return true;
}

// PMIx is used when the build has it, CONFLUX_PMIX is not 0, and the PMIx variables describe this
// launch (PMIX_RANK is the rank the launcher detection chose).
bool pmixApplies(const EnvLookup& env, const LauncherInfo& li) {
  const char* enabled = lookupVar(env, config::Var::PMIX);
  if (!pmixBuiltIn() || (enabled != nullptr && std::string(enabled) == "0")) return false;
  const char* rank = lookupVar(env, "PMIX_RANK");
  return lookupVar(env, "PMIX_NAMESPACE") != nullptr && rank != nullptr && std::string(rank) == std::to_string(li.rank);
}

}  // namespace

RendezvousFile::~RendezvousFile() {
  if (::unlink(path_.c_str()) != 0 && errno != ENOENT) {
    CFX_WARN(kBootstrap, "bootstrap: cannot remove rendezvous file %s: %s", path_.c_str(), strerror(errno));
  }
}

EnvBootstrap resolveFromEnvironment(const EnvLookup& env, std::chrono::milliseconds timeout) {
  std::optional<LauncherInfo> li = detectLauncher(env);
  if (!li) {
    throw Error(Code::InvalidUsage,
                "bootstrap: no launcher environment found (looked for CONFLUX_RANK/CONFLUX_NRANKS, "
                "OMPI_COMM_WORLD_RANK/SIZE, PMIX_RANK, PMI_RANK/PMI_SIZE, SLURM_PROCID/SLURM_NTASKS, "
                "RANK/WORLD_SIZE)");
  }
  EnvBootstrap out;
  out.rank = li->rank;
  out.nranks = li->size;
  out.localRank = li->localRank;
  out.localSize = li->localSize;
  out.source = li->localFrom.empty() ? li->source : li->source + " (local ranks from " + li->localFrom + ")";

  if (const char* addr = lookupVar(env, config::Var::BOOTSTRAP_ADDR)) {
    auto [host, port] = splitHostPort(addr, config::info(config::Var::BOOTSTRAP_ADDR).name);
    out.rendezvous = "CONFLUX_BOOTSTRAP_ADDR";
    addressRendezvous(env, *li, host, port, timeout, out);
  } else if (const char* master = lookupVar(env, "MASTER_ADDR")) {
    const char* portText = lookupVar(env, "MASTER_PORT");
    std::string p = portText ? portText : "";
    if (p.empty() || p.size() > 5 || p.find_first_not_of("0123456789") != std::string::npos ||
        std::stoi(p) < 1 || std::stoi(p) >= 65535) {
      throw Error(Code::InvalidArgument, "launcher environment: MASTER_ADDR is set but MASTER_PORT='" + p +
                                             "' is not a port below 65535 (Conflux uses MASTER_PORT + 1)");
    }
    out.rendezvous = "MASTER_ADDR";
    addressRendezvous(env, *li, master, static_cast<uint16_t>(std::stoi(p) + 1), timeout, out);
  } else if (li->size == 1) {
    out.rendezvous = "none (single rank)";
    auto secret = configuredSecret(env);
    out.server = secret ? StoreServer::start("127.0.0.1", 0, *secret) : StoreServer::startForNewJob(true);
    out.id = out.server->uniqueId();
  } else if (pmixApplies(env, *li) && pmixRendezvous(env, *li, timeout, out)) {
    // done: the id came through PMIx
  } else if (li->localSize == li->size) {
    if (li->jobId.empty()) {
      throw Error(Code::InvalidUsage, "bootstrap: no job identifier to name the rendezvous file (" + li->source +
                                          "); set CONFLUX_JOB_ID or CONFLUX_BOOTSTRAP_ADDR");
    }
    fileRendezvous(env, *li, timeout, out);
  } else {
    throw Error(Code::InvalidUsage,
                "bootstrap: no rendezvous address for " + std::to_string(li->size) + " ranks (launcher: " +
                    li->source + (li->localSize < 0 ? ", local size unknown" : ", not all on this node") +
                    "); set CONFLUX_BOOTSTRAP_ADDR=host:port or MASTER_ADDR/MASTER_PORT" +
                    (pmixBuiltIn() ? ", or launch with PMIx (srun --mpi=pmix)" : ""));
  }
  CFX_INFO(kBootstrap, "bootstrap: rank %d/%d from %s, store %s via %s", out.rank, out.nranks,
           out.source.c_str(), describe(out.id).c_str(), out.rendezvous.c_str());
  return out;
}

}  // namespace conflux::bootstrap
