#include "src/group.h"

#include <algorithm>
#include <variant>
#include <vector>

namespace conflux::group {
namespace {

struct Pending {
  CommunicatorImpl* comm;
  std::variant<CallArgs, P2pOp> call;
};

struct State {
  int depth = 0;
  std::vector<Pending> queue;
};

thread_local State tls;

}  // namespace

void start() { ++tls.depth; }
bool active() { return tls.depth > 0; }

void enqueue(CommunicatorImpl* comm, const CallArgs& call) { tls.queue.push_back({comm, call}); }
void enqueue(CommunicatorImpl* comm, const P2pOp& op) { tls.queue.push_back({comm, op}); }

Status end() {
  if (tls.depth == 0) return Status(Code::InvalidUsage, "cfxGroupEnd without a matching cfxGroupStart");
  if (--tls.depth > 0) return Status::ok();
  std::vector<Pending> queue;
  queue.swap(tls.queue);

  Status first;
  auto note = [&](const Status& s) {
    if (first.isOk() && !s.isOk()) first = s;
  };
  // Collectives in call order.
  for (const Pending& p : queue) {
    if (const auto* c = std::get_if<CallArgs>(&p.call)) note(p.comm->run(*c));
  }
  // Then each communicator's point-to-point operations as one concurrent batch.
  std::vector<CommunicatorImpl*> comms;
  for (const Pending& p : queue) {
    if (std::holds_alternative<P2pOp>(p.call) &&
        std::find(comms.begin(), comms.end(), p.comm) == comms.end()) {
      comms.push_back(p.comm);
    }
  }
  for (CommunicatorImpl* comm : comms) {
    std::vector<P2pOp> ops;
    for (const Pending& p : queue) {
      if (p.comm == comm) {
        if (const auto* op = std::get_if<P2pOp>(&p.call)) ops.push_back(*op);
      }
    }
    note(comm->runP2p(ops));
  }
  return first;
}

void forget(CommunicatorImpl* comm) {
  std::erase_if(tls.queue, [&](const Pending& p) { return p.comm == comm; });
}

}  // namespace conflux::group
