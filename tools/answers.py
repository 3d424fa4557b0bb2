#!/usr/bin/env python3
"""make answers: what a user reads. Free-running greedy answers of SmolLM2-135M-Instruct to the
prompts shipped in docs/data/answers-prompts.txt, per weight format on the engines (golden
backend = the RTL's bits), against a float64 pass and against llama.cpp on the same GGUF.

Each prompt is asked with the model's chat template and default system message, greedy, up to
``--tokens`` (32) new tokens or the end-of-turn token (which counts as a token of the answer).
For every numerics, over all prompts:

* **tokens before divergence**: per prompt, how many leading tokens of its answer equal the
  float64 pass's answer (at most that answer's length), summed, against the float64 answers'
  total length;
* **answers equal in full**: the answer's ids are the float64 pass's.

Rows: the engines in each format (``generators.runtime.Decoder`` on the golden backend of the
PYNQ-Z1 top, V = 2, so x in two parts, the default (docs/activations.md section 7): int8, the
layers' Q8_0 rows x Q8_0 activation blocks of 32 (0x09); q4, the layers' Q4_1 rows x Q8_1
activation blocks of 32 (0x05); in both the LM head's Q8_0 rows as stored x Q8_0 blocks (0x09),
each x as its blocks and its residual's in one 2-vector frame, the two words added; the INT8
KV cache and fixed-point attention), llama.cpp
(llama-cpp-python in build/llamacpp-venv: Q4_1 rows x Q8_1 activation blocks, F16 KV;
tools/answers_llamacpp.py writes its answers) and the float64 pass itself
(tests/llama_reference.py: its own GGUF reader and forward pass, the file's Q4_1 weights
dequantised, float64 activations and KV). Issue 32's goal: the engines follow the float64 pass
at least as far as llama.cpp does, in both formats. One more reference row, ``float64-q8_0``:
the float64 pass with the int8 image's layer weights (the file's Q4_1 values requantised to
Q8_0 per 32 by the converter's quantiser), which says what int8's weights alone cost.

Every answer is cached in build/answers/ by its prompt ids, the token limit and the sources it
depends on, so a rerun after a change re-asks only what changed. Writes build/answers/answers.md
(every prompt with each row's answer) and records docs/results/answers.json.

    python tools/answers.py --dump-ids build/answers/prompts.json   # for the llama.cpp column
    build/llamacpp-venv/bin/python tools/answers_llamacpp.py build/answers/prompts.json
    python tools/answers.py [--formats int8,q4] [--tokens 32] [--limit N] [--no-record]
"""
from __future__ import annotations

import argparse
import hashlib
import json
import os
import sys
import time
from pathlib import Path
from typing import Dict, List, Sequence

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")   # one thread: faster on 2 shared cores
import numpy as np  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "tests"))

PROMPTS = REPO / "docs" / "data" / "answers-prompts.txt"
OUT = REPO / "build" / "answers"
FORMATS = ("int8", "q4", "int8-kv16", "q4-kv16")
#: the "-kv16" rows: the same weights on the INT16-KV attention engine, the PYNQ-Z1 overlay's
#: default (issue 32 item 5: ``EngineConfig.with_kv_bits(16)``: the exp table 21 bits wide, Z
#: with 16 fraction bits); the int8 and q4 rows on the INT8-KV engine (an overlay built with
#: kv_bits=8), whatever the default
_KV8 = ", INT8 KV (an overlay built with kv_bits=8), fixed-point softmax"
_KV16 = (", INT16 KV (the calibrated steps x 127 / 32767), the attention engine with 16-bit K "
         "and V (exp table 21 bits, Z 16 fraction bits; the PYNQ-Z1 overlay's default)")
NUMERICS = {"float64": "float64 pass (tests/llama_reference.py): the file's Q4_1 weights "
                       "dequantised, float64 activations and KV",
            "llamacpp": "llama.cpp (llama-cpp-python): Q4_1 rows x Q8_1 activation blocks, "
                        "F16 KV",
            "int8": "engines, the layers' Q8_0 rows (the file's Q4_1 weights dequantised and "
                    "requantised per 32) x Q8_0 activation blocks of 32, the LM head's Q8_0 rows "
                    "as stored x Q8_0 blocks (format 0x09 for all), x in two parts (its blocks "
                    "and its residual's, one 2-vector frame, the words added), INT8 KV, "
                    "fixed-point softmax",
            "q4": "engines, the layers' Q4_1 rows as stored x Q8_1 activation blocks of 32 "
                  "(format 0x05), the LM head's Q8_0 rows as stored x Q8_0 blocks (format "
                  "0x09; both as llama.cpp), x in two parts (its blocks and its residual's, "
                  "one 2-vector frame, the words added), INT8 KV, fixed-point softmax"}
