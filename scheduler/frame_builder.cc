#include "scheduler/frame_builder.h"

namespace ztask::scheduler {

FrameBuilder::FrameBuilder(const protocol::Signer& signer)
    : signer_(signer), session_(TaskId::Random()) {}

protocol::Header FrameBuilder::NewHeader(protocol::MsgType type) {
  // Message ids need only be unique: the session and a counter, no syscall.
  return {TaskId{session_.hi, ++counter_}, type, session_.ToHex(), protocol::NowMicros()};
}

void FrameBuilder::Append(protocol::Frames& out, protocol::MsgType type, zmq::message_t parent,
                          zmq::message_t meta, zmq::message_t content,
                          protocol::Frames buffers) {
  const size_t first = out.size();
  out.push_back(protocol::Frame(protocol::kProtocolSignature));
  out.emplace_back();
  out.push_back(protocol::Frame(protocol::EncodeHeader(NewHeader(type))));
  out.push_back(std::move(parent));
  out.push_back(std::move(meta));
  out.push_back(std::move(content));
  for (auto& b : buffers) out.push_back(std::move(b));
  protocol::SignFrames(signer_, out, first);
}

protocol::Frames FrameBuilder::ShareFrom(protocol::Frames& frames, size_t from) {
  protocol::Frames out;
  for (size_t i = from; i < frames.size(); ++i) out.push_back(protocol::Share(frames[i]));
  return out;
}

}  // namespace ztask::scheduler
