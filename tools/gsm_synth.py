#!/usr/bin/python3
"""gsm_synth — a deterministic generator of small grade-school-math word problems.

Each problem has one to three small operations told in one of eight story frames (fruit, money,
stickers, a jar, a bus, baking, a classroom, animals), each with two or three phrasings per
operation, start and question, and random names and items. Operations: + and - with an operand of
2 to 20, x as "a containers of b each" (a, b in 2..9) to open a problem or as doubling / "b times as
many" (b = 2 or 3) later; every intermediate result stays in [1, 99]. The answer is a short chain of
thought, one line per operation, ending in "#### <number>":

    question: "Tom has 3 apples. He buys 4 more. How many apples does he have now?"
    answer:   "3 + 4 = 7\\n#### 7"

Splits come from different seeds and never share a question: test is drawn first, validation
skips test's questions, and train (drawn on the fly by the trainers) skips both. test2, a second
test split added after every shipped model was trained and every design choice was made (seed 4004,
used for nothing else), skips test's, validation's and the trainers' whole train pool's questions
(the first TRAIN_POOL problems of seed 3003; train itself is unchanged by test2, so the shipped
models stay reproducible).

    /usr/bin/python3 tools/gsm_synth.py --write          # tools/data/{test,val,test2}.jsonl (500 each)
    /usr/bin/python3 tools/gsm_synth.py --check          # the committed splits share no question with train
    /usr/bin/python3 tools/gsm_synth.py --split train --n 5 --out -   # a peek at train problems

The model's prompt is the question text exactly; its completion is the answer, then EOS.
"""
from __future__ import annotations

import argparse
import json
import random
import sys
from pathlib import Path
from typing import Iterable, Iterator

DATA_DIR = Path(__file__).resolve().parent / "data"
SPLIT_SEEDS = {"test": 1001, "val": 2002, "train": 3003, "test2": 4004}
SPLIT_SIZES = {"test": 500, "val": 500, "test2": 500}
HELD_OUT = ("test", "val", "test2")  # the committed splits, in the order --write draws them
TRAIN_POOL = 200000  # the trainers' default --train-problems, used by every shipped model
MAX_VALUE = 99

NAMES = [("Tom", "m"), ("Sam", "m"), ("Ben", "m"), ("Max", "m"), ("Leo", "m"), ("Jack", "m"),
         ("Omar", "m"), ("Ravi", "m"), ("Mia", "f"), ("Ana", "f"), ("Lily", "f"), ("Zoe", "f"),
         ("Emma", "f"), ("Nora", "f"), ("Sara", "f"), ("Kim", "f")]
PRONOUNS = {"m": {"he": "he", "He": "He", "him": "him", "his": "his"},
            "f": {"he": "she", "He": "She", "him": "her", "his": "her"}}

