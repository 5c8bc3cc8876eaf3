#!/usr/bin/env python3
"""Summarizes `photon bench --json` output (a file, or stdin with --line for one line).

Usage: summary.py FILE        every figure, a line each
       summary.py --line      read stdin; single stream and batched ms in one line (ab.sh)
"""
import json
import sys


def load(text):
    return json.loads(text[text.index("{"):])


def one_line(j):
    s = j.get("single_stream", {})
    b = " ".join("B%d %.4f ms %.0f tok/s" % (x["batch"], x["ms_per_step"], x["decode_tok_s"])
                 for x in j.get("batched", []))
    screen = " rescored %.1f" % s["screen_rescored_ids_per_step"] if s.get("screened_steps", 0) > 0 else ""
    return "single %.1f tok/s %.4f ms%s | %s" % (s.get("decode_tok_s", 0), s.get("ms_per_token", 0), screen, b)


def full(j):
    s = j.get("single_stream", {})
    print("copy GB/s %.0f peak GiB %.2f" % (j.get("copy_bandwidth_GBps", 0), j.get("peak_device_memory_GiB", 0)))
    print("single %.1f tok/s %.4f ms %.0f GB/s" % (s.get("decode_tok_s", 0), s.get("ms_per_token", 0),
                                                   s.get("achieved_GBps", 0)))
    if s.get("screened_steps", 0) > 0:
        print("screened steps %d, rescored ids per step %.1f" % (s["screened_steps"], s["screen_rescored_ids_per_step"]))
    for x in j.get("ttft", []):
        print("ttft %d: %.3f ms %.0f tok/s" % (x["prompt"], x["ttft_ms"], x["prefill_tok_s"]))
    for x in j.get("batched", []):
        print("B%d %dx%d: %.0f tok/s %.4f ms/step" % (x["batch"], x["prompt"], x["generated"], x["decode_tok_s"],
                                                      x["ms_per_step"]))
    for x in j.get("engine", []):
        print("engine B%d %dx%d: decode %.0f tok/s, output %.0f tok/s, %.4f ms/step, ttft p50 %.2f ms" % (
            x["batch"], x["prompt"], x["generated"], x["decode_tok_s"], x["output_tok_s"],
            x["ms_per_decode_step"], x["ttft_ms_p50"]))


if __name__ == "__main__":
    try:
        if len(sys.argv) > 1 and sys.argv[1] == "--line":
            print(one_line(load(sys.stdin.read())))
        else:
            full(load(open(sys.argv[1]).read()))
    except (ValueError, KeyError, IndexError) as e:
        print("summary: no bench JSON (%s)" % e)
