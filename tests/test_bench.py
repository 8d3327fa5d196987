"""python -m torch_tpu.bench runs end to end at a tiny size and writes its
table, CSV, JSON and chart (the figures themselves live in docs/benchmarks.md,
never in tests)."""
import csv
import json
import os
import subprocess
import sys
import time

from test_device import ROOT


def bench(*args):
    """python -m torch_tpu.bench with `args`; its stdout (it must succeed)."""
    p = subprocess.run([sys.executable, "-m", "torch_tpu.bench", *args], cwd=ROOT, capture_output=True, text=True,
                       timeout=600)
    assert p.returncode == 0, p.stderr[-3000:]
    return p.stdout


def test_bench_train_writes_its_outputs(tmp_path):
    out = bench("--models", "mlp-demo", "--modes", "cpu-eager,cpu-dynamo,dynamo-floor,tpu-strict", "--steps", "3",
                "--warmup", "1", "--windows", "2", "--out", str(tmp_path))
    assert "samples/s" in out and "peak MiB" in out and "1st / strict" in out, out
    rows = list(csv.DictReader(open(tmp_path / "train_step.csv")))
    assert [r["mode"] for r in rows] == ["cpu-eager", "cpu-dynamo", "dynamo-floor", "tpu-strict"], rows
    tpu = rows[3]
    assert float(tpu["steps_per_s"]) > 0 and int(tpu["compiles"]) > 0 and int(tpu["peak_bytes"]) > 0, tpu
    data = json.load(open(tmp_path / "train_step.json"))
    res = data["results"]["mlp-demo"]
    assert res["tpu-strict"]["final_loss"] > 0
    # dynamo with its no-op backend trains the same model on the same CPU kernels as CPU eager (1e-5: the
    # traced backward may accumulate gradients in another order)
    assert abs(res["cpu-dynamo"]["final_loss"] - res["cpu-eager"]["final_loss"]) < 1e-5, res
    # Each timed window is reported; steps/s is their median.
    assert len(res["tpu-strict"]["window_steps_per_s"]) == 2, res
    # dynamo-floor computes nothing after the first run of each graph: its
    # loss stays the first step's, which trained models have left behind.
    assert res["dynamo-floor"]["final_loss"] > res["cpu-eager"]["final_loss"], res
    assert os.path.getsize(tmp_path / "train_step.png") > 0


def test_bench_repeats_report_the_median_round(tmp_path):
    out = bench("--models", "mlp-demo", "--modes", "cpu-eager", "--steps", "3", "--warmup", "1", "--repeats", "3",
                "--out", str(tmp_path))
    assert "over 3 rounds" in out, out
    r = json.load(open(tmp_path / "train_step.json"))["results"]["mlp-demo"]["cpu-eager"]
    assert len(r["steps_per_s_runs"]) == 3 and sorted(r["steps_per_s_runs"])[1] == r["steps_per_s"], r


def test_bench_ops_prints_its_table():
    out = bench("ops", "--iters", "5", "--repeats", "1")
    assert "matmul 64x64" in out and "tpu/cpu" in out, out


def test_bench_runs_the_examples_models(tmp_path):
    out = bench("--models", "ex-mingpt,ex-dlrm", "--modes", "cpu-eager,tpu-strict", "--steps", "2", "--warmup", "1",
                "--out", str(tmp_path))
    assert "sequences/s" in out and "samples/s" in out, out
    rows = list(csv.DictReader(open(tmp_path / "train_step.csv")))
    assert [(r["model"], r["mode"]) for r in rows] == [("ex-mingpt", "cpu-eager"), ("ex-mingpt", "tpu-strict"),
                                                       ("ex-dlrm", "cpu-eager"), ("ex-dlrm", "tpu-strict")], rows
    for r in rows:
        assert float(r["steps_per_s"]) > 0 and float(r["items_per_s"]) > 0, r
        if r["mode"] == "tpu-strict":
            assert int(r["compiles"]) > 0, r


