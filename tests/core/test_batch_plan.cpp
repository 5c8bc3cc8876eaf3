#include <catch2/catch.hpp>

#include <vector>

#include "core/batch_plan.hpp"

using namespace photon;

TEST_CASE("BatchPlan flattens a mixed prefill/decode batch", "[core]") {
  BatchPlan plan;
  const int32_t bs = 4;
  std::vector<int32_t> a_ids = {10, 11, 12, 13, 14};  // prefill of 5 tokens
  std::vector<int32_t> a_blocks = {7, 2};
  std::vector<int32_t> b_ids = {99};                   // decode at position 6
  std::vector<int32_t> b_blocks = {0, 5};
  plan.add_sequence(a_ids.data(), 5, 0, a_blocks.data(), 2, bs, true);
  plan.add_sequence(b_ids.data(), 1, 6, b_blocks.data(), 2, bs, true);
  plan.finalize();
  CHECK(plan.num_tokens() == 6);
  CHECK(plan.num_seqs() == 2);
  CHECK(plan.query_start == std::vector<int32_t>{0, 5, 6});
  CHECK(plan.positions == std::vector<int32_t>{0, 1, 2, 3, 4, 6});
  CHECK(plan.context_lens == std::vector<int32_t>{5, 7});
  CHECK(plan.slot_mapping == std::vector<int32_t>{28, 29, 30, 31, 8, 22});
  CHECK(plan.logits_rows == std::vector<int32_t>{4, 5});
  CHECK(plan.max_blocks_per_seq == 2);
  CHECK(plan.block_tables == std::vector<int32_t>{7, 2, 0, 5});
  CHECK(plan.validate(bs, 8).has_value());
  CHECK_FALSE(plan.validate(bs, 6).has_value());  // block 7 outside a 6-block pool
  plan.slot_mapping[2] = 0;
  CHECK(plan.validate(bs, 8).error().code == Errc::internal);
}

TEST_CASE("BatchPlan with a fixed block-table width lays out the same arrays", "[core]") {
  const int32_t bs = 4;
  const std::vector<int32_t> a_ids = {10, 11, 12, 13, 14}, a_blocks = {7, 2};
  const std::vector<int32_t> b_ids = {99}, b_blocks = {0, 5, 3};
  BatchPlan ragged, direct;
  for (BatchPlan* p : {&ragged, &direct}) {
    p->clear();
    if (p == &direct) p->set_block_table_width(3);
    p->add_sequence(a_ids.data(), 5, 0, a_blocks.data(), 2, bs, true);
    p->add_sequence(b_ids.data(), 1, 9, b_blocks.data(), 3, bs, true);
    p->finalize();
  }
  CHECK(direct.block_tables == std::vector<int32_t>{7, 2, -1, 0, 5, 3});
  CHECK(direct.block_tables == ragged.block_tables);
  CHECK(direct.max_blocks_per_seq == ragged.max_blocks_per_seq);
  CHECK(direct.slot_mapping == ragged.slot_mapping);
  CHECK(direct.validate(bs, 8).has_value());
  direct.clear();  // clear() forgets the width
  direct.add_sequence(b_ids.data(), 1, 9, b_blocks.data(), 3, bs, true);
  direct.finalize();
  CHECK(direct.block_tables == b_blocks);
}

TEST_CASE("logits_of_every_token holds for decode-only plans and for no other", "[core]") {
  const int32_t bs = 4;
  const std::vector<int32_t> a_ids = {10, 11, 12}, b_ids = {99}, c_ids = {7}, blocks = {0, 1};
  BatchPlan decode;  // two decodes: logits rows 0 and 1
  decode.add_sequence(b_ids.data(), 1, 5, blocks.data(), 2, bs, true);
  decode.add_sequence(c_ids.data(), 1, 2, blocks.data(), 2, bs, true);
  decode.finalize();
  CHECK(logits_of_every_token(decode));
  BatchPlan mixed;  // a prefill wants only its last token's logits
  mixed.add_sequence(a_ids.data(), 3, 0, blocks.data(), 2, bs, true);
  mixed.add_sequence(b_ids.data(), 1, 5, blocks.data(), 2, bs, true);
  mixed.finalize();
  CHECK_FALSE(logits_of_every_token(mixed));
  BatchPlan skipped;  // a decode whose logits are not wanted
  skipped.add_sequence(b_ids.data(), 1, 5, blocks.data(), 2, bs, false);
  skipped.add_sequence(c_ids.data(), 1, 2, blocks.data(), 2, bs, true);
  skipped.finalize();
  CHECK_FALSE(logits_of_every_token(skipped));
  BatchPlan reordered = decode;  // every token, out of order
  reordered.logits_rows = {1, 0};
  CHECK_FALSE(logits_of_every_token(reordered));
}
