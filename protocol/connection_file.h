// The connection file: one JSON file (mode 0600) in a profile directory that
// tells every process of a cluster where everything is and the key to sign
// with. Engines and clients need nothing else.
//
//   {"version": 1, "signature_scheme": "hmac-sha256", "key": "<64 hex>",
//    "hub": {"registration": ..., "query": ..., "notifier": ..., "monitor": ...,
//            "events": ...},
//    "scheduler": {"client": ..., "engine": ...},
//    "curve": {"server_public": "<Z85>", "client_public": ..., "client_secret": ...}}
//
// "curve" is there only for a cluster started with --curve (see security.h).
//
// A server fills in its own section when it has bound its sockets; an empty
// endpoint means that part has not started yet.
//
// Thread safety: plain functions; concurrent updates of one file from several
// processes are serialised with an advisory lock.
#ifndef ZTASK_PROTOCOL_CONNECTION_FILE_H_
#define ZTASK_PROTOCOL_CONNECTION_FILE_H_

#include <filesystem>
#include <functional>
#include <string>

#include "ztask/status.h"

namespace ztask::protocol {

inline constexpr std::string_view kSchemeHmac = "hmac-sha256";
inline constexpr std::string_view kSchemeNone = "none";
inline constexpr std::string_view kConnectionFileName = "ztask-cluster.json";

struct HubEndpoints {
  std::string registration;  // ROUTER: engines register and heartbeat
  std::string query;         // ROUTER: client queries
  std::string notifier;      // PUB: engines coming and going, to the scheduler
  std::string monitor;       // ROUTER: the scheduler's task lifecycle messages
  std::string events;        // PUB: the event stream for monitors
  friend bool operator==(const HubEndpoints&, const HubEndpoints&) = default;
};

struct SchedulerEndpoints {
  std::string client;  // ROUTER: task requests and replies
  std::string engine;  // ROUTER: tasks to engines, results back
  friend bool operator==(const SchedulerEndpoints&, const SchedulerEndpoints&) = default;
};

// CurveZMQ keys, Z85 text (40 characters each). The servers' secret key is
// not here: it stays in the profile directory (security.h).
struct CurveKeys {
  std::string server_public;
  std::string client_public;
  std::string client_secret;
  bool enabled() const { return !server_public.empty(); }
  friend bool operator==(const CurveKeys&, const CurveKeys&) = default;
};

struct ConnectionInfo {
  std::string signature_scheme{kSchemeHmac};
  std::string key;  // raw key bytes; empty only with scheme "none"
  HubEndpoints hub;
  SchedulerEndpoints scheduler;
  CurveKeys curve;
  friend bool operator==(const ConnectionInfo&, const ConnectionInfo&) = default;
};

// ~/.ztask/profile_default (or ./.ztask/profile_default without $HOME).
std::filesystem::path DefaultProfileDir();
std::filesystem::path ConnectionFilePath(const std::filesystem::path& profile_dir);

// 32 random bytes: a fresh cluster key.
std::string GenerateKey();
// A random secret to put in a URL: 48 hex digits.
std::string GenerateToken();

// A cluster without a key ("none") may only run when its user asked for it
// (allow_insecure, from --insecure): then this logs a warning to stderr;
// otherwise it is an error saying how to fix it.
Status CheckAuthenticated(const ConnectionInfo& info, bool allow_insecure,
                          const std::filesystem::path& path);

// Reads and validates. Errors name the file and what is wrong: missing file,
// not JSON, a missing or mistyped field, a mode that lets others read it, a
// symbolic link (it is opened without following one), a file another user owns.
Result<ConnectionInfo> ReadConnectionFile(const std::filesystem::path& path);

// The text alone: parses and validates (`path` only names it in errors), and
// the inverse. Exposed for the fuzz target.
Result<ConnectionInfo> ParseConnectionFile(const std::string& text,
                                           const std::filesystem::path& path);
std::string SerializeConnectionFile(const ConnectionInfo& info);

// Creates `dir` (and its parents) if missing and makes it 0700.
Status MakePrivateDirectory(const std::filesystem::path& dir);
// `dir` (its parent must be there), made with mode 0700 if missing, while
// it is a real directory of this account's that no one else may enter;
// fails when it is not (another account made it first, or left a link
// there), for shared places such as /tmp.
Result<std::filesystem::path> OwnPrivateDirectory(const std::filesystem::path& dir);
// A profile's name in such a shared place: a hash of its absolute path, the
// same for every role and every restart.
std::string ProfileTag(const std::filesystem::path& profile);
// Where a role of a cluster on loopback binds a socket called `name`: a
// Unix socket inside the profile directory (mode 0700, so that no other
// account of the host reaches it), or, when that path is too long for one
// (a socket's path holds at most 107 bytes), in this account's private
// /tmp/ztask-UID, named by the profile, so that a restarted role binds the
// same. Fails when /tmp/ztask-UID is not a directory of this account's
// that only it may enter.
Result<std::string> LocalSocketEndpoint(const std::filesystem::path& profile,
                                        std::string_view name);
// Replaces `path` with `text` at once (a temporary file, fsync, rename),
// mode 0600 whatever the umask.
Status WritePrivateFile(const std::filesystem::path& path, const std::string& text);

// Writes atomically (temporary file + rename) with mode 0600, creating the
// profile directory (mode 0700) when needed.
Status WriteConnectionFile(const std::filesystem::path& path, const ConnectionInfo& info);

// Under an exclusive lock: reads the file (or starts from `initial` when it
// does not exist), applies `change`, writes it back when that changed what
// it says (a role restarted on its ports writes nothing: it needs no free
// disk).
Status UpdateConnectionFile(const std::filesystem::path& path, const ConnectionInfo& initial,
                            const std::function<void(ConnectionInfo&)>& change);

}  // namespace ztask::protocol

#endif  // ZTASK_PROTOCOL_CONNECTION_FILE_H_