# A frame is a story: its item nouns, how it starts, how each operation is told, and the questions.
# Placeholders: {N} owner's name, {F} a friend's name, {He}/{he}/{him}/{his} the owner's pronouns,
# {I} the item noun (plural), {C} the container noun, {a} the start value, {b} the operand.
# "start_add" / "start_mul" tell a start value and the first operation in one sentence.
FRAMES = [
    {
        "items": ["apples", "oranges", "pears", "plums", "lemons"], "containers": ["bags", "baskets", "boxes"],
        "start": ["{N} has {a} {I}.", "{N} picks {a} {I}.", "{N} had {a} {I} in the morning."],
        "start_add": ["{N} has {a} red {I} and {b} green {I}.", "{N} picks {a} {I} and then {b} more."],
        "start_mul": ["{N} has {a} {C} with {b} {I} in each.", "{N} fills {a} {C} with {b} {I} each."],
        "add": ["{He} buys {b} more.", "{F} gives {him} {b} {I}.", "{He} picks {b} more {I}."],
        "sub": ["{He} eats {b} of them.", "{He} gives {b} {I} to {F}.", "{He} sells {b} {I}."],
        "mul": ["Then {he} doubles {his} {I}.", "Then {he} gets {b} times as many {I}."],
        "question": ["How many {I} does {N} have now?", "How many {I} does {he} have?"],
    },
    {
        "items": ["dollars"], "containers": ["envelopes", "jars", "wallets"],
        "start": ["{N} has {a} dollars.", "{N} saves {a} dollars.", "{N} starts the week with {a} dollars."],
        "start_add": ["{N} has {a} dollars and earns {b} more.", "{N} saves {a} dollars in May and {b} dollars in June."],
        "start_mul": ["{N} has {a} {C} with {b} dollars in each.", "{N} earns {b} dollars a day for {a} days."],
        "add": ["{He} earns {b} dollars.", "{F} gives {him} {b} dollars.", "{He} finds {b} dollars."],
        "sub": ["{He} spends {b} dollars on lunch.", "{He} pays {F} {b} dollars.", "{He} buys a toy for {b} dollars."],
        "mul": ["Then {his} money doubles.", "Then {his} money grows to {b} times as much."],
        "question": ["How many dollars does {N} have now?", "How much money does {he} have, in dollars?"],
    },
    {
        "items": ["stickers", "cards", "stamps"], "containers": ["packs", "albums", "sheets"],
        "start": ["{N} has {a} {I}.", "{N} collects {a} {I}.", "{N} owns {a} {I}."],
        "start_add": ["{N} has {a} {I} and {F} gives {him} {b} more.", "{N} collects {a} {I} and then {b} more."],
        "start_mul": ["{N} buys {a} {C} of {I} with {b} in each.", "{N} has {a} {C} with {b} {I} each."],
        "add": ["{He} gets {b} {I} from {F}.", "{He} buys {b} more {I}.", "{He} wins {b} {I}."],
        "sub": ["{He} trades away {b} {I}.", "{He} gives {b} {I} to {F}.", "{He} loses {b} {I}."],
        "mul": ["Then {he} doubles {his} {I}.", "Then {he} has {b} times as many {I}."],
        "question": ["How many {I} does {N} have now?", "How many {I} does {he} own now?"],
    },
    {
        "items": ["marbles", "beads", "buttons"], "containers": ["jars", "cups", "bowls"],
        "start": ["There are {a} {I} in a jar.", "A jar holds {a} {I}.", "{N} puts {a} {I} in a jar."],
        "start_add": ["A jar has {a} blue {I} and {b} white {I}.", "There are {a} {I} in a jar and {N} adds {b} more."],
        "start_mul": ["There are {a} {C} with {b} {I} in each.", "{N} sets out {a} {C} holding {b} {I} each."],
        "add": ["{N} puts in {b} more {I}.", "{F} adds {b} {I} to the jar.", "{N} drops {b} more {I} in."],
        "sub": ["{N} takes out {b} {I}.", "{F} takes {b} {I} from the jar.", "{b} {I} fall out."],
        "mul": ["Then the number of {I} doubles.", "Then the jar gets {b} times as many {I}."],
        "question": ["How many {I} are there now?", "How many {I} are there in total now?"],
    },
    {
        "items": ["people"], "containers": ["rows", "groups"],
        "start": ["A bus has {a} people on it.", "There are {a} people on a bus.", "{a} people ride a bus."],
        "start_add": ["A bus has {a} people and {b} more get on.", "There are {a} people on a bus and {b} more climb on."],
        "start_mul": ["A bus has {a} {C} with {b} people in each.", "There are {a} {C} of {b} people each on a bus."],
        "add": ["At the next stop {b} people get on.", "Then {b} more people get on.", "{b} people climb on."],
        "sub": ["At the next stop {b} people get off.", "Then {b} people get off.", "{b} people step off."],
        "mul": ["Then the number of people doubles.", "Then {b} times as many people are on board."],
        "question": ["How many people are on the bus now?", "How many people ride the bus now?"],
    },
    {
        "items": ["cookies", "muffins", "cupcakes"], "containers": ["trays", "plates", "boxes"],
        "start": ["{N} bakes {a} {I}.", "{N} makes {a} {I}.", "{N} has {a} {I} on a table."],
        "start_add": ["{N} bakes {a} {I} and {F} bakes {b}.", "{N} makes {a} {I} and then {b} more."],
        "start_mul": ["{N} bakes {a} {C} of {I} with {b} on each.", "{N} fills {a} {C} with {b} {I} each."],
        "add": ["{He} bakes {b} more.", "{F} brings {b} {I}.", "{He} makes {b} more {I}."],
        "sub": ["{He} eats {b} {I}.", "{He} gives {b} {I} to {F}.", "{F} eats {b} of them."],
        "mul": ["Then {he} doubles the {I}.", "Then {he} ends up with {b} times as many {I}."],
        "question": ["How many {I} does {N} have now?", "How many {I} are there now?"],
    },
    {
        "items": ["pencils", "crayons", "pens"], "containers": ["boxes", "cases", "cups"],
        "start": ["A class has {a} {I}.", "{N} has {a} {I} in {his} desk.", "The teacher has {a} {I}."],
        "start_add": ["A class has {a} {I} and the teacher brings {b} more.", "{N} has {a} {I} and buys {b} more."],
        "start_mul": ["A class has {a} {C} with {b} {I} in each.", "The teacher buys {a} {C} of {b} {I}."],
        "add": ["The teacher brings {b} more.", "{N} buys {b} more {I}.", "{F} gives {b} {I} to the class."],
        "sub": ["{b} {I} break.", "{N} gives away {b} {I}.", "The class loses {b} {I}."],
        "mul": ["Then the number of {I} doubles.", "Then there are {b} times as many {I}."],
        "question": ["How many {I} are there now?", "How many {I} does the class have now?"],
    },
    {
        "items": ["birds", "ducks", "frogs"], "containers": ["trees", "ponds", "groups"],
        "start": ["There are {a} {I} in a park.", "{N} sees {a} {I}.", "{a} {I} sit by a pond."],
        "start_add": ["{N} sees {a} {I} and then {b} more.", "There are {a} {I} by a pond and {b} more come."],
        "start_mul": ["There are {a} {C} with {b} {I} each.", "{N} counts {a} {C} of {b} {I}."],
        "add": ["Then {b} more {I} come.", "{b} more {I} arrive.", "Later {b} {I} join them."],
        "sub": ["Then {b} {I} leave.", "{b} {I} go away.", "Later {b} of them fly off."],
        "mul": ["Then the number of {I} doubles.", "Then there are {b} times as many {I}."],
        "question": ["How many {I} are there now?", "How many {I} are there in total now?"],
    },
]

