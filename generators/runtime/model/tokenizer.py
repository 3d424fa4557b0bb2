"""Text in, token ids out (and back), with the model's own chat template.

    from generators.runtime.model.tokenizer import Tokenizer
    tok = Tokenizer.from_gguf(path)        # vocabulary, merges, specials, template from GGUF metadata
    tok = Tokenizer.from_folder(dir)       # tokenizer.json (+ tokenizer_config.json) of a HF folder
    ids = tok.encode(tok.apply_chat_template([{"role": "user", "content": "Hi"}]))
    tok.decode(ids); tok.eos_ids           # end-of-turn ids to stop generation at

The BPE itself is the ``tokenizers`` package (Hugging Face's Rust tokenizer):

* from GGUF (``tokenizer.ggml.model = "gpt2"``, byte-level BPE): a ``models.BPE`` built from
  ``tokenizer.ggml.tokens`` (id = position) and ``tokenizer.ggml.merges`` ("a b" pairs, in rank
  order), byte-level pre-tokenizer and decoder. ``tokenizer.ggml.pre`` selects the split before
  BPE as llama.cpp does: ``smollm`` splits every digit on its own before the GPT-2 regex (as
  SmolLM2's tokenizer.json does), ``gpt2``/``default`` uses the GPT-2 regex alone. Tokens of
  type CONTROL (3) or USER_DEFINED (4), such as ``<|im_start|>`` and ``<|im_end|>``, are special
  tokens: written in the text they encode to their single id and are never split.
* A vocabulary without merges, a tokenizer model other than ``gpt2`` or an unknown ``pre``
  is a :class:`TokenizerError` naming the field.

The chat template is the Jinja text of ``tokenizer.chat_template`` (GGUF) or of
``chat_template`` in ``tokenizer_config.json``, rendered the way Hugging Face transformers
renders it: jinja2's ``ImmutableSandboxedEnvironment`` (the template cannot touch Python
objects' internals or mutate its inputs; it is data from a model file), ``trim_blocks`` and
``lstrip_blocks`` on, ``raise_exception(msg)`` available, and the variables ``messages``,
``add_generation_prompt``, ``bos_token`` and ``eos_token``.

End of turn: :attr:`Tokenizer.eos_ids` holds the file's ``eos_token_id``, its ``eot_token_id``
if any, and ``<|im_end|>`` / ``<|eot_id|>`` / ``<|end|>`` when the vocabulary has them.
"""
from __future__ import annotations

import json
from pathlib import Path

from jinja2.exceptions import TemplateError
from jinja2.sandbox import ImmutableSandboxedEnvironment

from ..errors import TokenizerError
from .. import optional
from .gguf import open_reader, read_metadata

__all__ = ["Tokenizer", "TokenizerError"]

_EOT_TEXTS = ("<|im_end|>", "<|eot_id|>", "<|end|>")
_PRE_DIGITS = {"smollm": True, "gpt2": False, "default": False}
CONTROL, USER_DEFINED = 3, 4


def tokenizers():
    """The tokenizers package, or a TokenizerError naming the command that installs it."""
    try:
        return optional.module("tokenizers")
    except ImportError:
        raise TokenizerError("text needs the 'tokenizers' package: pip install "
                             "'ternary-pynq[runtime]' (on the board: pip install "
                             "'ternary-pynq[board]')") from None


