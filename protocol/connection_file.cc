#include "protocol/connection_file.h"

#include <fcntl.h>
#include <sodium.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <nlohmann/json.hpp>
#include <optional>

#include "base/usage.h"

namespace ztask::protocol {
namespace fs = std::filesystem;
using nlohmann::json;

namespace {

std::string ToHex(std::string_view bytes) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string out;
  out.reserve(bytes.size() * 2);
  for (unsigned char c : bytes) {
    out += kDigits[c >> 4];
    out += kDigits[c & 0xf];
  }
  return out;
}

Result<std::string> FromHex(std::string_view hex) {
  if (hex.size() % 2 != 0) return Status::InvalidArgument("odd number of hex digits");
  std::string out(hex.size() / 2, '\0');
  size_t written = 0;
  if (sodium_hex2bin(reinterpret_cast<unsigned char*>(out.data()), out.size(), hex.data(),
                     hex.size(), nullptr, &written, nullptr) != 0 ||
      written != out.size()) {
    return Status::InvalidArgument("not hex digits");
  }
  return out;
}

Status Field(const json& object, const char* section, const char* name, std::string& out,
             const fs::path& path) {
  auto it = object.find(name);
  std::string where = section[0] ? std::string(section) + "." + name : std::string(name);
  if (it == object.end()) {
    return Status::InvalidArgument("connection file " + path.string() + " has no field '" +
                                   where + "'");
  }
  if (!it->is_string()) {
    return Status::InvalidArgument("connection file " + path.string() + ": field '" + where +
                                   "' must be a string");
  }
  out = it->get<std::string>();
  return Status::Ok();
}

Result<const json*> Section(const json& root, const char* name, const fs::path& path) {
  auto it = root.find(name);
  if (it == root.end() || !it->is_object()) {
    return Status::InvalidArgument("connection file " + path.string() + " has no object '" +
                                   name + "'");
  }
  return &*it;
}

// The signing scheme and its key: hmac-sha256 with a key, or none without.
Status ParseSigning(const json& root, const fs::path& path, ConnectionInfo* info) {
  std::string key_hex;
  ZTASK_RETURN_IF_ERROR(Field(root, "", "signature_scheme", info->signature_scheme, path));
  ZTASK_RETURN_IF_ERROR(Field(root, "", "key", key_hex, path));
  if (info->signature_scheme != kSchemeHmac && info->signature_scheme != kSchemeNone) {
    return Status::InvalidArgument("connection file " + path.string() +
                                   ": signature_scheme must be 'hmac-sha256' or 'none'");
  }
  auto key = FromHex(key_hex);
  if (!key.ok()) {
    return Status::InvalidArgument("connection file " + path.string() + ": key is " +
                                   key.status().message());
  }
  info->key = std::move(*key);
  if (info->signature_scheme == kSchemeHmac && info->key.empty()) {
    return Status::InvalidArgument("connection file " + path.string() +
                                   ": scheme hmac-sha256 needs a key");
  }
  if (info->signature_scheme == kSchemeNone && !info->key.empty()) {
    return Status::InvalidArgument("connection file " + path.string() +
                                   ": scheme 'none' must have an empty key");
  }
  return Status::Ok();
}

// The hub's and the scheduler's addresses.
Status ParseEndpoints(const json& root, const fs::path& path, ConnectionInfo* info) {
  auto hub = Section(root, "hub", path);
  if (!hub.ok()) return hub.status();
  for (auto [name, out] : {std::pair{"registration", &info->hub.registration},
                           {"query", &info->hub.query},
                           {"notifier", &info->hub.notifier},
                           {"monitor", &info->hub.monitor},
                           {"events", &info->hub.events}}) {
    ZTASK_RETURN_IF_ERROR(Field(**hub, "hub", name, *out, path));
  }
  auto scheduler = Section(root, "scheduler", path);
  if (!scheduler.ok()) return scheduler.status();
  ZTASK_RETURN_IF_ERROR(Field(**scheduler, "scheduler", "client", info->scheduler.client, path));
  return Field(**scheduler, "scheduler", "engine", info->scheduler.engine, path);
}

// The CurveZMQ keys, when the file has them.
Status ParseCurve(const json& root, const fs::path& path, ConnectionInfo* info) {
  if (!root.contains("curve")) return Status::Ok();
  auto curve = Section(root, "curve", path);
  if (!curve.ok()) return curve.status();
  CurveKeys& keys = info->curve;
  for (auto [name, out] : {std::pair{"server_public", &keys.server_public},
                           {"client_public", &keys.client_public},
                           {"client_secret", &keys.client_secret}}) {
    ZTASK_RETURN_IF_ERROR(Field(**curve, "curve", name, *out, path));
    if (out->size() != 40) {
      return Status::InvalidArgument("connection file " + path.string() + ": curve." + name +
                                     " must be a 40-character Z85 key");
    }
  }
  return Status::Ok();
}

Result<ConnectionInfo> ParseText(const std::string& text, const fs::path& path) {
  json root = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (root.is_discarded()) {
    return Status::InvalidArgument("connection file " + path.string() + " is not valid JSON");
  }
  if (!root.is_object()) {
    return Status::InvalidArgument("connection file " + path.string() + " is not a JSON object");
  }
  auto version = root.find("version");
  if (version == root.end() || !version->is_number_integer() || version->get<int>() != 1) {
    return Status::InvalidArgument("connection file " + path.string() +
                                   " must have \"version\": 1");
  }
  ConnectionInfo info;
  ZTASK_RETURN_IF_ERROR(ParseSigning(root, path, &info));
  ZTASK_RETURN_IF_ERROR(ParseEndpoints(root, path, &info));
  ZTASK_RETURN_IF_ERROR(ParseCurve(root, path, &info));
  return info;
}

std::string SerializeText(const ConnectionInfo& info) {
  json root = {
      {"version", 1},
      {"signature_scheme", info.signature_scheme},
      {"key", ToHex(info.key)},
      {"hub",
       {{"registration", info.hub.registration},
        {"query", info.hub.query},
        {"notifier", info.hub.notifier},
        {"monitor", info.hub.monitor},
        {"events", info.hub.events}}},
      {"scheduler", {{"client", info.scheduler.client}, {"engine", info.scheduler.engine}}},
  };
  if (info.curve.enabled()) {
    root["curve"] = {{"server_public", info.curve.server_public},
                     {"client_public", info.curve.client_public},
                     {"client_secret", info.curve.client_secret}};
  }
  return root.dump(2) + "\n";
}

Status Errno(const std::string& what, const fs::path& path) {
  return Status::IoError(what + " " + path.string() + ": " + std::strerror(errno));
}

// Holds an flock on a sibling ".lock" file for its lifetime.
class FileLock {
 public:
  explicit FileLock(const fs::path& path) {
    fd_ = ::open((path.string() + ".lock").c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    if (fd_ >= 0) ::flock(fd_, LOCK_EX);
  }
  ~FileLock() {
    if (fd_ >= 0) ::close(fd_);  // closing releases the lock
  }
  bool ok() const { return fd_ >= 0; }
  FileLock(const FileLock&) = delete;
  FileLock& operator=(const FileLock&) = delete;

 private:
  int fd_ = -1;
};

}  // namespace

fs::path DefaultProfileDir() {
  if (const char* dir = std::getenv("ZTASK_PROFILE_DIR"); dir && *dir) return fs::path(dir);
  return ztask::NamedProfileDir("default");
}

fs::path ConnectionFilePath(const fs::path& profile_dir) {
  return profile_dir / kConnectionFileName;
}

std::string GenerateKey() {
  if (sodium_init() < 0) std::abort();
  std::string key(32, '\0');
  randombytes_buf(key.data(), key.size());
  return key;
}

std::string GenerateToken() { return ToHex(GenerateKey().substr(0, 24)); }

Result<ConnectionInfo> ParseConnectionFile(const std::string& text, const fs::path& path) {
  return ParseText(text, path);
}

std::string SerializeConnectionFile(const ConnectionInfo& info) { return SerializeText(info); }

Status CheckAuthenticated(const ConnectionInfo& info, bool allow_insecure, const fs::path& path) {
  if (info.signature_scheme != kSchemeNone) return Status::Ok();
  if (!allow_insecure) {
    return Status::PermissionDenied(
        "connection file " + path.string() +
        " has no key, so anyone who can reach the cluster's ports could run commands on its "
        "engines; start the cluster again without --insecure, or pass --insecure to accept that");
  }
  std::fprintf(stderr,
               "WARNING: the cluster in %s runs without a key (--insecure): anyone who can reach "
               "its ports can run commands on its engines\n",
               path.parent_path().c_str());
  return Status::Ok();
}

namespace {

// A connection file is a few hundred bytes; this bounds what a wrong path
// (a device, a huge file) can make a process read.
constexpr size_t kMaxConnectionFileBytes = size_t{1} << 20;

// The whole of `fd`, or nothing with errno set.
std::optional<std::string> ReadAll(int fd) {
  std::string text;
  char buffer[8192];
  for (;;) {
    const ssize_t n = ::read(fd, buffer, sizeof buffer);
    if (n == 0) return text;
    if (n < 0) {
      if (errno == EINTR) continue;
      return std::nullopt;
    }
    text.append(buffer, static_cast<size_t>(n));
    if (text.size() > kMaxConnectionFileBytes) {
      errno = EFBIG;
      return std::nullopt;
    }
  }
}

}  // namespace

Result<ConnectionInfo> ReadConnectionFile(const fs::path& path) {
  // Opened without following a link (one placed in the profile would hand
  // the cluster's key, and where its clients connect, to the link's owner),
  // then checked on what was opened, as ssh checks its keys.
  const int fd = ::open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) {
    if (errno == ENOENT) {
      return Status::NotFound("no connection file at " + path.string() +
                              " (is a cluster running with this --profile-dir?)");
    }
    if (errno == ELOOP) {
      return Status::PermissionDenied("connection file " + path.string() +
                                      " is a symbolic link; it is read only as a regular file "
                                      "of your own (remove the link)");
    }
    return Errno("cannot read connection file", path);
  }
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    Status error = Errno("cannot read connection file", path);
    ::close(fd);
    return error;
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    return Status::PermissionDenied("connection file " + path.string() +
                                    " is not a regular file");
  }
  if (st.st_uid != ::geteuid()) {
    ::close(fd);
    return Status::PermissionDenied(
        "connection file " + path.string() + " belongs to user id " +
        std::to_string(st.st_uid) + ", not to you (" + std::to_string(::geteuid()) +
        "); whoever owns it holds the cluster's key and chooses where you connect");
  }
  if ((st.st_mode & 077) != 0) {
    ::close(fd);
    char mode[8];
    std::snprintf(mode, sizeof mode, "%04o", st.st_mode & 0777);
    return Status::PermissionDenied("connection file " + path.string() +
                                    " can be read by others (mode " + mode +
                                    "); it holds the cluster's key: run chmod 600 on it");
  }
  std::optional<std::string> text = ReadAll(fd);
  if (!text) {
    Status error = Errno("cannot read connection file", path);
    ::close(fd);
    return error;
  }
  ::close(fd);
  return ParseText(*text, path);
}