SYMBOL = {"add": "+", "sub": "-", "mul": "x"}


def _pick_names(rng: random.Random) -> tuple[str, dict, str]:
    name, gender = rng.choice(NAMES)
    friend = name
    while friend == name:
        friend = rng.choice(NAMES)[0]
    return name, PRONOUNS[gender], friend


def _apply(op: str, x: int, b: int) -> int:
    return x + b if op == "add" else x - b if op == "sub" else x * b


def _operand(rng: random.Random, op: str, x: int) -> int | None:
    """A small operand for `op` on the running value `x`, or None if none keeps x in [1, 99]."""
    if op == "add":
        hi = min(20, MAX_VALUE - x)
        return rng.randint(2, hi) if hi >= 2 else None
    if op == "sub":
        hi = min(20, x - 1)
        return rng.randint(2, hi) if hi >= 2 else None
    choices = [b for b in (2, 3) if x * b <= MAX_VALUE]
    return rng.choice(choices) if choices else None


def make_problem(rng: random.Random, n_ops: int | None = None) -> dict:
    """One problem: {"question", "answer", "final", "ops"}."""
    n_ops = n_ops or rng.randint(1, 3)
    frame = rng.choice(FRAMES)
    name, pro, friend = _pick_names(rng)
    fill = {"N": name, "F": friend, "I": rng.choice(frame["items"]), "C": rng.choice(frame["containers"]), **pro}

    def say(template: str, **nums: int) -> str:
        text = template.format(**fill, **nums)
        return text[0].upper() + text[1:]

    sentences, lines = [], []
    first = rng.choice(["add", "sub", "mul", "start"])
    if first == "mul":  # "a containers with b items each": the start and a multiplication in one sentence
        a, b = rng.randint(2, 9), rng.randint(2, 9)
        while a * b > MAX_VALUE:
            b = rng.randint(2, 9)
        sentences.append(say(rng.choice(frame["start_mul"]), a=a, b=b))
        x = a * b
        lines.append(f"{a} x {b} = {x}")
    elif first == "add" and rng.random() < 0.5:  # "a red and b green": the start and an addition
        a, b = rng.randint(2, 30), rng.randint(2, 20)
        sentences.append(say(rng.choice(frame["start_add"]), a=a, b=b))
        x = a + b
        lines.append(f"{a} + {b} = {x}")
    else:
        x = rng.randint(4, 40)
        sentences.append(say(rng.choice(frame["start"]), a=x))
    while len(lines) < n_ops:
        op = rng.choice(["add", "sub", "mul"] if lines else ["add", "sub"])
        b = _operand(rng, op, x)
        if b is None:
            continue
        template = rng.choice(frame[op])
        if op == "mul" and "{b}" not in template:
            b = 2  # "doubles"
            if x * 2 > MAX_VALUE:
                continue
        y = _apply(op, x, b)
        sentences.append(say(template, b=b))
        lines.append(f"{x} {SYMBOL[op]} {b} = {y}")
        x = y
    sentences.append(say(rng.choice(frame["question"])))
    answer = "\n".join(lines) + f"\n#### {x}"
    return {"question": " ".join(sentences), "answer": answer, "final": str(x)}


