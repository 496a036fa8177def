// PrefetchLine: starts loading the cache line at an address, for lookups
// that know ahead which cold memory they will read (a batch's records in a
// table past the cache): the misses then overlap instead of waiting in
// turn.
//
// Thread safety: a hint; it reads nothing and changes nothing.
#ifndef ZTASK_BASE_PREFETCH_H_
#define ZTASK_BASE_PREFETCH_H_

#include <cstddef>

namespace ztask {

// How many lookups ahead of its use a batch starts loading an entry: far
// enough for a miss to arrive (a few hundred nanoseconds), near enough that
// what was loaded is still in the cache. Tables with two levels (a slot,
// then the record it points to) load the second at half the distance.
inline constexpr size_t kPrefetchAhead = 8;

// GCC 12 drops a __builtin_prefetch whose address comes from a hash, as
// such lookups' do: on x86 the instruction is written out.
inline void PrefetchLine(const void* p) {
#if defined(__x86_64__) || defined(__i386__)
  asm volatile("prefetcht0 %0" : : "m"(*static_cast<const char*>(p)));
#else
  __builtin_prefetch(p);
#endif
}

}  // namespace ztask

#endif  // ZTASK_BASE_PREFETCH_H_
