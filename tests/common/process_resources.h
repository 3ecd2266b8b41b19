// What a process holds, read from /proc and /dev/shm: the leak checks of the fault matrix, the lifecycle
// tests and the soak count descriptors, threads and shared-memory segments before and after.
#pragma once

#include <dirent.h>

#include <chrono>
#include <cstring>
#include <thread>

namespace conflux::testing {

/// Entries of @p dir whose names start with @p prefix (dot entries left out); -1 when it cannot be read.
inline int directoryEntries(const char* dir, const char* prefix = "") {
  DIR* d = opendir(dir);
  if (d == nullptr) return -1;
  const size_t len = std::strlen(prefix);
  int n = 0;
  while (dirent* e = readdir(d)) n += e->d_name[0] != '.' && std::strncmp(e->d_name, prefix, len) == 0;
  closedir(d);
  return n;
}

/// This process's open descriptors (not counting the one used to list them).
inline int openDescriptors() { return directoryEntries("/proc/self/fd") - 1; }

/// This process's threads.
inline int liveThreads() { return directoryEntries("/proc/self/task"); }

/// Threads, after giving ones already joined up to @p waitMs to be reaped down to @p expected.
inline int liveThreadsSettled(int expected, int waitMs = 1000) {
  for (int waited = 0; waited < waitMs && liveThreads() > expected; waited += 10) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return liveThreads();
}

}  // namespace conflux::testing