def test_bench_jax_resnet18_is_torchvisions_resnet18():
    # The bench's JAX ResNet-18 (the jax-jit column) must be the model the
    # tpu columns train: torchvision's weights loaded into it give the same
    # training-mode loss and BatchNorm running statistics. JAX is an optional
    # bench dependency (requirements-bench.txt).
    import pytest

    jax = pytest.importorskip("jax")
    import numpy as np
    import torch
    import torchvision

    from torch_tpu.bench.train import _jax_resnet18

    params, bufs, loss_fn = _jax_resnet18(jax.random.PRNGKey(0))
    torch.manual_seed(0)
    m = torchvision.models.resnet18(num_classes=10).train()
    sd = {k: v.detach().numpy() for k, v in m.state_dict().items()}

    def bn(k):
        return {"g": sd[k + ".weight"], "b": sd[k + ".bias"]}

    p = {"conv1": sd["conv1.weight"].transpose(2, 3, 1, 0), "bn1": bn("bn1"),
         "fc": {"w": sd["fc.weight"].T, "b": sd["fc.bias"]}}
    names = {"bn1": m.bn1}
    for s in range(4):
        for i in range(2):
            n, blk = f"l{s}b{i}", m.get_submodule(f"layer{s + 1}.{i}")
            t = f"layer{s + 1}.{i}"
            p[n + "c1"], p[n + "c2"] = (sd[t + c].transpose(2, 3, 1, 0) for c in (".conv1.weight", ".conv2.weight"))
            p[n + "n1"], p[n + "n2"] = bn(t + ".bn1"), bn(t + ".bn2")
            names[n + "n1"], names[n + "n2"] = blk.bn1, blk.bn2
            if blk.downsample is not None:
                p[n + "dc"], p[n + "dn"] = sd[t + ".downsample.0.weight"].transpose(2, 3, 1, 0), bn(t + ".downsample.1")
                names[n + "dn"] = blk.downsample[1]
    assert jax.tree_util.tree_structure(p) == jax.tree_util.tree_structure(params)
    x, y = torch.randn(16, 3, 32, 32), torch.randint(0, 10, (16,))
    with jax.default_matmul_precision("highest"):
        loss, new = loss_fn(p, bufs, x.numpy().transpose(0, 2, 3, 1), y.numpy())
    ref = torch.nn.functional.cross_entropy(m(x), y)
    torch.testing.assert_close(torch.tensor(float(loss)), ref.detach(), rtol=1e-5, atol=1e-5)
    for n, mod in names.items():
        torch.testing.assert_close(torch.from_numpy(np.asarray(new[n]["mean"])), mod.running_mean, rtol=1e-5, atol=1e-6)
        torch.testing.assert_close(torch.from_numpy(np.asarray(new[n]["var"])), mod.running_var, rtol=1e-5, atol=1e-6)


def test_bench_real_loop_writes_its_outputs(tmp_path):
    # The real loop (schedule, accumulation, clipping, logging, eval, host
    # batches) compiled for tpu compiles nothing after its warm-up.
    out = bench("--loop", "real", "--models", "mlp-demo", "--modes", "cpu-eager,tpu-compile", "--fixed-steps", "20",
                "--out", str(tmp_path))
    assert "real/plain" in out and "compiles after 100" in out, out
    res = json.load(open(tmp_path / "real_loop.json"))["mlp-demo"]
    for mode in ("cpu-eager", "tpu-compile"):
        r = res[mode]
        assert r["real_items_per_s"] > 0 and r["plain_items_per_s"] > 0 and r["finite"], r
    assert res["tpu-compile"]["compiles_after_100"] == 0, res
    # The same model, schedule and batches: the last logged loss (an eval
    # pass) is CPU's to float32 accumulation noise.
    assert abs(res["tpu-compile"]["last_logged"] - res["cpu-eager"]["last_logged"]) < 1e-3, res
    assert os.path.getsize(tmp_path / "real_loop.png") > 0


def test_bench_loop_takes_only_real():
    p = subprocess.run([sys.executable, "-m", "torch_tpu.bench", "--loop", "fast"], cwd=ROOT, capture_output=True,
                       text=True, timeout=600)
    assert p.returncode != 0 and "--loop takes 'real'" in p.stderr, p.stderr[-2000:]


def _minimal_jax_mlp_step():
    """An independent SGD step of MLP 784-512-512-10 (momentum 0.9, lr
    0.01), written the shortest way: flat lists of arrays, weights (in, out),
    parameters and momenta donated."""
    import jax
    import jax.numpy as jnp

    def loss(ws, x, y):
        h = x
        for i in range(0, 6, 2):
            h = h @ ws[i] + ws[i + 1]
            if i < 4:
                h = jnp.maximum(h, 0)
        return jnp.mean(jax.nn.logsumexp(h, axis=1) - h[jnp.arange(h.shape[0]), y])

    def step(ws, ms, x, y):
        value, gs = jax.value_and_grad(loss)(ws, x, y)
        ms = [0.9 * m + g for m, g in zip(ms, gs)]
        return [w - 0.01 * m for w, m in zip(ws, ms)], ms, value

    return jax.jit(step, donate_argnums=(0, 1))


