# One place for the warning flags every ztask target compiles with.
add_library(ztask_warnings INTERFACE)
target_compile_options(ztask_warnings INTERFACE -Wall -Wextra -Wpedantic)
if(ZTASK_WERROR)
  target_compile_options(ztask_warnings INTERFACE -Werror)
endif()
