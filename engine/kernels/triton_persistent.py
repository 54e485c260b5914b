"""Every layer of a batch-1 decode step in one persistent Triton launch (sm_90).

At batch 1 a step reads every weight once, and the layered step (cuBLAS products, the engine's
RoPE/KV-write and attention kernels, compiled elementwise ops) loses time between its ~10
kernels a layer: each one's start, its tail, and its products' pipelines filling up again. Here
one program pair an SM stays resident for all layers and walks each phase's work items, the
phases separated by grid-wide barriers (an atomic counter, about 1-1.6 us each on an H200):

  qkv product (split-K) | RoPE + KV write | attention (splits) | merge | o product | o reduce +
  residual | gate_up product | down product (summing gate_up's splits and applying SwiGLU
  itself) | down reduce + residual

The products read the weight tiles by TMA from one [layers, in, out] tensor a kind and run them as
tensor-core dots of x padded to 16 rows, which Triton pipelines (3 stages). Rounding follows the
layered step: every value the layered step holds in bf16 (a product's output, RoPE's result, the
residual after each add, the normed input) is rounded to bf16 here too; the sums run in float32
in another order (split-K), so logits agree to bf16 noise, not bit for bit.

Figures (the whole step against the layered one, side by side): docs/perf/engine.md. The
runtime side (eligibility, stacked weights, buffers, the self-check): engine.runtime.persistent_decode."""
from __future__ import annotations

import triton
import triton.language as tl

# Polls of a barrier (each an L2 round trip, under a microsecond) before a program gives up and
# marks the run failed (sync[1]): a grid that is not all resident fails in milliseconds, not a hang.
SPIN_LIMIT = tl.constexpr(1 << 16)


@triton.jit
def _grid_sync(sync_ptr, target):
    """Wait until the programs' arrivals reach target (every program arrives once a barrier)."""
    tl.debug_barrier()
    tl.atomic_add(sync_ptr, 1, sem="release", scope="gpu")
    seen = tl.atomic_add(sync_ptr, 0, sem="acquire", scope="gpu")
    polls = 0
    while (seen < target) & (polls < SPIN_LIMIT):
        seen = tl.atomic_add(sync_ptr, 0, sem="acquire", scope="gpu")
        polls += 1
    if seen < target:
        tl.atomic_max(sync_ptr + 1, 1)
    tl.debug_barrier()


@triton.jit
def _inv_rms(r_ptr, N: tl.constexpr, eps):
    """1 / sqrt(mean(r^2) + eps) of the float32 residual, read past L1 (other programs wrote it)."""
    v = tl.load(r_ptr + tl.arange(0, N), cache_modifier=".cg")
    return 1.0 / tl.sqrt(tl.sum(v * v, axis=0) / N + eps)


@triton.jit
def _x_slice(x_ptr, nw_ptr, inv, rk, K: tl.constexpr, MODE: tl.constexpr, S_IN: tl.constexpr, N_IN: tl.constexpr):
    """A product's input at rows rk, float32 holding bf16 values. MODE 0: x as stored (bf16); 1: the
    RMSNorm of the float32 residual x (inverse rms inv) times the norm weight, rounded as the
    layered step rounds it; 2: SwiGLU of gate_up's S_IN float32 partial sums [S_IN, N_IN] (gate
    then up, K the intermediate size), each summed and rounded to bf16 first."""
    if MODE == 2:
        gp = tl.load(x_ptr + tl.arange(0, S_IN)[:, None] * N_IN + rk[None, :], cache_modifier=".cg")
        up = tl.load(x_ptr + tl.arange(0, S_IN)[:, None] * N_IN + K + rk[None, :], cache_modifier=".cg")
        g = tl.sum(gp, axis=0).to(tl.bfloat16).to(tl.float32)
        u = tl.sum(up, axis=0).to(tl.bfloat16).to(tl.float32)
        x = (g / (1.0 + tl.exp(-g))).to(tl.bfloat16).to(tl.float32) * u
        x = x.to(tl.bfloat16).to(tl.float32)
    elif MODE == 1:
        r = tl.load(x_ptr + rk, cache_modifier=".cg")
        x = (r * inv).to(tl.bfloat16).to(tl.float32) * tl.load(nw_ptr + rk).to(tl.float32)
        x = x.to(tl.bfloat16).to(tl.float32)
    else:
        x = tl.load(x_ptr + rk, cache_modifier=".cg").to(tl.float32)
    return x


