// The eager path's size rule (src/eager.h): the bytes every rank publishes per collective, and overflow
// of count x element size x ranks reported as UINT64_MAX (never eager) for every collective, even where
// only count x element size is published; and the default limit (CONFLUX_EAGER_BYTES=auto) per rank count.
#include <gtest/gtest.h>

#include <cstdint>

#include "src/eager.h"

namespace {

using conflux::Collective;
using conflux::autoEagerBytes;
using conflux::eagerCapacity;
using conflux::eagerInputBytes;

TEST(EagerInputBytes, WhatEachCollectivePublishes) {
  EXPECT_EQ(eagerInputBytes(Collective::AllReduce, 10, 4, 3), 40u);
  EXPECT_EQ(eagerInputBytes(Collective::Broadcast, 10, 4, 3), 40u);
  EXPECT_EQ(eagerInputBytes(Collective::AllGather, 10, 4, 3), 40u);
  EXPECT_EQ(eagerInputBytes(Collective::ReduceScatter, 10, 4, 3), 120u);
  EXPECT_EQ(eagerInputBytes(Collective::AllToAll, 10, 4, 3), 120u);
  EXPECT_EQ(eagerInputBytes(Collective::SendRecv, 10, 4, 3), 0u);
  EXPECT_EQ(eagerInputBytes(Collective::AllReduce, 10, 0, 3), UINT64_MAX);  // no element size
}

TEST(EagerInputBytes, OverflowAnywhereIsNeverEager) {
  const uint64_t fitsTimesElt = UINT64_MAX / 8;  // x 8 fits, x 8 x 3 does not
  for (Collective c : {Collective::AllReduce, Collective::Broadcast, Collective::ReduceScatter, Collective::AllToAll}) {
    EXPECT_EQ(eagerInputBytes(c, fitsTimesElt, 8, 3), UINT64_MAX) << int(c);
    EXPECT_EQ(eagerInputBytes(c, UINT64_MAX, 2, 1), UINT64_MAX) << int(c);
  }
  EXPECT_EQ(eagerInputBytes(Collective::AllReduce, fitsTimesElt, 8, 1), fitsTimesElt * 8);
  const uint64_t third = UINT64_MAX / 24;  // x 8 x 3 just fits
  EXPECT_EQ(eagerInputBytes(Collective::AllToAll, third, 8, 3), third * 24);
}

TEST(AutoEagerBytes, HalvesAsRanksMultiplyAndFitsASlot) {
  EXPECT_EQ(autoEagerBytes(1), 65536u);
  EXPECT_EQ(autoEagerBytes(2), 65536u);
  EXPECT_EQ(autoEagerBytes(4), 65536u);
  EXPECT_EQ(autoEagerBytes(5), 32768u);
  EXPECT_EQ(autoEagerBytes(8), 32768u);
  EXPECT_EQ(autoEagerBytes(9), 16384u);
  EXPECT_EQ(autoEagerBytes(256), 16384u);
  EXPECT_LE(autoEagerBytes(2), eagerCapacity());
}

}  // namespace
