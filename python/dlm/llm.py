"""The Python face of dlm: a model and its tokenizer, decoding with any preset of the library's
registry, streaming, the step-wise engine, raw forwards and schedules written in Python.

    import dlm
    llm = dlm.LLM()                                   # the shipped CDLM student, or $DLM_MODEL, or a path
    print(llm.generate("What is 3 + 4?")[0].text)     # the model's default preset (cdlm here)
"""

from __future__ import annotations

import collections
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterable, Iterator, Optional, Sequence, Union

import numpy as np

from . import _args, _dlm

Prompt = Union[str, Sequence[int]]
#: A Python schedule: given a step's candidates (ScheduleStep), the indices of those to commit.
Schedule = Callable[[_dlm.ScheduleStep], Iterable[int]]
#: Policies by name (dlm.policies()); every axis not named is the preset's.
_AXES = ("mask", "cache", "schedule", "sampler")

_OPTIONS = ("gen_length", "block_length", "steps", "threshold", "eps", "alg_temp", "algorithm", "temperature", "top_k", "top_p", "seed",
            "editing_threshold")


def _as_cfg(call):
    """call(), with the engine's name for the guidance scale (cfg_scale) given as Python's (cfg)."""
    from .errors import InvalidParameter
    try:
        return call()
    except InvalidParameter as e:
        if e.parameter != "cfg_scale":
            raise
        raise InvalidParameter(str(e).replace("'cfg_scale'", "'cfg'", 1), "cfg", e.rule) from None


def default_model_path() -> str:
    """$DLM_MODEL, else the CDLM student shipped inside the package (models/cdlm of the repository)."""
    env = os.environ.get("DLM_MODEL")
    if env:
        return env
    return str(Path(__file__).resolve().parent / "models" / "cdlm")


@dataclass
class Stats:
    """What one sequence's decode cost."""

    forwards: int  #: model forwards (NFE) it took part in
    committed: int  #: slots its schedule committed
    tokens_per_forward: float
    steps_per_block: list
    rows_computed: int  #: query rows computed over all forwards


@dataclass
class Output:
    """One decoded prompt, as vLLM's RequestOutput carries it."""

    id: int  #: the engine's sequence id
    prompt_tokens: np.ndarray
    text: str  #: the answer: the slots before the first EOS, special tokens left out
    tokens: np.ndarray  #: the answer's tokens (before the first EOS)
    slots: np.ndarray  #: every generation slot (EOS and fill included)
    commit_forward: np.ndarray  #: per slot, the forward that committed it (-1: filled after a stop)
    commit_confidence: np.ndarray  #: per slot, p(token) when committed
    finish_reason: str  #: "stop" (an EOS ended it), "length", "cancelled" or "error"
    stats: Stats
    message: str = ""  #: why it failed ("error")
    result: Optional[_dlm.Result] = field(default=None, repr=False)  #: the library's result (raise_if_failed())


@dataclass
class Delta:
    """What one step of a streamed decode adds."""

    text: str  #: text that became final (concatenated, the deltas are the answer)
    tokens: np.ndarray  #: tokens added to the committed prefix
    committed: list  #: canvas positions this step committed (in any order)
    canvas: Optional[np.ndarray] = None  #: the whole canvas after the step (stream(canvases=True))
    output: Optional[Output] = None  #: the finished sequence, on the last delta
    index: int = 0  #: which prompt of stream()'s list it belongs to


def _finish_reason(r: _dlm.Result) -> str:
    if r.status == "cancelled":
        return "cancelled"
    if r.status == "failed":
        return "error"
    return "stop" if r.answer_length < len(r.tokens) else "length"


def _output(model: _dlm.Model, seq_id: int, prompt: Sequence[int], r: _dlm.Result) -> Output:
    slots = r.tokens
    return Output(id=seq_id, prompt_tokens=np.asarray(prompt, dtype=np.int32), text=model.answer_text(r),
                  tokens=slots[: r.answer_length], slots=slots, commit_forward=r.commit_forward,
                  commit_confidence=r.commit_confidence, finish_reason=_finish_reason(r),
                  stats=Stats(r.forwards, r.committed, r.tokens_per_forward, list(r.steps_per_block), r.rows_computed),
                  message=r.message, result=r)


