// gv_gpu_verbs: the verbs path measured in the dissertation's four control modes, beside a CPU
// figure, and what the device API costs on the GPU.
//
// Modes (--mode, a comma list, default all five). Each drives the soft provider through the
// same device-API calls (gv::ib::post_send, poll_cq, post_recv), compiled for the GPU or the host:
//   gpu-qgpu       GPU-controlled, queues on the GPU: kernels post and poll; the soft HCA's GPU
//                  engine (a persistent kernel) executes; queues and buffers in GPU memory. With
//                  two GPUs, one device (and engine) per GPU and QPs connected across them.
//   gpu-qhost      GPU-controlled, queues in pinned host memory mapped into the GPUs: kernels
//                  post and poll; the CPU engine (a host thread) executes.
//   host-controlled  the dissertation's baseline, per message: buffers in GPU memory, a kernel
//                  produces the message, the host waits for it, posts the WRITE_WITH_IMM (the CPU
//                  engine executes, moving GPU bytes with CUDA copies); the peer host sees the
//                  receive completion and launches the kernel that consumes it (pingpong only;
//                  hostctl.hpp).
//   host-assisted  a kernel raises request counts in mapped host memory (system-scope release);
//                  a host proxy thread per QP posts those work requests through the device API on
//                  the host, polls their completions (CPU engine) and raises done counts the
//                  kernel waits on (system-scope acquire). Buffers are pinned host memory that
//                  the kernel reads and writes itself: a ping-pong's receiver polls the last byte.
//   cpu-threads    host threads post and poll, buffers in host memory, the CPU engine executes:
//                  a CPU figure, no GPU involved (gv_pingpong's, here for side-by-side rows).
//
// Subcommands:
//   pingpong   RDMA WRITE ping-pong between two QPs, one block (GPU) or thread (host) a side;
//              with two GPUs one side on each. Half round trip in perftest's latency columns.
//              Variants: last_byte (the receiver polls the last byte of its buffer, as perftest
//              and the dissertation do) and completion (WRITE_WITH_IMM consumed by receives
//              posted ahead in batches, polled on the receive CQ).
//   bw         WRITEs from one QP, 64 in flight, one CQE per 16: perftest's bandwidth columns.
//   msgrate    8 B and 64 B inline WRITEs on 1..32 QPs: one block per QP in the GPU modes, one
//              host thread (host) or proxy thread (host-assisted) per QP, capped at one per
//              core besides the CPU engine's (rows beyond are skipped, with a note).
//   atomics    FETCH_ADD and CMP_SWP latency, each waited for: perftest's latency columns.
//   postpoll   cost on the GPU of post_send (one thread exclusive/shared, a warp writing one
//              WQE, a warp posting 32 WQEs with one doorbell) and of poll_cq on a ready CQE (one
//              thread, or a warp taking up to 32 with poll_cq_warp): on
//              synthetic rings in GPU or pinned host memory with no executor (the
//              dissertation's Table 5.2), and, for gpu-qgpu, on a real QP whose WQEs the GPU
//              engine executes (exclusive, warp and warp-batch posting: a queue keeps one
//              ownership mode for life). --no-engine leaves the real QP out, e.g. under ncu,
//              which serialises kernel launches and so would stall behind the resident engine.
//   anchors    what the hardware gives without any verbs: a flag ping-pong between two blocks
//              through GPU memory and through pinned host memory, and between two GPUs by peer
//              stores when two are present; cudaMemcpyPeerAsync latency; the message rate RC
//              order alone allows (messages to the peer GPU, or with one GPU to its own memory,
//              a system-scope fence after each, a QP a warp or a lane of one warp): the GPU
//              engine's msgrate ceiling.
//   drain      gpu-qgpu only: the GPU engine's time per WQE apart from its posters. With the
//              engine stopped, 1 or 16 QPs get up to 128 inline WRITEs each; the engine resumes
//              under blocks that wait for the CQEs, and a QP's first-to-last CQE time gives it.
//              --hold-ms MS runs the engine MS ms alone instead (for ncu; no timing).
//   devices    the GPUs present and whether two reach each other; exit status 1 without one
//              (scripts/run.sh asks it which ping-pong to run).
//
// With --provider mlx5 (and perftest's -d DEVICE, -i PORT, -x GID_INDEX) a ConnectX HCA executes
// instead of the software HCA: two QPs of one port connected to each other, queues in host
// memory (gpu-qgpu is refused; the default modes are gpu-qhost and cpu-threads). pingpong then
// runs between two hosts, perftest's way: `gv_gpu_verbs pingpong --provider mlx5` on the server,
// `gv_gpu_verbs pingpong SERVER --provider mlx5` on the client (remote.cu; -p PORT, default 18515).
// Options: --mode LIST, -a (8 B .. 4 MiB) or -s BYTES, -n ITERS, --gpus 1|2 (default 2 when two
// GPUs reach each other), --json FILE (the table is printed either way; FILE gets one object
// naming the run, then one per row: bench, mode, variant, bytes, iters, the columns),
// --no-engine (postpoll), --hold-ms (drain).
//
// Time is read by whoever runs the experiment through gv::sync::now_ns(): %globaltimer in
// kernels, CLOCK_MONOTONIC on host threads. Payloads are seeded; after every run the received
// bytes (and the poisoned byte after them) are checked before its row is printed. Every wait is
// bounded; a run that times out or fails reports it, and the program prints the error and exits 1.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <string>

