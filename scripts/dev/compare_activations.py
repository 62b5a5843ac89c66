#!/usr/bin/python3
"""Where do ll3 and llama.cpp part? Op by op, in graph order.

  compare_activations.py LL3_DIR LLAMA_ACT_DIR N_TOKENS

LL3_DIR: from `ll3 logits --dump-activations DIR`; LLAMA_ACT_DIR: OUT_DIR/act of
llama-cpp-ref.sh, for the same token ids. For each op: how many values differ in their bits, the
largest difference, the relative L2, and per token the count of differing values (tokens in
groups of four go through llama.cpp's repacked gemm, the rest through its gemv). Needs numpy.
"""
import os
import re
import sys

import numpy as np

l3_dir, lc_dir, n_tok = sys.argv[1], sys.argv[2], int(sys.argv[3])
lc_files = sorted(os.listdir(lc_dir))

# ll3 name -> (llama.cpp node name, which occurrence): Qcur / Kcur appear before and after RoPE.
ALIAS = {'Qrope': ('Qcur', 2), 'Krope': ('Kcur', 2)}
OPS = ['attn_norm', 'Qcur', 'Kcur', 'Vcur', 'Qrope', 'Krope', 'kqv_out', 'attn_out', 'ffn_inp',
       'ffn_norm', 'ffn_gate', 'ffn_up', 'ffn_swiglu', 'ffn_out', 'l_out']


def llama_file(name, nth):
    hits = [f for f in lc_files if re.fullmatch(r'\d+_' + re.escape(name) + r'\.f32', f)]
    return os.path.join(lc_dir, hits[nth]) if len(hits) > nth else None


layers = sorted({int(m.group(1)) for f in os.listdir(l3_dir) if (m := re.search(r'-(\d+)\.f32$', f))})
for layer in layers:
    for op in OPS:
        base, nth = ALIAS.get(op, (op, 0))
        lc = llama_file(f'{base}-{layer}', nth)
        mine = np.fromfile(os.path.join(l3_dir, f'{op}-{layer}.f32'), dtype=np.float32)
        if lc is None:
            print(f'{op}-{layer}: not in the llama.cpp dump')
            continue
        ref = np.fromfile(lc, dtype=np.float32)
        if mine.size != ref.size:
            print(f'{op}-{layer}: {mine.size} values, llama.cpp {ref.size}')
            continue
        diff = mine != ref
        per_tok = diff.reshape(n_tok, -1).sum(axis=1)
        rel = np.linalg.norm(mine - ref) / max(np.linalg.norm(ref), 1e-30)
        shown = ' '.join(str(int(c)) for c in per_tok[:16]) + (' ...' if n_tok > 16 else '')
        print(f'{op + "-" + str(layer):14s} differ {int(diff.sum()):7d}/{mine.size:<7d} '
              f'max {np.abs(mine - ref).max():.2e} rel {rel:.1e}  per token: {shown}')
