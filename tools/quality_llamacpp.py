#!/usr/bin/env python3
"""The llama.cpp column of make quality: the same GGUF file and the same token ids in llama.cpp.

Runs in a venv of its own (build/llamacpp-venv: numpy and llama-cpp-python, which compiles
llama.cpp; about 5 minutes on 2 cores), reads the ids that `tools/quality.py --dump-ids` wrote,
and writes build/quality/llamacpp.json: the logits at every position of each passage and llama.cpp's
greedy answer to the Paris question. tools/quality.py turns them into the table's row.

    build/llamacpp-venv/bin/python tools/quality_llamacpp.py build/quality/ids.json
"""
import json
import sys
from pathlib import Path

import numpy as np
from llama_cpp import Llama, __version__


def main(ids_file):
    d = json.loads(Path(ids_file).read_text())
    passages = d["passages"]
    llm = Llama(model_path=d["model"], n_ctx=2048, logits_all=True, verbose=False, seed=0,
                n_threads=2)
    logits = []
    for ids in passages:                    # each passage from position 0, as make quality
        llm.reset()
        llm.eval(ids)
        logits.append(np.array(llm.scores[:len(ids) - 1], dtype=np.float64).tolist())
    llm.reset()
    prompt, eos = d["paris_prompt"], set(d["eos"])
    out = []
    llm.eval(prompt)
    first = np.array(llm.scores[llm.n_tokens - 1], dtype=np.float64)
    top5 = [(int(i), llm.detokenize([int(i)]).decode("utf-8", errors="replace"),
             round(float(first[i]), 3)) for i in np.argsort(-first)[:5]]
    for _ in range(16):
        t = int(np.argmax(llm.scores[llm.n_tokens - 1]))
        if t in eos:
            break
        out.append(t)
        llm.eval([t])
    answer = llm.detokenize(out).decode("utf-8", errors="replace")
    res = {"version": __version__, "passages": passages, "logits": logits, "answer": answer,
           "answer_ids": out, "first_token_top5": top5}
    dest = Path(ids_file).with_name("llamacpp.json")
    dest.write_text(json.dumps(res))
    print(f"llama.cpp {__version__}: answer {answer!r}; first answer token, top 5 logits: "
          f"{top5}; wrote {dest}")


if __name__ == "__main__":
    main(sys.argv[1])