#: a diagnostic reference row: the float64 pass with the int8 format's layer weights (the file's
#: Q4_1 values requantised to Q8_0 per 32, as the int8 image holds them): what the int8 lane's
#: weights alone cost against the Q4_1 float64 pass, whatever the arithmetic
NUMERICS["float64-q8_0"] = ("float64 pass with the int8 format's layer weights (the file's Q4_1 "
                            "values requantised to Q8_0 per 32, as the int8 image holds them), "
                            "float64 activations and KV: a reference, not an engine")
NUMERICS["int8-kv16"] = NUMERICS["int8"].replace(", INT8 KV, fixed-point softmax", _KV16)
NUMERICS["q4-kv16"] = NUMERICS["q4"].replace(", INT8 KV, fixed-point softmax", _KV16)
NUMERICS["int8"] = NUMERICS["int8"].replace(", INT8 KV, fixed-point softmax", _KV8)
NUMERICS["q4"] = NUMERICS["q4"].replace(", INT8 KV, fixed-point softmax", _KV8)


def log(msg: str) -> None:
    print(f"[answers] {msg}", file=sys.stderr, flush=True)


def read_prompts(path: Path = PROMPTS) -> List[str]:
    """The user messages of ``path``: one per line, blank lines and # comments skipped."""
    out = [ln.strip() for ln in path.read_text(encoding="utf-8").splitlines()]
    return [p for p in out if p and not p.startswith("#")]


def leading_equal(answer: Sequence[int], ref: Sequence[int]) -> int:
    """How many leading tokens of ``answer`` equal ``ref``'s (at most ``len(ref)``)."""
    n = 0
    for a, b in zip(answer, ref):
        if a != b:
            break
        n += 1
    return n


def agreement(answers: Sequence[Sequence[int]], refs: Sequence[Sequence[int]]) -> Dict:
    """Tokens before divergence (summed) and answers equal in full, against ``refs``."""
    if len(answers) != len(refs):
        raise ValueError(f"{len(answers)} answers against {len(refs)} references")
    lead = sum(leading_equal(a, r) for a, r in zip(answers, refs))
    total = sum(len(r) for r in refs)
    full = sum(1 for a, r in zip(answers, refs) if list(a) == list(r))
    return dict(tokens=lead, of=total, fraction=round(lead / total, 4) if total else 0.0,
                equal=full, prompts=len(refs))


def sign_test_p(a: int, b: int) -> float:
    """Two-sided sign test: the probability of a split at least as uneven as ``a`` : ``b``
    between two rows equally good (ties left out)."""
    from math import comb
    n, k = a + b, min(a, b)
    if n == 0:
        return 1.0
    return min(1.0, 2 * sum(comb(n, i) for i in range(k + 1)) / 2 ** n)


def paired(answers: Sequence[Sequence[int]], other: Sequence[Sequence[int]],
           refs: Sequence[Sequence[int]]) -> Dict:
    """Per prompt, whether ``answers`` follow ``refs`` further than ``other`` do: the paired
    view of two rows (the summed metric moves by several points between numerics that differ
    in one rounding; the split over prompts says whether a difference is more than that)."""
    a = [leading_equal(x, r) for x, r in zip(answers, refs)]
    b = [leading_equal(x, r) for x, r in zip(other, refs)]
    further = sum(1 for x, y in zip(a, b) if x > y)
    shorter = sum(1 for x, y in zip(a, b) if x < y)
    return dict(further=further, shorter=shorter, same=len(a) - further - shorter,
                p=round(sign_test_p(further, shorter), 4))


def _hash_files(paths) -> bytes:
    h = hashlib.sha256()
    for p in sorted(paths):
        h.update(str(p.relative_to(REPO)).encode())
        h.update(p.read_bytes())
    return h.digest()


