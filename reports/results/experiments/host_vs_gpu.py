"""Where does a tiny GEMM's time go?  host us/call (GPU kept busy), GPU us/call (CUDA graph replay),
back-to-back us/call (what validation measures); ours vs torch.matmul."""
import json, os, sys, time
import torch, triton, triton.language as tl
from theodolite.kernels.launch import gemm, plan_gemm
from theodolite.kernels.config import GemmConfig
from theodolite.kernels.benchmark import make_inputs

OUT = os.environ.get("OUT", "/tmp")
CASES = [
    (128, 128, 128, "persistent/128x128x64/g8/w8/s4/k1/f"),
    (128, 128, 128, "persistent/16x64x128/g8/w4/s4/k1"),
    (956, 41, 104, "persistent/32x128x64/g8/w4/s4/k1"),
    (956, 41, 104, "persistent/16x64x128/g8/w4/s4/k1"),
    (364, 129, 2317, "splitk/32x128x64/g8/w4/s4/k4"),
    (364, 129, 2317, "persistent/32x128x64/g8/w4/s4/k1"),
    (324, 6757, 146, "persistent/256x128x64/g8/w8/s4/k1"),
    (324, 6757, 146, "persistent/128x128x64/g8/w8/s4/k1/f"),
    (30, 1289, 5177, "streamk/128x128x64/g8/w8/s4/k1"),
    (30, 1289, 5177, "splitk/16x64x128/g8/w4/s4/k8"),
    (656, 45, 8053, "splitk/16x64x128/g8/w4/s4/k16"),
    (332, 12914, 36, "persistent/128x128x64/g8/w8/s4/k1/f"),
    (2048, 2048, 2048, "tma/128x256x64/g8/w8/s3/k1/f"),
]

@triton.jit
def _empty(x):
    pass

def host_us(fn, n=200):
    torch.cuda.synchronize()
    torch.cuda._sleep(int(2e9 * 0.05))  # ~50 ms of GPU spin: launches below only enqueue
    t = time.perf_counter()
    for _ in range(n):
        fn()
    dt = time.perf_counter() - t
    torch.cuda.synchronize()
    return dt / n * 1e6

def graph_us(fn, n=20, reps=20):
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        fn(); fn()
    torch.cuda.current_stream().wait_stream(s)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        for _ in range(n):
            fn()
    g.replay(); torch.cuda.synchronize()
    ts = []
    for _ in range(reps):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record(); g.replay(); b.record(); torch.cuda.synchronize()
        ts.append(a.elapsed_time(b) * 1e3 / n)
    return sorted(ts)[len(ts) // 2]

def b2b_us(fns, calls=400, reps=7):
    ts = []
    for _ in range(reps):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        for i in range(calls):
            fns[i % len(fns)]()
        b.record(); torch.cuda.synchronize()
        ts.append(a.elapsed_time(b) * 1e3 / calls)
    return sorted(ts)[len(ts) // 2]

rows = []
x = torch.empty(1, device="cuda")
e = lambda: _empty[(1,)](x)
e()
rows.append(dict(case="empty triton kernel via JIT", host=host_us(e), gpu=graph_us(e), b2b=b2b_us([e])))
k = _empty[(1,)](x)
run = k[(1,1,1)]
e2 = lambda: run(x)
rows.append(dict(case="empty triton kernel, compiled[grid]", host=host_us(e2), gpu=graph_us(e2), b2b=b2b_us([e2])))
for m, n, kk, key in CASES:
    cfg = GemmConfig.from_key(key)
    sets = [make_inputs(m, n, kk, "bf16", "nn", torch.device("cuda"), seed=i) for i in range(16)]
    outs = [torch.empty(m, n, device="cuda", dtype=torch.bfloat16) for _ in sets]
    ours = [(lambda a=a, b=b, o=o: gemm(a, b, cfg, out=o)) for (a, b), o in zip(sets, outs)]
    theirs = [(lambda a=a, b=b, o=o: torch.matmul(a, b, out=o)) for (a, b), o in zip(sets, outs)]
    ours[0](); theirs[0](); torch.cuda.synchronize()
    plan = plan_gemm(sets[0][0], sets[0][1], cfg, out=outs[0])
    r = dict(case=f"{m}x{n}x{kk} {key}", steps=len(plan.steps),
             host=host_us(ours[0]), gpu=graph_us(ours[0]), b2b=b2b_us(ours),
             t_host=host_us(theirs[0]), t_gpu=graph_us(theirs[0]), t_b2b=b2b_us(theirs))
    rows.append(r)
    print(r, flush=True)
json.dump(rows, open(f"{OUT}/diag.json", "w"), indent=1)
print(f"{'case':58s} {'st':>2s} {'host':>6s} {'gpu':>6s} {'b2b':>6s} | {'t_host':>6s} {'t_gpu':>6s} {'t_b2b':>6s}")
for r in rows:
    print(f"{r['case'][:58]:58s} {r.get('steps',0):2d} {r['host']:6.1f} {r['gpu']:6.1f} {r['b2b']:6.1f} | "
          f"{r.get('t_host',0):6.1f} {r.get('t_gpu',0):6.1f} {r.get('t_b2b',0):6.1f}")
