#!/usr/bin/env python3
"""dataloader_threads.py - measure the dataloader plugin's worker_slowdown on this host.

A DataLoader worker runs with one intra-op thread (PyTorch's worker loop
calls torch.set_num_threads(1)); a training process that loads its own
batches (num_workers=0) runs the transform's larger operators on all of
its threads.  So a batch can take a worker longer than the num_workers=0
trace shows, and that trace cannot say by how much.  This script measures
it for a dataset, three ways:

  main      batches loaded in this process with its default threads (what a
            num_workers=0 recording shows);
  1 thread  the same with torch.set_num_threads(1) (one worker's batch
            alone);
  workers   a DataLoader with N workers drained by a loop that does nothing
            else: N x the time between batches is what each worker took per
            batch with the others beside it.

worker_slowdown = workers / main (give it as dataloader:worker_slowdown=X).

The dataset is traces/record.py's CPU-heavy images by default, or yours:
--dataset MODULE:FACTORY imports MODULE (from the current directory or
PYTHONPATH) and calls FACTORY() for a map-style Dataset.

Needs PyTorch (Debian: python3-torch); it is not part of the test suite.
  python3 tests/bench/dataloader_threads.py [--dataset MODULE:FACTORY] [--batch 64] [--workers 4] [--json]
"""
import argparse
import importlib
import json
import os
import statistics
import sys
import time


def default_dataset():
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "traces"))
    from record import CpuHeavyImages
    return CpuHeavyImages()


def dataset_from(spec):
    if not spec:
        return default_dataset()
    module, _, factory = spec.partition(":")
    if not factory:
        sys.exit(f"dataloader_threads.py: --dataset wants MODULE:FACTORY, not '{spec}'")
    sys.path.insert(0, os.getcwd())
    return getattr(importlib.import_module(module), factory)()


def per_batch_in_process(torch, dataset, batch, batches, threads):
    """Median seconds per batch loaded in this process with `threads`."""
    before = torch.get_num_threads()
    torch.set_num_threads(threads)
    loader = iter(torch.utils.data.DataLoader(dataset, batch_size=batch, num_workers=0))
    next(loader)  # warm-up
    times = []
    for _ in range(batches):
        start = time.perf_counter()
        next(loader)
        times.append(time.perf_counter() - start)
    torch.set_num_threads(before)
    return statistics.median(times)


def per_batch_on_workers(torch, dataset, batch, batches, workers):
    """Seconds each worker took per batch: workers x the mean interval
    between batches once the first round (started together) is in."""
    loader = iter(torch.utils.data.DataLoader(dataset, batch_size=batch, num_workers=workers, prefetch_factor=2))
    for _ in range(workers):
        next(loader)  # the first round, and the workers' start-up
    start = time.perf_counter()
    for _ in range(batches):
        next(loader)
    return workers * (time.perf_counter() - start) / batches


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--dataset", default="", help="MODULE:FACTORY returning a map-style Dataset (default: record.py's)")
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--batches", type=int, default=12, help="batches timed each way")
    parser.add_argument("--workers", type=int, default=4)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    try:
        import torch
        import torch.utils.data
    except ImportError:
        sys.exit("dataloader_threads.py: needs PyTorch (apt-get install python3-torch)")
    dataset = dataset_from(args.dataset)
    threads = torch.get_num_threads()
    main_s = per_batch_in_process(torch, dataset, args.batch, args.batches, threads)
    single_s = per_batch_in_process(torch, dataset, args.batch, args.batches, 1)
    # a multiple of the workers, so that every worker delivers as often
    workers_s = per_batch_on_workers(torch, dataset, args.batch, args.batches * args.workers, args.workers)
    result = {"torch": torch.__version__, "cpus": os.cpu_count(), "threads": threads, "batch": args.batch,
              "workers": args.workers, "main_ms": main_s * 1e3, "one_thread_ms": single_s * 1e3,
              "worker_ms": workers_s * 1e3, "worker_slowdown": workers_s / main_s}
    if args.json:
        print(json.dumps(result))
        return
    print(f"torch {result['torch']}, {result['cpus']} CPUs: a batch of {args.batch} takes "
          f"{result['main_ms']:.1f} ms in this process ({threads} intra-op threads), {result['one_thread_ms']:.1f} ms on "
          f"one thread, {result['worker_ms']:.1f} ms on each of {args.workers} workers: "
          f"worker_slowdown={result['worker_slowdown']:.2f}")


if __name__ == "__main__":
    main()
