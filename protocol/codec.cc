// The one file that speaks msgpack. Each body struct lists its fields in
// Visit(); Writer and Reader walk that list. Every exception msgpack can
// throw is caught here and becomes a Status.
#include "protocol/codec.h"

#include <concepts>
#include <cstring>
#include <exception>
#include <limits>
#include <msgpack.hpp>
#include <type_traits>

namespace ztask::protocol {
namespace {

template <class T>
struct IsOptional : std::false_type {};
template <class T>
struct IsOptional<std::optional<T>> : std::true_type {};

// Counts the fields of a struct, for the map header.
// An optional field that is absent is left out of its map (readers take
// a missing key and nil alike): the fields many messages leave empty cost
// nothing.
template <class T>
bool Absent(const T&) {
  return false;
}
template <class T>
bool Absent(const std::optional<T>& value) {
  return !value.has_value();
}

struct FieldCounter {
  uint32_t count = 0;
  template <class T>
  void operator()(const char*, const T& value) {
    if (!Absent(value)) ++count;
  }
};

// Where the packer writes: straight into the frame's string, no copy after.
struct StringSink {
  std::string& out;
  void write(const char* data, size_t size) { out.append(data, size); }
};

class Writer {
 public:
  explicit Writer(StringSink& sink) : sink_(sink), packer_(sink) {}

  template <class T>
  void operator()(const char* name, const T& value) {
    if (Absent(value)) return;
    WriteString(name);
    Write(value);
  }

  void Write(bool v) { v ? packer_.pack_true() : packer_.pack_false(); }
  template <std::signed_integral T>
  void Write(T v) {
    packer_.pack_int64(v);
  }
  template <std::unsigned_integral T>
  void Write(T v) {
    packer_.pack_uint64(v);
  }
  void Write(double v) { packer_.pack_double(v); }
  void Write(const std::string& v) { WriteString(v); }
  void Write(const TaskId& id) {
    char bytes[16];
    id.ToBytes(bytes);
    packer_.pack_bin(16);
    packer_.pack_bin_body(bytes, 16);
  }
  void Write(MsgType t) { packer_.pack_uint64(static_cast<uint8_t>(t)); }
  void Write(ErrorType t) {
    if (t == ErrorType::kNone) {
      packer_.pack_nil();
    } else {
      WriteString(ErrorTypeName(t));
    }
  }
  void Write(TaskState s) { WriteString(TaskStateName(s)); }
  void Write(EngineState s) { WriteString(EngineStateName(s)); }
  void Write(EventKind k) { WriteString(EventKindName(k)); }
  void Write(EventStatus s) { WriteString(EventStatusName(s)); }
  void Write(DependencyMode m) { WriteString(DependencyModeName(m)); }
  void Write(AcceptedOutcome o) { WriteString(AcceptedOutcomeName(o)); }
  void Write(const RawValue& raw) {
    if (raw.bytes.empty()) {
      packer_.pack_nil();
    } else {
      sink_.write(raw.bytes.data(), raw.bytes.size());
    }
  }
  template <class T>
  void Write(const std::vector<T>& items) {
    packer_.pack_array(static_cast<uint32_t>(items.size()));
    for (const auto& item : items) Write(item);
  }
  template <class T>
  void Write(const std::optional<T>& value) {
    if (value) {
      Write(*value);
    } else {
      packer_.pack_nil();
    }
  }
  template <class T>
  void Write(const std::map<std::string, T>& map) {
    packer_.pack_map(static_cast<uint32_t>(map.size()));
    for (const auto& [k, v] : map) {
      WriteString(k);
      Write(v);
    }
  }
  template <class T>
  requires std::is_class_v<T>
  void Write(const T& body) {
    FieldCounter counter;
    T::Visit(body, counter);
    packer_.pack_map(counter.count);
    T::Visit(body, *this);
  }

 private:
  void WriteString(std::string_view s) {
    packer_.pack_str(static_cast<uint32_t>(s.size()));
    packer_.pack_str_body(s.data(), static_cast<uint32_t>(s.size()));
  }

