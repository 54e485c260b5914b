"""The persistent decode-layers kernel that scripts/bench_persistent_layers.py and
scripts/bench_persistent_step.py measure: every layer of the 8B config's batch-1 decode step in one
Triton launch, its phases (the products, their reduces, norms, SwiGLU's gate, and optionally RoPE,
the KV write and attention) separated by grid-wide barriers; and the configs that choose how it
runs (parse_config). The prototype of issue 18, with the variants it was measured in; what the
engine kept of it is engine/kernels/triton_persistent.py (the variant attn 1, PAGED, kind 3, fold,
128-token splits), whose barrier, norm, RoPE and merge pieces this module uses. Figures:
docs/perf/engine.md."""
from __future__ import annotations

import argparse

import triton
import triton.language as tl

# The pieces the engine's kernel kept, shared (the engine's take the head counts and dims as arguments).
from engine.kernels.triton_persistent import _grid_sync, _inv_rms, _merge, _rope_kv

HIDDEN, QKV, INTER = 4096, 6144, 14336           # the 8B config (engine.benchmarks.decode.LLAMA_8B)
HEADS, KV_HEADS, HEAD_DIM, PAGE = 32, 8, 128, 16    # PAGE: the engine's KV block size
ATT_SPLIT = 256                                  # tokens an attention work item covers (the engine's bf16 split)
# The same numbers as the kernels read them (a kernel's globals must be constexpr).
HEADS_C, KV_HEADS_C, HEAD_DIM_C = tl.constexpr(HEADS), tl.constexpr(KV_HEADS), tl.constexpr(HEAD_DIM)
EPS = 1e-5


@triton.jit
def _phase_end(sync_ptr, times_ptr, pid, nprog, phase, slot):
    """Pass the next grid-wide barrier, and stamp the timer's slot; returns the barriers passed."""
    _grid_sync(sync_ptr, (phase + 1) * nprog)
    _stamp(times_ptr, pid, slot)
    return phase + 1


@triton.jit
def _stamp(times_ptr, pid, i):
    """Program 0 records the GPU's global timer (ns) as entry i: the phases' durations."""
    if pid == 0:
        now = tl.inline_asm_elementwise("mov.u64 $0, %globaltimer;", "=l", [], dtype=tl.int64, is_pure=False,
                                        pack=1)
        tl.store(times_ptr + i, now)


