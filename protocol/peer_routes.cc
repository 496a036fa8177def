#include "protocol/peer_routes.h"

#include <algorithm>
#include <vector>

namespace ztask::protocol {

void PeerRoutes::Prove(std::string_view session, std::string_view route) {
  auto it = routes_.find(session);
  if (it == routes_.end()) {
    if (routes_.size() >= max_sessions_) Evict();
    it = routes_.emplace(std::string(session), Entry{}).first;
  }
  if (it->second.route != route) it->second.route.assign(route);
  it->second.proved = ++counter_;
}

const std::string* PeerRoutes::RouteOf(std::string_view session) const {
  auto it = routes_.find(session);
  return it == routes_.end() ? nullptr : &it->second.route;
}

void PeerRoutes::Forget(std::string_view session) {
  auto it = routes_.find(session);
  if (it != routes_.end()) routes_.erase(it);
}

void PeerRoutes::Evict() {
  std::vector<uint64_t> stamps;
  stamps.reserve(routes_.size());
  for (const auto& [session, entry] : routes_) stamps.push_back(entry.proved);
  auto middle = stamps.begin() + static_cast<std::ptrdiff_t>(stamps.size() / 2);
  std::nth_element(stamps.begin(), middle, stamps.end());
  const uint64_t cut = *middle;
  std::erase_if(routes_, [cut](const auto& r) { return r.second.proved <= cut; });
}

}  // namespace ztask::protocol