def test_bench_jax_step_is_a_minimal_jitted_step():
    # The jax-jit column is the baseline every "x JAX" figure rests on. It
    # must be what a JAX user writes: the same losses as an independent
    # minimal step from the same weights, its parameters and optimizer state
    # donated (updated in place, not copied), and the same speed as that
    # minimal step, measured side by side in interleaved rounds.
    import statistics

    import pytest

    jax = pytest.importorskip("jax")
    import numpy as np

    from torch_tpu.bench.train import jax_model, jax_step

    params, bufs, loss_fn, x, y = jax_model("mlp")
    step, state = jax_step("mlp", params, loss_fn)
    flat = [np.asarray(a) for layer in params for a in (layer["w"].T, layer["b"])]
    mini = _minimal_jax_mlp_step()
    ws, ms = [jax.numpy.asarray(a) for a in flat], [jax.numpy.zeros(a.shape) for a in flat]
    for _ in range(5):
        first_w = params[0]["w"]
        params, bufs, state, loss = step(params, bufs, state, x, y)
        assert first_w.is_deleted()  # donated
        ws, ms, ref = mini(ws, ms, x, y)
        # Different weight layouts sum the matmuls in different orders.
        np.testing.assert_allclose(float(loss), float(ref), rtol=1e-5)

    def rate(run, n=20):
        t0 = time.perf_counter()
        out = None
        for _ in range(n):
            out = run()
        jax.block_until_ready(out)
        return n / (time.perf_counter() - t0)

    def bench_once():
        nonlocal params, bufs, state
        params, bufs, state, loss = step(params, bufs, state, x, y)
        return loss

    def mini_once():
        nonlocal ws, ms
        ws, ms, loss = mini(ws, ms, x, y)
        return loss

    ratios = [rate(bench_once) / rate(mini_once) for _ in range(9)]
    assert 0.9 <= statistics.median(ratios) <= 1.1, ratios


def test_bench_generate_writes_its_outputs(tmp_path):
    # python -m torch_tpu.bench --generate, at test size: every mode decodes
    # CPU's tokens, and its figures are there.
    out = bench("--generate", "--small", "--batches", "2", "--modes", "cpu-eager,tpu-compile",
                "--prompt", "12", "--new", "6", "--out", str(tmp_path))
    assert "decode tok/s" in out, out
    res = json.load(open(tmp_path / "generate.json"))["2"]
    for mode in ("cpu-eager", "tpu-compile"):
        r = res[mode]
        assert r["tokens_equal_cpu"], (mode, r)
        assert r["decode_tokens_per_s"] > 0 and r["ttft_s"] > 0, r
    assert res["tpu-compile"]["cold_compiles"] > 0


def test_bench_spmd_compares_with_jax_on_one_mesh(tmp_path):
    """The SPMD bench on 2 devices, FSDP, tiny GPT: both frameworks train the
    sharded step, and both partitioned programs gather the split weights."""
    import json

    from torch_tpu.bench import spmd

    out = tmp_path / "spmd.json"
    spmd.main(["--small", "--devices", "2", "--patterns", "fsdp", "--steps", "2", "--warmup", "0", "--windows", "1",
               "--json", str(out)])
    (row,) = json.loads(out.read_text())["results"]
    assert row["pattern"] == "fsdp" and row["devices"] == 2
    for fw in ("torch", "jax"):
        r = row[fw]
        assert r is not None, f"the {fw} run failed"
        assert r["steps_per_s"] > 0 and r["first_step_s"] > 0
        assert r["collectives"].get("all-gather", 0) > 0, r["collectives"]


def test_bench_depth_runs_every_form_and_each_starts_from_the_same_model(tmp_path):
    """The depth bench on a small GPT at one depth: unrolled, scan_layers and
    ScannedLayers run, start from the same loss (the same model), and the
    table renders."""
    import json

    from torch_tpu.bench import depth

    depth.main(["--small", "--depths", "3", "--steps", "1", "--warmup", "0", "--windows", "1", "--out",
                str(tmp_path)])
    results = json.loads((tmp_path / "depth.json").read_text())["results"]
    assert {(r["depth"], r["form"]) for r in results} == {(3, "unrolled"), (3, "scan"), (3, "stacked")}
    for r in results:
        assert r.get("steps_per_s", 0) > 0, r
    first = {r["form"]: r["first_loss"] for r in results}
    assert abs(first["scan"] - first["unrolled"]) < 1e-4 and abs(first["stacked"] - first["unrolled"]) < 1e-4
    assert "| 3 |" in depth.table(results)


def test_bench_soak_samples_each_rank(tmp_path):
    p = subprocess.run([sys.executable, os.path.join(ROOT, "bench", "soak.py"), "--steps", "40", "--every", "10",
                        "--out", str(tmp_path)], cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, p.stderr[-3000:]
    data = json.load(open(tmp_path / "soak.json"))
    assert data["nproc"] == 2 and len(data["samples"]) == 2 and len(data["growth"]) == 2
    for samples in data["samples"]:
        assert [s["step"] for s in samples] == [1, 10, 20, 30, 40]
        assert all(s["rss_mib"] > 0 and s["fds"] > 0 and s["device_mib"] > 0 for s in samples), samples
    # Each rank logs the loss of its own batches.
    assert data["samples"][0][-1]["loss"] != data["samples"][1][-1]["loss"]
    assert "host memory (RSS), MiB" in p.stdout
