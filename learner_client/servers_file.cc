// Copyright dreplay authors.

#include "learner_client/servers_file.h"

#include <fstream>
#include <sstream>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/status_macros.h"
#include "glog/logging.h"
#include "protocol/host_port.h"
#include "verbs/options.h"

namespace dreplay::learner {

absl::StatusOr<std::vector<NodeAddress>> ParseServersFile(absl::string_view text) {
  std::vector<NodeAddress> nodes;
  std::set<std::string> seen;
  int number = 0;
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    ++number;
    const size_t hash = line.find('#');
    if (hash != absl::string_view::npos) line = line.substr(0, hash);
    std::vector<std::string> fields =
        absl::StrSplit(line, absl::ByAnyChar(" \t\r"), absl::SkipEmpty());
    if (fields.empty()) continue;
    auto bad = [&](absl::string_view why) {
      return absl::InvalidArgumentError(absl::StrCat(
          "servers file line ", number, " \"", absl::StripAsciiWhitespace(line), "\": ", why));
    };
    if (fields.size() > 2) return bad("expected HOST:PORT and at most a link");
    NodeAddress node;
    node.server = fields[0];
    if (fields.size() == 2) node.link = fields[1];
    std::string host;
    uint16_t port = 0;
    const absl::Status address = protocol::ParseHostPort(node.server, &host, &port);
    if (!address.ok()) return bad(address.message());
    if (!node.link.empty()) {
      const absl::StatusOr<verbs::LinkModel> link = verbs::ParseLinkModel(node.link);
      if (!link.ok()) return bad(link.status().message());
    }
    if (!seen.insert(node.server).second) return bad("the address is listed twice");
    nodes.push_back(std::move(node));
  }
  return nodes;
}

absl::StatusOr<std::vector<NodeAddress>> ReadServersFile(const std::string& path) {
  std::ifstream in(path);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot read the servers file ", path));
  std::ostringstream text;
  text << in.rdbuf();
  if (in.bad()) return absl::DataLossError(absl::StrCat("error reading ", path));
  absl::StatusOr<std::vector<NodeAddress>> nodes = ParseServersFile(text.str());
  if (!nodes.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": ", nodes.status().message()));
  }
  return nodes;
}

absl::StatusOr<client::ConnectionOptions> NodeConnection(const client::ConnectionOptions& base,
                                                         const NodeAddress& node) {
  client::ConnectionOptions c = base;
  RETURN_IF_ERROR(protocol::ParseHostPort(node.server, &c.session.host, &c.session.port));
  if (!node.link.empty()) {
    absl::StatusOr<verbs::LinkModel> link = verbs::ParseLinkModel(node.link);
    if (!link.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("link of ", node.server, ": ", link.status().message()));
    }
    c.session.qp.link = *link;
  }
  return c;
}

absl::Status ServersFileWatcherOptions::Validate() const {
  if (path.empty()) return absl::InvalidArgumentError("servers file watcher: no path");
  if (interval <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError("servers file watcher: interval must be > 0");
  }
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<ServersFileWatcher>> ServersFileWatcher::Start(
    const ServersFileWatcherOptions& options, const std::vector<std::string>& known, Join join) {
  RETURN_IF_ERROR(options.Validate());
  if (!join) return absl::InvalidArgumentError("servers file watcher: no join function");
  return std::unique_ptr<ServersFileWatcher>(
      new ServersFileWatcher(options, known, std::move(join)));
}

ServersFileWatcher::ServersFileWatcher(const ServersFileWatcherOptions& options,
                                       const std::vector<std::string>& known, Join join)
    : options_(options),
      join_(std::move(join)),
      known_(known.begin(), known.end()),
      thread_([this] { Run(); }) {}

ServersFileWatcher::~ServersFileWatcher() {
  {
    MutexLock lock(&mu_);
    stop_ = true;
    stopped_.Signal();
  }
  thread_.join();
}

uint64_t ServersFileWatcher::joined() const {
  MutexLock lock(&mu_);
  return joined_;
}

uint64_t ServersFileWatcher::bad_readings() const {
  MutexLock lock(&mu_);
  return bad_readings_;
}

void ServersFileWatcher::Run() {
  for (;;) {
    {
      MutexLock lock(&mu_);
      // A wakeup before the interval (spurious) only reads the file sooner.
      if (!stop_) stopped_.WaitWithTimeout(&mu_, options_.interval);
      if (stop_) return;
    }
    ReadOnce();
  }
}

void ServersFileWatcher::ReadOnce() {
  absl::StatusOr<std::vector<NodeAddress>> nodes = ReadServersFile(options_.path);
  if (!nodes.ok()) {
    uint64_t bad = 0;
    {
      MutexLock lock(&mu_);
      bad = ++bad_readings_;
    }
    LOG_IF(WARNING, bad == 1 || bad % 30 == 0)
        << nodes.status() << " (reading " << bad << " that failed; the nodes stay as they are)";
    return;
  }
  for (const NodeAddress& node : *nodes) {
    if (known_.count(node.server) > 0) continue;
    {
      MutexLock lock(&mu_);
      if (stop_) return;
    }
    LOG(INFO) << "servers file " << options_.path << " lists " << node.server << ": joining it";
    const absl::Status joined = join_(node);
    if (!joined.ok()) {
      LOG(WARNING) << "replay node " << node.server << " could not join: " << joined
                   << " (tried again at the next reading)";
      continue;
    }
    known_.insert(node.server);
    MutexLock lock(&mu_);
    ++joined_;
  }
}

}  // namespace dreplay::learner
