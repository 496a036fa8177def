# Writes OUTPUT, a C++ file defining one std::string_view per asset, from
# the files given as NAME=PATH pairs in ASSETS (separated by '|'). Run as
# `cmake -DOUTPUT=... -DASSETS=... -P Embed.cmake` at build time, so that a
# changed asset rebuilds taskdash.
set(text "// Made by cmake/Embed.cmake from dashboard/assets: do not edit.\n")
string(APPEND text "#include \"dashboard/assets.h\"\n\nnamespace ztask::dashboard {\nnamespace {\n\n")
string(REPLACE "|" ";" pairs "${ASSETS}")
set(views "")
foreach(pair IN LISTS pairs)
  string(REGEX MATCH "^([^=]+)=(.*)$" _ "${pair}")
  set(name "${CMAKE_MATCH_1}")
  set(path "${CMAKE_MATCH_2}")
  file(READ "${path}" hex HEX)
  string(LENGTH "${hex}" hex_length)
  math(EXPR size "${hex_length} / 2")
  string(REGEX REPLACE "([0-9a-f][0-9a-f])" "'\\\\x\\1'," bytes "${hex}")
  string(APPEND text "const char ${name}Bytes[] = {${bytes}};\n")
  string(APPEND views "const std::string_view ${name}(${name}Bytes, ${size});\n")
endforeach()
string(APPEND text "\n}  // namespace\n\n${views}\n}  // namespace ztask::dashboard\n")
file(WRITE "${OUTPUT}.tmp" "${text}")
file(COPY_FILE "${OUTPUT}.tmp" "${OUTPUT}" ONLY_IF_DIFFERENT)
