// conflux-perf net: the raw libfabric transport (conflux::ofi::Transport), configured by the same
// CONFLUX_OFI_* variables as the communicator: chunking, requests in flight, rails.
#include <cstdio>
#include <stdexcept>

#include "net_target.h"
#include "transport/ofi/tags.h"
#include "transport/ofi/transport.h"

namespace cfxperf {
namespace {

using conflux::ofi::Request;
using conflux::ofi::Transport;

// Operations one direction may have in flight: the transport queues beyond its own per-peer cap, so
// this only sizes the table of handles (the window is capped to the plugins' 32 anyway).
constexpr int kMaxInFlight = 64;

class RawTarget final : public NetTarget {
 public:
  RawTarget(int rank, const NetBuffers& buffers, const PeerExchange& exchange) : rank_(rank), buffers_(buffers) {
    conflux::ofi::Options options;
    options.rank = rank;
    options.nranks = 2;
    auto allGather = [&](const std::vector<uint8_t>& mine) {
      std::vector<uint8_t> peer = exchange(mine);
      std::vector<uint8_t> all = rank == 0 ? mine : peer;
      const std::vector<uint8_t>& second = rank == 0 ? peer : mine;
      all.insert(all.end(), second.begin(), second.end());
      return all;
    };
    transport_ = Transport::create(options, allGather);
    sends_.resize(kMaxInFlight);
    recvs_.resize(kMaxInFlight);
  }

  std::string label() const override { return "raw"; }

  std::string describe() const override {
    const auto& c = transport_->capabilities();
    char line[512];
    std::snprintf(line, sizeof line, "raw conflux::ofi::Transport: provider %s, domain %s, %d rail(s), chunk %zu B, "
                  "%d chunks in flight per rail", c.provider.c_str(), c.domain.c_str(), c.rails, c.chunkBytes, c.inflight);
    return line;
  }

  int maxInFlight() const override { return kMaxInFlight; }

  int postSend(size_t bytes, int tag) override {
    return post(sends_, 0, transport_->isend(1 - rank_, tagOf(tag), buffers_.send, bytes));
  }
  int postRecv(size_t bytes, int tag) override {
    return post(recvs_, kMaxInFlight, transport_->irecv(1 - rank_, tagOf(tag), buffers_.recv, bytes));
  }

  bool test(int handle, size_t* bytes) override {
    Request& r = handle >= kMaxInFlight ? recvs_[size_t(handle - kMaxInFlight)] : sends_[size_t(handle)];
    if (!transport_->test(r)) return false;
    if (r.failed()) throw std::runtime_error("raw transport: " + r.status().message());
    if (bytes != nullptr) *bytes = r.bytes();
    r = Request();
    return true;
  }

 private:
  static uint64_t tagOf(int tag) { return conflux::ofi::makeUserTag(0, uint32_t(tag)); }

  static int post(std::vector<Request>& slots, int base, Request request) {
    for (size_t i = 0; i < slots.size(); ++i) {
      if (slots[i].valid()) continue;
      slots[i] = std::move(request);
      return base + int(i);
    }
    throw std::runtime_error("raw transport: more than 64 operations in flight");
  }

  int rank_;
  NetBuffers buffers_;
  std::unique_ptr<Transport> transport_;
  std::vector<Request> sends_, recvs_;
};

}  // namespace

std::unique_ptr<NetTarget> makeRawTarget(int rank, const NetBuffers& buffers, const PeerExchange& exchange) {
  return std::make_unique<RawTarget>(rank, buffers, exchange);
}

}  // namespace cfxperf
