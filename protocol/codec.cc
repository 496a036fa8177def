// The one file that speaks msgpack. Each body struct lists its fields in
// Visit(); Writer and Reader walk that list. Every exception msgpack can
// throw is caught here and becomes a Status.
#include "protocol/codec.h"

#include <array>
#include <bit>
#include <cassert>
#include <cmath>
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

// A struct that declares kDefaultsLeftOut has the fields at their
// defaults left out of its map, and a reader takes a missing one as its
// default (docs/protocol.md, "Field encoding"): what every task carries on
// every hop (its routing, spec, reply and result) shrinks to what it sets.
template <class T>
concept DefaultsLeftOut = requires {
  requires T::kDefaultsLeftOut;
};

struct FieldCounter {
  bool every = false;  // absent ones too (a positional array)
  uint32_t count = 0;
  template <class T>
  void operator()(const char*, const T& value) {
    if (every || !Absent(value)) ++count;
  }
};

// Where the packer writes: straight into the frame's string, no copy after.
struct StringSink {
  std::string& out;
  void write(const char* data, size_t size) { out.append(data, size); }
};

// Writes a body as msgpack maps keyed by field name (every message), or
// `positional`: each struct as an array of its fields in Visit() order,
// absent ones nil (the hub's stored records, EncodeStored).
class Writer {
 public:
  explicit Writer(StringSink& sink, bool positional = false)
      : sink_(sink), packer_(sink), positional_(positional) {}

