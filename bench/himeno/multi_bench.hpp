// himeno_bench --ranks N: the multi-GPU rows (multi_bench.cpp).
#pragma once
#include <cstdio>

namespace gv::himeno::bench {

/// Runs the benchmark for the arguments of a command line that has --ranks; returns the exit
/// status (0 ok, 1 a run failed, 2 bad input, 3 a requested mode cannot run on this device).
int run_multi(int argc, char** argv);

/// The usage of both forms of himeno_bench.
void print_help(std::FILE* f);

}  // namespace gv::himeno::bench
