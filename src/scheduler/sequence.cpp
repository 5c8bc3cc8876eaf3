#include "scheduler/sequence.hpp"

namespace photon {

const char* seq_status_name(SeqStatus s) noexcept {
  switch (s) {
    case SeqStatus::waiting: return "waiting";
    case SeqStatus::running: return "running";
    case SeqStatus::preempted: return "preempted";
    case SeqStatus::finished: return "finished";
  }
  return "?";
}

void PenaltyCounts::add(int32_t token, bool generated) {
  auto [it, inserted] = index_.try_emplace(token, int32_t(tokens_.size()));
  if (inserted) {
    tokens_.push_back(token);
    output_counts_.push_back(0);
  }
  if (generated) ++output_counts_[size_t(it->second)];
}

namespace {
bool penalties_active(const SamplingParams& p) {
  return p.repetition_penalty != 1.0f || p.presence_penalty != 0.0f || p.frequency_penalty != 0.0f;
}
}  // namespace

Sequence::Sequence(uint64_t id, std::vector<int32_t> prompt, SequenceParams params)
    : id_(id),
      tokens_(std::move(prompt)),
      prompt_len_(int32_t(tokens_.size())),
      params_(std::move(params)),
      tracks_penalties_(penalties_active(params_.sampling)) {
  if (tracks_penalties_)
    for (int32_t t : tokens_) penalties_.add(t, false);
}

void Sequence::append_token(int32_t token) {
  tokens_.push_back(token);
  if (tracks_penalties_) penalties_.add(token, true);
}

void Sequence::append_placeholder() {
  tokens_.push_back(kPlaceholder);
  placeholder_ = true;
}

void Sequence::fill_placeholder(int32_t token) {
  tokens_.back() = token;
  placeholder_ = false;
  if (tracks_penalties_) penalties_.add(token, true);
}

}  // namespace photon
