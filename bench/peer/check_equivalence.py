#!/usr/bin/python3
"""Checks that bench/peer/nanogpt_peer.py computes the same training step as `harness train`.

    /usr/bin/python3 bench/peer/check_equivalence.py [--harness build/harness]

Runs the harness on bench/peer/bench.yaml for 12 steps on 1 thread, checkpointing after step 10
(--stop-after-steps 10, then --resume). Loads that checkpoint (weights, Muon momentum buffers,
Adam moments) into the peer's model and optimisers, rebuilds the harness's batches for steps 11
and 12 (its mt19937_64 / splitmix64 Fisher–Yates window order, re-implemented here), runs the
peer's two steps and compares the training loss and gradient norm of each step with run.h5 and
the weights after step 12 with the harness's final checkpoint. The two steps fall in the lr
cooldown, so the schedule is exercised too. Exit status 0 when everything agrees within float32
tolerances (the attention kernels differ in summation order), 1 otherwise.
"""

import argparse
import math
import os
import shutil
import subprocess
import sys
import tempfile

import h5py
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import nanogpt_peer as peer  # noqa: E402

M64 = (1 << 64) - 1


def splitmix64(x):
    x = (x + 0x9E3779B97F4A7C15) & M64
    x = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & M64
    x = ((x ^ (x >> 27)) * 0x94D049BB133111EB) & M64
    return x ^ (x >> 31)


class MT19937_64:
    def __init__(self, seed):
        self.mt = [seed & M64]
        for i in range(1, 312):
            p = self.mt[-1]
            self.mt.append((6364136223846793005 * (p ^ (p >> 62)) + i) & M64)
        self.i = 312

    def __call__(self):
        mt = self.mt
        if self.i >= 312:
            for k in range(312):
                x = (mt[k] & 0xFFFFFFFF80000000) | (mt[(k + 1) % 312] & 0x7FFFFFFF)
                xa = x >> 1
                if x & 1:
                    xa ^= 0xB5026F5AA96619E9
                mt[k] = mt[(k + 156) % 312] ^ xa
            self.i = 0
        y = mt[self.i]
        self.i += 1
        y ^= (y >> 29) & 0x5555555555555555
        y ^= (y << 17) & 0x71D67FFFEDA60000
        y ^= (y << 37) & 0xFFF7EEE000000000
        return y ^ (y >> 43)


def epoch_order(n, seed, epoch):
    """harness/data/windows.cpp: TrainStream::epoch_order."""
    eng = MT19937_64(splitmix64(seed ^ splitmix64(epoch)))
    order = list(range(n))
    for i in range(n, 1, -1):
        threshold = ((1 << 64) - i) % i
        while True:
            r = eng()
            if r >= threshold:
                break
        j = r % i
        order[i - 1], order[j] = order[j], order[i - 1]
    return order