class Tokenizer:
    """A ``tokenizers.Tokenizer`` plus the model's specials, end-of-turn ids and chat template."""

    def __init__(self, tk, *, chat_template: str | None = None, bos_token: str | None = None,
                 eos_token: str | None = None, eos_ids=(), add_bos: bool = False,
                 source: str = ""):
        self._tk = tk
        self.chat_template = chat_template
        self.bos_token = bos_token
        self.eos_token = eos_token
        self.eos_ids = tuple(dict.fromkeys(int(i) for i in eos_ids))
        self.add_bos = add_bos
        self.source = source

    # ---------------------------------------------------------------------------- builders
    @classmethod
    def from_gguf(cls, path_or_metadata) -> "Tokenizer":
        """From a GGUF file's metadata (a path, or the dict :func:`gguf.read_metadata` gives)."""
        if isinstance(path_or_metadata, dict):
            md, where = path_or_metadata, "GGUF metadata"
        else:
            md, where = read_metadata(open_reader(path_or_metadata)), str(path_or_metadata)
        return cls.from_metadata(md, where)

    @classmethod
    def from_metadata(cls, md: dict, where: str = "GGUF metadata") -> "Tokenizer":
        tk_mod = tokenizers()
        AddedToken, decoders, models, pre_tokenizers = (
            tk_mod.AddedToken, tk_mod.decoders, tk_mod.models, tk_mod.pre_tokenizers)

        kind = md.get("tokenizer.ggml.model")
        if kind != "gpt2":
            raise TokenizerError(f"{where}: tokenizer.ggml.model is {kind!r}; only 'gpt2' "
                                 f"(byte-level BPE) is supported")
        tokens = md.get("tokenizer.ggml.tokens")
        if not tokens:
            raise TokenizerError(f"{where}: tokenizer.ggml.tokens is missing or empty")
        merges = md.get("tokenizer.ggml.merges")
        if not merges:
            raise TokenizerError(f"{where}: the vocabulary has no merges (tokenizer.ggml.merges "
                                 f"is missing or empty): a BPE vocabulary needs them")
        pre = md.get("tokenizer.ggml.pre", "default")
        if pre not in _PRE_DIGITS:
            raise TokenizerError(f"{where}: tokenizer.ggml.pre {pre!r} is not supported "
                                 f"(supported: {', '.join(_PRE_DIGITS)})")
        vocab = {t: i for i, t in enumerate(tokens)}
        pairs = []
        for m in merges:
            a, sep, b = m.partition(" ")
            if not sep or a not in vocab or b not in vocab or a + b not in vocab:
                raise TokenizerError(f"{where}: tokenizer.ggml.merges entry {m!r} is not a merge "
                                     f"of two vocabulary tokens")
            pairs.append((a, b))
        tk = tk_mod.Tokenizer(models.BPE(vocab=vocab, merges=pairs, fuse_unk=False,
                                         ignore_merges=False))
        bl = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
        tk.pre_tokenizer = (pre_tokenizers.Sequence([pre_tokenizers.Digits(individual_digits=True),
                                                     bl]) if _PRE_DIGITS[pre] else bl)
        tk.decoder = decoders.ByteLevel()
        types = md.get("tokenizer.ggml.token_type") or [1] * len(tokens)
        specials = [tokens[i] for i, t in enumerate(types) if t in (CONTROL, USER_DEFINED)]
        tk.add_special_tokens([AddedToken(s, special=True, normalized=False) for s in specials])

        def tok_of(key):
            i = md.get(key)
            return tokens[i] if isinstance(i, int) and 0 <= i < len(tokens) else None

        eos = [md[k] for k in ("tokenizer.ggml.eos_token_id", "tokenizer.ggml.eot_token_id")
               if isinstance(md.get(k), int)]
        eos += [vocab[t] for t in _EOT_TEXTS if t in vocab]
        return cls(tk, chat_template=md.get("tokenizer.chat_template"),
                   bos_token=tok_of("tokenizer.ggml.bos_token_id"),
                   eos_token=tok_of("tokenizer.ggml.eos_token_id"), eos_ids=eos,
                   add_bos=bool(md.get("tokenizer.ggml.add_bos_token", False)), source=where)

    @classmethod
    def from_folder(cls, folder) -> "Tokenizer":
        """From a Hugging Face folder: tokenizer.json, and tokenizer_config.json if present."""
        tk_mod = tokenizers()
        d = Path(folder)
        f = d / "tokenizer.json"
        if not f.is_file():
            raise TokenizerError(f"{d}: no tokenizer.json")
        tk = tk_mod.Tokenizer.from_file(str(f))
        cfg = {}
        if (d / "tokenizer_config.json").is_file():
            cfg = json.loads((d / "tokenizer_config.json").read_text())

        def text(v):
            return v.get("content") if isinstance(v, dict) else v

        bos, eos = text(cfg.get("bos_token")), text(cfg.get("eos_token"))
        vocab = tk.get_vocab(with_added_tokens=True)
        eos_ids = [vocab[t] for t in (eos, *_EOT_TEXTS) if t in vocab]
        tmpl = cfg.get("chat_template")
        if isinstance(tmpl, list):       # [{"name": "default", "template": ...}, ...]
            tmpl = next((t["template"] for t in tmpl if t.get("name") == "default"), None)
        return cls(tk, chat_template=tmpl, bos_token=bos, eos_token=eos, eos_ids=eos_ids,
                   source=str(d))

    # ---------------------------------------------------------------------------- the image
    def to_data(self) -> dict:
        """Everything this tokenizer is, as JSON-able data (the model image carries it):
        the ``tokenizers`` serialisation (vocabulary, merges, pre-tokenizer, decoder,
        special tokens), the chat template, the specials and the end-of-turn ids."""
        return {"tokenizer_json": self._tk.to_str(), "chat_template": self.chat_template,
                "bos_token": self.bos_token, "eos_token": self.eos_token,
                "eos_ids": list(self.eos_ids), "add_bos": self.add_bos, "source": self.source}

    @classmethod
    def from_data(cls, d: dict, where: str = "model image") -> "Tokenizer":
        """The tokenizer :meth:`to_data` described (encodes and decodes as the original)."""
        tk_mod = tokenizers()
        try:
            tk = tk_mod.Tokenizer.from_str(d["tokenizer_json"])
        except Exception as exc:
            raise TokenizerError(f"{where}: the tokenizer does not load ({exc})") from None
        return cls(tk, chat_template=d.get("chat_template"), bos_token=d.get("bos_token"),
                   eos_token=d.get("eos_token"), eos_ids=d.get("eos_ids") or (),
                   add_bos=bool(d.get("add_bos")), source=d.get("source") or where)

    # ---------------------------------------------------------------------------- use
    @property
    def vocab_size(self) -> int:
        return self._tk.get_vocab_size(with_added_tokens=True)

    def token_id(self, text: str) -> int | None:
        return self._tk.token_to_id(text)

    def encode(self, text: str) -> list[int]:
        """Token ids of ``text``; special tokens written in it (``<|im_start|>``) are one id."""
        ids = self._tk.encode(text, add_special_tokens=False).ids
        if self.add_bos and self.bos_token is not None:
            ids = [self._tk.token_to_id(self.bos_token)] + ids
        return ids

    def decode(self, ids, skip_special_tokens: bool = False) -> str:
        return self._tk.decode(list(ids), skip_special_tokens=skip_special_tokens)

    def apply_chat_template(self, messages, add_generation_prompt: bool = True) -> str:
        """The prompt text for ``messages`` ([{"role": ..., "content": ...}]) by the model's
        own template, rendered in jinja2's sandbox."""
        if not self.chat_template:
            raise TokenizerError(f"{self.source}: the model has no chat template "
                                 f"(tokenizer.chat_template)")

        def raise_exception(msg):
            raise TemplateError(msg)

        env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True)
        env.globals["raise_exception"] = raise_exception
        try:
            return env.from_string(self.chat_template).render(
                messages=list(messages), add_generation_prompt=add_generation_prompt,
                bos_token=self.bos_token or "", eos_token=self.eos_token or "")
        except TemplateError as exc:
            raise TokenizerError(f"{self.source}: the chat template failed: {exc}") from exc

    def chat_ids(self, prompt: str, system: str | None = None) -> list[int]:
        """Token ids of one user turn in the chat template, ready for the assistant's answer."""
        msgs = ([{"role": "system", "content": system}] if system else []) + \
               [{"role": "user", "content": prompt}]
        return self.encode(self.apply_chat_template(msgs, add_generation_prompt=True))