  StringSink& sink_;
  msgpack::packer<StringSink> packer_;
};

Status WrongType(const char* expected) {
  return Status::Malformed(std::string("expected ") + expected);
}

std::string_view AsStringView(const msgpack::object& o) { return {o.via.str.ptr, o.via.str.size}; }

// Reads one msgpack object into a typed value; every mismatch is an error.
// The deepest level of `o` (a scalar is level 1), or more than `limit`:
// counting stops there.
size_t DepthWithin(const msgpack::object& o, size_t limit) {
  if (limit == 0) return 1;
  size_t deepest = 0;
  if (o.type == msgpack::type::ARRAY) {
    for (uint32_t i = 0; i < o.via.array.size && deepest < limit; ++i) {
      deepest = std::max(deepest, DepthWithin(o.via.array.ptr[i], limit - 1));
    }
  } else if (o.type == msgpack::type::MAP) {
    for (uint32_t i = 0; i < o.via.map.size && deepest < limit; ++i) {
      deepest = std::max({deepest, DepthWithin(o.via.map.ptr[i].key, limit - 1),
                          DepthWithin(o.via.map.ptr[i].val, limit - 1)});
    }
  }
  return deepest + 1;
}

Status TooDeepForAValue() {
  return Status::TooLarge("the value nests deeper than " + std::to_string(kMaxValueDepth) +
                          " levels");
}

// The limits on values beyond what the unpacker bounds for every message.
Status CheckValueObject(const msgpack::object& o) {
  return DepthWithin(o, kMaxValueDepth) > kMaxValueDepth ? TooDeepForAValue() : Status::Ok();
}

class Reader {
 public:
  explicit Reader(const msgpack::object_map& map) : map_(map) {}

  const Status& status() const { return status_; }

  template <class T>
  void operator()(const char* name, T& out) {
    if (!status_.ok()) return;
    const msgpack::object* o = Find(name);
    if (o == nullptr) {
      if constexpr (IsOptional<T>::value) {
        out.reset();
      } else {
        status_ = Status::Malformed(std::string("missing field '") + name + "'");
      }
      return;
    }
    Status s = Read(*o, out);
    if (!s.ok()) {
      status_ = Status::Malformed(std::string("field '") + name + "': " + s.message());
    }
  }

