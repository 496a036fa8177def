#include "protocol/message_type.h"

namespace ztask::protocol {

std::string_view MsgTypeName(MsgType type) {
  switch (type) {
#define ZTASK_NAME_ENTRY(name, code, text, meta, content) \
  case MsgType::name:                      \
    return text;
    ZTASK_MESSAGE_TYPES(ZTASK_NAME_ENTRY)
#undef ZTASK_NAME_ENTRY
  }
  return "unknown";
}

std::optional<MsgType> MsgTypeFromCode(uint8_t code) {
  switch (code) {
#define ZTASK_CODE_ENTRY(name, value, text, meta, content) \
  case value:                               \
    return MsgType::name;
    ZTASK_MESSAGE_TYPES(ZTASK_CODE_ENTRY)
#undef ZTASK_CODE_ENTRY
  }
  return std::nullopt;
}

}  // namespace ztask::protocol