def _sources(numerics: str) -> bytes:
    """What a numerics' answers depend on (besides the prompt, the limit and the file)."""
    if numerics == "float64":
        return _hash_files([REPO / "tests" / "llama_reference.py"])
    g = REPO / "generators"
    if numerics == "float64-q8_0":
        return _hash_files([REPO / "tests" / "llama_reference.py",
                            g / "runtime" / "model" / "model.py"])
    return _hash_files([p for p in (g / "runtime").rglob("*")
                        if p.suffix in (".py", ".c", ".h", ".txt")]
                       + list((g / "golden").rglob("*.py"))
                       + [g / f for f in ("contract.py", "packing.py", "q4.py", "q8.py")])


def _key(*parts) -> str:
    h = hashlib.sha256()
    for p in parts:
        h.update(p if isinstance(p, bytes) else json.dumps(p).encode())
    return h.hexdigest()[:16]


def q8_0_reference(ref):
    """``ref`` (tests/llama_reference.py's float64 pass) with every layer matrix as the int8
    image holds it: the float32 values requantised to Q8_0 per 32 along K by the converter's
    own quantiser (``generators.runtime.model.model.quantise_q8_0``, llama.cpp's reference
    one), dequantised as float32(fp16 d) x q. The embedding and the LM head (the file's Q8_0
    as stored in both) are kept."""
    from generators.q8 import q8_0_raw_to_blocks
    from generators.runtime.model.model import Q8_0_BLOCK, quantise_q8_0
    from llama_reference import Reference
    w = dict(ref.w)
    for name, v in ref.w.items():
        if v.ndim != 2 or name in ("token_embd.weight", "output.weight") \
                or v.shape[1] % Q8_0_BLOCK:
            continue
        n, k = v.shape
        q, d = q8_0_raw_to_blocks(quantise_q8_0(np.asarray(v, np.float32)), n, k)
        d = d.view(np.float16).astype(np.float32)[:, :, None]
        w[name] = (q.astype(np.float32) * d).reshape(n, k).astype(np.float64)
    return Reference(ref.cfg, w)


class Asker:
    """One numerics' greedy answers, cached per prompt in build/answers/<numerics>/."""

    def __init__(self, numerics: str, path: Path, eos: Sequence[int], tokens: int):
        self.numerics, self.path, self.eos, self.tokens = numerics, path, list(eos), tokens
        self.salt = _sources(numerics) + str(path.stat().st_size).encode()
        self._run = None

    def _runner(self):
        if self._run is None:
            if self.numerics == "float64":
                from llama_reference import Reference
                ref = Reference.from_gguf(self.path, "float")
                self._run = lambda ids: ref.greedy(ids, self.tokens, stop=self.eos)
            elif self.numerics == "float64-q8_0":
                from llama_reference import Reference
                ref = q8_0_reference(Reference.from_gguf(self.path, "float"))
                self._run = lambda ids: ref.greedy(ids, self.tokens, stop=self.eos)
            else:
                from generators.runtime.engines import make_backend
                from generators.runtime.cli.chat import load_model
                from generators.runtime.decode.decoder import Decoder
                from generators.runtime.model.checkpoint import PYNQ_Z1_ENGINES
                fmt, _, kv = self.numerics.partition("-")
                engines = PYNQ_Z1_ENGINES.with_kv_bits(16 if kv else 8)
                model, _, _ = load_model(str(self.path), fmt, engines=engines, say=None)
                dec = Decoder(model, make_backend("golden", model, context=512))
                # the prompt token by token: the chunked prefill's bits
                # (tests/runtime/decode/test_prefill.py), and on the golden backend several
                # times faster than its 2-row passes (16 prompt tokens: 2.6-4.3 s against
                # 15-21 s with INT8 rows on this loaded 2-core machine)
                dec.chunk = 1
                self._run = lambda ids: [int(t) for t in dec.generate(
                    ids, self.tokens, stop_ids=self.eos)]
        return self._run

    def __call__(self, ids: Sequence[int]) -> List[int]:
        cf = OUT / self.numerics / f"{_key(list(ids), self.tokens, self.salt)}.json"
        if cf.is_file():
            return json.loads(cf.read_text())["answer"]
        out = self._runner()(list(ids))
        cf.parent.mkdir(parents=True, exist_ok=True)
        cf.write_text(json.dumps({"ids": list(ids), "answer": out}))
        return out