  static Status Read(const msgpack::object& o, bool& out) {
    if (o.type != msgpack::type::BOOLEAN) return WrongType("a boolean");
    out = o.via.boolean;
    return Status::Ok();
  }
  template <std::integral T>
  static Status Read(const msgpack::object& o, T& out) {
    if (o.type == msgpack::type::POSITIVE_INTEGER) {
      if (o.via.u64 > static_cast<uint64_t>(std::numeric_limits<T>::max())) {
        return Status::Malformed("integer out of range");
      }
      out = static_cast<T>(o.via.u64);
      return Status::Ok();
    }
    if (o.type == msgpack::type::NEGATIVE_INTEGER) {
      if constexpr (std::is_unsigned_v<T>) {
        return Status::Malformed("negative integer where none is allowed");
      } else {
        if (o.via.i64 < static_cast<int64_t>(std::numeric_limits<T>::min())) {
          return Status::Malformed("integer out of range");
        }
        out = static_cast<T>(o.via.i64);
        return Status::Ok();
      }
    }
    return WrongType("an integer");
  }
  static Status Read(const msgpack::object& o, double& out) {
    switch (o.type) {
      case msgpack::type::FLOAT32:
      case msgpack::type::FLOAT64:
        out = o.via.f64;
        return Status::Ok();
      case msgpack::type::POSITIVE_INTEGER:
        out = static_cast<double>(o.via.u64);
        return Status::Ok();
      case msgpack::type::NEGATIVE_INTEGER:
        out = static_cast<double>(o.via.i64);
        return Status::Ok();
      default:
        return WrongType("a number");
    }
  }
  static Status Read(const msgpack::object& o, std::string& out) {
    if (o.type == msgpack::type::STR) {
      out.assign(o.via.str.ptr, o.via.str.size);
    } else if (o.type == msgpack::type::BIN) {
      out.assign(o.via.bin.ptr, o.via.bin.size);
    } else {
      return WrongType("a string");
    }
    return Status::Ok();
  }
  static Status Read(const msgpack::object& o, TaskId& out) {
    if (o.type != msgpack::type::BIN || o.via.bin.size != 16) {
      return WrongType("a 16-byte id");
    }
    out = TaskId::FromBytes({o.via.bin.ptr, 16});
    return Status::Ok();
  }
  static Status Read(const msgpack::object& o, MsgType& out) {
    uint8_t code = 0;
    ZTASK_RETURN_IF_ERROR(Read(o, code));
    auto type = MsgTypeFromCode(code);
    if (!type) return Status::Malformed("unknown message type " + std::to_string(code));
    out = *type;
    return Status::Ok();
  }
  // A value named by a string: `parse` maps names to values (nullopt for
  // one it does not know).
  template <class T, class Parse>
  static Status ReadNamed(const msgpack::object& o, T& out, Parse parse, const char* expected,
                          const char* unknown) {
    if (o.type != msgpack::type::STR) return WrongType(expected);
    auto parsed = parse(AsStringView(o));
    if (!parsed) return Status::Malformed(unknown);
    out = *parsed;
    return Status::Ok();
  }
  static Status Read(const msgpack::object& o, ErrorType& out) {
    if (o.type == msgpack::type::NIL) {
      out = ErrorType::kNone;
      return Status::Ok();
    }
    return ReadNamed(o, out, ParseErrorType, "an error type name", "unknown error type");
  }
  static Status Read(const msgpack::object& o, TaskState& out) {
    return ReadNamed(o, out, ParseTaskState, "a task state name", "unknown task state");
  }
  static Status Read(const msgpack::object& o, EngineState& out) {
    return ReadNamed(o, out, ParseEngineState, "an engine state name", "unknown engine state");
  }
  static Status Read(const msgpack::object& o, EventKind& out) {
    return ReadNamed(o, out, ParseEventKind, "an event kind name", "unknown event kind");
  }
  static Status Read(const msgpack::object& o, EventStatus& out) {
    return ReadNamed(o, out, ParseEventStatus, "an event status name", "unknown event status");
  }
  static Status Read(const msgpack::object& o, DependencyMode& out) {
    return ReadNamed(o, out, ParseDependencyMode, "'all' or 'any'", "mode must be 'all' or 'any'");
  }
  static Status Read(const msgpack::object& o, AcceptedOutcome& out) {
    return ReadNamed(o, out, ParseAcceptedOutcome, "an outcome name",
                     "outcome must be success, failure or either");
  }
  static Status Read(const msgpack::object& o, RawValue& out) {
    out.bytes.clear();
    if (o.type == msgpack::type::NIL) return Status::Ok();
    ZTASK_RETURN_IF_ERROR(CheckValueObject(o));
    msgpack::sbuffer buffer;
    msgpack::pack(buffer, o);
    out.bytes.assign(buffer.data(), buffer.size());
    return Status::Ok();
  }
  template <class T>
  static Status Read(const msgpack::object& o, std::vector<T>& out) {
    if (o.type != msgpack::type::ARRAY) return WrongType("an array");
    out.clear();
    out.resize(o.via.array.size);
    for (uint32_t i = 0; i < o.via.array.size; ++i) {
      ZTASK_RETURN_IF_ERROR(Read(o.via.array.ptr[i], out[i]));
    }
    return Status::Ok();
  }
  template <class T>
  static Status Read(const msgpack::object& o, std::optional<T>& out) {
    if (o.type == msgpack::type::NIL) {
      out.reset();
      return Status::Ok();
    }
    out.emplace();
    return Read(o, *out);
  }
  template <class T>
  static Status Read(const msgpack::object& o, std::map<std::string, T>& out) {
    if (o.type != msgpack::type::MAP) return WrongType("a map");
    out.clear();
    for (uint32_t i = 0; i < o.via.map.size; ++i) {
      std::string key;
      T value{};
      ZTASK_RETURN_IF_ERROR(Read(o.via.map.ptr[i].key, key));
      ZTASK_RETURN_IF_ERROR(Read(o.via.map.ptr[i].val, value));
      out[std::move(key)] = std::move(value);
    }
    return Status::Ok();
  }
  template <class T>
  requires std::is_class_v<T>
  static Status Read(const msgpack::object& o, T& out) {
    if (o.type != msgpack::type::MAP) return WrongType("a map");
    Reader reader(o.via.map);
    T::Visit(out, reader);
    return reader.status();
  }

