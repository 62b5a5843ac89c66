// AMX tile configurations (palette 1). The default, all eight tiles 16 rows x 64 bytes (a
// 16 x 16 int32 / float accumulator, 16 rows of 64 int8 / 32 bf16), serves every kernel but
// Q8_0's, whose 32-column blocks take tiles of K = 32. Include only from files compiled with
// the amx directory's flags.
#pragma once

#include <immintrin.h>

#include <cstdint>

namespace ll3::kernels::amx {

struct alignas(64) TileConfig {
  uint8_t palette = 1;
  uint8_t start_row = 0;
  uint8_t reserved[14] = {};
  uint16_t colsb[16] = {};
  uint8_t rows[16] = {};
};

// Per thread; a kernel configures on entry and releases on exit (_tile_release), so the tile
// state is not saved and restored with every context switch between calls.
inline void configure_tiles() {
  TileConfig c;
  for (int i = 0; i < 8; ++i) {
    c.colsb[i] = 64;
    c.rows[i] = 16;
  }
  _tile_loadconfig(&c);
}

// Another configuration (Q8_0's kernel: tiles of K = 32).
inline void configure_tiles(TileConfig c) { _tile_loadconfig(&c); }

}  // namespace ll3::kernels::amx
