// The library's version and protocol, for programs and their --version.
#include "ztask/version.h"

namespace ztask {

const char* LibraryVersion() { return ZTASK_VERSION_STRING; }

const char* ProtocolVersion() { return ZTASK_PROTOCOL_STRING; }

}  // namespace ztask
