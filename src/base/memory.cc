#include "base/memory.h"

#include <sys/mman.h>

#include <cstdint>

namespace tessera {

void AdviseHugePages(void* data, size_t bytes) {
  constexpr uintptr_t kHuge = uintptr_t{2} << 20;
  if (data == nullptr || bytes < 4 * kHuge) return;
  const auto at = reinterpret_cast<uintptr_t>(data);
  const uintptr_t begin = (at + kHuge - 1) & ~(kHuge - 1);
  const uintptr_t end = (at + bytes) & ~(kHuge - 1);
  // Advice only: a kernel without transparent huge pages refuses it, and nothing changes.
  if (end > begin)
    (void)::madvise(static_cast<char*>(data) + (begin - at), end - begin, MADV_HUGEPAGE);
}

}  // namespace tessera
