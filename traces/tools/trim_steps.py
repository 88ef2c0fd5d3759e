#!/usr/bin/env python3
"""Keep the first N ProfilerSteps of a Kineto trace (how a shipped trace was
made smaller; see traces/PROVENANCE.md).

Every event that starts before the (N+1)-th step's annotation is kept, with
its fields unchanged, and so is every GPU event (and launch flow) whose
launch call is kept, even if it ran after the cut: a step ends when the GPU
work it launched ends.  Metadata without a time (deviceProperties,
distributedInfo, process names) is kept too.  The output is gzipped at
level 9 without a timestamp in its header, so the same input gives the same
bytes.

Usage: trim_steps.py INPUT.json.gz OUTPUT.json.gz N
"""
import gzip
import json
import sys

GPU = {'kernel', 'Kernel', 'gpu_memcpy', 'Memcpy', 'gpu_memset', 'Memset'}
RUNTIME = {'cuda_runtime', 'cuda_driver', 'Runtime'}
FLOWS = {'ac2g', 'async'}


def correlation(event):
    args = event.get('args') or {}
    return args.get('correlation')


def kept(event, cut, launched):
    if 'ts' not in event or event['ts'] < cut:
        return True
    if event.get('cat') in GPU:
        return correlation(event) in launched
    return event.get('cat') in FLOWS and event.get('id') in launched


def main():
    source, destination, keep = sys.argv[1], sys.argv[2], int(sys.argv[3])
    with gzip.open(source, 'rt') as f:
        document = json.load(f)
    events = document['traceEvents']
    steps = sorted((e for e in events if e.get('ph') == 'X'
                    and str(e.get('name', '')).startswith('ProfilerStep#')
                    and not str(e.get('cat', '')).startswith('gpu_')), key=lambda e: e['ts'])
    if len(steps) <= keep:
        sys.exit(f'{source}: only {len(steps)} steps, nothing to trim')
    cut = steps[keep]['ts']
    launched = {correlation(e) for e in events if e.get('cat') in RUNTIME and e.get('ts', cut) < cut}
    launched.discard(None)
    document['traceEvents'] = [e for e in events if kept(e, cut, launched)]
    with open(destination, 'wb') as raw, gzip.GzipFile(fileobj=raw, mode='wb', compresslevel=9, mtime=0) as f:
        f.write(json.dumps(document, separators=(',', ':')).encode())
    print(f'{len(events)} -> {len(document["traceEvents"])} events')


main()