 private:
  const msgpack::object* Find(const char* name) const {
    const size_t length = std::strlen(name);
    for (uint32_t i = 0; i < map_.size; ++i) {
      const msgpack::object& key = map_.ptr[i].key;
      if (key.type == msgpack::type::STR && key.via.str.size == length &&
          std::memcmp(key.via.str.ptr, name, length) == 0) {
        return &map_.ptr[i].val;
      }
    }
    return nullptr;
  }

  const msgpack::object_map& map_;
  Status status_;
};

// Bounds what a hostile frame can make the unpacker allocate.
const msgpack::unpack_limit kUnpackLimit(
    /*array=*/1u << 20, /*map=*/1u << 16, /*str=*/64u << 20, /*bin=*/64u << 20,
    /*ext=*/0, /*depth=*/32);

// Each unpack made a zone of its own (an allocation of 8 KiB and more) for
// an object read at once and let go: one zone per thread is emptied after
// each use instead. A nested unpack (while an outer object is being read)
// gets a zone of its own.
template <class F>
Status Unpack(std::string_view frame, F&& on_object) {
  thread_local msgpack::zone reused;
  thread_local bool in_use = false;
  std::optional<msgpack::zone> own;
  msgpack::zone& zone = in_use ? own.emplace() : reused;
  struct Release {
    msgpack::zone& zone;
    bool outer;
    ~Release() {
      if (!outer) return;
      zone.clear();
      in_use = false;
    }
  } release{zone, !in_use};
  in_use = true;
  try {
    size_t offset = 0;
    bool referenced = false;
    const msgpack::object object = msgpack::unpack(zone, frame.data(), frame.size(), offset,
                                                   referenced, nullptr, nullptr, kUnpackLimit);
    if (offset != frame.size()) return Status::Malformed("trailing bytes after the value");
    return on_object(object);
  } catch (const msgpack::insufficient_bytes&) {
    return Status::Malformed("truncated msgpack");
  } catch (const msgpack::array_size_overflow&) {
    return Status::TooLarge("an array has more than " + std::to_string(kUnpackLimit.array()) +
                            " items");
  } catch (const msgpack::map_size_overflow&) {
    return Status::TooLarge("a map has more than " + std::to_string(kUnpackLimit.map()) +
                            " pairs");
  } catch (const msgpack::str_size_overflow&) {
    return Status::TooLarge("a string is longer than " + std::to_string(kUnpackLimit.str()) +
                            " bytes");
  } catch (const msgpack::bin_size_overflow&) {
    return Status::TooLarge("a binary is longer than " + std::to_string(kUnpackLimit.bin()) +
                            " bytes");
  } catch (const msgpack::ext_size_overflow&) {
    return Status::Malformed("extension types are not taken");
  } catch (const msgpack::depth_size_overflow&) {
    return Status::TooLarge("it nests deeper than " + std::to_string(kUnpackLimit.depth()) +
                            " levels");
  } catch (const std::exception& e) {
    return Status::Malformed(std::string("bad msgpack: ") + e.what());
  }
}

// The header every message carries, twice (its own and its parent), read
// in place without an object tree: a map of exactly its four fields, in
// any order, each once, in the forms msgpack writes them. Anything else
// (another key, a key twice, another form, a length past the limits,
// trailing bytes) returns false, and the general reader decides, with its
// errors: so what this reads, it reads as the general reader would.
class InPlace {
 public:
  explicit InPlace(std::string_view frame)
      : p_(reinterpret_cast<const uint8_t*>(frame.data())), end_(p_ + frame.size()) {}

