# CPack runs this on its staging tree before it packs: the static libraries
# lose their debug sections (64 MB each with them), as CPACK_STRIP_FILES
# does for programs and shared libraries; their symbols stay for linking.
file(GLOB_RECURSE archives "${CPACK_TEMPORARY_INSTALL_DIRECTORY}/*.a")
foreach(archive IN LISTS archives)
  execute_process(COMMAND strip --strip-debug ${archive} COMMAND_ERROR_IS_FATAL ANY)
endforeach()
