#!/usr/bin/env python3
"""record.py - record pairs of PyTorch profiler traces that differ in one knob.

Each recording trains (or, for the small model, runs inference on) a model
built from code with random weights on synthetic data, and profiles it with
torch.profiler: record_shapes=True, profile_memory=True, a schedule of
1 wait, 2 warm-up and 5 active steps, one ProfilerStep per step.  It writes
a gzipped Kineto trace and appends one JSON line to manifest.jsonl in the
output folder: job, variant, knob, model, batch, dtype, GPU, driver, torch
version and the command that repeats the recording alone.

    python3 traces/record.py --out DIR                 # every recording
    python3 traces/record.py --out DIR --only resnet50:fp32,gpt:amp_bf16
    python3 traces/record.py --list
    python3 traces/record.py --out DIR --only loader:workers4 --active 17

--active N records N steps instead of 5: a job whose steps repeat a cycle
(N DataLoader workers deliver in turns) needs whole cycles in the window.

A `compiled` variant runs the model under torch.compile (default mode); it
compiles in unrecorded settling steps before the profiler starts, so the
trace holds Inductor's Triton kernels being run, not being built.

Nothing is downloaded: models come from torchvision (ResNet) or are written
here (a GPT-2-small-shaped decoder and a BERT-small-shaped encoder, from
torch.nn).  A recording that fails is written to the manifest with its
error and the others go on.
"""
import argparse
import gzip
import json
import os
import shutil
import subprocess
import sys
import time
import traceback

import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.utils.checkpoint

WAIT, WARMUP, ACTIVE = 1, 2, 5
SMOKE = False  # --smoke: tiny shapes, to try the script without a GPU
STEPS = WAIT + WARMUP + ACTIVE
# Unrecorded steps before the profiler starts for a job under torch.compile:
# the first call traces and compiles the forward, and the first backward the
# backward (Triton kernels built and benchmarked then); the rest let the
# caching allocator and cuDNN's choices settle as an eager job's first steps
# do, so the window sees only compiled code being run, not compiled.
COMPILE_SETTLE = 5


# ---- models ----------------------------------------------------------------

