// expect_error(f, what): `f` must throw gv::Error whose message contains `what`.
#pragma once
#include <gtest/gtest.h>

#include <string>

#include <gpuverbs/host/verbs.hpp>

namespace gvt {

template <class F>
void expect_error(F&& f, const std::string& what) {
  try {
    f();
    ADD_FAILURE() << "no error; expected one mentioning '" << what << "'";
  } catch (const gv::Error& e) {
    EXPECT_NE(std::string(e.what()).find(what), std::string::npos) << "message: " << e.what();
  }
}

}  // namespace gvt
