// The reduction ops beyond NCCL's five on real processes: pre-multiplied sums (cfxRedOpCreatePreMulSum)
// with per-rank scalars of both residences, fractional scalars, handles and their errors; the bitwise ops
// refused on floating types. (Every collective x type x op, these included, is in test_collectives.)
#include <gtest/gtest.h>

#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "tests/multiproc/harness.h"

using namespace conflux::testing;

namespace {

TEST(PreMulSum, HandlesAndTheirErrors) {
  auto out = runRanks(2, [](int rank, int n, const cfxUniqueId& id) -> int {
    cfxComm_t comm, other;
    if (cfxCommInitRank(&comm, n, id, rank) != cfxSuccess) return 2;
    if (cfxCommSplit(comm, 0, rank, &other, nullptr) != cfxSuccess) return 2;
    float scalar = 2.0f;
    cfxRedOp_t op;
    EXPECT_EQ(cfxRedOpCreatePreMulSum(nullptr, &scalar, cfxFloat32, cfxScalarHostImmediate, comm), cfxInvalidArgument);
    EXPECT_TRUE(lastErrorMentions("op"));
    EXPECT_EQ(cfxRedOpCreatePreMulSum(&op, nullptr, cfxFloat32, cfxScalarHostImmediate, comm), cfxInvalidArgument);
    EXPECT_TRUE(lastErrorMentions("scalar"));
    EXPECT_EQ(cfxRedOpCreatePreMulSum(&op, &scalar, static_cast<cfxDataType_t>(77), cfxScalarHostImmediate, comm),
              cfxInvalidArgument);
    EXPECT_TRUE(lastErrorMentions("datatype"));
    EXPECT_EQ(cfxRedOpCreatePreMulSum(&op, &scalar, cfxFloat32, static_cast<cfxScalarResidence_t>(5), comm),
              cfxInvalidArgument);
    EXPECT_TRUE(lastErrorMentions("residence"));
    if (cfxRedOpCreatePreMulSum(&op, &scalar, cfxFloat32, cfxScalarHostImmediate, comm) != cfxSuccess) return 3;
    EXPECT_GE(static_cast<int>(op), static_cast<int>(cfxNumOps));
    scalar = 100.0f;  // immediate: the value was taken at creation
    std::vector<float> f(333, 1.5f);
    std::vector<double> d(333, 1.5);
    EXPECT_EQ(cfxAllReduce(f.data(), f.data(), f.size(), cfxFloat32, op, comm, nullptr), cfxSuccess);
    EXPECT_EQ(f[332], 6.0f);  // 2 * 1.5 on each of two ranks
    EXPECT_EQ(cfxAllReduce(d.data(), d.data(), d.size(), cfxFloat64, op, comm, nullptr), cfxInvalidArgument);
    EXPECT_TRUE(lastErrorMentions("float32"));
    EXPECT_EQ(cfxAllReduce(f.data(), f.data(), f.size(), cfxFloat32, op, other, nullptr), cfxInvalidArgument);
    EXPECT_TRUE(lastErrorMentions("op"));
    EXPECT_EQ(cfxRedOpDestroy(op, other), cfxInvalidArgument);
    EXPECT_EQ(cfxRedOpDestroy(op, comm), cfxSuccess);
    EXPECT_EQ(cfxRedOpDestroy(op, comm), cfxInvalidArgument);
    EXPECT_TRUE(lastErrorMentions("op"));
    EXPECT_EQ(cfxAllReduce(f.data(), f.data(), f.size(), cfxFloat32, op, comm, nullptr), cfxInvalidArgument);
    // Bitwise ops exist for integers only.
    EXPECT_EQ(cfxAllReduce(f.data(), f.data(), f.size(), cfxFloat32, cfxBand, comm, nullptr), cfxInvalidArgument);
    EXPECT_TRUE(lastErrorMentions("integer"));
    EXPECT_EQ(cfxReduceScatter(f.data(), f.data(), 1, cfxBfloat16, cfxBxor, comm, nullptr), cfxInvalidArgument);
    EXPECT_TRUE(lastErrorMentions("integer"));
    // None of the refused calls reached the peer: the communicator still agrees with it.
    std::vector<int32_t> bits(100, rank == 0 ? 0x0F0F : 0x00FF);
    EXPECT_EQ(cfxAllReduce(bits.data(), bits.data(), bits.size(), cfxInt32, cfxBxor, comm, nullptr), cfxSuccess);
    EXPECT_EQ(bits[99], 0x0FF0);
    EXPECT_EQ(cfxCommDestroy(other), cfxSuccess);
    EXPECT_EQ(cfxCommDestroy(comm), cfxSuccess);
    return 0;
  });
  EXPECT_TRUE(allSucceeded(out));
}

// cfxScalarDevice with host buffers: the scalar is read when each call runs; ranks pass different
// scalars; fractional values; sizes on the eager path, the plans and across pieces.
TEST(PreMulSum, ScalarReadAtEachCallWithPerRankValues) {
  auto out = runRanks(3, [](int rank, int n, const cfxUniqueId& id) -> int {
    cfxComm_t comm;
    if (cfxCommInitRank(&comm, n, id, rank) != cfxSuccess) return 2;
    double scalar = 0.0;
    cfxRedOp_t op;
    if (cfxRedOpCreatePreMulSum(&op, &scalar, cfxFloat64, cfxScalarDevice, comm) != cfxSuccess) return 2;
    for (size_t count : {size_t{1}, size_t{500}, size_t{300001}}) {
      for (int round = 0; round < 3; ++round) {
        scalar = 0.25 * (rank + 1) + round;  // ranks 0.25, 0.5, 0.75 (+ round)
        std::vector<double> in(count), outv(count, -1.0);
        for (size_t i = 0; i < count; ++i) in[i] = static_cast<double>(i % 8);
        EXPECT_EQ(cfxAllReduce(in.data(), outv.data(), count, cfxFloat64, op, comm, nullptr), cfxSuccess)
            << cfxGetLastError(comm);
        const double sumScalars = 0.25 + 0.5 + 0.75 + 3 * round;
        for (size_t i = 0; i < count; i += 997) {
          if (outv[i] != sumScalars * static_cast<double>(i % 8)) {
            ADD_FAILURE() << "count " << count << " round " << round << " element " << i << ": " << outv[i];
            break;
          }
        }
        // Reduce to a root (in place) and reduce-scatter (in place) too.
        std::vector<double> red(count, 4.0);
        const int root = round % n;
        EXPECT_EQ(cfxReduce(red.data(), red.data(), count, cfxFloat64, op, root, comm, nullptr), cfxSuccess);
        if (rank == root) {
          EXPECT_EQ(red[0], 4.0 * sumScalars);
          EXPECT_EQ(red[count - 1], 4.0 * sumScalars);
        }
        std::vector<double> rs(count * n);
        for (size_t i = 0; i < rs.size(); ++i) rs[i] = 2.0;
        EXPECT_EQ(cfxReduceScatter(rs.data(), rs.data() + rank * count, count, cfxFloat64, op, comm, nullptr), cfxSuccess);
        EXPECT_EQ(rs[rank * count + count - 1], 2.0 * sumScalars);
      }
    }
    EXPECT_EQ(cfxRedOpDestroy(op, comm), cfxSuccess);
    EXPECT_EQ(cfxCommDestroy(comm), cfxSuccess);
    return 0;
  });
  EXPECT_TRUE(allSucceeded(out));
}

}  // namespace