#include "../common/args.hpp"
#include "harness.hpp"

namespace gv::bench {
namespace {

constexpr char kUsage[] =
    "usage: gv_gpu_verbs pingpong|bw|msgrate|atomics|postpoll|anchors|drain [--mode LIST] [-a | -s BYTES]\n"
    "                    [-n ITERS] [--gpus 1|2] [--engine-warps N] [--poster exclusive|owner] [--json FILE]\n"
    "                    [--provider soft|mlx5 [-d DEVICE] [-i PORT] [-x GID_INDEX]]\n"
    "       gv_gpu_verbs pingpong [SERVER] --provider mlx5 [-p PORT] ...   (two hosts: the server\n"
    "                    runs it without SERVER, the client names the server)\n"
    "       gv_gpu_verbs devices   (the GPUs present; exit status 1 when there are none)\n"
    "  --mode LIST  comma list of gpu-qgpu, gpu-qhost, host-controlled, host-assisted, cpu-threads\n"
    "               (default: all five; host-controlled runs only pingpong)\n"
    "  -a           sizes 8 B .. 4 MiB (pingpong, bw; pingpong runs at most 100 iterations above 64 KiB)\n"
    "  -s BYTES     one size, 1 B .. 64 MiB (default: 8 B; bw 64 KiB)\n"
    "  -n ITERS     iterations a size (pingpong, atomics), messages a size (bw, at most 512 MiB)\n"
    "               or a QP (msgrate), launches x 100 (postpoll), round trips (anchors); 1 .. 1000000,\n"
    "               default 1000\n"
    "  --gpus 1|2   GPUs to run on (default: 2 when two GPUs reach each other's memory)\n"
    "  --engine-warps N  gpu-qgpu: the GPU engine's warps, 1..32 (default 4)\n"
    "  --poster P   gpu-qgpu and gpu-qhost: how a kernel posts and polls its QP: exclusive\n"
    "               (post_send/poll_cq<kExclusive>, the default) or owner (a QpOwner holding the\n"
    "               queues' positions in registers); rows name it in their \"poster\" key\n"
    "  --json FILE  append one JSON object per row to FILE, after one naming the run (commit, device,\n"
    "               date, command); the table is printed either way\n"
    "  --no-engine  postpoll: synthetic rings only, no resident GPU engine (ncu serialises kernels)\n"
    "  --hold-ms MS drain: let the engine run MS ms alone, then check (for ncu), 1 .. 60000; no timing\n"
    "  -h, --help   this text\n"
    GV_BENCH_PROVIDER_USAGE
    "  -p PORT      two-host pingpong: the server's TCP port, 1024 .. 65535 (default 18515)\n";

Options parse(int argc, char** argv) {
  ArgWalker args(argc, argv);
  if (!args.more()) throw UsageError("no subcommand");
  Options o;
  o.cmd = args.next();
  const std::string cmds[] = {"pingpong", "bw", "msgrate", "atomics", "postpoll", "anchors", "drain", "devices"};
  if (std::find(std::begin(cmds), std::end(cmds), o.cmd) == std::end(cmds))
    throw UsageError("unknown subcommand " + o.cmd);
  bool modes_given = false;
  while (args.more()) {
    const std::string a = args.next();
    if (g_provider.take(a, args)) continue;
    if (o.cmd == "pingpong" && !a.empty() && a[0] != '-' && o.server.empty()) {
      o.server = a;
    } else if (a == "-p") {
      o.tcp_port = static_cast<int>(args.number(a, 1024, 65535));
    } else if (a == "--json") {
      o.json = args.value(a);
    } else if (a == "-a") {
      o.sizes = pow2_sizes(3, 22);
    } else if (a == "-s") {
      o.sizes = {args.number(a, 1, std::uint64_t{64} << 20)};
    } else if (a == "-n") {
      o.iters = args.number(a, 1, 1'000'000);
    } else if (a == "--gpus") {
      o.gpus = static_cast<int>(args.number(a, 1, 2));
    } else if (a == "--poster") {
      const std::string v = args.value(a);
      if (v != "exclusive" && v != "owner") throw UsageError("--poster takes exclusive or owner, not '" + v + "'");
      g_owner = v == "owner";
    } else if (a == "--engine-warps") {
      g_engine_warps = static_cast<std::uint32_t>(args.number(a, 1, 32));
    } else if (a == "--no-engine" && o.cmd == "postpoll") {
      o.engine = false;
    } else if (a == "--hold-ms" && o.cmd == "drain") {
      o.hold_ms = static_cast<int>(args.number(a, 1, 60'000));
    } else if (a == "--mode") {
      modes_given = true;
      o.modes.clear();
      const std::string list = args.value(a);
      for (std::size_t at = 0; at <= list.size();) {
        const std::size_t end = std::min(list.find(',', at), list.size());
        const std::string m = list.substr(at, end - at);
        const auto it = std::find_if(std::begin(kAllModes), std::end(kAllModes), [&](Mode x) { return m == name(x); });
        if (it == std::end(kAllModes)) throw UsageError("unknown mode '" + m + "'");
        if (!o.has(*it)) o.modes.push_back(*it);
        at = end + 1;
      }
    } else {
      throw UsageError("unknown argument " + a);
    }
  }
  g_provider.check();
  if (!o.server.empty() && !g_provider.nic()) throw UsageError("pingpong SERVER runs between two hosts: add --provider mlx5");
  if (g_provider.nic() && !modes_given) o.modes = {Mode::kGpuQHost, Mode::kCpuThreads};
  return o;
}

/// --gpus: by default two when two GPUs reach each other's memory. Peer access is enabled here,
/// before any GPU engine runs (connecting gpu-qgpu QPs across GPUs needs it).
int choose_gpus(int asked, int present) {
  int a = 0, b = 0;
  if (present >= 2) {
    GV_BENCH_CUDA(cudaDeviceCanAccessPeer(&a, 0, 1));
    GV_BENCH_CUDA(cudaDeviceCanAccessPeer(&b, 1, 0));
  }
  const bool peers = a != 0 && b != 0;
  const int gpus = asked != 0 ? asked : peers ? 2 : 1;
  if (gpus == 2 && present < 2) throw gv::Error("--gpus 2: this machine has one GPU");
  if (gpus == 2 && peers) {
    enable_peer_access(0, 1);
    enable_peer_access(1, 0);
  }
  GV_BENCH_CUDA(cudaSetDevice(0));
  return gpus;
}

/// devices: the GPUs this process sees, and whether the first two reach each other's memory.
int list_devices(int n) {
  std::printf("%d GPU%s:", n, n == 1 ? "" : "s");
  for (int g = 0; g < n; ++g) {
    cudaDeviceProp p{};
    GV_BENCH_CUDA(cudaGetDeviceProperties(&p, g));
    std::printf("%s %d %s", g == 0 ? "" : ",", g, p.name);
  }
  if (n >= 2) {
    int a = 0, b = 0;
    GV_BENCH_CUDA(cudaDeviceCanAccessPeer(&a, 0, 1));
    GV_BENCH_CUDA(cudaDeviceCanAccessPeer(&b, 1, 0));
    std::printf("; peer access 0<->1: %s", a && b ? "yes" : "no");
  }
  std::printf("\n");
  return 0;
}

int run(const Options& o_in, int argc, char** argv) {
  Options o = o_in;
  int n = 0;
  if (const cudaError_t e = cudaGetDeviceCount(&n); e != cudaSuccess)  // the runtime blames the driver there
    throw gv::Error(std::string("no NVIDIA GPU or driver found (") + cudaGetErrorName(e) + ")");
  if (n == 0) throw gv::Error("no NVIDIA GPU or driver found (the CUDA runtime lists no device)");
  if (o.cmd == "devices") return list_devices(n);
  // Host threads that wait for a kernel sleep instead of spinning, leaving the cores to the
  // CPU engine, the proxies and the host posters (in-kernel timing does not depend on it);
  // host-controlled runs spin (Testbed).
  for (int g = 0; g < n; ++g) {
    GV_BENCH_CUDA(cudaSetDevice(g));
    GV_BENCH_CUDA(cudaSetDeviceFlags(cudaDeviceScheduleBlockingSync));
  }
  o.gpus = choose_gpus(o.gpus, n);
  cudaDeviceProp p{};
  GV_BENCH_CUDA(cudaGetDeviceProperties(&p, 0));
  std::printf("# device: %s x%d, %d used; GPU engine warps %u; GPU posters %s; modes:", p.name, n, o.gpus,
              g_engine_warps, g_owner ? "owner" : "exclusive");
  for (const Mode m : o.modes) std::printf(" %s", name(m));
  std::printf("\n");
  if (!o.json.empty())
    g_json.open(o.json, std::string(p.name) + " x" + std::to_string(n) + " (" + std::to_string(o.gpus) + " used); host " + host_cpu(),
                argc, argv);
  Harness h(o.gpus, o.iters + 100);  // the largest run: 100 warm-up rounds and -n measured ones
  if (o.cmd == "pingpong" && g_provider.nic()) bench_pingpong_remote(o, h);
  else if (o.cmd == "pingpong") bench_pingpong(o, h);
  else if (o.cmd == "bw") bench_bw(o, h);
  else if (o.cmd == "msgrate") bench_msgrate(o, h);
  else if (o.cmd == "atomics") bench_atomics(o, h);
  else if (o.cmd == "postpoll") bench_postpoll(o, h);
  else if (o.cmd == "drain") bench_drain(o, h);
  else bench_anchors(o, h);
  return 0;
}

}  // namespace
}  // namespace gv::bench

int main(int argc, char** argv) {
  using namespace gv::bench;
  return run_main("gv_gpu_verbs", kUsage, [&] { return run(parse(argc, argv), argc, argv); });
}
