// Single-copy reads of another process's memory (transport/shm/cross_memory.h) and the shared-memory
// world's start-up probe of them (ShmWorld::crossMemory).
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "test_shm_util.h"
#include "transport/shm/cross_memory.h"

using namespace conflux::shm;
using namespace shmtest;

namespace {

/// A child process that fills `bytes` of its own heap with a pattern, reports the buffer's address in a
/// shared word and waits to be killed. The pattern is written after the fork: the parent's pages differ.
class PatternChild {
 public:
  explicit PatternChild(size_t bytes) {
    auto* shared = static_cast<uint64_t*>(
        ::mmap(nullptr, 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0));
    shared_ = shared;
    pid_ = ::fork();
    if (pid_ == 0) {
      auto* p = new unsigned char[bytes];
      for (size_t i = 0; i < bytes; ++i) p[i] = patternAt(i);
      __atomic_store_n(&shared[0], reinterpret_cast<uint64_t>(p), __ATOMIC_RELEASE);
      for (;;) ::pause();
    }
    while (__atomic_load_n(&shared_[0], __ATOMIC_ACQUIRE) == 0) ::usleep(100);
  }
  ~PatternChild() {
    stop();
    ::munmap(shared_, 4096);
  }
  /// Kills the child and waits until it has exited, without reaping it: its pid stays its own (a zombie).
  void kill() {
    if (pid_ <= 0 || killed_) return;
    ::kill(pid_, SIGKILL);
    siginfo_t info{};
    ::waitid(P_PID, static_cast<id_t>(pid_), &info, WEXITED | WNOWAIT);
    killed_ = true;
  }
  void stop() {
    if (pid_ <= 0) return;
    kill();
    ::waitpid(pid_, nullptr, 0);
    stopped_ = pid_;
    pid_ = -1;
  }
  static unsigned char patternAt(size_t i) { return static_cast<unsigned char>((i * 131 + 7) ^ (i >> 12)); }
  pid_t pid() const { return pid_ > 0 ? pid_ : stopped_; }
  uint64_t address() const { return shared_[0]; }