class Block(nn.Module):
    """A pre-norm Transformer block (GPT-2 / BERT shaped)."""

    def __init__(self, hidden, heads, causal):
        super().__init__()
        self.heads, self.causal = heads, causal
        self.ln1, self.ln2 = nn.LayerNorm(hidden), nn.LayerNorm(hidden)
        self.qkv = nn.Linear(hidden, 3 * hidden)
        self.proj = nn.Linear(hidden, hidden)
        self.fc1, self.fc2 = nn.Linear(hidden, 4 * hidden), nn.Linear(4 * hidden, hidden)

    def forward(self, x):
        b, s, h = x.shape
        q, k, v = self.qkv(self.ln1(x)).view(b, s, 3, self.heads, h // self.heads).permute(2, 0, 3, 1, 4)
        if hasattr(F, "scaled_dot_product_attention"):
            a = F.scaled_dot_product_attention(q, k, v, is_causal=self.causal)
        else:  # PyTorch before 2.0: the same attention, spelled out
            scores = q @ k.transpose(-2, -1) / (q.shape[-1] ** 0.5)
            if self.causal:
                scores = scores.masked_fill(torch.ones(s, s, dtype=torch.bool, device=x.device).triu(1), float("-inf"))
            a = scores.softmax(-1) @ v
        x = x + self.proj(a.transpose(1, 2).reshape(b, s, h))
        return x + self.fc2(F.gelu(self.fc1(self.ln2(x))))


class Transformer(nn.Module):
    def __init__(self, vocab, hidden, layers, heads, seq, causal, checkpoint=False):
        super().__init__()
        self.embed, self.pos = nn.Embedding(vocab, hidden), nn.Embedding(seq, hidden)
        self.blocks = nn.ModuleList(Block(hidden, heads, causal) for _ in range(layers))
        self.ln = nn.LayerNorm(hidden)
        self.head = nn.Linear(hidden, vocab, bias=False)
        self.checkpoint = checkpoint

    def forward(self, tokens):
        x = self.embed(tokens) + self.pos(torch.arange(tokens.shape[1], device=tokens.device))
        for block in self.blocks:
            if self.checkpoint and self.training:
                x = torch.utils.checkpoint.checkpoint(block, x, use_reentrant=False)
            else:
                x = block(x)
        return self.head(self.ln(x))


# ---- jobs --------------------------------------------------------------------
# Each variant: (knob text, settings).  The first variant of a job is its
# baseline; every other differs from it in the one knob named.

JOBS = {
    "resnet50": {
        "model": "torchvision ResNet-50, training, Adam, batch 32, 224x224, synthetic images",
        "variants": {
            "fp32": ("baseline: fp32, Adam foreach=False", {}),
            "amp_bf16": ("autocast bf16", {"amp": torch.bfloat16}),
            "amp_fp16": ("autocast fp16 with GradScaler", {"amp": torch.float16}),
            "adam_fused": ("Adam fused=True", {"adam": "fused"}),
            # The first recording of a compiled job: Inductor's Triton
            # kernels and compiled regions, against amp_bf16.
            "compiled": ("autocast bf16, the model under torch.compile (default mode)",
                         {"amp": torch.bfloat16, "compile": True, "settle": COMPILE_SETTLE}),
            # amp's what-if on a compiled job: fp32 compiled -> compiled.
            "compiled_fp32": ("fp32, the model under torch.compile (default mode)",
                              {"compile": True, "settle": COMPILE_SETTLE}),
        },
    },
    "gpt": {
        "model": "GPT-2-small-shaped decoder (12 layers, hidden 768, 12 heads, vocab 50257), training, AdamW, batch 8, seq 512",
        "variants": {
            "fp32": ("baseline: fp32, batch 8, seq 512", {}),
            "amp_bf16": ("autocast bf16", {"amp": torch.bfloat16}),
            "batch16": ("batch 8 -> 16", {"batch": 16}),
            "seq1024": ("sequence 512 -> 1024", {"seq": 1024}),
            "checkpoint": ("activation checkpointing per block", {"checkpoint": True}),
            "compiled": ("autocast bf16, the model under torch.compile (default mode)",
                         {"amp": torch.bfloat16, "compile": True, "settle": COMPILE_SETTLE}),
            "compiled_fp32": ("fp32, the model under torch.compile (default mode)",
                              {"compile": True, "settle": COMPILE_SETTLE}),
        },
    },
    "bert_small": {
        "model": "BERT-small-shaped encoder (4 layers, hidden 512, 8 heads, vocab 30522), inference under no_grad, batch 8, seq 128",
        "variants": {
            "eager": ("baseline: eager", {}),
            "cuda_graph": ("the forward captured once as a CUDA graph and replayed", {"graph": True}),
        },
    },
    # Other networks, each recorded on both GPUs of a hardware pair: models
    # the hardware projection was not built on (depthwise convolutions,
    # squeeze-excitation, patch attention, large-kernel convolutions).
    "efficientnet_b0": {
        "model": "torchvision EfficientNet-B0, training, SGD, batch 64, 224x224, synthetic images",
        "arch": "efficientnet_b0", "batch": 64,
        "variants": {"fp32": ("baseline: fp32", {})},
    },
    "mobilenet_v3": {
        "model": "torchvision MobileNetV3-Large, training, SGD, batch 64, 224x224, synthetic images",
        "arch": "mobilenet_v3_large", "batch": 64,
        "variants": {"fp32": ("baseline: fp32", {})},
    },
    "vit_b16": {
        "model": "torchvision ViT-B/16, training, SGD, batch 32, 224x224, synthetic images",
        "arch": "vit_b_16", "batch": 32,
        # Recorded after checkpoint:cut=blocks was written on the decoder's
        # pair, to check it on models it was not built on.
        "blocks": ("EncoderBlock",),
        "variants": {"amp_bf16": ("baseline: autocast bf16", {"amp": torch.bfloat16}),
                     "checkpoint": ("autocast bf16, each encoder layer under torch.utils.checkpoint "
                                    "(use_reentrant=False)", {"amp": torch.bfloat16, "checkpoint": True})},
    },
    "convnext_tiny": {
        "model": "torchvision ConvNeXt-Tiny, training, SGD, batch 32, 224x224, synthetic images",
        "arch": "convnext_tiny", "batch": 32,
        "blocks": ("CNBlock",),
        "variants": {"amp_bf16": ("baseline: autocast bf16", {"amp": torch.bfloat16}),
                     "checkpoint": ("autocast bf16, each ConvNeXt block under torch.utils.checkpoint "
                                    "(use_reentrant=False)", {"amp": torch.bfloat16, "checkpoint": True})},
    },
    # Recorded after the projection's cache and fixed-cost rules were
    # settled, to check those too.
    "swin_t": {
        "model": "torchvision Swin-T, training, SGD, batch 32, 224x224, synthetic images",
        "arch": "swin_t", "batch": 32,
        # checkpoint: recorded after checkpoint's hook_cost was measured on
        # ViT-B/16, ConvNeXt-Tiny and the decoder, to check it on another
        "blocks": ("SwinTransformerBlock",),
        "variants": {"amp_bf16": ("baseline: autocast bf16", {"amp": torch.bfloat16}),
                     "checkpoint": ("autocast bf16, each Swin block under torch.utils.checkpoint "
                                    "(use_reentrant=False)", {"amp": torch.bfloat16, "checkpoint": True})},
    },
    "densenet121": {
        "model": "torchvision DenseNet-121, training, SGD, batch 32, 224x224, synthetic images",
        "arch": "densenet121", "batch": 32,
        "variants": {"fp32": ("baseline: fp32", {})},
    },
    "regnet_y_800mf": {
        "model": "torchvision RegNetY-800MF, training, SGD, batch 64, 224x224, synthetic images",
        "arch": "regnet_y_800mf", "batch": 64,
        "blocks": ("ResBottleneckBlock",),
        "variants": {"fp32": ("baseline: fp32", {}),
                     "checkpoint": ("fp32, each residual block under torch.utils.checkpoint (use_reentrant=False)",
                                    {"checkpoint": True})},
    },
    "loader": {
        "model": "torchvision ResNet-18, training, SGD, batch 64, 128x128 images made by a CPU-heavy transform",
        # Unrecorded steps before the profiler starts: a DataLoader's workers
        # prefetch when its iterator is made, so the first steps take batches
        # loaded before them; the recording must sample the filled pipeline
        # (recordings before this setting began three steps after it).
        "settle": 24,
        "variants": {
            "workers0": ("baseline: DataLoader num_workers=0", {"workers": 0}),
            "workers4": ("DataLoader num_workers=4", {"workers": 4}),
            # Recorded after the dataloader plugin was written on workers4,
            # to check it at other worker counts.
            "workers2": ("DataLoader num_workers=2", {"workers": 2}),
            "workers8": ("DataLoader num_workers=8", {"workers": 8}),
        },
    },
}


class CpuHeavyImages(torch.utils.data.Dataset):
    """Random 256x256 uint8 images resized, cropped and normalized on the CPU."""

    def __len__(self):
        return 1 << 20

    def __getitem__(self, index):
        g = torch.Generator().manual_seed(index)
        image = torch.randint(0, 256, (3, 256, 256), dtype=torch.uint8, generator=g).float()
        image = F.interpolate(image[None], size=(160, 160), mode="bilinear", align_corners=False)[0]
        top, left = index % 32, (index // 32) % 32
        image = image[:, top:top + 128, left:left + 128]
        for _ in range(4):  # a colour jitter's worth of work
            image = (image - image.mean()) / (image.std() + 1e-6)
        return image, index % 1000


class Checkpointed(nn.Module):
    """A module run under torch.utils.checkpoint while training."""

    def __init__(self, inner):
        super().__init__()
        self.inner = inner

    def forward(self, *args):
        if self.training:
            return torch.utils.checkpoint.checkpoint(self.inner, *args, use_reentrant=False)
        return self.inner(*args)


def checkpoint_blocks(model, class_names):
    """Put every submodule whose class is named in class_names under
    checkpoint, as per-layer activation checkpointing does."""
    for parent in list(model.modules()):
        for key, child in list(parent.named_children()):
            if type(child).__name__ in class_names:
                setattr(parent, key, Checkpointed(child))


def settings_of(job, variant):
    return JOBS[job]["variants"][variant][1]


def compiled(model, s, facts):
    """The model under torch.compile (default mode: Inductor, no CUDA
    graphs) when the variant asks for it; the manifest says which Triton
    built its kernels."""
    if not s.get("compile"):
        return model
    try:
        import triton
        facts["triton"] = triton.__version__
    except ImportError:
        facts["triton"] = None
    facts["compile"] = "torch.compile(model), default mode"
    return torch.compile(model)


def build_step(job, variant, device):
    """A function that runs one step, and what the manifest says of it."""
    s = settings_of(job, variant)
    amp = s.get("amp")
    if job in ("resnet50", "loader"):
        import torchvision
        arch = torchvision.models.resnet50 if job == "resnet50" else torchvision.models.resnet18
        model = arch().to(device)
        facts = {}
        if job == "resnet50":
            batch, size = 32, 224
            fused = s.get("adam") == "fused"
            opt = torch.optim.Adam(model.parameters(), lr=1e-4, foreach=False if not fused else None, fused=fused or None)
            images = torch.randn(batch, 3, size, size, device=device)
            labels = torch.randint(0, 1000, (batch,), device=device)
            data = None
        else:
            batch = 64
            opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
            loader = torch.utils.data.DataLoader(CpuHeavyImages(), batch_size=batch, num_workers=s["workers"],
                                                 pin_memory=True, persistent_workers=s["workers"] > 0)
            data = iter(loader)
        scaler = None
        model = compiled(model, s, facts)
        if amp == torch.float16:
            scaler = torch.amp.GradScaler(device.type) if hasattr(torch.amp, "GradScaler") else torch.cuda.amp.GradScaler()

        def step():
            if data is not None:
                x, y = next(data)
                x, y = x.to(device, non_blocking=True), y.to(device, non_blocking=True)
            else:
                x, y = images, labels
            with torch.autocast(device.type, dtype=amp, enabled=amp is not None):
                loss = F.cross_entropy(model(x), y)
            opt.zero_grad(set_to_none=True)
            if scaler:
                scaler.scale(loss).backward()
                scaler.step(opt)
                scaler.update()
            else:
                loss.backward()
                opt.step()
        dtype = {None: "fp32", torch.bfloat16: "bf16 autocast", torch.float16: "fp16 autocast"}[amp]
        return step, {"batch": batch, "dtype": dtype, **facts}
    if "arch" in JOBS[job]:
        import torchvision
        model = getattr(torchvision.models, JOBS[job]["arch"])().to(device)
        if s.get("checkpoint"):
            checkpoint_blocks(model, JOBS[job]["blocks"])
        batch, size = (JOBS[job]["batch"], 224) if not SMOKE else (2, 224)
        opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
        images = torch.randn(batch, 3, size, size, device=device)
        labels = torch.randint(0, 1000, (batch,), device=device)

        def step():
            with torch.autocast(device.type, dtype=amp, enabled=amp is not None):
                loss = F.cross_entropy(model(images), labels)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
        return step, {"batch": batch, "dtype": "bf16 autocast" if amp else "fp32"}
    if job == "gpt":
        batch, seq = s.get("batch", 8), s.get("seq", 512)
        vocab, hidden, layers = (50257, 768, 12) if not SMOKE else (1000, 64, 2)
        if SMOKE:
            batch, seq = batch // 4, seq // 16
        model = Transformer(vocab, hidden, layers, 12 if not SMOKE else 4, 1024, causal=True,
                            checkpoint=s.get("checkpoint", False)).to(device)
        opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
        facts = {}
        model = compiled(model, s, facts)  # after the optimizer took the parameters; they are the same
        tokens = torch.randint(0, vocab, (batch, seq), device=device)

        def step():
            with torch.autocast(device.type, dtype=amp, enabled=amp is not None):
                logits = model(tokens[:, :-1])
                loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]).float(), tokens[:, 1:].reshape(-1))
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
        return step, {"batch": batch, "seq": seq, "dtype": "bf16 autocast" if amp else "fp32", **facts}
    if job == "bert_small":
        batch, seq = (8, 128) if not SMOKE else (2, 16)
        vocab, hidden = (30522, 512) if not SMOKE else (1000, 64)
        model = Transformer(vocab, hidden, 4, 8, 512, causal=False).to(device).eval()
        tokens = torch.randint(0, vocab, (batch, seq), device=device)
        if not s.get("graph"):
            def step():
                with torch.no_grad():
                    model(tokens)
            return step, {"batch": batch, "seq": seq, "dtype": "fp32"}
        graph = torch.cuda.CUDAGraph()
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side), torch.no_grad():
            for _ in range(3):
                model(tokens)  # warm up on a side stream before capture, as PyTorch's docs do
        torch.cuda.current_stream().wait_stream(side)
        with torch.cuda.graph(graph), torch.no_grad():
            model(tokens)

        def step():
            graph.replay()
        return step, {"batch": batch, "seq": seq, "dtype": "fp32"}
    raise ValueError(f"unknown job {job}")


