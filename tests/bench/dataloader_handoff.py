#!/usr/bin/env python3
"""dataloader_handoff.py - measure a DataLoader's hand-off on this host.

The `dataloader` plugin keeps, in the training process, a hand-off per batch
when the loading moves to worker processes: taking the batch from the
workers' queue and rebuilding its tensors out of shared memory.  A trace
recorded with num_workers=0 cannot show that cost, so the plugin's default
comes from this measurement (docs/optimizations.md, "dataloader"), not from
the recording it is judged against.

What it does: a DataLoader with N workers over a dataset whose items are
ready-made image tensors (3 x 224 x 224 float32, the ImageNet-sized
transform's output; batch 32 by default, 18.4 MiB a batch), so that the
workers are always ahead; the training loop sleeps between batches (a
stand-in for the step) and times next(iterator), which then only takes a
ready batch from the queue.  Prints the median, the 10th and 90th
percentiles in microseconds, and a JSON line with --json.

Needs PyTorch (Debian: python3-torch); it is not part of the test suite.
  python3 tests/bench/dataloader_handoff.py [--workers 4] [--batch 32] [--batches 60]
"""
import argparse
import json
import statistics
import sys
import time


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--workers", type=int, default=4)
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--batches", type=int, default=60, help="batches timed (after 5 of warm-up)")
    parser.add_argument("--step", type=float, default=0.25, help="seconds the loop sleeps between batches")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    try:
        import torch
        from torch.utils.data import DataLoader, Dataset
    except ImportError:
        sys.exit("dataloader_handoff.py: needs PyTorch (apt-get install python3-torch)")

    image = torch.rand(3, 224, 224)

    class Images(Dataset):
        def __len__(self):
            return args.batch * (args.batches + 5)

        def __getitem__(self, index):
            return image.clone(), index % 1000

    loader = DataLoader(Images(), batch_size=args.batch, num_workers=args.workers, prefetch_factor=2)
    iterator = iter(loader)
    times_us = []
    for i in range(args.batches + 5):
        time.sleep(args.step)  # the step: the workers fill the queue meanwhile
        start = time.perf_counter()
        images, labels = next(iterator)
        elapsed = time.perf_counter() - start
        if i >= 5:
            times_us.append(elapsed * 1e6)
        del images, labels
    times_us.sort()
    decile = lambda q: times_us[min(len(times_us) - 1, int(q * len(times_us)))]
    result = {"torch": torch.__version__, "workers": args.workers, "batch": args.batch,
              "batch_bytes": args.batch * image.numel() * image.element_size(),
              "median_us": statistics.median(times_us), "p10_us": decile(0.1), "p90_us": decile(0.9),
              "batches": len(times_us)}
    if args.json:
        print(json.dumps(result))
    else:
        print(f"torch {result['torch']}: {args.workers} workers, batches of {args.batch} "
              f"({result['batch_bytes'] / 2**20:.1f} MiB): next() takes {result['median_us']:.0f} us "
              f"(p10 {result['p10_us']:.0f} us, p90 {result['p90_us']:.0f} us) over {len(times_us)} batches")


if __name__ == "__main__":
    main()
