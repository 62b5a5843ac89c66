// ll3 bench --parallel (tools/cmd_bench_parallel.cpp), reached through ll3 bench.
#pragma once

namespace ll3::cli {

int bench_parallel(int argc, char** argv);

}  // namespace ll3::cli