def main():
    root = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--harness", default=os.path.join(root, "build", "harness"))
    args = ap.parse_args()
    config = os.path.join(root, "bench", "peer", "bench.yaml")
    steps, stop = 12, 10
    work = tempfile.mkdtemp(prefix="peer_equivalence.")
    run_dir = os.path.join(work, "run")
    common = [args.harness, "train", "--config", config, "--set", f"data.data_dir={root}/data",
              "--set", "run.threads=1", "--set", f"train.steps={steps}", "--run-dir", run_dir,
              "--no-progress"]
    r = subprocess.run(common + ["--overwrite", "--stop-after-steps", str(stop)],
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    if r.returncode != 0:  # 0: stopped as asked, checkpoint written
        sys.exit(f"harness train --stop-after-steps failed with exit status {r.returncode}")
    subprocess.run(common + ["--resume"], check=True, stdout=subprocess.DEVNULL,
                   stderr=subprocess.DEVNULL)

    torch.set_num_threads(1)
    resolved = os.path.join(work, "resolved.yaml")
    with open(resolved, "w") as f:  # the harness's resolved config: its defaults, not the peer's
        subprocess.run([args.harness, "config", "show", "--config", config, "--set",
                        f"data.data_dir={root}/data", "--set", f"train.steps={steps}"],
                       check=True, stdout=f)
    c = peer.load_config(argparse.Namespace(config=resolved, set=None))
    L, B = c["train.context"], c["train.batch_size"]
    # The run keeps its 2 newest checkpoints (run.keep_checkpoints): step 10's and the final one.
    ck10 = torch.jit.load(os.path.join(run_dir, f"checkpoint-{stop}.pt"))
    ck12 = torch.jit.load(os.path.join(run_dir, f"checkpoint-{steps}.pt"))
    p10 = dict(ck10.named_parameters())
    b10 = dict(ck10.named_buffers())

    model = peer.GPT(c)
    with torch.no_grad():
        for n, p in model.named_parameters():
            p.copy_(p10[n])
    hidden = [(n, p) for n, p in model.named_parameters() if n.startswith("blocks.") and p.dim() == 2]
    muon = peer.Muon([p for _, p in hidden], lr=c["optim.lr_hidden"], momentum=c["optim.momentum"])
    for i, (_, p) in enumerate(hidden):  # the harness's hidden group is in named_parameters order
        muon.state[p]["buf"] = b10[f"optim_hidden_{i}_momentum"].clone()
    adam = torch.optim.Adam([dict(params=[model.embed.weight], lr=c["optim.lr_embed"]),
                             dict(params=[model.head.weight], lr=c["optim.lr_head"])],
                            betas=(c["optim.beta1"], c["optim.beta2"]), eps=1e-10)
    for name, p in (("embed", model.embed.weight), ("head", model.head.weight)):
        adam.state[p] = {"step": torch.tensor(float(b10[f"optim_{name}_steps"].item())),
                         "exp_avg": b10[f"optim_{name}_0_exp_avg"].clone(),
                         "exp_avg_sq": b10[f"optim_{name}_0_exp_avg_sq"].clone()}
    groups = [(g, g["lr"]) for opt in (muon, adam) for g in opt.param_groups]

    stream = torch.from_numpy(peer.load_train_stream(os.path.join(root, "data", "sotu"),
                                                     c["data.val_fraction"]).astype("int64"))
    n_windows = len(stream) // (L + 1)
    assert int(p10["run_cursor_epoch"].item()) == 0, "the check assumes epoch 0"
    cursor = int(p10["run_cursor_position"].item())
    assert cursor == stop * B, f"checkpoint cursor {cursor}, expected {stop * B}"
    order = epoch_order(n_windows, c["train.seed"], 0)[: steps * B]

    with h5py.File(os.path.join(run_dir, "run.h5"), "r") as f:
        h_loss, h_gnorm = f["train/loss"][:], f["train/grad_norm"][:]
    params = list(model.parameters())
    ok = True
    for step in range(stop, steps):
        fct = peer.lr_factor(step, steps, c["schedule.cooldown_fraction"])
        for g, base in groups:
            g["lr"] = base * fct
        muon.zero_grad(set_to_none=True)
        adam.zero_grad(set_to_none=True)
        idx = order[step * B:(step + 1) * B]
        batch = torch.stack([stream[w * (L + 1):(w + 1) * (L + 1)] for w in idx])
        loss = model(batch[:, :L], batch[:, 1:])
        loss.backward()
        gnorm = math.sqrt(float(sum(p.grad.double().pow(2).sum() for p in params)))
        muon.step()
        adam.step()
        dl = abs(loss.item() - h_loss[step]) / h_loss[step]
        dg = abs(gnorm - h_gnorm[step]) / h_gnorm[step]
        good = dl < 1e-4 and dg < 1e-3
        ok &= good
        print(f"step {step + 1} (lr factor {fct:.3f}): loss peer {loss.item():.6f} harness "
              f"{h_loss[step]:.6f} (rel {dl:.1e}); grad norm peer {gnorm:.5f} harness "
              f"{h_gnorm[step]:.5f} (rel {dg:.1e}) {'ok' if good else 'MISMATCH'}")
    p12 = dict(ck12.named_parameters())
    worst = 0.0
    for n, p in model.named_parameters():
        ref = p12[n]
        rel = ((p.detach() - ref).norm() / ref.norm().clamp(min=1e-12)).item()
        worst = max(worst, rel)
        if rel > 1e-4:
            ok = False
            print(f"  {n}: relative difference {rel:.2e} MISMATCH")
    print(f"weights after step {steps}: largest relative difference (Frobenius) {worst:.2e} "
          f"{'ok' if worst <= 1e-4 else 'MISMATCH'}")
    shutil.rmtree(work, ignore_errors=True)
    print("EQUIVALENT" if ok else "NOT EQUIVALENT")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