Status MakePrivateDirectory(const fs::path& dir) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) return Status::IoError("cannot create " + dir.string() + ": " + ec.message());
  fs::permissions(dir, fs::perms::owner_all, fs::perm_options::replace, ec);
  if (ec) return Status::IoError("cannot make " + dir.string() + " private: " + ec.message());
  return Status::Ok();
}

Result<fs::path> OwnPrivateDirectory(const fs::path& dir) {
  if (::mkdir(dir.c_str(), 0700) != 0 && errno != EEXIST) {
    return Status::IoError("cannot make " + dir.string() + ": " + std::strerror(errno));
  }
  struct stat st {};
  if (::lstat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode) || st.st_uid != ::getuid() ||
      (st.st_mode & 077) != 0) {
    return Status::PermissionDenied(dir.string() +
                                    " is not a directory of this account's that only it may enter");
  }
  return dir;
}

std::string ProfileTag(const fs::path& profile) {
  const std::string path = fs::absolute(profile).lexically_normal().string();
  char tag[17];
  std::snprintf(tag, sizeof tag, "%016zx", std::hash<std::string>{}(path));
  return tag;
}

Result<std::string> LocalSocketEndpoint(const fs::path& profile, std::string_view name) {
  const std::string profile_path = fs::absolute(profile).lexically_normal().string();
  const std::string path = (fs::path(profile_path) / name).string();
  // A Unix socket's path has at most 107 bytes (sun_path).
  if (path.size() <= 100) return "ipc://" + path;
  // Else this account's /tmp/ztask-UID, named by the profile.
  const std::string shared = "/tmp/ztask-" + std::to_string(::getuid());
  auto dir = OwnPrivateDirectory(shared);
  if (!dir.ok()) {
    return Status(dir.status().code(),
                  dir.status().message() +
                      ": the profile's path is too long for its Unix sockets, and they cannot go "
                      "there instead (remove " +
                      shared + ", or use a shorter --profile-dir)");
  }
  return "ipc://" + (*dir / (ProfileTag(profile_path) + "-" + std::string(name))).string();
}

