// Segment: create/open, map, pre-fault and unlink of a shared-memory file.
#include "transport/shm/segment.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <utility>

#include "core/error.h"

namespace conflux::shm {
namespace {

/// Closes a file descriptor on scope exit (the mapping outlives it).
struct FdCloser {
  int fd;
  ~FdCloser() {
    if (fd >= 0) ::close(fd);
  }
};

/// MAP_POPULATE pre-faults every page: first touch of fresh shared pages runs at ~1 GB/s, so it is paid
/// once here instead of inside the first large collective.
std::byte* mapShared(int fd, size_t bytes, const std::string& path) {
  void* p = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, fd, 0);
  if (p == MAP_FAILED) throwSystemError("shm: cannot map segment " + path);
  return static_cast<std::byte*>(p);
}

}  // namespace

Segment::Segment(Segment&& other) noexcept
    : path_(std::move(other.path_)),
      data_(std::exchange(other.data_, nullptr)),
      size_(std::exchange(other.size_, 0)),
      linked_(std::exchange(other.linked_, false)) {}

Segment& Segment::operator=(Segment&& other) noexcept {
  if (this != &other) {
    reset();
    path_ = std::move(other.path_);
    data_ = std::exchange(other.data_, nullptr);
    size_ = std::exchange(other.size_, 0);
    linked_ = std::exchange(other.linked_, false);
  }
  return *this;
}

Segment::~Segment() { reset(); }

void Segment::reset() noexcept {
  if (data_ != nullptr) ::munmap(data_, size_);
  data_ = nullptr;
  size_ = 0;
  unlink();
}

void Segment::unlink() {
  if (linked_) ::unlink(path_.c_str());
  linked_ = false;
}

Segment Segment::create(const std::string& path, size_t bytes) {
  Segment s;
  s.path_ = path;
  const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd < 0) {
    const int err = errno;
    std::string hint;
    if (err == EEXIST) hint = " (a stale segment of a crashed job with the same tag, or a tag collision)";
    if (err == ENOENT) hint = " (does the directory exist? see CONFLUX_SHM_DIR)";
    throw Error(Code::SystemError, systemErrorMessage("shm: cannot create segment " + path, err) + hint);
  }
  FdCloser closer{fd};
  s.linked_ = true;  // from here on, `s` unlinks the file if anything below throws
  // Reserve the pages now; tmpfs zero-fills them. fallocate is not supported everywhere (then the
  // ftruncate below is all we can do, and running out of space shows up as SIGBUS later).
  if (::fallocate(fd, 0, 0, static_cast<off_t>(bytes)) != 0) {
    const int err = errno;
    if (err != EOPNOTSUPP && err != ENOSYS) {
      throw Error(Code::SystemError,
                  systemErrorMessage("shm: cannot allocate " + std::to_string(bytes) + " bytes for " + path, err) +
                      " (is the shm directory full? reduce CONFLUX_SHM_CHANNEL_BYTES / CONFLUX_SHM_STAGING_BYTES"
                      " or enlarge /dev/shm)");
    }
  }
  if (::ftruncate(fd, static_cast<off_t>(bytes)) != 0) throwSystemError("shm: cannot size segment " + path);
  s.data_ = mapShared(fd, bytes, path);
  s.size_ = bytes;
  return s;
}

Segment Segment::open(const std::string& path, size_t bytes) {
  Segment s;
  s.path_ = path;
  const int fd = ::open(path.c_str(), O_RDWR | O_CLOEXEC);
  if (fd < 0) throwSystemError("shm: cannot open peer segment " + path);
  FdCloser closer{fd};
  struct stat st {};
  if (::fstat(fd, &st) != 0) throwSystemError("shm: cannot stat peer segment " + path);
  if (static_cast<size_t>(st.st_size) != bytes) {
    throw Error(Code::InvalidArgument, "shm: peer segment " + path + " has " + std::to_string(st.st_size) +
                                           " bytes, expected " + std::to_string(bytes));
  }
  s.data_ = mapShared(fd, bytes, path);
  s.size_ = bytes;
  return s;
}

}  // namespace conflux::shm
