#!/usr/bin/env python3
"""Reads the step trace that a PHOTON_CUDA_STEP_TRACE build writes (src/cuda/step_trace.hpp) and
prints where a decode step's time goes, kernel by kernel, as medians over the traced steps.

Per launch i of a step (in launch order, by grid id):
  added    = end_i - end_{i-1}: what the launch adds to the step (the first: end - its start);
  boundary = first pdl_wait() return_i - end_{i-1}: from the previous launch's last warp exit to this
             launch's release (the dependency's resolution);
  stream   = end_i - first pdl_wait() return_i: from its release to its last warp's exit;
  early    = end_{i-1} - start_i: how long its first block was resident before the previous ended;
  GB/s     = the weight bytes of a matrix product over `added`.
Usage: step_trace_report.py TRACE [--rows R] [--skip N] [--per-launch]
"""
import argparse
import collections
import statistics
import sys

KINDS = {1: "gemv", 2: "gemv_skinny", 3: "attention", 4: "sampler", 5: "embedding", 6: "rmsnorm",
         7: "rope_qkv", 8: "silu_mul", 9: "gather_rows"}


def decode(tag):
    return tag >> 56, (tag >> 48) & 0xFF, (tag >> 24) & 0xFFFFFF, tag & 0xFFFFFF


def label(tag):
    kind, flags, a, b = decode(tag)
    name = KINDS.get(kind, f"kind{kind}")
    if kind in (1, 2):
        mode = ["plain", "add", "silu"][flags & 3]
        extra = ("+rope" if flags & 32 else "")
        return f"{name} {mode}{extra} N={a} K={b}"
    return f"{name} {a} {b}"


def weight_bytes(tag):
    kind, flags, a, b = decode(tag)
    if kind not in (1, 2):
        return 0
    return (2 if (flags & 3) == 2 else 1) * a * b * 2


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("trace")
    ap.add_argument("--rows", type=int, default=1, help="only steps of this many sequences")
    ap.add_argument("--skip", type=int, default=2, help="steps to drop at the start of each run of steps")
    ap.add_argument("--per-launch", action="store_true", help="print every launch of the median step's layout")
    args = ap.parse_args()

    steps = collections.OrderedDict()
    for line in open(args.trace):
        if line.startswith("#") or not line.strip():
            continue
        f = line.split()
        step, rows = int(f[0]), int(f[1])
        if rows != args.rows:
            continue
        gmin, gmax, tag, blocks, start, w0, w1, end = map(int, f[2:10])
        marks = list(map(int, f[10:]))  # (first, last) per mark; 0 0: not reached
        steps.setdefault(step, []).append(dict(gmin=gmin, gmax=gmax, tag=tag, blocks=blocks, start=start,
                                               w0=w0, w1=w1, end=end, marks=marks))
    if not steps:
        sys.exit("no traced steps of %d rows" % args.rows)
    collisions = sum(1 for ls in steps.values() for l in ls if l["gmin"] != l["gmax"])
    # Group steps by their launch layout (the tags in launch order); report the most common layout.
    layouts = collections.Counter()
    ordered = {}
    for s, ls in steps.items():
        ls.sort(key=lambda l: l["gmin"])
        key = tuple(l["tag"] for l in ls)
        layouts[key] += 1
        ordered[s] = ls
    layout, count = layouts.most_common(1)[0]
    chosen = [ls for s, ls in ordered.items() if tuple(l["tag"] for l in ls) == layout][args.skip:]
    print(f"{len(steps)} traced steps of {args.rows} rows, {len(layouts)} layouts; "
          f"the most common has {len(layout)} launches, {len(chosen)} steps used; slot collisions: {collisions}")
    n = len(layout)
    cols = collections.defaultdict(lambda: [[] for _ in range(n)])
    spans = []
    for ls in chosen:
        spans.append(ls[-1]["end"] - ls[0]["start"])
        for i, l in enumerate(ls):
            prev_end = ls[i - 1]["end"] if i > 0 else l["start"]
            cols["added"][i].append(l["end"] - prev_end)
            cols["boundary"][i].append((l["w0"] - prev_end) if (i > 0 and l["w0"]) else 0)
            cols["stream"][i].append(l["end"] - l["w0"] if l["w0"] else l["end"] - l["start"])
            cols["early"][i].append(prev_end - l["start"] if i > 0 else 0)
            for k in range(len(l["marks"]) // 2):
                first, last = l["marks"][2 * k], l["marks"][2 * k + 1]
                cols[f"m{k}f"][i].append(first - l["w0"] if first and l["w0"] else float("nan"))
                cols[f"m{k}l"][i].append(last - l["w0"] if last and l["w0"] else float("nan"))
    med = {k: [statistics.median(v[i]) / 1000.0 for i in range(n)] for k, v in cols.items()}
    nmarks = len([k for k in cols if k.endswith("f")])
    print(f"step span (first start to last end): median {statistics.median(spans) / 1000.0:.1f} us")

    # Per kernel class: launches, summed medians.
    classes = collections.OrderedDict()
    for i, tag in enumerate(layout):
        c = classes.setdefault(label(tag), dict(n=0, added=0.0, boundary=0.0, stream=0.0, bytes=0))
        c["n"] += 1
        for k in ("added", "boundary", "stream"):
            c[k] += med[k][i]
        c["bytes"] += weight_bytes(tag)
    print(f"{'kernel':44s} {'n':>3s} {'added us':>9s} {'per':>6s} {'bound.':>6s} {'stream':>7s} {'TB/s':>6s}")
    tot = dict(added=0.0, boundary=0.0)
    for name, c in classes.items():
        tbs = c["bytes"] / (c["added"] * 1e-6) / 1e12 if c["bytes"] and c["added"] > 0 else 0
        print(f"{name:44s} {c['n']:3d} {c['added']:9.1f} {c['added'] / c['n']:6.2f} {c['boundary'] / c['n']:6.2f} "
              f"{c['stream'] / c['n']:7.2f} {tbs:6.2f}")
        tot["added"] += c["added"]
        tot["boundary"] += c["boundary"]
    print(f"{'sum':44s} {n:3d} {tot['added']:9.1f}        {tot['boundary']:6.1f} (boundaries summed)")
    if args.per_launch:
        hdr = "".join(f" {'m%d first/last' % k:>15s}" for k in range(nmarks))
        print(f"{'#':>3s} {'kernel':44s} {'blocks':>6s} {'early':>6s} {'bound.':>6s} {'stream':>7s} {'added':>6s}{hdr}"
              "  (marks: us after the release)")
        for i, tag in enumerate(layout):
            mk = "".join(f" {med['m%df' % k][i]:7.2f}/{med['m%dl' % k][i]:7.2f}" for k in range(nmarks))
            print(f"{i:3d} {label(tag):44s} {chosen[0][i]['blocks']:6d} {med['early'][i]:6.2f} "
                  f"{med['boundary'][i]:6.2f} {med['stream'][i]:7.2f} {med['added'][i]:6.2f}{mk}")


if __name__ == "__main__":
    main()