@triton.jit
def _product(x_ptr, nw_ptr, inv, w_desc, layer32, p_ptr, pid, nprog, K: tl.constexpr, N: tl.constexpr,
             SPLITS: tl.constexpr, MODE: tl.constexpr, BK: tl.constexpr, BN: tl.constexpr,
             S_IN: tl.constexpr, N_IN: tl.constexpr):
    """Partial sums p[split, N] of x @ w, w the layer's [K, N] slice of the descriptor's [L, K, N]
    tensor: work items (column tile, split) dealt round robin, walked as one flat loop over this
    program's (item, K step) pairs so that the pipeline runs ahead across items too."""
    tiles: tl.constexpr = N // BN
    KS: tl.constexpr = K // SPLITS
    STEPS: tl.constexpr = KS // BK
    mine = (tiles * SPLITS - pid + nprog - 1) // nprog      # items pid, pid + nprog, ...
    acc = tl.zeros([16, BN], tl.float32)
    for t in range(mine * STEPS):
        item = pid + (t // STEPS) * nprog
        kk = t % STEPS
        c = item % tiles
        s = item // tiles
        k0 = s * KS + kk * BK
        x = _x_slice(x_ptr, nw_ptr, inv, k0 + tl.arange(0, BK), K, MODE, S_IN, N_IN)
        w = w_desc.load([layer32, k0, c * BN]).reshape(BK, BN)
        # x's values are bf16 already, so the padded bf16 operand is exact; row 0 holds the product.
        xs = tl.where(tl.arange(0, 16)[:, None] == 0, x[None, :], 0.0).to(tl.bfloat16)
        acc = tl.dot(xs, w, acc)
        if kk == STEPS - 1:
            tl.store(p_ptr + s * N + c * BN + tl.arange(0, BN), tl.sum(acc, axis=0))   # padded rows are 0
            acc = tl.zeros_like(acc)


@triton.jit
def _rope_kv(p_ptr, cos_ptr, sin_ptr, q_ptr, kc, vc, slot, pid, nprog, S_QKV: tl.constexpr, HEADS: tl.constexpr,
             KV: tl.constexpr, D: tl.constexpr):
    """qkv's splits summed a head at a time (rounded to bf16), RoPE on the q and k heads (x*cos +
    rotate_half(x)*sin in float32, rounded once, as the engine's kernel does), q stored, k and v
    written into the caches at the new token's slot."""
    Q: tl.constexpr = (HEADS + 2 * KV) * D
    d = tl.arange(0, D)
    partner = tl.where(d < D // 2, d + D // 2, d - D // 2)
    c = tl.load(cos_ptr + d).to(tl.float32)
    sn = tl.load(sin_ptr + d).to(tl.float32) * tl.where(d < D // 2, -1.0, 1.0)
    sp = tl.arange(0, S_QKV)[:, None]
    for j in range(pid, HEADS + 2 * KV, nprog):
        x = tl.sum(tl.load(p_ptr + sp * Q + (j * D + d)[None, :], cache_modifier=".cg"), axis=0)
        x = x.to(tl.bfloat16).to(tl.float32)
        xr = tl.sum(tl.load(p_ptr + sp * Q + (j * D + partner)[None, :], cache_modifier=".cg"), axis=0)
        y = (x * c + xr.to(tl.bfloat16).to(tl.float32) * sn).to(tl.bfloat16)
        if j < HEADS:
            tl.store(q_ptr + j * D + d, y)
        elif j < HEADS + KV:
            tl.store(kc + slot * (KV * D) + (j - HEADS) * D + d, y)
        else:
            tl.store(vc + slot * (KV * D) + (j - HEADS - KV) * D + d, x.to(tl.bfloat16))


@triton.jit
def _kv_rows(table_ptr, toks, ok, PAGE: tl.constexpr):
    """The pool rows of a sequence's tokens, through its block table."""
    return tl.load(table_ptr + toks // PAGE, mask=ok, other=0).to(tl.int64) * PAGE + toks % PAGE


@triton.jit
def _attention(q_ptr, kc, vc, att_o, att_ml, pid, nprog, sm_scale, T, NS, SPLIT, table_ptr, KV: tl.constexpr,
               GROUP: tl.constexpr, D: tl.constexpr, PAGE: tl.constexpr):
    """Work items (kv head, split of SPLIT tokens) over the T cached tokens (the new one included):
    the kv head's GROUP q heads as the rows of a dot padded to 16; a split's unnormalised output
    and its (max, sum) stored for the merge. The block table's entries for a 64-token chunk are
    loaded a chunk ahead, so that the K and V loads do not wait on a dependent table load."""
    d = tl.arange(0, D)
    rows = tl.arange(0, 16)
    cols = tl.arange(0, 64)
    for it in range(pid, KV * NS, nprog):
        h = it // NS
        s = it % NS
        q = tl.load(q_ptr + (h * GROUP + rows)[:, None] * D + d[None, :], mask=(rows < GROUP)[:, None], other=0.0,
                    cache_modifier=".cg")
        m_i = tl.full([16], float("-inf"), tl.float32)
        l_i = tl.zeros([16], tl.float32)
        acc = tl.zeros([16, D], tl.float32)
        end = tl.minimum((s + 1) * SPLIT, T)
        nxt = s * SPLIT + cols
        row_n = _kv_rows(table_ptr, nxt, nxt < end, PAGE)
        for t0 in range(s * SPLIT, end, 64):
            toks = t0 + cols
            ok = toks < end
            row = row_n
            nxt = toks + 64
            row_n = _kv_rows(table_ptr, nxt, nxt < end, PAGE)
            at = row[:, None] * (KV * D) + h * D + d[None, :]
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
        base = (h * NS + s) * GROUP + rows
        tl.store(att_o + base[:, None] * D + d[None, :], acc, mask=(rows < GROUP)[:, None])
        tl.store(att_ml + base * 2, m_i, mask=rows < GROUP)
        tl.store(att_ml + base * 2 + 1, l_i, mask=rows < GROUP)


@triton.jit
def _merge(att_o, att_ml, out_ptr, pid, nprog, NS, HEADS: tl.constexpr, GROUP: tl.constexpr, D: tl.constexpr,
           NS2: tl.constexpr):
    """Each q head's attention output from its NS splits (max, sum, unnormalised output), rounded to
    bf16 as the layered step's merge rounds it, into out_ptr [HEADS * D]."""
    d = tl.arange(0, D)
    sp = tl.arange(0, NS2)
    for qh in range(pid, HEADS, nprog):
        at = ((qh // GROUP) * NS + sp) * GROUP + qh % GROUP
        ok = sp < NS
        m = tl.load(att_ml + at * 2, mask=ok, other=float("-inf"), cache_modifier=".cg")
        ls = tl.load(att_ml + at * 2 + 1, mask=ok, other=0.0, cache_modifier=".cg")
        o = tl.load(att_o + at[:, None] * D + d[None, :], mask=ok[:, None], other=0.0, cache_modifier=".cg")
        wgt = tl.exp(m - tl.max(m, axis=0))
        tl.store(out_ptr + qh * D + d, (tl.sum(wgt[:, None] * o, axis=0) / tl.sum(wgt * ls, axis=0)).to(tl.bfloat16))


@triton.jit
def _residual_add(p_ptr, r_ptr, pid, nprog, N: tl.constexpr, SPLITS: tl.constexpr, BR: tl.constexpr):
    """r += the splits of p[SPLITS, N] summed and rounded to bf16; r rounded to bf16 after the add
    (the layered step adds bf16 tensors)."""
    for c in range(pid, N // BR, nprog):
        rn = c * BR + tl.arange(0, BR)
        acc = tl.sum(tl.load(p_ptr + tl.arange(0, SPLITS)[:, None] * N + rn[None, :], cache_modifier=".cg"), axis=0)
        r = tl.load(r_ptr + rn, cache_modifier=".cg")
        tl.store(r_ptr + rn, (r + acc.to(tl.bfloat16).to(tl.float32)).to(tl.bfloat16).to(tl.float32))


@triton.jit
def decode_layers_kernel(r_ptr, n1_ptr, n2_ptr, dqkv, do, dgu, dd, p_ptr, p2_ptr, q_ptr, sync_ptr, kc_ptr, vc_ptr,
                         layer_stride, cos_ptr, sin_ptr, att_o, att_ml, sm_scale, eps, table_ptr, lens_ptr, slot_ptr,
                         LAYERS: tl.constexpr, H: tl.constexpr, I: tl.constexpr, HEADS: tl.constexpr,
                         KV: tl.constexpr, D: tl.constexpr, PAGE: tl.constexpr, S_QKV: tl.constexpr,
                         S_O: tl.constexpr, S_GU: tl.constexpr, S_D: tl.constexpr, BK: tl.constexpr,
                         BN: tl.constexpr, BR: tl.constexpr, SPLIT_MIN: tl.constexpr, NS2: tl.constexpr):
    """All layers of one sequence's decode step. r (float32 [H], bf16 values) is the residual
    stream: the token's embedding in, the last layer's output out, updated in place. dqkv, do,
    dgu, dd: TMA descriptors over the stacked [LAYERS, in, out] weights; n1, n2 the stacked norm
    weights. The sequence's length (lens_ptr, the new token included), the new token's slot and
    its block table are read on the device, and cos_ptr/sin_ptr are whole [positions, D] tables,
    so that one captured graph serves every step. kc_ptr/vc_ptr: the pool's caches, layer_stride
    elements a layer. Attention splits the sequence into at most NS2 splits of SPLIT_MIN tokens or
    more (a power of two: 128 ran best at 1K on the H200), chosen from the length on the device.
    sync_ptr[0] must be 0 at launch; sync_ptr[1] is set if a barrier timed out."""
    pid = tl.program_id(0)
    nprog = tl.num_programs(0)
    Q: tl.constexpr = (HEADS + 2 * KV) * D
    GROUP: tl.constexpr = HEADS // KV
    t_now = tl.load(lens_ptr)
    split = SPLIT_MIN
    while split * NS2 < t_now:
        split *= 2
    ns_now = (t_now + split - 1) // split
    slot = tl.load(slot_ptr)
    cos_now = cos_ptr + (t_now - 1) * D
    sin_now = sin_ptr + (t_now - 1) * D
    phase = 0          # barriers passed: the counter's next target is (phase + 1) * nprog
    for layer32 in range(LAYERS):
        layer = layer32.to(tl.int64)
        inv = _inv_rms(r_ptr, H, eps)
        _product(r_ptr, n1_ptr + layer * H, inv, dqkv, layer32, p_ptr, pid, nprog, H, Q, S_QKV, 1, BK, BN, 1, 1)
        phase += 1
        _grid_sync(sync_ptr, phase * nprog)
        kc = kc_ptr + layer * layer_stride
        vc = vc_ptr + layer * layer_stride
        _rope_kv(p_ptr, cos_now, sin_now, q_ptr, kc, vc, slot, pid, nprog, S_QKV, HEADS, KV, D)
        phase += 1
        _grid_sync(sync_ptr, phase * nprog)
        _attention(q_ptr, kc, vc, att_o, att_ml, pid, nprog, sm_scale, t_now, ns_now, split, table_ptr, KV, GROUP, D,
                   PAGE)
        phase += 1
        _grid_sync(sync_ptr, phase * nprog)
        _merge(att_o, att_ml, q_ptr, pid, nprog, ns_now, HEADS, GROUP, D, NS2)      # over q: attention read it
        phase += 1
        _grid_sync(sync_ptr, phase * nprog)
        _product(q_ptr, n1_ptr, inv, do, layer32, p2_ptr, pid, nprog, HEADS * D, H, S_O, 0, BK, BN, 1, 1)
        phase += 1
        _grid_sync(sync_ptr, phase * nprog)
        _residual_add(p2_ptr, r_ptr, pid, nprog, H, S_O, BR)
        phase += 1
        _grid_sync(sync_ptr, phase * nprog)
        inv2 = _inv_rms(r_ptr, H, eps)
        _product(r_ptr, n2_ptr + layer * H, inv2, dgu, layer32, p_ptr, pid, nprog, H, 2 * I, S_GU, 1, BK, BN, 1, 1)
        phase += 1
        _grid_sync(sync_ptr, phase * nprog)
        _product(p_ptr, n1_ptr, inv, dd, layer32, p2_ptr, pid, nprog, I, H, S_D, 2, BK, BN, S_GU, 2 * I)
        phase += 1
        _grid_sync(sync_ptr, phase * nprog)
        _residual_add(p2_ptr, r_ptr, pid, nprog, H, S_D, BR)
        phase += 1
        _grid_sync(sync_ptr, phase * nprog)