def llamacpp_answers(prompt_ids: Sequence[Sequence[int]], tokens: int):
    """llama.cpp's answers from build/answers/llamacpp.json when it holds these prompts at
    this limit (tools/answers_llamacpp.py writes it), else None."""
    f = OUT / "llamacpp.json"
    if not f.is_file():
        return None, None
    d = json.loads(f.read_text())
    if d.get("tokens") != tokens or [list(p) for p in d["prompts"]] != \
            [list(p) for p in prompt_ids]:
        log(f"{f.relative_to(REPO)} is for other prompts or another limit: run "
            "tools/answers_llamacpp.py again (make answers does)")
        return None, None
    return d["answers"], d.get("version")


def record_figures(rows: Dict, path: Path, n_prompts: int, tokens: int, lc_version,
                   secs: float) -> Path:
    """docs/results/answers.json: per row its agreement with the float64 pass (and with
    llama.cpp's answers)."""
    from generators.results import figure, record
    figs = []
    for n, r in rows.items():
        label = "modelled" if n.startswith("float64") else "measured"
        figs.append(figure(f"answers.{n}.follow_pct", round(100 * r["fraction"], 1), "%",
                           label, f"{NUMERICS[n]}: tokens of its greedy answers before "
                           f"they leave the float64 pass's ({r['tokens']} of {r['of']})",
                           tokens=r["tokens"], of=r["of"]))
        figs.append(figure(f"answers.{n}.equal", r["equal"], "answers", label,
                           f"{NUMERICS[n]}: answers equal to the float64 pass's in full, of "
                           f"{r['prompts']}", prompts=r["prompts"]))
        if "vs_llamacpp" in r:
            v = r["vs_llamacpp"]
            figs.append(figure(f"answers.{n}.vs_llamacpp_pct", round(100 * v["fraction"], 1),
                               "%", label, f"{NUMERICS[n]}: tokens before its answers "
                               f"leave llama.cpp's ({v['tokens']} of {v['of']})"))
        if "paired" in r:
            v = r["paired"]
            figs.append(figure(f"answers.{n}.further_than_llamacpp", v["further"], "prompts",
                               label, f"{NUMERICS[n]}: prompts whose answer follows the "
                               f"float64 pass's further than llama.cpp's does ({v['shorter']} "
                               f"less far, {v['same']} as far; two-sided sign test p "
                               f"{v['p']:.2f})", shorter=v["shorter"], same=v["same"],
                               p=v["p"]))
    return record("answers", figs, command="make answers (tools/answers.py)",
                  note=f"SmolLM2-135M-Instruct ({path.name}), {n_prompts} prompts of "
                       f"docs/data/answers-prompts.txt, chat template, greedy, up to {tokens} "
                       f"tokens; llama-cpp-python {lc_version}; {secs:.0f} s")


def parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(description="make answers: free-running greedy answers "
                                 "against a float64 pass and llama.cpp")
    ap.add_argument("--formats", default=",".join(FORMATS),
                    help="engine rows: weight formats, '-kv16' on the INT16-KV attention "
                         "engine (default int8,q4,int8-kv16,q4-kv16)")
    ap.add_argument("--tokens", type=int, default=32, help="new tokens at most (default 32)")
    ap.add_argument("--prompts", default=str(PROMPTS), help="one user message per line")
    ap.add_argument("--limit", type=int, default=0, help="the first N prompts only (not "
                    "recorded)")
    ap.add_argument("--dump-ids", default="", help="write the prompts' ids (for "
                    "tools/answers_llamacpp.py) and stop")
    ap.add_argument("--no-record", action="store_true",
                    help="do not write docs/results/answers.json")
    return ap