# ---- recording -----------------------------------------------------------------

def gpu_facts(device):
    if device.type != "cuda":
        return {"gpu": "cpu", "driver": None}
    try:
        driver = subprocess.run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                                capture_output=True, text=True, timeout=20).stdout.strip().splitlines()[0]
    except Exception:
        driver = None
    return {"gpu": torch.cuda.get_device_name(device), "driver": driver}


def timed_steps(step, device, after_each=None):
    """Run STEPS steps, each between two synchronizes; the last ACTIVE
    times in seconds.  after_each runs after each step (the profiler's
    step), outside the timing."""
    step_times = []
    for _ in range(STEPS):
        if device.type == "cuda":
            torch.cuda.synchronize()
        start = time.perf_counter()
        step()
        if device.type == "cuda":
            torch.cuda.synchronize()
        step_times.append(time.perf_counter() - start)
        if after_each:
            after_each()
    return [round(t, 6) for t in step_times[-ACTIVE:]]


def settle(job, variant, step, facts, device):
    """Run the unrecorded settling steps: the variant's "settle" if it has
    one (a compiled model compiles in them), else the job's.  Their time
    goes to the manifest, compilation included."""
    count = settings_of(job, variant).get("settle", JOBS[job].get("settle", 0))
    started = time.perf_counter()
    for _ in range(count):
        step()
    if device.type == "cuda":
        torch.cuda.synchronize()
    if count:
        facts["settle_steps"] = count
        facts["settle_seconds"] = round(time.perf_counter() - started, 1)


