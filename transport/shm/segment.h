// RAII shared-memory segment: a file in the shm directory (normally tmpfs), created exclusively or opened,
// mapped MAP_SHARED and pre-faulted, unmapped on destruction and unlinked if this object created it and
// it is still linked.
#pragma once

#include <cstddef>
#include <string>

namespace conflux::shm {

class Segment {
 public:
  Segment() = default;
  Segment(Segment&& other) noexcept;
  Segment& operator=(Segment&& other) noexcept;
  Segment(const Segment&) = delete;
  Segment& operator=(const Segment&) = delete;
  /// Unmaps; unlinks the file when this object created it and unlink() was not called.
  ~Segment();

  /// Creates `path` with O_CREAT|O_EXCL and mode 0600, allocates `bytes` (fallocate, so that a full
  /// tmpfs fails here with ENOSPC instead of SIGBUS later), maps it read-write and pre-faults every page.
  /// Throws Error(SystemError) naming the path; nothing is left behind on failure.
  static Segment create(const std::string& path, size_t bytes);

  /// Opens an existing segment of exactly `bytes` and maps it read-write, pre-faulted. Throws Error
  /// (SystemError, or InvalidArgument when the size differs).
  static Segment open(const std::string& path, size_t bytes);

  /// Removes the file name (mappings stay valid); idempotent, ignores errors (it is cleanup).
  void unlink();

  std::byte* data() const { return data_; }
  size_t size() const { return size_; }
  const std::string& path() const { return path_; }
  bool linked() const { return linked_; }

 private:
  void reset() noexcept;

  std::string path_;
  std::byte* data_ = nullptr;
  size_t size_ = 0;
  bool linked_ = false;  ///< This object created the file and has not unlinked it.
};

}  // namespace conflux::shm
