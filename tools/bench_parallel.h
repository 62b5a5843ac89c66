// ll3 bench --parallel (tools/cmd_bench_parallel.cpp) and --speculation (tools/cmd_bench_spec.cpp),
// reached through ll3 bench.
#pragma once

namespace ll3::cli {

int bench_parallel(int argc, char** argv);
// ll3 bench --speculation (tools/cmd_bench_spec.cpp).
int bench_spec(int argc, char** argv);

}  // namespace ll3::cli