def time_unprofiled(job, variant, device):
    """The same steps without the profiler: what the job takes when nobody
    watches (the yardstick for reverie's --opt unprofiled)."""
    step, facts = build_step(job, variant, device)
    settle(job, variant, step, facts, device)
    facts.update({"file": None, "profiled": False, "step_seconds_measured": timed_steps(step, device)})
    return facts


def record(job, variant, out, device):
    step, facts = build_step(job, variant, device)
    settle(job, variant, step, facts, device)
    activities = [torch.profiler.ProfilerActivity.CPU]
    if device.type == "cuda":
        activities.append(torch.profiler.ProfilerActivity.CUDA)
    name = f"{job}_{variant}"
    raw = os.path.join(out, name + ".json")
    schedule = torch.profiler.schedule(wait=WAIT, warmup=WARMUP, active=ACTIVE, repeat=1)
    with torch.profiler.profile(activities=activities, schedule=schedule, record_shapes=True, profile_memory=True,
                                on_trace_ready=lambda p: p.export_chrome_trace(raw)) as prof:
        step_times = timed_steps(step, device, prof.step)
    with open(raw, "rb") as src, gzip.open(raw + ".gz", "wb", compresslevel=9) as dst:
        shutil.copyfileobj(src, dst)
    os.remove(raw)
    facts.update({"file": name + ".json.gz", "step_seconds_measured": step_times})
    return facts


