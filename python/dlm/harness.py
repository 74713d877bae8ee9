"""lm-evaluation-harness's model `dlm` (lm-eval 0.4.x; docs/python.md, "lm-evaluation-harness").

    python -m dlm.harness run --model dlm --model_args pretrained=models/cdlm,preset=cdlm --tasks ...

Importing this module registers the model with the harness (`--model dlm`); `python -m dlm.harness`
is the harness's own command line with that import done first. The harness is not a dependency of
the package: `pip install "lm-eval[api]==0.4.13"` beside it.

model_args: `pretrained` (a model folder or .gguf; default: the package's), `preset` (default: the
model's), `chat` (each context wrapped as one user message in the model's chat template), `think` (the
chat template's enable_thinking, True or False; unset: the template's default; it needs chat or the
harness's --apply_chat_template), `dtype`, `threads`, `seed`, `mc_num` and `mc_batch` (loglikelihood), and any
option of the preset (threshold, block_length, steps, temperature, ...), and `mask`, `cache`,
`schedule`, `sampler` to compose policies by name (LLM.generate). `batch_size` is the number
of prompts decoded as one batch (`device` is ignored: the package decodes on the CPU) (dlm-eval's --batch: sequence i of a batch draws from the seed derived
from `seed` and i).

--apply_chat_template: the harness writes each context as a conversation (its few-shot turns with
--fewshot_as_multiturn, its --system_instruction) and asks apply_chat_template for the prompt text,
which is LLM.apply_chat_template's (the model's template, with `think`); chat=True as well would wrap
it twice and is refused. tokenizer_name and chat_template name the model and its template for the
harness's caches and results.

generate_until decodes each context with the preset, cuts the answer at the first `until` string and
at `max_gen_toks` tokens. The generation length is the preset's (the model's dlm_gen_length, or
gen_length in model_args), not the task's.

loglikelihood is the Monte Carlo estimate LLaDA's authors evaluate with (eval_llada.py,
get_log_likelihood): mc_num samples in batches of mc_batch; in each batch a masked count x_i is
spread over [1, L] from a random start, x_i of the L continuation tokens are masked at random, and
the cross entropy of the masked tokens, over x_i / L, is averaged; the estimate is minus its mean.
With chat=True the context is the chat template's prompt of it as one user message, as generate_until
decodes it. is_greedy says whether one forward with the whole continuation masked predicts every continuation
token as its argmax (LLaDA's own check unmasks step by step). loglikelihood_rolling is refused, and so
is loglikelihood on a uniform-state model (DiffusionGemma): it has no mask token, so the masked
estimate does not apply to it (its generate_until tasks run).
"""

from __future__ import annotations

import os
import sys
from typing import Optional

import numpy as np
from lm_eval.api.model import LM
from lm_eval.api.registry import register_model

from . import _args
from .llm import LLM


def _cut(text: str, until) -> str:
    for stop in [until] if isinstance(until, str) else list(until or []):
        if stop:
            text = text.split(stop, 1)[0]
    return text


def _model_arg_bool(name: str, value) -> bool:
    """A model_args flag: lm-eval hands True/False (from "true"/"false"); 1 and 0 pass too. Anything else
    ("no", "off") is refused by name: bool("no") would be True."""
    if isinstance(value, bool) or (isinstance(value, int) and value in (0, 1)):
        return bool(value)
    _args.refuse(name, "must be True or False (model_args: name=true or name=false)", value)


def _model_arg_int(name: str, value) -> int:
    """A model_args integer: lm-eval hands ints (from digits); 1.5 or "x" is refused by name, never truncated."""
    if _args.is_integer(value):
        return int(value)
    _args.refuse(name, "must be an integer", value)


def _batch_size(value) -> int:
    """--batch_size: a positive integer, or lm-eval's "auto" / "auto:N", which searches for the largest
    batch that fits a GPU: dlm decodes on the CPU and takes 1 there. Anything else is refused by name."""
    text = str(value).strip()
    if text.startswith("auto"):
        return 1
    if text.isdigit() and int(text) > 0:
        return int(text)
    _args.refuse("batch_size", "must be a positive integer, or auto (which is 1)", value)


def _log_softmax_at(logits: np.ndarray, targets: np.ndarray) -> np.ndarray:
    """log p(target) of each row (float64)."""
    rows = logits.astype(np.float64)
    top = rows.max(axis=1, keepdims=True)
    lse = np.log(np.exp(rows - top).sum(axis=1)) + top[:, 0]
    return rows[np.arange(len(targets)), targets] - lse