def main(argv=None) -> int:
    ap = parser()
    args = ap.parse_args(argv)
    fmts = [f for f in args.formats.split(",") if f]
    bad = [f for f in fmts if f not in FORMATS]
    if bad or not fmts:
        ap.error(f"--formats {args.formats!r}: a comma list of {', '.join(FORMATS)}")
    if not 1 <= args.tokens <= 256:
        ap.error(f"--tokens {args.tokens}: 1 to 256")
    if args.limit < 0:
        ap.error(f"--limit {args.limit}: 0 (all) or more")
    pfile = Path(args.prompts)
    if not pfile.is_file():
        ap.error(f"--prompts {pfile}: no such file")
    prompts = read_prompts(pfile)
    if args.limit:
        prompts = prompts[:args.limit]
    if not prompts:
        ap.error(f"--prompts {pfile}: no prompt in it")

    from generators.runtime.model.gguf import smollm2_path
    from generators.runtime.model.tokenizer import Tokenizer
    path = Path(smollm2_path())
    tok = Tokenizer.from_gguf(path)
    eos = list(tok.eos_ids)
    ids = [tok.chat_ids(p) for p in prompts]
    if args.dump_ids:
        Path(args.dump_ids).parent.mkdir(parents=True, exist_ok=True)
        Path(args.dump_ids).write_text(json.dumps(dict(model=str(path), prompts=ids, eos=eos,
                                                       tokens=args.tokens)))
        log(f"wrote {args.dump_ids}: {len(ids)} prompts")
        return 0

    t0 = time.perf_counter()
    answers: Dict[str, List[List[int]]] = {}
    for numerics in ["float64", "float64-q8_0"] + fmts:
        ask = Asker(numerics, path, eos, args.tokens)
        got = []
        for i, q in enumerate(ids):
            got.append(ask(q))
            log(f"{numerics}: prompt {i + 1}/{len(ids)}, {len(got[-1])} tokens "
                f"({time.perf_counter() - t0:.0f} s)")
        answers[numerics] = got
    lc, lc_version = llamacpp_answers(ids, args.tokens)
    if lc is not None:
        answers["llamacpp"] = lc
    else:
        log("no llama.cpp answers (make answers runs tools/answers_llamacpp.py): that row is "
            "left out")
    ref = answers["float64"]
    rows = {n: agreement(a, ref) for n, a in answers.items() if n != "float64"}
    if "llamacpp" in answers:
        for f in fmts + ["float64-q8_0"]:
            rows[f]["vs_llamacpp"] = agreement(answers[f], answers["llamacpp"])
            rows[f]["paired"] = paired(answers[f], answers["llamacpp"], ref)
    text = {n: [tok.decode(a, skip_special_tokens=True) for a in got]
            for n, got in answers.items()}

    lines = ["| numerics | tokens before divergence from float64 | answers equal in full |",
             "|---|---|---|"]
    for n, r in rows.items():
        lines.append(f"| {NUMERICS[n]} | {r['tokens']} / {r['of']} ({100 * r['fraction']:.0f} %) "
                     f"| {r['equal']} / {r['prompts']} |")
    table = "\n".join(lines)
    md = [f"# make answers: {len(prompts)} prompts, greedy, up to {args.tokens} tokens", "",
          table, ""]
    for i, p in enumerate(prompts):
        md.append(f"## {i + 1}. {p}\n")
        for n in answers:
            same = "" if n == "float64" else \
                f" ({leading_equal(answers[n][i], ref[i])}/{len(ref[i])} as float64)"
            md.append(f"- **{n}**{same}: {text[n][i]!r}")
        md.append("")
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / "answers.md").write_text("\n".join(md) + "\n")
    (OUT / "answers.json").write_text(json.dumps(dict(prompts=prompts, ids=ids, answers=answers,
                                                      text=text, rows=rows), indent=1) + "\n")
    print(table)
    secs = time.perf_counter() - t0
    log(f"wrote {OUT / 'answers.md'} and answers.json in {secs:.0f} s")
    if "llamacpp" in rows:
        for f in fmts:
            verdict = "meets" if rows[f]["fraction"] >= rows["llamacpp"]["fraction"] else "misses"
            pr = rows[f]["paired"]
            log(f"goal (issue 32): engines {f} follow float64 {100 * rows[f]['fraction']:.0f} % "
                f"against llama.cpp's {100 * rows['llamacpp']['fraction']:.0f} %: {verdict}; "
                f"per prompt {pr['further']} further, {pr['shorter']} shorter, "
                f"{pr['same']} as far (sign test p {pr['p']:.2f})")
    if args.no_record or args.limit or args.prompts != str(PROMPTS) or "llamacpp" not in rows:
        if not args.no_record:
            log("not recorded: every shipped prompt and the llama.cpp row are needed")
        return 0
    p = record_figures(rows, path, len(prompts), args.tokens, lc_version, secs)
    log(f"wrote {p.relative_to(REPO)}")
    return 0

if __name__ == "__main__":
    sys.exit(main())
