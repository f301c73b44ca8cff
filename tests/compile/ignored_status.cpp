// Compiled by compile.ignored_status_refused: a post whose gv::Status is dropped does not
// compile in a build that treats ignored results as errors (gv::Status is [[nodiscard]]).
#include <gpuverbs/ib.hpp>

void drop(const gv::ib::QpHandle& qp, const gv::ib::SendWr& wr) {
  gv::ib::post_send<gv::ib::Ownership::kExclusive>(qp, wr);
}