@register_model("dlm")
class HarnessModel(LM):
    def __init__(self, pretrained: Optional[str] = None, preset: Optional[str] = None, chat: bool = False, think: Optional[bool] = None,
                 dtype: Optional[str] = None, threads: Optional[int] = None, seed: int = 0, mc_num: int = 128, mc_batch: int = 32,
                 batch_size=1, max_batch_size=None, device=None, **options):
        super().__init__()  # device: the harness passes its default ("cuda:0"); the package decodes on the CPU
        self.llm = LLM(pretrained, dtype=dtype, threads=threads)
        self.preset = preset or self.llm.default_preset
        self.chat, self.think = _model_arg_bool("chat", chat), None if think is None else _model_arg_bool("think", think)
        self.pretrained = pretrained
        self.harness_templates = False  # whether the harness has asked apply_chat_template (--apply_chat_template)
        self.seed = _model_arg_int("seed", seed)
        self.options = options
        self.mc_num, self.mc_batch = _model_arg_int("mc_num", mc_num), _model_arg_int("mc_batch", mc_batch)
        if self.mc_batch < 1:
            _args.refuse("mc_batch", "must be a positive integer", mc_batch)
        if self.mc_num < 1 or self.mc_num % self.mc_batch:
            _args.refuse("mc_num", f"must be a positive multiple of mc_batch ({self.mc_batch})", mc_num)
        self.batch = _batch_size(batch_size)
        self.llm.max_batch = min(self.batch, 4096)  # generate_until's chunks decode as one batch each
        self.llm.settings(self.preset, seed=self.seed, **options)  # refuses a bad option now, naming it

    @property
    def tokenizer_name(self) -> str:
        """The model and its chat template, for the harness's request caches."""
        name = os.path.basename(os.path.normpath(str(self.pretrained))) if self.pretrained else "dlm"
        return f"{name}__{self.llm.model.chat_template}"

    def chat_template(self, chat_template=False) -> str:
        """The chat template dlm writes for this model (Model.chat_template), which the harness records."""
        return self.llm.model.chat_template if chat_template else ""

    def apply_chat_template(self, chat_history, add_generation_prompt: bool = True) -> str:
        """The harness's conversation as the prompt text of the model's chat template (--apply_chat_template)."""
        if self.chat:
            _args.refuse("chat", "the harness's --apply_chat_template writes the chat template already; chat=True would wrap "
                                 "the prompt twice: give one of them", show=False)
        self.harness_templates = True
        return self.llm.apply_chat_template(list(chat_history), add_generation_prompt, self.think)

    def _check_think(self) -> None:
        if self.think is not None and not self.chat and not self.harness_templates:
            _args.refuse("think", "sets the chat template's enable_thinking: it needs chat=True or the harness's "
                                  "--apply_chat_template", show=False)

    def _context_ids(self, context: str, room: int) -> list:
        """A generate_until context's ids: templated (chat=True) or as they are (with --apply_chat_template
        the context is the template's text already, thinking and special tokens included), its last
        `room` tokens when it is longer (lm-eval's HFLM cuts the left, as here), and an empty one as
        prefix_token_id (the loglikelihood rule)."""
        if self.chat:
            ids = self.llm.encode(context, chat=True, think=self.think)
        else:
            ids = self._encode(context)
        return ids[-room:] if ids else [self.prefix_token_id]

    def generate_until(self, requests, disable_tqdm: bool = False) -> list:
        self._check_think()
        room = self.llm.model.max_context - self.llm.settings(self.preset, seed=self.seed, **self.options).gen_length
        if room < 1:
            raise ValueError(f"dlm: the generation length leaves no position of the model's context ({self.llm.model.max_context}) "
                             "for a context; give a smaller gen_length in model_args")
        out = []
        for b in range(0, len(requests), self.batch):
            chunk = requests[b:b + self.batch]
            contexts = [self._context_ids(r.args[0], room) for r in chunk]
            results = self.llm.generate(contexts, self.preset, seed=self.seed, **self.options)
            for r, res in zip(chunk, results):
                context, gen_kwargs = r.args
                limit = gen_kwargs.get("max_gen_toks")
                text = res.text if not limit or limit >= len(res.tokens) else self.llm.decode(res.tokens[:limit])
                text = _cut(text, gen_kwargs.get("until"))
                self.cache_hook.add_partial("generate_until", (context, gen_kwargs), text)
                out.append(text)
        return out

    def loglikelihood(self, requests, disable_tqdm: bool = False) -> list:
        if self.llm.model.uniform_state:
            raise NotImplementedError(f"dlm: loglikelihood is LLaDA's masked Monte Carlo estimate; {self.llm.model.architecture} is "
                                      "uniform-state diffusion (no mask token), so it does not apply; use generate_until tasks")
        self._check_think()
        out = []
        for i, r in enumerate(requests):
            context, continuation = r.args
            text = self.llm.apply_chat_template([{"role": "user", "content": context}], True, self.think) if self.chat else context
            prefix, target = self._encode_pair(text, continuation)
            prefix = self._fit(prefix, len(target), i)
            if self.llm.model.mask_id in prefix or self.llm.model.mask_id in target.tolist():
                raise ValueError(f"dlm: loglikelihood request {i}: its text holds the mask token (id {self.llm.model.mask_id}), "
                                 "which the Monte Carlo estimate would read as a masked position (generate_until refuses it too)")
            ll = self._monte_carlo(np.asarray(prefix, dtype=np.int64), target, np.random.default_rng([self.seed, i]))
            result = (ll, self._greedy(prefix, target))
            self.cache_hook.add_partial("loglikelihood", (context, continuation), result)
            out.append(result)
        return out

    def _fit(self, prefix: list, target_length: int, index: int) -> list:
        """The context's last tokens that fit beside the continuation in the model's context (lm-eval's
        HFLM cuts the left, as here); a continuation that leaves no position for one raises, naming
        the request."""
        room = self.llm.model.max_context - target_length
        if room < 1:
            raise ValueError(f"dlm: loglikelihood request {index}: its continuation of {target_length} tokens leaves no position of "
                             f"the model's context ({self.llm.model.max_context}) for its context")
        return prefix[-room:]

    @property
    def prefix_token_id(self) -> int:
        """The token an empty context is conditioned on, as lm-eval's HFLM takes it: the tokenizer's BOS
        (the token it puts in front of a text: Gemma 4's <bos>, a GGUF file's add_bos_token), else the
        end-of-text token."""
        front = self.llm.encode("", special=True)
        return int(front[0]) if front and front[0] not in self.llm.model.eos_ids else int(self.llm.model.eos_ids[0])

    def _encode(self, text: str) -> list:
        """A context's ids: a templated one (chat=True, --apply_chat_template) as its template wrote its
        special tokens, a plain one with the tokenizer's own (Gemma 4's <bos>, as lm-eval's HFLM adds it;
        a folder without a template writes a chat prompt as plain text, so it gets them too)."""
        return self.llm.encode(text, special=self.llm.model.adds_special_tokens(True) if self.chat or self.harness_templates else None)

    def _encode_pair(self, context: str, continuation: str):
        """The context's and the continuation's ids, as lm-eval splits them (TemplateLM._encode_pair,
        which LLaDA's eval_llada.py copies): the context's trailing whitespace moves to the start of the
        continuation, the context is encoded alone, and the continuation is what the whole text's ids
        hold after the context's. An empty context is the one token prefix_token_id (or the
        continuation's first token when it is that token), so that the first continuation token has a
        row to be predicted from: a shifted model predicts slot p from row p - 1, which an empty
        context would not have (row -1 wraps to the last row)."""
        if context == "":  # the continuation alone, without the tokenizer's special tokens (lm-eval's add_special_tokens=False)
            target = self.llm.encode(continuation, special=False)
            if target and target[0] == self.prefix_token_id:
                return target[:1], np.asarray(target[1:], dtype=np.int64)
            return [self.prefix_token_id], np.asarray(target, dtype=np.int64)
        spaces = len(context) - len(context.rstrip())
        if spaces:
            context, continuation = context[:-spaces], context[-spaces:] + continuation
        if context == "":  # all whitespace: lm-eval encodes it as an empty context
            return self._encode_pair("", continuation)
        whole = self._encode(context + continuation)
        prefix = self._encode(context)
        return prefix, np.asarray(whole[len(prefix):], dtype=np.int64)

    def loglikelihood_rolling(self, requests, disable_tqdm: bool = False) -> list:
        raise NotImplementedError("dlm: loglikelihood_rolling (perplexity tasks) is not estimated for diffusion models; "
                                  "use generate_until or loglikelihood (Monte Carlo) tasks")

    def _rows(self, canvas: np.ndarray, positions: np.ndarray) -> np.ndarray:
        """The logits rows that predict canvas `positions` (row p, or p - 1 for a shifted model; the
        canvas begins with at least one context token, _encode_pair, so p - 1 >= 0)."""
        rows = positions - 1 if self.llm.model.logits_shift else positions
        assert (rows >= 0).all(), "a shifted model predicts position 0 from no row: the context must not be empty"
        logits = self.llm.forward(canvas.tolist())
        return logits[rows]

    def _monte_carlo(self, prefix: np.ndarray, target: np.ndarray, rng: np.random.Generator) -> float:
        n, b = len(target), self.mc_batch
        if n == 0:
            return 0.0
        mask_id = self.llm.model.mask_id
        losses = []
        for _ in range(self.mc_num // b):
            k = int(rng.integers(1, n + 1))
            counts = np.round(np.linspace(float(k), k + (b - 1) * (n / b), b)).astype(np.int64)
            counts = ((counts - 1) % n) + 1
            total = 0.0
            for x in counts:
                masked = np.zeros(n, dtype=bool)
                masked[rng.permutation(n)[:x]] = True
                canvas = np.concatenate([prefix, np.where(masked, mask_id, target)])
                positions = len(prefix) + np.flatnonzero(masked)
                logp = _log_softmax_at(self._rows(canvas, positions), target[masked])
                total += -logp.sum() / (x / n)
            losses.append(total / b)
        return -float(np.mean(losses))

    def _greedy(self, prefix, target: np.ndarray) -> bool:
        if len(target) == 0:
            return True
        canvas = np.concatenate([np.asarray(prefix, dtype=np.int64), np.full(len(target), self.llm.model.mask_id)])
        rows = self._rows(canvas, len(prefix) + np.arange(len(target)))
        return bool((rows.argmax(axis=1) == target).all())


def main() -> None:
    """The harness's command line, with `--model dlm` registered."""
    from lm_eval.__main__ import cli_evaluate
    sys.exit(cli_evaluate())


if __name__ == "__main__":
    main()
