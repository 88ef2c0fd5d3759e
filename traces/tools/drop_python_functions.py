#!/usr/bin/env python3
"""Drop the python_function events of a Kineto trace (how a shipped trace
was made smaller; see traces/PROVENANCE.md).

PyTorch's with_stack/Python tracer records every Python call as a
python_function event: in the TraceLens recordings they are 85% of the
events and of the bytes.  reverie reads them only for nn.Module layer tags;
steps, operators (cpu_op and their Input Dims), runtime calls, kernels,
copies, flows and metadata are kept with their fields unchanged, in file
order.  The output is gzipped at level 9 without a timestamp in its
header, so the same input gives the same bytes.

Usage: drop_python_functions.py INPUT.json.gz OUTPUT.json.gz
"""
import gzip
import json
import sys


def main():
    source, destination = sys.argv[1], sys.argv[2]
    with gzip.open(source, 'rt') as f:
        document = json.load(f)
    events = document['traceEvents']
    document['traceEvents'] = [e for e in events if e.get('cat') != 'python_function']
    text = json.dumps(document, separators=(',', ':'))
    with open(destination, 'wb') as raw:
        with gzip.GzipFile(fileobj=raw, mode='wb', compresslevel=9, mtime=0) as out:
            out.write(text.encode('utf-8'))
    print(f'{source}: kept {len(document["traceEvents"])} of {len(events)} events')


main()
