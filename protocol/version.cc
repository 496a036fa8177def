// The library's version and protocol, for programs and their --version.
#include "ztask/version.h"

#include "protocol/codec.h"

namespace ztask {

const char* LibraryVersion() { return ZTASK_VERSION_STRING; }

const char* ProtocolVersion() {
  static const std::string signature(protocol::kProtocolSignature);
  return signature.c_str();
}

}  // namespace ztask
