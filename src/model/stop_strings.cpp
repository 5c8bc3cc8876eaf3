// StopStringMatcher: `pending_` holds the text not yet released, which is at
// most the longest stop string minus one byte between calls (a suffix that
// is still a prefix of some stop string).
#include <algorithm>

#include "photon/tokenizer.hpp"

namespace photon {

StopStringMatcher::StopStringMatcher(std::vector<std::string> stops) : stops_(std::move(stops)) {
  for (const auto& s : stops_) max_len_ = std::max(max_len_, s.size());
}

Result<StopStringMatcher> StopStringMatcher::create(std::vector<std::string> stop_strings) {
  for (size_t i = 0; i < stop_strings.size(); ++i)
    if (stop_strings[i].empty())
      return fail(Errc::invalid_argument, "stop string " + std::to_string(i) + " is empty");
  return StopStringMatcher(std::move(stop_strings));
}

StopStringMatcher::Output StopStringMatcher::feed(std::string_view chunk) {
  out_.clear();
  if (stopped()) return {std::string_view(), true};
  if (stops_.empty()) {
    out_.assign(chunk);
    return {out_, false};
  }
  pending_.append(chunk);
  // The earliest occurrence of any stop string (the longest one on a tie).
  size_t best_pos = std::string::npos;
  int32_t best = -1;
  for (size_t i = 0; i < stops_.size(); ++i) {
    const size_t pos = pending_.find(stops_[i]);
    if (pos == std::string::npos) continue;
    if (pos < best_pos || (pos == best_pos && stops_[i].size() > stops_[best].size())) {
      best_pos = pos;
      best = static_cast<int32_t>(i);
    }
  }
  if (best >= 0) {
    stopped_index_ = best;
    out_.assign(pending_, 0, best_pos);
    pending_.clear();
    return {out_, true};
  }
  // Hold back the longest suffix that is a proper prefix of some stop string.
  size_t hold = 0;
  const size_t limit = std::min(pending_.size(), max_len_ - 1);
  for (size_t k = limit; k > 0; --k) {
    const std::string_view suffix(pending_.data() + pending_.size() - k, k);
    const bool is_prefix = std::any_of(stops_.begin(), stops_.end(), [&](const std::string& s) {
      return s.size() > k && std::string_view(s).substr(0, k) == suffix;
    });
    if (is_prefix) {
      hold = k;
      break;
    }
  }
  out_.assign(pending_, 0, pending_.size() - hold);
  pending_.erase(0, pending_.size() - hold);
  return {out_, false};
}

std::string_view StopStringMatcher::finish() {
  out_.clear();
  if (!stopped()) out_.swap(pending_);
  pending_.clear();
  return out_;
}

void StopStringMatcher::reset() {
  pending_.clear();
  out_.clear();
  stopped_index_ = -1;
}

}  // namespace photon
