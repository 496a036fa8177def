# The daemons and the benchmarks allocate on every message; glibc's malloc
# was a large share of the hub's and the scheduler's profiles. They link
# tcmalloc (Debian's libtcmalloc-minimal4) instead: 25-40 % more no-op
# throughput end to end (docs/performance.md). Sanitizer builds keep their
# own allocator. -DZTASK_TCMALLOC=OFF builds without it.
option(ZTASK_TCMALLOC "Link the daemons and benchmarks with tcmalloc" ON)
add_library(ztask_allocator INTERFACE)
if(ZTASK_TCMALLOC AND ZTASK_SANITIZE STREQUAL "")
  find_library(ZTASK_TCMALLOC_LIBRARY NAMES tcmalloc_minimal libtcmalloc_minimal.so.4)
  if(NOT ZTASK_TCMALLOC_LIBRARY)
    message(FATAL_ERROR "tcmalloc not found: run scripts/install-deps.sh "
                        "(package libtcmalloc-minimal4) or configure with -DZTASK_TCMALLOC=OFF")
  endif()
  target_link_libraries(ztask_allocator INTERFACE ${ZTASK_TCMALLOC_LIBRARY})
  target_compile_options(ztask_allocator INTERFACE -fno-builtin-malloc -fno-builtin-calloc
                                                   -fno-builtin-realloc -fno-builtin-free)
endif()