  template <class T>
  void operator()(const char* name, const T& value) {
    if (positional_) return Write(value);
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
  void Write(std::string_view v) { WriteString(v); }
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
  void Write(std::span<const T> items) {
    packer_.pack_array(static_cast<uint32_t>(items.size()));
    for (const auto& item : items) Write(item);
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
    if constexpr (DefaultsLeftOut<T>) return WriteBesideDefaults(body);
    FieldCounter counter{positional_};
    T::Visit(body, counter);
    positional_ ? packer_.pack_array(counter.count) : packer_.pack_map(counter.count);
    T::Visit(body, *this);
  }

 private:
  // A DefaultsLeftOut struct: as a map, the fields that differ from a
  // default T's; positional, its fields up to the last that differs (a
  // stored reader gives the missing trailing ones their defaults).
  template <class T>
  void WriteBesideDefaults(const T& body) {
    const uint64_t differ = DifferFromDefaults(body);
    size_t i = 0;
    if (positional_) {
      const auto n = static_cast<uint32_t>(std::bit_width(differ));
      packer_.pack_array(n);
      auto write = [&](const char*, const auto& value) {
        if (i++ < n) Write(value);
      };
      T::Visit(body, write);
      return;
    }
    packer_.pack_map(static_cast<uint32_t>(std::popcount(differ)));
    auto write = [&](const char* name, const auto& value) {
      if (differ >> i++ & 1) {
        WriteString(name);
        Write(value);
      }
    };
    T::Visit(body, write);
  }
  // Bit i set: field i (in Visit order) is present and differs from a
  // default T's. Reads the fields of `body` through their addresses in
  // Visit order: a default T's visit meets the same types in that order.
  template <class T>
  static uint64_t DifferFromDefaults(const T& body) {
    static const T kDefaults{};
    std::array<const void*, 64> fields;  // the readers take at most 64 fields
    size_t n = 0;
    auto collect = [&](const char*, const auto& value) {
      assert(n < fields.size());
      fields[n++] = &value;
    };
    T::Visit(body, collect);
    uint64_t differ = 0;
    size_t i = 0;
    auto compare = [&](const char*, const auto& preset) {
      const auto& value = *static_cast<const std::remove_cvref_t<decltype(preset)>*>(fields[i]);
      if (!Absent(value) && !(value == preset)) differ |= uint64_t{1} << i;
      ++i;
    };
    T::Visit(kDefaults, compare);
    return differ;
  }

  void WriteString(std::string_view s) {
    packer_.pack_str(static_cast<uint32_t>(s.size()));
    packer_.pack_str_body(s.data(), static_cast<uint32_t>(s.size()));
  }

  StringSink& sink_;
  msgpack::packer<StringSink> packer_;
  const bool positional_;
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

// kStored: a struct may also be an array of its fields in Visit() order
// (what EncodeStored writes): missing trailing fields keep their defaults
// (a record stored before they were added), extra ones are ignored (one
// stored by a later version). Messages are read with kStored false: only
// maps.
template <bool kStored>
class BasicReader {
 public:
  // `defaults`: a missing field keeps its default (DefaultsLeftOut).
  BasicReader(const msgpack::object_map& map, bool defaults) : map_(map), defaults_(defaults) {}

  const Status& status() const { return status_; }

  template <class T>
  void operator()(const char* name, T& out) {
    if (!status_.ok()) return;
    const msgpack::object* o = Find(name);
    if (o == nullptr) {
      if constexpr (IsOptional<T>::value) {
        out.reset();
      } else if (!defaults_) {
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
    if constexpr (kStored) {
      if (o.type == msgpack::type::ARRAY) {
        Positional positional(o.via.array);
        T::Visit(out, positional);
        return positional.status;
      }
    }
    if (o.type != msgpack::type::MAP) return WrongType("a map");
    BasicReader reader(o.via.map, DefaultsLeftOut<T>);
    T::Visit(out, reader);
    return reader.status();
  }

 private:
  // The fields of a struct stored as an array, by position.
  struct Positional {
    explicit Positional(const msgpack::object_array& array) : array(array) {}
    template <class T>
    void operator()(const char* name, T& out) {
      const uint32_t at = next++;
      if (!status.ok() || at >= array.size) return;  // stored before it existed: its default
      Status s = Read(array.ptr[at], out);
      if (!s.ok()) status = Status::Malformed(std::string("field '") + name + "': " + s.message());
    }
    const msgpack::object_array& array;
    uint32_t next = 0;
    Status status;
  };

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
  const bool defaults_;
  Status status_;
};
using Reader = BasicReader<false>;

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

// Bodies read in place, without msgpack's object tree: each message's two
// headers, the small maps every task carries (routing and reply metadata,
// the monitor's records) and the task's spec and result, read straight
// from the bytes by the
// same Visit() lists the general reader walks. It reads maps whose keys
// are known fields, each once, and values in the forms msgpack allows for
// their types. Anything else (another or a repeated key, a missing field,
// a value of another kind, out of range or past the unpacker's limits, a
// RawValue in a form packing would not write, trailing bytes) returns
// false, and the general reader reads the frame afresh and decides, with
// its errors: what this reads, it reads as the general reader would (a
// test compares them).
class InPlace {
 public:
  explicit InPlace(std::string_view frame)
      : p_(reinterpret_cast<const uint8_t*>(frame.data())), end_(p_ + frame.size()) {}

  // The whole frame as one T. REQUIRES: out is T{}.
  template <class T>
  bool ReadWhole(T& out) {
    return Read(out, 0) && p_ == end_;
  }

 private:
  static constexpr int kMaxDepth = 8;  // our bodies nest less
  // Well inside the unpacker's limit of 32, which counts levels its own way.
  static constexpr int kMaxPackedDepth = 28;

  // ---- values
  bool Read(bool& out, int) {
    uint8_t b;
    if (!Byte(&b) || (b != 0xc2 && b != 0xc3)) return false;
    out = b == 0xc3;
    return true;
  }
  template <std::integral T>
  bool Read(T& out, int) {
    bool negative;
    uint64_t magnitude;
    int64_t value;
    if (!Integer(&negative, &magnitude, &value)) return false;
    if (!negative) {
      if (magnitude > static_cast<uint64_t>(std::numeric_limits<T>::max())) return false;
      out = static_cast<T>(magnitude);
      return true;
    }
    if constexpr (std::is_unsigned_v<T>) {
      return false;
    } else {
      if (value < static_cast<int64_t>(std::numeric_limits<T>::min())) return false;
      out = static_cast<T>(value);
      return true;
    }
  }
  bool Read(double& out, int) {
    if (p_ == end_) return false;
    if (*p_ == 0xca || *p_ == 0xcb) {
      const bool wide = *p_++ == 0xcb;
      uint64_t bits;
      if (!Big(wide ? 8 : 4, &bits)) return false;
      if (wide) {
        std::memcpy(&out, &bits, sizeof out);
      } else {
        const auto narrow = static_cast<uint32_t>(bits);
        float f;
        std::memcpy(&f, &narrow, sizeof f);
        out = f;
      }
      return true;
    }
    bool negative;
    uint64_t magnitude;
    int64_t value;
    if (!Integer(&negative, &magnitude, &value)) return false;
    out = negative ? static_cast<double>(value) : static_cast<double>(magnitude);
    return true;
  }
  bool Read(std::string& out, int) {
    std::string_view bytes;
    if (!StrOrBin(&bytes, nullptr)) return false;
    out.assign(bytes);
    return true;
  }
  bool Read(TaskId& out, int) {
    std::string_view bytes;
    bool bin;
    if (!StrOrBin(&bytes, &bin) || !bin || bytes.size() != 16) return false;
    out = TaskId::FromBytes(bytes);
    return true;
  }
  bool Read(MsgType& out, int depth) {
    uint8_t code;
    if (!Read(code, depth)) return false;
    const auto type = MsgTypeFromCode(code);
    if (!type) return false;
    out = *type;
    return true;
  }
  template <class T, class Parse>
  bool Named(T& out, Parse parse) {
    std::string_view name;
    bool bin;
    if (!StrOrBin(&name, &bin) || bin) return false;
    const auto parsed = parse(name);
    if (!parsed) return false;
    out = *parsed;
    return true;
  }
  bool Read(ErrorType& out, int) {
    if (p_ != end_ && *p_ == 0xc0) {
      ++p_;
      out = ErrorType::kNone;
      return true;
    }
    return Named(out, ParseErrorType);
  }
  bool Read(TaskState& out, int) { return Named(out, ParseTaskState); }
  bool Read(EngineState& out, int) { return Named(out, ParseEngineState); }
  bool Read(EventKind& out, int) { return Named(out, ParseEventKind); }
  bool Read(EventStatus& out, int) { return Named(out, ParseEventStatus); }
  bool Read(DependencyMode& out, int) { return Named(out, ParseDependencyMode); }
  bool Read(AcceptedOutcome& out, int) { return Named(out, ParseAcceptedOutcome); }
  // A value kept as its bytes. The general reader packs the object it
  // read again, so this takes the bytes as they came only where they are
  // what packing writes: every length and integer in its shortest form,
  // floats only with a fraction (not NaN), nothing nested past
  // kMaxValueDepth.
  bool Read(RawValue& out, int depth) {
    const uint8_t* start = p_;
    if (p_ != end_ && *p_ == 0xc0) {
      ++p_;
      out.bytes.clear();
      return true;
    }
    if (!Packed(1, depth)) return false;
    out.bytes.assign(reinterpret_cast<const char*>(start), static_cast<size_t>(p_ - start));
    return true;
  }
  // As the general reader: a key given twice takes the later value.
  template <class T>
  bool Read(std::map<std::string, T>& out, int depth) {
    uint64_t pairs;
    if (depth >= kMaxDepth || !MapHeader(&pairs)) return false;
    out.clear();
    for (uint64_t i = 0; i < pairs; ++i) {
      std::string_view key;
      T value{};
      if (!StrOrBin(&key, nullptr) || !Read(value, depth + 1)) return false;
      out[std::string(key)] = std::move(value);
    }
    return true;
  }
  template <class T>
  bool Read(std::vector<T>& out, int depth) {
    uint8_t b;
    if (depth >= kMaxDepth || !Byte(&b)) return false;
    uint64_t n;
    if ((b & 0xf0) == 0x90) {
      n = b & 0x0f;
    } else if (b == 0xdc || b == 0xdd) {
      if (!Big(b == 0xdc ? 2 : 4, &n)) return false;
    } else {
      return false;
    }
    if (n > kUnpackLimit.array() || n > static_cast<uint64_t>(end_ - p_)) return false;
    out.clear();
    out.resize(static_cast<size_t>(n));
    for (T& element : out) {
      if (!Read(element, depth + 1)) return false;
    }
    return true;
  }
  template <class T>
  bool Read(std::optional<T>& out, int depth) {
    if (p_ != end_ && *p_ == 0xc0) {
      ++p_;
      out.reset();
      return true;
    }
    out.emplace();
    return Read(*out, depth);
  }
  template <class T>
  requires std::is_class_v<T>
  bool Read(T& out, int depth) {
    uint64_t pairs;
    if (depth >= kMaxDepth || !MapHeader(&pairs)) return false;
    uint64_t seen = 0;
    for (uint64_t i = 0; i < pairs; ++i) {
      std::string_view key;
      bool bin;
      if (!StrOrBin(&key, &bin) || bin) return false;
      int index = 0, found = -1;
      bool read = false;
      auto field = [&](const char* name, auto& value) {
        if (found < 0 && SameName(key, name)) {
          found = index;
          read = Read(value, depth + 1);
        }
        ++index;
      };
      T::Visit(out, field);
      if (found < 0 || found >= 64 || !read || (seen >> found & 1) != 0) return false;
      seen |= uint64_t{1} << found;
    }
    // A field missing: an optional one stays empty (out is fresh), as does
    // any of a DefaultsLeftOut struct; any other is the general reader's
    // error.
    if constexpr (DefaultsLeftOut<T>) return true;
    int index = 0;
    bool missing = false;
    auto required = [&](const char*, auto& value) {
      using F = std::remove_cvref_t<decltype(value)>;
      if (!IsOptional<F>::value && (index >= 64 || (seen >> index & 1) == 0)) missing = true;
      ++index;
    };
    T::Visit(out, required);
    return !missing;
  }

  // key == name, without measuring name first: most fields differ at
  // their first byte.
  [[gnu::always_inline]] static bool SameName(std::string_view key, const char* name) {
    size_t i = 0;
    for (; i < key.size(); ++i) {
      if (name[i] == '\0' || name[i] != key[i]) return false;
    }
    return name[i] == '\0';
  }

  // One value as msgpack-c packs it, at `level` of a RawValue (a scalar is
  // level 1) and `depth` of the whole frame.
  bool Packed(size_t level, int depth) {
    if (level > kMaxValueDepth || depth >= kMaxPackedDepth) return false;
    uint8_t b;
    if (!Byte(&b)) return false;
    uint64_t n;
    if (b <= 0x7f || b >= 0xe0 || b == 0xc0 || b == 0xc2 || b == 0xc3) return true;
    if ((b & 0xe0) == 0xa0) return Skip(b & 0x1f);  // fixstr
    if ((b & 0xf0) == 0x90) return Elements(b & 0x0f, level, depth);
    if ((b & 0xf0) == 0x80) return Elements(uint64_t{b & 0x0fu} * 2, level, depth);
    switch (b) {
      case 0xcc:
        return Big(1, &n) && n >= 0x80;
      case 0xcd:
        return Big(2, &n) && n > 0xff;
      case 0xce:
        return Big(4, &n) && n > 0xffff;
      case 0xcf:
        return Big(8, &n) && n > 0xffffffffull;
      case 0xd0:
        return Big(1, &n) && static_cast<int8_t>(n) < -32;
      case 0xd1:
        return Big(2, &n) && static_cast<int16_t>(n) < -128;
      case 0xd2:
        return Big(4, &n) && static_cast<int32_t>(n) < -32768;
      case 0xd3:
        return Big(8, &n) && static_cast<int64_t>(n) < -2147483648ll;
      case 0xca: {
        if (!Big(4, &n)) return false;
        const auto bits = static_cast<uint32_t>(n);
        float f;
        std::memcpy(&f, &bits, sizeof f);
        return Fractional(f);
      }
      case 0xcb: {
        if (!Big(8, &n)) return false;
        double d;
        std::memcpy(&d, &n, sizeof d);
        return Fractional(d);
      }
      case 0xd9:
        return Big(1, &n) && n > 31 && Skip(n);
      case 0xda:
        return Big(2, &n) && n > 0xff && Skip(n);
      case 0xdb:
        return Big(4, &n) && n > 0xffff && n <= kUnpackLimit.str() && Skip(n);
      case 0xc4:
        return Big(1, &n) && Skip(n);
      case 0xc5:
        return Big(2, &n) && n > 0xff && Skip(n);
      case 0xc6:
        return Big(4, &n) && n > 0xffff && n <= kUnpackLimit.bin() && Skip(n);
      case 0xdc:
        return Big(2, &n) && n > 15 && Elements(n, level, depth);
      case 0xdd:
        return Big(4, &n) && n > 0xffff && n <= kUnpackLimit.array() && Elements(n, level, depth);
      case 0xde:
        return Big(2, &n) && n > 15 && Elements(n * 2, level, depth);
      default:
        return false;  // map32 (past the unpacker's limit), ext, 0xc1
    }
  }
  // Packing writes a float with a whole value (and -0) as an integer, and
  // a NaN's payload might not survive: only other floats stay as they are.
  static bool Fractional(double v) { return v == v && std::trunc(v) != v; }
  bool Elements(uint64_t n, size_t level, int depth) {
    for (uint64_t i = 0; i < n; ++i) {
      if (!Packed(level + 1, depth + 1)) return false;
    }
    return true;
  }
  bool Skip(uint64_t n) {
    if (static_cast<uint64_t>(end_ - p_) < n) return false;
    p_ += n;
    return true;
  }

  // ---- bytes (inlined: each is a few instructions, called per value)
  // A map's header, within the unpacker's limit (map32 is past it).
  [[gnu::always_inline]] bool MapHeader(uint64_t* pairs) {
    uint8_t b;
    if (!Byte(&b)) return false;
    if ((b & 0xf0) == 0x80) {
      *pairs = b & 0x0f;
      return true;
    }
    return b == 0xde && Big(2, pairs);
  }
  [[gnu::always_inline]] bool Byte(uint8_t* out) {
    if (p_ == end_) return false;
    *out = *p_++;
    return true;
  }
  // n bytes, big-endian.
  [[gnu::always_inline]] bool Big(int n, uint64_t* out) {
    if (end_ - p_ < n) return false;
    uint64_t v = 0;
    for (int i = 0; i < n; ++i) v = (v << 8) | *p_++;
    *out = v;
    return true;
  }
  // Any integer; `negative` when its value is below zero (then in
  // *value), else its value is *magnitude: as msgpack's objects tell them.
  [[gnu::always_inline]] bool Integer(bool* negative, uint64_t* magnitude, int64_t* value) {
    uint8_t b;
    if (!Byte(&b)) return false;
    if (b <= 0x7f) {
      *negative = false;
      *magnitude = b;
      return true;
    }
    if (b >= 0xe0) {
      *negative = true;
      *value = static_cast<int8_t>(b);
      return true;
    }
    if (b >= 0xcc && b <= 0xcf) {
      *negative = false;
      return Big(1 << (b - 0xcc), magnitude);
    }
    if (b >= 0xd0 && b <= 0xd3) {
      const int n = 1 << (b - 0xd0);
      uint64_t bits;
      if (!Big(n, &bits)) return false;
      const int shift = 64 - 8 * n;  // sign-extends the n bytes
      const int64_t v = static_cast<int64_t>(bits << shift) >> shift;
      *negative = v < 0;
      if (v < 0) {
        *value = v;
      } else {
        *magnitude = static_cast<uint64_t>(v);
      }
      return true;
    }
    return false;
  }
  // A str or a bin (*bin says which, when asked), within the limits.
  [[gnu::always_inline]] bool StrOrBin(std::string_view* out, bool* bin) {
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
    const bool is_bin = b >= 0xc4 && b <= 0xc6;
    if (bin) *bin = is_bin;
    if (n > (is_bin ? kUnpackLimit.bin() : kUnpackLimit.str())) return false;
    if (static_cast<uint64_t>(end_ - p_) < n) return false;
    *out = {reinterpret_cast<const char*>(p_), static_cast<size_t>(n)};
    p_ += n;
    return true;
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

// ---- the header's fixed layout (docs/protocol.md, "The header")

namespace {

void StoreLittle64(char* out, uint64_t v) {
  if constexpr (std::endian::native == std::endian::big) v = __builtin_bswap64(v);
  std::memcpy(out, &v, sizeof v);
}

uint64_t LoadLittle64(const char* in) {
  uint64_t v;
  std::memcpy(&v, in, sizeof v);
  if constexpr (std::endian::native == std::endian::big) v = __builtin_bswap64(v);
  return v;
}

// A header as msgpack wrote it before the fixed layout: still read, for
// requests a database or a journal kept from then.
Result<Header> DecodeMsgpackHeader(std::string_view frame) {
  auto header = DecodeBody<Header>(frame);
  if (!header.ok()) return Status::Malformed("header: " + header.status().message());
  return header;
}

bool IsMsgpackHeader(std::string_view frame) {
  const auto first = static_cast<uint8_t>(frame[0]);
  return (first & 0xf0) == 0x80 || first == 0xde || first == 0xdf;
}

}  // namespace

HeaderBytes::HeaderBytes(const TaskId& id, MsgType type, std::string_view session, int64_t date_us)
    : size_(kHeaderFixedBytes + std::min(session.size(), kMaxSessionBytes)) {
  bytes_[0] = static_cast<char>(kHeaderLayout);
  bytes_[1] = static_cast<char>(static_cast<uint8_t>(type));
  id.ToBytes(bytes_ + 2);
  StoreLittle64(bytes_ + 18, static_cast<uint64_t>(date_us));
  bytes_[26] = static_cast<char>(size_ - kHeaderFixedBytes);
  std::memcpy(bytes_ + kHeaderFixedBytes, session.data(), size_ - kHeaderFixedBytes);
}

std::string EncodeHeader(const Header& header) { return std::string(HeaderBytes(header).view()); }

std::string EncodeParent(const std::optional<Header>& parent) {
  if (!parent) return {};
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

namespace {
// FrameList's fields, over frames it does not own.
struct FrameViews {
  std::span<const std::string_view> frames;
  template <class S, class V>
  static void Visit(S& s, V& v) {
    v("frames", s.frames);
  }
};
}  // namespace

std::string EncodeFrameList(std::span<const std::string_view> frames) {
  size_t bytes = 16;
  for (std::string_view f : frames) bytes += f.size() + 5;
  std::string out;
  out.reserve(bytes);
  StringSink sink{out};
  Writer writer(sink);
  writer.Write(FrameViews{frames});
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
Result<T> DecodeBodyGeneral(std::string_view frame) {
  T out{};
  Status status = Unpack(frame, [&](const msgpack::object& o) { return Reader::Read(o, out); });
  if (!status.ok()) return status;
  return out;
}

template <class T>
Result<T> DecodeBody(std::string_view frame) {
  if (T fast{}; InPlace(frame).ReadWhole(fast)) return fast;
  return DecodeBodyGeneral<T>(frame);
}

template <class T>
std::string EncodeStored(const T& body) {
  std::string out;
  out.reserve(192);
  EncodeStoredInto(body, &out);
  return out;
}

template <class T>
void EncodeStoredInto(const T& body, std::string* out) {
  out->clear();
  StringSink sink{*out};
  Writer writer(sink, /*positional=*/true);
  writer.Write(body);
}

template <class T>
Result<T> DecodeStored(std::string_view bytes) {
  T out{};
  Status status =
      Unpack(bytes, [&](const msgpack::object& o) { return BasicReader<true>::Read(o, out); });
  if (!status.ok()) return status;
  return out;
}

namespace {

// Checks a header in its fixed layout and reads all of it but its session.
Status ReadFixedHeader(std::string_view frame, Header* out) {
  if (frame.size() < kHeaderFixedBytes ||
      frame.size() != kHeaderFixedBytes + static_cast<uint8_t>(frame[26])) {
    return Status::Malformed("header: " + std::to_string(frame.size()) +
                             " bytes, not its layout's 27 and its session");
  }
  const auto type = MsgTypeFromCode(static_cast<uint8_t>(frame[1]));
  if (!type) {
    return Status::Malformed("header: unknown message type " +
                             std::to_string(static_cast<uint8_t>(frame[1])));
  }
  out->type = *type;
  out->id = TaskId::FromBytes(frame.substr(2, 16));
  out->date_us = static_cast<int64_t>(LoadLittle64(frame.data() + 18));
  return Status::Ok();
}

Status NotAHeader(std::string_view frame) {
  if (frame.empty()) return Status::Malformed("header: empty");
  return Status::Malformed("header: layout " + std::to_string(static_cast<uint8_t>(frame[0])) +
                           ", not " + std::to_string(kHeaderLayout));
}

bool IsNoParent(std::string_view frame) {
  return frame.empty() || frame == std::string_view("\xc0", 1);
}

}  // namespace

Status DecodeHeaderInto(std::string_view frame, Header* out) {
  if (frame.empty() || static_cast<uint8_t>(frame[0]) != kHeaderLayout) {
    if (frame.empty() || !IsMsgpackHeader(frame)) return NotAHeader(frame);
    auto header = DecodeMsgpackHeader(frame);
    if (!header.ok()) return header.status();
    *out = std::move(*header);
    return Status::Ok();
  }
  ZTASK_RETURN_IF_ERROR(ReadFixedHeader(frame, out));
  out->session.assign(frame.substr(kHeaderFixedBytes));
  return Status::Ok();
}

Result<Header> DecodeHeader(std::string_view frame) {
  Header header;
  ZTASK_RETURN_IF_ERROR(DecodeHeaderInto(frame, &header));
  return Result<Header>(std::move(header));
}

Result<std::optional<Header>> DecodeParent(std::string_view frame) {
  // Empty: none (nil, as msgpack wrote it before the fixed layout).
  if (IsNoParent(frame)) return std::optional<Header>();
  auto parent = DecodeHeader(frame);
  if (!parent.ok()) return Status::Malformed("parent " + parent.status().message());
  return std::optional<Header>(std::move(*parent));
}

Result<std::optional<TaskId>> DecodeParentId(std::string_view frame) {
  if (IsNoParent(frame)) return std::optional<TaskId>();
  // In its layout, all but the session (which would allocate) is read.
  Header parent;
  Status read = static_cast<uint8_t>(frame[0]) == kHeaderLayout ? ReadFixedHeader(frame, &parent)
                                                                : DecodeHeaderInto(frame, &parent);
  if (!read.ok()) return Status::Malformed("parent " + read.message());
  return std::optional<TaskId>(parent.id);
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
#define ZTASK_CODECS_OF(T)                                                                      \
  reinterpret_cast<AnyFunction>(&EncodeBody<T>), reinterpret_cast<AnyFunction>(&DecodeBody<T>), \
      reinterpret_cast<AnyFunction>(&DecodeBodyGeneral<T>),
#define ZTASK_CODECS(name, code, text, meta, content) ZTASK_CODECS_OF(meta) ZTASK_CODECS_OF(content)
const AnyFunction kEveryBodyCodec[] = {
    ZTASK_MESSAGE_TYPES(ZTASK_CODECS)  //
    ZTASK_CODECS_OF(Header)            //
    ZTASK_CODECS_OF(DispatchInfo)      //
    ZTASK_CODECS_OF(TaskRecord)        //
    ZTASK_CODECS_OF(FrameList)         //
    reinterpret_cast<AnyFunction>(&EncodeStored<TaskRecord>),
    reinterpret_cast<AnyFunction>(&EncodeStoredInto<TaskRecord>),
    reinterpret_cast<AnyFunction>(&DecodeStored<TaskRecord>),
};
#undef ZTASK_CODECS
#undef ZTASK_CODECS_OF

}  // namespace ztask::protocol
