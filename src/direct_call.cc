#include "src/direct_call.h"

#include <algorithm>
#include <string>

#include "core/config.h"
#include "core/error.h"
#include "transport/shm/layout.h"

namespace conflux {
namespace {

shm::SharedBufferRef describe(const void* p, uint64_t bytes) {
  shm::SharedBufferRef ref{};
  if (auto block = shm::findShared(p, bytes)) {
    ref.id = block->id;
    ref.bytes = block->bytes;
    ref.offset = static_cast<uint64_t>(static_cast<const std::byte*>(p) - block->base);
    ref.fd = block->fd;
  }
  return ref;
}

SingleCopyPolicy::Use useOf(const std::string& v) {
  if (v == "auto" || v == "1" || v == "on") return SingleCopyPolicy::Use::WhenWarm;
  if (v == "always") return SingleCopyPolicy::Use::Always;
  if (v == "0" || v == "off") return SingleCopyPolicy::Use::Off;
  throw Error(Code::InvalidArgument, "CONFLUX_SHM_CMA='" + v + "': must be auto, always or 0");
}

}  // namespace

SingleCopyPolicy SingleCopyPolicy::fromConfig(bool possible) {
  SingleCopyPolicy p;
  const Use use = useOf(config::getString(config::Var::SHM_CMA));
  const int64_t minBytes = config::getInt(config::Var::SHM_CMA_MIN_BYTES);
  if (minBytes < 0) {
    throw Error(Code::InvalidArgument, "CONFLUX_SHM_CMA_MIN_BYTES=" + std::to_string(minBytes) + ": must be >= 0");
  }
  p.use = possible ? use : Use::Off;
  p.minBytes = static_cast<uint64_t>(minBytes);
  return p;
}

bool SingleCopyPolicy::wanted() { return useOf(config::getString(config::Var::SHM_CMA)) != Use::Off; }

DirectCalls::DirectCalls(shm::ShmWorld& world, const ExecEnv& env, const SingleCopyPolicy& singleCopy)
    : world_(world), env_(env), singleCopy_(singleCopy), mappings_(std::max<size_t>(64, 4 * static_cast<size_t>(world.localSize()))) {}

bool DirectCalls::needsSend(Collective coll, int rank, int root) {
  return coll != Collective::Broadcast || rank == root;
}

bool DirectCalls::offersSingleCopy(const Call& c) const {
  const bool copiesOnly =
      c.coll == Collective::AllGather || c.coll == Collective::Broadcast || c.coll == Collective::AllToAll;
  if (singleCopy_.use == SingleCopyPolicy::Use::Off || !copiesOnly || c.pieceBytes < singleCopy_.minBytes) return false;
  if (singleCopy_.use == SingleCopyPolicy::Use::Always) return true;
  // auto: where it measured faster (docs/algorithms.md). A kernel copy costs about two memcpys (it pins
  // every page), so per rank an all-gather reads 2(n-1)+1 copies' worth against staging's n+1: even on
  // 2 ranks only, where it saves staging's chunks and barriers. A broadcast leaves the root idle while
  // each peer copies alone, where staging pipelines root and peer: slower. Pieces below 512 KiB won
  // only on buffers touched just before (a loop over the same buffers); in sweeps whose buffers the
  // reuse distance still called warm, 128-256 KiB pieces read this way were up to 30% slower than staged.
  const bool cached = c.pieceBytes >= kLargePieceBytes ? c.warm : c.hot;
  return cached && env_.nranks == 2 && c.coll != Collective::Broadcast;
}

bool DirectCalls::publish(const Call& c) {
  shm::DirectSlot& slot = world_.directSlot(world_.localRank());
  slot.send = describe(c.send, c.sendBytes);
  slot.recv = describe(c.recv, c.recvBytes);
  slot.sendAddress = reinterpret_cast<uint64_t>(c.send);
  slot.sendBytes = c.sendBytes;
  slot.coll = static_cast<uint32_t>(c.coll);
  slot.singleCopy = offersSingleCopy(c) ? 1 : 0;
  slot.seq.store(++seq_, std::memory_order_release);
  const bool mappable = (!needsSend(c.coll, env_.rank, c.root) || slot.send.id != 0) && (!needsRecv(c.coll) || slot.recv.id != 0);
  return mappable || slot.singleCopy != 0;
}

DirectCalls::Mode DirectCalls::resolve(Collective coll, int root, ExecBuffers& buffers) {
  const int n = env_.nranks;
  bool allMappable = true, allOffer = true;
  for (int g = 0; g < n; ++g) {
    const shm::DirectSlot& slot = world_.directSlot(env_.localIndex[g]);
    if (slot.seq.load(std::memory_order_acquire) != seq_) {
      throw Error(Code::InternalError, "direct call #" + std::to_string(seq_) + ": rank " + std::to_string(g) +
                                           " published buffers for another call");
    }
    // The plan reads each peer's whole send buffer: calls that differ (a count, the collective) must fail
    // here, naming them, not read past a peer's buffer (the argument check comes after the plan).
    const shm::DirectSlot& own = world_.directSlot(world_.localRank());
    if (slot.coll != own.coll || slot.sendBytes != own.sendBytes) {
      throw Error(Code::InvalidUsage,
                  "direct call #" + std::to_string(seq_) + ": rank " + std::to_string(g) + " called " +
                      std::string(collectiveName(static_cast<Collective>(slot.coll))) + " sending " +
                      std::to_string(slot.sendBytes) + " bytes, rank " + std::to_string(env_.rank) + " " +
                      std::string(collectiveName(static_cast<Collective>(own.coll))) + " sending " +
                      std::to_string(own.sendBytes) + ": the ranks' calls differ");
    }
    if ((needsSend(coll, g, root) && slot.send.id == 0) || (needsRecv(coll) && slot.recv.id == 0)) allMappable = false;
    if (slot.singleCopy == 0) allOffer = false;
  }
  if (!allMappable && !allOffer) return Mode::Staged;
  send_.assign(n, nullptr);
  recv_.assign(n, nullptr);
  process_.assign(n, 0);
  for (int g = 0; g < n; ++g) {
    if (g == env_.rank) continue;
    const int l = env_.localIndex[g];
    const shm::DirectSlot& slot = world_.directSlot(l);
    const int pid = world_.pidOf(l);
    if (pid == 0) {
      throw Error(Code::SystemError, "rank " + std::to_string(g) + " is in another pid namespace: its buffers cannot be mapped");
    }
    if (needsSend(coll, g, root) && slot.send.id == 0) {  // private: read where it is (SingleCopy only)
      send_[g] = reinterpret_cast<const std::byte*>(slot.sendAddress);
      process_[g] = pid;
    } else if (needsSend(coll, g, root)) {
      send_[g] = mappings_.map(pid, slot.send.fd, slot.send.id, slot.send.bytes) + slot.send.offset;
    }
    if (needsRecv(coll)) recv_[g] = mappings_.map(pid, slot.recv.fd, slot.recv.id, slot.recv.bytes) + slot.recv.offset;
  }
  buffers.peerSend = send_.data();
  buffers.peerRecv = recv_.data();
  buffers.peerProcess = allMappable ? nullptr : process_.data();
  return allMappable ? Mode::Mapped : Mode::SingleCopy;
}

}  // namespace conflux
