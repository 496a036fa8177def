#include "base/clock.h"
#include "scheduler/frame_builder.h"

namespace ztask::scheduler {

FrameBuilder::FrameBuilder(const protocol::Signer& signer)
    : signer_(signer), session_(TaskId::Random()), session_hex_(session_.ToHex()) {}

// Message ids need only be unique: the session and a counter, no syscall.
TaskId FrameBuilder::NextId() { return TaskId{session_.hi, ++counter_}; }

protocol::HeaderBytes FrameBuilder::NewHeaderBytes(protocol::MsgType type) {
  return protocol::HeaderBytes(NextId(), type, session_hex_, base::WallMicros());
}

protocol::Header FrameBuilder::NewHeader(protocol::MsgType type) {
  return {NextId(), type, session_hex_, base::WallMicros()};
}

void FrameBuilder::AddToBatch(protocol::MsgType type, std::string_view parent,
                              std::string_view meta, std::string_view content,
                              std::span<const std::string_view> buffers) {
  const protocol::HeaderBytes header = NewHeaderBytes(type);
  const std::string_view frames[] = {header.view(), parent, meta, content};
  protocol::AppendRecord(records_, frames, buffers);
  ++batched_;
}

protocol::Frames FrameBuilder::TakeBatch(int64_t seq) {
  protocol::Frames out;
  out.reserve(protocol::kBatchFrames);
  out.push_back(protocol::Frame(protocol::kProtocolSignature));
  out.emplace_back();
  out.push_back(protocol::Frame(NewHeaderBytes(protocol::MsgType::kMonitorBatch).view()));
  out.push_back(protocol::Frame(protocol::EncodeParent(std::nullopt)));
  out.push_back(protocol::Frame(protocol::EncodeBody(protocol::BatchMeta{seq})));
  out.push_back(protocol::Frame(protocol::EncodeBody(protocol::MonitorBatch{})));
  out.push_back(protocol::FrameOf(std::move(records_)));
  records_.clear();
  batched_ = 0;
  return out;
}

void FrameBuilder::Reseal(protocol::Frames& message) {
  auto old = protocol::DecodeHeader(protocol::View(message[protocol::kFrameHeader]));
  const protocol::MsgType type = old.ok() ? old->type : protocol::MsgType::kMonitorBatch;
  // Kept by a journal of an earlier version, it may carry that version's
  // signature: it goes as this version's.
  message[protocol::kFrameSignature] = protocol::Frame(protocol::kProtocolSignature);
  message[protocol::kFrameHeader] = protocol::Frame(NewHeaderBytes(type).view());
  protocol::SignFrames(signer_, message);
}

void FrameBuilder::Append(protocol::Frames& out, protocol::MsgType type, zmq::message_t parent,
                          zmq::message_t meta, zmq::message_t content,
                          protocol::Frames buffers) {
  const size_t first = out.size();
  out.push_back(protocol::Frame(protocol::kProtocolSignature));
  out.emplace_back();
  out.push_back(protocol::Frame(NewHeaderBytes(type).view()));
  out.push_back(std::move(parent));
  out.push_back(std::move(meta));
  out.push_back(std::move(content));
  for (auto& b : buffers) out.push_back(std::move(b));
  protocol::SignFrames(signer_, out, first);
}

protocol::Frames FrameBuilder::SealTaskBatch(
    std::string_view session, std::string records,
    std::optional<std::vector<protocol::DispatchInfo>> dispatch) {
  // The same bytes in every batch: encoded once.
  static const std::string kNoParent = protocol::EncodeParent(std::nullopt);
  static const std::string kEmpty = protocol::EncodeBody(protocol::Empty{});
  protocol::Frames out;
  out.reserve(1 + protocol::kBatchFrames);
  out.push_back(protocol::Frame(session));
  out.push_back(protocol::Frame(protocol::kProtocolSignature));
  out.emplace_back();
  out.push_back(protocol::Frame(NewHeaderBytes(protocol::MsgType::kTaskBatch).view()));
  out.push_back(protocol::Frame(kNoParent));
  out.push_back(protocol::Frame(kEmpty));
  out.push_back(protocol::Frame(protocol::EncodeBody(protocol::TaskBatch{std::move(dispatch)})));
  out.push_back(protocol::FrameOf(std::move(records)));
  protocol::SignFrames(signer_, out, 1);
  return out;
}

protocol::Frames FrameBuilder::ShareFrom(protocol::Frames& frames, size_t from) {
  protocol::Frames out;
  for (size_t i = from; i < frames.size(); ++i) out.push_back(protocol::Share(frames[i]));
  return out;
}

}  // namespace ztask::scheduler