Status WritePrivateFile(const fs::path& path, const std::string& text) {
  const fs::path temp = path.string() + ".tmp." + std::to_string(::getpid());
  int fd = ::open(temp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) return Errno("cannot write", temp);
  const bool written = ::write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size());
  const bool synced = ::fsync(fd) == 0;
  ::close(fd);
  if (!written || !synced) {
    ::unlink(temp.c_str());
    return Errno("cannot write", temp);
  }
  if (::rename(temp.c_str(), path.c_str()) != 0) {
    ::unlink(temp.c_str());
    return Errno("cannot replace", path);
  }
  return Status::Ok();
}

Status WriteConnectionFile(const fs::path& path, const ConnectionInfo& info) {
  std::error_code ec;
  const fs::path dir = path.parent_path().empty() ? fs::path(".") : path.parent_path();
  if (!fs::exists(dir, ec)) ZTASK_RETURN_IF_ERROR(MakePrivateDirectory(dir));
  return WritePrivateFile(path, SerializeText(info));
}

Status UpdateConnectionFile(const fs::path& path, const ConnectionInfo& initial,
                            const std::function<void(ConnectionInfo&)>& change) {
  std::error_code ec;
  fs::create_directories(path.parent_path(), ec);
  FileLock lock(path);
  if (!lock.ok()) return Errno("cannot lock", path);
  ConnectionInfo info = initial;
  std::optional<ConnectionInfo> before;
  if (fs::exists(path, ec)) {
    auto current = ReadConnectionFile(path);
    if (!current.ok()) return current.status();
    before = *current;
    info = std::move(*current);
  }
  change(info);
  // A restarted hub or scheduler binds where the file already says: it is
  // left as it is, so that a role starts again on a full disk.
  if (before && *before == info) return Status::Ok();
  return WriteConnectionFile(path, info);
}

}  // namespace ztask::protocol