@triton.jit
def _x_slice(x_ptr, nw_ptr, inv, rk, K: tl.constexpr, MODE: tl.constexpr, S_IN: tl.constexpr, N_IN: tl.constexpr):
    """The product's input at rows rk, float32 of bf16 values. MODE 0: x as stored (bf16); 1: RMSNorm
    of the float32 residual x (inverse rms inv) times the norm weight, rounded to bf16 as the engine
    rounds it; 2: x = [gate | up] (bf16), silu(gate) * up rounded to bf16 (K the intermediate size).
    3 and 4 fold the previous product's reduce in: x points at its S_IN float32 partial sums
    [S_IN, N_IN], summed here and rounded to bf16 (3: x itself; 4: the gate and up of mode 2).
    5 merges the attention's splits: x the unnormalised outputs [kv head, split, 4, 128], nw their
    (max, sum) [kv head, split, 4, 2], N_IN splits of the S_IN (a power of two) loaded."""
    if MODE == 5:
        qh = rk // 128
        grp = (qh // 4) * N_IN
        sp = tl.arange(0, S_IN)[:, None]
        at = (grp[None, :] + sp) * 4 + (qh % 4)[None, :]            # [S_IN, BK] (kv head, split, q row)
        ok = (sp < N_IN) & (rk[None, :] >= 0)
        m = tl.load(nw_ptr + at * 2, mask=ok, other=float("-inf"), cache_modifier=".cg")
        ls = tl.load(nw_ptr + at * 2 + 1, mask=ok, other=0.0, cache_modifier=".cg")
        o = tl.load(x_ptr + at * 128 + (rk % 128)[None, :], mask=ok, other=0.0, cache_modifier=".cg")
        wgt = tl.exp(m - tl.max(m, axis=0)[None, :])
        x = (tl.sum(wgt * o, axis=0) / tl.sum(wgt * ls, axis=0)).to(tl.bfloat16).to(tl.float32)
    elif MODE == 3:
        parts = tl.load(x_ptr + tl.arange(0, S_IN)[:, None] * N_IN + rk[None, :], cache_modifier=".cg")
        x = tl.sum(parts, axis=0).to(tl.bfloat16).to(tl.float32)
    elif MODE == 4:
        gp = tl.load(x_ptr + tl.arange(0, S_IN)[:, None] * N_IN + rk[None, :], cache_modifier=".cg")
        up = tl.load(x_ptr + tl.arange(0, S_IN)[:, None] * N_IN + K + rk[None, :], cache_modifier=".cg")
        g = tl.sum(gp, axis=0).to(tl.bfloat16).to(tl.float32)
        u = tl.sum(up, axis=0).to(tl.bfloat16).to(tl.float32)
        x = (g / (1.0 + tl.exp(-g))).to(tl.bfloat16).to(tl.float32) * u
        x = x.to(tl.bfloat16).to(tl.float32)
    elif MODE == 0:
        x = tl.load(x_ptr + rk, cache_modifier=".cg").to(tl.float32)
    elif MODE == 1:
        r = tl.load(x_ptr + rk, cache_modifier=".cg")
        x = (r * inv).to(tl.bfloat16).to(tl.float32) * tl.load(nw_ptr + rk).to(tl.float32)
        x = x.to(tl.bfloat16).to(tl.float32)
    else:
        g = tl.load(x_ptr + rk, cache_modifier=".cg").to(tl.float32)
        u = tl.load(x_ptr + K + rk, cache_modifier=".cg").to(tl.float32)
        x = (g / (1.0 + tl.exp(-g))).to(tl.bfloat16).to(tl.float32) * u
        x = x.to(tl.bfloat16).to(tl.float32)
    return x


@triton.jit
def _gemv(x_ptr, nw_ptr, inv, w_ptr, p_ptr, pid, nprog, K: tl.constexpr, N: tl.constexpr,
          SPLITS: tl.constexpr, MODE: tl.constexpr, BK: tl.constexpr, BN: tl.constexpr,
          S_IN: tl.constexpr, N_IN: tl.constexpr):
    """Partial sums p[split, N] of x @ w over w [K, N] (row-major storage, N contiguous), work items
    (column tile, split) dealt round robin, the weight read by plain loads."""
    tiles: tl.constexpr = N // BN
    KS: tl.constexpr = K // SPLITS
    for item in range(pid, tiles * SPLITS, nprog):
        c = item % tiles
        s = item // tiles
        rn = c * BN + tl.arange(0, BN)
        acc = tl.zeros([BK, BN], tl.float32)
        for k0 in range(0, KS, BK):
            rk = s * KS + k0 + tl.arange(0, BK)
            x = _x_slice(x_ptr, nw_ptr, inv, rk, K, MODE, S_IN, N_IN)
            w = tl.load(w_ptr + rk[:, None] * N + rn[None, :]).to(tl.float32)
            acc += x[:, None] * w
        tl.store(p_ptr + s * N + rn, tl.sum(acc, axis=0))


@triton.jit
def _gemv_flat(x_ptr, nw_ptr, inv, w_ptr, w_desc, layer, p_ptr, pid, nprog, K: tl.constexpr, N: tl.constexpr,
               SPLITS: tl.constexpr, MODE: tl.constexpr, BK: tl.constexpr, BN: tl.constexpr, KIND: tl.constexpr,
               S_IN: tl.constexpr, N_IN: tl.constexpr):
    """_gemv in one flat loop over this program's (item, K step) pairs, so that the compiler's
    pipelining can run ahead across items as well as within one. KIND 1: the weight tiles read by
    the copy engine (TMA) through a descriptor over all layers' weights [L, K, N], the product by
    FMAs; 2: plain loads, the product as a tensor-core dot of x padded to 16 rows (a load that
    feeds a dot is what Triton pipelines through shared memory); 3: TMA and the dot."""
    tiles: tl.constexpr = N // BN
    KS: tl.constexpr = K // SPLITS
    STEPS: tl.constexpr = KS // BK
    DOT: tl.constexpr = KIND >= 2
    mine = (tiles * SPLITS - pid + nprog - 1) // nprog     # items pid, pid + nprog, ...
    if DOT:
        acc = tl.zeros([16, BN], tl.float32)
    else:
        acc = tl.zeros([BK, BN], tl.float32)
    for t in range(mine * STEPS):
        item = pid + (t // STEPS) * nprog
        kk = t % STEPS
        c = item % tiles
        s = item // tiles
        k0 = s * KS + kk * BK
        x = _x_slice(x_ptr, nw_ptr, inv, k0 + tl.arange(0, BK), K, MODE, S_IN, N_IN)
        if KIND % 2 == 1:
            w = w_desc.load([layer, k0, c * BN]).reshape(BK, BN)
        else:
            w = tl.load(w_ptr + (k0 + tl.arange(0, BK))[:, None] * N + (c * BN + tl.arange(0, BN))[None, :])
        if DOT:
            # x's values are bf16 already, so the padded bf16 operand is exact; row 0 holds the product.
            xs = tl.where(tl.arange(0, 16)[:, None] == 0, x[None, :], 0.0).to(tl.bfloat16)
            acc = tl.dot(xs, w, acc)
        else:
            acc += x[:, None] * w.to(tl.float32)
        if kk == STEPS - 1:
            rn = c * BN + tl.arange(0, BN)
            tl.store(p_ptr + s * N + rn, tl.sum(acc, axis=0))     # the dot's padded rows are zeros
            acc = tl.zeros_like(acc)


@triton.jit
def _kv_rows(table_ptr, toks, ok, PAGED: tl.constexpr):
    """The cache rows of tokens toks: through the block table (PAGED), else the tokens themselves."""
    if PAGED:
        return tl.load(table_ptr + toks // 16, mask=ok, other=0).to(tl.int64) * 16 + toks % 16
    return toks.to(tl.int64)


@triton.jit
def _attention(q_ptr, kc, vc, att_o, att_ml, pid, nprog, sm_scale, T, NS, table_ptr, PAGED: tl.constexpr,
               SPLIT: tl.constexpr):
    """Work items (kv head, split of SPLIT tokens) over T cached tokens (the new one included):
    the 4 q heads of the kv head as the rows of a dot padded to 16; a split's unnormalised output
    and its (max, sum) stored for the merge (_merge, or _x_slice mode 5). PAGED: a token's block
    from the block table at table_ptr (T and NS may then be the step's own, read on the device);
    else the cache is read as one run of tokens, its blocks in order, and no table is read. The
    table's entries for a 64-token chunk are loaded a chunk ahead, so that the K and V loads do not
    wait on a dependent table load each chunk."""
    d = tl.arange(0, 128)
    rows = tl.arange(0, 16)
    cols = tl.arange(0, 64)
    for it in range(pid, KV_HEADS_C * NS, nprog):
        h = it // NS
        s = it % NS
        q = tl.load(q_ptr + (h * 4 + rows)[:, None] * 128 + d[None, :], mask=(rows < 4)[:, None], other=0.0,
                    cache_modifier=".cg")
        m_i = tl.full([16], float("-inf"), tl.float32)
        l_i = tl.zeros([16], tl.float32)
        acc = tl.zeros([16, 128], tl.float32)
        end = tl.minimum((s + 1) * SPLIT, T)
        nxt = s * SPLIT + cols
        row_n = _kv_rows(table_ptr, nxt, nxt < end, PAGED)
        for t0 in range(s * SPLIT, end, 64):
            toks = t0 + cols
            ok = toks < end
            row = row_n
            nxt = toks + 64
            row_n = _kv_rows(table_ptr, nxt, nxt < end, PAGED)
            at = row[:, None] * (KV_HEADS_C * 128) + h * 128 + d[None, :]
            k = tl.load(kc + at, mask=ok[:, None], other=0.0, cache_modifier=".cg")
            v = tl.load(vc + at, mask=ok[:, None], other=0.0, cache_modifier=".cg")
            sc = tl.dot(q, tl.trans(k)) * sm_scale
            sc = tl.where(ok[None, :], sc, float("-inf"))
            m_new = tl.maximum(m_i, tl.max(sc, axis=1))
            pr = tl.exp(sc - m_new[:, None])
            alpha = tl.exp(m_i - m_new)
            acc = acc * alpha[:, None] + tl.dot(pr.to(tl.bfloat16), v)
            l_i = l_i * alpha + tl.sum(pr, axis=1)
            m_i = m_new
        base = (h * NS + s) * 4 + rows
        tl.store(att_o + base[:, None] * 128 + d[None, :], acc, mask=(rows < 4)[:, None])
        tl.store(att_ml + base * 2, m_i, mask=rows < 4)
        tl.store(att_ml + base * 2 + 1, l_i, mask=rows < 4)


@triton.jit
def _product(x_ptr, nw_ptr, inv, w_ptr, w_desc, layer32, p_ptr, pid, nprog, K: tl.constexpr, N: tl.constexpr,
             SPLITS: tl.constexpr, MODE: tl.constexpr, BK: tl.constexpr, BN: tl.constexpr, KIND: tl.constexpr,
             S_IN: tl.constexpr, N_IN: tl.constexpr):
    """One product phase, run the config's way: KIND 0 the nested _gemv, else _gemv_flat."""
    if KIND != 0:
        _gemv_flat(x_ptr, nw_ptr, inv, w_ptr, w_desc, layer32, p_ptr, pid, nprog, K, N, SPLITS, MODE, BK, BN, KIND,
                   S_IN, N_IN)
    else:
        _gemv(x_ptr, nw_ptr, inv, w_ptr, p_ptr, pid, nprog, K, N, SPLITS, MODE, BK, BN, S_IN, N_IN)


@triton.jit
def _reduce(p_ptr, out_ptr, r_ptr, pid, nprog, N: tl.constexpr, SPLITS: tl.constexpr, MODE: tl.constexpr,
            BR: tl.constexpr):
    """Sum the splits of p[SPLITS, N]. MODE 0: store bf16 to out; 1: add into the float32 residual
    r after rounding the product to bf16, and round the sum to bf16 (the engine adds bf16 tensors)."""
    for c in range(pid, N // BR, nprog):
        rn = c * BR + tl.arange(0, BR)
        # Every split's partials in one load, not a chain of SPLITS dependent ones.
        acc = tl.sum(tl.load(p_ptr + tl.arange(0, SPLITS)[:, None] * N + rn[None, :], cache_modifier=".cg"), axis=0)
        if MODE == 0:
            tl.store(out_ptr + rn, acc.to(tl.bfloat16))
        elif MODE == 1:
            r = tl.load(r_ptr + rn, cache_modifier=".cg")
            tl.store(r_ptr + rn, (r + acc.to(tl.bfloat16).to(tl.float32)).to(tl.bfloat16).to(tl.float32))


@triton.jit
def _layers_kernel(r_ptr, n1_ptr, n2_ptr, wqkv_ptr, wo_ptr, wgu_ptr, wd_ptr, p_ptr, p2_ptr, qkv_ptr, gu_ptr, sync_ptr,
                   times_ptr, dqkv, do, dgu, dd, kc_ptr, vc_ptr, cos_ptr, sin_ptr, att_o, att_ml, sm_scale, table_ptr,
                   lens_ptr, slot_ptr, LAYERS: tl.constexpr, H: tl.constexpr, Q: tl.constexpr, I: tl.constexpr,
                   S_QKV: tl.constexpr, S_O: tl.constexpr, S_GU: tl.constexpr, S_D: tl.constexpr,
                   BK: tl.constexpr, BN: tl.constexpr, BR: tl.constexpr, eps, BARRIERS_ONLY: tl.constexpr,
                   KIND: tl.constexpr, FOLD: tl.constexpr, ATTN: tl.constexpr, T: tl.constexpr, TP: tl.constexpr,
                   NS: tl.constexpr, NS2: tl.constexpr, MERGE_IN_O: tl.constexpr, SLOTS: tl.constexpr,
                   PAGED: tl.constexpr, SPLIT: tl.constexpr = ATT_SPLIT):
    """All layers in one launch: r (float32 [H], bf16 values) is the residual stream, updated in
    place. qkv's first H outputs stand in for the attention's output (this measures the products
    and what lies between them, not attention). BARRIERS_ONLY: the grid-wide barriers alone. KIND:
    0 the nested _gemv, else _gemv_flat of that kind (1 and 3 read the descriptors dqkv, do, dgu, dd).
    FOLD: the o and down products sum the qkv and gate_up partials themselves (_x_slice modes 3
    and 4), so those two reduces and their barriers go; their phases then read 0. The products
    write their partials to p and p2 in turn, so that one can read the other's. ATTN (with FOLD):
    the layer's attention too, between qkv and o: the qkv splits summed with RoPE and the KV write
    (_rope_kv), then attention over the T cached tokens of kc, vc ([LAYERS, TP, KV_HEADS, 128]),
    whose NS splits (NS2 the power of two at or above) are merged in a phase of their own, or with
    MERGE_IN_O by the o product as it reads them; qkv's first H outputs then no longer stand in
    for it. PAGED: the step's own sequence length (lens_ptr), new token's slot (slot_ptr) and block
    table (table_ptr) read on the device, cos_ptr/sin_ptr then being whole [positions, 128] tables,
    so that one captured graph serves any step; T and NS are then the largest. SPLIT: the tokens of
    an attention work item. Program 0 stamps
    SLOTS timer slots a layer (8; 9 with attention).
    stamps the time at the start and after every barrier (times_ptr, LAYERS * SLOTS + 1 entries)."""
    pid = tl.program_id(0)
    nprog = tl.num_programs(0)
    phase = 0          # barriers passed: the counter's target
    stamp = 0          # the timer's slots: SLOTS a layer, a folded phase's slot stamped at once
    _stamp(times_ptr, pid, 0)
    if BARRIERS_ONLY:
        for b in range(LAYERS * (6 if FOLD and not ATTN else (SLOTS - MERGE_IN_O))):
            _grid_sync(sync_ptr, (b + 1) * nprog)
            _stamp(times_ptr, pid, b + 1)
        return
    for layer32 in range(LAYERS):
        layer = layer32.to(tl.int64)        # a layer's gate_up starts past 2**31 elements
        wqkv = wqkv_ptr + layer * (H * Q)
        wo = wo_ptr + layer * (H * H)
        wgu = wgu_ptr + layer * (H * 2 * I)
        wd = wd_ptr + layer * (I * H)
        inv = _inv_rms(r_ptr, H, eps)
        _product(r_ptr, n1_ptr + layer * H, inv, wqkv, dqkv, layer32, p_ptr, pid, nprog, H, Q, S_QKV, 1, BK, BN, KIND,
                 1, 1)
        phase = _phase_end(sync_ptr, times_ptr, pid, nprog, phase, stamp + 1)
        if ATTN:      # slots: rope + KV write, attention, then o (merging the attention's splits)
            kc = kc_ptr + layer * (TP * KV_HEADS_C * 128)
            vc = vc_ptr + layer * (TP * KV_HEADS_C * 128)
            if PAGED:
                t_now = tl.load(lens_ptr)
                ns_now = (t_now + SPLIT - 1) // SPLIT
                cos_now, sin_now, slot_now = cos_ptr + (t_now - 1) * 128, sin_ptr + (t_now - 1) * 128, tl.load(slot_ptr)
            else:
                t_now = T
                ns_now = NS
                cos_now, sin_now, slot_now = cos_ptr, sin_ptr, T - 1
            _rope_kv(p_ptr, cos_now, sin_now, qkv_ptr, kc, vc, slot_now, pid, nprog, S_QKV, HEADS_C, KV_HEADS_C, HEAD_DIM_C)
            phase = _phase_end(sync_ptr, times_ptr, pid, nprog, phase, stamp + 2)
            _attention(qkv_ptr, kc, vc, att_o, att_ml, pid, nprog, sm_scale, t_now, ns_now, table_ptr, PAGED, SPLIT)
            phase = _phase_end(sync_ptr, times_ptr, pid, nprog, phase, stamp + 3)
            if MERGE_IN_O:      # each o work item merges the splits of its own K range (_x_slice mode 5)
                _stamp(times_ptr, pid, stamp + 4)
                _product(att_o, att_ml, inv, wo, do, layer32, p2_ptr, pid, nprog, H, H, S_O, 5, BK, BN, KIND, NS2, NS)
            else:               # the merge once a head, over q's place (attention has read q)
                _merge(att_o, att_ml, qkv_ptr, pid, nprog, ns_now, HEADS_C, HEADS_C // KV_HEADS_C, HEAD_DIM_C, NS2)
                phase = _phase_end(sync_ptr, times_ptr, pid, nprog, phase, stamp + 4)
                _product(qkv_ptr, n1_ptr, inv, wo, do, layer32, p2_ptr, pid, nprog, H, H, S_O, 0, BK, BN, KIND, 1, 1)
            phase = _phase_end(sync_ptr, times_ptr, pid, nprog, phase, stamp + 5)
            _reduce(p2_ptr, qkv_ptr, r_ptr, pid, nprog, H, S_O, 1, BR)
            phase = _phase_end(sync_ptr, times_ptr, pid, nprog, phase, stamp + 6)
            inv2 = _inv_rms(r_ptr, H, eps)
            _product(r_ptr, n2_ptr + layer * H, inv2, wgu, dgu, layer32, p_ptr, pid, nprog, H, 2 * I, S_GU, 1, BK, BN,
                     KIND, 1, 1)
            phase = _phase_end(sync_ptr, times_ptr, pid, nprog, phase, stamp + 7)
            _product(p_ptr, n1_ptr, inv, wd, dd, layer32, p2_ptr, pid, nprog, I, H, S_D, 4, BK, BN, KIND, S_GU, 2 * I)
            phase = _phase_end(sync_ptr, times_ptr, pid, nprog, phase, stamp + 8)
            _reduce(p2_ptr, qkv_ptr, r_ptr, pid, nprog, H, S_D, 1, BR)
            phase = _phase_end(sync_ptr, times_ptr, pid, nprog, phase, stamp + 9)
        else:
            if FOLD:      # o sums qkv's partials itself (mode 3); the reduce's slot reads 0
                _stamp(times_ptr, pid, stamp + 2)
                _product(p_ptr, n1_ptr, inv, wo, do, layer32, p2_ptr, pid, nprog, H, H, S_O, 3, BK, BN, KIND, S_QKV, Q)
            else:
                _reduce(p_ptr, qkv_ptr, r_ptr, pid, nprog, Q, S_QKV, 0, BR)
                phase = _phase_end(sync_ptr, times_ptr, pid, nprog, phase, stamp + 2)
                _product(qkv_ptr, n1_ptr, inv, wo, do, layer32, p2_ptr, pid, nprog, H, H, S_O, 0, BK, BN, KIND, 1, 1)
            phase = _phase_end(sync_ptr, times_ptr, pid, nprog, phase, stamp + 3)
            _reduce(p2_ptr, qkv_ptr, r_ptr, pid, nprog, H, S_O, 1, BR)
            phase = _phase_end(sync_ptr, times_ptr, pid, nprog, phase, stamp + 4)
            inv2 = _inv_rms(r_ptr, H, eps)
            _product(r_ptr, n2_ptr + layer * H, inv2, wgu, dgu, layer32, p_ptr, pid, nprog, H, 2 * I, S_GU, 1, BK, BN, KIND,
                     1, 1)
            phase = _phase_end(sync_ptr, times_ptr, pid, nprog, phase, stamp + 5)
            if FOLD:      # down sums gate_up's partials itself (mode 4); the reduce's slot reads 0
                _stamp(times_ptr, pid, stamp + 6)
                _product(p_ptr, n1_ptr, inv, wd, dd, layer32, p2_ptr, pid, nprog, I, H, S_D, 4, BK, BN, KIND, S_GU, 2 * I)
            else:
                _reduce(p_ptr, gu_ptr, r_ptr, pid, nprog, 2 * I, S_GU, 0, BR)
                phase = _phase_end(sync_ptr, times_ptr, pid, nprog, phase, stamp + 6)
                _product(gu_ptr, n1_ptr, inv, wd, dd, layer32, p2_ptr, pid, nprog, I, H, S_D, 2, BK, BN, KIND, 1, 1)
            phase = _phase_end(sync_ptr, times_ptr, pid, nprog, phase, stamp + 7)
            _reduce(p2_ptr, qkv_ptr, r_ptr, pid, nprog, H, S_D, 1, BR)
            phase = _phase_end(sync_ptr, times_ptr, pid, nprog, phase, stamp + 8)
        stamp += SLOTS


PHASES = ("qkv", "qkv reduce", "o", "o reduce + residual", "gate_up", "gate_up reduce", "down",
          "down reduce + residual")
PHASES_ATTN = ("qkv", "rope + kv write", "attention", "merge", "o", "o reduce + residual", "gate_up", "down",
               "down reduce + residual")


def parse_config(text: str) -> dict:
    """'P,BK,BN,S_QKV,S_O,S_GU,S_D,WARPS[,STAGES[,KIND[,FOLD[,ATTN[,SPLIT]]]]]': programs an SM, the K and N
    tile, the splits of each product, warps a program, the software pipeline's stages (default 1),
    how the products run (default 0): 0 nested loops, plain loads, FMAs; 1 one flat loop, TMA,
    FMAs; 2 flat, plain loads, a tensor-core dot; 3 flat, TMA, a dot (_gemv_flat); FOLD 1 to fold
    the qkv and gate_up reduces into the products that read them (default 0); ATTN 1 (with FOLD)
    to run each layer's RoPE, KV write and attention inside the kernel too, its splits merged in a
    phase of their own, 2 the same with the merge done by the o product (default 0); SPLIT the
    tokens of an attention work item (64 to 1024, a power of two; default the engine's 256)."""
    keys = ("per_sm", "bk", "bn", "s_qkv", "s_o", "s_gu", "s_d", "warps", "stages", "kind", "fold", "attn", "split")
    try:
        vals = [int(x) for x in text.split(",")]
    except ValueError:
        vals = []
    vals += [1, 0, 0, 0, ATT_SPLIT][len(vals) - 8:] if 8 <= len(vals) < len(keys) else []
    pow2 = lambda v: v > 0 and not v & (v - 1)  # noqa: E731
    if (len(vals) != len(keys) or min(vals[:9], default=0) < 1 or vals[9] not in (0, 1, 2, 3)
            or vals[10] not in (0, 1) or vals[11] not in (0, 1, 2) or (vals[11] and not vals[10])
            or not (pow2(vals[12]) and 64 <= vals[12] <= 1024)):
        raise argparse.ArgumentTypeError(f"expected 8 to {len(keys)} integers {','.join(keys)} (positive; kind 0-3; "
                                         f"fold 0 or 1, attn 0-2 and only with fold; split a power of two from 64 to 1024), got {text!r}")
    cfg = dict(zip(keys, vals))
    for name in ("s_qkv", "s_o", "s_gu", "s_d"):
        if cfg[name] & (cfg[name] - 1):
            raise argparse.ArgumentTypeError(f"{text!r}: {name} must be a power of two (the reduce loads all splits at once)")
    for name, k, n in (("s_qkv", HIDDEN, QKV), ("s_o", HIDDEN, HIDDEN), ("s_gu", HIDDEN, 2 * INTER), ("s_d", INTER, HIDDEN)):
        if k % (cfg[name] * cfg["bk"]) or n % cfg["bn"]:
            raise argparse.ArgumentTypeError(f"{text!r}: {name} with bk {cfg['bk']} and bn {cfg['bn']} does not tile {k} x {n}")
    return cfg


def config_list(text: str) -> list[dict]:
    """--configs: semicolon-separated parse_config strings."""
    configs = [parse_config(x) for x in text.split(";") if x]
    if not configs:
        raise argparse.ArgumentTypeError("expected at least one config")
    return configs
