// The unique id as ranks receive it: 128 opaque bytes (cfxUniqueId, passed by the application, through
// MPI_Bcast, PyTorch's store or a file). A bad id must be refused with an Error, never misread; a good
// one must survive encode and decode unchanged.
#include <cstdint>
#include <cstdlib>
#include <cstring>

#include "core/bootstrap/unique_id.h"
#include "core/error.h"

using namespace conflux;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  cfxUniqueId raw;
  std::memset(&raw, 0, sizeof raw);
  std::memcpy(raw.internal, data, size < sizeof raw.internal ? size : sizeof raw.internal);
  bootstrap::UniqueId id;
  try {
    id = bootstrap::decode(raw);
  } catch (const Error&) {
    return 0;  // refused, with a message: right
  }
  (void)bootstrap::describe(id);
  (void)bootstrap::jobTag(id);
  const bootstrap::UniqueId again = bootstrap::decode(bootstrap::encode(id));
  if (again.addrLen != id.addrLen || std::memcmp(&again.addr, &id.addr, id.addrLen) != 0 || again.secret != id.secret) {
    std::abort();  // a decoded id that does not round-trip
  }
  return 0;
}
