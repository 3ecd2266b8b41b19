#include "src/direct_call.h"

#include <algorithm>
#include <string>

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

}  // namespace

DirectCalls::DirectCalls(shm::ShmWorld& world, const ExecEnv& env)
    : world_(world), env_(env), mappings_(std::max<size_t>(64, 4 * static_cast<size_t>(world.localSize()))) {}

bool DirectCalls::needsSend(Collective coll, int rank, int root) {
  return coll != Collective::Broadcast || rank == root;
}

bool DirectCalls::publish(Collective coll, int root, const void* send, uint64_t sendBytes, const void* recv,
                          uint64_t recvBytes) {
  shm::DirectSlot& slot = world_.directSlot(world_.localRank());
  slot.send = describe(send, sendBytes);
  slot.recv = describe(recv, recvBytes);
  slot.seq.store(++seq_, std::memory_order_release);
  return (!needsSend(coll, env_.rank, root) || slot.send.id != 0) && (!needsRecv(coll) || slot.recv.id != 0);
}

bool DirectCalls::resolve(Collective coll, int root, ExecBuffers& buffers) {
  const int n = env_.nranks;
  send_.assign(n, nullptr);
  recv_.assign(n, nullptr);
  for (int g = 0; g < n; ++g) {
    const int l = env_.localIndex[g];
    const shm::DirectSlot& slot = world_.directSlot(l);
    if (slot.seq.load(std::memory_order_acquire) != seq_) {
      throw Error(Code::InternalError, "direct call #" + std::to_string(seq_) + ": rank " + std::to_string(g) +
                                           " published buffers for another call");
    }
    if (needsSend(coll, g, root) && slot.send.id == 0) return false;
    if (needsRecv(coll) && slot.recv.id == 0) return false;
  }
  for (int g = 0; g < n; ++g) {
    if (g == env_.rank) continue;
    const int l = env_.localIndex[g];
    const shm::DirectSlot& slot = world_.directSlot(l);
    const int pid = world_.pidOf(l);
    if (pid == 0) {
      throw Error(Code::SystemError, "rank " + std::to_string(g) + " is in another pid namespace: its buffers cannot be mapped");
    }
    if (needsSend(coll, g, root)) {
      send_[g] = mappings_.map(pid, slot.send.fd, slot.send.id, slot.send.bytes) + slot.send.offset;
    }
    if (needsRecv(coll)) recv_[g] = mappings_.map(pid, slot.recv.fd, slot.recv.id, slot.recv.bytes) + slot.recv.offset;
  }
  buffers.peerSend = send_.data();
  buffers.peerRecv = recv_.data();
  return true;
}

}  // namespace conflux