 private:
  uint64_t* shared_ = nullptr;
  pid_t pid_ = -1;
  pid_t stopped_ = -1;
  bool killed_ = false;
};

/// Whether this machine lets a process read a sibling's memory, as the ranks of a job do (ptrace
/// permission: Yama's ptrace_scope 1 allows a parent but not a sibling; seccomp in containers).
bool permitted() {
  PatternChild owner(64);
  const pid_t reader = ::fork();
  if (reader == 0) {
    std::string why;
    ::_exit(canReadPeerMemory(owner.pid(), crossMemoryProbeAddress(), why) ? 0 : 1);
  }
  int status = 0;
  ::waitpid(reader, &status, 0);
  return WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

#define SKIP_WITHOUT_CROSS_MEMORY() \
  if (!permitted()) GTEST_SKIP() << "process_vm_readv is not permitted here (ptrace policy)"

}  // namespace

TEST(CrossMemory, ReadsAnotherProcesssPrivateMemory) {
  SKIP_WITHOUT_CROSS_MEMORY();
  constexpr size_t kBytes = (size_t{3} << 20) + 12345;  // many pages, an odd tail
  PatternChild child(kBytes);
  std::vector<unsigned char> out(kBytes, 0);
  ASSERT_EQ(readPeerMemory(child.pid(), child.address(), out.data(), kBytes), 0) << std::strerror(errno);
  for (size_t i = 0; i < kBytes; ++i) ASSERT_EQ(out[i], PatternChild::patternAt(i)) << "byte " << i;
  // An unaligned piece from the middle.
  std::vector<unsigned char> piece(5000, 0);
  ASSERT_EQ(readPeerMemory(child.pid(), child.address() + 4093, piece.data(), piece.size()), 0);
  for (size_t i = 0; i < piece.size(); ++i) ASSERT_EQ(piece[i], PatternChild::patternAt(4093 + i));
  EXPECT_EQ(readPeerMemory(child.pid(), child.address(), out.data(), 0), 0);  // nothing to read
}

// Destinations 1-31 bytes past the source modulo 4 KiB go through the bounce buffer, in pieces: every
// byte arrives, nothing around the destination is touched, whatever the two page offsets.
TEST(CrossMemory, ReadsAtEveryRelativePageOffset) {
  SKIP_WITHOUT_CROSS_MEMORY();
  constexpr size_t kBytes = (size_t{300} << 10) + 7;  // more than one bounce piece, an odd tail
  constexpr size_t kGuard = 64;
  PatternChild child(kBytes + 8192);
  std::vector<unsigned char> area(kBytes + 8192 + 2 * kGuard);
  for (size_t srcOff : {size_t{0}, size_t{5}, size_t{4090}}) {
    for (size_t ahead : {0, 1, 15, 16, 31, 32, 63, 4095}) {
      const uintptr_t base = reinterpret_cast<uintptr_t>(area.data()) + kGuard;
      const uintptr_t want = (child.address() + srcOff + ahead) % 4096;
      unsigned char* dst = reinterpret_cast<unsigned char*>(base + (want - base % 4096 + 4096) % 4096);
      const size_t bytes = srcOff == 5 ? 3000 : kBytes;  // a small read too
      std::fill(area.begin(), area.end(), 0xEE);
#if defined(__x86_64__)
      ASSERT_EQ(kernelCopyAliasesSlowly(dst, child.address() + srcOff, bytes), ahead >= 1 && ahead <= 31);
#endif
      ASSERT_EQ(readPeerMemory(child.pid(), child.address() + srcOff, dst, bytes), 0) << "ahead " << ahead;
      for (size_t i = 0; i < bytes; ++i) {
        ASSERT_EQ(dst[i], PatternChild::patternAt(srcOff + i)) << "ahead " << ahead << " byte " << i;
      }
      for (unsigned char* p = area.data(); p < dst; ++p) ASSERT_EQ(*p, 0xEE) << "before, ahead " << ahead;
      for (unsigned char* p = dst + bytes; p < area.data() + area.size(); ++p) ASSERT_EQ(*p, 0xEE) << "after";
    }
  }
  EXPECT_FALSE(kernelCopyAliasesSlowly(reinterpret_cast<void*>(4096 + 16), 4096, 2047));  // too small to matter
}

// A read that runs into an unmapped page fails with EFAULT on both paths; through the bounce buffer the
// pieces before the fault have arrived. (This process reads itself: the same system call.)
TEST(CrossMemory, AReadIntoAnUnmappedPageFails) {
  SKIP_WITHOUT_CROSS_MEMORY();
  constexpr size_t kPage = 4096, kMapped = 64 * kPage;  // 256 KiB readable, then a PROT_NONE page
  auto* region = static_cast<unsigned char*>(
      ::mmap(nullptr, kMapped + kPage, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
  ASSERT_NE(region, MAP_FAILED);
  for (size_t i = 0; i < kMapped; ++i) region[i] = PatternChild::patternAt(i);
  ASSERT_EQ(::mprotect(region + kMapped, kPage, PROT_NONE), 0);
  const uint64_t remote = reinterpret_cast<uint64_t>(region);
  std::vector<unsigned char> area(kMapped + 3 * kPage, 0xEE);
  for (size_t ahead : {0, 16}) {
    const uintptr_t base = reinterpret_cast<uintptr_t>(area.data());
    unsigned char* dst = reinterpret_cast<unsigned char*>(base + (ahead - base % kPage + kPage) % kPage);
    const size_t bytes = kMapped + 100;  // the last 100 bytes are not readable
#if defined(__x86_64__)
    ASSERT_EQ(kernelCopyAliasesSlowly(dst, remote, bytes), ahead == 16);
#endif
    EXPECT_EQ(readPeerMemory(::getpid(), remote, dst, bytes), EFAULT) << "ahead " << ahead;
    if (kernelCopyAliasesSlowly(dst, remote, bytes)) {  // the 128 KiB pieces before the failing one arrived
      for (size_t i = 0; i < kMapped; ++i) ASSERT_EQ(dst[i], PatternChild::patternAt(i)) << i;
    }
  }
  ::munmap(region, kMapped + kPage);
}

TEST(CrossMemory, ProbeFindsTheWordOfTheSameProgram) {
  SKIP_WITHOUT_CROSS_MEMORY();
  PatternChild child(4096);  // a fork: the probe word is at the same address there
  std::string why;
  EXPECT_TRUE(canReadPeerMemory(child.pid(), crossMemoryProbeAddress(), why)) << why;
  // The child's pattern is not the probe value.
  EXPECT_FALSE(canReadPeerMemory(child.pid(), child.address(), why));
  EXPECT_NE(why.find("unexpected value"), std::string::npos) << why;
  EXPECT_FALSE(canReadPeerMemory(0, crossMemoryProbeAddress(), why));
  EXPECT_NE(why.find("not known"), std::string::npos) << why;
}

TEST(CrossMemory, FailuresNameTheirCause) {
  SKIP_WITHOUT_CROSS_MEMORY();
  PatternChild child(4096);
  std::vector<unsigned char> out(8192);
  // A range the child does not map (page 0).
  EXPECT_EQ(readPeerMemory(child.pid(), 4096, out.data(), out.size()), EFAULT);
  // Past the end of the child's heap (a few hundred KiB): what can be read is, then the rest fails.
  constexpr size_t kBig = size_t{64} << 20;
  void* big = ::mmap(nullptr, kBig, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  ASSERT_NE(big, MAP_FAILED);
  EXPECT_EQ(readPeerMemory(child.pid(), child.address(), big, kBig), EFAULT);
  ::munmap(big, kBig);
  // An exited process (not reaped yet, so its pid cannot be reused under the test) has no memory.
  child.kill();
  EXPECT_EQ(readPeerMemory(child.pid(), child.address(), out.data(), 64), ESRCH);
  std::string why;
  EXPECT_FALSE(canReadPeerMemory(child.pid(), crossMemoryProbeAddress(), why));
  EXPECT_NE(why.find("process_vm_readv"), std::string::npos) << why;
}

TEST(CrossMemory, TheWorldAgreesAtStartUp) {
  const bool can = permitted();  // without permission the probe fails and the world says no
  TempDir dir;
  for (bool wanted : {true, false}) {
    const std::string tag = makeTag();
    Ranks ranks(3);
    ranks.run([&](int rank) {
      auto cfg = smallConfig(dir.path, tag, rank, 3);
      cfg.crossMemory = wanted;
      auto w = ShmWorld::create(cfg, ranks.exchange(rank));
      SHM_CHECK(w->crossMemory() == (wanted && can));
      const uint64_t g = w->barrierArrive();
      SHM_CHECK(waitFor(*w, [&] { return w->barrierReached(g); }));
    });
  }
  // One rank that does not want it turns it off for all.
  const std::string tag = makeTag();
  Ranks ranks(3);
  ranks.run([&](int rank) {
    auto cfg = smallConfig(dir.path, tag, rank, 3);
    cfg.crossMemory = rank != 1;
    auto w = ShmWorld::create(cfg, ranks.exchange(rank));
    SHM_CHECK(!w->crossMemory());
    const uint64_t g = w->barrierArrive();
    SHM_CHECK(waitFor(*w, [&] { return w->barrierReached(g); }));
  });
  // One rank alone reads nobody.
  auto solo = ShmWorld::create(smallConfig(dir.path, makeTag(), 0, 1), soloExchange());
  EXPECT_FALSE(solo->crossMemory());
}