def main():
    global SMOKE, ACTIVE, STEPS
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", help="folder for the traces and manifest.jsonl (made if missing)")
    parser.add_argument("--only", default="", help="JOB:VARIANT,... (default: every recording)")
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--list", action="store_true", help="list the jobs and variants, and stop")
    parser.add_argument("--no-profile", action="store_true",
                        help="time the same steps without the profiler; the manifest gets the step times, no trace")
    parser.add_argument("--active", type=int, default=ACTIVE,
                        help=f"steps recorded (or timed), after {WAIT} wait and {WARMUP} warm-up (default {ACTIVE})")
    parser.add_argument("--smoke", action="store_true", help="tiny shapes: try the script without a GPU (not ground truth)")
    args = parser.parse_args()
    wanted = [(j, v) for j in JOBS for v in JOBS[j]["variants"]]
    if args.list:
        for job, variant in wanted:
            print(f"{job}:{variant}  {JOBS[job]['variants'][variant][0]}  ({JOBS[job]['model']})")
        return 0
    if not args.out:
        parser.error("--out DIR is required")
    if args.only:
        chosen = [tuple(item.split(":", 1)) for item in args.only.split(",")]
        unknown = [c for c in chosen if c not in wanted]
        if unknown:
            parser.error(f"unknown recordings {unknown}; --list names them")
        wanted = chosen
    SMOKE = args.smoke
    if args.active < 1:
        parser.error("--active must be at least 1")
    ACTIVE, STEPS = args.active, WAIT + WARMUP + args.active
    os.makedirs(args.out, exist_ok=True)
    device = torch.device(args.device)
    torch.backends.cudnn.benchmark = True
    common = {"torch": torch.__version__, **gpu_facts(device), "smoke": SMOKE,
              "schedule": {"wait": WAIT, "warmup": WARMUP, "active": ACTIVE}}
    failed = 0
    for job, variant in wanted:
        entry = {"job": job, "variant": variant, "knob": JOBS[job]["variants"][variant][0],
                 "model": JOBS[job]["model"], **common,
                 "command": f"python3 traces/record.py --out DIR --only {job}:{variant}"
                            + (f" --active {ACTIVE}" if ACTIVE != 5 else "")
                            + (" --no-profile" if args.no_profile else "")}
        started = time.time()
        try:
            torch.manual_seed(0)
            entry.update(time_unprofiled(job, variant, device) if args.no_profile
                         else record(job, variant, args.out, device))
        except Exception as error:  # one failure must not lose the other recordings
            failed += 1
            entry["error"] = "".join(traceback.format_exception_only(type(error), error)).strip()
            traceback.print_exc()
        entry["recorded_in_seconds"] = round(time.time() - started, 1)
        if device.type == "cuda":
            torch.cuda.empty_cache()
        with open(os.path.join(args.out, "manifest.jsonl"), "a") as manifest:
            manifest.write(json.dumps(entry) + "\n")
        outcome = entry.get("error") or entry.get("file") or "timed without the profiler"
        print(f"{job}:{variant}: {outcome} ({entry['recorded_in_seconds']} s)", flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