class _Templated(str):
    """A prompt LLM.chat's chat template wrote, with the parameter a refusal names ("messages[i]")."""

    def __new__(cls, text: str, name: str):
        self = super().__new__(cls, text)
        self.name = name
        return self


class Engine:
    """The step-wise engine (dlm::engine) of one preset: sequences join and leave the running batch
    at forward boundaries, for custom batching loops.

        eng = llm.engine("cdlm", threshold=0.8)
        a = eng.add("What is 3 + 4?")
        while not eng.idle:
            eng.step()                                # one batched forward (GIL released)
            for out in eng.finished(): print(out.id, out.text)
    """

    def __init__(self, llm: "LLM", settings: _dlm.Settings, schedule: Optional[Schedule] = None, stop_at_eos: bool = True,
                 options: Optional[dict] = None):
        self._llm = llm
        self._engine = _dlm.Engine(llm.model, settings, schedule, stop_at_eos)
        self._prompts: dict = {}
        self._options = dict(options or {})  # what settings were resolved from (preset, policy names, options)

    @property
    def settings(self) -> _dlm.Settings:
        return self._engine.settings

    def add(self, prompt: Prompt, *, seed: Optional[int] = None, cfg: float = 0.0, chat: bool = False, think: Optional[bool] = None,
            **options) -> int:
        """Queues a prompt (text or token ids); it joins at the next step(). Returns its id.

        Options (gen_length, block_length, steps, threshold, temperature, top_k, top_p, seed, ...)
        give this sequence its own settings over the engine's: its generation length and its own
        mask, schedule and sampler, resolved and checked as the engine's were; it decodes as it
        would alone with them. chat wraps a text prompt in the model's chat template; think sets the
        template's enable_thinking (None: the template's default; True; False)."""
        own = self._llm.settings(**{**self._options, **options}) if options else None
        ids = self._llm._tokens(prompt, chat, think, "prompt", (own or self.settings).gen_length)
        seed, cfg = _args.seed(seed), _args.cfg(cfg)
        return _as_cfg(lambda: self._add_ids(ids, seed, cfg, own))

    def _add_ids(self, ids: list, seed: Optional[int], cfg: float, own: Optional[_dlm.Settings] = None) -> int:
        """Queues a token list already checked by type (add, and _Feed's admissions); returns its id."""
        seq = self._engine.add(ids, seed, cfg, own)
        self._prompts[seq] = ids
        return seq

    def add_batch(self, prompts: Sequence[Prompt], *, seed: Optional[int] = None, cfg: float = 0.0, chat: bool = False,
                  think: Optional[bool] = None) -> list:
        """Queues prompts seeded as generate() seeds a batch (sequence i: the seed derived from seed and i)."""
        if isinstance(prompts, str):
            _args.refuse("prompts", "must be a list of prompts; one text is one prompt: add(text), or add_batch([text])", prompts)
        _args.not_a_prompt_list("prompts", prompts, "must be a list of prompts (text or token ids)")
        lists, seed, cfg = self._batch_args(prompts, seed, cfg, chat, think)
        ids = _as_cfg(lambda: self._engine.add_batch(lists, seed, cfg))
        self._prompts.update(zip(ids, lists))
        return ids

    def _batch_args(self, prompts: Sequence[Prompt], seed: Optional[int], cfg: float, chat: bool, think: Optional[bool]) -> tuple:
        """A batch's token lists, seed and guidance scale, each checked by type (add_batch, _feed)."""
        lists = [self._llm._tokens(p, chat, think, f"prompts[{i}]", self.settings.gen_length) for i, p in enumerate(prompts)]
        return lists, _args.seed(seed), _args.cfg(cfg)

    def _feed(self, prompts: Sequence[Prompt], seed: Optional[int], cfg: float, chat: bool, think: Optional[bool],
              limit: int) -> "_Feed":
        """The prompts checked as add_batch checks them, all before any decodes, to be added at most
        `limit` running at once (_Feed): the memory of the `limit` largest together (dlm.OutOfMemory)."""
        lists, seed, cfg = self._batch_args(prompts, seed, cfg, chat, think)
        _as_cfg(lambda: self._engine.check_batch(lists, seed, cfg, limit))
        return _Feed(self, lists, self.settings.seed if seed is None else seed, cfg, limit)

    def step(self) -> list:
        """One batched forward and every sequence's step; returns what it did to each (StepReport)."""
        self._llm.use_threads()
        return self._engine.step()

    def cancel(self, seq: int) -> None:
        """Ends a sequence now with status cancelled (unknown or finished ids are ignored)."""
        self._engine.cancel(seq)

    def finished(self) -> list:
        """The sequences that left the batch since the last call, as Outputs (their ids are forgotten)."""
        return [_output(self._llm.model, seq, self._prompts.pop(seq, []), r) for seq, r in self._engine.take_finished()]

    def committed_prefix(self, seq: int) -> np.ndarray:
        """The answer's tokens committed contiguously from its first slot (what may be streamed)."""
        return self._engine.committed_prefix(seq)

    def canvas(self, seq: int) -> np.ndarray:
        """The whole canvas [prompt | slots], the mask id where not yet committed."""
        return self._engine.canvas(seq)

    @property
    def idle(self) -> bool:
        return self._engine.idle

    @property
    def active(self) -> int:
        return self._engine.active

    @property
    def stats(self) -> _dlm.EngineStats:
        return self._engine.stats


