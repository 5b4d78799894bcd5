// Copyright dreplay authors.
//
// actor_credentials: writes each actor its own credential, derived from the
// actors' token of the replay server (protocol::ActorCredential), so that an
// actor can prove its own id and no other.
//
//   actor_credentials --token_file=/etc/dreplay/token --actors=8 \
//       --out_dir=/etc/dreplay/actors
//   # actor i then runs with --auth_token_file=/etc/dreplay/actors/actor-i.credential
//
// --token_file is the file the server reads the actors' token from (its
// --actor_token_file, else its --auth_token_file); it must be mode 0600 or
// 0400. Each credential goes to <out_dir>/actor-<id>.credential, created
// with mode 0600; an existing file is left alone and reported (a credential
// is the same for the same token and id, so there is nothing to refresh),
// unless it differs, which is an error. Exit status: 0 when every file is
// in place, 1 on a failure, 2 for a bad flag.

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <iostream>
#include <optional>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "common/binary_main.h"
#include "common/flag_values.h"
#include "common/status_macros.h"
#include "gflags/gflags.h"
#include "protocol/auth.h"
#include "protocol/config.h"
#include "protocol/handshake.h"

DEFINE_string(token_file, "",
              "the server's actors' token (its --actor_token_file, else its --auth_token_file)");
DEFINE_int64(first_actor, 0, "the first actor id to write a credential for");
DEFINE_int64(actors, 0, "how many actor ids, from --first_actor");
DEFINE_string(out_dir, "", "where actor-<id>.credential files go (created, mode 0700)");

namespace dreplay::server {
namespace {

constexpr char kUsage[] =
    "Usage: actor_credentials --token_file=F --actors=N [--first_actor=0] --out_dir=D\n"
    "Writes D/actor-<id>.credential (mode 0600) for ids first_actor .. first_actor+N-1: each "
    "actor's own credential, which it gives as its --auth_token_file.";

// Writes `credential` to `path` unless it is there already with the same
// contents.
absl::Status WriteCredential(const std::string& path, const std::string& credential) {
  const std::string contents = credential + "\n";
  const int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd < 0 && errno == EEXIST) {
    std::ifstream in(path);
    std::string line;
    std::getline(in, line);
    if (line != credential) {
      return absl::FailedPreconditionError(
          absl::StrCat(path,
                       " exists and holds another credential (another token?); remove it "
                       "to write this one"));
    }
    std::cout << "actor_credentials: " << path << " is in place already\n";
    return absl::OkStatus();
  }
  if (fd < 0) return absl::InternalError(absl::StrCat("create ", path, ": ", strerror(errno)));
  const ssize_t n = write(fd, contents.data(), contents.size());
  const bool synced = fsync(fd) == 0;
  close(fd);
  if (n != static_cast<ssize_t>(contents.size()) || !synced) {
    unlink(path.c_str());
    return absl::InternalError(absl::StrCat("write ", path, ": ", strerror(errno)));
  }
  std::cout << "actor_credentials: wrote " << path << "\n";
  return absl::OkStatus();
}

int Run(const BinaryMain& binary) {
  if (FLAGS_token_file.empty()) {
    return binary.BadFlag(absl::InvalidArgumentError("--token_file is required"));
  }
  if (FLAGS_out_dir.empty()) {
    return binary.BadFlag(absl::InvalidArgumentError("--out_dir is required"));
  }
  if (absl::Status s = CheckRange("actors", FLAGS_actors, 1, protocol::kMaxActors); !s.ok()) {
    return binary.BadFlag(s);
  }
  if (absl::Status s = CheckRange("first_actor", FLAGS_first_actor, 0,
                                  int64_t{protocol::kMaxActors} - FLAGS_actors);
      !s.ok()) {
    return binary.BadFlag(s);
  }
  absl::StatusOr<std::string> token =
      ReadAuthToken("", FLAGS_token_file, EmptyTokenFile::kRefused, "token_file");
  if (!token.ok()) return binary.BadFlag(token.status());
  if (token->size() < protocol::kMinAuthTokenBytes ||
      token->size() > protocol::kMaxAuthTokenBytes) {
    return binary.BadFlag(FlagError(
        "token_file", FLAGS_token_file,
        absl::StrCat("the token is ", token->size(), " bytes; a server takes ",
                     protocol::kMinAuthTokenBytes, " to ", protocol::kMaxAuthTokenBytes)));
  }
  if (mkdir(FLAGS_out_dir.c_str(), 0700) != 0 && errno != EEXIST) {
    return binary.Failure(
        absl::InternalError(absl::StrCat("mkdir ", FLAGS_out_dir, ": ", strerror(errno))));
  }
  for (int64_t id = FLAGS_first_actor; id < FLAGS_first_actor + FLAGS_actors; ++id) {
    const std::string path = absl::StrCat(FLAGS_out_dir, "/actor-", id, ".credential");
    const absl::Status s =
        WriteCredential(path, protocol::ActorCredential(*token, static_cast<uint32_t>(id)));
    if (!s.ok()) return binary.Failure(s);
  }
  return kExitSuccess;
}

}  // namespace
}  // namespace dreplay::server

int main(int argc, char** argv) {
  dreplay::BinaryMain binary({"actor_credentials", dreplay::server::kUsage, "actor_credentials"});
  if (std::optional<int> done = binary.Init(argc, argv)) return *done;
  return dreplay::server::Run(binary);
}
