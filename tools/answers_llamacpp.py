#!/usr/bin/env python3
"""The llama.cpp row of make answers: llama.cpp's greedy answers to the same prompt ids on the
same GGUF file (its own arithmetic: Q4_1 rows x Q8_1 activation blocks, F16 KV cache).

Runs in build/llamacpp-venv (numpy and llama-cpp-python, see the Makefile's quality-llamacpp),
reads the ids that ``tools/answers.py --dump-ids`` wrote and writes build/answers/llamacpp.json
beside them: per prompt its greedy answer, up to the same token limit, the end-of-turn token
counted as a token of the answer (as tools/answers.py counts it).

    build/llamacpp-venv/bin/python tools/answers_llamacpp.py build/answers/prompts.json
"""
import json
import sys
import time
from pathlib import Path

import numpy as np
from llama_cpp import Llama, __version__


def main(ids_file) -> int:
    d = json.loads(Path(ids_file).read_text())
    # logits_all: without it llama-cpp-python 0.3.x keeps no logits in scores (its sampler
    # reads them inside llama.cpp)
    llm = Llama(model_path=d["model"], n_ctx=1024, logits_all=True, verbose=False, seed=0,
                n_threads=2)
    eos = set(d["eos"])
    out = []
    t0 = time.perf_counter()
    for i, ids in enumerate(d["prompts"]):
        llm.reset()
        llm.eval(ids)
        ans = []
        for _ in range(d["tokens"]):
            t = int(np.argmax(llm.scores[llm.n_tokens - 1]))
            ans.append(t)
            if t in eos:
                break
            llm.eval([t])
        out.append(ans)
        print(f"[answers] llama.cpp: prompt {i + 1}/{len(d['prompts'])}, {len(ans)} tokens "
              f"({time.perf_counter() - t0:.0f} s)", file=sys.stderr, flush=True)
    dest = Path(ids_file).with_name("llamacpp.json")
    dest.write_text(json.dumps(dict(version=__version__, tokens=d["tokens"],
                                    prompts=d["prompts"], answers=out)))
    print(f"[answers] llama.cpp {__version__}: wrote {dest}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    if len(sys.argv) != 2:
        print("usage: answers_llamacpp.py build/answers/prompts.json", file=sys.stderr)
        sys.exit(2)
    sys.exit(main(sys.argv[1]))
