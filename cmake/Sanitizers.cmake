# ZTASK_SANITIZE=address builds everything with ASan+UBSan, =thread with TSan.
#
# A sanitized build is for finding faults, not for speed: it compiles at -O1
# (the level both sanitizers are meant for, and half the compile time of
# -O2), and the tests' own sources at -O0 (ztask_test in tests/), since
# what they check runs in the libraries and programs. CI builds twice so.
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