  bool ReadHeader(Header* out) {
    uint8_t b;
    if (!Byte(&b)) return false;
    uint64_t pairs;
    if ((b & 0xf0) == 0x80) {
      pairs = b & 0x0f;
    } else if (b != 0xde || !Big(2, &pairs)) {
      return false;
    }
    if (pairs != 4) return false;
    unsigned seen = 0;
    for (int i = 0; i < 4; ++i) {
      std::string_view key;
      if (!Byte(&b) || (b & 0xe0) != 0xa0 || !Take(b & 0x1f, &key)) return false;
      unsigned bit;
      bool read;
      if (key == "id") {
        bit = 1;
        std::string_view id;
        read = Byte(&b) && b == 0xc4 && Byte(&b) && b == 16 && Take(16, &id);
        if (read) out->id = TaskId::FromBytes(id);
      } else if (key == "type") {
        bit = 2;
        uint64_t code;
        read = Unsigned(&code) && code <= 0xff;
        std::optional<MsgType> type;
        if (read) type = MsgTypeFromCode(static_cast<uint8_t>(code));
        read = read && type.has_value();
        if (read) out->type = *type;
      } else if (key == "session") {
        bit = 4;
        std::string_view session;
        read = String(&session);
        if (read) out->session.assign(session);
      } else if (key == "date") {
        bit = 8;
        read = Signed(&out->date_us);
      } else {
        return false;
      }
      if (!read || (seen & bit) != 0) return false;
      seen |= bit;
    }
    return seen == 15 && p_ == end_;
  }

 private:
  bool Byte(uint8_t* out) {
    if (p_ == end_) return false;
    *out = *p_++;
    return true;
  }
  // n bytes, big-endian.
  bool Big(int n, uint64_t* out) {
    if (end_ - p_ < n) return false;
    uint64_t v = 0;
    for (int i = 0; i < n; ++i) v = (v << 8) | *p_++;
    *out = v;
    return true;
  }
  bool Take(uint64_t n, std::string_view* out) {
    if (static_cast<uint64_t>(end_ - p_) < n) return false;
    *out = {reinterpret_cast<const char*>(p_), static_cast<size_t>(n)};
    p_ += n;
    return true;
  }
  bool Unsigned(uint64_t* out) {
    uint8_t b;
    if (!Byte(&b)) return false;
    if (b <= 0x7f) {
      *out = b;
      return true;
    }
    if (b >= 0xcc && b <= 0xcf) return Big(1 << (b - 0xcc), out);
    return false;
  }
  bool Signed(int64_t* out) {
    if (p_ == end_) return false;
    const uint8_t b = *p_;
    if (b >= 0xe0) {  // negative fixint
      ++p_;
      *out = static_cast<int8_t>(b);
      return true;
    }
    if (b >= 0xd0 && b <= 0xd3) {
      ++p_;
      const int n = 1 << (b - 0xd0);
      uint64_t v;
      if (!Big(n, &v)) return false;
      const int shift = 64 - 8 * n;  // sign-extends the n bytes
      *out = static_cast<int64_t>(v << shift) >> shift;
      return true;
    }
    uint64_t v;
    if (!Unsigned(&v) || v > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
      return false;
    }
    *out = static_cast<int64_t>(v);
    return true;
  }
  // A str or a bin, as the general reader takes either for a string.
  bool String(std::string_view* out) {
    uint8_t b;
    if (!Byte(&b)) return false;
    uint64_t n;
    if ((b & 0xe0) == 0xa0) {
      n = b & 0x1f;
    } else if (b == 0xd9 || b == 0xc4) {
      if (!Big(1, &n)) return false;
    } else if (b == 0xda || b == 0xc5) {
      if (!Big(2, &n)) return false;
    } else if (b == 0xdb || b == 0xc6) {
      if (!Big(4, &n)) return false;
    } else {
      return false;
    }
    const bool bin = b >= 0xc4 && b <= 0xc6;
    if (n > (bin ? kUnpackLimit.bin() : kUnpackLimit.str())) return false;
    return Take(n, out);
  }

