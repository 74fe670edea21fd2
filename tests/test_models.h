// Helpers shared by the tests that build a model (apart from test_support.h, which needs no
// LibTorch: a test that includes only it compiles without the torch precompiled header).
#pragma once

#include <cstdint>
#include <string>

#include "attention/method.h"
#include "models/gpt.h"

namespace test_support {

// A small model's options: two blocks of width d_model in `heads` heads of d_model / heads, trained
// at `context`; every other option (vocabulary, method) at its default.
inline models::GPTOptions small_gpt_options(int64_t context, int64_t d_model = 32, int64_t heads = 2) {
  models::GPTOptions o;
  o.layers = 2;
  o.d_model = d_model;
  o.heads = heads;
  o.head_dim = d_model / heads;
  o.attention.train_context = context;
  return o;
}

// A method's options: `method` in `heads` heads of `head_dim`, trained at L.
inline attention::MethodOptions method_options(const std::string& method, int64_t head_dim = 16, int64_t L = 64,
                                               int64_t heads = 2) {
  attention::MethodOptions o;
  o.method = method;
  o.head_dim = head_dim;
  o.train_context = L;
  o.heads = heads;
  return o;
}

}  // namespace test_support
