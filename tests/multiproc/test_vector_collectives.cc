// cfxGather, cfxScatter and cfxAllToAllv on real processes: every rank count from 1 to 8 (powers of two
// and not), odd counts, every root, in place where the call allows it, uneven and zero per-peer counts
// with gaps between blocks, and argument errors that name the argument.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "tests/multiproc/harness.h"
#include "tests/multiproc/reference.h"

using namespace conflux::testing;

namespace {

constexpr std::byte kUntouched{0x5A};

/// Element k of what rank `from` sends to rank `to`: distinct per pair and position, exact in every type.
int64_t valueOf(cfxDataType_t t, int from, int to, uint64_t k) {
  const int64_t v = static_cast<int64_t>((static_cast<uint64_t>(from) * 31 + static_cast<uint64_t>(to) * 17 + k) % 101);
  return isUnsigned(t) ? v : v - 50;
}

void fill(cfxDataType_t t, std::byte* p, uint64_t count, int from, int to) {
  for (uint64_t k = 0; k < count; ++k) storeValue(t, p, k, valueOf(t, from, to, k));
}

/// True when `count` elements at p are what `from` sends to `to`; reports the first difference.
bool holds(cfxDataType_t t, const std::byte* p, uint64_t count, int from, int to, const std::string& what) {
  std::vector<std::byte> want(count * typeSize(t) + 1);
  fill(t, want.data(), count, from, to);
  if (count == 0 || std::memcmp(p, want.data(), count * typeSize(t)) == 0) return true;
  for (uint64_t k = 0; k < count; ++k) {
    if (std::memcmp(p + k * typeSize(t), want.data() + k * typeSize(t), typeSize(t)) != 0) {
      ADD_FAILURE() << what << ": element " << k << " from rank " << from << " is " << showValue(t, p, k) << ", want "
                    << showValue(t, want.data(), k);
      return false;
    }
  }
  return false;
}

int gatherScatterSweep(int rank, int n, const cfxUniqueId& id) {
  cfxComm_t comm;
  if (cfxCommInitRank(&comm, n, id, rank) != cfxSuccess) return 2;
  int failures = 0;
  for (cfxDataType_t t : {cfxInt8, cfxFloat16, cfxFloat32, cfxFloat64, cfxUint64}) {
    const size_t elt = typeSize(t);
    for (uint64_t count : {uint64_t{0}, uint64_t{1}, uint64_t{7}, uint64_t{1023}, uint64_t{65539}}) {
      for (int root = 0; root < n; root += (n > 3 ? 2 : 1)) {
        for (bool inPlace : {false, true}) {
          const std::string where = "type " + std::to_string(t) + " count " + std::to_string(count) + " root " +
                                    std::to_string(root) + (inPlace ? " in place" : "");
          // Gather: rank r's block is what r sends to the root.
          std::vector<std::byte> all(count * elt * n + 1, kUntouched), mine(count * elt + 1, kUntouched);
          std::byte* send = mine.data();
          if (inPlace && rank == root) send = all.data() + static_cast<uint64_t>(root) * count * elt;
          fill(t, send, count, rank, root);
          if (cfxGather(send, rank == root ? all.data() : nullptr, count, t, root, comm, nullptr) != cfxSuccess) {
            ADD_FAILURE() << "gather " << where << ": " << cfxGetLastError(comm);
            ++failures;
            continue;
          }
          if (rank == root) {
            for (int q = 0; q < n; ++q) {
              if (!holds(t, all.data() + static_cast<uint64_t>(q) * count * elt, count, q, root, "gather " + where)) ++failures;
            }
            if (all.back() != kUntouched) ++failures;
          }
          // Scatter: block q of the root's buffer goes to rank q.
          std::vector<std::byte> blocks(count * elt * n + 1, kUntouched), out(count * elt + 1, kUntouched);
          if (rank == root) {
            for (int q = 0; q < n; ++q) fill(t, blocks.data() + static_cast<uint64_t>(q) * count * elt, count, root, q);
          }
          std::byte* recv = out.data();
          if (inPlace && rank == root) recv = blocks.data() + static_cast<uint64_t>(root) * count * elt;
          if (cfxScatter(rank == root ? blocks.data() : nullptr, recv, count, t, root, comm, nullptr) != cfxSuccess) {
            ADD_FAILURE() << "scatter " << where << ": " << cfxGetLastError(comm);
            ++failures;
            continue;
          }
          if (!holds(t, recv, count, root, rank, "scatter " + where)) ++failures;
          if (out.back() != kUntouched) ++failures;
          if (failures > 5) break;
        }
      }
    }
  }
  if (cfxCommDestroy(comm) != cfxSuccess) ++failures;
  return failures == 0 ? 0 : 1;
}

/// Elements rank `from` sends to rank `to` in case `c`: uneven, sometimes zero.
size_t countOf(int from, int to, uint64_t c) {
  if ((from + 2 * to + static_cast<int>(c)) % 4 == 0) return 0;
  return static_cast<size_t>((static_cast<uint64_t>(from) * 5 + static_cast<uint64_t>(to) * 3) % 7 * c + (from + to) % 3);
}

int allToAllvSweep(int rank, int n, const cfxUniqueId& id) {
  cfxComm_t comm;
  if (cfxCommInitRank(&comm, n, id, rank) != cfxSuccess) return 2;
  int failures = 0;
  constexpr size_t kGap = 3;  // elements left between blocks, which must stay untouched
  for (cfxDataType_t t : {cfxUint8, cfxBfloat16, cfxInt32, cfxFloat64}) {
    const size_t elt = typeSize(t);
    for (uint64_t c : {uint64_t{0}, uint64_t{1}, uint64_t{5}, uint64_t{4099}}) {
      std::vector<size_t> sc(n), sd(n), rc(n), rd(n);
      size_t sendTotal = 0, recvTotal = 0;
      for (int q = 0; q < n; ++q) {  // send blocks in rank order, receive blocks in reverse order
        sc[q] = countOf(rank, q, c);
        sd[q] = sendTotal;
        sendTotal += sc[q] + kGap;
      }
      for (int q = n - 1; q >= 0; --q) {
        rc[q] = countOf(q, rank, c);
        rd[q] = recvTotal;
        recvTotal += rc[q] + kGap;
      }
      std::vector<std::byte> send(sendTotal * elt + 1, kUntouched), recv(recvTotal * elt + 1, kUntouched);
      for (int q = 0; q < n; ++q) fill(t, send.data() + sd[q] * elt, sc[q], rank, q);
      if (cfxAllToAllv(send.data(), sc.data(), sd.data(), recv.data(), rc.data(), rd.data(), t, comm, nullptr) !=
          cfxSuccess) {
        ADD_FAILURE() << "alltoallv type " << t << " c " << c << ": " << cfxGetLastError(comm);
        ++failures;
        continue;
      }
      for (int q = 0; q < n; ++q) {
        const std::string where = "alltoallv type " + std::to_string(t) + " c " + std::to_string(c);
        if (!holds(t, recv.data() + rd[q] * elt, rc[q], q, rank, where)) ++failures;
        for (size_t g = 0; g < kGap * elt; ++g) {
          if (recv[(rd[q] + rc[q]) * elt + g] != kUntouched) {
            ADD_FAILURE() << where << ": wrote into the gap after the block from rank " << q;
            ++failures;
            break;
          }
        }
      }
    }
  }
  if (cfxCommDestroy(comm) != cfxSuccess) ++failures;
  return failures == 0 ? 0 : 1;
}

class VectorCollectives : public ::testing::TestWithParam<int> {};

TEST_P(VectorCollectives, GatherAndScatterMatchReference) {
  EXPECT_TRUE(allSucceeded(runRanks(GetParam(), gatherScatterSweep)));
}

TEST_P(VectorCollectives, AllToAllvMatchesReference) {
  EXPECT_TRUE(allSucceeded(runRanks(GetParam(), allToAllvSweep)));
}

INSTANTIATE_TEST_SUITE_P(Ranks, VectorCollectives, ::testing::Range(1, 9),
                         [](const auto& p) { return std::to_string(p.param) + "ranks"; });

TEST(VectorCollectivesApi, BadArgumentsNameTheArgument) {
  auto out = runRanks(2, [](int rank, int n, const cfxUniqueId& id) -> int {
    cfxComm_t comm;
    if (cfxCommInitRank(&comm, n, id, rank) != cfxSuccess) return 2;
    std::vector<float> a(16, 1.0f), b(32, 0.0f);
    EXPECT_EQ(cfxGather(a.data(), b.data(), 16, cfxFloat32, 2, comm, nullptr), cfxInvalidArgument);
    EXPECT_TRUE(lastErrorMentions("root"));
    EXPECT_EQ(cfxGather(nullptr, b.data(), 16, cfxFloat32, 0, comm, nullptr), cfxInvalidArgument);
    EXPECT_TRUE(lastErrorMentions("sendbuff"));
    EXPECT_EQ(cfxScatter(a.data(), nullptr, 8, cfxFloat32, 0, comm, nullptr), cfxInvalidArgument);
    EXPECT_TRUE(lastErrorMentions("recvbuff"));
    EXPECT_EQ(cfxGather(b.data() + 1, b.data(), 8, cfxFloat32, rank, comm, nullptr), cfxInvalidArgument);
    EXPECT_TRUE(lastErrorMentions("overlap"));
    EXPECT_EQ(cfxScatter(a.data(), a.data(), 8, cfxFloat32, 0, nullptr, nullptr), cfxInvalidArgument);
    EXPECT_TRUE(lastErrorMentions("comm"));
    EXPECT_EQ(cfxGather(a.data(), b.data(), 16, static_cast<cfxDataType_t>(99), 0, comm, nullptr), cfxInvalidArgument);
    EXPECT_TRUE(lastErrorMentions("datatype"));
    const size_t counts[2] = {4, 4}, displs[2] = {0, 4}, overlapping[2] = {0, 2};
    EXPECT_EQ(cfxAllToAllv(a.data(), nullptr, displs, b.data(), counts, displs, cfxFloat32, comm, nullptr),
              cfxInvalidArgument);
    EXPECT_TRUE(lastErrorMentions("sendcounts"));
    EXPECT_EQ(cfxAllToAllv(a.data(), counts, displs, b.data(), counts, nullptr, cfxFloat32, comm, nullptr),
              cfxInvalidArgument);
    EXPECT_TRUE(lastErrorMentions("rdispls"));
    EXPECT_EQ(cfxAllToAllv(a.data(), counts, displs, b.data(), counts, overlapping, cfxFloat32, comm, nullptr),
              cfxInvalidArgument);
    EXPECT_TRUE(lastErrorMentions("overlap"));
    EXPECT_EQ(cfxAllToAllv(a.data(), counts, displs, a.data(), counts, displs, cfxFloat32, comm, nullptr),
              cfxInvalidArgument);
    EXPECT_TRUE(lastErrorMentions("in place"));
    const size_t huge[2] = {SIZE_MAX / 2, 1};
    EXPECT_EQ(cfxAllToAllv(a.data(), huge, displs, b.data(), counts, displs, cfxFloat32, comm, nullptr),
              cfxInvalidArgument);
    EXPECT_TRUE(lastErrorMentions("overflow"));
    // Nothing was sent: the communicator still works, and the buffers are as they were.
    for (float v : b) EXPECT_EQ(v, 0.0f);
    EXPECT_EQ(cfxAllToAllv(a.data(), counts, displs, b.data(), counts, displs, cfxFloat32, comm, nullptr), cfxSuccess);
    for (int i = 0; i < 8; ++i) EXPECT_EQ(b[i], 1.0f);
    EXPECT_EQ(cfxCommDestroy(comm), cfxSuccess);
    return 0;
  });
  EXPECT_TRUE(allSucceeded(out));
}

}  // namespace