  const uint8_t* p_;
  const uint8_t* end_;
};

}  // namespace

Status CheckFrames(const Signer& signer, const Limits& limits,
                   std::span<const std::string_view> frames) {
  if (frames.size() < kMinFrames) {
    return Status::Malformed("message has " + std::to_string(frames.size()) +
                             " frames, needs at least " + std::to_string(kMinFrames));
  }
  if (frames.size() > limits.max_frames) {
    return Status::TooLarge("message has " + std::to_string(frames.size()) +
                            " frames, the limit is " + std::to_string(limits.max_frames));
  }
  size_t total = 0;
  for (auto f : frames) total += f.size();
  if (total > limits.max_message_bytes) {
    return Status::TooLarge("message of " + std::to_string(total) + " bytes, the limit is " +
                            std::to_string(limits.max_message_bytes));
  }
  if (frames[kFrameSignature] != kProtocolSignature) {
    return Status::VersionMismatch("frame 0 is not " + std::string(kProtocolSignature));
  }
  if (!signer.Verify(frames)) {
    return Status::BadSignature(signer.enabled() ? "HMAC does not match"
                                                 : "signed message on an unsigned cluster");
  }
  return Status::Ok();
}

std::string EncodeHeader(const Header& header) { return EncodeBody(header); }

std::string EncodeParent(const std::optional<Header>& parent) {
  if (!parent) return std::string(1, '\xc0');  // msgpack nil
  return EncodeHeader(*parent);
}

template <class T>
std::string EncodeBody(const T& body) {
  std::string out;
  out.reserve(128);
  StringSink sink{out};
  Writer writer(sink);
  writer.Write(body);
  return out;
}

Status CheckValue(std::string_view packed) {
  if (packed.empty()) return Status::Ok();
  Status s = Unpack(packed, [](const msgpack::object& o) { return CheckValueObject(o); });
  // Deeper than even a message may nest: said with the value's own limit.
  if (s.message().find("nests deeper") != std::string::npos) return TooDeepForAValue();
  return s;
}

Result<std::string> PickledPayload(std::string_view args) {
  std::string payload;
  bool found = false;
  Status status = Unpack(args, [&](const msgpack::object& o) {
    if (o.type != msgpack::type::MAP) return Status::Malformed("not a map");
    for (uint32_t i = 0; i < o.via.map.size; ++i) {
      const msgpack::object_kv& kv = o.via.map.ptr[i];
      if (kv.key.type == msgpack::type::STR &&
          std::string_view(kv.key.via.str.ptr, kv.key.via.str.size) == "pickle" &&
          kv.val.type == msgpack::type::BIN) {
        payload.assign(kv.val.via.bin.ptr, kv.val.via.bin.size);
        found = true;
      }
    }
    return found ? Status::Ok() : Status::Malformed("no binary 'pickle' in it");
  });
  if (!status.ok()) return status;
  return payload;
}

std::string PickledValue(std::string_view pickled) {
  msgpack::sbuffer buffer;
  msgpack::packer<msgpack::sbuffer> packer(buffer);
  packer.pack_map(1);
  packer.pack(std::string_view("pickle"));
  packer.pack_bin(static_cast<uint32_t>(pickled.size()));
  packer.pack_bin_body(pickled.data(), static_cast<uint32_t>(pickled.size()));
  return std::string(buffer.data(), buffer.size());
}

std::string RemoteException(std::string_view ename, std::string_view evalue,
                            std::string_view traceback) {
  msgpack::sbuffer buffer;
  msgpack::packer<msgpack::sbuffer> packer(buffer);
  packer.pack_map(3);
  packer.pack(std::string_view("ename"));
  packer.pack(ename);
  packer.pack(std::string_view("evalue"));
  packer.pack(evalue);
  packer.pack(std::string_view("traceback"));
  packer.pack(traceback);
  return std::string(buffer.data(), buffer.size());
}

template <class T>
Result<T> DecodeBody(std::string_view frame) {
  T out{};
  Status status = Unpack(frame, [&](const msgpack::object& o) { return Reader::Read(o, out); });
  if (!status.ok()) return status;
  return out;
}

Result<Header> DecodeHeader(std::string_view frame) {
  if (Header fast; InPlace(frame).ReadHeader(&fast)) return fast;
  auto header = DecodeBody<Header>(frame);
  if (!header.ok()) return Status::Malformed("header: " + header.status().message());
  return header;
}

Result<std::optional<Header>> DecodeParent(std::string_view frame) {
  if (frame == std::string_view("\xc0", 1)) return std::optional<Header>();
  if (Header fast; InPlace(frame).ReadHeader(&fast)) return std::optional<Header>(std::move(fast));
  std::optional<Header> parent;
  Status status = Unpack(frame, [&](const msgpack::object& o) { return Reader::Read(o, parent); });
  if (!status.ok()) return Status::Malformed("parent header: " + status.message());
  return parent;
}

Status CheckFrameCount(MsgType type, size_t frames) {
  if (IsBatch(type) && frames != kBatchFrames) {
    return Status::Malformed("a " + std::string(MsgTypeName(type)) + " of " +
                             std::to_string(frames) + " frames, not " +
                             std::to_string(kBatchFrames));
  }
  if (frames > kMaxMessageFrames) {
    return Status::TooLarge("a " + std::string(MsgTypeName(type)) + " of " +
                            std::to_string(frames) + " frames, the limit is " +
                            std::to_string(kMaxMessageFrames));
  }
  return Status::Ok();
}

namespace {

// What earlier versions put in a batch's content.
struct EarlierBatch {
  std::vector<int32_t> frames;
  template <class S, class V>
  static void Visit(S& s, V& v) {
    v("frames", s.frames);
  }
};

}  // namespace

std::optional<std::string> RecordsOfEarlierBatch(std::span<const std::string_view> frames) {
  if (frames.size() < kMinFrames) return std::nullopt;
  auto batch = DecodeBody<EarlierBatch>(frames[kFrameContent]);
  if (!batch.ok()) return std::nullopt;
  std::string records;
  size_t at = kFirstBuffer;
  for (int32_t count : batch->frames) {
    if (count < 4 || static_cast<size_t>(count) + 2 > kMaxMessageFrames ||
        static_cast<size_t>(count) > frames.size() - at) {
      return std::nullopt;
    }
    AppendRecord(records, frames.subspan(at, static_cast<size_t>(count)));
    at += static_cast<size_t>(count);
  }
  if (at != frames.size()) return std::nullopt;
  return records;
}

// Every body of the message table (message_type.h), and the records read
// or written on their own, made here so that no other file needs msgpack. A
// type several messages carry is named several times by the table, which
// explicit instantiations would refuse: each is instead used by this table,
// which has external linkage and so keeps every one of them.
using AnyFunction = void (*)();
extern const AnyFunction kEveryBodyCodec[];
#define ZTASK_CODECS_OF(T) \
  reinterpret_cast<AnyFunction>(&EncodeBody<T>), reinterpret_cast<AnyFunction>(&DecodeBody<T>),
#define ZTASK_CODECS(name, code, text, meta, content) ZTASK_CODECS_OF(meta) ZTASK_CODECS_OF(content)
const AnyFunction kEveryBodyCodec[] = {
    ZTASK_MESSAGE_TYPES(ZTASK_CODECS)  //
    ZTASK_CODECS_OF(Header)            //
    ZTASK_CODECS_OF(DispatchInfo)      //
    ZTASK_CODECS_OF(TaskRecord)        //
    ZTASK_CODECS_OF(FrameList)         //
};
#undef ZTASK_CODECS
#undef ZTASK_CODECS_OF

}  // namespace ztask::protocol
