#!/usr/bin/env python3
"""Reader for maskd dataset shards (format: engine/data/shards.h), written from the format's
documentation alone, so it checks the C writer independently and lets the PyTorch
reference training read the very same samples.

    python3 scripts/shards.py DIR_OR_MANIFEST_OR_SHARD     # verify and print a summary

As a module: read_shard(path) -> (header dict, uint32 array [n, seq_len]);
read_set(path) -> (manifest dict or None, uint32 array [N, seq_len]) in shard order.
Any damage raises ValueError naming the file.
"""
import json
import os
import re
import struct
import sys

import numpy as np

MAGIC = b"MASKDSHD"
HEADER = struct.Struct("<8sIIIIQIIQQQ")  # 64 bytes, fields as documented
NAME = re.compile(r"^(?P<split>.+)-(?P<index>\d{1,9})-samples-(?P<count>\d+)\.shard$")


def fnv1a64(data, h=0xCBF29CE484222325):
    """FNV-1a 64 of the bytes, continued from h (a plain loop: the hash is sequential)."""
    for b in data:
        h = ((h ^ b) * 0x100000001B3) & 0xFFFFFFFFFFFFFFFF
    return h


def read_shard(path, check_checksum=True):
    with open(path, "rb") as f:
        raw = f.read()
    if len(raw) < 8 or raw[:8] != MAGIC:
        raise ValueError(f"{path}: not a maskd shard (bad magic)")
    if len(raw) < HEADER.size:
        raise ValueError(f"{path}: truncated shard header")
    (magic, version, header_size, seq_len, width, n, vocab, reserved1, checksum, reserved2, hsum) = HEADER.unpack_from(raw)
    if version != 1:
        raise ValueError(f"{path}: version {version}")
    if fnv1a64(raw[:56]) != hsum:
        raise ValueError(f"{path}: header checksum mismatch")
    if header_size != 64 or seq_len == 0 or width != (2 if vocab <= 65536 else 4):
        raise ValueError(f"{path}: inconsistent header")
    if len(raw) != 64 + n * seq_len * width:
        raise ValueError(f"{path}: size {len(raw)} != {64 + n * seq_len * width}")
    m = NAME.match(os.path.basename(path))
    if not m or int(m.group("count")) != n:
        raise ValueError(f"{path}: name does not carry the sample count {n}")
    data = raw[64:]
    if check_checksum and fnv1a64(data) != checksum:
        raise ValueError(f"{path}: data checksum mismatch")
    ids = np.frombuffer(data, dtype="<u2" if width == 2 else "<u4").astype(np.uint32).reshape(n, seq_len)
    if ids.size and int(ids.max()) >= vocab:
        raise ValueError(f"{path}: id {int(ids.max())} >= vocab {vocab}")
    header = dict(version=version, header_size=header_size, seq_len=seq_len, token_width=width,
                  n_samples=n, vocab_size=vocab, checksum=checksum)
    return header, ids


def read_set(path, check_checksum=True):
    manifest = None
    if os.path.isdir(path) and os.path.exists(os.path.join(path, "manifest.json")):
        path = os.path.join(path, "manifest.json")
    if os.path.isdir(path):
        names = sorted(n for n in os.listdir(path) if n.endswith(".shard"))
        files = [os.path.join(path, n) for n in names]
    elif path.endswith(".json"):
        with open(path) as f:
            manifest = json.load(f)
        if manifest.get("format") != "maskd-shards" or manifest.get("version") != 1:
            raise ValueError(f"{path}: not a maskd shard manifest")
        d = os.path.dirname(path)
        files = [os.path.join(d, s["file"]) for s in manifest["shards"]]
    else:
        files = [path]
    parts = []
    for i, fpath in enumerate(files):
        h, ids = read_shard(fpath, check_checksum)
        if manifest is not None:
            entry = manifest["shards"][i]
            if entry["samples"] != h["n_samples"] or int(entry["checksum"], 16) != h["checksum"]:
                raise ValueError(f"{fpath}: differs from the manifest")
            if h["seq_len"] != manifest["seq_len"] or h["vocab_size"] != manifest["vocab_size"]:
                raise ValueError(f"{fpath}: seq_len/vocab differ from the manifest")
        parts.append(ids)
    ids = np.concatenate(parts) if parts else np.zeros((0, 0), np.uint32)
    if manifest is not None and manifest["total_samples"] != len(ids):
        raise ValueError(f"{path}: total_samples {manifest['total_samples']} != {len(ids)}")
    return manifest, ids


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    try:
        manifest, ids = read_set(sys.argv[1])
    except (ValueError, OSError) as e:
        sys.exit(f"shards.py: {e}")
    print(f"{sys.argv[1]}: {ids.shape[0]} samples x {ids.shape[1] if ids.ndim == 2 else 0} tokens, ok")
