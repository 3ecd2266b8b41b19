#include "transport/ofi/comm_net.h"

#include <string>

namespace conflux::ofi {

CommNet::CommNet(std::shared_ptr<Transport> transport) : transport_(std::move(transport)) {
  rank_ = transport_->rank();
  ranks_.resize(size_t(transport_->nranks()));
  for (size_t r = 0; r < ranks_.size(); ++r) ranks_[r] = int(r);
}

CommNet::CommNet(const CommNet& parent, const std::vector<int>& members, int rank, uint32_t space)
    : transport_(parent.transport_), rank_(rank), space_(space) {
  if (space == 0 || space >= uint32_t(kMaxTagSpaces)) {
    throw Error(Code::InvalidArgument, "ofi: tag space " + std::to_string(space) + " is not one a child can hold");
  }
  if (rank < 0 || rank >= int(members.size())) {
    throw Error(Code::InvalidArgument, "ofi: rank " + std::to_string(rank) + " of " +
                                           std::to_string(members.size()) + " members is out of range");
  }
  for (int m : members) {
    if (m < 0 || m >= parent.nranks()) {
      throw Error(Code::InvalidArgument, "ofi: member " + std::to_string(m) + " is not a rank of the parent (" +
                                             std::to_string(parent.nranks()) + " ranks)");
    }
    ranks_.push_back(parent.ranks_[size_t(m)]);
  }
}

CommNet::~CommNet() {
  if (space_ != 0 && !retired_) transport_->releaseSpaces(uint32_t{1} << space_);
}

Request CommNet::isend(int peer, uint64_t tag, const void* buf, size_t bytes) {
  return transport_->isend(transportRank(peer), wireUserTag(tag), buf, bytes);
}

Request CommNet::irecv(int peer, uint64_t tag, void* buf, size_t bytes) {
  return transport_->irecv(transportRank(peer), wireUserTag(tag), buf, bytes);
}

}  // namespace conflux::ofi
