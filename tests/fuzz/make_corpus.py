#!/usr/bin/env python3
"""Writes the seed corpus of the fuzz targets (tests/fuzz/corpus/<target>/).

Run once from the repository root after configuring a build folder (the
tokenizer seeds are cut from the unpacked test tokenizers):
    python3 tests/fuzz/make_corpus.py [BUILD_DIR]
The output is committed; rerunning it rewrites the same files. Seeds are
small on purpose: a fuzzer mutates them many times per second.
"""
import json
import os
import shutil
import struct
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BUILD = sys.argv[1] if len(sys.argv) > 1 else os.path.join(ROOT, "build")
OUT = os.path.join(ROOT, "tests", "fuzz", "corpus")


def target_dir(name):
    d = os.path.join(OUT, name)
    shutil.rmtree(d, ignore_errors=True)
    os.makedirs(d)
    return d


def write(path, data):
    with open(path, "wb") as f:
        f.write(data if isinstance(data, bytes) else data.encode("utf-8"))


# ---- safetensors: valid images of every dtype and shape kind, and a few broken ones
def safetensors_image(tensors, metadata=None, pad_to=8):
    header, data = {}, b""
    if metadata is not None:
        header["__metadata__"] = metadata
    for name, dtype, shape, payload in tensors:
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [len(data), len(data) + len(payload)]}
        data += payload
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * ((-len(h)) % pad_to)
    return struct.pack("<Q", len(h)) + h + data


def safetensors_corpus():
    d = target_dir("safetensors")
    f32 = struct.pack("<6f", 0.5, -1.0, 2.0, 3.5, -0.25, 1e-3)
    bf16 = bytes([0x80, 0x3F, 0x00, 0xC0, 0x40, 0x40, 0x00, 0x00])
    write(f"{d}/mixed_dtypes.safetensors", safetensors_image(
        [("model.embed_tokens.weight", "F32", [2, 3], f32), ("model.norm.weight", "BF16", [4], bf16),
         ("ids", "I32", [2], struct.pack("<2i", 7, -1)), ("q", "I8", [3], bytes([1, 255, 127])),
         ("h", "F16", [1], bytes([0x00, 0x3C]))], metadata={"format": "pt"}))
    write(f"{d}/scalar_and_empty.safetensors", safetensors_image(
        [("scalar", "F32", [], struct.pack("<f", 4.0)), ("empty", "BF16", [0, 16], b""),
         ("row", "F32", [1, 2], struct.pack("<2f", 1, 2))]))
    write(f"{d}/empty_header.safetensors", safetensors_image([]))
    write(f"{d}/only_metadata.safetensors", safetensors_image([], metadata={"a": "b"}))
    good = safetensors_image([("w", "F32", [2, 2], struct.pack("<4f", 1, 2, 3, 4))])
    write(f"{d}/truncated_data.safetensors", good[:-3])
    write(f"{d}/header_too_long.safetensors", struct.pack("<Q", 1 << 40) + good[8:])
    overlap = {"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]},
               "b": {"dtype": "F32", "shape": [2], "data_offsets": [4, 12]}}
    h = json.dumps(overlap).encode()
    write(f"{d}/overlapping.safetensors", struct.pack("<Q", len(h)) + h + bytes(12))


# ---- config.json: the committed configs (released models, goldens, stories260K) and a v5 form
def model_config_corpus():
    d = target_dir("model_config")
    srcs = [os.path.join(ROOT, "tests/data/configs", f) for f in sorted(os.listdir(os.path.join(ROOT, "tests/data/configs")))
            if f.endswith(".json")]
    srcs += [os.path.join(ROOT, "tests/data/golden", m, "config.json") for m in ("llama3-tiny", "qwen3-tiny")]
    srcs += [os.path.join(ROOT, "models/stories260K/config.json")]
    for s in srcs:
        name = os.path.basename(s) if not s.endswith("/config.json") else os.path.basename(os.path.dirname(s)) + ".json"
        cfg = json.load(open(s))
        write(f"{d}/{name}", json.dumps(cfg, separators=(",", ":")))
    v5 = json.load(open(os.path.join(ROOT, "tests/data/golden/llama3-tiny/config.json")))
    scaling = v5.pop("rope_scaling")
    theta = v5.pop("rope_theta")
    v5["rope_parameters"] = dict(scaling, rope_theta=theta)
    write(f"{d}/llama3-tiny-v5.json", json.dumps(v5, separators=(",", ":")))


# ---- tokenizer.json: the test tokenizers cut down to their byte alphabet, the first merges
#      whose parts exist, and the chat special tokens (renumbered after the vocabulary)
def small_tokenizer(name, merges_kept=300, specials=None):
    src = json.load(open(os.path.join(BUILD, "test-data/tokenizers", name, "tokenizer.json")))
    vocab_in = src["model"]["vocab"]
    by_id = sorted(vocab_in.items(), key=lambda kv: kv[1])
    vocab = {tok: i for i, (tok, _) in enumerate(by_id[:256])}  # the 256 byte tokens come first in both
    merges = []
    for m in src["model"]["merges"]:
        a, b = m.split(" ") if isinstance(m, str) else m
        if a in vocab and b in vocab and (a + b) in vocab_in:
            if a + b not in vocab:
                vocab[a + b] = len(vocab)
            merges.append(m)
            if len(merges) == merges_kept:
                break
    added, remap = [], {}
    for t in src["added_tokens"]:
        if t["content"] in specials:
            remap[t["id"]] = len(vocab) + len(added)
            added.append(dict(t, id=remap[t["id"]]))
    out = dict(src)
    out["model"] = dict(src["model"], vocab=vocab, merges=merges)
    out["added_tokens"] = added
    pp = json.dumps(src["post_processor"])
    for old, new in remap.items():
        pp = pp.replace(f"[{old}]", f"[{new}]")
    out["post_processor"] = json.loads(pp)
    return json.dumps(out, ensure_ascii=False, separators=(",", ":"))