def stream(seed: int, exclude: Iterable[str] = ()) -> Iterator[dict]:
    """Problems from `seed`, each question once, none whose question is in `exclude`."""
    rng = random.Random(seed)
    seen = set(exclude)
    while True:
        p = make_problem(rng)
        if p["question"] in seen:
            continue
        seen.add(p["question"])
        yield p


def read_jsonl(path: Path) -> list[dict]:
    with open(path, encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def held_out_questions(data_dir: Path = DATA_DIR) -> set[str]:
    """The questions of the committed test and validation files (train must not contain them). Not
    test2's: it was drawn after the models were trained, and skips train's questions instead."""
    qs: set[str] = set()
    for split in ("test", "val"):
        path = data_dir / f"{split}.jsonl"
        if not path.is_file():
            raise FileNotFoundError(f"{path} is missing; run `/usr/bin/python3 tools/gsm_synth.py --write` first")
        qs.update(p["question"] for p in read_jsonl(path))
    return qs


def split(name: str, n: int, data_dir: Path = DATA_DIR) -> list[dict]:
    """n problems of split `name`, drawn with the split's seed and disjoint from earlier splits."""
    if name == "test":
        exclude: set[str] = set()
    elif name == "val":
        exclude = {p["question"] for p in split("test", SPLIT_SIZES["test"])}
    elif name == "train":
        exclude = held_out_questions(data_dir)
    elif name == "test2":
        exclude = held_out_questions(data_dir) | {p["question"] for p in split("train", TRAIN_POOL, data_dir)}
    else:
        raise ValueError(f"unknown split '{name}' (test, val, train or test2)")
    out = []
    for p in stream(SPLIT_SEEDS[name], exclude):
        out.append(p)
        if len(out) == n:
            return out
    return out


def check(data_dir: Path = DATA_DIR, train_n: int = TRAIN_POOL) -> list[str]:
    """Problems found with the committed splits: a file that differs from its generator, a question
    repeated in a split or shared by two splits (train: its first `train_n` problems). Empty if none."""
    splits = {name: read_jsonl(data_dir / f"{name}.jsonl") for name in HELD_OUT}
    splits["train"] = split("train", train_n, data_dir)
    found = []
    for name in HELD_OUT:
        if splits[name] != split(name, len(splits[name]), data_dir):
            found.append(f"{name}.jsonl differs from the generator (run gsm_synth.py --write)")
    qs = {name: {p["question"] for p in ps} for name, ps in splits.items()}
    for name, ps in splits.items():
        if len(qs[name]) != len(ps):
            found.append(f"{name}: {len(ps) - len(qs[name])} repeated question(s)")
    names = list(splits)
    for i, a in enumerate(names):
        for b in names[i + 1:]:
            if qs[a] & qs[b]:
                found.append(f"{a} and {b} share {len(qs[a] & qs[b])} question(s)")
    return found


def write_jsonl(problems: list[dict], out) -> None:
    for p in problems:
        out.write(json.dumps({"question": p["question"], "answer": p["answer"], "final": p["final"]}) + "\n")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--write", action="store_true", help="write tools/data/test.jsonl, val.jsonl and test2.jsonl")
    ap.add_argument("--check", action="store_true",
                    help=f"check that the committed splits match the generator and share no question with each other "
                         f"or with the first {TRAIN_POOL} train problems")
    ap.add_argument("--split", choices=["test", "val", "train", "test2"], help="print one split")
    ap.add_argument("--n", type=int, default=10, help="problems to print with --split")
    ap.add_argument("--out", default="-", help="output file for --split ('-' = stdout)")
    args = ap.parse_args(argv)
    if args.write:
        DATA_DIR.mkdir(parents=True, exist_ok=True)
        for name in HELD_OUT:
            path = DATA_DIR / f"{name}.jsonl"
            with open(path, "w", encoding="utf-8") as f:
                write_jsonl(split(name, SPLIT_SIZES[name]), f)
            print(f"wrote {path}")
        return 0
    if args.check:
        found = check()
        for f in found:
            print(f"gsm_synth.py --check: {f}", file=sys.stderr)
        if not found:
            print(f"{', '.join(f'{n} ({SPLIT_SIZES[n]}, seed {SPLIT_SEEDS[n]})' for n in HELD_OUT)} and the first "
                  f"{TRAIN_POOL} train problems (seed {SPLIT_SEEDS['train']}) share no question: ok")
        return 1 if found else 0
    if args.split:
        problems = split(args.split, args.n)
        if args.out == "-":
            write_jsonl(problems, sys.stdout)
        else:
            with open(args.out, "w", encoding="utf-8") as f:
                write_jsonl(problems, f)
        return 0
    ap.print_help()
    return 2


if __name__ == "__main__":
    sys.exit(main())
