// Logging by level and subsystem (CONFLUX_DEBUG, CONFLUX_DEBUG_SUBSYS), printf-style. The levels and
// subsystem names follow NCCL_DEBUG so that NCCL users know them; the NCCL plugin redirects the sink.
#pragma once

#include <cstdarg>
#include <cstdint>

namespace conflux::log {

enum class Level : int { None = 0, Version = 1, Warn = 2, Info = 3, Trace = 4 };

enum Subsys : uint32_t {
  kInit = 1u << 0, kColl = 1u << 1, kP2p = 1u << 2, kShm = 1u << 3, kBootstrap = 1u << 4,
  kNet = 1u << 5, kTuning = 1u << 6, kAll = ~0u,
};

/// True when messages of this level and subsystem are printed (cheap; check before formatting).
bool enabled(Level level, uint32_t subsys);

/// Prints one line: "host:pid:tid [rank] CONFLUX LEVEL message".
void write(Level level, uint32_t subsys, const char* fmt, ...) __attribute__((format(printf, 3, 4)));
void vwrite(Level level, uint32_t subsys, const char* fmt, va_list args);

/// Rank shown in the prefix of this thread's messages (-1 = none); set by the communicator.
void setThreadRank(int rank);

/// Replaces the output: sink(level, subsys, message) receives the formatted text without prefix.
using Sink = void (*)(Level level, uint32_t subsys, const char* message);
void setSink(Sink sink);

/// Overrides the level read from CONFLUX_DEBUG (the NCCL plugin follows NCCL_DEBUG when CONFLUX_DEBUG is unset).
void setLevel(Level level);

/// Re-reads CONFLUX_DEBUG* (used by tests that change the environment).
void reloadConfig();

}  // namespace conflux::log

#define CFX_LOG(level, subsys, ...)                                                        \
  do {                                                                                     \
    if (::conflux::log::enabled(::conflux::log::Level::level, ::conflux::log::subsys))     \
      ::conflux::log::write(::conflux::log::Level::level, ::conflux::log::subsys, __VA_ARGS__); \
  } while (0)

#define CFX_WARN(subsys, ...) CFX_LOG(Warn, subsys, __VA_ARGS__)
#define CFX_INFO(subsys, ...) CFX_LOG(Info, subsys, __VA_ARGS__)
#define CFX_TRACE(subsys, ...) CFX_LOG(Trace, subsys, __VA_ARGS__)
