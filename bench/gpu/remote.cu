// gv_gpu_verbs pingpong between two hosts over a NIC, perftest's way: the server runs
// `gv_gpu_verbs pingpong --provider mlx5 ...`, the client `gv_gpu_verbs pingpong SERVER --provider
// mlx5 ...` with the same sizes and iterations. Each side opens its NIC for GPU kernels, makes one
// QP (its CQs and a buffer in GPU memory, registered through dma-buf or nvidia_peermem), and the
// two exchange QpInfo, buffer address and rkey through the World's TCP rendezvous (the server
// listens on -p PORT). Then, size by size and in both variants, one single-thread kernel a side
// runs the PingPong experiment (the client is role 0 and times each round trip); the client
// prints half round trips in perftest's latency columns.
#include <cstdio>
#include <cstring>

#include "../../host_setup/src/world/bootstrap.hpp"
#include "../common/measure.hpp"
#include "harness.hpp"

namespace gv::bench {

namespace {

/// What each side tells the other.
struct Wire {
  gv::QpInfo qp;
  std::uint64_t in = 0;      ///< where the peer's WRITEs land
  std::uint32_t rkey = 0;
  std::uint32_t sizes = 0;   ///< the run each side was asked for: they must agree
  std::uint64_t sizes_sum = 0, iters = 0, region = 0;
};

}  // namespace

void bench_pingpong_remote(const Options& o, Harness& h) {
  const bool client = !o.server.empty();
  const int role = client ? 0 : 1;  // role 0 starts every exchange and times it
  const std::vector<std::uint64_t> sizes = o.sizes.empty() ? std::vector<std::uint64_t>{8} : o.sizes;
  const std::size_t region = region_for(*std::max_element(sizes.begin(), sizes.end()));

  gv::DeviceOptions d;
  d.map_to_gpus = true;
  GV_BENCH_CUDA(cudaSetDevice(0));
  auto dev = gv::Device::open(g_provider.open_name(), g_provider.options(d));
  std::printf("# pingpong between two hosts, this one the %s: %s\n", client ? "client" : "server", dev->describe().c_str());
  auto pd = dev->alloc_pd();
  Shape shape;
  auto scq = dev->create_cq(shape.cq_depth), rcq = dev->create_cq(shape.cq_depth);
  gv::QpCaps caps;
  caps.sq_depth = shape.sq_depth;
  caps.rq_depth = shape.rq_depth;
  caps.max_inline = kMaxInline;
  auto qp = pd->create_qp(*scq, *rcq, caps);
  void* mem = nullptr;
  GV_BENCH_CUDA(cudaMalloc(&mem, 2 * region));
  struct Free {
    void* p;
    ~Free() { (void)cudaFree(p); }
  } free_mem{mem};
  auto* buf = static_cast<std::uint8_t*>(mem);
  auto mr = pd->reg_mr(buf, 2 * region, kAllAccess);

  // The server is rank 0 of a two-rank rendezvous and listens on every address.
  const std::string root = (client ? o.server : std::string("0.0.0.0")) + ":" + std::to_string(o.tcp_port);
  if (!client) std::printf("# waiting for the client at port %d (GV_BOOTSTRAP_TIMEOUT s)\n", o.tcp_port);
  std::fflush(stdout);
  auto boot = gv::detail::tcp_bootstrap(client ? 1 : 0, 2, root, gv::detail::bootstrap_timeout());
  Wire mine;
  mine.qp = qp->info();
  mine.in = reinterpret_cast<std::uint64_t>(buf);
  mine.rkey = mr->rkey();
  mine.sizes = static_cast<std::uint32_t>(sizes.size());
  for (const std::uint64_t s : sizes) mine.sizes_sum += s;
  mine.iters = o.iters;
  mine.region = region;
  Wire all[2];
  boot->allgather(&mine, all, sizeof(Wire));
  const Wire& peer = all[client ? 0 : 1];
  if (peer.sizes != mine.sizes || peer.sizes_sum != mine.sizes_sum || peer.iters != mine.iters)
    throw gv::Error("pingpong: the server and the client were given different sizes or iterations (-s/-a/-n): "
                    "start both with the same ones");
  qp->connect(peer.qp);

  Endpoint ep;
  ep.qp = qp->device_handle();
  ep.scq = scq->device_handle();
  ep.rcq = rcq->device_handle();
  ep.in = buf;
  ep.out = buf + region;
  ep.peer_in = reinterpret_cast<std::uint8_t*>(peer.in);
  ep.lkey = mr->lkey();
  ep.peer_rkey = peer.rkey;
  cudaStream_t st = h.streams[0];

  for (const bool completion : {false, true}) {
    const char* variant = completion ? "completion" : "last_byte";
    if (client) {
      std::printf("# pingpong, two hosts, %s: %s; half round trip\n", variant,
                  completion ? "RDMA WRITE_WITH_IMM, the receiver polls its receive CQ"
                             : "RDMA WRITE into GPU memory, the receiver polls the last byte");
      print_latency_header(stdout, lead("two-host", variant));
    }
    for (const std::uint64_t bytes : sizes) {
      const bool big = bytes > 65536;
      const std::uint64_t iters = big ? std::min<std::uint64_t>(o.iters, 100) : o.iters;
      const std::uint64_t warmup = big ? 10 : 100;
      const std::string what = std::string("two-host pingpong ") + variant + " " + std::to_string(bytes) + " B";
      GV_BENCH_CUDA(cudaMemsetAsync(buf, kPoison, region, st));  // no stale tag may pass for message 0
      GV_BENCH_CUDA(cudaStreamSynchronize(st));
      boot->barrier();
      const PingPong exp{static_cast<std::uint32_t>(bytes), warmup + iters, completion};
      RoleArgs a;
      a.first = role;
      a.ep[0] = ep;
      a.res = h.results();
      a.res.status[role] = kNotReported;
      role_kernel<PingPong, false><<<1, 1, 0, st>>>(exp, a);
      GV_BENCH_CUDA(cudaGetLastError());
      GV_BENCH_CUDA(cudaStreamSynchronize(st));
      if (a.res.status[role] != Status::kOk) {
        std::string events;
        while (auto e = dev->poll_async_event()) events += "; " + e->message;
        throw gv::Error(what + ": " + gv::to_string(a.res.status[role]) + events);
      }
      boot->barrier();  // the peer is done with our buffer before it is poisoned again
      if (!client) continue;
      const LatencyStats s = summarize(microseconds(h.samples_of(0), warmup, exp.n, 2000.0));
      print_latency_row(stdout, bytes, iters, s, lead("two-host", variant));
      g_json.row(latency_json("pingpong", std::string("\"mode\":\"two-host\",\"variant\":\"") + variant +
                                             "\",\"provider\":\"" + g_provider.provider + "\",",
                              bytes, iters, s));
    }
  }
  if (!client) std::printf("# server: done (the client printed the figures)\n");
  boot->finalize();
}

}  // namespace gv::bench