class _Feed:
    """A list of checked prompts added to an engine in order, at most `limit` of them running at once
    (the next joins as one finishes), prompt i seeded as add_batch seeds sequence i of one batch: the
    answers are one batch's, as the engine decodes a sequence the same in any batch and whenever it
    joins (docs/determinism.md), and the memory is `limit` sequences' K/V and logits, not the list's."""

    def __init__(self, engine: Engine, lists: list, seed: int, cfg: float, limit: int):
        self._engine, self._lists, self._seed, self._cfg, self._limit = engine, lists, seed, cfg, limit
        self.index: dict = {}  # engine id -> prompt index
        self._next = 0

    def admit(self) -> None:
        """Adds prompts while fewer than `limit` run; they join at the next step."""
        while self._next < len(self._lists) and self._engine.active < self._limit:
            i = self._next
            seq = self._engine._add_ids(self._lists[i], _dlm.sequence_seed(self._seed, i), self._cfg)
            self.index[seq] = i
            self._next += 1

    @property
    def idle(self) -> bool:
        """Every prompt added and decoded."""
        self.admit()
        return self._engine.idle


class LLM:
    """A model (a Hugging Face folder or a .gguf file; a DiffusionGemma folder too) with its tokenizer,
    decoded on the CPU. dtype holds the weights as "f32", "bf16" or "f16" (None: as stored); kv the KV
    cache as "f32" (None: the default) or "bf16" (half the bytes, logits within 2e-2 of f32's); threads
    sets the CPU threads; progress, a callable (done, total), hears the bytes of weights loaded so
    far (the last call has done == total), on the loading thread with the GIL held.

    Options of generate(), stream() and engine() are the registry's (docs/policies.md): gen_length,
    block_length, steps, threshold, eps, alg_temp, algorithm, temperature, top_k, top_p, seed,
    editing_threshold; an
    option the preset's policies do not have raises dlm.InvalidParameter naming it. mask=, cache=,
    schedule= and sampler= compose policies by name (dlm.policies()) instead of a preset's.
    """

    def __init__(self, model: Union[str, os.PathLike, None] = None, *, dtype: Optional[str] = None, threads: Optional[int] = None,
                 progress: Optional[Callable[[int, int], None]] = None, kv: Optional[str] = None, max_batch: int = 16):
        dtype = _args.choice("dtype", dtype, ("f32", "bf16", "f16"), "as the checkpoint stores them")
        self.max_batch = max_batch
        kv = _args.choice("kv", kv, ("f32", "bf16"), "f32")
        # OpenMP's thread count is the calling thread's: each call that runs forwards sets this LLM's.
        self.threads = _dlm.default_threads if threads is None else _args.threads(threads)
        self.use_threads()
        path = os.fspath(model) if model is not None else default_model_path()
        if not isinstance(path, str):
            _args.refuse("model", "must be a path as str or os.PathLike of str (a folder or a .gguf file)", model)
        self.model = _dlm.load(path, dtype, progress, kv)

    @property
    def max_batch(self) -> int:
        """How many prompts generate() and stream() decode at once; the rest wait their turn. An
        integer in [1, 4096], checked wherever it is set."""
        return self._max_batch

    @max_batch.setter
    def max_batch(self, value: int) -> None:
        self._max_batch = _args.max_batch(value)

    def use_threads(self) -> None:
        """Sets this LLM's CPU threads in the calling thread (OpenMP's setting is per thread); the
        calls that run forwards (forward, and each engine step of generate, stream, Engine.step) do."""
        _dlm.set_threads(self.threads)  # bounded there as dlm-generate's -t

    @property
    def default_preset(self) -> str:
        """The preset of the model's architecture (cdlm for dlm's LLaDA-layout students)."""
        return self.model.default_preset

    @staticmethod
    def presets() -> list:
        """(name, description) of every preset of the registry."""
        return _dlm.presets()

    def encode(self, text: str, chat: bool = False, think: Optional[bool] = None, special: Optional[bool] = None) -> list:
        """The prompt's ids (chat: wrapped in the model's chat template; think: its enable_thinking,
        None for the template's default). special: whether the tokenizer adds its own special tokens
        (Gemma 4's <bos>, a GGUF file's add_bos_token); None: for a plain prompt, as the tokenizer does
        by default, and not for a chat prompt, whose template writes its own (docs/python.md)."""
        return self.model.encode(_args.text("text", text), _args.flag("chat", chat), _args.think(think),
                                 None if special is None else _args.flag("special", special))

    def apply_chat_template(self, messages: Sequence[dict], add_generation_prompt: bool = True, think: Optional[bool] = None) -> str:
        """A conversation's prompt text ([{"role": ..., "content": ...}, ...]) in the model's chat
        template, as transformers' tokenizer.apply_chat_template(messages, tokenize=False,
        add_generation_prompt=..., enable_thinking=think) writes it (think None: not passed). The
        template is the folder's (Model.chat_template); one dlm does not write raises
        dlm.InvalidParameter naming messages."""
        return self.model.apply_chat_template(_args.messages("messages", messages), _args.flag("add_generation_prompt", add_generation_prompt),
                                              _args.think(think))

    def chat(self, messages: Sequence, preset: Optional[str] = None, *, think: Optional[bool] = None, **options) -> list:
        """Decodes a conversation (a list of {"role", "content"} messages), or a list of conversations as
        one batch, from the generation prompt of the model's chat template; one Output each, in order.
        llm.chat([{"role": "user", "content": q}]) is llm.generate(q, chat=True); options as generate()'s."""
        if isinstance(messages, (str, bytes, dict)) or not hasattr(messages, "__iter__"):
            _args.refuse("messages", "must be a conversation (a list of message dicts) or a list of conversations", messages)
        if "chat" in options:
            _args.refuse("chat", "LLM.chat writes the chat template itself (chat= belongs to generate())", show=False)
        seq = list(messages)
        batch = seq if seq and all(isinstance(c, (list, tuple)) for c in seq) else [seq]
        names = [f"messages[{i}]" for i in range(len(seq))] if batch is seq else ["messages"]
        prompts = [_Templated(self.model.apply_chat_template(_args.messages(name, conversation), True, _args.think(think)), name)
                   for name, conversation in zip(names, batch)]
        return self.generate(prompts, preset, **options)

    def decode(self, tokens: Sequence[int], skip_special: bool = True) -> str:
        """The text of token ids; an id outside the vocabulary raises dlm.InvalidParameter naming tokens."""
        return self.model.decode(_args.tokens("tokens", tokens, self.model.vocab_size), skip_special)

    def settings(self, preset: Optional[str] = None, *, mask: Optional[str] = None, cache: Optional[str] = None,
                 schedule: Optional[str] = None, sampler: Optional[str] = None, **options) -> _dlm.Settings:
        """The preset's settings for these options, resolved and checked by the registry. Naming a
        mask, cache, schedule or sampler (dlm.policies()) composes those policies with the preset's
        others (default: the model's preset); a composition the decoder does not allow, or an option
        none of its policies takes, raises dlm.InvalidParameter naming the axis or the option."""
        unknown = sorted(set(options) - set(_OPTIONS))
        if unknown:
            _args.refuse(unknown[0], f"no such option (one of {', '.join(_OPTIONS)})", show=False)
        for name, value in dict(preset=preset, mask=mask, cache=cache, schedule=schedule, sampler=sampler).items():
            if value is not None and not isinstance(value, str):
                _args.refuse(name, "must be a name (str) or None", value)
        options = {k: _args.option(k, v) for k, v in options.items() if v is not None}
        return _dlm.resolve(self.model, preset or "", mask, cache, schedule, sampler, **options)

    def engine(self, preset: Optional[str] = None, *, mask: Optional[str] = None, cache: Optional[str] = None,
               schedule: Union[str, Schedule, None] = None, sampler: Optional[str] = None, stop_at_eos: Optional[bool] = None,
               **options) -> Engine:
        """A step-wise engine of `preset` (default: the model's), or of the policies named (as
        settings()). `schedule` is a schedule's name, or a Python callable that chooses the commits
        over the preset's mask, cache and sampler. stop_at_eos (default True) belongs to a Python
        schedule: stop after a block holding EOS, as cdlm does; a preset's or named schedule decides
        that itself, so giving stop_at_eos without a Python schedule raises dlm.InvalidParameter."""
        fn = schedule if callable(schedule) else None
        if schedule is not None and fn is None and not isinstance(schedule, str):
            _args.refuse("schedule", "must be a schedule's name (dlm.policies()['schedule']) or a callable (ScheduleStep -> indices "
                                     "to commit)", schedule)
        if stop_at_eos is not None:
            _args.flag("stop_at_eos", stop_at_eos)
            if fn is None:
                _args.refuse("stop_at_eos", "applies to a schedule written in Python; a preset's or a named schedule decides itself "
                                            "whether a sequence stops at EOS (cdlm after a block holding EOS, llada never)", show=False)
        named = dict(preset=preset, mask=mask, cache=cache, schedule=None if fn else schedule, sampler=sampler)
        named = {k: v for k, v in named.items() if v is not None}
        settings = self.settings(**named, **options)
        engine = Engine(self, settings, fn, True if stop_at_eos is None else stop_at_eos, {**named, **options})
        if fn is not None:  # the callable replaces the preset's schedule: that schedule's own options would be ignored
            replaced = settings.policies["schedule"]
            for name in sorted(set(options) & set(_dlm.schedule_options(replaced))):
                _args.refuse(name, f"belongs to the preset's schedule ({replaced}), which schedule= replaces with a Python callable: "
                                   "it would be ignored; the callable decides what to commit", show=False)
        return engine

    def generate(self, prompts: Union[Prompt, Sequence[Prompt]], preset: Optional[str] = None, *, chat: bool = False, think: Optional[bool] = None,
                 cfg: float = 0.0, schedule: Union[str, Schedule, None] = None, stop_at_eos: Optional[bool] = None, **options) -> list:
        """Decodes the prompts (text, token ids, or a list of either) as one batch; one Output each,
        in order. A single prompt decodes exactly as dlm-generate decodes it (chat and think as its
        --chat and --think). mask=, cache=, schedule= and sampler= name policies to compose (settings()).
        Every prompt is checked before any decodes; at most max_batch (the LLM's) run at once, the
        others joining as they finish, with the answers of one batch."""
        batch = self._batch(prompts)
        eng = self.engine(preset, schedule=schedule, stop_at_eos=stop_at_eos, **options)
        feed = eng._feed(batch, options.get("seed"), cfg, chat, think, self.max_batch)
        done: dict = {}
        while not feed.idle:
            eng.step()
            for out in eng.finished():
                done[feed.index[out.id]] = out
        for out in eng.finished():
            done[feed.index[out.id]] = out
        return [done[i] for i in range(len(batch))]

    def stream(self, prompts: Union[Prompt, Sequence[Prompt]], preset: Optional[str] = None, *, chat: bool = False, think: Optional[bool] = None,
               canvases: bool = False, cfg: float = 0.0, schedule: Union[str, Schedule, None] = None, stop_at_eos: Optional[bool] = None,
               **options) -> Iterator[Delta]:
        """Decodes the prompts (one, or a list decoded as one batch, as generate()) and yields, after
        each forward, each prompt's text and tokens that became final (the committed prefix's
        growth), tagged with the prompt's index (Delta.index): the texts of one index concatenate to
        generate()'s answer for it. canvases=True yields every step of every prompt, with the whole
        canvas, for visualisation. Each prompt's last Delta carries its Output. At most max_batch (the
        LLM's) run at once, as in generate()."""
        batch = self._batch(prompts)
        eng = self.engine(preset, schedule=schedule, stop_at_eos=stop_at_eos, **options)
        feed = eng._feed(batch, options.get("seed"), cfg, chat, think, self.max_batch)
        index = feed.index
        eos = set(self.model.eos_ids)
        texts: dict = collections.defaultdict(_dlm.TextStream)
        sent: dict = collections.defaultdict(int)
        while not feed.idle:
            committed: dict = {}
            for r in eng.step():
                committed.setdefault(r.id, []).extend(r.committed)
            finished = {out.id: out for out in eng.finished()}
            for seq in sorted(set(committed) | set(finished)):
                out = finished.get(seq)
                if out is not None:
                    canvas = np.concatenate([out.prompt_tokens, out.slots]) if canvases else None
                    yield Delta(texts[seq].advance(out.text, True), out.slots[sent[seq]:], committed.get(seq, []), canvas, out, index[seq])
                    continue
                prefix = eng.committed_prefix(seq)
                cut = next((i for i, t in enumerate(prefix.tolist()) if t in eos), len(prefix))
                piece = texts[seq].advance(self.decode(prefix[:cut]), False)
                new = prefix[sent[seq]:]
                if canvases or len(new) or piece:
                    sent[seq] = len(prefix)
                    yield Delta(piece, new, committed.get(seq, []), eng.canvas(seq) if canvases else None, None, index[seq])

    def forward(self, tokens: Sequence[int], mask: str = "bidirectional") -> np.ndarray:
        """One forward over `tokens`: every row's logits, a (len(tokens), vocab) float32 array that
        owns the buffer the model wrote (no copy). mask: "bidirectional" or "causal". GIL released.
        An id outside the vocabulary raises dlm.InvalidParameter naming tokens."""
        if not isinstance(mask, str):
            _args.refuse("mask", "must be 'bidirectional' or 'causal'", mask)
        self.use_threads()
        return _dlm.forward(self.model, _args.tokens("tokens", tokens, self.model.vocab_size), mask)

    def _tokens(self, prompt: Prompt, chat: bool, think: Optional[bool], name: str, gen_length: int) -> list:
        """A prompt's ids: text encoded (chat, think: the chat template) only as far as a prompt beside
        gen_length fits the model's context (a longer one raises dlm.InvalidParameter naming `name`,
        as the engine would, without tokenizing the rest), or token ids checked against the vocabulary;
        chat and think apply to text only and are refused, by name, with ids."""
        chat, think = _args.flag("chat", chat), _args.think(think)
        if isinstance(prompt, _Templated):  # LLM.chat's: tokenized as generate(chat=True) tokenizes, bounded alike
            return self.model.encode_templated(prompt, gen_length, prompt.name)
        if isinstance(prompt, str):
            return self.model.encode_prompt(_args.text(name, prompt), chat, think, gen_length, name)
        if chat or think is not None:
            _args.refuse("chat" if chat else "think", f"applies to a text prompt; {name} is token ids, used as they are "
                                                      "(llm.encode(text, chat=True) gives a chat prompt's ids)", show=False)
        return _args.tokens(name, prompt, self.model.vocab_size)

    @staticmethod
    def _batch(prompts) -> list:
        if isinstance(prompts, str):
            return [prompts]
        _args.not_a_prompt_list("prompts", prompts, "must be a prompt (text or token ids) or a list of prompts")
        seq = list(prompts)
        if seq and all(isinstance(t, (int, np.integer)) for t in seq):
            return [seq]  # one prompt of token ids
        return seq
