# ZTASK_SANITIZE=address builds everything with ASan+UBSan, =thread with TSan.
#
# A sanitized build is for finding faults, not for speed: it compiles at -O1
# (the level both sanitizers are meant for, and half the compile time of
# -O2), and the tests' own sources at -O0 (ztask_test in tests/), since
# what they check runs in the libraries and programs. CI builds twice so.
# The libraries and programs are compiled as unity builds too (their .cc
# files a few to a compilation, each header read once for all): two
# functions of one name in two files of a library, each in its own
# anonymous namespace, would then clash; the plain build does not show it.
if(ZTASK_SANITIZE STREQUAL "address")
  add_compile_options(-fsanitize=address,undefined -fno-omit-frame-pointer
                      -fno-sanitize-recover=undefined -O1)
  add_link_options(-fsanitize=address,undefined)
elseif(ZTASK_SANITIZE STREQUAL "thread")
  add_compile_options(-fsanitize=thread -fno-omit-frame-pointer -O1)
  add_link_options(-fsanitize=thread)
elseif(NOT ZTASK_SANITIZE STREQUAL "")
  message(FATAL_ERROR "ZTASK_SANITIZE must be '', 'address' or 'thread', not '${ZTASK_SANITIZE}'")
endif()
if(NOT ZTASK_SANITIZE STREQUAL "")
  set(CMAKE_UNITY_BUILD ON)
  set(CMAKE_UNITY_BUILD_BATCH_SIZE 16)
endif()