LLAMA3_SPECIALS = ["<|begin_of_text|>", "<|end_of_text|>", "<|start_header_id|>", "<|end_header_id|>",
                   "<|eot_id|>", "<|eom_id|>", "<|python_tag|>", "<|finetune_right_pad_id|>"]
QWEN3_SPECIALS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>", "<think>", "</think>", "<tool_call>",
                  "</tool_call>"]


def tokenizer_corpus():
    d = target_dir("tokenizer_json")
    write(f"{d}/llama3_small.json", small_tokenizer("llama3", specials=LLAMA3_SPECIALS))
    write(f"{d}/qwen3_small.json", small_tokenizer("qwen3", specials=QWEN3_SPECIALS))
    # one id far past the others (refused: ids must be dense)
    sparse = json.loads(small_tokenizer("llama3", specials=LLAMA3_SPECIALS))
    sparse["model"]["vocab"][list(sparse["model"]["vocab"])[300]] = 1000000000
    write(f"{d}/llama3_sparse_id.json", json.dumps(sparse, ensure_ascii=False, separators=(",", ":")))


# ---- tokenizer settings: tokenizer_config.json \0 generation_config.json \0 chat_template.jinja
#      (the fuzz target loads them beside corpus/tokenizer_json/llama3_small.json)
def settings_corpus():
    d = target_dir("tokenizer_settings")
    for name in ("llama3", "qwen3"):
        cfg = json.load(open(os.path.join(ROOT, "tests/data/tokenizers", name, "tokenizer_config.json")))
        cfg.pop("added_tokens_decoder", None)
        template = cfg.get("chat_template", "")
        # token names of the base tokenizer (llama3_small), so that the seeds load
        cfg["bos_token"] = "<|begin_of_text|>" if name == "llama3" else None
        cfg["eos_token"] = "<|eot_id|>"
        write(f"{d}/{name}_config.bin", json.dumps(cfg, separators=(",", ":")))
        gen = {"bos_token_id": 262, "eos_token_id": [263, 266], "pad_token_id": 263}
        cfg_no_template = dict(cfg)
        cfg_no_template.pop("chat_template", None)
        write(f"{d}/{name}_jinja.bin", json.dumps(cfg_no_template) + "\0" + json.dumps(gen) + "\0" + template)
    write(f"{d}/template_list.bin", json.dumps(
        {"eos_token": "<|eot_id|>", "add_bos_token": True,
         "chat_template": [{"name": "default", "template": "{{ messages }}"}, {"name": "tool_use", "template": "x"}]}))
    write(f"{d}/generation_only.bin", "{}\0" + json.dumps({"eos_token_id": 263}))


# ---- photon batch request lines
def batch_request_corpus():
    d = target_dir("batch_request")
    lines = [
        {"id": "a", "tokens": [1, 2, 3], "max_tokens": 8},
        {"id": 7, "prompt": "Once upon a time", "temperature": 0.8, "top_k": 40, "top_p": 0.9, "min_p": 0.05,
         "seed": 1234, "stop": ["\n\n", "The end"], "logprobs": 2},
        {"messages": [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"}],
         "repetition_penalty": 1.1, "presence_penalty": 0.5, "frequency_penalty": -0.5, "ignore_eos": True,
         "stop_token_ids": [2, 128009], "stop": "x"},
        {"id": None, "tokens": [], "max_tokens": 0},
        {"id": {"nested": [1, 2.5, "s"]}, "prompt": "caf\u00e9 \U0001F600"},
    ]
    for i, l in enumerate(lines):
        write(f"{d}/line{i}.json", json.dumps(l, ensure_ascii=(i != 4)))


# ---- photon-server request bodies: a first byte ("0" completions, "1" chat) then the JSON body
def server_request_corpus():
    d = target_dir("server_request")
    bodies = [
        ("0", {"model": "m", "prompt": "Once upon a time", "max_tokens": 8, "temperature": 0.7, "top_p": 0.9,
               "top_k": 40, "min_p": 0.05, "seed": 3, "stop": ["\n"], "logprobs": 2, "stream": True,
               "stream_options": {"include_usage": True}}),
        ("0", {"prompt": [1, 403, 407], "max_tokens": 4, "ignore_eos": True, "stop_token_ids": [2],
               "repetition_penalty": 1.2, "presence_penalty": 0.5, "frequency_penalty": -0.5,
               "return_token_ids": True, "n": 1, "best_of": 1, "echo": False, "suffix": ""}),
        ("0", {"prompt": [[5, 6, 7]], "logit_bias": {}, "skip_special_tokens": False}),
        ("1", {"messages": [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"}],
               "max_completion_tokens": 16, "logprobs": True, "top_logprobs": 3, "add_generation_prompt": True,
               "chat_template_kwargs": {"enable_thinking": False, "date_string": "26 Jul 2024"},
               "response_format": {"type": "text"}, "tools": []}),
        ("1", {"messages": [{"role": "user", "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]},
                            {"role": "assistant", "content": None, "reasoning_content": "why"},
                            {"role": "user", "content": "caf\u00e9"}], "stream": False}),
    ]
    for i, (kind, body) in enumerate(bodies):
        write(f"{d}/body{i}.bin", kind + json.dumps(body))


if __name__ == "__main__":
    safetensors_corpus()
    model_config_corpus()
    tokenizer_corpus()
    settings_corpus()
    batch_request_corpus()
    server_request_corpus()
    print("corpus written to", OUT)
